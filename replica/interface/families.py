"""The branch vocabulary a declaration and a generated model share."""
from __future__ import annotations

#: the branch with nothing pinned, available in every model
FREE = "free"
#: families a branch can pin to zero: every family of the RS ansatz but the positive-definite
#: q and V (replica.symbolic.order_parameters.ORDER_FAMILIES)
PINNABLE = ("m", "theta")

"""The generated-model interface: what the symbolic side promises and the numeric side reads.

:class:`~replica.interface.generated_model.GeneratedModel` is a generated module read and checked
(typed metadata, the vectorised functions built from its kernels, the per-node leaves); the
array helpers its kernels call live beside it, with the bivariate normal CDF they need
(:mod:`replica.interface.bivariate`), and the vocabulary of branches both sides share
(:mod:`replica.interface.families`). A small package below both :mod:`replica.symbolic` and
:mod:`replica.numeric`: neither imports the other, both import this.
"""
from __future__ import annotations

from .generated_model import GeneratedModel, as_model

__all__ = ["GeneratedModel", "as_model"]

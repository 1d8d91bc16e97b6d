"""Small helpers shared by the phase modules: module lookup, argument checks, the branch pair."""
from __future__ import annotations

import math
from typing import Sequence

from ..interface.generated_model import GeneratedModel
from ..errors import ParameterError
from ..registry import load_module


def as_module(module: GeneratedModel | str) -> GeneratedModel:
    """A generated module from a module or a model name (:func:`replica.registry.load_module`)."""
    return load_module(module) if isinstance(module, str) else module


def check_positive(name: str, value: float) -> None:
    """``value`` must be a finite number > 0 (a one-line error naming ``name`` otherwise)."""
    if not (isinstance(value, (int, float)) and math.isfinite(value)) or value <= 0:
        raise ParameterError(name.replace("_", "-"), f"must be a finite number > 0, got {value}")


def check_range(alpha_min: float, alpha_max: float) -> None:
    """``0 < alpha_min < alpha_max``, both finite."""
    check_positive("alpha_min", alpha_min)
    check_positive("alpha_max", alpha_max)
    if alpha_max <= alpha_min:
        raise ParameterError("alpha-max", f"must be larger than alpha-min ({alpha_min}), got {alpha_max}")


def resolve_pair(module: GeneratedModel, pair: Sequence[str] | None = None) -> tuple[str, str]:
    """The ``(high, low)`` branches to compare: ``pair``, else the model's declared ``TRANSITION``.

    ``high`` is the branch that wins at large ``alpha`` (followed down from ``alpha_max``),
    ``low`` the one that wins at small ``alpha``.
    """
    if pair is None:
        pair = module.TRANSITION
        if pair is None:
            raise ParameterError("model", f"{module.MODEL} declares no transition (a pair of branches whose free "
                                          f"entropies cross); name two of {list(module.BRANCHES)} to compare")
    pair = tuple(pair)
    if len(pair) != 2 or pair[0] == pair[1]:
        raise ParameterError("between", f"need two different branches (high, low), got {pair}")
    for b in pair:
        if b not in module.BRANCHES:
            raise ParameterError("between", f"{module.MODEL} declares no {b} branch (it has {list(module.BRANCHES)})")
    return pair  # type: ignore[return-value]

"""A generated module's numeric parameters: defaults, user overrides, domains and constraints.

One function shared by the solver and the baselines, so that a parameter is checked the same
way wherever it enters (and a bad value is a one-line :class:`~replica.errors.ParameterError`
naming it).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..interface.generated_model import GeneratedModel
from .. import validation
from ..errors import ParameterError


def parameter_vector(module: GeneratedModel, overrides: Mapping[str, float] | None = None) -> np.ndarray:
    """The parameters of ``module`` in ``PARAMETERS`` order: its defaults with ``overrides``
    applied, checked against the declared constraints and domains."""
    mod = module
    p = dict(zip(mod.PARAMETERS, mod.DEFAULTS))
    p.update(validation.parameter_values(overrides or {}, mod.PARAMETERS, mod.MODEL))
    arr = np.array([p[k] for k in mod.PARAMETERS], dtype=float)
    vals = np.atleast_1d(mod.parameter_checks(arr))
    for (name, message, op), v in zip(mod.CONSTRAINTS, vals):
        ok = {"==": abs(v) <= 1e-9, ">=": v >= -1e-12, "<=": v <= 1e-12, ">": v > 0, "<": v < 0}[op]
        if not ok:
            raise ParameterError(name, message)
    for k, (lo, hi) in mod.DOMAINS.items():
        if (lo is not None and p[k] < lo) or (hi is not None and p[k] > hi):
            rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
            raise ParameterError(k, f"must be {rng}, got {p[k]}")
    arr = np.array([p[k] for k in mod.PARAMETERS], dtype=float)
    validation.token_scale(mod, arr)
    return arr

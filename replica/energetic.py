"""What an energetic average returns, and what an integrator must provide to compute one.

The solver needs, at a state ``x``, the energetic potential ``Psi_y = -E min_h F`` and its
gradient ``dPsi_y/dx = -E[dF/dx at h = argmin]`` (envelope theorem). An *integrator* computes
both (:class:`replica.integrators.QuadratureIntegrator`, the jump-aware
:class:`replica.preintegration.PreintegrationIntegrator`); both build on the two names here,
which is why they live in a module of their own.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import numpy as np


@dataclass
class EnergeticAverage:
    """``dPsi_y/dx`` (order-parameter order), ``Psi_y``, a warm-start state and prox diagnostics."""

    grad: np.ndarray
    psi_y: float
    state: Any
    n_disagree: int
    n_failed: int


class EnergeticIntegrator(Protocol):
    """What the solver needs of an integrator: the energetic average and its envelope gradient
    at a state, a companion for error estimates, and a description."""

    dim: int

    def average(self, module: ModuleType, x: np.ndarray, p: np.ndarray, warm: Any = None,
                multistart: bool = True, prox_tol: float = 1e-12) -> EnergeticAverage:
        """``Ψ_y`` and its gradient in the order parameters at state ``x``, parameters ``p``
        (``warm``: the previous minimisers)."""
        ...

    def companion(self) -> "EnergeticIntegrator":
        """A second, coarser integrator whose disagreement estimates this one's error."""
        ...

    def describe(self) -> str:
        """A one-line description (rule, order, nodes) for reports and cache keys."""
        ...

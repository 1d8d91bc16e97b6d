"""Energetic averages ``E_z[...]`` of the Moreau envelope, behind one small interface.

The solver needs, at a state ``x``, the energetic potential ``Psi_y = -E min_h F``
and its gradient ``dPsi_y/dx = -E[dF/dx at h = argmin]`` (envelope theorem). An
*integrator* computes both; :class:`QuadratureIntegrator` does it with a fixed
quadrature rule and the batched proximal solver. Other integrators (e.g. ones that
treat the discontinuities of ``argmin`` across quadrature cells) plug in by
implementing :meth:`average`, :meth:`companion` and :meth:`describe`.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from .prox import prox
from .quadrature import QuadratureRule


@dataclass
class EnergeticAverage:
    """``dPsi_y/dx`` (order-parameter order), ``Psi_y``, a warm-start state and prox diagnostics."""

    grad: np.ndarray
    psi_y: float
    state: Any
    n_disagree: int
    n_failed: int


class EnergeticIntegrator(Protocol):
    dim: int

    def average(self, module: ModuleType, x: np.ndarray, p: np.ndarray, warm: Any = None,
                multistart: bool = True, prox_tol: float = 1e-12) -> EnergeticAverage: ...

    def companion(self) -> "EnergeticIntegrator": ...

    def describe(self) -> str: ...


class QuadratureIntegrator:
    """Average over the nodes of one :class:`~replica.quadrature.QuadratureRule`."""

    def __init__(self, rule: QuadratureRule):
        self.rule = rule
        self.dim = rule.dim

    def average(self, module, x, p, warm=None, multistart=True, prox_tol=1e-12) -> EnergeticAverage:
        nodes = self.rule.nodes
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            res = prox(module, nodes, x, p, warm=warm, tol=prox_tol, multistart=multistart)
            G = module.bracket_parameter_gradient(res.h, nodes, x, p)
        return EnergeticAverage(-self.rule.expect(G), -float(self.rule.expect(res.value)), res.h,
                                res.n_disagree, res.n_failed)

    def companion(self) -> "QuadratureIntegrator":
        return QuadratureIntegrator(self.rule.companion())

    def describe(self) -> str:
        return self.rule.describe()

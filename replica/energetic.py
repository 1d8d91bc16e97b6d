"""What an energetic average returns, what an integrator must provide to compute one, and the
average over the nodes of one rule that the quadrature integrators share.

The solver needs, at a state ``x``, the energetic potential ``Psi_y = -E min_h F`` and its
gradient ``dPsi_y/dx = -E[dF/dx at h = argmin]`` (envelope theorem). An *integrator* computes
both (:class:`replica.integrators.QuadratureIntegrator`, the jump-aware
:class:`replica.preintegration.PreintegrationIntegrator`, the kink-aware
:class:`replica.kinks.KinkIntegrator`); they build on the names here, which is why they live in a
module of their own. With a teacher channel (module ``WEIGHTED``) every node's minimum is
multiplied by the label law ``W`` (and the gradient is that of ``W F``).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from .compiled import compiled, resolve_backend
from .prox import envelope_gradient, prox


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


def _weighted(module, values: np.ndarray, z: np.ndarray, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``W F_min`` with a teacher channel's label law ``W`` (module ``WEIGHTED``), else ``F_min``."""
    if not getattr(module, "WEIGHTED", False):
        return values
    return values * np.asarray(module.label_weight(z, x, p), dtype=float)


def average_on_nodes(module: ModuleType, nodes: np.ndarray, weights: np.ndarray, x: np.ndarray, p: np.ndarray,
                     warm: Any = None, multistart: bool = True, prox_tol: float = 1e-12, backend: str = "auto",
                     chunk: int = 4096, warm_starts: int = 1, n_starts: int | None = None) -> EnergeticAverage:
    """``Psi_y`` and its gradient as weighted sums over ``nodes`` ``(nz, N)``: the global prox at
    every node (compiled kernels, or numpy in chunks of ``chunk`` nodes; the exact piecewise prox for a
    piecewise bracket), the envelope gradient at the minimisers. ``warm``: previous minimisers
    ``(PROX_DIM, N)``; with ``multistart=False`` only they and ``warm_starts`` module starts are used
    (``n_starts``, compiled path: that many module starts instead, 0 for the warm start alone)."""
    N = nodes.shape[1]
    if warm is not None and np.shape(warm) != (module.PROX_DIM, N):
        warm = None
    if resolve_backend(module, backend) == "numba":
        return _average_compiled(module, nodes, weights, x, p, warm, multistart, prox_tol, warm_starts, n_starts)
    grad = np.zeros(len(module.ORDER_PARAMETERS))
    psi = 0.0
    h_all = np.empty((module.PROX_DIM, N))
    n_dis = n_fail = 0
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for a in range(0, N, max(chunk, 1)):
            sl = slice(a, min(a + chunk, N))
            z = nodes[:, sl]
            res = prox(module, z, x, p, warm=None if warm is None else warm[:, sl], tol=prox_tol,
                       multistart=multistart, n_starts=None if multistart else warm_starts)
            G = envelope_gradient(module, res, z, x, p)
            grad += G @ weights[sl]
            psi += float(_weighted(module, res.value, z, x, p) @ weights[sl])
            h_all[:, sl] = res.h
            n_dis += res.n_disagree
            n_fail += res.n_failed
    return EnergeticAverage(-grad, -psi, h_all, n_dis, n_fail)


def _average_compiled(module, nodes, weights, x, p, warm, multistart, prox_tol, warm_starts,
                      n_starts=None) -> EnergeticAverage:
    k = compiled(module)
    N, D = nodes.shape[1], module.PROX_DIM
    x = np.ascontiguousarray(x, dtype=float)
    p = np.ascontiguousarray(p, dtype=float)
    use_warm = warm is not None
    # Same starts as the numpy path: every start of the module (plus the warm one), or,
    # with multistart=False and a warm start, the warm start and warm_starts more.
    if n_starts is None:
        n_starts = module.N_STARTS if (multistart or not use_warm) else warm_starts
    w_arr = np.ascontiguousarray(warm, dtype=float) if use_warm else np.zeros((D, 1))
    h_out = np.empty((D, N))
    failed = np.zeros(N, dtype=np.bool_)
    grad = np.zeros(len(x))
    psi, n_dis, n_fail = k.node_prox_average(
        nodes, weights, w_arr, use_warm, n_starts, x, p, float(prox_tol), 50, 1e-6, h_out, failed, grad)
    if n_fail:
        # Robust numpy/scipy fallback (per-node L-BFGS) for the rare failed nodes.
        idx = np.flatnonzero(failed)
        z = nodes[:, idx]
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            res = prox(module, z, x, p, warm=warm[:, idx] if use_warm else None, tol=prox_tol,
                       multistart=True)
            G = envelope_gradient(module, res, z, x, p)
        grad += G @ weights[idx]
        psi += float(_weighted(module, res.value, z, x, p) @ weights[idx])
        h_out[:, idx] = res.h
        n_fail = res.n_failed
    return EnergeticAverage(-grad, -float(psi), h_out, int(n_dis), int(n_fail))

"""Energetic averages ``E_z[F, dF/dx]`` at the certified global minimiser.

Two schemes share the integrand of :mod:`benchmarks.certify.integrand` and the certified prox
of :mod:`benchmarks.certify.globalmin`:

* :class:`TensorGH` -- tensor Gauss-Hermite in ``z = (xi_1, xi_2, eta_1, eta_2)``. Simple, but
  the integrand jumps where the global minimiser switches basin (the Maxwell set), so the
  error decays only algebraically and erratically with the order.
* :class:`AdaptiveRule` -- the certified scheme (see its docstring): teacher fields outside
  (Gauss-Hermite), the prox centre's 2-D Gaussian inside, integrated adaptively along lines
  on which every switch of the global minimiser is located by bisection
  (:mod:`benchmarks.certify.inner`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import globalmin
from .integrand import NodeData
from .model import Params, targets
from .rules import hermite


@dataclass
class Average:
    mean: np.ndarray                 # E[F], E[dF/dq], E[dF/dV], E[dF/dm], E[dF/dtheta]
    eps_g: float
    prox_stats: dict = field(default_factory=dict)


def tensor_nodes(order: int, dim: int = 4) -> tuple[np.ndarray, np.ndarray]:
    x, w = hermite(order)
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    wg = np.meshgrid(*([w] * dim), indexing="ij")
    z = np.stack([g.ravel() for g in grids])
    wt = np.prod(np.stack([g.ravel() for g in wg]), axis=0)
    return z, wt


def eps_g_average(x, p: Params, order: int = 24) -> float:
    """``eps_g = E l(y, t)`` (no prox; smooth integrand: tensor Gauss-Hermite, spectral)."""
    z, w = tensor_nodes(order)
    return float(NodeData(z, x, p).test_loss() @ w)


def tie_averaged_values(nd: NodeData, r) -> np.ndarray:
    """Integrand values at the minimisers; at a node that sits on the Maxwell set (two minima
    tied within the certificate's tolerance, e.g. the exact ties on the symmetry planes
    ``xi_1 = xi_2, eta_1 = -eta_2`` that tensor rules hit), the mean over the tied pair -- the
    value a rule should give a jump it sits on, and the choice that keeps the average symmetric."""
    vals = nd.values(r.h1, r.h2, r.F)
    tie = (r.status == 1) & np.isfinite(r.other1)
    if tie.any():
        other = nd.values(np.where(tie, r.other1, r.h1), np.where(tie, r.other2, r.h2), r.F)
        vals = np.where(tie[None, :], 0.5 * (vals + other), vals)
    return vals


class TensorGH:
    """Tensor Gauss-Hermite of ``order`` per axis, certified global prox at every node."""

    def __init__(self, order: int, certify: bool = True, eps_order: int = 24):
        self.order = order
        self.z, self.w = tensor_nodes(order)
        self.certify = certify
        self.eps_order = eps_order
        self._warm = None

    def describe(self) -> str:
        return f"tensor GH {self.order}^4" + ("" if self.certify else " (uncertified multistart)")

    def average(self, x, p: Params) -> Average:
        nd = NodeData(self.z, x, p)
        r = globalmin.prox(nd.y1, nd.y2, nd.t1, nd.t2, nd.V, nd.sig2, warm=self._warm, certify=self.certify)
        if (r.status == 2).any():
            raise RuntimeError(f"prox certificate exhausted its budget at {(r.status == 2).sum()} nodes")
        self._warm = (r.h1, r.h2)
        vals = tie_averaged_values(nd, r)
        stats = dict(nodes=int(self.w.size), ties=int((r.status == 1).sum()), boxes_mean=float(r.boxes.mean()))
        return Average(vals @ self.w, eps_g_average(x, p, self.eps_order), stats)


def teacher_nodes(n: int, p: Params, x) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Gauss-Hermite teacher nodes ``w`` (2, T), folded by the symmetries of the state.

    ``(w_1, w_2) -> (-w_2, -w_1)`` (token swap with ``h -> -h``) when ``A_11 = A_22``, and
    ``w -> -w`` when ``m = 0`` or ``theta = 0`` (then the ``dF/dm`` resp. ``dF/dtheta``
    average vanishes by symmetry and is set to 0). Returns representatives, summed weights,
    the mask of components forced to zero, and a description."""
    q, V, m, th = (float(v) for v in x)
    xw, ww = hermite(n)
    idx = np.arange(n)
    I1, I2 = (a.ravel() for a in np.meshgrid(idx, idx, indexing="ij"))
    W = np.outer(ww, ww).ravel()
    swap = abs(p.a11 - p.a22) < 1e-15
    neg = m == 0.0 or th == 0.0
    rep = {}
    for i1, i2, w in zip(I1, I2, W):
        orbit = {(i1, i2)}
        changed = True
        while changed:
            changed = False
            for a, b in list(orbit):
                imgs = []
                if swap:
                    imgs.append((n - 1 - b, n - 1 - a))
                if neg:
                    imgs.append((n - 1 - a, n - 1 - b))
                for im in imgs:
                    if im not in orbit:
                        orbit.add(im)
                        changed = True
        key = min(orbit)
        rep[key] = rep.get(key, 0.0) + w
    keys = sorted(rep)
    wt = np.array([xw[[k[0] for k in keys]], xw[[k[1] for k in keys]]])
    weights = np.array([rep[k] for k in keys])
    zero = np.zeros(5, dtype=bool)
    if neg and m == 0.0:
        zero[3] = True
    if neg and th == 0.0:
        zero[4] = True
    return wt, weights, zero, dict(teacher_nodes=int(n * n), folded=len(keys))


class AdaptiveRule:
    """The certified scheme: Gauss-Hermite in the teacher fields, adaptive located-switch
    integration over the prox centre's plane at each teacher node (:mod:`benchmarks.certify.inner`).

    Refinement knobs for the error bar: ``n_teacher`` (outer rule), ``rtol`` (adaptive
    tolerance of both inner levels, relative to ``E|f|`` per component), ``K`` (switch-detection
    grid), ``cert`` (0: structured starts at grid/location points; 1: certified there; 2:
    certified at every node).
    """

    def __init__(self, n_teacher: int = 12, rtol: float = 1e-7, K: int = 31, cert: int = 0, eps_order: int = 24):
        self.n_teacher, self.rtol, self.K, self.cert, self.eps_order = n_teacher, rtol, K, cert, eps_order
        self.ugrid = np.linspace(-7.5, 7.5, K)
        self._scale = None

    def describe(self) -> str:
        return f"adaptive(teacher GH {self.n_teacher}^2, rtol {self.rtol:g}, detect {self.K}, cert {self.cert})"

    def scales(self, x, p: Params) -> np.ndarray:
        """``E|f_c|`` per component from a coarse tensor rule: the tolerance scale."""
        z, w = tensor_nodes(6)
        nd = NodeData(z, x, p)
        r = globalmin.prox(nd.y1, nd.y2, nd.t1, nd.t2, nd.V, nd.sig2, certify=False)
        return np.abs(nd.values(r.h1, r.h2, r.F)) @ w

    def contexts(self, x, p: Params):
        from .inner import NCTX, C_T1, C_T2, C_G11, C_G12, C_G21, C_G22, C_MU1, C_MU2, C_TAU, C_E1, C_E2, \
            C_F1, C_F2, C_A, C_B, C_W1, C_W2, C_Q, C_V, C_M, C_TH, C_SIG2, C_S
        from .model import target_gradients
        q, V, m, th = (float(v) for v in x)
        rho = p.rho
        wt, weights, zero, info = teacher_nodes(self.n_teacher, p, x)
        hs1, hs2 = np.sqrt(rho) * wt[0], np.sqrt(rho) * wt[1]
        t1, t2 = targets(hs1, hs2, p)
        g11, g12, g21, g22 = target_gradients(hs1, hs2, p)
        zero_ = np.zeros_like(t1)
        r0 = globalmin.prox(zero_, zero_, t1, t2, V, p.sig2)
        nrm = np.hypot(r0.h1, r0.h2)
        e1 = np.where(nrm > 1e-9, r0.h1 / np.maximum(nrm, 1e-300), np.sqrt(0.5))
        e2 = np.where(nrm > 1e-9, r0.h2 / np.maximum(nrm, 1e-300), -np.sqrt(0.5))
        c = th / np.sqrt(q)
        s = np.sqrt(max(rho - th * th / q, 0.0))
        ctx = np.zeros((t1.size, NCTX))
        ctx[:, C_T1], ctx[:, C_T2] = t1, t2
        ctx[:, C_G11], ctx[:, C_G12], ctx[:, C_G21], ctx[:, C_G22] = g11, g12, g21, g22
        ctx[:, C_MU1], ctx[:, C_MU2] = m + th / rho * hs1, -m + th / rho * hs2
        ctx[:, C_TAU] = np.sqrt(max(q - th * th / rho, 0.0))
        ctx[:, C_E1], ctx[:, C_E2], ctx[:, C_F1], ctx[:, C_F2] = e1, e2, -e2, e1
        ctx[:, C_A], ctx[:, C_B] = c / np.sqrt(rho), s / np.sqrt(rho)
        ctx[:, C_W1], ctx[:, C_W2] = wt[0], wt[1]
        ctx[:, C_Q], ctx[:, C_V], ctx[:, C_M], ctx[:, C_TH] = q, V, m, th
        ctx[:, C_SIG2], ctx[:, C_S] = p.sig2, s
        return ctx, weights, zero, info

    def average(self, x, p: Params) -> Average:
        from .inner import teacher_integral
        scale = self.scales(x, p)
        atol = self.rtol * np.maximum(scale, 1e-300)
        ctx, weights, zero, info = self.contexts(x, p)
        total = np.zeros(5)
        errs = np.zeros(5)
        stats = np.zeros(6)
        out = np.empty(5)
        err = np.empty(5)
        for k in range(ctx.shape[0]):
            ok = teacher_integral(ctx[k], self.ugrid, self.cert, atol, 0.3 * atol, out, err, stats)
            if not ok:
                raise RuntimeError(f"inner integral failed at teacher node {k} (switch location or prox budget)")
            total += weights[k] * out
            errs += weights[k] * err
        total[zero] = 0.0
        errs[zero] = 0.0
        info.update(switches=int(stats[0]), nodes=int(stats[1]), grid_prox=int(stats[2]),
                    unresolved_u=int(stats[4]), unresolved_v=int(stats[5]), adaptive_error=errs.tolist())
        return Average(total, eps_g_average(x, p, self.eps_order), info)

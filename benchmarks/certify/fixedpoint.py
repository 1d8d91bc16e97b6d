"""Newton on the reduced saddle-point equations, observables, and error bars by refinement.

The map (THEORY §4-5): ``x -> dPsi_y/dx = -E[dF/dx] -> xhat -> x_new`` (closed-form entropic
side). Newton runs on ``G(x) = x_new(x) - x`` over the free entries of the branch
(``semantic``: ``m = 0``; ``positional``: ``theta = 0``; ``agnostic``: both), with a
central-difference Jacobian and a backtracking line search on ``|G|``. Because every
integrator of :mod:`benchmarks.certify.energetic` is a fixed rule (nodes do not move with
``x``) and its prox is certified, ``G`` is a smooth function of ``x`` up to the (located)
switches, and Newton converges quadratically until ``|G| / |x|`` reaches the round-off of
the averages (~1e-11).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .model import Params, admissible, conjugates, entropic, psi_t, psi_w

NAMES = ("q", "V", "m", "theta")
PINNED = {"semantic": (2,), "positional": (3,), "agnostic": (2, 3), "free": ()}


class NotConverged(RuntimeError):
    pass


@dataclass
class Solution:
    branch: str
    alpha: float
    x: np.ndarray
    xhat: np.ndarray
    phi: float
    psi_y: float
    eps_g: float
    residual: float
    iterations: int
    seconds: float
    integrator: str
    prox: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        out = dict(zip(NAMES, (float(v) for v in self.x)))
        out.update(zip(("qhat", "Vhat", "mhat", "thetahat"), (float(v) for v in self.xhat)))
        out.update(phi=self.phi, psi_y=self.psi_y, eps_g=self.eps_g, train_loss=-self.phi,
                   residual=self.residual, iterations=self.iterations, alpha=self.alpha,
                   branch=self.branch, integrator=self.integrator, seconds=self.seconds, **self.prox)
        return out


def free_mask(branch: str) -> np.ndarray:
    mask = np.ones(4, dtype=bool)
    mask[list(PINNED[branch])] = False
    return mask


def state_map(x, alpha, p: Params, integrator):
    """``x_new``, ``xhat``, ``Psi_y`` and the raw averages at ``x``."""
    avg = integrator.average(np.asarray(x, float), p)
    dpsi = -avg.mean[1:]
    xhat = conjugates(dpsi, alpha)
    return entropic(xhat, p), xhat, -avg.mean[0], avg


def solve(alpha: float, x0, branch: str, p: Params, integrator, tol: float = 1e-10, max_iter: int = 40,
          fd_step: float = 1e-5, verbose: bool = False) -> Solution:
    """Newton from ``x0`` to ``|G| <= tol |x|`` on the free entries of ``branch``."""
    t0 = time.perf_counter()
    free = free_mask(branch)
    x = np.array(x0, dtype=float)
    x[~free] = 0.0
    if not admissible(x, p):
        raise NotConverged(f"inadmissible start {x}")

    def G(xx):
        xn, xh, py, avg = state_map(xx, alpha, p, integrator)
        xn[~free] = 0.0
        return (xn - xx)[free], (xn, xh, py, avg)

    g, extra = G(x)
    r = np.linalg.norm(g) / np.linalg.norm(x[free])
    it = 0
    idx = np.flatnonzero(free)
    while r > tol:
        it += 1
        if it > max_iter:
            raise NotConverged(f"alpha={alpha} branch={branch}: residual {r:.2e} after {max_iter} Newton steps")
        J = np.empty((idx.size, idx.size))
        for k, j in enumerate(idx):
            h = fd_step * max(abs(x[j]), 1e-3)
            xp, xm = x.copy(), x.copy()
            xp[j] += h
            xm[j] -= h
            J[:, k] = (G(xp)[0] - G(xm)[0]) / (2 * h)
        try:
            step = -np.linalg.solve(J, g)
        except np.linalg.LinAlgError as exc:
            raise NotConverged(f"singular Jacobian at {x}") from exc
        lam = 1.0
        for _ in range(30):
            xt = x.copy()
            xt[idx] += lam * step
            if admissible(xt, p):
                gt, et = G(xt)
                rt = np.linalg.norm(gt) / np.linalg.norm(xt[free])
                if rt < r or rt < tol:
                    break
            lam *= 0.5
        else:
            if r < 1e-8:
                break       # stagnation at the round-off of the averages: converged
            raise NotConverged(f"alpha={alpha} branch={branch}: line search failed at residual {r:.2e}")
        x, g, extra, r = xt, gt, et, rt
        if verbose:
            print(f"  newton {it}: residual {r:.3e}  x={x}  step {lam}")
    xn, xh, py, avg = extra
    phi = psi_t(x, xh) + psi_w(xh, p) + alpha * py
    return Solution(branch, float(alpha), x, xh, float(phi), float(py), float(avg.eps_g), float(r), it,
                    time.perf_counter() - t0, integrator.describe(), avg.prox_stats)


def jacobian(alpha, x, branch, p: Params, integrator, fd_step: float = 1e-5) -> np.ndarray:
    """Central-difference Jacobian of ``G(x) = x_new(x) - x`` on the free entries."""
    free = free_mask(branch)
    idx = np.flatnonzero(free)
    J = np.empty((idx.size, idx.size))
    for k, j in enumerate(idx):
        h = fd_step * max(abs(x[j]), 1e-3)
        cols = []
        for sgn in (1, -1):
            xx = np.array(x, float)
            xx[j] += sgn * h
            xn = state_map(xx, alpha, p, integrator)[0]
            cols.append((xn - xx)[free])
        J[:, k] = (cols[0] - cols[1]) / (2 * h)
    return J


def solve_refined(alpha: float, x0, branch: str, p: Params, fine, coarse, tol: float = 1e-9,
                  max_fine: int = 12, verbose: bool = False) -> Solution:
    """Fixed point of the ``fine`` rule: Newton on the ``coarse`` rule first, then quasi-Newton
    steps on the fine residual with the coarse Jacobian, improved by Broyden's (good) update
    from each fine step. The fine rule is evaluated 3-6 times instead of ~25 for a full Newton."""
    t0 = time.perf_counter()
    xc = solve(alpha, x0, branch, p, coarse, tol=max(tol, 1e-10)).x
    free = free_mask(branch)
    J = jacobian(alpha, xc, branch, p, coarse)
    x = xc.copy()
    it = 0
    g_old = None
    while True:
        xn, xh, py, avg = state_map(x, alpha, p, fine)
        xn[~free] = 0.0
        g = (xn - x)[free]
        r = np.linalg.norm(g) / np.linalg.norm(x[free])
        if verbose:
            print(f"  fine {it}: residual {r:.3e} x={x}")
        if r <= tol:
            break
        if g_old is not None:
            s = step
            yv = g - g_old
            J = J + np.outer(yv - J @ s, s) / (s @ s)
        it += 1
        if it > max_fine:
            raise NotConverged(f"alpha={alpha} branch={branch}: fine residual {r:.2e} after {max_fine} steps")
        step = -np.linalg.solve(J, g)
        xt = x.copy()
        xt[free] += step
        lam = 1.0
        while not admissible(xt, p) and lam > 1e-3:
            lam *= 0.5
            step *= 0.5
            xt = x.copy()
            xt[free] += step
        g_old = g
        x = xt
    phi = psi_t(x, xh) + psi_w(xh, p) + alpha * py
    return Solution(branch, float(alpha), x, xh, float(phi), float(py), float(avg.eps_g), float(r), it,
                    time.perf_counter() - t0, fine.describe(), avg.prox_stats)

"""Newton on the reduced saddle-point equations, observables, and error bars by refinement.

The map (docs/explanation/theory.md §4–6): ``x -> dPsi_y/dx = -E[dF/dx] -> xhat -> x_new`` (closed-form entropic
side). Newton runs on ``G(x) = x_new(x) - x`` over the free entries of the branch
(``semantic``: ``m = 0``; ``positional``: ``theta = 0``; ``agnostic``: both), with a
central-difference Jacobian and a backtracking line search on ``|G|``. Because every
integrator of :mod:`benchmarks.certify.energetic` is a fixed rule (nodes do not move with
``x``) and its prox is certified, ``G`` is a smooth function of ``x`` up to the (located)
switches, and Newton converges quadratically until ``|G| / |x|`` reaches the round-off of
the averages (~1e-11).
"""
from __future__ import annotations

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
                  max_fine: int = 12, verbose: bool = False, coarse_solve: bool = True) -> Solution:
    """Fixed point of the ``fine`` rule: Newton on the ``coarse`` rule first (skipped with
    ``coarse_solve=False``, when ``x0`` is already a fixed point of a nearby rule), then
    quasi-Newton steps on the fine residual with the coarse Jacobian, improved by Broyden's
    (good) update from each fine step. The fine rule is evaluated 2-6 times instead of ~25."""
    t0 = time.perf_counter()
    xc = solve(alpha, x0, branch, p, coarse, tol=max(tol, 1e-10)).x if coarse_solve else np.array(x0, float)
    free = free_mask(branch)
    xc[~free] = 0.0
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


def residual_function(branch: str, p: Params, integrator):
    """``F(x_free, alpha) = (x_new - x)_free``: the map whose zeros continuation follows."""
    free = free_mask(branch)

    def F(xf, alpha):
        x = np.zeros(4)
        x[free] = xf
        if not admissible(x, p):
            return np.full(free.sum(), 1e3)
        xn = state_map(x, alpha, p, integrator)[0]
        return (xn - x)[free]

    return F


def evaluate(x, alpha: float, branch: str, p: Params, integrator) -> Solution:
    """Observables at a given state (no iteration): ``Phi``, ``eps_g`` and the residual."""
    t0 = time.perf_counter()
    free = free_mask(branch)
    x = np.array(x, float)
    x[~free] = 0.0
    xn, xh, py, avg = state_map(x, alpha, p, integrator)
    r = np.linalg.norm((xn - x)[free]) / np.linalg.norm(x[free])
    phi = psi_t(x, xh) + psi_w(xh, p) + alpha * py
    return Solution(branch, float(alpha), x, xh, float(phi), float(py), float(avg.eps_g), float(r), 0,
                    time.perf_counter() - t0, integrator.describe(), avg.prox_stats)


def solve_at_theta(theta: float, u0, p: Params, fine, coarse, tol: float = 1e-9, max_fine: int = 12,
                   verbose: bool = False) -> Solution:
    """The semantic branch parametrised by ``theta``: solve for ``(q, V, alpha)`` at fixed
    ``theta`` (``m = 0``). ``theta`` is monotone along the branch through its fold in ``alpha``,
    so this parametrisation has no singularity there; the fold is the minimum of ``alpha(theta)``.

    ``alpha`` enters the map only through ``xhat = alpha * c(dPsi_y/dx)``, so one energetic
    average at ``(q, V, theta)`` serves every ``alpha``: Newton on the coarse rule (Jacobian
    columns in ``q``, ``V`` by central differences, in ``alpha`` for free), then quasi-Newton
    steps on the fine residual with Broyden updates (as :func:`solve_refined`)."""
    t0 = time.perf_counter()

    def residual(u, integ, cache):
        q, V, a = u
        key = (q, V)
        if key not in cache:
            x = np.array([q, V, 0.0, theta])
            if not admissible(x, p):
                return None, None
            cache[key] = integ.average(x, p)
        avg = cache[key]
        xh = conjugates(-avg.mean[1:], a)
        xn = entropic(xh, p)
        return np.array([xn[0] - q, xn[1] - V, xn[3] - theta]), (xh, avg)

    def jac(u, integ, cache):
        J = np.empty((3, 3))
        for k in range(3):
            h = 1e-5 * max(abs(u[k]), 1e-3)
            up, um = u.copy(), u.copy()
            up[k] += h
            um[k] -= h
            J[:, k] = (residual(up, integ, cache)[0] - residual(um, integ, cache)[0]) / (2 * h)
        return J

    u = np.array(u0, dtype=float)
    cache: dict = {}
    for it in range(40):                    # coarse Newton
        g, _ = residual(u, coarse, cache)
        if np.linalg.norm(g / np.array([u[0], u[1], theta])) < max(tol, 1e-10):
            break
        J = jac(u, coarse, cache)
        step = -np.linalg.solve(J, g)
        lam = 1.0
        while lam > 1e-3:
            ut = u + lam * step
            gt, _ = residual(ut, coarse, cache)
            if gt is not None and np.linalg.norm(gt) < np.linalg.norm(g):
                break
            lam *= 0.5
        u = ut
    else:
        raise NotConverged(f"theta={theta}: coarse Newton did not converge")
    J = jac(u, coarse, cache)
    fcache: dict = {}
    g_old = None
    it = 0
    while True:
        g, extra = residual(u, fine, fcache)
        r = np.linalg.norm(g / np.array([u[0], u[1], theta]))
        if verbose:
            print(f"  fine {it}: residual {r:.3e} u={u}")
        if r <= tol:
            break
        if g_old is not None:
            J = J + np.outer((g - g_old) - J @ step, step) / (step @ step)
        it += 1
        if it > max_fine:
            raise NotConverged(f"theta={theta}: fine residual {r:.2e} after {max_fine} steps")
        step = -np.linalg.solve(J, g)
        g_old = g
        u = u + step
    xh, avg = extra
    q, V, a = u
    x = np.array([q, V, 0.0, theta])
    py = -avg.mean[0]
    phi = psi_t(x, xh) + psi_w(xh, p) + a * py
    return Solution("semantic", float(a), x, xh, float(phi), float(py), float(avg.eps_g), float(r), it,
                    time.perf_counter() - t0, fine.describe(), avg.prox_stats)

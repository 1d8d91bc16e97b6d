"""Batched proximal solver for the non-convex inner minimum ``min_h F(h; z)``.

All quadrature nodes and all starting points are solved at once with a damped
(modified) Newton method: where the Hessian is not positive definite its
eigenvalues are flipped and floored, and an Armijo backtracking line search keeps
every step a descent step. No Python loop runs over nodes; the loops below run over
Newton iterations and line-search halvings, on the still-active subset only.

The lowest bracket over the starts is kept (the global minimum the free entropy
needs, docs/explanation/theory.md §3). Nodes where the starts reach different minima, and nodes where
Newton did not converge, are counted; the latter get a robust fallback (scipy's
L-BFGS per node), which should be rare.

A piecewise bracket (a non-smooth loss, module ``PIECEWISE``, :mod:`replica.symbolic.losses`) is not
minimised by Newton: :func:`piecewise_prox` finds its global minimum exactly, over the
stationary points of every branch inside its interval and the breakpoints themselves
(:func:`prox` dispatches to it). :func:`envelope_gradient` is the envelope-theorem gradient at the
minimiser for both kinds (on a moving breakpoint: the total derivative along it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ..interface.generated_model import GeneratedModel
from .kernels import direction_1x1, direction_2x2, min_eigen_2x2


@dataclass
class ProxResult:
    """Minimisers ``h`` ``(D, N)``, minimum values ``F`` ``(N,)`` and diagnostics."""

    h: np.ndarray
    value: np.ndarray
    n_disagree: int
    n_failed: int
    n_fallback: int
    iterations: int


def newton_direction(g: np.ndarray, H: np.ndarray, floor: float = 1e-8) -> np.ndarray:
    """``-|H|^{-1} g`` with the eigenvalues of ``H`` replaced by ``max(|lambda|, floor)``.

    ``g`` is ``(D, M)`` and ``H`` is ``(D*D, M)`` (row-major blocks), as the generated
    ``bracket_newton`` returns them. ``D = 1, 2`` use closed forms (the common cases), the compiled
    kernels' own functions run on arrays (:func:`replica.numeric.kernels.direction_2x2`).
    """
    D = g.shape[0]
    if D == 1:
        return direction_1x1(H[0], g, floor)
    if D == 2:
        return np.stack(direction_2x2(H[0], 0.5 * (H[1] + H[2]), H[3], g[0], g[1], floor))
    Hm = H.T.reshape(-1, D, D)
    Hm = 0.5 * (Hm + Hm.transpose(0, 2, 1))
    lam, U = np.linalg.eigh(Hm)
    lam = np.maximum(np.abs(lam), floor)
    coef = np.einsum("mji,jm->mi", U, g) / lam
    return -np.einsum("mij,mj->im", U, coef)


#: Newton iterations per start of the inner minimisation, and the distance above which two starts'
#: minimisers count as different: the numpy path's defaults and what every compiled call passes
#: (replica.numeric.kernels), so that both backends run the same algorithm
NEWTON_MAX_ITER = 50
AGREE_TOL = 1e-6


def newton_minimize(module: GeneratedModel, h0: np.ndarray, z: np.ndarray, x: np.ndarray, p: np.ndarray,
                    tol: float = 1e-12, max_iter: int = NEWTON_MAX_ITER, step_tol: float = 1e-8
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Damped Newton from ``h0`` ``(D, M)`` at nodes ``z`` ``(nz, M)``.

    Returns ``(h, F, converged, iterations)``. A node has converged when
    ``|dF/dh|_inf < tol`` or its (modified) Newton step is below ``step_tol``.
    """
    h = np.array(h0, dtype=float, copy=True)
    M = h.shape[1]
    F = np.full(M, np.inf)
    converged = np.zeros(M, dtype=bool)
    active = np.arange(M)
    it = 0
    for it in range(1, max_iter + 1):
        ha, za = h[:, active], z[:, active]
        Fa, g, H = module.bracket_newton(ha, za, x, p)
        F[active] = Fa
        gmax = np.max(np.abs(g), axis=0)
        done = (gmax < tol) | ~np.isfinite(gmax)
        conv = done & np.isfinite(gmax)
        if conv.any():
            # converged: one more (unevaluated) Newton step where it is tiny leaves an error ~ step^2
            # instead of ~ |g| / H, a bias every rule would share (kernels.node_newton does the same)
            dc = newton_direction(g[:, conv], H[:, conv])
            ok = np.all(np.isfinite(dc), axis=0) & (np.max(np.abs(dc), axis=0)
                                                    <= step_tol * (1.0 + np.max(np.abs(ha[:, conv]), axis=0)))
            h[:, active[conv][ok]] = ha[:, conv][:, ok] + dc[:, ok]
        converged[active[conv]] = True
        keep = ~done
        if not keep.any():
            break
        active, g, H, Fa, ha, za = active[keep], g[:, keep], H[:, keep], Fa[keep], ha[:, keep], za[:, keep]
        gmax = gmax[keep]
        d = newton_direction(g, H)
        # A Newton step below step_tol leaves an error ~ step^2: converged (the gradient
        # itself can stall at ~1e-10 from round-off in the exponentials).
        tiny = np.max(np.abs(d), axis=0) <= step_tol * (1.0 + np.max(np.abs(ha), axis=0))
        # Take those tiny steps (without a new evaluation): the error left is ~ step^2, where
        # stopping at ha would leave ~ step, i.e. 1e-8 noise in the envelope gradient.
        h[:, active[tiny]] = ha[:, tiny] + d[:, tiny]
        slope = np.sum(g * d, axis=0)
        # A step that can lower F by less than F's round-off resolves (|g| ~ 1e-8): Armijo on F would
        # stop by chance and leave |g| there (noise ~1e-11 in the averages). Judge it by the gradient:
        # the full step is taken while it shrinks the gradient, else the node has converged.
        flat = ~tiny & (-slope <= 1e-12 * (1.0 + np.abs(Fa)))
        flat_stop = np.zeros(active.size, dtype=bool)
        if flat.any():
            fi = np.flatnonzero(flat)
            trial = ha[:, fi] + d[:, fi]
            Ft, gt, _ = module.bracket_newton(trial, za[:, fi], x, p)
            better = np.isfinite(Ft) & (np.max(np.abs(np.asarray(gt)), axis=0) < gmax[fi])
            h[:, active[fi[better]]] = trial[:, better]
            F[active[fi[better]]] = np.asarray(Ft)[better]
            flat_stop[fi[~better]] = True
        idx, h_new, F_new, pending = line_search(module, ha, za, d, Fa, slope, x, p,
                                                 np.flatnonzero(~tiny & ~flat), halvings=30)
        h[:, active[idx]] = h_new
        F[active[idx]] = F_new
        # No decrease even at step 2^-30, or a decrease at round-off level: the node sits
        # at a minimum up to round-off.
        moving = np.ones(active.size, dtype=bool)
        moving[pending] = False
        moving[tiny] = False
        moving &= flat | ((Fa - F[active]) > 1e-15 * (1.0 + np.abs(Fa)))
        moving &= ~flat_stop
        converged[active[~moving]] = True
        active = active[moving]
        if active.size == 0:
            break
    return h, F, converged, it


def line_search(module: GeneratedModel, h: np.ndarray, z: np.ndarray, d: np.ndarray, F: np.ndarray,
                slope: np.ndarray, x: np.ndarray, p: np.ndarray, pending: np.ndarray, halvings: int,
                stop_ahead: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The line search of every descent here (one implementation, batched; the compiled kernels'
    is :func:`replica.numeric.kernels.node_armijo`): from the points ``h`` ``(D, M)`` at nodes ``z``
    along ``d``, for the columns ``pending``, steps ``t = 1, 1/2, ...`` (at most ``halvings`` tries)
    until ``F(h + t d) <= F + 1e-4 t slope`` (Armijo) and, where ``stop_ahead`` (a boolean per column)
    is true, the directional derivative at the trial point is ``<= 0`` (a capped step stops short of
    the first minimum along its ray). Returns ``(accepted columns, their new points (D, k), their
    values (k,), the columns without an accepted step)``."""
    t = np.ones(h.shape[1])
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for _ in range(halvings):
        if pending.size == 0:
            break
        trial = h[:, pending] + t[pending] * d[:, pending]
        if stop_ahead is None:
            Ft = module.bracket(trial, z[:, pending], x, p)
            ok = np.isfinite(Ft) & (Ft <= F[pending] + 1e-4 * t[pending] * slope[pending])
        else:
            Ft, gt, _ = module.bracket_newton(trial, z[:, pending], x, p)
            ok = np.isfinite(Ft) & (Ft <= F[pending] + 1e-4 * t[pending] * slope[pending])
            ok &= ~stop_ahead[pending] | (np.sum(gt * d[:, pending], axis=0) <= 0)
        found.append((pending[ok], trial[:, ok], np.asarray(Ft)[ok]))
        pending = pending[~ok]
        t[pending] *= 0.5
    if not found:
        return pending[:0], h[:, :0], F[:0], pending
    return (np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found], axis=1),
            np.concatenate([f[2] for f in found]), pending)


def prox(module: GeneratedModel, z: np.ndarray, x: np.ndarray, p: np.ndarray,
         warm: np.ndarray | None = None, tol: float = 1e-12, max_iter: int = NEWTON_MAX_ITER,
         agree_tol: float = AGREE_TOL, multistart: bool = True, n_starts: int | None = None) -> ProxResult:
    """Global minimum of the bracket at every node, over the module's starts (and ``warm``).

    ``z`` is ``(nz, N)``; ``warm`` an optional ``(D, N)`` previous solution used as an
    extra start (it makes consecutive fixed-point iterations cheap). With
    ``multistart=False`` and a ``warm`` start, only the warm start and ``h = omega``
    are used. ``n_starts`` (with a ``warm`` start) overrides this: the warm start and
    the first ``n_starts`` module starts (0: the warm start alone). A piecewise bracket
    (module ``PIECEWISE``) goes to :func:`piecewise_prox`, which needs no start.
    """
    if module.PIECEWISE:
        return piecewise_prox(module, z, x, p)
    D = module.PROX_DIM
    N = z.shape[1]
    starts = module.prox_starts(z, x, p).reshape(module.N_STARTS, D, N)
    if n_starts is not None and warm is not None:
        starts = starts[:max(0, int(n_starts))]
    elif not multistart and warm is not None:
        starts = starts[:1]
    if warm is not None:
        starts = np.concatenate([warm[None], starts], axis=0)
    S = starts.shape[0]
    h0 = starts.transpose(1, 0, 2).reshape(D, S * N)
    zz = np.tile(z, (1, S))
    h, F, conv, iters = newton_minimize(module, h0, zz, x, p, tol=tol, max_iter=max_iter)
    h, F = off_saddles(module, h, F, conv, zz, x, p, tol=tol, max_iter=max_iter)
    h = h.reshape(D, S, N)
    F = F.reshape(S, N)
    conv = conv.reshape(S, N)
    Fm = np.where(conv & np.isfinite(F), F, np.inf)
    best = np.argmin(Fm, axis=0)
    failed = ~np.isfinite(Fm).any(axis=0)
    cols = np.arange(N)
    h_best = h[:, best, cols]
    F_best = F[best, cols]
    # Starts that converged to a different point: a node where the bracket is non-convex.
    dist = np.max(np.abs(h - h_best[:, None, :]), axis=0)
    n_disagree = int(np.sum(np.any(conv & (dist > agree_tol), axis=0)))
    n_fallback = 0
    if failed.any():
        h_best[:, failed], F_best[failed] = _fallback(module, z, x, p, starts, failed)
        n_fallback = int(failed.sum())
    return ProxResult(h_best, F_best, n_disagree, int(failed.sum()), n_fallback, iters)


#: the most bracket evaluations one :func:`_fallback` call spends (about a second of per-node
#: scipy): nodes beyond it stay failed (``F = inf``, a non-finite average the solver treats as an
#: inadmissible state) instead of the call running for minutes where Newton fails on many nodes
FALLBACK_BUDGET = 20_000
#: L-BFGS iterations per node and start
FALLBACK_MAX_ITER = 200


def _fallback(module, z, x, p, starts, failed, budget: int = FALLBACK_BUDGET):
    """Per-node L-BFGS from every start, for the few nodes where damped Newton failed; at most
    ``budget`` bracket evaluations in all (the nodes left then keep ``F = inf``: failed)."""
    from scipy.optimize import minimize

    idx = np.flatnonzero(failed)
    D = starts.shape[1]
    h = np.array(starts[0][:, idx], dtype=float)
    F = np.full(idx.size, np.inf)
    left = [int(budget)]

    class _Spent(Exception):
        pass

    for j, i in enumerate(idx):
        zi = z[:, i:i + 1]

        def fun(v, zi=zi):
            if left[0] <= 0:
                raise _Spent
            left[0] -= 1
            val, grad, _ = module.bracket_newton(v[:, None], zi, x, p)
            return float(val[0]), np.nan_to_num(grad[:, 0])

        for s in range(starts.shape[0]):
            try:
                res = minimize(fun, starts[s, :, i], jac=True, method="L-BFGS-B",
                               options={"gtol": 1e-10, "maxiter": FALLBACK_MAX_ITER})
            except _Spent:
                return h, F
            if np.isfinite(res.fun) and res.fun < F[j]:
                h[:, j], F[j] = res.x, res.fun
    return h, F


# --------------------------------------------------------------------------- the local convention
@dataclass(frozen=True)
class ProxConvention:
    """Which minimiser of the bracket the saddle-point equations use.

    ``global`` (the default): the lowest minimum over the module's starts (the free entropy of
    the global minimiser of the empirical risk). ``local``: the minimum reached by descent from
    ``start`` (a point of the prox space, the origin when ``None``), whatever lower minima exist
    elsewhere -- the convention of theory codes that run a local minimiser from a fixed point for
    every quadrature node. The descent follows the modified-Newton flow ``dh/dt = -|H|^{-1}
    dF/dh`` with steps capped at ``step (1 + |h|_inf)`` (:func:`local_minimize`); the map keeps its
    envelope form, evaluated at that minimiser.
    """

    kind: str = "global"
    start: tuple[float, ...] | None = None
    step: float = 0.1
    #: where the descent stops on a stationary point that is no minimum (the start on a basin boundary,
    #: e.g. the origin of an even loss at omega = 0): "split" counts the minima on both sides half each
    #: (the convention); "stay" keeps the stationary point, as a quasi-Newton code that stops where the
    #: gradient vanishes does -- to reproduce such codes, never as a theory (it is no minimiser)
    saddles: str = "split"

    @property
    def local(self) -> bool:
        """Whether this is the local convention."""
        return self.kind == "local"

    def start_point(self, dim: int) -> np.ndarray:
        """The start as a ``(dim,)`` array (the origin by default)."""
        if self.start is None:
            return np.zeros(dim)
        s = np.asarray(self.start, dtype=float).reshape(-1)
        if s.size == 1 and dim > 1:
            s = np.full(dim, float(s[0]))
        if s.size != dim:
            from ..errors import ParameterError

            raise ParameterError("prox_start", f"needs {dim} coordinates (the prox dimension), got {s.size}")
        return s

    @property
    def symmetric_start(self) -> bool:
        """Whether the start is the origin (invariant under the sign flips the solver folds by)."""
        return self.start is None or not np.any(np.asarray(self.start, dtype=float))

    def describe(self) -> str:
        """``global minimiser`` or ``local minimiser by descent from h = ...``."""
        if not self.local:
            return "global minimiser"
        at = "0" if self.symmetric_start else "(" + ", ".join(f"{v:g}" for v in np.ravel(self.start)) + ")"
        stay = "; a descent stopped on a stationary point keeps it (not a minimiser)" if self.saddles == "stay" else ""
        return f"local minimiser by descent from h = {at}{stay}"


#: the conventions by name
PROX_CONVENTIONS = ("global", "local")
#: the default convention
GLOBAL = ProxConvention()


def prox_convention(value: "ProxConvention | str | None", start=None, saddles: str | None = None) -> ProxConvention:
    """A :class:`ProxConvention` from a name (``"global"``, ``"local"``) or an instance;
    ``start``: the local descent's start (a number or ``PROX_DIM`` numbers, the origin by default);
    ``saddles``: ``"split"`` (default) or ``"stay"`` (:attr:`ProxConvention.saddles`).
    Raises :class:`~replica.errors.ParameterError` naming ``prox`` / ``prox_start`` / ``prox_saddles``
    on anything else."""
    from ..errors import ParameterError

    if isinstance(value, ProxConvention):
        return value
    name = "global" if value is None else str(value).strip().lower()
    if name not in PROX_CONVENTIONS:
        raise ParameterError("prox", f"must be one of {', '.join(PROX_CONVENTIONS)}, got {value!r}")
    if start is not None:
        if name != "local":
            raise ParameterError("prox_start", "a start is only meaningful with the local convention (prox=local)")
        try:
            vals = np.atleast_1d(np.asarray(start, dtype=float)).reshape(-1)
        except (TypeError, ValueError):
            raise ParameterError("prox_start", f"must be numbers, got {start!r}") from None
        if vals.size == 0 or not np.all(np.isfinite(vals)):
            raise ParameterError("prox_start", f"must be finite numbers, got {start!r}")
        start = tuple(float(v) for v in vals)
    if saddles is not None:
        if saddles not in ("split", "stay"):
            raise ParameterError("prox_saddles", f"must be split or stay, got {saddles!r}")
        if name != "local":
            raise ParameterError("prox_saddles", "only meaningful with the local convention (prox=local)")
        return ProxConvention(name, start, saddles=saddles)
    return ProxConvention(name, start)


#: below this (relative to the largest |eigenvalue|) a Hessian eigenvalue at the end of a local
#: descent counts as negative: the descent stopped on a saddle, not at a minimum
SADDLE_TOL = 1e-8
#: how far (relative, ``1 + |h|_inf``) a saddle's two sides are probed along its most negative direction
SADDLE_PROBE = 1e-4


def _min_eigen(H: np.ndarray, D: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The smallest eigenvalue, its unit eigenvector ``(D, M)`` and the largest ``|eigenvalue|`` of
    the symmetrised Hessians ``H`` ``(D*D, M)``. For ``D = 2`` the compiled kernels' closed form
    (:func:`replica.numeric.kernels.min_eigen_2x2`, run on arrays), signs included: where two mirror
    minima tie, both backends then step off a saddle to the same side."""
    if D == 1:
        return H[0], np.ones((1, H.shape[1])), np.abs(H[0])
    if D == 2:
        lam, u0, u1, big = min_eigen_2x2(H[0], 0.5 * (H[1] + H[2]), H[3])
        return lam, np.stack([u0, u1]), big
    Hm = H.T.reshape(-1, D, D)
    Hm = 0.5 * (Hm + Hm.transpose(0, 2, 1))
    lam, U = np.linalg.eigh(Hm)
    return lam[:, 0], U[:, :, 0].T, np.max(np.abs(lam), axis=1)


def off_saddles(module: GeneratedModel, h: np.ndarray, F: np.ndarray, conv: np.ndarray, z: np.ndarray, x: np.ndarray,
                p: np.ndarray, tol: float = 1e-12, max_iter: int = NEWTON_MAX_ITER) -> tuple[np.ndarray, np.ndarray]:
    """Newton endpoints ``h`` ``(D, M)`` that are saddles (a start on a stationary point that is no
    minimum, e.g. the origin of an even loss at ``omega = 0``) moved to the lower of the minima
    reached from ``h +- SADDLE_PROBE (1 + |h|) u`` (``u``: the most negative direction): a saddle
    is never a minimiser. ``(h, F)`` unchanged elsewhere (new arrays where any moved)."""
    D = h.shape[0]
    idx = np.flatnonzero(conv)
    if D == 0 or idx.size == 0:
        return h, F
    with np.errstate(all="ignore"):
        _, _, H = module.bracket_newton(h[:, idx], z[:, idx], x, p)
        lam, u, big = _min_eigen(H, D)
    bad = lam < -SADDLE_TOL * np.maximum(big, 1e-300)
    if not bad.any():
        return h, F
    idx, u = idx[bad], u[:, bad]
    h, F = h.copy(), F.copy()
    eps = SADDLE_PROBE * (1.0 + np.max(np.abs(h[:, idx]), axis=0))
    best_h, best_F = h[:, idx].copy(), np.full(idx.size, np.inf)
    for sign in (1.0, -1.0):
        hs, Fs, cs, _ = newton_minimize(module, h[:, idx] + sign * eps * u, z[:, idx], x, p, tol=tol,
                                        max_iter=max_iter)
        ok = cs & np.isfinite(Fs)
        slack = 1e-12 * (1.0 + np.abs(Fs))
        lower = ok & (Fs < best_F - slack)
        # mirror minima tie (a saddle on a symmetry plane): the lexicographically larger minimiser,
        # whichever side round-off put first, as the compiled node_off_saddle
        tie = ok & ~lower & (Fs <= best_F + slack)
        if tie.any():
            diff = hs[:, tie] != best_h[:, tie]
            first = np.argmax(diff, axis=0)
            cols = np.arange(first.size)
            larger = diff.any(axis=0) & (hs[:, tie][first, cols] > best_h[:, tie][first, cols])
            lower[np.flatnonzero(tie)[larger]] = True
        best_h[:, lower], best_F[lower] = hs[:, lower], Fs[lower]
    found = np.isfinite(best_F)
    h[:, idx[found]], F[idx[found]] = best_h[:, found], best_F[found]
    F[idx[~found]] = np.inf  # a saddle left where neither side converged: never the minimum
    return h, F


def local_minimize(module: GeneratedModel, h0: np.ndarray, z: np.ndarray, x: np.ndarray, p: np.ndarray,
                   tol: float = 1e-12, max_iter: int = 200, step: float = 0.1, step_tol: float = 1e-8
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Descent from ``h0`` ``(D, M)`` at nodes ``z`` that stays in the start's basin.

    Modified-Newton direction ``d = -|H|^{-1} g`` (a descent direction everywhere), capped at
    ``step (1 + |h|_inf)``; a capped step must not pass a minimum along its ray (the directional
    derivative at the trial point stays <= 0: halved until it does) and every step satisfies
    Armijo. Near a minimum the full Newton step is shorter than the cap and the usual quadratic
    convergence takes over. Returns ``(h, F, converged, minimum)``: ``minimum`` is False where
    the descent converged to a stationary point whose Hessian has a negative eigenvalue (a
    saddle: the start lies on a basin boundary) -- never reported as a minimiser. The compiled
    :func:`replica.numeric.kernels.node_local_descent` runs the same algorithm per node.
    """
    h = np.array(h0, dtype=float, copy=True)
    D, M = h.shape
    F = np.full(M, np.inf)
    converged = np.zeros(M, dtype=bool)
    active = np.arange(M)
    for _ in range(max_iter):
        ha, za = h[:, active], z[:, active]
        Fa, g, H = module.bracket_newton(ha, za, x, p)
        F[active] = Fa
        gmax = np.max(np.abs(g), axis=0)
        done = (gmax < tol) | ~np.isfinite(gmax)
        converged[active[done & np.isfinite(gmax)]] = True
        keep = ~done
        if not keep.any():
            active = active[:0]
            break
        active, g, H, Fa, ha, za = active[keep], g[:, keep], H[:, keep], Fa[keep], ha[:, keep], za[:, keep]
        d = newton_direction(g, H)
        scale = step * (1.0 + np.max(np.abs(ha), axis=0))
        length = np.max(np.abs(d), axis=0)
        capped = length > scale
        d = np.where(capped, d * (scale / np.where(capped, length, 1.0)), d)
        tiny = np.max(np.abs(d), axis=0) <= step_tol * (1.0 + np.max(np.abs(ha), axis=0))
        h[:, active[tiny]] = ha[:, tiny] + d[:, tiny]
        converged[active[tiny]] = True
        slope = np.sum(g * d, axis=0)
        # a capped step stops short of the first minimum along its ray (the basin's)
        idx, h_new, F_new, pending = line_search(module, ha, za, d, Fa, slope, x, p, np.flatnonzero(~tiny),
                                                 halvings=40, stop_ahead=capped)
        h[:, active[idx]] = h_new
        F[active[idx]] = F_new
        moving = np.ones(active.size, dtype=bool)
        moving[pending] = False
        moving[tiny] = False
        moving &= (Fa - F[active]) > 1e-15 * (1.0 + np.abs(Fa))
        converged[active[~moving]] = True
        active = active[moving]
        if active.size == 0:
            break
    minimum = converged.copy()
    if D and converged.any():
        idx = np.flatnonzero(converged)
        F[idx], _, H = module.bracket_newton(h[:, idx], z[:, idx], x, p)
        lam_min, _, lam_abs = _min_eigen(H, D)
        minimum[idx] = lam_min >= -SADDLE_TOL * np.maximum(lam_abs, 1e-300)
    return h, F, converged, minimum


@dataclass
class LocalProxResult(ProxResult):
    """A :class:`ProxResult` of :func:`local_prox`. Where the descent from the start stopped on
    a saddle (``n_saddle`` nodes, ``saddle`` mask), the node counts half for each of the minima
    on the two sides of the saddle along its most negative direction: ``h`` / ``value`` hold one
    side, ``h_other`` / ``value_other`` the other (equal to ``h`` / ``value`` elsewhere)."""

    h_other: np.ndarray | None = None
    value_other: np.ndarray | None = None
    saddle: np.ndarray | None = None
    n_saddle: int = 0


def local_prox(module: GeneratedModel, z: np.ndarray, x: np.ndarray, p: np.ndarray,
               convention: ProxConvention, tol: float = 1e-12, max_iter: int = 200) -> LocalProxResult:
    """The local minimiser of the bracket reached by descent from the convention's start at every
    node ``z`` ``(nz, N)`` (:func:`local_minimize`). A node whose descent ends on a saddle is
    resolved by descending from both sides of it; a node where a descent does not converge is
    failed (``n_failed``; its values are nan)."""
    D, N = module.PROX_DIM, z.shape[1]
    s = convention.start_point(D)
    h0 = np.repeat(s[:, None], N, axis=1)
    h, F, conv, mini = local_minimize(module, h0, z, x, p, tol=tol, max_iter=max_iter, step=convention.step)
    saddle = conv & ~mini
    h2, F2 = h.copy(), F.copy()
    if convention.saddles == "stay":
        saddle[:] = False  # kept where it stopped (counted below as saddles all the same)
        stayed = conv & ~mini
    else:
        stayed = np.zeros_like(saddle)
    if saddle.any():
        idx = np.flatnonzero(saddle)
        _, _, H = module.bracket_newton(h[:, idx], z[:, idx], x, p)
        _, u, _ = _min_eigen(H, D)
        eps = SADDLE_PROBE * (1.0 + np.max(np.abs(h[:, idx]), axis=0))
        sides = []
        for sign in (1.0, -1.0):
            hs, Fs, cs, ms = local_minimize(module, h[:, idx] + sign * eps * u, z[:, idx], x, p, tol=tol,
                                            max_iter=max_iter, step=convention.step)
            sides.append((hs, np.where(cs & ms, Fs, np.nan)))
        h[:, idx], F[idx] = sides[0]
        h2[:, idx], F2[idx] = sides[1]
    failed = ~conv | ~np.isfinite(F) | ~np.isfinite(F2)
    h[:, failed] = np.nan
    h2[:, failed] = np.nan
    F[failed] = np.nan
    F2[failed] = np.nan
    ok_saddle = (saddle | stayed) & ~failed
    return LocalProxResult(h, F, 0, int(failed.sum()), 0, max_iter, h_other=h2, value_other=F2,
                           saddle=ok_saddle, n_saddle=int(ok_saddle.sum()))


# --------------------------------------------------------------------------- piecewise brackets
@dataclass
class PiecewiseProxResult(ProxResult):
    """A :class:`ProxResult` of :func:`piecewise_prox`; ``on_break[j]`` is the index (in the
    module's ``loss_breaks`` order) of the breakpoint the minimiser of node ``j`` sits on, -1
    when it is a stationary point inside a branch."""

    on_break: np.ndarray | None = None


def _inside(h: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.isfinite(h) & (h > lo) & (h < hi)


def _branch_rows(table: np.ndarray, branch: np.ndarray, k: int, stride: int) -> np.ndarray:
    """Row ``stride * branch + k`` of ``table`` (rows, N) at every node."""
    return np.take_along_axis(table, (stride * branch + k)[None, :], axis=0)[0]


def _branch_root(module: GeneratedModel, branch: np.ndarray, lo: np.ndarray, hi: np.ndarray, z: np.ndarray,
                 x: np.ndarray, p: np.ndarray, iters: int = 100) -> np.ndarray:
    """The stationary point of each node's ``branch`` inside ``(lo, hi)`` (nan if none), for
    branches without a closed form: safeguarded Newton on ``dF/dh`` (bracketing, bisection when
    Newton leaves the bracket). Convex branches have at most one."""
    N = branch.size
    start = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi),
                     np.where(np.isfinite(lo), lo + 1.0 + np.abs(lo), np.where(np.isfinite(hi), hi - 1.0 - np.abs(hi),
                                                                              0.0)))

    def slope(h):
        t = np.asarray(module.branch_newton(h[None, :], z, x, p), dtype=float)
        return _branch_rows(t, branch, 1, 3), _branch_rows(t, branch, 2, 3)

    g0, _ = slope(start)
    a = np.where(g0 > 0, lo, start)   # g(a) < 0 <= g(b) once bracketed
    b = np.where(g0 > 0, start, hi)
    # finite brackets: walk out from the start by doubling steps
    step = np.ones(N)
    for _ in range(80):
        need_a, need_b = ~np.isfinite(a), ~np.isfinite(b)
        if not (need_a.any() or need_b.any()):
            break
        ta = np.where(need_a, start - step, a)
        tb = np.where(need_b, start + step, b)
        ga, _ = slope(ta)
        gb, _ = slope(tb)
        a = np.where(need_a & (ga < 0), ta, a)
        b = np.where(need_b & (gb >= 0), tb, b)
        start = np.where(need_a & (ga >= 0), ta, np.where(need_b & (gb < 0), tb, start))
        step *= 2.0
    ok = np.isfinite(a) & np.isfinite(b)
    h = np.where(ok, 0.5 * (a + b), np.nan)
    for _ in range(iters):
        g, H = slope(np.where(ok, h, 0.0))
        a = np.where(ok & (g < 0), h, a)
        b = np.where(ok & (g >= 0), h, b)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = h - g / H
        bad = ~(np.isfinite(newton) & (newton > a) & (newton < b))
        h_new = np.where(bad, 0.5 * (a + b), newton)
        done = np.abs(h_new - h) <= 1e-15 * (1.0 + np.abs(h))
        h = np.where(ok, h_new, np.nan)
        if np.all(done | ~ok):
            break
    return np.where(_inside(h, lo, hi), h, np.nan)


def piecewise_prox(module: GeneratedModel, z: np.ndarray, x: np.ndarray, p: np.ndarray) -> PiecewiseProxResult:
    """Exact global minimum of a piecewise bracket in one variable at every node.

    The breakpoints ``b_1 <= ... <= b_k`` (module ``loss_breaks``) cut the line into intervals; the
    branch active on each (``branch_index`` at an inner point) is smooth there, so the minimum over
    an interval is at a stationary point of that branch inside it (closed form,
    ``branch_stationary``, or :func:`_branch_root`) or at one of its ends. The global minimum is
    the lowest of these candidates (``bracket`` evaluates them all). Exact for any continuous
    piecewise loss whose branches have closed-form stationary points or are convex.
    """
    N = z.shape[1]
    nb, nbr, R = module.N_BREAKS, module.N_BRANCHES, module.STATIONARY_ROOTS
    with np.errstate(all="ignore"):
        b = np.asarray(module.loss_breaks(z, x, p), dtype=float).reshape(nb, N)
        bs = np.sort(np.where(np.isfinite(b), b, np.inf), axis=0)
        lo = np.vstack([np.full((1, N), -np.inf), bs])
        hi = np.vstack([bs, np.full((1, N), np.inf)])
        mid = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi),
                       np.where(np.isfinite(hi), hi - 1.0 - np.abs(hi), lo + 1.0 + np.abs(lo)))
        mid = np.where(np.isfinite(mid), mid, 0.0)
        closed = np.asarray(module.STATIONARY_CLOSED, dtype=bool)
        stat = np.asarray(module.branch_stationary(z, x, p), dtype=float).reshape(nbr * R, N)
        cands, labels = [], []
        for j in range(nb + 1):
            idx = np.asarray(module.branch_index(mid[j][None, :], z, x, p), dtype=float)
            idx = np.clip(np.nan_to_num(idx, nan=0.0).astype(int).reshape(N), 0, nbr - 1)
            for r in range(R):
                h = _branch_rows(stat, idx, r, R)
                cands.append(np.where(closed[idx] & _inside(h, lo[j], hi[j]), h, np.nan))
                labels.append(-1)
            if not closed.all():
                need = ~closed[idx] & (hi[j] > lo[j])
                h = np.full(N, np.nan)
                if need.any():
                    sel = np.flatnonzero(need)
                    h[sel] = _branch_root(module, idx[sel], lo[j][sel], hi[j][sel], z[:, sel], x, p)
                cands.append(h)
                labels.append(-1)
        order = np.argsort(np.where(np.isfinite(b), b, np.inf), axis=0)  # sorted position -> break index
        for k in range(nb):
            cands.append(np.where(np.isfinite(bs[k]), bs[k], np.nan))
            labels.append(k)
        C = np.stack(cands)                                 # (n_candidates, N)
        Fv = np.full(C.shape, np.inf)
        for c in range(C.shape[0]):
            ok = np.isfinite(C[c])
            if ok.any():
                sel = np.flatnonzero(ok)
                Fv[c, sel] = np.asarray(module.bracket(C[c, sel][None, :], z[:, sel], x, p), dtype=float)
        Fv = np.where(np.isfinite(Fv), Fv, np.inf)
        best = np.argmin(Fv, axis=0)
        cols = np.arange(N)
        h_best = C[best, cols]
        F_best = Fv[best, cols]
        lab = np.asarray(labels)[best]
        on_break = np.where(lab >= 0, order[np.clip(lab, 0, max(nb - 1, 0)), cols] if nb else -1, -1)
    failed = ~np.isfinite(F_best)
    return PiecewiseProxResult(h_best[None, :], F_best, 0, int(failed.sum()), 0, 1, on_break=on_break)


def envelope_gradient(module: GeneratedModel, result: ProxResult, z: np.ndarray, x: np.ndarray,
                      p: np.ndarray) -> np.ndarray:
    """``d(W F)/dx`` at the minimisers of ``result`` (envelope theorem), ``(len(x), N)``.

    At fixed ``h`` (module ``bracket_parameter_gradient``), except for minimisers sitting on a
    breakpoint that moves with the state (``MOVING_BREAKS``): there the envelope follows the
    breakpoint, and its derivative is the total one along ``h = b(x)`` (``break_parameter_gradient``),
    the same from both sides because the loss is continuous.
    """
    G = np.asarray(module.bracket_parameter_gradient(result.h, z, x, p), dtype=float)
    on = getattr(result, "on_break", None)
    if on is not None and module.MOVING_BREAKS and np.any(on >= 0):
        sel = np.flatnonzero(on >= 0)
        nx = G.shape[0]
        Gb = np.asarray(module.break_parameter_gradient(z[:, sel], x, p), dtype=float).reshape(
            module.N_BREAKS, nx, sel.size)
        G = G.copy()
        G[:, sel] = Gb[on[sel], :, np.arange(sel.size)].T
    return G

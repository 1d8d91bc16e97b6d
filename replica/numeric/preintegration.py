"""Jump-aware energetic averages by pre-integration along one Gaussian direction.

The problem
-----------
The energetic potential is ``Psi_y = -E_z min_h F(h; z, x)`` and the solver needs
``dPsi_y/dx = -E_z[dF/dx at h = argmin]`` (envelope theorem). ``F`` is not convex in
``h``: across a hypersurface of ``z``-space (the *Maxwell set*) two local minima
exchange the role of the global one, so the integrand ``dF/dx(argmin)`` *jumps* there
(``min F`` itself is continuous with a kink). The Maxwell set ends on a codimension-2
*cusp edge*, near which the minimiser is continuous but steep (``~ s^(1/3)``). A
tensor Gauss--Hermite rule on such an integrand converges slowly and erratically:
on the positional branch of the attention model ``E[dF/dq]`` moves by ~7 % between
orders 10 and 30. A second, independent trap: the module's prox starts miss the
global minimum at ~1e-4 of the nodes, all next to the Maxwell set, which biases
``E[dF/dq]`` by ~1e-3 whatever the rule (docs/explanation/quadrature.md).

The method (pre-integration, a.k.a. conditional smoothing)
----------------------------------------------------------
Rotate ``z = Q (u, y)`` with ``Q`` orthogonal, ``u = d . z`` along a unit *direction*
``d`` and ``y`` the ``dim - 1`` transverse coordinates (the standard Gaussian is
rotation invariant):

    E f(z) = E_y P(y),      P(y) = int f(Q(u, y)) phi(u) du.

The outer integral over ``y`` is a tensor Gauss--Hermite rule (folded by the module's
sign-flip ``SYMMETRIES``). When the jump surface crosses the lines transversally,
``P`` is continuous and much smoother than ``f`` (Griebel, Kuo & Sloan, Math. Comp.
2013/2017; Gilbert, Kuo & Sloan 2022). Each line integral ``P(y)`` is computed
*exactly up to the smooth-quadrature error*, for all lines at once (no Python loop
over lines or nodes):

1. *global prox* (every module start, and the previous minimisers as a warm start)
   at ``n_u`` Gauss--Hermite nodes of every line plus two zero-weight *sentinels*
   beyond the outermost node (switches in the tails are seen too);
2. *sweeps*: each minimiser is continued by warm-started Newton
   (:func:`replica.numeric.prox.newton_minimize`) to the next point, forward then backward;
   a continued branch lower than a point's multistart result replaces it, so a
   global minimum found anywhere on a line propagates along it (this repairs the
   prox misses, and makes the cheap warm-only iterations of the solver safe);
3. *classification* of every interval between consecutive points: a **switch** is
   proven when a continued branch is higher than the neighbour's global minimum at
   another ``h``; an interval is **suspect** when the change of the minimiser
   disagrees with its slopes at both ends (trapezoid defect
   ``|h_b - h_a - w (h'_a + h'_b)/2| > smooth_tol``, with ``h' = -H^{-1} dgrad/du`` from
   the implicit function theorem). That catches the switches continuation cannot
   prove (a branch folds inside the interval, both continuations land on the same
   minimum) and steep continuous transitions near the cusp edge. Suspect intervals
   are bisected (global prox at the midpoint) until they are proven switches, smooth,
   or narrower than ``break_width``;
4. *location* of every proven switch: root of ``g(u) = F_left(u) - F_right(u)`` (each
   branch continued by warm Newton from its own end of the bracket) by the Illinois
   variant of regula falsi with bisection safeguards, all intervals at once; where a
   branch ceases to exist inside the bracket the side is still known and a bisection
   step is taken. The global prox at ``u*`` verifies that no third branch is lower
   (else both halves go back to 3). Suspect intervals that turned out continuous get a
   *break* at their steepest refined point;
5. every line with a switch or a break is integrated piecewise: on each piece
   between switches/breaks an ``n_s``-point Gauss rule for the *truncated* normal
   weight (:func:`truncated_normal_rule`: discretised Stieltjes + Golub--Welsch),
   whose nodes get a warm-started prox from the nearest known point of the same
   piece. Other lines keep their plain Gauss--Hermite sum.

``F`` itself is integrated the same way, so ``Psi_y`` gets the same accuracy.

What limits the accuracy (measured in docs/explanation/quadrature.md): ``P`` is continuous but
not smooth where a line passes the cusp edge, and varies on short scales along the
teacher's attention contrast ``eta_1 - eta_2``; the outer rule then converges
algebraically. On the positional branch of the paper model the energetic averages
are ~1e-3 accurate at the default cost (tensor GH: ~5e-2).

Choice of the direction
-----------------------
Any direction gives the right answer; the direction only decides how smooth ``P``
is (a direction nearly tangent to the Maxwell set makes ``P`` steep). The best is the
normal of the Maxwell set. ``direction="auto"`` estimates it from a pilot pass at
the first state that shows switches: the normals ``grad_z (F_left - F_right)`` at the
located switch points (central differences of ``bracket`` at the two minimisers),
weighted by the Gaussian weight of each switch; the direction is the principal axis
of ``sum w n n^T``. It is then *frozen*, so that the fixed-point map stays a
deterministic function of the state (Anderson acceleration needs that);
:meth:`PreintegrationIntegrator.companion` shares it. On the positional branch of the
attention model the estimate is ``(xi_1 - xi_2)/sqrt 2`` (the Maxwell set is
``omega_1 = omega_2``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..interface.generated_model import GeneratedModel
from .compiled import compiled, numba_available, resolve_backend
from .energetic import EnergeticAverage, chunk_map
from ..errors import ParameterError
from .prox import AGREE_TOL, NEWTON_MAX_ITER, ProxResult, newton_minimize, prox
from .quadrature import hermite_1d, legendre_1d

__all__ = ["truncated_normal_rule", "householder", "fold_sign_flips", "PreintegrationIntegrator",
           "PreintegrationState", "PreintegrationStats", "make_integrator", "ACCURACY"]

#: Normal mass beyond this many standard deviations (2e-33) is neglected.
CUT = 12.0


# ----------------------------------------------------------------------------- 1-D rules
def truncated_normal_rule(a: np.ndarray, b: np.ndarray, n: int, discretization: int = 96
                          ) -> tuple[np.ndarray, np.ndarray]:
    """``n``-point Gauss rules for the weight ``phi(u) 1[a < u < b]``, for many intervals at once.

    ``a``, ``b``: arrays of shape ``(S,)`` (``+-inf`` allowed; clipped to ``+-CUT``).
    Returns nodes and weights of shape ``(S, n)``; the weights sum to ``Phi(b) - Phi(a)``
    (the interval's probability), so ``sum w f(u)`` approximates ``int_a^b f phi du``.

    Method: the weight is discretised by a ``discretization``-point Gauss--Legendre rule
    on ``[a, b]`` (in the local variable ``s = (u - c) / hw`` in ``[-1, 1]``, which keeps
    the recurrence well conditioned for short and long intervals alike); the Stieltjes
    procedure with re-orthogonalisation gives the three-term recurrence of the orthogonal
    polynomials of the discrete measure, and the eigen-decomposition of the Jacobi matrix
    (Golub--Welsch) gives nodes and weights. With ``discretization >> n`` the discrete
    moments equal the continuous ones to round-off, so the rule is exact for polynomials
    of degree ``2n - 1`` against the truncated normal. Moment-based constructions are
    unusable here (the Hankel matrices of a truncated normal are hopelessly ill
    conditioned beyond ``n ~ 8``).
    """
    a = np.clip(np.asarray(a, dtype=float), -CUT, CUT)
    b = np.clip(np.asarray(b, dtype=float), -CUT, CUT)
    S = a.shape[0]
    if S == 0:
        return np.zeros((0, n)), np.zeros((0, n))
    s, lam = legendre_1d(discretization)
    kernel = _compiled_rule_kernel()
    if kernel is not None:
        nodes, weights = np.empty((S, n)), np.empty((S, n))
        kernel(np.ascontiguousarray(a), np.ascontiguousarray(b), int(n), s, lam, nodes, weights)
        return nodes, weights
    return _truncated_normal_rule_numpy(a, b, n, s, lam)


def _truncated_normal_rule_numpy(a: np.ndarray, b: np.ndarray, n: int, s: np.ndarray, lam: np.ndarray
                                 ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`truncated_normal_rule` vectorised over the intervals in numpy (no numba)."""
    S, discretization = a.shape[0], s.size
    c, hw = 0.5 * (a + b), 0.5 * np.maximum(b - a, 0.0)
    t = c[:, None] + hw[:, None] * s[None, :]
    w = lam[None, :] * hw[:, None] * np.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    mu0 = w.sum(axis=1)
    ok = mu0 > 0.0
    wn = np.where(ok[:, None], w / np.where(ok, mu0, 1.0)[:, None], 1.0 / discretization)
    # Orthonormal Stieltjes recurrence (Lanczos form) in the variable s, with one
    # re-orthogonalisation against the two previous polynomials (enough for n << K).
    alpha = np.zeros((S, n))
    beta = np.zeros((S, n))
    ws = wn * s[None, :]
    p_prev = np.zeros((S, discretization))
    p = np.ones((S, discretization))
    for k in range(n):
        alpha[:, k] = np.einsum("sk,sk,sk->s", ws, p, p)
        r = s[None, :] * p - alpha[:, k:k + 1] * p
        if k:
            r -= beta[:, k:k + 1] * p_prev
            r -= np.einsum("sk,sk,sk->s", wn, r, p_prev)[:, None] * p_prev
        r -= np.einsum("sk,sk,sk->s", wn, r, p)[:, None] * p
        nb = np.sqrt(np.einsum("sk,sk,sk->s", wn, r, r))
        if k + 1 < n:
            beta[:, k + 1] = nb
        p_prev, p = p, r / np.where(nb > 0, nb, 1.0)[:, None]
    J = np.zeros((S, n, n))
    idx = np.arange(n)
    J[:, idx, idx] = alpha
    J[:, idx[1:], idx[:-1]] = beta[:, 1:]
    J[:, idx[:-1], idx[1:]] = beta[:, 1:]
    ev, vec = np.linalg.eigh(J)
    nodes = c[:, None] + hw[:, None] * ev
    weights = mu0[:, None] * vec[:, 0, :] ** 2
    weights[~ok] = 0.0
    return nodes, weights


def _rule_kernel(a, b, n, s, lam, nodes, weights):  # pragma: no cover - run compiled (numba)
    """Per interval, the algorithm of :func:`_truncated_normal_rule_numpy` in scalar loops: the
    Stieltjes recurrence of the discretised weight, then the Jacobi matrix's eigenvalues and the
    first components of its eigenvectors by implicit QL (Golub--Welsch needs no more). Plain
    Python over numpy arrays, compiled by numba (:func:`_compiled_rule_kernel`): the numpy version
    allocates ``(S, K)`` temporaries per step and a dense ``eigh`` per interval: ~2.5x slower per
    thread (2e4 intervals of order 14: 0.62 s against 0.26 s), ~3x over the ~1e5 intervals of a
    fine pre-integration level, whose chunks the numba kernel runs without the GIL. The QL sweep
    is capped at 60 iterations per eigenvalue (symmetric tridiagonal matrices of order <= 20 need
    a handful)."""
    S, K = a.shape[0], s.shape[0]
    norm = 1.0 / math.sqrt(2.0 * math.pi)
    wn, p, pp, r = np.empty(K), np.empty(K), np.empty(K), np.empty(K)
    d, e, z = np.empty(n), np.empty(n), np.empty(n)
    beta = np.zeros(n)
    for i in range(S):
        c, hw = 0.5 * (a[i] + b[i]), 0.5 * max(b[i] - a[i], 0.0)
        mu0 = 0.0
        for k in range(K):
            t = c + hw * s[k]
            wn[k] = lam[k] * hw * math.exp(-0.5 * t * t) * norm
            mu0 += wn[k]
        ok = mu0 > 0.0
        for k in range(K):
            wn[k] = wn[k] / mu0 if ok else 1.0 / K
            p[k], pp[k] = 1.0, 0.0
        # orthonormal Stieltjes (Lanczos form) with one re-orthogonalisation
        for j in range(n):
            al = 0.0
            for k in range(K):
                al += wn[k] * s[k] * p[k] * p[k]
            for k in range(K):
                r[k] = s[k] * p[k] - al * p[k]
            if j:
                c1 = 0.0
                for k in range(K):
                    r[k] -= beta[j] * pp[k]
                    c1 += wn[k] * r[k] * pp[k]
                for k in range(K):
                    r[k] -= c1 * pp[k]
            c2 = 0.0
            for k in range(K):
                c2 += wn[k] * r[k] * p[k]
            nb = 0.0
            for k in range(K):
                r[k] -= c2 * p[k]
                nb += wn[k] * r[k] * r[k]
            nb = math.sqrt(nb)
            d[j] = al
            if j + 1 < n:
                beta[j + 1] = nb
            dv = nb if nb > 0.0 else 1.0
            for k in range(K):
                pp[k] = p[k]
                p[k] = r[k] / dv
        # implicit QL on the Jacobi matrix (diagonal d, off-diagonal beta[1:]), rotations applied
        # to the first row of the eigenvector matrix only
        for j in range(n):
            e[j] = beta[j + 1] if j + 1 < n else 0.0
            z[j] = 1.0 if j == 0 else 0.0
        for l in range(n):
            for _ in range(60):
                m = l
                while m < n - 1:
                    dd = abs(d[m]) + abs(d[m + 1])
                    if abs(e[m]) <= 2.2e-16 * dd:
                        break
                    m += 1
                if m == l:
                    break
                g = (d[l + 1] - d[l]) / (2.0 * e[l])
                rr = math.hypot(g, 1.0)
                g = d[m] - d[l] + e[l] / (g + (rr if g >= 0.0 else -rr))
                sn, cs, pe = 1.0, 1.0, 0.0
                underflow = False
                for ii in range(m - 1, l - 1, -1):
                    f, bb = sn * e[ii], cs * e[ii]
                    rr = math.hypot(f, g)
                    e[ii + 1] = rr
                    if rr == 0.0:
                        d[ii + 1] -= pe
                        e[m] = 0.0
                        underflow = True
                        break
                    sn, cs = f / rr, g / rr
                    g = d[ii + 1] - pe
                    rr = (d[ii] - g) * sn + 2.0 * cs * bb
                    pe = sn * rr
                    d[ii + 1] = g + pe
                    g = cs * rr - bb
                    f = z[ii + 1]
                    z[ii + 1] = sn * z[ii] + cs * f
                    z[ii] = cs * z[ii] - sn * f
                if underflow:
                    continue
                d[l] -= pe
                e[l] = g
                e[m] = 0.0
        # ascending nodes (insertion sort: n is small)
        for j in range(1, n):
            dj, zj = d[j], z[j]
            k = j - 1
            while k >= 0 and d[k] > dj:
                d[k + 1], z[k + 1] = d[k], z[k]
                k -= 1
            d[k + 1], z[k + 1] = dj, zj
        for j in range(n):
            nodes[i, j] = c + hw * d[j]
            weights[i, j] = mu0 * z[j] * z[j] if ok else 0.0


_COMPILED: dict = {}


def _compiled_kernel(fn):
    """The module-level scalar kernel ``fn`` compiled by numba (machine code cached on disk; None
    without numba or with ``REPLICA_BACKEND=numpy``: the numpy version then runs)."""
    if fn.__name__ not in _COMPILED:
        kernel = None
        if numba_available():
            import numba

            kernel = numba.njit(cache=True, nogil=True, error_model="numpy")(fn)
        _COMPILED[fn.__name__] = kernel
    return _COMPILED[fn.__name__]


def _compiled_rule_kernel():
    """:func:`_rule_kernel` compiled (:func:`_compiled_kernel`)."""
    return _compiled_kernel(_rule_kernel)


# ----------------------------------------------------------------------------- piece nodes
def _piece_nodes_numpy(idx, n, seg_line, seg_a, seg_b, nodes, hl_end, hr_end, U, h, axis, offsets):
    """Nodes ``z`` and warm starts of the pieces' Gauss nodes ``idx`` (flat: piece ``idx // n``,
    node ``idx % n``). The warm start is the nearest known point of the same piece: a line point
    inside it (``h`` on the line's grid ``U``), or the branch solution at one of its ends (``hl_end``
    the right branch of the switch on its left, ``hr_end`` the left branch of the one on its
    right). ``z = offsets[:, line] + axis u``. Returns ``(z, warm)``."""
    s = idx // n
    nu = nodes.reshape(-1)[idx]
    line, sa, sb = seg_line[s], seg_a[s], seg_b[s]
    P = U.size
    jn = np.clip(np.searchsorted(U, nu), 1, P - 1)
    jn = np.where(np.abs(U[jn - 1] - nu) <= np.abs(U[jn] - nu), jn - 1, jn)
    inside = (U[jn] > sa) & (U[jn] < sb)
    dist_pt = np.where(inside, np.abs(U[jn] - nu), np.inf)
    da = np.where(np.isfinite(sa), nu - sa, np.inf)
    db = np.where(np.isfinite(sb), sb - nu, np.inf)
    warm = h[:, line, jn]
    use_a = (da <= db) & (da < dist_pt)
    use_b = (db < da) & (db < dist_pt)
    warm[:, use_a] = hl_end[:, s[use_a]]
    warm[:, use_b] = hr_end[:, s[use_b]]
    return _line_points(offsets, axis, line, nu), warm


def _line_points(offsets, axis, line, u):
    """The points ``offsets[:, line] + axis u`` (flat arrays ``line``, ``u``), row by row: no
    ``dim x N`` temporary (fresh pages cost ~2 ms/MB on these machines)."""
    z = np.take(offsets, line, axis=1)
    for k in range(z.shape[0]):
        z[k] += axis[k] * u
    return z


def _piece_nodes_kernel(idx, n, seg_line, seg_a, seg_b, nodes, hl_end, hr_end, U, h, axis, offsets, z, warm
                        ):  # pragma: no cover - run compiled (numba)
    """:func:`_piece_nodes_numpy` in scalar loops, into ``z`` and ``warm`` (same numbers bit for
    bit), compiled by numba (:func:`_compiled_piece_kernel`). Run per chunk on the kernel threads,
    it keeps the ~1.5e6 nodes of a fine level's pieces out of the main thread: the numpy version's
    ~20 temporaries of that size cost ~0.4 s per evaluation, mostly in first-touch page faults."""
    P, D, dim = U.shape[0], h.shape[0], axis.shape[0]
    for k in range(idx.shape[0]):
        j = idx[k]
        s = j // n
        nu = nodes[s, j - s * n]
        line, sa, sb = seg_line[s], seg_a[s], seg_b[s]
        lo, hi = 0, P  # np.searchsorted(U, nu): the first index with U >= nu
        while lo < hi:
            mid = (lo + hi) // 2
            if U[mid] < nu:
                lo = mid + 1
            else:
                hi = mid
        jn = min(max(lo, 1), P - 1)
        if abs(U[jn - 1] - nu) <= abs(U[jn] - nu):
            jn -= 1
        dist_pt = abs(U[jn] - nu) if (U[jn] > sa and U[jn] < sb) else math.inf
        da = nu - sa if math.isfinite(sa) else math.inf
        db = sb - nu if math.isfinite(sb) else math.inf
        if da <= db and da < dist_pt:
            for d in range(D):
                warm[d, k] = hl_end[d, s]
        elif db < da and db < dist_pt:
            for d in range(D):
                warm[d, k] = hr_end[d, s]
        else:
            for d in range(D):
                warm[d, k] = h[d, line, jn]
        for i in range(dim):
            z[i, k] = offsets[i, line] + axis[i] * nu


def _compiled_piece_kernel():
    """:func:`_piece_nodes_kernel` compiled (:func:`_compiled_kernel`)."""
    return _compiled_kernel(_piece_nodes_kernel)


# ----------------------------------------------------------------------------- helpers
def householder(d: np.ndarray) -> np.ndarray:
    """Orthogonal symmetric ``Q`` with ``Q e_1 = d`` (``d`` a unit vector)."""
    d = np.asarray(d, dtype=float)
    d = d / np.linalg.norm(d)
    e = np.zeros_like(d)
    e[0] = 1.0
    v = e - d
    nv = float(v @ v)
    if nv < 1e-30:
        return np.eye(d.size)
    return np.eye(d.size) - 2.0 * np.outer(v, v) / nv


def _dist(h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
    return np.max(np.abs(h1 - h2), axis=0)


def fold_sign_flips(nodes: np.ndarray, weights: np.ndarray, flips: Sequence[Sequence[int]]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Fold a rule symmetric under the sign flips ``flips`` (index tuples) onto one node per orbit.

    Each node is replaced by the lexicographically largest of its images under the group
    generated by the flips, and the weights of coincident images are summed: the rule's
    sums are unchanged for every integrand invariant under the flips.
    """
    images = [nodes]
    for f in flips:
        flipped = []
        for im in images:
            g = im.copy()
            g[list(f)] *= -1.0
            flipped.append(g)
        images += flipped
    raw = np.stack(images)                   # (G, dim, N)
    stack = np.round(raw, 12)                # comparisons on rounded coordinates
    N = nodes.shape[1]
    pick = np.zeros(N, dtype=int)
    canon = stack[0].copy()
    for k in range(1, stack.shape[0]):
        diff = stack[k] - canon
        first = np.argmax(diff != 0, axis=0)
        larger = diff[first, np.arange(N)] > 0
        canon[:, larger] = stack[k][:, larger]
        pick[larger] = k
    _, index, inverse = np.unique(canon.T, axis=0, return_index=True, return_inverse=True)
    w = np.zeros(index.size)
    np.add.at(w, inverse.ravel(), weights)
    rep = raw[pick[index], :, index].T       # unrounded coordinates of one image per orbit
    return np.ascontiguousarray(rep), w


@dataclass
class PreintegrationStats:
    """Diagnostics of one :meth:`PreintegrationIntegrator.average` call.

    ``lines``/``points``: outer lines (after folding) and points on them; ``switch_lines``:
    lines integrated piecewise; ``switches``: located switches of the global minimum;
    ``breaks``: steep continuous transitions (or unresolved switches) used as piece
    boundaries; ``bisections``: suspect intervals refined; ``unresolved``: switch roots
    still hiding a lower third branch after ``max_rounds``; ``corrected``: points whose
    multistart prox missed the global minimum, repaired by continuation;
    ``segment_nodes``: nodes of the truncated-normal rules; ``newton_solves``: Newton
    minimisations started (the cost unit); ``seconds``: wall time.
    """

    lines: int = 0
    points: int = 0
    switch_lines: int = 0
    switches: int = 0
    rounds: int = 0
    unresolved: int = 0
    corrected: int = 0
    segment_nodes: int = 0
    newton_solves: int = 0
    bisections: int = 0
    breaks: int = 0
    seconds: float = 0.0


@dataclass
class PreintegrationState:
    """Warm-start state handed back to the solver: minimisers at the line points."""

    h: np.ndarray
    stats: PreintegrationStats = field(default_factory=PreintegrationStats)


# ----------------------------------------------------------------------------- integrator
class PreintegrationIntegrator:
    """Energetic averages by pre-integration along ``direction`` (see the module docstring).

    Parameters
    ----------
    dim:
        Number of Gaussians of the module (``len(module.GAUSSIANS)``).
    line_order:
        Gauss--Hermite order of the outer rule over the ``dim - 1`` transverse
        coordinates: one integer (the same on every axis, ``line_order ** (dim - 1)``
        lines) or one per transverse axis (anisotropic tensor rule).
    u_order:
        Gauss--Hermite order along each line: the detection grid, and the rule used on
        lines where nothing needed treatment.
    segment_order:
        Points of the truncated-normal Gauss rule on each piece of a treated line.
    direction:
        ``"auto"`` (estimated from a pilot pass at the first state that has switches,
        then frozen), an axis index, a vector of length ``dim``, or an orthogonal
        ``(dim, dim)`` matrix whose first column is the direction and whose other
        columns are the transverse axes of the outer rule (default: a Householder
        reflection of the direction).
    smooth_tol:
        Threshold on the trapezoid defect of the minimiser across an interval
        (``|h_b - h_a - w (h'_a + h'_b)/2|``, in units of ``h``) above which the interval
        is bisected (see :meth:`_Run._refine`).
    sentinel:
        Zero-weight detection points at ``u = +-sentinel`` (at least one beyond the
        outermost Gauss--Hermite node).
    max_rounds, max_depth, break_width:
        Limits of the verification/splitting rounds, of the bisection depth and the
        width below which a suspect interval becomes a break.
    segment_multistart:
        Seek the minimum at the nodes of the pieces from every start of the module too (not
        only warm from the same piece), in evaluations from every start (``multistart=True``);
        on in :meth:`refined` rules.
    """

    def __init__(self, dim: int, line_order: int | Sequence[int] = 10, u_order: int = 10,
                 segment_order: int = 8, direction: str | int | Sequence[float] | np.ndarray = "auto",
                 smooth_tol: float = 0.005, sentinel: float = 6.0, max_rounds: int = 3,
                 max_depth: int = 12, break_width: float = 1e-3, pilot_orders: tuple[int, int] = (6, 8),
                 u_nodes: np.ndarray | None = None, always_segments: bool = False,
                 segment_multistart: bool = False, backend: str = "auto"):
        if dim < 1:
            raise ParameterError("dim", f"must be >= 1, got {dim}")
        orders = [int(line_order)] * (dim - 1) if np.ndim(line_order) == 0 else [int(v) for v in line_order]
        if len(orders) != dim - 1:
            raise ParameterError("line_order", f"need {dim - 1} orders, got {len(orders)}")
        for name, v in (("line_order", min(orders, default=1)), ("u_order", u_order),
                        ("segment_order", segment_order)):
            if v < 1:
                raise ParameterError(name, f"must be >= 1, got {v}")
        if not smooth_tol > 0:
            raise ParameterError("smooth_tol", f"must be > 0, got {smooth_tol}")
        self.dim = dim
        self.line_orders = tuple(orders)
        self.u_order, self.segment_order = int(u_order), int(segment_order)
        self.smooth_tol, self.break_width, self.max_depth = float(smooth_tol), float(break_width), int(max_depth)
        self.sentinel, self.max_rounds, self.pilot_orders = float(sentinel), int(max_rounds), pilot_orders
        self.always_segments, self.segment_multistart = bool(always_segments), bool(segment_multistart)
        if backend not in ("auto", "numba", "numpy"):
            raise ParameterError("backend", f"unknown backend {backend!r}; use auto, numba or numpy")
        self.backend = backend
        self._basis: np.ndarray | None = self._parse_direction(direction)
        if u_nodes is not None:
            self._u = np.sort(np.asarray(u_nodes, dtype=float))
            self._wu = np.zeros(self._u.size)
            self.always_segments = True
        else:
            u, w = hermite_1d(self.u_order)
            self.sentinel = max(self.sentinel, float(u[-1]) + 1.0)
            self._u = np.concatenate([[-self.sentinel], u, [self.sentinel]])
            self._wu = np.concatenate([[0.0], w, [0.0]])
        if dim > 1:
            rules = [hermite_1d(k) for k in orders]
            grids = np.meshgrid(*[r[0] for r in rules], indexing="ij")
            wgrids = np.meshgrid(*[r[1] for r in rules], indexing="ij")
            self._y = np.stack([g.ravel() for g in grids])
            self._wy = np.prod(np.stack([g.ravel() for g in wgrids]), axis=0)
        else:
            self._y, self._wy = np.zeros((0, 1)), np.ones(1)
        self.last_stats = PreintegrationStats()
        #: the last evaluation's piece rules: (order, sorted keys a + i b, nodes, weights)
        self._piece_rules: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None

    def piece_rules(self, a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """:func:`truncated_normal_rule` on the pieces ``[a, b]``, computed once per distinct piece
        and reused from the last evaluation where a piece recurs bit for bit. Pieces end at the
        lines' switches and breaks, and breaks sit on the bisection grid of the ``u`` rule that all
        lines share: ~2.7e3 distinct pieces among the ~1.1e5 of a fine level at the semantic paper
        point (their rules took ~1 s per evaluation). Between Newton iterates the breaks stay
        put. Each piece's rule depends on its own ends only, so a shared or reused rule is the one
        recomputed."""
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        key = np.empty(a.size, dtype=complex)
        key.real, key.imag = a, b  # assigned, not a + 1j * b: 1j * inf would be nan + inf j
        # sorted distinct pieces (a nan end stays its own piece: nan != nan)
        uniq, inverse = np.unique(key, return_inverse=True, equal_nan=False)
        nodes, weights = np.empty((uniq.size, n)), np.empty((uniq.size, n))
        hit = np.zeros(uniq.size, dtype=bool)
        last = self._piece_rules
        if last is not None and last[0] == n and last[1].size and uniq.size:
            pos = np.minimum(np.searchsorted(last[1], uniq), last[1].size - 1)
            hit = last[1][pos] == uniq
            nodes[hit], weights[hit] = last[2][pos[hit]], last[3][pos[hit]]
        miss = np.flatnonzero(~hit)
        if miss.size:
            # independent per piece: chunks on the kernel threads (the kernel releases the GIL)
            ma, mb = uniq.real[miss], uniq.imag[miss]
            parts = chunk_map(lambda lo, hi: truncated_normal_rule(ma[lo:hi], mb[lo:hi], n), miss.size)
            nodes[miss] = np.concatenate([q for q, _ in parts])
            weights[miss] = np.concatenate([w for _, w in parts])
        self._piece_rules = (n, uniq, nodes, weights)
        return nodes[inverse], weights[inverse]

    def _parse_direction(self, direction) -> np.ndarray | None:
        dim = self.dim
        if isinstance(direction, str):
            if direction != "auto":
                raise ParameterError("direction", f"unknown direction {direction!r}; use 'auto', an axis, "
                                                  "a vector or an orthogonal matrix")
            return None
        if isinstance(direction, (int, np.integer)):
            if not 0 <= direction < dim:
                raise ParameterError("direction", f"axis {direction} out of range for dim={dim}")
            return householder(np.eye(dim)[int(direction)])
        d = np.asarray(direction, dtype=float)
        if d.shape == (dim, dim):
            if not np.allclose(d.T @ d, np.eye(dim), atol=1e-10):
                raise ParameterError("direction", "a matrix direction must be orthogonal")
            return d.copy()
        d = d.ravel()
        if d.size != dim or not np.all(np.isfinite(d)) or np.linalg.norm(d) == 0:
            raise ParameterError("direction", f"need a non-zero finite vector of length {dim}")
        return householder(d / np.linalg.norm(d))

    # ------------------------------------------------------------------ protocol
    @property
    def direction(self) -> np.ndarray | None:
        """The unit pre-integration direction (``None`` while ``"auto"`` is still pending)."""
        return None if self._basis is None else self._basis[:, 0].copy()

    def describe(self) -> str:
        """The integrator's description (level, lines, pieces) for reports and cache keys."""
        d = "auto" if self._basis is None else "[" + ", ".join(f"{v:.3f}" for v in self._basis[:, 0]) + "]"
        lines = "x".join(str(k) for k in self.line_orders) or "1"
        return (f"preintegration(dim={self.dim}, lines=gh[{lines}], u=gh{self.u_order}, "
                f"segments={self.segment_order}, direction={d})")

    def companion(self) -> "PreintegrationIntegrator":
        """A cheaper rule of the same family with the same direction (for error estimates)."""
        cached = self.__dict__.get("_companion")
        if cached is not None and (self._basis is None or cached._basis is not None):
            return cached
        lo = [max(2, k - max(2, k // 3)) for k in self.line_orders]
        self._companion = PreintegrationIntegrator(
            self.dim, lo, max(4, self.u_order - 2), max(3, self.segment_order - 2),
            direction="auto" if self._basis is None else self._basis, smooth_tol=self.smooth_tol,
            sentinel=self.sentinel, max_rounds=self.max_rounds, max_depth=self.max_depth,
            break_width=self.break_width, pilot_orders=self.pilot_orders, backend=self.backend)
        return self._companion

    def refined(self) -> "PreintegrationIntegrator":
        """A finer integrator of the same family and direction (the inverse of :meth:`companion`,
        with multistart on the treated segments): the second solve of an error bar."""
        hi = [k + max(2, k // 3) for k in self.line_orders]
        return PreintegrationIntegrator(
            self.dim, hi, self.u_order + 2, self.segment_order + 2,
            direction="auto" if self._basis is None else self._basis, smooth_tol=0.5 * self.smooth_tol,
            sentinel=self.sentinel, max_rounds=self.max_rounds, max_depth=self.max_depth,
            break_width=self.break_width, pilot_orders=self.pilot_orders, segment_multistart=True,
            backend=self.backend)

    def average(self, module: GeneratedModel, x: np.ndarray, p: np.ndarray, warm: Any = None,
                multistart: bool = True, prox_tol: float = 1e-12) -> EnergeticAverage:
        """``dPsi_y/dx``, ``Psi_y``, the minimisers at the line points and prox diagnostics."""
        x, p = np.asarray(x, dtype=float), np.asarray(p, dtype=float)
        basis = self._basis
        if basis is None:
            d, found = self.estimate_direction(module, x, p, prox_tol=prox_tol)
            basis = householder(d)
            if found:  # freeze: the fixed-point map must not change rule from call to call
                self._basis = basis
        y, wy, odd = self._folded_lines(module, x, basis)
        with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
            out = _Run(self, module, x, p, prox_tol, basis, y, wy).run(warm, multistart)
        # the gradients of the families whose vanishing makes a fold valid are odd under
        # it: their exact average is 0 (the folded rule would not give it)
        out.grad[odd] = 0.0
        self.last_stats = out.state.stats
        return out

    def _folded_lines(self, module: GeneratedModel, x: np.ndarray, basis: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """The outer grid folded by the module's sign-flip ``SYMMETRIES`` valid at ``x``.

        A symmetry ``(families, indices)`` holds when those families are zero in ``x``:
        flipping ``z[indices]`` leaves the minimum and the other families' ``dF/dx``
        unchanged (the pinned families' gradients may flip sign; the solver zeroes them).
        In line coordinates the flip is ``Q^T S Q``; when that is diagonal (``u -> +-u``
        and sign flips of some ``y`` axes) the line through ``y`` and its image have the
        same line integral (the ``u`` rule is symmetric), so only one line per orbit of
        the (symmetric) outer rule is integrated, carrying the orbit's weight.
        """
        if self.dim == 1:
            return self._y, self._wy, []
        flips, odd = [], []
        for fams, idx in module.SYMMETRIES:
            if not all(f not in module.FAMILIES or np.all(x[module.FAMILIES[f]] == 0) for f in fams):
                continue
            S = np.ones(self.dim)
            S[list(idx)] = -1.0
            M = basis.T @ (S[:, None] * basis)
            if np.max(np.abs(M - np.diag(np.diag(M)))) > 1e-12:
                continue
            flips.append(tuple(np.flatnonzero(np.diag(M)[1:] < 0)))
            odd += [i for f in fams for i in module.FAMILIES.get(f, [])]
        flips = tuple(sorted(set(f for f in flips if f)))
        if not flips:
            return self._y, self._wy, []
        key = (flips, basis.tobytes())
        cache = self.__dict__.setdefault("_fold_cache", {})
        if key not in cache:
            cache[key] = fold_sign_flips(self._y, self._wy, flips)
        return (*cache[key], sorted(set(odd)))

    # ------------------------------------------------------------------ direction
    def estimate_direction(self, module: GeneratedModel, x: np.ndarray, p: np.ndarray,
                           prox_tol: float = 1e-12) -> tuple[np.ndarray, bool]:
        """Principal normal of the jump surface at state ``x``, and whether any switch was seen.

        A pilot pre-integration (``pilot_orders`` = outer and ``u`` orders) along the
        first axis, then along the resulting estimate, locates switch points ``z*``; the
        surface normal there is ``grad_z F(h_left) - grad_z F(h_right)`` (envelope
        theorem; central differences of ``bracket``). The direction is the dominant
        eigenvector of ``sum_k w_k n_k n_k^T / |n_k|^2``, ``w_k`` the probability weight of
        switch ``k`` (line weight times ``phi(u*)``). Without switches the first axis is
        returned with ``False`` (any direction is then as good).
        """
        d = np.eye(self.dim)[0]
        if self.dim == 1:
            return d, False
        x, p = np.asarray(x, dtype=float), np.asarray(p, dtype=float)
        found = False
        for _ in range(2):
            pilot = PreintegrationIntegrator(self.dim, self.pilot_orders[0], self.pilot_orders[1], 3,
                                             direction=d, smooth_tol=self.smooth_tol, max_rounds=1,
                                             backend=self.backend)
            with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
                run = _Run(pilot, module, x, p, prox_tol, householder(d))
                run.run(None, True, integrate=False)  # the switch points only: no pieces to integrate
                sw = run.switch_points
                if sw["u"].size == 0:
                    return d, found
                z, eps, grads = sw["z"], 1e-5, []
                for k in range(self.dim):
                    dz = np.zeros((self.dim, 1))
                    dz[k] = eps
                    gL = module.bracket(sw["hL"], z + dz, x, p) - module.bracket(sw["hL"], z - dz, x, p)
                    gR = module.bracket(sw["hR"], z + dz, x, p) - module.bracket(sw["hR"], z - dz, x, p)
                    grads.append((gL - gR) / (2 * eps))
            n = np.array(grads)
            nn = np.linalg.norm(n, axis=0)
            good = np.isfinite(nn) & (nn > 1e-8)
            if not good.any():
                return d, found
            found = True
            n = n[:, good] / nn[good]
            M = (n * sw["w"][good]) @ n.T
            d_new = np.linalg.eigh(M)[1][:, -1]
            d_new = d_new * np.sign(d_new[np.argmax(np.abs(d_new))])
            converged = abs(float(d_new @ d)) > 0.999
            d = d_new
            if converged:
                break
        return d, found


# ----------------------------------------------------------------------------- one evaluation
class _Run:
    """One energetic average at state ``x`` (all lines vectorised)."""

    def __init__(self, integ: PreintegrationIntegrator, module: GeneratedModel, x: np.ndarray, p: np.ndarray,
                 prox_tol: float, basis: np.ndarray, y: np.ndarray | None = None,
                 wy: np.ndarray | None = None):
        self.I, self.mod, self.x, self.p, self.tol = integ, module, x, p, prox_tol
        self.D = module.PROX_DIM
        self.Q = basis
        self.y = integ._y if y is None else y
        # the lines' transverse offsets Q[:, 1:] y, once: z_of then gathers them per node instead
        # of a (dim-1) x N gather and product per call (~1.5e6 nodes on a fine level's pieces)
        self.offsets = self.Q[:, 1:] @ self.y
        self.axis = np.ascontiguousarray(self.Q[:, 0])
        self.wy = integ._wy if wy is None else wy
        self.kernels = compiled(module) if resolve_backend(module, integ.backend) == "numba" else None
        self.stats = PreintegrationStats()
        self.switch_points: dict[str, np.ndarray] | None = None
        self.tol_F = 1e-11
        self.tol_h = 1e-6

    # -------------------------------------------------------------- geometry
    def z_of(self, line: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Nodes ``Q (u, y_line)`` for flat arrays ``line``, ``u`` of the same shape ``(M,)``."""
        return _line_points(self.offsets, self.axis, line, u)

    def newton(self, h0: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Damped Newton from ``h0`` at nodes ``z`` (continuation of a branch): ``(h, F)``."""
        M = h0.shape[1]
        if M == 0:
            return h0.copy(), np.zeros(0)
        self.stats.newton_solves += M
        if self.kernels is not None:
            h, failed, _ = self._kernel(z, h0, 0)
            if failed.any():
                idx = np.flatnonzero(failed)
                h[:, idx] = newton_minimize(self.mod, h0[:, idx], z[:, idx], self.x, self.p, tol=self.tol)[0]
            F = self._bracket(h, z)
        else:
            h, F, _, _ = newton_minimize(self.mod, h0, z, self.x, self.p, tol=self.tol)
        return h, np.where(np.isfinite(F), F, np.inf)

    def gprox(self, z: np.ndarray, warm: np.ndarray | None, multistart: bool = True) -> ProxResult:
        """Global minimum over the module's starts (and ``warm``), as :func:`replica.numeric.prox.prox`."""
        n_starts = self.mod.N_STARTS if (multistart or warm is None) else 1
        self.stats.newton_solves += z.shape[1] * (n_starts + (warm is not None))
        if self.kernels is None or z.shape[1] == 0:
            return prox(self.mod, z, self.x, self.p, warm=warm, tol=self.tol, multistart=multistart)
        h, failed, n_dis = self._kernel(z, warm, n_starts)
        n_fail = int(failed.sum())
        if n_fail:
            idx = np.flatnonzero(failed)
            res = prox(self.mod, z[:, idx], self.x, self.p, warm=None if warm is None else warm[:, idx],
                       tol=self.tol, multistart=True)
            h[:, idx] = res.h
            n_fail = res.n_failed
        F = self._bracket(h, z)
        return ProxResult(h, F, n_dis, n_fail, 0, 0)

    def _bracket(self, h: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The bracket ``F`` at ``(h, z)``: compiled where the kernels are."""
        if self.kernels is not None:
            return self._bracket_kernel(h, z)[0]
        return np.asarray(self.mod.bracket(h, z, self.x, self.p), dtype=float)

    def _bracket_kernel(self, h: np.ndarray, z: np.ndarray, dl: float | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The compiled brackets ``F`` at ``(h, z)`` and, with a step ``dl``, the minimisers'
        slopes along the line direction and where ``H`` was singular (:func:`replica.numeric.kernels.
        node_bracket_slopes`): ``(F, h', singular)``."""
        N, D = z.shape[1], self.D
        h = np.ascontiguousarray(h, dtype=float)
        z = np.ascontiguousarray(z, dtype=float)
        F, hp, ok = np.empty(N), np.zeros((D, N)), np.ones(N, dtype=np.bool_)
        slopes = dl is not None
        dz = np.ascontiguousarray(self.Q[:, 0] * dl) if slopes else np.zeros(z.shape[0])

        def run(a: int, b: int) -> None:  # per node: chunks on the kernel threads
            Fc, hc, oc = np.empty(b - a), np.empty((D, b - a)), np.empty(b - a, dtype=np.bool_)
            self.kernels.node_bracket_slopes(np.ascontiguousarray(z[:, a:b]), np.ascontiguousarray(h[:, a:b]), dz,
                                             float(dl) if slopes else 1.0, slopes, self.x, self.p, Fc, hc, oc)
            F[a:b], hp[:, a:b], ok[a:b] = Fc, hc, oc

        chunk_map(run, N)
        return F, hp, ~ok

    def _kernel(self, z: np.ndarray, warm: np.ndarray | None, n_starts: int
                ) -> tuple[np.ndarray, np.ndarray, int]:
        """The compiled multistart Newton of :mod:`replica.numeric.kernels` (minimisers only)."""
        N, D = z.shape[1], self.D
        h_out = np.empty((D, N))
        failed = np.zeros(N, dtype=np.bool_)
        use_warm = warm is not None
        w_arr = np.ascontiguousarray(warm, dtype=float) if use_warm else np.zeros((D, 1))
        z = np.ascontiguousarray(z, dtype=float)

        def run(a: int, b: int) -> int:  # per node, so the chunking (kernel threads) changes nothing
            h = np.empty((D, b - a))
            w = np.ascontiguousarray(w_arr[:, a:b]) if use_warm else w_arr
            f = np.zeros(b - a, dtype=np.bool_)
            _, nd, _ = self.kernels.node_prox_average(
                np.ascontiguousarray(z[:, a:b]), np.zeros(b - a), w, use_warm, int(n_starts), self.x, self.p,
                float(self.tol), NEWTON_MAX_ITER, AGREE_TOL, h, f, np.zeros(self.x.size))
            h_out[:, a:b], failed[a:b] = h, f
            return int(nd)

        n_dis = sum(chunk_map(run, N))
        return h_out, failed, int(n_dis)

    # -------------------------------------------------------------- main
    def run(self, warm: Any, multistart: bool, integrate: bool = True) -> EnergeticAverage | None:
        """The average at ``self.x`` (warm-started from ``warm``, every module start at the line
        points with ``multistart``); ``integrate=False`` stops once the switch points are
        located (:attr:`switch_points`, all a direction pilot needs) and returns None."""
        t0 = time.perf_counter()
        self.multistart = multistart
        I, D = self.I, self.D
        nL = self.wy.size
        P = I._u.size
        line = np.repeat(np.arange(nL), P)
        uu = np.tile(I._u, nL)
        z = self.z_of(line, uu)
        wh = warm.h if isinstance(warm, PreintegrationState) and warm.h.shape == (D, nL * P) else None
        res = self.gprox(z, wh, multistart)
        h = res.h.reshape(D, nL, P)
        F = res.value.reshape(nL, P)
        n_disagree, n_failed = res.n_disagree, res.n_failed
        self.stats.lines, self.stats.points = nL, nL * P

        # ---- detection on all consecutive pairs, with self-correction of missed minima
        Z = z.reshape(self.I.dim, nL, P)
        pairs_l = np.repeat(np.arange(nL), P - 1)
        pairs_j = np.tile(np.arange(P - 1), nL)
        fw = self._sweeps(h, F, Z)
        for _ in range(3):
            changed = self._correct(h, F, pairs_l, pairs_j, fw)
            if changed.size == 0:
                break
            self.stats.corrected += changed.size
            sel = np.isin(pairs_l * P + pairs_j, changed) | np.isin(pairs_l * P + pairs_j + 1, changed)
            sub = self._continue_pairs(h, F, Z, pairs_l[sel], pairs_j[sel])
            for k in fw:
                fw[k][..., sel] = sub[k]
        # ---- classify every interval; bisect the suspicious ones
        hp = self._hprime(h.reshape(D, -1), z).reshape(D, nL, P)
        iv = dict(line=pairs_l, a=I._u[pairs_j], b=I._u[pairs_j + 1],
                  ha=h[:, pairs_l, pairs_j], hb=h[:, pairs_l, pairs_j + 1],
                  Fa=F[pairs_l, pairs_j], Fb=F[pairs_l, pairs_j + 1],
                  pa=hp[:, pairs_l, pairs_j], pb=hp[:, pairs_l, pairs_j + 1], **fw)
        certain, breaks = self._refine(iv)
        iv = dict(line=certain["line"], a=certain["a"], b=certain["b"], hLa=certain["ha"], hRb=certain["hb"],
                  ga=np.minimum(certain["Fa"] - certain["FB"], 0.0),
                  gb=np.maximum(certain["FF"] - certain["Fb"], 0.0))
        found = self._locate_all(iv)
        self.stats.switches = found["u"].size
        if breaks["line"].size:
            self.stats.breaks = breaks["line"].size
            found = {"line": np.concatenate([found["line"], breaks["line"]]),
                     "u": np.concatenate([found["u"], 0.5 * (breaks["a"] + breaks["b"])]),
                     "hL": np.concatenate([found["hL"], breaks["ha"]], axis=1),
                     "hR": np.concatenate([found["hR"], breaks["hb"]], axis=1)}
            order = np.lexsort((found["u"], found["line"]))
            found = {k: v[..., order] for k, v in found.items()}
        self._record_switch_points(found)
        if not integrate:
            self.stats.seconds = time.perf_counter() - t0
            return None
        # ---- integrate
        G = np.asarray(self.mod.bracket_parameter_gradient(h.reshape(D, -1), z, self.x, self.p))
        nX = G.shape[0]
        vals = np.concatenate([G, F.reshape(1, -1)]).reshape(nX + 1, nL, P)
        line_int = vals @ I._wu  # (nX+1, nL): plain GH sums (sentinels have weight 0)
        switching = np.unique(found["line"])
        self.stats.switch_lines = switching.size
        todo = np.arange(nL) if I.always_segments else switching
        if todo.size:
            # the treated lines' GH sums are replaced by their pieces' (weighted by the lines')
            line_int[:, todo] = 0.0
            total = line_int @ self.wy + self._segments(found, h, todo)
        else:
            total = line_int @ self.wy
        self.stats.seconds = time.perf_counter() - t0
        state = PreintegrationState(h.reshape(D, -1), self.stats)
        return EnergeticAverage(-total[:nX], -float(total[nX]), state, n_disagree, n_failed)

    def _record_switch_points(self, found: dict[str, np.ndarray]) -> None:
        """:attr:`switch_points` (for the direction estimate): the located switches and breaks,
        their nodes and probability weights (line weight times ``phi(u)``)."""
        if found["u"].size:
            zs = self.z_of(found["line"], found["u"])
            wsw = self.wy[found["line"]] * np.exp(-0.5 * found["u"] ** 2)
            self.switch_points = dict(u=found["u"], z=zs, hL=found["hL"], hR=found["hR"], w=wsw, line=found["line"])
        else:
            self.switch_points = dict(u=np.zeros(0), line=np.zeros(0, dtype=int))

    # -------------------------------------------------------------- detection
    def _sweeps(self, h, F, Z) -> dict[str, np.ndarray]:
        """Forward then backward continuation along every line.

        Each point's minimiser is continued to the next point; where the continued
        branch is lower than that point's multistart result, the latter missed the global
        minimum and is replaced, so a minimum found anywhere on a line propagates along
        it. Returns the continuations of every consecutive pair, flattened line-major
        like ``pairs_l, pairs_j``: the forward ones (``hF, FF``: point ``j`` continued to
        ``j + 1``) and the backward ones (``hB, FB``: ``j + 1`` continued to ``j``).
        Forward continuations whose left end changed in the backward sweep are redone.
        With the compiled kernels every line is swept in one kernel call
        (:func:`replica.numeric.kernels.node_line_sweeps`, lines in chunks on the kernel threads; the
        same numbers as the array path, which sweeps all lines one point at a time: ~34
        dispatches of a few thousand nodes per evaluation); a line where a continuation fails
        is redone on the array path.
        """
        if self.kernels is None:
            return self._sweeps_arrays(h, F, Z)
        D, nL, P = h.shape
        h0, F0 = h.copy(), F.copy()  # for the lines the array path redoes
        hF, hB = np.empty((D, nL, P - 1)), np.empty((D, nL, P - 1))
        FF, FB = np.empty((nL, P - 1)), np.empty((nL, P - 1))
        changed = np.zeros((nL, P), dtype=bool)
        failed = np.zeros(nL, dtype=bool)
        Zc = np.ascontiguousarray(Z)
        work = 2 * (P - 1)  # continuations per line: chunks of lines by their share of the work

        def run(a: int, b: int) -> int:
            return int(self.kernels.node_line_sweeps(Zc, h, F, -(-a // work), -(-b // work), self.x, self.p,
                                                     float(self.tol), NEWTON_MAX_ITER, self.tol_F, hF, FF, hB, FB,
                                                     changed, failed))

        self.stats.corrected += sum(chunk_map(run, nL * work))
        ok = ~failed
        self.stats.newton_solves += int(ok.sum()) * work + int(changed[ok, :-1].sum())
        if failed.any():
            bad = np.flatnonzero(failed)
            hs, Fs = h0[:, bad], F0[bad]
            sub = self._sweeps_arrays(hs, Fs, Z[:, bad])
            h[:, bad], F[bad] = hs, Fs
            hF[:, bad], FF[bad] = sub["hF"].reshape(D, -1, P - 1), sub["FF"].reshape(-1, P - 1)
            hB[:, bad], FB[bad] = sub["hB"].reshape(D, -1, P - 1), sub["FB"].reshape(-1, P - 1)
        return dict(hF=hF.reshape(D, -1), FF=FF.reshape(-1), hB=hB.reshape(D, -1), FB=FB.reshape(-1))

    def _sweeps_arrays(self, h, F, Z) -> dict[str, np.ndarray]:
        """:meth:`_sweeps` vectorised over the lines, one point at a time (the numpy backend's
        path, and the compiled path's for lines where a continuation fails)."""
        D, nL, P = h.shape
        hF = np.empty((D, nL, P - 1))
        FF = np.empty((nL, P - 1))
        hB = np.empty((D, nL, P - 1))
        FB = np.empty((nL, P - 1))
        changed_b = np.zeros((nL, P), dtype=bool)
        for direction in (1, -1):
            js = range(P - 1) if direction == 1 else range(P - 2, -1, -1)
            for j in js:
                src, dst = (j, j + 1) if direction == 1 else (j + 1, j)
                hc, Fc = self.newton(h[:, :, src], Z[:, :, dst])
                if direction == 1:
                    hF[:, :, j], FF[:, j] = hc, Fc
                else:
                    hB[:, :, j], FB[:, j] = hc, Fc
                low = Fc < F[:, dst] - self.tol_F * (1.0 + np.abs(F[:, dst]))
                if low.any():
                    h[:, low, dst], F[low, dst] = hc[:, low], Fc[low]
                    self.stats.corrected += int(low.sum())
                    if direction == -1:
                        changed_b[low, dst] = True
        redo_l, redo_j = np.nonzero(changed_b[:, :-1])
        if redo_l.size:
            hc, Fc = self.newton(h[:, redo_l, redo_j], Z[:, redo_l, redo_j + 1])
            hF[:, redo_l, redo_j], FF[redo_l, redo_j] = hc, Fc
        return dict(hF=hF.reshape(D, -1), FF=FF.reshape(-1), hB=hB.reshape(D, -1), FB=FB.reshape(-1))

    def _hprime(self, h: np.ndarray, z: np.ndarray) -> np.ndarray:
        """``dh/du`` of the minimiser along the line (implicit function theorem).

        ``H h' = -d/du grad_h F``; the mixed derivative by central differences of the
        module's gradient in ``z`` along the direction. Non-finite values become 0.
        """
        if h.shape[1] == 0:
            return h.copy()
        dl = 1e-5
        if self.kernels is not None:
            _, hp, singular = self._bracket_kernel(h, z, dl)
            if singular.any():  # the numpy path's pseudo-inverse there
                hp[:, singular] = self._hprime_numpy(h[:, singular], z[:, singular], dl)
            return hp
        return self._hprime_numpy(h, z, dl)

    def _hprime_numpy(self, h: np.ndarray, z: np.ndarray, dl: float) -> np.ndarray:
        """:meth:`_hprime` in numpy array code (the ``numpy`` backend, and singular ``H``)."""
        dz = self.Q[:, :1] * dl
        _, gp, _ = self.mod.bracket_newton(h, z + dz, self.x, self.p)
        _, gm, _ = self.mod.bracket_newton(h, z - dz, self.x, self.p)
        _, _, H = self.mod.bracket_newton(h, z, self.x, self.p)
        D = h.shape[0]
        Hm = H.T.reshape(-1, D, D)
        Hm = 0.5 * (Hm + Hm.transpose(0, 2, 1))
        rhs = -((gp - gm) / (2 * dl)).T[:, :, None]
        try:
            hp = np.linalg.solve(Hm, rhs)[:, :, 0].T
        except np.linalg.LinAlgError:
            hp = np.einsum("mij,mj->im", np.linalg.pinv(Hm), rhs[:, :, 0])
        return np.where(np.isfinite(hp), hp, 0.0)

    def _switch_flags(self, iv) -> np.ndarray:
        """Intervals whose end minima are proven to lie on different branches."""
        fwd = (iv["FF"] - iv["Fb"] > self.tol_F * (1.0 + np.abs(iv["Fb"]))) & (_dist(iv["hF"], iv["hb"]) > self.tol_h)
        bwd = (iv["FB"] - iv["Fa"] > self.tol_F * (1.0 + np.abs(iv["Fa"]))) & (_dist(iv["hB"], iv["ha"]) > self.tol_h)
        return fwd | bwd

    def _refine(self, iv) -> tuple[dict, dict]:
        """Split the intervals into proven switches, smooth ones and unresolved *breaks*.

        An interval is *suspect* when the change of the minimiser across it disagrees
        with its derivatives at both ends (trapezoid rule for ``h``: the defect is
        ``~ Delta^3 h^(3) / 12`` on a smooth branch, ``~ |jump|`` across a switch). That
        catches the switches that continuation cannot prove (a branch that folds inside
        the interval, so that both continuations land on the same minimum) and the steep
        but continuous transitions near the edge of the switching surface (cusps).
        Suspect intervals are bisected (global prox at the midpoint) until they are
        proven switches, smooth, or narrower than ``break_width``; the latter become
        segment boundaries (*breaks*) without a root search.
        """
        I = self.I
        iv = dict(iv, origin=np.arange(iv["line"].size))
        keys = list(iv)
        certain, breaks, mids = [], [], []
        for depth in range(I.max_depth + 1):
            if iv["line"].size == 0:
                break
            sw = self._switch_flags(iv)
            w = iv["b"] - iv["a"]
            defect = _dist(iv["hb"] - iv["ha"], 0.5 * w * (iv["pa"] + iv["pb"]))
            sus = ~sw & (defect > I.smooth_tol)
            certain.append({k: v[..., sw] for k, v in iv.items()})
            small = sus & ((w <= I.break_width) | (depth == I.max_depth))
            breaks.append({k: v[..., small] for k, v in iv.items()})
            bis = sus & ~small
            self.stats.bisections += int(bis.sum())
            if not bis.any():
                break
            iv = self._bisect({k: v[..., bis] for k, v in iv.items()})
            m = iv["line"].size // 2  # midpoints are the right ends of the left halves
            mids.append(dict(origin=iv["origin"][:m], line=iv["line"][:m], c=iv["b"][:m], h=iv["hb"][:, :m],
                             steep=np.max(np.abs(iv["pb"][:, :m]), axis=0)))
        certain, breaks = self._cat(certain, keys), self._cat(breaks, keys)
        # A suspect interval that turned out smooth after bisection holds a steep but
        # continuous transition: break the line at its steepest refined point, so that
        # the near-singularity sits at the end of a Gauss segment, not inside one. Every
        # such interval gets its break: keeping only those whose refined slope exceeds twice
        # the end slopes (3x faster on the paper's point) moved qhat by 2e-4 relative at every
        # level, 7 times the certified reference's error (2026-11-24, docs/explanation/quadrature.md).
        if mids:
            mids = self._cat(mids, ["origin", "line", "c", "h", "steep"])
            done = np.isin(mids["origin"], np.concatenate([certain["origin"], breaks["origin"]]))
            mids = {k: v[..., ~done] for k, v in mids.items()}
            # only where the refinement uncovered a slope well above the interval's end slopes
            order = np.lexsort((-mids["steep"], mids["origin"]))
            first = order[np.r_[True, mids["origin"][order][1:] != mids["origin"][order][:-1]]] if order.size else order
            extra = dict(line=mids["line"][first], a=mids["c"][first], b=mids["c"][first],
                         ha=mids["h"][:, first], hb=mids["h"][:, first])
            breaks = {k: np.concatenate([breaks[k], extra[k]], axis=-1) for k in extra}
        return certain, breaks

    @staticmethod
    def _cat(parts, keys) -> dict:
        return {k: np.concatenate([p[k] for p in parts], axis=-1) for k in keys}

    def _bisect(self, iv) -> dict:
        """Both halves of every interval, with a global minimum at the midpoint."""
        line, a, b = iv["line"], iv["a"], iv["b"]
        c = 0.5 * (a + b)
        zc = self.z_of(line, c)
        g = self.gprox(zc, iv["ha"], True)
        hc, Fc = g.h, g.value
        # the continuation b -> c (right half's backward one), also a candidate for c's minimum
        hn, Fn = self.newton(iv["hb"], zc)
        lower = Fn < Fc - self.tol_F * (1.0 + np.abs(Fc))
        hc[:, lower], Fc[lower] = hn[:, lower], Fn[lower]
        pc = self._hprime(hc, zc)
        za, zb = self.z_of(line, a), self.z_of(line, b)
        # the other continuations: a -> c, c -> a (left half); c -> b (right half)
        H0 = np.concatenate([iv["ha"], hc, hc], axis=1)
        Z0 = np.concatenate([zc, za, zb], axis=1)
        hh, FF = self.newton(H0, Z0)
        m = line.size
        s = [slice(k * m, (k + 1) * m) for k in range(3)]
        left = dict(origin=iv["origin"], line=line, a=a, b=c, ha=iv["ha"], hb=hc, Fa=iv["Fa"], Fb=Fc,
                    pa=iv["pa"], pb=pc, hF=hh[:, s[0]], FF=FF[s[0]], hB=hh[:, s[1]], FB=FF[s[1]])
        right = dict(origin=iv["origin"], line=line, a=c, b=b, ha=hc, hb=iv["hb"], Fa=Fc, Fb=iv["Fb"],
                     pa=pc, pb=iv["pb"], hF=hh[:, s[2]], FF=FF[s[2]], hB=hn, FB=Fn)
        return {k: np.concatenate([left[k], right[k]], axis=-1) for k in left}

    def _continue_pairs(self, h, F, Z, pl, pj) -> dict[str, np.ndarray]:
        """Continue the minimiser of point ``j`` to ``j + 1`` (forward) and back."""
        z_next, z_this = Z[:, pl, pj + 1], Z[:, pl, pj]
        hh = np.concatenate([h[:, pl, pj], h[:, pl, pj + 1]], axis=1)
        zz = np.concatenate([z_next, z_this], axis=1)
        hc, Fc = self.newton(hh, zz)
        m = pl.size
        return dict(hF=hc[:, :m], FF=Fc[:m], hB=hc[:, m:], FB=Fc[m:])

    def _correct(self, h, F, pl, pj, fw) -> np.ndarray:
        """Replace a point's minimum by a continued one that is lower (a missed global minimum)."""
        P = F.shape[1]
        cand_idx = np.concatenate([pl * P + pj + 1, pl * P + pj])
        cand_F = np.concatenate([fw["FF"], fw["FB"]])
        cand_h = np.concatenate([fw["hF"], fw["hB"]], axis=1)
        Fflat = F.reshape(-1)
        better = cand_F < Fflat[cand_idx] - self.tol_F * (1.0 + np.abs(Fflat[cand_idx]))
        if not better.any():
            return np.zeros(0, dtype=int)
        ci, cF, ch = cand_idx[better], cand_F[better], cand_h[:, better]
        order = np.lexsort((cF, ci))  # lowest F first for each index
        ci, cF, ch = ci[order], cF[order], ch[:, order]
        first = np.r_[True, ci[1:] != ci[:-1]]
        ci, cF, ch = ci[first], cF[first], ch[:, first]
        hflat = h.reshape(h.shape[0], -1)
        Fflat[ci] = cF
        hflat[:, ci] = ch
        return ci

    # -------------------------------------------------------------- location
    def _locate_all(self, iv: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {k: [] for k in ("line", "u", "hL", "hR")}
        for rnd in range(self.I.max_rounds + 1):
            if iv["line"].size == 0:
                break
            self.stats.rounds = rnd + 1
            u, hL, hR, FL, FR = self._illinois(iv)
            zs = self.z_of(iv["line"], u)
            g = self.gprox(zs, hL, True)
            Fmin = np.minimum(FL, FR)
            bad = g.value < Fmin - 10 * self.tol_F * (1.0 + np.abs(Fmin))
            if rnd == self.I.max_rounds:
                self.stats.unresolved += int(bad.sum())
                bad[:] = False
            ok = ~bad
            out["line"].append(iv["line"][ok])
            out["u"].append(u[ok])
            out["hL"].append(hL[:, ok])
            out["hR"].append(hR[:, ok])
            if not bad.any():
                break
            iv = self._split(iv, bad, u, g.h, g.value)
        D = self.D
        res = {k: (np.concatenate(v, axis=-1) if v else np.zeros((D, 0) if k[0] == "h" else 0))
               for k, v in out.items()}
        res["line"] = res["line"].astype(int)
        order = np.lexsort((res["u"], res["line"]))
        return {k: (v[..., order]) for k, v in res.items()}

    def _illinois(self, iv):
        """Vectorised Illinois regula falsi for ``g(u) = F_left(u) - F_right(u)`` on ``[a, b]``."""
        a, b = iv["a"].copy(), iv["b"].copy()
        ga, gb = iv["ga"].copy(), iv["gb"].copy()
        hLa, hRb = iv["hLa"].copy(), iv["hRb"].copy()
        line = iv["line"]
        M = a.size
        u = 0.5 * (a + b)
        hL, hR = hLa.copy(), hRb.copy()
        FL, FR = np.zeros(M), np.zeros(M)
        side = np.zeros(M, dtype=int)      # last retained side (+1: a moved, -1: b moved)
        bisect = (ga >= 0) | (gb <= 0)     # no usable secant values: bisect first
        width0 = b - a
        active = np.arange(M)
        for it in range(80):
            if active.size == 0:
                break
            A = active
            den = gb[A] - ga[A]
            sec = a[A] - ga[A] * (b[A] - a[A]) / np.where(den != 0, den, 1.0)
            mid = 0.5 * (a[A] + b[A])
            use_mid = bisect[A] | ~np.isfinite(sec) | (sec <= a[A]) | (sec >= b[A]) | (den == 0)
            # every 4th step on intervals that shrink slowly: bisect
            use_mid |= (it % 4 == 3) & (b[A] - a[A] > 0.25 * width0[A])
            ut = np.where(use_mid, mid, sec)
            zt = self.z_of(line[A], ut)
            hc, Fc = self.newton(np.concatenate([hLa[:, A], hRb[:, A]], axis=1), np.concatenate([zt, zt], axis=1))
            m = A.size
            hLt, FLt, hRt, FRt = hc[:, :m], Fc[:m], hc[:, m:], Fc[m:]
            u[A], hL[:, A], hR[:, A], FL[A], FR[A] = ut, hLt, hRt, FLt, FRt
            g = FLt - FRt
            collapsed = _dist(hLt, hRt) <= self.tol_h
            # collapsed: the branch that moved least is the one that exists there
            left_exists = _dist(hLt, hLa[:, A]) <= _dist(hRt, hRb[:, A])
            go_right = np.where(collapsed, left_exists, g <= 0)     # u* is right of ut -> a = ut
            ia, ib = A[go_right], A[~go_right]
            # Illinois: halve the g retained twice in a row
            gb[ia[side[ia] == 1]] *= 0.5
            ga[ib[side[ib] == -1]] *= 0.5
            a[ia], hLa[:, ia] = ut[go_right], hLt[:, go_right]
            ga[ia] = np.where(collapsed[go_right], ga[ia], g[go_right])
            b[ib], hRb[:, ib] = ut[~go_right], hRt[:, ~go_right]
            gb[ib] = np.where(collapsed[~go_right], gb[ib], g[~go_right])
            side[ia], side[ib] = 1, -1
            bisect[A] = collapsed | (ga[A] >= 0) | (gb[A] <= 0)
            scale = 1.0 + np.abs(FLt)
            done = ((b[A] - a[A]) <= 1e-11 * (1.0 + np.abs(ut))) | (~collapsed & (np.abs(g) <= 1e-15 * scale))
            active = A[~done]
        # final branch values at the root estimate: left from a, right from b
        zt = self.z_of(line, u)
        hc, Fc = self.newton(np.concatenate([hLa, hRb], axis=1), np.concatenate([zt, zt], axis=1))
        return u, hc[:, :M], hc[:, M:], Fc[:M], Fc[M:]

    def _split(self, iv, bad, u, hg, Fg):
        """Two half-intervals (with a fresh detection) for roots where a third branch is lower."""
        k = np.flatnonzero(bad)
        line = iv["line"][k]
        a, b, us = iv["a"][k], iv["b"][k], u[k]
        hA, hB_, hM = iv["hLa"][:, k], iv["hRb"][:, k], hg[:, k]
        # left half [a, u*] : left global hA, right global hM; right half [u*, b]: hM, hB_
        L = np.concatenate([line, line])
        A_ = np.concatenate([a, us])
        B_ = np.concatenate([us, b])
        hl = np.concatenate([hA, hM], axis=1)
        hr = np.concatenate([hM, hB_], axis=1)
        za, zb = self.z_of(L, A_), self.z_of(L, B_)
        hc, Fc = self.newton(np.concatenate([hl, hr], axis=1), np.concatenate([zb, za], axis=1))
        m = L.size
        hF, FF, hBk, FB = hc[:, :m], Fc[:m], hc[:, m:], Fc[m:]
        Fl, Fr = self._bracket(hl, za), self._bracket(hr, zb)
        fwd = (FF - Fr > self.tol_F * (1 + np.abs(Fr))) & (_dist(hF, hr) > self.tol_h)
        bwd = (FB - Fl > self.tol_F * (1 + np.abs(Fl))) & (_dist(hBk, hl) > self.tol_h)
        s = fwd | bwd
        return dict(line=L[s], a=A_[s], b=B_[s], hLa=hl[:, s], hRb=hr[:, s],
                    ga=np.minimum(Fl - FB, 0.0)[s], gb=np.maximum(FF - Fr, 0.0)[s],
                    hRa=hBk[:, s], hLb=hF[:, s])

    # -------------------------------------------------------------- segments
    def _segments(self, found, h, lines):
        """Truncated-normal Gauss rules on the smooth pieces of ``lines`` (with or without switches):
        their sum over the pieces, weighted by the lines' outer weights, of ``(dF/dx, F)``."""
        I = self.I
        n = I.segment_order
        D = self.D
        key = np.concatenate([found["line"], lines, lines])
        val = np.concatenate([found["u"], np.full(lines.size, -np.inf), np.full(lines.size, np.inf)])
        hL = np.concatenate([found["hL"], np.full((D, 2 * lines.size), np.nan)], axis=1)
        hR = np.concatenate([found["hR"], np.full((D, 2 * lines.size), np.nan)], axis=1)
        order = np.lexsort((val, key))
        key, val, hL, hR = key[order], val[order], hL[:, order], hR[:, order]
        pair = np.flatnonzero(key[:-1] == key[1:])
        seg_line, seg_a, seg_b = key[pair], val[pair], val[pair + 1]
        # warm starts at a piece's ends: the right branch of the switch on its left and
        # the left branch of the switch on its right
        hl_end, hr_end = np.ascontiguousarray(hR[:, pair]), np.ascontiguousarray(hL[:, pair + 1])
        nodes, weights = I.piece_rules(seg_a, seg_b, n)
        N = seg_line.size * n
        pieces = (int(n), np.ascontiguousarray(seg_line), np.ascontiguousarray(seg_a), np.ascontiguousarray(seg_b),
                  np.ascontiguousarray(nodes), hl_end, hr_end, np.ascontiguousarray(I._u),
                  np.ascontiguousarray(h), self.axis, self.offsets)
        # every start on the pieces only in evaluations from every start (the solver confirms
        # each fixed point with one): the warm-start evaluations of a Newton solve skip them
        multistart = self.I.segment_multistart and self.multistart
        self.stats.segment_nodes += N
        wn = (self.wy[seg_line][:, None] * weights).reshape(-1)  # line weight x piece weight
        if self.kernels is not None:
            kernel = _compiled_piece_kernel()  # looked up here, not first in the kernel threads
            return self._weighted_sums(N, lambda idx: self._piece_nodes(idx, pieces, kernel), wn, multistart)
        z, warm = _piece_nodes_numpy(np.arange(N), *pieces)
        res = self.gprox(z, warm, multistart=multistart)
        G = np.asarray(self.mod.bracket_parameter_gradient(res.h, z, self.x, self.p))
        return np.concatenate([G, res.value[None, :]]) @ wn

    def _piece_nodes(self, idx: np.ndarray, pieces: tuple, kernel) -> tuple[np.ndarray, np.ndarray]:
        """``(z, warm)`` of the pieces' nodes ``idx`` (:func:`_piece_nodes_numpy`), by the compiled
        ``kernel`` (:func:`_compiled_piece_kernel`)."""
        z, warm = np.empty((self.axis.size, idx.size)), np.empty((self.D, idx.size))
        kernel(np.ascontiguousarray(idx, dtype=np.int64), *pieces, z, warm)
        return z, warm

    def _weighted_sums(self, N: int, nodes_at, w: np.ndarray, multistart: bool) -> np.ndarray:
        """``sum_j w_j (dF/dx, F)`` at the global minimisers of the ``N`` nodes whose ``(z, warm
        start)`` ``nodes_at(idx)`` gives, fused in the compiled kernel and built chunk by chunk on
        the kernel threads (no per-node arrays in the main thread: the ~1e6 nodes of a fine
        level's pieces)."""
        D, nx = self.D, self.x.size
        n_starts = self.mod.N_STARTS if multistart else 1  # as gprox: the warm start and the first
        self.stats.newton_solves += N * (n_starts + 1)
        w = np.ascontiguousarray(w, dtype=float)
        failed = np.zeros(N, dtype=np.bool_)

        def run(a: int, b: int) -> np.ndarray:
            z, warm = nodes_at(np.arange(a, b))
            grad = np.zeros(nx)
            psi, _, _ = self.kernels.node_prox_average(
                z, w[a:b], warm, True, int(n_starts), self.x, self.p, float(self.tol), NEWTON_MAX_ITER, AGREE_TOL,
                np.empty((D, b - a)), failed[a:b], grad)
            return np.append(grad, psi)

        out = np.sum(chunk_map(run, N), axis=0)
        idx = np.flatnonzero(failed)
        if idx.size:  # no start converged in the kernel: the robust numpy prox, as in gprox
            z, warm = nodes_at(idx)
            res = prox(self.mod, z, self.x, self.p, warm=warm, tol=self.tol, multistart=True)
            G = np.asarray(self.mod.bracket_parameter_gradient(res.h, z, self.x, self.p))
            out += np.concatenate([G, np.asarray(res.value)[None, :]]) @ w[idx]
        return out


# ----------------------------------------------------------------------------- factory
#: (outer order per transverse axis, u_order, segment_order, smooth_tol) per accuracy level;
#: measurements behind the choice in docs/explanation/quadrature.md.
ACCURACY = {"fast": (8, 8, 6, 0.01), "default": (14, 12, 10, 0.005), "high": (20, 12, 10, 0.005)}


def make_integrator(module: GeneratedModel, accuracy: str = "default",
                    direction: str | int | Sequence[float] | np.ndarray = "auto",
                    **options: Any) -> PreintegrationIntegrator:
    """The pre-integration integrator for ``module`` at an accuracy level (``fast|default|high``).

    ``direction`` and ``options`` are passed on to :class:`PreintegrationIntegrator`.
    """
    if accuracy not in ACCURACY:
        raise ParameterError("accuracy", f"unknown accuracy {accuracy!r}; use {', '.join(ACCURACY)}")
    lo, uo, so, tol = ACCURACY[accuracy]
    options.setdefault("smooth_tol", tol)
    return PreintegrationIntegrator(len(module.GAUSSIANS), lo, uo, so, direction=direction, **options)

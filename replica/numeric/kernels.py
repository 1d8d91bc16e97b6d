"""The generic numeric kernels of the energetic and test averages, one quadrature node at a time.

These functions are the model-independent half of the compiled path: the multistart damped
Newton prox at every node (:func:`node_prox_average`, the same algorithm as
:func:`replica.numeric.prox.prox` on node arrays), its modified Newton direction and line search, and
the test-point average of the declared observables (:func:`node_test_average`). They call the
model's *leaves* -- per-node scalar functions the code generator writes into every generated
module (``node_constants``, ``node_bracket_newton``, ``node_parameter_gradient``,
``node_starts``, ``node_test_observables``, ``node_weight``) -- and its sizes (``PROX_DIM``, ``N_STARTS``,
``N_CONSTANTS``, ``N_OBSERVABLES``) as module globals.

:mod:`replica.numeric.compiled` assembles, per model, one *compiled unit*: the model's leaves followed
by the source of the functions below (PyDy's split: one generic runtime in the library, the
backend compiles only the model's arrays), and JIT-compiles it with numba, cached on disk.
The stubs below only document the leaves' signatures and make this module importable on its
own; a unit assembled with ``jit=False`` runs the same code in plain Python (the tests use it).

Plain loops over scalars and small arrays: what numba compiles well. Same results as the numpy
path to round-off, 5-10x faster, O(nodes) memory.
"""
from __future__ import annotations

import math

import numpy as np

#: the generic kernels, in dependency order (each may call the ones before it and the leaves)
KERNEL_NAMES = ("newton_scratch", "direction_1x1", "direction_2x2", "min_eigen_2x2", "node_direction", "node_newton", "node_min_eigen", "node_off_saddle",
                "node_prox_average", "node_start_minima", "node_bracket_slopes", "node_line_sweeps",
                "node_test_average", "node_local_descent", "node_local_average")

# --------------------------------------------------------------------------- the model's leaves
# Bound per model in the compiled unit (replica.numeric.compiled); stubs here.
PROX_DIM = 1        # dimension of the inner minimisation (the student fields h)
N_STARTS = 1        # starts of the inner minimisation per node
N_CONSTANTS = 1     # per-node constants of the bracket (subexpressions free of h)
N_OBSERVABLES = 1   # declared test-point observables


def node_constants(z, x, p, c):  # pragma: no cover - stub, see above
    """Fill ``c`` with the subexpressions of the bracket that do not depend on ``h`` at node ``z``."""
    raise NotImplementedError("bound to the model's generated leaf in the compiled unit")


def node_bracket_newton(h, c, g, H):  # pragma: no cover - stub
    """Return ``F(h)``; fill ``g = dF/dh`` and ``H = d2F/dh2`` (row-major) from the node constants ``c``."""
    raise NotImplementedError("bound to the model's generated leaf in the compiled unit")


def node_parameter_gradient(h, z, x, p, G):  # pragma: no cover - stub
    """Fill ``G = dF/dx`` at fixed ``h`` (envelope theorem)."""
    raise NotImplementedError("bound to the model's generated leaf in the compiled unit")


def node_starts(z, x, p, out):  # pragma: no cover - stub
    """Fill ``out`` (``N_STARTS * PROX_DIM``) with the starting points of the inner minimisation."""
    raise NotImplementedError("bound to the model's generated leaf in the compiled unit")


def node_test_observables(z, x, p, out):  # pragma: no cover - stub
    """Fill ``out`` with the integrands of the test-point observables at node ``z``."""
    raise NotImplementedError("bound to the model's generated leaf in the compiled unit")


def node_weight(z, x, p):  # pragma: no cover - stub
    """A teacher channel's label law ``W(y | z; x)`` at node ``z`` (1.0 without a channel)."""
    raise NotImplementedError("bound to the model's generated leaf in the compiled unit")


#: the leaves above, in the order the compiled unit defines them (after the scalar helpers they call)
LEAF_NAMES = ("node_constants", "node_bracket_newton", "node_parameter_gradient", "node_starts",
              "node_test_observables", "node_weight")
#: module-level sizes the kernels read
SIZE_NAMES = ("PROX_DIM", "N_STARTS", "N_CONSTANTS", "N_OBSERVABLES")


# --------------------------------------------------------------------------- generic kernels
def newton_scratch(D):
    """The work arrays of :func:`node_newton` for ``PROX_DIM = D``, once per kernel call:
    ``(g, H, d, trial, g2, H2, work)``."""
    return (np.empty(D), np.empty(D * D), np.empty(D), np.empty(D), np.empty(D), np.empty(D * D),
            np.zeros((D, D)))


# The closed forms below are written with numpy's ufuncs only: numba compiles them for one node (the
# kernels here), numpy runs the same functions on arrays of nodes (replica.numeric.prox), so both
# backends share one implementation of each formula (bit for bit: numba maps np.sqrt, np.cos, ... on
# scalars to the functions math.* gives it).
def direction_1x1(hess, g, floor):
    """The modified Newton step ``-g / max(|hess|, floor)`` of a one-dimensional prox."""
    return -g / np.maximum(np.abs(hess), floor)


def direction_2x2(a, b, c, g0, g1, floor):
    """The modified Newton direction ``-|H|^{-1} g`` of the symmetric ``H = [[a, b], [b, c]]`` with its
    eigenvalues replaced by ``max(|lambda|, floor)``, in closed form: ``(d0, d1)``."""
    half_tr = 0.5 * (a + c)
    half_diff = 0.5 * (a - c)
    rad = np.sqrt(half_diff * half_diff + b * b)
    l1 = half_tr + rad  # l1 >= l2
    l2 = half_tr - rad
    t = 0.5 * np.arctan2(b, half_diff)  # unit eigenvector of l1: (cos t, sin t), tan 2t = 2b / (a - c)
    u1 = np.cos(t)
    u2 = np.sin(t)
    c1 = (u1 * g0 + u2 * g1) / np.maximum(np.abs(l1), floor)
    c2 = (-u2 * g0 + u1 * g1) / np.maximum(np.abs(l2), floor)
    return -(u1 * c1 - u2 * c2), -(u2 * c1 + u1 * c2)


def min_eigen_2x2(a, b, c):
    """The smaller eigenvalue of the symmetric ``[[a, b], [b, c]]``, its unit eigenvector and the
    larger ``|eigenvalue|``: ``(lambda_min, u0, u1, max |lambda|)``."""
    half_tr = 0.5 * (a + c)
    half_diff = 0.5 * (a - c)
    rad = np.sqrt(half_diff * half_diff + b * b)
    t = 0.5 * np.arctan2(b, half_diff)
    # the eigenvector of the smaller eigenvalue: orthogonal to (cos t, sin t)
    return half_tr - rad, -np.sin(t), np.cos(t), np.maximum(np.abs(half_tr + rad), np.abs(half_tr - rad))


def node_direction(g, H, d, floor, work):
    """d = -|H|^{-1} g with the eigenvalues of H replaced by max(|lambda|, floor).

    Same modified Newton direction as replica.numeric.prox.newton_direction: closed forms for
    PROX_DIM = 1, 2 (:func:`direction_1x1`, :func:`direction_2x2`, shared with it); above, a
    Cholesky solve when H is safely positive definite (then |H| = H), else an eigendecomposition.
    ``work`` is (PROX_DIM, PROX_DIM) scratch.
    """
    D = PROX_DIM  # the unit's constant (g has PROX_DIM entries): numba compiles this dimension's branch alone
    if D == 1:
        d[0] = direction_1x1(H[0], g[0], floor)
        return
    if D == 2:
        d[0], d[1] = direction_2x2(H[0], 0.5 * (H[1] + H[2]), H[3], g[0], g[1], floor)
        return
    # Cholesky of the symmetrised H (lower triangle in work); pivots must exceed floor.
    pd = True
    for i in range(D):
        for j in range(i + 1):
            s = 0.5 * (H[i * D + j] + H[j * D + i])
            for k in range(j):
                s -= work[i, k] * work[j, k]
            if i == j:
                if not s > floor:
                    pd = False
                    break
                work[i, i] = math.sqrt(s)
            else:
                work[i, j] = s / work[j, j]
        if not pd:
            break
    if pd:
        for i in range(D):
            s = -g[i]
            for k in range(i):
                s -= work[i, k] * d[k]
            d[i] = s / work[i, i]
        for i in range(D - 1, -1, -1):
            s = d[i]
            for k in range(i + 1, D):
                s -= work[k, i] * d[k]
            d[i] = s / work[i, i]
        return
    for i in range(D):
        for j in range(D):
            work[i, j] = 0.5 * (H[i * D + j] + H[j * D + i])
    lam, U = np.linalg.eigh(work)
    for i in range(D):
        d[i] = 0.0
    for k in range(D):
        c = 0.0
        for i in range(D):
            c += U[i, k] * g[i]
        c /= max(abs(lam[k]), floor)
        for i in range(D):
            d[i] -= U[i, k] * c


def node_newton(h, c, tol, max_iter, step_tol, g, H, d, trial, g2, H2, work, sols, solok, nprev,
                snap):
    """Damped Newton from h (overwritten) at one node (constants c).

    Returns (F, converged, match). The convergence rules of replica.numeric.prox.newton_minimize:
    |dF/dh|_inf < tol, or a modified-Newton step below step_tol (1 + |h|_inf), or no
    Armijo decrease even at step 2^-30, or a decrease at round-off level. The trial
    point's evaluation (value, gradient, Hessian) is reused as the next iterate's.
    match >= 0: an iterate came within snap (1 + |h*|_inf) of the converged minimiser
    sols[match] of an earlier start (solok[match]) among the first nprev: deep inside
    its quadratic basin, so this start converges to it and is stopped there.
    """
    D = h.shape[0]
    F = node_bracket_newton(h, c, g, H)
    for _ in range(max_iter):
        for s in range(nprev):
            if solok[s]:
                dist = 0.0
                scale = 0.0
                for i in range(D):
                    dist = max(dist, abs(h[i] - sols[s, i]))
                    scale = max(scale, abs(sols[s, i]))
                if dist <= snap * (1.0 + scale):
                    return F, True, s
        if not math.isfinite(F):
            return F, False, -1
        gmax = 0.0
        for i in range(D):
            if not math.isfinite(g[i]):
                return F, False, -1
            gmax = max(gmax, abs(g[i]))
        node_direction(g, H, d, 1e-8, work)
        dmax = 0.0
        hmax = 0.0
        slope = 0.0
        for i in range(D):
            dmax = max(dmax, abs(d[i]))
            hmax = max(hmax, abs(h[i]))
            slope += g[i] * d[i]
        if gmax < tol:
            # Converged: one more (unevaluated) Newton step where it is tiny leaves an error ~ step^2
            # instead of ~ |g| / H, a bias every rule would share (1e-12 on the numbers at tol 1e-12).
            if dmax <= step_tol * (1.0 + hmax):
                for i in range(D):
                    h[i] += d[i]
            return F, True, -1
        if -slope <= 1e-12 * (1.0 + abs(F)):
            # The step can lower F by less than F's round-off resolves (|g| ~ 1e-8): Armijo on F
            # would stop by chance, leaving |g| there (noise of ~1e-11 in the averages from node to
            # node and state to state). The gradient still resolves it: take the full step while
            # it shrinks the gradient.
            for i in range(D):
                trial[i] = h[i] + d[i]
            Ft = node_bracket_newton(trial, c, g2, H2)
            g2max = 0.0
            for i in range(D):
                g2max = max(g2max, abs(g2[i]))
            if not (math.isfinite(Ft) and g2max < gmax):
                return F, True, -1
            for i in range(D):
                h[i] = trial[i]
                g[i] = g2[i]
            for i in range(D * D):
                H[i] = H2[i]
            F = Ft
            continue
        if dmax <= step_tol * (1.0 + hmax):
            # Take the tiny step without evaluating: the error left is ~ step^2 (returning h
            # itself would leave an error ~ step, i.e. 1e-8 noise in the envelope gradient).
            for i in range(D):
                h[i] += d[i]
            return F, True, -1
        t = 1.0
        accepted = False
        Ft = F
        for _ls in range(30):
            for i in range(D):
                trial[i] = h[i] + t * d[i]
            Ft = node_bracket_newton(trial, c, g2, H2)
            if math.isfinite(Ft) and Ft <= F + 1e-4 * t * slope:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            return F, True, -1
        small = (F - Ft) <= 1e-15 * (1.0 + abs(F))
        for i in range(D):
            h[i] = trial[i]
            g[i] = g2[i]
        for i in range(D * D):
            H[i] = H2[i]
        F = Ft
        if small:
            return F, True, -1
    return F, False, -1


def node_min_eigen(H, work, u):
    """Smallest eigenvalue of the symmetrised ``H`` (row-major, PROX_DIM**2), its unit eigenvector
    into ``u``; returns ``(lambda_min, max |lambda|)`` (as :func:`replica.numeric.prox._min_eigen`)."""
    D = PROX_DIM  # as in node_direction: the other dimensions' branches are not compiled
    if D == 1:
        u[0] = 1.0
        return H[0], abs(H[0])
    if D == 2:
        lam, u[0], u[1], big = min_eigen_2x2(H[0], 0.5 * (H[1] + H[2]), H[3])
        return lam, big
    for i in range(D):
        for j in range(D):
            work[i, j] = 0.5 * (H[i * D + j] + H[j * D + i])
    lam, U = np.linalg.eigh(work)
    big = 0.0
    for i in range(D):
        u[i] = U[i, 0]
        big = max(big, abs(lam[i]))
    return lam[0], big


def node_off_saddle(h, c, F, tol, max_iter, g, H, d, trial, g2, H2, work, sols, solok, u, hk, hb):
    """A converged Newton endpoint h that is a saddle (negative Hessian eigenvalue; H as node_newton
    left it) moved to the lower of the minima reached from h +- 1e-4 (1 + |h|_inf) u, u the most
    negative direction (replica.numeric.prox.off_saddles): a saddle is never a minimiser. Returns (F, ok);
    ok False where neither side converged. h unchanged at a minimum."""
    D = h.shape[0]
    lam, big = node_min_eigen(H, work, u)
    if not lam < -1e-8 * max(big, 1e-300):
        return F, True
    hmax = 0.0
    for i in range(D):
        hmax = max(hmax, abs(h[i]))
    eps = 1e-4 * (1.0 + hmax)
    best = np.inf
    for side in range(2):
        sgn = 1.0 if side == 0 else -1.0
        for i in range(D):
            hk[i] = h[i] + sgn * eps * u[i]
        # nprev as np.int64(0), not the literal 0: numba would compile node_newton a second time for
        # the literal's own type (Literal[int](0), ~1 s of a model's first compilation)
        Fk, okk, _m = node_newton(hk, c, tol, max_iter, 1e-8, g, H, d, trial, g2, H2, work, sols, solok,
                                  np.int64(0), 1e-3)
        if not (okk and math.isfinite(Fk)):
            continue
        take = Fk < best - 1e-12 * (1.0 + abs(Fk))
        if not take and Fk <= best + 1e-12 * (1.0 + abs(Fk)):
            # mirror minima tie (a saddle on a symmetry plane): the lexicographically larger one,
            # whichever side the round-off put first (replica.numeric.prox.off_saddles does the same)
            for i in range(D):
                if hk[i] != hb[i]:
                    take = hk[i] > hb[i]
                    break
        if take:
            best = Fk
            for i in range(D):
                hb[i] = hk[i]
    if best == np.inf:
        return F, False
    for i in range(D):
        h[i] = hb[i]
    return best, True


def node_prox_average(nodes, weights, warm, use_warm, n_starts, x, p, tol, max_iter, agree_tol,
                      h_out, failed, grad):
    """Fused energetic average: for every node, the global minimum of the bracket over
    the warm start (if use_warm) and the first n_starts of node_starts, then
    grad += w d(W F)/dx at the minimiser (W: the node's label law, 1 without a channel).
    Returns (sum w W F_min, n_disagree, n_failed); failed
    nodes (no start converged) are flagged and left out of the sums.
    h_out (PROX_DIM, N) receives the minimisers (the next warm start).
    """
    D = PROX_DIM
    S = N_STARTS
    nz = nodes.shape[0]
    N = nodes.shape[1]
    nx = x.shape[0]
    z = np.empty(nz)
    c = np.empty(max(N_CONSTANTS, 1))
    st = np.empty(S * D)
    h = np.empty(D)
    g, H, d, trial, g2, H2, work = newton_scratch(D)
    sols = np.empty((S + 1, D))
    solF = np.empty(S + 1)
    solok = np.zeros(S + 1, dtype=np.bool_)
    u = np.empty(D)
    hk = np.empty(D)
    hb = np.empty(D)
    G = np.empty(nx)
    for k in range(nx):
        grad[k] = 0.0
    psi = 0.0
    n_dis = 0
    n_fail = 0
    first = 0 if use_warm else 1
    last = 1 + min(max(n_starts, 0), S)
    if last <= first:
        last = first + 1
    for j in range(N):
        for k in range(nz):
            z[k] = nodes[k, j]
        node_constants(z, x, p, c)
        node_starts(z, x, p, st)
        best = np.inf
        ib = -1
        for s in range(S + 1):
            solok[s] = False
        for s in range(first, last):
            if s == 0:
                for i in range(D):
                    h[i] = warm[i, j]
            else:
                for i in range(D):
                    h[i] = st[(s - 1) * D + i]
            F, ok, match = node_newton(h, c, tol, max_iter, 1e-8, g, H, d, trial, g2, H2, work,
                                       sols, solok, s, 1e-3)
            if match >= 0:
                F = solF[match]
                for i in range(D):
                    h[i] = sols[match, i]
            elif ok:
                F, ok = node_off_saddle(h, c, F, tol, max_iter, g, H, d, trial, g2, H2, work, sols, solok, u, hk,
                                        hb)
            ok = ok and math.isfinite(F)
            solok[s] = ok
            solF[s] = F
            for i in range(D):
                sols[s, i] = h[i]
            if ok and F < best:
                best = F
                ib = s
        if ib < 0:
            failed[j] = True
            n_fail += 1
            for i in range(D):
                h_out[i, j] = np.nan
            continue
        failed[j] = False
        dis = False
        for s in range(first, last):
            if solok[s] and s != ib:
                for i in range(D):
                    if abs(sols[s, i] - sols[ib, i]) > agree_tol:
                        dis = True
        if dis:
            n_dis += 1
        for i in range(D):
            h[i] = sols[ib, i]
            h_out[i, j] = h[i]
        node_parameter_gradient(h, z, x, p, G)
        w = weights[j]
        for k in range(nx):
            grad[k] += w * G[k]
        psi += w * node_weight(z, x, p) * best
    return psi, n_dis, n_fail


def node_start_minima(nodes, starts, x, p, tol, max_iter, h_out, F_out, ok_out):
    """The local minimum of the bracket reached from each of the ``K`` starts ``(K, PROX_DIM, N)``
    at every node (damped Newton; a start that comes within ``1e-3 (1 + |h*|)`` of an earlier
    start's minimiser, deep in its quadratic basin, stops there and takes it): ``h_out``
    ``(K, PROX_DIM, N)``, the brackets ``F_out`` and whether each converged ``ok_out`` ``(K, N)``.
    The per-node loop is written out as in :func:`node_prox_average` (a helper call per node and
    start cost the warm-start evaluations 10-30 %)."""
    D = PROX_DIM
    K = starts.shape[0]
    nz = nodes.shape[0]
    z = np.empty(nz)
    c = np.empty(max(N_CONSTANTS, 1))
    h = np.empty(D)
    g, H, d, trial, g2, H2, work = newton_scratch(D)
    sols = np.empty((K, D))
    solF = np.empty(K)
    solok = np.zeros(K, dtype=np.bool_)
    for j in range(nodes.shape[1]):
        for k in range(nz):
            z[k] = nodes[k, j]
        node_constants(z, x, p, c)
        for s in range(K):
            for i in range(D):
                h[i] = starts[s, i, j]
            F, ok, match = node_newton(h, c, tol, max_iter, 1e-8, g, H, d, trial, g2, H2, work,
                                       sols, solok, s, 1e-3)
            if match >= 0:
                F = solF[match]
                for i in range(D):
                    h[i] = sols[match, i]
            ok = ok and math.isfinite(F)
            solok[s] = ok
            solF[s] = F
            for i in range(D):
                sols[s, i] = h[i]
                h_out[s, i, j] = h[i]
            F_out[s, j] = F
            ok_out[s, j] = ok


def node_bracket_slopes(nodes, h, dz, dl, slopes, x, p, F_out, hp_out, ok_out):
    """At every node ``j``: the bracket ``F(h_j)`` at ``z_j`` (``F_out``); with ``slopes``, also
    the minimiser's derivative along a line of the pre-integration (``dz``: its direction times
    the step ``dl``): ``h' = -H^{-1} (g(z + dz) - g(z - dz)) / (2 dl)``, ``g = dF/dh``, ``H`` (symmetrised) at
    ``(h_j, z_j)``, by Gaussian elimination with partial pivoting (``hp_out``, 0 where not
    finite). ``ok_out`` is False where a pivot is exactly 0 (singular ``H``; ``hp_out`` 0, for the
    caller's pseudo-inverse). The same arithmetic as the numpy path, without its three
    ``bracket_newton`` evaluations of every node in Python-level array code."""
    D = PROX_DIM
    nz = nodes.shape[0]
    z = np.empty(nz)
    c = np.empty(max(N_CONSTANTS, 1))
    hh = np.empty(D)
    g = np.empty(D)
    gp = np.empty(D)
    H = np.empty(D * D)
    H2 = np.empty(D * D)
    A = np.empty((D, D))
    b = np.empty(D)
    for j in range(nodes.shape[1]):
        for k in range(nz):
            z[k] = nodes[k, j]
        for i in range(D):
            hh[i] = h[i, j]
        node_constants(z, x, p, c)
        F_out[j] = node_bracket_newton(hh, c, g, H)
        ok_out[j] = True
        if not slopes:
            continue
        for k in range(nz):
            z[k] = nodes[k, j] + dz[k]
        node_constants(z, x, p, c)
        node_bracket_newton(hh, c, gp, H2)
        for k in range(nz):
            z[k] = nodes[k, j] - dz[k]
        node_constants(z, x, p, c)
        node_bracket_newton(hh, c, g, H2)
        for i in range(D):
            b[i] = -((gp[i] - g[i]) / (2 * dl))
            for k in range(D):
                A[i, k] = 0.5 * (H[i * D + k] + H[k * D + i])
        singular = False
        for col in range(D):
            piv = col
            big = abs(A[col, col])
            for r in range(col + 1, D):
                if abs(A[r, col]) > big:
                    big = abs(A[r, col])
                    piv = r
            if A[piv, col] == 0.0:
                singular = True
                break
            if piv != col:
                for k in range(D):
                    A[col, k], A[piv, k] = A[piv, k], A[col, k]
                b[col], b[piv] = b[piv], b[col]
            for r in range(col + 1, D):
                f = A[r, col] / A[col, col]
                for k in range(col, D):
                    A[r, k] -= f * A[col, k]
                b[r] -= f * b[col]
        if singular:
            ok_out[j] = False
            for i in range(D):
                hp_out[i, j] = 0.0
            continue
        for i in range(D - 1, -1, -1):
            t = b[i]
            for k in range(i + 1, D):
                t -= A[i, k] * b[k]
            b[i] = t / A[i, i]
        for i in range(D):
            hp_out[i, j] = b[i] if math.isfinite(b[i]) else 0.0


def node_line_sweeps(Z, h, F, lo, hi, x, p, tol, max_iter, tol_F, hF, FF, hB, FB, changed, failed):
    """The continuation sweeps of a pre-integration (``_Run._sweeps`` of
    :mod:`replica.numeric.preintegration`) on its lines ``lo..hi-1``, one line at a time: forward, each
    point's minimiser continued to the next point (``hF``, ``FF`` ``(PROX_DIM, nL, P-1)``,
    ``(nL, P-1)``), then backward (``hB``, ``FB``), a continued branch lower than a point's own
    minimum (by ``tol_F (1 + |F|)``) replacing it in ``h``, ``F`` (``(PROX_DIM, nL, P)``,
    ``(nL, P)``) as it goes; then the forward continuations whose left end changed in the
    backward sweep (``changed``) are redone. Each continuation is the warm-start-only Newton of
    :func:`node_prox_average` and its bracket that of :func:`node_bracket_slopes`: the numbers
    of the array path, bit for bit, without its 2 (P - 1) dispatches per sweep. A line where a
    continuation does not converge is flagged in ``failed`` (its ``h``, ``F`` may be partly
    swept): the caller redoes it on the array path, whose numpy Newton takes over such nodes.
    Returns the number of replaced minima on the lines not flagged."""
    D = PROX_DIM
    nz = Z.shape[0]
    P = Z.shape[2]
    z = np.empty(nz)
    c = np.empty(max(N_CONSTANTS, 1))
    hh = np.empty(D)
    g, H, d, trial, g2, H2, work = newton_scratch(D)
    sols = np.empty((1, D))
    solok = np.zeros(1, dtype=np.bool_)
    corrected = 0
    for line in range(lo, hi):
        ok_line = True
        replaced = 0
        # two sweeps, then the redo pass: (src, dst) of each continuation
        for sweep in range(3):
            for t in range(P - 1):
                if sweep == 0:
                    j, src, dst = t, t, t + 1
                elif sweep == 1:
                    j = P - 2 - t
                    src, dst = j + 1, j
                else:
                    j, src, dst = t, t, t + 1
                    if not changed[line, j]:
                        continue
                for k in range(nz):
                    z[k] = Z[k, line, dst]
                node_constants(z, x, p, c)
                for i in range(D):
                    hh[i] = h[i, line, src]
                Fn, ok, match = node_newton(hh, c, tol, max_iter, 1e-8, g, H, d, trial, g2, H2, work,
                                            sols, solok, np.int64(0), 1e-3)  # (np.int64: node_off_saddle)
                if not (ok and math.isfinite(Fn)):
                    ok_line = False
                    break
                Fc = node_bracket_newton(hh, c, g, H)
                if not math.isfinite(Fc):
                    Fc = np.inf
                if sweep == 1:
                    for i in range(D):
                        hB[i, line, j] = hh[i]
                    FB[line, j] = Fc
                else:
                    for i in range(D):
                        hF[i, line, j] = hh[i]
                    FF[line, j] = Fc
                if sweep < 2:
                    Fd = F[line, dst]
                    if Fc < Fd - tol_F * (1.0 + abs(Fd)):
                        for i in range(D):
                            h[i, line, dst] = hh[i]
                        F[line, dst] = Fc
                        replaced += 1
                        if sweep == 1:
                            changed[line, dst] = True
            if not ok_line:
                break
        if ok_line:
            corrected += replaced
        else:
            failed[line] = True
    return corrected


def node_test_average(nodes, weights, x, p, out):
    """out[k] = sum_j w_j observable_k(z_j) for the N_OBSERVABLES test-point observables (eps_g
    first): their Gaussian averages, without temporaries."""
    nz = nodes.shape[0]
    z = np.empty(nz)
    vals = np.empty(max(N_OBSERVABLES, 1))
    for k in range(N_OBSERVABLES):
        out[k] = 0.0
    for j in range(nodes.shape[1]):
        for k in range(nz):
            z[k] = nodes[k, j]
        node_test_observables(z, x, p, vals)
        w = weights[j]
        for k in range(N_OBSERVABLES):
            out[k] += w * vals[k]


# --------------------------------------------------------------------------- the local convention
def node_local_descent(h, c, tol, max_iter, step, saddle_tol, g, H, d, trial, g2, H2, work):
    """Descent from h (overwritten) at one node that stays in the start's basin: the algorithm of
    replica.numeric.prox.local_minimize (modified-Newton direction capped at step (1 + |h|_inf); a capped
    step must not pass the first minimum along its ray; Armijo). Returns (F, status): 0 a minimum,
    1 a stationary point with a negative Hessian eigenvalue (a saddle), -1 no convergence.
    On return g, H hold the gradient and Hessian at h."""
    D = h.shape[0]
    F = node_bracket_newton(h, c, g, H)
    conv = False
    for _ in range(max_iter):
        if not math.isfinite(F):
            return F, -1
        gmax = 0.0
        hmax = 0.0
        for i in range(D):
            if not math.isfinite(g[i]):
                return F, -1
            gmax = max(gmax, abs(g[i]))
            hmax = max(hmax, abs(h[i]))
        if gmax < tol:
            conv = True
            break
        node_direction(g, H, d, 1e-8, work)
        dmax = 0.0
        for i in range(D):
            dmax = max(dmax, abs(d[i]))
        cap = step * (1.0 + hmax)
        capped = dmax > cap
        if capped:
            for i in range(D):
                d[i] *= cap / dmax
            dmax = cap
        if dmax <= 1e-8 * (1.0 + hmax):
            for i in range(D):
                h[i] += d[i]
            F = node_bracket_newton(h, c, g, H)
            conv = True
            break
        slope = 0.0
        for i in range(D):
            slope += g[i] * d[i]
        t = 1.0
        accepted = False
        Ft = F
        for _ls in range(40):
            for i in range(D):
                trial[i] = h[i] + t * d[i]
            Ft = node_bracket_newton(trial, c, g2, H2)
            ok = math.isfinite(Ft) and Ft <= F + 1e-4 * t * slope
            if ok and capped:
                ahead = 0.0
                for i in range(D):
                    ahead += g2[i] * d[i]
                ok = ahead <= 0.0
            if ok:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            conv = True
            break
        small = (F - Ft) <= 1e-15 * (1.0 + abs(F))
        for i in range(D):
            h[i] = trial[i]
            g[i] = g2[i]
        for i in range(D * D):
            H[i] = H2[i]
        F = Ft
        if small:
            conv = True
            break
    if not conv:
        return F, -1
    lam, big = node_min_eigen(H, work, d)
    if lam < -saddle_tol * max(big, 1e-300):
        return F, 1
    return F, 0


def node_local_average(nodes, weights, start, x, p, tol, max_iter, step, saddle_tol, probe, stay, h_out, status,
                       grad):
    """Fused energetic average under the local convention: at every node the minimum reached by
    descent from ``start`` (node_local_descent), grad += w d(W F)/dx there. A node whose descent
    stops on a saddle is resolved by descending from both sides of it along its most negative
    direction, each side weighing half (status 1); a node where a descent fails is left out of the
    sums (status -1). Returns (sum w W F, n_saddle, n_failed); h_out (PROX_DIM, N) gets the
    minimisers (one side at a saddle)."""
    D = PROX_DIM
    nz = nodes.shape[0]
    N = nodes.shape[1]
    nx = x.shape[0]
    z = np.empty(nz)
    c = np.empty(max(N_CONSTANTS, 1))
    h = np.empty(D)
    hs = np.empty(D)
    u = np.empty(D)
    g, H, d, trial, g2, H2, work = newton_scratch(D)
    G = np.empty(nx)
    Gs = np.empty(nx)
    for k in range(nx):
        grad[k] = 0.0
    psi = 0.0
    n_sad = 0
    n_fail = 0
    for j in range(N):
        for k in range(nz):
            z[k] = nodes[k, j]
        node_constants(z, x, p, c)
        for i in range(D):
            h[i] = start[i]
        F, st = node_local_descent(h, c, tol, max_iter, step, saddle_tol, g, H, d, trial, g2, H2, work)
        w = weights[j]
        if st == 0 or (st == 1 and stay):
            # stay: a stationary stop kept as it is (replica.numeric.prox.ProxConvention.saddles), still counted
            if st == 1:
                n_sad += 1
            status[j] = st
            for i in range(D):
                h_out[i, j] = h[i]
            node_parameter_gradient(h, z, x, p, G)
            for k in range(nx):
                grad[k] += w * G[k]
            psi += w * node_weight(z, x, p) * F
            continue
        if st == 1:
            node_min_eigen(H, work, u)
            hmax = 0.0
            for i in range(D):
                hmax = max(hmax, abs(h[i]))
            eps = probe * (1.0 + hmax)
            Fsum = 0.0
            for k in range(nx):
                Gs[k] = 0.0
            good = True
            for side in range(2):
                sgn = 1.0 if side == 0 else -1.0
                for i in range(D):
                    hs[i] = h[i] + sgn * eps * u[i]
                Fs, sts = node_local_descent(hs, c, tol, max_iter, step, saddle_tol, g, H, d, trial, g2, H2, work)
                if sts != 0:
                    good = False
                    break
                if side == 0:
                    for i in range(D):
                        h_out[i, j] = hs[i]
                node_parameter_gradient(hs, z, x, p, G)
                for k in range(nx):
                    Gs[k] += 0.5 * G[k]
                Fsum += 0.5 * Fs
            if good:
                status[j] = 1
                n_sad += 1
                for k in range(nx):
                    grad[k] += w * Gs[k]
                psi += w * node_weight(z, x, p) * Fsum
                continue
        status[j] = -1
        n_fail += 1
        for i in range(D):
            h_out[i, j] = np.nan
    return psi, n_sad, n_fail

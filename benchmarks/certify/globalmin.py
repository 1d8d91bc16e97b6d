"""Certified global minimum of the 2-D Moreau bracket ``F(h; y, t, V)`` at every node.

Why the minimum found is global (to the value tolerance ``tol_F``)
-----------------------------------------------------------------
1. **Confinement.** ``l >= 0``, so ``F(h) >= |h - y|^2 / (2V)``: any point with
   ``F(h) < F_best`` lies in the disk ``|h - y| < R = sqrt(2 V F_best)``. The search runs on
   the square ``[y - R, y + R]^2``; nothing outside can compete.
2. **Rigorous lower bounds on boxes.** On a box ``B``, ``F >= min_B |h - y|^2/(2V) +
   min_B L_1(u_1) + min_B L_2(u_2)``. The first term is exact (clamp ``y`` to the box). The
   ranges of ``u_1 = h_1^2 - h_1 h_2`` and ``u_2 = h_2^2 - h_1 h_2`` over ``B`` are computed
   exactly (quadratics: corners plus the parabola vertices on the edges; no interior extremum,
   the only critical point ``h = 0`` is a saddle), and ``L_i(u) = sigma^2 (t_i - s(u))^2`` is
   unimodal with its minimum 0 at ``u = logit t_i``, so its minimum over an interval is 0 or
   an end value. A box whose bound exceeds ``F_best - tol_F`` cannot contain a better point.
3. **Convex exclusion zones.** Around every local minimum ``h_k`` found (damped Newton), a box
   ``B_k = h_k +- r_k`` is certified convex: interval arithmetic on the Hessian
   ``I/V + sum_i [L_i'' grad u_i grad u_i^T + L_i' Hess u_i]`` with ``L_i'`` and ``L_i''``
   bounded by Taylor enclosures (global analytic bounds ``|s''| <= sqrt(3)/18``,
   ``|s'''| <= 1/8``) must be positive definite on ``B_k``. Then ``h_k`` is the unique
   minimum of ``F`` on ``B_k`` and ``B_k`` can be dropped from the search. Without these zones
   a branch-and-bound with zeroth-order bounds never terminates near a minimum (the bound gap
   shrinks only linearly with the box width, the function rises quadratically).
4. **Branch and bound.** Boxes are bisected along their longer side; each surviving box's
   centre value updates ``F_best`` (a better point starts Newton there: a new minimum and a
   new zone), and a small surviving box also starts Newton (to discover the basin it sits in).
   The search ends when every box is excluded (2. or 3.). Then ``F_best`` is the global
   minimum value up to ``tol_F`` and its minimiser is the global one -- unless two minima lie
   within ``tol_F`` of each other (a node on the Maxwell set): such nodes are *counted*
   (``status = 1``), their value is still certified and either minimiser is correct to
   ``tol_F`` in ``F``.

Rounding: bounds and values are computed in double precision with terms of size ``<= 1``;
``tol_F`` (default ``1e-13 + 1e-11 F``) is far above the rounding error of ``F`` (~1e-17).
A node whose search exceeds ``max_boxes`` is reported with ``status = 2`` (never seen at the
paper's parameters; the driver raises if any occurs).

Cost: a few hundred box bounds per node at the paper's states (measured by
``benchmarks.certify.bench_prox``), against the 3-4 damped Newton runs of a multistart.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from .model import bracket, bracket_newton, sigmoid

S2MAX = math.sqrt(3.0) / 18.0     # max |s''|
S3MAX = 0.125                     # max |s'''|


# ----------------------------------------------------------------------------- local search
@njit(cache=True)
def newton(h1, h2, y1, y2, t1, t2, V, sig2, max_iter=100):
    """Damped Newton with the Hessian's eigenvalues replaced by ``max(|lambda|, 1e-10)`` and an
    Armijo line search. Returns ``(h1, h2, F, converged)``."""
    F, g1, g2, a, b, c = bracket_newton(h1, h2, y1, y2, t1, t2, V, sig2)
    for _ in range(max_iter):
        if abs(g1) + abs(g2) < 1e-15:
            return h1, h2, F, True
        half_tr = 0.5 * (a + c)
        half_diff = 0.5 * (a - c)
        rad = math.sqrt(half_diff * half_diff + b * b)
        l1 = half_tr + rad
        l2 = half_tr - rad
        th = 0.5 * math.atan2(b, half_diff)
        e1, e2 = math.cos(th), math.sin(th)
        m1 = max(abs(l1), 1e-10)
        m2 = max(abs(l2), 1e-10)
        p1 = e1 * g1 + e2 * g2
        p2 = -e2 * g1 + e1 * g2
        c1, c2 = p1 / m1, p2 / m2
        d1 = -(e1 * c1 - e2 * c2)
        d2 = -(e2 * c1 + e1 * c2)
        slope = g1 * d1 + g2 * d2
        step = 1.0
        moved = False
        for _ls in range(60):
            n1, n2 = h1 + step * d1, h2 + step * d2
            Fn = bracket(n1, n2, y1, y2, t1, t2, V, sig2)
            if Fn <= F + 1e-4 * step * slope:
                moved = True
                break
            step *= 0.5
        if not moved:
            return h1, h2, F, True      # no descent at round-off: a minimum up to round-off
        small = abs(step * d1) + abs(step * d2) < 1e-13 * (1.0 + abs(h1) + abs(h2))
        h1, h2 = n1, n2
        F, g1, g2, a, b, c = bracket_newton(h1, h2, y1, y2, t1, t2, V, sig2)
        if small:
            return h1, h2, F, True
    return h1, h2, F, False


# ----------------------------------------------------------------------------- interval tools
@njit(cache=True, inline="always")
def _imul(alo, ahi, blo, bhi):
    p1, p2, p3, p4 = alo * blo, alo * bhi, ahi * blo, ahi * bhi
    return min(min(p1, p2), min(p3, p4)), max(max(p1, p2), max(p3, p4))


@njit(cache=True, inline="always")
def _isq(alo, ahi):
    if alo >= 0.0:
        return alo * alo, ahi * ahi
    if ahi <= 0.0:
        return ahi * ahi, alo * alo
    return 0.0, max(alo * alo, ahi * ahi)


@njit(cache=True)
def u_ranges(a1, b1, a2, b2):
    """Exact ranges of ``u_1 = h_1^2 - h_1 h_2`` and ``u_2 = h_2^2 - h_1 h_2`` on a box."""
    lo1 = 1e300
    hi1 = -1e300
    lo2 = 1e300
    hi2 = -1e300
    for h1 in (a1, b1):
        for h2 in (a2, b2):
            u = h1 * (h1 - h2)
            lo1 = min(lo1, u)
            hi1 = max(hi1, u)
            u = h2 * (h2 - h1)
            lo2 = min(lo2, u)
            hi2 = max(hi2, u)
    for d in (a2, b2):          # u1 = h1^2 - d h1 on an edge h2 = d: vertex h1 = d/2
        v = 0.5 * d
        if a1 <= v <= b1:
            u = v * (v - d)
            lo1 = min(lo1, u)
    for d in (a1, b1):          # u2 = h2^2 - d h2 on an edge h1 = d: vertex h2 = d/2
        v = 0.5 * d
        if a2 <= v <= b2:
            u = v * (v - d)
            lo2 = min(lo2, u)
    return lo1, hi1, lo2, hi2


@njit(cache=True, inline="always")
def _lmin(ulo, uhi, t, sig2):
    """Minimum of the unimodal ``sig2 (t - s(u))^2`` over ``[ulo, uhi]``."""
    slo = sigmoid(ulo)
    shi = sigmoid(uhi)
    if slo <= t <= shi:
        return 0.0
    if shi < t:
        return sig2 * (t - shi) ** 2
    return sig2 * (t - slo) ** 2


@njit(cache=True)
def box_lower_bound(a1, b1, a2, b2, y1, y2, t1, t2, V, sig2):
    d1 = max(a1 - y1, 0.0, y1 - b1)
    d2 = max(a2 - y2, 0.0, y2 - b2)
    lo1, hi1, lo2, hi2 = u_ranges(a1, b1, a2, b2)
    lb = (d1 * d1 + d2 * d2) / (2.0 * V) + _lmin(lo1, hi1, t1, sig2) + _lmin(lo2, hi2, t2, sig2)
    return lb * (1.0 - 1e-14) - 1e-300


@njit(cache=True, inline="always")
def _deriv_enclosure(u, rad, t, sig2):
    """Enclosures of ``L'`` and ``L''`` on ``[u - rad, u + rad]`` (Taylor, analytic bounds)."""
    s = sigmoid(u)
    s1 = s * (1.0 - s)
    s2 = s1 * (1.0 - 2.0 * s)
    d = t - s
    L1 = -2.0 * sig2 * d * s1
    L2 = 2.0 * sig2 * (s1 * s1 - d * s2)
    K2 = 2.0 * sig2 * (0.0625 + S2MAX)                   # max |L''|
    K3 = 2.0 * sig2 * (3.0 * 0.25 * S2MAX + S3MAX)      # max |L'''|
    return L1 - K2 * rad, L1 + K2 * rad, L2 - K3 * rad, L2 + K3 * rad


@njit(cache=True)
def hessian_enclosure(a1, b1, a2, b2, t1, t2, V, sig2):
    """Lower bounds of ``H_11``, ``H_22`` and the largest ``|H_12|`` of the bracket's Hessian
    over the box (interval arithmetic with Taylor enclosures of ``L_i'``, ``L_i''``)."""
    lo1, hi1, lo2, hi2 = u_ranges(a1, b1, a2, b2)
    p1lo, p1hi, q1lo, q1hi = _deriv_enclosure(0.5 * (lo1 + hi1), 0.5 * (hi1 - lo1), t1, sig2)
    p2lo, p2hi, q2lo, q2hi = _deriv_enclosure(0.5 * (lo2 + hi2), 0.5 * (hi2 - lo2), t2, sig2)
    # grad u1 = (2 h1 - h2, -h1), grad u2 = (-h2, 2 h2 - h1)
    g11lo, g11hi = 2.0 * a1 - b2, 2.0 * b1 - a2
    g12lo, g12hi = -b1, -a1
    g21lo, g21hi = -b2, -a2
    g22lo, g22hi = 2.0 * a2 - b1, 2.0 * b2 - a1
    iv = 1.0 / V
    s_lo, s_hi = _isq(g11lo, g11hi)
    A_lo, A_hi = _imul(q1lo, q1hi, s_lo, s_hi)
    s_lo, s_hi = _isq(g21lo, g21hi)
    B_lo, B_hi = _imul(q2lo, q2hi, s_lo, s_hi)
    H11lo = iv + A_lo + B_lo + 2.0 * p1lo
    s_lo, s_hi = _isq(g12lo, g12hi)
    A_lo, A_hi = _imul(q1lo, q1hi, s_lo, s_hi)
    s_lo, s_hi = _isq(g22lo, g22hi)
    B_lo, B_hi = _imul(q2lo, q2hi, s_lo, s_hi)
    H22lo = iv + A_lo + B_lo + 2.0 * p2lo
    m_lo, m_hi = _imul(g11lo, g11hi, g12lo, g12hi)
    A_lo, A_hi = _imul(q1lo, q1hi, m_lo, m_hi)
    m_lo, m_hi = _imul(g21lo, g21hi, g22lo, g22hi)
    B_lo, B_hi = _imul(q2lo, q2hi, m_lo, m_hi)
    H12lo = A_lo + B_lo - p1hi - p2hi
    H12hi = A_hi + B_hi - p1lo - p2lo
    return H11lo, H22lo, max(-H12lo, H12hi)


@njit(cache=True)
def convex_on_box(a1, b1, a2, b2, t1, t2, V, sig2):
    """True if the bracket's Hessian is positive definite everywhere on the box (sufficient test)."""
    H11lo, H22lo, off = hessian_enclosure(a1, b1, a2, b2, t1, t2, V, sig2)
    return H11lo > 0.0 and H22lo > 0.0 and H11lo * H22lo > off * off * (1.0 + 1e-12)


@njit(cache=True)
def convex_radius(h1, h2, t1, t2, V, sig2, r_start):
    r = r_start
    for _ in range(30):
        if convex_on_box(h1 - r, h1 + r, h2 - r, h2 + r, t1, t2, V, sig2):
            return r
        r *= 0.5
    return 0.0


# ----------------------------------------------------------------------------- branch and bound
@njit(cache=True)
def certify_node(y1, y2, t1, t2, V, sig2, hc1, hc2, Fc, stack, mins, tol_rel, tol_abs, max_boxes):
    """Branch and bound from the candidate ``(hc1, hc2)``. ``stack`` is a work array ``(S, 4)``
    and ``mins`` ``(K, 4)`` (h1, h2, F, r). Returns ``(h1, h2, F, status, boxes, n_minima,
    F_second, h1_second, h2_second)``: status 0 certified unique, 1 a tie within ``tol_F``
    (value certified; the second minimiser is returned so that callers can average over the
    tied pair), 2 the box budget was exhausted (not certified). The second minimum is the
    best other local minimum *found*, not necessarily the second-best of ``F``."""
    K = mins.shape[0]
    S = stack.shape[0]
    nm = 0
    r = convex_radius(hc1, hc2, t1, t2, V, sig2, 0.5)
    mins[0, 0], mins[0, 1], mins[0, 2], mins[0, 3] = hc1, hc2, Fc, r
    nm = 1
    best = 0
    Fbest = Fc
    boxes = 0
    while True:
        restart = False
        tol = tol_abs + tol_rel * abs(Fbest)
        R = math.sqrt(2.0 * V * max(Fbest, 0.0)) * (1.0 + 1e-12) + 1e-12
        if convex_on_box(y1 - R, y1 + R, y2 - R, y2 + R, t1, t2, V, sig2):
            # F is strictly convex on the whole search square: its stationary point is the
            # unique minimum there (the common case at the paper's states)
            return mins[best, 0], mins[best, 1], Fbest, 0, boxes + 1, nm, np.inf, np.nan, np.nan
        stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = y1 - R, y1 + R, y2 - R, y2 + R
        sp = 1
        ambiguous = False
        while sp > 0:
            sp -= 1
            a1, b1, a2, b2 = stack[sp, 0], stack[sp, 1], stack[sp, 2], stack[sp, 3]
            boxes += 1
            if boxes > max_boxes:
                return mins[best, 0], mins[best, 1], Fbest, 2, boxes, nm, np.inf, np.nan, np.nan
            inside = False
            for k in range(nm):
                rk = mins[k, 3]
                if rk > 0.0 and a1 >= mins[k, 0] - rk and b1 <= mins[k, 0] + rk \
                        and a2 >= mins[k, 1] - rk and b2 <= mins[k, 1] + rk:
                    inside = True
                    break
            if inside:
                continue
            lb = box_lower_bound(a1, b1, a2, b2, y1, y2, t1, t2, V, sig2)
            if lb > Fbest - tol:
                continue
            c1, c2 = 0.5 * (a1 + b1), 0.5 * (a2 + b2)
            w = max(b1 - a1, b2 - a2)
            Fcen, gc1, gc2, _h11, _h12, _h22 = bracket_newton(c1, c2, y1, y2, t1, t2, V, sig2)
            # centred (second-order) form: F(c + d) >= F(c) + g.d + d^T [H] d / 2 on the box
            r1, r2 = 0.5 * (b1 - a1), 0.5 * (b2 - a2)
            H11lo, H22lo, off = hessian_enclosure(a1, b1, a2, b2, t1, t2, V, sig2)
            lb2 = (Fcen - abs(gc1) * r1 - abs(gc2) * r2
                   + 0.5 * (min(H11lo, 0.0) * r1 * r1 + min(H22lo, 0.0) * r2 * r2) - off * r1 * r2)
            lb2 = lb2 - 1e-15 * (abs(Fcen) + 1.0)
            if lb2 > Fbest - tol:
                continue
            if Fcen < Fbest - tol or w < 0.02 * R + 1e-9:
                # a better point, or a small box that survives: find the basin it belongs to
                n1, n2, Fn, ok = newton(c1, c2, y1, y2, t1, t2, V, sig2, 200)
                known = -1
                for k in range(nm):
                    if abs(n1 - mins[k, 0]) + abs(n2 - mins[k, 1]) < 1e-7 * (1.0 + abs(n1) + abs(n2)):
                        known = k
                        break
                if known < 0 and ok and nm < K:
                    rk = convex_radius(n1, n2, t1, t2, V, sig2, 0.5)
                    mins[nm, 0], mins[nm, 1], mins[nm, 2], mins[nm, 3] = n1, n2, Fn, rk
                    nm += 1
                    if Fn < Fbest - tol:
                        best = nm - 1
                        Fbest = Fn
                        restart = True       # a smaller R and a lower threshold: start again
                        break
                    if rk > 0.0:
                        # the new zone may cover this box now
                        sp += 1
                        stack[sp - 1, 0], stack[sp - 1, 1], stack[sp - 1, 2], stack[sp - 1, 3] = a1, b1, a2, b2
                        continue
            if w < 1e-9:
                # a box this small that is not excluded: a minimum within tol of the best
                # (a tie) or a degenerate minimum without a convex zone
                ambiguous = True
                continue
            if sp + 2 > S:
                return mins[best, 0], mins[best, 1], Fbest, 2, boxes, nm, np.inf, np.nan, np.nan
            if b1 - a1 >= b2 - a2:
                m = 0.5 * (a1 + b1)
                stack[sp, 0], stack[sp, 1], stack[sp, 2], stack[sp, 3] = a1, m, a2, b2
                stack[sp + 1, 0], stack[sp + 1, 1], stack[sp + 1, 2], stack[sp + 1, 3] = m, b1, a2, b2
            else:
                m = 0.5 * (a2 + b2)
                stack[sp, 0], stack[sp, 1], stack[sp, 2], stack[sp, 3] = a1, b1, a2, m
                stack[sp + 1, 0], stack[sp + 1, 1], stack[sp + 1, 2], stack[sp + 1, 3] = a1, b1, m, b2
            sp += 2
        if not restart:
            F2 = np.inf
            k2 = -1
            for k in range(nm):
                if k != best and mins[k, 2] < F2:
                    F2 = mins[k, 2]
                    k2 = k
            status = 1 if (ambiguous or F2 - Fbest <= tol) else 0
            s1 = mins[k2, 0] if k2 >= 0 else np.nan
            s2 = mins[k2, 1] if k2 >= 0 else np.nan
            return mins[best, 0], mins[best, 1], Fbest, status, boxes, nm, F2, s1, s2


@njit(cache=True)
def _starts_newton(y1, y2, t1, t2, V, sig2, w1, w2, use_warm):
    """Best local minimum over the structured starts: the centre ``y``, ``0``, ``-y``, the two
    zero-loss points ``+-(u_1, -u_2)/sqrt(u_1 + u_2)`` (``u_i = logit t_i``) and a warm start."""
    best1, best2, bestF = 0.0, 0.0, np.inf
    n = 6 if use_warm else 5
    for k in range(n):
        if k == 0:
            s1, s2 = y1, y2
        elif k == 1:
            s1, s2 = 0.0, 0.0
        elif k == 2:
            s1, s2 = -y1, -y2
        elif k == 5:
            s1, s2 = w1, w2
        else:
            if not (0.0 < t1 < 1.0 and 0.0 < t2 < 1.0):
                continue
            u1 = math.log(t1 / (1.0 - t1))
            u2 = math.log(t2 / (1.0 - t2))
            if u1 + u2 <= 1e-12:
                continue
            sgn = 1.0 if k == 3 else -1.0
            a = math.sqrt(u1 + u2)
            s1, s2 = sgn * u1 / a, -sgn * u2 / a
        h1, h2, F, ok = newton(s1, s2, y1, y2, t1, t2, V, sig2, 100)
        if F < bestF:
            best1, best2, bestF = h1, h2, F
    return best1, best2, bestF


@njit(cache=True)
def global_prox(y1, y2, t1, t2, V, sig2, warm1, warm2, use_warm, certify, tol_rel, tol_abs, max_boxes):
    """Vectorised driver: minimiser ``(h1, h2)``, value ``F``, ``status`` and box counts per node."""
    N = y1.shape[0]
    h1 = np.empty(N)
    h2 = np.empty(N)
    F = np.empty(N)
    status = np.zeros(N, dtype=np.int64)
    boxes = np.zeros(N, dtype=np.int64)
    gap = np.full(N, np.inf)
    o1 = np.full(N, np.nan)
    o2 = np.full(N, np.nan)
    stack = np.empty((4096, 4))
    mins = np.empty((16, 4))
    for i in range(N):
        a, b, f, st, nb, f2, s1, s2 = point(y1[i], y2[i], t1[i], t2[i], V, sig2, warm1[i], warm2[i], use_warm,
                                            certify, stack, mins, tol_rel, tol_abs, max_boxes)
        status[i] = st
        boxes[i] = nb
        gap[i] = f2 - f
        o1[i] = s1
        o2[i] = s2
        h1[i], h2[i], F[i] = a, b, f
    return h1, h2, F, status, boxes, gap, o1, o2


@njit(cache=True)
def point(y1, y2, t1, t2, V, sig2, w1, w2, use_warm, certify, stack, mins, tol_rel, tol_abs, max_boxes):
    """One node: structured starts, then (``certify``) the branch-and-bound certificate.
    Returns ``(h1, h2, F, status, boxes, F_second, h1_second, h2_second)``."""
    a, b, f = _starts_newton(y1, y2, t1, t2, V, sig2, w1, w2, use_warm)
    if not certify:
        return a, b, f, 0, 0, np.inf, np.nan, np.nan
    a, b, f, st, nb, nm, f2, s1, s2 = certify_node(y1, y2, t1, t2, V, sig2, a, b, f, stack, mins,
                                                   tol_rel, tol_abs, max_boxes)
    return a, b, f, st, nb, f2, s1, s2


def prox(y1, y2, t1, t2, V, sig2, warm=None, certify=True, tol_rel=1e-11, tol_abs=1e-13, max_boxes=200_000):
    """Numpy entry point: arrays of prox centres and targets -> ``ProxResult``.

    ``gap`` is ``F`` of the second-best local minimum found minus the best (``inf`` if none):
    small gaps mark nodes near the Maxwell set; ``other`` is that minimiser.
    """
    y1, y2, t1, t2 = (np.ascontiguousarray(np.broadcast_to(np.asarray(a, float), np.shape(y1)).ravel())
                      for a in (y1, y2, t1, t2))
    if warm is None:
        w1 = w2 = np.zeros_like(y1)
        use = False
    else:
        w1, w2 = (np.ascontiguousarray(np.asarray(w, float).ravel()) for w in warm)
        use = True
    h1, h2, F, st, nb, gap, o1, o2 = global_prox(y1, y2, t1, t2, float(V), float(sig2), w1, w2, use,
                                                 bool(certify), float(tol_rel), float(tol_abs), int(max_boxes))
    return ProxResult(h1, h2, F, st, nb, gap, o1, o2)


@dataclass
class ProxResult:
    h1: np.ndarray
    h2: np.ndarray
    F: np.ndarray
    status: np.ndarray      # 0 unique, 1 tie within tol_F, 2 not certified
    boxes: np.ndarray
    gap: np.ndarray
    other1: np.ndarray
    other2: np.ndarray

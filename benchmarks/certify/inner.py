"""The inner integral over the prox centre's plane at one teacher node, adaptively and with every
switch of the global minimiser located (numba).

At a teacher node ``w`` the prox centre is ``y = mu + tau zeta``, ``zeta ~ N(0, I_2)``. The plane is
cut into lines ``zeta = v e_perp + u e`` (``e``: the direction of the global minimiser at
``y = 0``, normal to the Maxwell set through ``y = 0``). Then::

    I(w) = int phi(v) P(v) dv,      P(v) = int phi(u) f(v, u) du,

with ``f = (F, dF/dq, dF/dV, dF/dm, dF/dtheta)`` at the global minimiser. Both integrals are
adaptive Gauss-Kronrod (7-15) with the normal density in the integrand, on ``[-9, 9]`` (outside:
mass ``< 3e-19``). On each line:

1. **detection** -- the global prox on a uniform grid of ``K`` points of ``[-7.5, 7.5]``; a grid
   interval holds a switch if continuing either end's minimiser to the other end does not land
   on that end's global minimiser, or if the minimiser changes there much more than next door;
2. **location** -- bisection on the jump of the global minimiser (:func:`locate`) to
   ``|du| <= 1e-13``; a bracket that closes on a steep continuous transition (beyond a cusp of
   the Maxwell set) becomes a break point too; both sides are searched again;
3. **integration** -- adaptive G7-K15 on every piece between switches; a node's minimiser is
   Newton-continued from the nearest known minimiser of the same piece (a grid point inside the
   piece or the branch minimiser at the piece's end switch). The steep transitions beyond the
   cusps are resolved by the adaptive bisection (QUADPACK's error estimate from ``|K15 - G7|``
   per component; intervals are not split below 1e-7, counted in ``stats[4]``).

Prox modes (``cert``): 0 structured starts (+ warm start) at the grid and location points,
1 the certified branch and bound of :mod:`benchmarks.certify.globalmin` there as well. Nodes are
always continued (mode 0) or, with ``cert = 2``, certified individually too.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .globalmin import newton, point
from .model import sigmoid

INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
UMAX = 9.0
SAME = 1e-6

# Gauss-Kronrod 7-15 (QUADPACK qk15)
XGK = np.array([0.991455371120812639206854697526329, 0.949107912342758524526189684047851,
                0.864864423359769072789712788640926, 0.741531185599394439863864773280788,
                0.586087235467691130294144845693013, 0.405845151377397166906606412076961,
                0.207784955007898467600689403773245, 0.000000000000000000000000000000000])
WGK = np.array([0.022935322010529224963732008058970, 0.063092092629978553290700663189204,
                0.104790010322250183839876322541518, 0.140653259715525918745189590510238,
                0.169004726639267902826583426598550, 0.190350578064785409913256402421014,
                0.204432940075298892414161999234649, 0.209482141084727828012999174891714])
WG = np.array([0.129484966168869693270611432679082, 0.279705391489276667901467771423780,
               0.381830050505118944950369775488975, 0.417959183673469387755102040816327])

# context layout (per teacher node)
C_T1, C_T2, C_G11, C_G12, C_G21, C_G22 = 0, 1, 2, 3, 4, 5
C_MU1, C_MU2, C_TAU, C_E1, C_E2, C_F1, C_F2 = 6, 7, 8, 9, 10, 11, 12
C_A, C_B, C_W1, C_W2 = 13, 14, 15, 16
C_Q, C_V, C_M, C_TH, C_SIG2, C_S = 17, 18, 19, 20, 21, 22
NCTX = 23


@njit(cache=True, inline="always")
def _same(a1, a2, b1, b2):
    return abs(a1 - b1) + abs(a2 - b2) <= SAME * (1.0 + abs(a1) + abs(a2))


@njit(cache=True, inline="always")
def _qk_error(k, g, resasc, half):
    """QUADPACK's error estimate of the K15 result on an interval of half-width ``half``
    (``resasc``: the K15 integral of ``|f - mean|`` on the unit interval)."""
    e = abs(k - g) * half
    r = resasc * half
    if r != 0.0 and e != 0.0:
        e = r * min(1.0, (200.0 * e / r) ** 1.5)
    return e


@njit(cache=True, inline="always")
def _centre(v, u, ctx):
    z1 = v * ctx[C_F1] + u * ctx[C_E1]
    z2 = v * ctx[C_F2] + u * ctx[C_E2]
    return ctx[C_MU1] + ctx[C_TAU] * z1, ctx[C_MU2] + ctx[C_TAU] * z2, z1, z2


@njit(cache=True)
def node_values(v, u, h1, h2, F, ctx, out):
    """``out[:] = (F, dF/dq, dF/dV, dF/dm, dF/dtheta)`` at the minimiser ``h`` (envelope theorem)."""
    y1, y2, z1, z2 = _centre(v, u, ctx)
    a, b = ctx[C_A], ctx[C_B]
    xi1 = a * ctx[C_W1] + b * z1
    xi2 = a * ctx[C_W2] + b * z2
    eta1 = b * ctx[C_W1] - a * z1
    eta2 = b * ctx[C_W2] - a * z2
    q, V, th, sig2, s = ctx[C_Q], ctx[C_V], ctx[C_TH], ctx[C_SIG2], ctx[C_S]
    sq = math.sqrt(q)
    r1, r2 = h1 - y1, h2 - y2
    S1 = sigmoid(h1 * (h1 - h2))
    S2 = sigmoid(h2 * (h2 - h1))
    dl1 = 2.0 * sig2 * (ctx[C_T1] - S1)
    dl2 = 2.0 * sig2 * (ctx[C_T2] - S2)
    if th != 0.0:
        dq1 = -th * xi1 / (2.0 * q * sq) + th * th * eta1 / (2.0 * q * q * s)
        dq2 = -th * xi2 / (2.0 * q * sq) + th * th * eta2 / (2.0 * q * q * s)
        dth1 = xi1 / sq - th * eta1 / (q * s)
        dth2 = xi2 / sq - th * eta2 / (q * s)
    else:
        dq1 = 0.0
        dq2 = 0.0
        dth1 = xi1 / sq
        dth2 = xi2 / sq
    g11, g12, g21, g22 = ctx[C_G11], ctx[C_G12], ctx[C_G21], ctx[C_G22]
    out[0] = F
    out[1] = (-(r1 * xi1 + r2 * xi2) / (2.0 * V * sq)
              + dl1 * (g11 * dq1 + g12 * dq2) + dl2 * (g21 * dq1 + g22 * dq2))
    out[2] = -(r1 * r1 + r2 * r2) / (2.0 * V * V)
    out[3] = -(r1 - r2) / V
    out[4] = dl1 * (g11 * dth1 + g12 * dth2) + dl2 * (g21 * dth1 + g22 * dth2)


@njit(cache=True)
def global_at(v, u, ctx, w1, w2, cert, stack, mins):
    """Global minimiser at ``(v, u)``: structured starts + warm start, certified if ``cert``."""
    y1, y2, z1, z2 = _centre(v, u, ctx)
    h1, h2, F, st, nb, f2, o1, o2 = point(y1, y2, ctx[C_T1], ctx[C_T2], ctx[C_V], ctx[C_SIG2], w1, w2, True,
                                          cert > 0, stack, mins, 1e-11, 1e-13, 200000)
    return h1, h2, F, st


@njit(cache=True)
def continued(v, u, ctx, w1, w2):
    y1, y2, z1, z2 = _centre(v, u, ctx)
    return newton(w1, w2, y1, y2, ctx[C_T1], ctx[C_T2], ctx[C_V], ctx[C_SIG2], 100)


@njit(cache=True)
def switch_between(v, ua, a1, a2, Fa, ub, b1, b2, Fb, ctx):
    """Continuation test: does the global minimiser change basin between ``ua`` and ``ub``?"""
    f1, f2, Ff, okf = continued(v, ub, ctx, a1, a2)
    c1, c2, Fc, okb = continued(v, ua, ctx, b1, b2)
    fw_ok = okf and (_same(f1, f2, b1, b2) or Ff <= Fb + 1e-13 + 1e-11 * abs(Ff))
    bw_ok = okb and (_same(c1, c2, a1, a2) or Fc <= Fa + 1e-13 + 1e-11 * abs(Fc))
    return not (fw_ok and bw_ok)


@njit
def locate(v, a, gA1, gA2, b, gB1, gB2, ctx, cert, stack, mins, sw, nsw, depth):
    """Switches in ``(a, b)``; ``sw`` rows are ``(u, left h1, left h2, right h1, right h2)``.
    Returns the new count (``-1``: failed, e.g. more switches than rows).

    Bisection on the jump: at the midpoint the global minimiser is compared with both ends and
    the half whose ends are farther apart is kept (a smooth branch moves by ``O(b - a)``, a
    switch keeps its jump), down to ``b - a <= 1e-13 (1 + |a|)``. The first four midpoints get
    the full global search (a third basin inside the bracket); after that the bracket is
    ``< 1/16`` of a grid interval and the global minimiser is the lower of the two continued
    branches. A bracket that closes on a steep continuous transition (beyond a cusp of the
    Maxwell set) is kept as a *break* as well: integrating piecewise there is what the
    adaptive rule needs."""
    a0, b0 = a, b
    hA1, hA2, hB1, hB2 = gA1, gA2, gB1, gB2
    for it in range(90):
        if b - a <= 1e-13 * (1.0 + abs(a)):
            break
        m = 0.5 * (a + b)
        if it < 4:
            # while the bracket is wide, a third basin may be global inside: full search
            g1, g2, Fg, st = global_at(v, m, ctx, hA1, hA2, cert, stack, mins)
            if st == 2:
                return -1
        else:
            # narrow bracket: the global minimiser is one of the two continued branches
            a1_, a2_, FA, okA = continued(v, m, ctx, hA1, hA2)
            b1_, b2_, FB, okB = continued(v, m, ctx, hB1, hB2)
            if FA <= FB:
                g1, g2 = a1_, a2_
            else:
                g1, g2 = b1_, b2_
        dA = abs(g1 - hA1) + abs(g2 - hA2)
        dB = abs(g1 - hB1) + abs(g2 - hB2)
        if dA <= dB:
            a, hA1, hA2 = m, g1, g2
        else:
            b, hB1, hB2 = m, g1, g2
    if abs(hA1 - hB1) + abs(hA2 - hB2) <= 1e-10 * (1.0 + abs(hA1) + abs(hA2)):
        return nsw                       # smooth there after all: no break needed
    for k in range(nsw):
        if abs(sw[k, 0] - 0.5 * (a + b)) <= 1e-9 * (1.0 + abs(a)):
            return nsw                   # found before (from a neighbouring bracket)
    if nsw >= sw.shape[0]:
        return -1
    sw[nsw, 0] = 0.5 * (a + b)
    sw[nsw, 1], sw[nsw, 2], sw[nsw, 3], sw[nsw, 4] = hA1, hA2, hB1, hB2
    nsw += 1
    if depth >= 6:
        return nsw
    for side in range(2):
        lo, hi = (a0, a) if side == 0 else (b, b0)
        if hi - lo <= 1e-9:
            continue
        l1, l2, Fl, st = global_at(v, lo, ctx, hA1, hA2, cert, stack, mins)
        r1, r2, Fr, st2 = global_at(v, hi, ctx, hB1, hB2, cert, stack, mins)
        if st == 2 or st2 == 2:
            return -1
        if switch_between(v, lo, l1, l2, Fl, hi, r1, r2, Fr, ctx):
            nsw = locate(v, lo, l1, l2, hi, r1, r2, ctx, cert, stack, mins, sw, nsw, depth + 1)
            if nsw < 0:
                return -1
    return nsw


@njit(cache=True)
def _count_rows(sw):
    n = 0
    for r in range(sw.shape[0]):
        if np.isfinite(sw[r, 0]):
            n += 1
    return n


@njit
def line_integral(v, ctx, ugrid, cert, atol, out, err, stats, stack, mins, sw, Hg, work):
    """``out[:5] = P(v)`` (no density in ``v``), ``err`` its error estimate; ``stats``:
    [breaks, nodes, grid prox calls, lines whose break table overflowed, lines whose adaptive
    budget ran out, v-intervals whose budget ran out]."""
    K = ugrid.shape[0]
    w1, w2 = 0.0, 0.0
    for k in range(K):
        h1, h2, F, st = global_at(v, ugrid[k], ctx, w1, w2, cert, stack, mins)
        if st == 2:
            stats[3] += 1
            return False
        Hg[k, 0], Hg[k, 1], Hg[k, 2] = h1, h2, F
        w1, w2 = h1, h2
    stats[2] += K
    for r in range(sw.shape[0]):
        sw[r, 0] = np.nan
    nsw = 0
    for k in range(K - 1):
        flag = switch_between(v, ugrid[k], Hg[k, 0], Hg[k, 1], Hg[k, 2],
                              ugrid[k + 1], Hg[k + 1, 0], Hg[k + 1, 1], Hg[k + 1, 2], ctx)
        if not flag:
            dk = abs(Hg[k + 1, 0] - Hg[k, 0]) + abs(Hg[k + 1, 1] - Hg[k, 1])
            dl = abs(Hg[k, 0] - Hg[k - 1, 0]) + abs(Hg[k, 1] - Hg[k - 1, 1]) if k > 0 else 0.0
            dr = abs(Hg[k + 2, 0] - Hg[k + 1, 0]) + abs(Hg[k + 2, 1] - Hg[k + 1, 1]) if k + 2 < K else 0.0
            flag = dk > 3.0 * max(dl, dr) + 1e-3
        if flag:
            n_new = locate(v, ugrid[k], Hg[k, 0], Hg[k, 1], ugrid[k + 1], Hg[k + 1, 0], Hg[k + 1, 1],
                           ctx, cert, stack, mins, sw, nsw, 0)
            if n_new < 0:
                # more breaks than rows (a tangle of basins far in the tails): keep the breaks
                # found so far, count it, and let the adaptive rule resolve the rest
                stats[3] += 1
                nsw = _count_rows(sw)
            else:
                nsw = n_new
    # sort switches by position (insertion sort; few)
    for i in range(1, nsw):
        j = i
        while j > 0 and sw[j - 1, 0] > sw[j, 0]:
            for c in range(5):
                tmp = sw[j - 1, c]
                sw[j - 1, c] = sw[j, c]
                sw[j, c] = tmp
            j -= 1
    stats[0] += nsw
    # initial partition: the pieces between breaks, cut into sub-intervals of length <= 3
    n = 0
    for piece in range(nsw + 1):
        lo = -UMAX if piece == 0 else sw[piece - 1, 0]
        hi = UMAX if piece == nsw else sw[piece, 0]
        if hi - lo <= 0.0:
            continue
        m = int(math.ceil((hi - lo) / 3.0))
        for i in range(m):
            if n >= work.shape[0]:
                stats[3] += 1
                return False
            work[n, 0] = lo + (hi - lo) * i / m
            work[n, 1] = lo + (hi - lo) * (i + 1) / m
            work[n, 2] = piece
            _gk_line(v, work[n, 0], work[n, 1], piece, nsw, ctx, ugrid, Hg, sw, cert, stack, mins, work, n)
            stats[1] += 15
            n += 1
    # global adaptivity: bisect the interval with the largest (relative) error until the
    # line's total error estimate is below atol in every component, or the budget is spent
    while True:
        worst = _worst_interval(work, n, 8, atol, 1e-12)
        if worst == -2:
            break
        if worst < 0 or n >= work.shape[0]:
            stats[4] += 1
            break
        a, b, piece = work[worst, 0], work[worst, 1], int(work[worst, 2])
        mid = 0.5 * (a + b)
        work[worst, 1] = mid
        _gk_line(v, a, mid, piece, nsw, ctx, ugrid, Hg, sw, cert, stack, mins, work, worst)
        work[n, 0], work[n, 1], work[n, 2] = mid, b, piece
        _gk_line(v, mid, b, piece, nsw, ctx, ugrid, Hg, sw, cert, stack, mins, work, n)
        n += 1
        stats[1] += 30
    for c in range(5):
        out[c] = 0.0
        err[c] = 0.0
        for i in range(n):
            out[c] += work[i, 3 + c]
            err[c] += work[i, 8 + c]
    return True


@njit
def _worst_interval(table, n, col, atol, min_width):
    """The next interval to bisect: -2 when the total error estimate (columns ``col..col+4``
    summed over the first ``n`` rows) is below ``atol`` in every component (done); else the row
    with the largest error relative to ``atol`` among intervals wider than ``min_width``
    (columns 0, 1), or -1 if there is none."""
    done = True
    for c in range(5):
        tot = 0.0
        for i in range(n):
            tot += table[i, col + c]
        if tot > atol[c]:
            done = False
    if done:
        return -2
    worst = -1
    wval = 0.0
    for i in range(n):
        r = 0.0
        for c in range(5):
            r = max(r, table[i, col + c] / atol[c])
        if r > wval and table[i, 1] - table[i, 0] > min_width:
            wval = r
            worst = i
    return worst


@njit
def _gk_node(j, mid, half):
    """Node ``j`` (0..14, left to right) of the G7-K15 pair on ``[mid - half, mid + half]``:
    abscissa, Kronrod weight, Gauss weight (0 at the Kronrod-only nodes)."""
    if j == 7:
        return mid, WGK[7], WG[3]
    jj = j if j < 7 else 14 - j
    x = mid - half * XGK[jj] if j < 7 else mid + half * XGK[jj]
    return x, WGK[jj], (WG[jj // 2] if jj % 2 == 1 else 0.0)


@njit
def _gk_line(v, a, b, piece, nsw, ctx, ugrid, Hg, sw, cert, stack, mins, work, row):
    """G7-K15 of ``phi(u) f(v, u)`` on ``[a, b]`` inside ``piece``: K15 values into
    ``work[row, 3:8]``, QUADPACK error estimates into ``work[row, 8:13]``."""
    K = ugrid.shape[0]
    lo = -UMAX if piece == 0 else sw[piece - 1, 0]
    hi = UMAX if piece == nsw else sw[piece, 0]
    half = 0.5 * (b - a)
    mid = 0.5 * (a + b)
    vals = np.empty(5)
    fk = np.zeros(5)
    fg = np.zeros(5)
    fv = np.empty((15, 5))
    kw = np.empty(15)
    for j in range(15):
        uu, wk, wg = _gk_node(j, mid, half)
        # start: the nearest known minimiser of this piece (a grid point inside it, or the
        # branch minimisers of the breaks that bound it)
        best = 1e300
        s1, s2 = 0.0, 0.0
        for k in range(K):
            if lo < ugrid[k] < hi:
                d = abs(ugrid[k] - uu)
                if d < best:
                    best = d
                    s1, s2 = Hg[k, 0], Hg[k, 1]
        if piece > 0 and abs(uu - lo) < best:
            best = abs(uu - lo)
            s1, s2 = sw[piece - 1, 3], sw[piece - 1, 4]
        if piece < nsw and abs(hi - uu) < best:
            best = abs(hi - uu)
            s1, s2 = sw[piece, 1], sw[piece, 2]
        if cert == 2:
            h1, h2, F, st = global_at(v, uu, ctx, s1, s2, 1, stack, mins)
        else:
            h1, h2, F, ok = continued(v, uu, ctx, s1, s2)
        node_values(v, uu, h1, h2, F, ctx, vals)
        dens = math.exp(-0.5 * uu * uu) * INV_SQRT_2PI
        kw[j] = wk
        for c in range(5):
            fv[j, c] = vals[c] * dens
            fk[c] += wk * vals[c] * dens
            fg[c] += wg * vals[c] * dens
    for c in range(5):
        mean = fk[c] * 0.5
        acc = 0.0
        for j in range(15):
            acc += kw[j] * abs(fv[j, c] - mean)
        work[row, 3 + c] = fk[c] * half
        work[row, 8 + c] = _qk_error(fk[c], fg[c], acc, half)


@njit
def _gk_v(a, b, ctx, ugrid, cert, atol_u, stats, stack, mins, sw, Hg, work, vw, row):
    """G7-K15 over ``v`` on ``[a, b]`` of ``phi(v) P(v)``: into ``vw[row]`` = (a, b, K15[5],
    error estimate[5], line errors[5]). Returns False if a line failed."""
    half = 0.5 * (b - a)
    mid = 0.5 * (a + b)
    P = np.empty(5)
    Pe = np.empty(5)
    fk = np.zeros(5)
    fg = np.zeros(5)
    ek = np.zeros(5)
    fv = np.zeros((15, 5))
    kw = np.empty(15)
    for j in range(15):
        vv, wk, wg = _gk_node(j, mid, half)
        kw[j] = wk
        dens = math.exp(-0.5 * vv * vv) * INV_SQRT_2PI
        if dens < 1e-30:
            continue
        ok = line_integral(vv, ctx, ugrid, cert, atol_u, P, Pe, stats, stack, mins, sw, Hg, work)
        if not ok:
            return False
        for c in range(5):
            fv[j, c] = P[c] * dens
            fk[c] += wk * P[c] * dens
            fg[c] += wg * P[c] * dens
            ek[c] += wk * Pe[c] * dens
    vw[row, 0], vw[row, 1] = a, b
    for c in range(5):
        mean = fk[c] * 0.5
        acc = 0.0
        for j in range(15):
            acc += kw[j] * abs(fv[j, c] - mean)
        vw[row, 2 + c] = fk[c] * half
        vw[row, 7 + c] = _qk_error(fk[c], fg[c], acc, half)
        vw[row, 12 + c] = ek[c] * half
    return True


@njit
def teacher_integral(ctx, ugrid, cert, atol_v, atol_u, out, err, stats):
    """``out[:5] = I(w)``: globally adaptive G7-K15 over ``v`` of :func:`line_integral` values
    (the interval with the largest error is bisected until the total is below ``atol_v``);
    ``err`` = that estimate plus the integrated line-level estimates."""
    stack = np.empty((4096, 4))
    mins = np.empty((16, 4))
    sw = np.empty((64, 5))
    Hg = np.empty((ugrid.shape[0], 3))
    work = np.empty((600, 13))
    vw = np.empty((64, 17))
    n = 0
    for i in range(3):
        a = -UMAX + 2.0 * UMAX * i / 3.0
        b = -UMAX + 2.0 * UMAX * (i + 1) / 3.0
        if not _gk_v(a, b, ctx, ugrid, cert, atol_u, stats, stack, mins, sw, Hg, work, vw, n):
            return False
        n += 1
    while True:
        worst = _worst_interval(vw, n, 7, atol_v, 1e-6)
        if worst == -2:
            break
        if worst < 0 or n >= vw.shape[0]:
            stats[5] += 1
            break
        a, b = vw[worst, 0], vw[worst, 1]
        mid = 0.5 * (a + b)
        if not _gk_v(a, mid, ctx, ugrid, cert, atol_u, stats, stack, mins, sw, Hg, work, vw, worst):
            return False
        if not _gk_v(mid, b, ctx, ugrid, cert, atol_u, stats, stack, mins, sw, Hg, work, vw, n):
            return False
        n += 1
    for c in range(5):
        out[c] = 0.0
        err[c] = 0.0
        for i in range(n):
            out[c] += vw[i, 2 + c]
            err[c] += vw[i, 7 + c] + vw[i, 12 + c]
    return True

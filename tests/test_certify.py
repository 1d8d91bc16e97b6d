"""The certified reference solver (benchmarks/certify): each piece against an answer known
independently to 1e-10 or better.

* Gauss-Hermite rules: exact normal moments.
* The certified global prox: against a dense grid search on random nodes, and on the
  symmetric nodes where starts on the invariant line ``h_1 = h_2`` converge to a saddle.
* The located-switch adaptive average: at ``omega = 1`` with ``A_11 = A_22 = 0.85`` the target
  is constant and symmetric, so the Maxwell set in the prox-centre plane is the diagonal
  ``y_1 = y_2`` (token swap), known exactly: the reference integrates each half-plane with
  scipy's adaptive quad (the integrand is smooth there), independent of the switch search.
  The adaptive rule must agree to its own error estimate, and that estimate must be small
  (slow suite: ~2 minutes, most of it the scipy reference).
* Envelope derivatives against finite differences of ``E[F]``; the numba and numpy
  integrands against each other.
* Pseudo-arclength continuation through the two folds of ``x^3 - x + alpha = 0``
  (at ``alpha = +-2 / (3 sqrt 3)``).
* Slow: ``docs/reference/certified.md`` is current with the committed point cache (``--check``).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from benchmarks.certify import globalmin                                  # noqa: E402
from benchmarks.certify.continuation import follow, refine_fold           # noqa: E402
from benchmarks.certify.energetic import AdaptiveRule, TensorGH           # noqa: E402
from benchmarks.certify.inner import NCTX, node_values                    # noqa: E402
from benchmarks.certify.integrand import NodeData                         # noqa: E402
from benchmarks.certify.model import Params, loss_np, targets             # noqa: E402
from benchmarks.certify.rules import hermite                              # noqa: E402


def test_hermite_moments_exact():
    for n in (3, 10, 40, 120):
        x, w = hermite(n)
        assert np.all(np.isfinite(w)) and abs(w.sum() - 1) < 1e-14
        for k in range(0, min(2 * n, 30), 2):
            exact = math.prod(range(k - 1, 0, -2)) if k else 1.0       # (k-1)!!
            assert abs(np.sum(w * x ** k) - exact) <= 1e-12 * exact


def _grid_min(y1, y2, t1, t2, V, sig2):
    """Dense-grid minimum polished by Newton: an independent global search."""
    R = math.sqrt(2 * V * loss_np(np.array(y1), np.array(y2), t1, t2, sig2)) + 1e-9
    g1 = np.linspace(y1 - R, y1 + R, 801)
    g2 = np.linspace(y2 - R, y2 + R, 801)
    H1, H2 = np.meshgrid(g1, g2, indexing="ij")
    Z = ((H1 - y1) ** 2 + (H2 - y2) ** 2) / (2 * V) + loss_np(H1, H2, t1, t2, sig2)
    order = np.argsort(Z.ravel())[:40]
    best = np.inf
    for k in order:
        h1, h2, F, ok = globalmin.newton(H1.flat[k], H2.flat[k], y1, y2, t1, t2, V, sig2, 100)
        best = min(best, F)
    return best


def test_certified_prox_matches_grid_search():
    p = Params()
    rng = np.random.default_rng(3)
    for q, V, m, th in [(0.107, 23.1, 0.0, 0.0), (0.0307, 20.6, 0.22, 0.0), (0.115, 12.7, 0.0, 0.158)]:
        z = rng.standard_normal((4, 40))
        nd = NodeData(z, (q, V, m, th), p)
        r = globalmin.prox(nd.y1, nd.y2, nd.t1, nd.t2, V, p.sig2)
        assert (r.status != 2).all()
        for i in range(z.shape[1]):
            ref = _grid_min(nd.y1[i], nd.y2[i], nd.t1[i], nd.t2[i], V, p.sig2)
            assert r.F[i] <= ref + 1e-13 + 1e-11 * abs(ref)


def test_certificate_escapes_the_symmetric_saddle():
    # y_1 = y_2 and t_1 = t_2: the starts y, 0, -y lie on the invariant line h_1 = h_2, where
    # Newton converges to a saddle (what the tensor-GH solvers did on the agnostic branch)
    p = Params()
    V, y, t = 23.08, -0.1347, 0.6588
    h1, h2, F, ok = globalmin.newton(y, y, y, y, t, t, V, p.sig2, 100)
    assert abs(h1 - h2) < 1e-12                       # stuck on the line
    r = globalmin.prox(np.array([y]), np.array([y]), np.array([t]), np.array([t]), V, p.sig2)
    assert r.status[0] in (0, 1)
    assert r.F[0] < F - 1e-3                          # the certificate finds the lower minima
    assert abs(r.F[0] - _grid_min(y, y, t, t, V, p.sig2)) < 1e-12


def test_envelope_derivatives_match_finite_differences():
    p = Params()
    rule = TensorGH(6)
    for x in ([0.1066, 23.08, 0.05, 0.0], [0.05, 15.0, 0.1, 0.05]):
        x = np.array(x)
        a = rule.average(x, p).mean
        for j in range(4):
            h = 1e-6 * max(abs(x[j]), 1e-2)
            xp, xm = x.copy(), x.copy()
            xp[j] += h
            xm[j] -= h
            fd = (rule.average(xp, p).mean[0] - rule.average(xm, p).mean[0]) / (2 * h)
            assert abs(fd - a[1 + j]) <= 1e-6 * (abs(a[1 + j]) + 1e-4)


def test_numba_and_numpy_integrands_agree():
    p = Params()
    x = np.array([0.08, 18.0, 0.03, 0.1])
    rule = AdaptiveRule(4)
    ctx, weights, zero, info = rule.contexts(x, p)
    c = ctx[1]
    rng = np.random.default_rng(0)
    for v, u in rng.standard_normal((5, 2)):
        zeta = v * c[11:13] + u * c[9:11]
        a, b = c[13], c[14]
        w = c[15:17]
        z = np.array([a * w[0] + b * zeta[0], a * w[1] + b * zeta[1], b * w[0] - a * zeta[0], b * w[1] - a * zeta[1]])
        nd = NodeData(z[:, None], x, p)
        r = globalmin.prox(nd.y1, nd.y2, nd.t1, nd.t2, nd.V, nd.sig2)
        ref = nd.values(r.h1, r.h2, r.F)[:, 0]
        out = np.empty(5)
        node_values(v, u, r.h1[0], r.h2[0], r.F[0], c, out)
        assert np.allclose(out, ref, rtol=1e-12, atol=1e-15)
    assert ctx.shape[1] == NCTX


def _half_plane_reference(x, p):
    """E over y ~ N(mu, q I) of (F, dF/dq, dF/dV, dF/dm) with the only switch on y_1 = y_2:
    scipy quad on each half-line of (xi_1 - xi_2)/sqrt 2, Gauss-Hermite 60 along the diagonal."""
    from scipy import integrate
    q, V, m, _ = x
    t1 = t2 = p.a11
    c0 = -math.sqrt(2.0) * m / math.sqrt(q)        # the diagonal in (xi_1 - xi_2)/sqrt 2
    xs, ws = hermite(60)
    tot = np.zeros(4)
    warm = [0.0, 0.0]

    def f(d, s, k):
        xi1, xi2 = (s + d) / math.sqrt(2), (s - d) / math.sqrt(2)
        y1, y2 = m + math.sqrt(q) * xi1, -m + math.sqrt(q) * xi2
        h1, h2, F, st, nb, f2, o1, o2 = globalmin.point(y1, y2, t1, t2, V, p.sig2, warm[0], warm[1], True, True,
                                                       np.empty((4096, 4)), np.empty((16, 4)), 1e-11, 1e-13, 200000)
        r1, r2 = h1 - y1, h2 - y2
        vals = (F, -(r1 * xi1 + r2 * xi2) / (2 * V * math.sqrt(q)), -(r1 * r1 + r2 * r2) / (2 * V * V),
                -(r1 - r2) / V)
        return vals[k] * math.exp(-0.5 * d * d) / math.sqrt(2 * math.pi)

    for s, w in zip(xs, ws):
        if w < 1e-18:
            continue
        for k in range(4):
            lo = integrate.quad(f, -9.0, c0, args=(s, k), epsabs=1e-15, epsrel=1e-12, limit=200)[0]
            hi = integrate.quad(f, c0, 9.0, args=(s, k), epsabs=1e-15, epsrel=1e-12, limit=200)[0]
            tot[k] += w * (lo + hi)
    return tot


@pytest.mark.slow
@pytest.mark.parametrize("m", [0.0, 0.07])
def test_adaptive_average_against_exact_switch_line(m):
    p = Params(omega=1.0, A=((0.85, 0.15), (0.15, 0.85)))
    x = np.array([0.04, 20.0, m, 0.0])
    ref = _half_plane_reference(x, p)
    avg = AdaptiveRule(n_teacher=2, rtol=1e-9, K=31).average(x, p)
    est = np.array(avg.prox_stats["adaptive_error"])[:4]
    got = avg.mean[:4]
    assert avg.prox_stats["switches"] > 0                  # the diagonal was found
    for k in range(4):
        err = abs(got[k] - ref[k])
        # the error bar covers the true error (plus the reference's own 1e-12)
        assert err <= est[k] + 1e-12 * (1 + abs(ref[k])), (k, got[k], ref[k], est[k])
        assert err <= 1e-8 * (abs(ref[k]) + 1e-6)


def test_continuation_through_folds():
    F = lambda x, a: np.array([x[0] ** 3 - x[0] + a, x[1] - x[0] ** 2])  # noqa: E731
    path = follow(F, [1.0, 1.0], 0.0, direction=1.0, ds=0.1, max_steps=200, max_folds=2,
                  scale=[1.0, 1.0], alpha_range=(-1.0, 1.0))
    exact = 2 / (3 * math.sqrt(3))
    assert len(path.folds) == 2
    assert abs(path.folds[0]["alpha"] - exact) < 1e-4
    assert abs(path.folds[1]["alpha"] + exact) < 1e-4
    xf, af = refine_fold(F, path.folds[0]["x"], path.folds[0]["alpha"], scale=[1.0, 1.0])
    assert abs(af - exact) < 1e-10 and abs(xf[0] - 1 / math.sqrt(3)) < 1e-6


@pytest.mark.slow
def test_certified_doc_is_current():
    """docs/reference/certified.md's tables are what the committed point cache renders to (no computation:
    ``--check`` is cache-only and writes nothing)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-m", "benchmarks.certify", "--check"], cwd=root,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]

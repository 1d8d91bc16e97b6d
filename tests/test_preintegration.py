"""Tests of replica.numeric.preintegration: truncated-normal Gauss rules, jump location on a synthetic
double-well model with a known answer, symmetry folding, and the paper model.

Reference numbers for the paper model come from ``benchmarks/preintegration_accuracy.py
fixed-x`` (output in ``benchmarks/results/preintegration_fixed_x.json``; see
docs/explanation/quadrature.md).
"""
from __future__ import annotations

import math
import types

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.stats import norm

from replica.numeric.compiled import numba_available
from replica.errors import ParameterError
from replica.numeric.preintegration import (PreintegrationIntegrator, PreintegrationState, fold_sign_flips,
                                    householder, make_integrator, truncated_normal_rule)
from replica.numeric.quadrature import gauss_hermite
from replica.registry import load_module

#: why the compiled-kernel tests skip (numba is optional; REPLICA_BACKEND=numpy forbids it)
NO_NUMBA = "numba not available: not installed (pip install numba) or REPLICA_BACKEND=numpy"


# ----------------------------------------------------------------------------- 1-D rules
def _truncnorm_moments(a: float, b: float, kmax: int) -> np.ndarray:
    """int_a^b u^k phi(u) du, k = 0..kmax, by the recursion M_k = (k-1) M_{k-2} + a^{k-1} phi(a) - b^{k-1} phi(b)."""
    pa = 0.0 if math.isinf(a) else norm.pdf(a)
    pb = 0.0 if math.isinf(b) else norm.pdf(b)
    M = np.zeros(kmax + 1)
    M[0] = norm.cdf(b) - norm.cdf(a)
    M[1] = pa - pb
    for k in range(2, kmax + 1):
        ta = 0.0 if math.isinf(a) else a ** (k - 1) * pa
        tb = 0.0 if math.isinf(b) else b ** (k - 1) * pb
        M[k] = (k - 1) * M[k - 2] + ta - tb
    return M


def test_truncated_rule_full_line_is_gauss_hermite():
    for n in (3, 8, 12):
        x, w = truncated_normal_rule(np.array([-np.inf]), np.array([np.inf]), n)
        u, wh = np.polynomial.hermite_e.hermegauss(n)
        np.testing.assert_allclose(x[0], u, atol=1e-12)
        np.testing.assert_allclose(w[0], wh / wh.sum(), atol=1e-13)


@pytest.mark.parametrize("a,b", [(-1.3, 0.4), (-np.inf, -1.77), (2.5, np.inf), (0.2, 0.2001), (-0.3, 3.0)])
def test_truncated_rule_is_exact_for_polynomials(a, b):
    n = 8
    x, w = truncated_normal_rule(np.array([a]), np.array([b]), n)
    M = _truncnorm_moments(a, b, 2 * n - 1)
    approx = np.array([np.sum(w[0] * x[0] ** k) for k in range(2 * n)])
    # scale: the absolute moments int |u|^k phi over the interval are below E|u|^k
    scale = np.array([2 ** (k / 2) * math.gamma((k + 1) / 2) / math.sqrt(math.pi) for k in range(2 * n)])
    assert np.all(np.abs(approx - M) <= 1e-12 * scale), (approx - M) / scale
    assert np.all((x[0] >= a) & (x[0] <= b))


def test_truncated_rule_vectorised_and_empty():
    a = np.array([-np.inf, -1.0, 13.0])
    b = np.array([0.0, 1.0, np.inf])
    x, w = truncated_normal_rule(a, b, 5)
    assert x.shape == w.shape == (3, 5)
    np.testing.assert_allclose(w.sum(axis=1)[:2], norm.cdf(b[:2]) - norm.cdf(a[:2]), rtol=1e-12)
    assert np.all(w[2] == 0.0)          # beyond the cut: no mass
    x0, w0 = truncated_normal_rule(np.zeros(0), np.zeros(0), 4)
    assert x0.shape == (0, 4)


def _rule_by(impl: str, a: np.ndarray, b: np.ndarray, n: int):
    import replica.numeric.preintegration as pre
    from replica.numeric.quadrature import legendre_1d

    s, lam = legendre_1d(96)
    a, b = np.clip(a, -pre.CUT, pre.CUT), np.clip(b, -pre.CUT, pre.CUT)
    if impl == "numpy":
        return pre._truncated_normal_rule_numpy(a, b, n, s, lam)
    kernel = pre._rule_kernel
    if impl == "compiled":
        if not numba_available():  # not installed, or REPLICA_BACKEND=numpy asks for the numpy path
            pytest.skip(NO_NUMBA)
        kernel = pre._compiled_rule_kernel() or pytest.fail("numba available but no compiled rule")
    x, w = np.empty((a.size, n)), np.empty((a.size, n))
    kernel(a, b, n, s, lam, x, w)
    return x, w


@pytest.mark.parametrize("impl", ["compiled", "python"])
def test_truncated_rule_scalar_kernel_matches_numpy(impl):
    """The scalar-loop kernel (Stieltjes + implicit QL on the first eigenvector components) gives
    the numpy version's rule (Stieltjes + dense eigh) to round-off, on long, short, one-sided,
    empty and beyond-the-cut intervals and for every order the levels use."""
    rng = np.random.default_rng(3)
    a = np.concatenate([[-np.inf, -np.inf, 2.5, 0.2, 13.0, -1.0], rng.uniform(-4, 2, 20)])
    b = np.concatenate([[np.inf, -1.77, np.inf, 0.2001, np.inf, -1.0], a[6:] + rng.uniform(0, 3, 20)])
    for n in (1, 3, 10, 16):
        x0, w0 = _rule_by("numpy", a, b, n)
        x1, w1 = _rule_by(impl, a, b, n)
        live = w0.sum(axis=1) > 0
        np.testing.assert_allclose(x1[live], x0[live], atol=1e-13)
        np.testing.assert_allclose(w1, w0, atol=1e-14)
        assert np.all(np.isfinite(x1))


def test_householder_and_fold():
    d = np.array([0.3, -0.5, 0.2, 0.7])
    Q = householder(d)
    np.testing.assert_allclose(Q @ Q.T, np.eye(4), atol=1e-14)
    np.testing.assert_allclose(Q[:, 0], d / np.linalg.norm(d), atol=1e-14)
    rule = gauss_hermite(3, 6)
    y, w = fold_sign_flips(rule.nodes, rule.weights, [(1, 2)])
    assert y.shape[1] == rule.size // 2 and abs(w.sum() - 1) < 1e-14
    f = lambda v: np.cos(v[0]) + v[1] * v[2] + v[0] ** 2 * (v[1] ** 2 + v[2] ** 2)  # even under (1, 2) -> -
    assert abs(f(y) @ w - f(rule.nodes) @ rule.weights) < 1e-14


# ----------------------------------------------------------------------------- synthetic model
def double_well(a: float, b: float, symmetric: bool = False) -> types.SimpleNamespace:
    """A generated-module look-alike: ``F(h; z, c) = (h^2 - 1)^2 / 4 - t h``, ``t = a z_1 + b z_2 + c``.

    Two minima near ``h = +-1`` coexist for ``|t| < 2/(3 sqrt 3)``; the global one is the
    one with ``sign(h) = sign(t)``, so the argmin jumps across the line ``t = 0``
    (``F(h, -t) = F(-h, t)``). ``x = (c, s)`` with ``s`` a spectator (``dF/ds = s h^2``).
    """
    def tilt(z, x):
        return a * z[0] + b * z[1] + x[0]

    def bracket(h, z, x, p):
        return (h[0] ** 2 - 1) ** 2 / 4 - tilt(z, x) * h[0] + 0.5 * x[1] * h[0] ** 2

    def bracket_newton(h, z, x, p):
        hh = h[0]
        F = bracket(h, z, x, p)
        g = (hh ** 3 - hh - tilt(z, x) + x[1] * hh)[None]
        H = (3 * hh ** 2 - 1 + x[1] + 0 * tilt(z, x))[None]
        return F, g, H

    def bracket_parameter_gradient(h, z, x, p):
        return np.stack([-h[0] + 0 * z[0], 0.5 * h[0] ** 2 + 0 * z[0]])

    def prox_starts(z, x, p):
        one = np.ones_like(z[0])
        return np.stack([np.sign(tilt(z, x)) * one + 0.1 * tilt(z, x), -one, one])

    mod = types.SimpleNamespace(
        PROX_DIM=1, N_STARTS=3, GAUSSIANS=("z1", "z2"), ORDER_PARAMETERS=("c", "s"), SYMMETRIES=(), MIRRORED=(),
        PIECEWISE=False, DISCRETE=(), WEIGHTED=False, KINK_RULE=False, LABEL_VALUES=None, leaves={},
        FAMILIES={"c": [0], "s": [1]}, bracket=bracket, bracket_newton=bracket_newton,
        bracket_parameter_gradient=bracket_parameter_gradient, prox_starts=prox_starts)
    if symmetric:
        mod.SYMMETRIES = ((("c",), (0, 1)),)
    return mod


def exact_double_well(a: float, b: float, c: float) -> tuple[float, float, float]:
    """``E[-h*]``, ``E[h*^2/2]`` and ``E[min F]`` for ``t ~ N(c, a^2 + b^2)`` (spectator s = 0)."""
    sd = math.hypot(a, b)

    def hstar(t):
        if t == 0:
            return 1.0
        s = 1.0 if t > 0 else -1.0
        # the root of h^3 - h = t on the branch of sign(t), |h| >= 1/sqrt(3)
        return s * brentq(lambda v: v ** 3 - v - abs(t), 1 / math.sqrt(3), 2 + abs(t))

    def fmin(t):
        h = hstar(t)
        return (h * h - 1) ** 2 / 4 - t * h

    def e(fun):
        dens = lambda t: fun(t) * norm.pdf(t, loc=c, scale=sd)
        lo, hi = c - 12 * sd, c + 12 * sd
        return quad(dens, lo, 0.0, epsabs=1e-14, epsrel=1e-13, limit=200)[0] + \
            quad(dens, 0.0, hi, epsabs=1e-14, epsrel=1e-13, limit=200)[0]

    return e(lambda t: -hstar(t)), e(lambda t: 0.5 * hstar(t) ** 2), e(fmin)


A_, B_, C_ = 0.45, -0.8, 0.3


@pytest.fixture(scope="module")
def dw_exact():
    return exact_double_well(A_, B_, C_)


@pytest.mark.parametrize("direction", ["auto", 1, [1.0, -1.0]])
def test_double_well_jump_is_integrated_exactly(direction, dw_exact):
    mod = double_well(A_, B_)
    x, p = np.array([C_, 0.0]), np.zeros(0)
    integ = PreintegrationIntegrator(2, line_order=16, u_order=10, segment_order=10, direction=direction)
    avg = integ.average(mod, x, p)
    # the remaining error is the segments' Gauss error: each branch has a fold
    # singularity (|t| = 2/(3 sqrt 3)) near the switch at t = 0
    assert avg.grad[0] == pytest.approx(-dw_exact[0], abs=1e-7)
    assert avg.grad[1] == pytest.approx(-dw_exact[1], abs=1e-7)
    assert -avg.psi_y == pytest.approx(dw_exact[2], abs=1e-8)
    st = integ.last_stats
    assert st.switches >= 1 and st.unresolved == 0
    if direction == "auto":  # the estimated direction is the normal of the switching line
        n = np.array([A_, B_]) / math.hypot(A_, B_)
        assert abs(abs(integ.direction @ n) - 1) < 1e-6


def test_double_well_beats_tensor_gauss_hermite(dw_exact):
    """Plain tensor GH of similar size is orders of magnitude less accurate on the jump."""
    mod = double_well(A_, B_)
    x, p = np.array([C_, 0.0]), np.zeros(0)
    from replica.numeric.prox import prox
    rule = gauss_hermite(2, 40)
    res = prox(mod, rule.nodes, x, p)
    gh = float(rule.expect(-res.h[0]))
    integ = PreintegrationIntegrator(2, line_order=10, u_order=8, segment_order=8)
    pre = integ.average(mod, x, p).grad[0]
    err_pre, err_gh = abs(pre + dw_exact[0]), abs(gh - dw_exact[0])
    assert err_pre < 1e-6 and err_gh > 30 * err_pre, (err_pre, err_gh)


def test_one_dimensional_line():
    """dim = 1: a single line, with the switch located by root finding."""
    a = 1.0
    mod = double_well(a, 0.0)
    mod.GAUSSIANS = ("z1",)
    base = mod.bracket

    def lift(f):
        return lambda h, z, x, p: f(h, np.vstack([z, np.zeros_like(z)]), x, p)

    for name in ("bracket", "bracket_newton", "bracket_parameter_gradient"):
        setattr(mod, name, lift(getattr(mod, name)))
    starts = mod.prox_starts
    mod.prox_starts = lambda z, x, p: starts(np.vstack([z, np.zeros_like(z)]), x, p)
    assert base is not mod.bracket
    x = np.array([C_, 0.0])
    integ = PreintegrationIntegrator(1, u_order=12, segment_order=12)
    avg = integ.average(mod, x, np.zeros(0))
    ex = exact_double_well(a, 0.0, C_)
    assert avg.grad[0] == pytest.approx(-ex[0], abs=1e-7)
    assert integ.last_stats.switches >= 1


def test_symmetry_folding_matches_unfolded():
    mod = double_well(0.6, 0.7, symmetric=True)
    x, p = np.array([0.0, 0.2]), np.zeros(0)
    folded = PreintegrationIntegrator(2, 12, 8, 8, direction=0)
    a = folded.average(mod, x, p)
    assert folded.last_stats.lines == 6           # 12 lines folded by z -> -z
    mod.SYMMETRIES = ()
    plain = PreintegrationIntegrator(2, 12, 8, 8, direction=0)
    b = plain.average(mod, x, p)
    assert plain.last_stats.lines == 12
    assert a.grad[0] == 0.0 and abs(b.grad[0]) < 1e-9    # odd family: exactly 0 when folded
    assert a.grad[1] == pytest.approx(b.grad[1], abs=1e-9)
    assert a.psi_y == pytest.approx(b.psi_y, abs=1e-9)


def test_warm_state_companion_describe():
    mod = double_well(A_, B_)
    x, p = np.array([C_, 0.0]), np.zeros(0)
    integ = make_integrator(mod, "fast", direction=[A_, B_])
    first = integ.average(mod, x, p)
    assert isinstance(first.state, PreintegrationState)
    again = integ.average(mod, x, p, warm=first.state, multistart=False)
    np.testing.assert_allclose(again.grad, first.grad, atol=1e-12)
    comp = integ.companion()
    assert comp.line_orders[0] < integ.line_orders[0]
    np.testing.assert_allclose(comp.direction, integ.direction)
    assert "preintegration" in integ.describe() and "direction=[" in integ.describe()
    assert make_integrator(mod).describe().endswith("direction=auto)")


def test_bad_arguments():
    with pytest.raises(ParameterError):
        PreintegrationIntegrator(2, direction="sideways")
    with pytest.raises(ParameterError):
        PreintegrationIntegrator(2, direction=5)
    with pytest.raises(ParameterError):
        PreintegrationIntegrator(3, line_order=(4, 4, 4))
    with pytest.raises(ParameterError):
        PreintegrationIntegrator(2, direction=np.ones((2, 2)))
    with pytest.raises(ParameterError):
        make_integrator(double_well(1, 1), "extreme")


# ----------------------------------------------------------------------------- paper model
attention = load_module("attention_tied")

#: ``E[dF/dq], E[dF/dV], E[dF/dm], E[F]`` at X_POS (positional branch, omega = 0.3): the
#: randomised-QMC reference of ``python benchmarks/preintegration_accuracy.py fixed-x``
#: (8 x 2^17 scrambled Sobol points, global minimum over the module's starts plus a 3 x 3
#: grid of starts; "reference_sobol" in benchmarks/results/preintegration_fixed_x.json).
#: Standard errors: 5.6e-6, 1.7e-9, 1.6e-6, 4.0e-8 (relative 7e-4, 4e-5, 3e-4, 2e-5).
X_POS = np.array([0.0307, 20.59, 0.2199, 0.0])
REF_POS = np.array([8.5108e-03, -4.39405e-05, -5.3158e-03, 1.964306e-03])


def _paper_p(branch):
    from replica.numeric.solver import Solver
    return Solver(attention, {"omega": 0.3}, branch=branch).p


def _values(integ, x, p):
    avg = integ.average(attention, x, p)
    return np.array([-avg.grad[0], -avg.grad[1], -avg.grad[2], -avg.psi_y])


def test_paper_positional_resolution_independence():
    """Two modest resolutions agree with each other and with the reference far better than GH does."""
    p = _paper_p("positional")
    d = np.array([1.0, -1.0, 0.0, 0.0])
    lo = _values(PreintegrationIntegrator(4, 8, 8, 6, direction=d), X_POS, p)
    hi = _values(PreintegrationIntegrator(4, 10, 10, 8, direction=d), X_POS, p)
    rel = np.abs(lo - hi) / np.abs(hi)
    assert np.all(rel < [2e-3, 5e-3, 2e-3, 2e-4]), rel
    rel_ref = np.abs(hi - REF_POS) / np.abs(REF_POS)
    assert np.all(rel_ref < [2e-3, 5e-3, 2e-3, 2e-4]), rel_ref


def test_paper_semantic_matches_gauss_hermite():
    """No switching surface of weight: pre-integration reproduces converged tensor GH."""
    from replica.numeric.prox import prox
    p = _paper_p("semantic")
    x = np.array([0.114805, 12.6635, 0.0, 0.158165])
    rule = gauss_hermite(4, 14)
    with np.errstate(all="ignore"):
        res = prox(attention, rule.nodes, x, p)
        G = attention.bracket_parameter_gradient(res.h, rule.nodes, x, p)
    gh = np.array([rule.expect(G)[0], rule.expect(G)[1], rule.expect(G)[3], rule.expect(res.value)])
    integ = PreintegrationIntegrator(4, 12, 10, 8)
    avg = integ.average(attention, x, p)
    pre = np.array([-avg.grad[0], -avg.grad[1], -avg.grad[3], -avg.psi_y])
    assert avg.grad[2] == 0.0                      # m-gradient: odd under z -> -z, folded
    assert integ.last_stats.lines == 12 ** 3 // 2
    np.testing.assert_allclose(pre, gh, rtol=1e-3)


@pytest.mark.slow
def test_paper_positional_fixed_point_resolution_independence():
    from replica.numeric.solver import Solver
    x0 = dict(q=0.0307, V=20.59, m=0.2199, theta=0.0)
    fps = [Solver(attention, {"omega": 0.3}, branch="positional", rule=make_integrator(attention, acc)).solve(0.5, x0)
           for acc in ("default", "high")]
    for key in ("q", "m"):
        assert fps[0].order[key] == pytest.approx(fps[1].order[key], rel=2e-3)
    assert fps[0].eps_g == pytest.approx(fps[1].eps_g, rel=1e-3)
    assert fps[0].phi == pytest.approx(fps[1].phi, rel=1e-3)


@pytest.mark.skipif(not numba_available(), reason=NO_NUMBA)
def test_compiled_brackets_and_slopes_match_numpy():
    """The compiled brackets and minimiser slopes of the pre-integration (node_bracket_slopes)
    against the numpy array code, at the positional paper state on 3000 random nodes: the same
    arithmetic up to round-off. F: the two evaluation orders of the same expression (observed
    ~1e-13 relative). h': the central difference divides the round-off of ``g`` (eps times its
    terms, of the size of ``H h``: the bracket is near-quadratic in ``h``) by ``2 dl`` and the
    solve multiplies it by at most cond(H): the tolerance is 10x that bound (~5e-10; observed
    ~1e-11)."""
    from replica.numeric.preintegration import _Run
    from replica.numeric.prox import prox
    p = _paper_p("positional")
    d = np.array([1.0, -1.0, 0.0, 0.0]) / math.sqrt(2.0)
    z = np.random.default_rng(0).standard_normal((4, 3000))
    with np.errstate(all="ignore"):
        h = prox(attention, z, X_POS, p).h
        H = attention.bracket_newton(h, z, X_POS, p)[2]
    run = _Run(PreintegrationIntegrator(4, 8, 8, 6, direction=d, backend="numba"), attention, X_POS, p, 1e-12,
               householder(d))
    assert run.kernels is not None
    dl = 1e-5
    F, hp, singular = run._bracket_kernel(h, z, dl)
    assert not singular.any()
    np.testing.assert_allclose(F, attention.bracket(h, z, X_POS, p), rtol=1e-11)
    cond = np.max(np.linalg.cond(H.T.reshape(-1, 2, 2)))
    bound = 10 * cond * np.finfo(float).eps * np.max(np.abs(H)) * max(1.0, np.max(np.abs(h))) / dl
    np.testing.assert_allclose(hp, run._hprime_numpy(h, z, dl), rtol=0, atol=bound)
    assert np.array_equal(run._bracket(h, z), F) and np.array_equal(run._hprime(h, z), hp)


@pytest.mark.skipif(not numba_available(), reason=NO_NUMBA)
def test_numba_and_numpy_preintegration_agree():
    """A whole pre-integration average on both backends (compiled prox, brackets and slopes
    against the numpy array code): the same jumps, breaks and integrals to round-off. The two
    backends' brackets differ by ~1e-13 relative, which moves each located jump within its root
    tolerance (1e-11 in ``u``); switching only the brackets' backend moved the fixed-point map of
    four paper states by <= 1.5e-10 relative (measured when the compiled brackets came in): rtol 1e-9."""
    p = _paper_p("positional")
    d = np.array([1.0, -1.0, 0.0, 0.0])
    out = {}
    for backend in ("numba", "numpy"):
        integ = PreintegrationIntegrator(4, 8, 8, 6, direction=d, backend=backend)
        out[backend] = (_values(integ, X_POS, p), integ.last_stats)
    (a, sa), (b, sb) = out["numba"], out["numpy"]
    assert (sa.switches, sa.breaks, sa.switch_lines) == (sb.switches, sb.breaks, sb.switch_lines)
    assert sa.switches > 0
    np.testing.assert_allclose(a, b, rtol=1e-9)


def test_piece_rules_are_reused_bit_for_bit():
    """A rule is computed once per distinct piece (pieces on different lines share their ends on
    the common bisection grid) and the rules of the pieces that recur from one evaluation to the
    next are reused: the average at a nearby state is the one a fresh integrator computes, bit
    for bit, and a shared or reused rule is the recomputed one."""
    p = _paper_p("positional")
    d = np.array([1.0, -1.0, 0.0, 0.0])
    integ = PreintegrationIntegrator(4, 8, 8, 6, direction=d)
    integ.average(attention, X_POS, p)
    n, keys, nodes, weights = integ._piece_rules
    # shared: 366 distinct among 656 pieces here (2.7e3 among 1.1e5 on a fine semantic level)
    assert keys.size < integ.last_stats.segment_nodes // n
    y = X_POS * (1 + 1e-5)
    again = integ.average(attention, y, p)
    fresh = PreintegrationIntegrator(4, 8, 8, 6, direction=d).average(attention, y, p)
    # the reuse path is exercised: 15 % of the distinct pieces recur here (many switches)
    assert np.isin(integ._piece_rules[1], keys).mean() > 0.1
    assert np.array_equal(again.grad, fresh.grad) and again.psi_y == fresh.psi_y
    na, wa = truncated_normal_rule(keys.real, keys.imag, n)
    assert np.array_equal(na, nodes) and np.array_equal(wa, weights)


@pytest.mark.skipif(not numba_available(), reason=NO_NUMBA)
def test_piece_nodes_kernel_matches_numpy():
    """The compiled nodes and warm starts of the pieces' Gauss nodes (``_piece_nodes_kernel``) are
    the numpy version's bit for bit (the same IEEE operations per node), on random pieces with
    infinite ends, ends on line points and nodes closer to an end than to any line point, for the
    whole index set and for a scattered one (the failed-node path)."""
    from replica.numeric.preintegration import _compiled_piece_kernel, _piece_nodes_numpy
    rng = np.random.default_rng(7)
    nL, D, dim, n = 30, 2, 4, 6
    U = np.concatenate([[-8.0], np.sort(rng.normal(size=12)) * 1.5, [8.0]])  # line grid with sentinels
    seg_line, seg_a, seg_b = [], [], []
    for line in range(nL):  # 0-4 interior ends per line, some on grid points
        inner = np.sort(np.concatenate([rng.uniform(-3, 3, rng.integers(0, 3)), rng.choice(U[1:-1], rng.integers(0, 3))]))
        ends = np.unique(np.concatenate([[-np.inf], inner, [np.inf]]))
        seg_line += [line] * (ends.size - 1)
        seg_a += list(ends[:-1])
        seg_b += list(ends[1:])
    seg_line, seg_a, seg_b = np.array(seg_line), np.array(seg_a), np.array(seg_b)
    S = seg_line.size
    nodes, _ = truncated_normal_rule(seg_a, seg_b, n)
    hl_end, hr_end = rng.normal(size=(D, S)), rng.normal(size=(D, S))
    hl_end[:, ~np.isfinite(seg_a)] = np.nan  # as in _segments: no branch at a line's infinite ends
    hr_end[:, ~np.isfinite(seg_b)] = np.nan
    h = rng.normal(size=(D, nL, U.size))
    axis, offsets = rng.normal(size=dim), rng.normal(size=(dim, nL))
    pieces = (n, seg_line, seg_a, seg_b, nodes, hl_end, hr_end, U, h, axis, offsets)
    kernel = _compiled_piece_kernel()
    for idx in (np.arange(S * n), np.sort(rng.choice(S * n, 50, replace=False))):
        z, warm = np.empty((dim, idx.size)), np.empty((D, idx.size))
        kernel(idx, *pieces, z, warm)
        z_ref, warm_ref = _piece_nodes_numpy(idx, *pieces)
        assert np.array_equal(z, z_ref) and np.array_equal(warm, warm_ref)
        assert np.isfinite(warm).all()  # never the missing branch of an infinite end
    # every kind of warm start occurs: a line point, the left end's branch, the right end's
    z, warm = _piece_nodes_numpy(np.arange(S * n), *pieces)
    src = [np.isin(warm[0], h[0].ravel()), np.isin(warm[0], hl_end[0]), np.isin(warm[0], hr_end[0])]
    assert all(s.any() for s in src)


@pytest.mark.skipif(not numba_available(), reason=NO_NUMBA)
def test_line_sweeps_kernel_matches_array_path():
    """The compiled continuation sweeps (``node_line_sweeps``, every line in one kernel call) give
    the array path's continuations, replaced minima and counts bit for bit (the same per-node
    Newton and bracket), at the positional paper state where minima switch along the lines; with
    planted missed minima (a point's F raised: the neighbours' continuations replace it, in both
    sweeps, and the backward replacements redo forward continuations) and a line whose
    continuation fails (a NaN minimiser: that line goes to the array path)."""
    from replica.numeric.preintegration import _Run
    p = _paper_p("positional")
    d = np.array([1.0, -1.0, 0.0, 0.0]) / math.sqrt(2.0)
    integ = PreintegrationIntegrator(4, 8, 8, 6, direction=d, backend="numba")
    run = _Run(integ, attention, X_POS, p, 1e-12, householder(d))
    assert run.kernels is not None
    nL, P = run.wy.size, integ._u.size
    z = run.z_of(np.repeat(np.arange(nL), P), np.tile(integ._u, nL))
    with np.errstate(all="ignore"):
        res = run.gprox(z, None, True)
    h, F, Z = res.h.reshape(2, nL, P), res.value.reshape(nL, P), z.reshape(4, nL, P)
    F[3, 4] += 1.0   # missed minima: found by the forward sweep ...
    F[5, 2] += 1.0   # ... and the backward one (no forward redo at the last point)
    F[7, 0] += 1.0
    h[:, 7, 0] += 0.3  # (off the minimum: its forward continuation is redone from the replacement)
    h[:, 9, 5] = np.nan  # a failed continuation on line 9
    calls = []
    arrays = run._sweeps_arrays

    def spy(hh, FF, ZZ):
        calls.append(hh.shape[1])
        return arrays(hh, FF, ZZ)

    out = {}
    for path in ("kernel", "arrays"):
        hh, FF = h.copy(), F.copy()
        run.stats.corrected = 0
        with np.errstate(all="ignore"):
            if path == "kernel":
                run._sweeps_arrays = spy
                fw = run._sweeps(hh, FF, Z)
                del run._sweeps_arrays
            else:
                fw = run._sweeps_arrays(hh, FF, Z)
        out[path] = (fw, hh, FF, run.stats.corrected)
    assert calls == [1]  # only the failed line took the array path
    (fk, hk, Fk, ck), (fa, ha, Fa, ca) = out["kernel"], out["arrays"]
    assert ck == ca >= 3
    for k in fa:
        assert np.array_equal(fk[k], fa[k], equal_nan=True), k
    assert np.array_equal(hk, ha, equal_nan=True) and np.array_equal(Fk, Fa)

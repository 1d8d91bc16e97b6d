"""The prox conventions (replica.numeric.prox.ProxConvention): 'global' takes the lowest minimum of the bracket,
'local' the minimum reached by descent from a declared start (the origin by default).

The oracle is a one-dimensional toy written here, an asymmetric double well
``l(h) = (h^2 - 1)^2 + b h^3`` with an l2 penalty: its bracket ``F = (h - omega)^2 / (2V) + l(h)``
has stationary points at the real roots of a cubic (closed form, numpy.roots), so both minimisers
are known exactly at every node, and the Gaussian averages of the saddle point are one-dimensional
integrals computed piecewise between the jumps of each minimiser to ~1e-12 (scipy.integrate.quad).
The saddle point is then solved by hand: ``qhat = alpha E f^2``, ``Vhat = -alpha E[f xi] / sqrt q``
with ``f = (h - omega) / V``, ``omega = sqrt(q) xi``, and the l2 entropic side ``V = 1 / (lam + Vhat)``,
``q = qhat / (lam + Vhat)^2`` (isotropic data, unit variance; the loss does not see the teacher).
"""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
from scipy import integrate, optimize

from replica.errors import ParameterError
from replica.numeric.prox import local_minimize, local_prox, prox, prox_convention
from tests.support import run_cli

TOY = textwrap.dedent('''
    """An asymmetric double well: two minima per node, for the prox conventions' tests."""
    from replica import L2, Domain, Model, TokenStatistics, fields, parameter, teacher_fields

    h, hs = fields(1, 1), teacher_fields(1, 1)
    b = parameter("b", "b")
    lam = parameter("lam", r"\\lambda")

    model = Model(
        name="double_well",
        description="asymmetric double well (h^2 - 1)^2 + b h^3, l2 penalty",
        h=h, hstar=hs,
        loss=(h[0] ** 2 - 1) ** 2 + b * h[0] ** 3,
        data=TokenStatistics.isotropic(1, 1),
        regularizer=L2(lam),
        parameters={b: 0.3, lam: 1.0},
        domains={lam: Domain(0, None)},
        branches={"centered": ("m",)},
    )
''')
B, LAM = 0.3, 1.0


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    from replica.registry import load_module

    path = tmp_path_factory.mktemp("toy") / "double_well.py"
    path.write_text(TOY)
    return load_module(str(path))


# --------------------------------------------------------------------------- the oracle
def _bracket(h, omega, V):
    return (h - omega) ** 2 / (2 * V) + (h * h - 1) ** 2 + B * h ** 3


def _stationary(omega, V):
    """Real roots of F'(h) = (h - omega)/V + 4h^3 - 4h + 3b h^2 (sorted)."""
    r = np.roots([4.0, 3 * B, 1.0 / V - 4.0, -omega / V])
    return np.sort(r[np.abs(r.imag) < 1e-9].real)


def oracle_local(omega, V):
    """Descent from 0 in one dimension: F'(0) = -omega/V, so it runs downhill to the first root on
    omega's side -- the smallest positive root for omega > 0, the largest negative one for omega < 0."""
    r = _stationary(omega, V)
    return r[r > 0].min() if omega > 0 else r[r < 0].max()


def oracle_global(omega, V):
    r = _stationary(omega, V)
    return r[np.argmin(_bracket(r, omega, V))]


def _jumps(h_of, q, V, lo=-9.0, hi=9.0, n=18001):
    """The xi where h_of(sqrt(q) xi) jumps (grid, then bisection to round-off)."""
    xs = np.linspace(lo, hi, n)
    hs = np.array([h_of(math.sqrt(q) * x, V) for x in xs])
    out = []
    for i in np.flatnonzero(np.abs(np.diff(hs)) > 0.2):
        a, b = xs[i], xs[i + 1]
        ha = hs[i]
        for _ in range(60):
            m = 0.5 * (a + b)
            if abs(h_of(math.sqrt(q) * m, V) - ha) < 0.2:
                a = m
            else:
                b = m
        out.append(0.5 * (a + b))
    return out


def oracle_map(q, V, alpha, h_of):
    """(qhat, Vhat) at (q, V): the averages piecewise between the minimiser's jumps."""
    cuts = [-np.inf] + _jumps(h_of, q, V) + [np.inf]
    phi = lambda x: math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)  # noqa: E731

    def f(x):
        w = math.sqrt(q) * x
        return (h_of(w, V) - w) / V

    e2 = exi = 0.0
    for a, b in zip(cuts[:-1], cuts[1:]):
        e2 += integrate.quad(lambda x: f(x) ** 2 * phi(x), a, b, epsabs=1e-14, epsrel=1e-13, limit=200)[0]
        exi += integrate.quad(lambda x: f(x) * x * phi(x), a, b, epsabs=1e-14, epsrel=1e-13, limit=200)[0]
    return alpha * e2, -alpha * exi / math.sqrt(q)


def oracle_fixed_point(alpha, h_of, x0):
    def residual(v):
        q, V = v
        qhat, Vhat = oracle_map(q, V, alpha, h_of)
        return [qhat / (LAM + Vhat) ** 2 - q, 1.0 / (LAM + Vhat) - V]

    sol = optimize.root(residual, x0, method="hybr", options={"xtol": 1e-13})
    assert sol.success and max(abs(r) for r in residual(sol.x)) < 1e-11
    return sol.x


# --------------------------------------------------------------------------- node level
def test_local_takes_the_start_basin_and_global_the_lower_minimum(toy):
    x = np.array([0.3, 1.3, 0.0])                # q, V, theta
    p = np.array([B, LAM])
    xi = np.linspace(-3, 3, 241)
    z = np.vstack([xi, np.zeros_like(xi)])
    loc = local_prox(toy, z, x, p, prox_convention("local"))
    glo = prox(toy, z, x, p)
    omega = math.sqrt(x[0]) * xi
    want_loc = np.array([oracle_local(w, x[1]) for w in omega])
    want_glo = np.array([oracle_global(w, x[1]) for w in omega])
    ok = np.abs(omega) > 1e-9                      # omega = 0 is a saddle start (tested below)
    assert np.max(np.abs(loc.h[0, ok] - want_loc[ok])) < 1e-9
    assert np.max(np.abs(glo.h[0] - want_glo)) < 1e-9
    # the conventions really differ here: a range of omega > 0 where the start's basin is the higher one
    assert np.sum(np.abs(want_loc - want_glo) > 0.5) >= 10


def test_a_declared_start_picks_its_own_basin(toy):
    x, p = np.array([0.3, 1.3, 0.0]), np.array([B, LAM])
    z = np.array([[0.4], [0.0]])
    omega = math.sqrt(0.3) * 0.4
    r = _stationary(omega, 1.3)
    for start, want in ((-2.0, r.min()), (2.0, r.max())):
        res = local_prox(toy, z, x, p, prox_convention("local", start))
        assert abs(res.h[0, 0] - want) < 1e-9


def test_a_descent_that_stops_on_a_saddle_is_not_a_minimiser(toy):
    # omega = 0: F'(0) = 0 and F''(0) = 1/V - 4 < 0, the start is a maximum of F
    x, p = np.array([0.3, 1.3, 0.0]), np.array([B, LAM])
    z = np.zeros((2, 1))
    h, F, conv, minimum = local_minimize(toy, np.zeros((1, 1)), z, x, p)
    assert conv[0] and not minimum[0]
    res = local_prox(toy, z, x, p, prox_convention("local"))
    r = _stationary(0.0, 1.3)
    assert res.n_saddle == 1 and res.n_failed == 0
    assert sorted([res.h[0, 0], res.h_other[0, 0]]) == pytest.approx([r.min(), r.max()], abs=1e-9)


def test_bad_conventions_name_the_parameter():
    with pytest.raises(ParameterError, match="prox"):
        prox_convention("nearest")
    with pytest.raises(ParameterError, match="prox_start"):
        prox_convention("global", 0.5)
    with pytest.raises(ParameterError, match="prox_start"):
        prox_convention("local", [float("nan")])


# --------------------------------------------------------------------------- fixed points and their bars
@pytest.fixture(scope="module")
def exact():
    """The oracle's fixed points at alpha = 0.5, by convention."""
    return {"local": oracle_fixed_point(0.5, oracle_local, [0.21, 1.35]),
            "global": oracle_fixed_point(0.5, oracle_global, [0.27, 1.16])}


@pytest.mark.slow  # the oracle solves its saddle point by adaptive quadrature (~20 s per convention)
@pytest.mark.parametrize("convention", ["local", "global"])
def test_fixed_point_and_its_error_bars_against_the_oracle(toy, exact, convention):
    """The default rules of each convention (the tensor rule under 'local', whose bars include the
    randomised check of replica.numeric.accuracy.local_check; the jump-aware pre-integration under 'global'):
    every bar covers the true error, and the conventions are told apart far beyond the bars."""
    from replica.numeric.accuracy import with_error_bars
    from replica.numeric.integrators import from_spec
    from replica.numeric.solver import Solver

    alpha = 0.5
    rule = None if convention == "local" else from_spec("preint", toy)
    solver = Solver(toy, {"b": B, "lam": LAM}, branch="centered", prox=convention, backend="numpy", rule=rule)
    fp = with_error_bars(solver, solver.solve_best(alpha, scout=solver.scout()), alpha)
    q, V = exact[convention]
    assert fp.prox == convention
    for name, value in (("q_1", q), ("V_1", V)):
        err, bar = abs(fp.order[name] - value), fp.errors[name]
        assert math.isfinite(bar) and err <= bar, f"{convention} {name}: error {err:.2e} above its bar {bar:.2e}"
        assert bar < 1e-3 * value  # and the bar says something
    other = exact["global" if convention == "local" else "local"]
    assert abs(other[0] - q) > 3 * fp.errors["q_1"]


# --------------------------------------------------------------------------- command line
_cli = run_cli


@pytest.mark.parametrize("args, name", [(["--prox", "nearest"], "prox"),
                                        (["--prox-start", "0.5"], "prox-start"),
                                        (["--prox", "local", "--prox-start", "a,b"], "prox-start"),
                                        (["--prox", "local", "--quadrature", "preint"], "quadrature")])
def test_bad_convention_flags_are_one_line_errors(args, name):
    res = _cli("solve", "ridge", "--alpha", "1", *args, "--json")
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"error: {name}:" in lines[0]


def test_a_convex_model_has_one_minimiser_under_both_conventions():
    import json

    out = {}
    for prox in ("global", "local"):
        res = _cli("solve", "ridge", "--alpha", "1.5", "--prox", prox, "--json", "--no-replicon")
        assert res.returncode == 0, res.stderr
        out[prox] = json.loads(res.stdout)
        assert out[prox]["prox"] == prox and out[prox]["prox_saddle"] == 0
    for k in ("q", "V", "theta", "eps_g", "phi"):
        g, loc = out["global"], out["local"]
        assert abs(g[k] - loc[k]) <= g["errors"][k] + loc["errors"][k]


def test_compiled_local_descent_matches_the_numpy_one(attention):
    """The compiled kernel (replica.numeric.kernels.node_local_average) and the numpy path
    (replica.numeric.prox.local_prox) run the same descent: same minimisers, same sums."""
    from replica.numeric.compiled import numba_available
    from replica.numeric.energetic import local_average_on_nodes

    if not numba_available():
        pytest.skip("numba is not importable (or REPLICA_BACKEND=numpy): no compiled kernel to compare")
    x = np.array([0.0566, 26.4, 0.0, 0.0593])           # the semantic state at alpha = 0.8
    p = np.array([0.3, 0.5, 0.01, 0.6, 0.4, 0.4, 0.6])
    z = np.random.default_rng(3).standard_normal((4, 3000))
    z[:, :3] = 0.0                                        # omega = 0 nodes: the start is stationary there
    w = np.full(z.shape[1], 1.0 / z.shape[1])
    conv = prox_convention("local")
    a = local_average_on_nodes(attention, z, w, x, p, conv, backend="numba")
    b = local_average_on_nodes(attention, z, w, x, p, conv, backend="numpy")
    assert a.n_failed == b.n_failed == 0 and a.n_saddle == b.n_saddle
    assert np.max(np.abs(a.state - b.state)) < 1e-7  # both stop at a Newton step below 1e-8 (1 + |h|)
    # a node stopping 1e-8 short moves the envelope gradient there by ~1e-8, its average by ~1e-11
    assert np.allclose(a.grad, b.grad, rtol=1e-9, atol=1e-10) and abs(a.psi_y - b.psi_y) < 1e-12


def test_a_kept_stationary_start_is_counted_and_reproduces_a_code_that_stops_there(toy):
    """saddles='stay' keeps the start where its gradient vanishes (as a quasi-Newton code does), for
    reproducing such codes: still counted as a saddle, never silently a minimiser."""
    x, p = np.array([0.3, 1.3, 0.0]), np.array([B, LAM])
    z = np.zeros((2, 1))
    res = local_prox(toy, z, x, p, prox_convention("local", None, "stay"))
    assert res.n_saddle == 1 and res.h[0, 0] == 0.0 and res.h_other[0, 0] == 0.0
    with pytest.raises(ParameterError, match="prox_saddles"):
        prox_convention("global", None, "stay")


def test_sweep_spec_takes_the_convention(tmp_path):
    from tests import support

    text = support.ridge_spec("[0.5, 1.0]", chunk=2)
    bad = support.spec_file(tmp_path, text.replace('kind = "solve"', 'kind = "solve"\nprox = "nearest"'), "bad.toml")
    res = support.run_cli("sweep", bad, "--out", tmp_path / "x.csv", "--jobs", "1", "--dry-run")
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1 and "compute.prox" in lines[0], res.stderr
    good = support.spec_file(tmp_path, text.replace('kind = "solve"', 'kind = "solve"\nprox = "local"'), "good.toml")
    res = support.run_cli("sweep", good, "--out", tmp_path / "x.csv", "--jobs", "1", "--dry-run")
    assert res.returncode == 0, res.stderr

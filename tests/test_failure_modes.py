"""Failure modes, run as a hostile user would: every bad input ends in exit status 2 and one
line naming the parameter, every edge in a converged result or an honest error, JSON is strict,
and interrupted runs leave no process behind.

Most checks call the command line in this process (``replica.cli.main``: the errors come
before any solve) or the validation functions it calls; the few that must solve use the
smallest non-degenerate rules. Hypothesis explores the numeric options of the command line
on their validation paths only (no full solves), with a bounded number of examples.
"""
from __future__ import annotations

import csv
import json
import math
import signal
import sys
import time
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica import validation
from tests.support import alive, cli, interrupt_leaves_no_worker, run
from replica.errors import ConvergenceError, DeclarationError, InvalidStateError, ParameterError
from replica.numeric.quadrature import gauss_hermite, parse_rule

ROOT = Path(__file__).resolve().parent.parent
# derandomized (the same examples on every run) and without an example database in the checkout
FEW = settings(max_examples=60, deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


def one_line_error(rc: int, err: str, name: str) -> str:
    """Exit 2, exactly one non-empty stderr line, naming ``name``, no traceback."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err and name in lines[0], lines[0]
    return lines[0]


def strict_json(text: str):
    """Parse JSON refusing NaN / Infinity tokens (as JavaScript and jq do)."""
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------ 1. converged only when converged
@pytest.mark.parametrize("tol", ["1", "inf", "nan", "-1", "0", "1e-2", "1e-300"])
def test_bad_tol_refused_by_solve(tol):
    one_line_error(*cli("solve", "attention", "--alpha", "2", "--branch", "semantic", "--tol", tol)[::2], "tol")


def test_bad_tol_refused_by_phase_thresholds():
    rc, out, err = cli("phase", "attention", "--thresholds-only", "--no-cache", "--tol", "inf")
    one_line_error(rc, err, "tol")
    assert out == ""


def test_solver_tol_validated(attention):
    for tol in (math.inf, math.nan, 1.0, 0.0, -1e-8, "1e-8", True):
        with pytest.raises(ParameterError) as e:
            validation_solver(attention, tol=tol)
        assert e.value.name == "tol"
    assert validation_solver(attention, tol=1e-3).tol == 1e-3


def validation_solver(module, **kw):
    from replica.numeric.solver import Solver

    kw.setdefault("rule", gauss_hermite(len(module.GAUSSIANS), 3))
    return Solver(module, **kw)


@pytest.mark.parametrize("spec", ["gh:1", "gh:2", "sobol:0", "sobol:1", "smolyak:1", "smolyak:2", "gh:-3"])
def test_degenerate_rules_refused(spec):
    line = one_line_error(*cli("solve", "attention", "--alpha", "2", "--quadrature", spec)[::2], "quadrature")
    assert "degenerate" in line or "must be" in line


def test_degenerate_rule_object_refused(attention):
    with pytest.raises(ParameterError, match="degenerate"):
        validation_solver(attention, rule=gauss_hermite(4, 1))


def test_converged_is_a_property():
    from replica.numeric.convergence import is_converged
    from replica.numeric.solver import FixedPoint

    def fp(residual, tol, admissible=True):
        return FixedPoint(model="m", branch="free", alpha=1.0, parameters={}, order={"q": 0.1}, conjugates={},
                          phi=0.0, psi_t=0.0, psi_w=0.0, psi_y=0.0, eps_g=0.0, eps_g_error=0.0, train_loss=0.0,
                          tol=tol, iterations=3, residual=residual, admissible=admissible)

    assert fp(1e-9, 1e-8).converged
    assert not fp(0.317, 1.0).converged            # the tol = 1 case of the issue
    assert not fp(1e-9, math.inf).converged
    assert not fp(1e-9, 1e-2).converged            # a tolerance above 1e-3 never counts
    assert not fp(1e-9, 1e-8, admissible=False).converged
    assert not fp(math.nan, 1e-8).converged
    assert not is_converged(2e-8, 1e-8) and is_converged(0.0, 1e-3)


def test_solve_returns_only_converged_states(ridge):
    from replica.numeric.solver import Solver

    fp = Solver(ridge, {"lam": 0.1}, rule=gauss_hermite(3, 6), tol=1e-9).solve(np.int64(2))
    assert fp.converged and fp.residual < fp.tol == 1e-9 and fp.admissible
    assert fp.to_dict()["converged"] is True and fp.to_dict()["tol"] == 1e-9


def test_unconverged_cache_entry_is_not_reused(ridge, tmp_path):
    from replica.artifacts.cache import PointCache
    from replica.phase import BranchFollower, SolverSettings

    settings_ = SolverSettings(rule=gauss_hermite(3, 6), tol=1e-9)
    f = BranchFollower(ridge, "centered", settings=settings_, cache=PointCache(tmp_path))
    x0 = f.solver.initial_state()
    first = f.solve(2.0, x0)
    assert f.solves == 1
    files = list((tmp_path / "points").rglob("*.json"))
    assert files
    for path in files:  # a tampered (or foreign) entry: status ok, residual far above tol
        entry = json.loads(path.read_text())
        entry["payload"]["residual"] = 0.5
        path.write_text(json.dumps(entry))
    again = f.solve(2.0, x0)
    assert f.solves == 2 and not again.cached and again.residual < 1e-9
    assert again.x == pytest.approx(first.x, rel=1e-12)


# ------------------------------------------------------------------ 2. strict JSON
def test_jsonio_null_with_reason(tmp_path):
    from replica.artifacts import jsonio

    obj = {"a": 1.0, "quadrature_residual": math.nan, "curve": {"eps_g": [0.1, math.inf], "n": np.int64(3)},
           "v": np.array([1.0, np.nan]), "ok": np.bool_(True)}
    text = jsonio.dumps(obj)
    back = strict_json(text)
    assert back["quadrature_residual"] is None and "companion" in back["quadrature_residual_reason"]
    assert back["curve"]["eps_g"] == [0.1, None] and back["curve"]["eps_g_reason"]
    assert back["v"] == [1.0, None] and back["v_reason"] and back["ok"] is True and back["curve"]["n"] == 3
    path = tmp_path / "x.json"
    jsonio.write(path, obj, indent=1)
    assert strict_json(path.read_text()) == back
    with pytest.raises(TypeError):
        jsonio.write(path, {"bad": object()})
    assert strict_json(path.read_text()) == back  # a failed write leaves the old file whole


def test_phase_json_is_strict(tmp_path):
    rc, out, err = cli("phase", "attention", "--omega", "0.3", "--thresholds-only", "--alpha-max", "3",
                       "--quadrature", "gh:6", "--tol", "1e-7", "--cache", tmp_path, "--quiet", "--json")
    assert rc == 0, err
    res = strict_json(out)
    curve = res["curves"]["semantic"]
    assert all(v is None for v in curve["quadrature_residual"]) and curve["quadrature_residual_reason"]
    assert 1.1 < res["alpha_c"] < 1.4


def test_solve_json_is_strict():
    rc, out, err = cli("solve", "attention", "--alpha", "2", "--branch", "semantic", "--quadrature", "gh:6", "--json")
    assert rc == 0, err
    res = strict_json(out)
    assert res["converged"] is True and res["residual"] < res["tol"] <= 1e-3


# ------------------------------------------------------------------ 3. interrupted runs
def _entries(cache: Path) -> list[Path]:
    """Cache entries moved into place (not the temporary files of a write in progress)."""
    return [p for p in cache.rglob("*.json") if not p.name.startswith(".")]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process checks read /proc (Linux)")
@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_interrupted_figures_leave_no_worker(tmp_path, sig, status):
    cache = tmp_path / "cache"
    # interrupted once both workers are up and a point is solved
    interrupt_leaves_no_worker(("figures", "--quick", "--jobs", "2", "--out", tmp_path / "fig", "--cache", cache),
                               sig, status, ready=lambda: bool(_entries(cache)), poll=0.2)
    entries = _entries(cache)  # finished points stay in the cache, each one whole
    assert entries and all(json.loads(e.read_text())["payload"] for e in entries)


def _sleep_forever():  # a worker task that never ends by itself
    time.sleep(3600)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process checks read /proc (Linux)")
def test_worker_pool_stops_workers_on_interrupt():
    from replica.runtime.workers import worker_pool

    with pytest.raises(KeyboardInterrupt):
        with worker_pool(2) as pool:
            futs = [pool.submit(_sleep_forever) for _ in range(2)]
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not all(f.running() for f in futs):
                time.sleep(0.05)
            workers = list(pool._processes)
            assert len(workers) == 2
            raise KeyboardInterrupt
    assert not any(alive(w) for w in workers)


# ------------------------------------------------------------------ 4. honest non-convergence
def test_lam_zero_message_names_point_iterations_residual_and_advice():
    rc, _, err = cli("solve", "attention", "--alpha", "2", "--branch", "semantic", "--lam", "0",
                     "--quadrature", "gh:4")
    line = one_line_error(rc, err, "lam = 0")
    for part in ("semantic branch", "alpha=2", "iterations", "residual", "use lam >= 1e-06"):
        assert part in line, part
    assert "damped step: no admissible step" not in line


def test_large_alpha_failure_names_the_point():
    rc, _, err = cli("solve", "attention", "--alpha", "1e3", "--branch", "positional", "--quadrature", "gh:4")
    line = one_line_error(rc, err, "positional branch")
    assert "alpha=1000" in line and "iterations" in line and "residual" in line


def test_ridge_interpolation_peak_is_an_honest_error():
    """Ridge at lam = 0, alpha = 1: the test error diverges; no finite state may pass as converged."""
    rc, _, err = cli("solve", "ridge", "--alpha", "1", "--lam", "0", "--quadrature", "gh:6")
    line = one_line_error(rc, err, "lam = 0")
    assert "infinity" in line and "alpha=1" in line


def test_max_iter_advice():
    rc, _, err = cli("solve", "attention", "--alpha", "2", "--branch", "semantic", "--quadrature", "gh:4",
                     "--max-iter", "3")
    line = one_line_error(rc, err, "max-iter")
    assert "3 iterations" in line


# ------------------------------------------------------------------ 5. size guards
@pytest.mark.parametrize("spec", ["smolyak:60", "gh:47", "sobol:26", "gh:1000000000"])
def test_rule_size_refused_before_allocating(spec):
    line = one_line_error(*cli("solve", "attention", "--alpha", "2", "--quadrature", spec)[::2], "quadrature")
    assert "budget" in line and "nodes" in line


def test_simulate_refuses_what_memory_cannot_hold():
    res = run("attention", "--d", "1000000", module="numerics.simulate")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "d=1000000" in res.stderr and "TiB" in res.stderr


@pytest.mark.parametrize("n", [3, 20, 150, 151, 200, 400, 1000])
def test_gauss_hermite_every_order(n):
    """Finite weights at every order (hermegauss gave NaN from ~350 on); the rule is exact for
    polynomials of degree 2n - 1, so the moments E z^2 = 1, E z^4 = 3, E z^6 = 15 are met to
    rounding: n positive weights summed, relative error below n * 1e-14."""
    r = gauss_hermite(1, n)
    assert np.all(np.isfinite(r.weights)) and np.all(r.weights >= 0)
    z = r.nodes[0]
    for k, m in ((0, 1.0), (2, 1.0), (4, 3.0), (6, 15.0)):
        if 2 * n - 1 >= k:
            assert r.expect(z ** k) == pytest.approx(m, rel=n * 1e-14)


def test_gauss_hermite_orders_agree_across_methods():
    """Orders 150 (numpy) and 151 (scipy) integrate a smooth function to the same value."""
    f = lambda z: np.cos(z) * np.exp(-0.1 * z * z)  # noqa: E731
    a, b = gauss_hermite(1, 150), gauss_hermite(1, 151)
    exact = math.exp(-0.5 / 1.2) / math.sqrt(1.2)   # E cos(z) e^{-z^2/10} for z ~ N(0, 1)
    assert a.expect(f(a.nodes[0])) == pytest.approx(exact, abs=1e-13)
    assert b.expect(f(b.nodes[0])) == pytest.approx(exact, abs=1e-13)


# ------------------------------------------------------------------ 6. one line, not a traceback
def test_latex_to_missing_directory_before_deriving(tmp_path):
    rc, out, err = cli("derive", "attention", "--latex", tmp_path / "missing" / "a.tex")
    one_line_error(rc, err, "latex")
    assert out == "" and not (tmp_path / "missing").exists()


@pytest.mark.parametrize("where", [
    "file",
    pytest.param("proc", marks=pytest.mark.skipif(not Path("/proc").is_dir(), reason="/proc is Linux's")),
])
def test_figures_out_checked_before_computing(tmp_path, where):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out = blocker / "fig" if where == "file" else Path("/proc/fig")
    rc, stdout, err = cli("figures", "--quick", "--out", out, "--no-cache")
    one_line_error(rc, err, "out")
    assert stdout == ""


def test_simulate_sweep_out_checked_before_training(tmp_path):
    res = run("sweep", "--alphas", "2", "--d", "50", "--steps", "1", "--out", tmp_path / "missing" / "s.csv",
              module="numerics.simulate")
    assert res.returncode == 2 and "Traceback" not in res.stderr and "out" in res.stderr
    assert not (tmp_path / "missing").exists()


def test_simulate_sweep_rows_written_whole(tmp_path):
    from numerics.applications.attention.simulate import CSV_COLUMNS, _append_row

    out = tmp_path / "s.csv"
    _append_row(out, [str(i) for i in range(len(CSV_COLUMNS))])
    _append_row(out, [str(2 * i) for i in range(len(CSV_COLUMNS))])
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == CSV_COLUMNS and len(rows) == 3 and rows[2][1] == "2"
    assert [p.name for p in tmp_path.iterdir()] == ["s.csv"]  # no temporary file left


@pytest.mark.parametrize("text,needle", [
    ("x = (\n", "syntax error"),
    ("model = 5\n", "replica.Model"),
    ("import a_module_that_does_not_exist\n", "ModuleNotFoundError"),
])
def test_bad_user_model_file(tmp_path, text, needle):
    path = tmp_path / "mine.py"
    path.write_text(text)
    for args in (("solve", path, "--alpha", "1"), ("derive", path), ("generate", path)):
        line = one_line_error(*cli(*args)[::2], "model")
        assert needle in line


def test_cache_entry_with_list_payload_is_a_miss(tmp_path):
    from replica.artifacts.cache import PointCache, cache_key

    cache = PointCache(tmp_path)
    desc = {"alpha": 1.0}
    cache.put("m", desc, {"status": "ok"})
    path = cache.path("m", cache_key(desc))
    entry = json.loads(path.read_text())
    entry["payload"] = [1, 2, 3]
    path.write_text(json.dumps(entry))
    assert cache.get("m", desc) is None and cache.misses == 1


@pytest.mark.parametrize("overrides,name", [
    ({"lam": "abc"}, "lam"), ({"lam": "0.1"}, "lam"), ({"lam": True}, "lam"), ({"lam": None}, "lam"),
    ({"omega": math.nan}, "omega"), ({"omega": 1.5}, "omega"), ({"sigma": 0.0}, "sigma"),
    ({"sigma": 1e200}, "sigma"), ({"bogus": 1.0}, "bogus"),
])
def test_solver_parameters_named(attention, overrides, name):
    with pytest.raises(ParameterError) as e:
        validation_solver(attention, parameters=overrides)
    assert e.value.name == name


@pytest.mark.parametrize("x0,needle", [
    ([0.1, 1.0], "needs 4 entries"), ([[0.1, 1.0, 0.0, 0.1]], "needs 4 entries"), ("abc", "sequence"),
    ({"q": 0.1, "V": 1.0}, "missing"), ([0.1, "a", 0.0, 0.1], "x0[V]"), ([0.1, math.nan, 0.0, 0.1], "x0[V]"),
])
def test_wrong_x0_named(attention, x0, needle):
    with pytest.raises(ParameterError, match=r"x0") as e:
        validation_solver(attention, branch="semantic").solve(2.0, x0)
    assert needle in str(e.value)


@pytest.mark.parametrize("value,needle", [("0.5", "real number"), (math.nan, "finite"), (math.inf, "finite"),
                                          (True, "real number")])
def test_model_defaults_checked(value, needle):
    import sympy as sp
    from replica import L2, Domain, Model, TokenStatistics, fields, parameter, teacher_fields

    h, hs = fields(1, 1), teacher_fields(1, 1)
    lam = parameter("lam", r"\lambda")
    with pytest.raises(DeclarationError, match=needle) as e:
        Model(name="m", h=h, hstar=hs, loss=sp.Rational(1, 2) * (hs[0] - h[0]) ** 2,
              data=TokenStatistics.isotropic(1, 1), regularizer=L2(lam), parameters={lam: value},
              domains={lam: Domain(0, None)})
    assert "lam" in str(e.value)


def test_model_file_with_nan_default_is_one_line(tmp_path):
    src = (ROOT / "derivations" / "ridge.py").read_text().replace("lam: 0.1", "lam: float('nan')")
    assert "float('nan')" in src
    path = tmp_path / "ridge_nan.py"
    path.write_text(src)
    one_line_error(*cli("solve", path, "--alpha", "1")[::2], "lam")


# ------------------------------------------------------------------ 7. minor
def test_parameter_given_twice_is_an_error():
    line = one_line_error(*cli("solve", "attention", "--alpha", "2", "--param", "omega=0.3", "--omega", "0.5")[::2],
                          "omega")
    assert "twice" in line
    one_line_error(*cli("solve", "attention", "--alpha", "2", "--param", "lam=0.1", "--param", "lam=0.2")[::2],
                   "lam")


def test_alpha_types(ridge):
    from replica.numeric.solver import Solver

    s = Solver(ridge, rule=gauss_hermite(3, 6))
    for bad in (True, "2", None, math.inf, -1.0, 1e308):
        with pytest.raises(ParameterError) as e:
            s.solve(bad)
        assert e.value.name == "alpha"
    assert s.solve(np.int64(2)).alpha == 2.0


@pytest.mark.parametrize("args,name", [
    (["--alpha", "1e308"], "alpha"), (["--alpha", "2", "--sigma", "0"], "sigma"),
    (["--alpha", "2", "--max-iter", "0"], "max-iter"), (["--alpha", "2", "--param", "omega"], "param"),
    (["--alpha", "2", "--param", "nonsense=1"], "nonsense"),
])
def test_minor_inputs_blame_the_parameter(args, name):
    one_line_error(*cli("solve", "attention", *args)[::2], name)


def test_generate_out_needs_existing_directory(tmp_path):
    target = tmp_path / "a" / "b" / "ridge.py"
    one_line_error(*cli("generate", "ridge", "--out", target)[::2], "out")
    assert not (tmp_path / "a").exists()


def test_cache_dir_follows_platform_convention(tmp_path, monkeypatch):
    from replica.artifacts.cache import default_cache_dir

    monkeypatch.delenv("REPLICA_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert default_cache_dir() == tmp_path / "xdg" / "replica"
    monkeypatch.setenv("REPLICA_CACHE", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"


# ------------------------------------------------------------------ property tests (validation paths)
finite_or_not = st.floats(allow_nan=True, allow_infinity=True)


@FEW
@given(tol=finite_or_not)
def test_tol_property(tol):
    ok = math.isfinite(tol) and validation.MIN_TOL <= tol <= validation.MAX_TOL
    args = Namespace(tol=tol, max_iter=500)
    from replica.cli.commands.common import check_numeric_args

    if ok:
        check_numeric_args(args)
    else:
        with pytest.raises(ParameterError) as e:
            check_numeric_args(args)
        assert e.value.name == "tol"
        one_line_error(*cli("solve", "attention", "--alpha", "2", f"--tol={tol!r}")[::2], "tol")


@FEW
@given(alpha=finite_or_not)
def test_alpha_property(alpha):
    ok = math.isfinite(alpha) and 0 <= alpha <= validation.MAX_ALPHA
    if ok:
        assert validation.sample_complexity(alpha) == alpha
    else:
        one_line_error(*cli("solve", "attention", f"--alpha={alpha!r}")[::2], "alpha")


@FEW
@given(lo=finite_or_not, hi=finite_or_not)
def test_phase_range_property(lo, hi):
    valid = all(math.isfinite(v) and 0 < v <= validation.MAX_ALPHA for v in (lo, hi)) and hi > lo
    if not valid:
        rc, out, err = cli("phase", "attention", f"--alpha-min={lo!r}", f"--alpha-max={hi!r}", "--no-cache")
        one_line_error(rc, err, "alpha-m")
        assert out == ""


@FEW
@given(kind=st.sampled_from(["gh", "smolyak", "sobol"]), order=st.integers(-5, 10 ** 7),
       dim=st.integers(1, 8))
def test_rule_spec_property(kind, order, dim):
    """A rule spec is refused (naming --quadrature) iff degenerate or over the node budget;
    otherwise it has the predicted number of nodes (built only when small)."""
    spec = f"{kind}:{order}"
    degenerate = order < validation.MIN_ORDER[kind]
    try:
        n = None if degenerate else validation.check_rule_size(kind, dim, order, "quadrature", spec)
    except ParameterError as e:
        assert e.name == "quadrature" and "budget" in str(e)
        n = None
    if n is None:
        with pytest.raises(ParameterError) as e:
            parse_rule(spec, dim)
        assert e.value.name == "quadrature"
    elif n <= 20_000:
        rule = parse_rule(spec, dim)
        assert rule.size <= n if kind == "smolyak" else rule.size == n
        assert np.all(np.isfinite(rule.weights)) and rule.weights.sum() == pytest.approx(1.0, abs=1e-12)


@FEW
@given(name=st.sampled_from(["omega", "sigma", "lam"]), value=finite_or_not)
def test_model_parameter_property(attention, name, value):
    """Each CLI parameter flag: accepted iff inside its declared domain with rho_bar finite and
    positive; otherwise refused naming that parameter (solver construction only, no solve)."""
    lo, hi = attention.DOMAINS[name]
    inside = math.isfinite(value) and (lo is None or value >= lo) and (hi is None or value <= hi)
    sigma = value if name == "sigma" else 0.5
    if name == "sigma" and inside:
        inside = 0 < sigma * sigma < math.inf
    try:
        validation_solver(attention, parameters={name: value})
    except ParameterError as e:
        assert not inside and e.name == name, (value, str(e))
    else:
        assert inside, value


def test_simulate_memory_bound():
    """The bound is n L d (8 + 2 itemsize) bytes: X drawn in float64, X and Y as tensors."""
    from numerics.simulate import check_memory

    assert check_memory(d=1000, alpha=2.0, L=2, itemsize=8, available=10 ** 12) == 2000 * 2 * 1000 * 24
    assert check_memory(d=1000, alpha=2.0, L=2, itemsize=4, available=10 ** 12) == 2000 * 2 * 1000 * 16
    with pytest.raises(ValueError, match="d=1000 "):
        check_memory(d=1000, alpha=2.0, L=2, available=2000 * 2 * 1000 * 24 - 1)

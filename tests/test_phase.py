"""Phase analysis of the attention study (replica.phase through replica.applications.attention): branches,
spinodals, alpha_c, eps_lin, alpha_l, cache, CLI, figures.

Fast tests use a coarse quadrature (gh:8, the settings of ``replica figures --quick``) and one
on-disk cache shared by the whole module, so the CLI and figure tests mostly read points
that the API tests solved. Slow tests (``-m slow``) use the figures' default quadrature.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from replica.applications.attention.figures import quick_config
from replica.applications.attention.paper import PAPER_A as _PAPER_A, SECOND_A as _SECOND_A
from replica.applications.attention.phase import phase_point, phase_points
from replica.artifacts.cache import PointCache, cache_key
from replica.phase import BranchFollower, SolverSettings, StepControl, follow_branch, linear_baseline_error
from tests.support import run_cli

ROOT = Path(__file__).resolve().parent.parent
QUICK = quick_config()
# exactly the settings of `replica figures --quick`, so that its phase points come from the cache
KW = dict(alpha_min=QUICK.alpha_min, alpha_max=QUICK.alpha_max, settings=QUICK.settings, steps=QUICK.steps,
          xtol=QUICK.xtol, branches=("semantic", "positional"))
PAPER_A = np.array(_PAPER_A)
SECOND_A = np.array(_SECOND_A)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("replica-cache")


@pytest.fixture(scope="module")
def results(attention, cache_dir):
    """omega -> PhaseResult on the paper's instance (omega = 0.3 with full curves, as in the figures)."""
    cache = PointCache(cache_dir)
    return {0.3: phase_point(attention, 0.3, cache=cache, early_stop=False, **KW),
            0.1: phase_point(attention, 0.1, cache=cache, early_stop=True, **KW)}




# --------------------------------------------------------------------------- linear baseline
def mc_linear_baseline(omega, sigma, A, n=1_000_000, seed=0):
    """Hand-typed oracle: 1/2 sum_{l,k} rho_bar_k Var[T(h*)_{lk}], h*_l ~ N(0, sigma^2) iid,
    T = (1 - omega) softmax_row(h* h*^T) + omega A, rho_bar_k = sigma^2. Returns (mean, s.e.)."""
    rng = np.random.default_rng(seed)
    h = rng.normal(0.0, sigma, size=(n, 2))
    G = h[:, :, None] * h[:, None, :]                       # (n, 2, 2) scores h_l h_k
    G = G - G.max(axis=2, keepdims=True)
    E = np.exp(G)
    S = E / E.sum(axis=2, keepdims=True)                    # row softmax
    T = (1 - omega) * S + omega * A[None]
    dev2 = (T - T.mean(axis=0)) ** 2                        # per-sample squared deviations
    z = 0.5 * sigma ** 2 * dev2.sum(axis=(1, 2))            # rho_bar_k = sigma^2 for every column
    return z.mean() * n / (n - 1), z.std(ddof=1) / np.sqrt(n)


@pytest.mark.parametrize("omega,sigma,A", [(0.3, 0.5, PAPER_A), (0.0, 0.5, PAPER_A), (0.45, 1.0, SECOND_A)])
def test_linear_baseline_matches_monte_carlo(attention, omega, sigma, A):
    params = {"omega": omega, "sigma": sigma, "A_11": A[0, 0], "A_12": A[0, 1], "A_21": A[1, 0],
              "A_22": A[1, 1]}
    eps, err = linear_baseline_error(attention, params)
    mc, se = mc_linear_baseline(omega, sigma, A)
    assert se < 0.01 * mc
    assert err < 0.01 * eps                                  # quadrature error estimate
    assert abs(eps - mc) < 4 * np.hypot(se, err), (eps, mc, se, err)


def test_linear_baseline_independent_of_A(attention):
    e1, _ = linear_baseline_error(attention, {"omega": 0.3})
    e2, _ = linear_baseline_error(attention, {"omega": 0.3, "A_11": 0.3, "A_12": 0.7, "A_21": 0.8, "A_22": 0.2})
    assert e1 == pytest.approx(e2, rel=1e-12)


# --------------------------------------------------------------------------- thresholds
def test_paper_orientation_at_omega_03(results):
    r = results[0.3]
    # docs/explanation/theory.md §6 / paper Fig. 2: alpha_c a little above 1.2, alpha_l a little below 1.5
    assert 1.2 < r.alpha_c.value < 1.3, r.alpha_c
    assert 1.42 < r.alpha_l.value < 1.5, r.alpha_l
    assert r.alpha_l.value > r.alpha_c.value
    assert r.segments[0][2] == "positional" and r.segments[-1][2] == "semantic"
    assert r.segments[0][1] == pytest.approx(r.alpha_c.value)


@pytest.mark.parametrize("omega", [0.1, 0.3])
def test_alpha_l_above_alpha_c(results, omega):
    r = results[omega]
    assert r.alpha_c.value is not None and r.alpha_l.value is not None, (r.alpha_c, r.alpha_l)
    assert r.alpha_l.value > r.alpha_c.value


def test_alpha_c_grows_with_omega(results):
    assert results[0.1].alpha_c.value < results[0.3].alpha_c.value


def test_thresholds_are_roots_on_solved_points(results):
    r = results[0.3]
    s, p = r.curves["semantic"], r.curves["positional"]
    ac = r.alpha_c.value
    # the root finder solved both branches at (within xtol of) alpha_c, and Phi agrees there
    ps, pp = min(s.points, key=lambda q: abs(q.alpha - ac)), min(p.points, key=lambda q: abs(q.alpha - ac))
    assert abs(ps.alpha - ac) < 2e-3 and abs(pp.alpha - ac) < 2e-3
    slope = abs(ps.psi_y - pp.psi_y)
    assert abs(ps.phi - pp.phi) <= slope * 2 * QUICK.xtol + 1e-9
    al = r.alpha_l.value
    pl = min(s.points, key=lambda q: abs(q.alpha - al))
    assert abs(pl.alpha - al) < 2e-3 and abs(pl.eps_g - r.eps_lin) < 1e-5


def test_semantic_spinodal_reported_not_jumped_over(results):
    r = results[0.3]
    c = r.curves["semantic"]
    assert len(r.spinodals["semantic"]) == 1
    end = c.ends[0]
    assert 0.6 < end.alpha < 0.9 and end.reason in ("jump", "no-convergence", "inadmissible", "merged")
    assert c.range[0] == pytest.approx(end.alpha)
    # every point of the curve is on the semantic branch: m = 0, theta clearly non-zero
    assert np.all(c.values("m") == 0.0) and np.all(c.values("theta") > 0.02)
    # positional branch: theta = 0 and m > 0 all along
    pc = r.curves["positional"]
    assert np.all(pc.values("theta") == 0.0) and np.all(pc.values("m") > 0.05)


def test_continuation_has_no_jumps(results):
    for c in results[0.3].curves.values():
        steps = [p.step_error for p in c.points if np.isfinite(p.step_error)]
        assert max(steps) <= StepControl().jump


def test_null_crossing_with_reason(attention, cache_dir):
    # up to alpha = 1 at omega = 0.3 the semantic branch never wins: alpha_c and alpha_l are null
    r = phase_point(attention, 0.3, cache=PointCache(cache_dir), **dict(KW, alpha_max=1.0))
    assert r.alpha_c.value is None and "no transition" in r.alpha_c.reason
    assert r.alpha_l.value is None and "above eps_lin" in r.alpha_l.reason
    d = r.to_dict()
    assert d["alpha_c"] is None and d["alpha_c_reason"]


def test_follow_branch_api(attention, cache_dir):
    c = follow_branch(attention, "positional", 0.5, 0.9, {"omega": 0.3}, settings=QUICK.settings,
                      cache=PointCache(cache_dir))
    assert c.range == (0.5, 0.9) and not c.ends and len(c) >= 3
    arr = c.arrays()
    for k in ("alpha", "q", "m", "theta", "V", "eps_g", "phi"):
        assert len(arr[k]) == len(c)
    assert np.all(np.diff(arr["alpha"]) > 0)


# --------------------------------------------------------------------------- cache
def test_cache_round_trip_and_corruption(tmp_path):
    cache = PointCache(tmp_path)
    desc = {"model": "m", "alpha": 1.5, "parameters": {"omega": 0.3}}
    assert cache.get("m", desc) is None
    cache.put("m", desc, {"phi": -1.25, "x": [1.0, float("nan")]})
    got = cache.get("m", desc)
    assert got["phi"] == -1.25 and np.isnan(got["x"][1])
    assert cache.get("m", dict(desc, alpha=1.5000001)) is None
    path = cache.path("m", cache_key(desc))
    assert path.exists() and not list(path.parent.glob(".tmp-*"))
    path.write_text('{"key": "truncated')                       # a partial write
    assert cache.get("m", desc) is None
    path.write_bytes(b"\xff\xfe garbage")
    assert cache.get("m", desc) is None
    cache.put("m", desc, {"phi": 2.0})                         # overwritten by the next write
    assert cache.get("m", desc)["phi"] == 2.0
    assert PointCache(tmp_path, enabled=False).get("m", desc) is None


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICA_CACHE", str(tmp_path / "c"))
    assert PointCache().root == tmp_path / "c"


def test_solver_points_are_cached_and_corruption_ignored(attention, tmp_path):
    cache = PointCache(tmp_path)
    f = BranchFollower(attention, "semantic", {"omega": 0.3}, QUICK.settings, cache=cache)
    x0 = f.solver.initial_state()
    p1 = f.solve(2.0, x0, keyed_by_start=True)
    assert f.solves == 1
    f2 = BranchFollower(attention, "semantic", {"omega": 0.3}, QUICK.settings, cache=PointCache(tmp_path))
    p2 = f2.solve(2.0, x0, keyed_by_start=True)
    assert f2.solves == 0 and f2.cached == 1 and p2.cached
    assert p2.phi == p1.phi and np.array_equal(p2.x, p1.x)
    # a warm start near the point reads the alpha-keyed entry
    p3 = f2.solve(2.0, p1.x * 1.01)
    assert f2.solves == 0 and p3.phi == p1.phi
    for path in Path(tmp_path).rglob("*.json"):
        path.write_text("not json")
    f3 = BranchFollower(attention, "semantic", {"omega": 0.3}, QUICK.settings, cache=PointCache(tmp_path))
    p4 = f3.solve(2.0, x0, keyed_by_start=True)
    assert f3.solves == 1 and p4.phi == pytest.approx(p1.phi, rel=1e-9)


def test_parallel_phase_points_from_cache(attention, cache_dir, results):
    tasks = [dict(KW, omega=0.3, early_stop=False), dict(KW, omega=0.1, early_stop=True)]
    out = phase_points(attention, tasks, jobs=2, cache=PointCache(cache_dir))
    assert [r.parameters["omega"] for r in out] == [0.3, 0.1]
    assert out[0].alpha_c.value == pytest.approx(results[0.3].alpha_c.value, abs=1e-9)
    assert out[1].alpha_l.value == pytest.approx(results[0.1].alpha_l.value, abs=1e-9)
    assert out[0].solves == 0 and out[0].cached > 0


# --------------------------------------------------------------------------- CLI
def _no_nan(token):
    raise ValueError(f"non-standard JSON token {token}")


def test_phase_cli_json(results, cache_dir):
    res = run_cli("phase", "attention", "--omega", "0.3", "--alpha-max", "3", "--quadrature", "gh:8", "--tol",
                  "1e-7", "--branches", "semantic,positional", "--cache", str(cache_dir), "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout, parse_constant=_no_nan)  # strict JSON: no NaN tokens
    for key in ("alpha_c", "alpha_l", "eps_lin", "spinodals", "curves", "alpha_c_reason", "alpha_l_reason"):
        assert key in out, key
    assert set(out["curves"]) == {"semantic", "positional"}
    for c in out["curves"].values():
        n = len(c["alpha"])
        assert n > 5 and all(len(c[k]) == n for k in ("q", "m", "theta", "eps_g", "phi"))
    assert set(out["spinodals"]) == {"semantic", "positional"}
    assert all(isinstance(v, list) for v in out["spinodals"].values())
    assert 1.2 < out["alpha_c"] < 1.3 and out["alpha_l"] > out["alpha_c"]


@pytest.mark.parametrize("args,name", [
    (["--omega", "1.5"], "omega"),
    (["--omega", "0.3", "--alpha-min", "-1"], "alpha-min"),
    (["--omega", "0.3", "--alpha-min", "2", "--alpha-max", "1"], "alpha-max"),
    (["--omega", "0.3", "--jobs", "0"], "jobs"),
    (["--omega", "0.3", "--branches", "semantic,bogus"], "branches"),
    (["--omega", "0.3", "--A", "0.5,0.5,0.2"], "A"),
    (["--omega", "0.3", "--lam", "-1"], "lam"),
])
def test_phase_cli_bad_input(args, name, tmp_path):
    res = run_cli("phase", "attention", *args, "--cache", str(tmp_path), "--json")
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and name in lines[0], res.stderr
    assert res.stdout == ""


def test_figures_cli_bad_input(tmp_path):
    res = run_cli("figures", "--quick", "--sim", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "f"))
    assert res.returncode != 0 and "sim" in res.stderr.strip().splitlines()[-1]
    res = run_cli("figures", "--quick", "--jobs", "0", "--out", str(tmp_path / "f"))
    assert res.returncode != 0 and "jobs" in res.stderr


def _fake_sim(path: Path) -> None:
    cols = ["model", "omega", "alpha", "d", "init", "seeds", "q", "q_se", "m", "m_se", "theta", "theta_se",
            "eps_g", "eps_g_se", "train_loss", "train_loss_se", "converged"]
    rows = [["attention", 0.3, 1.0, 200, "positional", 2, 0.045, 0.002, 0.25, 0.01, 0.0, 0.001, 0.0034, 1e-4,
             0.0023, 1e-4, True],
            ["attention", 0.3, 1.0, 200, "semantic", 2, 0.07, 0.003, 0.0, 0.001, 0.1, 0.01, 0.0028, 1e-4,
             0.0024, 1e-4, True],
            ["attention", 0.3, 2.0, 200, "semantic", 2, 0.11, 0.003, 0.0, 0.001, 0.16, 0.01, 0.0014, 1e-4,
             0.0036, 1e-4, True],
            ["linear", 0.3, 2.0, 200, "-", 2, "nan", "nan", "nan", "nan", "nan", "nan", 0.002, 1e-4, 0.001, 1e-4,
             True]]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        w.writerows(rows)


def test_figures_quick(cache_dir, results, tmp_path):
    sim = tmp_path / "sim.csv"
    _fake_sim(sim)
    out = tmp_path / "fig"
    res = run_cli("figures", "--quick", "--jobs", "1", "--out", str(out), "--cache", str(cache_dir), "--sim", str(sim))
    assert res.returncode == 0, res.stderr
    stems = ["fig2_middle_summary_statistics", "fig2_right_test_error", "fig3_centre_training_loss",
             "fig3_right_phase_diagram", "fig9_phase_diagram"]
    for stem in stems:
        png, csv_path = out / f"{stem}.png", out / f"{stem}.csv"
        assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with open(csv_path) as fh:
            rows = list(csv.reader(fh))
        assert len(rows) > 1, stem
    summary = json.loads((out / "summary.json").read_text(), parse_constant=_no_nan)
    th = {(tuple(t["A"]), t["omega"]): t for t in summary["thresholds"]}
    t = th[((0.6, 0.4, 0.4, 0.6), 0.3)]
    assert t["alpha_c"] == pytest.approx(results[0.3].alpha_c.value, abs=5e-3)
    assert summary["simulation_rows_used"] == 4
    with open(out / "fig3_right_phase_diagram.csv") as fh:
        header = next(csv.reader(fh))
    assert header[:3] == ["omega", "alpha_c", "alpha_l"]


# --------------------------------------------------------------------------- slow
@pytest.mark.slow
def test_phase_diagram_default_quadrature(attention, tmp_path):
    """alpha_l > alpha_c and alpha_c increasing over the paper's omega range (figures' defaults)."""
    from replica.applications.attention.figures import FigureConfig

    cfg = FigureConfig()
    kw = dict(alpha_min=cfg.alpha_min, alpha_max=cfg.alpha_max, settings=cfg.settings, steps=cfg.steps,
              xtol=cfg.xtol, branches=("semantic", "positional"), early_stop=True)
    omegas = [0.05, 0.15, 0.25, 0.35, 0.45]
    rs = phase_points(attention, [dict(kw, omega=w) for w in omegas], jobs=2, cache=PointCache(tmp_path))
    ac = [r.alpha_c.value for r in rs]
    al = [r.alpha_l.value for r in rs]
    assert all(v is not None for v in ac + al), [(r.alpha_c, r.alpha_l) for r in rs]
    assert all(b > a for a, b in zip(ac, al))
    assert all(np.diff(ac) > 0), ac


def test_solver_settings_rule_per_branch(attention):
    from replica.numeric.quadrature import QuadratureRule

    s = SolverSettings(rule={"positional": "gh:6", "default": "gh:8"})
    r_pos, r_sem = s.rule_for(attention, "positional"), s.rule_for(attention, "semantic")
    assert isinstance(r_pos, QuadratureRule) and r_pos.order == 6 and r_sem.order == 8
    assert SolverSettings().rule_for(attention, "semantic") is None
    f = BranchFollower(attention, "positional", {"omega": 0.3}, s)
    assert "order=6" in f.describe()["quadrature"]


# --------------------------------------------------------------------------- fast thresholds path
def test_thresholds_only_agrees_with_continuation(attention, results, cache_dir):
    """The fast thresholds path (a few root-finder solves) gives the continuation's alpha_c, alpha_l."""
    from replica.applications.attention.phase import thresholds

    kw = {k: v for k, v in KW.items() if k != "branches"}
    # at small omega the positional sector holds nearly degenerate solutions (Phi within ~1e-6 under
    # GH 8), and which one is followed moves alpha_c by a few 1e-3 (docs/how-to/phase.md)
    for w, tol in ((0.3, 1e-3), (0.1, 5e-3)):
        r = thresholds(attention, w, **kw)
        ref = results[w]
        assert "thresholds-only" in r.alpha_c.reason and "fallback" not in r.alpha_c.reason, r.alpha_c
        assert r.alpha_c.value == pytest.approx(ref.alpha_c.value, abs=tol)
        assert r.alpha_l.value == pytest.approx(ref.alpha_l.value, abs=1e-3)
        assert r.solves < 40 < ref.solves
        d = r.to_dict()   # the JSON contract of `replica phase`
        for key in ("alpha_c", "alpha_l", "eps_lin", "spinodals", "curves"):
            assert key in d
        assert set(d["curves"]) == {"semantic", "positional"}


def test_thresholds_null_with_reason(attention, cache_dir):
    """No transition below alpha_max = 1 at omega = 0.3: null with the continuation's reason."""
    from replica.applications.attention.phase import thresholds

    kw = {k: v for k, v in KW.items() if k != "branches"}
    r = thresholds(attention, 0.3, cache=PointCache(cache_dir), **dict(kw, alpha_max=1.0))
    assert r.alpha_c.value is None and "no transition" in r.alpha_c.reason
    assert r.alpha_l.value is None and r.alpha_l.reason
    r = thresholds(attention, 0.3, fallback=False, **dict(kw, alpha_max=1.0))
    assert r.alpha_c.value is None and "fast path" in r.alpha_c.reason


def test_thresholds_diagram_runs_and_cli(attention, results, cache_dir):
    from replica.applications.attention.phase import thresholds_diagram

    kw = {k: v for k, v in KW.items() if k != "branches"}
    out = thresholds_diagram(attention, [0.3, 0.25], jobs=2, **kw)
    assert [r.parameters["omega"] for r in out] == [0.3, 0.25]
    assert out[0].alpha_c.value == pytest.approx(results[0.3].alpha_c.value, abs=1e-3)
    assert out[1].alpha_c.value < out[0].alpha_c.value < out[0].alpha_l.value
    res = run_cli("phase", "attention", "--omega", "0.3", "--alpha-max", "3", "--quadrature", "gh:8", "--tol",
                  "1e-7", "--no-cache", "--thresholds-only", "--json", "--quiet")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["alpha_c"] == pytest.approx(results[0.3].alpha_c.value, abs=1e-3)
    assert set(d["spinodals"]) == {"semantic", "positional"} and "curves" in d


@pytest.mark.slow
def test_thresholds_reproduce_phase_table(attention):
    """Every omega of docs/how-to/phase.md (GH 12, figures' settings) against the continuation, to 1e-3."""
    from replica.applications.attention.figures import FigureConfig
    from replica.applications.attention.phase import thresholds_diagram

    cfg = FigureConfig()
    kw = dict(alpha_min=cfg.alpha_min, alpha_max=cfg.alpha_max, settings=cfg.settings, steps=cfg.steps,
              xtol=cfg.xtol)
    omegas = [0.0, 0.1, 0.2, 0.3, 0.4]
    fast = thresholds_diagram(attention, omegas, jobs=2, **kw)
    ref = phase_points(attention, [dict(kw, omega=w, early_stop=True, branches=("semantic", "positional"))
                                   for w in omegas], jobs=2)
    for f, r in zip(fast, ref):
        w = f.parameters["omega"]
        assert f.alpha_c.value == pytest.approx(r.alpha_c.value, abs=1e-3), (w, f.alpha_c, r.alpha_c)
        assert f.alpha_l.value == pytest.approx(r.alpha_l.value, abs=1e-3), (w, f.alpha_l, r.alpha_l)


def test_a_failing_last_stretch_ends_the_branch_instead_of_looping():
    """The continuation takes the last stretch to alpha_stop whole when it is within 1.25 steps;
    when that stretch fails and is below 1.25 of the smallest step, no smaller step will be tried
    and the branch ends there. It used to retry the same stretch forever: the positional branch at
    (omega, sigma) = (0.4, 0.6) on gh:8, followed down to alpha = 0.1, jumps between 0.1057 and 0.1
    (the sweep benchmark of issue 19 never finished). A progress callback stops a loop."""
    from replica.registry import load_module

    calls = []

    def progress(msg):
        calls.append(msg)
        if len(calls) > 400:
            raise RuntimeError("the continuation is looping: " + msg)

    from replica.phase import phase_point as generic_phase_point

    res = generic_phase_point(load_module("attention"), {"omega": 0.4, "sigma": 0.6},
                              settings=SolverSettings(rule="gh:8"), progress=progress,
                              branches=["positional"])
    ends = res.curves["positional"].ends
    assert ends and 0.1 < ends[0].alpha < 0.11 and ends[0].alpha_next == 0.1, ends
    assert len(calls) < 200

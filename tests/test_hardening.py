"""Hardening round 2: what a hostile probe still found, one regression test per failure.

Every command-line check asserts the exit status, a one-line message on failure and strict JSON
on success. Solves use small rules and short iteration budgets; a former hang is reproduced in a
subprocess under a timeout far above the fixed command's own time (no timing assertion).
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from replica.cli import main as replica_main

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str) -> tuple[int, str, str]:
    """``replica ARGS`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = replica_main([str(a) for a in args])
        except SystemExit as exc:  # argparse's own errors
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def run(*args: str, module: str = "replica", timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` in a fresh process from the repository root."""
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, **kw)


def strict_json(text: str) -> dict:
    """One JSON object, no NaN/Infinity, every null with a ``<key>_reason`` beside it."""
    def refuse(c):
        raise ValueError(f"non-strict JSON constant {c}")

    obj = json.loads(text, parse_constant=refuse)
    assert isinstance(obj, dict)
    _reasons_for_nulls(obj)
    return obj


def _reasons_for_nulls(obj, path: str = "") -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if v is None and not k.endswith("_reason"):
                # <key>_reason beside it, or the object's own "reason" (a crossing: value + reason)
                why = obj.get(f"{k}_reason") or obj.get("reason")
                assert isinstance(why, str) and why, f"null {path}{k} without {k}_reason"
            _reasons_for_nulls(v, f"{path}{k}.")


def one_line(rc: int, err: str, code: int = 2, *words: str) -> str:
    """Exit ``code`` and exactly one non-empty stderr line (no traceback) containing ``words``."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == code, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# ----------------------------------------------------------------------------------------------- item 1
def test_unregularised_logistic_on_separable_data_fails_fast_not_hangs():
    """lam = 0 on a sign teacher: the data are separable, the norm of the minimiser is infinite and
    the state grows geometrically; it used to run for hours in the prox's per-node fallback. The
    solve now stops when the state runs off to infinity, with one line saying so."""
    p = run("solve", "logistic", "--alpha", "2", "--param", "lam=0", "--json", timeout=240)
    line = one_line(p.returncode, p.stderr, 2, "runs off to infinity", "lam")
    assert "lam >= " in line
    assert p.stdout == ""


def test_prox_fallback_has_a_bounded_budget():
    """The per-node scipy fallback spends at most its budget of bracket evaluations, whatever the
    number of nodes where Newton failed (those left keep F = inf: failed, not silently wrong)."""
    from derivations.generated import logistic
    from replica import prox as P

    class Counting:
        def __init__(self, module):
            self.module, self.calls = module, 0

        def __getattr__(self, name):
            return getattr(self.module, name)

        def bracket_newton(self, *a):
            self.calls += 1
            return self.module.bracket_newton(*a)

    mod = Counting(logistic)
    x = np.array([4e9, 3e10, 0.0, 4e4])  # a state far out on the runaway of lam = 0
    p = np.array([0.0])
    z = np.random.default_rng(0).standard_normal((2, 400)) * 3  # (xi, teacher)
    starts = np.asarray(logistic.prox_starts(z, x, p), dtype=float).reshape(logistic.N_STARTS, 1, -1)
    h, F = P._fallback(mod, z, x, p, starts, np.ones(400, dtype=bool), budget=500)
    assert mod.calls <= 500
    assert h.shape == (1, 400) and F.shape == (400,)
    assert np.all(np.isfinite(F) | np.isinf(F))


def test_accuracy_below_the_tolerance_is_refused_before_work():
    """``--accuracy 1e-12`` at the default ``--tol 1e-8`` ran for over 500 s (silently under --json):
    no rule refines away what the iteration leaves. Refused at once, naming both flags."""
    rc, out, err = cli("solve", "attention", "--omega", "0.3", "--alpha", "2", "--branch", "semantic",
                       "--accuracy", "1e-12", "--json")
    one_line(rc, err, 2, "accuracy", "--tol")
    assert out == ""


def test_accuracy_says_its_plan_and_levels_on_stderr_under_json():
    p = run("solve", "ridge", "--alpha", "2", "--quadrature", "gh:6", "--accuracy", "1e-6", "--json",
            "--no-replicon", timeout=240)
    assert p.returncode == 0, p.stderr
    strict_json(p.stdout)
    lines = p.stderr.strip().splitlines()
    assert "refining to accuracy 1e-06: up to" in lines[0] and "roughly" in lines[0]
    assert any(ln.startswith("replica solve: level 1:") for ln in lines)


def test_pre_integration_ladder_stops_at_the_node_budget(monkeypatch):
    """Pre-integration's refinements had no node budget: 8 levels of ~2.5x each. The ladder now
    stops where the next level would exceed it, and says so."""
    from replica import accuracy, rule_plan
    from replica.preintegration import make_integrator
    from replica.registry import load_module
    from replica.solver import Solver

    mod = load_module("attention")
    integ = make_integrator(mod, "fast")
    solver = Solver(mod, {"omega": 0.3}, branch="semantic", rule=integ, tol=1e-8, error_estimate=False)
    plan = rule_plan.ladder_plan(solver, 8)
    assert plan and all(n <= rule_plan.budget() for _, n in plan)
    fp = solver.solve(2.0)
    first = rule_plan.next_preint_nodes(solver.integrator)
    monkeypatch.setattr(rule_plan, "budget", lambda: first)  # one level fits, the next does not
    out = accuracy.solve_to_accuracy(solver, fp, 2.0, 1e-9, max_levels=8)
    assert not out.accuracy_met
    assert any("next pre-integration level has over" in n for n in out.notes)


# ----------------------------------------------------------------------------------------------- item 2
@pytest.mark.parametrize("max_iter", ["1", "3"])
def test_no_threshold_or_spinodal_from_solves_cut_by_max_iter(max_iter):
    """``--max-iter 1`` printed alpha_c = 4.0 (the true 1.2588) and ``--max-iter 3`` spinodals at
    0.931 and 0.207: branch ends where the solve only ran out of iterations. Now null, with the
    reason naming the iteration budget."""
    p = run("phase", "attention", "--omega", "0.3", "--thresholds-only", "--max-iter", max_iter, "--quadrature",
            "gh:6", "--json", "--no-cache", timeout=240)
    assert p.returncode == 0, p.stderr
    d = strict_json(p.stdout)
    assert d["alpha_c"] is None and "iteration budget" in d["alpha_c_reason"]
    assert all(v == [] for v in d["spinodals"].values())
    assert "--max-iter" in d["spinodals_reason"]
    ends = [e for b in d["branch_ends"].values() for e in b]
    assert any(e["reason"] == "iteration-budget" for e in ends)


# ----------------------------------------------------------------------------------------------- item 4
@pytest.fixture(scope="module")
def ridge_fp():
    from replica.quadrature import gauss_hermite
    from replica.registry import load_module
    from replica.solver import Solver

    mod = load_module("ridge")
    solver = Solver(mod, rule=gauss_hermite(len(mod.GAUSSIANS), 6), tol=1e-10, error_estimate=False)
    return mod, solver.solve(2.0)


def test_zero_by_symmetry_is_judged_against_its_kind_not_its_round_off(ridge_fp):
    """``mhat`` ~ 1e-16 is zero by symmetry: a 1e-11 bar on it failed the relative test
    ("4.6e+289 relative"). It is now judged against the largest conjugate."""
    from replica import accuracy

    mod, fp = ridge_fp
    zero = [k for k, v in {**fp.order, **fp.conjugates}.items() if abs(v) < 1e-12]
    assert zero, "the ridge fixed point has a family that is zero by symmetry"
    errors = {k: 0.0 for k in accuracy.values(fp)}
    errors.update({k: 1e-11 for k in zero})
    assert accuracy.unresolved(fp, errors, 1e-6) == []
    errors[zero[0]] = 1e-3  # but a bar as large as the state itself is still not met
    assert accuracy.unresolved(fp, errors, 1e-6) == [zero[0]]


def test_missing_bars_are_null_with_a_reason(ridge_fp):
    from replica import jsonio
    from replica.commands.solve import error_dict

    mod, fp = ridge_fp
    fp.errors = {"q_1": 1e-9, "phi": None}  # the others missing, one explicitly None
    try:
        d = strict_json(jsonio.dumps({"errors": error_dict(mod, fp)}))
    finally:
        fp.errors = {}
    assert d["errors"]["phi"] is None and d["errors"]["phi_reason"]


def test_a_stalled_residual_is_not_called_still_falling():
    """"raise --max-iter, the residual was still falling" was said of a residual stuck at 5e-5
    from iteration 500 to 3000."""
    from types import SimpleNamespace

    from replica import convergence

    stalled = list(np.geomspace(1, 5e-5, 100)) + [5e-5 * (1 + 0.1 * np.sin(i)) for i in range(2900)]
    falling = list(np.geomspace(1, 1e-7, 3000))
    assert convergence.residual_trend(stalled) == "stalled"
    assert convergence.residual_trend(falling) == "falling"
    solver = SimpleNamespace(max_iter=3000, branch="free", module=SimpleNamespace(MODEL="m", DOMAINS={}),
                             parameter_dict={})
    text = convergence.advice(solver, 1.0, 3000, stalled)
    assert "still falling" not in text and "stalled" in text and "will not help" in text
    assert "still falling" in convergence.advice(solver, 1.0, 3000, falling)


# ----------------------------------------------------------------------------------------------- item 3
@pytest.mark.parametrize("log2", [4, 6])
def test_sobol_bars_cover_the_ridge_closed_form(log2):
    """A scrambled Sobol rule's refinement shares its points, and its difference under-covered
    (ridge at sobol:2: V, phi, eps_g ~2x outside their bars). The bars now include the spread of
    the rule's independent scramblings (replica.rqmc), and cover the exact state evolution."""
    from replica import accuracy
    from replica.quadrature import parse_rule
    from replica.registry import load_module
    from replica.solver import Solver
    from tests.oracles import state_evolution

    mod = load_module("ridge")
    solver = Solver(mod, rule=parse_rule(f"sobol:{log2}", len(mod.GAUSSIANS)), error_estimate=False)
    fp = accuracy.solve_to_accuracy(solver, solver.solve(2.0), 2.0, 1e-3, max_levels=1)
    ref = state_evolution("ridge", 2.0, **fp.parameters)
    vals = {"q": fp.order["q_1"], "V": fp.order["V_1"], "theta": fp.order["theta_1"], "phi": fp.phi,
            "eps_g": fp.observables["eps_g"]}
    bars = {"q": fp.errors["q_1"], "V": fp.errors["V_1"], "theta": fp.errors["theta_1"], "phi": fp.errors["phi"],
            "eps_g": fp.errors["eps_g"]}
    for k, v in vals.items():
        assert abs(v - ref[k]) <= bars[k], (k, v, ref[k], bars[k])

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
                assert isinstance(obj.get(f"{k}_reason"), str) and obj[f"{k}_reason"], \
                    f"null {path}{k} without {k}_reason"
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

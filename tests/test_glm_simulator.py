"""The GLM ERM simulator (numerics/glm.py): CLI contract, input errors, and certified optimality at small d.

Agreement with the oracles at d = 800 is the slow test in tests/test_glm_agreement.py.
"""
from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest

from numerics.glm import MODELS, PARAMETERS, problem, run_glm, run_seed
from tests.support import run

pytest.importorskip("sklearn", reason="the GLM simulator's solvers need scikit-learn (the sim extra)")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return run(*args, module="numerics.glm", timeout=300)


def test_cli_json_smoke():
    r = _cli("logistic", "--alpha", "2", "--d", "40", "--seeds", "2", "--n-test", "500", "--json", "--quiet")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)  # strict JSON (allow_nan=False on the writer's side)
    assert out["model"] == "logistic" and out["n"] == 80 and len(out["seeds"]) == 2 and out["converged"]
    for k in ("q", "theta", "train_loss", "classification_error", "classification_error_population", "test_loss",
              "kkt_norm"):
        assert k in out["mean"] and k in out["se"]
    assert "NaN" not in r.stdout


@pytest.mark.parametrize("args,name", [
    (["svm", "--alpha", "1"], "MODEL"),
    (["ridge", "--alpha", "-1"], "--alpha"),
    (["ridge", "--alpha", "1", "--param", "lam=-0.1"], "lam"),
    (["lasso", "--alpha", "1", "--param", "lam1=0"], "lam1"),
    (["lasso", "--alpha", "1", "--param", "lam=0.1"], "lam"),
    (["perceptron_probit", "--alpha", "1", "--param", "Delta=-1"], "Delta"),
    (["hinge", "--alpha", "1", "--d", "1"], "--d"),
    (["hinge", "--alpha", "1", "--seeds", "0"], "--seeds"),
    (["ridge", "--alpha", "1", "--param", "lam=x"], "lam"),
])
def test_cli_bad_input_is_one_line_naming_the_parameter(args, name, capsys):
    from numerics.glm import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and name in lines[0]


def test_cli_bad_input_in_a_fresh_process():
    r = _cli("ridge", "--alpha", "1", "--param", "lam=-0.1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "lam" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("model", MODELS)
def test_every_model_solves_to_a_certified_optimum(model):
    """KKT residual ≤ 1e-9 (a certificate for these convex problems), and the reported training
    loss is R(ŵ)/d with the loss summed over samples: recomputed here from scratch."""
    res = run_glm(model, 1.5, 60, seeds=2, n_test=2000)
    assert res["converged"]
    for s in res["seeds"]:
        assert s["kkt_norm"] <= 1e-9, s
        assert s["n"] == 90
    if model == "lasso":
        assert 0.0 <= res["mean"]["zero_fraction"] <= 1.0


def _instance(model, alpha, d, params, seed):
    """The declared model's instance (numerics.problem): inputs X/sqrt(d), labels y and the risk R(w)/d."""
    pb = problem(model, params)
    inst = pb.instance(alpha, d, seed)
    y = inst.teacher[0] if pb.channel is not None else pb.glm["target"](*inst.teacher, *inst.noise)
    return inst.X[:, 0, :] / math.sqrt(d), y, (lambda w: pb.train_loss(inst, np.asarray(w, float).reshape(-1, 1)))


@pytest.mark.parametrize("model", ["hinge", "lasso", "logistic"])
def test_solution_beats_random_perturbations(model):
    """R(ŵ) ≤ R(ŵ + δ) for small random δ, also along coordinates (the kinks of hinge/ℓ1)."""
    from numerics.glm import _solve_hinge, _solve_lasso, _solve_logistic

    d, alpha = 50, 2.0
    p = {**PARAMETERS[model], **({"lam": 1e-2} if "lam" in PARAMETERS[model] else {})}
    Xs, y, risk = _instance(model, alpha, d, p, 3)
    solve = {"hinge": lambda: _solve_hinge(Xs, y, p["lam"]), "lasso": lambda: _solve_lasso(Xs, y, p["lam1"]),
             "logistic": lambda: _solve_logistic(Xs, y, p["lam"])}[model]
    w, kkt, _ = solve()
    r0 = risk(w)
    rng = np.random.default_rng(0)
    for _ in range(30):
        delta = 1e-4 * rng.standard_normal(d)
        assert risk(w + delta) >= r0 - 1e-13
    for i in range(d):
        e = np.zeros(d)
        e[i] = 1e-5
        assert risk(w + e) >= r0 - 1e-13 and risk(w - e) >= r0 - 1e-13


def test_population_errors_match_the_test_set():
    """The population test errors (exact given ŵ by Gaussianity) agree with the fresh test set
    within its Monte-Carlo error (4 standard errors)."""
    for model, key in (("perceptron_probit", "classification_error"), ("ridge", "test_mse")):
        r = run_seed(model, 2.0, 50, {}, 1, n_test=40000)
        pop = r[key + "_population"]
        se = math.sqrt(pop * (1 - pop) / 40000) if key == "classification_error" else 3 * pop / math.sqrt(40000)
        assert abs(r[key] - pop) < 4 * se

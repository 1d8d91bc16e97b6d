"""`replica check`: a declared model simulated from its own declaration and held against its theory.

Fast: the 1/d extrapolation and the verdict's arithmetic, the generic minimiser against the exact
solvers on the same instance, bad input, the layering (the core imports neither the simulator nor
torch). Slow: models written here (not in derivations/) go through `replica check` and agree, and
the same simulations held against a perturbed theory are flagged.
"""
from __future__ import annotations

import ast
import json
import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from tests.support import run_cli, run_without

ROOT = Path(__file__).resolve().parent.parent

SIGN_SQUARE = textwrap.dedent('''
    """Square loss on a sign teacher with an l2 penalty: declared here only."""
    import sympy as sp

    from replica import L2, Domain, Model, Sign, TokenStatistics, classification_error, fields, parameter, \\
        teacher_fields

    h, hs = fields(1, 1), teacher_fields(1, 1)
    lam = parameter("lam", r"\\lambda")
    channel = Sign(hs[0])
    y = channel.label
    model = Model(
        name="sign_square",
        description="square loss on a sign teacher, l2 penalty (a test model)",
        h=h, hstar=hs,
        loss=sp.Rational(1, 2) * (y - h[0]) ** 2,
        channel=channel,
        data=TokenStatistics.isotropic(1, 1),
        regularizer=L2(lam),
        parameters={lam: 0.5},
        domains={lam: Domain(0, None)},
        observables=[classification_error(y, h[0])],
    )
''')

LOGCOSH = textwrap.dedent('''
    """Log-cosh regression on a noisy linear teacher with an l2 penalty: declared here only (no exact
    solver knows this loss: the simulation minimises it by L-BFGS)."""
    import sympy as sp

    from replica import L2, Domain, Model, TokenStatistics, fields, parameter, symbol, teacher_fields

    h, hs = fields(1, 1), teacher_fields(1, 1)
    z = symbol("z")
    lam, delta = parameter("lam", r"\\lambda"), parameter("Delta", r"\\Delta")
    model = Model(
        name="logcosh",
        description="log-cosh loss on y = h* + sqrt(Delta) z, l2 penalty (a test model)",
        h=h, hstar=hs,
        loss=sp.log(sp.cosh(hs[0] + sp.sqrt(delta) * z - h[0])),
        noise=[z],
        data=TokenStatistics.isotropic(1, 1),
        regularizer=L2(lam),
        parameters={lam: 0.2, delta: 0.25},
        domains={lam: Domain(0, None), delta: Domain(0, None)},
    )
''')

ENET_LOGISTIC = textwrap.dedent('''
    """Elastic-net logistic regression on a sign teacher: declared here only (an l1 part: FISTA)."""
    import sympy as sp

    from replica import Domain, ElasticNet, Model, Sign, TokenStatistics, classification_error, fields, \\
        parameter, teacher_fields

    h, hs = fields(1, 1), teacher_fields(1, 1)
    lam1, lam2 = parameter("lam1", r"\\lambda_1"), parameter("lam2", r"\\lambda_2")
    channel = Sign(hs[0])
    y = channel.label
    model = Model(
        name="enet_logistic",
        description="elastic-net logistic regression on a sign teacher (a test model)",
        h=h, hstar=hs,
        loss=sp.log(1 + sp.exp(-y * h[0])),
        channel=channel,
        data=TokenStatistics.isotropic(1, 1),
        regularizer=ElasticNet(lam1, lam2),
        parameters={lam1: 0.05, lam2: 0.1},
        domains={lam1: Domain(0, None), lam2: Domain(0, None)},
        observables=[classification_error(y, h[0])],
    )
''')

CONTRACT = {"theory", "theory_error", "simulation", "simulation_error", "z", "agrees", "per_d"}


def run_check(*args, timeout=900):
    """``replica check ARGS`` (the shared harness)."""
    return run_cli("check", *args, timeout=timeout)


# --------------------------------------------------------------------------- arithmetic
def test_extrapolation_is_weighted_least_squares_in_one_over_d():
    from numerics.check import extrapolate

    ds, se = [100, 200, 400], [0.02, 0.01, 0.005]
    ex = extrapolate(ds, [1.5 + 30.0 / d for d in ds], se)
    assert ex["value"] == pytest.approx(1.5, abs=1e-12) and ex["slope"] == pytest.approx(30.0, rel=1e-10)
    assert ex["chi2"] == pytest.approx(0.0, abs=1e-18) and ex["dof"] == 1
    # the intercept's standard error: sqrt of the (0, 0) entry of (A^T W A)^-1
    A = np.array([[1.0, 1.0 / d] for d in ds])
    W = np.diag(1.0 / np.square(se))
    assert ex["error"] == pytest.approx(math.sqrt(np.linalg.inv(A.T @ W @ A)[0, 0]), rel=1e-12)
    one = extrapolate([400], [2.0], [0.1])
    assert (one["value"], one["error"], one["slope"]) == (2.0, 0.1, None)


def test_seed_statistics_pool_the_spread_over_dimensions():
    """se at each d is the larger of the plain std/sqrt(K) and the pooled c/sqrt(d K), c^2 the spread
    of all runs with each dimension's weighted by d (a spread ~ d^-1/2): a dimension whose few seeds
    happen to agree closely does not get a tiny error bar."""
    from numerics.check import seed_statistics

    samples = {100: np.array([1.0, 1.2, 0.8, 1.0]), 400: np.array([1.0, 1.001, 0.999, 1.0])}
    st = {p["d"]: p for p in seed_statistics(samples)}
    c2 = (100 * 0.08 + 400 * 2e-6) / 6
    assert st[400]["se_seeds"] == pytest.approx(np.std(samples[400], ddof=1) / 2, rel=1e-12)
    assert st[400]["se"] == pytest.approx(math.sqrt(c2 / (400 * 4)), rel=1e-12)
    assert st[400]["se"] > 10 * st[400]["se_seeds"]
    assert st[100]["se"] == st[100]["se_seeds"] == pytest.approx(np.std(samples[100], ddof=1) / 2, rel=1e-12)
    assert st[100]["mean"] == pytest.approx(1.0) and st[400]["mean"] == pytest.approx(1.0)


def test_verdict_counts_combined_standard_errors():
    from numerics.check import verdict

    per_d = [{"d": 200, "mean": 1.0, "se": 0.03}, {"d": 400, "mean": 1.0, "se": 0.04}]
    inside = verdict(per_d, 1.0 - 2.9 * 0.05, 0.0)     # both points at 1.0: the intercept is 1.0
    assert set(inside) >= CONTRACT and inside["agrees"] is True
    err = inside["simulation_error"]
    assert inside["z"] == pytest.approx(2.9 * 0.05 / err, rel=1e-12)
    far = verdict(per_d, 1.0 + 3.01 * math.hypot(err, 0.01), 0.01)
    assert far["agrees"] is False and far["z"] == pytest.approx(-3.01, rel=1e-9)
    assert verdict(per_d, None, None)["agrees"] is None


# --------------------------------------------------------------------------- the finite-size problem
@pytest.mark.parametrize("name", ["ridge", "lasso"])
def test_generic_minimiser_finds_the_exact_solvers_minimum(name):
    """The same instance minimised by the exact GLM solver and by the generic path (L-BFGS for the l2
    penalty, FISTA for the l1 penalty, from the declaration's lambdified risk): the weights agree to
    what the gradient tolerance allows (|W - W*| <= |grad| / curvature, curvature >= lam or the
    Marchenko-Pastur edge (1 - alpha^-1/2)^2 alpha)."""
    pytest.importorskip("torch")
    from numerics.problem import Problem
    from replica.registry import load_model

    problem = Problem(load_model(name), module=None)
    assert problem.glm is not None and problem.glm["loss"] == "square"
    inst = problem.instance(2.0, 120, seed=3)
    exact = problem.fit(inst)
    assert exact.converged and exact.solver.startswith("exact square")
    problem.glm = None
    tol = 1e-7   # the default; a line search stalls near sqrt(eps) relative, ~5e-9 here
    generic = problem.fit(inst, tol=tol)
    assert generic.converged and generic.solver.startswith("torch")
    assert ("FISTA" in generic.solver) == (name == "lasso")
    curvature = 2.0 * (1 - 2.0 ** -0.5) ** 2
    rms = np.linalg.norm(generic.W - exact.W) / math.sqrt(inst.d)
    assert rms <= tol / curvature
    assert problem.train_loss(inst, generic.W) == pytest.approx(problem.train_loss(inst, exact.W), rel=1e-12)


def test_branch_constraint_keeps_the_pinned_family_at_zero():
    """On a branch that pins m the minimiser stays orthogonal to the encodings (m = 0 to round-off), on
    the branch that pins theta orthogonal to Sigma Q* (theta = 0), whatever the loss prefers."""
    pytest.importorskip("torch")
    from numerics.problem import Problem
    from replica.registry import load_model

    problem = Problem(load_model("linear_attention"), module=None)
    inst = problem.instance(1.5, 60, seed=0)
    for branch, fam in (("semantic", "m"), ("agnostic", "theta")):
        fit = problem.fit(inst, branch)
        ov = problem.overlaps(inst, fit.W)
        assert np.max(np.abs(ov[fam])) < 1e-12, (branch, ov[fam])
        assert fit.converged, fit


def test_token_clusters_follow_the_declared_label_law():
    """Gaussian-mixture tokens: every sample's label configuration is drawn from the declared law
    (P(c_1 = c_2) = p_same), the indicators handed to the loss are its one-hot code, the tokens have
    their slot's variance, and on the branch that pins m every slot's m is 0."""
    pytest.importorskip("torch")
    from numerics.problem import Problem
    from replica.registry import load_model

    problem = Problem(load_model("attention_clusters"), module=None, parameters={"p_same": 0.8})
    inst = problem.instance(25.0, 80, seed=1)            # n = 2000 samples
    same = np.mean(inst.slot[:, 0] % 2 == inst.slot[:, 1] % 2)
    assert abs(same - 0.8) < 4 * math.sqrt(0.8 * 0.2 / inst.n)
    labels = np.stack(inst.noise, axis=1)                 # e_1a, e_1b, e_2a, e_2b
    assert np.all(labels[:, 0] + labels[:, 1] == 1) and np.all(labels[:, 0] == (inst.slot[:, 0] == 0))
    var = inst.X[inst.slot[:, 0] == 1, 0].var()
    assert var == pytest.approx(0.35 ** 2, rel=0.05)      # sigma_1b = 0.35, ~10^5 entries
    fit = problem.fit(problem.instance(2.0, 60, seed=0), "semantic")
    ov = problem.overlaps(problem.instance(2.0, 60, seed=0), fit.W)
    assert fit.converged and np.max(np.abs(ov["m"])) < 1e-12 and ov["q"].shape[0] == 4


def test_rotation_invariant_students_are_compared_by_invariants():
    """Tied rank-2 attention is unchanged by h -> h O: its theory picks one basis of the weight columns,
    a minimiser another, so the compared quantities are q's eigenvalues and theta^T theta, equal in
    every basis; untied attention (only a joint sign flip) keeps its entries."""
    from numerics.problem import Problem
    from replica.registry import load_model, load_module

    rank2 = Problem(load_model("attention_rank2"), load_module("attention_rank2"))
    untied = Problem(load_model("attention_untied"), module=None)
    assert rank2.rotation_free and not untied.rotation_free and untied.student_groups == [[0, 1]]
    q = np.array([[0.07, -0.02], [-0.02, 0.05]])
    th = np.array([0.1, -0.07])
    O, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((2, 2)))

    def named(q, th):
        return {"q_11": q[0, 0], "q_12": q[0, 1], "q_22": q[1, 1], "m_1": 0.0, "m_2": 0.0, "theta_1": th[0],
                "theta_2": th[1], "V_11": 1.0, "V_12": 0.0, "V_22": 1.0}

    a, b = rank2.order_quantities(named(q, th)), rank2.order_quantities(named(O.T @ q @ O, O.T @ th))
    assert set(a) == {"q_eig1", "q_eig2", "theta_sq", "m_sq", "theta_m"}
    for k in a:
        assert a[k] == pytest.approx(b[k], abs=1e-14)
    assert a["theta_sq"] == pytest.approx(th @ th) and a["q_eig1"] + a["q_eig2"] == pytest.approx(np.trace(q))


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("args, name", [
    (["--alpha", "-1"], "alpha"), (["--alpha", "2", "--d", "5"], "d"), (["--alpha", "2", "--d", "100,x"], "d"),
    (["--alpha", "2", "--seeds", "1"], "seeds"), (["--alpha", "2", "--device", "tpu"], "device"),
    (["--alpha", "2", "--n-test", "3"], "n-test"), (["--alpha", "2", "--plot", "/no/such/dir/p.png"], "plot"),
])
def test_bad_input_is_one_line_naming_the_parameter(args, name, capsys):
    from replica.cli import main

    assert main(["check", "ridge", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"replica check: error: {name}:"), err


def test_the_core_imports_neither_the_simulator_nor_torch_at_top_level():
    """replica/ stays free of torch and never imports numerics (the simulator): the check command finds
    the registered simulator plug-in (replica.simulators) inside its run, lazily."""
    for p in (ROOT / "replica").rglob("*.py"):
        tree = ast.parse(p.read_text())
        for node in tree.body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not any(n.split(".")[0] in ("numerics", "torch") for n in names), (p, names)
    text = (ROOT / "replica" / "cli" / "commands" / "check.py").read_text()
    assert "check_module()" in text and "import numerics" not in text and "from numerics" not in text


# --------------------------------------------------------------------------- theory against simulation
@pytest.fixture(scope="module")
def sign_square(tmp_path_factory):
    """`replica check` on a model file written here, at d = 100, 200, 400 with 6 seeds (JSON)."""
    path = tmp_path_factory.mktemp("check") / "sign_square.py"
    path.write_text(SIGN_SQUARE)
    res = run_check(str(path), "--alpha", "2", "--d", "100,200,400", "--seeds", "6", "--n-test", "50000", "--json")
    return path, res


@pytest.mark.slow
def test_a_model_written_here_agrees_with_its_theory(sign_square):
    _, res = sign_square
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    q = out["quantities"]
    assert {"q", "theta", "eps_g", "classification_error", "train_loss"} <= set(q)
    for name, entry in q.items():
        assert set(entry) >= CONTRACT and [p["d"] for p in entry["per_d"]] == [100, 200, 400]
        assert entry["agrees"] is True and abs(entry["z"]) <= 3, (name, entry)
    assert out["agrees"] is True and out["converged"] is True and out["theory"]["rs_stable"] is True
    assert "d=400 seed 5 (18/18)" in res.stderr      # progress on stderr


@pytest.mark.slow
def test_a_perturbed_theory_is_flagged(sign_square):
    """Negative control: the very simulations of the test above held against the theory of a
    neighbouring point (alpha = 2.5 instead of 2), and against the theory's q moved by 5 of the
    simulation's standard errors, disagree."""
    from numerics.check import theory, verdict
    from replica.registry import load_module

    path, res = sign_square
    out = json.loads(res.stdout)
    module = load_module(str(path))
    wrong = theory(module, out["parameters"], 2.5, None, replicon=False)
    flagged = [name for name, e in out["quantities"].items()
               if verdict(e["per_d"], wrong[name], wrong["errors"][name])["agrees"] is False]
    # (q of this model moves little between alpha = 2 and 2.5; every test-error measure does)
    assert {"theta", "eps_g", "classification_error", "train_loss"} <= set(flagged), flagged
    q = out["quantities"]["q"]
    moved = verdict(q["per_d"], q["theory"] + 5 * q["simulation_error"], q["theory_error"])
    assert moved["agrees"] is False and abs(moved["z"]) > 3


@pytest.mark.slow
@pytest.mark.parametrize("name, text, solver", [("logcosh", LOGCOSH, "torch L-BFGS (strong Wolfe)"),
                                                ("enet_logistic", ENET_LOGISTIC,
                                                 "torch FISTA (proximal gradient, backtracking)")],
                         ids=["lbfgs", "fista"])
def test_a_model_without_an_exact_solver_goes_through_torch_and_agrees(tmp_path, name, text, solver):
    """No exact solver knows these declarations: a smooth loss goes to L-BFGS, an l1 part to FISTA."""
    pytest.importorskip("torch")
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    res = run_check(str(path), "--alpha", "1.5", "--d", "100,200,400", "--seeds", "6", "--n-test", "50000", "--json",
                  "--quiet", "--no-replicon")
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    assert out["solver"] == [solver]
    assert {"q", "theta", "eps_g", "train_loss"} <= set(out["quantities"])
    assert all(e["agrees"] for e in out["quantities"].values()), out["quantities"]


# --------------------------------------------------------------------------- optional dependencies


def test_glm_without_scikit_learn_says_what_to_install(monkeypatch, capsys):
    from numerics.glm import main

    monkeypatch.setitem(sys.modules, "sklearn", None)     # as if not installed
    with pytest.raises(SystemExit) as exc:
        main(["logistic", "--alpha", "2", "--d", "50"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    assert "needs scikit-learn" in err and "pip install scikit-learn" in err
    # ridge needs only scipy: it runs
    assert main(["ridge", "--alpha", "2", "--d", "50", "--seeds", "2", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["converged"] is True


def test_gamp_numpy_backend_runs_without_torch():
    res = run_without("torch", "numerics.gamp", "ridge", "--alpha", "2", "--d", "100", "--init", "random", "--json",
                      "--quiet")
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout)["converged"] is True
    res = run_without("torch", "numerics.gamp", "ridge", "--alpha", "2", "--d", "100", "--backend", "torch")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "needs torch" in res.stderr, res.stderr


def test_check_without_torch_says_what_to_install(monkeypatch, capsys):
    from replica.cli import main

    monkeypatch.setitem(sys.modules, "torch", None)       # as if not installed
    assert main(["check", "linear_attention", "--alpha", "2", "--branch", "semantic", "--d", "50,100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs torch" in err and "pip install torch" in err, err


def test_simulator_command_lines_without_torch_say_what_to_install(monkeypatch, capsys):
    """The attention simulator (numerics.checks.run_cli, shared by simulate, histogram, experiments,
    gamp) and the clusters simulator stop with one line, status 2, instead of a traceback."""
    import numerics.clusters as clusters
    import numerics.simulate as simulate
    from numerics.deps import missing_line

    monkeypatch.setitem(sys.modules, "torch", None)       # as if not installed
    assert simulate.main(["attention", "--d", "20", "--alpha", "1"]) == 2
    assert missing_line("python -m numerics.clusters", clusters.main, ["--d", "20", "--seeds", "1"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all("needs torch, which is not installed: pip install torch" in ln for ln in lines)
    assert lines[0].startswith("python -m numerics.simulate: error:")


@pytest.mark.slow
def test_gamp_runs_a_model_file_without_torch(tmp_path):
    """GAMP accepts a declaration file (its regularizer and data law come from the file) and its
    numpy backend needs no torch."""
    path = tmp_path / "logcosh.py"
    path.write_text(LOGCOSH)
    res = run_without("torch", "numerics.gamp", str(path), "--alpha", "1.5", "--d", "200", "--init", "random",
                      "--json", "--quiet")
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["model"] == "logcosh" and out["converged"] is True and out["grad_norm"] < 1e-6


def test_a_given_theory_is_used_when_it_is_of_this_point(tmp_path, capsys):
    """``--theory SOLVE.json`` (a replica solve result) replaces the solve; one of another point is refused."""
    from numerics.check import theory
    from replica.artifacts import jsonio
    from replica.cli import main
    from replica.registry import load_module

    th = theory(load_module("ridge"), {"lam": 0.1, "Delta": 0.25}, 2.0, None, replicon=False)
    path = tmp_path / "ridge.json"
    jsonio.write(path, th)
    args = ["check", "ridge", "--d", "50,100", "--seeds", "3", "--n-test", "2000", "--theory", str(path), "--json",
            "--quiet"]
    assert main([*args, "--alpha", "2"]) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    assert out["quantities"]["q"]["theory"] == th["q"] and out["quantities"]["eps_g"]["theory"] == th["eps_g"]
    assert main([*args, "--alpha", "2.5"]) == 2
    assert capsys.readouterr().err.startswith("replica check: error: theory: the given result is at alpha = 2")
    assert main([*args, "--alpha", "2", "--param", "lam=0.2"]) == 2
    assert "theory: the given result has lam = 0.1" in capsys.readouterr().err


def test_a_user_model_is_loaded_once(tmp_path):
    """``replica check FILE.py`` imported the user's declaration three times (the parser, the command,
    the simulator) and built a throwaway solver to validate: the command line now loads the model once
    and the theory is solved by the solver that validated it. The declaration counts its imports."""
    import os

    marker = tmp_path / "imports.txt"
    ridge = (ROOT / "derivations" / "ridge.py").read_text().replace("from __future__ import annotations\n", "")
    decl = tmp_path / "counted_ridge.py"
    decl.write_text(f"with open({str(marker)!r}, 'a') as _fh:\n    _fh.write('x')\n" + ridge)
    env = dict(os.environ, REPLICA_CACHE=str(tmp_path / "cache"), REPLICA_BACKEND="numpy")  # first use: generated
    res = run_cli("check", decl, "--alpha", "2", "--d", "50", "--seeds", "2", "--n-test", "200", "--quadrature", "gh:8",
                  "--no-theory-bars", "--no-replicon", "--json", "--quiet", env=env, timeout=600)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    assert json.loads(res.stdout)["model"] == "ridge"
    assert marker.read_text() == "x"

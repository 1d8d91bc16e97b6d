"""Committees solved: the unit-symmetric ansatz against the full matrices and against a hand-written
state evolution (tests/oracles/committee.py), the specialisation threshold, and ``replica check``
against gradient descent (docs/how-to/committees.md). Slow: each generates or simulates."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow

#: a specialised point of the two-unit committee where every node's inner minimum is unique (no start
#: disagrees) and Gauss-Hermite converges fast: lam = 0.1, alpha = 32
LAM, ALPHA = 0.1, 32.0


def _module(model, tmp_path):
    from replica.registry.loader import _import_path
    from replica.codegen import write_module
    from replica import Derivation
    from replica.interface.generated_model import as_model

    path = tmp_path / f"{model.name}.py"
    write_module(Derivation(model), path)
    return as_model(_import_path(path, prefix="replica_test_committee_"))


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    from derivations.committee import build

    tmp = tmp_path_factory.mktemp("committee")
    return (_module(build(2, name="committee_ansatz"), tmp),
            _module(build(2, name="committee_full", unit_symmetry=False), tmp))


def _embed(order: dict) -> dict:
    """A state of the two-unit ansatz as full 2x2 matrices (module names of the full model)."""
    o = order
    return {"q_1_11": o["q_1_11"], "q_1_12": o["q_1_12"], "q_1_22": o["q_1_11"],
            "V_1_11": o["V_1_11"], "V_1_12": o["V_1_12"], "V_1_22": o["V_1_11"],
            "theta_1_11": o["theta_1_11"], "theta_1_12": o["theta_1_12"],
            "theta_1_21": o["theta_1_12"], "theta_1_22": o["theta_1_11"]}


@pytest.mark.parametrize("state", [
    dict(q_1_11=0.8, q_1_12=0.0, V_1_11=0.5, V_1_12=-0.2, theta_1_11=0.5, theta_1_12=0.0),
    dict(q_1_11=0.3, q_1_12=0.0, V_1_11=0.6, V_1_12=0.3, theta_1_11=0.2, theta_1_12=0.0),
])
def test_the_ansatz_and_the_full_matrices_have_the_same_equations(modules, state):
    """One application of the saddle-point map (every conjugate and order parameter of the next
    iterate), ansatz against full matrices, at states of the ansatz where the two laws of the fields
    use the same nodes (``q``, ``theta`` diagonal: the Cholesky factor is the symmetric root; ``V``
    small enough that every node's inner minimum is unique, so both find the same one): equal to
    1e-10, rounding and the inner minimisers' tolerance."""
    from replica.numeric.quadrature import gauss_hermite
    from replica.numeric.solver import Solver

    ans, full = modules
    sa = Solver(ans, {"lam": LAM}, rule=gauss_hermite(4, 12))
    sf = Solver(full, {"lam": LAM}, rule=gauss_hermite(4, 12))
    xa = np.array([state[n] for n in ans.ORDER_PARAMETERS])
    xf = np.array([_embed(state)[n] for n in full.ORDER_PARAMETERS])
    ra, rf = sa.evaluate_map(xa, ALPHA / 8), sf.evaluate_map(xf, ALPHA / 8)
    got = dict(zip(full.ORDER_PARAMETERS, rf.x_new))
    want = _embed(dict(zip(ans.ORDER_PARAMETERS, ra.x_new)))
    assert max(abs(got[k] - want[k]) for k in want) < 1e-10, {k: got[k] - want[k] for k in want}
    hats_f = dict(zip(full.CONJUGATES, rf.xhat))
    hats_a = dict(zip(ans.CONJUGATES, ra.xhat))
    for k in ("qhat_1_11", "qhat_1_12", "Vhat_1_11", "Vhat_1_12", "thetahat_1_11", "thetahat_1_12"):
        assert abs(hats_f[k] - hats_a[k]) < 1e-10 * max(1.0, abs(hats_a[k])), k
    assert abs(ra.psi_y - rf.psi_y) < 1e-12


def test_the_ansatz_and_the_full_matrix_solves_agree_within_their_quadrature_error(modules):
    """Solved at a specialised point, the ansatz (6 unknowns, symmetric square roots) and the full
    matrices (10 unknowns, Cholesky factors) land on the same fixed point up to their rules'
    discretisation: the difference at Gauss-Hermite order 24 is within the distance each moves from
    order 20 to 24 (the rules place their nodes differently, so only the quadrature error separates
    them; at this point it is ~1e-3 at order 20 and the two agree to ~3e-6 at order 24)."""
    from replica.numeric.quadrature import gauss_hermite
    from replica.numeric.solver import Solver

    ans, full = modules
    a, f = {}, {}
    for n in (20, 24):
        a[n] = Solver(ans, {"lam": LAM}, rule=gauss_hermite(4, n), tol=1e-12).solve(ALPHA)
        f[n] = Solver(full, {"lam": LAM}, rule=gauss_hermite(4, n), tol=1e-12).solve(ALPHA, x0=_embed(a[n].order))
    assert a[24].order["theta_1_11"] > 0.9 > 0.1 > a[24].order["theta_1_12"]   # specialised
    want = _embed(a[24].order)
    for k in want:
        bar = abs(_embed(a[20].order)[k] - want[k]) + abs(f[20].order[k] - f[24].order[k])
        assert abs(f[24].order[k] - want[k]) <= bar, k
    assert abs(f[24].phi - a[24].phi) <= abs(f[20].phi - f[24].phi) + abs(a[20].phi - a[24].phi)


def test_a_hand_written_state_evolution_has_the_same_fixed_point(modules):
    """tests/oracles/committee.py maps the ansatz's fixed point (embedded in full 2x2 matrices) to
    itself: its equations, derived by hand on the full matrices with finite-difference gradients of
    Psi_y, agree with the toolkit's to the finite differences' accuracy (step 1e-5: ~1e-8), on the same
    nodes (so the quadrature error is common to both)."""
    from replica.numeric.quadrature import gauss_hermite
    from replica.numeric.solver import Solver
    from tests.oracles import committee as oracle

    ans, _ = modules
    order, alpha = 10, 8.0
    fp = Solver(ans, {"lam": LAM}, rule=gauss_hermite(4, order), tol=1e-12).solve(alpha)
    assert fp.order["theta_1_11"] > 0.7 > 0.2 > fp.order["theta_1_12"]   # specialised
    o = fp.order
    q = np.array([[o["q_1_11"], o["q_1_12"]], [o["q_1_12"], o["q_1_11"]]])
    V = np.array([[o["V_1_11"], o["V_1_12"]], [o["V_1_12"], o["V_1_11"]]])
    th = np.array([[o["theta_1_11"], o["theta_1_12"]], [o["theta_1_12"], o["theta_1_11"]]])
    rule = oracle.gauss_hermite(order)
    new = oracle.saddle_map(alpha, LAM, q, V, th, rule)
    for name, M in (("q", q), ("V", V), ("theta", th)):   # measured: 4e-9, 2e-8 (|V| ~ 2), 4e-9
        assert np.max(np.abs(new[name] - M)) < 1e-7 * max(1.0, np.max(np.abs(M))), (name, new[name] - M)
    c = fp.conjugates
    assert np.isclose(new["thetahat"][0, 0], c["thetahat_1_11"], rtol=1e-6)
    assert np.isclose(new["Vhat"][0, 1], c["Vhat_1_12"], rtol=1e-6, atol=1e-9)
    assert np.isclose(oracle.free_entropy(alpha, LAM, {**new, "q": q, "V": V, "theta": th}, rule), fp.phi,
                      rtol=1e-9)


@pytest.fixture(scope="module")
def committee_module(tmp_path_factory):
    from derivations.committee import build

    return _module(build(2, name="committee_spec"), tmp_path_factory.mktemp("committee_spec"))


def test_alpha_spec_is_where_the_specialised_branch_leaves_the_unspecialised_one(committee_module):
    """The breaking eigenvalue crosses one between alpha = 2 and 2.5 (lam = 0.1); just above
    alpha_spec the specialised branch exists with (theta_11 - theta_12)^2 growing linearly in
    alpha - alpha_spec (a pitchfork), so its linear extrapolation to zero, from alpha_spec + 0.01 and
    + 0.02, lands on alpha_spec (to the quadratic term's 0.01 * 0.02 ~ 2e-4; 1e-3 asserted)."""
    from replica.numeric.quadrature import gauss_hermite
    from replica.numeric.solver import Solver
    from replica.phase.results import BranchCurve, BranchPoint
    from replica.phase.specialisation import specialisation_threshold

    m = committee_module
    rule = gauss_hermite(4, 8)

    def solver(branch):
        return Solver(m, {"lam": LAM}, branch=branch, rule=rule)

    points = []
    for a in (2.0, 2.5):
        fp = solver("unspecialised").solve(a)
        points.append(BranchPoint(alpha=a, x=fp.x, order=fp.order, eps_g=fp.eps_g, eps_g_error=0.0, phi=fp.phi,
                                  psi_y=fp.psi_y, train_loss=fp.train_loss, iterations=fp.iterations,
                                  residual=fp.residual, quadrature_residual=0.0, seconds=0.0))
    spec, mus = specialisation_threshold(m, {"lam": LAM}, BranchCurve(m.MODEL, "unspecialised", {}, points), solver)
    assert mus[0][1] < 1 < mus[1][1]
    assert spec.value is not None and 2.0 < spec.value < 2.5, spec.reason
    gaps = []
    for da in (0.01, 0.02):
        fp = solver("specialised").solve(spec.value + da)
        gaps.append((fp.order["theta_1_11"] - fp.order["theta_1_12"]) ** 2)
    assert gaps[0] > 0 and gaps[1] > gaps[0]
    root = spec.value + 0.01 - gaps[0] * 0.01 / (gaps[1] - gaps[0])
    assert abs(root - spec.value) < 1e-3, (root, spec.value)


def test_a_model_without_exchangeable_units_has_no_alpha_spec(ridge):
    from replica.phase.specialisation import specialisation_threshold

    spec, _ = specialisation_threshold(ridge, {}, None, lambda b: None)
    assert spec.value is None and "no exchangeable units" in spec.reason


def test_check_agrees_on_every_quantity_and_a_perturbed_theory_fails(committee_module, tmp_path):
    """``replica check`` on the two-unit committee at alpha = 4 (specialised): gradient descent from
    random starts, units matched by the best permutation, every quantity within the check's z bound.
    The same runs held against a theory value moved by 8 combined standard errors must fail."""
    from numerics.check import run_check

    path = tmp_path / "committee_check.py"
    path.write_text("from derivations.committee import build\nmodel = build(2, name='committee_check')\n")
    res = run_check(str(path), 4.0, ds=(200, 400), seeds=3, quadrature="gh:10", theory_bars=False, replicon=False)
    assert res["matching"] == "permutation"
    assert res["agrees"] and all(q["agrees"] for q in res["quantities"].values()), \
        {k: q["z"] for k, q in res["quantities"].items()}
    assert {"q_1_11", "q_1_12", "theta_1_11", "theta_1_12", "eps_g", "train_loss"} <= set(res["quantities"])
    th = res["quantities"]["theta_1_11"]
    from numerics.check import theory
    from replica.registry import load_module

    module = load_module(str(path))
    base = theory(module, {"lam": LAM}, 4.0, None, replicon=False, quadrature="gh:10", error_bars=False)
    base["order_parameters"] = dict(base["order_parameters"])
    base["order_parameters"]["theta_1_11"] += 8 * th["simulation_error"]
    bad = run_check(str(path), 4.0, ds=(200, 400), seeds=3, theory_result=base, replicon=False)
    assert not bad["agrees"] and not bad["quantities"]["theta_1_11"]["agrees"]


def test_phase_json_reports_alpha_spec_and_both_branches():
    """The contract of ``replica phase MODEL --json`` for exchangeable units: ``alpha_spec`` (a number
    here, between the solved points that bracket it) and ``alpha_spec_reason``, and both unit branches
    followed with their free entropies."""
    import json

    from tests.support import run_cli

    p = run_cli("phase", "committee", "--alpha-min", "1.6", "--alpha-max", "2.6", "--quadrature", "gh:8",
                "--no-cache", "--json", timeout=1800)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert 1.6 < out["alpha_spec"] < 2.6 and "linearly unstable" in out["alpha_spec_reason"]
    assert set(out["curves"]) >= {"specialised", "unspecialised"}
    assert len(out["curves"]["unspecialised"]["phi"]) >= 2 and out["pair"] == ["specialised", "unspecialised"]


@pytest.fixture(scope="module")
def three_units(tmp_path_factory):
    from derivations.committee import build

    return _module(build(3, name="committee3_solve"), tmp_path_factory.mktemp("committee3"))


def test_three_units_at_alpha_4_end_specialised_from_the_default_starts(three_units):
    """Three tanh units at alpha = 4 (lam = 0.1): the default cold solve (starts on the scout's rule,
    re-solved on the default scrambled Sobol rule) ends on the specialised fixed point, theta's diagonal
    above its off-diagonal, with a larger phi than the unspecialised one. On the former default, tensor
    Gauss-Hermite of order 7, it ended anti-specialised: that rule's specialised branch ends in a
    saddle-node at alpha = 4.47, where converged rules keep it down to alpha ~ 3.4."""
    from replica.numeric.integrators import default_spec, from_spec
    from replica.numeric.solver import Solver

    m = three_units
    assert default_spec(m).startswith("sobol:")
    rule = from_spec("auto", m)   # the command's rule (a bare Solver's default is a tensor rule)
    s = Solver(m, {"lam": LAM}, rule=rule)
    assert s.integrator.describe().startswith("sobol")
    fp = s.solve_best(4.0, scout=s.scout())
    th = fp.order
    assert fp.branch == "free" and th["theta_1_11"] - th["theta_1_12"] > 0.1, (th, fp.notes)
    assert not any("anti-specialised" in n for n in fp.notes)
    un = Solver(m, {"lam": LAM}, "unspecialised", rule=rule).solve(4.0)
    assert fp.phi > un.phi, (fp.phi, un.phi)


def test_a_stalled_start_is_given_up_and_an_unspecialised_point_says_why(committee_module):
    """Two units near alpha_spec (alpha = 2, Gauss-Hermite 7, the default's scout): the generic start
    (1, 1) plateaus near 1e-3; with patience it is given up after a few hundred iterations, not
    max_iter, and the cold solve still ends on a fixed point. At alpha = 1 the cold solve reports the
    unspecialised fixed point and why: it is linearly stable towards specialisation (breaking
    eigenvalue below one)."""
    from replica.errors import ConvergenceError
    from replica.numeric.iteration import STALL_PATIENCE
    from replica.numeric.quadrature import gauss_hermite
    from replica.numeric.solver import Solver

    s = Solver(committee_module, {"lam": LAM}, rule=gauss_hermite(4, 7))
    with pytest.raises(ConvergenceError) as exc:
        s.solve(2.0, x0=s.initial_state(), patience=STALL_PATIENCE)
    assert "stalled" in str(exc.value) and exc.value.iterations < s.max_iter
    assert np.isfinite(s.solve_best(2.0).phi)
    fp = s.solve_best(1.0)
    assert abs(fp.order["theta_1_11"] - fp.order["theta_1_12"]) < 1e-4 * fp.order["theta_1_11"]
    why = [n for n in fp.notes if "linearly stable towards specialisation" in n]
    assert len(why) == 1 and "below alpha_spec" in why[0], fp.notes

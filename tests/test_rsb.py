"""Kinked continuous labels and the zero-temperature 1RSB (replica.symbolic.rsb, replica.numeric.rsb).

Oracles written by hand, importing nothing of the library (tests/oracles/rsb_phase_retrieval.py): real
phase retrieval, square loss on ``|h|`` with ``y = |h*|``, whose Moreau envelope
``M = (y - |omega|)^2 / (1 + 2 delta_q)`` and inner 1RSB average are closed forms.

* the replica-symmetric point of phase retrieval (a kinked label) against its closed form, to 1e-10;
* the 1RSB reduction: at ``q1 = q0`` the 1RSB free entropy is the replica-symmetric one for any Parisi
  parameter, and the 1RSB map (the limit's regular form) is the replica-symmetric map, to 1e-10;
* the nested average (``Psi_y``, its gradient in every order parameter and in ``m``) at a state with
  ``q0 > 0``, ``theta != 0`` against the oracle's closed inner average;
* the 1RSB point of the uninformative branch against the oracle's saddle point (slow);
* collapse onto replica symmetry for a convex loss (ridge, slow);
* one-line errors: ``--rsb 2``, a Parisi parameter that runs away, a label that jumps.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp

from replica import L2, Domain, Model, TokenStatistics, fields, parameter, symbol, teacher_fields
from replica.errors import DeclarationError
from tests.oracles import rsb_phase_retrieval as oracle
from tests.support import run_cli

ALPHA = 2.0


@pytest.fixture(scope="module")
def pr():
    """Phase retrieval: the replica-symmetric module, a solver on the kink-aware rule, its uninformative
    fixed point, the 1RSB module and solver."""
    from replica.numeric import rsb
    from replica.registry import load_module
    from replica.registry.rsb import load_rsb_module
    from replica.numeric.kinks import kink_integrator
    from replica.numeric.solver import Solver

    rsm = load_module("phase_retrieval")
    solver = Solver(rsm, {"lam": 0.0}, branch="uninformative", rule=kink_integrator(rsm), tol=1e-12)
    fp = solver.solve(ALPHA)
    mod = load_rsb_module("phase_retrieval", quiet=True)
    return dict(rsm=rsm, solver=solver, fp=fp, mod=mod, rsb=rsb)


# --------------------------------------------------------------------------- kinked labels
def _glm(loss, noise=(), name="user"):
    h, hs = fields(1, 1), teacher_fields(1, 1)
    lam = parameter("lam", r"\lambda")
    return Model(name=name, description="test", h=h, hstar=hs, loss=loss(h[0], hs[0]), noise=list(noise),
                 data=TokenStatistics.isotropic(1, 1), regularizer=L2(lam), parameters={lam: 0.0},
                 domains={lam: Domain(0, None)}, branches={"uninformative": ("theta",)})


def test_kinked_labels_are_declared_and_jumps_refused():
    """|h*|, max(0, h*) (with or without noise) and a continuous Piecewise of h* are kinked labels with a
    density: declared. sign(h*) and a Piecewise that jumps are refused with one line naming the term."""
    z = symbol("noise", "z")
    _glm(lambda h, hs: (sp.Abs(hs) - sp.Abs(h)) ** 2)
    _glm(lambda h, hs: (sp.Max(0, hs) + z / 3 - h) ** 2 / 2, noise=[z])
    _glm(lambda h, hs: (sp.Piecewise((hs, hs > 0), (0, True)) - h) ** 2)
    for bad in (lambda h, hs: (sp.sign(hs) - h) ** 2, lambda h, hs: (sp.Piecewise((1, hs > 0), (0, True)) - h) ** 2):
        with pytest.raises(DeclarationError, match="jumps as a function of the teacher fields alone"):
            _glm(bad)


def test_phase_retrieval_rs_against_closed_form(pr):
    """The replica-symmetric uninformative point of phase retrieval (a kinked label, a piecewise prox
    switching at omega = 0) against its closed form (oracle.replica_symmetric), to 1e-10."""
    ref = oracle.replica_symmetric(ALPHA, 0.0)
    fp = pr["fp"]
    assert fp.converged
    assert fp.order["q_1"] == pytest.approx(ref["q"], rel=1e-10)
    assert fp.order["V_1"] == pytest.approx(ref["V"], rel=1e-10)
    assert fp.conjugates["qhat_1"] == pytest.approx(ref["qh"], rel=1e-10)
    assert fp.phi == pytest.approx(ref["phi"], rel=1e-10)


@pytest.mark.slow
def test_relu_teacher_rs_against_closed_form(tmp_path):
    """A ReLU teacher with noise, y = max(0, h*) + sqrt(Delta) z, square loss, l2 (a kinked label): the square
    loss makes it ridge regression with a nonlinear teacher, whose RS equations close on the moments
    E max(0, h*)^2 = E max(0, h*) h* = rho / 2 (written here by hand). `replica solve` against them, within
    its bars."""
    decl = tmp_path / "relu_teacher.py"
    decl.write_text(
        "import sympy as sp\n"
        "from replica import L2, Domain, Model, TokenStatistics, fields, parameter, symbol, teacher_fields\n"
        "h, hs = fields(1, 1), teacher_fields(1, 1)\n"
        "z = symbol('noise', 'z')\n"
        "Delta, lam = parameter('Delta', r'\\Delta'), parameter('lam', r'\\lambda')\n"
        "model = Model(name='relu_teacher', description='ReLU teacher with noise', h=h, hstar=hs,\n"
        "    loss=sp.Rational(1, 2) * (sp.Max(0, hs[0]) + sp.sqrt(Delta) * z - h[0]) ** 2, noise=[z],\n"
        "    data=TokenStatistics.isotropic(1, 1), regularizer=L2(lam), parameters={Delta: 0.1, lam: 0.1},\n"
        "    domains={Delta: Domain(0, None), lam: Domain(0, None)})\n")
    alpha, delta, lam = 2.0, 0.1, 0.1
    out = run_cli("solve", decl, "--alpha", alpha, "--json", "--no-replicon", timeout=1800)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    q, V, th = 0.5, 0.5, 0.3      # the closed form: iterate the RS map written out
    for _ in range(2000):
        c = 0.5 + delta - th + q    # E (y - omega)^2, rho = 1
        vh, qh, thh = alpha / (1 + V), alpha * c / (1 + V) ** 2, alpha / (2 * (1 + V))
        q, V, th = (qh + thh ** 2) / (lam + vh) ** 2, 1 / (lam + vh), thh / (lam + vh)
    eps_g = 0.5 * (0.5 + delta - th + q)
    for key, ref in (("q", q), ("V", V), ("theta", th), ("eps_g", eps_g)):
        assert abs(d[key] - ref) <= d["errors"][key] + 1e-12, (key, d[key], ref, d["errors"][key])
        assert abs(d[key] - ref) <= 1e-6 * abs(ref), key


# --------------------------------------------------------------------------- 1RSB: the reduction to RS
def test_rsb_reduces_to_rs(pr):
    """At q1 = q0 (q1hat = q0hat) the 1RSB free entropy is the replica-symmetric one whatever the Parisi
    parameter, and the 1RSB map in the limit is the replica-symmetric map: same conjugates, same new
    order parameters, to 1e-10 (on the same rule)."""
    rsb, solver, fp = pr["rsb"], pr["solver"], pr["fp"]
    S = rsb.RSBSolver(pr["mod"], solver)
    x_rs = fp.x * np.array([1.01, 0.97, 1.0])  # off the fixed point: the maps are compared, not solved
    res = solver.evaluate_map(x_rs, ALPHA)
    for pm in (0.3, 4.0):
        st = S.state(S.conv.from_rs(x_rs, 0.0), pm, ALPHA, collapsed=True)
        # the new order parameters: q0 = q1 = q, delta_q = V
        assert st.mapped[S._q1][0] == pytest.approx(res.x_new[0], rel=1e-10)
        assert st.mapped[S._q0][0] == pytest.approx(res.x_new[0], rel=1e-10)
        assert st.mapped[S._dq][0] == pytest.approx(res.x_new[1], rel=1e-10)
        # the conjugates: q0hat = q1hat = qhat, Vhat = Vhat
        names = pr["mod"].CONJUGATES
        assert st.xhat[names.index("q1hat_1")] == pytest.approx(res.xhat[0], rel=1e-10)
        assert st.xhat[names.index("q0hat_1")] == pytest.approx(res.xhat[0], rel=1e-10)
        assert st.xhat[names.index("Vhat_1")] == pytest.approx(res.xhat[1], rel=1e-10)
    # at the fixed point itself: the free entropy and a vanishing complexity
    for pm in (0.3, 4.0):
        st = S.state(S.conv.from_rs(fp.x, 0.0), pm, ALPHA, collapsed=True)
        pot = S.potentials(st, ALPHA)
        assert pot["phi"] == pytest.approx(fp.phi, rel=1e-10)
        assert abs(pot["complexity"]) < 1e-12


# --------------------------------------------------------------------------- 1RSB: the nested average
def test_nested_average_against_closed_inner_average(pr):
    """Psi_y, its gradient in q0, q1, delta_q, theta and its derivative in m at a state with q0 > 0 and
    theta != 0, on the default kink-aware nested rule, against the oracle (the inner average in closed
    form; derivatives by Richardson-extrapolated differences, ~1e-10): the difference to the refined
    rule (what the 1RSB bars add up) covers the true error, and is small."""
    rsb = pr["rsb"]
    S = rsb.RSBSolver(pr["mod"], pr["solver"])
    q0, q1, dq, th, pm = 0.7, 1.9, 1.0, 0.3, 2.0
    x = np.array([q0, q1, dq, th])
    avg = rsb.energetic_average(S.mod, S.rule.rule(x, S.p), x, pm, S.p)
    fine = rsb.energetic_average(S.mod, S.rule.refined().rule(x, S.p), x, pm, S.p)
    args = dict(q0=q0, q1=q1, dq=dq, th=th, m=pm)
    got = [avg.psi, *avg.grad, avg.dpsi_dm]
    bar = np.abs(np.array([fine.psi, *fine.grad, fine.dpsi_dm]) - got) + 1e-9 * np.abs(got)
    ref = [oracle.psi_y(q0, q1, dq, th, pm)]
    ref += [oracle._diff(lambda v: oracle.psi_y(**{**args, k: v}), args[k], 1e-4) for k in ("q0", "q1", "dq", "th")]
    ref += [oracle._diff(lambda v: oracle.psi_y(**{**args, "m": v}), pm, 1e-4)]
    for name, g, r, b in zip(("psi", "q0", "q1", "dq", "theta", "m"), got, ref, bar):
        assert abs(g - r) <= b, (name, g, r, b)
        assert b <= 1e-5 * max(abs(r), 1e-2), (name, b)


@pytest.mark.slow
def test_rsb_point_against_oracle(pr):
    """The 1RSB point of the uninformative branch (states uncorrelated, q0 = 0) with its Parisi parameter
    where the complexity vanishes, against the oracle's saddle point: every number within its error bar
    (which the oracle's error, ~1e-9, does not approach)."""
    rsb = pr["rsb"]
    S = rsb.RSBSolver(pr["mod"], pr["solver"])
    point = rsb.with_error_bars(S, rsb.solve(S, ALPHA, pr["fp"]), ALPHA)
    assert point.converged and not point.collapsed and S.uncorrelated
    ref = oracle.uncorrelated(ALPHA, 0.0, dict(q1=2.0, dq=0.8, m=5.0, q1h=0.2, vh=1.2))
    assert ref["residual"] < 1e-10
    e = point.errors
    for name, key in (("q1_1", "q1"), ("delta_q_1", "dq")):
        assert abs(point.order[name] - ref[key]) <= e[name], name
    assert abs(point.parisi_m - ref["m"]) <= e["parisi_m"]
    assert abs(point.phi - ref["phi"]) <= e["phi"]
    assert abs(point.complexity) <= e["complexity"] + 1e-10
    # 1RSB lowers the free entropy: a higher ground-state energy than replica symmetry
    assert point.train_loss > point.rs.train_loss + 10 * e["train_loss"]
    # the JSON reports the uncorrelated states' q0 as 0, not the solver's floor
    out = rsb.result_dict(S, point)
    assert out["q0"] == 0.0 and out["order_parameters"]["q0_1"] == 0.0 and out["q1"] == point.order["q1_1"]


# --------------------------------------------------------------------------- collapse, errors
@pytest.mark.slow
def test_convex_loss_collapses_onto_rs():
    """Ridge (a convex loss, RS-stable): starts off replica symmetry flow back to q1 = q0; the 1RSB point
    is the replica-symmetric one (same order parameters and training loss, Parisi parameter null)."""
    out = run_cli("solve", "ridge", "--alpha", "2", "--rsb", "1", "--json", timeout=1200)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["parisi_m"] is None and "collapses" in d["parisi_m_reason"] and d["complexity"] == 0.0
    assert d["q0"] == d["q1"] == pytest.approx(d["rs_order_parameters"]["q_1"], rel=1e-8)
    assert d["train_loss"] == pytest.approx(d["rs_train_loss"], rel=1e-9)
    assert d["errors"]["q1"] is not None


def test_rsb_2_is_one_line():
    """--rsb 2 is refused before any work, in one line naming the flag (exit 2)."""
    out = run_cli("solve", "phase_retrieval", "--alpha", "2", "--rsb", "2", "--json", timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().count("\n") == 0 and "rsb:" in out.stderr and "not built" in out.stderr
    from replica.cli.commands.rsb import check_rsb
    from replica.errors import ParameterError

    with pytest.raises(ParameterError, match="0 or 1, got -1"):  # not "-1 steps ... are not built"
        check_rsb(-1)


def test_runaway_names_branch_and_point(pr, monkeypatch):
    """A complexity of one sign over the whole ladder of Parisi parameters: a one-line error naming the
    branch and the point (here the ladder is cut to one rung below the root)."""
    rsb = pr["rsb"]
    monkeypatch.setattr(rsb, "M_LADDER", (1.0, 1.5))
    S = rsb.RSBSolver(pr["mod"], pr["solver"])
    with pytest.raises(rsb.RunawayError) as err:
        rsb.solve(S, ALPHA, pr["fp"], m0=1.0)
    msg = str(err.value)
    assert "runs away to infinity" in msg and "branch uninformative" in msg and "alpha = 2" in msg
    assert "Sigma at m = 1 (+" in msg  # the solved rung and the sign of its complexity
    assert err.value.residuals and max(err.value.residuals) <= 1e-8  # the fixed-m residuals, solved
    assert "\n" not in msg

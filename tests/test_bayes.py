"""Bayes-optimal inference (replica.symbolic.bayes, replica.numeric.bayes, replica.phase.bayes) against answers
computed independently here (tests/oracles/bayes.py: scipy quadrature of the literature's formulas)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from replica import (L2, Density, DiscreteLabel, Domain, Gaussian, GaussBernoulli, Model, Rademacher, Sign, TokenStatistics,
                     fields, parameter, symbol, teacher_fields)
from replica.errors import DeclarationError, ParameterError
from replica.registry.bayes import bayes_model
from replica.numeric.bayes import BayesPlan, BayesSolver, with_error_bars
from replica.numeric.kinks import PanelPlan
from tests.oracles import bayes as oracle

H, HS = fields(1, 1), teacher_fields(1, 1)
LAM = parameter("lam", r"\lambda")
DELTA = parameter("Delta", r"\Delta")
NOISE = symbol("noise", "z")
W = symbol("w", "w")


def glm(name: str, prior=None, channel=None, loss=None, params=None, domains=None, noise=()) -> Model:
    """A one-field GLM declaration (sign channel and hinge loss unless said otherwise)."""
    channel = Sign(HS[0]) if channel is None and loss is None else channel
    if loss is None:
        loss = sp.Max(0, 1 - channel.label * H[0])
    return Model(name=name, h=H, hstar=HS, loss=loss, channel=channel, data=TokenStatistics.isotropic(1, 1),
                 regularizer=L2(LAM), parameters={LAM: 0.1, **(params or {})},
                 domains={LAM: Domain(0, None), **(domains or {})}, prior=prior, noise=noise)


def ridge_model(prior=None) -> Model:
    return glm("ridge_bo", prior=prior, loss=sp.Rational(1, 2) * (HS[0] + sp.sqrt(DELTA) * NOISE - H[0]) ** 2,
               params={DELTA: 0.25}, domains={DELTA: Domain(0, None)}, noise=[NOISE])


@pytest.fixture(scope="module")
def sign_gauss():
    return bayes_model(glm("sign_gauss"))


@pytest.fixture(scope="module")
def sign_binary():
    return bayes_model(glm("sign_binary", prior=Rademacher()))


@pytest.fixture(scope="module")
def ridge_bo():
    return bayes_model(ridge_model())


# --------------------------------------------------------------------------- fixed points against oracles
@pytest.mark.parametrize("alpha", [0.5, 2.0, 6.0])
def test_gaussian_sign_perceptron(sign_gauss, alpha):
    """q = qhat/(1 + qhat) with qhat a one-dimensional integral (oracle: scipy), to 1e-8; the free entropy and
    the Bayes-optimal classification error arccos(sqrt q)/pi too; the error bars cover the true errors."""
    ref = oracle.gaussian_sign_perceptron(alpha)
    point = with_error_bars(BayesSolver(sign_gauss), BayesSolver(sign_gauss).solve(alpha))
    assert abs(point.q[0, 0] - ref["q"]) < 1e-8
    assert abs(point.qhat[0, 0] - ref["qhat"]) < 1e-8 * ref["qhat"]
    assert abs(point.free_entropy - ref["free_entropy"]) < 1e-8
    assert abs(point.classification_error - ref["classification_error"]) < 1e-8
    assert abs(point.eps_g - 2 * ref["classification_error"]) < 1e-7  # hinge: the Bayes risk is 2 P(error)
    for k, v in (("q", ref["q"]), ("free_entropy", ref["free_entropy"]),
                 ("classification_error", ref["classification_error"])):
        assert abs(point.values()[k] - v) <= point.errors[k], k


def test_bars_cover_a_coarse_rule(sign_gauss, sign_binary):
    """On a deliberately coarse rule the error is ~1e-5..1e-3: the bars (a re-solve on the refined rules)
    cover it and are not absurdly wide."""
    plan = BayesPlan(panels=PanelPlan(order=3, spacing=2.5))
    for bm, alpha, ref in ((sign_gauss, 1.0, oracle.gaussian_sign_perceptron(1.0)),):
        solver = BayesSolver(bm, plan=plan)
        point = solver.solve(alpha)
        err = abs(point.q[0, 0] - ref["q"])
        assert err > 1e-9  # the coarse rule is really off
        fine = with_error_bars(solver, point)
        assert abs(fine.q[0, 0] - ref["q"]) <= fine.errors["q"]
        assert fine.errors["q"] < 100 * max(err, 1e-9)
    # the +-1 perceptron's uninformed free entropy against its oracle
    ref_phi, ref_q = oracle.binary_perceptron_free_entropy(1.0)
    solver = BayesSolver(sign_binary, plan=plan)
    fine = with_error_bars(solver, solver.solve(1.0))
    assert abs(fine.q[0, 0] - ref_q) <= fine.errors["q"]
    assert abs(fine.free_entropy - ref_phi) <= fine.errors["free_entropy"]


def test_gaussian_channel_closed_form(ridge_bo):
    """A linear teacher with Gaussian noise and a Gaussian prior: qhat = alpha/(Delta + 1 - q), q = qhat/(1+qhat),
    eps_g = (1 - q + Delta)/2 (the Bayes risk of the square loss), Phi in closed form."""
    solver = BayesSolver(ridge_bo, {"Delta": 0.3})
    for alpha in (0.3, 1.0, 4.0):
        p = solver.solve(alpha)
        q = p.q[0, 0]
        A = alpha / (0.3 + 1 - q)
        assert abs(A / (1 + A) - q) < 1e-12
        assert abs(p.eps_g - (1 - q + 0.3) / 2) < 1e-10
        phi = -q * A / 2 + (A - math.log1p(A)) / 2 - alpha / 2 * math.log(2 * math.pi * math.e * (0.3 + 1 - q))
        assert abs(p.free_entropy - phi) < 1e-10


def test_nishimori_identities_at_every_solved_point(sign_gauss, sign_binary, ridge_bo):
    """Teacher overlap = self overlap, V = rho - q, E Z g g^T = -E Z dg/domega, and a normalised label law, at
    every fixed point solved here (both branches, several models, several alpha)."""
    cases = [(sign_gauss, {}, [0.3, 1.0, 3.0]), (sign_binary, {}, [0.5, 1.3, 2.0]),
             (ridge_bo, {"Delta": 0.1}, [0.5, 2.0]),
             (bayes_model(ridge_model(prior=GaussBernoulli(0.3))), {}, [0.4, 1.5]),
             (bayes_model(glm("probit_gb", prior=GaussBernoulli(sp.Rational(1, 5)),
                              channel=Sign(HS[0]))), {}, [1.0])]
    for bm, params, alphas in cases:
        solver = BayesSolver(bm, params)
        for alpha in alphas:
            for branch in ("uninformed", "informed"):
                p = solver.solve(alpha, branch)
                assert p.converged
                for k, v in p.nishimori.items():
                    assert v < 1e-8, (bm.MODEL, alpha, branch, k, v)


def test_binary_perceptron_point(sign_binary):
    """The +-1 perceptron below its transitions: the uninformed fixed point and free entropy against the
    oracle; the informed start reaches perfect recovery (q = 1, Phi = -log 2)."""
    solver = BayesSolver(sign_binary)
    ref_phi, ref_q = oracle.binary_perceptron_free_entropy(1.1)
    p = solver.solve(1.1)
    assert abs(p.q[0, 0] - ref_q) < 1e-9 and abs(p.free_entropy - ref_phi) < 1e-9
    inf = solver.solve(1.1, "informed")
    assert abs(inf.q[0, 0] - 1) < 1e-12 and abs(inf.free_entropy + math.log(2)) < 1e-12


# --------------------------------------------------------------------------- the prior's potential
PRIORS = [
    ("gaussian", Gaussian(0, 2), None, (), [(-1.0, 0.0)]),
    ("rademacher", Rademacher(), None, (), [(-1.0, 0.5), (1.0, 0.5)]),
    ("gauss_bernoulli", GaussBernoulli(sp.Rational(3, 10)), None, (), [(0.0, 0.7)]),
    ("laplace", sp.exp(-sp.sqrt(2) * sp.Abs(W)) / sp.sqrt(2), None, (), []),
]


def _oracle_psi(name, A):
    if name == "gaussian":
        return oracle.prior_psi(lambda w: np.exp(-w * w / 4), A, pieces=[(-24.0, 24.0)])
    if name == "rademacher":
        return oracle.prior_psi(None, A, atoms=[(-1.0, 0.5), (1.0, 0.5)])
    if name == "gauss_bernoulli":
        return oracle.prior_psi(lambda w: np.exp(-w * w / 2), A, pieces=[(-14.0, 14.0)], atoms=[(0.0, 0.7)])
    return oracle.prior_psi(lambda w: np.exp(-math.sqrt(2) * np.abs(w)), A, pieces=[(-26.0, 0.0), (0.0, 26.0)])


@pytest.mark.parametrize("name", [p[0] for p in PRIORS])
def test_prior_potential_and_derivatives(name):
    """psi_P0(A) against direct quadrature of its definition, its derivative against finite differences
    (dpsi/dA = E f_a^2 / 2, the input side of the saddle point), and the denoiser f_a = d log Z_0/dB against
    finite differences of log Z_0."""
    prior = next(p[1] for p in PRIORS if p[0] == name)
    bm = bayes_model(ridge_model(prior=prior).__class__(**{**_fields(ridge_model()), "prior": prior,
                                                          "name": f"prior_{name}"}))
    solver = BayesSolver(bm)
    pn = solver.prior
    tol = 1e-9  # the rules' error, measured: <= 2e-12 for every prior here (the Laplace kink is a panel boundary)
    for A in (0.4, 2.5):
        ent = pn.entropic(np.array([[A]]))
        psi = ent.psi_c + 0.5 * A * pn.rho
        ref_psi, ref_q = _oracle_psi(name, A)
        assert abs(psi - ref_psi) < tol, (name, A, psi, ref_psi)
        assert abs(ent.q[0, 0] - ref_q) < tol
        h = 1e-4
        dpsi = [(pn.entropic(np.array([[a]])).psi_c + 0.5 * a * pn.rho) for a in (A - h, A + h)]
        assert abs((dpsi[1] - dpsi[0]) / (2 * h) - ent.q[0, 0] / 2) < 1e-7 + tol
        B = np.array([[-1.3, 0.2, 2.1]])
        f_a, f_v, logZ = pn.denoise(B, np.array([[A]]))
        up = pn.denoise(B + 1e-5, np.array([[A]]))
        down = pn.denoise(B - 1e-5, np.array([[A]]))
        assert np.allclose((up[2] - down[2]) / 2e-5, f_a[0], atol=1e-8)
        assert np.allclose((up[0][0] - down[0][0]) / 2e-5, f_v[0, 0], atol=1e-7)


def _fields(m: Model) -> dict:
    return {k: getattr(m, k) for k in ("name", "h", "hstar", "data", "regularizer", "loss", "noise", "parameters",
                                       "domains", "channel")}


def test_output_potential_derivative_and_stationarity(sign_binary):
    """dPsi_out/dq = qhat1 / 2 (finite differences on the Nishimori line V = rho - q), and Phi is stationary
    at a solved point in both q and qhat (the f_a / g_out form of the saddle point is that of Phi)."""
    solver = BayesSolver(sign_binary)
    out = solver.output
    q, h = 0.6, 1e-5
    psi = [out.energetic(np.array([[x]]), np.array([[1 - x]])).psi_out for x in (q - h, q + h)]
    en = out.energetic(np.array([[q]]), np.array([[1 - q]]))
    assert abs((psi[1] - psi[0]) / (2 * h) - en.qhat1[0, 0] / 2) < 1e-7
    alpha = 1.2
    p = solver.solve(alpha)
    qs, A = p.q[0, 0], p.qhat[0, 0]

    def Phi(qv, Av):
        ent = solver.prior.entropic(np.array([[Av]]))
        e = out.energetic(np.array([[qv]]), np.array([[1 - qv]]))
        return -qv * Av / 2 + ent.psi_c + Av / 2 + alpha * e.psi_out

    assert abs(Phi(qs, A) - p.free_entropy) < 1e-10
    assert abs((Phi(qs + h, A) - Phi(qs - h, A)) / (2 * h)) < 1e-7
    assert abs((Phi(qs, A + h) - Phi(qs, A - h)) / (2 * h)) < 1e-7


def test_erm_ridge_at_lambda_delta_is_bayes_optimal(ridge_bo):
    """Ridge with lambda = Delta and a Gaussian teacher is the posterior mean: its test error equals the
    Bayes-optimal one (the empirical-risk solver, an independent code path)."""
    from replica.registry import load_module
    from replica.numeric.solver import Solver

    module = load_module("ridge")
    for alpha in (0.5, 2.0):
        erm = Solver(module, {"Delta": 0.25, "lam": 0.25}, tol=1e-13).solve(alpha)
        bo = BayesSolver(ridge_bo, {"Delta": 0.25}).solve(alpha)
        assert abs(erm.observables["eps_g"] - bo.eps_g) < 1e-9


# --------------------------------------------------------------------------- thresholds
def test_even_channel_weak_recovery():
    """y = +1 if |h*| > t, else -1 (an even channel: q = 0 is a fixed point): alpha_WR = 1 / [rho^2 sum_y
    (d^2 Z(y; 0, rho))^2 / Z(y; 0, rho)] with d^2 Z(+1) = 2 t phi(t) = -d^2 Z(-1), Z(+1) = 2 Phi(-t)."""
    from replica.phase.bayes import alpha_wr

    t = 0.8
    tt = parameter("t")
    ch = DiscreteLabel(sp.Piecewise((1, HS[0] > tt), (1, HS[0] < -tt), (-1, True)))
    bm = bayes_model(glm("even_bo", channel=ch, loss=sp.log(1 + sp.exp(-ch.label * H[0])), params={tt: t}))
    value, bar, why = alpha_wr(BayesSolver(bm))
    d2 = 2 * t * oracle.phi(t)
    z1 = 2 * oracle.ndtr(-t)
    ref = 1.0 / (d2 ** 2 * (1 / z1 + 1 / (1 - z1)))
    assert why is None
    assert abs(value - ref) < 1e-6 * ref
    assert abs(value - ref) <= bar


@pytest.mark.slow
def test_binary_perceptron_thresholds(sign_binary):
    """alpha_IT (the uninformed free entropy reaches -log 2) and alpha_alg (the spinodal of the uninformed
    branch) of the +-1 sign perceptron against the scipy oracle; the bars cover the differences; alpha_WR does
    not exist (the sign channel is informative at q = 0)."""
    from replica.phase.bayes import thresholds

    th = thresholds(BayesSolver(sign_binary), 0.2, 3.0, points=16)
    it, alg = oracle.binary_perceptron_alpha_it(), oracle.binary_perceptron_alpha_alg()
    assert abs(th.values["alpha_it"] - it) < 1e-6 and abs(th.values["alpha_it"] - it) <= th.errors["alpha_it"] + 1e-9
    assert abs(th.values["alpha_alg"] - alg) < 1e-6
    assert th.values["alpha_wr"] is None and "not a fixed point" in th.reasons["alpha_wr"]


def test_gaussian_sign_perceptron_has_no_transition(sign_gauss):
    from replica.phase.bayes import thresholds

    th = thresholds(BayesSolver(sign_gauss), 0.2, 5.0, points=8)
    d = th.to_dict()
    assert d["alpha_alg"] is None and d["alpha_it"] is None
    assert "no first-order transition" in d["alpha_alg_reason"]
    assert "alpha_spec" not in d


# --------------------------------------------------------------------------- refusals
def test_refusals():
    """One line naming what is wrong: a non-normalisable prior, a continuous label without a density, a label
    that is not piecewise constant, a label law that is not a function of the teacher's fields."""
    with pytest.raises(DeclarationError, match="not normalisable"):
        glm("bad_prior", prior=sp.exp(W))
    with pytest.raises(DeclarationError, match="not normalisable"):
        glm("bad_prior2", prior=Density(sp.Integer(1), W))
    with pytest.raises(DeclarationError, match="negative"):
        glm("bad_prior3", prior=W * sp.exp(-W ** 2))
    with pytest.raises(DeclarationError, match="not piecewise constant"):
        DiscreteLabel(HS[0] * sp.sign(HS[0] - 1))
    noiseless = glm("noiseless", loss=sp.Rational(1, 2) * (HS[0] - H[0]) ** 2)
    with pytest.raises(DeclarationError, match="Delta > 0"):
        bayes_model(noiseless)
    bm = bayes_model(ridge_model())
    with pytest.raises(ParameterError, match="Delta"):
        BayesSolver(bm, {"Delta": 0.0})
    from derivations.attention_tied import model as attention

    with pytest.raises(DeclarationError, match="tokens"):
        bayes_model(attention)


def test_erm_refuses_a_prior_it_would_misrepresent():
    from replica.symbolic.derivation import Derivation

    with pytest.raises(DeclarationError, match="prior"):
        Derivation(ridge_model(prior=GaussBernoulli(sp.Rational(1, 5))))
    Derivation(glm("binary_erm", prior=Rademacher()))  # second moment 1 with an l2 penalty: accepted


# --------------------------------------------------------------------------- committees
@pytest.fixture(scope="module")
def committee():
    from replica.registry.bayes import load_bayes

    return load_bayes("committee_sign")


def test_committee_unspecialised_and_specialised(committee):
    """The unit-symmetric fixed point q = c 1 1^T below alpha_spec (exactly invariant, the Nishimori identities
    hold), its specialisation eigenvalue below 1 there and above 1 at alpha = 3; the units are detected as
    permutable."""
    from replica.phase.bayes import permutable, specialisation_eigenvalue

    solver = BayesSolver(committee)
    assert permutable(solver)
    low = solver.solve(1.5)
    assert np.ptp(low.q) < 1e-12 and low.q[0, 0] > 0.1
    lam, fd = specialisation_eigenvalue(solver, 1.5)
    assert lam < 1 and fd < 1e-4
    assert max(low.nishimori.values()) < 1e-8
    assert specialisation_eigenvalue(solver, 3.0)[0] > 1


@pytest.mark.slow
def test_committee_specialised_point(committee):
    """Above alpha_spec the uninformed start specialises: q_11 = q_22 > q_12, the Nishimori identities hold and
    the error bars (a re-solve on the refined two-form rule) are small."""
    solver = BayesSolver(committee)
    high = with_error_bars(solver, solver.solve(3.0))
    assert abs(high.q[0, 0] - high.q[1, 1]) < 1e-9 and high.q[0, 0] > high.q[0, 1] + 0.3
    assert max(high.nishimori.values()) < 1e-8
    assert max(high.errors[k] for k in ("q_11", "q_12", "free_entropy")) < 1e-6


@pytest.mark.slow
def test_committee_alpha_spec(committee):
    """alpha_spec brackets the change of the state AMP's evolution reaches: unspecialised just below, specialised
    just above (the uninformed start iterated, an independent reading of the same instability)."""
    from replica.phase.bayes import alpha_spec

    solver = BayesSolver(committee)
    value, bar, why = alpha_spec(solver, 0.5, 5.0, 10)
    assert why is None and bar < 1e-3
    below, above = solver.solve(value * 0.97), solver.solve(value * 1.03)
    assert np.ptp(below.q) < 1e-9
    assert above.q[0, 0] - above.q[0, 1] > 1e-3


# --------------------------------------------------------------------------- AMP
@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.5])
def test_bayes_amp_follows_state_evolution(sign_gauss, alpha):
    """Sum-product GAMP at d = 2000 over 6 seeds: the mean overlap W^T W*/d agrees with the state evolution's
    fixed point within 3 standard errors (+ 1e-3 for the O(1/d) bias), and q = m (Nishimori) per run."""
    from numerics.bayes_amp import BayesAMP, make_bayes_problem

    solver = BayesSolver(sign_gauss)
    runs = [BayesAMP(solver, make_bayes_problem(solver, alpha, 2000, s)).run(80) for s in range(6)]
    m = np.array([r["m"][0, 0] for r in runs])
    se = m.std(ddof=1) / math.sqrt(m.size)
    ref = solver.solve(alpha).q[0, 0]
    assert abs(m.mean() - ref) <= 3 * se + 1e-3, (m.mean(), se, ref)
    for r in runs:
        assert abs(r["q"][0, 0] - r["m"][0, 0]) < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("name", ["binary_perceptron", "committee_sign"])
def test_bayes_amp_follows_state_evolution_beyond_the_gaussian_glm(name):
    """The same check for a +-1 prior (the tanh denoiser) and a two-unit committee (matrix ``g_out`` of a
    three-valued label), at alpha = 1 (below the binary perceptron's jump and the committee's specialisation),
    through ``run_bayes_amp``: d = 2000, 6 seeds, the mean overlap within 3 standard errors (+ 1e-3 for the
    O(1/d) bias) of the fixed point, and q = m (Nishimori). Measured: 1.4 and 0.3 standard errors."""
    from numerics.bayes_amp import run_bayes_amp

    r = run_bayes_amp(name, 1.0, d=2000, seeds=6)
    assert abs(r["m"] - r["fixed_point"]) <= 3 * r["m_se"] + 1e-3, r
    assert abs(r["q"] - r["m"]) < 0.05, r


# --------------------------------------------------------------------------- the command line
def _cli(*args):
    import subprocess
    import sys
    from pathlib import Path

    return subprocess.run([sys.executable, "-m", "replica", *args], cwd=Path(__file__).resolve().parent.parent,
                          capture_output=True, text=True, timeout=600)


def test_cli_solve_and_phase_bayes_json():
    """The contract's keys, exactly; a bad value is one line and exit 2, before any work."""
    import json

    res = _cli("solve", "binary_perceptron", "--bayes", "--alpha", "1.1", "--json", "--no-erm")
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    for k in ("q", "mmse", "eps_g", "classification_error", "free_entropy", "branch", "errors"):
        assert k in out, k
    assert out["branch"] == "uninformed" and abs(out["q"] + out["mmse"] - 1) < 1e-12
    assert set(out["errors"]) >= {"q", "mmse", "free_entropy", "classification_error"}
    res = _cli("phase", "hinge", "--bayes", "--json", "--alpha-min", "0.5", "--alpha-max", "3", "--points", "6")
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    for k in ("alpha_wr", "alpha_alg", "alpha_it"):
        assert out[k] is None and out[f"{k}_reason"]
    assert "alpha_spec" not in out
    bad = _cli("solve", "ridge", "--bayes", "--alpha", "1", "--param", "Delta=0")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Delta" in bad.stderr


def test_bayes_export():
    """The LaTeX/Markdown export of the Bayes-optimal derivation: the prior, Z_0 and f_a in closed form, Z_out and
    g_out, the saddle point in the f_a / g_out form and the Nishimori identities; balanced environments."""
    import re

    from replica.registry import load_model
    from replica.symbolic.bayes import BayesDerivation
    from replica.symbolic.bayes_latex import latex_document, markdown_document

    d = BayesDerivation(load_model("binary_perceptron"))
    tex, md = latex_document(d), markdown_document(d)
    for env in set(re.findall(r"\\begin\{(\w+\*?)\}", tex)):
        assert tex.count(rf"\begin{{{env}}}") == tex.count(rf"\end{{{env}}}")
    for piece in (r"\delta(w - 1)", r"\tanh{\left(B \right)}", r"f_a f_a^\top", r"g_\mathrm{out} g_\mathrm{out}^\top",
                  r"\Phi\left(\frac{\omega y}{\sqrt{V}}\right)", "Nishimori", r"h^{*}"):
        assert piece in tex and piece in md, piece
    assert "replica-artifact:" in tex.splitlines()[0]

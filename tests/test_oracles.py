"""Self-checks of the hand-written GLM oracles (tests/oracles), the references of issues 13 and 14.

Each check can fail: stationarity is also asserted to *fail* off the fixed point, limits are
approached at the stated rate, and two independent routes (closed form / quadrature, ridge /
LASSO) meet. Tolerances are the stated numerical errors: fixed points to 1e-13 (relative step
of the solve), quadrature to ~1e-14 absolute, finite differences with relative step h: truncation
~h²·|f'''| and noise ~1e-14/h.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.oracles import PARAMETERS, state_evolution
from tests.oracles.classification import (classification_error, classification_free_entropy, energetic,
                                          square_sign_closed_form)
from tests.oracles.common import finite_difference_gradient, ncdf, npdf
from tests.oracles.lasso import lasso_free_entropy, lasso_state_evolution
from tests.oracles.ridge import ridge_closed_form, ridge_free_entropy, ridge_state_evolution

KEYS = ("q", "V", "theta", "qhat", "Vhat", "thetahat", "phi")


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("lam,delta", [(1e-3, 0.25), (0.1, 0.25), (1.0, 0.25), (0.05, 0.0), (2.0, 1.0)])
def test_ridge_state_evolution_equals_closed_form(alpha, lam, delta):
    se, cf = ridge_state_evolution(alpha, lam, delta), ridge_closed_form(alpha, lam, delta)
    for k in KEYS + ("eps_g",):
        assert se[k] == pytest.approx(cf[k], rel=1e-10, abs=1e-13), k
    # the training loss three ways: -Phi (SE), -Phi (closed form), the random-matrix formula
    assert se["train_loss"] == pytest.approx(cf["train_loss_rmt"], rel=1e-10, abs=1e-14)


def test_ridge_closed_form_matches_the_toolkit_convention_test():
    """Same eps_g as the hand formula in tests/test_ridge.py (test MSE of a fresh noisy label)."""
    alpha, lam, delta = 3.0, 1e-3, 0.1
    b = alpha - 1 + lam
    g = (-b + np.sqrt(b * b + 4 * lam)) / (2 * lam)
    t2 = (g * g + g) / (2 * lam * g + b)
    assert ridge_closed_form(alpha, lam, delta)["eps_g"] == pytest.approx(
        0.5 * (lam ** 2 * t2 + delta * (g - lam * t2) + delta), rel=1e-12)


def _stationarity(model, alpha, params):
    fp = state_evolution(model, alpha, **params)
    x = np.array([fp[k] for k in ("q", "V", "theta", "qhat", "Vhat", "thetahat")])
    if model == "ridge":
        f = lambda y: ridge_free_entropy(alpha, params["lam"], params["Delta"], y)  # noqa: E731
    elif model == "lasso":
        f = lambda y: lasso_free_entropy(alpha, params["lam1"], params["Delta"], y)  # noqa: E731
    else:
        loss = "logistic" if model == "perceptron_probit" else model
        delta = params.get("Delta", 0.0)
        f = lambda y: classification_free_entropy(loss, alpha, params["lam"], delta, y)  # noqa: E731
    return fp, x, f


STATIONARITY_POINTS = [("ridge", 2.0, {"lam": 0.1, "Delta": 0.25}),
                       ("lasso", 2.0, {"lam1": 0.1, "Delta": 0.0}),
                       ("lasso", 0.5, {"lam1": 1.0, "Delta": 0.25}),
                       ("logistic", 2.0, {"lam": 0.1}),
                       ("logistic", 1.0, {"lam": 1e-3}),
                       ("hinge", 1.0, {"lam": 0.1}),
                       ("hinge", 5.0, {"lam": 1e-3}),
                       ("perceptron_probit", 2.0, {"lam": 0.1, "Delta": 0.25})]


@pytest.mark.parametrize("model,alpha,params", STATIONARITY_POINTS)
def test_free_entropy_is_stationary_at_the_fixed_point(model, alpha, params):
    """∂Φ/∂(q, V, θ, q̂, V̂, θ̂) = 0 by central differences (h = 1e-5 relative: truncation ≲ 1e-9,
    quadrature noise ≲ 1e-14/1e-5 = 1e-9), and the same differences are O(1e-3) one percent off."""
    fp, x, f = _stationarity(model, alpha, params)
    scale = max(1.0, abs(fp["phi"]))
    grad = finite_difference_gradient(f, x) * np.maximum(np.abs(x), 1e-3)  # ∂Φ/∂log x
    assert np.max(np.abs(grad)) < 1e-7 * scale, grad
    off = x.copy()
    off[0] *= 1.01
    assert np.max(np.abs(finite_difference_gradient(f, off) * np.maximum(np.abs(x), 1e-3))) > 1e-5 * scale


@pytest.mark.parametrize("model,alpha,params", [("ridge", 1.5, {"lam": 0.1, "Delta": 0.25}),
                                                ("lasso", 2.0, {"lam1": 0.1, "Delta": 0.25}),
                                                ("logistic", 2.0, {"lam": 0.1}),
                                                ("hinge", 2.0, {"lam": 0.1}),
                                                ("perceptron_probit", 1.0, {"lam": 1.0, "Delta": 0.25})])
def test_alpha_derivative_of_phi_is_psi_y(model, alpha, params):
    """Envelope theorem: dΦ/dα = Ψ_y (central difference, h = 1e-4: truncation ~1e-8·Φ''',
    solve noise ~1e-13/1e-4 = 1e-9)."""
    h = 1e-4
    up = state_evolution(model, alpha + h, **params)["phi"]
    dn = state_evolution(model, alpha - h, **params)["phi"]
    assert (up - dn) / (2 * h) == pytest.approx(state_evolution(model, alpha, **params)["psi_y"], rel=1e-6)


@pytest.mark.parametrize("alpha", [0.5, 2.0, 5.0])
@pytest.mark.parametrize("delta", [0.0, 0.25])
def test_generic_classification_quadrature_against_the_square_loss_closed_form(alpha, delta):
    """The teacher-in-the-measure machinery (every θ-derivative through Φ(aξ)) applied to the
    square loss, whose averages are closed forms; also at a nearly deterministic label (θ²/q → 1)."""
    for q, V, theta in [(1.3, 0.7, 0.6), (4.0, 0.2, 1.9999), (0.05, 3.0, 0.01)]:
        quad = energetic("square", alpha, delta, q, V, theta, with_observables=True)
        exact = square_sign_closed_form(alpha, delta, q, V, theta)
        for k in ("psi_y", "qhat", "Vhat", "thetahat"):
            assert quad[k] == pytest.approx(exact[k], rel=1e-11, abs=1e-13), (k, q, V, theta)
        c = math.sqrt(2 / (math.pi * (1 + delta)))
        assert quad["eps_g"] == pytest.approx(0.5 * (1 - 2 * theta * c + q), rel=1e-11)


@pytest.mark.parametrize("model,params", [("logistic", {"lam": 0.1}), ("hinge", {"lam": 1e-3}),
                                          ("perceptron_probit", {"lam": 1.0, "Delta": 0.25})])
def test_training_loss_two_ways_and_classification_error(model, params):
    """−Φ = α E ℓ(y, prox) + λq/2 (an identity of the ℓ2 fixed point), and the arccos formula
    equals the quadrature of P(y h < 0) in the same Gaussian measure."""
    from scipy import integrate

    for alpha in (0.5, 5.0):
        fp = state_evolution(model, alpha, **params)
        assert fp["train_loss"] == pytest.approx(fp["train_loss_direct"], rel=1e-11, abs=1e-15)
        delta = params.get("Delta", 0.0)
        a = fp["theta"] / math.sqrt(fp["q"] * (1 + delta) - fp["theta"] ** 2)
        # y = +1 and h = √q ξ < 0, doubled by the y → −y symmetry
        p_err = 2 * integrate.quad(lambda x: npdf(x) * ncdf(a * x), -40, 0, epsabs=1e-15, epsrel=1e-13)[0]
        assert fp["classification_error"] == pytest.approx(p_err, rel=1e-11)
        assert fp["residual"] < 1e-12


@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_large_lambda_is_the_hebbian_limit(alpha):
    """λ → ∞: ŵ ≈ −(1/λ) Σ_μ ℓ'(y_μ, 0) y_μ x_μ/√d, so λθ → α c₁ E[y h*] and
    λ²q → c₁² (α E y² + α² E[y h*]²), with c₁ = −ℓ'(0) = ½ (logistic), 1 (hinge),
    E[y h*] = √(2/π)/√(1 + Δ) (sign/probit) or 1 (ridge, y = h* + √Δz, c₁ y = y).
    Corrections are O(√q) = O(1/λ) relative: the error must drop ~10× from λ = 1e3 to 1e4."""
    cases = {"logistic": (0.5, 0.0), "hinge": (1.0, 0.0), "perceptron_probit": (0.5, 0.25), "ridge": (1.0, 0.25)}
    for model, (c1, delta) in cases.items():
        if model == "ridge":
            yh, y2 = 1.0, 1.0 + delta
        else:
            yh, y2 = math.sqrt(2 / math.pi) / math.sqrt(1 + delta), 1.0
        lim_theta = alpha * c1 * yh
        lim_q = c1 ** 2 * (alpha * y2 + alpha ** 2 * yh ** 2)
        errs = []
        for lam in (1e3, 1e4):
            params = {"lam": lam, **({"Delta": delta} if "Delta" in PARAMETERS[model] else {})}
            fp = state_evolution(model, alpha, **params)
            errs.append(max(abs(lam * fp["theta"] / lim_theta - 1), abs(lam ** 2 * fp["q"] / lim_q - 1)))
        assert errs[1] < 10 * (1 + alpha) / 1e4, (model, errs)
        assert errs[1] < 0.2 * errs[0] or errs[1] < 1e-9, (model, errs)  # the O(1/λ) rate (hinge: exact)


@pytest.mark.parametrize("alpha,delta", [(2.0, 0.25), (5.0, 0.0), (1.5, 1.0)])
def test_lasso_with_tiny_lam1_is_least_squares_and_meets_ridge(alpha, delta):
    """λ₁ → 0 (α > 1): least squares, V = 1/(α − 1), θ = 1, q = 1 + Δ/(α − 1),
    e_t = Δ(α − 1)/2, no zero weights; the ridge oracle at λ → 0 meets it (two independent
    entropic sides). Deviations are O(λ₁), O(λ)."""
    ls = {"V": 1 / (alpha - 1), "theta": 1.0, "q": 1 + delta / (alpha - 1), "train_loss": delta * (alpha - 1) / 2}
    lasso = lasso_state_evolution(alpha, 1e-7, delta)
    ridge = ridge_state_evolution(alpha, 1e-7, delta)
    for k, v in ls.items():
        assert lasso[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k
        assert ridge[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k
    assert lasso["zero_fraction"] < 1e-5


def test_noiseless_limits():
    """Δ = 0: ridge at λ → 0 projects w* on the row space (α < 1: q = θ = α) or recovers it
    (α > 1: q = θ = 1, e_t = 0); the probit teacher at Δ → 0 is the sign teacher."""
    for alpha in (0.5, 0.8):
        fp = ridge_state_evolution(alpha, 1e-8, 0.0)
        assert fp["theta"] == pytest.approx(alpha, rel=1e-6) and fp["q"] == pytest.approx(alpha, rel=1e-6)
    fp = ridge_state_evolution(3.0, 1e-8, 0.0)
    assert fp["q"] == pytest.approx(1, rel=1e-6) and abs(fp["train_loss"]) < 1e-7
    sign = state_evolution("logistic", 2.0, lam=0.1)
    probit = state_evolution("perceptron_probit", 2.0, lam=0.1, Delta=1e-9)
    for k in ("q", "V", "theta", "classification_error"):
        assert probit[k] == pytest.approx(sign[k], rel=1e-7), k


def test_lasso_entropic_side_against_monte_carlo_free_closed_forms():
    """The erfc closed forms of the soft-threshold averages against direct quadrature over b."""
    from scipy import integrate

    from tests.oracles.lasso import soft_threshold_moments

    lam1, qhat, Vhat, thetahat = 0.7, 0.4, 1.3, 0.9
    s = math.sqrt(qhat + thetahat ** 2)
    m = soft_threshold_moments(lam1, qhat, Vhat, thetahat)

    def avg(fn):
        return 2 * integrate.quad(lambda b: fn(b) * npdf(b / s) / s, lam1, np.inf, epsabs=1e-15, epsrel=1e-13)[0]

    assert m["psi_w"] == pytest.approx(avg(lambda b: (b - lam1) ** 2) / (2 * Vhat), rel=1e-12)
    assert m["V"] == pytest.approx(avg(lambda b: 1.0) / Vhat, rel=1e-12)
    assert m["mean_abs_w"] == pytest.approx(avg(lambda b: b - lam1) / Vhat, rel=1e-12)
    assert 1 - m["zero_fraction"] == pytest.approx(avg(lambda b: 1.0), rel=1e-12)


def test_state_evolution_rejects_unknown_parameters():
    with pytest.raises(ValueError, match="lam1"):
        state_evolution("logistic", 1.0, lam1=0.1)
    with pytest.raises(ValueError, match="model"):
        state_evolution("svm", 1.0)


def test_the_oracles_defaults_are_the_declarations():
    """The oracles answer to the declared models' names and defaults (derivations/<model>.py)."""
    from numerics.glm import parameters

    for model, defaults in PARAMETERS.items():
        assert parameters(model) == defaults, model


def test_classification_error_formula():
    assert classification_error(1.0, 1.0) == 0.0
    assert classification_error(2.0, 0.0) == pytest.approx(0.5)
    assert classification_error(1.0, 1.0 / math.sqrt(2), 0.0) == pytest.approx(0.25)


@pytest.mark.parametrize("model,alpha,lam", [("hinge", 5.0, 1e-3), ("logistic", 2.0, 0.1)])
def test_quadrature_against_an_independent_25_digit_route(model, alpha, lam):
    """mpmath (25 digits, ξ variable, prox root per node) agrees with the double-precision
    prox-parametrised quadrature; the map's residual times the fixed point's amplification
    ‖(I − J)⁻¹‖ bounds the oracle's error, which must be ≤ 1e-10 (measured: ≤ 1.4e-13)."""
    from tests.oracles.highprecision import accuracy_estimate

    fp = state_evolution(model, alpha, lam=lam)
    acc = accuracy_estimate(fp, model, lam, 0.0)
    assert acc["map_error"] < 1e-13
    assert acc["bound"] < 1e-10


@pytest.mark.slow
def test_reference_table_is_solved_to_its_stated_accuracy():
    """Every point of issue 13's grid: fixed-point residual ≤ 1e-12, ridge rows equal the
    random-matrix closed form to 1e-10, every classification point's certified error bound
    (25-digit map residual × amplification) ≤ 1e-10, and docs/reference/glm_references.md shows this very
    table (``python -m tests.oracles``). ~1 min."""
    from pathlib import Path

    from tests.oracles import reference_table
    from tests.oracles.__main__ import _markdown
    from tests.oracles.highprecision import accuracy_estimate

    rows = reference_table()
    doc = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "glm_references.md").read_text()
    assert _markdown(rows) in doc, "docs/reference/glm_references.md: regenerate the table with python -m tests.oracles"
    assert len(rows) == 4 * (3 * 4 + 4)
    for r in rows:
        assert r["residual"] < 1e-12, r
        for k in ("q", "V", "theta", "qhat", "Vhat", "thetahat", "phi", "eps_g"):
            assert math.isfinite(r[k])
        if r["model"] == "ridge":
            for k in ("q", "V", "theta"):
                assert r[k] == pytest.approx(r["closed_form"][k], rel=1e-10)
        if r["model"] in ("logistic", "hinge", "perceptron_probit"):
            loss = "logistic" if r["model"] == "perceptron_probit" else r["model"]
            acc = accuracy_estimate(r, loss, r["parameters"]["lam"], r["parameters"].get("Delta", 0.0))
            assert acc["bound"] < 1e-10, (r["model"], r["alpha"], r["parameters"], acc)

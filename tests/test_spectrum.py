"""The Gaussian covariate data law (replica.numeric.spectrum, replica.registry.spectral, ``replica solve --spectrum``).

Oracles: the isotropic generated modules (a spectrum with Omega = I is the same model), the ridge
learning curve written by hand from the resolvent of Omega (below), and finite-N empirical risk
minimisation with scikit-learn on x ~ N(0, diag(lambda)).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.optimize import brentq

from replica.errors import InvalidStateError, ParameterError
from replica.registry import load_module
from replica.numeric.solver import Solver
from replica.registry.spectral import gcm_module, mode_term
from replica.numeric.spectrum import Spectrum, power_law
from tests.test_edge_cases import cli, strict_json

RIDGE = {"lam": 0.1, "Delta": 0.25}


@pytest.fixture(scope="module")
def ridge():
    return load_module("ridge")


@pytest.fixture(scope="module")
def logistic():
    return load_module("logistic")


def ridge_oracle(spec: Spectrum, alpha: float, lam: float, Delta: float) -> dict[str, float]:
    """Well-specified ridge on the spectrum, by hand: with g_k = lambda_k, t_k = g_k theta_k,
    Vhat = thetahat = alpha / (1 + V) and V the root of V = <g / (lam + Vhat g)>; then theta and q
    from the resolvent sums (q's equation is linear in q); eps_g = (rho + Delta - 2 theta + q) / 2."""
    g, t, rho = spec.eigenvalues, spec.projections, spec.rho

    def V_eq(V):
        vh = alpha / (1 + V)
        return np.mean(g / (lam + vh * g)) - V

    V = brentq(V_eq, 1e-12, np.mean(g) / lam + 1.0, xtol=1e-15, rtol=1e-15)
    vh = alpha / (1 + V)
    R = lam + vh * g
    theta = np.mean(t * t * vh / R)
    a = np.mean(g * g / R ** 2)
    c = np.mean(g * t * t / R ** 2) * vh ** 2
    k = alpha / (1 + V) ** 2
    q = (a * k * (rho + Delta - 2 * theta) + c) / (1 - a * k)
    return {"V": V, "theta": theta, "q": q, "eps_g": (rho + Delta - 2 * theta + q) / 2}


def test_mode_term_is_the_l2_resolvent_term():
    """The sympy-derived per-mode term of ridge is 1/2 (g qhat + t^2 thetahat^2) / (lam + g Vhat)."""
    import sympy as sp

    from derivations.ridge import model
    from replica.registry.spectral import GAMMA, PROJECTION

    term = mode_term(model)
    qh, Vh, th = term.conjugates  # ridge's data have no mean: no m family
    lam = next(s for s in term.parameters if s.name == "lam")
    hand = (GAMMA * qh + PROJECTION ** 2 * th ** 2) / (2 * (lam + GAMMA * Vh))
    assert sp.simplify(term.potential - hand) == 0


@pytest.mark.parametrize("name, params, alpha", [("ridge", RIDGE, 1.5), ("logistic", {"lam": 0.1}, 2.0)])
def test_identity_spectrum_is_the_isotropic_model(name, params, alpha):
    """Omega = I and |theta|^2 = N: the spectral sums are the isotropic closed form, to round-off."""
    iso = load_module(name)
    N = 37
    spec = Spectrum.well_specified(np.ones(N), np.ones(N))
    a = Solver(iso, params, tol=1e-12).solve(alpha)
    b = Solver(gcm_module(iso, spec), params, tol=1e-12).solve(alpha)
    for k in ("q_1", "V_1", "theta_1"):
        assert b.order[k] == pytest.approx(a.order[k], rel=1e-10, abs=1e-13), k
    assert b.eps_g == pytest.approx(a.eps_g, rel=1e-10)
    assert b.psi_w == pytest.approx(a.psi_w, rel=1e-10)


def test_rotated_matrices_are_the_diagonal_spectrum(ridge):
    """Omega = O diag(lambda) O^T with theta rotated alike: the same modes, the same fixed point."""
    spec = power_law(60, 1.2, 0.3)
    rng = np.random.default_rng(1)
    O, _ = np.linalg.qr(rng.standard_normal((60, 60)))
    rot = Spectrum.from_matrices(O @ np.diag(spec.eigenvalues) @ O.T, O @ spec.teacher)
    assert rot.rho == pytest.approx(1.0, rel=1e-12)
    a = Solver(gcm_module(ridge, spec), RIDGE, tol=1e-12).solve(1.5)
    b = Solver(gcm_module(ridge, rot), RIDGE, tol=1e-12).solve(1.5)
    for k in ("q_1", "V_1", "theta_1"):
        assert b.order[k] == pytest.approx(a.order[k], rel=1e-9), k


@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_ridge_on_a_power_law_against_the_resolvent(ridge, alpha):
    """Ridge on a power-law spectrum (N = 400) against the hand-written resolvent equations; the
    energetic average of a square loss is exact on Gauss-Hermite nodes, so only the fixed point's
    tolerance separates the two."""
    spec = power_law(400, 1.5, 0.5)
    fp = Solver(gcm_module(ridge, spec), RIDGE, tol=1e-13).solve(alpha)
    want = ridge_oracle(spec, alpha, **RIDGE)
    got = {"V": fp.order["V_1"], "theta": fp.order["theta_1"], "q": fp.order["q_1"], "eps_g": fp.eps_g}
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-9), k


def test_misspecified_ridge_against_the_resolvent(ridge):
    """Psi != Omega (a teacher seeing other features): t = Phi^T theta and rho = theta^T Psi theta / N
    enter the resolvent equations unchanged."""
    rng = np.random.default_rng(3)
    N = 80
    g = np.sort(rng.uniform(0.2, 3.0, N))
    Omega = np.diag(g)
    Phi = np.diag(np.sqrt(g))                       # cross-covariance of a teacher seeing sqrt-features
    Psi = np.eye(N) * 2.0
    theta = rng.standard_normal(N)
    theta /= math.sqrt(theta @ Psi @ theta / N)    # rho = 1
    spec = Spectrum.from_matrices(Omega, theta, psi=Psi, phi=Phi)
    assert spec.teacher is None
    fp = Solver(gcm_module(ridge, spec), RIDGE, tol=1e-13).solve(1.2)
    want = ridge_oracle(spec, 1.2, **RIDGE)
    assert fp.order["theta_1"] == pytest.approx(want["theta"], rel=1e-9)
    assert fp.order["q_1"] == pytest.approx(want["q"], rel=1e-9)


def test_a_hundred_thousand_modes(ridge):
    """N = 1e5 eigenvalues: the sums are vectorised (one pass over the modes per map evaluation)."""
    spec = power_law(100_000, 1.3, 0.4)
    fp = Solver(gcm_module(ridge, spec), RIDGE, tol=1e-12).solve(1.0)
    assert fp.order["V_1"] == pytest.approx(ridge_oracle(spec, 1.0, **RIDGE)["V"], rel=1e-9)


def test_rho_must_match_the_model(ridge):
    spec = Spectrum.well_specified(np.ones(10), 2 * np.ones(10))
    with pytest.raises(ParameterError, match="spectrum: .*rho = .*= 4.*rescale theta by 0.5"):
        gcm_module(ridge, spec)


def test_nonfinite_sums_are_an_invalid_state(ridge):
    """lam + gamma Vhat <= 0 for some mode: an InvalidStateError, never a NaN state."""
    mod = gcm_module(ridge, power_law(20, 1.0))
    p = np.asarray(mod.DEFAULTS, dtype=float)
    p[list(mod.PARAMETERS).index("lam")] = 0.0
    with pytest.raises(InvalidStateError, match="entropic_update"):
        mod.entropic_update(np.zeros(3), p)


# ------------------------------------------------------------------ the command line
def _write(tmp_path, text, name="spec.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, why", [
    ("k,lambda\n1,1\n", "missing column.*theta"),
    ("k,lambda,theta\n1,-1,1\n2,1,1\n", "lambda must be >= 0"),
    ("k,lambda,theta\n1,nan,1\n", "not finite"),
    ("k,lambda,theta\n1,1,abc\n", "not a number"),
    ("k,lambda,theta\n", "empty"),
    ("", "missing column"),
])
def test_bad_spectrum_file_is_one_line_exit_2(tmp_path, text, why):
    rc, out, err = cli("solve", "ridge", "--alpha", "1", "--spectrum", _write(tmp_path, text), "--json")
    assert rc == 2 and out == ""
    line = err.strip()
    assert "\n" not in line and "spectrum" in line and "Traceback" not in line
    import re
    assert re.search(why, line), line


def test_missing_spectrum_file_is_one_line_exit_2(tmp_path):
    rc, out, err = cli("solve", "ridge", "--alpha", "1", "--spectrum", tmp_path / "nope.csv")
    assert rc == 2 and "spectrum" in err and "\n" not in err.strip()


def test_solve_json_contract(tmp_path):
    """``replica solve logistic --spectrum`` reports q, theta, V, eps_g and classification_error,
    each with its error bar, as strict JSON."""
    path = tmp_path / "pl.csv"
    power_law(200, 1.5, 0.5).write_csv(path)
    rc, out, err = cli("solve", "logistic", "--alpha", "2", "--param", "lam=0.1", "--spectrum", path, "--json")
    assert rc == 0, err
    d = strict_json(out)
    for k in ("q", "theta", "V", "eps_g", "classification_error"):
        assert isinstance(d[k], float) and math.isfinite(d[k]), k
        bar = d["errors"][k]
        assert isinstance(bar, float) and 0 <= bar < 1e-5, (k, bar)
    assert d["converged"] and json.loads(out)["parameters"] == {"lam": 0.1}
    assert d["replicon"] is None and "isotropic" in d["replicon_reason"]


# ------------------------------------------------------------------ finite N
def _erm(kind: str, spec: Spectrum, alpha: float, lam: float, Delta: float, seed: int) -> dict[str, float]:
    """One finite-N estimator with scikit-learn on x ~ N(0, diag(lambda)), labels from theta."""
    from sklearn.linear_model import LogisticRegression, Ridge

    rng = np.random.default_rng(seed)
    g, th = spec.eigenvalues, spec.teacher
    N = spec.N
    n = int(round(alpha * N))
    X = rng.standard_normal((n, N)) * np.sqrt(g) / math.sqrt(N)   # rows x / sqrt(N)
    nu = X @ th
    if kind == "ridge":
        y = nu + math.sqrt(Delta) * rng.standard_normal(n)
        # sklearn: |y - X w|^2 + a |w|^2 = 2 [sum (y - h)^2 / 2 + a/2 |w|^2]: a = lam
        w = Ridge(alpha=lam, fit_intercept=False, solver="cholesky").fit(X, y).coef_
    else:
        y = np.sign(nu)
        # sklearn: 1/2 |w|^2 + C sum log(1 + e^{-y h}) = ours / lam: C = 1 / lam
        w = LogisticRegression(C=1 / lam, fit_intercept=False, solver="newton-cholesky", tol=1e-10,
                               max_iter=200).fit(X, y).coef_.ravel()
    q = float(np.mean(g * w * w))
    theta = float(np.mean(g * th * w))
    out = {"q": q, "theta": theta}
    if kind == "ridge":
        out["eps_g"] = (q - 2 * theta + spec.rho + Delta) / 2           # exact given w (Gaussian fields)
    else:
        out["classification_error"] = math.acos(theta / math.sqrt(q * spec.rho)) / math.pi
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind, alpha", [("ridge", 0.7), ("ridge", 2.0), ("logistic", 0.7), ("logistic", 2.0)])
def test_finite_n_erm_against_theory(kind, alpha):
    """N = 400 modes, 20 seeds: the theory within 3 standard errors of the seed mean of
    scikit-learn's estimator (the finite-N bias, O(1/N), is below one standard error here)."""
    spec = power_law(400, 1.2, 0.4)
    mod = gcm_module(load_module(kind), spec)
    params = RIDGE if kind == "ridge" else {"lam": 0.1}
    fp = Solver(mod, params, tol=1e-12).solve(alpha)
    theory = {"q": fp.order["q_1"], "theta": fp.order["theta_1"], **fp.observables}
    runs = [_erm(kind, spec, alpha, params["lam"], params.get("Delta", 0.0), s) for s in range(20)]
    for k in runs[0]:
        v = np.array([r[k] for r in runs])
        se = v.std(ddof=1) / math.sqrt(len(v))
        assert abs(v.mean() - theory[k]) < 3 * se, (k, v.mean(), se, theory[k])


def test_cache_key_carries_the_spectrum(ridge):
    """Results cached under the module's source hash never mix two spectra (or the isotropic model)."""
    a = gcm_module(ridge, power_law(30, 1.0))
    b = gcm_module(ridge, power_law(30, 1.5))
    assert len({ridge.SOURCE_HASH, a.SOURCE_HASH, b.SOURCE_HASH}) == 3


@pytest.mark.slow
def test_replica_check_simulates_the_spectrum(tmp_path):
    """``replica check ridge --spectrum``: x ~ N(0, diag(lambda)) at d = N with the file's teacher; the
    simulated q, theta and eps_g agree with the theory (ridge: the exact solver, 4 seeds)."""
    path = tmp_path / "pl.csv"
    power_law(200, 1.2, 0.4).write_csv(path)
    rc, out, err = cli("check", "ridge", "--alpha", "1.5", "--spectrum", path, "--seeds", "4", "--n-test", "2000",
                       "--no-replicon", "--no-theory-bars", "--quiet", "--json")
    assert rc == 0, err
    res = strict_json(out)
    assert res["d"] == [200] and res["agrees"]
    assert set(res["quantities"]) >= {"q", "theta", "eps_g"}
    rc, out, err = cli("check", "ridge", "--alpha", "1.5", "--spectrum", path, "--d", "100,200", "--quiet")
    assert rc == 2 and err.strip().count("\n") == 0 and "d: a spectrum of 200 modes" in err


def test_spectral_problem_draws_the_declared_covariance():
    """The simulator's inputs have covariance diag(lambda) and its teacher is the spectrum's theta."""
    from numerics.structured import SpectralProblem
    from replica.registry import load_model

    spec = power_law(50, 1.0, 0.3)
    mod = gcm_module(load_module("ridge"), spec)
    inst = SpectralProblem(load_model("ridge"), mod, RIDGE, spec).instance(200.0, 50, seed=0)
    X = inst.X[:, 0, :]
    # 10^4 samples: the empirical variances within 5 standard errors sqrt(2/n) of lambda
    assert np.all(np.abs(X.var(axis=0) / spec.eigenvalues - 1) < 5 * math.sqrt(2 / X.shape[0]))
    np.testing.assert_array_equal(inst.Qstar[:, 0], spec.teacher)
    nu = X @ spec.teacher / math.sqrt(50)
    y = inst.teacher[0]
    np.testing.assert_allclose(y, nu)   # ridge: the teacher argument is h* itself (noise separate)


# ------------------------------------------------------------------ random features
def test_gaussian_equivalence_coefficients_by_quadrature():
    """relu: kappa0 = 1/sqrt(2 pi), kappa1 = 1/2, kappa*^2 = 1/2 - 1/(2 pi) - 1/4 (by hand); the
    quadrature's error estimate covers the difference."""
    from replica.numeric.spectrum import gaussian_equivalence

    ge = gaussian_equivalence(lambda g: max(g, 0.0))
    assert ge.error < 1e-12
    assert ge.kappa0 == pytest.approx(1 / math.sqrt(2 * math.pi), abs=1e-12)
    assert ge.kappa1 == pytest.approx(0.5, abs=1e-12)
    assert ge.kappa_star == pytest.approx(math.sqrt(0.25 - 1 / (2 * math.pi)), abs=1e-12)
    odd = gaussian_equivalence(math.tanh)
    assert abs(odd.kappa0) < 1e-13 and 0 < odd.kappa_star < odd.kappa1 < 1


@pytest.mark.parametrize("c", [0.25, 1.0])
def test_marchenko_pastur_quantiles_moments(c):
    """The quantiles' first two moments are the law's, E s = 1 and E s^2 = 1 + c, up to the
    O(1/n^2) of midpoint quantiles (n = 4000) and the CDF grid."""
    from replica.numeric.spectrum import marchenko_pastur_quantiles

    s = marchenko_pastur_quantiles(c, 4000)
    assert np.all(np.diff(s) >= 0) and s[0] >= (1 - math.sqrt(c)) ** 2 - 1e-12
    assert s.mean() == pytest.approx(1.0, abs=1e-5)
    assert (s * s).mean() == pytest.approx(1 + c, abs=1e-4)


@pytest.mark.slow
def test_random_features_ridge_against_erm():
    """Random features x = tanh(F z / sqrt(d)) at p = 150, d = 100, n = 200 with one F and teacher:
    the Gaussian-equivalent theory of that instance within 3 standard errors of the test error of
    scikit-learn's ridge on the true (non-Gaussian) features, 10 training sets."""
    from sklearn.linear_model import Ridge

    from replica.numeric.spectrum import gaussian_equivalence, random_features

    d, p, n, lam, Delta = 100, 150, 200, 0.1, 0.1
    rng = np.random.default_rng(0)
    F = rng.standard_normal((p, d))
    theta = rng.standard_normal(d)
    theta *= math.sqrt(d) / np.linalg.norm(theta)
    spec = random_features(gaussian_equivalence(math.tanh), p, d, F, theta)
    fp = Solver(gcm_module(load_module("ridge"), spec), {"lam": lam, "Delta": Delta}).solve(n / p)
    errs = []
    for s in range(10):
        r = np.random.default_rng(100 + s)
        Z, Zt = r.standard_normal((n, d)), r.standard_normal((20000, d))
        X, Xt = (np.tanh(A @ F.T / math.sqrt(d)) / math.sqrt(p) for A in (Z, Zt))
        y, yt = (A @ theta / math.sqrt(d) + math.sqrt(Delta) * r.standard_normal(len(A)) for A in (Z, Zt))
        w = Ridge(alpha=lam, fit_intercept=False, solver="cholesky").fit(X, y).coef_
        errs.append(0.5 * np.mean((yt - Xt @ w) ** 2))
    e = np.array(errs)
    se = e.std(ddof=1) / math.sqrt(len(e))
    assert abs(e.mean() - fp.eps_g) < 3 * se, (e.mean(), se, fp.eps_g)


def test_declared_activation_coefficients():
    """A sympy activation with a jump off the origin: sign(z - 1/3) has kappa0 = 1 - 2 Phi(1/3),
    kappa1 = 2 phi(1/3), kappa*^2 = 1 - kappa0^2 - kappa1^2 (by hand); the jump is found symbolically."""
    import sympy as sp
    from scipy.stats import norm

    from replica.registry.spectral import activation_coefficients

    z = sp.Symbol("z", real=True)
    ge = activation_coefficients(sp.sign(z - sp.Rational(1, 3)), z)
    k0, k1 = 1 - 2 * norm.cdf(1 / 3), 2 * norm.pdf(1 / 3)
    assert ge.kappa0 == pytest.approx(k0, abs=1e-12)
    assert ge.kappa1 == pytest.approx(k1, abs=1e-12)
    assert ge.kappa_star == pytest.approx(math.sqrt(1 - k0 ** 2 - k1 ** 2), abs=1e-12)
    with pytest.raises(ParameterError, match="activation"):
        activation_coefficients(sp.tanh(z * sp.Symbol("a")), z)


# ------------------------------------------------------------------ a separable penalty (LASSO)
LASSO = {"lam1": 0.1, "Delta": 0.25}


@pytest.fixture(scope="module")
def lasso():
    return load_module("lasso")


def _p(module, values):
    return np.array([float(values.get(n, d)) for n, d in zip(module.PARAMETERS, module.DEFAULTS)])


def test_identity_modes_average_to_the_isotropic_lasso(lasso):
    """Omega = I: one mode is the isotropic bracket with the teacher Gaussian tau held at t_k, so the
    per-mode terms averaged over t ~ N(0, 1) (60-point Gauss-Hermite; the xi-averaged term is analytic
    in t) are the isotropic entropic map and Psi_w at the isotropic fixed point, to round-off."""
    from replica.numeric.quadrature import hermite_1d
    from replica.numeric.spectrum import SpectralEnvelope

    solver = Solver(lasso, LASSO, tol=1e-12)
    fp = solver.solve(1.5)
    xhat = np.array([fp.conjugates[c] for c in lasso.CONJUGATES])
    t, wt = hermite_1d(60)
    spec = Spectrum(np.ones(t.size), t.copy(), 1.0, t.copy(), "Gauss-Hermite teacher")
    psi, grad = SpectralEnvelope(lasso, spec).mode_terms(xhat, _p(lasso, LASSO))
    x_modes = np.asarray(lasso.entropic_from_gradient(grad @ wt, _p(lasso, LASSO)))
    x_iso, psi_iso = solver.entropic(xhat)
    assert np.max(np.abs(x_modes - x_iso)) <= 1e-9 * np.max(np.abs(x_iso))
    assert psi @ wt == pytest.approx(psi_iso, rel=1e-9)
    assert fp.psi_w == pytest.approx(psi_iso, rel=1e-12)


def test_lasso_without_l1_is_the_l2_mode_term(lasso, ridge):
    """lam1 = 0: the per-mode envelope of the LASSO module is the sympy-derived l2 term of ridge at
    lam = 0, 1/2 (g qhat + t^2 thetahat^2) / (g Vhat), on a power law (gradient to 1e-11)."""
    spec = power_law(30, 1.3, 0.4)
    xhat = np.array([0.7, 1.3, 0.9])  # qhat, Vhat, thetahat
    a = gcm_module(lasso, spec).SPECTRAL_ENTROPIC.gradient(xhat, _p(lasso, {"lam1": 0.0}))
    b = gcm_module(ridge, spec).SPECTRAL_ENTROPIC.gradient(xhat, _p(ridge, {"lam": 0.0}))
    assert np.max(np.abs(a - b)) < 1e-11 * np.max(np.abs(b))


def lasso_mode_oracle(spec: Spectrum, xhat: dict[str, float], lam1: float) -> dict[str, float]:
    """The entropic map of LASSO on the spectrum, mode by mode with scipy's quad: w = soft(Z, lam1) /
    (g Vhat), Z = sqrt(g qhat) xi + thetahat t; q = <g E w^2>, V = <sqrt(g / qhat) E w xi>,
    theta = <t E w> (the envelope theorem on -E min_w [lam1 |w| + g Vhat w^2 / 2 - w Z])."""
    from scipy.integrate import quad

    qh, Vh, th = xhat["qhat_1"], xhat["Vhat_1"], xhat["thetahat_1"]
    out = {"q": 0.0, "V": 0.0, "theta": 0.0}
    dens = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    for g, t in zip(spec.eigenvalues, spec.projections):
        s, mu = math.sqrt(g * qh), th * t

        def w(x):
            z = mu + s * x
            return math.copysign(max(abs(z) - lam1, 0.0), z) / (g * Vh)

        cuts = sorted([(-lam1 - mu) / s, (lam1 - mu) / s])
        pieces = [(-math.inf, cuts[0]), (cuts[0], cuts[1]), (cuts[1], math.inf)]
        E = lambda f: sum(quad(lambda x: f(x) * dens(x), a, b, epsabs=1e-14, epsrel=1e-13)[0]  # noqa: E731
                          for a, b in pieces)
        out["q"] += g * E(lambda x: w(x) ** 2)
        out["V"] += math.sqrt(g / qh) * E(lambda x: w(x) * x)
        out["theta"] += t * E(w)
    return {k: v / spec.N for k, v in out.items()}


def test_lasso_on_a_power_law_against_the_mode_oracle(lasso):
    """The fixed point on 12 power-law modes: the conjugates are the square loss's by hand (Vhat =
    thetahat = alpha / (1 + V), qhat = alpha (rho + Delta - 2 theta + q) / (1 + V)^2), the order
    parameters the per-mode quad oracle's at those conjugates (quad's tolerance 1e-13: 1e-10)."""
    spec = power_law(12, 1.5, 0.5)
    alpha = 1.5
    fp = Solver(gcm_module(lasso, spec), LASSO, tol=1e-13).solve(alpha)
    o, c = fp.order, fp.conjugates
    q, V, theta, rho, D = o["q_1"], o["V_1"], o["theta_1"], spec.rho, LASSO["Delta"]
    assert c["Vhat_1"] == pytest.approx(alpha / (1 + V), rel=1e-10)
    assert c["thetahat_1"] == pytest.approx(alpha / (1 + V), rel=1e-10)
    assert c["qhat_1"] == pytest.approx(alpha * (rho + D - 2 * theta + q) / (1 + V) ** 2, rel=1e-10)
    hand = lasso_mode_oracle(spec, c, LASSO["lam1"])
    for k, name in (("q", "q_1"), ("V", "V_1"), ("theta", "theta_1")):
        assert o[name] == pytest.approx(hand[k], rel=1e-10), k
    assert fp.eps_g == pytest.approx((rho + D - 2 * theta + q) / 2, rel=1e-10)


def test_lasso_spectrum_rule_is_converged(lasso):
    """The per-mode rule against its refinement (panels halved, higher order): 1e-12 on the map."""
    from replica.numeric.spectrum import SpectralEnvelope

    spec = power_law(50, 1.2, 0.4)
    env = SpectralEnvelope(lasso, spec)
    fine = SpectralEnvelope(lasso, spec, env.plan.refined())
    xhat, p = np.array([0.3, 0.9, 0.9]), _p(lasso, LASSO)  # qhat, Vhat, thetahat
    assert np.max(np.abs(env.update(xhat, p) - fine.update(xhat, p))) < 1e-12
    blocks = SpectralEnvelope(lasso, spec)
    blocks.BLOCK = 7  # modes summed in blocks: the same terms
    assert np.array_equal(blocks.mode_terms(xhat, p)[1], env.mode_terms(xhat, p)[1])


def test_lasso_json_on_a_spectrum_file(tmp_path):
    """``replica solve lasso --spectrum FILE --param lam1=L --param Delta=D --json``: q, theta, V, eps_g
    with bars, strict JSON; the replicon refused with its reason."""
    path = tmp_path / "pl.csv"
    power_law(200, 1.2, 0.4).write_csv(path)
    rc, out, err = cli("solve", "lasso", "--alpha", "1.5", "--param", "lam1=0.1", "--param", "Delta=0.25",
                       "--spectrum", path, "--json")
    assert rc == 0, err
    d = strict_json(out)
    for k in ("q", "theta", "V", "eps_g"):
        assert isinstance(d[k], float) and math.isfinite(d[k]), k
        assert 0 <= d["errors"][k] < 1e-5, k
    assert d["converged"] and d["replicon"] is None and "spectrum" in d["replicon_reason"]


def test_lasso_refused_where_the_penalty_is_not_diagonal_in_the_modes(lasso, tmp_path, monkeypatch):
    """Omega not diagonal (rotated matrices, random features): l1 is not separable in the modes; one
    line naming spectrum from the API, exit 2 from the command line."""
    spec = power_law(20, 1.2, 0.3)
    O, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((20, 20)))
    rot = Spectrum.from_matrices(O @ np.diag(spec.eigenvalues) @ O.T, O @ spec.teacher)
    with pytest.raises(ParameterError, match="spectrum: .*not diagonal in the modes") as exc:
        gcm_module(lasso, rot)
    assert "\n" not in str(exc.value)
    # a diagonal Omega given as a matrix keeps its canonical basis
    assert Spectrum.from_matrices(np.diag(spec.eigenvalues), spec.teacher).canonical
    path = tmp_path / "pl.csv"
    spec.write_csv(path)
    monkeypatch.setattr(Spectrum, "from_csv", classmethod(lambda cls, p: rot))
    rc, out, err = cli("solve", "lasso", "--alpha", "1", "--spectrum", path, "--json")
    assert rc == 2 and out == "" and "\n" not in err.strip() and "not diagonal in the modes" in err


def _lasso_erm(spec: Spectrum, alpha: float, lam1: float, Delta: float, seed: int) -> dict[str, float]:
    """scikit-learn's Lasso minimises |y - X w|^2 / (2n) + a |w|_1; with rows x / sqrt(N) that is
    ours, sum (y - h)^2 / 2 + lam1 |w|_1, divided by n: a = lam1 / n."""
    from sklearn.linear_model import Lasso

    rng = np.random.default_rng(seed)
    g, th, N = spec.eigenvalues, spec.teacher, spec.N
    n = int(round(alpha * N))
    X = rng.standard_normal((n, N)) * np.sqrt(g) / math.sqrt(N)
    y = X @ th + math.sqrt(Delta) * rng.standard_normal(n)
    w = Lasso(alpha=lam1 / n, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y).coef_
    q, theta = float(np.mean(g * w * w)), float(np.mean(g * th * w))
    return {"q": q, "theta": theta, "eps_g": (q - 2 * theta + spec.rho + Delta) / 2}


@pytest.mark.slow
def test_lasso_finite_n_erm_against_theory(lasso):
    """N = 400 power-law modes, alpha = 1.5, 80 seeds (about 10 s): the theory within 3 standard errors
    of the seed mean of scikit-learn's Lasso (measured: q, theta, eps_g within 0.25 standard errors;
    the first 20 seeds alone sit 2.2 below on theta, a fluctuation that 80 seeds average out)."""
    spec = power_law(400, 1.2, 0.4)
    fp = Solver(gcm_module(lasso, spec), LASSO, tol=1e-12).solve(1.5)
    theory = {"q": fp.order["q_1"], "theta": fp.order["theta_1"], "eps_g": fp.eps_g}
    runs = [_lasso_erm(spec, 1.5, LASSO["lam1"], LASSO["Delta"], s) for s in range(80)]
    for k in runs[0]:
        v = np.array([r[k] for r in runs])
        se = v.std(ddof=1) / math.sqrt(len(v))
        assert abs(v.mean() - theory[k]) < 3 * se, (k, v.mean(), se, theory[k])

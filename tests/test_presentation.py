"""The exported equations (replica.symbolic.presentation, the sympy objects the LaTeX export prints) against the
published forms, typed here by hand, and against the derivation the solver runs.

GLMs: Aubin, Krzakala, Lu & Zdeborova (2020), "Generalization error in high-dimensional perceptrons:
approaching Bayes error with convex optimization", in their notation (m, q, Sigma; mhat, qhat, Sigmahat;
rho = 1): ridge exactly (sympy), the l1 soft threshold in erfc form exactly, logistic and hinge by
quadrature. Tied attention: the paper's Result 4.2 (entropic side and the factors of the energetic side,
docs/explanation/theory.md §4–§6), with the energetic side's prox form checked against finite
differences of the energetic potential written out by hand.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from scipy import integrate, optimize, special

from replica import Derivation
from replica.symbolic.presentation import DW, KAPPA, MU, W, LabelMean, Mean, Presentation
from replica.registry import load_model


@pytest.fixture(scope="module")
def pres():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = Presentation(Derivation(load_model(name)))
        return cache[name]
    return get


def _by_name(eqs):
    return {e.lhs.name: e.rhs for e in eqs}


# ---------------------------------------------------------------- ridge, LASSO: exact
def test_ridge_closed_forms_are_aubins(pres):
    """Square loss: Sigmahat = alpha/(1+Sigma), mhat = alpha/(1+Sigma), qhat = alpha(rho + Delta - 2m + q)/(1+Sigma)^2
    (Aubin et al. 2020, ridge; their m, Sigma are our theta, V; m = 0 on the centred branch)."""
    p = pres("ridge")
    a, q, V, th, Delta = sp.symbols("alpha q_1 V_1 theta_1 Delta", real=True)
    got = {k: v.subs({sp.Symbol("m_1", real=True): 0}) for k, v in _by_name(p.closed.energetic).items()}
    aubin = {"Vhat_1": a / (1 + V), "thetahat_1": a / (1 + V), "qhat_1": a * (1 + Delta - 2 * th + q) / (1 + V) ** 2}
    for k, v in aubin.items():
        assert sp.simplify(got[k] - v) == 0, k
    lam, qh, Vh, thh = sp.symbols("lam qhat_1 Vhat_1 thetahat_1", real=True)
    ent = _by_name(p.closed.entropic)
    for k, v in {"V_1": 1 / (lam + Vh), "theta_1": thh / (lam + Vh), "q_1": (thh ** 2 + qh) / (lam + Vh) ** 2}.items():
        assert sp.simplify(ent[k] - v) == 0, k


def test_ridge_closed_forms_equal_the_derivations_integrands(pres):
    """The closed forms against the derivation's envelope-theorem integrands averaged on a Gauss-Hermite
    rule exact for their degree (polynomials of degree <= 4 in three Gaussians: 4 nodes suffice)."""
    p = pres("ridge")
    d = p.d
    vals = {"q_1": 0.7, "V_1": 0.9, "m_1": 0.0, "theta_1": 0.5, "Delta": 0.25, "alpha": 1.7}
    x, w = np.polynomial.hermite_e.hermegauss(6)
    w = w / w.sum()
    X, E, Z = np.meshgrid(x, x, x, indexing="ij")
    Wt = (w[:, None, None] * w[None, :, None] * w[None, None, :])
    env = d.energetic_potential
    h = d.model.h[0, 0]
    subs = {s: vals[s.name] for s in d.order_symbols + list(d.model.parameter_symbols) if s.name in vals}
    hhat = p.closed.prox.subs(env.intermediates).subs(d.model.hstar[0, 0], env.intermediates[d.model.hstar[0, 0]])
    for eq in d.saddle_point.energetic:
        rhs = eq.rhs
        for ph, integrand in d.saddle_point.energetic_gradient.items():
            if ph in rhs.free_symbols:
                f = integrand.subs(h, hhat).subs(env.intermediates).subs(subs)
                fn = sp.lambdify(env.gaussians, f, "numpy")
                val = -np.sum(Wt * np.broadcast_to(fn(X, E, Z), X.shape))
                rhs = rhs.subs(ph, val)
        got = float(rhs.subs(d.alpha, vals["alpha"]).subs(subs))
        closed = float(_by_name(p.closed.energetic)[eq.lhs.name].subs(d.alpha, vals["alpha"]).subs(subs))
        assert got == pytest.approx(closed, rel=1e-12, abs=1e-13), eq.lhs


def test_lasso_soft_threshold_in_erfc_form(pres):
    """l1: V = erfc(lam1/(sqrt 2 s))/Vhat, theta = thetahat erfc(.)/Vhat,
    q = [(s^2 + lam1^2) erfc(.) - lam1 s sqrt(2/pi) exp(-lam1^2/2s^2)]/Vhat^2, s^2 = qhat + thetahat^2,
    typed by hand, and against the derivation's integrands averaged by adaptive quadrature across the kinks."""
    p = pres("lasso")
    ent = _by_name(p.closed.entropic)
    lam, Vh, thh, qh = sp.symbols("lam1 Vhat_1 thetahat_1 qhat_1", real=True)
    s = sp.Symbol("s_threshold", positive=True)
    e = sp.erfc(lam / (sp.sqrt(2) * s))
    hand = {"V_1": e / Vh, "theta_1": thh * e / Vh,
            "q_1": ((s ** 2 + lam ** 2) * e - lam * s * sp.sqrt(2 / sp.pi) * sp.exp(-lam ** 2 / (2 * s ** 2))) / Vh ** 2}
    for k, v in hand.items():
        assert sp.simplify(ent[k] - v) == 0, k
    assert sp.simplify(p.closed.threshold_variance - (qh + thh ** 2)) == 0


@pytest.mark.slow
def test_lasso_erfc_form_equals_the_derivations_integrands(pres):
    """The erfc forms against the derivation: x = -K^-T dPsi_w/dxhat with dPsi_w/dxhat = -E[dB/dxhat at the
    soft threshold], averaged over (xi, tau) by adaptive 2-d quadrature to 1e-12 (15 s: slow)."""
    p = pres("lasso")
    ent = _by_name(p.closed.entropic)
    lam, Vh, thh, qh = sp.symbols("lam1 Vhat_1 thetahat_1 qhat_1", real=True)
    s = sp.Symbol("s_threshold", positive=True)
    d = p.d
    went = d.entropic_potential
    vals = {qh: 0.8, Vh: 1.3, thh: 0.6, lam: 0.4, sp.Symbol("mhat_1", real=True): 0.0}
    wv = went.variables[0]
    (zs, zlaw), = went.intermediates.items()
    prox = went.argmin[0]
    s2 = float(p.closed.threshold_variance.subs(vals))
    for eq in d.saddle_point.entropic:
        rhs = eq.rhs
        for ph, integrand in d.saddle_point.entropic_gradient.items():
            if ph not in rhs.free_symbols:
                continue
            f = sp.lambdify(went.gaussians, integrand.subs(wv, prox).subs(zs, zlaw).subs(vals), "numpy")
            # integrate over (xi, tau): rotate to the field b and its orthogonal complement
            g = lambda a, b: float(f(a, b)) * np.exp(-(a * a + b * b) / 2) / (2 * np.pi)
            val, err = integrate.dblquad(g, -9, 9, -9, 9, epsabs=1e-12)
            rhs = rhs.subs(ph, -val)
        closed = float(ent[eq.lhs.name].subs(vals).subs(s, np.sqrt(s2)))
        assert float(rhs.subs(vals)) == pytest.approx(closed, rel=1e-7, abs=1e-9), eq.lhs


# ---------------------------------------------------------------- logistic, hinge: Aubin's Z_out form by quadrature
def _aubin(name, prox, q, th, V, alpha, delta=0.0):
    """Aubin et al.'s energetic equations (rho = 1): Z*(y, w, v) = H(-y w / sqrt(v)) (probit: v + Delta),
    f_out = (prox - omega)/Sigma; mhat = alpha E_xi sum_y d_w Z* f_out, qhat = alpha E Z* f_out^2,
    Sigmahat = -alpha E Z* d_omega f_out (the last by a central difference of f_out, step 1e-5)."""
    eta = th / np.sqrt(q)
    v = 1 - th ** 2 / q + delta

    def per_xi(xi, which):
        tot = 0.0
        for y in (-1.0, 1.0):
            w = eta * xi
            Z = 0.5 * special.erfc(-y * w / np.sqrt(2 * v))
            dZ = y * np.exp(-w * w / (2 * v)) / np.sqrt(2 * np.pi * v)
            om = np.sqrt(q) * xi
            f = (prox(om, y, V) - om) / V
            if which == "qhat":
                tot += Z * f * f
            elif which == "thetahat":
                tot += dZ * f
            else:
                hstep = 1e-5
                df = ((prox(om + hstep, y, V) - om - hstep) - (prox(om - hstep, y, V) - om + hstep)) / (2 * hstep * V)
                tot -= Z * df
        return tot * np.exp(-xi * xi / 2) / np.sqrt(2 * np.pi)
    return {k: alpha * integrate.quad(per_xi, -12, 12, args=(k,), limit=400, epsabs=1e-13, points=[-1, 0, 1])[0]
            for k in ("qhat", "thetahat", "Vhat")}


def _logistic_prox(om, y, V):
    return optimize.brentq(lambda h: h - om - V * y / (1 + np.exp(y * h)), om - 10 * V - 10, om + 10 * V + 10,
                           xtol=1e-15)


def _hinge_prox(om, y, V):
    if y * om >= 1:
        return om
    if y * om < 1 - V:
        return om + V * y
    return y


def _exported(p, prox, vals, alpha):
    """The exported field-form equations (LabelMean integrands) evaluated by adaptive quadrature in xi."""
    ff = p.field_form
    t = ff.tokens[0]
    Z, dZ, mu, kappa = p.channel_law
    y = p.m.channel.label
    base = {s: vals[s.name] for s in [t.q, t.V, t.m, t.theta] + list(p.m.parameter_symbols)
            if isinstance(s, sp.Symbol) and s.name in vals}  # m is 0 (no family) without a data mean
    out = {}
    eqs = {e.lhs: e.rhs for e in ff.equations}
    stein = {e.lhs: e.rhs for e in ff.stein}
    df_closed = p.closed.dfdomega
    for key, rhs in (("qhat", eqs[t.qhat]), ("thetahat", eqs[t.thetahat]), ("Vhat_stein", stein[t.Vhat]),
                     ("Vhat", eqs[t.Vhat])):
        mean = next(iter(rhs.atoms(LabelMean)))
        integrand = mean.args[0]
        if df_closed is not None:
            integrand = integrand.subs(t.dfdomega, df_closed)
        integrand = integrand.subs({W: Z, DW: dZ}).subs({MU: mu, KAPPA: kappa}).subs(base)
        fn = sp.lambdify([t.xi, y, t.f, t.hhat, t.omega], integrand, "numpy")

        def per_xi(xi):
            om = np.sqrt(vals["q_1"]) * xi
            tot = 0.0
            for yy in (-1.0, 1.0):
                hh = prox(om, yy, vals["V_1"])
                tot += fn(xi, yy, (hh - om) / vals["V_1"], hh, om)
            return tot * np.exp(-xi * xi / 2) / np.sqrt(2 * np.pi)
        val = integrate.quad(per_xi, -12, 12, limit=400, epsabs=1e-13, points=[-1, 0, 1])[0]
        out[key] = float((rhs.subs(mean, val)).subs(base).subs(p.d.alpha, alpha).subs(t.thetahat, out.get("thetahat", 0)))
    return out


@pytest.mark.parametrize("name, prox", [("logistic", _logistic_prox), ("hinge", _hinge_prox)])
def test_classifier_field_form_is_aubins(pres, name, prox):
    """qhat, thetahat (Aubin's mhat) and Vhat (Aubin's Sigmahat, both the Stein form and the first-order form)
    of the export equal Aubin et al.'s, at a state off the fixed point. Adaptive quadrature to 1e-13 absolute
    with the hinge's kinks inside the panels' reach; a central difference of step 1e-5 in Aubin's d_omega f_out
    (error ~1e-10 for the logistic, exact for the piecewise-linear hinge away from the kinks, which have measure
    zero): tolerance 1e-7."""
    p = pres(name)
    vals = {"q_1": 0.6, "V_1": 0.8, "m_1": 0.0, "theta_1": 0.45, "lam": 0.1}
    got = _exported(p, prox, vals, alpha=1.5)
    ref = _aubin(name, prox, vals["q_1"], vals["theta_1"], vals["V_1"], 1.5)
    assert got["qhat"] == pytest.approx(ref["qhat"], rel=1e-7)
    assert got["thetahat"] == pytest.approx(ref["thetahat"], rel=1e-7)
    assert got["Vhat_stein"] == pytest.approx(ref["Vhat"], rel=1e-6)
    assert got["Vhat"] == pytest.approx(ref["Vhat"], rel=1e-6)


def test_hinge_prox_is_the_minimiser(pres):
    """The exported three-piece prox minimises F = (h - omega)^2/(2V) + max(0, 1 - y h) (grid search)."""
    p = pres("hinge")
    t = p.field_form.tokens[0]
    y = p.m.channel.label
    fn = sp.lambdify([t.omega, y, t.V], p.closed.prox, "numpy")
    grid = np.linspace(-6, 6, 240001)
    for om in (-2.0, -0.3, 0.2, 0.7, 0.95, 1.4):
        for yy in (-1.0, 1.0):
            for V in (0.3, 1.7):
                F = (grid - om) ** 2 / (2 * V) + np.maximum(0, 1 - yy * grid)
                assert float(fn(om, yy, V)) == pytest.approx(grid[np.argmin(F)], abs=1e-4)


# ---------------------------------------------------------------- tied attention: Result 4.2
def test_tied_attention_entropic_side_is_result_4_2(pres):
    """docs/explanation/theory.md §6 (the paper's Result 4.2, l2, Sigma = sigma^2 I): the exported entropic
    equations."""
    p = pres("attention_tied")
    qh, Vh, mh, thh, sigma, lam = sp.symbols("qhat Vhat mhat thetahat sigma lam", real=True)
    den = lam + sigma ** 2 * Vh
    hand = {"q": sigma ** 2 * (sigma ** 2 * qh + mh ** 2 + sigma ** 4 * thh ** 2) / den ** 2, "V": sigma ** 2 / den,
            "m": mh / den, "theta": sigma ** 4 * thh / den}
    ent = _by_name(p.closed.entropic)
    for k, v in hand.items():
        assert sp.simplify(ent[k] - v) == 0, k


def test_tied_attention_aggregation_is_result_4_2(pres):
    """docs/explanation/theory.md §6: Vhat = Vhat_1 + Vhat_2, qhat = qhat_1 + qhat_2, mhat = mhat_1 - mhat_2,
    thetahat = thetahat_1 + thetahat_2."""
    ff = pres("attention_tied").field_form
    t1, t2 = ff.tokens
    agg = _by_name(ff.aggregation)
    assert agg["qhat"] == t1.qhat + t2.qhat and agg["Vhat"] == t1.Vhat + t2.Vhat
    assert agg["mhat"] == t1.mhat - t2.mhat and agg["thetahat"] == t1.thetahat + t2.thetahat


@pytest.mark.slow
def test_tied_attention_prox_form_against_result_4_2(pres):
    """The exported per-token equations, aggregated, against Result 4.2's Vhat_l = -2 alpha dPsi_y/dq_l,
    qhat_l = 2 alpha dPsi_y/dV_l, mhat_l = alpha dPsi_y/dm_l, thetahat_l = alpha dPsi_y/dtheta_l, with
    Psi_y = -E min_h [sum_l (h_l - omega_l)^2/(2 V) + l(h, h*)] written out here and differentiated by central
    differences. At V = 0.05 the bracket is strongly convex (|l''| < 4 here), so the prox is unique and smooth
    and a product Gauss-Hermite rule converges spectrally: with 12 nodes per Gaussian the first-order Vhat
    still differs by 2e-6 (relative) from the difference quotient, with 20 nodes by < 1e-6 (the rule's error;
    the quotient's, step 3e-4, is ~1e-9: halving or tripling the step moves it by < 1e-8). ~100 s: slow."""
    p = pres("attention_tied")
    m = p.m
    vals = {"q": 0.3, "V": 0.05, "m": 0.2, "theta": 0.15}
    params = {s: m.defaults[s] for s in m.parameter_symbols}
    h = list(m.h)
    hs = list(m.hstar)
    loss = sp.lambdify(h + hs, m.loss.subs(params), "numpy")
    grad = sp.lambdify(h + hs, [sp.diff(m.loss.subs(params), v) for v in h], "numpy")
    hess = sp.lambdify(h + hs, sp.hessian(m.loss.subs(params), h), "numpy")
    x, w = np.polynomial.hermite_e.hermegauss(20)
    w = w / w.sum()
    G = np.meshgrid(x, x, x, x, indexing="ij")
    Wt = np.einsum("i,j,k,l->ijkl", w, w, w, w)
    xi1, xi2, e1, e2 = (g.ravel() for g in G)
    Wt = Wt.ravel()
    sig2 = float(params[sp.Symbol("sigma", real=True)]) ** 2

    def prox(q, V, mm, th):
        om = np.stack([mm + np.sqrt(q) * xi1, -mm + np.sqrt(q) * xi2])
        kap = sig2 - th ** 2 / q
        hst = np.stack([th / np.sqrt(q) * xi1 + np.sqrt(kap) * e1, th / np.sqrt(q) * xi2 + np.sqrt(kap) * e2])
        hh = om.copy()
        for _ in range(30):  # Newton on the strongly convex bracket
            g = (hh - om) / V + np.array(grad(*hh, *hst))
            H = np.array(hess(*hh, *hst), dtype=float)
            H = np.broadcast_to(H, (2, 2, hh.shape[1])).copy()
            H[0, 0] += 1 / V
            H[1, 1] += 1 / V
            det = H[0, 0] * H[1, 1] - H[0, 1] * H[1, 0]
            step = np.stack([H[1, 1] * g[0] - H[0, 1] * g[1], -H[1, 0] * g[0] + H[0, 0] * g[1]]) / det
            hh = hh - step
        return om, hst, hh

    def psi_y(q, V, mm, th):
        om, hst, hh = prox(q, V, mm, th)
        F = ((hh - om) ** 2).sum(0) / (2 * V) + loss(*hh, *hst)
        return -np.sum(Wt * F)

    alpha = 1.3
    base = (vals["q"], vals["V"], vals["m"], vals["theta"])
    step = 3e-4

    def d(i):
        up, dn = list(base), list(base)
        up[i] += step
        dn[i] -= step
        return (psi_y(*up) - psi_y(*dn)) / (2 * step)
    # the reduced derivatives sum the tokens' (docs/explanation/theory.md §6): Vhat = -2 alpha dPsi_y/dq, ...
    ref = {"Vhat": -2 * alpha * d(0), "qhat": 2 * alpha * d(1), "mhat": alpha * d(2), "thetahat": alpha * d(3)}
    om, hst, hh = prox(*base)
    ff = p.field_form
    sym = {s: vals[s.name] for s in p.d.order_symbols}
    num = {}
    for a, t in enumerate(ff.tokens):
        arrays = {t.f: (hh[a] - om[a]) / vals["V"], t.omega: om[a], t.hstar: hst[a]}
        for eq in ff.equations:
            if eq.lhs not in (t.qhat, t.mhat, t.thetahat, t.Vhat):
                continue
            rhs = eq.rhs.subs(params).subs(sym).subs(p.d.alpha, alpha)
            for mean in rhs.atoms(Mean):
                fn = sp.lambdify(list(arrays), mean.args[0], "numpy")
                rhs = rhs.subs(mean, float(np.sum(Wt * fn(*arrays.values()))))
            num[eq.lhs] = rhs
        num[t.Vhat] = float(num[t.Vhat].subs(t.thetahat, num[t.thetahat]))
    for eq in ff.aggregation:
        got = float(eq.rhs.subs(num))
        assert got == pytest.approx(ref[eq.lhs.name], rel=1e-6, abs=1e-8), eq.lhs


# ---------------------------------------------------------------- matrix models: the matrix form of the entropic side
@pytest.mark.slow
@pytest.mark.parametrize("name", ["attention_rank2", "attention_untied"])
def test_matrix_entropic_form_equals_the_derivation(name):
    """The export prints the entropic side of the matrix models (r = 2, untied h = (h^Q, h^K)) in matrix form,
    V_a = E[gamma_a G], q_a = E[gamma_a G (B + b b^T) G], m_a = E[pi_a G b], theta_a = E[gamma_a G b tau^T],
    G = (Lambda + A)^-1, A = sum gamma_a Vhat_a, B = sum gamma_a qhat_a, b = sum (pi_a mhat_a + gamma_a thetahat_a tau):
    with the paper's data (gamma_a = sigma^2, pi = (1, -1), tau ~ N(0, 1)) and the token reduction (aggregated
    conjugates) it must equal the derivation's entry-by-entry closed forms at random conjugates (exact
    arithmetic up to round-off: tolerance 1e-12)."""
    d = Derivation(load_model(name))
    m = d.model
    p = m.h.shape[1]
    params = {s: m.defaults[s] for s in m.parameter_symbols}
    s2 = float(params[sp.Symbol("sigma", real=True)]) ** 2
    Lam = np.diag([float(x.subs(params)) for x in m.regularizer.matrix(p).diagonal()])
    rng = np.random.default_rng(3)
    conj = {s.name: s for s in d.conjugate_symbols}

    def sym(stem):
        return np.array([[0.0] * p] * p) if False else np.array(
            [[vals[conj[f"{stem}_{min(i, j) + 1}{max(i, j) + 1}"]] for j in range(p)] for i in range(p)])
    for _ in range(3):
        vals = {}
        for stem in ("qhat", "Vhat"):
            X = rng.normal(size=(p, p))
            M = X @ X.T + p * np.eye(p)
            for i in range(p):
                for j in range(i, p):
                    vals[conj[f"{stem}_{i + 1}{j + 1}"]] = M[i, j]
        for stem in ("mhat", "thetahat"):
            for i in range(p):
                vals[conj[f"{stem}_{i + 1}"]] = rng.normal()
        Vh, qh = sym("Vhat"), sym("qhat")
        mh = np.array([vals[conj[f"mhat_{i + 1}"]] for i in range(p)])
        th = np.array([vals[conj[f"thetahat_{i + 1}"]] for i in range(p)])
        G = np.linalg.inv(Lam + s2 * Vh)
        Ebb = np.outer(mh, mh) + s2 ** 2 * np.outer(th, th)
        expect = {"V": s2 * G, "q": s2 * G @ (s2 * qh + Ebb) @ G, "m": G @ mh, "theta": s2 * G @ (s2 * th)}
        for eq in d.saddle_point.entropic:
            stem, _, idx = eq.lhs.name.partition("_")
            got = float(eq.rhs.subs(params).subs(vals))
            want = expect[stem][tuple(int(c) - 1 for c in idx)] if len(idx) == 2 else expect[stem][int(idx) - 1]
            assert got == pytest.approx(want, rel=1e-12, abs=1e-13), eq.lhs


# ---------------------------------------------------------------- the field form against the derivation
@pytest.mark.parametrize("name", ["ridge", "attention_tied"])
def test_qhat_and_mhat_integrands_are_the_derivations(pres, name):
    """Pointwise (symbolically): the derivation's qhat and mhat, written as alpha E[integrand] through
    K^-1 and the envelope theorem, have the integrands sum_a f_a^2 and sum_a c_a f_a of the exported form
    (c_a the token reduction's signs), once h_a = omega_a + V_a f_a."""
    p = pres(name)
    d = p.d
    ff = p.field_form
    K = d.coupling
    x = d.order_symbols
    grads = [d.saddle_point.energetic_gradient[d.gradient_placeholders[s]] for s in x]
    env = d.energetic_potential
    # the derivation's integrands are written in the Gaussians: h_a = omega_a(xi) + V_a f_a
    sub = {d.model.h[a, 0]: env.intermediates[t.omega] + t.V * t.f for a, t in enumerate(ff.tokens)}
    Kinv = K.inv()
    coeffs = d.model.reduction.coefficients if d.model.reduction is not None else {}
    for j, conj in enumerate(d.conjugate_symbols):
        fam = conj.name.split("hat")[0]
        if fam not in ("q", "m"):
            continue
        # xhat_j = -alpha sum_i Kinv_ji dPsi_y/dx_i, dPsi_y/dx_i = -E[dF/dx_i]: integrand sum_i Kinv_ji dF/dx_i
        integrand = sum(Kinv[j, i] * grads[i] for i in range(len(x)))
        integrand = sp.simplify(integrand.subs(sub))
        c = coeffs.get(fam, [1] * len(ff.tokens))
        want = sum((t.f ** 2 if fam == "q" else ci * t.f) for ci, t in zip(c, ff.tokens))
        assert sp.simplify(integrand - want) == 0, conj


@pytest.mark.parametrize("name, prox", [("logistic", _logistic_prox), ("hinge", _hinge_prox)])
def test_classifier_field_form_equals_the_derivation(pres, name, prox):
    """The exported Z_out-form conjugates against the derivation's own equations: xhat = -alpha K^-1 dPsi_y/dx
    with dPsi_y/dx = -E_xi sum_y [d_x P(y | xi) M + P d_x F at hhat] (the envelope theorem; M the envelope),
    both by adaptive quadrature in xi (1e-13 absolute): tolerance 1e-7."""
    p = pres(name)
    d = p.d
    m = p.m
    env = d.energetic_potential
    t = p.field_form.tokens[0]
    y = m.channel.label
    vals = {"q_1": 0.6, "V_1": 0.8, "m_1": 0.0, "theta_1": 0.45, "lam": 0.1}
    alpha = 1.5
    subs = {s: vals[s.name] for s in list(d.order_symbols) + list(m.parameter_symbols) if s.name in vals}
    h = m.h[0, 0]
    x = d.order_symbols
    (xi,) = env.gaussians
    omega_law = env.intermediates[t.omega]
    grads = {}
    for s in x:
        # the derivation's integrand at a label already carries the label law and its derivative:
        # d_x P(y | xi) M + P d_x F at hhat, summed over y
        dF = sp.lambdify([xi, y, h], d.saddle_point.energetic_gradient[d.gradient_placeholders[s]].subs(subs), "numpy")

        def per_xi(z, dF=dF):
            om = float(omega_law.subs(subs).subs(xi, z))
            tot = sum(float(dF(z, yy, prox(om, yy, vals["V_1"]))) for yy in (-1.0, 1.0))
            return tot * np.exp(-z * z / 2) / np.sqrt(2 * np.pi)
        grads[d.gradient_placeholders[s]] = -integrate.quad(per_xi, -12, 12, limit=400, epsabs=1e-13,
                                                            points=[-1, 0, 1])[0]
    derived = {eq.lhs.name: float(eq.rhs.subs(grads).subs(d.alpha, alpha)) for eq in d.saddle_point.energetic}
    got = _exported(p, prox, vals, alpha=alpha)
    assert got["qhat"] == pytest.approx(derived["qhat_1"], rel=1e-7)
    assert got["thetahat"] == pytest.approx(derived["thetahat_1"], rel=1e-7)
    assert got["Vhat"] == pytest.approx(derived["Vhat_1"], rel=1e-6)
    assert got["Vhat_stein"] == pytest.approx(derived["Vhat_1"], rel=1e-6)

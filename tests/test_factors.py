"""Every factor of a model, checked on its own (replica/symbolic/factors.py): its potential's
derivatives against finite differences, its exact prox against a numerical argmin, and its sampler
against its law.

Tolerances:

* central differences with step ``1e-5`` on smooth functions of O(1) size: truncation
  ``h^2 |f'''| / 6 ~ 1e-11``, round-off ``eps |f| / h ~ 1e-11``; checked to ``1e-7`` (relative to
  ``1 + |f'|``), which both leave far behind;
* a numerical argmin by Brent's method at ``xtol = 1e-12``: at a smooth minimum the objective is flat
  to second order, so the argmin is resolved to ``sqrt(eps |f| / f'') ~ 1e-8``; at a kink (hinge,
  soft thresholding) to ``xtol``; checked to ``1e-6``;
* a sampler's frequencies over ``n`` draws: binomial standard error ``sqrt(p (1 - p) / n)``; checked
  to 5 standard errors (a false alarm about once in 3.5 million per frequency);
* a Gaussian average of a label law by adaptive quadrature (scipy's ``quad``, its jumps given as
  break points, absolute tolerance ``1e-13``, the Gaussian cut at 12 standard deviations: a tail of
  ``1e-32``); checked to ``1e-10``.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import quad
from scipy.optimize import minimize_scalar

from replica.symbolic.channels import Argmax, LabelFlip, Probit, Sign, Thresholds
from replica.symbolic.data import SpectralAtom, TokenStatistics
from replica.symbolic.factors import Factor, model_factors
from replica.symbolic.losses import HingeLoss, LogisticLoss, Loss, SquareLoss
from replica.symbolic.regularizers import L1, L2, ElasticNet, SeparableRegularizer

FD_STEP, FD_TOL = 1e-5, 1e-7
ARGMIN_TOL = 1e-6
h, y, z, hs = sp.symbols("h y z hstar", real=True)
delta, lam, lam1, lam2 = sp.symbols("Delta lam lam1 lam2", real=True)
VALUES = {"Delta": 0.3, "lam": 0.7, "lam1": 0.4, "lam2": 0.25}


def central(f, x: float, step: float = FD_STEP) -> float:
    return (f(x + step) - f(x - step)) / (2 * step)


def argmin(f, lo: float = -30.0, hi: float = 30.0) -> float:
    return float(minimize_scalar(f, bracket=(lo, 0.0, hi), method="brent", options={"xtol": 1e-12}).x)


# --------------------------------------------------------------------------- losses
LOSSES = {
    "square": (SquareLoss(hs + sp.sqrt(delta) * z, h), {"hstar": 0.8, "z": -0.6}, None),
    "square, curvature 2": (SquareLoss(hs, h, curvature=2), {"hstar": -1.3}, None),
    "logistic": (LogisticLoss(y, h), {"y": 1.0}, None),
    "hinge": (HingeLoss(y, h), {"y": -1.0}, (-1.0,)),       # kink at h = 1/y
    "generic (Huber)": (Loss(sp.Piecewise(((h - hs) ** 2 / 2, sp.Abs(h - hs) <= 1),
                                          (sp.Abs(h - hs) - sp.Rational(1, 2), True))), {"hstar": 0.2}, (-0.8, 1.2)),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_potential_derivative(name):
    """``dl/dh`` from sympy equals central differences of ``l`` (away from kinks)."""
    loss, args, kinks = LOSSES[name]
    expr = loss.expression().subs({sp.Symbol(k, real=True): v for k, v in args.items()}).subs(
        {sp.Symbol(k, real=True): v for k, v in VALUES.items()})
    f = sp.lambdify(h, expr, "math")
    df = sp.lambdify(h, sp.diff(expr, h), "math")
    for x in (-2.3, -0.45, 0.3, 1.7):
        if kinks and min(abs(x - k) for k in kinks) < 1e-2:
            continue
        assert abs(central(f, x) - df(x)) <= FD_TOL * (1 + abs(df(x))), (name, x)
    assert loss.role == "loss" and isinstance(loss, Factor) and loss.latex() == sp.latex(loss.expression())


@pytest.mark.parametrize("name", [n for n, (loss, _, _) in LOSSES.items() if loss.has_prox])
def test_loss_prox_is_the_argmin(name):
    """``prox(omega, V, y)`` is the numerical argmin of ``l(h, y) + (h - omega)^2 / (2 V)``, on every
    piece of a piecewise loss (omega on both sides of the kink and on it)."""
    loss, args, _ = LOSSES[name]
    sub = {sp.Symbol(k, real=True): v for k, v in {**args, **VALUES}.items()}
    f = sp.lambdify(h, loss.expression().subs(sub), "math")
    label = float(sp.sympify(loss.target).subs(sub)) if isinstance(loss, SquareLoss) else args["y"]
    for omega in (-3.0, -1.2, -0.9, 0.0, 0.4, 2.5):
        for V in (0.05, 0.6, 3.0):
            got = float(loss.prox(omega, V, label, VALUES))
            want = argmin(lambda t: f(t) + (t - omega) ** 2 / (2 * V))
            assert abs(got - want) <= ARGMIN_TOL * (1 + abs(want)), (name, omega, V, got, want)


def test_loss_without_closed_form_says_so():
    assert not LogisticLoss(y, h).has_prox
    with pytest.raises(NotImplementedError):
        LogisticLoss(y, h).prox(0.0, 1.0, 1.0)


# --------------------------------------------------------------------------- penalties
w1, w2 = sp.symbols("w_1 w_2", real=True)
PENALTIES = {
    "l2": L2(lam),
    "l2 per component": L2([lam, lam2]),
    "l1": L1(lam1),
    "elastic net": ElasticNet(lam1, lam2),
    "separable (quadratic + quartic)": SeparableRegularizer(lam * w1 ** 2 / 2 + w1 ** 4 / 4, [w1]),
}


def _rows(name: str) -> int:
    return 2 if name == "l2 per component" else 1


@pytest.mark.parametrize("name", list(PENALTIES))
def test_penalty_potential_derivative(name):
    """``dr/dw_k`` from sympy equals central differences of ``r`` (away from the kink at 0)."""
    reg = PENALTIES[name]
    r = _rows(name)
    w = sp.Matrix(sp.symbols(f"u_1:{r + 1}", real=True))
    expr = reg.expression(w).subs({sp.Symbol(k, real=True): v for k, v in VALUES.items()})
    f = sp.lambdify(list(w), expr, "math")
    point = [0.7, -1.1][:r]
    for k in range(r):
        df = float(sp.diff(expr, w[k]).subs(dict(zip(w, point))))

        def along(t, k=k):
            p = list(point)
            p[k] = t
            return f(*p)

        assert abs(central(along, point[k]) - df) <= FD_TOL * (1 + abs(df)), (name, k)
    assert reg.role == "penalty" and reg.latex(w) == sp.latex(reg.expression(w))


@pytest.mark.parametrize("name", list(PENALTIES))
def test_penalty_prox_is_the_argmin(name):
    """``prox(z, t)`` is the numerical argmin of ``r(w) + |w - z|^2 / (2 t)`` (separable: coordinate by
    coordinate), and the Moreau envelope's derivative is ``(z - prox(z)) / t`` (envelope theorem)."""
    reg = PENALTIES[name]
    assert reg.has_prox
    r = _rows(name)
    w = sp.Matrix(sp.symbols(f"u_1:{r + 1}", real=True))
    expr = reg.expression(w).subs({sp.Symbol(k, real=True): v for k, v in VALUES.items()})
    parts = [sp.lambdify(w[k], expr.subs({w[j]: 0 for j in range(r) if j != k}), "math") for k in range(r)]
    for zz in (-2.0, -0.3, 0.1, 1.4):
        for t in (0.2, 1.0, 4.0):
            Z = np.full(r, zz) * np.array([1.0, -0.5][:r])
            got = reg.prox(Z[None, :], t, VALUES)[0]
            for k in range(r):
                want = argmin(lambda v, k=k: parts[k](v) + (v - Z[k]) ** 2 / (2 * t))
                assert abs(got[k] - want) <= ARGMIN_TOL * (1 + abs(want)), (name, zz, t, k, got, want)

            def envelope(c, k=0):
                Zc = Z.copy()
                Zc[k] = c
                wp = reg.prox(Zc[None, :], t, VALUES)[0]
                return float(sum(parts[j](wp[j]) for j in range(r)) + np.sum((wp - Zc) ** 2) / (2 * t))

            assert abs(central(envelope, Z[0]) - (Z[0] - got[0]) / t) <= 1e-6 * (1 + abs(Z[0] / t)), (name, zz, t)


def test_penalty_prox_batches_rows():
    """The prox of a weight matrix is the prox of each row (the last axis), with ``t`` broadcasting."""
    rng = np.random.default_rng(0)
    W = rng.standard_normal((7, 2))
    reg = L2([lam, lam2])
    out = reg.prox(W, 0.5, VALUES)
    assert np.allclose(out, np.stack([reg.prox(row, 0.5, VALUES) for row in W]), rtol=0, atol=0)
    assert np.allclose(out[:, 0], W[:, 0] / (1 + 0.5 * VALUES["lam"]), rtol=1e-15)


# --------------------------------------------------------------------------- channels
u1, u2, u3 = sp.symbols("u_1 u_2 u_3", real=True)
CHANNELS = {
    "sign": (Sign(u1), {}),
    "probit": (Probit(u1, delta), {"Delta": 0.3}),
    "label flip": (LabelFlip(Sign(u1), sp.Symbol("p", real=True)), {"p": 0.15}),
    "thresholds": (Thresholds(u1, thresholds=(-0.5, 0.8), delta=delta), {"Delta": 0.2}),
    "argmax of three": (Argmax([u1, u2, u3]), {}),
}


def _likelihoods(ch, params):
    """``Z(y | mu, C)`` at every label value, as numpy functions of ``mu`` at a fixed covariance."""
    K = len(ch.forms)
    mu = sp.symbols(f"mu_1:{K + 1}", real=True)
    C = sp.Matrix(K, K, lambda i, j: sp.Rational(6, 10) if i == j else sp.Rational(1, 10) * (i + j))
    sub = {s: params[s.name] for s in ch.parameters()}
    lab = ch.label
    funcs = [sp.lambdify(mu, ch.likelihood(lab, list(mu), C).subs(lab, v).subs(sub), "mpmath") for v in ch.values]
    grads = [[sp.lambdify(mu, sp.diff(ch.likelihood(lab, list(mu), C).subs(lab, v).subs(sub), m), "mpmath")
              for m in mu] for v in ch.values]
    return mu, np.array(C.tolist(), dtype=float), funcs, grads


@pytest.mark.parametrize("name", list(CHANNELS))
def test_channel_potential_derivative_and_law(name):
    """``dZ/dmu`` from sympy equals central differences of ``Z``; ``Z(y | mu, C)`` is the Gaussian
    average of the law the sampler draws from, ``E_{u ~ N(mu, C)} P(y | u)`` (adaptive quadrature for one
    form; for three, Monte Carlo with 2e5 points and a 5-standard-error check), and
    sums to one over the labels."""
    ch, params = CHANNELS[name]
    mu, C, funcs, grads = _likelihoods(ch, params)
    m0 = [0.35, -0.2, 0.1][:len(mu)]
    vals = [float(f(*m0)) for f in funcs]
    assert abs(sum(vals) - 1) <= 1e-12
    for f, g in zip(funcs, grads):
        for k in range(len(mu)):
            def along(t, k=k):
                p = list(m0)
                p[k] = t
                return float(f(*p))

            dk = float(g[k](*m0))
            assert abs(central(along, m0[k]) - dk) <= FD_TOL * (1 + abs(dk)), (name, k)
    if len(mu) == 1:   # adaptive quadrature with the law's jumps (0, the thresholds) as break points
        sd = math.sqrt(C[0, 0])
        P = [quad(lambda t, k=k: ch.probabilities(np.array([[t]]), params)[k, 0] * math.exp(-((t - m0[0]) / sd) ** 2 / 2)
                  / (sd * math.sqrt(2 * math.pi)), m0[0] - 12 * sd, m0[0] + 12 * sd, points=[-0.5, 0.0, 0.8],
                  epsabs=1e-13, limit=200)[0] for k in range(len(ch.values))]
        assert np.allclose(P, vals, rtol=0, atol=1e-10), (P, vals)
    else:
        rng = np.random.default_rng(3)
        n = 200_000
        u = (np.array(m0)[:, None] + np.linalg.cholesky(C) @ rng.standard_normal((len(mu), n)))
        P = ch.probabilities(u, params)
        se = P.std(axis=1) / math.sqrt(n)
        assert np.all(np.abs(P.mean(axis=1) - vals) <= 5 * se + 1e-12), (P.mean(axis=1), vals)
    assert ch.role == "channel" and ch.latex()


@pytest.mark.parametrize("name", list(CHANNELS))
def test_channel_sampler_follows_its_law(name):
    """Labels drawn by ``sample`` at fixed forms ``u`` have the frequencies ``P(y | u)`` (5 binomial
    standard errors over 100 000 draws)."""
    ch, params = CHANNELS[name]
    n = 100_000
    u0 = np.array([0.4, -0.3, 0.2][:len(ch.forms)])
    u = np.repeat(u0[:, None], n, axis=1)
    labels = ch.sample(u, np.random.default_rng(11), params)
    p = ch.probabilities(u0[:, None], params)[:, 0]
    for k, v in enumerate(ch.values):
        freq = float(np.mean(labels == v))
        assert abs(freq - p[k]) <= 5 * math.sqrt(p[k] * (1 - p[k]) / n) + 1e-12, (name, v, freq, p[k])


# --------------------------------------------------------------------------- data law
def test_data_law_sampler_has_the_declared_moments():
    """Tokens drawn at dimension ``d`` have the law's covariances (eigenvalue ``gamma`` of each
    coordinate's atom, ``rho_bar`` their weighted mean), its encodings' projections, and a token
    cluster's label law."""
    g1, g2 = sp.Rational(1, 4), sp.Integer(1)
    law = TokenStatistics([SpectralAtom(sp.Rational(3, 4), (g1, g2), (1, -1)),
                           SpectralAtom(sp.Rational(1, 4), (g2, g1), (0, 2))])
    d, n = 400, 4000
    gamma, P = law.coordinates(d)
    assert gamma.shape == (2, d) and np.isclose(np.mean(gamma[0] == 0.25), 0.75)
    assert np.allclose(np.mean(gamma, axis=1), [float(law.rho_bar(0)), float(law.rho_bar(1))], rtol=1e-12)
    first = gamma[0] == 0.25                         # the coordinates of the first atom
    assert np.allclose(P * math.sqrt(d), np.where(first, [[1], [-1]], [[0], [2]]), rtol=1e-15)
    rng = np.random.default_rng(5)
    slot = law.sample_slots(n, rng)
    X = law.sample_tokens(gamma, slot, rng)
    var = np.mean(X ** 2, axis=0)                    # per token and coordinate, n draws each
    assert np.all(np.abs(var - gamma) <= 5 * gamma * math.sqrt(2 / n))
    mix = TokenStatistics.mixture([[1, 2]], {(0,): sp.Rational(3, 10), (1,): sp.Rational(7, 10)})
    slots = mix.sample_slots(100_000, np.random.default_rng(2))
    assert abs(np.mean(slots[:, 0] == 1) - 0.7) <= 5 * math.sqrt(0.21 / 100_000)
    cols = mix.label_columns(slots[:5])
    assert len(cols) == 2 and np.all(cols[0] + cols[1] == 1)
    assert law.role == "data law" and law.latex().startswith(r"\nu = ")
    sigma = sp.Symbol("sigma", positive=True)
    assert TokenStatistics.isotropic(2, sigma ** 2, positional=(1, -sigma)).parameters() == {sigma}


def test_a_model_is_a_composition_of_factors():
    """A declared model lists its factors by role; a bare loss expression becomes the generic loss."""
    from replica.registry import load_model

    parts = model_factors(load_model("logistic"))
    assert set(parts) == {"loss", "penalty", "data law", "channel", "prior"}
    assert isinstance(parts["loss"], LogisticLoss) and isinstance(parts["penalty"], L2)
    assert all(isinstance(f, Factor) for f in parts.values())
    generic = model_factors(load_model("softmax_argmax3"))["loss"]
    assert type(generic) is Loss and generic.expression() == load_model("softmax_argmax3").loss


@pytest.mark.parametrize("arg,given,message", [
    ("loss", L1(lam1), "loss: L1 is a penalty factor, not a loss"),
    ("regularizer", SquareLoss(hs, h), "regularizer: SquareLoss is a loss factor, not a penalty"),
    ("data", L2(lam), "data: L2 is a penalty factor, not a data law"),
])
def test_a_factor_in_another_roles_place_is_one_line(arg, given, message):
    """A factor given as the argument of another role is refused naming the argument, before the model
    reads it (not a sympy error from deep inside)."""
    from replica import Model
    from replica.errors import DeclarationError

    kwargs = dict(h=[h], hstar=[hs], loss=SquareLoss(hs, h), data=TokenStatistics.isotropic(1, 1),
                  regularizer=L2(lam), parameters={lam: 0.1, lam1: 0.1})
    kwargs[arg] = given
    with pytest.raises(DeclarationError) as err:
        Model(name="misplaced", **kwargs)
    assert str(err.value) == message


@pytest.mark.parametrize("expr,label,kind", [
    (sp.Rational(1, 2) * (hs + sp.sqrt(delta) * z - h) ** 2, None, SquareLoss),
    ((h - hs) ** 2, None, SquareLoss),                        # curvature 2
    (sp.log(1 + sp.exp(-y * h)), y, LogisticLoss),
    (sp.Max(0, 1 - y * h), y, HingeLoss),
    (h ** 2 / 2 + hs, None, Loss),                            # not a square of (target - h)
    ((h - hs) ** 4 / 4, None, Loss),
    (sp.log(1 + sp.exp(-y * h)), None, Loss),                 # no channel's label
])
def test_a_bare_loss_expression_is_the_factor_it_is(expr, label, kind):
    """A loss written as a bare expression is recognised, exactly (sympy), as the factor it is -- so a
    user's GLM reaches the simulator's exact solvers -- keeping the expression as written."""
    from replica.symbolic.losses import as_loss

    f = as_loss(expr, [h], label)
    assert type(f) is kind and f.expression() == expr
    if kind is SquareLoss:
        assert sp.simplify(f.curvature / 2 * (f.target - h) ** 2 - expr) == 0

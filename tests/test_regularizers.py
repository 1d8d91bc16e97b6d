"""General separable regularizers through the entropic Moreau envelope (issue 8, item 4)."""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from replica import Derivation, Domain, Model, parameter
from replica.codegen import write_module
from replica.symbolic.regularizers import L1, ElasticNet, SeparableRegularizer
from replica.registry import _import_path
from replica.interface.generated_model import as_model
from replica.numeric.solver import Solver


def test_sympy_finds_soft_thresholding():
    z, t = sp.symbols("z t", real=True)
    lam = sp.Symbol("lam", positive=True)
    prox = sp.lambdify([z, t, lam], L1(lam).scalar_prox(z, t))
    for zv in (-2.0, -0.3, 0.0, 0.05, 1.7):
        expect = np.sign(zv) * max(abs(zv) - 0.4 * 0.5, 0.0)   # soft threshold at lam * t
        assert prox(zv, 0.5, 0.4) == pytest.approx(expect)


def test_smooth_regularizer_prox_is_the_stationary_point():
    w, z, t = sp.symbols("w z t", real=True)
    reg = SeparableRegularizer(sp.Rational(3, 2) * w ** 2, [w])
    assert sp.simplify(reg.scalar_prox(z, t) - z / (1 + 3 * t)) == 0


@pytest.fixture(scope="module")
def ridge_elastic_net(tmp_path_factory):
    """Ridge regression with an elastic-net penalty, generated into a temporary directory."""
    from derivations.ridge import delta, h, hs, model as ridge, noise

    lam1, lam2 = parameter("lam1", r"\lambda_1"), parameter("lam2", r"\lambda_2")
    model = Model(name="ridge_elastic_net", description="ridge with elastic net", h=h, hstar=hs,
                  loss=ridge.loss, noise=[noise], data=ridge.data, regularizer=ElasticNet(lam1, lam2),
                  parameters={delta: 0.25, lam1: 0.0, lam2: 0.1},
                  domains={lam1: Domain(0, None), lam2: Domain(0, None)}, branches={"centered": ("m",)})
    path = write_module(Derivation(model), tmp_path_factory.mktemp("gen") / "ridge_elastic_net.py")
    return as_model(_import_path(path))


@pytest.mark.parametrize("alpha,lam,delta", [(0.5, 0.1, 0.25), (2.0, 0.01, 0.5)])
def test_elastic_net_without_l1_equals_l2_exactly(ridge, ridge_elastic_net, alpha, lam, delta):
    """lam1 = 0: the prox is linear, Gauss-Hermite is exact on the quadratic integrand."""
    en = Solver(ridge_elastic_net, {"lam1": 0.0, "lam2": lam, "Delta": delta}, branch="centered",
                tol=1e-11).solve(alpha)
    l2 = Solver(ridge, {"lam": lam, "Delta": delta}, branch="centered", tol=1e-11).solve(alpha)
    for key in ("q_1", "V_1", "theta_1"):
        assert en.order[key] == pytest.approx(l2.order[key], rel=1e-9)
    assert en.eps_g == pytest.approx(l2.eps_g, rel=1e-9)
    assert en.phi == pytest.approx(l2.phi, rel=1e-9)
    assert en.psi_w == pytest.approx(l2.psi_w, rel=1e-9)


def test_l1_weight_to_zero_recovers_unregularized_limit(ridge_elastic_net):
    """alpha = 2 > 1: unregularized least squares has eps_g = (Delta / (alpha - 1) + Delta) / 2.

    The l1 solution approaches it linearly in lam1 (the threshold shifts every weight by
    ~lam1 / Vhat), so the error must shrink ~10x per decade of lam1 and be < 1e-3 at 1e-4.
    """
    delta, alpha = 0.25, 2.0
    exact = 0.5 * (delta / (alpha - 1) + delta)
    errs = []
    for lam1 in (1e-2, 1e-3, 1e-4):
        fp = Solver(ridge_elastic_net, {"lam1": lam1, "lam2": 0.0, "Delta": delta}, branch="centered").solve(alpha)
        errs.append(abs(fp.eps_g - exact))
    assert errs[0] > errs[1] > errs[2]
    assert errs[1] / errs[0] < 0.2 and errs[2] / errs[1] < 0.2
    assert errs[2] < 1e-3 * exact


def test_entropic_envelope_gradient_by_finite_differences(ridge_elastic_net):
    """dPsi_w/dxhat (envelope theorem) vs central differences of Psi_w at fixed nodes.

    The l1 integrand has kinks, but at fixed nodes Psi_w is a finite sum of C^1 functions of
    xhat (a Moreau envelope is C^1), so the quotient converges like step^2; step 1e-6 and
    the closed-form prox give agreement to ~1e-7 relative.
    """
    s = Solver(ridge_elastic_net, {"lam1": 0.05, "lam2": 0.02, "Delta": 0.25}, branch="centered")
    xhat = np.array([0.6, 0.9, 0.7])   # qhat, Vhat, thetahat (no data mean: no m family)
    mod = ridge_elastic_net
    # the default entropic rule (aligned with the prox's kinks), built at xhat and then held fixed
    nodes, weights = s.entropic_nodes_weights(xhat, lambda z: mod.entropic_argmin(z, xhat, s.p))

    def psi_w(xh):
        w = mod.entropic_argmin(nodes, xh, s.p)
        return -float(mod.entropic_bracket(w, nodes, xh, s.p) @ weights)

    w = mod.entropic_argmin(nodes, xhat, s.p)
    grad = -(mod.entropic_parameter_gradient(w, nodes, xhat, s.p) @ weights)
    for i in range(3):
        e = np.zeros(3)
        e[i] = 1e-6
        fd = (psi_w(xhat + e) - psi_w(xhat - e)) / 2e-6
        assert grad[i] == pytest.approx(fd, rel=1e-6, abs=1e-10)


def test_attention_elastic_net_without_l1_is_the_tied_model():
    from replica.numeric.quadrature import gauss_hermite
    from replica.registry import load_module

    rule = dict(rule=gauss_hermite(4, 8), test_rule=gauss_hermite(4, 12))
    en = Solver(load_module("attention_elastic_net"), {"lam1": 0.0, "lam2": 0.01}, branch="semantic",
                **rule).solve(2.0)
    tied = Solver(load_module("attention"), {"lam": 0.01}, branch="semantic", **rule).solve(2.0, x0=en.x)
    assert en.order["theta"] == pytest.approx(tied.order["theta"], rel=1e-8)
    assert en.phi == pytest.approx(tied.phi, rel=1e-8)

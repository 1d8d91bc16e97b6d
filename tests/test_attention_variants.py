"""The attention variants (derivations/attention_untied, _rank2, _L3, linear_attention):
consistency with the tied model, exact identities of their saddle points, and theory vs simulator.

Fast tests use coarse quadrature rules, explicit starting points near the fixed points (the
generic start of the solver is far from them in 6 dimensions) and small simulations; their
tolerances come from measured spreads (see each docstring). ``@pytest.mark.slow`` tests use the
rules and sizes of the report (docs/how-to/extensions.md).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from replica.numeric.integrators import QuadratureIntegrator
from replica.numeric.quadrature import QuadratureRule, gauss_hermite
from replica.registry import load_module
from replica.numeric.solver import Solver


def _embedded_rule(order: int) -> QuadratureRule:
    """Tensor GH of ``order`` in the tied model's 4 Gaussians ``(xi_1, xi_2, eta_1, eta_2)`` times a
    3-point GH rule in the two key Gaussians of the untied model (``xi_1_2, xi_2_2``)."""
    g4, g1 = gauss_hermite(4, order), gauss_hermite(1, 3)
    I, J, K = (a.ravel() for a in np.meshgrid(np.arange(g4.size), np.arange(3), np.arange(3), indexing="ij"))
    nodes = np.empty((6, I.size))
    nodes[[0, 2, 4, 5]] = g4.nodes[:, I]          # untied order: xi_1_1, xi_1_2, xi_2_1, xi_2_2, eta_1, eta_2
    nodes[1], nodes[3] = g1.nodes[0, J], g1.nodes[0, K]
    return QuadratureRule(nodes, g4.weights[I] * g1.weights[J] * g1.weights[K], "embedded", order)


# ------------------------------------------------------------------ untied vs tied
TIED_STATES = [(0.11, 12.0, 0.0, 0.15), (0.03, 15.0, 0.2, 0.0), (0.08, 10.0, 0.1, 0.12)]


def _tied_average(xt):
    tied = load_module("attention_tied")
    return QuadratureIntegrator(gauss_hermite(4, 5), backend="numpy").average(tied, np.array(xt), np.array(tied.DEFAULTS))


@pytest.mark.parametrize("xt", TIED_STATES)
def test_untied_energetic_potential_reduces_to_tied_on_the_diagonal(xt):
    """Order-parameter embedding of the tied model in the untied one (energetic side).

    A tied state ``(q, V, m, theta)`` maps to the untied state with ``K`` a copy of ``Q``:
    ``q_u = q 11^T + eps e_2 e_2^T``, ``V_u = V 11^T + eps e_2 e_2^T``, ``m_u = m (1, 1)``,
    ``theta_u = theta (1, 1)`` (``eps > 0`` keeps it admissible). Then ``omega^K = omega^Q`` up to
    ``sqrt(eps) xi^K``, ``h*`` has the tied law, and the stiff ``V_u^{-1}`` forces ``h^K = h^Q`` in
    the proximal step, so ``Psi_y^untied -> Psi_y^tied`` and, by the chain rule, the sums of the
    untied gradients over each family -> the tied gradients, with an error ``O(eps / q)``
    (measured: relative 1e-3, 1e-4, 3e-5 on ``Psi_y`` and 3e-3, 3e-4, 3e-5 on the gradients for
    ``eps = 1e-3, 1e-4, 1e-5``). Both generated modules, one Gaussian rule (the tied rule times
    3 nodes in the key directions: the limit holds node by node, so a coarse rule suffices), same
    parameters (``Psi_y`` does not depend on ``lambda``).
    """
    unt = load_module("attention_untied")
    q, V, m, th = xt
    eps = 1e-5
    xu = np.array([q, q, q + eps, V, V, V + eps, m, m, th, th])
    au = QuadratureIntegrator(_embedded_rule(5), backend="numpy").average(unt, xu, np.array(unt.DEFAULTS))
    at = _tied_average(xt)
    chain = np.array([au.grad[unt.FAMILIES[f]].sum() for f in ("q", "V", "m", "theta")])
    tol = 10 * eps / q
    assert au.psi_y == pytest.approx(at.psi_y, rel=tol)
    np.testing.assert_allclose(chain, at.grad, rtol=tol, atol=tol * np.abs(at.grad).max())


@pytest.mark.parametrize("xt", TIED_STATES)
def test_rank2_energetic_potential_reduces_to_tied_when_the_second_column_vanishes(xt):
    """Embedding of the tied rank-1 model in the rank-2 one: ``q = diag(q, eps)``,
    ``V = diag(V, eps)``, ``m = (m, 0)``, ``theta = (theta, 0)``. The second column's fields are
    pinned to ``omega_2 = O(sqrt(eps))`` by the stiff ``V_22``, its contribution to ``h h^T`` is
    ``O(eps)``, so ``Psi_y`` and its first-column gradients tend to the tied ones with an
    ``O(eps / q)`` error (measured 7e-3, 7e-4, 5e-5 relative for ``eps = 1e-3, 1e-4, 1e-5``)."""
    r2 = load_module("attention_rank2")
    q, V, m, th = xt
    eps = 1e-5
    xr = np.array([q, 0.0, eps, V, 0.0, eps, m, 0.0, th, 0.0])
    ar = QuadratureIntegrator(_embedded_rule(5), backend="numpy").average(r2, xr, np.array(r2.DEFAULTS))
    at = _tied_average(xt)
    first = np.array([ar.grad[r2.FAMILIES[f][0]] for f in ("q", "V", "m", "theta")])
    tol = 10 * eps / q
    assert ar.psi_y == pytest.approx(at.psi_y, rel=tol)
    np.testing.assert_allclose(first, at.grad, rtol=tol, atol=tol * np.abs(at.grad).max())


def test_untied_with_key_pinned_to_query_is_the_tied_model(tmp_path):
    """``K = Q`` in the untied declaration gives the tied model, saddle point and fixed point.

    ``attention_untied.build(pin_key=True)`` substitutes ``h^K := h^Q`` in ``S`` and keeps the
    penalty restricted to ``K = Q``: ``lambda_Q/2 |Q|^2 + lambda_K/2 |Q|^2``. That is the tied ERM
    with ``lambda = lambda_Q + lambda_K``; the toolkit must derive the same equations (symbolically
    identical after ``lambda -> lambda_Q + lambda_K`` and ``h -> h^Q``) and the generated solvers
    the same fixed points. (The *unconstrained* untied model has other fixed points: its
    stationarity in ``K`` is a separate equation, see
    test_untied_energetic_potential_reduces_to_tied_on_the_diagonal for the embedding of states.)
    """
    from derivations import attention_tied, attention_untied
    from replica import Derivation
    from replica.codegen import write_module
    from replica.registry import _import_path
    from replica.interface.generated_model import as_model

    dt = Derivation(attention_tied.build())
    du = Derivation(attention_untied.build(pin_key=True, name="untied_pinned"))
    lam, lam_Q, lam_K = (sp.Symbol(n, real=True) for n in ("lam", "lam_Q", "lam_K"))
    rename = dict(zip(dt.model.h, du.model.h))
    rename[lam] = lam_Q + lam_K
    assert dt.order_symbols == du.order_symbols and dt.conjugate_symbols == du.conjugate_symbols
    for et, eu in zip(dt.saddle_point.entropic, du.saddle_point.entropic):
        assert et.lhs == eu.lhs and sp.simplify(et.rhs.subs(rename) - eu.rhs) == 0
    for et, eu in zip(dt.saddle_point.energetic, du.saddle_point.energetic):
        assert et.lhs == eu.lhs and sp.simplify(et.rhs - eu.rhs) == 0
    gt, gu = dt.saddle_point.energetic_gradient, du.saddle_point.energetic_gradient
    assert gt.keys() == gu.keys()
    for k in gt:
        assert sp.simplify(gt[k].subs(rename) - gu[k]) == 0
    assert sp.simplify(dt.energetic_potential.full_bracket.subs(rename) - du.energetic_potential.full_bracket) == 0

    mt = load_module("attention_tied")
    mu = as_model(_import_path(write_module(du, tmp_path / "untied_pinned.py")))
    rule = gauss_hermite(4, 6)  # the identity holds for any rule
    for branch, alpha, x0 in (("semantic", 2.0, [0.11, 12.0, 0.0, 0.15]), ("positional", 0.5, [0.03, 15.0, 0.2, 0.0])):
        ft = Solver(mt, {"lam": 0.02}, branch, rule=rule, backend="numpy").solve(alpha, x0)
        fu = Solver(mu, {"lam_Q": 0.012, "lam_K": 0.008}, branch, rule=rule, backend="numpy").solve(alpha, x0)
        np.testing.assert_allclose(fu.x, ft.x, rtol=1e-7, atol=1e-10)
        assert fu.phi == pytest.approx(ft.phi, rel=1e-7)


@pytest.mark.parametrize("branch, alpha, x0", [
    ("semantic", 2.0, dict(q_11=0.1, q_12=0.075, q_22=0.06, V_11=12, V_12=2, V_22=25, m_1=0, m_2=0,
                           theta_1=0.14, theta_2=0.1)),
    ("positional", 1.0, dict(q_11=0.03, q_12=0.02, q_22=0.03, V_11=12, V_12=0, V_22=25, m_1=0.2, m_2=0.2,
                             theta_1=0, theta_2=0)),
])
def test_untied_depends_on_the_penalties_only_through_their_product(branch, alpha, x0):
    """Exact gauge symmetry of untied attention: ``Q -> c Q``, ``K -> K / c`` leaves ``S`` unchanged and
    maps the penalty ``(lambda_Q, lambda_K)`` to ``(c^2 lambda_Q, lambda_K / c^2)``. In the equations
    ``D = diag(c, 1/c)`` acts as ``q -> D q D``, ``V -> D V D``, ``m -> D m``, ``theta -> D theta``;
    the energetic integrand is invariant node by node (the Cholesky factor of ``D q D`` is ``D C``)
    and ``Psi_w`` is covariant, so for any quadrature rule the fixed point at ``(0.02, 0.005)`` is
    the image of the one at ``(0.01, 0.01)`` with ``c^2 = 1/2``: same ``Phi``, ``eps_g``,
    ``q_12``, ``V_12``, ``theta_1 theta_2``, ``m_1 m_2``, and ``lambda_Q q_11 = lambda_K q_22``
    (the balance ``lambda_Q |Q|^2 = lambda_K |K|^2`` of every stationary point)."""
    mod = load_module("attention_untied")
    rule = gauss_hermite(6, 3)  # exact for any rule: a coarse one keeps the test fast
    a = Solver(mod, {"lam_Q": 0.01, "lam_K": 0.01}, branch, rule=rule, backend="numpy").solve(alpha, x0)
    b = Solver(mod, {"lam_Q": 0.02, "lam_K": 0.005}, branch, rule=rule, backend="numpy").solve(alpha, x0)
    oa, ob = a.order, b.order
    c2 = 0.5
    assert 0.02 * ob["q_11"] == pytest.approx(0.005 * ob["q_22"], rel=1e-6)
    assert ob["q_11"] == pytest.approx(c2 * oa["q_11"], rel=1e-6)
    assert ob["q_22"] == pytest.approx(oa["q_22"] / c2, rel=1e-6)
    for k in ("q_12", "V_12"):
        assert ob[k] == pytest.approx(oa[k], rel=1e-5)
    fam = "theta" if branch == "semantic" else "m"
    assert ob[f"{fam}_1"] * ob[f"{fam}_2"] == pytest.approx(oa[f"{fam}_1"] * oa[f"{fam}_2"], rel=1e-5)
    assert ob[f"{fam}_1"] == pytest.approx(math.sqrt(c2) * oa[f"{fam}_1"], rel=1e-5)
    assert b.phi == pytest.approx(a.phi, rel=1e-7)
    assert b.eps_g == pytest.approx(a.eps_g, rel=1e-7)


# ------------------------------------------------------------------ rank 2
@pytest.mark.parametrize("face, state", [
    # column 1 semantic, column 2 positional (GD from Q = [Q*, noise] goes there, paper Fig. 11)
    ("dual", dict(q_11=0.08, q_12=0.0, q_22=0.0175, V_11=15, V_12=0.0, V_22=14.4, m_1=0.0, m_2=0.21,
                  theta_1=0.13, theta_2=0.0)),
    # column 2 carries neither the teacher nor the encodings
    ("semantic, rotated to theta_2 = 0", dict(q_11=0.08, q_12=0.0, q_22=0.02, V_11=15, V_12=0.0, V_22=20,
                                               m_1=0.0, m_2=0.0, theta_1=0.13, theta_2=0.0)),
])
def test_rank2_map_preserves_the_faces_fixed_by_its_reflections(face, state):
    """``S(h) = softmax(h h^T)`` is invariant under ``h -> h R`` with ``R = diag(1, -1)`` (and, the target
    being even, under ``h* -> -h*``). The fixed sets of these reflections are invariant under the
    saddle-point map: ``{q_12 = V_12 = m_2 = theta_2 = 0}`` (``R``) and
    ``{q_12 = V_12 = m_1 = theta_2 = 0}`` (``diag(-1, 1)`` with ``h* -> -h*``: the "dual" face). The
    tensor Gauss-Hermite rule is symmetric under ``xi_{l,2} -> -xi_{l,2}`` (resp. ``xi_{l,1}, eta``),
    so the generated map must keep these entries zero up to round-off."""
    mod = load_module("attention_rank2")
    names = list(mod.ORDER_PARAMETERS)
    x = np.array([state[n] for n in names])
    res = Solver(mod, {}, "free", rule=gauss_hermite(6, 4), backend="numpy").evaluate_map(x, 2.0)
    new = dict(zip(names, res.x_new))
    zero = [n for n in names if state[n] == 0.0]
    assert all(abs(new[n]) < 1e-10 * max(abs(v) for v in res.x_new) for n in zero), \
        {n: new[n] for n in zero}
    assert all(abs(new[n]) > 1e-4 for n in names if state[n] != 0.0)


# ------------------------------------------------------------------ L = 3
def test_L3_encodings_have_the_law_of_the_simulator_encodings():
    """derivations/attention_L3 declares ``(pi_1, pi_2, pi_3)`` uniform on ``{(1, +-1, +-1)}``: the
    empirical law of ``sqrt(d) P[:, i]`` for numerics.data.default_positional_encodings(3, d)
    (Hadamard rows), exactly, for ``d`` a multiple of 4."""
    pytest.importorskip("torch")
    from derivations.attention_L3 import model
    from numerics.data import default_positional_encodings
    from replica.symbolic.data import TokenStatistics

    d = 200
    emp = TokenStatistics.from_covariances([np.full(d, 0.25)] * 3, default_positional_encodings(3, d))
    def law(stats):
        return sorted((tuple(round(float(p), 9) for p in a.pi), round(float(a.weight), 9)) for a in stats.atoms)

    assert law(emp) == law(model.data)
    sigma = [s for s in model.parameter_symbols if s.name == "sigma"][0]
    assert all(float(g.subs(sigma, 0.5)) == 0.25 for a in model.data.atoms for g in a.gamma)


# ------------------------------------------------------------------ untied vs tied: the transition
UNTIED_ALPHA2 = {  # fixed points at alpha = 2 (tensor GH order 5), starting points of the solves below
    "semantic": dict(q_11=0.076709, q_12=0.075114, q_22=0.076709, V_11=17.004, V_12=2.589, V_22=18.625,
                     m_1=0.0, m_2=0.0, theta_1=0.12158, theta_2=0.11582),
    "positional": dict(q_11=0.036398, q_12=0.03083, q_22=0.036398, V_11=14.623, V_12=-1.6288, V_22=18.236,
                       m_1=0.2743, m_2=0.26324, theta_1=0.0, theta_2=0.0),
}


def test_untying_key_and_query_moves_the_transition_to_larger_alpha():
    """Paper Appendix E.3 (Fig. 12): untied attention needs more samples to turn semantic.

    At omega = 0.3, alpha = 2 the tied model's global minimum is semantic
    (``Phi_sem - Phi_pos = +9.2e-4`` against the larger-Phi positional solution, m ~ 0.256; +1.08e-3 against the weaker one, m ~ 0.084, that the start below reaches; its ``alpha_c ~ 1.25``) while the untied model's is still
    positional (``Phi_sem - Phi_pos = -2.6e-4``; it turns semantic between alpha = 2 and 2.5,
    docs/how-to/extensions.md). The coarse 6-D rule used here (GH order 4) gives -3.8e-4 for the untied gap
    (order 5: -2.6e-4, order 6: -2.6e-4): its error is a fraction of the gap.
    """
    unt, tied = load_module("attention_untied"), load_module("attention_tied")
    rule = gauss_hermite(6, 4)
    phi_u = {b: Solver(unt, {}, b, rule=rule, backend="numpy", tol=1e-7).solve(2.0, x0).phi
             for b, x0 in UNTIED_ALPHA2.items()}
    phi_t = {b: Solver(tied, {}, b, backend="numpy").solve(2.0, x0).phi
             for b, x0 in (("semantic", [0.11, 12.0, 0.0, 0.15]), ("positional", [0.09, 20.0, 0.1, 0.0]))}
    assert phi_u["semantic"] - phi_u["positional"] < -1e-4
    assert phi_t["semantic"] - phi_t["positional"] > 5e-4


# ------------------------------------------------------------------ theory vs simulation
A3 = [[0.6, 0.3, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]]
#: name -> (generated module, branch, alpha, simulator keywords, simulator init)
POINTS = {
    "untied_sem": ("attention_untied", "semantic", 2.0, dict(untied=True), "semantic"),
    "untied_pos": ("attention_untied", "positional", 1.0, dict(untied=True), "positional"),
    "rank2_dual": ("attention_rank2", "free", 2.0, dict(r=2), "semantic"),
    "rank2_mixed": ("attention_rank2", "free", 1.0, dict(r=2), "positional"),
    "L3_sem": ("attention_L3", "semantic", 2.0, dict(L=3, A=A3), "semantic"),
    "L3_pos": ("attention_L3", "positional", 1.0, dict(L=3, A=A3), "positional"),
}
#: Replica fixed points, tensor Gauss-Hermite of order 8 (262144 nodes), tol 1e-7 (quadrature error
#: <= 1e-3 relative on q, m, theta against order 10, benchmarks/quadrature_6d.py; 2e-2 on m of L3_pos).
#: rank2_dual is the free-branch fixed point on the face q_12 = m_1 = theta_2 = 0 (column 1 semantic,
#: column 2 positional): gradient descent from Q = [Q*, 0.01 noise] goes there. rank2_mixed: at alpha = 1
#: the rank-2 positional branch (theta = 0, Phi = -1.8388e-3) is unstable in theta; the free branch
#: started next to it flows to this mixed fixed point (|theta| = 0.064, Phi = -1.7870e-3), which is
#: where gradient descent from Q = [p_1/|p_1|, 0.01 noise] ends (|theta| = 0.06 at d = 800).
THEORY = {
    "untied_sem": dict(q_11=0.0763677, q_12=0.0748269, q_22=0.0763677, V_11=16.8791107, V_12=2.2628095,
                       V_22=18.5656495, m_1=0.0, m_2=0.0, theta_1=0.1222771, theta_2=0.1167745,
                       eps_g=0.002311851, train_loss=0.005412983),
    "untied_pos": dict(q_11=0.0289292, q_12=0.0258671, q_22=0.0289292, V_11=18.4772511, V_12=-0.5928849,
                       V_22=21.6210324, m_1=0.2389932, m_2=0.2481807, theta_1=0.0, theta_2=0.0,
                       eps_g=0.00312076, train_loss=0.002759448),
    "rank2_dual": dict(q_11=0.0794588, q_12=0.0, q_22=0.0175262, V_11=14.7370776, V_12=0.0, V_22=14.321238,
                       m_1=0.0, m_2=-0.2149144, theta_1=0.1291141, theta_2=0.0,
                       eps_g=0.001338615, train_loss=0.002787443),
    "rank2_mixed": dict(q_11=0.025923, q_12=0.0058217, q_22=0.0319018, V_11=20.2087894, V_12=2.5414416,
                        V_22=22.8508592, m_1=0.1875264, m_2=-0.1137624, theta_1=0.0332718, theta_2=0.0548752,
                        eps_g=0.002523576, train_loss=0.001787047),
    "L3_sem": dict(q=0.1946397, V=9.0073749, m_1=0.0, m_2=0.0, m_3=0.0, theta=0.2136517,
                   eps_g=0.004108084, train_loss=0.010575),
    "L3_pos": dict(q=0.1182303, V=26.243444, m_1=0.0972908, m_2=-0.0009148, m_3=-0.0966945, theta=0.0,
                   eps_g=0.00950324, train_loss=0.007424664),
}
#: Simulator settings: full-batch GD on the paper's risk, lr 1.5 (stable, ~10x faster than 0.15 to the
#: same minimum, numerics/finite_size.py) until grad_norm <= 1e-6; teacher columns of norm sqrt(d).
SIM = dict(omega=0.3, n_test=20_000, normalize_teacher=True, lr=1.5, steps=20_000, stop_grad=1e-6)


def _output_encoding_term(name: str, order: dict, d: int, n: int = 8) -> float:
    """``(1/2d) E ||S(h) P||_F^2`` at the test law ``h_l = m_l + q_l^{1/2} xi_l``.

    The simulator's output ``S(h)(x + P)`` carries the encodings: ``y - f = (T - S) x - S P`` adds
    ``||S P||^2 / 2d`` per sample to the loss, an ``O(1/d)`` term the ``d -> infinity`` theory drops.
    With ``p_2 = -p_1`` (``L = 2``) it is ``sum_l (S_l1 - S_l2)^2 / 2d``, negligible; with the three
    orthonormal encodings of ``L = 3`` it is ``sum_lk S_lk^2 / 2d >= 1/2d``: 0.0052 at ``d = 100``
    against ``eps_g = 0.0041``. It enters ``eps_g`` once and ``e_t = R/d`` ``alpha`` times.
    """
    from numerics.data import default_positional_encodings
    from replica.symbolic.order_parameters import OrderParameters
    from replica.registry import load_model

    model = load_model(name)
    ops = OrderParameters(model.L, model.r, model.r_t, model.reduction)
    vals = {s: order[s.name] for s in ops.order_symbols() if s.name in order}
    L, r = model.L, model.r
    rule = gauss_hermite(L * r, n)
    xi = rule.nodes.reshape(L, r, -1)
    H = []
    for l in range(L):
        q = np.array(ops.token("q", l).subs(vals), dtype=float)
        m = np.array(ops.token("m", l).subs(vals), dtype=float).reshape(r)
        H.append(m[:, None] + np.linalg.cholesky(q) @ xi[l])
    f = sp.lambdify(list(model.h), model.student, "numpy")
    S = f(*[H[l][k] for l in range(L) for k in range(r)])
    S = np.array([[np.broadcast_to(np.asarray(S[i][j], float), rule.weights.shape) for j in range(L)]
                  for i in range(L)])
    P = default_positional_encodings(L, 8)   # the Gram matrix P P^T does not depend on d (d % 4 == 0)
    return float(np.einsum("ikn,kj,ijn->n", S, P @ P.T, S) @ rule.weights) / (2 * d)


def _invariants(point: str, q, m, theta, per_token_m, eps_g, train_loss) -> dict[str, float]:
    """Comparable quantities: signs fixed by the branch's own order parameter (``theta_1`` on
    semantic points, ``m_1`` on positional ones), rotation invariants for rank 2."""
    q, th, m = np.atleast_2d(np.asarray(q, float)), np.ravel(theta).astype(float), np.ravel(m).astype(float)
    out: dict[str, float] = {}
    if point.startswith("untied"):
        lead = th[0] if point.endswith("sem") else m[0]
        s = 1.0 if lead >= 0 else -1.0
        out.update(q_11=q[0, 0], q_12=q[0, 1], q_22=q[1, 1])
        out.update(dict(theta_1=s * th[0], theta_2=s * th[1]) if point.endswith("sem")
                   else dict(m_1=s * m[0], m_2=s * m[1]))
    elif point.startswith("rank2"):
        lo, hi = np.linalg.eigvalsh(q)
        out.update(q_min=lo, q_max=hi, m_norm=float(np.linalg.norm(m)))
        out["theta_norm"] = float(np.linalg.norm(th))
    else:
        pm = np.ravel(per_token_m).astype(float)
        out["q"] = q[0, 0]
        if point.endswith("sem"):
            out["theta"] = abs(th[0])
        else:
            s = 1.0 if pm[0] >= 0 else -1.0
            out.update(m_1=s * pm[0], m_3=s * pm[2])
    out.update(eps_g=eps_g, e_t=train_loss)
    return out


def _theory_invariants(point: str, d: int, t: dict | None = None) -> dict[str, float]:
    """The compared quantities of a replica state ``t`` (default ``THEORY[point]``) at size ``d``."""
    name, _, alpha, _, _ = POINTS[point]
    t = THEORY[point] if t is None else t
    if point.startswith("rank2"):
        q = np.array([[t["q_11"], t["q_12"]], [t["q_12"], t["q_22"]]])
        m, th, pm = [t["m_1"], t["m_2"]], [t["theta_1"], t["theta_2"]], None
    elif point.startswith("L3"):
        q, m, th, pm = t["q"], t["m_1"], t["theta"], [t["m_1"], t["m_2"], t["m_3"]]
    else:
        q = np.array([[t["q_11"], t["q_12"]], [t["q_12"], t["q_22"]]])
        m, th, pm = [t["m_1"], t["m_2"]], [t["theta_1"], t["theta_2"]], None
    extra = _output_encoding_term(name, t, d)
    return _invariants(point, q, m, th, pm, t["eps_g"] + extra, t["train_loss"] + alpha * extra)


def _simulate(point: str, d: int, seeds) -> list[dict[str, float]]:
    pytest.importorskip("torch")
    import torch

    from numerics.simulate import run_attention_seed

    _, _, alpha, kw, init = POINTS[point]
    out = []
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for s in seeds:
            r = run_attention_seed(s, alpha=alpha, d=d, init=init, **SIM, **kw)
            assert r["converged"], f"{point} d={d} seed {s}: GD did not converge (grad_norm {r['grad_norm']:.1e})"
            out.append(_invariants(point, r["q"], r["m"], r["theta"], r["per_token"]["m"], r["eps_g"],
                                   r["train_loss"]))
    finally:
        torch.set_num_threads(old)
    return out


#: Calibration of the finite-size spread: (mean - theory, std) of every compared quantity over seeds
#: 0-4 at d = 200 and 400 (every run converged), the same settings as the tests, which use other
#: seeds (10, 11, ...). Printed by ``python -m benchmarks.extensions_calibration``; the trend with d (and
#: d = 100, 800) is tabulated in docs/how-to/extensions.md. L3_pos is left out: its seeds land on different
#: positional minima (the spread of m does not shrink with d), see the report.
CAL = {
    ('untied_sem', 200): {
        'q_11': (0.00071, 0.0076), 'q_12': (0.00074, 0.0077), 'q_22': (0.00071, 0.0076),
        'theta_1': (0.0014, 0.0094), 'theta_2': (0.0017, 0.01), 'eps_g': (-2.6e-05, 0.00024),
        'e_t': (0.00024, 0.00023)},
    ('untied_sem', 400): {
        'q_11': (-0.002, 0.0036), 'q_12': (-0.0021, 0.0035), 'q_22': (-0.002, 0.0036),
        'theta_1': (-0.0017, 0.0051), 'theta_2': (-0.0017, 0.0054), 'eps_g': (4.7e-05, 0.00014),
        'e_t': (3.8e-05, 0.00012)},
    ('untied_pos', 200): {
        'q_11': (-0.0013, 0.0052), 'q_12': (-0.0011, 0.0047), 'q_22': (-0.0013, 0.0052),
        'm_1': (-0.012, 0.016), 'm_2': (-0.017, 0.016), 'eps_g': (8.6e-05, 7.5e-05), 'e_t': (5e-05, 0.00043)},
    ('untied_pos', 400): {
        'q_11': (0.00075, 0.0019), 'q_12': (0.00084, 0.0017), 'q_22': (0.00075, 0.0019),
        'm_1': (0.0015, 0.0084), 'm_2': (9.8e-05, 0.0097), 'eps_g': (3e-06, 4.8e-05),
        'e_t': (9.7e-05, 0.00019)},
    ('rank2_dual', 200): {
        'q_min': (-0.00095, 0.00029), 'q_max': (0.0022, 0.0059), 'm_norm': (-0.0041, 0.0011),
        'theta_norm': (0.0025, 0.0064), 'eps_g': (-2.1e-05, 0.00012), 'e_t': (0.00019, 9.7e-05)},
    ('rank2_dual', 400): {
        'q_min': (-0.00057, 0.00059), 'q_max': (-0.00082, 0.0045), 'm_norm': (-0.0025, 0.0041),
        'theta_norm': (-8.2e-05, 0.0051), 'eps_g': (6.4e-06, 9.6e-05), 'e_t': (6.1e-05, 7.4e-05)},
    ('rank2_mixed', 200): {
        'q_min': (-0.0015, 0.0026), 'q_max': (-0.0015, 0.0059), 'm_norm': (-0.0097, 0.0079),
        'theta_norm': (-0.0081, 0.014), 'eps_g': (0.00016, 0.00021), 'e_t': (6e-05, 0.00022)},
    ('rank2_mixed', 400): {
        'q_min': (0.0013, 0.0021), 'q_max': (-0.00075, 0.0053), 'm_norm': (0.0016, 0.0072),
        'theta_norm': (-0.018, 0.03), 'eps_g': (0.00018, 0.00027), 'e_t': (0.00011, 8.4e-05)},
    ('L3_sem', 200): {
        'q': (-0.0041, 0.0022), 'theta': (-0.0025, 0.0018), 'eps_g': (9.3e-05, 8.2e-05),
        'e_t': (5.9e-05, 4.1e-05)},
    ('L3_sem', 400): {
        'q': (-0.0052, 0.0031), 'theta': (-0.0035, 0.0024), 'eps_g': (0.00012, 8.5e-05),
        'e_t': (4.1e-05, 4.8e-05)},
}
#: Theory uncertainty (relative) from the quadrature study: order 8 vs order 10.
U_THEORY = 2e-3
AGREEMENT_POINTS = ("untied_sem", "untied_pos", "rank2_dual", "rank2_mixed", "L3_sem")
#: rank2_mixed is slow at d = 200 (GD leaves the positional saddle slowly, ~5000 steps): slow suite only.
FAST_POINTS = ("untied_sem", "untied_pos", "rank2_dual", "L3_sem")


def _check_agreement(point: str, d: int, seeds) -> None:
    """Seed mean within ``3 std(d) / sqrt(K) + |bias(d)| + U_THEORY |theory|`` of the theory, for every
    compared quantity: ``std`` and ``bias`` are the measured finite-size spread and offset at this d
    (CAL), ``K`` the number of seeds here; ``eps_g`` and ``e_t`` carry the exact O(1/d) encoding term."""
    sims = _simulate(point, d, seeds)
    theory = _theory_invariants(point, d)
    cal = CAL[(point, d)]
    lines, bad = [], []
    for k, (bias, std) in cal.items():
        mean = float(np.mean([s[k] for s in sims]))
        tol = 3 * std / math.sqrt(len(sims)) + abs(bias) + U_THEORY * abs(theory[k])
        lines.append(f"{k}: sim {mean:.5g} theory {theory[k]:.5g} |dev| {abs(mean - theory[k]):.2g} tol {tol:.2g}")
        if not abs(mean - theory[k]) <= tol:
            bad.append(k)
    assert not bad, f"{point} d={d}: {bad} outside the finite-size tolerance\n" + "\n".join(lines)


@pytest.mark.parametrize("point", FAST_POINTS)
def test_theory_matches_simulation(point):
    """Replica fixed point vs gradient descent at d = 200, two seeds (a few seconds each)."""
    _check_agreement(point, 200, (10, 11))


@pytest.mark.slow
@pytest.mark.parametrize("point", AGREEMENT_POINTS)
def test_theory_matches_simulation_d400(point):
    """Same at d = 400, four seeds: tolerances about half those at d = 200."""
    _check_agreement(point, 400, (10, 11, 12, 13))


# ------------------------------------------------------------------ slow: default rule, transition
# (the tutorial notebook's run is in tests/test_notebooks.py)
@pytest.mark.slow
@pytest.mark.parametrize("point", list(POINTS))
def test_default_6d_rule_reproduces_the_reference_fixed_points(point):
    """The default rule in 6 dimensions (tensor Gauss-Hermite of order 6, replica/numeric/quadrature.py) started
    at the order-8 fixed point stays there within its measured error (benchmarks/quadrature_6d.py:
    <= 1.5e-3 relative on q, m, theta of the untied model). L3_pos is quadrature-limited: from the
    reference state GH orders 6, 7, 8 give q = 0.1196, 0.1187, 0.1183 and m_1 = 0.0914, 0.0969,
    0.0955 (the reference, 0.0973, is another order-8 solve; nearby positional minima with m_2 != 0
    exist), so its tolerances are the measured order-6 deviations rounded up: 2e-2 on q, 8e-2 on m.
    Compared through the invariants of the simulation checks (rank 2: eigenvalues of ``q``, norms),
    since a rank-2 fixed point may move along its O(2) orbit."""
    name, branch, alpha, _, _ = POINTS[point]
    mod = load_module(name)
    ref = THEORY[point]
    fp = Solver(mod, {}, branch, tol=1e-7).solve(alpha, {n: ref[n] for n in mod.ORDER_PARAMETERS})
    assert fp.quadrature.startswith("gauss-hermite(dim=6, order=6")
    got = _theory_invariants(point, 400, dict(fp.order, eps_g=fp.eps_g, train_loss=fp.train_loss))
    want = _theory_invariants(point, 400)
    for k in got:
        tol = ({"q": 2e-2, "m_1": 8e-2, "m_3": 8e-2}.get(k, 5e-3) if point == "L3_pos" else 5e-3)
        assert got[k] == pytest.approx(want[k], rel=tol, abs=1e-6), (k, got[k], want[k])


@pytest.mark.slow
def test_untied_transition_lies_between_2_25_and_2_5():
    """``Phi_sem - Phi_pos`` of the untied model (GH order 6): -3.5e-5 at alpha = 2.25 and +2.4e-4 at
    2.5, so ``alpha_c ~ 2.28`` (tied: 1.25); the quadrature error of ``Phi`` at order 6 is ~2e-6."""
    mod = load_module("attention_untied")
    x0 = dict(UNTIED_ALPHA2)
    diff = {}
    for alpha in (2.25, 2.5):
        phi = {}
        for b in ("semantic", "positional"):
            fp = Solver(mod, {}, b, rule=gauss_hermite(6, 6), tol=1e-8).solve(alpha, x0[b])
            phi[b] = fp.phi
        diff[alpha] = phi["semantic"] - phi["positional"]
    assert diff[2.25] < 0 < diff[2.5], diff

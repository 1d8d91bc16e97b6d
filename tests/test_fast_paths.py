"""Issue 9: the fast paths give the same numbers as the plain ones.

* symmetry folding of quadrature rules (``z -> -z`` on the semantic branch, ``eta -> -eta``
  on the positional one) leaves every needed average unchanged;
* the generated per-node scalar code (plain Python here, compiled by numba in the solver)
  matches the vectorised numpy functions, and the generic fused kernel matches
  :func:`replica.numeric.prox.prox`;
* the numba backend (when installed) and the numpy backend solve to the same fixed point;
* ``error_estimate=False`` only drops the companion-rule residual.
"""
from __future__ import annotations

import numpy as np
import pytest

from replica.registry import load_module
from replica.errors import ParameterError
from replica.numeric.integrators import QuadratureIntegrator, fold_nodes
from replica.numeric.compiled import compiled, numba_available
from replica.numeric.prox import prox
from replica.numeric.quadrature import gauss_hermite, smolyak
from replica.numeric.solver import Solver

SEMANTIC = np.array([0.11481652, 12.669502, 0.0, 0.15815315])
POSITIONAL = np.array([0.030515188, 20.308367, 0.22169809, 0.0])


@pytest.mark.parametrize("rule", [gauss_hermite(4, 6), gauss_hermite(4, 5), smolyak(4, 3)],
                         ids=["gh6", "gh5-odd", "smolyak3"])
def test_folding_preserves_even_averages(rule):
    rng = np.random.default_rng(0)
    a = rng.normal(size=4)
    even = lambda z: np.cos(a @ z) + (a @ z) ** 2 * np.exp(-0.1 * z[0] ** 2)   # f(-z) = f(z)
    nodes, w = fold_nodes(rule.nodes, rule.weights, [(0, 1, 2, 3)])
    assert nodes.shape[1] <= (rule.size + 1) // 2 + 1
    assert w.sum() == pytest.approx(1.0, abs=1e-13)
    assert even(nodes) @ w == pytest.approx(even(rule.nodes) @ rule.weights, abs=1e-13)
    # two independent flips (eta alone, and everything): a quarter of the nodes
    part = lambda z: np.cos(a[:2] @ z[:2]) * np.cosh(0.3 * a[2:] @ z[2:])
    n2, w2 = fold_nodes(rule.nodes, rule.weights, [(0, 1, 2, 3), (2, 3)])
    assert n2.shape[1] < nodes.shape[1]
    assert part(n2) @ w2 == pytest.approx(part(rule.nodes) @ rule.weights, abs=1e-13)


def test_gauss_hermite_even_order_folds_to_half():
    rule = gauss_hermite(4, 14)
    nodes, _ = fold_nodes(rule.nodes, rule.weights, [(0, 1, 2, 3)])
    assert nodes.shape[1] == rule.size // 2


@pytest.mark.parametrize("x, branch", [(SEMANTIC, "semantic"), (POSITIONAL, "positional")])
def test_folded_energetic_average_is_unchanged(attention, x, branch):
    rule = gauss_hermite(4, 6)
    solver = Solver(attention, {"omega": 0.3}, branch, rule=rule, backend="numpy")
    assert solver.symmetries, "the paper's loss is even: both branches have a symmetry"
    folded = QuadratureIntegrator(rule, solver.symmetries, backend="numpy")
    plain = QuadratureIntegrator(rule, backend="numpy")
    assert folded.size == rule.size // 2
    a = folded.average(attention, x, solver.p)
    b = plain.average(attention, x, solver.p)
    keep = solver.free  # the odd gradient (dF/dm or dF/dtheta) belongs to the pinned family
    np.testing.assert_allclose(a.grad[keep], b.grad[keep], rtol=1e-10, atol=1e-14)
    assert a.psi_y == pytest.approx(b.psi_y, rel=1e-12)


def _random_points(module, n, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(len(module.GAUSSIANS), n))
    h = rng.normal(size=(module.PROX_DIM, n))
    return z, h


@pytest.mark.parametrize("model", ["attention", "ridge"])
def test_node_functions_match_numpy_functions(request, model):
    module = request.getfixturevalue(model)
    solver = Solver(module, backend="numpy")
    x, p = solver.initial_state() * 1.3 + 0.01, solver.p
    x[list(module.SYMMETRIC_DIAGONAL)] = np.abs(x[list(module.SYMMETRIC_DIAGONAL)]) + 0.05
    assert solver._admissible(x)
    z, h = _random_points(module, 7)
    D, nx = module.PROX_DIM, len(x)
    F, g, H = module.bracket_newton(h, z, x, p)
    G = module.bracket_parameter_gradient(h, z, x, p)
    starts = module.prox_starts(z, x, p)
    tl = module.test_loss(z, x, p)
    obs = module.test_observables(z, x, p)
    for j in range(z.shape[1]):
        c = np.empty(max(module.N_CONSTANTS, 1))
        module.leaves["node_constants"](z[:, j], x, p, c)
        gj, Hj, Gj = np.empty(D), np.empty(D * D), np.empty(nx)
        Fj = module.leaves["node_bracket_newton"](h[:, j], c, gj, Hj)
        assert Fj == pytest.approx(F[j], rel=1e-12, abs=1e-14)
        np.testing.assert_allclose(gj, g[:, j], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(Hj, H[:, j], rtol=1e-10, atol=1e-12)
        module.leaves["node_parameter_gradient"](h[:, j], z[:, j], x, p, Gj)
        np.testing.assert_allclose(Gj, G[:, j], rtol=1e-10, atol=1e-12)
        sj = np.empty(module.N_STARTS * D)
        module.leaves["node_starts"](z[:, j], x, p, sj)
        np.testing.assert_allclose(sj, np.broadcast_to(starts[:, j], sj.shape), rtol=1e-12, atol=1e-14)
        oj = np.empty(module.N_OBSERVABLES)
        module.leaves["node_test_observables"](z[:, j], x, p, oj)
        np.testing.assert_allclose(oj, obs[:, j], rtol=1e-12, atol=1e-14)
        assert oj[0] == pytest.approx(tl[j], rel=1e-12, abs=1e-14)  # eps_g first: the test loss


def test_generic_kernel_matches_numpy_prox(attention):
    """The generic kernels of replica.numeric.kernels, assembled with the model's leaves into a unit run as
    plain Python (no numba) on a few nodes, against the numpy prox()."""
    unit = compiled(attention, jit=False)
    rule = gauss_hermite(4, 4)
    z, w = rule.nodes[:, ::7].copy(), rule.weights[::7].copy()
    p = np.array(attention.DEFAULTS, dtype=float)
    for x in (SEMANTIC, POSITIONAL):
        ref = prox(attention, z, x, p)
        G = attention.bracket_parameter_gradient(ref.h, z, x, p)
        N = z.shape[1]
        h_out, failed, grad = np.empty((attention.PROX_DIM, N)), np.zeros(N, bool), np.zeros(4)
        with np.errstate(all="ignore"):
            psi, n_dis, n_fail = unit.node_prox_average(
                z, w, np.zeros((2, 1)), False, attention.N_STARTS, x, p, 1e-12, 50, 1e-6, h_out, failed, grad)
        assert n_fail == 0 and not failed.any()
        np.testing.assert_allclose(h_out, ref.h, atol=1e-7)
        assert psi == pytest.approx(ref.value @ w, rel=1e-12)
        np.testing.assert_allclose(grad, G @ w, rtol=1e-6, atol=1e-9)
        # warm start from the solution: one Newton evaluation per start, same answer
        psi2, _, _ = unit.node_prox_average(z, w, h_out.copy(), True, 1, x, p, 1e-12, 50, 1e-6,
                                            h_out, failed, grad)
        assert psi2 == pytest.approx(psi, rel=1e-12)
        # the test-point average of the observables (eps_g first)
        out = np.zeros(attention.N_OBSERVABLES)
        unit.node_test_average(z, w, x, p, out)
        np.testing.assert_allclose(out, attention.test_observables(z, x, p) @ w, rtol=1e-12)


#: an agnostic state (omega = 0.3, alpha ~ 2.3) where the module's starts miss global minima at
#: nodes near the invariant line h_1 = h_2 (issue 14): the extra starts find lower brackets there
AGNOSTIC = np.array([0.1066, 23.1, 0.0, 0.0])


@pytest.mark.skipif(not numba_available(), reason="needs numba (the compiled path)")
@pytest.mark.parametrize("x, branch", [(AGNOSTIC, "agnostic"), (SEMANTIC, "semantic")])
def test_compiled_extra_starts_match_numpy(attention, x, branch):
    """The compiled search for lower minima from more prox starts (every start in one pass, each
    stopped inside the basin of a minimum already found) gives the numpy path's average: the one
    of every start run to convergence."""
    rule = gauss_hermite(4, 8)
    out = {}
    for backend in ("numba", "numpy"):
        solver = Solver(attention, {"omega": 0.3}, branch, rule=rule, backend=backend)
        integ = solver.integrator.with_extra_starts(1)
        out[backend] = (integ.average(attention, x, solver.p), integ.last_improved,
                        solver.integrator.average(attention, x, solver.p))
    (a, na, base), (b, nb, _) = out["numba"], out["numpy"]
    if branch == "agnostic":
        assert na > 0 and nb > 0 and a.psi_y > base.psi_y  # lower brackets found: -Psi_y drops
    else:
        assert na == nb == 0
    assert a.psi_y == pytest.approx(b.psi_y, rel=1e-12)
    np.testing.assert_allclose(a.grad, b.grad, rtol=1e-9, atol=1e-13)


def test_backend_argument_is_validated(attention):
    with pytest.raises(ParameterError, match="backend"):
        Solver(attention, backend="fortran")


def test_error_estimate_off_gives_same_fixed_point(attention):
    kw = dict(rule=gauss_hermite(4, 8), test_rule=gauss_hermite(4, 12), backend="numpy")
    on = Solver(attention, {"omega": 0.3}, "semantic", **kw).solve(2.0)
    off = Solver(attention, {"omega": 0.3}, "semantic", error_estimate=False, **kw).solve(2.0)
    assert np.isfinite(on.quadrature_residual) and np.isnan(off.quadrature_residual)
    assert off.order == on.order and off.eps_g == on.eps_g and off.phi == on.phi
    # the companion rule's shift of the state is part of eps_g_error only where it was evaluated
    assert 0 < off.eps_g_error <= on.eps_g_error


@pytest.mark.skipif(not numba_available(), reason="numba not installed (optional: pip install numba)")
@pytest.mark.parametrize("branch, alpha", [("semantic", 2.0), ("positional", 0.5)])
def test_numba_and_numpy_backends_agree(attention, branch, alpha):
    kw = dict(rule=gauss_hermite(4, 8), test_rule=gauss_hermite(4, 12))
    a = Solver(attention, {"omega": 0.3}, branch, backend="numba", **kw).solve(alpha)
    b = Solver(attention, {"omega": 0.3}, branch, backend="numpy", **kw).solve(alpha)
    for k in a.order:
        assert a.order[k] == pytest.approx(b.order[k], rel=1e-6, abs=1e-9)
    assert a.eps_g == pytest.approx(b.eps_g, rel=1e-6)
    assert a.phi == pytest.approx(b.phi, rel=1e-6)


@pytest.mark.skipif(not numba_available(), reason="numba not installed (optional: pip install numba)")
def test_backends_agree_on_the_tutorial_agnostic_point():
    """notebooks/03_your_architecture.py's agnostic point at alpha = 2 (the README says the numpy path
    gives the same results): both backends reach the same fixed point from the notebook's start and
    from a distant one. Measured on the notebook's GH 14 rule: one agnostic solution, q = 0.26705, from
    nine starts q in {0.02, 0.2, 1} x V in {0.3, 1, 5} on both backends (q = 0.27567 at alpha = 1)."""
    mod = load_module("linear_attention")
    rule = gauss_hermite(4, 10)
    fps = [Solver(mod, branch="agnostic", rule=rule, backend=backend).solve(2.0, x0)
           for backend in ("numba", "numpy")
           for x0 in ({"q": 0.2, "V": 1.0, "m": 0.0, "theta": 0.15}, {"q": 1.0, "V": 5.0, "m": 0.0, "theta": 0.0})]
    assert all(fp.converged for fp in fps)
    for fp in fps[1:]:
        for k in fps[0].order:
            assert fp.order[k] == pytest.approx(fps[0].order[k], rel=1e-7, abs=1e-10)
        assert fp.phi == pytest.approx(fps[0].phi, rel=1e-9)


def test_auto_backend_compiles_only_where_it_pays(ridge, attention):
    """``auto`` runs a one-dimensional prox (ridge) on the numpy path, which is as fast there and
    compiles nothing (replica.numeric.compiled.COMPILED_MIN_PROX_DIM), and the attention model's
    two-dimensional one on the compiled kernels where numba is available; an explicit backend
    is taken as asked."""
    from replica.numeric.compiled import COMPILED_MIN_PROX_DIM, resolve_backend

    assert ridge.PROX_DIM < COMPILED_MIN_PROX_DIM <= attention.PROX_DIM
    assert resolve_backend(ridge, "auto") == "numpy"
    assert resolve_backend(attention, "auto") == ("numba" if numba_available() else "numpy")
    assert resolve_backend(attention, "numpy") == "numpy"
    if numba_available():
        assert resolve_backend(ridge, "numba") == "numba"
    with pytest.raises(ParameterError):
        resolve_backend(ridge, "fortran")

"""Committees: exchangeable units detected from the declaration, the unit-symmetric ansatz and its
closed forms, the tie projection of the unspecialised branch, folding by unit permutations, and the
finite-size matching of units (docs/how-to/committees.md)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy as sp

from replica import L2, Derivation, Domain, Model, TokenStatistics, fields, parameter, teacher_fields


def committee(K=2, Kt=None, weights=None, lam_per_unit=False, name="c", **kw):
    Kt = K if Kt is None else Kt
    h, hs = fields(1, K), teacher_fields(1, Kt)
    lam = parameter("lam")
    params = {lam: 0.1}
    v = [1] * K
    if weights is not None:   # second-layer weights as parameters with equal defaults
        v = [parameter(f"v{k}") for k in range(K)]
        params.update({s: weights for s in v})
    reg = L2(lam)
    if lam_per_unit:
        lams = [parameter(f"lam{k}") for k in range(K)]
        params.update({s: 0.1 for s in lams})
        reg = L2(sp.diag(*lams))
    S = sp.Add(*[v[k] * sp.tanh(h[0, k]) for k in range(K)]) / sp.sqrt(K)
    T = sp.Add(*[sp.tanh(hs[0, k]) for k in range(Kt)]) / sp.sqrt(Kt)
    return Model(name=name, h=h, hstar=hs, loss=(T - S) ** 2 / 2, data=TokenStatistics.isotropic(1, 1),
                 regularizer=reg, parameters=params, domains={lam: Domain(0, None)}, **kw)


# ------------------------------------------------------------------ detection
def test_exchangeable_units_are_detected_from_the_declaration():
    m = committee(3)
    assert m.unit_blocks.student == ((0, 1, 2),) and m.unit_blocks.teacher == ((0, 1, 2),)
    assert m.unit_branches == ("specialised", "unspecialised")
    assert m.unit_ansatz.kind == "specialised" and m.transition == ("specialised", "unspecialised")
    lin = committee(2, 1)
    assert lin.unit_blocks.teacher == ((0,),) and lin.unit_branches == ("unspecialised",)
    assert lin.transition is None


def test_units_a_parameter_or_the_penalty_tells_apart_are_not_exchangeable():
    # equal defaults do not make the units alike: a user may set v0 != v1
    assert not committee(2, weights=1.0).unit_blocks.permutable
    assert not committee(2, lam_per_unit=True).unit_blocks.permutable
    assert committee(2, weights=1.0).unit_ansatz is None


def test_the_full_matrices_on_request_and_an_error_when_nothing_is_exchangeable():
    from replica.errors import DeclarationError

    full = committee(2, unit_symmetry=False)
    assert full.unit_ansatz is None and "specialised" not in full.branches
    assert len(Derivation(full).order_symbols) == 3 + 3 + 4
    with pytest.raises(DeclarationError, match="unit_symmetry"):
        committee(2, weights=1.0, unit_symmetry=True)
    from derivations.attention_rank2 import model as rank2
    assert rank2.unit_blocks.permutable and rank2.unit_ansatz is None   # declared with the full matrices


def test_orbits_of_the_two_branches():
    from replica.symbolic.permutations import UnitAnsatz

    b = committee(3).unit_blocks
    spec, unspec = UnitAnsatz(b, "specialised"), UnitAnsatz(b, "unspecialised")
    assert [len(o) for o in spec.family_orbits("theta", (3, 3))] == [3, 6]
    assert [len(o) for o in unspec.family_orbits("theta", (3, 3))] == [9]
    assert [len(o) for o in spec.family_orbits("q", (3, 3))] == [3, 3]      # upper triangle: 3 off-diagonal
    assert [len(o) for o in spec.family_orbits("Vhat", (3, 3))] == [3, 3]


# ------------------------------------------------------------------ closed forms
def test_unit_matrix_algebra_matches_the_matrices():
    from replica.symbolic.unit_matrices import UnitMatrix

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 5):
        d, o = 2.0 + rng.random(), 0.3 * rng.random()
        U = UnitMatrix.from_entries(n, sp.Float(d), sp.Float(o))
        M = np.array(U.matrix(), dtype=float)
        assert np.allclose(M, (d - o) * np.eye(n) + o * np.ones((n, n)))
        assert np.allclose(np.array(U.inverse().matrix(), dtype=float), np.linalg.inv(M))
        R = np.array(U.sqrt().matrix(), dtype=float)
        assert np.allclose(R, R.T) and np.allclose(R @ R, M)
        V = UnitMatrix.from_entries(n, sp.Float(1.3), sp.Float(-0.2))
        assert np.allclose(np.array((U @ V).matrix(), dtype=float), M @ np.array(V.matrix(), dtype=float))
        v = rng.standard_normal(n)
        assert np.isclose(float(U.quadratic_form([sp.Float(x) for x in v])), v @ M @ v)
        assert np.allclose(sorted({round(x, 10) for x in np.linalg.eigvalsh(M)}),
                           sorted({round(float(e), 10) for e in U.eigenvalues()}))


@pytest.mark.parametrize("K, Kt", [(3, 3), (2, 1), (2, 3)])
def test_the_field_laws_have_the_ansatz_covariance(K, Kt):
    """omega - m = q^{1/2} xi and h* = theta^T q^{-1/2} xi + D eta: the joint covariance is exactly
    [[q, theta], [theta^T, rho]] at a state of the ansatz (symbolic coefficients, evaluated)."""
    from replica.symbolic.potentials import gaussian_symbols

    d = Derivation(committee(K, Kt))
    env = d.energetic_potential
    xi, eta = gaussian_symbols(d.model)
    z = list(xi) + list(eta)
    vals = dict(zip(d.order_symbols, [1.0, 0.3, 2.0, 0.1, 0.3, 0.1][:len(d.order_symbols)]))
    ops = d.order_parameters
    q = np.array(ops.slot("q", 0).subs(vals), dtype=float)
    th = np.array(ops.slot("theta", 0).subs(vals), dtype=float)
    outs = [env.intermediates[c] for c in env.intermediates]
    J = np.array([[float(sp.diff(o, s).subs(vals)) for s in z] for o in outs])
    want = np.block([[q, th], [th.T, np.eye(Kt)]])
    assert np.allclose(J @ J.T, want, atol=1e-12)


def test_the_symbolic_work_is_linear_in_the_number_of_units():
    """The bracket and its gradient in the order parameters grow like K (sums over units), not K^2 or
    worse: count their operations for K = 2..5."""
    sizes = []
    for K in (2, 3, 4):
        d = Derivation(committee(K))
        env = d.energetic_potential
        grads = env.parameter_gradient(d.order_symbols)
        sizes.append(sp.count_ops(env.full_bracket) + sum(sp.count_ops(e) for e in grads))
    per_unit = np.array(sizes) / np.array([2, 3, 4])
    assert per_unit.max() / per_unit.min() < 1.6, sizes


# ------------------------------------------------------------------ the numeric side
class _Module:
    """The metadata replica.numeric.unit_symmetry reads, of a 3-unit specialised ansatz."""
    MODEL = "fake"
    ORDER_PARAMETERS = ("q_1_11", "q_1_12", "V_1_11", "V_1_12", "theta_1_11", "theta_1_12")
    ORBIT_SIZES = (3, 3, 3, 3, 3, 6)
    UNIT_TIES = {"specialised": (), "unspecialised": ((4, 5),)}
    UNIT_ANSATZ = "specialised"


def test_the_tie_projection_is_the_group_average():
    from replica.numeric.unit_symmetry import breaking_directions, tie_gap, tie_projection

    x = np.array([1.0, 0.2, 3.0, -0.5, 0.9, 0.3])
    y = tie_projection(_Module, "unspecialised")(x)
    # every entry of the 3x3 theta averaged: (3 * 0.9 + 6 * 0.3) / 9
    assert np.allclose(y, [1.0, 0.2, 3.0, -0.5, 0.5, 0.5])
    assert tie_projection(_Module, "specialised") is None
    assert tie_gap(_Module, "unspecialised", y) < 1e-15 and tie_gap(_Module, "unspecialised", x) > 0.5
    E = breaking_directions(_Module, "unspecialised")
    sizes = np.array(_Module.ORBIT_SIZES)
    assert E.shape == (1, 6) and np.isclose(np.sum(sizes * E[0] * E[0]), 1.0)
    assert np.isclose(np.sum(sizes * E[0] * np.array([0, 0, 0, 0, 1, 1])), 0.0)  # orthogonal to the tie
    assert np.allclose(tie_projection(_Module, "unspecialised")(E[0]), 0.0)


def test_a_diagonal_below_the_off_diagonal_is_flagged_with_three_units_only():
    from replica.numeric.unit_symmetry import unit_branch_notes

    specialised = np.array([0.2, 0.13, 7.0, -3.0, 0.35, 0.17])
    anti = np.array([0.2, 0.13, 7.0, -3.0, 0.17, 0.25])
    assert unit_branch_notes(_Module, "specialised", specialised, "x") == []
    notes = unit_branch_notes(_Module, "specialised", anti, "x")
    assert len(notes) == 1 and "theta_1_11 < theta_1_12" in notes[0] and "anti-specialised" in notes[0]

    class TwoUnits(_Module):   # swapping the two teacher units exchanges the orbits: a relabelling
        ORBIT_SIZES = (2, 1, 2, 1, 2, 2)
    assert unit_branch_notes(TwoUnits, "specialised", anti, "x") == []


def test_a_specialisation_within_its_bars_is_flagged_and_the_default_rule_of_six_dimensions_is_randomised():
    """theta's diagonal above its off-diagonal by less than their bars is not a resolved specialisation
    (a Sobol rule shifts the unspecialised fixed point off its subspace by about its error): noted; by
    more, not. Three units (six Gaussians) default to scrambled Sobol points within the node budget:
    tensor Gauss-Hermite there does not converge (replica.numeric.unit_symmetry.default_unit_rule)."""
    from replica.numeric.quadrature import SOBOL_SCRAMBLINGS
    from replica.numeric.unit_symmetry import UNIT_RULE_NODE_BUDGET, default_unit_rule, unresolved_ties

    x = np.array([0.14, 0.13, 7.1, -3.0, 0.219, 0.193])
    bars = {"theta_1_11": 0.045, "theta_1_12": 0.024}
    notes = unresolved_ties(_Module, "specialised", x, bars)
    assert len(notes) == 1 and "not resolved from the unspecialised subspace" in notes[0]
    assert unresolved_ties(_Module, "specialised", x, {"theta_1_11": 0.01, "theta_1_12": 0.01}) == []
    assert unresolved_ties(_Module, "unspecialised", x, bars) == []   # its own ties: nothing to resolve
    assert unresolved_ties(_Module, "specialised", x, {}) == []       # no bars, no claim
    anti = unresolved_ties(_Module, "specialised", x[[0, 1, 2, 3, 5, 4]], bars)
    assert len(anti) == 1 and "anti-specialised) is not resolved either" in anti[0]
    on = x.copy()
    on[5] = on[4] * (1 + 1e-12)   # on the subspace: the tied fixed point itself (unit_branch_notes says so)
    assert unresolved_ties(_Module, "specialised", on, bars) == []

    class Three(_Module):
        UNIT_PERMUTATIONS = ((1, 2, 0, 4, 5, 3),)
        GAUSSIANS = tuple(range(6))
    m = int(default_unit_rule(Three).split(":")[1])
    assert SOBOL_SCRAMBLINGS * 2 ** m <= UNIT_RULE_NODE_BUDGET < SOBOL_SCRAMBLINGS * 2 ** (m + 1)

    class Two(Three):
        GAUSSIANS = tuple(range(4))
    assert default_unit_rule(Two) is None   # four dimensions: Gauss-Hermite or pre-integration


def test_folding_by_unit_permutations_keeps_the_averages_of_invariant_functions():
    from replica.numeric.integrators import Permutation, fold_nodes
    from replica.numeric.quadrature import gauss_hermite

    rule = gauss_hermite(6, 5)
    perms = [Permutation((1, 0, 2, 4, 3, 5)), Permutation((0, 2, 1, 3, 5, 4))]   # joint (xi, eta) swaps
    nodes, w = fold_nodes(rule.nodes, rule.weights, perms)
    assert nodes.shape[1] < rule.nodes.shape[1] / 5

    def f(z):   # invariant under joint permutations of (z0, z1, z2) and (z3, z4, z5)
        return np.tanh(z[0] + 0.3 * z[3]) ** 2 + np.tanh(z[1] + 0.3 * z[4]) ** 2 + np.tanh(z[2] + 0.3 * z[5]) ** 2 \
            + z[0] * z[1] * z[2]
    assert np.isclose(f(nodes) @ w, f(rule.nodes) @ rule.weights, rtol=1e-13)
    n2, _ = fold_nodes(rule.nodes, rule.weights, [(0, 1, 2, 3, 4, 5), *perms])   # with the mirror flip
    assert n2.shape[1] < nodes.shape[1]


def test_units_are_matched_by_the_best_permutation_and_averaged_over_orbits():
    from numerics.units import best_permutation, matching, orbit_values

    m = committee(3, name="c3")
    th = np.array([[0.1, 0.7, 0.2], [0.6, 0.1, 0.1], [0.0, 0.2, 0.5]])
    order = best_permutation(th, m)
    assert order == [1, 0, 2]
    P = th[order]
    assert np.allclose(np.diag(P), [0.6, 0.7, 0.5])
    assert matching(m, None) == "permutation" and matching(m, "unspecialised") == "symmetric"
    assert matching(committee(2, weights=1.0), None) == "none"

    class Mod:
        ORDER_PARAMETERS = ("q_1_11", "q_1_12", "V_1_11", "V_1_12", "theta_1_11", "theta_1_12")
        LAYOUT = {"q_1_11": ("q", 1, 0, 0, 3, 3), "q_1_12": ("q", 1, 0, 1, 3, 3), "V_1_11": ("V", 1, 0, 0, 3, 3),
                  "V_1_12": ("V", 1, 0, 1, 3, 3), "theta_1_11": ("theta", 1, 0, 0, 3, 3),
                  "theta_1_12": ("theta", 1, 0, 1, 3, 3)}
    q = np.array([[1.0, 0.2, 0.4], [0.2, 2.0, 0.0], [0.4, 0.0, 3.0]])
    ov = {"q": q[None], "theta": P[None], "m": np.zeros((1, 3))}
    spec = orbit_values(m, Mod, ov, "specialised")
    assert np.isclose(spec["q_1_11"], 2.0) and np.isclose(spec["q_1_12"], 0.2)
    assert np.isclose(spec["theta_1_11"], 0.6) and np.isclose(spec["theta_1_12"], (P.sum() - 1.8) / 6)
    unspec = orbit_values(m, Mod, ov, "unspecialised")
    assert np.isclose(unspec["theta_1_11"], P.mean()) and np.isclose(unspec["theta_1_12"], P.mean())
    assert set(itertools.chain(spec)) == {"q_1_11", "q_1_12", "theta_1_11", "theta_1_12"}


def test_gamp_refuses_the_unit_ansatz_in_one_line():
    """GAMP needs the prox at any V; the ansatz's V is a I + b J only: an error naming the model."""
    from numerics.gamp import model_spec
    from replica.errors import ParameterError

    with pytest.raises(ParameterError, match="unit_symmetry=False"):
        model_spec("committee")

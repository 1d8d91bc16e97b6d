"""Token clusters (issue 8, item 5; paper Appendix C.10, docs/explanation/theory.md §8, docs/how-to/extensions.md).

Gaussian-mixture tokens with correlated labels go through the same path as every model:
declaration (``derivations/attention_clusters.py``) -> Derivation (slot order parameters,
one-hot label indicators) -> generated module (``DISCRETE`` coordinates) -> Solver (Gaussian
rules x label configurations, :mod:`replica.numeric.labels`) -> simulator (:mod:`numerics.clusters`).

Fast tests: declarations, the bracket against a hand-typed oracle for every label
configuration, the envelope gradient by finite differences, product rules, the reduction to
``attention_tied`` for identical clusters, the linear baseline, the CLI and the sampler.
Slow tests: committed exports, default-quadrature solves and theory vs simulation with the
tolerance of the finite-size study (docs/figures/clusters_finite_size.csv).
"""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from replica.numeric.quadrature import gauss_hermite

ROOT = Path(__file__).resolve().parent.parent
SAME = {f"sigma_{s}": 0.5 for s in ("1a", "1b", "2a", "2b")} | {f"mu_{s}": 0.0 for s in ("1a", "1b", "2a", "2b")}


@pytest.fixture(scope="module")
def clusters():
    from replica.registry import load_module

    return load_module("attention_clusters")


def _softmax_rows(M):
    M = M - M.max(axis=-1, keepdims=True)
    E = np.exp(M)
    return E / E.sum(axis=-1, keepdims=True)


def _oracle_bracket(h, z, x, pd, config):
    """Hand-typed F(h; omega, h*, V) of docs/explanation/theory.md §3 for L = 2, r = r_t = 1 with the parameters of
    the slots (l, c_l) of ``config``: the oracle the generated bracket must match."""
    q, V, m, th = x[0:4], x[4:8], x[8:12], x[12:16]
    xi, eta = z[0:2], z[2:4]
    slots = [2 * l + c for l, c in enumerate(config)]
    sig2 = np.array([pd[f"sigma_{lab}"] ** 2 for lab in ("1a", "1b", "2a", "2b")])
    omega_c = np.array([m[s] + math.sqrt(q[s]) * xi[l] for l, s in enumerate(slots)])
    hstar = np.array([th[s] / math.sqrt(q[s]) * xi[l] + math.sqrt(sig2[s] - th[s] ** 2 / q[s]) * eta[l]
                      for l, s in enumerate(slots)])
    A = np.array([[pd["A_11"], pd["A_12"]], [pd["A_21"], pd["A_22"]]])
    T = (1 - pd["omega"]) * _softmax_rows(np.outer(hstar, hstar)) + pd["omega"] * A
    S = _softmax_rows(np.outer(h, h))
    rb = np.array([sig2[s] for s in slots])
    loss = 0.5 * np.sum(rb[None, :] * (T - S) ** 2)
    return sum((h[l] - omega_c[l]) ** 2 / (2 * V[s]) for l, s in enumerate(slots)) + loss


def _random_state(rng):
    sig2 = np.array([0.25, 0.1225, 0.25, 0.1225])
    q = rng.uniform(0.05, 0.3, 4)
    th = rng.uniform(-0.7, 0.7, 4) * np.sqrt(sig2 * q)
    return np.concatenate([q, rng.uniform(0.5, 5, 4), rng.uniform(-0.5, 0.5, 4), th])


# ---------------------------------------------------------------- declarations
def test_mixture_statistics_and_label_law():
    import sympy as sp

    from replica import TokenStatistics

    a = sp.Symbol("a_t")
    t = TokenStatistics.mixture([[0.25, 0.16], [0.25, 0.16]], {(0, 0): 0.4, (1, 1): 0.4, (0, 1): 0.1, (1, 0): 0.1},
                                positional=(1, -1), means=[[a, -a], [0, 0]])
    assert t.slot_labels == ("1a", "1b", "2a", "2b") and t.S == 4 and t.has_clusters
    assert [s.name for s in t.label_symbols] == ["e_1a", "e_1b", "e_2a", "e_2b"]
    assert {tuple(a_.pi) for a_ in t.atoms} == {(1 + a, 1 - a, -1, -1), (1 - a, 1 + a, -1, -1)}
    assert [float(t.marginal(s)) for s in range(4)] == [0.5, 0.5, 0.5, 0.5]
    e1a, e1b = t.label_symbols[:2]
    assert sp.simplify(t.token_rho_bar(0) - (0.25 * e1a + 0.16 * e1b)) == 0
    assert [c[2] for c in t.configurations()] == [(1, 0, 1, 0), (0, 1, 0, 1), (1, 0, 0, 1), (0, 1, 1, 0)]
    # E[pi_1a pi_1b] = (1 + a)(1 - a)/2 + (1 - a)(1 + a)/2 = 1 - a^2
    M = t.second_moment_groups()[0].pi_moment
    assert sp.simplify(M[0, 1] - (1 - a ** 2)) == 0
    # without clusters nothing changes: slots are tokens
    plain = TokenStatistics.isotropic(2, 0.25, (1, -1))
    assert plain.slot_labels == ("1", "2") and plain.label_symbols == [] and not plain.has_clusters


@pytest.mark.parametrize("labels, match", [
    (None, "label law"),
    ({(0, 0): 0.5, (1, 1): 0.4}, "sum to 1"),
    ({(0, 0): 1.0, (2, 0): 0.0}, "clusters 0..1"),
    ({(0,): 1.0}, "one cluster per token"),
    ({(0, 0): 1.2, (1, 1): -0.2}, "< 0"),
])
def test_bad_label_laws_are_rejected(labels, match):
    from replica import DeclarationError, TokenStatistics

    with pytest.raises(DeclarationError, match=match):
        TokenStatistics.mixture([[1, 1], [1, 1]], labels)


def test_reduction_counts_slots():
    from derivations.attention_clusters import build
    from replica import DeclarationError, Model, TokenReduction

    m = build()
    kw = {k: getattr(m, k) for k in ("name", "h", "hstar", "data", "regularizer", "student", "target",
                                     "parameters", "domains", "branches")}
    with pytest.raises(DeclarationError, match="per slot"):
        Model(**kw, reduction=TokenReduction({"q": [1, 1]}))


def test_slot_order_parameters_and_equation_factors():
    """One q, V, m, theta per slot; Vhat_s = -2 alpha dPsi_y/dq_s etc. per slot (from Psi_t)."""
    import sympy as sp

    from derivations.attention_clusters import model
    from replica import Derivation
    from replica.symbolic.potentials import trace_potential

    d = Derivation(model)
    names = [s.name for s in d.order_symbols]
    assert names == [f"{f}_{s}" for f in ("q", "V", "m", "theta") for s in ("1a", "1b", "2a", "2b")]
    assert len(sp.Add.make_args(trace_potential(d.order_parameters))) == 16
    g = {x.name: ph for x, ph in d.gradient_placeholders.items()}
    got = {eq.lhs.name: eq.rhs for eq in d.saddle_point.energetic}
    a = d.alpha
    for s in ("1a", "2b"):
        assert sp.simplify(got[f"Vhat_{s}"] + 2 * a * g[f"q_{s}"]) == 0
        assert sp.simplify(got[f"qhat_{s}"] - 2 * a * g[f"V_{s}"]) == 0
        assert sp.simplify(got[f"mhat_{s}"] - a * g[f"m_{s}"]) == 0
    assert d.sign_flips == ("m", "theta")
    assert [s.name for s in d.energetic_potential.discrete] == ["e_1a", "e_1b", "e_2a", "e_2b"]


# ---------------------------------------------------------------- generated module
def test_module_constants(clusters):
    assert clusters.GAUSSIANS == ("xi_1", "xi_2", "eta_1", "eta_2")
    assert clusters.DISCRETE == ("e_1a", "e_1b", "e_2a", "e_2b")
    assert clusters.SLOTS == ("1a", "1b", "2a", "2b")
    p = np.array(clusters.DEFAULTS)
    probs = clusters.label_probabilities(p)
    assert np.allclose(probs, [0.4, 0.4, 0.1, 0.1])
    # SYMMETRIES flip Gaussian coordinates only
    assert all(max(idx) < len(clusters.GAUSSIANS) for _, idx in clusters.SYMMETRIES)


def test_bracket_matches_oracle_in_every_configuration(clusters):
    """The generated bracket picks, for each label configuration, the parameters of the slots
    (l, c_l): compared with a hand-typed oracle at random states, fields and nodes."""
    rng = np.random.default_rng(0)
    p = np.array(clusters.DEFAULTS)
    pd = dict(zip(clusters.PARAMETERS, clusters.DEFAULTS))
    for config, onehot in zip(clusters.LABELS, clusters.CONFIGURATIONS):
        for _ in range(4):
            x = _random_state(rng)
            h = rng.normal(size=2)
            z = np.concatenate([rng.normal(size=4), onehot])
            got = float(clusters.bracket(h[:, None], z[:, None], x, p)[0])
            assert got == pytest.approx(_oracle_bracket(h, z, x, pd, config), rel=1e-12)
            # the test loss is the loss at h = omega
            omega_c = np.array([x[8 + 2 * l + c] + math.sqrt(x[2 * l + c]) * z[l] for l, c in enumerate(config)])
            tl = float(clusters.test_loss(z[:, None], x, p)[0])
            assert tl == pytest.approx(_oracle_bracket(omega_c, z, x, pd, config), rel=1e-10)


def test_envelope_gradient_by_finite_differences(clusters):
    """dPsi_y/dx of every slot parameter (envelope theorem through the one-hot combinations,
    averaged over labels) vs central differences of Psi_y on the same product rule."""
    from replica.numeric.solver import Solver

    s = Solver(clusters, rule=gauss_hermite(4, 5))
    rng = np.random.default_rng(3)
    x = _random_state(rng)
    grad = s.energetic(x).grad
    for i in range(16):
        step = 1e-5 * max(abs(x[i]), 0.1)
        xp, xm = x.copy(), x.copy()
        xp[i] += step
        xm[i] -= step
        fd = (s.energetic(xp).psi_y - s.energetic(xm).psi_y) / (2 * step)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-9), clusters.ORDER_PARAMETERS[i]


def test_product_rule_and_folding(clusters):
    from replica.numeric.integrators import QuadratureIntegrator
    from replica.numeric.labels import LabelledRule, label_law, labelled
    from replica.numeric.solver import Solver

    p = Solver(clusters, {"p_same": 0.3}).p
    base = gauss_hermite(4, 4)
    rule = labelled(base, clusters, p)
    assert isinstance(rule, LabelledRule) and rule.dim == 8 and rule.size == 4 * base.size
    assert rule.weights.sum() == pytest.approx(1.0)
    values, probs = label_law(clusters, p)
    assert np.allclose(probs, [0.15, 0.15, 0.35, 0.35])
    for k in range(4):  # every configuration carries its probability
        sel = np.all(rule.nodes[4:] == values[:, k:k + 1], axis=0)
        assert rule.weights[sel].sum() == pytest.approx(probs[k])
    comp = rule.companion()
    assert isinstance(comp, LabelledRule) and comp.base.order < base.order
    folded = QuadratureIntegrator(rule, [(0, 1, 2, 3)])
    assert folded.size == rule.size // 2 and folded.weights.sum() == pytest.approx(1.0)
    assert {tuple(c) for c in folded.nodes[4:].T} == {tuple(c) for c in values.T}
    # a zero-probability configuration is dropped; a rule for another module passes through
    assert label_law(clusters, Solver(clusters, {"p_same": 1.0}).p)[1].size == 2
    from replica.registry import load_module

    attention_tied = load_module("attention_tied")
    assert labelled(base, attention_tied, np.zeros(1)) is base


@pytest.mark.parametrize("branch, alpha", [("semantic", 2.0), ("positional", 0.5)])
def test_identical_clusters_reproduce_attention_tied(clusters, attention, branch, alpha):
    """Two identical clusters (same sigma, zero means) with any label law: every slot sits at
    the tied model's fixed point (same Gaussian rule, so to solver precision)."""
    from replica.numeric.solver import Solver

    kw = dict(branch=branch, rule=gauss_hermite(4, 8), test_rule=gauss_hermite(4, 10), tol=1e-10)
    ft = Solver(attention, **kw).solve(alpha)
    fc = Solver(clusters, SAME | {"p_same": 0.7}, **kw).solve(alpha)
    for s in ("1a", "1b", "2a", "2b"):
        for f in ("q", "V", "theta"):
            assert fc.order[f"{f}_{s}"] == pytest.approx(ft.order[f], rel=1e-7, abs=1e-10)
        sign = 1 if s[0] == "1" else -1          # m_2 = -m_1 (docs/explanation/theory.md §6)
        assert fc.order[f"m_{s}"] == pytest.approx(sign * ft.order["m"], rel=1e-7, abs=1e-10)
    assert fc.eps_g == pytest.approx(ft.eps_g, rel=1e-9)
    assert fc.phi == pytest.approx(ft.phi, rel=1e-7)


def test_positional_fixed_point_has_one_weight_vector(clusters):
    """Structure of any fixed point with isotropic clusters (one student vector Q):
    q_s, V_s, theta_s proportional to sigma_s^2, and m_s = mu_s k_u + pi_l k_p (docs/explanation/theory.md §8)."""
    from replica.numeric.solver import Solver

    fp = Solver(clusters, branch="positional", rule=gauss_hermite(4, 6), test_rule=gauss_hermite(4, 8)).solve(0.5)
    pd = fp.parameters
    sig2 = np.array([pd[f"sigma_{s}"] ** 2 for s in clusters.SLOTS])
    for f in ("q", "V"):
        v = np.array([fp.order[f"{f}_{s}"] for s in clusters.SLOTS]) / sig2
        assert np.allclose(v, v[0], rtol=1e-8)
    mu = np.array([pd[f"mu_{s}"] for s in clusters.SLOTS])
    pi = np.array([1, 1, -1, -1])
    m = np.array([fp.order[f"m_{s}"] for s in clusters.SLOTS])
    coef, res, *_ = np.linalg.lstsq(np.stack([mu, pi], 1), m, rcond=None)
    assert np.allclose(np.stack([mu, pi], 1) @ coef, m, atol=1e-9)
    assert abs(coef[0]) > 1e-3       # the student uses the cluster-mean direction
    assert m[0] != pytest.approx(m[1], abs=1e-3)


def test_linear_baseline_with_labels(clusters, attention):
    from replica.numeric.solver import linear_baseline

    same = linear_baseline(clusters, SAME)[0]
    assert same == pytest.approx(linear_baseline(attention)[0], rel=1e-10)
    # distinct clusters: Monte-Carlo oracle, B = E[rho_bar_k T] / E[rho_bar_k]
    val, err = linear_baseline(clusters)
    rng = np.random.default_rng(0)
    pd = dict(zip(clusters.PARAMETERS, clusters.DEFAULTS))
    n = 400_000
    cfg = np.array(clusters.LABELS)[rng.choice(4, n, p=clusters.label_probabilities(np.array(clusters.DEFAULTS)))]
    sig = np.array([[pd["sigma_1a"], pd["sigma_1b"]], [pd["sigma_2a"], pd["sigma_2b"]]])
    s = np.stack([sig[0, cfg[:, 0]], sig[1, cfg[:, 1]]], 1)
    hs = rng.normal(size=(n, 2)) * s
    A = np.array([[pd["A_11"], pd["A_12"]], [pd["A_21"], pd["A_22"]]])
    T = (1 - pd["omega"]) * _softmax_rows(hs[:, :, None] * hs[:, None, :]) + pd["omega"] * A
    rb = (s ** 2)[:, None, :]
    B = (rb * T).mean(0) / rb.mean(0)
    per = 0.5 * (rb * (T - B) ** 2).sum((1, 2))
    assert val == pytest.approx(per.mean(), abs=4 * per.std() / math.sqrt(n) + 1e-8)
    assert val != pytest.approx(same, rel=1e-2)


def test_quadrature_specs(clusters):
    from replica.errors import ParameterError
    from replica.numeric.integrators import from_spec

    assert from_spec("auto", clusters, "positional").kind == "gauss-hermite"
    with pytest.raises(ParameterError, match="labels"):
        from_spec("preint", clusters, "positional")


def test_solve_cli_json(clusters):
    """`replica solve attention_clusters` reports slot 1a as the token-1 values, all slots in JSON."""
    cmd = [sys.executable, "-m", "replica", "solve", "attention_clusters", "--alpha", "2", "--branch", "semantic",
           "--quadrature", "gh:6", "--param", "p_same=0.5", "--json"]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["q"] == out["order_parameters"]["q_1a"] and out["m"] == 0.0
    assert out["parameters"]["p_same"] == 0.5 and "label configurations" in out["quadrature"]
    bad = subprocess.run(cmd[:-3] + ["--param", "p_same=1.5"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and ("p_same" in bad.stderr or "labels" in bad.stderr), bad.stderr


# ---------------------------------------------------------------- simulator
def test_mixture_sampler_statistics():
    from numerics.clusters import ClusterDataModel, DEFAULT_LABELS, mean_direction

    d = 64
    data = ClusterDataModel.create(d, labels=DEFAULT_LABELS(0.8))
    u = mean_direction(2, d)
    assert abs(u @ data.P[0]) < 1e-12 and u @ u == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    x, c = data.sample_with_labels(40_000, rng)
    assert np.mean(c[:, 0] == c[:, 1]) == pytest.approx(0.8, abs=0.01)
    assert np.mean(c[:, 0] == 0) == pytest.approx(0.5, abs=0.01)
    amp = {"1a": 0.8, "1b": -0.4, "2a": 0.4, "2b": -0.8}
    sig = {"1a": 0.5, "1b": 0.35, "2a": 0.5, "2b": 0.35}
    for l in range(2):
        for k, lab in enumerate("ab"):
            xs = x[c[:, l] == k, l]
            s = f"{l + 1}{lab}"
            assert (xs.mean(0) @ u) == pytest.approx(amp[s], abs=0.02)
            assert xs.var(0).mean() == pytest.approx(sig[s] ** 2, rel=0.02)


def test_slot_order_parameters_of_a_known_student():
    from numerics.clusters import ClusterDataModel, mean_direction, slot_order_parameters

    d = 128
    data = ClusterDataModel.create(d)
    u = mean_direction(2, d)
    W = (2.0 * u + 3.0 * data.P[0])[:, None] * math.sqrt(d)   # m_s = 2 a_s + 3 pi_l
    Qs = np.ones((d, 1))
    ops = slot_order_parameters(W, Qs, data)
    a = np.array([0.8, -0.4, 0.4, -0.8])
    pi = np.array([1, 1, -1, -1])
    assert np.allclose(ops["m"], 2 * a + 3 * pi)
    assert np.allclose(ops["rho_bar"], [0.25, 0.1225, 0.25, 0.1225])
    assert np.allclose(np.array(ops["q"]) / np.array(ops["rho_bar"]), (W ** 2).sum() / d)


def test_tiny_simulation_runs():
    pytest.importorskip("torch")
    from numerics.clusters import run_clusters

    res = run_clusters(alpha=1.0, d=40, seeds=1, steps=300, n_test=500, lr=1.5)
    assert res["slots"] == ["1a", "1b", "2a", "2b"] and len(res["q"]) == 4
    assert res["eps_g"] > 0 and math.isfinite(res["train_loss"])


# ---------------------------------------------------------------- slow: exports, theory vs simulation
@pytest.mark.slow
def test_committed_exports_are_up_to_date():
    from replica import Derivation
    from replica.symbolic.latex import latex_document, markdown_document
    from replica.registry import load_model

    # through the registry, as `replica export` does: the stamp records the declaration's hash
    d = Derivation(load_model("attention_clusters"))
    assert (ROOT / "derivations" / "attention_clusters.md").read_text() == markdown_document(d)
    assert (ROOT / "derivations" / "attention_clusters.tex").read_text() == latex_document(d)


STUDY = ROOT / "docs" / "figures" / "clusters_finite_size.csv"
D_CHECK, K_CHECK, SEED0 = 800, 4, 1000


@pytest.mark.slow
@pytest.mark.parametrize("init, alpha", [("semantic", 4.0), ("positional", 0.5)])
def test_theory_vs_simulation(init, alpha):
    """Fresh seeds (1000...) at d = 800 agree with the replica fixed point of the branch the run
    starts on, within tol = 4 std/sqrt(K) + |bias| + 2 SE + u_theory, std, bias and SE as
    measured by the finite-size study at d = 800 (numerics.clusters.tolerance,
    docs/how-to/extensions.md); every run must converge. Each point is on the branch that is the
    global minimum there (alpha_c ~ 2.6 for the declaration's defaults)."""
    pytest.importorskip("torch")
    from numerics.clusters import run_clusters, theory, tolerance

    with open(STUDY, newline="") as fh:
        rows = {r["observable"]: r for r in csv.DictReader(fh)
                if r["init"] == init and float(r["alpha"]) == alpha and int(r["d"]) == D_CHECK}
    assert rows, f"no study rows for {init} alpha={alpha} d={D_CHECK} in {STUDY}"
    th = theory(alpha, init)
    res = run_clusters(alpha=alpha, d=D_CHECK, init=init, seeds=K_CHECK, seed_start=SEED0, n_test=10_000)
    assert res["converged"], [(r["seed"], r["grad_norm"]) for r in res["runs"]]
    bad = []
    for name, row in rows.items():
        fam, _, slot = name.rpartition("_") if name not in ("eps_g", "train_loss") else (name, "", "")
        sim = res[fam][res["slots"].index(slot)] if slot else res[name]
        tol = tolerance(row, K_CHECK)
        if abs(sim - th[name]) > tol:
            bad.append(f"{name}: sim {sim:.5g} theory {th[name]:.5g} tol {tol:.2g}")
    assert not bad, "; ".join(bad)

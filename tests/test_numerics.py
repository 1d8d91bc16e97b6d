"""Fast unit tests of the simulator (numerics/). Small d, few hundred GD steps."""

from __future__ import annotations

import csv
import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

from tests.support import spawn  # noqa: E402
from numerics.applications.attention import simulate  # noqa: E402
from numerics.applications.attention.students import (  # noqa: E402
    LinearBaseline,
    TiedAttention,
    UntiedAttention,
    init_columns,
)
from numerics.applications.attention.targets import (  # noqa: E402
    MixedTarget,
    PositionalTarget,
    SemanticTarget,
    check_row_stochastic,
)
from numerics.applications.attention.train import (  # noqa: E402
    GramStats,
    NonConvergenceWarning,
    TrainConfig,
    data_risk,
    fit_linear,
    penalty,
    risk,
    sample_losses,
    train,
)
from numerics.metrics import linear_formula_mc, mean_se, order_parameters  # noqa: E402
from numerics.penalties import L2, ElasticNet  # noqa: E402
from numerics.tokens import (  # noqa: E402
    DataModel,
    default_positional_encodings,
    make_teacher,
    sample_dataset,
    seed_streams,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _instance(d=9, L=3, n=5, r_t=2, omega=0.4, seed=0, sigma=0.7):
    rng = np.random.default_rng(seed)
    A = rng.random((L, L))
    A /= A.sum(1, keepdims=True)
    data = DataModel.create(d=d, L=L, variances=rng.uniform(0.2, 1.0, (L, d)))
    st = seed_streams(seed)
    teacher = make_teacher(d, r_t, MixedTarget(omega, A), st.teacher)
    X, Y = sample_dataset(data, teacher, n, st.train)
    return data, teacher, X, Y, A


# ----------------------------------------------------------------------------- data
def test_shapes_and_targets():
    data, teacher, X, Y, A = _instance()
    assert X.shape == (5, 3, 9) and Y.shape == (5, 3, 9)
    h = teacher.fields(X)
    assert h.shape == (5, 3, 2)
    for T in (MixedTarget(0.4, A), SemanticTarget(), PositionalTarget(A)):
        M = T(h)
        assert M.shape == (5, 3, 3)
        assert torch.allclose(M.sum(-1), torch.ones(5, 3, dtype=M.dtype))
    # pure cases of the mixed target
    assert torch.allclose(MixedTarget(0.0, A)(h), SemanticTarget()(h))
    assert torch.allclose(MixedTarget(1.0, A)(h), PositionalTarget(A)(h))
    Q0 = np.random.default_rng(1).standard_normal((9, 2))
    for student in (TiedAttention(Q0, data.P), UntiedAttention(Q0, Q0[:, ::-1], data.P),
                    LinearBaseline(np.eye(3))):
        assert student(X).shape == X.shape


def test_positional_encodings_and_A_checks():
    P2 = default_positional_encodings(2, 16)
    assert np.allclose(P2[0], 1 / 4) and np.allclose(P2[1], -1 / 4)
    P4 = default_positional_encodings(4, 64)
    assert np.allclose(P4 @ P4.T, np.eye(4))
    assert np.allclose(np.abs(P4), 1 / 8)
    assert check_row_stochastic([0.6, 0.4, 0.4, 0.6]).shape == (2, 2)
    with pytest.raises(ValueError, match="A"):
        check_row_stochastic([0.5, 0.6, 0.4, 0.6])
    with pytest.raises(ValueError, match="A"):
        check_row_stochastic([1.0, 0.0, 0.0])


@pytest.mark.filterwarnings("ignore::numerics.applications.attention.train.NonConvergenceWarning")
def test_seed_reproducibility():
    kw = dict(omega=0.3, alpha=1.0, d=40, steps=30, n_test=300, init="random")
    a = simulate.run_attention_seed(3, **kw)
    b = simulate.run_attention_seed(3, **kw)
    c = simulate.run_attention_seed(4, **kw)
    for k in ("q", "m", "theta", "eps_g", "train_loss"):
        assert a[k] == b[k]
    assert a["eps_g"] != c["eps_g"] and a["q"] != c["q"]
    # the teacher and data of a seed do not depend on the init or on n_test
    s1, s2 = seed_streams(7), seed_streams(7)
    assert np.array_equal(s1.teacher.standard_normal(5), s2.teacher.standard_normal(5))
    assert np.array_equal(s1.train.standard_normal(5), s2.train.standard_normal(5))


# ----------------------------------------------------------------------------- risk
def _softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_risk_matches_numpy():
    data, teacher, X, Y, A = _instance()
    d, lam = 9, 0.37
    Xn, Qs = X.numpy(), teacher.Qstar
    rng = np.random.default_rng(2)
    Q = rng.standard_normal((d, 2))
    K = rng.standard_normal((d, 2))
    xp = Xn + data.P
    hs = Xn @ Qs / math.sqrt(d)
    T = 0.6 * _softmax(hs @ hs.transpose(0, 2, 1)) + 0.4 * A
    Yn = T @ Xn
    assert np.allclose(Yn, Y.numpy())
    hq, hk = xp @ Q / math.sqrt(d), xp @ K / math.sqrt(d)
    cases = [
        (TiedAttention(Q, data.P), {"Q": L2(lam)}, _softmax(hq @ hq.transpose(0, 2, 1)) @ xp,
         lam / 2 * (Q**2).sum()),
        (UntiedAttention(Q, K, data.P), {"Q": L2(lam), "K": L2(2 * lam)},
         _softmax(hq @ hk.transpose(0, 2, 1)) @ xp, lam / 2 * (Q**2).sum() + lam * (K**2).sum()),
        (LinearBaseline(A), {"B": L2(lam)}, A @ Xn, lam / 2 * (A**2).sum()),
    ]
    for student, regs, f, pen in cases:
        expected = ((Yn - f) ** 2).sum() / (2 * d) + pen  # a SUM over samples
        got = float(risk(student, X, Y, regs).detach())
        assert got == pytest.approx(expected, rel=1e-12)
        if hasattr(student, "attention_encoded"):  # the fast Gram path is the same loss
            stats = GramStats.build(student, X, Y)
            assert torch.allclose(sample_losses(student, X, Y, stats), sample_losses(student, X, Y),
                                  rtol=1e-10, atol=1e-13)


def test_gradient_finite_differences():
    # autograd gradient of R (direct and Gram paths, tied and untied) vs central differences
    data, teacher, X, Y, _ = _instance(d=6, n=4)
    rng = np.random.default_rng(3)
    Q0, K0 = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    for student, regs in ((TiedAttention(Q0, data.P), {"Q": L2(0.1)}),
                          (UntiedAttention(Q0, K0, data.P), {"Q": L2(0.1), "K": L2(0.3)})):
        for stats in (None, GramStats.build(student, X, Y)):
            def R():
                return data_risk(student, X, Y, stats) + penalty(student, regs)

            student.zero_grad()
            R().backward()
            eps = 1e-6
            for name, p in student.named_parameters():
                fd = torch.zeros_like(p)
                with torch.no_grad():
                    for idx in np.ndindex(*p.shape):
                        p[idx] += eps
                        up = float(R())
                        p[idx] -= 2 * eps
                        down = float(R())
                        p[idx] += eps
                        fd[idx] = (up - down) / (2 * eps)
                assert torch.allclose(p.grad, fd, rtol=1e-6, atol=1e-8), name


def test_fit_linear_is_exact_minimiser():
    data, teacher, X, Y, _ = _instance(n=30)
    B = fit_linear(X, Y, ridge=1e-3)
    student = LinearBaseline(B)
    risk(student, X, Y, {"B": L2(1e-3)}).backward()
    assert student.B.grad.abs().max() < 1e-10


# ----------------------------------------------------------------------------- metrics
def test_order_parameters_hand_made():
    d, L = 16, 2
    data = DataModel.create(d=d, L=L, variances=[0.25, np.linspace(0.1, 0.5, d)])
    Qs = np.random.default_rng(4).standard_normal((d, 1))
    a, b = 0.7, -1.3
    Q = a * Qs + b * data.P[0][:, None] * math.sqrt(d)  # a teacher part and a positional part
    ops = order_parameters(-Q, -Qs, data.variances, data.P)  # signs are fixed away
    pt = ops["per_token"]
    for l in range(L):
        v = data.variances[l]
        assert pt["q"][l, 0, 0] == pytest.approx((Q[:, 0] ** 2 * v).sum() / d)
        assert pt["theta"][l, 0, 0] == pytest.approx(abs((Q[:, 0] * v * Qs[:, 0]).sum() / d))
        assert pt["rho"][l, 0, 0] == pytest.approx((Qs[:, 0] ** 2 * v).sum() / d)
        assert pt["rho_bar"][l] == pytest.approx(v.mean())
    m1 = (Q[:, 0] @ data.P[0]) / math.sqrt(d)
    assert ops["m"] == pytest.approx(abs(m1)) and ops["m"] > 0
    assert pt["m"][1, 0] == pytest.approx(-ops["m"])  # p_2 = -p_1
    assert ops["theta"] > 0
    assert isinstance(ops["q"], float) and ops["q"] == pytest.approx(pt["q"][0, 0, 0])
    # rank 2: matrices; untied sign groups flip Q and K columns together
    Q2 = np.concatenate([Q, -0.5 * Qs], axis=1)
    ops2 = order_parameters(Q2, Qs, data.variances, data.P)
    assert np.asarray(ops2["q"]).shape == (2, 2) and np.asarray(ops2["theta"]).shape == (2, 1)
    assert np.allclose(ops2["q"], (Q2.T * data.variances[0]) @ Q2 / d)
    raw_m = Q2.T @ data.P[0] / math.sqrt(d)
    assert np.all(np.asarray(ops2["m"]) >= 0)  # tied: each column flipped on its own
    assert np.allclose(np.abs(ops2["m"]), np.abs(raw_m))
    ops3 = order_parameters(Q2, Qs, data.variances, data.P, sign_groups=[[0, 1]])
    s = np.sign(raw_m[np.argmax(np.abs(raw_m))])
    assert np.allclose(ops3["m"], s * raw_m)  # one group: one common sign


def test_mean_se():
    m, s = mean_se([1.0, 2.0, 3.0])
    assert m == 2.0 and s == pytest.approx(1 / math.sqrt(3))
    assert math.isnan(mean_se([1.0])[1])


# ----------------------------------------------------------------------------- training
@pytest.mark.filterwarnings("ignore::numerics.applications.attention.train.NonConvergenceWarning")
def test_semantic_stays_semantic():
    res = simulate.run_attention(0.3, 2.0, 150, "semantic", seeds=1, steps=600, n_test=2000)
    assert res["theta"] > 0.05
    assert abs(res["m"]) < 0.05
    assert res["eps_g"] < 3e-3


@pytest.mark.filterwarnings("ignore::numerics.applications.attention.train.NonConvergenceWarning")
def test_positional_stays_positional():
    res = simulate.run_attention(0.3, 0.5, 150, "positional", seeds=1, steps=1500, n_test=2000)
    assert res["m"] > 0.1
    assert abs(res["theta"]) < 0.05


def test_nonconvergence_is_reported():
    with pytest.warns(NonConvergenceWarning):
        res = simulate.run_attention(0.3, 1.0, 40, "random", seeds=2, steps=3, n_test=100)
    assert res["converged"] is False and res["n_converged"] == 0
    assert res["per_seed"]["converged"] == [False, False]
    assert len(res["per_seed"]["q"]) == 2 and res["q_se"] >= 0


def test_proximal_l1():
    reg = ElasticNet(l1=0.5, l2=0.1)
    w = torch.tensor([-2.0, -0.1, 0.3, 1.0], dtype=torch.float64)
    assert torch.allclose(reg.prox(w, 0.4), torch.tensor([-1.8, 0.0, 0.1, 0.8], dtype=torch.float64))
    data, teacher, X, Y, _ = _instance(d=20, L=2, n=40, r_t=1)
    Q0 = init_columns("semantic", 20, 1, teacher.Qstar, data.P, np.random.default_rng(0))
    student = TiedAttention(Q0, data.P)
    res = train(student, X, Y, {"Q": ElasticNet(l1=0.2, l2=0.01)},
                TrainConfig(steps=4000, lr=0.1, tol_grad=1e-6, tol_loss=1e-6))
    assert res.converged
    assert (student.Q.detach() == 0).sum() > 0  # ℓ1 produces exact zeros


@pytest.mark.filterwarnings("ignore::numerics.applications.attention.train.NonConvergenceWarning")
def test_general_L_rank_untied_plumbing():
    A3 = [[0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]
    res = simulate.run_attention(0.5, 1.0, 32, "positional", seeds=2, A=A3, r=2, r_t=2,
                                 untied=True, lam_K=0.02, steps=20, n_test=64)
    assert res["model"] == "untied"
    assert np.asarray(res["q"]).shape == (4, 4)  # W = [Q K], r -> 2r
    assert np.asarray(res["theta"]).shape == (4, 2) and np.asarray(res["m"]).shape == (4,)
    assert np.asarray(res["per_token"]["m"]).shape == (3, 4)
    assert np.asarray(res["theta_se"]).shape == (4, 2)
    lin = simulate.run_linear(0.5, 1.0, 32, seeds=2, A=A3, r_t=2, n_test=64)
    assert np.asarray(lin["B"]).shape == (3, 3) and lin["eps_g_se"] >= 0


# ----------------------------------------------------------------------------- linear
def test_linear_baseline_vs_formula():
    # ε_g^lin = ½ Σ ρ̄_κ Var[T(h*)_{ℓκ}], h*_ℓ ~ N(0, ρ_ℓ). At finite d the teacher's own
    # ρ_ℓ = Q*ᵀΣQ*/d differs from σ² by O(1/√d) (≈5% at d=400), more than the Monte-Carlo
    # error, so the formula is evaluated at the seed's ρ_ℓ (→ σ² as d → ∞).
    res = simulate.run_linear(0.3, 2.0, 400, seeds=[0], n_test=20000)
    run = res["runs"][0]
    f = linear_formula_mc(MixedTarget(0.3), run["rho"], run["rho_bar"], n_mc=200_000, seed=1)
    se = math.hypot(run["eps_g_mc_se"], f["eps_g_se"])
    assert abs(res["eps_g"] - f["eps_g"]) < 3 * se
    assert np.abs(np.asarray(res["B"]) - f["B"]).max() < 0.01


# ----------------------------------------------------------------------------- CLI
def _cli(*args):
    return spawn(*args, module="numerics.simulate", cwd=REPO)


def test_cli_bad_inputs():
    cases = {
        "d": ["attention", "--d", "0"],
        "alpha": ["attention", "--alpha", "-1"],
        "omega": ["attention", "--omega", "1.5"],
        "lam": ["attention", "--lam", "-0.1"],
        "init": ["attention", "--init", "magic"],
        "A": ["attention", "--A", "0.5,0.6,0.4,0.6"],
    }
    if not torch.cuda.is_available():
        cases["device"] = ["attention", "--device", "cuda"]
    procs = {k: _cli(*v, "--steps", "1", "--n-test", "10") for k, v in cases.items()}
    for name, p in procs.items():
        out, err = p.communicate(timeout=120)
        assert p.returncode != 0, name
        lines = err.strip().splitlines()
        assert len(lines) == 1 and name in lines[0], (name, err)


@pytest.mark.filterwarnings("ignore::numerics.applications.attention.train.NonConvergenceWarning")
def test_cli_runs_and_sweep_resume(tmp_path, capsys):
    assert simulate.main(["attention", "--d", "30", "--alpha", "1", "--steps", "20",
                          "--n-test", "50", "--seeds", "2", "--json", "--quiet"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert set(["q", "q_se", "m", "theta", "eps_g", "train_loss", "converged"]) <= set(res)
    assert len(res["per_seed"]["eps_g"]) == 2
    assert simulate.main(["linear", "--d", "30", "--n-test", "50", "--quiet"]) == 0
    assert "eps_g" in capsys.readouterr().out
    out = tmp_path / "s.csv"
    argv = ["sweep", "--alphas", "0.5,1", "--d", "30", "--inits", "semantic,positional",
            "--models", "attention,linear", "--steps", "10", "--n-test", "50", "--out", str(out),
            "--quiet"]
    assert simulate.main(argv) == 0
    rows = list(csv.DictReader(open(out)))
    assert len(rows) == 6 and list(rows[0]) == simulate.CSV_COLUMNS
    assert {(r["model"], r["alpha"], r["init"]) for r in rows} == {
        ("attention", a, i) for a in ("0.5", "1.0") for i in ("semantic", "positional")
    } | {("linear", "0.5", "-"), ("linear", "1.0", "-")}
    assert simulate.main(argv) == 0  # resume: every key is already there
    assert len(list(csv.DictReader(open(out)))) == 6
    assert "0 row(s)" in capsys.readouterr().out

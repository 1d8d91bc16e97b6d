"""Tied attention with a trainable low-rank value matrix (paper App. E.3, Fig. 13): the student,
its risk, and its GD transition against the tied model's (slow, d = 400, three seeds)."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (extra 'sim')")

from numerics.models import TiedAttention  # noqa: E402
from numerics.train import _has_gram_form, sample_losses  # noqa: E402
from numerics.value_matrix import crossing, gd_transition, make_value_student, run_value_seed  # noqa: E402


def _student(d=12, r_v=2, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    P = np.stack([np.ones(d), -np.ones(d)]) / math.sqrt(d)
    Q = rng.normal(size=(d, 1))
    U, W = scale * rng.normal(size=(d, r_v)), scale * rng.normal(size=(d, r_v))
    return make_value_student(Q, U, W, P), Q, U, W, P


def test_output_is_attention_times_encoded_input_times_the_value_matrix():
    st, Q, U, W, P = _student()
    d = Q.shape[0]
    x = torch.as_tensor(np.random.default_rng(1).normal(size=(5, 2, d)))
    V = np.eye(d) + U @ W.T / math.sqrt(d)  # the explicit d x d value matrix
    xp = x.numpy() + P
    h = xp @ Q / math.sqrt(d)
    G = h @ h.transpose(0, 2, 1)
    S = np.exp(G) / np.exp(G).sum(-1, keepdims=True)
    with torch.no_grad():
        np.testing.assert_allclose(st(x).numpy(), S @ xp @ V, rtol=1e-12)


def test_without_correction_it_is_the_tied_student_and_its_risk_takes_the_direct_path():
    st, Q, U, W, P = _student(scale=0.0)
    tied = TiedAttention(Q, P)
    x = torch.as_tensor(np.random.default_rng(2).normal(size=(7, 2, 12)))
    y = torch.as_tensor(np.random.default_rng(3).normal(size=(7, 2, 12)))
    with torch.no_grad():
        assert torch.equal(st(x), tied(x))
    # the Gram shortcut of numerics.train assumes f = S(x+P)(x+P): it must not be used here
    assert not _has_gram_form(st)
    st2 = _student(scale=1.0)[0]
    with torch.no_grad():
        direct = ((y - st2(x)) ** 2).sum(dim=(-2, -1)) / (2 * 12)
        assert torch.allclose(sample_losses(st2, x, y), direct, rtol=1e-14)


def test_crossing_is_the_root_of_the_fitted_line():
    assert crossing([1.0, 1.2, 1.4], [-0.2, 0.0, 0.2]) == pytest.approx(1.2, abs=1e-12)
    assert crossing([1.0, 2.0], [1.0, 3.0]) == pytest.approx(0.5, abs=1e-12)
    assert crossing([1.0], [0.3]) is None and crossing([1.0, 2.0], [1.0, 1.0]) is None


def test_gradient_descent_removes_the_correction():
    # At d = 100 the ridge (lam = 0.01) exceeds the spurious linear pull on U W^T (operator norm
    # ~ sqrt(alpha) eps / sqrt(d) ~ 5e-3, docs/explanation/value_matrix.md), so U = W = 0 is the stable
    # minimum and GD started with ||V - I||_F/||I||_F ~ 1 must end at ~0 (tolerance of the stop
    # criterion grad_norm <= 1e-6 over lam: 1e-4), on the tied model's fixed point.
    from numerics.simulate import torch_threads

    kw = dict(omega=0.3, alpha=1.2, d=100, init="semantic", n_test=2000)
    with torch_threads(1):  # small per-step tensors: one thread is faster on a shared machine
        v = run_value_seed(0, value=True, **kw)
        t = run_value_seed(0, value=False, **kw)
    assert v["converged"] and t["converged"]
    assert v["value_correction_init"] > 0.5 and v["value_correction"] < 1e-4
    for k in ("q", "m", "theta", "train_loss"):
        assert v[k] == pytest.approx(t[k], rel=1e-3), k


def test_bad_value_settings_are_refused():
    with pytest.raises(ValueError, match="value_rank"):
        run_value_seed(0, d=20, alpha=1.0, value_rank=0)
    with pytest.raises(ValueError, match="value_init"):
        run_value_seed(0, d=20, alpha=1.0, value_init=-1.0)


@pytest.mark.slow
def test_value_matrix_leaves_the_gd_transition_where_the_tied_one_is_d400():
    """Paper App. E.3: with a value matrix the transition line "largely resembles" the tied one.

    At d = 400, omega = 0.3, seeds 0-2, alpha in 0.85, 1, 1.15 x the theory's alpha_c: the GD
    transition of each student per seed (same teacher and data for both), and the paired shift
    value - tied. Tolerance: the shift must be smaller than the seed-to-seed spread (std) of
    the tied GD transition itself at this d, the resolution with which GD locates alpha_c here.
    """
    from numerics.experiments import ALPHA_FACTORS, theory_alpha_c

    ac = theory_alpha_c([0.3])[0.3]
    alphas = [round(f * ac, 4) for f in ALPHA_FACTORS]
    seeds = [0, 1, 2]
    tied = gd_transition(0.3, alphas, seeds, d=400, value=False, n_test=5000)
    val = gd_transition(0.3, alphas, seeds, d=400, value=True, n_test=5000)
    assert all(g["branches_ok"] for g in tied["gaps"] + val["gaps"])
    assert max(g["value_correction"] for g in val["gaps"]) < 1e-4
    t = np.array(tied["alpha_c_per_seed"], dtype=float)
    v = np.array(val["alpha_c_per_seed"], dtype=float)
    spread = t.std(ddof=1)
    assert spread > 0
    assert abs(np.mean(v - t)) <= spread, (v, t)


@pytest.mark.slow
def test_the_c10_declaration_of_the_doc_derives(tmp_path):
    """docs/explanation/value_matrix.md gives the App. C.10 version (output in R^{L x r_v}) as a declaration:
    it must be a valid model whose saddle point derives, exactly as printed there (the symbolic
    saddle point of this r = r_t = 2 model takes about 90 CPU-seconds: slow suite)."""
    import re
    from pathlib import Path

    from replica import Derivation
    from replica.registry import load_model

    doc = (Path(__file__).resolve().parent.parent / "docs" / "explanation" / "value_matrix.md").read_text()
    block = re.search(r"```python\n(# value-matrix attention of App\. C\.10.*?)```", doc, re.S)
    assert block, "the C.10 declaration block is missing from docs/explanation/value_matrix.md"
    path = tmp_path / "attention_value_c10.py"
    path.write_text(block.group(1))
    model = load_model(str(path))
    assert (model.L, model.r, model.r_t) == (2, 2, 2)
    sp_ = Derivation(model).saddle_point
    assert len(sp_.entropic) == len(sp_.energetic) == 24

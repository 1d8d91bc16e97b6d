"""The histogram task (paper App. A): targets, the attention index, the freezing, and the two
minima of a small configuration (seconds); the default configuration's minima (slow)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (extra 'sim')")

from numerics.applications.attention.histogram import (HistogramConfig, attention_index, build_model, histogram_targets,  # noqa: E402
                                quick_config, run_seed, sample_sequences)


def test_targets_are_the_histogram_of_the_paper():
    # paper A.1: each position gets the number of occurrences of its token
    x = np.array([[1, 2, 1, 1, 0, 2]])  # "BCBBAC"
    assert histogram_targets(x).tolist() == [[3, 2, 3, 3, 1, 2]]
    x, y = sample_sequences(200, 7, 4, np.random.default_rng(0))
    assert y.min() >= 1 and y.max() <= 7
    # every token value v occurring c times contributes c entries equal to c
    for row, h in zip(x, y):
        for v in np.unique(row):
            c = int((row == v).sum())
            assert np.all(h[row == v] == c)


def _random_sequences(n=400, T=6, L=5, seed=1):
    return np.random.default_rng(seed).integers(0, L, size=(n, T))


def test_index_of_a_purely_positional_attention_is_one():
    x = _random_sequences()
    n, T = x.shape
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(T, T))
    A = np.broadcast_to(np.exp(logits) / np.exp(logits).sum(1, keepdims=True), (n, T, T))
    idx = attention_index(A, x, 5)
    assert idx["r2_position"] == pytest.approx(1.0, abs=1e-12)
    # token pairs explain only the finite-sample bias ~ (groups - 1)/N = 24/12000
    assert idx["r2_token"] < 0.01
    assert idx["positional_index"] > 0.99
    # token-blind attention: identical tokens get the same weight as different ones, up to noise
    assert idx["same_token_ratio"] == pytest.approx(1.0, abs=0.05)


def test_index_of_a_purely_semantic_attention_is_zero():
    # every sequence holds each of its 3 tokens exactly twice, so every row has the same
    # denominator 2e^beta + 4 and the same-token weights are exactly e^beta times the others
    rng = np.random.default_rng(1)
    x = np.array([rng.permutation(5)[:3][rng.permutation([0, 0, 1, 1, 2, 2])] for _ in range(400)])
    beta = 2.0
    scores = beta * (x[:, :, None] == x[:, None, :])
    A = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    idx = attention_index(A, x, 5)
    assert idx["positional_index"] < 0.01
    assert idx["r2_token"] > 0.5
    # off-diagonal identical tokens get e^beta times the weight of different ones, exactly
    assert idx["same_token_ratio"] == pytest.approx(np.exp(beta), rel=1e-12)


def test_uniform_attention_has_no_index():
    x = _random_sequences()
    A = np.full((x.shape[0], 6, 6), 1 / 6)
    idx = attention_index(A, x, 5)
    assert idx["positional_index"] is None and idx["attention_spread"] == 0.0


def test_freezing_makes_the_attention_blind_to_tokens_or_to_positions():
    cfg = quick_config()
    x = torch.as_tensor(_random_sequences(50, cfg.T, cfg.alphabet))
    perm = torch.randperm(cfg.T, generator=torch.Generator().manual_seed(0))
    pos = build_model(cfg, "positional", 0)
    sem = build_model(cfg, "semantic", 0)
    with torch.no_grad():
        # positional: the same matrix for every sequence
        A = pos.attention(x)
        assert torch.allclose(A, A[:1].expand_as(A), atol=1e-7)
        # semantic: permuting the tokens permutes rows and columns of A (no position enters)
        S, Sp = sem.attention(x), sem.attention(x[:, perm])
        assert torch.allclose(Sp, S[:, perm][:, :, perm], atol=1e-6)
        # and the other one is not blind: the checks above can fail
        assert not torch.allclose(sem.attention(x), sem.attention(x)[:1].expand(50, -1, -1), atol=1e-4)
        assert not torch.allclose(pos.attention(x[:, perm]), pos.attention(x)[:, perm][:, :, perm], atol=1e-4)


def _both_minima(cfg):
    """Seed 0 of the positional and the semantic minimum, with one torch thread (small tensors:
    one thread is faster on a shared machine)."""
    from numerics.simulate import torch_threads

    with torch_threads(1):
        return run_seed(0, "positional", cfg), run_seed(0, "semantic", cfg)


def test_the_index_separates_the_two_minima_of_a_small_configuration():
    cfg = quick_config()
    pos, sem = _both_minima(cfg)
    # both learn the task (T = 6, 6 tokens, 25 epochs: well above the 1/6 of chance)
    assert pos["test_accuracy"] > 0.9 and sem["test_accuracy"] > 0.9
    assert pos["positional_index"] > 0.95 and sem["positional_index"] < 0.05
    assert pos["same_token_ratio"] == pytest.approx(1.0, abs=0.05) and sem["same_token_ratio"] > 1.5
    for r in (pos, sem):
        u = r["unfrozen"]
        assert 0 < u["relative_parameter_change"] < 0.5
        assert u["test_accuracy"] > 0.9


@pytest.mark.slow
def test_both_minima_of_the_default_configuration_reach_95_percent():
    """Issue 17's check: with the default configuration (T = 10, the paper's 15 tokens) both
    frozen minima reach >= 95 % test accuracy, and the index tells them apart. The stability
    check is left out here (two thirds of the time; docs/how-to/experiments.md reports it); the time
    budget of the full run (<= 5 minutes) is measured by ``python -m benchmarks --only
    histogram``, not by a test. Measured before (seed 0): 0.9987 and 0.9965, index 0.999 and
    0.0004, so a regression of a few per cent in either fails here."""
    cfg = HistogramConfig(stability=False)
    pos, sem = _both_minima(cfg)
    assert pos["test_accuracy"] >= 0.95 and sem["test_accuracy"] >= 0.95, (pos["test_accuracy"], sem["test_accuracy"])
    assert pos["positional_index"] > 0.9 and sem["positional_index"] < 0.1
    assert sem["same_token_ratio"] > 2.0


def test_cli_json_and_errors():
    base = [sys.executable, "-m", "numerics.simulate", "histogram"]
    out = subprocess.run(base + ["--init", "semantic", "--T", "5", "--alphabet", "4", "--dim", "4", "--hidden", "16",
                                 "--n-train", "300", "--n-test", "100", "--epochs", "2", "--sgd-epochs", "1",
                                 "--json", "--quiet"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert {"test_accuracy", "positional_index", "same_token_ratio", "cpu_seconds", "unfrozen"} <= set(res)
    for args, name in ((["--init", "both"], "init"), (["--init", "semantic", "--seeds", "0"], "seeds"),
                       (["--init", "semantic", "--T", "1"], "T"), (["--init", "semantic", "--lr", "-1"], "lr"),
                       (["--init", "semantic", "--plot", "/nonexistent-dir/maps.png"], "plot")):
        bad = subprocess.run(base + args, capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2, (args, bad.stderr)
        assert len(bad.stderr.strip().splitlines()) == 1 and name in bad.stderr, bad.stderr

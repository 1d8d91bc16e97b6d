"""The simulator on CUDA gives the numbers of the CPU path (issue 17, item 3).

Same seeds, same data (generated with numpy on the CPU, then moved), same initialisation:
in float64 the GD runs must agree to ``rtol = 1e-8``. Why that tolerance: the only
difference between the devices is the order of floating-point reductions (sums over the
``n·L·d`` terms of a step, ≈ ``√(nLd)·1e-16 ≲ 1e-13`` relative per step), and GD converging
to a stable minimum contracts such differences instead of amplifying them; 1e-8 leaves five
orders of magnitude of margin while a wrong device path (a missing transfer, a float32 cast,
a different seed stream) would differ at 1e-3 or more. The histogram transformer runs in
float32: its forward pass is compared at ``rtol = 1e-4`` (float32 epsilon 1.2e-7 times
reductions over a few hundred terms).

On a machine without a GPU every test here is skipped, and the skip says why.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (extra 'sim')")

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device: torch.cuda.is_available() is False on this machine, so the CPU-vs-CUDA "
           "agreement of the simulator cannot be measured here (run this file on a GPU machine)")

KEYS = ("q", "m", "theta", "train_loss", "eps_g")


def _close(a: dict, b: dict, keys=KEYS, rtol=1e-8, atol=1e-12) -> None:
    for k in keys:
        assert math.isclose(a[k], b[k], rel_tol=rtol, abs_tol=atol), (k, a[k], b[k])


@pytest.mark.parametrize("init, alpha", [("semantic", 1.5), ("positional", 0.8)])
def test_tied_gradient_descent_is_the_same_on_cpu_and_cuda(init, alpha):
    from numerics.applications.attention.simulate import run_attention_seed

    kw = dict(omega=0.3, alpha=alpha, d=300, init=init, steps=400, lr=1.5, stop_grad=0.0, n_test=2000)
    cpu = run_attention_seed(0, device="cpu", **kw)
    gpu = run_attention_seed(0, device="cuda", **kw)
    _close(cpu, gpu)


def test_value_matrix_student_is_the_same_on_cpu_and_cuda():
    from numerics.applications.attention.value_matrix import run_value_seed

    kw = dict(omega=0.3, alpha=1.2, d=200, init="semantic", steps=300, stop_grad=0.0, n_test=2000)
    cpu = run_value_seed(0, device="cpu", **kw)
    gpu = run_value_seed(0, device="cuda", **kw)
    _close(cpu, gpu, KEYS + ("value_correction",))


def test_histogram_transformer_forward_is_the_same_on_cpu_and_cuda():
    from numerics.applications.attention.histogram import build_model, quick_config, sample_sequences

    cfg = quick_config()
    x, _ = sample_sequences(64, cfg.T, cfg.alphabet, np.random.default_rng(0))
    for init in ("positional", "semantic"):
        m_cpu = build_model(cfg, init, seed=3)
        m_gpu = build_model(cfg, init, seed=3).to("cuda")
        X = torch.as_tensor(x)
        with torch.no_grad():
            np.testing.assert_allclose(m_gpu(X.cuda()).cpu().numpy(), m_cpu(X).numpy(), rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(m_gpu.attention(X.cuda()).cpu().numpy(), m_cpu.attention(X).numpy(),
                                       rtol=1e-4, atol=1e-6)


def test_cli_runs_on_cuda(tmp_path):
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "numerics.simulate", "attention", "--d", "200", "--alpha", "1",
                          "--steps", "200", "--n-test", "1000", "--device", "cuda", "--json", "--quiet"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["params"]["device"] == "cuda"

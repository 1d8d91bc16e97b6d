"""Seconds per GAMP iteration at d = 4000, n = 8000, L = 2 on CPU (issue 16; target < 0.5 s).

The paper's model (omega = 0.3, alpha = 2, semantic start), damped GAMP, numpy backend
(and the torch backend on CPU, and CUDA when available), with the default prox schedule
(every start each 10th iteration) and with every start at every iteration. Each iteration is two ``nL x d``
matrix products and the per-sample prox of the generated module (multistart, warm-started
from the previous iteration). Warm-up iterations are discarded; the median of the timed ones
is reported, with the split between the matrix products and the output channel::

    python -m benchmarks.gamp_iteration [--d 4000 --alpha 2 --iterations 10 --json]

Timings are only meaningful on a quiet machine (the lead re-measures them; see RESULTS.md).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np


def measure(d: int = 4000, alpha: float = 2.0, iterations: int = 10, warmup: int = 3, backend: str = "numpy",
            device: str = "cpu", multistart_every: int = 10) -> dict:
    """Per-iteration wall times of GAMP (median, min) and the time in the output channel."""
    from numerics.gamp import GAMP, make_problem, model_spec

    spec = model_spec("attention", {"omega": 0.3})
    t0 = time.perf_counter()
    pr = make_problem(spec, alpha, d, 0, normalize_teacher=False)
    setup = time.perf_counter() - t0
    g = GAMP(spec, pr, damping=0.8, backend=backend, device=device, multistart_every=multistart_every)
    channel_times: list[float] = []

    class Timed:
        """The output channel, timed."""

        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, k):
            return getattr(self.inner, k)

        def __call__(self, *a, **k):
            s = time.perf_counter()
            r = self.inner(*a, **k)
            channel_times.append(time.perf_counter() - s)
            return r

    g.out = Timed(g.out)  # type: ignore[assignment]
    stamps: list[float] = []

    def progress(_msg: str) -> None:
        stamps.append(time.perf_counter())

    g.run("semantic", max_iter=warmup + iterations, tol=1e-300, trace=False, progress=progress, log_every=1)
    per = np.diff(stamps)[warmup:]
    ch = np.array(channel_times[1:])[warmup:warmup + per.size]  # iteration k's channel lies between stamps k-1, k
    return {"d": d, "n": pr.n, "L": spec.L, "backend": backend, "device": device, "setup_s": setup,
            "multistart_every": multistart_every,
            "iteration_median_s": float(np.median(per)), "iteration_min_s": float(np.min(per)),
            "channel_median_s": float(np.median(ch)), "iterations_timed": int(per.size),
            "target_s": 0.5}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gamp_iteration", description=__doc__.split("\n\n")[0])
    p.add_argument("--d", type=int, default=4000)
    p.add_argument("--alpha", type=float, default=2.0)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--torch", action="store_true", help="also the torch backend (CPU, and CUDA if available)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    # The default (every start each 10th iteration, warm + h = omega in between) and every start
    # at every iteration (what the state-evolution study runs).
    rows = [measure(args.d, args.alpha, args.iterations),
            measure(args.d, args.alpha, args.iterations, multistart_every=1)]
    if args.torch:
        import torch

        rows.append(measure(args.d, args.alpha, args.iterations, backend="torch", device="cpu"))
        if torch.cuda.is_available():
            rows.append(measure(args.d, args.alpha, args.iterations, backend="torch", device="cuda"))
    machine = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
    if args.json:
        print(json.dumps({"machine": machine, "rows": rows}, indent=1))
    else:
        print(f"machine: {machine}")
        for r in rows:
            print(f"GAMP iteration d={r['d']} n={r['n']} L={r['L']} {r['backend']}/{r['device']} "
                  f"multistart every {r['multistart_every']}: "
                  f"median {r['iteration_median_s']:.3f} s (min {r['iteration_min_s']:.3f} s; output channel "
                  f"{r['channel_median_s']:.3f} s), target < {r['target_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

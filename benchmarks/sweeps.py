"""The ``sweep`` section of ``python -m benchmarks`` (issue 19): how ``replica sweep`` scales.

A 3×3 grid of phase points of the paper's attention model over ``(omega, sigma)`` (kind
``phase``: alpha_c, alpha_l and the spinodals by continuation of the transition's two branches;
the nine points are independent tasks, so the scaling measured is the executor's, not the
warm-start chains'), computed by the command users run -- ``replica sweep SPEC --no-cache`` in a
fresh process, so every run computes every point -- on 1, 2 and 4 local worker processes and on
a Dask ``LocalCluster`` of 2. Each row's ratio is against the 1-worker run of the same benchmark
run. Every run's dataset must equal the 1-worker one bit for bit (an assertion): the executors
may change the time, never the numbers.

The phase points are kept cheap so that the four runs take a few minutes on 2 cores: only the
pair (semantic, positional) is followed, with ``early_stop``, on ``alpha`` in ``[0.5, 2.5]``
(every ``alpha_c`` and ``alpha_l`` of the grid lies inside: 0.64-1.77 and 0.75-2.27 measured
with ``--quick``), on ``sigma`` in ``[0.5, 0.6]``
(at ``sigma = 0.4`` ``alpha_c`` is 3.5 at ``omega = 0.2`` and above 4 at 0.3 and 0.4). The
earlier spec (``alpha`` from 0.1, the agnostic branch too, ``sigma = 0.4, 0.5, 0.6``) did not
finish in 840 s: at ``(omega, sigma) = (0.4, 0.6)`` the continuation retried a failing last
stretch down to ``alpha = 0.1`` forever (fixed in ``replica.phase.follower``; that point now takes
~4 s on ``gh:8``, tests/test_phase.py).
Before the timed runs one solve in a fresh process fills numba's on-disk cache, so that no run
pays the compilation. ``--quick`` uses a coarse quadrature (``gh:8``); the four ``--quick`` runs
(377 solves each) took 322 s in all on a 2-core machine at load 4-7, i.e. roughly 2-3 minutes
on a quiet one (the lead's timings go to RESULTS.md).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OMEGAS = [0.2, 0.3, 0.4]
SIGMAS = [0.5, 0.55, 0.6]
#: (label, command-line arguments) of the executors compared; the first is the baseline
RUNS = [("1 local worker", ["--jobs", "1"]), ("2 local workers", ["--jobs", "2"]),
        ("4 local workers", ["--jobs", "4"]), ("Dask LocalCluster of 2", ["--scheduler", "local:2"])]


def spec_text(quick: bool) -> str:
    return f"""\
model = "attention"
description = "benchmark: 3x3 (omega, sigma) grid of phase points"
[grid]
omega = {OMEGAS}
sigma = {SIGMAS}
[compute]
kind = "phase"
branches = ["semantic", "positional"]
early_stop = true
alpha_min = 0.5
alpha_max = 2.5
{'quadrature = "gh:8"' if quick else ''}
"""


def _replica(*args: str, timeout: float = 7200) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "replica", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    wall = time.perf_counter() - t
    if res.returncode != 0:
        raise RuntimeError(f"replica {' '.join(args)} exited {res.returncode}: {res.stderr.strip()[-1500:]}")
    return wall, res


def bench_sweep(quick: bool, spec: str | None = None, what: str = "3x3 (omega, sigma) phase points"
                ) -> tuple[list[dict], dict]:
    """The rows of the section; ``spec`` replaces the benchmark's grid (a smoke check of this code
    on a cheap grid: ``bench_sweep(True, spec=..., what=...)``)."""
    from benchmarks.common import row
    from replica.sweep import open_sweep

    rows, data = [], {"spec": spec or spec_text(quick), "runs": {}}
    tmp = Path(tempfile.mkdtemp(prefix="replica-bench-sweep-"))
    try:
        path = tmp / "grid.toml"
        path.write_text(data["spec"])
        _replica("solve", "attention", "--omega", "0.3", "--alpha", "2", "--branch", "semantic", "--json")
        reference = base = None
        for label, args in RUNS:
            out = tmp / f"{len(data['runs'])}.nc"
            la = os.getloadavg()[0]
            wall, res = _replica("sweep", str(path), *args, "--no-cache", "--quiet", "--json", "--out", str(out))
            summary = json.loads(res.stdout)
            ds = open_sweep(out)
            if reference is None:
                reference, base = ds, wall
            identical = bool(ds.identical(reference))
            assert identical, f"{label}: the dataset differs from the 1-worker run"
            solves = int(ds.solves.sum()) if "solves" in ds else None
            data["runs"][label] = dict(seconds=wall, sweep_seconds=summary["seconds"], runs_on=summary["runs_on"],
                                       solves=solves, failed=summary["failed"], loadavg=la)
            rows.append(row("sweep", f"{what}, {label}", wall, "s", baseline=base if label != RUNS[0][0] else None,
                            note=f"fresh process{f', {solves} solves' if solves is not None else ''}, "
                                 f"{summary['failed']} failed, dataset identical to 1 worker: {identical}; "
                                 f"load {la:.1f}"))
        for name in ("alpha_c", "alpha_l"):
            if name in reference:
                data[name] = reference[name].values.tolist()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows, data

"""Finite-size calibration of tests/test_elastic_net_agreement.py (elastic-net attention, l1 = 0.003).

Runs proximal GD (the tests' settings, seeds 0-15 by default, which the tests do not use) at each
``d`` for each point and prints ``(mean - theory, std)`` of every compared quantity in the form of
the tests' ``CAL`` table::

    python -m benchmarks.elastic_net_calibration --points en_sem,en_pos --ds 200,400
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_elastic_net_agreement as T  # noqa: E402


def calibrate(point: str, d: int, seeds) -> dict[str, tuple[float, float]]:
    sims = T._simulate(point, d, seeds)
    theory = T._theory(point)
    return {k: (float(np.mean([s[k] for s in sims]) - theory[k]), float(np.std([s[k] for s in sims], ddof=1)))
            for k in theory}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", default=",".join(T.POINTS))
    ap.add_argument("--ds", default="200,400")
    ap.add_argument("--seeds", default=",".join(str(s) for s in range(16)))
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    for point in a.points.split(","):
        for d in (int(x) for x in a.ds.split(",")):
            t0 = time.perf_counter()
            row = calibrate(point, d, seeds)
            print(f"    ({point!r}, {d}): {{" + ", ".join(f"{k!r}: ({b:.2g}, {s:.2g})" for k, (b, s) in row.items())
                  + f"}},   # {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

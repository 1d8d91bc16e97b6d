"""Finite-size calibration of the theory-vs-simulation checks in tests/test_attention_variants.py.

Runs the simulator (same settings as the tests, seeds 0-4 by default, which the tests do not
use) at each ``d`` for each point and prints ``(mean - theory, std)`` of every compared quantity,
as the ``CAL`` table of the tests expects, plus a readable table::

    python -m benchmarks.extensions_calibration --points untied_sem,L3_sem --ds 200,400
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_attention_variants as T  # noqa: E402


def calibrate(point: str, d: int, seeds) -> dict[str, tuple[float, float]]:
    sims = T._simulate(point, d, seeds)
    theory = T._theory_invariants(point, d)
    return {k: (float(np.mean([s[k] for s in sims]) - theory[k]), float(np.std([s[k] for s in sims], ddof=1)))
            for k in sims[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", default=",".join(T.POINTS))
    ap.add_argument("--ds", default="200,400")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    for point in a.points.split(","):
        for d in (int(x) for x in a.ds.split(",")):
            row = calibrate(point, d, seeds)
            print(f"    ({point!r}, {d}): {{" + ", ".join(f"{k!r}: ({b:.2g}, {s:.2g})" for k, (b, s) in row.items())
                  + "},", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

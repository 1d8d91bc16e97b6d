"""Benchmark of ``replica check`` on a GLM: ``python -m benchmarks.check_glm [--model logistic] [--repeat 1]``.

Times, in a fresh process (interpreter start, imports and the theory's solve included), the command
a user runs::

    replica check logistic --alpha 2 --d 200,400,800 --seeds 4 --json --quiet

(target: at most 60 s wall on 2 cores), and reports its wall and CPU seconds, the machine's load
average before and after, and whether every quantity agreed. Not a test: the figure depends on the
machine and its load; docs/how-to/check.md records a measured one.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 60.0


def run_once(model: str, alpha: float, ds: str, seeds: int) -> dict:
    """One fresh-process ``replica check``: wall and CPU seconds of the child, its verdict."""
    cmd = [sys.executable, "-m", "replica", "check", model, "--alpha", str(alpha), "--d", ds, "--seeds", str(seeds),
           "--json", "--quiet"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {}
    return {"command": " ".join(["replica", *cmd[3:]]), "returncode": res.returncode, "wall_s": round(wall, 2),
            "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
            "agrees": out.get("agrees"), "target_s": TARGET_S, "within_target": wall <= TARGET_S,
            "stderr_tail": res.stderr[-500:] if res.returncode not in (0, 1) else ""}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.check_glm", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="logistic", help="a declared GLM (default logistic)")
    p.add_argument("--alpha", type=float, default=2.0)
    p.add_argument("--d", default="200,400,800")
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--repeat", type=int, default=1, help="fresh processes to time (default 1)")
    a = p.parse_args(argv)
    rows = [run_once(a.model, a.alpha, a.d, a.seeds) for _ in range(a.repeat)]
    for r in rows:
        print(json.dumps(r))
    return 0 if all(r["returncode"] in (0, 1) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

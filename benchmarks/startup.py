"""Start-up cost of the command line: import the library and load a generated model, in a fresh process.

``python -m benchmarks.startup [--repeat N] [--baseline DIR] [--record LABEL]`` times, per model,
a fresh interpreter that runs what every ``replica`` command does before any numerics:
``from replica.registry import load_module; load_module(MODEL)`` (imports, the freshness
check of the generated module against its declaration and the generator, the import of the module
and, since the typed interface, reading it into a ``GeneratedModel``), and ``python -m replica
models``. Reported: the median wall time of ``--repeat`` runs after one untimed run (Python's
bytecode cache warm, as for a user's second command), with the load average.

``--baseline DIR``: the same cases on another checkout of the repository (e.g. ``git archive`` of
the commit before a change, unpacked in DIR), timed alternately with this tree's in the same run,
so that both see the same machine load; the ratio this tree / baseline is reported per case.
``--record LABEL`` appends the run to ``benchmarks/results/startup.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "startup.json"
MODELS = ("ridge", "attention_tied", "attention_L3")

_CHILD = "import sys\nfrom replica.registry import load_module\nload_module(sys.argv[1])\n"


def _time(cmd: list[str], root: Path) -> float:
    """Wall seconds of one fresh process running ``cmd`` in the checkout ``root`` (must succeed)."""
    env = dict(os.environ, PYTHONPATH=str(root))  # the untimed first run generated what the cache lacked
    t = time.perf_counter()
    subprocess.run(cmd, cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def measure(repeat: int = 7, baseline: Path | None = None) -> dict:
    """Median wall seconds per case and tree (one untimed run of each first)."""
    cases = {f"load_module({m})": [sys.executable, "-c", _CHILD, m] for m in MODELS}
    cases["replica models"] = [sys.executable, "-m", "replica", "models"]
    roots = {"this tree": ROOT} | ({"baseline": baseline} if baseline is not None else {})
    out = {}
    for name, cmd in cases.items():
        runs: dict[str, list[float]] = {k: [] for k in roots}
        for root in roots.values():
            _time(cmd, root)
        for _ in range(repeat):
            for k, root in roots.items():  # alternately: both trees see the same load
                runs[k].append(_time(cmd, root))
        out[name] = {k: {"median_s": round(statistics.median(v), 4), "min_s": round(min(v), 4)}
                     for k, v in runs.items()}
        line = f"{name:28s} this tree {out[name]['this tree']['median_s']:.3f} s"
        if baseline is not None:
            ratio = out[name]["this tree"]["median_s"] / out[name]["baseline"]["median_s"]
            out[name]["ratio"] = round(ratio, 3)
            line += f"  baseline {out[name]['baseline']['median_s']:.3f} s  ratio {ratio:.2f}"
        print(line, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline", type=Path, help="another checkout, timed alternately with this one")
    ap.add_argument("--record", metavar="LABEL", help=f"append the run to {RESULTS.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    cases = measure(args.repeat, args.baseline)
    print(f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    if args.record:
        row = {"label": args.record, "cases": cases, "repeat": args.repeat,
               "loadavg": [round(load0, 2), round(os.getloadavg()[0], 2)],
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
        rows.append(row)
        RESULTS.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

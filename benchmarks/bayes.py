"""Bayes-optimal speed goals: one GLM point in <= 1 s warm, ``replica phase --bayes`` of the +-1 perceptron in
<= 60 s on 2 cores.

``point``
    One Bayes-optimal point with its error bars (``BayesSolver.solve`` + ``with_error_bars``, the path of
    ``replica solve MODEL --bayes``) in a warm process -- the sign perceptron with a Gaussian prior (``hinge``)
    and with a +-1 prior (``binary_perceptron``) at ``alpha = 1.2`` -- against the hand-written state
    evolution of ``tests/oracles/bayes.py`` at the same point (adaptive scipy quadrature in every iteration,
    the field's way), measured in the same run; the largest deviation of ``q`` between the two is printed.
``phase``
    ``replica phase binary_perceptron --bayes --json`` in a fresh process (interpreter start, imports and the
    cached Bayes-optimal module included), against ``replica solve binary_perceptron --bayes --alpha 1.2
    --no-erm --json`` in a fresh process (the same start-up, one point), with the load average.

Run ``python -m benchmarks.bayes [--json]``; the numbers go to benchmarks/RESULTS.md. Timings mean something
only on a quiet machine: the ratios are the comparable figures.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _fresh(args: list[str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "replica", *args], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return time.perf_counter() - t0, json.loads(res.stdout)


def point() -> list[dict]:
    """Warm Bayes-optimal points against the scipy oracle of the same point."""
    sys.path.insert(0, str(ROOT))
    from replica.registry.bayes import load_bayes
    from replica.numeric.bayes import BayesSolver, with_error_bars
    from tests.oracles import bayes as oracle

    rows = []
    for name, ref in (("hinge", lambda a: oracle.gaussian_sign_perceptron(a)["q"]),
                      ("binary_perceptron", lambda a: oracle.binary_perceptron_free_entropy(a)[1])):
        solver = BayesSolver(load_bayes(name))
        with_error_bars(solver, solver.solve(1.2))  # warm: module, rules, numpy
        t0 = time.perf_counter()
        p = with_error_bars(solver, solver.solve(1.2))
        t = time.perf_counter() - t0
        t0 = time.perf_counter()
        q_ref = ref(1.2)
        t_ref = time.perf_counter() - t0
        rows.append({"model": name, "alpha": 1.2, "seconds": t, "oracle_seconds": t_ref, "ratio": t_ref / t,
                     "q": float(p.q[0, 0]), "q_oracle": q_ref, "deviation": abs(float(p.q[0, 0]) - q_ref),
                     "target_seconds": 1.0})
    return rows


def phase() -> dict:
    """``replica phase binary_perceptron --bayes`` fresh, against one fresh ``replica solve --bayes``."""
    _fresh(["solve", "binary_perceptron", "--bayes", "--alpha", "1.2", "--no-erm", "--json"])  # caches written
    t_point, _ = _fresh(["solve", "binary_perceptron", "--bayes", "--alpha", "1.2", "--no-erm", "--json"])
    t_phase, out = _fresh(["phase", "binary_perceptron", "--bayes", "--json"])
    return {"seconds": t_phase, "baseline_seconds": t_point, "ratio": t_phase / t_point, "target_seconds": 60.0,
            "alpha_it": out["alpha_it"], "alpha_alg": out["alpha_alg"], "load": os.getloadavg()[0]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bayes", description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = {"point": point(), "phase": phase()}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for r in out["point"]:
        print(f"point {r['model']:<18} {r['seconds']:.3f} s warm (target <= 1 s); oracle {r['oracle_seconds']:.2f} s "
              f"(x{r['ratio']:.2g}); |q - q_oracle| = {r['deviation']:.1e}")
    ph = out["phase"]
    print(f"replica phase binary_perceptron --bayes: {ph['seconds']:.1f} s fresh (target <= 60 s), one solve "
          f"{ph['baseline_seconds']:.1f} s (x{ph['ratio']:.1f}); alpha_it = {ph['alpha_it']:.6f}, alpha_alg = "
          f"{ph['alpha_alg']:.6f}; load {ph['load']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The mixed-state question of docs/reference/certified.md §7: at ``omega = 0.3, alpha = 0.5`` (below the
semantic branch's merger) gradient descent from the semantic initialisation ends at ``theta ~ 0.05``.
Is that a converged stationary point, and is there a replica-symmetric fixed point there?

* ``gd D SEED STEPS[,STEPS...]`` -- full-batch GD (``numerics.simulate.run_attention_seed``) with every
  stopping test off (``tol_grad = tol_loss = stop_grad = 0``): the state after exactly ``STEPS``
  steps (the same trajectory for each count: same seed, data and initialisation), one JSON line
  per count appended to ``results/mixed/gd_long.jsonl``.
* ``newton RULE`` -- ``scipy.optimize.root`` (``hybr``: a Newton-type search, which also finds fixed
  points the damped iteration is repelled by) on ``map(x) - x`` with all of ``q, V, m, theta`` free,
  from GD-like states, on the pre-integration level ``RULE`` (``fast|default|high``); one JSON line
  per start appended to ``results/mixed/newton.jsonl``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "mixed"
OMEGA, ALPHA = 0.3, 0.5
#: (q, m, theta, V) starts: GD's d = 400 end state, the 1/d-extrapolated one (docs/reference/certified.md §7),
#: and one in between; V (not measured by GD) near the agnostic fixed point's
STARTS = ((0.0373, 0.0517, 0.0514, 30.0), (0.038, 0.019, 0.051, 30.0), (0.038, 0.03, 0.054, 28.0))


def _append(name: str, row: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / name, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def gd(d: int, seed: int, steps: list[int]) -> None:
    import torch

    from numerics.simulate import run_attention_seed

    torch.set_num_threads(1)
    for n in steps:
        t = time.perf_counter()
        r = run_attention_seed(seed, omega=OMEGA, alpha=ALPHA, d=d, init="semantic", steps=n, tol_grad=0.0,
                               tol_loss=0.0, stop_grad=0.0, n_test=2000,
                               normalize_teacher=False)  # the iid teacher these runs were made with
        _append("gd_long.jsonl", dict(d=d, seed=seed, steps=r["steps"], q=r["q"], m=r["m"], theta=r["theta"],
                                      e_t=r["train_loss"], grad=r["grad_norm"], seconds=round(time.perf_counter() - t, 1)))


def newton(rule: str) -> None:
    from scipy.optimize import root

    from replica.numeric.preintegration import make_integrator
    from replica.registry import load_module
    from replica.numeric.solver import Solver

    module = load_module("attention")
    solver = Solver(module, {"omega": OMEGA}, branch=None, error_estimate=False, rule=make_integrator(module, rule))

    def residual(y: np.ndarray) -> np.ndarray:
        try:
            return solver.evaluate_map(np.asarray(y, dtype=float), ALPHA, use_warm=False).x_new - y
        except Exception:  # an inadmissible trial state: far from any root
            return np.full(len(y), 1e3)

    for q, m, theta, V in STARTS:
        t = time.perf_counter()
        sol = root(residual, np.array([q, V, m, theta]), method="hybr", options=dict(xtol=1e-10))
        res = solver.evaluate_map(sol.x, ALPHA, use_warm=False)
        fp = solver._observables(sol.x, res, ALPHA, [0.0], 0)
        _append("newton.jsonl", dict(rule=rule, start=dict(q=q, V=V, m=m, theta=theta),
                                     root=dict(zip(solver.names, sol.x.tolist())),
                                     residual=float(np.linalg.norm(res.x_new - sol.x)), phi=fp.phi,
                                     success=bool(sol.success), nfev=int(sol.nfev),
                                     seconds=round(time.perf_counter() - t, 1)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.certify.mixed", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="action", required=True)
    g = sub.add_parser("gd", help="long full-batch GD runs")
    g.add_argument("d", type=int)
    g.add_argument("seed", type=int)
    g.add_argument("steps", help="comma-separated step counts")
    n = sub.add_parser("newton", help="Newton-type search for a mixed fixed point")
    n.add_argument("rule", choices=["fast", "default", "high"])
    args = ap.parse_args(argv)
    if args.action == "gd":
        gd(args.d, args.seed, [int(s) for s in args.steps.split(",")])
    else:
        newton(args.rule)
    return 0


if __name__ == "__main__":
    sys.exit(main())

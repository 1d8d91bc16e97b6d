"""``replica solve MODEL --rsb 1``: the zero-temperature 1RSB point (docs/how-to/rsb.md).

The replica-symmetric point is solved first (the start of the 1RSB search, and ``rs_train_loss``), then
the 1RSB saddle point with its Parisi parameter (:func:`replica.numeric.rsb.solve`) and its bars
(:func:`replica.numeric.rsb.with_error_bars`).
"""
from __future__ import annotations

import argparse
import math
import sys
import time

from ...artifacts import jsonio
from ...artifacts.registry import load_model, load_module
from ...errors import ParameterError
from ...numeric import rsb
from ...numeric.accuracy import DEFAULT_ACCURACY, solve_to_accuracy
from ...numeric.solver import Solver
from .common import entropic_rule_from_args, parameters_from_args, prox_from_args, rule_from_args

#: the steps of replica-symmetry breaking built
BUILT = (0, 1)


def check_rsb(value: int) -> int:
    """``--rsb``: 0 (replica symmetry) or 1; anything else is one line naming the flag."""
    if value not in BUILT:
        raise ParameterError("rsb", f"{value} steps of replica-symmetry breaking are not built; use --rsb 1 "
                                    "(one step, at zero temperature) or leave it out (replica symmetry)")
    return value


def run(args: argparse.Namespace) -> int:
    """The 1RSB branch of ``replica solve`` (its flags are solve's)."""
    if args.spectrum is not None:
        raise ParameterError("rsb", "--rsb 1 does not take --spectrum (structured data); solve without it")
    if getattr(args, "prox", "global") not in (None, "global"):
        raise ParameterError("rsb", "--rsb 1 uses the global minimiser of the bracket (--prox global)")
    module = load_module(args.model)
    params = parameters_from_args(module, args)
    say = (lambda m: print(f"replica solve --rsb 1: {m}", file=sys.stderr)) if (args.verbose or sys.stderr.isatty()
                                                                                 or not args.json) else (lambda m: None)
    t0 = time.perf_counter()
    solver = Solver(module, params, branch=args.branch, rule=rule_from_args(module, args, args.branch, default="auto"),
                    tol=args.tol, max_iter=args.max_iter, verbose=args.verbose, error_estimate=False,
                    entropic_rule=entropic_rule_from_args(module, args), prox=prox_from_args(args))
    say("replica-symmetric point (the start, and rs_train_loss)")
    fp = solver.solve_best(args.alpha)
    fp = solve_to_accuracy(solver, fp, args.alpha, DEFAULT_ACCURACY if args.accuracy is None else args.accuracy,
                           max_levels=1)
    model = load_model(args.model)
    from ...codegen.rsb import load_rsb_module  # the symbolic pipeline: only to generate the 1RSB module

    rsbm = rsb.RSBModel.from_module(load_rsb_module(model))
    rsolver = rsb.RSBSolver(rsbm, solver, verbose=args.verbose)
    say(f"1RSB on {rsolver.rule.describe()}")
    point = rsb.solve(rsolver, args.alpha, fp, progress=say)
    point = rsb.with_error_bars(rsolver, point, args.alpha, progress=say)
    point.seconds = time.perf_counter() - t0
    res = rsb.result_dict(rsolver, point)
    if args.json:
        jsonio.dump(res, sys.stdout, rsb.reasons())
        print()
        return 0
    _print(point, res)
    return 0


def _print(point: rsb.RSBPoint, res: dict) -> None:
    e = point.errors

    def pm(k: str) -> str:
        v = e.get(k)
        return f" ± {v:.1e}" if v is not None and math.isfinite(v) else ""

    print(f"{point.model} (1RSB, zero temperature)  branch={point.branch}  alpha={point.alpha:g}  "
          + "  ".join(f"{k}={v:g}" for k, v in point.parameters.items()))
    print(f"{point.evaluations} map evaluations, residual {point.residual:.1e}, {point.seconds:.1f} s; {point.rule}")
    if point.collapsed:
        print("the 1RSB solution collapses onto the replica-symmetric one (q1 = q0): the Parisi parameter is "
              "undetermined")
    else:
        print(f"  parisi_m = {point.parisi_m:.8g}{pm('parisi_m')}   complexity = {point.complexity:.2e}")
    for k, v in point.order.items():
        print(f"  {k:<12} = {v:>14.8g}{pm(k)}")
    for k, v in point.observables.items():
        print(f"  {k:<12} = {v:>14.8g}{pm(k)}")
    print(f"  {'train_loss':<12} = {point.train_loss:>14.8g}{pm('train_loss')}   (replica symmetric: "
          f"{point.rs.train_loss:.8g})")
    for note in point.notes:
        print(f"\nnote: {note}")

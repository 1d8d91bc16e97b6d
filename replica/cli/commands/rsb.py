"""``replica solve MODEL --rsb 1``: the zero-temperature 1RSB point (docs/how-to/rsb.md).

The point goes through the one pipeline (:func:`replica.numeric.point.solve_point` with
``PointOptions(rsb=1)``): the replica-symmetric point with its bars first (the start of the 1RSB search,
and ``rs_train_loss``), then the 1RSB saddle point with its Parisi parameter and its bars.
"""
from __future__ import annotations

import argparse
import math
import sys

from ...artifacts import jsonio
from ...errors import ParameterError
from ...numeric import rsb
from ...numeric.point import solve_point
from .common import options_from_args, parameters_from_args, point_model

#: the steps of replica-symmetry breaking built
BUILT = (0, 1)


def check_rsb(value: int, args: argparse.Namespace | None = None) -> int:
    """``--rsb``: 0 (replica symmetry) or 1, and the flags 1RSB does not take; one line naming the flag,
    before any work."""
    if value < 0:
        raise ParameterError("rsb", f"expected a number of steps of replica-symmetry breaking, 0 or 1, got {value}")
    if value not in BUILT:
        raise ParameterError("rsb", f"{value} steps of replica-symmetry breaking are not built; use --rsb 1 "
                                    "(one step, at zero temperature) or leave it out (replica symmetry)")
    if value and args is not None:
        if getattr(args, "spectrum", None) is not None:
            raise ParameterError("rsb", "--rsb 1 does not take --spectrum (structured data); solve without it")
        if getattr(args, "features", None) is not None:
            raise ParameterError("rsb", "--rsb 1 does not take --features (random features); solve without it")
        if getattr(args, "bayes", False):
            raise ParameterError("rsb", "--rsb 1 and --bayes are two different theories: choose one")
        if getattr(args, "prox", None) not in (None, "global"):
            raise ParameterError("rsb", "--rsb 1 uses the global minimiser of the bracket (--prox global)")
    return value


def run(args: argparse.Namespace) -> int:
    """The 1RSB branch of ``replica solve`` (its flags are solve's)."""
    from ...registry.rsb import load_rsb_module

    module = point_model(args)
    params = parameters_from_args(module, args)
    options = options_from_args(args, branch=args.branch, default_quadrature="auto").replace(rsb=1)
    solver = options.solver(module, params)
    rsb_module = load_rsb_module(args.model)
    say = (lambda m: print(f"replica solve --rsb 1: {m}", file=sys.stderr)) \
        if (args.verbose or sys.stderr.isatty() or not args.json) else None
    point = solve_point(module, params, args.alpha, options, solver=solver, progress=say, rsb_module=rsb_module)
    if args.json:
        jsonio.dump(point.result, sys.stdout, rsb.reasons())
        print()
        return 0
    _print(point.rsb)
    return 0


def _print(point: rsb.RSBPoint) -> None:
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

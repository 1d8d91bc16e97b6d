"""``replica solve MODEL --alpha A ...``: solve the saddle point at one sample complexity."""
from __future__ import annotations

import argparse
import math
import sys

from .. import jsonio, validation
from ..registry import load_module
from ..solver import Solver, observable_dict
from .common import (add_numeric_flags, add_parameter_flags, check_numeric_args, parameters_from_args,
                     rule_from_args, token_one)

#: why a number of ``replica solve --json`` can be null
REASONS = {"quadrature_residual": "not computed: the companion rule's map is not defined at this state "
                                  "(it leaves the admissible domain)"}


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("solve", help="solve the saddle-point equations at one alpha",
                       description="Solve the replica-symmetric saddle point of MODEL at sample complexity "
                                   "ALPHA on a branch, and print order parameters, eps_g, training loss and "
                                   "free entropy (token-1 values, signs fixed so that m, theta >= 0).")
    p.add_argument("model", help="a declared model (e.g. 'attention') or a path to a .py file")
    p.add_argument("--alpha", type=float, required=True, help="sample complexity n/d (>= 0)")
    p.add_argument("--branch", default=None,
                   help="semantic (m = 0), positional (theta = 0), agnostic (both), or free (default)")
    add_parameter_flags(p)
    add_numeric_flags(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)
    return p


def result_dict(module, fp) -> dict:
    """The JSON contract: token-1 q, m, theta, V (+ conjugates), every declared observable with its
    ``<name>_error`` (``eps_g`` first), and the solve's diagnostics."""
    out: dict = {}
    out.update(token_one(module, fp.order))
    out.update(token_one(module, fp.conjugates))
    out.update(observable_dict(fp))
    out.update(train_loss=fp.train_loss, phi=fp.phi, converged=fp.converged, tol=fp.tol,
               iterations=fp.iterations, residual=fp.residual, alpha=fp.alpha, branch=fp.branch,
               quadrature=fp.quadrature,
               quadrature_residual=fp.quadrature_residual, psi_t=fp.psi_t, psi_w=fp.psi_w,
               psi_y=fp.psi_y, parameters=fp.parameters, order_parameters=fp.order,
               conjugate_parameters=fp.conjugates, seconds=fp.seconds, notes=fp.notes)
    return out


def run(args: argparse.Namespace) -> int:
    validation.sample_complexity(args.alpha, "alpha")
    check_numeric_args(args)
    module = load_module(args.model)
    solver = Solver(module, parameters_from_args(module, args), branch=args.branch,
                    rule=rule_from_args(module, args, args.branch, default="auto"), tol=args.tol,
                    max_iter=args.max_iter,
                    verbose=args.verbose)
    # Cold CLI solves try a few generic starts: a branch can have several solutions at one alpha.
    fp = solver.solve_best(args.alpha)
    res = result_dict(module, fp)
    if args.json:
        jsonio.dump(res, sys.stdout, REASONS)
        print()
        return 0
    print(f"{module.MODEL}  branch={fp.branch}  alpha={fp.alpha:g}  "
          + "  ".join(f"{k}={v:g}" for k, v in fp.parameters.items()))
    print(f"converged in {fp.iterations} iterations, residual {fp.residual:.2e}, {fp.seconds:.2f} s, "
          f"{fp.quadrature}")
    width = max(len(k) for k in list(fp.order) + list(fp.conjugates))
    print(f"\n  {'order parameter':<{width + 17}}   conjugate")
    for (k, v), (kh, vh) in zip(fp.order.items(), fp.conjugates.items()):
        print(f"  {k:<{width}} = {v:>14.8g}   {kh:<{width}} = {vh:>14.8g}")
    w = max(10, *(len(k) for k in fp.observables))
    print()
    for name, v in fp.observables.items():
        err = fp.observable_errors.get(name, float("nan"))
        print(f"  {name:<{w}} = {v:.8g}" + (f"  (quadrature error ~ {err:.1e})" if err == err else ""))
    print(f"  {'train_loss':<{w}} = {fp.train_loss:.8g}")
    print(f"  {'phi':<{w}} = {fp.phi:.8g}")
    qres = fp.quadrature_residual
    print("  quadrature residual (companion rule) = "
          + (f"{qres:.1e}" if math.isfinite(qres) else REASONS["quadrature_residual"]))
    for note in fp.notes:
        print(f"\nnote: {note}")
    return 0

"""``replica solve MODEL --alpha A ...``: solve the saddle point at one sample complexity."""
from __future__ import annotations

import argparse
import math
import sys

from ...artifacts import jsonio
from ... import validation
from ...numeric.point import REASONS, solve_point
from ...numeric.report import error_dict, result_dict  # noqa: F401 -- the JSON contract, re-exported
from ...runtime.progress import Stages
from .bayes import add_solve_flags as add_bayes_flags, run_solve as run_bayes
from .common import (add_numeric_flags, add_parameter_flags, check_features_args, check_numeric_args, options_from_args,
                     parameters_from_args, point_model)
from .rsb import check_rsb, run as run_rsb

#: seconds after which ``replica solve`` names its stages on stderr, on a terminal (:class:`~replica.runtime.progress.Stages`)
STAGES_AFTER = 3.0


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("solve", help="solve the saddle-point equations at one alpha",
                       description="Solve the replica-symmetric saddle point of MODEL at sample complexity "
                                   "ALPHA on a branch, and print order parameters, eps_g, training loss and "
                                   "free entropy (token-1 values, signs fixed so that m, theta >= 0).")
    p.add_argument("model", help="a declared model (e.g. 'attention') or a path to a .py file")
    p.add_argument("--alpha", type=float, required=True, help="sample complexity n/d (>= 0)")
    p.add_argument("--branch", default=None,
                   help="a branch the model declares (its families pinned to 0; replica models lists them), "
                        "or free (default)")
    add_parameter_flags(p)
    add_numeric_flags(p)
    p.add_argument("--spectrum", metavar="FILE.csv", default=None,
                   help="a GLM (ridge, logistic, ...) on structured data: columns k, lambda, theta give the input "
                        "covariance diag(lambda) and the teacher weights theta (docs/how-to/structured_data.md)")
    p.add_argument("--features", metavar="relu|tanh|EXPR|FILE", default=None,
                   help="a GLM on random features x = sigma(F z/sqrt(d)) in the p, d -> oo limit (Gaussian "
                        "equivalence, the Marchenko-Pastur law of FF^T/d): sigma is relu, tanh, sign, erf, sigmoid, "
                        "linear, an expression in z such as 'tanh(2*z)', or a file holding one; needs --ratio, and "
                        "--alpha is then n/p, samples per feature (docs/how-to/structured_data.md)")
    p.add_argument("--ratio", metavar="P/D", default=None,
                   help="features per input dimension p/d of --features, as 1.5 or 3/2")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_bayes_flags(p)
    p.add_argument("--rsb", type=int, default=0, metavar="K",
                   help="steps of replica-symmetry breaking: 1 solves the zero-temperature 1RSB saddle point (q0, q1, "
                        "delta_q, the Parisi parameter where the complexity vanishes) from the replica-symmetric one "
                        "(docs/how-to/rsb.md); 0 (default) replica symmetry")
    p.add_argument("--no-replicon", dest="replicon", action="store_false",
                   help="skip the replicon (RS stability of the fixed point, under a second at the paper's point; "
                        "docs/explanation/replicon.md): no 'replicon'/'rs_stable' in the output")
    p.set_defaults(func=run, check_args=check_args)
    return p


def check_args(args: argparse.Namespace) -> None:
    """What needs no model: ``--alpha``, the numeric flags and the random features' spectrum (before
    the model loads)."""
    validation.sample_complexity(args.alpha, "alpha")
    check_numeric_args(args)
    check_features_args(args)
    check_rsb(args.rsb, args)


def run(args: argparse.Namespace) -> int:
    if args.bayes:
        return run_bayes(args)
    if args.rsb:
        return run_rsb(args)
    module = point_model(args)
    params = parameters_from_args(module, args)
    options = options_from_args(args, branch=args.branch, default_quadrature="auto")
    solver = options.solver(module, params)
    # a 6-D model's default command takes tens of seconds: past a few seconds, say what it is doing --
    # on a terminal only, so that a script reading stderr still gets exactly one line on failure
    stages = Stages("replica solve", after=STAGES_AFTER, enabled=sys.stderr.isatty())
    # --accuracy can take minutes: its plan and every level go to stderr, under --json too
    progress = None if (args.json and not args.verbose and args.accuracy is None) \
        else (lambda m: print(f"replica solve: {m}", file=sys.stderr))
    try:
        point = solve_point(module, params, args.alpha, options, solver=solver, progress=progress, stage=stages.stage)
    finally:
        stages.close()
    fp, res = point.fp, point.result
    if args.json:
        jsonio.dump(res, sys.stdout, REASONS)
        print()
        return 0
    print(f"{module.MODEL}  branch={fp.branch}  alpha={fp.alpha:g}  "
          + "  ".join(f"{k}={v:g}" for k, v in fp.parameters.items()))
    if args.features is not None:
        print(f"data: {module.ENTROPIC_DESCRIPTION.removeprefix('closed form on ')}; alpha = n/p, samples per "
              "feature")
    print(f"converged in {fp.iterations} iterations, residual {fp.residual:.2e}, {fp.seconds:.2f} s, "
          f"{fp.quadrature}")
    print(f"prox convention: {fp.prox} ({solver.convention.describe()})")
    if fp.errors:
        print(f"error bars: fixed points re-solved on refined rules and with more prox starts; "
              f"accuracy {fp.accuracy:g} relative " + ("met" if fp.accuracy_met else "NOT MET (see notes)"))
    if not fp.branch_found:
        print(f"WARNING: no {fp.branch} fixed point found at this alpha: the solve landed on another branch's "
              "solution (see the note below)")
    width = max(len(k) for k in list(fp.order) + list(fp.conjugates))
    print(f"\n  {'order parameter':<{width + 17}}   conjugate")

    def pm(k: str) -> str:
        e = fp.errors.get(k)
        return f" ± {e:.1e}" if e is not None and math.isfinite(e) else ""

    for (k, v), (kh, vh) in zip(fp.order.items(), fp.conjugates.items()):
        print(f"  {k:<{width}} = {v:>14.8g}{pm(k):<10}   {kh:<{width}} = {vh:>14.8g}{pm(kh)}")
    w = max(10, *(len(k) for k in fp.observables))
    print()
    for name, v in fp.observables.items():
        print(f"  {name:<{w}} = {v:.8g}{pm(name)}")
    print(f"  {'train_loss':<{w}} = {fp.train_loss:.8g}{pm('train_loss')}")
    print(f"  {'phi':<{w}} = {fp.phi:.8g}{pm('phi')}")
    qres = fp.quadrature_residual
    print("  quadrature residual (companion rule) = "
          + (f"{qres:.1e}" if math.isfinite(qres) else REASONS["quadrature_residual"]))
    if args.replicon:
        print(f"  {'replicon':<{w}} = " + (f"{res['replicon']:.4g}  (quadrature error ~ {res['replicon_error']:.1e}); "
                                           f"RS stable: {'yes' if res['rs_stable'] else 'no'}"
                                           if res["replicon"] is not None else res["replicon_reason"]))
    for note in fp.notes + res.get("replicon_notes", []):
        print(f"\nnote: {note}")
    return 0

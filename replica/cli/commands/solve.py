"""``replica solve MODEL --alpha A ...``: solve the saddle point at one sample complexity."""
from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from ...artifacts import jsonio
from ... import validation
from ...artifacts.registry import load_module
from ...numeric.solver import Solver, iteration_tally
from ...numeric.accuracy import DEFAULT_ACCURACY, solve_to_accuracy
from ...numeric.rule_plan import plan_line
from ...numeric.report import error_dict, result_dict  # noqa: F401 -- the JSON contract, re-exported
from ...numeric.stability import perturbed_replicons, replicon_summary, state_error
from ...runtime.progress import Stages
from .rsb import check_rsb, run as run_rsb
from .common import (add_numeric_flags, add_parameter_flags, check_numeric_args, entropic_rule_from_args,
                     parameters_from_args, prox_from_args, rule_from_args)

#: seconds after which ``replica solve`` names its stages on stderr, on a terminal (:class:`~replica.runtime.progress.Stages`)
STAGES_AFTER = 3.0

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
                   help="a branch the model declares (its families pinned to 0; replica models lists them), "
                        "or free (default)")
    add_parameter_flags(p)
    add_numeric_flags(p)
    p.add_argument("--spectrum", metavar="FILE.csv", default=None,
                   help="a GLM (ridge, logistic, ...) on structured data: columns k, lambda, theta give the input "
                        "covariance diag(lambda) and the teacher weights theta (docs/how-to/structured_data.md)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--rsb", type=int, default=0, metavar="K",
                   help="steps of replica-symmetry breaking: 1 solves the zero-temperature 1RSB saddle point (q0, q1, "
                        "delta_q, the Parisi parameter where the complexity vanishes) from the replica-symmetric one "
                        "(docs/how-to/rsb.md); 0 (default) replica symmetry")
    p.add_argument("--no-replicon", dest="replicon", action="store_false",
                   help="skip the replicon (RS stability of the fixed point, under a second at the paper's point; "
                        "docs/explanation/replicon.md): no 'replicon'/'rs_stable' in the output")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    validation.sample_complexity(args.alpha, "alpha")
    check_numeric_args(args)
    if check_rsb(args.rsb):
        return run_rsb(args)
    module = load_module(args.model)
    if args.spectrum is not None:  # the Gaussian covariate data law (sympy: the per-mode entropic term)
        from ...symbolic.spectral_modes import gcm_module
        from ...numeric.spectrum import Spectrum

        module = gcm_module(module, Spectrum.from_csv(args.spectrum))
    params = parameters_from_args(module, args)
    entropic = entropic_rule_from_args(module, args)
    solver = Solver(module, params, branch=args.branch,
                    rule=rule_from_args(module, args, args.branch, default="auto"), tol=args.tol,
                    max_iter=args.max_iter, verbose=args.verbose, error_estimate=False, entropic_rule=entropic,
                    prox=prox_from_args(args))
    # Cold CLI solves try a few generic starts (a branch can have several solutions at one alpha),
    # on a cheaper rule (Solver.scout); each distinct one is then re-solved on the working rule.
    t0 = time.perf_counter()
    # a 6-D model's default command takes tens of seconds: past a few seconds, say what it is doing --
    # on a terminal only, so that a script reading stderr still gets exactly one line on failure
    stages = Stages("replica solve", after=STAGES_AFTER, enabled=sys.stderr.isatty())
    tally = iteration_tally()
    iterations = tally.__enter__()  # every solve of the command (scout, starts, refined rules) counts
    try:
        scout = solver.scout()
        stages.stage(f"cold starts on {(scout or solver).integrator.describe()}")
        fp = solver.solve_best(args.alpha, scout=scout)
    except BaseException:
        tally.__exit__(None, None, None)
        stages.close()
        raise
    qres = companion_residual(solver, fp)
    accuracy = DEFAULT_ACCURACY if args.accuracy is None else args.accuracy
    # --accuracy can take minutes: its plan and every level go to stderr, under --json too
    progress = None if (args.json and not args.verbose and args.accuracy is None) \
        else (lambda m: print(f"replica solve: {m}", file=sys.stderr))
    if args.accuracy is not None:
        progress(plan_line(solver, fp, accuracy, 8))
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="replica-replicon") as pool:
        # The replicon of the ladder's fixed point starts while the jump check finishes (the
        # kernels release the GIL); it stands unless the check moved the solve to another rule.
        early: list = []

        def beside(best) -> None:
            if args.replicon:
                early.append((best, pool.submit(replicon_summary, module, best)))

        stages.stage("error bars: re-solves on refined rules and with more prox starts, jump check")
        try:
            fp = solve_to_accuracy(solver, fp, args.alpha, accuracy, max_levels=1 if args.accuracy is None else 8,
                                   progress=progress if args.accuracy is not None else None, beside=beside)
        finally:
            tally.__exit__(None, None, None)
            if not args.replicon:
                stages.close()
        # the whole solve's work, not the last rule's (its re-solve from the ladder took 1 iteration)
        fp.iterations, fp.seconds = iterations[0], time.perf_counter() - t0
        fp.quadrature_residual = qres  # of the working rule (a diagnostic; the bars are in errors)
        res = result_dict(module, fp)
        if args.replicon:
            stages.stage("replicon and its error bar")
            # The replicon's bar: its quadrature error plus what the fixed point's own bars move it
            # by (docs/explanation/replicon.md); null where the replicon is not computed. The replicons at the
            # perturbed states are computed beside the replicon itself.
            perturbed = pool.submit(perturbed_replicons, module, fp, fp.errors) if fp.errors else None
            res.update(early[0][1].result() if early and early[0][0] is fp else replicon_summary(module, fp))
            if perturbed is not None:
                bar = res.get("replicon_error")
                if bar is not None and res.get("replicon") is not None:
                    bar = bar + state_error(module, fp, fp.errors, base=res["replicon"], perturbed=perturbed.result())
                res["errors"]["replicon"] = bar
            stages.close()
    if args.json:
        jsonio.dump(res, sys.stdout, REASONS)
        print()
        return 0
    print(f"{module.MODEL}  branch={fp.branch}  alpha={fp.alpha:g}  "
          + "  ".join(f"{k}={v:g}" for k, v in fp.parameters.items()))
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


def companion_residual(solver: Solver, fp) -> float:
    """``quadrature_residual`` of ``fp``: its relative fixed-point residual under the companion
    rule (nan where that map is not defined at this state). A diagnostic; the error bars are
    :mod:`replica.numeric.accuracy`'s."""
    import numpy as np

    from ...errors import InvalidStateError

    x = fp.x
    try:
        comp = solver.evaluate_map(x, fp.alpha, integrator=solver.integrator.companion(), use_warm=False)
    except InvalidStateError:
        return float("nan")
    return float(np.linalg.norm((comp.x_new - x)[solver.free]) / max(np.linalg.norm(x[solver.free]), 1e-12))

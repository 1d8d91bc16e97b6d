"""``replica solve --bayes`` and ``replica phase --bayes``: the Bayes-optimal point and thresholds of a model.

The flags are added to the ``solve`` and ``phase`` parsers (:func:`add_solve_flags`, :func:`add_phase_flags`);
with ``--bayes`` those commands hand over to :func:`run_solve` / :func:`run_phase` before loading the
empirical-risk module. The model's Bayes-optimal module is generated into the cache on first use
(:mod:`replica.registry.bayes`). The command line loads it once, while it parses (``args.generated_model``);
the empirical-risk solve beside a point loads the model's other module and goes through the one pipeline
(:func:`replica.numeric.point.solve_point`).
"""
from __future__ import annotations

import argparse
import math
import sys

from ... import validation
from ...artifacts import jsonio
from ...errors import ParameterError, ReplicaError

#: ``--tol`` / ``--max-iter`` defaults of the empirical-risk commands; ``--bayes`` has its own unless they are given
ERM_TOL, ERM_MAX_ITER = 1e-8, (500, 200)
#: the Bayes-optimal defaults
BAYES_TOL, BAYES_MAX_ITER = 1e-12, 20000


def add_solve_flags(p: argparse.ArgumentParser) -> None:
    """``--bayes`` and ``--no-erm`` on ``replica solve``."""
    g = p.add_argument_group("Bayes-optimal inference")
    g.add_argument("--bayes", action="store_true",
                   help="solve the Bayes-optimal state evolution instead (the student knows the teacher's prior and "
                        "label law; docs/how-to/bayes_optimal.md): q, mmse, eps_g, classification_error, free_entropy "
                        "on --branch uninformed (default: the state AMP reaches) or informed, beside the "
                        "empirical-risk solve of the same point")
    g.add_argument("--no-erm", dest="erm", action="store_false",
                   help="with --bayes: skip the empirical-risk solve of the same point")


def add_phase_flags(p: argparse.ArgumentParser) -> None:
    """``--bayes`` and ``--points`` on ``replica phase``."""
    g = p.add_argument_group("Bayes-optimal inference")
    g.add_argument("--bayes", action="store_true",
                   help="the Bayes-optimal thresholds instead: alpha_wr (weak recovery), alpha_alg (where AMP's "
                        "branch jumps), alpha_it (where the free entropies cross), alpha_spec (committees: "
                        "specialisation), with error bars and the two branches as curves")
    g.add_argument("--points", type=int, default=24, metavar="N",
                   help="with --bayes: alpha grid on which the branches are followed (default 24, geometric)")


def _numerics(args: argparse.Namespace) -> tuple[float, int]:
    """``--tol`` and ``--max-iter``: the Bayes-optimal defaults unless they were given."""
    tol = BAYES_TOL if args.tol == ERM_TOL else args.tol
    max_iter = BAYES_MAX_ITER if args.max_iter in ERM_MAX_ITER else args.max_iter
    return tol, max_iter


def _solver(args: argparse.Namespace):
    from ...numeric.bayes import BayesSolver
    from ...numeric.bayes_model import BayesModel
    from ..flags import parameters_from_args

    bm = getattr(args, "generated_model", None)
    if not isinstance(bm, BayesModel):  # parsed otherwise than by replica.cli.parse
        from ...registry.bayes import load_bayes

        bm = load_bayes(args.model)
    params = parameters_from_args(bm, args)
    tol, max_iter = _numerics(args)
    return BayesSolver(bm, params, tol=tol, max_iter=max_iter), params


def run_solve(args: argparse.Namespace) -> int:
    """``replica solve MODEL --bayes``."""
    from ...numeric.bayes import BRANCHES, point_dict, with_error_bars

    validation.sample_complexity(args.alpha, "alpha")
    branch = args.branch or "uninformed"
    if branch not in BRANCHES:
        raise ParameterError("branch", f"Bayes-optimal branches are {list(BRANCHES)}, got {branch!r}")
    validation.tolerance(args.tol, "tol")
    solver, params = _solver(args)
    point = with_error_bars(solver, solver.solve(args.alpha, branch))
    out = point_dict(point)
    out["erm"], out["erm_reason"] = None, "skipped (--no-erm)"
    if args.erm:
        del out["erm_reason"]
        out["erm"], reason = _erm_beside(args, params, point)
        if out["erm"] is None:
            out["erm_reason"] = reason
    if args.json:
        jsonio.dump(out, sys.stdout, {})
        print()
        return 0
    _print_point(out)
    return 0


def _erm_beside(args, params, point) -> tuple[dict | None, str | None]:
    """The empirical-risk solve of the same point (its test error and classification error beside the
    Bayes-optimal ones), or ``None`` and why."""
    from ...numeric.point import PointOptions, solve_point
    from ...registry import load_module

    try:
        module = load_module(args.model)
        fp = solve_point(module, params, args.alpha, PointOptions(error_bars=False, replicon=False,
                                                                   companion_residual=False)).fp
    except ReplicaError as exc:
        return None, f"the empirical-risk solve failed: {exc}"
    erm = {"eps_g": fp.observables.get("eps_g"), "converged": bool(getattr(fp, "converged", True))}
    if "classification_error" in fp.observables:
        erm["classification_error"] = fp.observables["classification_error"]
    for k in ("eps_g", "classification_error"):
        if erm.get(k) is not None and getattr(point, k) is not None:
            erm[f"{k}_gap"] = erm[k] - getattr(point, k)
    return erm, None


def _print_point(out: dict) -> None:
    def fmt(v):
        if isinstance(v, list):
            return "[" + ", ".join(fmt(x) for x in v) + "]"
        return f"{v:.10g}" if isinstance(v, float) else str(v)

    err = out["errors"]
    print(f"{out['model']}  Bayes-optimal  branch={out['branch']}  alpha={out['alpha']:g}  "
          + "  ".join(f"{k}={v:g}" for k, v in out["parameters"].items()))
    print(f"converged in {out['iterations']} iterations, residual {out['residual']:.1e}, {out['seconds']:.2f} s")
    for k in ("q", "mmse", "eps_g", "classification_error", "free_entropy"):
        if k not in out:
            continue
        v = out[k]
        bar = err.get(k)
        print(f"  {k:<22} = {fmt(v)}" + (f" ± {bar:.1e}" if isinstance(bar, float) else "")
              + (f"   ({out[k + '_reason']})" if v is None and k + "_reason" in out else ""))
    nish = max(out["nishimori"].values()) if out["nishimori"] else 0.0
    print(f"  Nishimori identities hold to {nish:.1e}")
    erm = out.get("erm")
    if erm:
        print("  empirical risk at the same point: " + ", ".join(
            f"{k} = {v:.6g}" for k, v in erm.items() if isinstance(v, float)))
    elif out.get("erm_reason"):
        print(f"  empirical risk: {out['erm_reason']}")


def run_phase(args: argparse.Namespace) -> int:
    """``replica phase MODEL --bayes``."""
    from ...phase.bayes import thresholds

    for name in ("alpha_min", "alpha_max"):
        v = getattr(args, name)
        if not math.isfinite(v) or v <= 0:
            raise ParameterError(name.replace("_", "-"), f"must be a finite number > 0, got {v}")
    if args.alpha_max <= args.alpha_min:
        raise ParameterError("alpha-max", f"must be larger than --alpha-min ({args.alpha_min}), got {args.alpha_max}")
    points = validation.integer(args.points, "points", low=4, high=400)
    validation.tolerance(args.tol, "tol")
    solver, _ = _solver(args)
    quiet = args.json or getattr(args, "quiet", False)
    progress = None if quiet else (lambda m: print(f"replica phase --bayes: {m}", file=sys.stderr))
    res = thresholds(solver, args.alpha_min, args.alpha_max, points, progress=progress)
    out = res.to_dict()
    if args.json:
        jsonio.dump(out, sys.stdout, {})
        print()
        return 0
    print(f"{out['model']}  Bayes-optimal thresholds in [{out['alpha_min']:g}, {out['alpha_max']:g}]  "
          + "  ".join(f"{k}={v:g}" for k, v in out["parameters"].items()))
    for k in ("alpha_wr", "alpha_alg", "alpha_it", "alpha_spec"):
        if k not in out:
            continue
        v = out[k]
        if v is None:
            print(f"  {k:<11} = null   ({out[k + '_reason']})")
        else:
            print(f"  {k:<11} = {v:.8g} ± {out['errors'].get(k, float('nan')):.1e}")
    print(f"  {out['seconds']:.1f} s")
    return 0

"""``replica phase MODEL ...``: branches, spinodals, alpha_c, the baseline and alpha_l of any model
that declares branches (the pair compared: the model's declared transition, or ``--between``)."""
from __future__ import annotations

import argparse
import contextlib
import math
import sys
from typing import Iterator

from ...artifacts import jsonio
from ... import validation
from ...errors import ParameterError
from ...runtime.progress import Progress
from .common import (add_numeric_flags, add_parameter_flags, check_numeric_args, entropic_rule_from_args, model_of,
                     parameters_from_args, prox_from_args, rule_from_args)


def add_cache_flags(p: argparse.ArgumentParser, jobs_help: str | None = None) -> None:
    """--cache, --no-cache, --jobs, --scheduler, --quiet. ``jobs_help``: --jobs defaults to None
    (the command picks, e.g. every CPU) and says so; otherwise it defaults to 1."""
    g = p.add_argument_group("cache and progress")
    g.add_argument("--cache", metavar="DIR", default=None,
                   help="cache of solved points (default $REPLICA_CACHE, else the user cache directory: "
                        "$XDG_CACHE_HOME/replica or ~/.cache/replica on Linux)")
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    g.add_argument("--jobs", type=int, default=None if jobs_help else 1, metavar="N",
                   help=jobs_help or "worker processes (default 1)")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the work on a Dask cluster instead of local processes: a scheduler address "
                        "(tcp://host:8786; default $DASK_SCHEDULER_ADDRESS) or local:N (a LocalCluster of N "
                        "processes on this machine); needs dask[distributed]")
    g.add_argument("--quiet", action="store_true", help="no progress line on stderr")


def cache_from_args(args: argparse.Namespace):
    """The point cache of ``--cache`` / ``--no-cache`` (a ``--cache`` that cannot hold entries is
    refused naming ``cache``: :func:`replica.artifacts.cache.cache_from_flags`)."""
    from ...artifacts.cache import cache_from_flags

    return cache_from_flags(args.cache, args.no_cache)


def check_jobs(args: argparse.Namespace) -> int:
    """``--jobs``: an integer in [1, 1024]."""
    return validation.integer(args.jobs, "jobs", low=1, high=1024)


def scheduler_from_args(args: argparse.Namespace) -> str | None:
    """``--scheduler``, else ``$DASK_SCHEDULER_ADDRESS`` (checked for form: a one-line error naming
    ``scheduler``); ``None``: local processes."""
    from ...runtime.executors import resolve_scheduler, scheduler_from_env

    scheduler = getattr(args, "scheduler", None) or scheduler_from_env()
    resolve_scheduler(scheduler)
    return scheduler


@contextlib.contextmanager
def executor_from_args(jobs: int, scheduler: str | None) -> Iterator:
    """The Dask executor of ``--scheduler`` (:func:`replica.runtime.executors.open_executor`), or ``None``:
    the phase machinery then starts ``jobs`` local processes where it can use them."""
    if scheduler is None:
        yield None
        return
    from ...runtime.executors import open_executor

    with open_executor(jobs, scheduler) as ex:
        yield ex


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("phase", help="follow the branches along alpha; alpha_c, alpha_l, spinodals",
                       description="Follow the branches of MODEL along alpha by continuation, report where each "
                                   "ends (spinodals), the transition alpha_c where the free entropies of a pair of "
                                   "branches (HIGH, which wins at large alpha, and LOW) cross (root-found), the "
                                   "model's baseline error eps_lin and alpha_l (global-minimum eps_g = eps_lin, "
                                   "root-found). The pair is the model's declared transition (replica models lists it) "
                                   "unless --between names one. A threshold that does not "
                                   "exist in [alpha-min, alpha-max] is null, with the reason.",
                       epilog="examples:\n  replica phase attention --omega 0.3 --json\n"
                              "  replica phase attention --omega 0.3 --thresholds-only\n"
                              "  replica phase my_model.py --between dense,sparse",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a declared model (e.g. 'attention') or a path to a .py file")
    add_parameter_flags(p)
    g = p.add_argument_group("range")
    g.add_argument("--alpha-min", type=float, default=0.1, help="smallest alpha (default 0.1)")
    g.add_argument("--alpha-max", type=float, default=4.0, help="largest alpha (default 4)")
    g.add_argument("--between", default=None, metavar="HIGH,LOW",
                   help="the pair of branches compared (default: the model's declared transition)")
    g.add_argument("--branches", default=None,
                   help="comma-separated branches to follow (default: every declared branch; the pair is "
                        "always followed)")
    add_numeric_flags(p)
    p.set_defaults(max_iter=200)
    for action in p._actions:
        if action.dest == "max_iter":
            action.help = "maximum fixed-point iterations per point (default 200: a point that needs more ends its branch)"
        if action.dest == "verbose":
            action.help = argparse.SUPPRESS
    add_cache_flags(p)
    p.add_argument("--thresholds-only", action="store_true",
                   help="only alpha_c and alpha_l, from a few root-finder solves (much faster); 'curves' then "
                        "hold just those points and spinodals are not searched for")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run, check_args=check_args)
    return p


#: the most refinements ``replica phase --accuracy`` tries
MAX_PHASE_LEVELS = 3


def _thresholds(res) -> dict:
    return {"alpha_c": res.alpha_c.value, "alpha_l": res.alpha_l.value, "eps_lin": res.eps_lin}


def refine_thresholds(module, res, settings, run_at, accuracy: float):
    """Re-run the phase point on refined rules (:meth:`SolverSettings.refined`) until the
    thresholds move by less than ``accuracy`` relative: the finest result, its error bars
    (``|finest - previous|`` of ``alpha_c``, ``alpha_l``, ``eps_lin``; None where a threshold does
    not exist; empty when no refinement was possible), the level before the finest (None without
    a refinement), the finest settings, and why the refinement stopped early (None otherwise)."""
    prev, coarser = res, None
    note = None
    errors: dict = {}
    for _ in range(MAX_PHASE_LEVELS):
        try:
            settings = settings.refined(module, list(module.BRANCHES))
        except ParameterError as exc:
            note = f"stopped: {exc}"
            break
        fine = run_at(settings)
        a, b = _thresholds(prev), _thresholds(fine)
        errors = {k: (None if a[k] is None or b[k] is None else abs(b[k] - a[k])) for k in b}
        coarser, prev = prev, fine
        if not _above(errors, b, accuracy):
            break
    return prev, coarser, errors, settings, note


def spinodal_errors(res, previous) -> dict[str, list[float | None]]:
    """Per branch, a bar on each spinodal of ``res``: the gap to the first ``alpha`` where the
    continuation failed (the end lies in between on this rule) plus the spinodal's move from the
    ``previous`` (coarser) level; None where the levels do not have the same ends."""
    out: dict[str, list[float | None]] = {}
    prev = previous.spinodals
    for b, spins in res.spinodals.items():
        ends = [e for e in res.curves[b].ends if e.alpha in spins]
        before = prev.get(b, [])
        out[b] = [abs(e.alpha_next - e.alpha) + abs(e.alpha - before[i]) if len(before) == len(spins) else None
                  for i, e in enumerate(ends)]
    return out


def _above(errors: dict, values: dict, accuracy: float) -> list[str]:
    return [k for k, e in errors.items() if values[k] is not None and (e is None or e > accuracy * abs(values[k]))]


def with_jump_terms(module, params, res, settings, errors: dict, accuracy: float, note: str | None):
    """``errors`` plus the thresholds' jump terms (:func:`replica.phase.jumps.threshold_jump_terms`),
    whether they meet ``accuracy``, and the note saying why not."""
    from ...phase.jumps import threshold_jump_terms

    if not errors:
        return errors, False, note
    terms, notes = threshold_jump_terms(module, params, res, settings)
    errors = {k: (e + terms.get(k, 0.0) if e is not None else None) for k, e in errors.items()}
    bad = _above(errors, _thresholds(res), accuracy)
    parts = [note] if note else []
    if bad:
        parts.insert(0, "error bars above the accuracy on " + ", ".join(
            f"{k} (±{errors[k]:.1e}" + (f", of which {terms[k]:.1e} from the tensor rule's jumps" if terms.get(k) else "")
            + ")" if errors[k] is not None else f"{k} (no bar)" for k in bad))
        if any(terms.get(k) for k in bad):
            parts.append("--quadrature preint solves every branch with the jump-aware rule")
    parts += notes
    return errors, not bad, "; ".join(parts) or None


def _fmt(v) -> str:
    return "null" if v is None else f"{v:.6g}"


def check_args(args: argparse.Namespace) -> None:
    """What needs no model: the numeric flags and the alpha range (before the model loads)."""
    check_numeric_args(args)
    for name in ("alpha_min", "alpha_max"):
        v = getattr(args, name)
        if not math.isfinite(v) or v <= 0:
            raise ParameterError(name.replace("_", "-"), f"must be a finite number > 0, got {v}")
        validation.sample_complexity(v, name.replace("_", "-"))
    if args.alpha_max <= args.alpha_min:
        raise ParameterError("alpha-max", f"must be larger than --alpha-min ({args.alpha_min}), got {args.alpha_max}")


def run(args: argparse.Namespace) -> int:
    from ...phase import SolverSettings, phase_point  # the phase machinery (scipy), only for this command
    from ...phase.common import resolve_pair

    module = model_of(args)
    params = parameters_from_args(module, args)
    pair = None
    if args.between is not None:
        pair = tuple(b.strip() for b in args.between.split(",") if b.strip())
    pair = resolve_pair(module, pair)
    branches = None
    if args.branches is not None:
        branches = [b.strip() for b in args.branches.split(",") if b.strip()]
        for b in branches:
            if b not in module.BRANCHES:
                raise ParameterError("branches", f"unknown branch {b!r}; {module.MODEL} has {list(module.BRANCHES)}")
    jobs = check_jobs(args)
    scheduler = scheduler_from_args(args)
    cache = cache_from_args(args)  # a --cache that cannot hold points is refused here, before any solve
    settings = SolverSettings(rule=rule_from_args(module, args), tol=args.tol, max_iter=args.max_iter,
                              entropic_rule=entropic_rule_from_args(module, args), prox=prox_from_args(args))
    progress = Progress(label=f"replica phase {module.MODEL}", enabled=not args.quiet)
    label = " ".join(f"{k}={v:g}" for k, v in params.items())

    def run_at(settings, executor):
        return phase_point(module, params, pair=pair, alpha_min=args.alpha_min, alpha_max=args.alpha_max,
                           branches=branches, settings=settings, cache=cache, progress=progress,
                           jobs=jobs, thresholds_only=args.thresholds_only, label=label, executor=executor)

    errors, met, note = None, None, None
    try:
        with executor_from_args(jobs, scheduler) as executor:
            res = run_at(settings, executor)
            if args.accuracy is not None:
                res, coarser, errors, fine_settings, note = refine_thresholds(module, res, settings,
                                                                     lambda s: run_at(s, executor), args.accuracy)
                errors, met, note = with_jump_terms(module, params, res, fine_settings, errors, args.accuracy, note)
                if errors and not args.thresholds_only and coarser is not None:
                    # reported with their bars, not held to --accuracy: a spinodal's resolution is the
                    # continuation's smallest step, not the rules' (docs/reference/accuracy.md)
                    errors["spinodals"] = spinodal_errors(res, coarser)
    finally:
        progress.close()
    if args.json:
        out = res.to_dict()
        out["prox"] = settings.prox.kind
        if errors is not None:
            out.update(errors=errors, accuracy=args.accuracy, accuracy_met=met)
            if note:
                out["accuracy_note"] = note
        jsonio.dump(out, sys.stdout)
        print()
        return 0
    print(f"{res.model}  " + "  ".join(f"{k}={v:g}" for k, v in res.parameters.items()))
    print(f"prox convention: {settings.prox.describe()}")
    print(f"alpha in [{res.alpha_min:g}, {res.alpha_max:g}], {res.quadrature}, {res.solves} solves "
          f"({res.cached} cached), {res.seconds:.1f} s\n")
    print(f"  pair: {res.pair[0]} (wins at large alpha) vs {res.pair[1]}; baseline: {res.baseline or 'none'}")
    for name in ("alpha_c", "alpha_l"):
        bar = "" if not errors or errors.get(name) is None else f" ± {errors[name]:.1e}"
        print(f"  {name} = {_fmt(getattr(res, name).value) + bar:<18}  {getattr(res, name).reason}")
    if errors is not None:
        print(f"  accuracy {args.accuracy:g}: " + ("met" if met else f"NOT MET: {note}"))
    print(f"  eps_lin = {res.eps_lin:.6g}")
    print("\n  global minimum: " + ", ".join(f"{b} on [{a0:.4g}, {a1:.4g}]" for a0, a1, b in res.segments))
    print("\n  branch       solved range        points  ends")
    for b, c in res.curves.items():
        rng = "-" if c.range is None else f"[{c.range[0]:.4g}, {c.range[1]:.4g}]"
        ends = "; ".join(f"{e.reason} after alpha={e.alpha:.4g}" for e in c.ends) or "none in range"
        print(f"  {b:<12} {rng:<19} {len(c):>6}  {ends}")
    return 0

"""``replica sweep SPEC``: every point of a parameter grid computed once, on local processes or a
Dask cluster, written as a labelled dataset (NetCDF/Zarr/CSV)."""
from __future__ import annotations

import argparse
import sys

from ...artifacts import jsonio
from ... import validation
from ...errors import ParameterError
from ...runtime.executors import available_cpus
from ...runtime.progress import Progress
from .phase import add_cache_flags, cache_from_args, scheduler_from_args

EXAMPLE = """\
example spec (ridge.toml):
  model = "ridge"
  output = "ridge.nc"
  [parameters]
  Delta = 0.25
  [grid]
  alpha = {start = 0.25, stop = 4.0, num = 16, spacing = "log"}
  lam = [0.01, 0.1, 1.0]
  [compute]
  kind = "solve"            # solve | thresholds | phase | simulate
  branches = ["centered"]
  [warm_start]
  axis = "alpha"            # neighbours along alpha warm-start each other
  chunk = 8                 # in chains of at most 8 points

examples:
  replica sweep ridge.toml --jobs 2
  replica sweep ridge.toml --scheduler local:4 --out ridge.nc --csv ridge.csv
  replica sweep phase.toml --scheduler tcp://10.0.0.5:8786
  replica sweep ridge.toml --dry-run

Interrupted (Ctrl-C, kill): finished points are in the cache; the same command resumes.
Spec format and the dataset's variables: docs/how-to/sweeps.md."""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("sweep", help="compute a parameter grid (spec file) into a labelled dataset",
                       description="Compute every point of the grid in SPEC (a TOML or YAML file: model, fixed "
                                   "parameters, grid axes, what to compute per point) once, on local processes or a "
                                   "Dask cluster, and write an xarray dataset (dimensions: the grid axes) to NetCDF "
                                   "(.nc), Zarr (.zarr) or CSV (.csv). Solved points are cached: a rerun or an "
                                   "interrupted sweep computes only what is missing.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("spec", help="the sweep's spec file (.toml, or .yaml/.yml with PyYAML)")
    p.add_argument("--out", metavar="FILE", default=None,
                   help="the dataset: .nc (NetCDF-4), .zarr or .csv (default: the spec's 'output')")
    p.add_argument("--csv", metavar="FILE", default=None, help="also export a CSV table (one row per point)")
    p.add_argument("--dry-run", action="store_true", help="check the spec and print the plan; compute nothing")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument("--yes", action="store_true",
                   help=f"run a sweep of more than {CONFIRM_POINTS} points or roughly more than "
                        f"{CONFIRM_SECONDS / 3600:g} h (without it such a sweep is refused, with its size and estimate)")
    add_cache_flags(p, jobs_help="local worker processes (default: all CPUs of this machine; not with --scheduler)")
    p.set_defaults(func=run)
    return p


#: a sweep of more points than this, or estimated longer than CONFIRM_SECONDS, needs --yes
CONFIRM_POINTS = 1000
CONFIRM_SECONDS = 3600.0


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 172800 else f"{seconds / 86400:.1f} days"


def estimate(checked, kind, settings, jobs: int, scheduler: str | None) -> tuple[float | None, str]:
    """``(seconds, words)``: the sweep's size and a rough duration (the kind's cost of one point on
    one core, :data:`replica.sweep.kinds.ROUGH_SECONDS`, over the local workers; CPU time on a
    cluster), said before any work."""
    shape = " x ".join(f"{a.name} {len(a)}" for a in checked.axes)
    size = f"{checked.size} point{'s' if checked.size != 1 else ''} ({shape}) of kind {kind.name}"
    if kind.seconds is None:
        return None, f"{size}; no estimate for this kind"
    per = float(kind.seconds(settings))
    if scheduler is None:
        total = per * checked.size / max(1, min(jobs, checked.size))
        where = f"on {jobs} local process{'es' if jobs > 1 else ''}"
    else:
        total, where = per * checked.size, "of CPU time on the cluster"
    return total, (f"{size}: roughly {_duration(total)} {where} (~{per:g} s per point on one core at default "
                   "rules, a rough figure; points in the cache cost nothing)")


def run(args: argparse.Namespace) -> int:
    from ...sweep.dataset import check_output, table, write_csv, write_dataset
    from ...sweep.run import plan_chains, prepare, run_sweep
    from ...sweep.spec import load_spec

    scheduler = scheduler_from_args(args)
    if scheduler is not None and args.jobs is not None:
        raise ParameterError("jobs", "give --jobs (local processes) or --scheduler (a Dask cluster), not both")
    jobs = validation.integer(args.jobs if args.jobs is not None else available_cpus(), "jobs", low=1, high=1024)
    spec = load_spec(args.spec)
    out = args.out or spec.output
    if out is None:
        raise ParameterError("out", "give --out FILE (.nc, .zarr, .csv) or output = \"FILE\" in the spec")
    if not args.dry_run:
        check_output(out)  # before hours of work, not after
        if args.csv:
            if not args.csv.lower().endswith(".csv"):
                raise ParameterError("csv", f"must name a .csv file, got {args.csv}")
            check_output(args.csv)
    checked, kind, _, settings = prepare(spec)
    seconds, words = estimate(checked, kind, settings, jobs, scheduler)
    big = checked.size > CONFIRM_POINTS or (seconds is not None and seconds > CONFIRM_SECONDS)
    if big and not (args.yes or args.dry_run):  # said and refused before any work
        raise ParameterError("yes", f"{words}; a sweep of more than {CONFIRM_POINTS} points or "
                                    f"{_duration(CONFIRM_SECONDS)} starts only with --yes (--dry-run shows its plan)")
    if args.dry_run:
        chains = plan_chains(checked)
        plan = dict(model=checked.model, kind=kind.name, points=checked.size,
                    shape={a.name: len(a) for a in checked.axes}, warm_axis=checked.warm_axis, chunk=checked.chunk,
                    chains=len(chains), longest_chain=max(len(c) for c in chains), settings=settings,
                    runs_on=scheduler or f"{jobs} local process(es)", out=out, estimate=words,
                    estimate_seconds=seconds)
        if args.json:
            jsonio.dump(plan, sys.stdout)
            print()
        else:
            for k, v in plan.items():
                print(f"{k}: {v}")
        return 0
    cache = cache_from_args(args)
    progress = Progress(label="replica sweep", enabled=not args.quiet)
    try:
        # the estimate is said once the executor is open: a scheduler that cannot be reached is one line
        result = run_sweep(checked, jobs=jobs, scheduler=scheduler, cache=cache, progress=progress, estimate=words)
    finally:
        progress.close()
    csv_only = str(out).lower().endswith(".csv")
    ds = None if csv_only else result.dataset()  # a CSV table needs no xarray
    paths = [write_csv(result, out) if csv_only else write_dataset(ds, out)]
    if args.csv:
        paths.append(write_csv(result, args.csv))
    failed = result.failed
    columns, _ = table(result)
    dims = {a.name: len(a) for a in checked.axes} | {k: len(v) for k, v in result.dims.items()}
    summary = dict(out=str(paths[0]), csv=str(paths[1]) if args.csv else None, points=checked.size,
                   computed=result.computed, cached=result.cached, failed=len(failed), seconds=result.seconds,
                   runs_on=result.where, dims=dims,
                   variables=list(ds.data_vars) if ds is not None else columns[len(dims):])
    if args.json:
        jsonio.dump(summary, sys.stdout)
        print()
    else:
        for path in paths:
            print(path)
    print(f"replica sweep: {checked.size} points ({result.computed} computed, {result.cached} from the cache, "
          f"{len(failed)} failed) in {result.seconds:.0f} s on {result.where}", file=sys.stderr)
    if failed:
        print("replica sweep: failed points have NaN and their message in the 'error'/'notes' variables",
              file=sys.stderr)
    return 0

"""``replica figures``: the figures every installed application registers (PNG + CSV), e.g. the
attention study's Figs. 2, 3 and 9 (:mod:`replica.applications`)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...artifacts.outputs import check_output_dir
from ...errors import ParameterError
from ...runtime.executors import available_cpus
from ...runtime.progress import Progress
from .phase import add_cache_flags, cache_from_args, check_jobs, executor_from_args, scheduler_from_args


def _registered():
    from ...applications import applications

    return [app for app in applications() if app.figures]


def add_parser(sub) -> argparse.ArgumentParser:
    described = "; ".join(app.figures_help or app.name for app in _registered()) or "none installed"
    p = sub.add_parser("figures", help="draw the applications' figures (PNG + CSV) on default parameters",
                       description="Compute and draw the figures every installed application registers, each "
                                   f"as PNG with the CSV behind it, plus summary.json: {described}.",
                       epilog="examples:\n  replica figures --out figures --jobs 2\n"
                              "  replica figures --quick --out /tmp/fig\n"
                              "  python -m numerics.simulate sweep ... --out sim.csv && replica figures --sim sim.csv",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="figures", metavar="DIR",
                   help="output directory (default figures/; created if its parent exists)")
    p.add_argument("--quick", action="store_true", help="coarse grids and quadrature (tests, CI)")
    p.add_argument("--sim", metavar="FILE", default=None,
                   help="overlay simulation points from a 'numerics.simulate sweep' CSV")
    p.add_argument("--quadrature", default=None, metavar="RULE",
                   help="energetic average, as for 'replica solve' (default gh:12, gh:8 with --quick)")
    p.add_argument("--dpi", type=int, default=None, help="PNG resolution (default 150, 100 with --quick)")
    p.add_argument("--replicon-points", type=int, default=None, metavar="N",
                   help="replicon evaluations per followed branch, RS-unstable ranges hatched (default 10, "
                        "0 with --quick; 0 skips; docs/explanation/replicon.md)")
    add_cache_flags(p, jobs_help="worker processes, parallel over an application's phase points (default: all CPUs "
                                        "of this machine)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    apps = _registered()
    if not apps:
        raise ParameterError("figures", "no installed application registers figures (replica.applications)")
    if args.jobs is None:
        args.jobs = available_cpus()
    jobs = check_jobs(args)
    scheduler = scheduler_from_args(args)
    check_output_dir(args.out, "out")  # before minutes of work, not after
    progress = Progress(label="replica figures: phase points", enabled=not args.quiet)
    notes = []
    try:
        with executor_from_args(jobs, scheduler) as executor:
            for app in apps:
                # one application writes into --out; several, each into its own subfolder
                out = args.out if len(apps) == 1 else str(Path(args.out) / app.name)
                paths, note = app.figure_function()(argparse.Namespace(**{**vars(args), "out": out}), jobs=jobs,
                                                    cache=cache_from_args(args), progress=progress,
                                                    executor=executor)
                for path in paths:
                    print(path)
                notes.append(note)
    finally:
        progress.close()
    where = f"on {scheduler}" if scheduler else f"with {jobs} job(s)"
    for note in notes:
        print(f"{note} {where}", file=sys.stderr)
    return 0

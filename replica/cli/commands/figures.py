"""``replica figures``: the paper's theory figures (Figs. 2, 3, 9) as PNG + CSV."""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from ...errors import ParameterError
from ...runtime.executors import available_cpus
from ...artifacts.outputs import check_output_dir
from ...runtime.progress import Progress
from .phase import add_cache_flags, cache_from_args, check_jobs, executor_from_args, scheduler_from_args


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("figures", help="draw the paper's figures (PNG + CSV) on default parameters",
                       description="Compute the phase analysis of the paper's attention model and draw Fig. 2 "
                                   "(middle: q, m, theta; right: eps_g with eps_lin, alpha_c, alpha_l), Fig. 3 "
                                   "(centre: training-loss difference of the branches; right: phase diagram "
                                   "alpha_c(omega), alpha_l(omega)) and Fig. 9 (phase diagram for "
                                   "A = [[0.3, 0.7], [0.8, 0.2]]), each as PNG with the CSV behind it, plus "
                                   "summary.json.",
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
    add_cache_flags(p, jobs_help="worker processes, parallel over omega (default: all CPUs of this machine)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ...applications.attention.figures import FigureConfig, make_figures, quick_config
    from ...numeric.integrators import from_spec
    from ...artifacts.registry import load_module

    if args.jobs is None:
        args.jobs = available_cpus()
    jobs = check_jobs(args)
    scheduler = scheduler_from_args(args)
    cfg = quick_config() if args.quick else FigureConfig()
    if args.quadrature is not None:
        from_spec(args.quadrature, load_module("attention"))  # validate early (names 'quadrature')
        cfg = replace(cfg, settings=replace(cfg.settings, rule=args.quadrature))
    if args.dpi is not None:
        if args.dpi < 20 or args.dpi > 1200:
            raise ParameterError("dpi", f"must be in [20, 1200], got {args.dpi}")
        cfg = replace(cfg, dpi=args.dpi)
    if args.replicon_points is not None:
        if args.replicon_points < 0:
            raise ParameterError("replicon-points", f"must be >= 0, got {args.replicon_points}")
        cfg = replace(cfg, replicon_points=args.replicon_points)
    check_output_dir(args.out, "out")  # before minutes of work, not after
    progress = Progress(label="replica figures: phase points", enabled=not args.quiet)
    try:
        with executor_from_args(jobs, scheduler) as executor:
            data, pngs = make_figures(args.out, jobs=jobs, sim=args.sim, cache=cache_from_args(args),
                                      progress=progress, config=cfg, executor=executor)
    finally:
        progress.close()
    for path in pngs:
        print(path)
    print(os.path.join(args.out, "summary.json"))
    where = f"on {scheduler}" if scheduler else f"with {jobs} job(s)"
    print(f"{len(data.main) + len(data.second)} phase points in {data.seconds:.0f} s {where}", file=sys.stderr)
    return 0

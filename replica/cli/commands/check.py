"""``replica check MODEL --alpha A --d 200,400,800 --seeds N``: theory against simulation.

The simulator is a plug-in (:mod:`replica.simulators`: the project's own is the PyTorch simulator,
torch and scikit-learn), above the core: this command finds and imports it inside :func:`run`
only, so that ``replica`` itself, its other commands and ``--help`` need neither.
"""
from __future__ import annotations

import argparse
import math
import sys
import textwrap

from ...artifacts import jsonio
from ... import validation
from ...errors import ParameterError
from .common import add_parameter_flags, add_rule_flags, model_of, options_from_args, parameters_from_args

#: the most dimensions and seeds one check accepts
MAX_DIMENSIONS, MAX_SEEDS = 12, 1000
#: the smallest and largest dimension a check accepts
MIN_D, MAX_D = 10, 1_000_000


def add_parser(sub) -> argparse.ArgumentParser:
    """Register ``replica check``."""
    p = sub.add_parser(
        "check", help="hold the theory against a simulation of the declared model",
        description=textwrap.fill(
                    "Solve the replica-symmetric theory of MODEL at ALPHA (as `replica solve` does: values, error "
                    "bars, replicon), simulate the model from its own declaration at each dimension d and seed "
                    "(data law, teacher and channel or target, loss and penalty lambdified from the sympy "
                    "declaration; the empirical risk minimised exactly for convex GLMs, by L-BFGS or proximal "
                    "gradient in torch otherwise), extrapolate every quantity linearly in 1/d with standard errors "
                    "and give a verdict per quantity: 'agrees' when the extrapolation is within 3 combined "
                    "standard errors of the theory. Compared: the order parameters q, m, theta (not V), eps_g and "
                    "every declared observable, the training loss. Exit status 0 when every quantity agrees and "
                    "every run converged, 1 otherwise, 2 for bad input.", 100),
        epilog="Examples:\n"
               "  replica check logistic --alpha 2 --d 200,400,800 --seeds 4\n"
               "  replica check my_model.py --alpha 1.5 --param lam=0.05 --json --plot check.png\n"
               "  replica check attention --alpha 2 --branch semantic --d 200,400 --seeds 3",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a declared model (`replica models`) or a path to a .py file defining `model`")
    p.add_argument("--alpha", type=float, required=True, help="sample complexity n/d (> 0)")
    p.add_argument("--branch", default=None,
                   help="a branch the model declares (families pinned to 0: the simulation starts on it and, for "
                        "a smooth penalty, is constrained to it), or free (default)")
    add_parameter_flags(p)
    g = p.add_argument_group("simulation")
    g.add_argument("--d", default="200,400,800", metavar="D1,D2,...",
                   help=f"comma-separated dimensions, each in [{MIN_D}, {MAX_D}] (default 200,400,800)")
    g.add_argument("--spectrum", default=None, metavar="FILE.csv",
                   help="a GLM on structured data (columns k, lambda, theta: replica solve --spectrum), simulated "
                        "at d = the number of modes")
    g.add_argument("--seeds", type=int, default=4, help="independent instances per dimension, >= 2 (default 4)")
    g.add_argument("--seed0", type=int, default=0, help="first seed (default 0)")
    g.add_argument("--n-test", type=int, default=100_000,
                   help="fresh test samples per run for the test observables (default 100000)")
    g.add_argument("--tol", type=float, default=1e-7,
                   help="the minimiser's convergence test: |grad R|_2 / sqrt(d) below this (default 1e-7)")
    g.add_argument("--max-iter", type=int, default=20000, help="most iterations of the minimiser (default 20000)")
    g.add_argument("--threads", type=int, default=1,
                   help="BLAS and torch threads of the simulation (default 1: faster for its small linear algebra)")
    g.add_argument("--device", default="cpu", help="cpu or cuda (cuda:K): where torch minimises (default cpu)")
    g.add_argument("--unconstrained", action="store_true",
                   help="the branch sets the initial weights only; the minimiser may leave it")
    g = p.add_argument_group("theory", "solved as `replica solve` solves it, with its flags (a coarser --quadrature "
                                       "solves faster and reports wider error bars)")
    add_rule_flags(g)
    g.add_argument("--no-replicon", dest="replicon", action="store_false",
                   help="skip the theory's replicon (RS stability)")
    g.add_argument("--no-theory-bars", dest="theory_bars", action="store_false",
                   help="solve the theory without its error bars (their refinement and jump check take minutes for "
                        "six-dimensional models); each verdict then rests on the simulation's standard error")
    g.add_argument("--theory", default=None, metavar="SOLVE.json",
                   help="use this `replica solve MODEL --alpha A [--branch B] --json` output of the same point "
                        "instead of solving (for models whose solve takes minutes)")
    p.add_argument("--json", action="store_true", help="print one JSON object (strict: null + <key>_reason)")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="also draw value against 1/d for every quantity")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run, check_args=check_args)
    return p


def dimensions(text: str) -> list[int]:
    """``"200,400,800"`` -> ``[200, 400, 800]``; raises :class:`ParameterError` naming ``d``."""
    parts = [s.strip() for s in str(text).split(",") if s.strip()]
    if not parts:
        raise ParameterError("d", f"expected comma-separated dimensions, got {text!r}")
    if len(parts) > MAX_DIMENSIONS:
        raise ParameterError("d", f"at most {MAX_DIMENSIONS} dimensions, got {len(parts)}")
    out = []
    for s in parts:
        try:
            v = int(s)
        except ValueError:
            raise ParameterError("d", f"expected integers, got {s!r}") from None
        out.append(validation.integer(v, "d", low=MIN_D, high=MAX_D))
    if len(set(out)) != len(out):
        raise ParameterError("d", f"dimensions given twice in {text!r}")
    return sorted(out)


def check_device(device: str) -> str:
    """``cpu`` or an available ``cuda``/``cuda:K`` (torch imported only for cuda)."""
    if device == "cpu":
        return device
    if device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        try:
            import torch
        except ImportError:
            raise ParameterError("device", f"{device} needs torch, which is not installed (pip install -e '.[sim]')") \
                from None
        if not torch.cuda.is_available():
            raise ParameterError("device", f"{device} requested but torch sees no CUDA device")
        if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
            raise ParameterError("device", f"{device}: torch sees {torch.cuda.device_count()} CUDA device(s)")
        return device
    raise ParameterError("device", f"expected cpu, cuda or cuda:K, got {device!r}")


def check_args(args: argparse.Namespace) -> None:
    """Everything that needs no model, before it loads: one line naming the flag, exit 2."""
    alpha = validation.sample_complexity(args.alpha, "alpha")
    if not alpha > 0:
        raise ParameterError("alpha", f"must be > 0 for a simulation (n = alpha d samples), got {alpha:g}")
    ds = dimensions(args.d)
    validation.integer(args.seeds, "seeds", low=2, high=MAX_SEEDS)
    validation.integer(args.seed0, "seed0", low=0)
    validation.integer(args.n_test, "n-test", low=100, high=10_000_000)
    validation.real(args.tol, "tol", low=1e-14, high=1e-2)
    validation.integer(args.max_iter, "max-iter", low=1, high=10_000_000)
    validation.integer(args.threads, "threads", low=1, high=1024)
    acc = args.accuracy
    if acc is not None and not (math.isfinite(acc) and 1e-12 <= acc < 1):
        raise ParameterError("accuracy", f"must be a relative accuracy in [1e-12, 1), got {acc}")
    if args.spectrum is None:
        for d in ds:
            if round(alpha * d) < 1:
                raise ParameterError("alpha", f"alpha * d = {alpha * d:g} gives no samples at d = {d}")
    if args.plot is not None:
        from ...artifacts.outputs import check_output_file

        check_output_file(args.plot, "plot")
    check_device(args.device)
    options_from_args(args, iteration_flags=False).convention()  # --prox, --prox-start, --prox-saddles


def run(args: argparse.Namespace) -> int:
    """Solve the theory (the one pipeline, :func:`replica.numeric.point.solve_point`), run the registered
    simulator's check, print the table or JSON (and draw the plot)."""
    alpha = args.alpha
    ds = dimensions(args.d)
    spectrum = None
    if args.spectrum is not None:  # the Gaussian covariate data law: one dimension, the number of modes
        from ...numeric.spectrum import Spectrum

        spectrum = Spectrum.from_csv(args.spectrum)
        if args.d not in ("200,400,800", str(spectrum.N)):
            raise ParameterError("d", f"a spectrum of {spectrum.N} modes is simulated at d = {spectrum.N}, "
                                      f"got --d {args.d}")
        ds = [spectrum.N]
        if round(alpha * spectrum.N) < 1:
            raise ParameterError("alpha", f"alpha * d = {alpha * spectrum.N:g} gives no samples at d = {spectrum.N}")
    theory_result = None
    if args.theory is not None:
        import json

        try:
            with open(args.theory, encoding="utf-8") as fh:
                theory_result = json.load(fh)
        except (OSError, ValueError) as exc:
            raise ParameterError("theory", f"cannot read {args.theory}: {exc}") from None
    module = model_of(args)  # loaded once, while the command line was parsed
    if spectrum is not None:
        from ...registry.spectral import gcm_module

        module = gcm_module(module, spectrum)
    params = parameters_from_args(module, args)
    if args.branch not in (None, "free") and args.branch not in module.BRANCHES:
        raise ParameterError("branch", f"unknown branch {args.branch!r} for model {module.MODEL}; known: "
                                       f"{['free', *module.BRANCHES]}")
    options = options_from_args(args, branch=args.branch, iteration_flags=False).replace(error_bars=args.theory_bars)
    # the theory's solver: parameter domains, constraints, branch and rules checked here, before any work,
    # and the very solver the theory is solved with
    solver = options.solver(module, params)
    from ...simulators import check_module

    check = check_module()
    progress = None if args.quiet else check.progress
    res = check.run_check(args.model, alpha, parameters=params, branch=args.branch, ds=ds, seeds=args.seeds,
                          seed0=args.seed0, n_test=args.n_test, tol=args.tol, max_iter=args.max_iter,
                          device=check_device(args.device), constrain=not args.unconstrained, replicon=args.replicon,
                          threads=args.threads, theory_result=theory_result, theory_bars=args.theory_bars,
                          progress=progress, spectrum=spectrum, module=module, options=options, solver=solver)
    if args.plot is not None:
        check.plot(res, args.plot)
    if args.json:
        jsonio.dump(res, sys.stdout, check.REASONS)
        print()
    else:
        print(check.format_table(res))
        if args.plot is not None:
            print(f"plot: {args.plot}")
    return 0 if res["agrees"] and res["converged"] else 1

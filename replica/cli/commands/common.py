"""Flags and helpers shared by the numeric subcommands (solve, phase, figures)."""
from __future__ import annotations

import argparse
import math

from ...interface.generated_model import GeneratedModel
from ... import validation
from ...errors import ParameterError
from ...numeric.integrators import from_spec
from ...numeric.point import PointOptions
from ..flags import add_parameter_flags as _add_flags
from ..flags import parameters_from_args  # noqa: F401 -- the commands' import

#: the most fixed-point iterations a command accepts (a point needing more will not converge)
MAX_ITER = 100_000


def add_parameter_flags(p: argparse.ArgumentParser) -> None:
    """Mark ``p`` as taking a model's parameter flags: :func:`replica.cli.build_parser` adds them
    (``--NAME`` per declared parameter, ``--X`` per matrix, ``--param NAME=VALUE``; the help texts
    an application registers) once the model on the command line is known, so that a model's
    ``--help`` lists its own parameters and no other model's."""
    p.set_defaults(parameter_flags={})
    p._replica_model_flags = True  # read by replica.cli.build_parser


def add_model_flags(p: argparse.ArgumentParser, module) -> None:
    """The parameter flags of ``module`` (None: only ``--param``) on a parser marked by
    :func:`add_parameter_flags`."""
    from ...applications import parameter_help

    _add_flags(p, module, parameter_help())


def add_numeric_flags(p: argparse.ArgumentParser) -> None:
    """Add the flags every numeric command shares (quadrature, prox convention, accuracy, tolerance)."""
    g = p.add_argument_group("numerics")
    add_rule_flags(g)
    g.add_argument("--tol", type=float, default=1e-8,
                   help=f"relative residual at convergence, in [{validation.MIN_TOL:g}, {validation.MAX_TOL:g}] "
                        "(default 1e-8)")
    g.add_argument("--max-iter", type=int, default=500, help="maximum fixed-point iterations")
    g.add_argument("--verbose", action="store_true", help="print the residual of every iteration")


def add_rule_flags(g) -> None:
    """The flags of how a point is solved (:class:`~replica.numeric.point.PointOptions`): the rules, the
    accuracy and the prox convention, on an argument group ``g``."""
    g.add_argument("--quadrature", default=None, metavar="RULE",
                   help="energetic average: fast|default|high or gh:N, smolyak:N, sobol:LOG2N, d7 (a degree-7 "
                        "12-point cubature per Gaussian pair: a low-order reference) (rules); "
                        "preint[:fast|default|high] (jump-aware pre-integration); auto (Gauss-Hermite "
                        "where the branch has a mirror symmetry; "
                        "pre-integration elsewhere)")
    g.add_argument("--entropic-quadrature", default=None, metavar="RULE",
                   help="entropic average of a non-quadratic regularizer (l1, elastic net): aligned:N (N points "
                        "per smooth piece of a rule aligned with the prox's kinks; the default, N = 20, for a "
                        "scalar prox) or gh:N (tensor Gauss-Hermite, N per axis)")
    g.add_argument("--accuracy", type=float, default=None, metavar="TOL",
                   help="refine the rules and prox starts until every error bar is below TOL relative, or stop "
                        "and say what could not be resolved (default: one refinement, checked against 1e-3)")
    g.add_argument("--prox", default="global", metavar="global|local",
                   help="which minimiser of the bracket the equations use: global (default, the lowest minimum: the "
                        "theory of the global minimiser of the risk) or local (the minimum reached by descent from "
                        "--prox-start, as theory codes that run a local minimiser from the origin; docs/explanation/conventions.md)")
    g.add_argument("--prox-start", default=None, metavar="H1,H2,...",
                   help="start of the local convention's descent (one number for every coordinate, or PROX_DIM "
                        "numbers; default: the origin)")
    g.add_argument("--prox-saddles", default=None, metavar="split|stay",
                   help="where the local descent stops on a stationary point that is no minimum: split (default: "
                        "half for the minimum on either side) or stay (keep it, as a quasi-Newton code that stops "
                        "where the gradient vanishes does; to reproduce such codes, not a theory)")


def check_numeric_args(args: argparse.Namespace) -> None:
    """``--tol``, ``--max-iter`` and ``--accuracy`` (when the command has them), before any work starts."""
    if getattr(args, "tol", None) is not None:
        validation.tolerance(args.tol, "tol")
    acc = getattr(args, "accuracy", None)
    if acc is not None and not (math.isfinite(acc) and 1e-12 <= acc < 1):
        raise ParameterError("accuracy", f"must be a relative accuracy in [1e-12, 1), got {acc}")
    tol = getattr(args, "tol", None)
    if acc is not None and tol is not None and acc < tol:
        # the iteration stops at a relative residual up to tol: no refinement of the rules gets
        # the error of its fixed point below that (said before any work, not after minutes of it)
        raise ParameterError("accuracy", f"{acc:g} is below --tol {tol:g}: the iteration stops at a relative "
                                         f"residual up to tol, which no rule can refine away; give --tol {acc:g} "
                                         "or smaller, or a larger --accuracy")
    if getattr(args, "max_iter", None) is not None:
        validation.integer(args.max_iter, "max-iter", low=1, high=MAX_ITER)


def options_from_args(args: argparse.Namespace, branch: str | None = None,
                      default_quadrature: str | None = "auto", iteration_flags: bool = True) -> PointOptions:
    """The :class:`~replica.numeric.point.PointOptions` of a command's flags (those it has; the rest keep
    their defaults): one place that reads ``--quadrature``, ``--entropic-quadrature``, ``--prox``,
    ``--prox-start``, ``--prox-saddles``, ``--tol``, ``--max-iter``, ``--verbose``, ``--accuracy`` and
    ``--no-replicon`` (``iteration_flags=False``: the command's ``--tol``/``--max-iter`` are not the
    theory's, as ``replica check``'s, which are the simulation's)."""
    start = getattr(args, "prox_start", None)
    if start is not None:
        if not str(start).strip():
            raise ParameterError("prox-start", "is empty; give numbers, e.g. --prox-start 0,0")
        try:
            start = tuple(float(v) for v in str(start).split(","))
        except ValueError:
            raise ParameterError("prox-start", f"expected comma-separated numbers, got {args.prox_start!r}") from None
    given = {"quadrature": getattr(args, "quadrature", None) or default_quadrature,
             "entropic_quadrature": getattr(args, "entropic_quadrature", None),
             "prox": getattr(args, "prox", None) or "global", "prox_start": start,
             "prox_saddles": getattr(args, "prox_saddles", None), "accuracy": getattr(args, "accuracy", None)}
    for name in (("tol", "max_iter", "verbose") if iteration_flags else ()) + ("replicon",):
        if getattr(args, name, None) is not None:
            given[name] = getattr(args, name)
    return PointOptions(branch=branch, **given)


def prox_from_args(args: argparse.Namespace):
    """The prox convention of ``--prox`` / ``--prox-start`` (:class:`replica.numeric.prox.ProxConvention`)."""
    return options_from_args(args).convention()


def rule_from_args(module: GeneratedModel, args: argparse.Namespace, branch: str | None = None,
                   default: str | None = None):
    """The rule or integrator of ``--quadrature`` (``default`` when the flag is absent), for the
    convention of ``--prox``."""
    options = options_from_args(args, default_quadrature=default)
    return from_spec(options.quadrature, module, branch, options.convention())


def entropic_rule_from_args(module: GeneratedModel, args: argparse.Namespace):
    """The entropic rule of ``--entropic-quadrature gh:N`` (None: the solver's default)."""
    return options_from_args(args).entropic_rule(module)


def model_of(args: argparse.Namespace) -> GeneratedModel:
    """The generated model the command line names: loaded once, by :func:`replica.cli.main` while it
    parsed the arguments (``args.generated_model``), or here if the command was parsed otherwise."""
    module = getattr(args, "generated_model", None)
    if module is None:
        from ...registry import load_module

        module = load_module(args.model)
    return module


def point_model(args: argparse.Namespace) -> GeneratedModel:
    """:func:`model_of`, on the Gaussian covariate data law of ``--spectrum FILE.csv`` when given
    (the per-mode entropic term is derived with sympy)."""
    module = model_of(args)
    if getattr(args, "spectrum", None) is not None:
        from ...numeric.spectrum import Spectrum
        from ...registry.spectral import gcm_module

        module = gcm_module(module, Spectrum.from_csv(args.spectrum))
    return module

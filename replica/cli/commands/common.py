"""Flags and helpers shared by the numeric subcommands (solve, phase, figures)."""
from __future__ import annotations

import argparse
import math
from types import ModuleType

import numpy as np

from ... import validation
from ...applications.attention import cli as attention_cli
from ...errors import ParameterError
from ...numeric.integrators import from_spec

#: the most fixed-point iterations a command accepts (a point needing more will not converge)
MAX_ITER = 100_000
#: shortcut flags for parameter names many models declare (any other: --param NAME=VALUE)
COMMON_PARAMETERS = {"sigma": "token standard deviation (Sigma = sigma^2 I)",
                     "lam": "l2 regularization strength lambda >= 0"}


def add_parameter_flags(p: argparse.ArgumentParser) -> None:
    """``--param NAME=VALUE`` for any declared parameter, shortcuts ``--sigma --lam``, and the
    attention study's ``--omega --A`` (:mod:`replica.applications.attention.cli`)."""
    g = p.add_argument_group("model parameters (defaults: the model's declaration, for attention the paper's)")
    attention_cli.add_flags(g)
    for name, text in COMMON_PARAMETERS.items():
        g.add_argument(f"--{name}", type=float, help=text)
    g.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="any other declared parameter (repeatable)")


def add_numeric_flags(p: argparse.ArgumentParser) -> None:
    """Add the flags every numeric command shares (model parameters, quadrature, tolerance)."""
    g = p.add_argument_group("numerics")
    g.add_argument("--quadrature", default=None, metavar="RULE",
                   help="energetic average: fast|default|high or gh:N, smolyak:N, sobol:LOG2N, d7 (a degree-7 "
                        "12-point cubature per Gaussian pair: a low-order reference) (rules); "
                        "preint[:fast|default|high] (jump-aware pre-integration); auto (Gauss-Hermite "
                        "where the branch has a mirror symmetry, e.g. attention's semantic branch; "
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
    g.add_argument("--tol", type=float, default=1e-8,
                   help=f"relative residual at convergence, in [{validation.MIN_TOL:g}, {validation.MAX_TOL:g}] "
                        "(default 1e-8)")
    g.add_argument("--max-iter", type=int, default=500, help="maximum fixed-point iterations")
    g.add_argument("--verbose", action="store_true", help="print the residual of every iteration")


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


def parameters_from_args(module: ModuleType, args: argparse.Namespace) -> dict[str, float]:
    """Collect parameter overrides, naming the offending flag on error.

    A parameter given twice (``--omega 0.5 --param omega=0.3``, or two ``--param`` with
    different values) is an error, not a silent choice.
    """
    names = set(module.PARAMETERS)
    out, given = attention_cli.parameters(module, args)  # given: parameter -> the flag that set it
    for flag in COMMON_PARAMETERS:
        v = getattr(args, flag, None)
        if v is None:
            continue
        if flag not in names:
            raise ParameterError(flag, f"model {module.MODEL} has no parameter {flag!r}")
        out[flag] = v
        given[flag] = f"--{flag} {v:g}"
    for item in getattr(args, "param", []) or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise ParameterError("param", f"expected NAME=VALUE, got {item!r}")
        name = name.strip()
        try:
            v = float(value)
        except ValueError:
            raise ParameterError(name, f"not a number: {value!r}") from None
        if name in given and out[name] != v:
            raise ParameterError(name, f"given twice with different values ({given[name]} and --param {item}); "
                                       "give it once")
        if name not in names:
            raise ParameterError(name, f"model {module.MODEL} has no parameter {name!r}; it has "
                                       f"{list(module.PARAMETERS)}")
        out[name] = v
        given.setdefault(name, f"--param {item}")
    for k, v in out.items():
        if not math.isfinite(v):
            raise ParameterError(k, f"must be finite, got {v}")
    return out


def prox_from_args(args: argparse.Namespace):
    """The prox convention of ``--prox`` / ``--prox-start`` (:class:`replica.numeric.prox.ProxConvention`)."""
    from ...numeric.prox import prox_convention

    start = getattr(args, "prox_start", None)
    if start is not None:
        if not str(start).strip():
            raise ParameterError("prox-start", "is empty; give numbers, e.g. --prox-start 0,0")
        try:
            start = [float(v) for v in str(start).split(",")]
        except ValueError:
            raise ParameterError("prox-start", f"expected comma-separated numbers, got {args.prox_start!r}") from None
    try:
        return prox_convention(getattr(args, "prox", None) or "global", start, getattr(args, "prox_saddles", None))
    except ParameterError as exc:  # name the flag
        raise ParameterError(exc.name.replace("_", "-"), str(exc).split(": ", 1)[-1]) from None


def rule_from_args(module: ModuleType, args: argparse.Namespace, branch: str | None = None,
                   default: str | None = None):
    """The rule or integrator of ``--quadrature`` (``default`` when the flag is absent), for the
    convention of ``--prox``."""
    return from_spec(getattr(args, "quadrature", None) or default, module, branch, prox_from_args(args))


def entropic_rule_from_args(module: ModuleType, args: argparse.Namespace):
    """The entropic rule of ``--entropic-quadrature gh:N`` (None: the solver's default)."""
    spec = getattr(args, "entropic_quadrature", None)
    if spec is None:
        return None
    if getattr(module, "ENTROPIC", "closed") != "envelope":
        raise ParameterError("entropic-quadrature", f"{module.MODEL} has a quadratic regularizer: its entropic "
                                                    "average is in closed form, there is no rule to set")
    from ...numeric.integrators import AlignedEntropicRule
    from ...numeric.quadrature import parse_rule

    dim = len(module.ENTROPIC_GAUSSIANS)
    kind, _, n = spec.partition(":")
    if kind not in ("aligned", "gh", "gauss-hermite"):
        raise ParameterError("entropic-quadrature", f"expected aligned:N or gh:N, got {spec!r}")
    try:
        if kind == "aligned":
            if module.ENTROPIC_DIM != 1:
                raise ParameterError("entropic-quadrature", f"aligned rules need a scalar prox (r = 1); "
                                                            f"{module.MODEL} has r = {module.ENTROPIC_DIM}: use gh:N")
            try:
                return AlignedEntropicRule(dim, int(n))
            except ValueError:
                raise ParameterError("entropic-quadrature", f"bad order in {spec!r} (expected an integer)") from None
        return parse_rule(spec, dim)
    except ParameterError as exc:
        if exc.name == "entropic-quadrature":
            raise
        raise ParameterError("entropic-quadrature", str(exc)) from None


def token_one(module: ModuleType, values: dict[str, float]) -> dict[str, object]:
    """Token-1 value of every family (scalar, vector or matrix), in docs/explanation/theory.md §2 conventions
    (with token clusters: slot 1a, the first cluster of token 1)."""
    out: dict[str, object] = {}
    fams: dict[str, dict] = {}
    first = (None, 1, *getattr(module, "SLOTS", ())[:1])
    for name, v in values.items():
        fam, token, i, j, rows, cols = module.LAYOUT[name]
        if token not in first:
            continue
        entry = fams.setdefault(fam, {"M": np.zeros((rows, cols))})
        entry["M"][i, j] = v
        if rows == cols and fam in ("q", "V", "qhat", "Vhat"):
            entry["M"][j, i] = v
    for fam, entry in fams.items():
        M = entry["M"]
        out[fam] = float(M[0, 0]) if M.size == 1 else (M[:, 0].tolist() if M.shape[1] == 1 else M.tolist())
    return out

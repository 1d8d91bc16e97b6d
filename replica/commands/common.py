"""Flags and helpers shared by the numeric subcommands (solve, phase, figures)."""
from __future__ import annotations

import argparse
import math
from types import ModuleType

import numpy as np

from .. import validation
from ..applications.attention import cli as attention_cli
from ..errors import ParameterError
from ..integrators import from_spec

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
                   help="energetic average: fast|default|high or gh:N, smolyak:N, sobol:LOG2N (rules); "
                        "preint[:fast|default|high] (jump-aware pre-integration); auto (Gauss-Hermite "
                        "where the branch has a mirror symmetry, e.g. attention's semantic branch; "
                        "pre-integration elsewhere)")
    g.add_argument("--tol", type=float, default=1e-8,
                   help=f"relative residual at convergence, in [{validation.MIN_TOL:g}, {validation.MAX_TOL:g}] "
                        "(default 1e-8)")
    g.add_argument("--max-iter", type=int, default=500, help="maximum fixed-point iterations")
    g.add_argument("--verbose", action="store_true", help="print the residual of every iteration")


def check_numeric_args(args: argparse.Namespace) -> None:
    """``--tol`` and ``--max-iter`` (when the command has them), before any work starts."""
    if getattr(args, "tol", None) is not None:
        validation.tolerance(args.tol, "tol")
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


def rule_from_args(module: ModuleType, args: argparse.Namespace, branch: str | None = None,
                   default: str | None = None):
    """The rule or integrator of ``--quadrature`` (``default`` when the flag is absent)."""
    return from_spec(getattr(args, "quadrature", None) or default, module, branch)


def token_one(module: ModuleType, values: dict[str, float]) -> dict[str, object]:
    """Token-1 value of every family (scalar, vector or matrix), in THEORY §2 conventions
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

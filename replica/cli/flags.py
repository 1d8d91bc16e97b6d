"""Command-line flags for a generated model's own parameters, read from its metadata.

``--NAME`` for every scalar parameter the model declares (``replica solve ridge --Delta 0.5``),
``--X`` for a declared matrix parameter ``X`` (entries ``X_11, X_12, ...``: ``rows * cols``
comma-separated numbers, row-major), and ``--param NAME=VALUE`` for any of them. Nothing is
named per model or per study: a model's ``--help`` lists its parameters and no other model's.
Shared by ``replica``'s commands and the simulator's scripts (``numerics/``); the flags are
added once the model is known (:func:`peek_positional` finds it in the argument list before
parsing), with help texts the caller may supply (an application's words for its parameters).
"""
from __future__ import annotations

import argparse
import math
import re
from typing import Mapping, Sequence

from ..errors import ParameterError

_ENTRY = re.compile(r"^(?P<base>[A-Za-z]\w*?)_(?P<i>[1-9])(?P<j>[1-9])$")


def matrix_parameters(names: Sequence[str]) -> dict[str, tuple[int, int, list[str]]]:
    """Declared matrix parameters among ``names``: ``base -> (rows, cols, entry names row-major)``
    for every ``base`` whose entries ``base_ij`` fill a full ``rows x cols`` grid (the names
    :func:`replica.symbolic.symbols.matrix_parameter` gives)."""
    grid: dict[str, dict[tuple[int, int], str]] = {}
    for n in names:
        m = _ENTRY.match(n)
        if m:
            grid.setdefault(m["base"], {})[int(m["i"]), int(m["j"])] = n
    out = {}
    for base, cells in grid.items():
        rows, cols = max(i for i, _ in cells), max(j for _, j in cells)
        if len(cells) == rows * cols and base not in names:
            out[base] = (rows, cols, [cells[i, j] for i in range(1, rows + 1) for j in range(1, cols + 1)])
    return out


def _dest(name: str) -> str:
    return f"parameter_{name}"


def add_parameter_flags(parser: argparse.ArgumentParser, module=None, help: Mapping[str, str] | None = None,
                        title: str = "model parameters") -> argparse._ArgumentGroup:
    """Add the parameter flags of ``module`` (a generated model; None: only ``--param``) to
    ``parser``; ``help`` maps a parameter or matrix name to its description. A parameter whose
    flag the parser already has (``--alpha``, ``--d``, ...) is reachable through ``--param``."""
    help = help or {}
    taken = {s for a in parser._actions for s in a.option_strings}
    if module is None:
        group = parser.add_argument_group(title, "give the model first to list its own parameters "
                                                 "(e.g. MODEL --help)")
    else:
        group = parser.add_argument_group(f"{title} of {module.MODEL} (defaults: its declaration)")
        defaults = dict(zip(module.PARAMETERS, module.DEFAULTS))
        matrices = matrix_parameters(module.PARAMETERS)
        in_matrix = {n for _, _, entries in matrices.values() for n in entries}
        flags: dict[str, tuple] = {}
        for name in module.PARAMETERS:
            if name in in_matrix or f"--{name}" in taken:
                continue
            text = help.get(name, "declared parameter")
            group.add_argument(f"--{name}", dest=_dest(name), type=float, metavar="VALUE",
                               help=f"{text} (default {defaults[name]:g})")
            flags[name] = ("scalar",)
        for base, (rows, cols, entries) in matrices.items():
            if f"--{base}" in taken:
                continue
            shown = ",".join(f"{defaults[e]:g}" for e in entries)
            text = help.get(base, "declared matrix")
            group.add_argument(f"--{base}", dest=_dest(base), type=str, metavar="X11,X12,...",
                               help=f"{text}: {rows}x{cols} = {rows * cols} comma-separated entries, row-major "
                                    f"(default {shown})")
            flags[base] = ("matrix", rows, cols, entries)
        parser.set_defaults(parameter_flags=flags)
    group.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="any declared parameter (repeatable)")
    return group


def parameters_from_args(module, args: argparse.Namespace) -> dict[str, float]:
    """The parameter overrides of ``args`` for ``module``, naming the offending flag on error.

    A parameter given twice (``--omega 0.5 --param omega=0.3``, or two ``--param`` with different
    values) is an error, not a silent choice; every value must be finite."""
    names = set(module.PARAMETERS)
    out: dict[str, float] = {}
    given: dict[str, str] = {}   # parameter -> the flag that set it
    for name, kind in (getattr(args, "parameter_flags", None) or {}).items():
        v = getattr(args, _dest(name), None)
        if v is None:
            continue
        if kind[0] == "scalar":
            out[name] = v
            given[name] = f"--{name} {v:g}"
            continue
        _, rows, cols, entries = kind
        try:
            vals = [float(x) for x in v.split(",")]
        except ValueError:
            raise ParameterError(name, f"expected comma-separated numbers, got {v!r}") from None
        if len(vals) != rows * cols:
            raise ParameterError(name, f"needs {rows}x{cols} = {rows * cols} entries (row-major), got {len(vals)}")
        for e, x in zip(entries, vals):
            out[e] = x
            given[e] = f"--{name} {v}"
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


def peek_positional(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The first positional argument of ``argv`` for ``parser`` (its model), found before the
    model's own flags exist: a known option taking a value skips that value, an unknown
    ``--flag`` (a parameter flag) is taken to carry one. None when there is none (or ``--``)."""
    takes_value = {s: a.nargs != 0 for a in parser._actions for s in a.option_strings}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            return argv[i + 1] if i + 1 < len(argv) else None
        if tok.startswith("-") and len(tok) > 1 and not _is_number(tok):
            if "=" not in tok and takes_value.get(tok, True):
                i += 1
            i += 1
            continue
        return tok
    return None


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True

"""The attention study's command-line flags: ``--omega`` and ``--A`` (its parameters' names).

:func:`add_flags` adds them to a parser; :func:`parameters` turns them into parameter overrides
for a model that has them (a one-line error naming the flag otherwise).
"""
from __future__ import annotations

import argparse
from types import ModuleType

from ...errors import ParameterError


def add_flags(group: argparse._ArgumentGroup) -> None:
    """``--omega`` and ``--A`` in ``group``."""
    group.add_argument("--omega", type=float, help="positionality of the target, in [0, 1] (attention)")
    group.add_argument("--A", dest="A", type=str,
                       help="positional target matrix, L*L comma-separated row-major entries, rows summing to 1 "
                            "(attention)")


def parameters(module: ModuleType, args: argparse.Namespace) -> tuple[dict[str, float], dict[str, str]]:
    """Overrides from ``--omega`` and ``--A`` (``A_11``, ``A_12``, ... of an ``L x L`` matrix), and
    for each the flag that set it (for messages about a parameter given twice)."""
    out: dict[str, float] = {}
    given: dict[str, str] = {}
    names = set(module.PARAMETERS)
    if getattr(args, "omega", None) is not None:
        if "omega" not in names:
            raise ParameterError("omega", f"model {module.MODEL} has no parameter 'omega'")
        out["omega"] = args.omega
        given["omega"] = f"--omega {args.omega:g}"
    if getattr(args, "A", None) is not None:
        L = module.L
        try:
            vals = [float(v) for v in args.A.split(",")]
        except ValueError:
            raise ParameterError("A", f"expected comma-separated numbers, got {args.A!r}") from None
        if len(vals) != L * L:
            raise ParameterError("A", f"needs L*L = {L * L} entries (row-major), got {len(vals)}")
        for i in range(L):
            for j in range(L):
                key = f"A_{i + 1}{j + 1}"
                if key not in names:
                    raise ParameterError("A", f"model {module.MODEL} has no positional matrix A")
                out[key] = vals[i * L + j]
                given[key] = f"--A {args.A}"
    return out, given

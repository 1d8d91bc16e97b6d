"""Relations the numeric parameters of a model must satisfy (checked before solving).

Its own module because both the model (:mod:`replica.symbolic.model`) and the data statistics
(:mod:`replica.symbolic.data`, whose label law must stay a probability law) declare constraints.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import sympy as sp


@dataclass
class Constraint:
    """A relation the numeric parameters must satisfy, checked before solving.

    ``relation`` is a sympy ``Eq``, ``Ge``, ``Le``, ``Gt`` or ``Lt`` in the parameter
    symbols; ``parameter`` names what the user should change (e.g. ``"A"``).
    """

    parameter: str
    message: str
    relation: sp.Basic


def row_stochastic(M: sp.MatrixBase, name: str) -> list[Constraint]:
    """Constraints making ``M`` row-stochastic: non-negative entries, rows summing to 1."""
    out = [Constraint(name, f"row {i + 1} must sum to 1", sp.Eq(sum(M.row(i)), 1)) for i in range(M.rows)]
    out += [Constraint(name, "entries must be >= 0", sp.Ge(e, 0)) for e in M]
    return out


def holds(relation: sp.Basic, values: Mapping[sp.Symbol, float], tol: float = 1e-9) -> bool:
    """Evaluate a relation numerically (equalities up to ``tol``)."""
    lhs = float(sp.sympify(relation.lhs).subs(values))
    rhs = float(sp.sympify(relation.rhs).subs(values))
    op = relation.rel_op
    if op == "==":
        return abs(lhs - rhs) <= tol * max(1.0, abs(rhs))
    return {">=": lhs >= rhs - tol, "<=": lhs <= rhs + tol, ">": lhs > rhs, "<": lhs < rhs}[op]

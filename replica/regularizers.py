"""Regularizers ``r(w)``, ``w in R^r`` (a row of the student weights), and their entropic potentials.

Each regularizer is a small factor with its own potential (THEORY §3):

* :class:`L2` (any quadratic ``r(w) = 1/2 w^T Lambda w``): the Moreau envelope is a
  Gaussian integral of a quadratic, so ``Psi_w`` has the closed form
  ``1/2 E_nu tr[(Lambda + A)^{-1}(B + b b^T)]`` and the entropic saddle-point
  equations are explicit.
* :class:`SeparableRegularizer` (any separable convex ``r``, e.g. l1, elastic net):
  ``Psi_w`` stays a Moreau envelope, solved numerically (see issue on extensions).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import sympy as sp

from .errors import DeclarationError


class Regularizer:
    """Base class: a separable convex penalty on the rows ``w in R^r`` of the weights."""

    #: the LaTeX of ``r(w)`` shown in exported documents
    def latex(self, w: sp.Matrix) -> str:
        return sp.latex(self.expression(w))

    def expression(self, w: sp.Matrix) -> sp.Expr:  # pragma: no cover - interface
        raise NotImplementedError

    def parameters(self) -> set[sp.Symbol]:
        return set()

    def validate(self, r: int) -> None:
        """Raise :class:`DeclarationError` if the regularizer does not fit ``w in R^r``."""


@dataclass
class L2(Regularizer):
    """``r(w) = lambda/2 |w|^2`` (scalar ``lam``) or ``1/2 w^T diag(lam) w`` (sequence ``lam``).

    The sequence form covers untied key/query weights, ``diag(lambda_Q I_r, lambda_K I_r)``.
    """

    lam: sp.Expr | Sequence[sp.Expr]

    def matrix(self, r: int) -> sp.Matrix:
        if isinstance(self.lam, (list, tuple)):
            if len(self.lam) != r:
                raise DeclarationError(f"regularizer: L2 needs {r} diagonal weights for w in R^{r}, got {len(self.lam)}")
            return sp.diag(*[sp.sympify(x) for x in self.lam])
        return sp.sympify(self.lam) * sp.eye(r)

    def validate(self, r: int) -> None:
        M = self.matrix(r)
        for x in M.diagonal():
            if x.is_number and x < 0:
                raise DeclarationError(f"regularizer: L2 weight lambda={x} is negative (need lambda >= 0)")

    def expression(self, w: sp.Matrix) -> sp.Expr:
        return (w.T * self.matrix(w.shape[0]) * w)[0, 0] / 2

    def parameters(self) -> set[sp.Symbol]:
        weights = self.lam if isinstance(self.lam, (list, tuple)) else [self.lam]
        return set().union(*[sp.sympify(x).free_symbols for x in weights])


@dataclass
class SeparableRegularizer(Regularizer):
    """A general convex ``r(w)`` given as a sympy expression of the symbols ``w``.

    Its entropic potential is a Moreau envelope evaluated numerically.
    """

    expr: sp.Expr
    w: Sequence[sp.Symbol]

    def validate(self, r: int) -> None:
        if len(self.w) != r:
            raise DeclarationError(f"regularizer: expression is a function of {len(self.w)} variables, need r={r}")
        free = sp.sympify(self.expr).free_symbols
        if not (free & set(self.w)):
            raise DeclarationError(
                f"regularizer: {self.expr} is not a function of w={list(self.w)}; "
                "give r(w) as an expression of the weight-row symbols")

    def expression(self, w: sp.Matrix) -> sp.Expr:
        return sp.sympify(self.expr).subs(dict(zip(self.w, list(w))))

    def parameters(self) -> set[sp.Symbol]:
        return sp.sympify(self.expr).free_symbols - set(self.w)

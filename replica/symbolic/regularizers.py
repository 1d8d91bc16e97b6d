"""Regularizers ``r(w)``, ``w in R^r`` (a row of the student weights), and their entropic potentials.

Each regularizer is a small factor with its own potential (docs/explanation/theory.md §3):

* :class:`L2` (any quadratic ``r(w) = 1/2 w^T Lambda w``): the Moreau envelope is a
  Gaussian integral of a quadratic, so ``Psi_w`` has the closed form
  ``1/2 E_nu tr[(Lambda + A)^{-1}(B + b b^T)]`` and the entropic saddle-point
  equations are explicit.
* :class:`SeparableRegularizer` (any separable convex ``r``; :class:`L1`,
  :class:`ElasticNet`): ``Psi_w`` stays a Moreau envelope; its proximal map is found in
  closed form by sympy when it can be (``r = 1``), and the Gaussian average is numeric.

As factors (:mod:`replica.symbolic.factors`, role ``penalty``) they also carry their exact proximal
map ``prox(z, t) = argmin_w r(w) + |w - z|^2 / (2 t)`` for the simulator and the tests, numpy,
row by row (the last axis of ``z`` is the row ``w``): shrinkage for :class:`L2`, soft thresholding
for :class:`L1`, both for :class:`ElasticNet`, sympy's closed form for another scalar
:class:`SeparableRegularizer` (:attr:`Regularizer.has_prox` is false where there is none).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import sympy as sp

from ..errors import DeclarationError
from .factors import Factor, numeric


class Regularizer(Factor):
    """Base class: a separable convex penalty on the rows ``w in R^r`` of the weights."""

    role = "penalty"

    @property
    def has_prox(self) -> bool:
        """Whether :meth:`prox` is a closed form."""
        return False

    def prox(self, z, t, values: dict[str, float] | None = None) -> np.ndarray:
        """``argmin_w r(w) + |w - z|^2 / (2 t)`` for every row ``z[..., :]`` (numpy; ``t > 0`` a scalar
        or broadcasting against the rows), parameters by name."""
        raise NotImplementedError(f"{type(self).__name__}: no closed-form proximal map")

    #: the LaTeX of ``r(w)`` shown in exported documents
    def latex(self, w: sp.Matrix) -> str:
        """The regularizer ``r(w)`` as LaTeX."""
        return sp.latex(self.expression(w))

    def expression(self, w: sp.Matrix) -> sp.Expr:  # pragma: no cover - interface
        """``r(w)`` as a sympy expression of the weight row ``w``."""
        raise NotImplementedError

    def parameters(self) -> set[sp.Symbol]:
        """The numeric parameters (e.g. ``λ``) the regularizer depends on."""
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
        """The penalty matrix ``Λ`` of ``r(w) = ½ wᵀ Λ w``: ``λ I``, or ``diag(λ_1, ..., λ_r)``."""
        if isinstance(self.lam, (list, tuple)):
            if len(self.lam) != r:
                raise DeclarationError(f"regularizer: L2 needs {r} diagonal weights for w in R^{r}, got {len(self.lam)}")
            return sp.diag(*[sp.sympify(x) for x in self.lam])
        return sp.sympify(self.lam) * sp.eye(r)

    def validate(self, r: int) -> None:
        """Reject a negative ``λ`` with an error naming it."""
        M = self.matrix(r)
        for x in M.diagonal():
            if x.is_number and x < 0:
                raise DeclarationError(f"regularizer: L2 weight lambda={x} is negative (need lambda >= 0)")

    def expression(self, w: sp.Matrix) -> sp.Expr:
        """``½ wᵀ Λ w`` as a sympy expression."""
        return (w.T * self.matrix(w.shape[0]) * w)[0, 0] / 2

    def parameters(self) -> set[sp.Symbol]:
        """The symbols the weights ``λ`` depend on."""
        weights = self.lam if isinstance(self.lam, (list, tuple)) else [self.lam]
        return set().union(*[sp.sympify(x).free_symbols for x in weights])

    @property
    def has_prox(self) -> bool:
        return True

    def weights(self, values: dict[str, float] | None = None) -> np.ndarray | float:
        """``λ`` as a number, or the diagonal ``(λ_1, ..., λ_r)`` as an array, at ``values``."""
        if isinstance(self.lam, (list, tuple)):
            return np.array([numeric(x, values, "regularizer: L2") for x in self.lam])
        return numeric(self.lam, values, "regularizer: L2")

    def prox(self, z, t, values=None) -> np.ndarray:
        """Shrinkage ``z_k / (1 + t λ_k)``."""
        return np.asarray(z, dtype=float) / (1.0 + np.asarray(t, dtype=float) * self.weights(values))


@dataclass
class SeparableRegularizer(Regularizer):
    """A general convex ``r(w)`` given as a sympy expression of the symbols ``w``.

    Its entropic potential is a Moreau envelope (docs/explanation/theory.md §3). For ``r = 1`` sympy looks
    for the proximal map in closed form (:meth:`scalar_prox`), also for penalties with a
    kink at ``w = 0`` written with ``Abs`` (l1, elastic net); the Gaussian average is
    then numeric.
    """

    expr: sp.Expr
    w: Sequence[sp.Symbol]

    def scalar_prox(self, z: sp.Expr, t: sp.Expr) -> sp.Expr | None:
        """``argmin_w r(w) + (w - z)^2 / (2 t)`` in closed form, or ``None`` if sympy finds none.

        Smooth ``r``: the unique real root of the stationarity condition. ``r`` with
        ``Abs(w)``: the stationary points of the branches ``w > 0`` and ``w < 0``, each
        kept where it lies on its branch, and ``w = 0`` otherwise (the subgradient
        condition at the kink, valid for convex ``r``).
        """
        if len(self.w) != 1:
            return None
        w = self.w[0]
        expr = sp.sympify(self.expr)
        if expr.has(sp.Abs(w)):
            pieces = []
            for sign, cond in ((1, lambda v: v > 0), (-1, lambda v: v < 0)):
                branch = expr.subs(sp.Abs(w), sign * w)
                sol = _unique_root(sp.diff(branch + (w - z) ** 2 / (2 * t), w), w)
                if sol is None:
                    return None
                pieces.append((sol, cond(sol)))
            return sp.Piecewise(*pieces, (sp.Integer(0), True))
        if expr.has(sp.Abs) or expr.has(sp.Piecewise) or expr.has(sp.Max) or expr.has(sp.Min):
            return None
        return _unique_root(sp.diff(expr + (w - z) ** 2 / (2 * t), w), w)

    @property
    def has_prox(self) -> bool:
        return self._closed_prox() is not None

    def _closed_prox(self):
        """The scalar closed-form prox as a numpy function of ``(z, t, *parameters)``, or None (memoised)."""
        if not hasattr(self, "_prox_fn"):
            z, t = sp.Symbol("z_prox", real=True), sp.Symbol("t_prox", positive=True)
            sol = self.scalar_prox(z, t)
            params = sorted(self.parameters(), key=str)
            self._prox_fn = None if sol is None else (sp.lambdify([z, t, *params], sol, "numpy"), params)
        return self._prox_fn

    def prox(self, z, t, values=None) -> np.ndarray:
        """sympy's closed form (:meth:`scalar_prox`) applied entrywise (a scalar penalty, ``r = 1``)."""
        found = self._closed_prox()
        if found is None:
            raise NotImplementedError(f"regularizer: no closed-form proximal map for {self.expr}")
        f, params = found
        z = np.asarray(z, dtype=float)
        out = f(z, np.asarray(t, dtype=float), *[numeric(p, values, "regularizer") for p in params])
        return np.broadcast_to(np.asarray(out, dtype=float), z.shape).copy()

    def validate(self, r: int) -> None:
        """Raise :class:`DeclarationError` unless ``r`` is an expression of the ``r`` weight-row symbols."""
        if len(self.w) != r:
            raise DeclarationError(f"regularizer: expression is a function of {len(self.w)} variables, need r={r}")
        free = sp.sympify(self.expr).free_symbols
        if not (free & set(self.w)):
            raise DeclarationError(
                f"regularizer: {self.expr} is not a function of w={list(self.w)}; "
                "give r(w) as an expression of the weight-row symbols")

    def expression(self, w: sp.Matrix) -> sp.Expr:
        """``r(w)`` with the declaration's row symbols replaced by ``w``."""
        return sp.sympify(self.expr).subs(dict(zip(self.w, list(w))))

    def parameters(self) -> set[sp.Symbol]:
        """The parameters appearing in ``r`` besides ``w``."""
        return sp.sympify(self.expr).free_symbols - set(self.w)


def _unique_root(expr: sp.Expr, w: sp.Symbol) -> sp.Expr | None:
    """The single solution of ``expr = 0`` for ``w`` (``None`` if none or several)."""
    try:
        sols = sp.solve(sp.Eq(expr, 0), w, dict=False)
    except (NotImplementedError, ValueError):
        return None
    sols = [s for s in sols if not s.has(sp.I)]
    return sp.simplify(sols[0]) if len(sols) == 1 else None


def _nonnegative(*weights: sp.Expr) -> dict[sp.Symbol, tuple[float, None]]:
    """``{symbol: (0, None)}`` for the weights that are bare symbols (a negative one is not convex)."""
    return {w: (0.0, None) for w in weights if isinstance(w, sp.Symbol)}


class L1(SeparableRegularizer):
    """``r(w) = lam1 |w|_1`` (LASSO); its proximal map, soft thresholding, is found by sympy."""

    def __init__(self, lam1: sp.Expr, r: int = 1):
        w = [sp.Symbol(f"w_reg_{i + 1}", real=True) for i in range(r)]
        super().__init__(sp.sympify(lam1) * sum(sp.Abs(wi) for wi in w), w)
        self.lam1 = sp.sympify(lam1)

    def implied_domains(self) -> dict[sp.Symbol, tuple[float, None]]:
        """``lam1 >= 0`` (a negative weight makes the penalty concave)."""
        return _nonnegative(self.lam1)

    @property
    def has_prox(self) -> bool:
        return True

    def prox(self, z, t, values=None) -> np.ndarray:
        """Soft thresholding ``sign(z) max(|z| - t lam1, 0)``, entrywise."""
        z = np.asarray(z, dtype=float)
        return np.sign(z) * np.maximum(np.abs(z) - np.asarray(t, dtype=float) * numeric(self.lam1, values, "L1"), 0.0)


class ElasticNet(SeparableRegularizer):
    """``r(w) = lam1 |w|_1 + lam2 / 2 |w|^2``; with ``lam1 = 0`` it is exactly :class:`L2`."""

    def __init__(self, lam1: sp.Expr, lam2: sp.Expr, r: int = 1):
        w = [sp.Symbol(f"w_reg_{i + 1}", real=True) for i in range(r)]
        l1, l2 = sp.sympify(lam1), sp.sympify(lam2)
        super().__init__(l1 * sum(sp.Abs(wi) for wi in w) + l2 / 2 * sum(wi ** 2 for wi in w), w)
        self.lam1, self.lam2 = l1, l2

    def implied_domains(self) -> dict[sp.Symbol, tuple[float, None]]:
        """``lam1, lam2 >= 0`` (a negative weight makes the penalty non-convex)."""
        return _nonnegative(self.lam1, self.lam2)

    @property
    def has_prox(self) -> bool:
        return True

    def prox(self, z, t, values=None) -> np.ndarray:
        """Soft thresholding then shrinkage, ``sign(z) max(|z| - t lam1, 0) / (1 + t lam2)``, entrywise."""
        z, t = np.asarray(z, dtype=float), np.asarray(t, dtype=float)
        l1, l2 = numeric(self.lam1, values, "ElasticNet"), numeric(self.lam2, values, "ElasticNet")
        return np.sign(z) * np.maximum(np.abs(z) - t * l1, 0.0) / (1.0 + t * l2)

"""Penalties of the simulator: the theory's own regularizers applied to torch weight matrices.

:class:`TheoryRegularizer` takes a penalty of :mod:`replica.symbolic.regularizers` -- the very sympy
expression the theory uses -- and applies it to the rows of a weight matrix ``W`` (``d x r``):
``r(W) = Σ_rows r(w)`` (docs/explanation/theory.md §1), split into a smooth part (autograd) and a
non-smooth one handled by its proximal map (proximal gradient methods). :class:`L2` and
:class:`ElasticNet` are the common ones by value.
"""

from __future__ import annotations

from typing import Callable, Mapping

import sympy as sp
import torch

from replica.symbolic.regularizers import L2 as TheoryL2
from replica.symbolic.regularizers import ElasticNet as TheoryElasticNet
from replica.symbolic.regularizers import Regularizer as TheoryPenalty
from replica.symbolic.regularizers import SeparableRegularizer

__all__ = ["Regularizer", "TheoryRegularizer", "L2", "ElasticNet"]


class Regularizer:
    """A separable regulariser ``r`` split as ``smooth + nonsmooth``.

    ``smooth`` is differentiated by autograd; ``nonsmooth`` is handled by its proximal map
    (proximal gradient descent: a gradient step on the smooth part, then ``prox``).
    """

    #: True when :meth:`nonsmooth` is not identically zero (needs proximal GD).
    has_prox: bool = False

    def smooth(self, w: torch.Tensor) -> torch.Tensor:
        """Differentiable part, a scalar tensor."""
        raise NotImplementedError

    def nonsmooth(self, w: torch.Tensor) -> torch.Tensor:
        """Non-differentiable part, a scalar tensor (no gradient is taken of it)."""
        return w.new_zeros(())

    def prox(self, w: torch.Tensor, step: float) -> torch.Tensor:
        """``argmin_u nonsmooth(u) + ‖u − w‖²/(2 step)``; the identity by default."""
        return w

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        return self.smooth(w) + self.nonsmooth(w)


class TheoryRegularizer(Regularizer):
    """A penalty of :mod:`replica.symbolic.regularizers` -- the very sympy expression the theory uses --
    applied to a torch weight matrix ``W`` (``d x r``): ``r(W) = Σ_rows r(w)`` (docs/explanation/theory.md §1).

    The expression is lambdified to torch once per ``r``. Its terms with ``Abs`` form the
    non-smooth part, which must be a sum over the coordinates of one scalar function ``g(w_i)``
    (l1-type penalties); its proximal map is the theory's closed form
    (:meth:`replica.symbolic.regularizers.SeparableRegularizer.scalar_prox`: soft thresholding for l1),
    applied entrywise. The rest is the smooth part (autograd).
    """

    def __init__(self, theory: TheoryPenalty | Callable[[int], TheoryPenalty], values: Mapping[sp.Symbol, float],
                 name: str = ""):
        """``theory``: the penalty, or a function of the row length ``r`` returning it (for
        penalties declared per ``r``, like :class:`replica.symbolic.regularizers.ElasticNet`)."""
        self.theory, self.values, self.name = theory, dict(values), name or type(self).__name__
        self._parts: dict[int, tuple] = {}
        self.has_prox = self._split(1)[1] is not None

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(f'{k}={v:g}' for k, v in self.values.items())})"

    def _split(self, r: int):
        """(smooth, nonsmooth, prox) torch functions for weight rows in R^r."""
        hit = self._parts.get(r)
        if hit is not None:
            return hit
        w = sp.Matrix([sp.Symbol(f"w_{i}", real=True) for i in range(r)])
        theory = self.theory if isinstance(self.theory, TheoryPenalty) else self.theory(r)
        expr = sp.expand(theory.expression(w).subs(self.values))
        terms = sp.Add.make_args(expr)
        rough = sp.Add(*[t for t in terms if t.has(sp.Abs)])
        smooth = sp.Add(*[t for t in terms if not t.has(sp.Abs)])
        f_smooth = sp.lambdify(list(w), smooth, "torch")
        f_rough = prox = None
        if rough != 0:
            u, z, t = sp.Symbol("u", real=True), sp.Symbol("z", real=True), sp.Symbol("t", positive=True)
            g = rough.subs({wi: 0 for wi in w[1:]}).subs(w[0], u)
            if sp.simplify(sp.Add(*[g.subs(u, wi) for wi in w]) - rough) != 0:
                raise ValueError(f"{self.name}: the non-smooth part {rough} is not a sum of one function per "
                                 "coordinate; the simulator cannot apply its proximal map")
            sol = SeparableRegularizer(g, [u]).scalar_prox(z, t)
            if sol is None:
                raise ValueError(f"{self.name}: no closed-form proximal map for {g}")
            f_rough = sp.lambdify(list(w), rough, "torch")
            prox = sp.lambdify([z, t], sol, "torch")
        self._parts[r] = (f_smooth, f_rough, prox)
        return self._parts[r]

    @staticmethod
    def _rows(w: torch.Tensor) -> list[torch.Tensor]:
        return list(w.unbind(dim=-1)) if w.dim() > 1 else [w]

    @staticmethod
    def _total(v, w: torch.Tensor) -> torch.Tensor:
        return v.sum() if isinstance(v, torch.Tensor) else w.new_tensor(float(v))

    def smooth(self, w: torch.Tensor) -> torch.Tensor:
        cols = self._rows(w)
        return self._total(self._split(len(cols))[0](*cols), w)

    def nonsmooth(self, w: torch.Tensor) -> torch.Tensor:
        cols = self._rows(w)
        f = self._split(len(cols))[1]
        return w.new_zeros(()) if f is None else self._total(f(*cols), w)

    def prox(self, w: torch.Tensor, step: float) -> torch.Tensor:
        prox = self._split(1)[2]
        return w if prox is None else prox(w, step)


class L2(TheoryRegularizer):
    """Ridge ``r(w) = (λ/2)‖w‖²`` -- the theory's :class:`replica.symbolic.regularizers.L2`."""

    def __init__(self, lam: float) -> None:
        if not (lam >= 0):
            raise ValueError(f"lam must be >= 0 (got {lam})")
        self.lam = float(lam)
        super().__init__(TheoryL2(_LAM), {_LAM: self.lam}, "L2")


class ElasticNet(TheoryRegularizer):
    """Elastic net ``r(w) = l1 ‖w‖₁ + (l2/2)‖w‖²`` (``l2 = 0``: the lasso) -- the theory's
    :class:`replica.symbolic.regularizers.ElasticNet`; the ℓ1 part by soft thresholding after each
    gradient step (proximal GD)."""

    def __init__(self, l1: float, l2: float = 0.0) -> None:
        if not (l1 >= 0 and l2 >= 0):
            raise ValueError(f"l1 and l2 must be >= 0 (got l1={l1}, l2={l2})")
        self.l1, self.l2 = float(l1), float(l2)
        super().__init__(lambda r: TheoryElasticNet(_LAM1, _LAM2, r), {_LAM1: self.l1, _LAM2: self.l2},
                         "ElasticNet")


_LAM, _LAM1, _LAM2 = (sp.Symbol(n, nonnegative=True) for n in ("lam", "lam1", "lam2"))

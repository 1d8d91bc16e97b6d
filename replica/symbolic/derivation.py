"""From a :class:`~replica.symbolic.model.Model` to its potentials and saddle-point equations.

:class:`Derivation` owns the three potentials and derives the stationarity
conditions of ``Phi = Psi_t + Psi_w + alpha Psi_y`` with sympy (docs/explanation/theory.md §4):

* ``dPhi/dxhat = 0``: the trace potential is bilinear, ``dPsi_t/dxhat = K^T x``, so
  ``x = -K^{-T} grad_xhat Psi_w`` -- explicit in closed form for an l2 regularizer;
* ``dPhi/dx = 0``: ``xhat = -alpha K^{-1} grad_x Psi_y`` with, by the envelope theorem,
  ``dPsi_y/dx = -E[dF/dx at h = prox]``.

``K`` (the coupling matrix ``d^2 Psi_t / dx dxhat``) is computed, never typed: the
factors 2 of ``Vhat = -2 alpha dPsi_y/dq`` and those of off-diagonal entries of
symmetric matrices come out of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import sympy as sp

from ..errors import DeclarationError
from .model import Model
from .priors import Density, Gaussian
from .regularizers import L2
from .order_parameters import OrderParameters
from .potentials import (GaussianMoreauEnvelope, energetic_potential, entropic_potential,
                         trace_potential, validity_conditions)
from .symbols import LATEX_NAMES, restore_names, symbol
from .symmetries import Symmetries, derive_symmetries

ALPHA = symbol("alpha", r"\alpha")


@dataclass(frozen=True)
class Equation:
    """One fixed-point equation ``lhs = rhs``."""

    lhs: sp.Symbol
    rhs: sp.Expr


@dataclass
class SaddlePoint:
    """The saddle-point equations in fixed-point form.

    Attributes
    ----------
    entropic:
        ``x = ...`` for every free order-parameter symbol, in terms of the conjugates
        (closed form for an l2 regularizer).
    energetic:
        ``xhat = ...`` for every free conjugate symbol, in terms of ``alpha`` and the
        placeholders ``dPsi_y/dx`` listed in :attr:`energetic_gradient`.
    energetic_gradient:
        placeholder symbol ``dPsi_y/dx_i`` -> the integrand ``dF/dx_i`` such that
        ``dPsi_y/dx_i = -E[dF/dx_i at h = prox]``.
    entropic_gradient:
        For a non-quadratic regularizer, where the entropic equations are written with
        placeholders ``dPsi_w/dxhat_j``: placeholder -> integrand of the entropic bracket
        (``dPsi_w/dxhat_j = -E[dB/dxhat_j at w = prox]``). Empty for closed forms.
    """

    entropic: list[Equation]
    energetic: list[Equation]
    energetic_gradient: dict[sp.Symbol, sp.Expr]
    entropic_gradient: dict[sp.Symbol, sp.Expr] = field(default_factory=dict)

    def __iter__(self):
        yield from self.entropic
        yield from self.energetic


def check_erm_prior(model: Model) -> None:
    """The empirical-risk equations see the teacher only through a Gaussian teacher row of unit second
    moment (the teacher's fields are Gaussian whatever its prior; an l2 penalty's closed form needs the
    second moment only). Refuse, with one line, a prior they would misrepresent."""
    prior = model.prior
    if isinstance(prior, Gaussian) and prior.mean_ == 0 and prior.variance == 1:
        return
    if isinstance(prior, Density):
        moment = prior.moments({s.name: v for s, v in model.defaults.items()})[2] if not prior.parameters() else None
        unit = moment is not None and abs(moment - 1) < 1e-9
    else:
        unit = sp.simplify(prior.second_moment() - 1) == 0
    if unit and isinstance(model.regularizer, L2):
        return
    why = ("its second moment is not 1" if not unit else
           "a non-quadratic penalty's entropic average would need the prior's law, not its second moment")
    raise DeclarationError(f"prior: the empirical-risk equations assume a Gaussian teacher of unit variance and {prior!r} "
                           f"differs where it matters ({why}); use it with replica solve --bayes")


def _maybe_simplify(expr: sp.Expr, max_ops: int = 400) -> sp.Expr:
    """Simplify small expressions (readable LaTeX); leave big ones to CSE in the generator."""
    if sp.count_ops(expr) > max_ops:
        return expr
    simple = sp.factor(sp.simplify(expr))
    return simple if sp.count_ops(simple) <= sp.count_ops(expr) else expr


class Derivation:
    """The replica-symmetric derivation of one model.

    >>> from derivations.attention_tied import model          # doctest: +SKIP
    >>> d = Derivation(model)
    >>> for eq in d.saddle_point.entropic: print(eq.lhs, '=', eq.rhs)   # doctest: +SKIP
    """

    def __init__(self, model: Model):
        self.model = model
        restore_names(model.spellings)  # its own declaration's spellings, whatever was declared since
        check_erm_prior(model)
        self.order_parameters = model.order_parameters()
        self.alpha = ALPHA

    # ------------------------------------------------------------ potentials
    @cached_property
    def trace_potential(self) -> sp.Expr:
        """``Psi_t`` in the free (reduced) order parameters."""
        return trace_potential(self.order_parameters)

    @cached_property
    def entropic_potential(self) -> sp.Expr | GaussianMoreauEnvelope:
        """``Psi_w``: a sympy expression (quadratic regularizer) or a Moreau envelope."""
        return entropic_potential(self.model, self.order_parameters)

    @cached_property
    def energetic_potential(self) -> GaussianMoreauEnvelope:
        """``Psi_y``: the Moreau envelope of the loss."""
        return energetic_potential(self.model, self.order_parameters)

    @cached_property
    def validity(self) -> dict[str, sp.Expr]:
        """Quantities that must stay positive (principal minors of ``q, V, rho - theta^T q^-1 theta``)."""
        return validity_conditions(self.model, self.order_parameters)

    @property
    def order_symbols(self) -> list[sp.Symbol]:
        """The free order-parameter symbols ``q, V, m, θ`` (after the model's reductions), in layout order."""
        return self.order_parameters.order_symbols()

    @property
    def conjugate_symbols(self) -> list[sp.Symbol]:
        """The conjugate symbols ``q̂, V̂, m̂, θ̂``, in the order of :meth:`order_symbols`."""
        return self.order_parameters.conjugate_symbols()

    # ------------------------------------------------------------ stationarity
    @cached_property
    def coupling(self) -> sp.Matrix:
        """``K_ij = d^2 Psi_t / dx_i dxhat_j`` (constant: ``Psi_t`` is bilinear)."""
        x, xh = self.order_symbols, self.conjugate_symbols
        K = sp.Matrix(len(x), len(xh), lambda i, j: sp.diff(self.trace_potential, x[i], xh[j]))
        if K.free_symbols:
            raise AssertionError("trace potential is not bilinear")  # a bug, not a user error
        return K

    @cached_property
    def gradient_placeholders(self) -> dict[sp.Symbol, sp.Symbol]:
        """order symbol ``x`` -> a symbol standing for ``dPsi_y/dx`` in the equations."""
        out = {}
        for x in self.order_symbols:
            name = f"dPsi_y__{x.name}"
            tex = LATEX_NAMES.get(x, sp.latex(x))
            out[x] = symbol(name, rf"\partial_{{{tex}}} \Psi_y")
        return out

    @cached_property
    def saddle_point(self) -> SaddlePoint:
        """Derive the fixed-point equations (entropic side simplified to closed form)."""
        x, xh = self.order_symbols, self.conjugate_symbols
        K = self.coupling
        psi_w = self.entropic_potential
        entropic_grads: dict[sp.Symbol, sp.Expr] = {}
        if isinstance(psi_w, GaussianMoreauEnvelope):
            # x = -K^{-T} grad Psi_w with grad Psi_w = -E[dB/dxhat at w = prox] (envelope theorem).
            ph = self.entropic_placeholders
            x_rhs = -(K.T.inv() * sp.Matrix([ph[s] for s in xh]))
            entropic = [Equation(xi, sp.expand(rhs)) for xi, rhs in zip(x, x_rhs)]
            entropic_grads = {ph[s]: e for s, e in zip(xh, psi_w.parameter_gradient(xh))}
        else:
            grad_w = sp.Matrix([sp.diff(psi_w, s) for s in xh])
            x_rhs = -(K.T.inv() * grad_w)
            entropic = [Equation(xi, _maybe_simplify(rhs)) for xi, rhs in zip(x, x_rhs)]
        g = sp.Matrix([self.gradient_placeholders[s] for s in x])
        xh_rhs = -self.alpha * (K.inv() * g)
        energetic = [Equation(s, sp.expand(rhs)) for s, rhs in zip(xh, xh_rhs)]
        integrands = self.energetic_potential.parameter_gradient(x)
        grads = {self.gradient_placeholders[s]: e for s, e in zip(x, integrands)}
        return SaddlePoint(entropic, energetic, grads, entropic_grads)

    @cached_property
    def entropic_placeholders(self) -> dict[sp.Symbol, sp.Symbol]:
        """conjugate ``xhat`` -> a symbol standing for ``dPsi_w/dxhat`` (non-quadratic regularizers)."""
        out = {}
        for s in self.conjugate_symbols:
            tex = LATEX_NAMES.get(s, sp.latex(s))
            out[s] = symbol(f"dPsi_w__{s.name}", rf"\partial_{{{tex}}} \Psi_w")
        return out

    @cached_property
    def symmetries(self) -> Symmetries:
        """Sign-flip symmetries of the energetic bracket: the fold symmetries of every pinned
        subspace (branch) and the families with a sign convention (:mod:`replica.symbolic.symmetries`)."""
        return derive_symmetries(self)

    @property
    def sign_flips(self) -> tuple[str, ...]:
        """Order-parameter families whose sign can be flipped without changing ``Phi``
        (reported ``>= 0``): e.g. ``theta`` when the loss is even in ``h*``."""
        return self.symmetries.sign_flips

    def free_entropy(self) -> sp.Expr:
        """``Psi_t + Psi_w + alpha Psi_y`` with ``Psi_y`` as a symbol (for display)."""
        psi_y = symbol("Psi_y", r"\Psi_y")
        return self.trace_potential + self.entropic_potential + self.alpha * psi_y

"""Teacher channels: the label as a law ``P(y | u)`` of linear forms ``u`` of the teacher fields.

A model whose label is a *discrete* function of the teacher fields (``y = sign(h*)``, a label
flip, a probit, thresholds, an argmax) cannot put the label into the integrand: the overlap
derivatives of the energetic potential would go through ``dy/dh*``, a delta function. A
channel puts the teacher into the Gaussian *measure* instead (the ``Z_out`` form of the GLM
literature). Conditionally on the student's Gaussians ``xi`` (the prox centres ``omega``), the
forms ``u`` are Gaussian with mean ``mu(xi)`` (linear in ``xi``: ``theta^T q^{-1} (omega - m)``
per token) and covariance ``C = rho - theta^T q^{-1} theta`` pushed through the forms, so

    Psi_y = - E_xi  sum_y  Z(y | mu(xi), C)  min_h F(h; omega, y),
    Z(y | mu, C) = E_{u ~ N(mu, C)} P(y | u),

with ``Z`` in closed form (``erfc``; a sympy expression of the order parameters). The
envelope theorem then differentiates the smooth weight ``Z`` and the bracket at a *fixed*
label: ``d/dx [Z F](h*)`` -- never a discontinuity (:mod:`replica.symbolic.potentials`).

Each channel is a small factor carrying its theory (:meth:`Channel.likelihood`, the
transitions a quadrature must resolve, :meth:`Channel.transitions`) and its sampler
(:meth:`Channel.sample`, numpy, used by simulators and by the tests of the likelihood).

* :class:`Sign` -- ``y = sign(u)``, labels ``-1, +1``;
* :class:`Probit` -- ``y = sign(u + sqrt(Delta) z)``;
* :class:`LabelFlip` -- a binary channel whose label is flipped with probability ``p``;
* :class:`Thresholds` -- ``y = k`` for ``t_k < u < t_{k+1}`` (ordinal labels ``0..K``), optionally
  with Gaussian noise of variance ``Delta`` on ``u`` (ordered probit);
* :class:`Argmax` -- ``y = argmax_k u_k`` over two or three classes (labels ``0, .., K-1``; three
  through the bivariate normal CDF :class:`BivariateNormalCDF`).

A continuous label (``y = h* + sqrt(Delta) z``, any ``y = g(h*, noise)``) needs no channel: it is
written into the loss directly and averaged in the integrand, as before.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import sympy as sp

from ..errors import DeclarationError
from .symbols import symbol
from ..interface.labels import draw_labels

#: the default label symbol of a channel
LABEL = symbol("y", "y")


class NormalCDF(sp.Function):
    """The standard normal CDF ``Phi(x)`` as one sympy function.

    Written with ``erfc``, sympy would fold ``erfc(-x)/2`` into ``1 - erfc(x)/2`` and lose every
    digit of a small ``Phi`` to cancellation; as a function of its own it is printed as
    ``scipy.special.ndtr`` (numpy) and ``erfc(-x/sqrt 2)/2`` (scalar code), both accurate in
    either tail, and differentiated to the normal density.
    """

    nargs = 1

    def fdiff(self, argindex=1):
        x = self.args[0]
        return sp.exp(-x ** 2 / 2) / sp.sqrt(2 * sp.pi)

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return sp.Rational(1, 2)
        if x is sp.oo:
            return sp.Integer(1)
        if x is sp.S.NegativeInfinity:
            return sp.Integer(0)
        return None

    def _eval_rewrite_as_erfc(self, x, **kwargs):
        return sp.erfc(-x / sp.sqrt(2)) / 2

    def _eval_evalf(self, prec):
        return self.rewrite(sp.erfc)._eval_evalf(prec)

    def _latex(self, printer, exp=None):
        out = rf"\Phi\left({printer._print(self.args[0])}\right)"
        return rf"{out}^{{{exp}}}" if exp else out


def _phi_math(x: float) -> float:
    import math

    return 0.5 * math.erfc(-x / math.sqrt(2.0))


NormalCDF._imp_ = staticmethod(_phi_math)  # lambdify(..., "math") evaluates it


def normal_cdf(x: sp.Expr) -> sp.Expr:
    """``Phi(x)`` (:class:`NormalCDF`)."""
    return NormalCDF(x)


class BivariateNormalCDF(sp.Function):
    """``Phi2(h, k; r) = P(X < h, Y < k)``, standard normal ``X, Y`` with correlation ``r``.

    The label law of a three-class argmax (:class:`Argmax`). Its derivatives are elementary,
    ``d/dh = phi(h) Phi((k - r h) / sqrt(1 - r^2))`` (and symmetrically in ``k``) and
    ``d/dr = phi2(h, k; r)``, the bivariate density, so the potentials differentiate it in sympy
    like :class:`NormalCDF`; values come from :mod:`replica.interface.bivariate` (Genz's algorithm,
    ~1e-15 absolute), printed as ``_bvn`` (numpy) and ``bvn_scalar`` (per-node code).
    """

    nargs = 3

    def fdiff(self, argindex=1):
        h, k, r = self.args
        s = sp.sqrt(1 - r ** 2)
        if argindex == 1:
            return sp.exp(-h ** 2 / 2) / sp.sqrt(2 * sp.pi) * NormalCDF((k - r * h) / s)
        if argindex == 2:
            return sp.exp(-k ** 2 / 2) / sp.sqrt(2 * sp.pi) * NormalCDF((h - r * k) / s)
        if argindex == 3:
            return sp.exp(-(h ** 2 - 2 * r * h * k + k ** 2) / (2 * s ** 2)) / (2 * sp.pi * s)
        raise sp.ArgumentIndexError(self, argindex)

    def _eval_evalf(self, prec):
        import mpmath

        vals = [a.evalf(prec) for a in self.args]
        if not all(v.is_Number for v in vals):
            return None
        with mpmath.workprec(prec):
            h, k, r = (mpmath.mpf(str(v)) for v in vals)
            s = mpmath.sqrt(1 - r * r)
            # P(X < h, Y < k) = int_{-inf}^h phi(t) Phi((k - r t) / s) dt
            val = mpmath.quad(lambda t: mpmath.npdf(t) * mpmath.ncdf((k - r * t) / s), [-mpmath.inf, h])
        return sp.Float(val, prec)

    def _latex(self, printer, exp=None):
        h, k, r = (printer._print(a) for a in self.args)
        out = rf"\Phi_2\left({h}, {k}; {r}\right)"
        return rf"{out}^{{{exp}}}" if exp else out


def _phi2_math(h: float, k: float, r: float) -> float:
    from ..interface.bivariate import bvn_scalar

    return bvn_scalar(float(h), float(k), float(r))


BivariateNormalCDF._imp_ = staticmethod(_phi2_math)  # lambdify(..., "math") evaluates it


def _np_normal_cdf(x: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr

    return ndtr(x)


@dataclass
class Channel:
    """Base class: a finite-valued label ``y`` with law ``P(y | u)``, ``u`` linear forms of ``h*``.

    ``forms`` are sympy expressions linear in the model's teacher fields; ``label`` the symbol
    the loss and the observables are written in (default ``y``).
    """

    forms: tuple
    label: sp.Symbol = field(default=LABEL, kw_only=True)

    def __post_init__(self) -> None:
        self.forms = tuple(sp.sympify(f) for f in (self.forms if isinstance(self.forms, (list, tuple))
                                                    else (self.forms,)))

    # ---------------------------------------------------------------- theory
    @property
    def values(self) -> tuple[int, ...]:
        """The label values (integers)."""
        raise NotImplementedError

    def likelihood(self, y: sp.Expr, mean: Sequence[sp.Expr], cov: sp.Matrix) -> sp.Expr:
        """``Z(y | mean, cov) = E_{u ~ N(mean, cov)} P(y | u)``, an expression valid at every label
        value (``y`` a symbol that takes the values :attr:`values`)."""
        raise NotImplementedError

    def transitions(self) -> list[tuple[sp.Expr, int, sp.Expr]]:
        """Where ``Z`` changes: ``(center, form index, extra variance)`` triples, ``Z`` varying
        around ``u_k = center`` on the scale ``sqrt(var(u_k | xi) + extra)``; a pair ``(i, j)`` as the
        index stands for the difference ``u_i - u_j``. Quadrature rules place nodes there
        (:mod:`replica.numeric.kinks`)."""
        raise NotImplementedError

    def probabilities(self, u: np.ndarray, params: dict[str, float] | None = None) -> np.ndarray:
        """``P(y | u)`` for every label value (rows) at the points ``u`` (shape ``(K_forms, n)``),
        numeric; parameters by name."""
        raise NotImplementedError

    def sample(self, u: np.ndarray, rng: np.random.Generator, params: dict[str, float] | None = None
               ) -> np.ndarray:
        """Labels drawn from ``P(y | u)`` at the points ``u`` (shape ``(K_forms, n)`` or ``(n,)``)."""
        u = np.atleast_2d(np.asarray(u, dtype=float))
        return draw_labels(self.probabilities(u, params), self.values, rng)

    # ---------------------------------------------------------------- declaration
    def parameters(self) -> set[sp.Symbol]:
        """Numeric parameters of the channel (noise variance, flip probability, thresholds)."""
        return set()

    @property
    def symmetric(self) -> bool:
        """Whether the label values are closed under ``y -> -y`` with ``P(-y | -u) = P(y | u)`` (the
        sign-flip symmetry the quadrature can fold by)."""
        return False

    def describe(self, tex) -> str:
        """LaTeX of the channel, e.g. ``y = \\operatorname{sign}(h^*_1)`` (``tex`` prints expressions)."""
        raise NotImplementedError

    def validate(self, hstar: Sequence[sp.Symbol], defaults: dict) -> None:
        """Raise :class:`DeclarationError` unless every form is linear in the teacher fields and
        the label symbol is a symbol."""
        if not isinstance(self.label, sp.Symbol):
            raise DeclarationError(f"channel: label must be a sympy Symbol, got {self.label!r}")
        hs = set(hstar)
        for k, u in enumerate(self.forms):
            extra = u.free_symbols - hs - set(defaults)
            if extra:
                raise DeclarationError(f"channel: form {u} uses {sorted(map(str, extra))}; a channel reads linear "
                                       "forms of the teacher fields hstar (and parameters)")
            if not (u.free_symbols & hs):
                raise DeclarationError(f"channel: form {u} does not depend on the teacher fields")
            for s in hs:
                if sp.diff(u, s, 2) != 0 or any(sp.diff(u, s, t) != 0 for t in hs if t != s):
                    raise DeclarationError(f"channel: form {u} is not linear in the teacher fields (the label "
                                           "law given the student's fields needs a Gaussian form)")
            if u.subs({s: 0 for s in hs}) != 0:
                raise DeclarationError(f"channel: form {u} has a constant part; put offsets into the channel's "
                                       "thresholds")
        for s in self.parameters():
            if s not in defaults:
                raise DeclarationError(f"channel: parameter {s} is not declared in Model(parameters=...)")


def _numeric(expr: sp.Expr, params: dict[str, float] | None) -> float:
    val = sp.sympify(expr)
    if params:
        val = val.subs({s: params[s.name] for s in val.free_symbols if s.name in params})
    if val.free_symbols:
        raise ValueError(f"channel: give values for {sorted(map(str, val.free_symbols))}")
    return float(val)


@dataclass
class Sign(Channel):
    """``y = sign(u)``: ``Z(y | mu, v) = Phi(y mu / sqrt v)``."""

    @property
    def values(self) -> tuple[int, ...]:
        return (-1, 1)

    def noise_variance(self) -> sp.Expr:
        """Variance of Gaussian noise added to ``u`` before the sign (0 here)."""
        return sp.Integer(0)

    def likelihood(self, y, mean, cov) -> sp.Expr:
        return normal_cdf(y * mean[0] / sp.sqrt(cov[0, 0] + self.noise_variance()))

    def transitions(self):
        return [(sp.Integer(0), 0, self.noise_variance())]

    def probabilities(self, u, params=None):
        u = np.atleast_2d(np.asarray(u, dtype=float))[0]
        var = _numeric(self.noise_variance(), params)
        s = np.sqrt(var) if var > 0 else 0.0
        up = _np_normal_cdf(u / s) if s > 0 else (u > 0).astype(float) + 0.5 * (u == 0)
        return np.stack([1.0 - up, up])

    @property
    def symmetric(self) -> bool:
        return True

    def describe(self, tex) -> str:
        return rf"{tex(self.label)} = \operatorname{{sign}}\left({tex(self.forms[0])}\right)"


@dataclass
class Probit(Sign):
    """``y = sign(u + sqrt(Delta) z)``, ``z ~ N(0, 1)``: ``Z(y | mu, v) = Phi(y mu / sqrt(v + Delta))``."""

    delta: sp.Expr = sp.Integer(0)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.delta = sp.sympify(self.delta)

    def noise_variance(self) -> sp.Expr:
        return self.delta

    def parameters(self) -> set[sp.Symbol]:
        return set(self.delta.free_symbols)

    def describe(self, tex) -> str:
        return (rf"{tex(self.label)} = \operatorname{{sign}}\left({tex(self.forms[0])} + "
                rf"\sqrt{{{tex(self.delta)}}}\, z\right), \quad z \sim \mathcal{{N}}(0, 1)")


@dataclass
class LabelFlip(Channel):
    """A binary channel (``base``, e.g. :class:`Sign`) whose label is flipped with probability ``p``:
    ``Z(y) = (1 - p) Z_base(y) + p Z_base(-y)``."""

    base: Channel | None = None
    p: sp.Expr = sp.Integer(0)

    def __init__(self, base: Channel, p: sp.Expr):
        if not isinstance(base, Channel) or tuple(base.values) != (-1, 1):
            raise DeclarationError("channel: LabelFlip needs a binary channel with labels -1, +1 (Sign, Probit)")
        self.base, self.p = base, sp.sympify(p)
        super().__init__(base.forms, label=base.label)

    @property
    def values(self) -> tuple[int, ...]:
        return (-1, 1)

    def likelihood(self, y, mean, cov) -> sp.Expr:
        return (1 - self.p) * self.base.likelihood(y, mean, cov) + self.p * self.base.likelihood(-y, mean, cov)

    def transitions(self):
        return self.base.transitions()

    def probabilities(self, u, params=None):
        P = self.base.probabilities(u, params)
        p = _numeric(self.p, params)
        return (1 - p) * P + p * P[::-1]

    def parameters(self) -> set[sp.Symbol]:
        return set(self.p.free_symbols) | self.base.parameters()

    @property
    def symmetric(self) -> bool:
        return self.base.symmetric

    def describe(self, tex) -> str:
        return (self.base.describe(tex) + rf", \text{{ flipped with probability }} {tex(self.p)}")


@dataclass
class Thresholds(Channel):
    """Ordinal labels: ``y = k`` for ``t_k < u + sqrt(Delta) z < t_{k+1}`` (``t_0 = -inf``,
    ``t_{K+1} = +inf``), ``k = 0..K``: ``Z(k) = Phi((t_{k+1} - mu)/s) - Phi((t_k - mu)/s)``,
    ``s = sqrt(v + Delta)``. ``thresholds`` must be increasing."""

    thresholds: Sequence[sp.Expr] = ()
    delta: sp.Expr = sp.Integer(0)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.thresholds = tuple(sp.sympify(t) for t in self.thresholds)
        self.delta = sp.sympify(self.delta)
        if not self.thresholds:
            raise DeclarationError("channel: Thresholds needs at least one threshold")

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(range(len(self.thresholds) + 1))

    def likelihood(self, y, mean, cov) -> sp.Expr:
        s = sp.sqrt(cov[0, 0] + self.delta)
        t = self.thresholds
        pieces = []
        for k in self.values:
            upper = normal_cdf((t[k] - mean[0]) / s) if k < len(t) else sp.Integer(1)
            lower = normal_cdf((t[k - 1] - mean[0]) / s) if k > 0 else sp.Integer(0)
            # the outer classes as one tail each: accurate far out in that tail
            if k == 0:
                z = upper
            elif k == len(t):
                z = normal_cdf((mean[0] - t[k - 1]) / s)
            else:
                z = upper - lower
            pieces.append((z, sp.Eq(y, k)))
        pieces[-1] = (pieces[-1][0], True)
        return sp.Piecewise(*pieces)

    def transitions(self):
        return [(t, 0, self.delta) for t in self.thresholds]

    def probabilities(self, u, params=None):
        u = np.atleast_2d(np.asarray(u, dtype=float))[0]
        t = np.array([_numeric(x, params) for x in self.thresholds])
        var = _numeric(self.delta, params)
        edges = np.concatenate([[-np.inf], t, [np.inf]])
        if var > 0:
            cdf = _np_normal_cdf((edges[:, None] - u[None, :]) / np.sqrt(var))
        else:
            cdf = (u[None, :] < edges[:, None]).astype(float)
        return np.diff(cdf, axis=0)

    def parameters(self) -> set[sp.Symbol]:
        out = set(self.delta.free_symbols)
        for t in self.thresholds:
            out |= t.free_symbols
        return out

    def validate(self, hstar, defaults) -> None:
        super().validate(hstar, defaults)
        vals = [float(sp.sympify(t).subs(defaults)) for t in self.thresholds]
        if any(b <= a for a, b in zip(vals, vals[1:])):
            raise DeclarationError(f"channel: thresholds must be increasing, got {vals} at the defaults")

    def describe(self, tex) -> str:
        ts = ", ".join(tex(t) for t in self.thresholds)
        noise = rf" + \sqrt{{{tex(self.delta)}}}\, z" if self.delta != 0 else ""
        return (rf"{tex(self.label)} = k \text{{ for }} t_k < {tex(self.forms[0])}{noise} < t_{{k+1}}, "
                rf"\quad (t_1, \dots) = ({ts})")


@dataclass
class Argmax(Channel):
    """``y = argmax_k u_k`` over two or three classes (labels ``0, .., K-1``).

    Two classes: ``Z(0) = Phi((mu_0 - mu_1)/s)``, ``s^2 = C_00 + C_11 - 2 C_01``. Three classes:
    label ``k`` wins when both differences ``d_j = u_k - u_j`` (``j != k``) are positive, a
    bivariate normal orthant: ``Z(k) = Phi2(m_1/s_1, m_2/s_2; c_12/(s_1 s_2))`` with ``m, s, c``
    the means, standard deviations and covariance of the two differences
    (:class:`BivariateNormalCDF`). More classes need an orthant probability in ``K - 1 >= 3``
    dimensions (no closed form with elementary derivatives) and are refused.
    """

    #: the most classes whose label law is implemented
    MAX_CLASSES = 3

    def __post_init__(self) -> None:
        super().__post_init__()
        K = len(self.forms)
        if not 2 <= K <= self.MAX_CLASSES:
            raise DeclarationError(f"channel: Argmax over {K} classes is not supported (forms: give 2 or 3; the label "
                                   f"law of {K} classes needs a {K - 1}-dimensional Gaussian orthant probability)")

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(range(len(self.forms)))

    def _difference(self, k: int, j: int, mean, cov) -> tuple[sp.Expr, sp.Expr]:
        """Mean and variance of ``u_k - u_j``."""
        return mean[k] - mean[j], cov[k, k] + cov[j, j] - 2 * cov[k, j]

    def likelihood(self, y, mean, cov) -> sp.Expr:
        if len(self.forms) == 2:
            m, v = self._difference(0, 1, mean, cov)
            d = m / sp.sqrt(v)
            return sp.Piecewise((normal_cdf(d), sp.Eq(y, 0)), (normal_cdf(-d), True))
        pieces = []
        for k in self.values:
            i, j = (o for o in self.values if o != k)
            m1, v1 = self._difference(k, i, mean, cov)
            m2, v2 = self._difference(k, j, mean, cov)
            c12 = cov[k, k] - cov[k, j] - cov[i, k] + cov[i, j]
            s1, s2 = sp.sqrt(v1), sp.sqrt(v2)
            pieces.append((BivariateNormalCDF(m1 / s1, m2 / s2, c12 / (s1 * s2)), sp.Eq(y, k)))
        pieces[-1] = (pieces[-1][0], True)
        return sp.Piecewise(*pieces)

    def transitions(self):
        # form (i, j): the difference u_i - u_j, whose sign decides between labels i and j
        K = len(self.forms)
        return [(sp.Integer(0), (i, j), sp.Integer(0)) for i in range(K) for j in range(i + 1, K)]

    def probabilities(self, u, params=None):
        u = np.atleast_2d(np.asarray(u, dtype=float))
        top = u == u.max(axis=0, keepdims=True)
        return top / top.sum(axis=0, keepdims=True)  # ties (probability zero) split evenly

    def describe(self, tex) -> str:
        forms = ", ".join(tex(f) for f in self.forms)
        # u^*: the teacher's forms (the student's logits, where a loss has them, are u)
        names = ", ".join(f"u^{{*}}_{{{k}}}" for k in self.values)
        return rf"{tex(self.label)} = \operatorname{{argmax}}_k u^{{*}}_k, \quad ({names}) = ({forms})"


def conditional_law(forms: Sequence[sp.Expr], laws: dict[sp.Symbol, sp.Expr], residual: Sequence[sp.Symbol]
                    ) -> tuple[list[sp.Expr], sp.Matrix]:
    """Mean and covariance of the forms given the student's Gaussians.

    ``laws`` writes every teacher field as a linear function of the student Gaussians ``xi``
    and the independent residual Gaussians ``residual`` (``eta``); the mean is the form at
    ``eta = 0`` and the covariance ``J J^T`` with ``J = d forms / d eta``.
    """
    us = [sp.sympify(u).subs(laws) for u in forms]
    zero = {e: 0 for e in residual}
    mean = [sp.expand(u.subs(zero)) for u in us]
    J = sp.Matrix([[sp.diff(u, e) for e in residual] for u in us])
    cov = (J * J.T).applyfunc(sp.expand)
    return mean, cov

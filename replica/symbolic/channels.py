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
  through the bivariate normal CDF :class:`BivariateNormalCDF`);
* :class:`DiscreteLabel` -- any piecewise-constant sympy expression of the teacher fields, e.g. the
  committee machine's ``sign(sign(h*_1) + sign(h*_2))``, its law integrated over the sign patterns of
  the (at most two) affine forms it switches on.

A continuous label (``y = h* + sqrt(Delta) z``, any ``y = g(h*, noise)``) needs no channel: it is
written into the loss directly and averaged in the integrand, as before.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import ClassVar, Sequence

import numpy as np
import sympy as sp

from ..errors import DeclarationError
from .factors import Factor
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
class Channel(Factor):
    """Base class: a finite-valued label ``y`` with law ``P(y | u)``, ``u`` linear forms of ``h*``.

    ``forms`` are sympy expressions linear in the model's teacher fields; ``label`` the symbol
    the loss and the observables are written in (default ``y``). A factor (role ``channel``,
    :mod:`replica.symbolic.factors`): its potential is :meth:`likelihood`, its sampler :meth:`sample`.
    """

    role: ClassVar[str] = "channel"

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

    def latex(self) -> str:
        """LaTeX of the channel with sympy's printer (:meth:`describe`)."""
        return self.describe(sp.latex)

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


def _numeric(expr: sp.Expr, params: dict[str, float] | None, what: str = "channel") -> float:
    """``expr`` at the parameter values ``params``; a symbol left without a value is an error naming ``what``."""
    val = sp.sympify(expr)
    if params:
        val = val.subs({s: params[s.name] for s in val.free_symbols if s.name in params})
    if val.free_symbols:
        raise ValueError(f"{what}: give values for {sorted(map(str, val.free_symbols))}")
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


#: functions whose value is constant between the zeros of their (linear) argument
_SWITCHES = (sp.sign, sp.Heaviside)


def _switch_atoms(expr: sp.Expr) -> list[sp.Basic]:
    """The innermost switching subexpressions of ``expr``: ``sign(u)``, ``Heaviside(u)`` and relations
    ``u > v`` (inside ``Piecewise`` conditions, ``And``/``Or``) whose arguments contain no other switch."""
    out: list[sp.Basic] = []

    def walk(e: sp.Basic) -> bool:  # whether e contains a switch
        inner = [walk(a) for a in e.args] if e.args else []
        has = any(inner)
        if isinstance(e, _SWITCHES) or (isinstance(e, sp.core.relational.Relational) and not
                                        isinstance(e, (sp.Eq, sp.Ne))):
            if not has and e not in out:
                out.append(e)
            return True
        if isinstance(e, (sp.Eq, sp.Ne)):
            raise DeclarationError(f"channel: the label uses the condition {e}, an event of probability zero; "
                                   "write it with sign, Heaviside or strict inequalities")
        return has

    walk(sp.sympify(expr))
    return out


def _switch_argument(atom: sp.Basic) -> tuple[sp.Expr, int]:
    """``(u, s)``: the atom is a function of the sign of ``s u`` being positive."""
    if isinstance(atom, _SWITCHES):
        return sp.sympify(atom.args[0]), 1
    if isinstance(atom, (sp.StrictGreaterThan, sp.GreaterThan)):
        return atom.lhs - atom.rhs, 1
    return atom.lhs - atom.rhs, -1  # < and <=


@dataclass
class DiscreteLabel(Channel):
    """A discrete label written as a sympy expression of the teacher fields, e.g. the two-unit committee
    machine ``y = sign(sign(h*_1) + sign(h*_2))`` (values ``-1, 0, 1``).

    The expression must be piecewise constant: built from ``sign``, ``Heaviside`` and ``Piecewise``
    (strict inequalities) of forms *affine* in the teacher fields, combined by anything. Its law is
    integrated exactly: the label is a function of the signs of those forms, tabulated once over their
    sign patterns, and ``Z(y | mu, C)`` sums the probabilities of the patterns with label ``y`` under
    ``u ~ N(mu, C)``:

    * forms along one direction ``u`` (thresholds ``t_k`` on one linear form, e.g. ``sign(|h*| - t)``
      written with ``Piecewise``): the label is constant on the intervals between the thresholds, each
      of probability ``Phi((t_{k+1} - mu)/s) - Phi((t_k - mu)/s)``;
    * two directions with one switch each (the two-unit committee): orthant probabilities, the bivariate
      normal CDF (:class:`BivariateNormalCDF`).

    An expression that is not piecewise constant (``h*_1 sign(h*_2)``), or switches along more directions,
    is refused with one line (:class:`~replica.errors.DeclarationError`).
    """

    expr: sp.Expr = sp.Integer(0)

    #: the most affine forms an expression may switch on (their sign patterns are tabulated)
    MAX_FORMS = 8

    def __init__(self, expr: sp.Expr, *, label: sp.Symbol = LABEL):
        self.expr = sp.sympify(expr)
        atoms = _switch_atoms(self.expr)
        if not atoms:
            raise DeclarationError(f"channel: the label {self.expr} switches on no sign, Heaviside or inequality: "
                                   "a continuous label is written into the loss (with noise), not as a DiscreteLabel")
        forms: list[sp.Expr] = []
        signs = []
        for a in atoms:
            u, s = _switch_argument(a)
            u = sp.expand(u)
            if u in forms:
                signs.append((forms.index(u), s))
            elif sp.expand(-u) in forms:
                signs.append((forms.index(sp.expand(-u)), -s))
            else:
                forms.append(u)
                signs.append((len(forms) - 1, s))
        if len(forms) > self.MAX_FORMS:
            raise DeclarationError(f"channel: the label switches on {len(forms)} forms; at most {self.MAX_FORMS}")
        self._atoms, self._signs = atoms, signs
        table: dict[tuple[int, ...], int] = {}
        for pattern in itertools.product((-1, 1), repeat=len(forms)):
            subs = {}
            for a, (k, s) in zip(atoms, signs):
                v = s * pattern[k]
                if isinstance(a, sp.sign):
                    subs[a] = sp.Integer(v)
                elif isinstance(a, sp.Heaviside):
                    subs[a] = sp.Integer(1 if v > 0 else 0)
                else:
                    subs[a] = sp.true if v > 0 else sp.false
            val = self.expr.xreplace(subs)
            val = sp.piecewise_fold(val) if val.has(sp.Piecewise) else val
            val = sp.simplify(val) if not val.is_number else val
            if not val.is_number or not val.is_real:
                raise DeclarationError(f"channel: the label {self.expr} is not piecewise constant in the teacher "
                                       f"fields (between the sign changes of {[str(f) for f in forms]} it is {val}); "
                                       "write it with sign, Heaviside or Piecewise of linear forms")
            if not val.is_integer:
                raise DeclarationError(f"channel: the label {self.expr} takes the value {val}; labels must be integers")
            table[pattern] = int(val)
        self._table = table
        self._raw_forms = tuple(forms)  # affine; read by validate once the teacher fields are known
        self.offsets: tuple = ()
        self._intervals: tuple | None = None  # (thresholds, label per interval) along one direction
        super().__init__(tuple(forms), label=label)

    @property
    def values(self) -> tuple[int, ...]:
        if self._intervals is not None:
            return tuple(sorted(set(self._intervals[1])))
        return tuple(sorted(set(self._table.values())))

    def validate(self, hstar, defaults) -> None:
        """Split the affine forms into linear parts and offsets, and group them by direction: one direction
        (thresholds on one form) or two with one switch each; refuse anything else."""
        hs = list(hstar)
        zero = {s: 0 for s in hs}
        offsets, linear = [], []
        for u in self._raw_forms:
            c = sp.expand(u.subs(zero))
            offsets.append(c)
            linear.append(sp.expand(u - c))
            extra = c.free_symbols - set(defaults)
            if extra:
                raise DeclarationError(f"channel: the label's switching point {c} uses {sorted(map(str, extra))}; "
                                       "declare them as parameters")
        groups: list[list[tuple[int, sp.Expr]]] = []  # per direction: (form index, scale to the direction)
        for i, L in enumerate(linear):
            for g in groups:
                ratio = _proportional(L, linear[g[0][0]], hs)
                if ratio is not None:
                    g.append((i, ratio))
                    break
            else:
                groups.append([(i, sp.Integer(1))])
        if len(groups) == 1:
            base = linear[groups[0][0][0]]
            cuts = []
            for i, c in groups[0]:
                if not c.is_number:
                    raise DeclarationError(f"channel: the form {linear[i]} is a multiple of {base} with a parameter "
                                           f"factor {c}; write the thresholds on one form")
                cuts.append((sp.simplify(-offsets[i] / c), i, int(sp.sign(c))))
            order = sorted(cuts, key=lambda t: float(sp.sympify(t[0]).subs(defaults)))
            values = [float(sp.sympify(t[0]).subs(defaults)) for t in order]
            if any(b <= a for a, b in zip(values, values[1:])):
                raise DeclarationError(f"channel: the label's thresholds {[str(t[0]) for t in order]} coincide at the "
                                       "defaults")
            labels = []
            for k in range(len(order) + 1):  # interval k: above the first k thresholds, below the rest
                pattern = [0] * len(linear)
                for rank, (_, i, sgn) in enumerate(order):
                    pattern[i] = sgn if rank < k else -sgn
                labels.append(self._table[tuple(pattern)])
            self._intervals = (tuple(t[0] for t in order), tuple(labels))
            self.forms, self.offsets = (base,), (sp.Integer(0),)
        elif len(groups) == 2 and all(len(g) == 1 for g in groups):
            self._intervals = None
            self.forms, self.offsets = tuple(linear), tuple(offsets)
        else:
            raise DeclarationError(f"channel: the label switches along {len(groups)} directions of the teacher fields "
                                   f"with {len(linear)} thresholds; supported: thresholds on one form, or two forms "
                                   "with one switch each (their joint law is Phi or the bivariate Phi2)")
        super().validate(hs, defaults)

    def _offset(self, k: int) -> sp.Expr:
        return self.offsets[k] if self.offsets else sp.Integer(0)

    def likelihood(self, y, mean, cov) -> sp.Expr:
        by_value: dict[int, list] = {v: [] for v in self.values}
        if self._intervals is not None:
            cuts, labels = self._intervals
            sd = sp.sqrt(cov[0, 0])
            n = len(cuts)
            for k, v in enumerate(labels):
                if k == 0:
                    p = normal_cdf((cuts[0] - mean[0]) / sd)
                elif k == n:
                    p = normal_cdf((mean[0] - cuts[-1]) / sd)
                else:
                    p = normal_cdf((cuts[k] - mean[0]) / sd) - normal_cdf((cuts[k - 1] - mean[0]) / sd)
                by_value[v].append(p)
        else:
            sd = [sp.sqrt(cov[k, k]) for k in range(2)]
            z = [(mean[k] + self._offset(k)) / sd[k] for k in range(2)]
            r = cov[0, 1] / (sd[0] * sd[1])
            for pattern, v in self._table.items():
                by_value[v].append(BivariateNormalCDF(pattern[0] * z[0], pattern[1] * z[1], pattern[0] * pattern[1] * r))
        pieces = [(sp.Add(*by_value[v]), sp.Eq(y, v)) for v in self.values]
        pieces[-1] = (pieces[-1][0], True)
        return sp.Piecewise(*pieces) if len(pieces) > 1 else pieces[0][0]

    def transitions(self):
        if self._intervals is not None:
            return [(t, 0, sp.Integer(0)) for t in self._intervals[0]]
        return [(-self._offset(k), k, sp.Integer(0)) for k in range(len(self.forms))]

    def probabilities(self, u, params=None):
        u = np.atleast_2d(np.asarray(u, dtype=float))
        labels = np.empty(u.shape[1])
        if self._intervals is not None:
            cuts = np.array([_numeric(t, params) for t in self._intervals[0]])
            labels[:] = np.asarray(self._intervals[1], dtype=float)[np.searchsorted(cuts, u[0], side="right")]
        else:
            shifted = [u[k] + _numeric(self._offset(k), params) for k in range(2)]
            signs = np.stack([np.where(s > 0, 1, -1) for s in shifted])
            for pattern, v in self._table.items():
                labels[np.all(signs == np.array(pattern)[:, None], axis=0)] = v
        return np.stack([(labels == v).astype(float) for v in self.values])

    def parameters(self) -> set[sp.Symbol]:
        out: set[sp.Symbol] = set()
        for c in self.offsets:
            out |= c.free_symbols
        for t in (self._intervals[0] if self._intervals is not None else ()):
            out |= sp.sympify(t).free_symbols
        return out

    @property
    def symmetric(self) -> bool:
        if self._intervals is not None:
            cuts, labels = self._intervals
            return (all(sp.simplify(a + b) == 0 for a, b in zip(cuts, reversed(cuts)))
                    and all(a == -b for a, b in zip(labels, reversed(labels))))
        if any(c != 0 for c in self.offsets):
            return False
        return all(self._table[tuple(-s for s in p)] == -v for p, v in self._table.items())

    def describe(self, tex) -> str:
        return rf"{tex(self.label)} = {tex(self.expr)}"


def _proportional(a: sp.Expr, b: sp.Expr, variables) -> sp.Expr | None:
    """``c`` with ``a = c b`` (linear forms in ``variables``), ``None`` if they are not proportional."""
    ca = [sp.diff(a, v) for v in variables]
    cb = [sp.diff(b, v) for v in variables]
    k = next((i for i, x in enumerate(cb) if x != 0), None)
    if k is None:
        return None
    c = sp.simplify(ca[k] / cb[k])
    return c if all(sp.simplify(x - c * y) == 0 for x, y in zip(ca, cb)) else None


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

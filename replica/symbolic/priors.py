"""Teacher priors: the law ``P0`` of the teacher's weights, for Bayes-optimal inference.

Each prior is a small factor, like the channels of :mod:`replica.symbolic.channels`: it carries its
theory (the density, the partition function ``Z_0`` and from it the posterior-mean denoiser) and
its sampler. The entries of a teacher weight row ``w* in R^K`` (``K = r_t``) are independent with
the one-dimensional law ``P0``; the entropic potential of the Bayes-optimal free entropy is

    psi_P0(A) = E_{w*, xi} log Z_0(A w* + A^{1/2} xi, A),
    Z_0(B, A) = int dP0(w) exp(B^T w - 1/2 w^T A w)             (w in R^K, P0 on each entry),

and the posterior-mean denoiser is ``f_a(B, A) = d log Z_0 / dB`` (the posterior mean of ``w``), its
derivative ``f_v = d f_a / dB`` the posterior covariance.

* :class:`Gaussian` -- ``N(mean, variance)`` entries (the default prior, ``N(0, 1)``);
* :class:`Rademacher` -- ``+-1`` with probability ``1/2`` each;
* :class:`GaussBernoulli` -- ``0`` with probability ``1 - rho``, ``N(0, 1)`` with probability ``rho``;
* :class:`Density` -- any density written in sympy (``Model(prior=sp.exp(-sp.Abs(w)))`` is accepted
  as ``Density(sp.exp(-sp.Abs(w)), w)``), normalised numerically; refused, with one line, when it is
  negative somewhere or not normalisable.

The first three are finite mixtures of point masses (:class:`Atom`) and Gaussians
(:class:`GaussianPart`). For those ``Z_0`` is a sum of exponentials of expressions *quadratic* in
``B`` (a Gaussian integral per mixture component, over the Gaussian coordinates of that component),
``log Z_0 = log sum_j exp(c_j + b_j^T B + 1/2 B^T G_j B)``: :meth:`Prior.terms` derives
``(c_j, b_j, G_j)`` with sympy, and the numerics evaluate ``log Z_0``, ``f_a`` and ``f_v`` as a
numerically stable log-sum-exp of those terms (a ``+-1`` prior at ``A = 1e6`` has
``cosh(B) = inf`` but a finite log-sum-exp). A :class:`Density` has no closed-form ``Z_0``: its terms
are the nodes of a quadrature rule of its density (a point mass per node), built by the numerics.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np
import sympy as sp

from ..errors import DeclarationError
from .channels import _numeric as _numeric_value
from .factors import Factor
from .symbols import symbol

#: the weight variable of a prior's density (its LaTeX spelling: ``w``)
WEIGHT = symbol("w", "w")


@dataclass(frozen=True)
class Atom:
    """A point mass ``weight * delta(w - value)`` of a one-dimensional prior."""

    value: sp.Expr
    weight: sp.Expr


@dataclass(frozen=True)
class GaussianPart:
    """A Gaussian part ``weight * N(w; mean, variance)`` of a one-dimensional prior."""

    mean: sp.Expr
    variance: sp.Expr
    weight: sp.Expr


@dataclass(frozen=True)
class QuadraticTerm:
    """One term of ``log Z_0(B, A) = log sum_j exp(c_j + b_j^T B + 1/2 B^T G_j B)`` (``K``-dimensional
    ``B``; ``c``, ``b``, ``G`` expressions of ``A`` and the parameters), and the law of the teacher's
    row on that mixture component: ``w* ~ N(mean, cov)`` (``cov`` zero for a point mass) with
    probability ``weight``."""

    c: sp.Expr
    b: sp.Matrix
    G: sp.Matrix
    weight: sp.Expr
    mean: sp.Matrix
    cov: sp.Matrix

    def exponent(self, B: sp.Matrix) -> sp.Expr:
        """``c + b^T B + 1/2 B^T G B``."""
        return self.c + (self.b.T * B)[0, 0] + (B.T * self.G * B)[0, 0] / 2


class Prior(Factor):
    """Base class: the law ``P0`` of every entry of a teacher weight row (entries independent); the
    entropic side's factor of Bayes-optimal inference (:mod:`replica.symbolic.factors`)."""

    role: ClassVar[str] = "prior"

    def components(self) -> tuple[Atom | GaussianPart, ...] | None:
        """The one-dimensional law as a finite mixture of atoms and Gaussians; ``None`` for a density
        without such a form (:class:`Density`)."""
        raise NotImplementedError

    def parameters(self) -> set[sp.Symbol]:
        """The numeric parameters of the prior (e.g. ``rho`` of :class:`GaussBernoulli`)."""
        out: set[sp.Symbol] = set()
        for c in self.components() or ():
            for e in vars(c).values():
                out |= sp.sympify(e).free_symbols
        return out

    def implied_domains(self) -> dict[sp.Symbol, tuple[float | None, float | None]]:
        """Domains of bare-symbol parameters (a probability in ``[0, 1]``, a variance ``>= 0``)."""
        return {}

    # ------------------------------------------------------------------ theory
    def density(self, w: sp.Symbol = WEIGHT) -> sp.Expr:
        """The density of ``P0`` in ``w`` (point masses as ``DiracDelta``)."""
        terms = []
        for c in self.components():
            if isinstance(c, Atom):
                terms.append(c.weight * sp.DiracDelta(w - c.value))
            else:
                terms.append(c.weight * sp.exp(-(w - c.mean) ** 2 / (2 * c.variance))
                             / sp.sqrt(2 * sp.pi * c.variance))
        return sp.Add(*terms)

    def mean(self) -> sp.Expr:
        """``E_P0[w]``."""
        return sp.Add(*[c.weight * (c.value if isinstance(c, Atom) else c.mean) for c in self.components()])

    def second_moment(self) -> sp.Expr:
        """``rho = E_P0[w^2]``: the teacher's overlap with itself, per entry."""
        return sp.Add(*[c.weight * (c.value ** 2 if isinstance(c, Atom) else c.mean ** 2 + c.variance)
                        for c in self.components()])

    def terms(self, A: sp.Matrix) -> list[QuadraticTerm]:
        """The terms of ``log Z_0(B, A)`` for a row of ``K = A.shape[0]`` independent entries: one per
        choice of a mixture component for every entry (``n_components^K``), each the Gaussian integral
        over that choice's Gaussian entries, the atoms held at their values."""
        K = A.shape[0]
        B = sp.Matrix([sp.Dummy(f"B{k}") for k in range(K)])
        out = []
        for choice in itertools.product(self.components(), repeat=K):
            atoms = [k for k, c in enumerate(choice) if isinstance(c, Atom)]
            gauss = [k for k, c in enumerate(choice) if isinstance(c, GaussianPart)]
            weight = sp.Mul(*[c.weight for c in choice])
            a = sp.Matrix([choice[k].value for k in atoms])
            expo = sp.log(weight)
            if atoms:
                Baa = sp.Matrix([B[k] for k in atoms])
                Aaa = A.extract(atoms, atoms)
                expo += (Baa.T * a)[0, 0] - (a.T * Aaa * a)[0, 0] / 2
            if gauss:
                mu = sp.Matrix([choice[k].mean for k in gauss])
                D = sp.diag(*[choice[k].variance for k in gauss])
                Bg = sp.Matrix([B[k] for k in gauss])
                if atoms:
                    Bg = Bg - A.extract(gauss, atoms) * a
                M = A.extract(gauss, gauss)
                Dinv = sp.diag(*[1 / choice[k].variance for k in gauss])
                u = Bg + Dinv * mu
                P = (M + Dinv).inv()
                expo += (-sp.log((sp.eye(len(gauss)) + D * M).det()) / 2 + (u.T * P * u)[0, 0] / 2
                         - (mu.T * Dinv * mu)[0, 0] / 2)
            expo = sp.expand(expo)
            zero = {s: 0 for s in B}
            c = sp.simplify(expo.subs(zero))
            b = sp.Matrix([sp.simplify(sp.diff(expo, s).subs(zero)) for s in B])
            G = sp.Matrix(K, K, lambda i, j: sp.simplify(sp.diff(expo, B[i], B[j])))
            mean = sp.Matrix([c_.value if isinstance(c_, Atom) else c_.mean for c_ in choice])
            cov = sp.diag(*[0 if isinstance(c_, Atom) else c_.variance for c_ in choice])
            out.append(QuadraticTerm(c, b, G, weight, mean, cov))
        return out

    def log_partition(self, B: sp.Matrix, A: sp.Matrix) -> sp.Expr:
        """``log Z_0(B, A)`` in closed form (for the LaTeX export and the tests)."""
        return sp.log(sp.Add(*[sp.exp(t.exponent(B)) for t in self.terms(A)]))

    # ------------------------------------------------------------------ numbers
    def _numbers(self, params: dict[str, float] | None) -> list[tuple[str, float, float, float]]:
        """``(kind, weight, value or mean, variance)`` per component, numeric."""
        out = []
        for c in self.components():
            if isinstance(c, Atom):
                out.append(("atom", _numeric(c.weight, params), _numeric(c.value, params), 0.0))
            else:
                out.append(("gauss", _numeric(c.weight, params), _numeric(c.mean, params),
                            _numeric(c.variance, params)))
        return out

    def sample(self, size, rng: np.random.Generator, params: dict[str, float] | None = None) -> np.ndarray:
        """Independent draws from ``P0`` (array of shape ``size``)."""
        comps = self._numbers(params)
        weights = np.array([c[1] for c in comps])
        which = rng.choice(len(comps), size=size, p=weights / weights.sum())
        out = np.empty(np.shape(which))
        for j, (kind, _, m, v) in enumerate(comps):
            sel = which == j
            n = int(sel.sum())
            out[sel] = m if kind == "atom" else m + math.sqrt(v) * rng.standard_normal(n)
        return out

    # ------------------------------------------------------------------ declaration
    def validate(self, defaults: dict) -> None:
        """Raise :class:`DeclarationError` unless the parameters are declared and the law is a
        probability law at the defaults (weights non-negative summing to one, variances positive)."""
        missing = self.parameters() - set(defaults)
        if missing:
            raise DeclarationError(f"prior: parameter {sorted(map(str, missing))[0]} is not declared in "
                                   "Model(parameters=...)")
        vals = {s.name: float(v) for s, v in defaults.items()}
        check_numbers(self, vals)

    def describe(self, tex, w: sp.Symbol = WEIGHT) -> str:
        """LaTeX of the prior, e.g. ``P_0(w) = \\frac12 \\delta(w - 1) + \\frac12 \\delta(w + 1)``."""
        return rf"P_0({tex(w)}) = {tex(self.density(w))}"

    def __repr__(self) -> str:
        return type(self).__name__ + "()"


def check_numbers(prior: Prior, params: dict[str, float]) -> None:
    """Raise :class:`~replica.errors.ParameterError` (naming the parameter) unless ``prior`` is a
    probability law at ``params`` (a solve's values, not only the defaults)."""
    from ..errors import ParameterError

    comps = prior.components()
    if comps is None:
        return
    total = 0.0
    for c in comps:
        w = _numeric(c.weight, params)
        if not (w >= 0 and math.isfinite(w)):
            name = _name_of(c.weight, "prior")
            raise ParameterError(name, f"the prior's mixture weight {c.weight} = {w:g} is not in [0, 1]")
        total += w
        if isinstance(c, GaussianPart):
            v = _numeric(c.variance, params)
            if not (v > 0 and math.isfinite(v)):
                raise ParameterError(_name_of(c.variance, "prior"),
                                     f"the prior's variance {c.variance} = {v:g} must be positive")
    if abs(total - 1.0) > 1e-12:
        raise ParameterError("prior", f"the mixture weights sum to {total:.15g}, not 1")


def _name_of(expr: sp.Expr, fallback: str) -> str:
    syms = sorted(map(str, sp.sympify(expr).free_symbols))
    return syms[0] if syms else fallback


def _numeric(expr, params: dict[str, float] | None) -> float:
    return _numeric_value(expr, params, "prior")


@dataclass(repr=False)
class Gaussian(Prior):
    """``w ~ N(mean, variance)`` (default ``N(0, 1)``, the teacher of every ERM declaration)."""

    mean_: sp.Expr = sp.Integer(0)
    variance: sp.Expr = sp.Integer(1)

    def __init__(self, mean: sp.Expr = 0, variance: sp.Expr = 1):
        self.mean_, self.variance = sp.sympify(mean), sp.sympify(variance)

    def components(self):
        return (GaussianPart(self.mean_, self.variance, sp.Integer(1)),)

    def implied_domains(self):
        return {self.variance: (0, None)} if isinstance(self.variance, sp.Symbol) else {}

    def describe(self, tex, w: sp.Symbol = WEIGHT) -> str:
        return rf"P_0 = \mathcal{{N}}\left({tex(self.mean_)}, {tex(self.variance)}\right)"

    def __repr__(self) -> str:
        if self.mean_ == 0 and self.variance == 1:
            return "Gaussian()"
        return f"Gaussian(mean={self.mean_}, variance={self.variance})"


@dataclass(repr=False)
class Rademacher(Prior):
    """``w = +-1`` with probability ``1/2`` each (the binary perceptron's teacher)."""

    def components(self):
        half = sp.Rational(1, 2)
        return (Atom(sp.Integer(-1), half), Atom(sp.Integer(1), half))

    def describe(self, tex, w: sp.Symbol = WEIGHT) -> str:
        return (rf"P_0({tex(w)}) = \tfrac12 \delta({tex(w)} - 1) + \tfrac12 \delta({tex(w)} + 1)")


@dataclass(repr=False)
class GaussBernoulli(Prior):
    """``w = 0`` with probability ``1 - rho``, ``w ~ N(0, 1)`` with probability ``rho`` (a sparse teacher;
    ``E w^2 = rho``)."""

    rho: sp.Expr = sp.Rational(1, 2)

    def __init__(self, rho: sp.Expr):
        self.rho = sp.sympify(rho)

    def components(self):
        return (Atom(sp.Integer(0), 1 - self.rho), GaussianPart(sp.Integer(0), sp.Integer(1), self.rho))

    def implied_domains(self):
        return {self.rho: (0, 1)} if isinstance(self.rho, sp.Symbol) else {}

    def describe(self, tex, w: sp.Symbol = WEIGHT) -> str:
        r = tex(self.rho)
        return (rf"P_0({tex(w)}) = (1 - {r})\, \delta({tex(w)}) + {r}\, \mathcal{{N}}({tex(w)}; 0, 1)")

    def __repr__(self) -> str:
        return f"GaussBernoulli({self.rho})"


@dataclass(repr=False)
class Density(Prior):
    """A prior written as a (possibly unnormalised) density ``p(w)`` in sympy, on ``support``
    (default the real line).

    ``Z_0`` has no closed form: the numerics integrate ``p`` on a composite Gauss-Legendre rule
    (:mod:`replica.numeric.bayes_prior`), with panel boundaries at the points where ``p`` is not
    smooth (:attr:`kinks`, found here: the zeros of the arguments of ``Abs``, ``Heaviside``, ``sign``,
    ``Max``, ``Min`` and of ``Piecewise`` conditions), and refine that rule for error bars. At the
    declaration the density is checked at the parameters' defaults: non-negative, normalisable,
    with a finite second moment (one-line :class:`DeclarationError` otherwise).
    """

    expr: sp.Expr = sp.Integer(1)
    w: sp.Symbol = WEIGHT
    support: tuple = (-sp.oo, sp.oo)

    def __init__(self, expr: sp.Expr, w: sp.Symbol | None = None, support: Sequence = (-sp.oo, sp.oo)):
        self.expr = sp.sympify(expr)
        if w is None:
            free = sorted(self.expr.free_symbols, key=str)
            if len(free) != 1:
                raise DeclarationError(f"prior: the density {self.expr} has free symbols {[str(s) for s in free]}; "
                                       "say which one is the weight: Density(expr, w)")
            w = free[0]
        if not isinstance(w, sp.Symbol):
            raise DeclarationError(f"prior: the weight variable must be a sympy Symbol, got {w!r}")
        if len(support) != 2:
            raise DeclarationError(f"prior: support must be (low, high), got {support!r}")
        lo, hi = (sp.sympify(s) for s in support)
        if not (lo.is_number and hi.is_number) or not bool(lo < hi):
            raise DeclarationError(f"prior: support must be two numbers low < high, got ({lo}, {hi})")
        self.w, self.support = w, (lo, hi)

    def components(self):
        return None

    def parameters(self) -> set[sp.Symbol]:
        return self.expr.free_symbols - {self.w}

    def log_density(self) -> sp.Expr:
        """``log p(w)`` (unnormalised), simplified where sympy can (``log(exp(u)) = u``)."""
        return sp.expand_log(sp.log(self.expr), force=True)

    @property
    def kinks(self) -> list[sp.Expr]:
        """Points where the density is not smooth (expressions of the parameters), inside the support."""
        args = []
        for f in self.expr.atoms(sp.Abs, sp.Heaviside, sp.sign):
            args.append(f.args[0])
        for f in self.expr.atoms(sp.Max, sp.Min):
            args += [a - b for a, b in itertools.combinations(f.args, 2)]
        for f in self.expr.atoms(sp.Piecewise):
            for _, cond in f.args:
                for rel in cond.atoms(sp.core.relational.Relational):
                    args.append(rel.lhs - rel.rhs)
        out = []
        for a in args:
            if self.w not in a.free_symbols:
                continue
            try:
                roots = sp.solve(sp.Eq(a, 0), self.w)
            except NotImplementedError:
                raise DeclarationError(f"prior: cannot locate where the density is not smooth ({a} = 0)") from None
            out += [r for r in roots if r.is_real is not False]
        return list(dict.fromkeys(out))

    def density(self, w: sp.Symbol = WEIGHT) -> sp.Expr:
        return self.expr.subs(self.w, w)

    def _numeric_density(self, params: dict[str, float]):
        expr = self.expr.subs({s: params[s.name] for s in self.parameters() if s.name in params})
        return sp.lambdify(self.w, expr, modules=["numpy", "scipy"])

    def moments(self, params: dict[str, float]) -> tuple[float, float, float]:
        """``(normalisation, mean, second moment)`` at ``params``, by adaptive quadrature (scipy);
        :class:`DeclarationError` if the density is negative, not normalisable or has no second moment."""
        import warnings

        from scipy import integrate

        p = self._numeric_density(params)
        lo, hi = (float(s) for s in self.support)
        finite_lo, finite_hi = max(lo, -60.0), min(hi, 60.0)
        grid = np.linspace(finite_lo, finite_hi, 4001)[1:-1]
        with np.errstate(all="ignore"):
            vals = np.broadcast_to(np.asarray(p(grid), dtype=float), grid.shape)
        if np.any(vals < 0) or not np.all(np.isfinite(vals)):
            bad = grid[(vals < 0) | ~np.isfinite(vals)][0]
            raise DeclarationError(f"prior: the density {self.expr} is negative or not finite at {self.w} = {bad:.3g}")
        out = []
        for k in range(3):
            def f(x, k=k):
                return float(p(x)) * x ** k
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                try:
                    val, err = integrate.quad(f, lo, hi, limit=200, points=None if not (math.isfinite(lo) and
                                                                                       math.isfinite(hi)) else
                                              [float(x) for x in self._numeric_kinks(params) if lo < x < hi] or None)
                except (integrate.IntegrationWarning, OverflowError, ZeroDivisionError, ValueError, RuntimeWarning):
                    val, err = float("inf"), float("inf")
            out.append((val, err))
        (z, ez), (m1, _), (m2, e2) = out
        if not (math.isfinite(z) and z > 0 and ez < 1e-6 * z):
            raise DeclarationError(f"prior: the density {self.expr} is not normalisable on "
                                   f"({self.support[0]}, {self.support[1]}) (its integral diverges or vanishes)")
        if not (math.isfinite(m2) and e2 < 1e-6 * max(m2, 1e-300)):
            raise DeclarationError(f"prior: the density {self.expr} has no finite second moment (the teacher's norm "
                                   "would be infinite)")
        return z, m1 / z, m2 / z

    def _numeric_kinks(self, params: dict[str, float]) -> list[float]:
        out = []
        for k in self.kinks:
            try:
                out.append(_numeric(k, params))
            except (TypeError, ValueError):
                continue
        return out

    def validate(self, defaults: dict) -> None:
        missing = self.parameters() - set(defaults)
        if missing:
            raise DeclarationError(f"prior: the density uses {sorted(map(str, missing))}; declare them in "
                                   "Model(parameters=...)")
        self.moments({s.name: float(v) for s, v in defaults.items()})

    def mean(self) -> sp.Expr:
        raise DeclarationError("prior: a density's mean is numeric (Density.moments)")

    def second_moment(self) -> sp.Expr:
        raise DeclarationError("prior: a density's second moment is numeric (Density.moments)")

    def sample(self, size, rng: np.random.Generator, params: dict[str, float] | None = None) -> np.ndarray:
        """Draws by inversion of the distribution function on a fine grid of the effective support."""
        params = params or {}
        p = self._numeric_density(params)
        z, m1, m2 = self.moments(params)
        sd = math.sqrt(max(m2 - m1 * m1, 1e-300))
        lo = max(float(self.support[0]), m1 - 40 * sd)
        hi = min(float(self.support[1]), m1 + 40 * sd)
        x = np.linspace(lo, hi, 200001)
        with np.errstate(all="ignore"):
            dens = np.nan_to_num(np.broadcast_to(np.asarray(p(x), dtype=float), x.shape))
        cdf = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(x))])
        cdf /= cdf[-1]
        return np.interp(rng.random(size), cdf, x)

    def describe(self, tex, w: sp.Symbol = WEIGHT) -> str:
        return rf"P_0({tex(w)}) \propto {tex(self.density(w))}"

    def __repr__(self) -> str:
        return f"Density({self.expr}, {self.w})"


def as_prior(prior: object) -> Prior:
    """A declared prior: a :class:`Prior`, or a sympy density (read as :class:`Density`); ``None`` is
    the default :class:`Gaussian`."""
    if prior is None:
        return Gaussian()
    if isinstance(prior, Prior):
        return prior
    if isinstance(prior, sp.Basic):
        return Density(prior)
    raise DeclarationError(f"prior: {prior!r} is neither a replica prior (Gaussian, Rademacher, GaussBernoulli, "
                           "Density) nor a sympy density")

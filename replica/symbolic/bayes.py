"""Bayes-optimal inference for a declared model: the free entropy on the Nishimori line, derived.

Where empirical risk minimisation (:class:`replica.symbolic.derivation.Derivation`) has a ``min`` inside
every potential, the Bayes-optimal (BO) student knows the teacher's prior ``P0``
(:mod:`replica.symbolic.priors`) and label law ``P_out(y | h*)``, and its free entropy is a ``log`` of an
integral (Barbier, Krzakala, Macris, Miolane, Zdeborova, PNAS 2019; for ``K > 1`` teacher fields,
Aubin et al., NeurIPS 2018)::

    Phi(q, qhat) = -1/2 tr(q qhat) + psi_P0(qhat) + alpha Psi_out(q),
    psi_P0(qhat) = E_{w* ~ P0, xi} log Z_0(qhat w* + qhat^{1/2} xi, qhat),
    Z_0(B, A)    = int dP0(w) exp(B^T w - 1/2 w^T A w),
    Psi_out(q)   = E_{xi} int dy Z_out(y; q^{1/2} xi, rho - q) log Z_out(y; q^{1/2} xi, rho - q),
    Z_out(y; omega, V) = E_{h* ~ N(omega, V)} P_out(y | h*),

with ``q`` the ``K x K`` overlap of the posterior mean with the teacher (``K = r_t``) and ``rho = E[w* w*^T]``.
On the Nishimori line the teacher overlap equals the self overlap, the posterior variance is
``V = rho - q``, and a single conjugate ``qhat`` remains. Its stationarity conditions, written with the
posterior-mean denoisers

    f_a(B, A) = d_B log Z_0   (posterior mean of w),      f_v = d_B f_a  (its covariance),
    g_out(y, omega, V) = d_omega log Z_out,

are ``q = E[f_a f_a^T]`` and ``qhat = alpha E[g_out g_out^T]`` (the Nishimori identities turn the derivatives
of ``psi_P0`` and ``Psi_out`` into these squares; the test suite checks them against finite differences of
``Phi``). :class:`BayesDerivation` builds every ingredient from the declaration:

* the input side from the prior: ``log Z_0`` as the log-sum-exp of terms quadratic in ``B``
  (:meth:`replica.symbolic.priors.Prior.terms`), or a density integrated by the numerics;
* the output side from the label law: a channel's ``Z`` (:meth:`replica.symbolic.channels.Channel.likelihood`
  of the forms' Gaussian law given ``omega``), a :class:`~replica.symbolic.channels.DiscreteLabel`'s
  orthant probabilities, or a continuous target ``y = a^T h* + sqrt(Delta) z`` read off the loss (its
  ``Z_out`` a Gaussian density). ``log Z_out`` is written in a form that stays finite in the tails
  (``log Phi`` as :class:`LogNormalCDF`) and ``g_out``, ``d g_out / d omega`` are its sympy derivatives.

What has no Bayes-optimal free entropy of this form is refused with one line
(:class:`~replica.errors.DeclarationError`): a continuous target without noise (no density: give the
noise a positive variance, ``Delta > 0``), a label law that is not a function of one token's teacher
fields (the attention models, whose output ``T(h*) x`` mixes the ``d``-dimensional tokens themselves:
given the fields alone the label has no law), tokens that are not isotropic of unit variance.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import sympy as sp

from ..errors import DeclarationError
from .channels import NormalCDF
from .model import Model
from .priors import Density, Prior, QuadraticTerm
from .symbols import LATEX_NAMES, restore_names, symbol, symmetric_matrix

ALPHA = symbol("alpha", r"\alpha")


class LogNormalCDF(sp.Function):
    """``log Phi(x)``, finite far in the lower tail (printed as ``scipy.special.log_ndtr``); its
    derivative is the Mills ratio ``phi(x) / Phi(x)``, written ``exp(-x^2/2 - log Phi(x)) / sqrt(2 pi)``
    so that it too stays finite."""

    nargs = 1

    def fdiff(self, argindex=1):
        x = self.args[0]
        return sp.exp(-x ** 2 / 2 - LogNormalCDF(x)) / sp.sqrt(2 * sp.pi)

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return -sp.log(2)
        return None

    def _eval_evalf(self, prec):
        return sp.log(NormalCDF(self.args[0]))._eval_evalf(prec)

    def _latex(self, printer, exp=None):
        out = rf"\log \Phi\left({printer._print(self.args[0])}\right)"
        return rf"\left({out}\right)^{{{exp}}}" if exp else out


def stable_log(Z: sp.Expr) -> sp.Expr:
    """``log Z`` with ``log Phi(x)`` as :class:`LogNormalCDF` (per piece of a ``Piecewise`` over labels)."""
    if isinstance(Z, sp.Piecewise):
        return sp.Piecewise(*[(stable_log(e), c) for e, c in Z.args])
    if isinstance(Z, NormalCDF):
        return LogNormalCDF(Z.args[0])
    return sp.expand_log(sp.log(Z), force=True)


# --------------------------------------------------------------------------- the output side
@dataclass
class OutputLaw:
    """The label law seen by the Bayes-optimal student: ``Z_out(y; omega, V)`` and its derivatives.

    ``values`` are the label values (``None`` for a continuous label, whose predictive law given
    ``omega`` is ``N(mean, variance)``: the numerics integrate ``y`` on Gauss-Hermite nodes of it).
    ``forms``/``offsets``/``extra``: where ``Z_out`` switches -- the label changes sign with the form
    ``forms[i] . h* + offsets[i]`` (a ``K``-vector of coefficients), blurred by ``extra[i]`` of noise
    variance on top of ``V`` -- for the quadrature's panel boundaries.
    """

    omega: list[sp.Symbol]
    V: sp.Matrix
    label: sp.Symbol
    values: tuple | None
    Z: sp.Expr
    log_z: sp.Expr
    g: list[sp.Expr]
    dg: list[list[sp.Expr]]
    forms: list[list[sp.Expr]] = field(default_factory=list)
    offsets: list[sp.Expr] = field(default_factory=list)
    extra: list[sp.Expr] = field(default_factory=list)
    mean: sp.Expr | None = None
    variance: sp.Expr | None = None
    description: str = ""
    noise_variance: sp.Expr | None = None


def _tex(expr) -> str:
    return sp.latex(expr, symbol_names=dict(LATEX_NAMES))


def continuous_label(model: Model) -> tuple[sp.Expr, sp.Expr, sp.Symbol]:
    """A continuous label read off the loss: ``(y, noise variance, the loss in (h, Y))``.

    The label is the part of the loss free of the student fields that carries the noise: the terms
    of a sum without ``h`` and with the noise symbols (``h* + sqrt(Delta) z`` in
    ``(h* + sqrt(Delta) z - h)^2 / 2``). Refused, with one line, when the loss has no such part (a
    noiseless target has no density) or the noise does not enter additively.
    """
    h, hs, noise = set(model.h), set(model.hstar), set(model.noise)
    loss = sp.sympify(model.loss)
    candidates = []
    for e in sp.preorder_traversal(loss):
        if isinstance(e, sp.Add):
            free = [t for t in e.args if not (t.free_symbols & h) and t.free_symbols & (hs | noise)]
            if free:
                candidates.append(sp.Add(*free))
    noisy = [c for c in candidates if c.free_symbols & noise]
    if not noisy:
        raise DeclarationError("channel: the label has no density (a continuous target without noise): Bayes-optimal "
                               "inference needs P(y | h*); add Gaussian noise sqrt(Delta)*z to the target, Delta > 0")
    y = noisy[0]
    if any(sp.simplify(c - y) != 0 for c in noisy[1:]):
        raise DeclarationError(f"channel: the loss holds several noisy targets ({noisy}); Bayes-optimal inference "
                               "reads one label")
    coeffs = [sp.diff(y, z) for z in model.noise if z in y.free_symbols]
    for c in coeffs:
        if c.free_symbols & (hs | noise):
            raise DeclarationError(f"channel: the noise enters the label {y} multiplied by {c}; Bayes-optimal "
                                   "inference reads an additive Gaussian noise y = g(h*) + sqrt(Delta) z")
    variance = sp.Add(*[c ** 2 for c in coeffs])
    Y = symbol("y", "y")
    in_label = loss.subs(y, Y)
    if in_label.free_symbols & (hs | noise):
        raise DeclarationError(f"channel: the loss depends on the teacher other than through the label {y}; "
                               "Bayes-optimal inference reads y = g(h*) + sqrt(Delta) z")
    return y, variance, in_label


def output_law(model: Model, K: int) -> OutputLaw:
    """The :class:`OutputLaw` of ``model``'s label (see the module docstring)."""
    hs = list(model.hstar)
    # named omega_k in code (a bare "omega" is the attention study's parameter name), spelled omega in LaTeX
    omega = [symbol(f"omega_{k + 1}", rf"\omega_{{{k + 1}}}" if K > 1 else r"\omega") for k in range(K)]
    V = symmetric_matrix("V", K)
    ch = model.channel
    if ch is not None:
        y = ch.label
        J = sp.Matrix([[sp.diff(u, s) for s in hs] for u in ch.forms])
        mean = list(J * sp.Matrix(omega))
        cov = J * V * J.T
        Z = ch.likelihood(y, mean, cov)
        # where Z switches: one entry per transition of the channel (a threshold of a form, or the
        # difference u_i - u_j of an argmax), centred where the form crosses its threshold
        forms, offsets, extra = [], [], []
        for centre, k, var in ch.transitions():
            row = J.row(k) if isinstance(k, int) else J.row(k[0]) - J.row(k[1])
            forms.append(list(row))
            offsets.append(-sp.sympify(centre))
            extra.append(sp.sympify(var))
        log_z = stable_log(Z)
        law = OutputLaw(omega, V, y, tuple(ch.values), Z, log_z, [], [], forms, offsets, extra,
                        description=ch.describe(_tex))
    else:
        ylab, var, _ = continuous_label(model)
        g0 = ylab.subs({z: 0 for z in model.noise})
        a = [sp.diff(g0, s) for s in hs]
        if any(sp.diff(ai, s) != 0 for ai in a for s in hs) or sp.simplify(g0.subs({s: 0 for s in hs})) != 0:
            raise DeclarationError(f"channel: the target {g0} is not linear in the teacher fields; Bayes-optimal "
                                   "inference of a continuous label reads y = a^T h* + sqrt(Delta) z (a nonlinear "
                                   "g(h*) would need Z_out as an integral over h*, which is not implemented)")
        y = symbol("y", "y")
        av = sp.Matrix(a)
        m = (av.T * sp.Matrix(omega))[0, 0]
        s2 = sp.expand((av.T * V * av)[0, 0] + var)
        Z = sp.exp(-(y - m) ** 2 / (2 * s2)) / sp.sqrt(2 * sp.pi * s2)
        log_z = -(y - m) ** 2 / (2 * s2) - sp.log(2 * sp.pi * s2) / 2
        desc = rf"y = {_tex(g0)} + \sqrt{{{_tex(var)}}}\, z, \quad z \sim \mathcal{{N}}(0, 1)"
        law = OutputLaw(omega, V, y, None, Z, log_z, [], [], mean=m, variance=s2, description=desc,
                        noise_variance=var)
    law.g = [sp.diff(law.log_z, w) for w in omega]
    law.dg = [[sp.diff(gk, w) for w in omega] for gk in law.g]
    return law


# --------------------------------------------------------------------------- the input side
@dataclass
class InputLaw:
    """The prior seen by the Bayes-optimal student: ``log Z_0(B, A)`` as terms quadratic in ``B``
    (:class:`~replica.symbolic.priors.QuadraticTerm`), or a :class:`~replica.symbolic.priors.Density`
    (``terms`` is ``None``; ``log_density`` its log, ``kinks`` where it is not smooth)."""

    prior: Prior
    B: list[sp.Symbol]
    A: sp.Matrix
    terms: list[QuadraticTerm] | None
    log_density: sp.Expr | None = None
    w: sp.Symbol | None = None
    kinks: list[sp.Expr] = field(default_factory=list)

    @cached_property
    def log_z0(self) -> sp.Expr | None:
        """``log Z_0(B, A)`` in closed form (``None`` for a density)."""
        if self.terms is None:
            return None
        Bm = sp.Matrix(self.B)
        return sp.log(sp.Add(*[sp.exp(t.exponent(Bm)) for t in self.terms]))

    @cached_property
    def f_a(self) -> list[sp.Expr] | None:
        """The posterior mean ``f_a = d log Z_0 / dB`` (closed form; ``None`` for a density)."""
        if self.log_z0 is None:
            return None
        return [_tidy(sp.diff(self.log_z0, b)) for b in self.B]


def _tidy(e: sp.Expr) -> sp.Expr:
    """A readable form of a small expression (``tanh(B)`` for a +-1 prior)."""
    if sp.count_ops(e) > 200:
        return e
    for form in (sp.simplify(e.rewrite(sp.tanh)), sp.simplify(e)):
        if sp.count_ops(form) < sp.count_ops(e):
            e = form
    return e


def input_law(model: Model, K: int) -> InputLaw:
    """The :class:`InputLaw` of ``model``'s prior for rows of ``K`` entries."""
    A = symmetric_matrix("qhat", K, r"\hat{q}")
    B = [symbol(f"B_{k + 1}", f"B_{{{k + 1}}}") for k in range(K)] if K > 1 else [symbol("B", "B")]
    prior = model.prior
    if isinstance(prior, Density):
        if K > 1:
            raise DeclarationError(f"prior: a density prior is integrated on a quadrature grid, for one teacher field; "
                                   f"this model has r_t = {K} (declare a Gaussian, Rademacher or GaussBernoulli prior)")
        return InputLaw(prior, B, A, None, log_density=prior.log_density(), w=prior.w, kinks=prior.kinks)
    return InputLaw(prior, B, A, prior.terms(A))


# --------------------------------------------------------------------------- the derivation
class BayesDerivation:
    """The Bayes-optimal free entropy of ``model`` and its saddle point (see the module docstring).

    Attributes: :attr:`output` (:class:`OutputLaw`), :attr:`input` (:class:`InputLaw`), :attr:`K` (teacher
    fields per token), :attr:`rho` (``E w*^2`` per entry, ``None`` for a density: numeric),
    :attr:`q`/:attr:`qhat` (symmetric ``K x K`` matrices of symbols), :attr:`test_loss` (the declared
    loss in the student fields and the label), :attr:`parameters` (the model's, in order).
    """

    def __init__(self, model: Model):
        self.model = model
        restore_names(model.spellings)  # its own declaration's spellings, whatever was declared since
        _check(model)
        self.K = model.r_t
        self.q = symmetric_matrix("q", self.K)
        self.qhat = symmetric_matrix("qhat", self.K, r"\hat{q}")
        self.alpha = ALPHA
        self.parameters = model.parameter_symbols

    @cached_property
    def output(self) -> OutputLaw:
        """The label law (``Z_out``, ``g_out``, ``d g_out``)."""
        return output_law(self.model, self.K)

    @cached_property
    def input(self) -> InputLaw:
        """The prior (``Z_0`` terms or a density)."""
        return input_law(self.model, self.K)

    @cached_property
    def rho(self) -> sp.Expr | None:
        """``E_P0[w^2]`` (``None`` for a density prior: computed numerically)."""
        if isinstance(self.model.prior, Density):
            return None
        return sp.simplify(self.model.prior.second_moment())

    @cached_property
    def test_loss(self) -> sp.Expr:
        """The declared loss in the student fields ``h`` and the label symbol."""
        if self.model.channel is not None:
            return sp.sympify(self.model.loss)
        _, _, in_label = continuous_label(self.model)
        return in_label.subs(symbol("y", "y"), self.output.label)

    @property
    def noise_parameters(self) -> list[sp.Symbol]:
        """Parameters of a continuous label's noise variance (refused at 0: no density)."""
        v = self.output.noise_variance
        return sorted(v.free_symbols, key=str) if v is not None else []


def _check(model: Model) -> None:
    """Refuse declarations without a Bayes-optimal free entropy of the GLM form (module docstring)."""
    if model.target is not None or model.student is not None:
        raise DeclarationError("bayes: the label of this model is T(h*) x, a mix of the d-dimensional tokens x "
                               "themselves: given the teacher's fields alone it has no law, so the Bayes-optimal "
                               "free entropy is not of the Z_out(y | h*) form (docs/how-to/bayes_optimal.md)")
    if model.L != 1:
        raise DeclarationError(f"bayes: Bayes-optimal inference reads a label law of one token's teacher fields; "
                               f"this model has L = {model.L} tokens")
    data = model.data
    if data.has_clusters or len(data.atoms) != 1:
        raise DeclarationError("bayes: Bayes-optimal inference needs isotropic tokens (one spectral atom, no clusters)")
    atom = data.atoms[0]
    if any(not sp.sympify(p).is_zero for p in atom.pi):
        raise DeclarationError("bayes: Bayes-optimal inference needs tokens without positional encodings")
    if any(sp.simplify(sp.sympify(g) - 1) != 0 for g in atom.gamma):
        raise DeclarationError(f"bayes: Bayes-optimal inference needs tokens of unit variance, got {atom.gamma}")
    if model.r_t < 1:
        raise DeclarationError("bayes: the model has no teacher")

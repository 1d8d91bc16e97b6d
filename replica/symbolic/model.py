"""Declarative model: the learning problem of docs/explanation/theory.md §1 written in sympy.

A :class:`Model` says *what* is learnt, never *how* the equations look:

* the student fields ``h`` (``L x r``) and teacher fields ``h*`` (``L x r_t``), sympy
  matrices of symbols (see :func:`replica.symbolic.symbols.fields`);
* either a student score map ``S(h)`` and target map ``T(h*)`` (both ``L x L``), from
  which the per-sample loss ``l(h, h*) = 1/2 sum_{l,k} rho_bar_k (T - S)_{lk}^2`` is
  built, or directly a ``loss`` expression (e.g. a GLM);
* the token statistics (:class:`replica.symbolic.data.TokenStatistics`), the regularizer,
  the numeric parameters with defaults and domains;
* optional token symmetries (:class:`replica.symbolic.order_parameters.TokenReduction`) and
  branches: named sets of order-parameter families pinned to zero (invariant subspaces of the
  saddle-point equations), optionally the pair of branches whose free entropies cross
  (``transition``) and a baseline the test error is compared with (``baseline``);
* the observables it reports (:mod:`replica.symbolic.observables`; the test loss ``eps_g`` always);
* optionally a teacher *channel* (:mod:`replica.symbolic.channels`): a discrete label ``y`` whose law given
  the teacher fields enters the Gaussian measure; the loss is then written in ``h`` and ``y``;
* the teacher's *prior* (:mod:`replica.symbolic.priors`, default :class:`~replica.symbolic.priors.Gaussian`):
  the law of the teacher's weights, which Bayes-optimal inference (:mod:`replica.symbolic.bayes`) uses.

:class:`replica.symbolic.derivation.Derivation` turns it into potentials and saddle-point equations.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import sympy as sp

from ..interface.families import FREE, PINNABLE
from .channels import Channel
from .constraints import Constraint, holds, row_stochastic  # noqa: F401  (re-exported)
from .data import TokenStatistics
from .factors import Factor
from ..errors import DeclarationError, ParameterError
from .losses import Loss, analyse, as_loss, check_continuous, check_convex
from .observables import EntropicObservable, Observable, StateObservable, TestObservable, with_test_loss
from .order_parameters import OrderParameters, TokenReduction, check_families
from .permutations import SPECIALISED, UNSPECIALISED, UnitAnsatz, UnitBlocks, unit_blocks
from .priors import Prior, as_prior
from .regularizers import L2, Regularizer, SeparableRegularizer
from .symbols import DeclaredNames, check_field_count, declared_names
from ..validation import real


@dataclass
class Domain:
    """Closed interval ``[low, high]`` a numeric parameter must lie in (``None`` = unbounded)."""

    low: float | None = None
    high: float | None = None

    def contains(self, x: float) -> bool:
        """Whether ``value`` lies in the domain."""
        return (self.low is None or x >= self.low) and (self.high is None or x <= self.high)

    def describe(self) -> str:
        """The domain in words, for error messages (e.g. ``[0, 1]``)."""
        if self.low is not None and self.high is not None:
            return f"in [{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f">= {self.low:g}"
        if self.high is not None:
            return f"<= {self.high:g}"
        return "any real"


def _default_value(symbol: sp.Symbol, value: object) -> float:
    """A parameter default as a finite float (no strings, bools, NaN or infinities)."""
    if isinstance(value, sp.Basic) and value.is_number and value.is_real:  # sqrt(2), Rational(1, 3)
        value = float(value)
    try:
        return real(value, str(symbol))
    except ParameterError as exc:
        raise DeclarationError(f"parameters: default {exc}") from None


@dataclass
class Model:
    """A learning problem in the high-dimensional limit, declared in sympy.

    Parameters
    ----------
    name:
        Identifier (used for file names and on the command line).
    h, hstar:
        Field matrices ``L x r`` and ``L x r_t`` of symbols.
    data:
        Token statistics (the law ``nu``).
    regularizer:
        A :class:`~replica.symbolic.regularizers.Regularizer` of the weight rows ``w in R^r``.
    student, target:
        ``S(h)`` and ``T(h*)``, ``L x L`` sympy matrices (attention-type models).
    loss:
        Alternatively the per-sample loss ``l(h, h*)`` directly: a loss factor
        (:class:`~replica.symbolic.losses.SquareLoss`, :class:`~replica.symbolic.losses.LogisticLoss`,
        :class:`~replica.symbolic.losses.HingeLoss`, which say what they are: their exact prox, the
        simulator's exact solvers) or any sympy expression (:attr:`loss_factor` is then that factor where
        the expression is exactly one of them, :func:`~replica.symbolic.losses.as_loss`, else the generic
        :class:`~replica.symbolic.losses.Loss`). After construction ``loss`` is always the expression.
    noise:
        Extra standard-Gaussian symbols appearing in ``loss`` (label noise, ...).
    channel:
        A teacher channel (:mod:`replica.symbolic.channels`, e.g. ``Sign(hstar[0])``): the label ``y`` is a
        discrete function of linear forms of ``hstar`` whose law enters the Gaussian measure (the
        ``Z_out`` form); ``loss`` and the test observables are then written in ``h`` and the
        channel's ``label``, not in ``hstar``. ``None``: a continuous label written into the loss.
    parameters:
        Numeric parameters and their defaults: ``{symbol: value}`` or
        ``{matrix_of_symbols: nested list}``.
    domains:
        ``{symbol: Domain}``; values outside raise :class:`~replica.errors.ParameterError`.
    constraints:
        Further :class:`Constraint` relations between parameters (e.g. :func:`row_stochastic`).
    reduction:
        Token symmetries reducing the number of free order parameters.
    branches:
        ``{name: families pinned to 0}``, e.g. ``{"semantic": ("m",), "positional": ("theta",)}``:
        invariant subspaces of the saddle-point equations (the code generator derives the
        sign-flip symmetries that make them so, :mod:`replica.symbolic.symmetries`). A branch whose pinned
        families contain another's is where that one *merges* (e.g. ``agnostic`` pins both). Pinning
        a family the model does not have (``m`` without positional encodings) pins nothing: it is
        zero by construction there.
    transition:
        ``(high, low)``: two branches whose free entropies cross in ``alpha``, ``high`` the one
        that wins at large ``alpha`` -- the pair :mod:`replica.phase` compares by default.
    baseline:
        A baseline the test error crosses (``alpha_l``): ``"linear"``, the best predictor linear
        in the tokens (needs ``student``/``target``, :func:`replica.numeric.baselines.linear_baseline`).
    observables:
        Quantities reported at every fixed point besides the test loss ``eps_g``
        (:class:`~replica.symbolic.observables.TestObservable`, :class:`~replica.symbolic.observables.EntropicObservable`).
    description:
        One line shown by ``replica models``.
    families:
        The order-parameter families (``q, V, m, theta``); default: derived from the declaration
        (``q, V`` always, ``m`` when the data have positional encodings or cluster means,
        ``theta`` with a teacher). After construction always the tuple in use.
    unit_symmetry:
        Exchangeable units (columns of ``h`` the loss and the penalty cannot tell apart: hidden
        units, heads; :mod:`replica.symbolic.permutations`) are detected from the declaration. By
        default (``None``) such a model is derived in the unit-symmetric ansatz (one order parameter
        per orbit of entries: diagonal and off-diagonal values) with the branches ``specialised``
        (student unit ``k`` paired with teacher unit ``k``, where the teacher's units are exchangeable
        too) and ``unspecialised`` (every student unit alike to every teacher unit), and the
        transition between them. ``False``: the full matrices, no unit branches. ``True``: the
        ansatz, and an error if no units are exchangeable.
    prior:
        The law of every entry of the teacher's weights (:mod:`replica.symbolic.priors`:
        :class:`~replica.symbolic.priors.Gaussian` (default), ``Rademacher()``, ``GaussBernoulli(rho)``, or a
        sympy density of one symbol). Bayes-optimal inference (``replica solve --bayes``) integrates it; the
        empirical-risk equations use the teacher's second moment only and accept a prior whose second
        moment is 1 with an l2 penalty (or the Gaussian one with any penalty).
    """

    name: str
    h: sp.Matrix
    hstar: sp.Matrix
    data: TokenStatistics
    regularizer: Regularizer
    student: sp.Matrix | None = None
    target: sp.Matrix | None = None
    loss: sp.Expr | None = None
    noise: Sequence[sp.Symbol] = ()
    parameters: Mapping = field(default_factory=dict)
    domains: Mapping[sp.Symbol, Domain] = field(default_factory=dict)
    reduction: TokenReduction | None = None
    branches: Mapping[str, Sequence[str]] = field(default_factory=dict)
    constraints: Sequence[Constraint] = ()
    description: str = ""
    transition: tuple[str, str] | None = None
    baseline: str | None = None
    observables: Sequence[Observable] = ()
    channel: Channel | None = None
    families: Sequence[str] | None = None
    unit_symmetry: bool | None = None
    #: the loss as a factor (:mod:`replica.symbolic.factors`): what was declared, or the generic one
    loss_factor: Loss | None = field(default=None, init=False, repr=False, compare=False)
    prior: Prior | sp.Expr | None = None
    #: the symbols' LaTeX spellings and parameter descriptions when the model was declared
    #: (:func:`replica.symbolic.symbols.declared_names`); its derivations make them current again
    spellings: DeclaredNames | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_factor_roles()
        if isinstance(self.loss, Loss):
            self.loss_factor, self.loss = self.loss, self.loss.expression()
        self.h = sp.Matrix(self.h)
        self.hstar = sp.Matrix(self.hstar)
        self.noise = tuple(self.noise)
        self._defaults = self._flatten_parameters(self.parameters)
        self.prior = as_prior(self.prior)
        self.domains = {**self._implied_domains(), **dict(self.domains)}
        extra = self.data.label_constraints() if self.data is not None else []
        if extra:  # a label law in the parameters must stay a probability law
            self.constraints = tuple(self.constraints) + tuple(extra)
        self.families = check_families(self.families if self.families is not None else self._implied_families())
        self.validate()
        if self.loss is None:
            self.loss = self._square_loss()
        if self.loss_factor is None:
            self.loss_factor = as_loss(self.loss, list(self.h), self.channel.label if self.channel is not None else None)
        self._unit_symmetry()   # before the observables: a state observable is written in the ansatz's symbols
        self.observables = with_test_loss(self.loss, tuple(self.observables))
        self._validate_observables()
        self._check_nonsmooth()
        self.spellings = declared_names()

    def _unit_symmetry(self) -> None:
        """Exchangeable units (:mod:`replica.symbolic.permutations`): the unit-symmetric ansatz and its
        branches, unless the declaration asks for the full matrices (``unit_symmetry=False``)."""
        self.unit_blocks = (unit_blocks(self) if self.r > 1 or self.r_t > 1
                            else UnitBlocks(tuple((k,) for k in range(self.r)), tuple((k,) for k in range(self.r_t))))
        self.unit_ansatz = None
        if self.unit_symmetry and not self.unit_blocks.permutable:
            raise DeclarationError("unit_symmetry: no two student units (columns of h) are exchangeable: the loss "
                                   "or the penalty tells them apart")
        if self.unit_blocks.permutable and self.unit_symmetry is not False:
            names = self.unit_blocks.branches
            self.unit_ansatz = UnitAnsatz(self.unit_blocks, names[0])
            clash = [b for b in names if b in self.branches]
            if clash:
                raise DeclarationError(f"branches: {clash[0]!r} is the name of a unit-symmetric branch; rename yours")
            self.branches = {**dict(self.branches), **{b: () for b in names}}
            if self.transition is None and len(names) == 2:
                self.transition = (SPECIALISED, UNSPECIALISED)
        if self.transition is not None and any(b not in self.branches for b in self.transition):
            raise DeclarationError(f"transition: need two different declared branches (high, low), "
                                   f"got {self.transition!r}")

    @property
    def unit_branches(self) -> tuple[str, ...]:
        """The unit-symmetric branches of the model's ansatz (empty without exchangeable units)."""
        return self.unit_blocks.branches if self.unit_ansatz is not None else ()

    def order_parameters(self) -> OrderParameters:
        """The model's free order parameters (token reduction, families and unit ansatz applied)."""
        return OrderParameters(self.L, self.r, self.r_t, self.reduction, slots=self.data.slot_labels,
                               families=self.families, units=self.unit_ansatz)

    def _implied_families(self) -> tuple[str, ...]:
        """``q, V`` always; ``m`` when some atom projects on a positional encoding or cluster mean
        (else ``m = W^T p / sqrt(d)`` is zero by construction); ``theta`` when there is a teacher."""
        fams = ["q", "V"]
        if self.data is not None and any(not sp.sympify(p).is_zero for a in self.data.atoms for p in a.pi):
            fams.append("m")
        if self.hstar.shape[1] > 0:
            fams.append("theta")
        return tuple(fams)

    # ------------------------------------------------------------ properties
    @property
    def L(self) -> int:
        """Number of tokens ``L``."""
        return self.h.shape[0]

    @property
    def r(self) -> int:
        """Student rank ``r`` (columns of ``W``)."""
        return self.h.shape[1]

    @property
    def r_t(self) -> int:
        """Teacher rank ``r_t`` (columns of ``Q*``)."""
        return self.hstar.shape[1]

    @property
    def defaults(self) -> dict[sp.Symbol, float]:
        """Default value of every scalar parameter symbol (matrix parameters flattened)."""
        return dict(self._defaults)

    @property
    def parameter_symbols(self) -> list[sp.Symbol]:
        """The model's numeric parameters (``ω``, ``λ``, ``σ``, ``A`` entries, ...)."""
        return list(self._defaults)

    # ------------------------------------------------------------ validation
    @staticmethod
    def _flatten_parameters(params: Mapping) -> dict[sp.Symbol, float]:
        out: dict[sp.Symbol, float] = {}
        for key, value in params.items():
            if isinstance(key, sp.MatrixBase):
                arr = np.asarray(value, dtype=object)
                if arr.shape != key.shape:
                    raise DeclarationError(
                        f"parameters: default for the {key.shape[0]}x{key.shape[1]} matrix parameter "
                        f"has shape {arr.shape}")
                for s, v in zip(key, arr.ravel()):
                    out[s] = _default_value(s, v)
            elif isinstance(key, sp.Symbol):
                out[key] = _default_value(key, value)
            else:
                raise DeclarationError(f"parameters: keys must be sympy symbols or matrices, got {key!r}")
        return out

    def validate(self) -> None:
        """Check shapes and symbols; raise :class:`DeclarationError` naming the problem."""
        if not isinstance(self.name, str) or not self.name.isidentifier():
            # the name becomes file names (exports, the generated module, the compiled unit) and a
            # command-line word: "../x" wrote outside the cache, "a/b" failed with an Errno
            raise DeclarationError(f"name: {self.name!r} must be a Python identifier (letters, digits and "
                                   "underscores, not starting with a digit), e.g. 'my_ridge'")
        L, r, r_t = self.L, self.r, self.r_t
        check_field_count(L, r, "h")
        check_field_count(L, r_t, "hstar")
        if self.hstar.shape[0] != L:
            raise DeclarationError(f"hstar: needs L={L} rows like h, got {self.hstar.shape[0]}")
        if self.data.L != L:
            raise DeclarationError(f"data: describes {self.data.L} tokens but the fields have L={L}")
        for M, nm in ((self.h, "h"), (self.hstar, "hstar")):
            if not all(isinstance(e, sp.Symbol) for e in M):
                raise DeclarationError(f"{nm}: every entry must be a distinct sympy Symbol")
        if self.loss is None:
            if self.student is None or self.target is None:
                raise DeclarationError("model: give either loss, or both student S(h) and target T(hstar)")
            self.student, self.target = sp.Matrix(self.student), sp.Matrix(self.target)
            if self.student.shape != (L, L):
                raise DeclarationError(f"student: S(h) must be L x L = {L}x{L}, got {self.student.shape}")
            if self.target.shape != (L, L):
                raise DeclarationError(f"target: T(hstar) must be L x L = {L}x{L}, got {self.target.shape}")
            extra = self.student.free_symbols - set(self.h) - set(self._defaults)
            if extra:
                raise DeclarationError(f"student: S(h) uses undeclared symbols {sorted(map(str, extra))}")
            extra = self.target.free_symbols - set(self.hstar) - set(self._defaults)
            if extra:
                raise DeclarationError(f"target: T(hstar) uses undeclared symbols {sorted(map(str, extra))}")
        else:
            self.loss = sp.sympify(self.loss)
            extra = self.loss.free_symbols - self._integrand_symbols()
            if extra:
                if self.channel is not None and extra & set(self.hstar):
                    raise DeclarationError(
                        f"loss: uses the teacher fields {sorted(map(str, extra & set(self.hstar)))}; with a channel "
                        f"the teacher enters through the label: write the loss in h and {self.channel.label}")
                raise DeclarationError(f"loss: uses undeclared symbols {sorted(map(str, extra))}")
            if not (self.loss.free_symbols & set(self.h)):
                raise DeclarationError("loss: does not depend on the student fields h")
        if self.channel is not None:
            if not isinstance(self.channel, Channel):
                raise DeclarationError(f"channel: {self.channel!r} is not a replica.symbolic.channels.Channel")
            if self.student is not None:
                raise DeclarationError("channel: give the loss in h and the label (a channel replaces the target T)")
            self.channel.validate(list(self.hstar), self._defaults)
            if self.channel.label in set(self.h) | set(self.hstar) | set(self.noise) | set(self._defaults):
                raise DeclarationError(f"channel: label symbol {self.channel.label} is already used by the model")
        self.prior.validate(self._defaults)
        self.regularizer.validate(r)
        reg_free = self.regularizer.parameters() - set(self._defaults)
        if reg_free:
            raise DeclarationError(f"regularizer: uses undeclared parameters {sorted(map(str, reg_free))}")
        for sym, dom in self.domains.items():
            if sym not in self._defaults:
                raise DeclarationError(f"domains: {sym} is not a declared parameter")
            if not dom.contains(self._defaults[sym]):
                raise DeclarationError(f"parameters: default {sym}={self._defaults[sym]} is not {dom.describe()}")
        # Non-negative regularization strength, also for defaults of symbolic lambdas.
        if isinstance(self.regularizer, L2):
            for x in self.regularizer.matrix(r).diagonal():
                val = sp.sympify(x).subs(self._defaults)
                if val.is_number and float(val) < 0:
                    raise DeclarationError(f"regularizer: lambda={float(val)} is negative (need lambda >= 0)")
        if self.reduction is not None:
            self.reduction.validate(self.data.S, "slot" if self.data.has_clusters else "token")
            for fam in ("q", "V"):
                c = self.reduction.coefficients.get(fam)
                if c is not None and any(ci <= 0 for ci in c):
                    raise DeclarationError(
                        f"reduction[{fam!r}]: coefficients must be positive ({fam} is positive definite)")
        for c in self.constraints:
            if not isinstance(c.relation, sp.core.relational.Relational):
                raise DeclarationError(f"constraints: {c.relation} is not a sympy relation")
            extra = c.relation.free_symbols - set(self._defaults)
            if extra:
                raise DeclarationError(f"constraints: uses undeclared symbols {sorted(map(str, extra))}")
            if not holds(c.relation, self._defaults):
                raise DeclarationError(f"parameters: default {c.parameter}: {c.message}")
        pinnable = list(PINNABLE)
        for bname, pinned in self.branches.items():
            if not bname.isidentifier() or bname == FREE:
                raise DeclarationError(f"branches: {bname!r} must be an identifier other than 'free'")
            if isinstance(pinned, str) or not pinned:
                raise DeclarationError(f"branches[{bname!r}]: give a non-empty tuple of families, e.g. ('m',)")
            for fam in pinned:
                if fam not in pinnable:
                    raise DeclarationError(
                        f"branches[{bname!r}]: can only pin {pinnable} to zero, got {fam!r}")
        if self.transition is not None:
            t = tuple(self.transition)
            # the unit-symmetric branches are added once the loss is known (_unit_symmetry checks them)
            known = set(self.branches) | {SPECIALISED, UNSPECIALISED}
            if len(t) != 2 or t[0] == t[1] or any(b not in known for b in t):
                raise DeclarationError(f"transition: need two different declared branches (high, low), got {t!r}")
            self.transition = t
        if self.baseline not in (None, "linear"):
            raise DeclarationError(f"baseline: only 'linear' is known, got {self.baseline!r}")
        if self.baseline == "linear" and self.target is None:
            raise DeclarationError("baseline: 'linear' needs a target T(h*) (student/target models)")
        if self.target is not None and self.data is not None:
            for g in self.data.atoms:
                for x in g.gamma:
                    val = sp.sympify(x).subs(self._defaults)
                    if val.is_number and float(val) < 0:
                        raise DeclarationError(f"data: covariance eigenvalue {float(val)} < 0 is not PSD")

    def _integrand_symbols(self) -> set[sp.Symbol]:
        """What the loss and the test observables may depend on: ``h``, the teacher (``hstar`` or,
        with a channel, its label), the noise, the parameters and the cluster labels."""
        teacher = {self.channel.label} if self.channel is not None else set(self.hstar)
        return set(self.h) | teacher | set(self.noise) | set(self._defaults) | set(self.data.label_symbols)

    def _implied_domains(self) -> dict[sp.Symbol, Domain]:
        """Domains implied by the factors: a penalty or channel parameter that is a bare symbol
        (``L1(lam1)``: ``lam1 >= 0``; ``Probit(u, Delta)``: ``Delta >= 0``; ``LabelFlip(.., p)``:
        ``p in [0, 1]``), so that a bad value is refused before solving."""
        out: dict[sp.Symbol, Domain] = {}
        for sym, (low, high) in getattr(self.regularizer, "implied_domains", lambda: {})().items():
            out[sym] = Domain(low, high)
        for sym, (low, high) in self.prior.implied_domains().items():
            out[sym] = Domain(low, high)
        ch = self.channel
        while ch is not None:
            for attr, dom in (("delta", Domain(0, None)), ("p", Domain(0, 1))):
                val = getattr(ch, attr, None)
                if isinstance(val, sp.Symbol):
                    out[val] = dom
            ch = getattr(ch, "base", None)
        return {k: v for k, v in out.items() if k in self._defaults}

    def _check_nonsmooth(self) -> None:
        """Non-smooth losses and penalties: piecewise structure, continuity, convexity (one-line errors)."""
        teacher = set(self.hstar) | set(self.noise)
        discrete = set(self.data.label_symbols) | ({self.channel.label} if self.channel is not None else set())
        labels = {self.channel.label: list(self.channel.values)} if self.channel is not None else {}
        for cond in self.data.label_symbols:
            labels[cond] = [0, 1]
        if self.L * self.r == 1:
            pw = analyse(self.loss, self.h[0, 0], what="loss", teacher=teacher, discrete=discrete)
            if pw is not None:
                check_continuous(pw, self._defaults, labels, what="loss")
        else:
            from .losses import is_nonsmooth
            if is_nonsmooth(self.loss, set(self.h)):
                raise DeclarationError(
                    f"loss: non-smooth losses (Max, Min, Abs, Heaviside, sign, Piecewise of h) need a one-dimensional "
                    f"prox; this model's prox has dimension L r = {self.L * self.r}")
            analyse(self.loss, self.h[0, 0], what="loss", teacher=teacher, discrete=discrete)
        reg = self.regularizer
        if isinstance(reg, SeparableRegularizer) and len(reg.w) == 1:
            check_convex(reg.expr, reg.w[0], self._defaults, "regularizer")

    def order_parameter_symbols(self) -> set[sp.Symbol]:
        """The order-parameter and conjugate symbols of this model (for state observables)."""
        ops = self.order_parameters()
        return set(ops.order_symbols()) | set(ops.conjugate_symbols())

    def state_aliases(self) -> dict[sp.Symbol, sp.Symbol]:
        """Family names for the order parameters of a family with a single scalar (``q`` for ``q_1``
        of a one-token, rank-one model), as a state observable may write them."""
        ops = self.order_parameters()
        out = {}
        for op in ops.order_parameters() + ops.conjugates():
            same = [o for o in ops.order_parameters() + ops.conjugates() if o.family == op.family]
            if len(same) == 1 and len(op.symbols) == 1:
                out[sp.Symbol(op.family, real=True)] = op.symbols[0]
        return out

    def state_expression(self, expr: sp.Expr) -> sp.Expr:
        """A state observable's expression in the order-parameter symbols (aliases resolved)."""
        return sp.sympify(expr).subs(self.state_aliases())

    def _validate_observables(self) -> None:
        allowed = self._integrand_symbols()
        for o in self.observables:
            expr = sp.sympify(o.expr)
            if isinstance(o, TestObservable):
                extra = expr.free_symbols - allowed
                if extra:
                    who = (f"h, the label {self.channel.label}" if self.channel is not None else "h, hstar")
                    raise DeclarationError(f"observables[{o.name!r}]: uses {sorted(map(str, extra))}; a test-point "
                                           f"observable is a function of {who}, noise and the parameters")
            elif isinstance(o, StateObservable):
                extra = self.state_expression(expr).free_symbols - self.order_parameter_symbols() - set(self._defaults)
                if extra:
                    raise DeclarationError(f"observables[{o.name!r}]: uses {sorted(map(str, extra))}; a state "
                                           "observable is a function of the order parameters (q, V, m, theta and "
                                           "conjugates, by their names) and the parameters")
            elif isinstance(o, EntropicObservable):
                if len(o.w) != self.r:
                    raise DeclarationError(f"observables[{o.name!r}]: w needs r={self.r} symbols, got {len(o.w)}")
                extra = expr.free_symbols - set(o.w) - set(self._defaults)
                if extra:
                    raise DeclarationError(f"observables[{o.name!r}]: uses {sorted(map(str, extra))}; an entropic "
                                           "observable is a function of the weight row w and the parameters")
                if isinstance(self.regularizer, L2):
                    raise DeclarationError(
                        f"observables[{o.name!r}]: an entropic observable needs the entropic prox, which an l2 "
                        "penalty does not use (its potential is closed form); declare the penalty as a "
                        "SeparableRegularizer")
            else:
                raise DeclarationError(f"observables: {o!r} has an unknown kind")

    # ------------------------------------------------------------ the loss
    #: the role of the factor each argument takes (:mod:`replica.symbolic.factors`)
    _FACTOR_ROLES = {"loss": "loss", "regularizer": "penalty", "channel": "channel", "data": "data law"}

    def _check_factor_roles(self) -> None:
        """A factor given as another role's argument (a penalty as the loss, ...) is refused in one line
        naming the argument, before anything reads it."""
        for arg, role in self._FACTOR_ROLES.items():
            given = getattr(self, arg)
            if isinstance(given, Factor) and given.role != role:
                raise DeclarationError(f"{arg}: {type(given).__name__} is a {given.role} factor, not a {role}")

    def _square_loss(self) -> sp.Expr:
        """``l(h, h*) = 1/2 sum_{l,k} rho_bar_k (T(h*) - S(h))_{lk}^2`` (docs/explanation/theory.md §1).

        With token clusters ``rho_bar_k = sum_c e_{kc} rho_bar_{kc}`` is that of token ``k``'s
        cluster (one-hot label indicators ``e``): ``|x_k|^2 / d -> tr Sigma_{k c_k} / d``, the
        O(1)-norm means and encodings adding nothing as ``d -> infinity``.
        """
        L = self.L
        D = self.target - self.student
        return sp.Rational(1, 2) * sp.Add(*[self.data.token_rho_bar(k) * D[l, k] ** 2
                                            for l in range(L) for k in range(L)])

    def pinned(self, branch: str | None) -> tuple[str, ...]:
        """Families pinned to zero on ``branch`` (``None`` or ``"free"``: nothing pinned)."""
        if branch in (None, FREE):
            return ()
        if branch not in self.branches:
            raise ParameterError("branch", 
                f"unknown branch {branch!r} for model {self.name}; known: {['free', *self.branches]}")
        return tuple(self.branches[branch])

"""The saddle point as a paper writes it: a presentation layer computed from a :class:`Derivation`.

The derivation's equations (:attr:`Derivation.saddle_point`) are what the solver runs: stationarity
of ``Phi`` with the energetic side as envelope-theorem integrands ``dF/dx`` at the prox. A theorist
writes the same fixed point differently, and this module computes that form from the derivation
(never typed per model), as sympy objects that :mod:`replica.symbolic.latex` prints and the tests evaluate:

* the prox / ``f_out`` form of the energetic side, token by token: ``f_a = V_a^{-1}(hhat_a - omega_a)``,
  ``qhat_a = alpha E[f_a^2]``, ``mhat_a = alpha E[f_a]``, ``Vhat_a = -alpha E[d_omega f_a]`` (a convex
  loss: ``f`` is Lipschitz, Gaussian integration by parts applies) or its first-order form
  ``Vhat_a = -alpha E[f_a (omega_a - m_a)] / q_a + thetahat_a theta_a / q_a`` (a non-convex loss, whose
  prox jumps), ``thetahat_a = alpha E[f_a (h*_a - theta_a (omega_a - m_a)/q_a)] / (rho_a - theta_a^2/q_a)``;
  with a label channel the Aubin et al. (2020) form ``E_xi sum_y W ...``, ``thetahat = alpha E_xi sum_y
  d_mu Z f``;
* the aggregation of the per-token conjugates onto the reduced ones (``qhat = qhat_1 + qhat_2``,
  ``mhat = mhat_1 - mhat_2``), read off the model's token reduction;
* closed forms where the loss or the penalty admits them: a loss quadratic in ``h`` (the Moreau
  envelope and its Gaussian average done symbolically: ``Vhat = alpha / (1 + V)`` for the square
  loss), a piecewise-linear convex loss (the prox piece by piece: the hinge's three pieces), an l1
  penalty on a centred field (soft thresholding averaged in erfc form), the l2 penalty (the
  derivation's own closed form).

Every identity between this form and the derivation is checked in tests/test_presentation.py
(symbolically where it holds pointwise, by quadrature where it holds in expectation), not assumed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import sympy as sp

from .derivation import Derivation, Equation
from .losses import analyse, is_convex_piecewise
from .potentials import GaussianMoreauEnvelope, gaussian_symbols, prox_center_symbols
from .regularizers import SeparableRegularizer
from .symbols import symbol


class Mean(sp.Function):
    """``E[expr]`` over the Gaussians of the energetic average (kept unevaluated, for display
    and for tests that evaluate the integrand on a rule)."""

    nargs = 1


class LabelMean(sp.Function):
    """``E_xi sum_y [expr]`` over the student's Gaussians and the label values (channel models:
    ``expr`` carries the label law ``W`` or its derivative)."""

    nargs = 1


def _tok(name: str, tex: str, a: int, L: int) -> sp.Symbol:
    """A per-token display symbol (no index when there is one token)."""
    # the token count in the name: one process may present models with different L
    return symbol(f"{name}_tok{a + 1}of{L}", tex if L == 1 else f"{tex}_{{{a + 1}}}")


@dataclass
class TokenSymbols:
    """Display symbols of one token's prox quantities and order parameters."""

    f: sp.Symbol
    hhat: sp.Symbol
    omega: sp.Symbol
    hstar: sp.Symbol | None
    xi: sp.Symbol
    eta: sp.Symbol | None
    q: sp.Expr
    V: sp.Expr
    m: sp.Expr
    theta: sp.Expr
    rho: sp.Expr
    qhat: sp.Symbol
    Vhat: sp.Symbol
    mhat: sp.Symbol
    thetahat: sp.Symbol
    dfdomega: sp.Symbol


#: the scale of the soft-threshold field (l1 penalty): s^2 its variance
THRESHOLD_SCALE = symbol("s_threshold", "s", positive=True)
#: label-law display symbols (channel models)
W = symbol("W_law", r"W(y \mid \xi)")
DW = symbol("dW_law", r"\partial_{\mu} Z(y \mid \mu, \kappa)")
MU = symbol("mu_teacher", r"\mu")
KAPPA = symbol("kappa_teacher", r"\kappa")


@dataclass
class FieldForm:
    """The energetic side in prox / ``f_out`` form (scalar fields per token, ``r = r_t = 1``).

    ``equations``: per-token conjugate symbol -> right-hand side (sympy with :class:`Mean` or
    :class:`LabelMean`); ``stein``: the ``Vhat`` equations in the Gaussian-integration-by-parts form
    ``-alpha E[d_omega f]`` (only for convex losses; ``None`` otherwise); ``aggregation``: reduced
    conjugate -> combination of the per-token ones.
    """

    tokens: list[TokenSymbols]
    equations: list[Equation]
    stein: list[Equation] | None
    aggregation: list[Equation]
    channel: bool
    convex: bool


@dataclass
class ClosedForms:
    """Closed forms found for this model (each ``None`` where the loss / penalty admits none)."""

    prox: sp.Expr | None = None            # hhat as a function of omega (and y / h*, V)
    f: sp.Expr | None = None               # f = (hhat - omega) / V
    dfdomega: sp.Expr | None = None        # d_omega f (convex, scalar): -l''/(1 + V l'') or piecewise
    stationarity: sp.Expr | None = None    # f = -l'(hhat) (smooth scalar loss)
    psi_y: sp.Expr | None = None           # the energetic potential (quadratic loss)
    energetic: list[Equation] = field(default_factory=list)   # conjugates in closed form
    entropic: list[Equation] = field(default_factory=list)    # order parameters in closed form
    entropic_kind: str = ""                # "l2", "l1", ""
    threshold_variance: sp.Expr | None = None  # s^2 of the soft-threshold field (l1)
    threshold: sp.Expr | None = None       # the l1 weight: hat w = sign(b)(|b| - threshold)_+ / curvature
    curvature: sp.Expr | None = None       # the quadratic coefficient of the entropic bracket (l1)


def gaussian_mean(expr: sp.Expr, gaussians: list[sp.Symbol]) -> sp.Expr:
    """``E[expr]`` for a polynomial in independent standard Gaussians (moments ``(k-1)!!``)."""
    poly = sp.Poly(sp.expand(expr), *gaussians)
    total = sp.Integer(0)
    for powers, coeff in poly.terms():
        mom = sp.Integer(1)
        for k in powers:
            mom *= 0 if k % 2 else sp.factorial2(k - 1)
        total += coeff * mom
    return total


class Presentation:
    """The field's notation for one derivation (see the module docstring)."""

    def __init__(self, derivation: Derivation):
        self.d = derivation
        self.m = derivation.model

    # ------------------------------------------------------------ structure
    @property
    def scalar_fields(self) -> bool:
        """One student and one teacher component per token (``r = r_t = 1``), no token clusters."""
        m = self.m
        return m.r == 1 and m.r_t == 1 and not m.data.has_clusters

    @cached_property
    def convex(self) -> bool:
        """Whether the loss is convex in the student fields (its prox is then unique and 1-Lipschitz):
        decides between the Stein form and the first-order form of ``Vhat``. Attention heads are not;
        a piecewise-smooth loss is when it is midpoint-convex on a grid bracketing its breakpoints
        (:func:`~replica.symbolic.losses.is_convex_piecewise`: a hinge, a Huber loss written as
        ``Piecewise``); a smooth loss is when its Hessian in ``h`` is positive semi-definite on 40
        sampled points (fields ~ N(0, 4), labels and noise drawn, defaults)."""
        m = self.m
        if m.student is not None:
            return False
        hs = list(m.h)
        loss = m.loss
        defaults = dict(m.defaults)
        if self.d.energetic_potential.pieces is not None:
            labels = {m.channel.label: list(m.channel.values)} if m.channel is not None else {}
            # the loss's own pieces (the bracket's add the prox term, whose V and centre are not data)
            pieces = analyse(loss, hs[0], teacher=list(m.hstar) + list(m.noise), discrete=list(labels))
            return pieces is None or is_convex_piecewise(pieces, defaults, labels)
        others = sorted(loss.free_symbols - set(hs) - set(defaults), key=str)
        labels = {m.channel.label: m.channel.values} if m.channel is not None else {}
        Hf = sp.lambdify(hs + others + list(defaults), sp.hessian(loss, hs), "numpy")
        rng = np.random.default_rng(0)
        for _ in range(40):
            vals = [float(rng.choice(labels[s])) if s in labels else float(rng.normal()) for s in others]
            point = list(2 * rng.normal(size=len(hs))) + vals + [float(v) for v in defaults.values()]
            if np.linalg.eigvalsh(np.atleast_2d(np.asarray(Hf(*point), dtype=float))).min() < -1e-12:
                return False
        return True

    # ------------------------------------------------------------ field form
    @cached_property
    def field_form(self) -> FieldForm | None:
        """The prox / ``f_out`` form of the energetic side (scalar fields per token), or ``None``."""
        if not self.scalar_fields:
            return None
        d, m = self.d, self.m
        L = m.L
        ops = d.order_parameters
        centers = prox_center_symbols(m)
        xi, eta = gaussian_symbols(m)
        channel = m.channel is not None
        tokens = []
        for a in range(L):
            q, V, mm, th = (ops.slot(f, a)[0, 0] for f in ("q", "V", "m", "theta"))
            tokens.append(TokenSymbols(
                f=_tok("f", "f", a, L), hhat=_tok("hhat", r"\hat h", a, L),
                omega=centers[a, 0], hstar=None if channel else m.hstar[a, 0], xi=xi[a, 0],
                eta=None if channel else eta[a, 0], q=q, V=V, m=mm, theta=th,
                rho=m.data.token_rho(a, 1)[0, 0],
                qhat=_tok("qhat", r"\hat q", a, L), Vhat=_tok("Vhat", r"\hat V", a, L),
                mhat=_tok("mhat", r"\hat m", a, L), thetahat=_tok("thetahat", r"\hat\theta", a, L),
                dfdomega=_tok("dfdomega", r"\partial_{\omega} f", a, L)))
        al = d.alpha
        eqs, stein = [], []
        has_m = "m" in m.families  # without it m = 0 and there is no mhat equation
        for t in tokens:
            if channel:
                eqs += [Equation(t.qhat, al * LabelMean(W * t.f ** 2)),
                        *([Equation(t.mhat, al * LabelMean(W * t.f))] if has_m else []),
                        Equation(t.thetahat, al * LabelMean(DW * t.f)),
                        Equation(t.Vhat, -al * LabelMean(W * t.f * t.xi) / sp.sqrt(t.q) + t.thetahat * t.theta / t.q)]
                stein.append(Equation(t.Vhat, -al * LabelMean(W * t.dfdomega)))
            else:
                kappa = t.rho - t.theta ** 2 / t.q
                eqs += [Equation(t.qhat, al * Mean(t.f ** 2)),
                        *([Equation(t.mhat, al * Mean(t.f))] if has_m else []),
                        Equation(t.thetahat, al * Mean(t.f * (t.hstar - t.theta * (t.omega - t.m) / t.q)) / kappa),
                        Equation(t.Vhat, -al * Mean(t.f * (t.omega - t.m)) / t.q + t.thetahat * t.theta / t.q)]
                stein.append(Equation(t.Vhat, -al * Mean(t.dfdomega)))
        agg = []
        if L > 1 or m.reduction is not None:
            coeffs = (m.reduction.coefficients if m.reduction is not None else {})
            fam_tok = {"q": "qhat", "V": "Vhat", "m": "mhat", "theta": "thetahat"}
            for conj in d.conjugate_symbols:
                fam = conj.name.split("hat")[0]
                if fam not in fam_tok or conj.name != f"{fam}hat":
                    continue
                c = coeffs.get(fam, [1] * L)
                agg.append(Equation(conj, sp.Add(*[ci * getattr(t, fam_tok[fam]) for ci, t in zip(c, tokens)])))
        return FieldForm(tokens, eqs, stein if self.convex else None, agg, channel, self.convex)

    @cached_property
    def channel_law(self) -> tuple[sp.Expr, sp.Expr, sp.Expr, sp.Expr] | None:
        """``(Z(y | mu, kappa), d_mu Z, mu, kappa)`` of a one-form label channel: ``Z`` the label's law
        given a teacher form ``u ~ N(mu, kappa)``, ``mu, kappa`` its mean and variance given the
        student's Gaussian (from the derivation's label law ``W``: ``W = Z(y | mu, kappa)``)."""
        m = self.m
        ch = m.channel
        if ch is None or len(ch.forms) != 1 or not self.scalar_fields:
            return None
        from .potentials import conditional_law, field_laws

        laws = field_laws(m, self.d.order_parameters)
        _, eta = gaussian_symbols(m)
        mean, cov = conditional_law(ch.forms, {s: laws[s] for s in m.hstar}, list(eta))
        Z = ch.likelihood(ch.label, [MU], sp.Matrix([[KAPPA]]))
        return Z, sp.diff(Z, MU), sp.simplify(mean[0]), sp.simplify(cov[0, 0])

    # ------------------------------------------------------------ closed forms
    @cached_property
    def closed(self) -> ClosedForms:
        """Every closed form this model admits (see :class:`ClosedForms`)."""
        out = ClosedForms()
        self._entropic_closed(out)
        if self.scalar_fields and self.m.L == 1:
            self._energetic_closed(out)
        return out

    def _entropic_closed(self, out: ClosedForms) -> None:
        d, m = self.d, self.m
        psi_w = d.entropic_potential
        if not isinstance(psi_w, GaussianMoreauEnvelope):
            out.entropic_kind = "l2"
            out.entropic = list(d.saddle_point.entropic)
            return
        reg = m.regularizer
        if not (isinstance(reg, SeparableRegularizer) and len(reg.w) == 1 and len(psi_w.intermediates) == 1):
            return
        (zsym, zlaw), = psi_w.intermediates.items()
        wv = psi_w.variables[0]
        B = sp.expand(psi_w.bracket)
        absw = B.coeff(sp.Abs(wv))
        quad = B.subs(sp.Abs(wv), 0)
        A = sp.expand(2 * quad).coeff(wv, 2)
        lin = sp.expand(quad).coeff(wv, 1)
        if absw == 0 or lin != -zsym or sp.simplify(quad - (A * wv ** 2 / 2 + lin * wv)) != 0:
            return
        poly = sp.Poly(zlaw, *psi_w.gaussians)
        if poly.total_degree() != 1 or zlaw.subs({g: 0 for g in psi_w.gaussians}) != 0:
            return  # a field with a mean (positional encodings): the prox form below covers it
        s2 = sp.Add(*[c ** 2 for c in poly.coeffs()])
        s = THRESHOLD_SCALE
        lam = absw
        arg = lam / (sp.sqrt(2) * s)
        moment = (s ** 2 + lam ** 2) * sp.erfc(arg) - lam * s * sp.sqrt(2 / sp.pi) * sp.exp(-arg ** 2)
        psi = moment / (2 * A)
        # d psi / d xhat through A and through s (ds/dxhat = (ds^2/dxhat) / 2s), all in terms of s
        subs = {ph: sp.diff(psi, conj) + sp.diff(psi, s) * sp.diff(s2, conj) / (2 * s)
                for conj, ph in d.entropic_placeholders.items()}
        eqs = []
        for eq in d.saddle_point.entropic:
            rhs = eq.rhs.subs(subs)
            eqs.append(Equation(eq.lhs, _tidy(rhs, sp.erfc(arg))))
        out.entropic, out.entropic_kind, out.threshold_variance = eqs, "l1", s2
        out.threshold, out.curvature = lam, A

    def _energetic_closed(self, out: ClosedForms) -> None:
        d, m = self.d, self.m
        env = d.energetic_potential
        h = m.h[0, 0]
        omega = prox_center_symbols(m)[0, 0]
        V = d.order_parameters.slot("V", 0)[0, 0]
        loss = m.loss
        y = m.channel.label if m.channel is not None and tuple(m.channel.values) == (-1, 1) else None
        hh = self.field_form.tokens[0].hhat
        if env.pieces is None:
            dl = sp.diff(loss, h)
            out.stationarity = sp.simplify(label_unit(-dl, y)).subs(h, hh)
            if self.convex:
                d2 = sp.simplify(label_unit(sp.diff(loss, h, 2), y))
                out.dfdomega = sp.simplify(-d2 / (1 + V * d2)).subs(h, hh)
        F = env.bracket
        if env.pieces is None and sp.Poly(F, h).degree() == 2 if F.is_polynomial(h) else False:
            hhat = sp.solve(sp.diff(F, h), h)[0]
            out.prox = sp.simplify(hhat)
            out.f = sp.factor(sp.simplify((hhat - omega) / V))
            if env.weight is None and not env.discrete:
                M = sp.expand(F.subs(h, hhat).subs(env.intermediates))
                psi = -gaussian_mean(M, list(env.gaussians))
                out.psi_y = sp.factor(sp.simplify(psi))
                subs = {ph: sp.diff(psi, x) for x, ph in d.gradient_placeholders.items()}
                out.energetic = [Equation(eq.lhs, sp.factor(sp.simplify(eq.rhs.subs(subs))))
                                 for eq in d.saddle_point.energetic]
            return
        if env.pieces is not None and self.convex:  # noqa: SIM102
            prox = piecewise_linear_prox(env.pieces, h, omega, V, m.channel)
            if prox is not None:
                out.prox = prox
                out.f = sp.piecewise_fold((prox - omega) / V)
                out.f = sp.Piecewise(*[(sp.simplify(e), c) for e, c in out.f.args])
                out.dfdomega = sp.Piecewise(*[(sp.diff(e, omega), c) for e, c in out.f.args])


def _tidy(expr: sp.Expr, keep: sp.Expr) -> sp.Expr:
    """Simplify an erfc-form expression without letting sympy rewrite the kept ``erfc``."""
    k = sp.Dummy("K")
    e = sp.simplify(expr.subs(keep, k))
    if sp.count_ops(e) > 12:
        # each collected term factored: a denominator (V + lam2)^2, not its expansion
        e = sp.Add(*[sp.factor(t) for t in sp.Add.make_args(sp.collect(sp.expand(e), k))])
    return e.subs(k, keep)


def label_unit(e: sp.Expr, y: sp.Symbol | None) -> sp.Expr:
    """``e`` with ``y^k -> y^(k mod 2)`` for a label ``y = +-1`` (``y^2 = 1``, ``1/y = y``)."""
    if y is None:
        return e
    return sp.expand(e.replace(lambda x: x.is_Pow and x.base == y and x.exp.is_integer,
                               lambda x: y ** (int(x.exp) % 2)))


def piecewise_linear_prox(pieces, h: sp.Symbol, omega: sp.Symbol, V: sp.Symbol, channel) -> sp.Expr | None:
    """``argmin_h F`` of a convex loss that is linear on each piece (``F`` quadratic on each):
    the stationary point of each piece where it lies on its piece, the breakpoint otherwise
    (the subgradient condition there). With a ``+-1`` label, ``y^2 = 1`` is used to simplify."""
    if len(pieces.breakpoints) != 1:
        return None
    y = channel.label if channel is not None and tuple(channel.values) == (-1, 1) else None

    def unit(e):
        return label_unit(sp.expand(e), y)

    out, taken = [], []
    for br, cond in zip(pieces.branches, pieces.conditions):
        if sp.diff(br, h, 3) != 0 or sp.diff(br, h, 2) == 0:
            return None
        st = sp.solve(sp.diff(br, h), h)[0]
        conds = [] if cond is sp.true else [cond]
        conds += [sp.Not(c) for c in taken]
        valid = []
        for c in conds:
            c = c.subs(h, st)
            if isinstance(c, sp.Not):
                c = c.args[0].negated if hasattr(c.args[0], "negated") else c
            valid.append(c.func(unit(c.lhs - c.rhs), 0))
        out.append((unit(st), sp.And(*valid)))
        if cond is not sp.true:
            taken.append(cond)
    bp = unit(pieces.breakpoints[0])
    return sp.Piecewise(*out, (bp, True))

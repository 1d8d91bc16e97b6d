"""One step of replica-symmetry breaking (1RSB) at zero temperature, derived from a declaration.

The Gibbs measure ``exp(-beta R(W))`` of the empirical risk has, at 1RSB, replicas grouped in
blocks of ``x`` with three overlaps: ``Q`` (a replica with itself), ``q1`` (two replicas of one
block: one state) and ``q0`` (two blocks). As ``beta -> infinity`` the minimisers of the risk are
described by the finite scaling

    q1, q0,    delta_q = beta (Q - q1),    m = beta x   (the Parisi parameter, ``parisi_m``),

and the conjugates ``q1hat, q0hat, Vhat`` (``beta^2``, ``beta^2``, ``beta`` times their finite-
temperature counterparts). The free entropy per ``beta d`` is ``Phi = Psi_t + Psi_w + alpha Psi_y``
(docs/how-to/rsb.md), extremised in the order parameters and their conjugates, with

    Psi_t = sum_s [ 1/2 tr(Vhat q1) - 1/2 tr(q1hat delta_q) - m/2 (tr(q1hat q1) - tr(q0hat q0))
                    - mhat^T m_pos - tr(thetahat^T theta) ],
    Psi_y = (1/m) E_{xi, eta} log E_zeta exp(-m M(omega, h*)),
    M(omega, h*) = min_h [ sum_l 1/2 (h_l - omega_l)^T delta_q_l^{-1} (h_l - omega_l) + l(h, h*) ],
    omega_l = m_pos,l + q0_l^{1/2} xi_l + (q1_l - q0_l)^{1/2} zeta_l,
    h*_l = theta_l^T q0_l^{-1/2} xi_l + (rho_l - theta_l^T q0_l^{-1} theta_l)^{1/2} eta_l,

(the teacher correlates with the part of the fields common to all states), and for a separable
penalty ``Psi_w = (1/m) E_{xi, tau} log E_zeta exp(-m M_w)`` with ``M_w`` the entropic Moreau
envelope of the replica-symmetric theory at the field ``b + B0^{1/2} xi + (B1 - B0)^{1/2} zeta``
(``B0 = sum gamma q0hat``, ``B1 = sum gamma q1hat``, curvature ``A = sum gamma Vhat``); for l2 the
Gaussian integrals are done in closed form,

    Psi_w = sum_groups [ -w/(2m) log det(I - m (Lambda + A)^{-1} (B1 - B0))
                         + 1/2 tr((Lambda + A - m (B1 - B0))^{-1} (w (B0 + Gamma Gamma^T) + E mu mu^T)) ].

At ``q1 = q0`` (and ``q1hat = q0hat``) every term is the replica-symmetric one with ``q = q1``,
``V = delta_q``, for any ``m``. The Parisi parameter is fixed where the complexity
``Sigma = -m^2 dPhi/dm`` vanishes; the ground-state energy (the training loss) is ``-Phi`` there.

:class:`RSBDerivation` builds all of this from the replica-symmetric building blocks
(:mod:`replica.symbolic.potentials` with the 1RSB families in place of the RS ones) and derives the
stationarity conditions with sympy, as :class:`~replica.symbolic.derivation.Derivation` does:
``x = -K(m)^{-T} grad_xhat Psi_w`` and ``xhat = -alpha K(m)^{-1} grad_x Psi_y`` with
``K(m) = d^2 Psi_t / dx dxhat``, and ``Sigma = -m^2 (dPsi_t/dm + dPsi_w/dm + alpha dPsi_y/dm)``.
The energetic (and a non-quadratic entropic) gradients are nested Gaussian averages of the
bracket's derivatives at the global prox under the tilted measure ``exp(-m M) / E_zeta exp(-m M)``
(envelope theorem): ``dPsi_y/dx = -E_xi < dF/dx >_zeta``, and
``dPsi_y/dm = -(1/m^2) E_xi log E_zeta exp(-m M) - (1/m) E_xi < M >_zeta``
(:mod:`replica.numeric.rsb` computes them; :mod:`replica.codegen.rsb` generates the node functions).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import sympy as sp

from ..errors import DeclarationError
from .derivation import ALPHA, Derivation, Equation, _maybe_simplify
from .model import Model
from .order_parameters import OrderParameters
from .potentials import (GaussianMoreauEnvelope, energetic_potential, entropic_envelope, entropic_matrices,
                         kinked_labels_as_max, prox_center_symbols, token_view)
from .regularizers import L2, SeparableRegularizer
from .symbols import LATEX_NAMES, cholesky_lower, restore_names, symbol

#: the Parisi parameter ``m = beta x`` (finite at zero temperature)
PARISI = symbol("parisi_m", r"\mathsf{m}")

#: 1RSB family -> (the replica-symmetric family it is built from, LaTeX of a shared scalar, LaTeX stem
#: before a token index)
RSB_FAMILIES: dict[str, tuple[str, str, str]] = {
    "q0": ("q", "q_0", "q^{(0)}"),
    "q1": ("q", "q_1", "q^{(1)}"),
    "delta_q": ("V", r"\delta q", r"\delta q"),
    "m": ("m", "m", "m"),
    "theta": ("theta", r"\theta", r"\theta"),
    "q0hat": ("Vhat", r"\hat{q}_0", r"\hat{q}^{(0)}"),
    "q1hat": ("qhat", r"\hat{q}_1", r"\hat{q}^{(1)}"),
    "Vhat": ("Vhat", r"\hat{V}", r"\hat{V}"),
    "mhat": ("mhat", r"\hat{m}", r"\hat{m}"),
    "thetahat": ("thetahat", r"\hat{\theta}", r"\hat{\theta}"),
}
ORDER: tuple[str, ...] = ("q0", "q1", "delta_q", "m", "theta")
CONJUGATE: tuple[str, ...] = ("q0hat", "q1hat", "Vhat", "mhat", "thetahat")
#: the replica-symmetric stems of the LaTeX names the 1RSB ones replace
_RS_STEMS = {"q": "q", "V": "V", "m": "m", "theta": r"\theta", "qhat": r"\hat{q}", "Vhat": r"\hat{V}",
             "mhat": r"\hat{m}", "thetahat": r"\hat{\theta}"}


class RSBOrderParameters:
    """The 1RSB order parameters and conjugates, per slot, built from the replica-symmetric ones.

    Every RS family's symbols are renamed (``q_1 -> q0_1, q1_1``, ``V -> delta_q``, ``qhat ->
    q1hat``, and a new ``q0hat``), so that token reductions and families carry over unchanged.
    """

    def __init__(self, rs: OrderParameters):
        self.rs = rs
        self.S = rs.S
        self.families = tuple(f for f in ORDER if RSB_FAMILIES[f][0] in rs.families)
        self.conjugate_families = tuple(c for c, f in zip(CONJUGATE, ("q", "V", "q", "m", "theta"))
                                        if f in rs.families)
        self.per_slot: dict[str, list[sp.Matrix]] = {}
        self.symbols: dict[str, list[sp.Symbol]] = {}
        for fam, (old, simple, stem) in RSB_FAMILIES.items():
            subs = {}
            rs_syms = [s for p in rs.free.get(old, []) for s in p.symbols]
            for s in rs_syms:
                suffix = s.name[len(old):]
                rs_tex = LATEX_NAMES.get(s, "")
                old_stem = _RS_STEMS[old]
                tex = simple if not suffix else (stem + rs_tex[len(old_stem):] if rs_tex.startswith(old_stem)
                                                 else None)
                subs[s] = symbol(f"{fam}{suffix}", tex)
            self.per_slot[fam] = [M.xreplace(subs) for M in rs.per_slot[old]]
            self.symbols[fam] = list(subs.values())

    def slot(self, family: str, s: int) -> sp.Matrix:
        """The matrix of slot ``s`` (0-based) of a 1RSB ``family``."""
        return self.per_slot[family][s]

    def order_symbols(self) -> list[sp.Symbol]:
        """``q0, q1, delta_q, m, theta`` (the model's families), in layout order."""
        return [s for f in self.families for s in self.symbols[f]]

    def conjugate_symbols(self) -> list[sp.Symbol]:
        """``q0hat, q1hat, Vhat, mhat, thetahat`` (the model's families), in layout order."""
        return [s for f in self.conjugate_families for s in self.symbols[f]]

    def family_of(self, sym: sp.Symbol) -> str:
        """The 1RSB family of a symbol."""
        for f, syms in self.symbols.items():
            if sym in syms:
                return f
        raise KeyError(sym)

    def view(self, mapping: dict[str, str]) -> "_View":
        """These parameters seen as replica-symmetric ones (``mapping``: RS family -> 1RSB family), for
        the RS builders of :mod:`replica.symbolic.potentials`."""
        return _View(self, mapping)


@dataclass
class _View:
    """An :class:`RSBOrderParameters` read through RS family names (``slot`` and ``S``)."""

    ops: RSBOrderParameters
    mapping: dict[str, str]

    @property
    def S(self) -> int:
        return self.ops.S

    @property
    def units(self):
        """The unit-symmetric ansatz: none (1RSB works on the full matrices)."""
        return None

    def slot(self, family: str, s: int) -> sp.Matrix:
        return self.ops.slot(self.mapping[family], s)


#: the energetic side: the teacher correlates with q0, the bracket's metric is delta_q
ENERGETIC_VIEW = {"q": "q0", "V": "delta_q", "m": "m", "theta": "theta"}
#: the entropic side: the field's outer variance is q0hat, the curvature Vhat
ENTROPIC_VIEW = {"Vhat": "Vhat", "qhat": "q0hat", "mhat": "mhat", "thetahat": "thetahat"}


@dataclass
class NestedEnvelope:
    """``Psi = (1/m) E_outer log E_inner exp(-m min_x B(x; outer, inner))``, kept structured.

    ``envelope`` is the replica-symmetric structure of the bracket (:class:`GaussianMoreauEnvelope`:
    variables, bracket, intermediates, starts, a channel's weight, the piecewise structure), whose
    intermediates include the inner Gaussians; ``inner`` are those (the last entries of
    ``envelope.gaussians``); the outer ones come first.
    """

    envelope: GaussianMoreauEnvelope
    inner: list[sp.Symbol]

    @property
    def outer(self) -> list[sp.Symbol]:
        """The outer Gaussians (``xi``, ``eta``, noise; ``xi, tau`` on the entropic side)."""
        return [g for g in self.envelope.gaussians if g not in self.inner]


def dataclasses_replace_weight(env: GaussianMoreauEnvelope) -> GaussianMoreauEnvelope:
    """``env`` without a channel's weight (the bracket ``F`` alone)."""
    return replace(env, weight=None)


def _inner_symbols(stem: str, tex: str, rows: int, cols: int) -> sp.Matrix:
    return sp.Matrix(rows, cols, lambda l, k: symbol(f"{stem}_{l + 1}" if cols == 1 else f"{stem}_{l + 1}_{k + 1}",
                                                     rf"{tex}_{{{l + 1}}}" if cols == 1 else
                                                     rf"{tex}_{{{l + 1},{k + 1}}}"))


def _derivative_placeholders(potential: str, symbols: list[sp.Symbol]) -> dict[sp.Symbol, sp.Symbol]:
    """symbol -> a symbol standing for the derivative of ``potential`` (``Psi_y``, ``Psi_w``) in it."""
    tex_potential = potential.replace("Psi", r"\Psi")
    return {s: symbol(f"d{potential}__{s.name}", rf"\partial_{{{LATEX_NAMES.get(s, sp.latex(s))}}} {tex_potential}")
            for s in symbols}


class RSBDerivation:
    """The zero-temperature 1RSB derivation of one model (see the module docstring).

    >>> from derivations.phase_retrieval import model      # doctest: +SKIP
    >>> d = RSBDerivation(model)
    >>> d.complexity                                         # doctest: +SKIP
    """

    def __init__(self, model: Model):
        restore_names(model.spellings)  # its own declaration's spellings, whatever was declared since
        if model.data.has_clusters:
            raise DeclarationError("1RSB: models with token clusters are not supported (the label "
                                   "configurations would need a nested average of their own)")
        self.model = model
        self.rs = Derivation(model)
        self.ops = RSBOrderParameters(self.rs.order_parameters)
        self.alpha = ALPHA
        self.parisi = PARISI
        reg = model.regularizer
        if not isinstance(reg, L2) and isinstance(reg, SeparableRegularizer) and len(model.data.atoms) > 1:
            raise DeclarationError("1RSB: a non-quadratic penalty needs a one-atom spectral law (each atom of "
                                   "the law would need a nested entropic average of its own)")

    # ------------------------------------------------------------ symbols
    @property
    def order_symbols(self) -> list[sp.Symbol]:
        """``q0, q1, delta_q, m, theta`` (free symbols, layout order)."""
        return self.ops.order_symbols()

    @property
    def conjugate_symbols(self) -> list[sp.Symbol]:
        """``q0hat, q1hat, Vhat, mhat, thetahat`` (free symbols, layout order)."""
        return self.ops.conjugate_symbols()

    # ------------------------------------------------------------ potentials
    @cached_property
    def trace_potential(self) -> sp.Expr:
        """``Psi_t`` (module docstring)."""
        o, pm = self.ops, self.parisi
        total = sp.Integer(0)
        for s in range(o.S):
            q0, q1, dq, mp, th = (o.slot(f, s) for f in ORDER)
            q0h, q1h, Vh, mh, thh = (o.slot(f, s) for f in CONJUGATE)
            total += ((Vh * q1).trace() / 2 - (q1h * dq).trace() / 2
                      - pm / 2 * ((q1h * q1).trace() - (q0h * q0).trace())
                      - (mh.T * mp)[0, 0] - (thh.T * th).trace())
        return sp.expand(total)

    @cached_property
    def energetic_potential(self) -> NestedEnvelope:
        """``Psi_y``: the RS bracket with ``V -> delta_q``, centres ``m + q0^{1/2} xi + (q1 - q0)^{1/2} zeta``
        and the teacher correlated with ``xi`` only."""
        m = self.model
        env = energetic_potential(m, self.ops.view(ENERGETIC_VIEW))
        zeta = _inner_symbols("zeta", r"\zeta", m.L, m.r)
        centers = prox_center_symbols(m)
        view1 = self.ops.view({"q": "q1"})
        view0 = self.ops.view({"q": "q0"})
        inter = dict(env.intermediates)
        for l in range(m.L):
            spread = token_view(m, view1, "q", l) - token_view(m, view0, "q", l)
            C1 = cholesky_lower(spread)
            extra = C1 * zeta[l, :].T
            for k in range(m.r):
                inter[centers[l, k]] = inter[centers[l, k]] + extra[k]
        inner = list(zeta)
        return NestedEnvelope(replace(env, gaussians=list(env.gaussians) + inner, intermediates=inter), inner)

    @cached_property
    def entropic_potential(self) -> sp.Expr | NestedEnvelope:
        """``Psi_w``: closed form for l2 (module docstring), else a nested entropic envelope."""
        m, o, pm = self.model, self.ops, self.parisi
        reg = m.regularizer
        if isinstance(reg, L2):
            r = m.r
            Lam = reg.matrix(r)
            total = sp.Integer(0)
            for group in m.data.second_moment_groups():
                A, B0, MM, Gam = entropic_matrices(m, o.view(ENTROPIC_VIEW), group)
                _, B1, _, _ = entropic_matrices(m, o.view({**ENTROPIC_VIEW, "qhat": "q1hat"}), group)
                dB = B1 - B0
                M = Lam + A
                Mt = M - pm * dB
                w = sp.sympify(group.weight)
                if r == 1:
                    logdet = sp.log(1 - pm * dB[0, 0] / M[0, 0])
                    inv = sp.Matrix([[1 / Mt[0, 0]]])
                else:
                    logdet = sp.log((sp.eye(r) - pm * M.inv() * dB).det())
                    inv = Mt.inv()
                total += -w / (2 * pm) * logdet + (inv * (w * (B0 + Gam * Gam.T) + MM)).trace() / 2
            return total
        if not isinstance(reg, SeparableRegularizer):
            raise DeclarationError(f"regularizer: {type(reg).__name__} is neither quadratic nor separable")
        env = entropic_envelope(m, o.view(ENTROPIC_VIEW))
        atom = m.data.atoms[0]
        dB = sp.zeros(m.r, m.r)
        for l in range(o.S):
            g = sp.sympify(atom.gamma[l])
            dB += g * (o.slot("q1hat", l) - o.slot("q0hat", l))
        C1 = cholesky_lower(dB)
        zeta = _inner_symbols("zetaw", r"\zeta^{w}", 1, m.r)
        extra = C1 * zeta.T
        inter = dict(env.intermediates)
        for k, Z in enumerate(list(inter)):
            inter[Z] = inter[Z] + extra[k]
        inner = list(zeta)
        validity = dict(env.validity)
        for i in range(1, m.r + 1):
            validity[f"sum_l gamma_l (q1hat_l - q0hat_l) (minor {i})"] = dB[:i, :i].det() if i > 1 else dB[0, 0]
        new = replace(env, gaussians=list(env.gaussians) + inner, intermediates=inter, validity=validity)
        return NestedEnvelope(new, inner)

    # ------------------------------------------------------------ validity
    @cached_property
    def validity(self) -> dict[str, sp.Expr]:
        """Order-parameter quantities that must be positive (leading principal minors): ``q0``,
        ``q1 - q0`` (zero allowed: the replica-symmetric limit), ``delta_q``,
        ``rho - theta^T q0^{-1} theta``."""
        m, o = self.model, self.ops
        out: dict[str, sp.Expr] = {}
        seen: set = set()
        for l in range(o.S):
            q0, q1, dq, th = o.slot("q0", l), o.slot("q1", l), o.slot("delta_q", l), o.slot("theta", l)
            q0inv = q0.inv() if m.r > 1 else sp.Matrix([[1 / q0[0, 0]]])
            res = m.data.rho(l, m.r_t) - th.T * q0inv * th
            for M, nm in ((q0, "q0"), (q1 - q0, "q1 - q0"), (dq, "delta_q"), (res, "rho - theta^T q0^-1 theta")):
                for k in range(1, M.shape[0] + 1):
                    minor = M[:k, :k].det() if k > 1 else M[0, 0]
                    key = sp.srepr(minor)
                    if key in seen or minor.is_zero:
                        continue
                    seen.add(key)
                    label = nm if M.shape[0] == 1 else f"{nm} (minor {k})"
                    out[f"{label} [token {l + 1}]"] = minor
        return out

    @cached_property
    def conjugate_validity(self) -> dict[str, sp.Expr]:
        """Conjugate quantities that must be positive: for l2, ``Lambda + A - m (B1 - B0)`` (the inner
        Gaussian integral of the closed-form entropic potential converges); else ``A`` plus the
        penalty's curvature at infinity and ``B0``, ``B1 - B0`` (the entropic envelope's fields)."""
        m, o = self.model, self.ops
        out: dict[str, sp.Expr] = {}
        went = self.entropic_potential
        if isinstance(went, NestedEnvelope):
            return dict(went.envelope.validity)
        if isinstance(m.regularizer, L2):
            for gi, group in enumerate(m.data.second_moment_groups()):
                A, B0, _, _ = entropic_matrices(m, o.view(ENTROPIC_VIEW), group)
                _, B1, _, _ = entropic_matrices(m, o.view({**ENTROPIC_VIEW, "qhat": "q1hat"}), group)
                Mt = m.regularizer.matrix(m.r) + A - self.parisi * (B1 - B0)
                for k in range(1, m.r + 1):
                    out[f"lambda + A - m (B1 - B0) (minor {k}) [group {gi + 1}]"] = \
                        Mt[:k, :k].det() if k > 1 else Mt[0, 0]
        return out

    # ------------------------------------------------------------ stationarity
    @cached_property
    def coupling(self) -> sp.Matrix:
        """``K(m)_ij = d^2 Psi_t / dx_i dxhat_j`` (linear in the Parisi parameter)."""
        x, xh = self.order_symbols, self.conjugate_symbols
        return sp.Matrix(len(x), len(xh), lambda i, j: sp.diff(self.trace_potential, x[i], xh[j]))

    @cached_property
    def gradient_placeholders(self) -> dict[sp.Symbol, sp.Symbol]:
        """order symbol (and the Parisi parameter) -> a symbol standing for ``dPsi_y/dx``."""
        return _derivative_placeholders("Psi_y", self.order_symbols + [self.parisi])

    @cached_property
    def entropic_placeholders(self) -> dict[sp.Symbol, sp.Symbol]:
        """conjugate (and the Parisi parameter) -> a symbol standing for ``dPsi_w/dxhat`` (non-quadratic
        penalties)."""
        return _derivative_placeholders("Psi_w", self.conjugate_symbols + [self.parisi])

    @cached_property
    def saddle_point(self) -> "RSBSaddlePoint":
        """The fixed-point equations at fixed ``m`` and the complexity (module docstring)."""
        x, xh, pm = self.order_symbols, self.conjugate_symbols, self.parisi
        K = self.coupling
        psi_w = self.entropic_potential
        entropic_grads: dict[sp.Symbol, sp.Expr] = {}
        if isinstance(psi_w, NestedEnvelope):
            ph = self.entropic_placeholders
            x_rhs = -(K.T.inv() * sp.Matrix([ph[s] for s in xh]))
            entropic = [Equation(xi, sp.expand(rhs)) for xi, rhs in zip(x, x_rhs)]
            entropic_grads = {ph[s]: e for s, e in zip(xh, psi_w.envelope.parameter_gradient(xh))}
            dpsi_w_dm = ph[pm]
        else:
            grad_w = sp.Matrix([sp.diff(psi_w, s) for s in xh])
            x_rhs = -(K.T.inv() * grad_w)
            entropic = [Equation(xi, _maybe_simplify(rhs)) for xi, rhs in zip(x, x_rhs)]
            dpsi_w_dm = sp.diff(psi_w, pm)
        g = sp.Matrix([self.gradient_placeholders[s] for s in x])
        xh_rhs = -self.alpha * (K.inv() * g)
        energetic = [Equation(s, sp.expand(rhs)) for s, rhs in zip(xh, xh_rhs)]
        integrands = self.energetic_potential.envelope.parameter_gradient(x)
        grads = {self.gradient_placeholders[s]: e for s, e in zip(x, integrands)}
        dphi_dm = sp.diff(self.trace_potential, pm) + dpsi_w_dm + self.alpha * self.gradient_placeholders[pm]
        return RSBSaddlePoint(entropic, energetic, grads, entropic_grads, -pm ** 2 * dphi_dm,
                              sp.diff(self.trace_potential, pm), dpsi_w_dm)

    def common_gradient(self) -> list[sp.Expr]:
        """``dF/dq0 + dF/dq1`` at fixed ``h`` for every entry of ``q0`` (with the matching entry of ``q1``):
        the bracket's derivative along a common shift of both overlaps. ``dF/dq1`` alone carries
        ``(q1 - q0)^{-1/2}`` (the inner Gaussian's scale), which this sum does not: it is what the
        replica-symmetric limit ``q1 = q0`` of the equations needs (``Vhat = -2 alpha`` times its average)."""
        env = self.energetic_potential.envelope
        B = kinked_labels_as_max(dataclasses_replace_weight(env).full_bracket, env.variables)
        q0, q1 = self.ops.symbols["q0"], self.ops.symbols["q1"]
        gaps = [sp.Dummy(f"D{k}", real=True) for k in range(len(q0))]
        shifted = B.xreplace({b: a + g for a, b, g in zip(q0, q1, gaps)})
        back = {g: b - a for a, b, g in zip(q0, q1, gaps)}
        return [sp.diff(shifted, a).xreplace(back) for a in q0]

    @property
    def complexity(self) -> sp.Expr:
        """``Sigma = -m^2 dPhi/dm`` with the nested-average derivatives as placeholders."""
        return self.saddle_point.complexity


@dataclass
class RSBSaddlePoint:
    """The 1RSB saddle point at fixed Parisi parameter, and the complexity that fixes it.

    ``entropic``/``energetic``/``energetic_gradient``/``entropic_gradient`` as in
    :class:`~replica.symbolic.derivation.SaddlePoint` (with ``K(m)``); ``complexity`` is
    ``-m^2 dPhi/dm`` with ``dPsi_y/dm`` (and, for a non-quadratic penalty, ``dPsi_w/dm``) as
    placeholders; ``trace_parisi``, ``entropic_parisi`` the explicit ``dPsi_t/dm``, ``dPsi_w/dm``.
    """

    entropic: list[Equation]
    energetic: list[Equation]
    energetic_gradient: dict[sp.Symbol, sp.Expr]
    entropic_gradient: dict[sp.Symbol, sp.Expr] = field(default_factory=dict)
    complexity: sp.Expr = sp.Integer(0)
    trace_parisi: sp.Expr = sp.Integer(0)
    entropic_parisi: sp.Expr = sp.Integer(0)

"""The generator: a :class:`~replica.symbolic.derivation.Derivation` -> the model's functions -> a module.

:func:`model_functions` lists what the model computes as backend-neutral
:class:`~replica.codegen.backends.Function` specs (the model's *arrays*); :func:`generate_module`
writes the header (metadata and the freshness stamp) and lets each backend write its section.
The generic numeric algorithm is not generated: it is library code (:mod:`replica.numeric.solver`,
:mod:`replica.numeric.prox`, :mod:`replica.numeric.kernels`).
"""
from __future__ import annotations

import dataclasses
import keyword
import re
from pathlib import Path
from typing import Sequence

import sympy as sp

from ..symbolic.derivation import Derivation
from ..errors import DeclarationError
from ..artifacts.freshness import current_stamp
from ..symbolic.losses import analyse, kink_conditions, kinked_label_derivative, teacher_kinks
from ..symbolic.observables import EntropicObservable, StateObservable, TestObservable
from ..artifacts.outputs import atomic_write_text
from ..symbolic.order_parameters import ORDER_FAMILIES
from ..symbolic.symmetries import gaussian_permutations
from ..symbolic.potentials import GaussianMoreauEnvelope, prox_center_symbols
from ..symbolic.symbols import cholesky_lower
from ..interface.generated_model import kernel_key, kernel_path
from .backends import Backend, Function, KernelBackend, NodeForm, default_backends

def _check_names(symbols: Sequence[sp.Symbol]) -> None:
    """Every symbol is printed verbatim: it must be an identifier that clashes with nothing.

    Function arguments of the generated code are ``_x, _p, _h, ...`` and helpers start
    with ``_``, so user names only need to avoid ``_``-prefixes, ``np`` and ``alpha``.
    """
    seen: dict[str, sp.Symbol] = {}
    for s in symbols:
        if not s.name.isidentifier() or keyword.iskeyword(s.name) or s.name.startswith("_") \
                or s.name in ("np", "math", "alpha"):
            raise DeclarationError(f"symbol name {s.name!r} cannot be used in generated code "
                                   "(need an identifier, not a keyword, not starting with '_', "
                                   "not 'np', 'math' or 'alpha'); rename it")
        if s.name in seen and seen[s.name] != s:
            raise DeclarationError(f"two different symbols are both named {s.name!r}; rename one")
        seen[s.name] = s


# --------------------------------------------------------------------------- the model's functions
def model_functions(d: Derivation) -> list[Function]:
    """Every function of the generated module, in module order (see the package docstring)."""
    m = d.model
    sp_eqs = d.saddle_point
    x_syms, xh_syms = d.order_symbols, d.conjugate_symbols
    params = m.parameter_symbols
    env = d.energetic_potential
    h_syms = env.variables
    # label indicators (token clusters) after the Gaussians, then a channel's label
    z_syms = env.gaussians + env.discrete + ([env.label] if env.label is not None else [])
    _check_names([*x_syms, *xh_syms, *params, *h_syms, *z_syms])
    placeholders = [d.gradient_placeholders[s] for s in x_syms]
    x_arg, xh_arg, p_arg = ("_x", x_syms), ("_xhat", xh_syms), ("_p", params)
    h_arg, z_arg = ("_h", h_syms), ("_z", z_syms)
    B = env.full_bracket
    grad = [sp.diff(B, s) for s in h_syms]
    hess = [sp.diff(g, s) for g in grad for s in h_syms]
    pgrad = sp_eqs.energetic_gradient
    label_kinks = _teacher_kink_conditions(d)
    if label_kinks:  # a kinked label: sign / Heaviside of its derivative as Piecewise (both backends)
        pgrad = {k: kinked_label_derivative(v) for k, v in pgrad.items()}
    intermediates = env.intermediates
    starts = [[sp.sympify(e).subs(intermediates) for e in s] for s in env.starts]
    at_test = dict(zip(h_syms, prox_center_symbols(m)))  # the test fields have the law of the centres
    # with a channel every test-point integrand carries the label law W(y | z)
    weight = env.weight if env.weight is not None else sp.Integer(1)
    test_loss = weight * m.loss.subs(at_test).subs(intermediates)
    tests = [weight * sp.sympify(o.expr).subs(at_test).subs(intermediates) for o in m.observables
             if isinstance(o, TestObservable)]
    F = Function.make
    out: list[Function] = []
    went = d.entropic_potential
    if isinstance(went, GaussianMoreauEnvelope):
        out += _entropic_envelope_functions(d, xh_arg, p_arg)
    else:
        out.append(F("entropic_update", [xh_arg, p_arg], [[eq.rhs for eq in sp_eqs.entropic]],
                     "Order parameters from conjugates: x = -K^{-T} grad_xhat Psi_w (closed form)."))
        out.append(F("entropic_potential", [xh_arg, p_arg], [went], "Psi_w(xhat)."))
    out.append(F("energetic_update", [("_dpsi_y", placeholders), ("alpha", [])],
                 [[eq.rhs for eq in sp_eqs.energetic]],
                 "Conjugates from dPsi_y/dx: xhat = -alpha K^{-1} grad_x Psi_y."))
    out.append(F("trace_potential", [x_arg, xh_arg], [d.trace_potential], "Psi_t(x, xhat)."))
    out.append(F("bracket", [h_arg, z_arg, x_arg, p_arg], [B],
                 "The Moreau bracket F(h; omega, h*, V) at every node.", node_args=("_h", "_z")))
    out.append(F("bracket_newton", [h_arg, z_arg, x_arg, p_arg], [B, grad, hess],
                 "F, dF/dh (PROX_DIM, ...) and d2F/dh2 flattened (PROX_DIM**2, ...).", node_args=("_h", "_z"),
                 node=NodeForm("node_bracket_newton", (None, "_g", "_H"),
                               "F, dF/dh (into _g) and d2F/dh2 (row-major, into _H) at one node from its "
                               "constants _c.",
                               split=("node_constants", "Subexpressions of the bracket that do not depend on "
                                                        "h, for one node, into _c."))))
    out.append(F("bracket_parameter_gradient", [h_arg, z_arg, x_arg, p_arg], [[pgrad[ph] for ph in placeholders]],
                 "d(W F)/dx at fixed h, for every order parameter (envelope theorem; W = 1 without a channel).",
                 node_args=("_h", "_z"),
                 node=NodeForm("node_parameter_gradient", ("_G",), "d(W F)/dx at fixed h for one node (into _G).")))
    out.append(F("label_weight", [z_arg, x_arg, p_arg], [weight],
                 "The channel's label law W(y | z; x) that multiplies min_h F at every node (1 without a channel).",
                 node_args=("_z",), node=NodeForm("node_weight", (None,), "W(y | z; x) at one node.")))
    out.append(F("prox_starts", [z_arg, x_arg, p_arg], [[e for s in starts for e in s]],
                 "Starting points of the inner minimisation, shape (S * PROX_DIM, ...).", node_args=("_z",),
                 node=NodeForm("node_starts", ("_out",), "Starting points of the inner minimisation for one "
                                                        "node (into _out, S * PROX_DIM).")))
    # the training loss at the test point; the same expression as eps_g unless the model declares
    # another eps_g, and then written as a call, not twice
    out.append(F("test_loss", [z_arg, x_arg, p_arg], [test_loss],
                 "The loss at h = omega (h - m ~ N(0, q) correlated with h*): integrand of eps_g.",
                 node_args=("_z",), delegate=("test_observables", 0) if tests[0] == test_loss else None))
    out.append(F("test_observables", [z_arg, x_arg, p_arg], [tests],
                 "Integrands of the test-point observables (TEST_OBSERVABLES order), h = omega.",
                 node_args=("_z",),
                 node=NodeForm("node_test_observables", ("_out",),
                               "Integrands of the test-point observables at one node (into _out).")))
    out.append(F("validity", [x_arg, p_arg], [list(d.validity.values())],
                 "Quantities that must be positive (principal minors), named in VALIDITY."))
    states = [o for o in m.observables if isinstance(o, StateObservable)]
    if states:
        out.append(F("state_observables", [x_arg, p_arg], [[m.state_expression(o.expr) for o in states]],
                     "The state observables (STATE_OBSERVABLES order): functions of the order parameters."))
    if env.pieces is not None:
        out += _piecewise_functions(d, z_arg, x_arg, p_arg)
    if label_kinks:
        out.append(F("teacher_kinks", [z_arg, x_arg, p_arg], [label_kinks],
                     "Where a kinked label changes branch: expressions of the nodes whose sign flips there "
                     "(N_TEACHER_KINKS, ...), located by the kink-aware rule.", node_args=("_z",)))
        _meta(d)["teacher_kinks"] = len(label_kinks)
    if env.label is not None and len(h_syms) == 1:
        out += _kink_rule_functions(d, z_arg, x_arg, p_arg, tests)
    if m.target is not None:
        # Linear baseline (Result 5.1): T(h*) with independent h*_l ~ N(0, rho_l).
        eta_syms = z_syms[m.L * m.r:m.L * m.r + m.L * m.r_t]
        subs = {}
        for l in range(m.L):
            D = cholesky_lower(m.data.token_rho(l, m.r_t))
            hs_l = D * sp.Matrix(eta_syms[l * m.r_t:(l + 1) * m.r_t])
            for k in range(m.r_t):
                subs[m.hstar[l, k]] = hs_l[k]
        out.append(F("target_entries", [("_z", eta_syms + env.discrete), p_arg], [[e.subs(subs) for e in m.target]],
                     "T(h*) entries (row-major) with h*_l = rho_l^{1/2} eta_l, for the linear baseline."
                     + (" z = (eta, DISCRETE)." if env.discrete else ""), node_args=("_z",)))
    if not m.data.has_clusters:
        out.append(F("rho_bar", [p_arg], [[m.data.rho_bar(l) for l in range(m.L)]],
                     "rho_bar_l = tr Sigma_l / d for every token."))
        if not _isotropic_tokens(m):  # what the replicon checks (replica.numeric.stability), numerically here
            out.append(F("atom_eigenvalues", [p_arg], [[g for a in m.data.atoms for g in a.gamma]],
                         "Eigenvalues gamma_l of every atom of the spectral law, atom-major (n_atoms x L)."))
    else:
        out.append(F("rho_bar", [p_arg], [[m.data.rho_bar(s) for s in range(m.data.S)]],
                     "rho_bar_s = tr Sigma_s / d for every slot (token, cluster), in SLOTS order."))
        out.append(F("token_rho_bar", [("_z", env.discrete), p_arg], [[m.data.token_rho_bar(l) for l in range(m.L)]],
                     "rho_bar of every token under the label configuration of the nodes (z = DISCRETE values).",
                     node_args=("_z",)))
        out.append(F("label_probabilities", [p_arg], [[pr for _, pr, _ in m.data.configurations()]],
                     "Probability of every label configuration (CONFIGURATIONS order)."))
    checks = list(m.constraints)
    out.append(F("parameter_checks", [p_arg], [[c.relation.lhs - c.relation.rhs for c in checks] or [sp.Integer(0)]],
                 "lhs - rhs of every parameter constraint (see CONSTRAINTS)."))
    if env.pieces is not None:
        # Newton leaves would stop at the kinks: the compiled path is off, the exact piecewise
        # prox of replica.numeric.prox runs on the numpy functions
        out = [dataclasses.replace(f, node=None) for f in out]
    return out


def _piecewise_functions(d: Derivation, z_arg, x_arg, p_arg) -> list[Function]:
    """The exact prox of a piecewise bracket (``PROX_DIM = 1``, :func:`replica.numeric.prox.piecewise_prox`).

    ``loss_breaks``: the breakpoints in ``h`` at every node; ``branch_index``: the branch active at
    ``h``; ``branch_newton``: value, slope and curvature of every branch's bracket (smooth
    continuations beyond its interval); ``branch_stationary``: the closed-form stationary points of
    every branch (``STATIONARY_ROOTS`` per branch, ``nan`` where there is none or sympy found none:
    ``STATIONARY_CLOSED`` says which branches have closed forms); ``break_parameter_gradient``
    (when the breakpoints move with the state, ``MOVING_BREAKS``): the total derivative
    ``d(W F(b(x)))/dx`` along each breakpoint (envelope theorem on the kink).
    """
    env = d.energetic_potential
    pw = env.pieces
    h = env.variables[0]
    inter = env.intermediates
    x_syms = d.order_symbols
    F = Function.make
    h_arg = ("_h", [h])
    breaks = [sp.sympify(b).subs(inter) for b in pw.breakpoints]
    branches = [sp.sympify(b).subs(inter) for b in pw.branches]
    conds = [c.subs(inter) if c not in (sp.true, sp.false) else c for c in pw.conditions]
    selector = sp.Piecewise(*[(sp.Integer(i), c) for i, c in enumerate(conds)])
    roots: list[list[sp.Expr]] = []
    for b in branches:
        rts = None
        try:
            g = sp.diff(b, h)
            if sp.Poly(g, h).degree() <= 2:
                rts = [r for r in sp.solve(sp.Eq(g, 0), h)]
        except (sp.PolynomialError, NotImplementedError, ValueError, sp.GeneratorsNeeded):
            rts = None
        roots.append(rts if rts is not None else [])
    closed = tuple(bool(r) or _linear_free(b, h) for r, b in zip(roots, branches))
    width = max(1, max(len(r) for r in roots))
    stationary = [r[k] if k < len(r) else sp.nan for r in roots for k in range(width)]
    newton = []
    for b in branches:
        g = sp.diff(b, h)
        newton += [b, g, sp.diff(g, h)]
    out = [
        F("loss_breaks", [z_arg, x_arg, p_arg], [breaks], "Breakpoints of the loss in h at every node (N_BREAKS, ...).",
          node_args=("_z",)),
        F("branch_index", [h_arg, z_arg, x_arg, p_arg], [selector],
          "Index of the branch of the piecewise bracket active at h.", node_args=("_h", "_z")),
        F("branch_newton", [h_arg, z_arg, x_arg, p_arg], [newton],
          "Value, dF/dh and d2F/dh2 of every branch's bracket at h (3 N_BRANCHES, ...).", node_args=("_h", "_z")),
        F("branch_stationary", [z_arg, x_arg, p_arg], [stationary],
          "Closed-form stationary points of every branch (N_BRANCHES * STATIONARY_ROOTS, ...), nan where none.",
          node_args=("_z",)),
    ]
    moving = any(sp.sympify(b).free_symbols & (set(env.gaussians) | set(inter) | set(x_syms)) for b in pw.breakpoints)
    if moving:
        weight = env.weight if env.weight is not None else sp.Integer(1)
        full = env.full_bracket
        grads = []
        for b in breaks:
            along = weight * full.subs(h, b)
            grads += [sp.diff(along, x) for x in x_syms]
        out.append(F("break_parameter_gradient", [z_arg, x_arg, p_arg], [grads],
                     "d(W F(b(x)))/dx along every breakpoint b (N_BREAKS * len(ORDER_PARAMETERS), ...).",
                     node_args=("_z",)))
    _meta(d)["piecewise"] = (len(breaks), len(branches), width, closed, moving)
    return out


def _teacher_kink_conditions(d: Derivation) -> list[sp.Expr]:
    """The kinked label's branch conditions (:func:`replica.symbolic.losses.kink_conditions`) in the
    Gaussians of the energetic average and the order parameters (empty without a kinked label; a
    channel's label is in the measure, not in the loss)."""
    m, env = d.model, d.energetic_potential
    if env.label is not None or m.loss is None:
        return []
    kinks = teacher_kinks(m.loss, list(m.hstar) + list(m.noise), list(m.h))
    out = []
    for k in kinks:
        for c in kink_conditions(k):
            e = sp.sympify(c).subs(env.intermediates)
            if e.free_symbols and not any(sp.simplify(e - o) == 0 for o in out):
                out.append(e)
    return out


def _linear_free(branch: sp.Expr, h: sp.Symbol) -> bool:
    """A branch whose stationarity condition sympy solved to nothing (e.g. a constant slope with no
    root): its only candidates are the interval ends, which is exact."""
    try:
        return sp.Poly(sp.diff(branch, h), h).degree() <= 2
    except (sp.PolynomialError, sp.GeneratorsNeeded):
        return False


def _meta(d: Derivation) -> dict:
    """Sizes the function builders found, for the module header (kept on the derivation)."""
    return d.__dict__.setdefault("_codegen_meta", {})


def _kink_rule_functions(d: Derivation, z_arg, x_arg, p_arg, tests) -> list[Function]:
    """What the kink-aware quadrature (:mod:`replica.numeric.kinks`) needs of a channel model with a
    one-dimensional prox: where the label law changes (``channel_transitions``), where the prox
    has kinks (``prox_kinks``: ``omega = b + V l'(b)`` for every breakpoint and branch, a superset
    of the true kinks), the loss's slope and curvature (``loss_profile``, to resolve smooth losses
    at their own scale) and the discontinuities of the test integrands (``test_breaks``), all in
    the prox centre ``omega``, plus ``omega = centre_of(z)`` itself."""
    env = d.energetic_potential
    m = d.model
    F = Function.make
    h = env.variables[0]
    center = prox_center_symbols(m)[0, 0]
    inter = env.intermediates
    x_syms, params = d.order_symbols, m.parameter_symbols
    out = []
    if env.transitions:
        out.append(F("channel_transitions", [x_arg, p_arg],
                     [[c for c, _ in env.transitions], [w for _, w in env.transitions]],
                     "Centres and widths (in z) where the label law changes (N_TRANSITIONS each)."))
    loss = m.loss
    pw = analyse(loss, h, discrete={env.label} | set(env.discrete))
    branches = pw.branches if pw is not None else [loss]
    slope = [sp.diff(b, h) for b in branches]
    V = [s for s in x_syms if d.order_parameters.family_of(s) == "V"][0]
    kinks = []
    if pw is not None:
        for b in pw.breakpoints:
            kinks += [b + V * g.subs(h, b) for g in slope]
    full = pw.expr if pw is not None else loss
    g = sp.diff(full, h)
    label_arg = ("_z", list(z_arg[1]))
    out.append(F("prox_kinks", [label_arg, x_arg, p_arg], [kinks or [sp.nan]],
                 "Prox centres omega = b + V l'(b) at every breakpoint b and branch (N_PROX_KINKS, ...).",
                 node_args=("_z",)))
    out.append(F("loss_profile", [("_h", [h]), label_arg, p_arg], [[g, sp.diff(g, h)]],
                 "dl/dh and d2l/dh2 of the loss at h (label in z).", node_args=("_h", "_z")))
    tb = []
    for o in m.observables:
        if isinstance(o, TestObservable):
            pwo = analyse(sp.sympify(o.expr).subs(h, center), center, discrete={env.label} | set(env.discrete))
            if pwo is not None:
                tb += pwo.breakpoints
    out.append(F("test_breaks", [label_arg, p_arg], [tb or [sp.nan]],
                 "Discontinuities and kinks of the test integrands in omega (N_TEST_BREAKS, ...).", node_args=("_z",)))
    out.append(F("center_of", [z_arg, x_arg], [inter[center]], "The prox centre omega at the nodes z.",
                 node_args=("_z",)))
    _meta(d)["kinks"] = (len(env.transitions), max(len(kinks), 1), max(len(tb), 1))
    return out


def _entropic_envelope_functions(d: Derivation, xh_arg, p_arg) -> list[Function]:
    """Functions of a Moreau-envelope entropic potential (non-quadratic regularizer).

    ``entropic_from_gradient`` maps ``dPsi_w/dxhat`` to the order parameters (the linear
    map of the trace potential); the bracket, its envelope gradient in ``xhat`` and, when
    sympy found the proximal map, ``entropic_argmin`` in closed form; otherwise
    ``entropic_bracket_newton`` and ``entropic_starts`` for the numeric prox; and the entropic
    observables at the prox.
    """
    env = d.entropic_potential
    m = d.model
    sp_eqs = d.saddle_point
    w_arg = ("_w", env.variables)
    zw_arg = ("_zw", env.gaussians)
    _check_names([*env.variables, *env.gaussians])
    B = env.full_bracket
    ph = [d.entropic_placeholders[s] for s in d.conjugate_symbols]
    F = Function.make
    out = [
        F("entropic_from_gradient", [("_dpsi_w", ph), ("_p", [])], [[eq.rhs for eq in sp_eqs.entropic]],
          "Order parameters from dPsi_w/dxhat: x = -K^{-T} grad_xhat Psi_w."),
        F("entropic_bracket", [w_arg, zw_arg, xh_arg, p_arg], [B],
          "The entropic Moreau bracket B(w; xi, tau, xhat) at every node.", node_args=("_w", "_zw")),
        F("entropic_parameter_gradient", [w_arg, zw_arg, xh_arg, p_arg],
          [[sp_eqs.entropic_gradient[q] for q in ph]],
          "dB/dxhat at fixed w (envelope theorem): dPsi_w/dxhat = -E[dB/dxhat].", node_args=("_w", "_zw")),
        F("entropic_validity", [xh_arg, p_arg], [list(env.validity.values())],
          "Quantities that must be positive for the entropic envelope (ENTROPIC_VALIDITY)."),
    ]
    out += entropic_prox_functions(env, w_arg, zw_arg, xh_arg, p_arg)
    reg = m.regularizer
    out.append(F("regularizer", [("_w", reg.w), ("_p", m.parameter_symbols)], [sp.sympify(reg.expr)],
                 "The penalty r(w) of one weight row (w: (r, ...)), for the convexity check at solve time.",
                 node_args=("_w",)))
    if m.r == 1 and len(m.data.atoms) == 1:
        # one weight and one atom: the bracket depends on the Gaussians only through the field
        # Z = mu + a . z, and the prox has kinks at Z = A b + r'(b) for every breakpoint b of r
        Z = list(env.intermediates.values())[0]
        zeros = {g: 0 for g in env.gaussians}
        field_rows = [Z.subs(zeros)] + [sp.diff(Z, g) for g in env.gaussians]
        pw = analyse(reg.expr, reg.w[0], what="regularizer")
        kinks = []
        if pw is not None:
            A = env.curvatures[0]
            slopes = [sp.diff(b, reg.w[0]) for b in pw.branches]
            for b in pw.breakpoints:
                kinks += [A * b + g.subs(reg.w[0], b) for g in slopes]
        out.append(F("entropic_field", [xh_arg, p_arg], [field_rows],
                     "mu and a of the entropic field Z = mu + a . z (1 + len(ENTROPIC_GAUSSIANS))."))
        out.append(F("entropic_kinks", [xh_arg, p_arg], [kinks or [sp.nan]],
                     "Fields Z = A b + r'(b) where the entropic prox has kinks (N_ENTROPIC_KINKS)."))
        _meta(d)["entropic_kinks"] = max(len(kinks), 1)
    ent = [o for o in m.observables if isinstance(o, EntropicObservable)]
    if ent:
        r = m.r
        blocks = []
        for o in ent:
            total = sp.Integer(0)
            for k, atom in enumerate(m.data.atoms):  # one block of weight variables per atom
                w_k = env.variables[k * r:(k + 1) * r]
                total += sp.sympify(atom.weight) * sp.sympify(o.expr).subs(dict(zip(o.w, w_k)))
            blocks.append(total)
        out.append(F("entropic_observables", [w_arg, zw_arg, xh_arg, p_arg], [blocks],
                     "Integrands of the entropic observables (ENTROPIC_OBSERVABLES order) at the entropic "
                     "minimiser w, summed over the atoms with their weights.", node_args=("_w", "_zw")))
    return out


def entropic_prox_functions(env: GaussianMoreauEnvelope, w_arg, zw_arg, xh_arg, p_arg) -> list[Function]:
    """The entropic bracket's minimiser: ``entropic_argmin`` in closed form where sympy found the
    penalty's proximal map, else ``entropic_bracket_newton`` and ``entropic_starts`` for the numeric prox."""
    F = Function.make
    if env.argmin is not None:
        return [F("entropic_argmin", [zw_arg, xh_arg, p_arg], [[e.subs(env.intermediates) for e in env.argmin]],
                  "Closed-form minimiser of the entropic bracket (the regularizer's proximal map).",
                  node_args=("_zw",))]
    B = env.full_bracket
    grad = [sp.diff(B, s) for s in env.variables]
    hess = [sp.diff(g, s) for g in grad for s in env.variables]
    return [F("entropic_bracket_newton", [w_arg, zw_arg, xh_arg, p_arg], [B, grad, hess],
              "B, dB/dw and d2B/dw2 (flattened) for the numeric prox.", node_args=("_w", "_zw")),
            F("entropic_starts", [zw_arg, xh_arg, p_arg],
              [[sp.sympify(e).subs(env.intermediates) for st in env.starts for e in st]],
              "Starting points of the entropic prox.", node_args=("_zw",))]


# --------------------------------------------------------------------------- metadata
def _layout(d: Derivation) -> tuple[dict, dict, list]:
    """``FAMILIES`` (family -> order-vector indices), ``LAYOUT`` (name -> position) and the
    diagonal entries of ``q`` and ``V``."""
    x_syms = d.order_symbols
    families: dict[str, list[int]] = {}
    idx = 0
    for op in d.order_parameters.order_parameters():
        n = len(op.symbols)
        families.setdefault(op.family, []).extend(range(idx, idx + n))
        idx += n
    layout = {}
    for op in d.order_parameters.order_parameters() + d.order_parameters.conjugates():
        M = op.matrix
        for i in range(M.shape[0]):
            for j in range(M.shape[1]):
                if op.symmetric and j < i:
                    continue
                # an orbit of the unit-symmetric ansatz is laid out at its first entry
                layout.setdefault(M[i, j].name, (op.family, op.slot or op.token, i, j, M.shape[0], M.shape[1]))
    diag = []
    for op in d.order_parameters.order_parameters():
        if op.family in ("q", "V"):
            for i in range(op.matrix.shape[0]):
                k = x_syms.index(op.matrix[i, i])
                if k not in diag:
                    diag.append(k)
    assert set(families) <= set(ORDER_FAMILIES)
    return families, layout, diag


def _header(d: Derivation, declaration, helpers: Sequence[str]) -> str:
    m = d.model
    env = d.energetic_potential
    params = m.parameter_symbols
    families, layout, diag = _layout(d)
    sym = d.symmetries
    domains = {s.name: (dom.low, dom.high) for s, dom in m.domains.items()}
    tests = tuple(o.name for o in m.observables if isinstance(o, TestObservable))
    ents = tuple(o.name for o in m.observables if isinstance(o, EntropicObservable))
    stamp = current_stamp(declaration, "module")
    imports = f"\nfrom replica.interface.generated_model import {', '.join(helpers)}\n" if helpers else ""
    return f'''"""Generated by replica -- do not edit; regenerate with ``replica generate {m.name}``.

Model: {m.name}: {m.description}
Fields: L={m.L}, r={m.r}, r_t={m.r_t}. The model's mathematics only, each function once in kernel form
(replica.codegen.backends.KernelBackend): replica.interface.generated_model builds the vectorised functions
from them, replica.numeric.compiled the compiled per-node unit. Imports numpy only
(and the array helpers of replica.interface.generated_model). The functions of each factor (trace,
penalty, loss, channel, data law) come first, then the model's own; in the cache each factor's
are a kernel file of their own, shared with the models that generate the same code.
"""
# {stamp.line()}
import numpy as np
{imports}
MODEL = {m.name!r}
L, R, R_T = {m.L}, {m.r}, {m.r_t}
PARAMETERS = {tuple(s.name for s in params)!r}
DEFAULTS = {tuple(m.defaults[s] for s in params)!r}
DOMAINS = {domains!r}
ORDER_PARAMETERS = {tuple(s.name for s in d.order_symbols)!r}
CONJUGATES = {tuple(s.name for s in d.conjugate_symbols)!r}
FAMILIES = {families!r}
# name -> (family, token or None if shared, row, column, rows, columns)
LAYOUT = {layout!r}
SYMMETRIC_DIAGONAL = {tuple(diag)!r}
BRANCHES = {{k: tuple(v) for k, v in {dict((k, tuple(v)) for k, v in m.branches.items())!r}.items()}}
# (high, low): the branches whose free entropies cross (replica.phase compares them by default)
TRANSITION = {m.transition!r}
# the baseline the test error is compared with (alpha_l), if any
BASELINE = {m.baseline!r}
PROX_DIM = {len(env.variables)}
GAUSSIANS = {tuple(s.name for s in env.gaussians)!r}
N_STARTS = {len(env.starts)}
VALIDITY = {tuple(d.validity.keys())!r}
HAS_TARGET = {m.target is not None!r}
# observables besides the order parameters (replica.symbolic.observables); eps_g first
OBSERVABLES = {tuple(o.name for o in m.observables)!r}
TEST_OBSERVABLES = {tests!r}
ENTROPIC_OBSERVABLES = {ents!r}
N_OBSERVABLES = {len(tests)}
SIGN_FLIPS = {sym.sign_flips!r}
CONSTRAINTS = {tuple((c.parameter, c.message, c.relation.rel_op) for c in m.constraints)!r}
# (families that must be zero, indices of GAUSSIANS flipped): z[idx] -> -z[idx] leaves the
# minimum of the bracket and the gradients dF/dx of the other families unchanged
# (replica.symbolic.symmetries); MIRRORED: whether the flip maps the minimiser h to -h.
SYMMETRIES = {tuple((f.families, f.indices) for f in sym.folds)!r}
MIRRORED = {tuple(f.mirrored for f in sym.folds)!r}
# every atom of the spectral law has the same eigenvalues (else atom_eigenvalues(p) gives them)
ISOTROPIC_TOKENS = {_isotropic_tokens(m)!r}
''' + _unit_header(d) + _discrete_header(m, env) + _channel_header(d) + _entropic_header(d)


def _unit_header(d: Derivation) -> str:
    """The unit-symmetric ansatz (:mod:`replica.symbolic.permutations`); empty without one."""
    m, ops = d.model, d.order_parameters
    if ops.units is None:
        return ""
    x = d.order_symbols
    sizes = ops.orbit_sizes()
    ties = {b: tuple(tuple(x.index(s) for s in group) for group in ops.unit_ties(b)) for b in m.unit_branches}
    orbits: dict[str, list] = {}
    for op in ops.order_parameters() + ops.conjugates():
        M = op.matrix
        for i in range(M.shape[0]):
            for j in range(M.shape[1]):
                orbits.setdefault(M[i, j].name, []).append((i, j))
    return f"""# the unit-symmetric ansatz: blocks of exchangeable (student, teacher) units, the number of matrix
# entries each order parameter stands for (its orbit), and per unit branch the groups of order
# parameters (ORDER_PARAMETERS indices; the conjugates alike) it sets equal
UNIT_BLOCKS = {(m.unit_blocks.student, m.unit_blocks.teacher)!r}
UNIT_ANSATZ = {ops.units.kind!r}
ORBIT_SIZES = {tuple(sizes[s] for s in x)!r}
UNIT_TIES = {ties!r}
# every entry (row, column) of its token's matrix each order parameter and conjugate stands for
ORBITS = {dict((k, tuple(v)) for k, v in orbits.items())!r}
# generators of the unit group as permutations of z (GAUSSIANS positions) that leave the bracket
# invariant: a rule symmetric under them is folded by them (replica.numeric.integrators)
UNIT_PERMUTATIONS = {gaussian_permutations(d)!r}
"""


def _isotropic_tokens(m) -> bool:
    """Whether every atom of the model's spectral law has the same eigenvalues, symbolically."""
    return len({tuple(sp.simplify(sp.sympify(g)) for g in a.gamma) for a in m.data.atoms}) == 1


def _channel_header(d: Derivation) -> str:
    """Constants of a channel, a piecewise loss and state observables (empty for other models)."""
    m, env = d.model, d.energetic_potential
    meta = _meta(d)
    out = ""
    if env.label is not None:
        out += (f"# Teacher channel: z = (GAUSSIANS, DISCRETE, LABEL); the label takes LABEL_VALUES, each with\n"
                f"# weight one: its law W(y | z; x) = label_weight(z, x, p) multiplies min_h F (replica.symbolic.channels).\n"
                f"WEIGHTED = True\nLABEL = {env.label.name!r}\n"
                f"LABEL_VALUES = {tuple(float(v) for v in env.label_values)!r}\n"
                f"CHANNEL = {type(m.channel).__name__!r}\n")
    else:
        out += "WEIGHTED = False\n"
    if "kinks" in meta:
        nt, nk, ntb = meta["kinks"]
        out += f"KINK_RULE = True\nN_TRANSITIONS = {nt}\nN_PROX_KINKS = {nk}\nN_TEST_BREAKS = {ntb}\n"
    if "piecewise" in meta:
        nb, nbr, width, closed, moving = meta["piecewise"]
        out += (f"# Piecewise loss (replica.symbolic.losses): exact prox by replica.numeric.prox.piecewise_prox\n"
                f"PIECEWISE = True\nN_BREAKS = {nb}\nN_BRANCHES = {nbr}\nSTATIONARY_ROOTS = {width}\n"
                f"STATIONARY_CLOSED = {closed!r}\nMOVING_BREAKS = {moving!r}\n")
    if "teacher_kinks" in meta:
        out += (f"# A kinked label (Abs, Max of the teacher fields): teacher_kinks(z, x, p) changes sign where it\n"
                f"# changes branch (replica.numeric.kinks places panel boundaries there)\n"
                f"N_TEACHER_KINKS = {meta['teacher_kinks']}\n")
    states = tuple(o.name for o in m.observables if isinstance(o, StateObservable))
    if states:
        out += f"STATE_OBSERVABLES = {states!r}\n"
    return out


def _discrete_header(m, env) -> str:
    """Label constants of a model with token clusters (empty otherwise: modules unchanged)."""
    if not env.discrete:
        return ""
    configs = m.data.configurations()
    return (f"# Token clusters: z = (GAUSSIANS, DISCRETE); DISCRETE are one-hot label indicators e_(lc),\n"
            f"# one per slot (token l, cluster c) of SLOTS. Averages run over Gaussian nodes x label\n"
            f"# configurations: CONFIGURATIONS (values of DISCRETE), LABELS (cluster of every token,\n"
            f"# 0-based), probabilities label_probabilities(p).\n"
            f"SLOTS = {m.data.slot_labels!r}\n"
            f"DISCRETE = {tuple(s.name for s in env.discrete)!r}\n"
            f"CONFIGURATIONS = {tuple(c[2] for c in configs)!r}\n"
            f"LABELS = {tuple(c[0] for c in configs)!r}\n")


def _entropic_header(d: Derivation) -> str:
    env = d.entropic_potential
    if not isinstance(env, GaussianMoreauEnvelope):
        return 'ENTROPIC = "closed"\n'
    return (f'ENTROPIC = "envelope"\n'
            f"ENTROPIC_GAUSSIANS = {tuple(s.name for s in env.gaussians)!r}\n"
            f"ENTROPIC_DIM = {len(env.variables)}\n"
            f"ENTROPIC_ARGMIN = {env.argmin is not None!r}\n"
            f"ENTROPIC_N_STARTS = {len(env.starts)}\n"
            f"ENTROPIC_VALIDITY = {tuple(env.validity.keys())!r}\n"
            + (f"# one weight, one atom: the entropic average runs on a kink-aware rule along Z (replica.numeric.kinks)\n"
               f"ENTROPIC_KINK_RULE = True\nN_ENTROPIC_KINKS = {_meta(d)['entropic_kinks']}\n"
               if "entropic_kinks" in _meta(d) else ""))


# --------------------------------------------------------------------------- the module
#: the factor of the free entropy each generated function comes from: the kernel file it is written
#: into (:func:`generate_sources`). ``trace``: the trace potential and the linear maps it defines between
#: the order parameters and their conjugates (the layout of the fields); ``penalty``: the entropic side
#: (regulariser with the data's spectrum); ``loss``: the inner minimisation at a node (the bracket, loss
#: plus Moreau term, its Newton form, starts, breaks and kinks; with a target teacher the label it fits
#: is inside); ``channel``: the label's law and what it weights; ``data``: the data law's tables. The
#: functions not named here are the model's own (its observables, constraints, target).
FACTOR_OF = {
    **dict.fromkeys(("trace_potential", "energetic_update", "entropic_from_gradient", "validity"), "trace"),
    **dict.fromkeys(("entropic_update", "entropic_potential", "entropic_bracket", "entropic_parameter_gradient",
                     "entropic_validity", "entropic_argmin", "entropic_bracket_newton", "entropic_starts",
                     "regularizer", "entropic_field", "entropic_kinks"), "penalty"),
    **dict.fromkeys(("bracket", "bracket_newton", "prox_starts", "loss_breaks", "branch_index", "branch_newton",
                     "branch_stationary", "prox_kinks", "loss_profile", "center_of"), "loss"),
    **dict.fromkeys(("label_weight", "bracket_parameter_gradient", "break_parameter_gradient",
                     "channel_transitions", "teacher_kinks"), "channel"),
    **dict.fromkeys(("rho_bar", "atom_eigenvalues", "token_rho_bar", "label_probabilities"), "data"),
}
#: the order of the factors' kernels in a module
FACTORS = ("trace", "penalty", "loss", "channel", "data")


@dataclasses.dataclass(frozen=True)
class GeneratedSources:
    """A generated model as text: ``module``, the model's own file, which imports its factors'
    kernels, and ``kernels``, the text of each factor's kernel file by its key
    (:func:`~replica.interface.generated_model.kernel_key`: the factor and the hash of the text).
    :meth:`bundled` is the same model as one self-contained file."""

    module: str
    kernels: dict[str, str]
    bundle: str

    def bundled(self) -> str:
        """One file: the model's module with its factors' kernels written in place of their imports."""
        return self.bundle


def _kernel_file(factor: str, sources: Sequence[str]) -> str:
    """The text of a factor's kernel file: nothing model-specific, so that every model whose factor
    generates the same code writes the same bytes (and shares the file)."""
    body = "\n\n".join(sources)
    helpers = [h for h in HELPERS if f"{h}(" in body]
    imports = f"\nfrom replica.interface.generated_model import {', '.join(helpers)}\n" if helpers else ""
    return (f'''"""Kernels of a {factor} factor, generated by replica -- do not edit. Shared by every model whose
{factor} factor generates this code: the file is named by the hash of its text (replica.codegen.generator).
Each function in kernel form (replica.codegen.backends.KernelBackend).
"""
import numpy as np
{imports}

''' + body)


def generate_sources(derivation: Derivation, backends: Sequence[Backend] | Backend | None = None, *,
                     declaration: str | Path | None = None) -> GeneratedSources:
    """The numeric module of ``derivation`` as the model's own file and its factors' kernel files.

    With the default backend (:class:`~replica.codegen.backends.KernelBackend`) every function goes
    to the kernel file of the factor it comes from (:data:`FACTOR_OF`), the rest stays in the model's
    file, which also holds the metadata, the freshness stamp and the table of all functions
    (``FUNCTIONS``). Another backend's section is written whole into the model's file.
    ``backends``, ``declaration``: as for :func:`generate_module`.
    """
    if backends is None:
        backends = default_backends()
    elif isinstance(backends, Backend):
        backends = [backends]
    d = derivation
    if declaration is None:
        declaration = getattr(d.model, "declared_in", None)
    functions = model_functions(d)
    own_sections, groups, table = [], {f: [] for f in FACTORS}, ""
    own: list[str] = []
    for b in backends:
        if isinstance(b, KernelBackend):
            table, sources = b.sources(functions)
            for fn in functions:
                if sources[fn.name]:
                    (groups[FACTOR_OF[fn.name]] if fn.name in FACTOR_OF else own).append(sources[fn.name])
        else:
            section = b.section(functions)
            if section:
                own_sections.append(section)
    kernels: dict[str, str] = {}
    imports, inline = [], []
    for factor in FACTORS:
        if not groups[factor]:
            continue
        text = _kernel_file(factor, groups[factor])
        key = kernel_key(factor, text)
        kernels[key] = text
        names = tuple(n for src in groups[factor] for n in re.findall(r"^def (\w+)\(", src, re.M))
        imports.append(f"{', '.join(names)}{',' if len(names) == 1 else ''} = factor_kernels(\n"
                       f"    __file__, {key!r}, {names!r})".replace("'", '"'))
        inline.append(f"# ---- the {factor} factor's kernels (kernels/{key}.py in the cache, shared)\n\n"
                      + "\n\n".join(groups[factor]))
    own_text = "\n\n".join(own + own_sections)
    mine = [h for h in HELPERS if f"{h}(" in own_text]
    everything = "\n\n".join(inline + ["# ---- the model's own functions\n\n" + own_text if own else own_text])
    head = (table + "\n\n") if table else ""
    split_body = head + (f"# the factors' kernels: files beside this module, named by factor and the hash of their "
                         f"text,\n# shared by every model whose factor generates the same code\n"
                         f"from replica.interface.generated_model import factor_kernels\n\n"
                         + "\n".join(imports) + "\n\n\n" if imports else "") + own_text
    bundle = _header(d, declaration, [h for h in HELPERS if f"{h}(" in everything]) + "\n\n" + head + everything
    return GeneratedSources(_header(d, declaration, mine) + "\n\n" + split_body, kernels, bundle)


def generate_module(derivation: Derivation, backends: Sequence[Backend] | Backend | None = None, *,
                    declaration: str | Path | None = None) -> str:
    """Source code of the numeric module for ``derivation``, one self-contained file (the factors'
    kernels written in place: :meth:`GeneratedSources.bundled`).

    ``backends``: the code-generation backends whose sections the module gets (default the
    kernels, :func:`~replica.codegen.backends.default_backends`, which
    :mod:`replica.interface.generated_model` requires). ``declaration``: the declaration file (default
    ``model.declared_in``, set by :func:`replica.registry.load_model`), whose hash the module's
    freshness stamp records.
    """
    return generate_sources(derivation, backends, declaration=declaration).bundled()


#: the helpers a kernel may call (see :class:`~replica.codegen.backends.KernelBackend`)
HELPERS = ("_bvn", "_erfc", "_exp", "_ndtr", "_where")


def write_module(derivation: Derivation, path: str | Path,
                 backends: Sequence[Backend] | Backend | None = None, *,
                 declaration: str | Path | None = None, shared_kernels: bool = False) -> Path:
    """Generate the module and write it to ``path`` (its folder is created if missing; every file
    appears whole or not at all). :func:`replica.registry.load_module` writes into the cache of
    generated modules with ``shared_kernels=True``: the model's own file at ``path`` and its factors'
    kernels under ``kernels/`` beside it, one file per factor named by the hash of its text (a file
    already there is the same text and is kept). Otherwise (``replica generate MODEL --out FILE.py``)
    one self-contained file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sources = generate_sources(derivation, backends, declaration=declaration)
    if not shared_kernels:
        # atomic: a concurrent reader sees the old or the new module, never half of one
        return atomic_write_text(path, sources.bundled())
    for key, text in sources.kernels.items():
        target = kernel_path(path, key)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not (target.exists() and target.read_text(encoding="utf-8") == text):
            atomic_write_text(target, text)
    return atomic_write_text(path, sources.module)

"""The 1RSB module of a model: :class:`~replica.symbolic.rsb.RSBDerivation` -> kernels -> a module in the cache.

The zero-temperature 1RSB saddle point (:mod:`replica.symbolic.rsb`) needs, besides its own trace and
entropic sides, the same *bracket* as the replica-symmetric theory at the nodes of a nested Gaussian
average: its minimiser (the global prox), its value (the Moreau envelope ``M``) and its derivatives in
the 1RSB order parameters at fixed ``h`` (envelope theorem). :func:`rsb_functions` lists them as
backend-neutral :class:`~replica.codegen.backends.Function` specs under the names the replica-symmetric
modules use (``bracket``, ``bracket_newton``, ``bracket_parameter_gradient``, ``prox_starts``, the
piecewise prox's ``loss_breaks`` ...), so that :mod:`replica.numeric.prox` and the compiled kernels of
:mod:`replica.numeric.kernels` minimise it unchanged; the nodes ``z`` are the outer Gaussians, then the
inner ones (``INNER``), then a channel's label. Without a channel ``bracket_parameter_gradient`` is
``dF/dx``; with one, the label law ``W`` (``label_weight``) depends on the outer Gaussians only and its
gradient ``label_weight_gradient`` is separate (``dPsi_y/dx`` needs ``dW/dx (1/m) log E exp(-m M)``).

:func:`replica.registry.rsb.load_rsb_module` builds it into the cache (named by the declaration's and this
generator's hashes, so that a stale one is never read) on first use and reads it.
"""
from __future__ import annotations

import dataclasses

import sympy as sp

from ..artifacts.freshness import current_stamp
from ..symbolic.rsb import NestedEnvelope, RSBDerivation
from ..symbolic.losses import kinked_label_derivative
from .backends import Function, KernelBackend, NodeForm
from .generator import (HELPERS, _check_names, _meta, _piecewise_functions, _teacher_kink_conditions,
                        entropic_prox_functions)

#: the artifact kind of the 1RSB modules (:data:`replica.artifacts.freshness.WRITERS`)
KIND = "rsb"


class _BracketView:
    """What the replica-symmetric piecewise-prox builders read of a derivation: the (unweighted)
    energetic envelope, the order symbols, the model."""

    def __init__(self, rd: RSBDerivation):
        env = rd.energetic_potential.envelope
        self.model = rd.model
        self.energetic_potential = dataclasses.replace(env, weight=None)
        self.order_symbols = rd.order_symbols


def rsb_functions(rd: RSBDerivation) -> list[Function]:
    """Every function of the 1RSB module (see the module docstring), in module order."""
    m = rd.model
    sp_eqs = rd.saddle_point
    x_syms, xh_syms, pm = rd.order_symbols, rd.conjugate_symbols, rd.parisi
    params = m.parameter_symbols
    nested: NestedEnvelope = rd.energetic_potential
    env = nested.envelope
    h_syms = env.variables
    z_syms = env.gaussians + ([env.label] if env.label is not None else [])
    _check_names([*x_syms, *xh_syms, pm, *params, *h_syms, *z_syms])
    x_arg, xh_arg, m_arg, p_arg = ("_x", x_syms), ("_xhat", xh_syms), ("_m", [pm]), ("_p", params)
    h_arg, z_arg = ("_h", h_syms), ("_z", z_syms)
    inter = env.intermediates
    view = _BracketView(rd)
    B = view.energetic_potential.full_bracket
    grad = [sp.diff(B, s) for s in h_syms]
    hess = [sp.diff(g, s) for g in grad for s in h_syms]
    pgrad = [sp_eqs.energetic_gradient[rd.gradient_placeholders[s]] for s in x_syms]
    if env.weight is not None:  # the gradient of F alone: the weight's is separate (module docstring)
        pgrad = view.energetic_potential.parameter_gradient(x_syms)
    label_kinks = _teacher_kink_conditions(view)
    if label_kinks:
        pgrad = [kinked_label_derivative(e) for e in pgrad]
    starts = [[sp.sympify(e).subs(inter) for e in s] for s in env.starts]
    weight = env.weight if env.weight is not None else sp.Integer(1)
    F = Function.make
    out: list[Function] = [
        F("trace_potential", [x_arg, xh_arg, m_arg], [rd.trace_potential], "Psi_t(x, xhat; m)."),
        F("trace_parisi", [x_arg, xh_arg], [sp_eqs.trace_parisi], "dPsi_t/dm (at fixed x, xhat)."),
        F("energetic_update", [("_dpsi_y", [rd.gradient_placeholders[s] for s in x_syms]), ("alpha", []), m_arg],
          [[eq.rhs for eq in sp_eqs.energetic]], "Conjugates from dPsi_y/dx: xhat = -alpha K(m)^{-1} grad_x Psi_y."),
    ]
    went = rd.entropic_potential
    if isinstance(went, NestedEnvelope):
        out += _entropic_envelope_functions(rd, xh_arg, m_arg, p_arg)
    else:
        out += [
            F("entropic_update", [xh_arg, m_arg, p_arg], [[eq.rhs for eq in sp_eqs.entropic]],
              "Order parameters from conjugates: x = -K(m)^{-T} grad_xhat Psi_w (closed form)."),
            F("entropic_potential", [xh_arg, m_arg, p_arg], [went], "Psi_w(xhat; m) (closed form)."),
            F("entropic_parisi", [xh_arg, m_arg, p_arg], [sp_eqs.entropic_parisi], "dPsi_w/dm (closed form)."),
        ]
    out += [
        F("bracket", [h_arg, z_arg, x_arg, p_arg], [B], "The Moreau bracket F(h; omega, h*, delta_q) at every node.",
          node_args=("_h", "_z")),
        F("bracket_newton", [h_arg, z_arg, x_arg, p_arg], [B, grad, hess],
          "F, dF/dh (PROX_DIM, ...) and d2F/dh2 flattened (PROX_DIM**2, ...).", node_args=("_h", "_z"),
          node=NodeForm("node_bracket_newton", (None, "_g", "_H"),
                        "F, dF/dh (into _g) and d2F/dh2 (row-major, into _H) at one node from its constants _c.",
                        split=("node_constants", "Subexpressions of the bracket that do not depend on h, for one "
                                                 "node, into _c."))),
        F("bracket_parameter_gradient", [h_arg, z_arg, x_arg, p_arg], [pgrad],
          "dF/dx at fixed h for every 1RSB order parameter (envelope theorem; without a channel's weight).",
          node_args=("_h", "_z"),
          node=NodeForm("node_parameter_gradient", ("_G",), "dF/dx at fixed h for one node (into _G).")),
        F("label_weight", [z_arg, x_arg, p_arg], [weight],
          "A channel's label law W(y | xi; x) (1 without a channel).", node_args=("_z",),
          node=NodeForm("node_weight", (None,), "W(y | xi; x) at one node.")),
        F("prox_starts", [z_arg, x_arg, p_arg], [[e for s in starts for e in s]],
          "Starting points of the inner minimisation, shape (S * PROX_DIM, ...).", node_args=("_z",),
          node=NodeForm("node_starts", ("_out",), "Starting points of the inner minimisation for one node "
                                                 "(into _out, S * PROX_DIM).")),
        # the compiled unit's interface has a test-point leaf; the 1RSB module has no test integrand of its
        # own (the test observables are the replica-symmetric module's at q = q1)
        F("test_observables", [z_arg, x_arg, p_arg], [[sp.Integer(0)]], "Unused (see the module docstring).",
          node_args=("_z",), node=NodeForm("node_test_observables", ("_out",), "Unused.")),
        F("validity", [x_arg, p_arg], [list(rd.validity.values())],
          "Order-parameter quantities that must be positive (VALIDITY; q1 - q0 may vanish)."),
        F("conjugate_validity", [xh_arg, m_arg, p_arg], [list(rd.conjugate_validity.values()) or [sp.Integer(1)]],
          "Conjugate quantities that must be positive (CONJUGATE_VALIDITY)."),
    ]
    common = rd.common_gradient()
    if label_kinks:
        common = [kinked_label_derivative(e) for e in common]
    out.append(F("bracket_common_gradient", [h_arg, z_arg, x_arg, p_arg], [common],
                 "dF/dq0 + dF/dq1 at fixed h for every entry of q0 (regular where q1 = q0).", node_args=("_h", "_z")))
    if env.weight is not None:
        out.append(F("label_weight_gradient", [z_arg, x_arg, p_arg], [[sp.diff(weight, s) for s in x_syms]],
                     "dW/dx of a channel's label law (len(ORDER_PARAMETERS), ...).", node_args=("_z",)))
    if env.pieces is not None:
        out += _piecewise_functions(view, z_arg, x_arg, p_arg)
        if "piecewise" in _meta(view):
            _meta(rd)["piecewise"] = _meta(view)["piecewise"]
    if label_kinks:
        out.append(F("teacher_kinks", [z_arg, x_arg, p_arg], [label_kinks],
                     "Where a kinked label changes branch (N_TEACHER_KINKS, ...).", node_args=("_z",)))
        _meta(rd)["teacher_kinks"] = len(label_kinks)
    if env.pieces is not None:  # the exact piecewise prox runs on the numpy functions
        out = [dataclasses.replace(f, node=None) for f in out]
    return out


def _entropic_envelope_functions(rd: RSBDerivation, xh_arg, m_arg, p_arg) -> list[Function]:
    """A non-quadratic penalty: the map from ``dPsi_w/dxhat`` to ``x``, the entropic bracket, its
    parameter gradient and prox (closed form, or Newton's pieces)."""
    nested: NestedEnvelope = rd.entropic_potential
    env = nested.envelope
    sp_eqs = rd.saddle_point
    w_arg, zw_arg = ("_w", env.variables), ("_zw", env.gaussians)
    _check_names([*env.variables, *env.gaussians])
    B = env.full_bracket
    ph = [rd.entropic_placeholders[s] for s in rd.conjugate_symbols]
    F = Function.make
    out = [
        F("entropic_from_gradient", [("_dpsi_w", ph), m_arg], [[eq.rhs for eq in sp_eqs.entropic]],
          "Order parameters from dPsi_w/dxhat: x = -K(m)^{-T} grad_xhat Psi_w."),
        F("entropic_bracket", [w_arg, zw_arg, xh_arg, p_arg], [B], "The entropic bracket at every node.",
          node_args=("_w", "_zw")),
        F("entropic_parameter_gradient", [w_arg, zw_arg, xh_arg, p_arg],
          [[sp_eqs.entropic_gradient[q] for q in ph]], "dB/dxhat at fixed w.", node_args=("_w", "_zw")),
    ]
    return out + entropic_prox_functions(env, w_arg, zw_arg, xh_arg, p_arg)


def _header(rd: RSBDerivation, declaration) -> str:
    m = rd.model
    nested = rd.energetic_potential
    env = nested.envelope
    meta = _meta(rd)
    went = rd.entropic_potential
    stamp = current_stamp(declaration, KIND)
    lines = [
        f'"""Generated by replica -- do not edit: the zero-temperature 1RSB module of model {m.name}.',
        "",
        "Its nested averages run in replica.numeric.rsb; the functions are in kernel form",
        "(replica.codegen.backends.KernelBackend), built into vectorised ones by replica.numeric.rsb.",
        '"""',
        f"# {stamp.line()}",
        "import numpy as np",
        "",
        f"MODEL = {m.name + '_rsb1'!r}",
        f"BASE_MODEL = {m.name!r}",
        f"L, R, R_T = {m.L}, {m.r}, {m.r_t}",
        f"PARAMETERS = {tuple(s.name for s in m.parameter_symbols)!r}",
        f"ORDER_PARAMETERS = {tuple(s.name for s in rd.order_symbols)!r}",
        f"CONJUGATES = {tuple(s.name for s in rd.conjugate_symbols)!r}",
        f"FAMILIES = {_families(rd)!r}",
        f"PARISI = {rd.parisi.name!r}",
        f"PROX_DIM = {len(env.variables)}",
        f"GAUSSIANS = {tuple(s.name for s in env.gaussians)!r}",
        f"INNER = {tuple(s.name for s in nested.inner)!r}",
        f"N_STARTS = {len(env.starts)}",
        "N_OBSERVABLES = 1",
        f"VALIDITY = {tuple(rd.validity.keys())!r}",
        f"CONJUGATE_VALIDITY = {tuple(rd.conjugate_validity.keys()) or ('none',)!r}",
        f"WEIGHTED = {env.weight is not None!r}",
        f"LABEL_VALUES = {tuple(float(v) for v in env.label_values) if env.label is not None else None!r}",
        f"ENTROPIC = {'envelope' if isinstance(went, NestedEnvelope) else 'closed'!r}",
    ]
    if isinstance(went, NestedEnvelope):
        wenv = went.envelope
        lines += [f"ENTROPIC_GAUSSIANS = {tuple(s.name for s in wenv.gaussians)!r}",
                  f"ENTROPIC_INNER = {tuple(s.name for s in went.inner)!r}",
                  f"ENTROPIC_DIM = {len(wenv.variables)}",
                  f"ENTROPIC_ARGMIN = {wenv.argmin is not None!r}",
                  f"ENTROPIC_N_STARTS = {len(wenv.starts)}"]
    if "piecewise" in meta:
        nb, nbr, width, closed, moving = meta["piecewise"]
        lines += ["PIECEWISE = True", f"N_BREAKS = {nb}", f"N_BRANCHES = {nbr}", f"STATIONARY_ROOTS = {width}",
                  f"STATIONARY_CLOSED = {closed!r}", f"MOVING_BREAKS = {moving!r}"]
    else:
        lines.append("PIECEWISE = False")
    lines.append(f"N_TEACHER_KINKS = {meta.get('teacher_kinks', 0)}")
    return "\n".join(lines) + "\n"


def _families(rd: RSBDerivation) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, s in enumerate(rd.order_symbols):
        out.setdefault(rd.ops.family_of(s), []).append(i)
    return out


def generate_rsb_module(rd: RSBDerivation, declaration=None) -> str:
    """Source of the 1RSB module of ``rd`` (the kernel backend)."""
    if declaration is None:
        declaration = getattr(rd.model, "declared_in", None)
    body = KernelBackend().section(rsb_functions(rd))
    helpers = [h for h in HELPERS if f"{h}(" in body]
    imports = f"from replica.interface.generated_model import {', '.join(helpers)}\n" if helpers else ""
    return _header(rd, declaration) + imports + "\n\n" + body

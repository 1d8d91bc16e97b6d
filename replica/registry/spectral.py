"""The Gaussian covariate model's entropic potential for one eigen-mode, derived with sympy.

In the eigenbasis of the student covariance ``Ω`` a penalty diagonal in that basis makes the
entropic potential a sum of independent one-mode terms (:mod:`replica.numeric.spectrum`). One mode with
eigenvalue ``γ`` and teacher projection ``t = e_kᵀ Φᵀ θ`` is the entropic problem of docs/explanation/theory.md §3
with a single atom: curvature ``A = γ V̂``, noise ``B = γ q̂`` and field ``b = θ̂ t`` (no mean,
``π = 0``), and for an l2 penalty ``r(w) = ½ wᵀ Λ w``

    ψ(γ, t) = ½ tr[(Λ + A)⁻¹ (B + b bᵀ)],

the same Gaussian integral as :func:`replica.symbolic.potentials.entropic_potential`, with the
teacher's projection ``t`` a number of the mode instead of an iid Gaussian. sympy writes ``ψ``
and its derivatives by the conjugates from the declaration (``Λ`` is the model's regularizer,
the conjugates its order parameters); :func:`mode_functions` turns them into numpy functions of
arrays of modes, which :class:`replica.numeric.spectrum.SpectralEntropic` sums.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from ..errors import ParameterError
from ..symbolic.order_parameters import OrderParameters
from ..symbolic.regularizers import L2, SeparableRegularizer
from ..interface.generated_model import GeneratedModel
from ..numeric.spectrum import GaussianEquivalence, ModeFunctions, Spectrum, gaussian_equivalence, \
    spectral_envelope_module, spectral_module
from ..symbolic.symbols import symbol

#: the eigenvalue ``γ`` of one mode and the teacher's projection ``t`` on it
GAMMA = symbol("gamma_k", r"\gamma_k")
PROJECTION = symbol("t_k", r"t_k")


@dataclass(frozen=True)
class ModeTerm:
    """The per-mode entropic term of a model: ``potential`` ``ψ(γ, t; x̂)`` and its ``gradient`` by
    the conjugates (sympy), with the conjugate and parameter symbols they are written in."""

    conjugates: tuple[sp.Symbol, ...]
    parameters: tuple[sp.Symbol, ...]
    potential: sp.Expr
    gradient: tuple[sp.Expr, ...]


def mode_term(model) -> ModeTerm:
    """``ψ(γ, t)`` of one mode for a GLM declaration ``model`` (one token, l2 penalty).

    Raises :class:`ParameterError` naming ``spectrum`` for a model the spectral law does not fit
    (several tokens, token clusters, a non-quadratic penalty)."""
    if model.L != 1 or model.data.has_clusters:
        raise ParameterError("spectrum", f"{model.name}: a spectrum is the data law of a GLM (one token, "
                                         f"no clusters); this model has L={model.L}")
    reg = model.regularizer
    if not isinstance(reg, L2):
        raise ParameterError("spectrum", f"{model.name}: the penalty {type(reg).__name__} is neither quadratic "
                                         "nor separable: it is not diagonal in the modes")
    r, rt = model.r, model.r_t
    ops = OrderParameters(model.L, r, rt, model.reduction, slots=model.data.slot_labels, families=model.families)
    Lam = reg.matrix(r)
    t = sp.Matrix([PROJECTION] if rt == 1 else [symbol(f"t_k_{j + 1}", rf"t_{{k,{j + 1}}}") for j in range(rt)])
    A = GAMMA * ops.slot("Vhat", 0)
    B = GAMMA * ops.slot("qhat", 0)
    b = ops.slot("thetahat", 0) * t
    M = Lam + A
    Minv = M.inv() if r > 1 else sp.Matrix([[1 / M[0, 0]]])
    psi = sp.simplify((Minv * (B + b * b.T)).trace() / 2)
    conj = tuple(ops.conjugate_symbols())
    grad = tuple(sp.simplify(sp.diff(psi, c)) for c in conj)
    params = tuple(model.parameter_symbols)
    return ModeTerm(conj, params, psi, grad)


def mode_functions(model, parameter_names: tuple[str, ...]) -> ModeFunctions:
    """:func:`mode_term` of ``model`` as numpy functions ``f(*xhat, *p, gamma, t)`` with the
    parameters in ``parameter_names`` order (a generated module's ``PARAMETERS``)."""
    term = mode_term(model)
    by_name = {s.name: s for s in term.parameters}
    missing = [n for n in parameter_names if n not in by_name]
    if missing:
        raise ParameterError("spectrum", f"{model.name}: parameters {missing} are not in the declaration")
    params = [by_name[n] for n in parameter_names]
    args = [*term.conjugates, *params, GAMMA, PROJECTION]
    if model.r_t != 1:
        raise ParameterError("spectrum", f"{model.name}: a spectrum file gives one teacher projection per mode "
                                         f"(r_t = 1), this model has r_t = {model.r_t}")
    # the gradient in one function with its common subexpressions (λ + γ V̂ ...) computed once: one
    # pass over the modes per map evaluation
    potential = sp.lambdify(args, term.potential, "numpy")
    gradient = sp.lambdify(args, list(term.gradient), "numpy", cse=True)
    return ModeFunctions(tuple(c.name for c in term.conjugates), tuple(parameter_names), potential, gradient)


def gcm_module(module: GeneratedModel, spectrum: Spectrum) -> GeneratedModel:
    """The generated module ``module`` on the Gaussian covariate data law of ``spectrum``.

    An l2 penalty: the declaration of ``module.MODEL`` gives the per-mode term (:func:`mode_functions`),
    the module the energetic side (:func:`replica.numeric.spectrum.spectral_module`). A separable
    penalty of one weight per row (l1, elastic net, ...): the per-mode Moreau envelopes of the
    module's own prox (:func:`replica.numeric.spectrum.spectral_envelope_module`), where the penalty
    is diagonal in the modes. Any other penalty is refused with one line naming ``spectrum``.
    Imports sympy."""
    from .loader import load_model

    model = load_model(module.MODEL)
    reg = model.regularizer
    if isinstance(reg, SeparableRegularizer):
        if model.L != 1 or model.data.has_clusters:
            raise ParameterError("spectrum", f"{model.name}: a spectrum is the data law of a GLM (one token, "
                                             f"no clusters); this model has L={model.L}")
        if model.r != 1:
            raise ParameterError("spectrum", f"{model.name}: the penalty couples the r={model.r} weights of a "
                                             "coordinate; the spectral sums need one weight per mode")
        return spectral_envelope_module(module, spectrum)
    return spectral_module(module, spectrum, mode_functions(model, tuple(module.PARAMETERS)))


def activation_coefficients(activation: sp.Expr, variable: sp.Symbol) -> GaussianEquivalence:
    """κ₀, κ₁, κ* of a declared activation ``σ(variable)`` (e.g. ``sp.tanh(z)``, ``sp.Max(z, 0)``) by
    :func:`replica.numeric.spectrum.gaussian_equivalence`, on the pieces between the kinks and jumps sympy
    finds in it (the real roots of the arguments of ``Abs``, ``sign``, ``Heaviside``, of the differences
    of ``Max``/``Min`` arguments and of ``Piecewise`` conditions)."""
    expr = sp.sympify(activation)
    if expr.free_symbols - {variable}:
        raise ParameterError("activation", f"{expr} depends on {sorted(map(str, expr.free_symbols - {variable}))} "
                                           f"besides {variable}")
    where: list[sp.Expr] = []
    for node in sp.preorder_traversal(expr):
        if isinstance(node, (sp.Abs, sp.sign, sp.Heaviside)):
            where.append(node.args[0])
        elif isinstance(node, (sp.Max, sp.Min)):
            where += [a - b for i, a in enumerate(node.args) for b in node.args[i + 1:]]
        elif isinstance(node, sp.Piecewise):
            where += [c.lhs - c.rhs for _, c in node.args if isinstance(c, sp.core.relational.Relational)]
    cuts: set[float] = set()
    for w in where:
        try:
            roots = sp.solve(sp.Eq(w, 0), variable)
        except (NotImplementedError, ValueError):
            continue
        cuts |= {float(r) for r in roots if r.is_real}
    f = sp.lambdify(variable, expr, "numpy")
    return gaussian_equivalence(lambda g: float(f(g)), sorted(cuts))

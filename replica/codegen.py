"""Code generation: a :class:`~replica.derivation.Derivation` -> a plain numeric module.

Like ``pydy``'s ``generate_ode_function``, the generator is separated from the
derivation and has swappable backends (:class:`Backend`); the default
:class:`NumpyBackend` writes a readable, common-subexpression-eliminated Python
module that imports only numpy. The module is what :class:`replica.solver.Solver`
runs; it never imports sympy, so solving does not pay for symbolic work.

The generated module's contract (names are stable, see :data:`MODULE_API`):

* metadata: ``MODEL``, ``GENERATOR_VERSION``, ``SOURCE_HASH``, ``L, R, R_T``,
  ``PARAMETERS`` (names), ``DEFAULTS``, ``DOMAINS``, ``ORDER_PARAMETERS``,
  ``CONJUGATES``, ``FAMILIES`` (family -> indices into the order vector),
  ``SYMMETRIC_DIAGONAL`` (indices of diagonal entries of ``q`` and ``V``), ``BRANCHES``,
  ``PROX_DIM``, ``GAUSSIANS``, ``VALIDITY``;
* ``entropic_update(xhat, p) -> x`` and ``entropic_potential(xhat, p)``;
* ``energetic_update(dpsi_y, alpha) -> xhat`` (the linear map from the trace potential);
* ``trace_potential(x, xhat)``;
* ``bracket(h, z, x, p)``, ``bracket_newton(h, z, x, p) -> (F, dF/dh, d2F/dh2)``,
  ``bracket_parameter_gradient(h, z, x, p) -> dF/dx`` (envelope theorem);
* ``prox_starts(z, x, p) -> (S, PROX_DIM, ...)``;
* ``test_loss(z, x, p)`` (the loss at ``h = omega``: the integrand of ``eps_g``);
* ``validity(x, p)`` (quantities that must be positive, named in ``VALIDITY``);
* if the model has a target ``T``: ``target_entries(z, p)`` (``T(h*)`` entries with
  ``h*_l = rho_l^{1/2} eta_l``, ``z = eta``), ``rho_bar(p)``.

Arrays: ``x``/``xhat`` are 1-d in ``ORDER_PARAMETERS``/``CONJUGATES`` order, ``p`` in
``PARAMETERS`` order; ``h`` has shape ``(PROX_DIM, ...)`` and ``z`` shape
``(len(GAUSSIANS), ...)`` with broadcastable trailing node axes.
"""
from __future__ import annotations

import hashlib
import keyword
import textwrap
from pathlib import Path
from typing import Sequence

import sympy as sp
from sympy.printing.numpy import NumPyPrinter

from .derivation import Derivation
from .errors import DeclarationError
from .order_parameters import ORDER_FAMILIES
from .symbolic import cholesky_lower

GENERATOR_VERSION = "1.0.0"

MODULE_API = (
    "entropic_update", "entropic_potential", "energetic_update", "trace_potential", "bracket",
    "bracket_newton", "bracket_parameter_gradient", "prox_starts", "test_loss", "validity",
)


class Backend:
    """A code-generation backend: turns named expression blocks into source text."""

    name = "abstract"

    def function(self, name: str, args: Sequence[tuple[str, Sequence[sp.Symbol]]],
                 outputs: Sequence[Sequence[sp.Expr]], doc: str, node_args: Sequence[str] = ()) -> str:
        raise NotImplementedError


class _Printer(NumPyPrinter):
    """numpy printer writing ``np.`` instead of ``numpy.`` for readability."""

    def _module_format(self, fqn, register=True):
        out = super()._module_format(fqn, register)
        return "np." + out[len("numpy."):] if out.startswith("numpy.") else out

    def _print_exp(self, expr):
        # _exp caps the exponent (see the module header): derivatives of a saturated
        # softmax are ratios like exp(u) / (1 + exp(u))**2 that would be inf/inf.
        return f"_exp({self._print(expr.args[0])})"


class NumpyBackend(Backend):
    """Vectorised numpy code: every node array is processed at once, no Python loops."""

    name = "numpy"

    def __init__(self) -> None:
        self.printer = _Printer({"fully_qualified_modules": True, "inline": True,
                                 "allow_unknown_functions": False})

    def _p(self, e: sp.Expr) -> str:
        return self.printer.doprint(e)

    def function(self, name, args, outputs, doc, node_args=()):
        """``outputs`` is a list of output blocks returned in order (a tuple if several).

        A block that is a bare expression is returned as an array of the node shape (or
        a float without node arguments); a block that is a list is stacked on a new
        leading axis, even when it has a single entry.
        """
        blocks = [b if isinstance(b, list) else [b] for b in outputs]
        stacked = [isinstance(b, list) for b in outputs]
        flat = [sp.sympify(e) for block in blocks for e in block]
        replacements, reduced = sp.cse(flat, symbols=sp.numbered_symbols("_t"), optimizations="basic")
        lines = [f"def {name}({', '.join(a for a, _ in args)}):", textwrap.indent(f'"""{doc}"""', "    ")]
        used = set().union(*[e.free_symbols for e in flat]) if flat else set()
        used |= set().union(*[e.free_symbols for _, e in replacements]) if replacements else set()
        for arg, syms in args:
            syms = list(syms)
            if not syms or not any(s in used for s in syms):
                continue
            names = [s.name if s in used else "_" for s in syms]
            target = ", ".join(names) + ("," if len(names) == 1 else "")
            lines.append(f"    {target} = {arg}")
        if node_args:
            shape_src = ", ".join(f"np.shape({a}[0])" for a in node_args)
            lines.append(f"    _shape = np.broadcast_shapes({shape_src})")
        for s, e in replacements:
            lines.append(f"    {s.name} = {self._p(e)}")
        pos = 0
        results = []
        for bi, (block, is_stack) in enumerate(zip(blocks, stacked)):
            exprs = reduced[pos:pos + len(block)]
            pos += len(block)
            var = f"_out{bi}"
            if not is_stack:
                if node_args:
                    lines.append(f"    {var} = np.empty(_shape)")
                    lines.append(f"    {var}[...] = {self._p(exprs[0])}")
                else:
                    lines.append(f"    {var} = {self._p(exprs[0])}")
            else:
                shape = f"({len(block)},) + _shape" if node_args else f"({len(block)},)"
                lines.append(f"    {var} = np.empty({shape})")
                for i, e in enumerate(exprs):
                    lines.append(f"    {var}[{i}] = {self._p(e)}")
            results.append(var)
        lines.append(f"    return {', '.join(results)}")
        return "\n".join(lines) + "\n"


def _check_names(symbols: Sequence[sp.Symbol]) -> None:
    """Every symbol is printed verbatim: it must be an identifier that clashes with nothing.

    Function arguments of the generated code are ``_x, _p, _h, ...`` and helpers start
    with ``_``, so user names only need to avoid ``_``-prefixes, ``np`` and ``alpha``.
    """
    seen: dict[str, sp.Symbol] = {}
    for s in symbols:
        if not s.name.isidentifier() or keyword.iskeyword(s.name) or s.name.startswith("_") \
                or s.name in ("np", "alpha"):
            raise DeclarationError(f"symbol name {s.name!r} cannot be used in generated code "
                                   "(need an identifier, not a keyword, not starting with '_', "
                                   "not 'np' or 'alpha'); rename it")
        if s.name in seen and seen[s.name] != s:
            raise DeclarationError(f"two different symbols are both named {s.name!r}; rename one")
        seen[s.name] = s


def source_hash(derivation: Derivation) -> str:
    """A hash of everything the generated code depends on (changes when the model does)."""
    d = derivation
    m = d.model
    parts = [GENERATOR_VERSION, m.name, sp.srepr(d.energetic_potential.full_bracket),
             sp.srepr(d.entropic_potential), sp.srepr(d.trace_potential),
             repr(sorted((str(k), v) for k, v in m.defaults.items())), repr(dict(m.branches))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def generate_module(derivation: Derivation, backend: Backend | None = None) -> str:
    """Source code of the numeric module for ``derivation`` (see the module docstring)."""
    backend = backend or NumpyBackend()
    d = derivation
    m = d.model
    sp_eqs = d.saddle_point
    x_syms, xh_syms = d.order_symbols, d.conjugate_symbols
    params = m.parameter_symbols
    env = d.energetic_potential
    h_syms = env.variables
    z_syms = env.gaussians
    _check_names([*x_syms, *xh_syms, *params, *h_syms, *z_syms])
    placeholders = [d.gradient_placeholders[s] for s in x_syms]

    x_arg = ("_x", x_syms)
    xh_arg = ("_xhat", xh_syms)
    p_arg = ("_p", params)
    h_arg = ("_h", h_syms)
    z_arg = ("_z", z_syms)
    B = env.full_bracket
    grad = [sp.diff(B, s) for s in h_syms]
    hess = [sp.diff(g, s) for g in grad for s in h_syms]
    pgrad = sp_eqs.energetic_gradient
    intermediates = env.intermediates
    omega = [e.subs(intermediates) for e in env.starts[0]]
    starts = [[sp.sympify(e).subs(intermediates) for e in s] for s in env.starts]
    test_loss = m.loss.subs({hs: c for hs, c in zip(h_syms, omega)}).subs(intermediates)

    chunks: list[str] = []
    chunks.append(backend.function(
        "entropic_update", [xh_arg, p_arg], [[eq.rhs for eq in sp_eqs.entropic]],
        "Order parameters from conjugates: x = -K^{-T} grad_xhat Psi_w (closed form)."))
    chunks.append(backend.function(
        "entropic_potential", [xh_arg, p_arg], [d.entropic_potential],
        "Psi_w(xhat)."))
    chunks.append(backend.function(
        "energetic_update", [("_dpsi_y", placeholders), ("alpha", [])],
        [[eq.rhs for eq in sp_eqs.energetic]],
        "Conjugates from dPsi_y/dx: xhat = -alpha K^{-1} grad_x Psi_y."))
    chunks.append(backend.function(
        "trace_potential", [x_arg, xh_arg], [d.trace_potential], "Psi_t(x, xhat)."))
    chunks.append(backend.function(
        "bracket", [h_arg, z_arg, x_arg, p_arg], [B],
        "The Moreau bracket F(h; omega, h*, V) at every node.", node_args=("_h", "_z")))
    chunks.append(backend.function(
        "bracket_newton", [h_arg, z_arg, x_arg, p_arg], [B, grad, hess],
        "F, dF/dh (PROX_DIM, ...) and d2F/dh2 flattened (PROX_DIM**2, ...).", node_args=("_h", "_z")))
    chunks.append(backend.function(
        "bracket_parameter_gradient", [h_arg, z_arg, x_arg, p_arg], [[pgrad[ph] for ph in placeholders]],
        "dF/dx at fixed h, for every order parameter (envelope theorem).", node_args=("_h", "_z")))
    chunks.append(backend.function(
        "prox_starts", [z_arg, x_arg, p_arg], [[e for s in starts for e in s]],
        "Starting points of the inner minimisation, shape (S * PROX_DIM, ...).", node_args=("_z",)))
    chunks.append(backend.function(
        "test_loss", [z_arg, x_arg, p_arg], [test_loss],
        "The loss at h = omega (h - m ~ N(0, q) correlated with h*): integrand of eps_g.",
        node_args=("_z",)))
    chunks.append(backend.function(
        "validity", [x_arg, p_arg], [list(d.validity.values())],
        "Quantities that must be positive (principal minors), named in VALIDITY."))
    has_target = m.target is not None
    if has_target:
        # Linear baseline (Result 5.1): T(h*) with independent h*_l ~ N(0, rho_l).
        eta_syms = z_syms[m.L * m.r:m.L * m.r + m.L * m.r_t]
        subs = {}
        for l in range(m.L):
            D = cholesky_lower(m.data.rho(l, m.r_t))
            eta_l = sp.Matrix(eta_syms[l * m.r_t:(l + 1) * m.r_t])
            hs_l = D * eta_l
            for k in range(m.r_t):
                subs[m.hstar[l, k]] = hs_l[k]
        chunks.append(backend.function(
            "target_entries", [("_z", eta_syms), p_arg], [[e.subs(subs) for e in m.target]],
            "T(h*) entries (row-major) with h*_l = rho_l^{1/2} eta_l, for the linear baseline.",
            node_args=("_z",)))
    chunks.append(backend.function(
        "rho_bar", [p_arg], [[m.data.rho_bar(l) for l in range(m.L)]],
        "rho_bar_l = tr Sigma_l / d for every token."))

    checks = list(m.constraints)
    chunks.append(backend.function(
        "parameter_checks", [p_arg], [[c.relation.lhs - c.relation.rhs for c in checks] or [sp.Integer(0)]],
        "lhs - rhs of every parameter constraint (see CONSTRAINTS)."))

    families = {}
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
                layout[M[i, j].name] = (op.family, op.token, i, j, M.shape[0], M.shape[1])
    diag = []
    for op in d.order_parameters.order_parameters():
        if op.family in ("q", "V"):
            for i in range(op.matrix.shape[0]):
                diag.append(x_syms.index(op.matrix[i, i]))
    domains = {s.name: (dom.low, dom.high) for s, dom in m.domains.items()}
    header = f'''"""Generated by replica {GENERATOR_VERSION} -- do not edit; regenerate with
``replica generate {m.name}``.

Model: {m.name}: {m.description}
Fields: L={m.L}, r={m.r}, r_t={m.r_t}. Numeric module of the replica-symmetric saddle point
(see replica.codegen for the function contract). Imports numpy only.
"""
import numpy as np

EXP_CAP = 300.0


def _exp(u):
    """exp with the exponent capped at EXP_CAP: exp(300) ~ 1e130 already saturates every
    softmax to machine precision, and the cap keeps ratios of powers of exp finite."""
    return np.exp(np.minimum(u, EXP_CAP))


MODEL = {m.name!r}
GENERATOR_VERSION = {GENERATOR_VERSION!r}
SOURCE_HASH = {source_hash(d)!r}
L, R, R_T = {m.L}, {m.r}, {m.r_t}
PARAMETERS = {tuple(s.name for s in params)!r}
DEFAULTS = {tuple(m.defaults[s] for s in params)!r}
DOMAINS = {domains!r}
ORDER_PARAMETERS = {tuple(s.name for s in x_syms)!r}
CONJUGATES = {tuple(s.name for s in xh_syms)!r}
FAMILIES = {families!r}
# name -> (family, token or None if shared, row, column, rows, columns)
LAYOUT = {layout!r}
SYMMETRIC_DIAGONAL = {tuple(diag)!r}
BRANCHES = {{k: tuple(v) for k, v in {dict((k, tuple(v)) for k, v in m.branches.items())!r}.items()}}
PROX_DIM = {len(h_syms)}
GAUSSIANS = {tuple(s.name for s in z_syms)!r}
N_STARTS = {len(starts)}
VALIDITY = {tuple(d.validity.keys())!r}
HAS_TARGET = {has_target!r}
SIGN_FLIPS = {d.sign_flips!r}
CONSTRAINTS = {tuple((c.parameter, c.message, c.relation.rel_op) for c in checks)!r}
'''
    assert set(families) <= set(ORDER_FAMILIES)
    return header + "\n\n" + "\n\n".join(chunks)


def write_module(derivation: Derivation, path: str | Path | None = None,
                 backend: Backend | None = None) -> Path:
    """Generate and write the module (default ``derivations/generated/<model>.py``)."""
    if path is None:
        path = Path(__file__).resolve().parent.parent / "derivations" / "generated" / f"{derivation.model.name}.py"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(generate_module(derivation, backend))
    return path

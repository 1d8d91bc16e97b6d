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
* ``entropic_update(xhat, p) -> x`` and ``entropic_potential(xhat, p)`` (``ENTROPIC = "closed"``,
  a quadratic regularizer); for a general separable regularizer (``ENTROPIC = "envelope"``)
  instead ``entropic_from_gradient(dpsi_w, p)``, ``entropic_bracket``,
  ``entropic_parameter_gradient``, ``entropic_validity`` and ``entropic_argmin`` (closed-form
  prox) or ``entropic_bracket_newton`` / ``entropic_starts`` (numeric prox), averaged over
  ``ENTROPIC_GAUSSIANS`` by the solver;
* ``energetic_update(dpsi_y, alpha) -> xhat`` (the linear map from the trace potential);
* ``trace_potential(x, xhat)``;
* ``bracket(h, z, x, p)``, ``bracket_newton(h, z, x, p) -> (F, dF/dh, d2F/dh2)``,
  ``bracket_parameter_gradient(h, z, x, p) -> dF/dx`` (envelope theorem);
* ``prox_starts(z, x, p) -> (S, PROX_DIM, ...)``;
* ``test_loss(z, x, p)`` (the loss at ``h = omega``: the integrand of ``eps_g``);
* ``validity(x, p)`` (quantities that must be positive, named in ``VALIDITY``);
* if the model has a target ``T``: ``target_entries(z, p)`` (``T(h*)`` entries with
  ``h*_l = rho_l^{1/2} eta_l``, ``z = eta``), ``rho_bar(p)``.

* token clusters only (THEORY §6): ``z`` carries the one-hot label indicators ``DISCRETE``
  after the ``GAUSSIANS``; ``SLOTS`` (slot labels), ``CONFIGURATIONS`` (indicator values
  of every label configuration), ``LABELS`` (its cluster per token),
  ``label_probabilities(p)`` (their law) and ``token_rho_bar(z, p)`` (each token's
  ``rho_bar`` at a node). Averages run over Gaussian nodes x configurations
  (:mod:`replica.labels`). Modules without clusters define none of these;
* ``SYMMETRIES``: ``(families, gaussian indices)`` pairs: with those families pinned to
  zero, flipping the sign of those ``z`` entries leaves the minimum of the bracket and the
  other families' ``dF/dx`` unchanged (THEORY §5; used to fold quadrature rules);
* per-node scalar code (generator >= 1.1, :data:`NODE_API`, see :class:`NodeBackend` and
  :mod:`replica.kernels`): ``N_CONSTANTS``, ``node_constants(z, x, p, c)``,
  ``node_bracket_newton(h, c, g, H) -> F``, ``node_parameter_gradient(h, z, x, p, G)``,
  ``node_starts(z, x, p, out)``, ``node_test_loss(z, x, p)`` and the generic fused
  kernels ``node_prox_average`` / ``node_test_average``. Plain Python over ``math``;
  compiled with numba when it is installed.

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
from sympy.printing.pycode import PythonCodePrinter

from .derivation import Derivation
from .errors import DeclarationError
from .kernels import GENERIC_KERNELS
from .order_parameters import ORDER_FAMILIES
from .potentials import GaussianMoreauEnvelope, gaussian_symbols
from .symbolic import cholesky_lower

GENERATOR_VERSION = "1.1.0"

MODULE_API = (
    "entropic_update", "entropic_potential", "energetic_update", "trace_potential", "bracket",
    "bracket_newton", "bracket_parameter_gradient", "prox_starts", "test_loss", "validity",
)

#: per-node scalar functions (generator >= 1.1, see :class:`NodeBackend` and replica.kernels)
NODE_API = (
    "node_constants", "node_bracket_newton", "node_parameter_gradient", "node_starts",
    "node_test_loss", "node_direction", "node_newton", "node_prox_average", "node_test_average",
)


class Backend:
    """A code-generation backend: turns named expression blocks into source text."""

    name = "abstract"

    def function(self, name: str, args: Sequence[tuple[str, Sequence[sp.Symbol]]],
                 outputs: Sequence[Sequence[sp.Expr]], doc: str, node_args: Sequence[str] = ()) -> str:
        """Source of one generated function ``name(args) -> exprs`` in this backend's language."""
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


_E = sp.Function("_E")  # capped exponential in per-node code (printed as _sexp)


def _share_exponentials(expr: sp.Expr) -> sp.Expr:
    """``exp(k u) -> _E(u)**k`` for integers ``k >= 2``, every other ``exp(u) -> _E(u)``.

    Second derivatives of a softmax produce both ``exp(u)`` and ``exp(2u)``; written as
    powers of one ``_E(u)`` common-subexpression elimination computes one exponential.
    (sympy would fold ``exp(u)**2`` back into ``exp(2u)``, hence the opaque ``_E``.)
    """
    def repl(e):
        k, rest = e.args[0].as_content_primitive()
        if k.is_Integer and k >= 2:
            return _E(rest) ** int(k)
        return _E(e.args[0])

    return expr.replace(lambda e: isinstance(e, sp.exp), repl)


_R = sp.Function("_R")  # reciprocal in per-node code (printed as 1.0/(...))


def _share_reciprocals(expr: sp.Expr) -> sp.Expr:
    """``b**(-n) -> _R(b)**n`` for integers ``n >= 1``: one division per denominator.

    Derivatives of ``1/(1 + e^u)`` contain ``(1 + e^u)^{-1}, ^{-2}, ^{-3}, ^{-4}``; written as
    powers of one reciprocal, CSE turns three of the four divisions into products.
    """
    def repl(e):
        return _R(e.base) ** int(-e.exp)

    return expr.replace(lambda e: isinstance(e, sp.Pow) and e.exp.is_Integer and e.exp < 0, repl)


def _hoist(expr: sp.Expr, variables: set, table: dict) -> sp.Expr:
    """Replace the maximal subexpressions of ``expr`` free of ``variables`` by symbols.

    ``table`` maps each hoisted subexpression to its symbol. The terms of a sum or
    product that do not involve ``variables`` are grouped first, so that e.g. the target
    ``T(h*)`` inside ``(T(h*) - S(h))^2`` is computed once per node, not at every step.
    """
    if expr.is_Atom:
        return expr
    if not (expr.free_symbols & variables):
        if expr not in table:
            table[expr] = sp.Symbol(f"_k{len(table)}")
        return table[expr]
    if expr.is_Add or expr.is_Mul:
        const = [a for a in expr.args if not (a.free_symbols & variables)]
        var = [_hoist(a, variables, table) for a in expr.args if a.free_symbols & variables]
        if len(const) > 1 or (const and not const[0].is_Atom):
            const = [_hoist(expr.func(*const), variables, table)]
        return expr.func(*const, *var, evaluate=False)
    return expr.func(*[_hoist(a, variables, table) for a in expr.args])


class _ScalarPrinter(PythonCodePrinter):
    """Scalar Python (``math``) for one node: what numba compiles into a fused kernel."""

    def _print_Function(self, expr):
        if expr.func == _E:
            return f"_sexp({self._print(expr.args[0])})"
        if expr.func == _R:
            return f"(1.0/{self.parenthesize(expr.args[0], 1000)})"
        return super()._print_Function(expr)

    def _print_exp(self, expr):
        return f"_sexp({self._print(expr.args[0])})"

    def _print_Pow(self, expr, rational=False):
        b, e = expr.args
        # Small integer powers of a symbol as products: fast under numba, and never an
        # OverflowError in plain Python (float ** int raises, float * float gives inf).
        if e.is_Integer and 2 <= abs(int(e)) <= 4 and b.is_Symbol:
            prod = "*".join([self._print(b)] * abs(int(e)))
            return f"({prod})" if e > 0 else f"(1.0/({prod}))"
        if e == -1:
            return f"(1.0/{self.parenthesize(b, 1000)})"
        return super()._print_Pow(expr, rational)


class NodeBackend(Backend):
    """Per-node scalar code for the compiled kernels (see :mod:`replica.kernels`).

    Each function handles one quadrature node: arguments are 1-d sequences (``h``,
    ``z``, ``x``, ``p``), array outputs are filled in place, scalars are returned. The
    code is plain Python over ``math``; numba compiles it when available.
    """

    name = "node"

    def __init__(self) -> None:
        self.printer = _ScalarPrinter({"fully_qualified_modules": True, "inline": True})

    def _p(self, e: sp.Expr) -> str:
        return self.printer.doprint(e)

    @staticmethod
    def _loads(args, used) -> list[str]:
        lines = []
        for arg, syms in args:
            for i, s in enumerate(syms):
                if s in used:
                    lines.append(f"    {s.name} = {arg}[{i}]")
        return lines

    def function(self, name, args, outputs, doc, node_args=()):
        """``outputs``: list of ``(target, exprs)``; ``target`` None returns the single
        expression, otherwise the expressions are written into the array argument ``target``."""
        flat = [_share_reciprocals(_share_exponentials(sp.sympify(e))) for _, block in outputs for e in block]
        reps, reduced = sp.cse(flat, symbols=sp.numbered_symbols("_t"), optimizations="basic")
        used = set().union(*[e.free_symbols for e in flat]) if flat else set()
        targets = [t for t, _ in outputs if t is not None]
        lines = [f"def {name}({', '.join([a for a, _ in args] + targets)}):", f'    """{doc}"""']
        lines += self._loads(args, used)
        lines += [f"    {s.name} = {self._p(e)}" for s, e in reps]
        lines += self._outputs(outputs, reduced)
        return "\n".join(lines) + "\n"

    def _outputs(self, outputs, reduced) -> list[str]:
        lines, ret, pos = [], "0.0", 0
        for target, block in outputs:
            exprs = reduced[pos:pos + len(block)]
            pos += len(block)
            if target is None:
                ret = self._p(exprs[0])
            else:
                lines += [f"    {target}[{i}] = {self._p(e)}" for i, e in enumerate(exprs)]
        lines.append(f"    return {ret}")
        return lines

    def split_function(self, const_name, name, h_args, const_args, outputs, doc_const, doc):
        """Two functions: ``const_name(*const_args, _c)`` computes, once per node, every
        subexpression independent of ``h_args`` (see :func:`_hoist`) into ``_c``;
        ``name(_h, _c, *targets)`` evaluates the outputs for a given ``h``.
        Returns ``(source, number of constants)``."""
        hset = set(h_args[1])
        flat = [_share_exponentials(sp.sympify(e)) for _, block in outputs for e in block]
        table: dict = {}
        flat = [_share_reciprocals(_hoist(e, hset, table)) for e in flat]
        consts = list(table.items())
        # Constants: the hoisted expressions (one CSE over them, from z, x, p).
        creps, creduced = sp.cse([_share_reciprocals(e) for e, _ in consts],
                                 symbols=sp.numbered_symbols("_u"), optimizations="basic")
        # h-dependent part: one CSE over the outputs (in h and the constant symbols).
        reps, reduced = sp.cse(flat, symbols=sp.numbered_symbols("_t"), optimizations="basic")
        used_var = set().union(*[e.free_symbols for e in flat]) if flat else set()
        const_args_used = [s for _, syms in const_args for s in syms if s in used_var]
        stored = const_args_used + [k for _, k in consts if k in used_var]
        used_c = set().union(*[e.free_symbols for e, _ in consts]) if consts else set()
        lc = [f"def {const_name}({', '.join(a for a, _ in const_args)}, _c):", f'    """{doc_const}"""']
        lc += self._loads(const_args, used_c | set(const_args_used))
        lc += [f"    {s.name} = {self._p(e)}" for s, e in creps]
        lc += [f"    {k.name} = {self._p(e)}" for (_, k), e in zip(consts, creduced) if k in used_var]
        lc += [f"    _c[{i}] = {s.name}" for i, s in enumerate(stored)]
        lc.append("    return 0.0")
        targets = [t for t, _ in outputs if t is not None]
        lf = [f"def {name}({h_args[0]}, _c, {', '.join(targets)}):", f'    """{doc}"""']
        lf += [f"    {s.name} = {h_args[0]}[{i}]" for i, s in enumerate(h_args[1]) if s in used_var]
        lf += [f"    {s.name} = _c[{i}]" for i, s in enumerate(stored)]
        lf += [f"    {s.name} = {self._p(e)}" for s, e in reps]
        lf += self._outputs(outputs, reduced)
        return "\n".join(lc) + "\n\n\n" + "\n".join(lf) + "\n", len(stored)


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


def source_hash(derivation: Derivation) -> str:
    """A hash of everything the generated code depends on (changes when the model does)."""
    d = derivation
    m = d.model
    parts = [GENERATOR_VERSION, m.name, sp.srepr(d.energetic_potential.full_bracket),
             sp.srepr(getattr(d.entropic_potential, "full_bracket", d.entropic_potential)),
             sp.srepr(d.trace_potential),
             repr(sorted((str(k), v) for k, v in m.defaults.items())), repr(dict(m.branches))]
    if m.data.has_clusters:
        parts.append(repr([(c, sp.srepr(pr)) for c, pr, _ in m.data.configurations()]))
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
    z_syms = env.gaussians + env.discrete  # label indicators (token clusters) after the Gaussians
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
    went = d.entropic_potential
    if isinstance(went, GaussianMoreauEnvelope):
        chunks += _entropic_envelope_chunks(backend, d, xh_arg, p_arg)
        entropic_header = _entropic_envelope_header(d)
    else:
        chunks.append(backend.function(
            "entropic_update", [xh_arg, p_arg], [[eq.rhs for eq in sp_eqs.entropic]],
            "Order parameters from conjugates: x = -K^{-T} grad_xhat Psi_w (closed form)."))
        chunks.append(backend.function(
            "entropic_potential", [xh_arg, p_arg], [went],
            "Psi_w(xhat)."))
        entropic_header = 'ENTROPIC = "closed"\n'
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
            D = cholesky_lower(m.data.token_rho(l, m.r_t))
            eta_l = sp.Matrix(eta_syms[l * m.r_t:(l + 1) * m.r_t])
            hs_l = D * eta_l
            for k in range(m.r_t):
                subs[m.hstar[l, k]] = hs_l[k]
        chunks.append(backend.function(
            "target_entries", [("_z", eta_syms + env.discrete), p_arg], [[e.subs(subs) for e in m.target]],
            "T(h*) entries (row-major) with h*_l = rho_l^{1/2} eta_l, for the linear baseline."
            + (" z = (eta, DISCRETE)." if env.discrete else ""),
            node_args=("_z",)))
    if not m.data.has_clusters:
        chunks.append(backend.function(
            "rho_bar", [p_arg], [[m.data.rho_bar(l) for l in range(m.L)]],
            "rho_bar_l = tr Sigma_l / d for every token."))
    else:
        chunks.append(backend.function(
            "rho_bar", [p_arg], [[m.data.rho_bar(s) for s in range(m.data.S)]],
            "rho_bar_s = tr Sigma_s / d for every slot (token, cluster), in SLOTS order."))
        chunks.append(backend.function(
            "token_rho_bar", [("_z", env.discrete), p_arg], [[m.data.token_rho_bar(l) for l in range(m.L)]],
            "rho_bar of every token under the label configuration of the nodes (z = DISCRETE values).",
            node_args=("_z",)))
        chunks.append(backend.function(
            "label_probabilities", [p_arg], [[pr for _, pr, _ in m.data.configurations()]],
            "Probability of every label configuration (CONFIGURATIONS order)."))

    checks = list(m.constraints)
    chunks.append(backend.function(
        "parameter_checks", [p_arg], [[c.relation.lhs - c.relation.rhs for c in checks] or [sp.Integer(0)]],
        "lhs - rhs of every parameter constraint (see CONSTRAINTS)."))

    # Per-node scalar code for the compiled kernels (replica.kernels): the same bracket,
    # derivatives, envelope gradient, starts and test loss, one node at a time.
    node = NodeBackend()
    newton_src, n_constants = node.split_function(
        "node_constants", "node_bracket_newton", ("_h", h_syms), [z_arg, x_arg, p_arg],
        [(None, [B]), ("_g", grad), ("_H", hess)],
        "Subexpressions of the bracket that do not depend on h, for one node, into _c.",
        "F, dF/dh (into _g) and d2F/dh2 (row-major, into _H) at one node from its constants _c.")
    node_chunks = [newton_src]
    node_chunks.append(node.function(
        "node_parameter_gradient", [h_arg, z_arg, x_arg, p_arg], [("_G", [pgrad[ph] for ph in placeholders])],
        "dF/dx at fixed h for one node (into _G)."))
    node_chunks.append(node.function(
        "node_starts", [z_arg, x_arg, p_arg], [("_out", [e for s in starts for e in s])],
        "Starting points of the inner minimisation for one node (into _out, S * PROX_DIM)."))
    node_chunks.append(node.function(
        "node_test_loss", [z_arg, x_arg, p_arg], [(None, [test_loss])],
        "The loss at h = omega for one node."))
    node_chunks.append(GENERIC_KERNELS.strip("\n") + "\n")

    # z -> -z symmetries of the bracket (THEORY §5) that hold on a branch: with m = 0 and a
    # loss even in (h, h*), flipping (xi, eta) maps the minimiser h -> -h and leaves F and
    # dF/dx (except dF/dm) unchanged; with theta = 0 and a loss even in h*, flipping eta
    # leaves the bracket itself unchanged (except dF/dtheta).
    xi_syms, eta_syms_all = gaussian_symbols(m)
    xi_idx = tuple(z_syms.index(s) for s in xi_syms)
    eta_idx = tuple(z_syms.index(s) for s in eta_syms_all)
    symmetries = []
    if "m" in d.sign_flips:
        symmetries.append((("m",), tuple(sorted(xi_idx + eta_idx))))
    if "theta" in d.sign_flips:
        symmetries.append((("theta",), eta_idx))

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
                layout[M[i, j].name] = (op.family, op.slot or op.token, i, j, M.shape[0], M.shape[1])
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
(see replica.codegen for the function contract). Imports numpy (and math) only.
"""
import math

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
GAUSSIANS = {tuple(s.name for s in env.gaussians)!r}
N_STARTS = {len(starts)}
VALIDITY = {tuple(d.validity.keys())!r}
HAS_TARGET = {has_target!r}
SIGN_FLIPS = {d.sign_flips!r}
CONSTRAINTS = {tuple((c.parameter, c.message, c.relation.rel_op) for c in checks)!r}
# (families that must be zero, indices of GAUSSIANS flipped): z[idx] -> -z[idx] leaves the
# minimum of the bracket and the gradients dF/dx of the other families unchanged.
SYMMETRIES = {tuple(symmetries)!r}
''' + _discrete_header(m, env) + entropic_header
    node_header = f'''# ---------------------------------------------------------------------------------------
# Per-node kernels: scalar code for one quadrature node (math only) and the generic fused
# kernels of replica.kernels. Plain Python; replica.kernels.compiled() JIT-compiles them with
# numba when it is installed (the solver then uses node_prox_average instead of the numpy
# functions above).

N_CONSTANTS = {n_constants}


def _sexp(u):
    """Scalar exp with the exponent capped at EXP_CAP (see _exp)."""
    return math.exp(min(u, EXP_CAP))
'''
    assert set(families) <= set(ORDER_FAMILIES)
    return (header + "\n\n" + "\n\n".join(chunks) + "\n\n" + node_header + "\n\n"
            + "\n\n".join(node_chunks))


def _entropic_envelope_chunks(backend: Backend, d: Derivation, xh_arg, p_arg) -> list[str]:
    """Functions of a Moreau-envelope entropic potential (non-quadratic regularizer).

    ``entropic_from_gradient`` maps ``dPsi_w/dxhat`` to the order parameters (the linear
    map of the trace potential); the bracket, its envelope gradient in ``xhat`` and, when
    sympy found the proximal map, ``entropic_argmin`` in closed form; otherwise
    ``entropic_bracket_newton`` and ``entropic_starts`` for the numeric prox.
    """
    env = d.entropic_potential
    sp_eqs = d.saddle_point
    w_arg = ("_w", env.variables)
    zw_arg = ("_zw", env.gaussians)
    _check_names([*env.variables, *env.gaussians])
    B = env.full_bracket
    ph = [d.entropic_placeholders[s] for s in d.conjugate_symbols]
    out = [
        backend.function("entropic_from_gradient", [("_dpsi_w", ph), ("_p", [])],
                         [[eq.rhs for eq in sp_eqs.entropic]],
                         "Order parameters from dPsi_w/dxhat: x = -K^{-T} grad_xhat Psi_w."),
        backend.function("entropic_bracket", [w_arg, zw_arg, xh_arg, p_arg], [B],
                         "The entropic Moreau bracket B(w; xi, tau, xhat) at every node.",
                         node_args=("_w", "_zw")),
        backend.function("entropic_parameter_gradient", [w_arg, zw_arg, xh_arg, p_arg],
                         [[sp_eqs.entropic_gradient[q] for q in ph]],
                         "dB/dxhat at fixed w (envelope theorem): dPsi_w/dxhat = -E[dB/dxhat].",
                         node_args=("_w", "_zw")),
        backend.function("entropic_validity", [xh_arg, p_arg], [list(env.validity.values())],
                         "Quantities that must be positive for the entropic envelope (ENTROPIC_VALIDITY)."),
    ]
    if env.argmin is not None:
        out.append(backend.function(
            "entropic_argmin", [zw_arg, xh_arg, p_arg], [[e.subs(env.intermediates) for e in env.argmin]],
            "Closed-form minimiser of the entropic bracket (the regularizer's proximal map).",
            node_args=("_zw",)))
    else:
        grad = [sp.diff(B, s) for s in env.variables]
        hess = [sp.diff(g, s) for g in grad for s in env.variables]
        out.append(backend.function(
            "entropic_bracket_newton", [w_arg, zw_arg, xh_arg, p_arg], [B, grad, hess],
            "B, dB/dw and d2B/dw2 (flattened) for the numeric prox.", node_args=("_w", "_zw")))
        out.append(backend.function(
            "entropic_starts", [zw_arg, xh_arg, p_arg],
            [[sp.sympify(e).subs(env.intermediates) for st in env.starts for e in st]],
            "Starting points of the entropic prox.", node_args=("_zw",)))
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


def _entropic_envelope_header(d: Derivation) -> str:
    env = d.entropic_potential
    return (f'ENTROPIC = "envelope"\n'
            f"ENTROPIC_GAUSSIANS = {tuple(s.name for s in env.gaussians)!r}\n"
            f"ENTROPIC_DIM = {len(env.variables)}\n"
            f"ENTROPIC_ARGMIN = {env.argmin is not None!r}\n"
            f"ENTROPIC_N_STARTS = {len(env.starts)}\n"
            f"ENTROPIC_VALIDITY = {tuple(env.validity.keys())!r}\n")


def write_module(derivation: Derivation, path: str | Path | None = None,
                 backend: Backend | None = None) -> Path:
    """Generate and write the module (default ``derivations/generated/<model>.py``)."""
    if path is None:
        path = Path(__file__).resolve().parent.parent / "derivations" / "generated" / f"{derivation.model.name}.py"
    from .outputs import atomic_write_text

    path = Path(path)
    path.parent.mkdir(exist_ok=True)  # generated/ next to a model file; no deeper tree is created
    return atomic_write_text(path, generate_module(derivation, backend))

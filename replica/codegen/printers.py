"""The sympy printer of the generated kernels, and the rewrites before it.

* :class:`KernelPrinter` -- kernel code: numpy on node arrays and, compiled by numba, scalar code
  for one quadrature node (capped ``_exp``, small integer powers as products, one division per
  denominator).

:func:`share_exponentials`, :func:`share_reciprocals` and :func:`hoist` rewrite expressions
before common-subexpression elimination so that the per-node code computes each exponential,
reciprocal and ``h``-independent subexpression once.
"""
from __future__ import annotations

import sympy as sp
from sympy.printing.numpy import NumPyPrinter

from .dag import own_free_symbols, replace


_E = sp.Function("_E")  # capped exponential in per-node code (printed as _exp)


def share_exponentials(expr: sp.Expr) -> sp.Expr:
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

    return replace(expr, lambda e: isinstance(e, sp.exp), repl)


_R = sp.Function("_R")  # reciprocal in per-node code (printed as 1.0/(...))


def share_reciprocals(expr: sp.Expr) -> sp.Expr:
    """``b**(-n) -> _R(b)**n`` for integers ``n >= 1``: one division per denominator.

    Derivatives of ``1/(1 + e^u)`` contain ``(1 + e^u)^{-1}, ^{-2}, ^{-3}, ^{-4}``; written as
    powers of one reciprocal, CSE turns three of the four divisions into products.
    """
    def repl(e):
        return _R(e.base) ** int(-e.exp)

    return replace(expr, lambda e: isinstance(e, sp.Pow) and e.exp.is_Integer and e.exp < 0, repl)


def hoist(expr: sp.Expr, variables: set, table: dict) -> sp.Expr:
    """Replace the maximal subexpressions of ``expr`` free of ``variables`` by symbols.

    ``table`` maps each hoisted subexpression to its symbol. The terms of a sum or
    product that do not involve ``variables`` are grouped first, so that e.g. the target
    ``T(h*)`` inside ``(T(h*) - S(h))^2`` is computed once per node, not at every step.
    Each distinct subexpression is visited once (a repeated one gets the same result).
    """
    involves: dict = {}  # subexpression -> whether it involves ``variables``
    done: dict = {}

    def inv(e) -> bool:
        hit = involves.get(e)
        if hit is None:
            own = e.is_Atom or not e.args or own_free_symbols(type(e))
            hit = involves[e] = bool(e.free_symbols & variables) if own else any(inv(a) for a in e.args)
        return hit

    def do(e):
        if e.is_Atom:
            return e
        hit = done.get(e)
        if hit is not None:
            return hit
        if not inv(e):
            if e not in table:
                table[e] = sp.Symbol(f"_k{len(table)}")
            rv = table[e]
        elif e.is_Add or e.is_Mul:
            const = [a for a in e.args if not inv(a)]
            var = [do(a) for a in e.args if inv(a)]
            if len(const) > 1 or (const and not const[0].is_Atom):
                const = [do(e.func(*const))]
            rv = e.func(*const, *var, evaluate=False)
        else:
            rv = e.func(*[do(a) for a in e.args])
        done[e] = rv
        return rv

    return do(expr)


class KernelPrinter(NumPyPrinter):
    """Kernel code (:class:`~replica.codegen.backends.KernelBackend`): numpy on node arrays, and
    numba's scalar code for one node, from one text.

    Only ``np.`` functions that numba compiles for scalars are written, plus helpers that each
    side binds to its own implementation: ``_exp`` (the exponential with its argument capped at
    ``EXP_CAP``: derivatives of a saturated softmax are ratios like ``exp(u) / (1 + exp(u))**2``
    that would be inf/inf), ``_erfc``, ``_ndtr`` (the standard normal CDF of a channel's label
    law), ``_bvn`` (a three-class argmax's bivariate normal CDF) and ``_where(c, a, b)`` (a
    Piecewise, every branch evaluated as ``np.select`` would). Small integer powers of a symbol
    are written as products (fast under numba, exact on arrays); reciprocals as one division.
    """

    def _module_format(self, fqn, register=True):
        out = super()._module_format(fqn, register)
        return "np." + out[len("numpy."):] if out.startswith("numpy.") else out

    def _print_Function(self, expr):
        if expr.func == _E:
            return f"_exp({self._print(expr.args[0])})"
        if expr.func == _R:
            return f"(1.0/{self.parenthesize(expr.args[0], 1000)})"
        return super()._print_Function(expr)

    def _print_exp(self, expr):
        return f"_exp({self._print(expr.args[0])})"

    def _print_erfc(self, expr):
        return f"_erfc({self._print(expr.args[0])})"

    def _print_erf(self, expr):
        return f"(1.0 - _erfc({self._print(expr.args[0])}))"

    def _print_NormalCDF(self, expr):
        return f"_ndtr({self._print(expr.args[0])})"

    def _print_BivariateNormalCDF(self, expr):
        return f"_bvn({', '.join(self._print(a) for a in expr.args)})"

    def _print_Max(self, expr):
        # elementwise (sympy's default goes through functools.reduce, not imported here)
        out = self._print(expr.args[0])
        for a in expr.args[1:]:
            out = f"np.maximum({out}, {self._print(a)})"
        return out

    def _print_Min(self, expr):
        out = self._print(expr.args[0])
        for a in expr.args[1:]:
            out = f"np.minimum({out}, {self._print(a)})"
        return out

    def _print_Piecewise(self, expr):
        out = "np.nan"
        for e, c in reversed(expr.args):
            out = self._print(e) if c == sp.true else f"_where({self._print(c)}, {self._print(e)}, {out})"
        return out

    def _print_And(self, expr):
        return self._logical("np.logical_and", expr.args)

    def _print_Or(self, expr):
        return self._logical("np.logical_or", expr.args)

    def _print_Not(self, expr):
        return f"np.logical_not({self._print(expr.args[0])})"

    def _logical(self, f, args):
        out = self._print(args[0])
        for a in args[1:]:
            out = f"{f}({out}, {self._print(a)})"
        return out

    def _print_Pow(self, expr, rational=False):
        b, e = expr.args
        if e.is_Integer and 2 <= abs(int(e)) <= 4 and b.is_Symbol:
            prod = "*".join([self._print(b)] * abs(int(e)))
            return f"({prod})" if e > 0 else f"(1.0/({prod}))"
        if e == -1:
            return f"(1.0/{self.parenthesize(b, 1000)})"
        return super()._print_Pow(expr, rational)

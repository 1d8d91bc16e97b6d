"""The DAG-linear rewrites of code generation (replica.codegen.dag) equal sympy's own.

Code generation relies on this equality: the committed modules are compared byte for byte with a
fresh generation (tests/test_symbolic.py), and were generated with sympy's tree-walking versions
before these existed. Here each helper meets its sympy counterpart on expressions like the
generated ones: derivatives of a softmax with repeated subexpressions, label laws, piecewise
pieces.
"""
from __future__ import annotations

import importlib

import pytest
import sympy as sp

from replica.codegen import dag
from replica.codegen.printers import hoist, share_exponentials, share_reciprocals

cse_opts = importlib.import_module("sympy.simplify.cse_opts")
exprtools = importlib.import_module("sympy.core.exprtools")

h1, h2, w1, w2, q, V, m, z = sp.symbols("h1 h2 w1 w2 q V m z", real=True)


def _softmax_exprs():
    u1, u2 = h1 * w1 + m * z, h2 * w2 - q * z
    s = sp.exp(u1) / (sp.exp(u1) + sp.exp(2 * u2) + 1)
    F = (s - z) ** 2 / 2 + (h1 - q) ** 2 / (2 * V) + (h2 + m) ** 2 / (2 * V)
    g = [sp.diff(F, v) for v in (h1, h2)]
    H = [sp.diff(a, v) for a in g for v in (h1, h2)]
    cdf = sp.erfc(-(h1 - m) / sp.sqrt(2 * V)) / 2
    pw = sp.Piecewise((h1 - w1, h1 > w1), (0, True))
    return [F, *g, *H, cdf * F, pw * (1 - h1) - (q - m) * (w2 - w1)]


EXPRS = _softmax_exprs()


@pytest.mark.parametrize("k", range(len(EXPRS)))
def test_rewrites_equal_sympy(k):
    e = EXPRS[k]
    assert dag.sub_pre(e) == cse_opts.sub_pre(e)
    assert dag.factor_terms(e) == exprtools.factor_terms(e)
    assert dag.factor_terms(dag.sub_pre(e)) == exprtools.factor_terms(cse_opts.sub_pre(e))
    assert dag.content_primitive(e) == e.as_content_primitive(radical=False, clear=False)
    assert dag.free_symbols([e]) == e.free_symbols
    assert dag.atoms([e], sp.Add, sp.exp) == e.atoms(sp.Add, sp.exp)
    rule = {a: sp.Symbol(f"a{i}") for i, a in enumerate(sorted(e.atoms(sp.Add), key=sp.default_sort_key)[:3])}
    assert dag.xreplace(e, rule) == e.xreplace(rule)
    query = lambda x: isinstance(x, sp.Pow) and x.exp.is_Integer and x.exp < 0  # noqa: E731
    value = lambda x: sp.Function("R")(x.base) ** int(-x.exp)  # noqa: E731
    assert dag.replace(e, query, value) == e.replace(query, value)


def test_cse_equals_sympy_basic():
    got = dag.cse(EXPRS, sp.numbered_symbols("_t"))
    want = sp.cse(EXPRS, symbols=sp.numbered_symbols("_t"), optimizations="basic")
    assert got == want


def test_printer_rewrites_on_shared_trees():
    """share_exponentials / share_reciprocals / hoist give what the tree-walking versions gave."""
    E, R = sp.Function("_E"), sp.Function("_R")
    for e in EXPRS:
        want = e.replace(lambda x: isinstance(x, sp.exp),
                         lambda x: (E(x.args[0].as_content_primitive()[1]) ** int(x.args[0].as_content_primitive()[0])
                                    if x.args[0].as_content_primitive()[0].is_Integer
                                    and x.args[0].as_content_primitive()[0] >= 2 else E(x.args[0])))
        assert share_exponentials(e) == want
        want = e.replace(lambda x: isinstance(x, sp.Pow) and x.exp.is_Integer and x.exp < 0,
                         lambda x: R(x.base) ** int(-x.exp))
        assert share_reciprocals(e) == want
    smooth = EXPRS[:-1]  # the bracket's split (hoist) never sees a piecewise loss: it has no node leaves
    table: dict = {}
    ref: dict = {}
    assert [hoist(e, {h1, h2}, table) for e in smooth] == [_hoist_tree(e, {h1, h2}, ref) for e in smooth]
    assert list(table.items()) == list(ref.items())


def _hoist_tree(expr, variables, table):
    """replica.codegen.printers.hoist as it was before it kept a memo (the tree walk)."""
    if expr.is_Atom:
        return expr
    if not (expr.free_symbols & variables):
        if expr not in table:
            table[expr] = sp.Symbol(f"_k{len(table)}")
        return table[expr]
    if expr.is_Add or expr.is_Mul:
        const = [a for a in expr.args if not (a.free_symbols & variables)]
        var = [_hoist_tree(a, variables, table) for a in expr.args if a.free_symbols & variables]
        if len(const) > 1 or (const and not const[0].is_Atom):
            const = [_hoist_tree(expr.func(*const), variables, table)]
        return expr.func(*const, *var, evaluate=False)
    return expr.func(*[_hoist_tree(a, variables, table) for a in expr.args])

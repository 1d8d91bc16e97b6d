"""sympy's rewrites for code generation, done once per distinct subexpression.

The generated functions are derivatives of softmaxes, label laws and Moreau brackets: as trees
they are huge, as DAGs small (softmax_argmax3's second derivatives repeat a few thousand
distinct subexpressions millions of times). sympy's ``cse(..., optimizations="basic")``
preprocesses every expression with ``sub_pre`` (``y - x -> -(x - y)``) and ``factor_terms``,
and ``Basic.replace``, ``xreplace``, ``atoms`` and ``free_symbols`` all walk the *tree*: a
subexpression that occurs k times is rewritten k times (softmax_argmax3: 107 CPU-s of generation,
most of it in that cse and ``factor_terms``; 20 CPU-s with these, benchmarks/RESULTS.md).

The functions here are the same transformations with a memo keyed by the (hashable, structurally
compared) subexpression: each distinct one is done once. Every rewrite is a pure function of its
argument, so the results are equal to sympy's and the generated modules are the same byte for
byte (``tests/test_symbolic.py`` compares every committed module with a fresh generation; the
helpers' own test, tests/test_codegen_dag.py, compares them with sympy's on derivative-heavy
expressions). They follow sympy 1.14's ``cse_opts.sub_pre``, ``exprtools.factor_terms`` (default
arguments), ``Add/Mul/Pow.as_content_primitive`` and ``Basic.replace`` / ``_xreplace``; a sympy
that changes those changes the committed modules' text either way, which the byte-for-byte tests
catch.
"""
from __future__ import annotations

from typing import Callable, Iterable

import sympy as sp
from sympy import Add, Basic, Dummy, Mul, Pow, S
from sympy.core.exprtools import gcd_terms
from sympy.core.mul import _keep_coeff
from sympy.core.sorting import default_sort_key
from sympy.simplify.cse_opts import sub_post
from sympy.utilities.iterables import iterable


def nodes(exprs: Iterable) -> list:
    """Every distinct subexpression of ``exprs`` (the expressions included), each once."""
    seen: set = set()
    out = []
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if not isinstance(e, Basic) or e in seen:
            continue
        seen.add(e)
        out.append(e)
        stack.extend(e.args)
    return out


def atoms(exprs: Iterable, *types: type) -> set:
    """``set().union(*(e.atoms(*types) for e in exprs))`` for ``types`` given (sympy's
    ``atoms`` with types: the subexpressions that are instances of them)."""
    return {e for e in nodes(exprs) if isinstance(e, types)}


_OWN_FREE_SYMBOLS: dict = {}


def own_free_symbols(cls: type) -> bool:
    """Whether instances of ``cls`` define ``free_symbols`` otherwise than as the union over
    their arguments (``Basic``'s): symbols, derivatives, lambdas, ... (looked up in the MRO: a
    function class's metaclass has a ``free_symbols`` of its own)."""
    own = _OWN_FREE_SYMBOLS.get(cls)
    if own is None:
        owner = next(c for c in cls.__mro__ if "free_symbols" in c.__dict__)
        own = _OWN_FREE_SYMBOLS[cls] = owner is not Basic
    return own


def free_symbols(exprs: Iterable) -> set:
    """``set().union(*(e.free_symbols for e in exprs))``; a subexpression whose class has its
    own ``free_symbols`` (:func:`own_free_symbols`) answers for its subtree."""
    out: set = set()
    seen: set = set()
    stack = [e for e in exprs if isinstance(e, Basic)]
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if own_free_symbols(type(e)):
            out |= e.free_symbols
        else:
            stack.extend(a for a in e.args if isinstance(a, Basic))
    return out


def xreplace(expr, rule: dict, memo: dict | None = None):
    """``expr.xreplace(rule)``; ``memo`` (for this ``rule`` only) may be shared between calls."""
    if not rule:
        return expr
    memo = {} if memo is None else memo

    def do(e):  # sympy's Basic._xreplace: (result, whether a replacement occurred below)
        if e in rule:
            return rule[e], True
        hit = memo.get(e)
        if hit is not None:
            return hit
        args, changed = [], False
        for a in e.args:
            if isinstance(a, Basic):
                a, c = do(a)
                changed |= c
            args.append(a)
        rv = (e.func(*args), True) if changed else (e, False)
        memo[e] = rv
        return rv

    return do(expr)[0] if isinstance(expr, Basic) else expr


def replace(expr, query: Callable, value: Callable):
    """``expr.replace(query, value)`` for a callable query and value (sympy's ``walk``: args
    first, then ``value`` where ``query`` holds; simultaneous)."""
    memo: dict = {}

    def walk(rv):
        hit = memo.get(rv)
        if hit is not None:
            return hit
        key = rv
        args = getattr(rv, "args", None)
        if args is not None and args:
            newargs = tuple([walk(a) for a in args])
            if args != newargs:
                rv = rv.func(*newargs)
                # rv is something that was already matched (and changed): value is not applied again
                if any(rv == e and e != n for e, n in zip(args, newargs)):
                    memo[key] = rv
                    return rv
            if query(rv):
                v = value(rv)
                if v is not None and v != rv:
                    rv = v
        memo[key] = rv
        return rv

    return walk(expr)


def sub_pre(e):
    """sympy's ``cse_opts.sub_pre``: ``y - x -> -(x - y)`` where -1 can be extracted, and
    ``1*-1*(x - y)`` for the Adds that keep a leading minus."""
    adds = [a for a in atoms([e], Add) if a.could_extract_minus_sign()]
    reps = {}
    ignore = set()
    for a in adds:
        na = -a
        if na.is_Mul:  # e.g. MatExpr
            ignore.add(a)
            continue
        reps[a] = Mul._from_args([S.NegativeOne, na])
    e = xreplace(e, reps)
    if isinstance(e, Basic):
        negs = {}
        for a in sorted(atoms([e], Add), key=default_sort_key):
            if a in ignore:
                continue
            if a in reps:
                negs[a] = reps[a]
            elif a.could_extract_minus_sign():
                negs[a] = Mul._from_args([S.One, S.NegativeOne, -a])
        e = xreplace(e, negs)
    return e


def _owner(cls: type, name: str) -> type:
    return next(c for c in cls.__mro__ if name in c.__dict__)


def content_primitive(expr, memo: dict | None = None):
    """``expr.as_content_primitive(radical=False, clear=False)``: sympy's ``Add``, ``Mul`` and
    ``Pow`` methods, which recurse into the arguments, with each distinct argument done once
    (other classes answer themselves); ``memo`` may be shared between calls."""
    memo = {} if memo is None else memo

    def acp(e):
        hit = memo.get(e)
        if hit is not None:
            return hit
        owner = _owner(type(e), "as_content_primitive")
        if owner is Add:
            con, prim = e.func(*[_keep_coeff(*acp(a)) for a in e.args]).primitive()
            if not con.is_Integer and prim.is_Add:  # not clear
                con, d = con.as_numer_denom()
                _p = prim / d
                if any(a.as_coeff_Mul()[0].is_Integer for a in _p.args):
                    prim = _p
                else:
                    con /= d
            rv = con, prim
        elif owner is Mul:
            coef = S.One
            args = []
            for a in e.args:
                c, p = acp(a)
                coef *= c
                if p is not S.One:
                    args.append(p)
            rv = coef, e.func(*args)  # not _from_args: equal factors combine
        elif owner is Pow:
            rv = _pow_content_primitive(e, acp)
        else:
            rv = e.as_content_primitive(radical=False, clear=False)
        memo[e] = rv
        return rv

    return acp(expr)


def _pow_content_primitive(self, acp):
    """sympy's ``Pow.as_content_primitive`` (``radical=False, clear=False``), arguments by ``acp``."""
    b, e = self.as_base_exp()
    b = _keep_coeff(*acp(b))
    ce, pe = acp(e)
    if b.is_Rational:
        h, t = pe.as_coeff_Add()
        if h.is_Rational and b != S.Zero:
            ceh = ce * h
            c = self.func(b, ceh)
            r = S.Zero
            if not c.is_Rational:
                iceh, r = divmod(ceh.p, ceh.q)
                c = self.func(b, iceh)
            return c, self.func(b, _keep_coeff(ce, t + r / ce / ceh.q))
    e = _keep_coeff(ce, pe)
    if e.is_Rational and b.is_Mul:
        h, t = acp(b)  # h is positive
        c, m = self.func(h, e).as_coeff_Mul()  # so c is positive
        m, me = m.as_base_exp()
        if m is S.One or me == e:
            return c, self.func(_keep_coeff(m, t), e)
    return S.One, self.func(b, e)


def factor_terms(expr, memo: dict | None = None, contents: dict | None = None):
    """sympy's ``exprtools.factor_terms(expr)`` (``radical=False, clear=False, fraction=False,
    sign=True``); ``memo`` and :func:`content_primitive`'s ``contents`` may be shared between calls."""
    from sympy.concrete.summations import Sum
    from sympy.core.exprtools import _factor_sum_int
    from sympy.integrals.integrals import Integral

    memo = {} if memo is None else memo
    contents = {} if contents is None else contents

    def do(expr):
        is_iterable = iterable(expr)
        if not isinstance(expr, Basic) or expr.is_Atom:
            if is_iterable:
                return type(expr)([do(i) for i in expr])
            return expr
        hit = memo.get(expr)
        if hit is not None:
            return hit
        if expr.is_Pow or expr.is_Function or is_iterable or not hasattr(expr, "args_cnc"):
            args = expr.args
            newargs = tuple([do(i) for i in args])
            rv = expr if newargs == args else expr.func(*newargs)
        elif isinstance(expr, (Sum, Integral)):
            rv = _factor_sum_int(expr, radical=False, clear=False, fraction=False, sign=True)
        else:
            cont, p = content_primitive(expr, contents)
            if p.is_Add:
                list_args = [do(a) for a in Add.make_args(p)]
                # a common negative (if there), which gcd_terms does not remove
                if not any(a.as_coeff_Mul()[0].extract_multiplicatively(-1) is None for a in list_args):
                    cont = -cont
                    list_args = [-a for a in list_args]
                # exp(-(x+2)), which gcd_terms would change to exp(-x-2)
                special = {}
                for i, a in enumerate(list_args):
                    b, e = a.as_base_exp()
                    if e.is_Mul and e != Mul(*e.args):
                        list_args[i] = Dummy()
                        special[list_args[i]] = a
                p = Add._from_args(list_args)  # the order gcd_terms fixes
                p = gcd_terms(p, isprimitive=True, clear=False, fraction=False).xreplace(special)
            elif p.args:
                p = p.func(*[do(a) for a in p.args])
            rv = _keep_coeff(cont, p, clear=False, sign=True)
        memo[expr] = rv
        return rv

    return do(sp.sympify(expr))


def cse(exprs, symbols):
    """``sp.cse(exprs, symbols=symbols, optimizations="basic")`` with the DAG-linear
    preprocessors above (one ``factor_terms`` memo for all of ``exprs``)."""
    memo: dict = {}
    contents: dict = {}
    return sp.cse(exprs, symbols=symbols,
                  optimizations=[(sub_pre, sub_post), (lambda e: factor_terms(e, memo, contents), None)])

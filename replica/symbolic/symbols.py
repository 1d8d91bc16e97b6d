"""Small sympy building blocks used to declare models.

Symbols are created with Python-identifier names (``h_1``, ``q_1_12``) so that the
code generator can print them verbatim; their LaTeX spelling is kept separately in
:data:`LATEX_NAMES` and used by :mod:`replica.symbolic.latex`.
"""
from __future__ import annotations

import os
from typing import Iterable

import sympy as sp

from ..errors import DeclarationError

#: symbol -> LaTeX spelling, filled by the constructors below.
LATEX_NAMES: dict[sp.Symbol, str] = {}
#: model parameter -> what it is, in words (LaTeX text allowed), as its declaration says
#: (:func:`parameter`); the exports' Notation prints it. ``None``: the declaration gave none.
PARAMETER_DESCRIPTIONS: dict[sp.Symbol, str | None] = {}

#: a copy of :data:`LATEX_NAMES` and :data:`PARAMETER_DESCRIPTIONS` (:func:`declared_names`)
DeclaredNames = tuple[dict[sp.Symbol, str], dict[sp.Symbol, "str | None"]]


def declared_names() -> DeclaredNames:
    """The LaTeX spellings and parameter descriptions as they stand now: a model takes this copy when
    it is declared, since the symbols are shared by name and the declaration that creates a symbol
    last sets its spelling (a test's ``parameter("Delta", ...)`` without a description respelled
    ridge's ``Delta`` in its exports when both ran in one process)."""
    return dict(LATEX_NAMES), dict(PARAMETER_DESCRIPTIONS)


def restore_names(names: "DeclaredNames | None") -> None:
    """Make a model's declaration-time spellings and descriptions (:func:`declared_names`) current
    again, before deriving or exporting it."""
    if names is not None:
        LATEX_NAMES.update(names[0])
        PARAMETER_DESCRIPTIONS.update(names[1])


#: most fields (``L r`` of the student, ``L r_t`` of the teacher) a model may declare: the symbolic
#: derivation's cost grows steeply with them (the 2 x 2 student of ``attention_rank2`` takes
#: minutes, ``fields(1000, 1000)`` ran silently until killed); ``$REPLICA_MAX_FIELDS`` raises it
MAX_FIELDS = 16


def max_fields() -> int:
    """The field budget: :data:`MAX_FIELDS`, or ``$REPLICA_MAX_FIELDS`` when set."""
    env = os.environ.get("REPLICA_MAX_FIELDS")
    if not env:
        return MAX_FIELDS
    try:
        return max(1, int(env))
    except ValueError:
        raise DeclarationError(f"REPLICA_MAX_FIELDS: must be an integer, got {env!r}") from None


def check_field_count(L: int, r: int, what: str = "fields") -> None:
    """Refuse ``L x r`` fields over :func:`max_fields`, before any symbol is made."""
    budget = max_fields()
    if L * r > budget:
        raise DeclarationError(f"{what}: L x r = {L} x {r} = {L * r:,} fields, over the budget of {budget}: the "
                               "derivation's cost grows steeply with the number of fields (2 x 2 takes minutes); "
                               "raise REPLICA_MAX_FIELDS to try more")


def symbol(name: str, latex: str | None = None, **assumptions) -> sp.Symbol:
    """A real sympy symbol with a Python-safe ``name`` and an optional LaTeX spelling."""
    s = sp.Symbol(name, real=True, **assumptions)
    if latex is not None:
        LATEX_NAMES[s] = latex
    return s


def _sub(index: Iterable[int]) -> str:
    return ",".join(str(i) for i in index)


def fields(L: int, r: int, name: str = "h", latex: str | None = None) -> sp.Matrix:
    """The ``L x r`` matrix of field symbols ``h_{l,k}`` (token ``l``, component ``k``).

    For ``r == 1`` the symbols are ``h_1, ..., h_L``.
    """
    if L < 1 or r < 1:
        raise ValueError(f"fields: need L >= 1 and r >= 1, got L={L}, r={r}")
    check_field_count(L, r, "teacher_fields" if name == "hstar" else "fields")
    tex = latex or name
    rows = []
    for l in range(1, L + 1):
        row = []
        for k in range(1, r + 1):
            if r == 1:
                row.append(symbol(f"{name}_{l}", f"{tex}_{{{l}}}"))
            else:
                row.append(symbol(f"{name}_{l}_{k}", f"{tex}_{{{l},{k}}}"))
        rows.append(row)
    return sp.Matrix(rows)


def teacher_fields(L: int, r_t: int) -> sp.Matrix:
    """The ``L x r_t`` matrix of teacher fields ``h^*_{l,k}``."""
    return fields(L, r_t, name="hstar", latex="h^{*}")


def parameter(name: str, latex: str | None = None, description: str | None = None,
              **assumptions) -> sp.Symbol:
    """A scalar model parameter (kept symbolic, given a value at solve time).

    ``description`` says what it is (``"label-noise variance"``; LaTeX math in ``$...$`` allowed):
    the exports' Notation prints it beside the symbol. Like the LaTeX spelling it belongs to the
    symbol, so the declaration that creates a parameter last sets both.
    """
    s = symbol(name, latex or sp.latex(sp.Symbol(name)), **assumptions)
    PARAMETER_DESCRIPTIONS[s] = description
    return s


def matrix_parameter(name: str, rows: int, cols: int, latex: str | None = None,
                     description: str | None = None) -> sp.Matrix:
    """A ``rows x cols`` matrix of scalar parameters ``A_11, A_12, ...`` (``description``: what the
    matrix is, for the exports' Notation; kept on every entry)."""
    tex = latex or name
    # Immutable, so that it can be a key of Model.parameters.
    M = sp.ImmutableMatrix(rows, cols, lambda i, j: symbol(f"{name}_{i + 1}{j + 1}",
                                                           f"{tex}_{{{i + 1}{j + 1}}}"))
    for s in M:
        PARAMETER_DESCRIPTIONS[s] = description
    return M


def softmax_rows(M: sp.Matrix) -> sp.Matrix:
    """Row-wise softmax of a square score matrix, written as ``1 / sum_j exp(M_ij - M_ik)``.

    The shifted form is algebraically equal to ``exp(M_ik) / sum_j exp(M_ij)`` but
    never overflows to ``inf/inf`` in the generated numeric code: a large exponent
    gives ``1/inf = 0``, which is the correct limit.
    """
    n, m = M.shape
    return sp.Matrix(n, m, lambda i, k: 1 / sp.Add(*[sp.exp(M[i, j] - M[i, k]) for j in range(m)]))


def symmetric_matrix(name: str, n: int, latex: str | None = None, suffix: str = "") -> sp.Matrix:
    """A symmetric ``n x n`` matrix whose independent entries are the upper triangle.

    ``n == 1`` gives the 1x1 matrix of the scalar symbol ``name``.
    """
    tex = latex or name
    if n == 1:
        s = symbol(name, tex)
        return sp.Matrix([[s]])
    entries = {}
    for i in range(n):
        for j in range(i, n):
            entries[(i, j)] = symbol(f"{name}_{i + 1}{j + 1}", _entry_latex(tex, f"{i + 1}{j + 1}"))
    return sp.Matrix(n, n, lambda i, j: entries[(min(i, j), max(i, j))])


def general_matrix(name: str, rows: int, cols: int, latex: str | None = None) -> sp.Matrix:
    """A general ``rows x cols`` matrix of independent symbols (a vector if ``cols == 1``)."""
    tex = latex or name
    if rows == 1 and cols == 1:
        return sp.Matrix([[symbol(name, tex)]])
    if cols == 1:
        return sp.Matrix(rows, 1, lambda i, j: symbol(f"{name}_{i + 1}", _entry_latex(tex, f"{i + 1}")))
    return sp.Matrix(rows, cols, lambda i, j: symbol(f"{name}_{i + 1}{j + 1}",
                                                     _entry_latex(tex, f"{i + 1}{j + 1}")))


def _entry_latex(tex: str, index: str) -> str:
    """Append an entry index to a LaTeX name that may already carry a subscript."""
    if tex.endswith("}") and "_{" in tex:
        head, _, sub = tex.rpartition("_{")
        return f"{head}_{{{sub[:-1]},{index}}}"
    return f"{tex}_{{{index}}}"


def independent_symbols(M: sp.Matrix) -> list[sp.Symbol]:
    """The distinct symbols of a matrix in row-major order (upper triangle for symmetric ones)."""
    seen: list[sp.Symbol] = []
    for e in M:
        if isinstance(e, sp.Symbol) and e not in seen:
            seen.append(e)
    return seen


def cholesky_lower(M: sp.Matrix) -> sp.Matrix:
    """Symbolic lower Cholesky factor ``C`` with ``C C^T = M`` (explicit square roots).

    Used instead of the symmetric square root ``M^{1/2}``: any factor with
    ``C C^T = M`` gives the same Gaussian law, and the Cholesky entries are short
    closed forms that sympy differentiates without eigen-decompositions.
    """
    n = M.shape[0]
    if n == 1:
        return sp.Matrix([[sp.sqrt(M[0, 0])]])
    C = sp.zeros(n, n)
    for j in range(n):
        s = M[j, j] - sum(C[j, k] ** 2 for k in range(j))
        C[j, j] = sp.sqrt(s)
        for i in range(j + 1, n):
            C[i, j] = (M[i, j] - sum(C[i, k] * C[j, k] for k in range(j))) / C[j, j]
    return C

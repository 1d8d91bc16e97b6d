"""Closed forms for the matrices of the unit-symmetric ansatz (:mod:`replica.symbolic.permutations`).

In the ansatz every order parameter of ``n`` exchangeable units is ``a I + b J`` (``J`` the all-ones
matrix: a diagonal value ``a + b`` and an off-diagonal one ``b``) or, between two blocks of units
permuted independently, ``c 1 1^T``. These matrices form a commutative algebra with explicit
inverses, square roots and eigenvalues:

* eigenvalues ``a`` (``n - 1`` times, on the vectors summing to zero) and ``a + n b`` (on ``1``),
  with the same eigenvectors for every matrix of the algebra;
* so products, inverses and the symmetric square root act on the two eigenvalues one by one:
  ``(a I + b J)^{-1} = a^{-1} I - b / (a (a + n b)) J``,
  ``(a I + b J)^{1/2} = sqrt(a) I + (sqrt(a + n b) - sqrt(a)) / n J``.

Written this way, the potentials of ``n`` units are sums of ``n`` terms with coefficients that do
not depend on ``n``'s matrices: the symbolic work is linear in the number of units, where generic
``n x n`` symbolic inverses and Cholesky factors swell with ``n``. A matrix is recognised from its
entries (every diagonal entry the same expression, every off-diagonal one the same); anything else
is :data:`None` and the caller keeps its generic path.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp


@dataclass(frozen=True)
class UnitMatrix:
    """``a I + b J`` (``n x n``), kept as its two eigenvalues: ``across = a`` (on the vectors summing
    to zero) and ``along = a + n b`` (on ``1``). Products, inverses and roots act on each."""

    n: int
    across: sp.Expr
    along: sp.Expr

    @classmethod
    def from_entries(cls, n: int, diagonal: sp.Expr, off: sp.Expr) -> "UnitMatrix":
        """The matrix with ``diagonal`` on the diagonal and ``off`` elsewhere."""
        return cls(n, diagonal - off, diagonal + (n - 1) * off) if n > 1 else cls(1, diagonal, diagonal)

    @property
    def a(self) -> sp.Expr:
        """The coefficient of ``I``."""
        return self.across

    @property
    def b(self) -> sp.Expr:
        """The coefficient of ``J``."""
        return (self.along - self.across) / self.n if self.n > 1 else sp.Integer(0)

    def __matmul__(self, other: "UnitMatrix") -> "UnitMatrix":
        assert other.n == self.n
        return UnitMatrix(self.n, self.across * other.across, self.along * other.along)

    def __add__(self, other: "UnitMatrix") -> "UnitMatrix":
        assert other.n == self.n
        return UnitMatrix(self.n, self.across + other.across, self.along + other.along)

    def scaled(self, c: sp.Expr) -> "UnitMatrix":
        """``c (a I + b J)``."""
        return UnitMatrix(self.n, c * self.across, c * self.along)

    def inverse(self) -> "UnitMatrix":
        return UnitMatrix(self.n, 1 / self.across, 1 / self.along)

    def sqrt(self) -> "UnitMatrix":
        """The symmetric square root (both eigenvalues must be positive)."""
        return UnitMatrix(self.n, sp.sqrt(self.across), sp.sqrt(self.along))

    def eigenvalues(self) -> tuple[sp.Expr, ...]:
        """``(across, along)``; one value for ``n = 1``."""
        return (self.along,) if self.n == 1 else (self.across, self.along)

    def trace(self) -> sp.Expr:
        return (self.n - 1) * self.across + self.along

    def matrix(self) -> sp.Matrix:
        a, b = self.a, self.b
        return sp.Matrix(self.n, self.n, lambda i, j: a + b if i == j else b)

    def apply(self, v: list[sp.Expr]) -> list[sp.Expr]:
        """``(a I + b J) v`` for a vector ``v`` of ``n`` expressions, with the sum written once."""
        if self.n == 1:
            return [self.along * v[0]]
        total = sp.Add(*v)
        a, b = self.a, self.b
        return [a * x + b * total for x in v]

    def quadratic_form(self, v: list[sp.Expr]) -> sp.Expr:
        """``v^T (a I + b J) v = a |v|^2 + b (sum v)^2``."""
        if self.n == 1:
            return self.along * v[0] ** 2
        return self.a * sp.Add(*[x ** 2 for x in v]) + self.b * sp.Add(*v) ** 2


@dataclass(frozen=True)
class OnesMatrix:
    """``c 1 1^T`` (``rows x cols``): every entry ``c``."""

    rows: int
    cols: int
    c: sp.Expr

    def matrix(self) -> sp.Matrix:
        return sp.Matrix(self.rows, self.cols, lambda i, j: self.c)

    def apply(self, v: list[sp.Expr]) -> list[sp.Expr]:
        """``c 1 1^T v``: every entry ``c sum v``."""
        total = self.c * sp.Add(*v)
        return [total] * self.rows


def unit_matrix(M: sp.Matrix) -> UnitMatrix | None:
    """``M`` as ``a I + b J`` when its entries say so (square, every diagonal entry the same
    expression and every off-diagonal one the same), else None."""
    n, m = M.shape
    if n != m:
        return None
    diag = M[0, 0]
    if any(M[i, i] != diag for i in range(n)):
        return None
    if n == 1:
        return UnitMatrix(1, diag, diag)
    off = M[0, 1]
    if any(M[i, j] != off for i in range(n) for j in range(n) if i != j):
        return None
    return UnitMatrix.from_entries(n, diag, off)


def ones_matrix(M: sp.Matrix) -> OnesMatrix | None:
    """``M`` as ``c 1 1^T`` when every entry is the same expression, else None."""
    c = M[0, 0]
    if any(e != c for e in M):
        return None
    return OnesMatrix(M.shape[0], M.shape[1], c)


def teacher_law(q: sp.Matrix, theta: sp.Matrix, rho: sp.Matrix
                ) -> tuple[UnitMatrix, UnitMatrix | OnesMatrix | None, UnitMatrix | None] | None:
    """``(q^{1/2}, theta^T q^{-1/2}, rho - theta^T q^{-1} theta)`` in closed form when ``q`` and
    ``rho`` are ``a I + b J`` and ``theta`` is ``a I + b J`` (square) or ``c 1 1^T``; else None. Without
    teacher fields (``theta`` with no column) the last two are None.

    With ``omega - m = q^{1/2} xi`` and ``h* = theta^T q^{-1/2} xi + D eta`` the pair has covariance
    ``[[q, theta], [theta^T, rho]]`` when ``D`` is the residual's square root (the law of
    docs/explanation/theory.md §3, with symmetric roots instead of Cholesky factors: the same law, and
    permuting the units permutes ``xi`` and ``eta``)."""
    uq = unit_matrix(q)
    if uq is None:
        return None
    S = uq.sqrt()
    if theta.shape[1] == 0:
        return S, None, None
    ur = unit_matrix(rho)
    if ur is None:
        return None
    Sinv = S.inverse()
    qinv = uq.inverse()
    ut = unit_matrix(theta) if theta.shape[0] == theta.shape[1] else None
    if ut is not None and ut.n > 1:
        resid = ur + (ut @ qinv @ ut).scaled(-1)   # theta symmetric: theta^T = theta
        return S, ut @ Sinv, resid
    ot = ones_matrix(theta)
    if ot is None:
        return None
    n, nt = theta.shape
    # theta^T q^{-1/2} = c 1_t 1^T q^{-1/2} = c along(q)^{-1/2} 1_t 1^T (1 is an eigenvector of q);
    # theta^T q^{-1} theta = c^2 n along(q)^{-1} J_t, whose eigenvalue along 1_t is n_t times that
    row = ot.c / sp.sqrt(uq.along)
    quad = ot.c ** 2 * n / uq.along
    resid = UnitMatrix(nt, ur.across, ur.along - nt * quad)
    return S, OnesMatrix(nt, n, row), resid

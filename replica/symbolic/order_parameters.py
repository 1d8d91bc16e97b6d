"""Order parameters of the replica-symmetric ansatz as sympy objects (docs/explanation/theory.md §2).

Per token ``l``: ``q_l, V_l`` (symmetric ``r x r``), ``m_l`` (``r``), ``theta_l``
(``r x r_t``) and their conjugates ``qhat_l, Vhat_l`` (symmetric), ``mhat_l``,
``thetahat_l``. A model has only the families its declaration gives it
(:attr:`replica.symbolic.model.Model.families`): ``q, V`` always, ``m`` with positional
encodings or cluster means, ``theta`` with a teacher; an absent family is zero by construction. Symmetric matrices are written with their upper-triangle entries as
independent symbols; the off-diagonal factors of 2 this creates are never typed by
hand: they come out of differentiating the trace potential.

With token clusters (docs/explanation/theory.md §8) every family has one parameter per *slot* ``s = (l, c)``
(token ``l``, cluster ``c``; labels ``1a, 1b, 2a, ...``) instead of one per token; without
clusters the slots are the tokens (labels ``1, 2, ...``) and nothing changes.

A :class:`TokenReduction` expresses symmetries between tokens (docs/explanation/theory.md §6): every
token's parameter of a family is a fixed multiple of one shared free parameter,
``x_l = c_l x``. The conjugates then reduce by the dual map ``xhat_l = c_l / |c|^2
xhat``, which keeps the bilinear coupling ``sum_l xhat_l . x_l = xhat . x``; e.g.
``c = (1, 1)`` for ``q`` gives ``Vhat_l = Vhat / 2`` (so ``Vhat = Vhat_1 + Vhat_2``) and
``c = (1, -1)`` for ``m`` gives ``mhat = mhat_1 - mhat_2``, the aggregated conjugates
of docs/explanation/theory.md §6.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

import sympy as sp

from ..errors import DeclarationError
from .permutations import UnitAnsatz, orbit_matrix
from .symbols import general_matrix, independent_symbols, symmetric_matrix

#: family -> (row dimension, column dimension, symmetric, LaTeX stem)
FAMILIES: dict[str, tuple[str, str, bool, str]] = {
    "q": ("r", "r", True, "q"),
    "V": ("r", "r", True, "V"),
    "m": ("r", "1", False, "m"),
    "theta": ("r", "r_t", False, r"\theta"),
}
#: order-parameter family -> the conjugate family it is paired with in the trace potential
CONJUGATE_OF: dict[str, str] = {"q": "Vhat", "V": "qhat", "m": "mhat", "theta": "thetahat"}
CONJUGATE_FAMILIES: tuple[str, ...] = ("qhat", "Vhat", "mhat", "thetahat")
ORDER_FAMILIES: tuple[str, ...] = ("q", "V", "m", "theta")
#: the families every model has (the student's self-overlap and its variance)
ALWAYS: tuple[str, ...] = ("q", "V")


def check_families(families: Sequence[str]) -> tuple[str, ...]:
    """``families`` in the canonical order, or a :class:`DeclarationError` naming the problem."""
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise DeclarationError(f"families: unknown order-parameter family {unknown[0]!r}; "
                               f"expected some of {list(ORDER_FAMILIES)}")
    missing = [f for f in ALWAYS if f not in families]
    if missing:
        raise DeclarationError(f"families: every model has {list(ALWAYS)}, {missing[0]!r} is missing")
    return tuple(f for f in ORDER_FAMILIES if f in families)


def _partner(conj_family: str) -> str:
    return next(f for f, c in CONJUGATE_OF.items() if c == conj_family)


@dataclass(frozen=True)
class OrderParameter:
    """One free order parameter: a family, an optional token index, its symbol matrix.

    ``slot`` is the slot label (``"1a"``...) of a model with token clusters, else None.
    """

    family: str
    token: int | None
    matrix: sp.Matrix
    symmetric: bool
    slot: str | None = None

    @property
    def name(self) -> str:
        """The symbol's name as in generated modules and JSON (``q_11``, ``m_2``, ``hat_q``...)."""
        if self.slot is not None:
            return f"{self.family}_{self.slot}"
        return self.family if self.token is None else f"{self.family}_{self.token}"

    @property
    def symbols(self) -> list[sp.Symbol]:
        """The independent sympy symbols of this order parameter."""
        return independent_symbols(self.matrix)

    @property
    def is_conjugate(self) -> bool:
        """Whether this is a conjugate (hatted) parameter."""
        return self.family.endswith("hat")


@dataclass
class TokenReduction:
    """Tokens sharing order parameters up to fixed coefficients (docs/explanation/theory.md §6).

    ``coefficients[family]`` is a length-``L`` sequence ``c`` meaning ``x_l = c_l x``
    for every token ``l`` (``x`` the shared free parameter of that family). Families
    not listed keep one free parameter per token. With token clusters the coefficients
    run over the slots ``(l, c)`` instead (one per slot, token-major).

    Example, the paper's two tokens with ``p_2 = -p_1`` and equal covariances::

        TokenReduction({"q": [1, 1], "V": [1, 1], "theta": [1, 1], "m": [1, -1]})
    """

    coefficients: Mapping[str, Sequence[int]] = field(default_factory=dict)

    def validate(self, L: int, unit: str = "token") -> None:
        """``L`` coefficients per family (``unit``: ``"token"``, or ``"slot"`` with clusters)."""
        for fam, c in self.coefficients.items():
            if fam not in FAMILIES:
                raise DeclarationError(
                    f"reduction: unknown order-parameter family {fam!r}; expected one of {list(FAMILIES)}")
            if len(c) != L:
                what = f"per token (L={L})" if unit == "token" else f"per {unit} ({L} {unit}s)"
                raise DeclarationError(
                    f"reduction[{fam!r}]: needs one coefficient {what}, got {len(c)}")
            if all(ci == 0 for ci in c):
                raise DeclarationError(f"reduction[{fam!r}]: coefficients cannot all be zero")


class OrderParameters:
    """The free order parameters of a model and the per-slot matrices built from them.

    ``slots`` are the slot labels (default ``"1", ..., "L"``: one slot per token; with
    token clusters ``"1a", "1b", ...``, see :class:`replica.symbolic.data.TokenStatistics`).

    Attributes
    ----------
    free:
        family -> list of free :class:`OrderParameter` (one per slot, or one shared).
    per_slot:
        family -> list over slots of the ``sympy.Matrix`` each slot's parameter equals
        (a free symbol matrix, or ``c_s`` times a shared one). Conjugate families included.
        ``per_token`` is the same dict (slots are tokens without clusters).
    """

    def __init__(self, L: int, r: int, r_t: int, reduction: TokenReduction | None = None,
                 slots: Sequence[str] | None = None, families: Sequence[str] = ORDER_FAMILIES,
                 units: UnitAnsatz | None = None):
        self.L, self.r, self.r_t = L, r, r_t
        # the unit-symmetric ansatz (replica.symbolic.permutations): one symbol per orbit of entries
        self.units = units
        self.families = check_families(families)
        self.slots = tuple(slots) if slots is not None else tuple(str(l) for l in range(1, L + 1))
        self.S = len(self.slots)
        clustered = slots is not None and self.slots != tuple(str(l) for l in range(1, L + 1))
        self.reduction = reduction or TokenReduction()
        self.reduction.validate(self.S, "slot" if clustered else "token")
        dims = {"r": r, "r_t": r_t, "1": 1}
        self.free: dict[str, list[OrderParameter]] = {}
        self.per_slot: dict[str, list[sp.Matrix]] = {}
        self.per_token = self.per_slot
        # Without clusters a slot is a token (its index); with clusters the slot label.
        keys: list = list(range(1, L + 1)) if not clustered else list(self.slots)
        for fam in self.reduction.coefficients:
            if fam not in self.families:
                raise DeclarationError(f"reduction[{fam!r}]: the model has no {fam!r} family "
                                       f"(its families: {list(self.families)})")
        for fam, (rows, cols, sym, tex) in FAMILIES.items():
            shape = (dims[rows], dims[cols])
            conj = CONJUGATE_OF[fam]
            coeffs = self.reduction.coefficients.get(fam)
            if fam not in self.families:
                # An absent family is zero by construction (e.g. m without positional encodings):
                # no free parameter, a zero matrix wherever the potentials read a slot of it.
                self.per_slot[fam] = [sp.zeros(*shape) for _ in keys]
                self.per_slot[conj] = [sp.zeros(*self._shape_of(conj, dims)) for _ in keys]
            elif coeffs is None:
                own = [self._make(fam, l, shape, sym, f"{tex}_{{{l}}}") for l in keys]
                hat = [self._make(conj, l, self._shape_of(conj, dims), FAMILIES[_partner(conj)][2],
                                  f"{self._tex(conj)}_{{{l}}}") for l in keys]
                self.free[fam] = own
                self.free[conj] = hat
                self.per_slot[fam] = [p.matrix for p in own]
                self.per_slot[conj] = [p.matrix for p in hat]
            else:
                shared = self._make(fam, None, shape, sym, tex)
                shared_hat = self._make(conj, None, self._shape_of(conj, dims),
                                        FAMILIES[_partner(conj)][2], self._tex(conj))
                norm2 = sum(sp.Integer(c) ** 2 for c in coeffs)
                self.free[fam] = [shared]
                self.free[conj] = [shared_hat]
                self.per_slot[fam] = [sp.Integer(c) * shared.matrix for c in coeffs]
                self.per_slot[conj] = [sp.Integer(c) / norm2 * shared_hat.matrix for c in coeffs]

    @staticmethod
    def _tex(conj_family: str) -> str:
        # 'Vhat' is spelled \hat{V} (its partner in the trace potential is q).
        return rf"\hat{{{FAMILIES[conj_family[:-len('hat')]][3]}}}"

    def _shape_of(self, conj: str, dims: dict[str, int]) -> tuple[int, int]:
        # A conjugate has the shape of the order parameter it multiplies in the trace potential.
        partner = _partner(conj)
        rows, cols, _, _ = FAMILIES[partner]
        return dims[rows], dims[cols]

    def _make(self, fam: str, token: int | str | None, shape: tuple[int, int], symmetric: bool,
              tex: str) -> OrderParameter:
        """``token``: a token index, a slot label (``"1a"``, token clusters) or None (shared)."""
        name = fam if token is None else f"{fam}_{token}"
        if self.units is not None:
            M = orbit_matrix(name, shape, self.units.family_orbits(fam, shape), symmetric, tex)
        elif symmetric:
            M = symmetric_matrix(name, shape[0], latex=tex)
        else:
            M = general_matrix(name, shape[0], shape[1], latex=tex)
        if isinstance(token, str):
            return OrderParameter(fam, int("".join(ch for ch in token if ch.isdigit())), M, symmetric, token)
        return OrderParameter(fam, token, M, symmetric)

    # ------------------------------------------------------------------ views
    def order_parameters(self) -> list[OrderParameter]:
        """Free order parameters of the model's families (in the order ``q, V, m, theta``)."""
        return [p for fam in self.families for p in self.free[fam]]

    def conjugates(self) -> list[OrderParameter]:
        """Free conjugates of the model's families (in the order ``qhat, Vhat, mhat, thetahat``)."""
        return [p for fam in CONJUGATE_FAMILIES if _partner(fam) in self.families for p in self.free[fam]]

    def order_symbols(self) -> list[sp.Symbol]:
        """The independent symbols of ``q, V, m, θ`` after the token reduction."""
        return [s for p in self.order_parameters() for s in p.symbols]

    def conjugate_symbols(self) -> list[sp.Symbol]:
        """The independent symbols of the conjugates, matching :meth:`order_symbols`."""
        return [s for p in self.conjugates() for s in p.symbols]

    def orbit_sizes(self) -> dict[sp.Symbol, int]:
        """How many independent matrix entries each order-parameter symbol stands for (1 but in the
        unit-symmetric ansatz, where a symbol is an orbit of entries; upper triangle of ``q, V``)."""
        out: dict[sp.Symbol, int] = {}
        for p in self.order_parameters() + self.conjugates():
            rows, cols = p.matrix.shape
            for i in range(rows):
                for j in range(cols):
                    if not p.symmetric or i <= j:
                        out[p.matrix[i, j]] = out.get(p.matrix[i, j], 0) + 1
        return out

    def unit_ties(self, kind: str) -> list[tuple[sp.Symbol, ...]]:
        """The groups of order-parameter symbols that the unit branch ``kind`` sets equal (in the
        ansatz's coordinates; each group one orbit of the branch's larger group): e.g. ``theta``'s
        diagonal and off-diagonal values on the unspecialised branch of a specialised ansatz."""
        if self.units is None or kind == self.units.kind:
            return []
        coarse = UnitAnsatz(self.units.blocks, kind)
        out = []
        for p in self.order_parameters():
            shape = p.matrix.shape
            for orbit in coarse.family_orbits(p.family, shape):
                syms = []
                for i, j in orbit:
                    s = p.matrix[i, j]
                    if s not in syms:
                        syms.append(s)
                if len(syms) > 1:
                    out.append(tuple(syms))
        return out

    def family_of(self, sym: sp.Symbol) -> str:
        """The family (``q``, ``V``, ``m``, ``theta``, or a conjugate) a symbol belongs to."""
        for p in self.order_parameters() + self.conjugates():
            if sym in p.symbols:
                return p.family
        raise KeyError(sym)

    def __iter__(self) -> Iterator[OrderParameter]:
        yield from self.order_parameters()
        yield from self.conjugates()

    def slot(self, family: str, s: int) -> sp.Matrix:
        """The matrix of slot ``s`` (0-based) of ``family`` in terms of free symbols."""
        return self.per_slot[family][s]

    def token(self, family: str, l: int) -> sp.Matrix:
        """The matrix of token ``l`` (0-based) of ``family`` (slot ``l``: use :meth:`slot`, or
        :func:`replica.symbolic.potentials.token_view` for a token of a model with clusters)."""
        return self.per_slot[family][l]

"""Permutable units: which columns of the student fields (hidden units, heads) and of the teacher
fields the learning problem cannot tell apart, and the order-parameter ansatz that follows.

A *unit* is a column of ``h`` (``L x r``: column ``k`` is unit ``k`` on every token) or of ``h*``.
Student units ``a, b`` are *exchangeable* when swapping the columns leaves the per-sample loss and
the row factors (the penalty, or a prior) unchanged at every argument; teacher units likewise for
the loss (or the channel's label law). Exchangeability is probed numerically at random points and
at randomly perturbed parameter values (a committee whose second-layer weights are parameters
with equal defaults is *not* symmetric: a user may set them apart), the way
:mod:`replica.symbolic.symmetries` probes sign flips. The exchangeable units form blocks (the
connected components of the exchangeable pairs); the symmetry group is the product of the
symmetric groups of the blocks, on each side.

Two subgroups give the unit-symmetric ansatz (:class:`UnitAnsatz`): the order parameters are
constant on the orbits of the group acting on their entries (``q -> P q P^T``, ``m -> P m``,
``theta -> P theta P_t^T``), so a family keeps one free parameter per orbit:

* **unspecialised**: student and teacher units permuted independently. ``q`` and ``V`` keep a
  diagonal and an off-diagonal value per block, ``theta`` one value per pair of blocks (every
  student unit overlaps every teacher unit alike);
* **specialised**: a student block and a teacher block of the same size permuted *together*
  (student unit ``k`` learns teacher unit ``k``): ``theta`` keeps a diagonal and an off-diagonal
  value on the matched pair. The unspecialised subspace lies inside it (diagonal = off-diagonal).

Both are fixed subspaces of a group that commutes with the saddle-point map, so a fixed point of
the reduced equations is a fixed point of the full ones (the principle of symmetric criticality:
the gradient of an invariant function at a symmetric point is symmetric). Entries of an orbit are
named after its first entry (``q_1_11`` stands for every diagonal entry, ``q_1_12`` for every
off-diagonal one); :meth:`UnitAnsatz.orbits` says which entries each name stands for.
"""
from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Callable, Sequence

import sympy as sp

from .symbols import _entry_latex, symbol

#: the two unit-symmetric branches (fixed subspaces of the groups above)
UNSPECIALISED = "unspecialised"
SPECIALISED = "specialised"

Pair = tuple[int, int]


@dataclass(frozen=True)
class UnitBlocks:
    """Blocks of exchangeable student and teacher units (every column in exactly one block).

    ``student``/``teacher``: tuples of column indices (0-based); a block of size one is a unit that
    nothing can be swapped with. ``matched``: pairs ``(student block, teacher block)`` of equal size
    (at least two) that can be permuted together, which is where specialisation is defined; the
    ``k``-th column of one is paired with the ``k``-th of the other.
    """

    student: tuple[tuple[int, ...], ...]
    teacher: tuple[tuple[int, ...], ...]

    @property
    def permutable(self) -> bool:
        """Whether some student units are exchangeable (a block of two or more)."""
        return any(len(b) > 1 for b in self.student)

    @property
    def matched(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
        """Student and teacher blocks of the same size (>= 2), paired in order of appearance."""
        out, used = [], set()
        for sb in self.student:
            if len(sb) < 2:
                continue
            tb = next((t for i, t in enumerate(self.teacher) if len(t) == len(sb) and i not in used), None)
            if tb is not None:
                used.add(self.teacher.index(tb))
                out.append((sb, tb))
        return tuple(out)

    @property
    def branches(self) -> tuple[str, ...]:
        """The unit-symmetric branches the blocks allow: ``unspecialised``, and ``specialised``
        where a student block is matched with a teacher block."""
        if not self.permutable:
            return ()
        return (SPECIALISED, UNSPECIALISED) if self.matched else (UNSPECIALISED,)

    def describe(self) -> str:
        """The blocks in words (1-based units), e.g. ``student units {1, 2}, teacher units {1, 2}``."""
        def side(blocks, who):
            big = [b for b in blocks if len(b) > 1]
            return ", ".join(f"{who} units {{{', '.join(str(i + 1) for i in b)}}}" for b in big)
        parts = [p for p in (side(self.student, "student"), side(self.teacher, "teacher")) if p]
        return "; ".join(parts) if parts else "no exchangeable units"


# --------------------------------------------------------------------------- detection
def _blocks(n: int, pairs: Sequence[Pair]) -> tuple[tuple[int, ...], ...]:
    """Connected components of the graph on ``range(n)`` with edges ``pairs`` (sorted blocks)."""
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in pairs:
        parent[find(a)] = find(b)
    comps: dict[int, list[int]] = {}
    for i in range(n):
        comps.setdefault(find(i), []).append(i)
    return tuple(sorted(tuple(c) for c in comps.values()))


def _close(a: float, b: float) -> bool:
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


class _Probe:
    """The loss, the row factors and a channel's label law as ``math`` functions, and random
    arguments and parameter values to evaluate them at."""

    def __init__(self, model, trials: int, seed: int):
        self.model = model
        self.rng = random.Random(seed)
        self.trials = trials
        self.params = list(model.parameter_symbols)
        self.h = list(model.h)
        self.hs = list(model.hstar)
        ch = model.channel
        teacher = [ch.label] if ch is not None else self.hs
        self.others = [*teacher, *model.noise, *model.data.label_symbols]
        self.loss = sp.lambdify([*self.h, *self.others, *self.params], model.loss, "math")
        self.w = [sp.Symbol(f"_w{i}", real=True) for i in range(model.r)]
        self.rows = [sp.lambdify([*self.w, *self.params], f, "math") for f in row_factors(model, sp.Matrix(self.w))]
        self.label_values = list(ch.values) if ch is not None else []

    def parameter_sets(self) -> list[list[float]]:
        """The defaults, and values perturbed by up to 30% inside their domains."""
        m = self.model
        base = [m.defaults[s] for s in self.params]
        out = [base]
        for _ in range(2):
            vals = []
            for s, v in zip(self.params, base):
                new = v * (1 + 0.3 * self.rng.uniform(-1, 1)) + 0.05 * self.rng.uniform(-1, 1)
                dom = m.domains.get(s)
                if dom is not None and not dom.contains(new):
                    new = v
                vals.append(new)
            out.append(vals)
        return out

    def other_values(self) -> list[float]:
        out = []
        for s in self.others:
            if self.model.channel is not None and s == self.model.channel.label:
                out.append(float(self.rng.choice(self.label_values)))
            elif s in self.model.data.label_symbols:
                out.append(float(self.rng.choice([0, 1])))
            else:
                out.append(self.rng.uniform(-1.5, 1.5))
        return out

    def student_swap(self, a: int, b: int) -> bool:
        """Whether swapping student columns ``a, b`` leaves the loss and the row factors unchanged."""
        L, r = self.model.L, self.model.r
        perm = list(range(r))
        perm[a], perm[b] = b, a
        for p in self.parameter_sets():
            for _ in range(self.trials):
                H = [[self.rng.uniform(-1.5, 1.5) for _ in range(r)] for _ in range(L)]
                Hp = [[row[perm[k]] for k in range(r)] for row in H]
                o = self.other_values()
                if not _agree(self.loss, [*sum(H, []), *o, *p], [*sum(Hp, []), *o, *p]):
                    return False
                w = [self.rng.uniform(-1.5, 1.5) for _ in range(r)]
                wp = [w[perm[k]] for k in range(r)]
                if not all(_agree(f, [*w, *p], [*wp, *p]) for f in self.rows):
                    return False
        return True

    def teacher_swap(self, a: int, b: int) -> bool:
        """Whether swapping teacher columns ``a, b`` leaves the loss (or the channel's law) unchanged."""
        m = self.model
        L, rt = m.L, m.r_t
        perm = list(range(rt))
        perm[a], perm[b] = b, a
        ch = m.channel
        if ch is not None:
            return _channel_invariant(ch, self.hs, L, rt, perm, self.rng, self.trials, m.defaults)
        for p in self.parameter_sets():
            for _ in range(self.trials):
                H = [self.rng.uniform(-1.5, 1.5) for _ in self.h]
                T = [[self.rng.uniform(-1.5, 1.5) for _ in range(rt)] for _ in range(L)]
                Tp = [[row[perm[k]] for k in range(rt)] for row in T]
                rest = self.other_values()[len(self.hs):]
                if not _agree(self.loss, [*H, *sum(T, []), *rest, *p], [*H, *sum(Tp, []), *rest, *p]):
                    return False
        return True


def _agree(f: Callable, args: list[float], args_swapped: list[float]) -> bool:
    try:
        return _close(float(f(*args)), float(f(*args_swapped)))
    except (ValueError, ZeroDivisionError, OverflowError, TypeError):
        return False


def _channel_invariant(ch, hs: list, L: int, rt: int, perm: list[int], rng: random.Random, trials: int,
                       defaults: dict) -> bool:
    """Whether the channel's label law is unchanged when the teacher columns are permuted."""
    import numpy as np
    forms = sp.lambdify(hs, list(ch.forms), "numpy")
    params = {s.name: v for s, v in defaults.items()}
    for _ in range(trials):
        T = np.array([[rng.uniform(-1.5, 1.5) for _ in range(rt)] for _ in range(L)])
        Tp = T[:, perm]
        u = np.asarray(forms(*T.ravel()), dtype=float).reshape(len(ch.forms), 1)
        up = np.asarray(forms(*Tp.ravel()), dtype=float).reshape(len(ch.forms), 1)
        if not np.allclose(ch.probabilities(u, params), ch.probabilities(up, params), rtol=1e-9, atol=1e-12):
            return False
    return True


def row_factors(model, w: sp.Matrix) -> list[sp.Expr]:
    """The functions of one weight row ``w`` (``r`` entries) the equations depend on: the penalty,
    and a prior's log-density where the model declares one (``model.prior.expression(w)``)."""
    out = [model.regularizer.expression(w)]
    prior = getattr(model, "prior", None)
    if prior is not None and hasattr(prior, "expression"):
        out.append(prior.expression(w))
    return [sp.sympify(e).subs({}) for e in out]


def unit_blocks(model, trials: int = 4, seed: int = 0) -> UnitBlocks:
    """The blocks of exchangeable student and teacher units of ``model`` (module docstring)."""
    probe = _Probe(model, trials, seed)
    s_pairs = [(a, b) for a, b in itertools.combinations(range(model.r), 2) if probe.student_swap(a, b)]
    t_pairs = [(a, b) for a, b in itertools.combinations(range(model.r_t), 2) if probe.teacher_swap(a, b)]
    return UnitBlocks(_blocks(model.r, s_pairs), _blocks(model.r_t, t_pairs))


# --------------------------------------------------------------------------- the ansatz
def _orbits(n_rows: int, n_cols: int, row_perms: Sequence[Sequence[int]], col_perms: Sequence[Sequence[int]],
            symmetric: bool) -> list[list[Pair]]:
    """Orbits of the entries ``(i, j)`` of an ``n_rows x n_cols`` matrix under the group generated by
    the simultaneous permutations ``(row_perms[g], col_perms[g])`` (entries of a symmetric matrix
    taken with ``i <= j``), each sorted, in the order of their first entry (row-major)."""
    def canon(i: int, j: int) -> Pair:
        return (min(i, j), max(i, j)) if symmetric else (i, j)

    entries = [canon(i, j) for i in range(n_rows) for j in range(n_cols) if not symmetric or i <= j]
    seen: dict[Pair, int] = {}
    orbits: list[list[Pair]] = []
    for e in entries:
        if e in seen:
            continue
        orbit, todo = {e}, [e]
        while todo:
            i, j = todo.pop()
            for rp, cp in zip(row_perms, col_perms):
                f = canon(rp[i], cp[j])
                if f not in orbit:
                    orbit.add(f)
                    todo.append(f)
        ordered = sorted(orbit)
        for f in ordered:
            seen[f] = len(orbits)
        orbits.append(ordered)
    return orbits


def _transpositions(n: int, blocks: Sequence[Sequence[int]]) -> list[list[int]]:
    """Adjacent transpositions inside every block (they generate the product of symmetric groups)."""
    out = []
    for b in blocks:
        for a, c in zip(b, b[1:]):
            p = list(range(n))
            p[a], p[c] = c, a
            out.append(p)
    return out


@dataclass(frozen=True)
class UnitAnsatz:
    """The unit-symmetric ansatz of a model: its blocks and the branch whose group it uses.

    ``kind`` is :data:`SPECIALISED` (matched blocks permuted together; the module's ansatz where a
    match exists) or :data:`UNSPECIALISED` (all blocks permuted independently).
    """

    blocks: UnitBlocks
    kind: str

    def generators(self) -> tuple[list[list[int]], list[list[int]]]:
        """Generators of the group as pairs (student permutation, teacher permutation), listed as
        two parallel lists (``r`` and ``r_t`` entries each)."""
        r = sum(len(b) for b in self.blocks.student)
        rt = sum(len(b) for b in self.blocks.teacher)
        ident_s, ident_t = list(range(r)), list(range(rt))
        rows, cols = [], []
        matched = dict(self.blocks.matched) if self.kind == SPECIALISED else {}
        for sb in self.blocks.student:
            for k in range(len(sb) - 1):
                p = list(ident_s)
                p[sb[k]], p[sb[k + 1]] = sb[k + 1], sb[k]
                t = list(ident_t)
                if sb in matched:
                    tb = matched[sb]
                    t[tb[k]], t[tb[k + 1]] = tb[k + 1], tb[k]
                rows.append(p)
                cols.append(t)
        paired = set(matched.values())
        for tb in self.blocks.teacher:
            if tb in paired:
                continue
            for p in _transpositions(rt, [tb]):
                rows.append(list(ident_s))
                cols.append(p)
        return rows, cols

    def describe(self) -> str:
        """The ansatz in words, for the exports (LaTeX text with inline math)."""
        kind = ("student unit $k$ paired with teacher unit $k$ (specialised)" if self.kind == SPECIALISED
                else "student and teacher units permuted independently (unspecialised)")
        def side(blocks, who):
            return [f"{who} units " + ", ".join(str(i + 1) for i in b) for b in blocks if len(b) > 1]
        which = " and ".join(side(self.blocks.student, "student") + side(self.blocks.teacher, "teacher"))
        return (f"Unit-symmetric ansatz ({which} exchangeable; {kind}): the order parameters "
                r"are constant on the orbits of the permutations of their entries, one symbol per orbit named "
                r"after its first entry ($q_{1,11}$ every diagonal entry of $q$, $q_{1,12}$ every off-diagonal "
                r"one; $	heta$, $V$ and the conjugates alike); the square roots are the symmetric ones.")

    def family_orbits(self, family: str, shape: tuple[int, int]) -> list[list[Pair]]:
        """The orbits of the entries of one slot's matrix of ``family`` (``q, V, m, theta`` or a
        conjugate; ``shape`` its shape)."""
        rows, cols = self.generators()
        base = family[:-3] if family.endswith("hat") else family   # a conjugate transforms as its partner
        ident1 = [[0] for _ in rows]
        if base in ("q", "V"):
            return _orbits(shape[0], shape[1], rows, rows, True)
        if base == "m":
            return _orbits(shape[0], 1, rows, ident1, False)
        if base == "theta":
            return _orbits(shape[0], shape[1], rows, cols, False)
        raise KeyError(family)


def orbit_matrix(name: str, shape: tuple[int, int], orbits: list[list[Pair]], symmetric: bool,
                 latex: str) -> sp.Matrix:
    """A matrix whose entries on one orbit are one symbol, named after the orbit's first entry
    (``name_ij``, or ``name_i`` for a vector; the bare ``name`` for a 1x1 matrix)."""
    rows, cols = shape
    syms: dict[Pair, sp.Symbol] = {}
    for orbit in orbits:
        i, j = orbit[0]
        if rows == 1 and cols == 1:
            s = symbol(name, latex)
        elif cols == 1:
            s = symbol(f"{name}_{i + 1}", _entry_latex(latex, f"{i + 1}"))
        else:
            s = symbol(f"{name}_{i + 1}{j + 1}", _entry_latex(latex, f"{i + 1}{j + 1}"))
        for e in orbit:
            syms[e] = s

    def entry(i: int, j: int) -> sp.Symbol:
        return syms[(min(i, j), max(i, j))] if symmetric else syms[(i, j)]
    return sp.Matrix(rows, cols, entry)

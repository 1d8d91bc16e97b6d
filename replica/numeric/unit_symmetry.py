"""The unit-symmetric branches of a generated module, numerically (no sympy).

A module derived in the unit-symmetric ansatz (:mod:`replica.symbolic.permutations`) carries
``UNIT_BLOCKS`` (the exchangeable student and teacher units), ``UNIT_ANSATZ`` (the group its
coordinates are invariant under: ``specialised`` or ``unspecialised``), ``ORBIT_SIZES`` (how many
matrix entries each order parameter stands for) and ``UNIT_TIES`` (per unit branch, the groups of
order parameters it sets equal). A branch with ties is the fixed subspace of a larger group; the
group average onto it weighs each parameter by its orbit's size (:func:`tie_projection`). The
saddle-point map commutes with the group, so the subspace is invariant and the projection only
removes the quadrature's asymmetry; a Newton step of the projected map stays in the subspace.

:func:`breaking_directions` gives the directions that leave a tied branch inside the module's
ansatz (the diagonal-minus-off-diagonal direction of ``theta`` on the unspecialised branch): the
specialisation threshold is where the map's Jacobian along them has an eigenvalue crossing one
(:mod:`replica.phase.specialisation`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..interface.generated_model import GeneratedModel

Projection = Callable[[np.ndarray], np.ndarray]


def has_units(module: GeneratedModel) -> bool:
    """Whether ``module`` is derived in the unit-symmetric ansatz."""
    return module.UNIT_ANSATZ is not None


def ties(module: GeneratedModel, branch: str | None) -> tuple[tuple[int, ...], ...]:
    """The groups of order-parameter indices ``branch`` sets equal (empty for other branches)."""
    return tuple(tuple(g) for g in (module.UNIT_TIES or {}).get(branch or "", ()))


def tie_projection(module: GeneratedModel, branch: str | None) -> Projection | None:
    """The group average onto ``branch``'s subspace, for order parameters and conjugates alike
    (a conjugate is paired one-to-one with its order parameter), or None without ties."""
    groups = ties(module, branch)
    if not groups:
        return None
    sizes = np.asarray(module.ORBIT_SIZES, dtype=float)
    idx = [np.asarray(g) for g in groups]
    weights = [sizes[g] / sizes[g].sum() for g in idx]

    def project(x: np.ndarray) -> np.ndarray:
        y = np.array(x, dtype=float)
        for g, w in zip(idx, weights):
            y[g] = float(w @ y[g])
        return y
    return project


def breaking_directions(module: GeneratedModel, branch: str) -> np.ndarray:
    """Unit vectors (rows, in ``ORDER_PARAMETERS`` coordinates) spanning the directions that leave
    ``branch``'s tied subspace within the module's ansatz: in every tie group, the contrasts
    orthogonal (in the orbit-size inner product) to the tied direction. Empty (0 rows) without ties."""
    n = len(module.ORDER_PARAMETERS)
    sizes = np.asarray(module.ORBIT_SIZES, dtype=float) if module.ORBIT_SIZES else np.ones(n)
    rows = []
    for g in ties(module, branch):
        g = list(g)
        # an orthonormal basis, in the inner product <u, v> = sum_i size_i u_i v_i, of the vectors
        # on g orthogonal to the constant one: Gram-Schmidt on e_k - (weighted mean)
        w = sizes[g]
        basis: list[np.ndarray] = [np.ones(len(g)) / np.sqrt(w.sum())]
        for k in range(1, len(g)):
            v = np.zeros(len(g))
            v[k] = 1.0
            for b in basis:
                v -= (w * v * b).sum() * b
            v /= np.sqrt((w * v * v).sum())
            basis.append(v)
        for b in basis[1:]:
            e = np.zeros(n)
            e[g] = b
            rows.append(e)
    return np.array(rows).reshape(len(rows), n)


def tie_gap(module: GeneratedModel, branch: str, x: np.ndarray) -> float:
    """How far ``x`` is from ``branch``'s tied subspace, relative to the tied values: the largest
    ``|x_i - mean| / max(|mean|, 1e-3)`` over the tie groups (0 without ties)."""
    project = tie_projection(module, branch)
    if project is None:
        return 0.0
    y = project(x)
    gap = 0.0
    for g in ties(module, branch):
        g = list(g)
        gap = max(gap, float(np.max(np.abs(x[g] - y[g])) / max(abs(float(y[g[0]])), 1e-3)))
    return gap


def specialised_start(module: GeneratedModel, x: np.ndarray, branch: str | None) -> np.ndarray:
    """A start off every unit tie of the module's other branches (so that a branch without ties
    does not begin on a tied subspace, which the map would never leave): in every group some
    branch ties but ``branch`` does not, the later members start at a fifth of the first."""
    own = set(ties(module, branch))
    y = np.array(x, dtype=float)
    for b in module.UNIT_TIES or {}:
        for g in ties(module, b):
            if g in own:
                continue
            for i in g[1:]:
                y[i] = 0.2 * y[g[0]]
    return y


def unit_branch_notes(module: GeneratedModel, branch: str | None, x: np.ndarray, prefix: str) -> list[str]:
    """A note when a fixed point of ``branch`` lies (within 1e-4 relative) on a unit branch that ties
    more: e.g. a solve of the specialised branch that converged to equal diagonal and off-diagonal
    ``theta``, which is the unspecialised fixed point (no specialised one from this start)."""
    if not has_units(module):
        return []
    own = set(ties(module, branch))
    out = []
    for b in module.UNIT_TIES or {}:
        extra = [g for g in ties(module, b) if g not in own]
        if not extra or set(ties(module, b)) < own:
            continue
        if tie_gap(module, b, x) < 1e-4:
            names = ", ".join(" = ".join(module.ORDER_PARAMETERS[i] for i in g) for g in extra)
            if branch in (None, "free"):   # the free branch contains the tied subspace: a fixed point of it
                out.append(f"{names} within 1e-4: this is the {b} fixed point; no fixed point off the {b} "
                           f"subspace was found from the starts at this alpha (see 'replica phase' for where each "
                           f"branch exists)")
            else:
                out.append(f"{prefix}: {names} within 1e-4: the {branch} solve converged to the {b} fixed point "
                           f"(the {b} branch's ties hold); no {branch} fixed point was found from this start at "
                           f"this alpha (see 'replica phase' for where each branch exists)")
        elif module.UNIT_ANSATZ == "specialised":
            out += _anti_specialised(module, extra, x)
    return out


def _anti_specialised(module: GeneratedModel, groups, x: np.ndarray) -> list[str]:
    """A note where a tie group's first orbit (a diagonal: unit ``k`` with teacher unit ``k``) is
    below the others: every student unit then overlaps the other teacher units more than its own.
    With two units that is a relabelling (:func:`canonical_units` reports the diagonal the larger);
    with three or more it is a fixed point of its own (three tanh units at alpha = 4 and 8 have
    both, the specialised one with the larger free entropy)."""
    sizes = module.ORBIT_SIZES
    low = [g for g in groups if len(g) > 1 and len({sizes[i] for i in g}) > 1 and x[g[0]] < min(x[list(g[1:])])]
    if not low:
        return []
    names = ", ".join(f"{module.ORDER_PARAMETERS[g[0]]} < " + ", ".join(module.ORDER_PARAMETERS[i] for i in g[1:])
                      for g in low)
    return [f"{names}: every student unit overlaps the other teacher units more than its own (an anti-specialised "
            f"fixed point, not a relabelling of a specialised one); no fixed point with the diagonal the larger was "
            f"found from the starts at this alpha"]


def tied_starts(module: GeneratedModel, x: np.ndarray, branch: str | None) -> list[tuple[np.ndarray, str]]:
    """``(x projected on b, b)`` for every unit branch ``b`` that ties more than ``branch`` (extra
    starts of a cold solve, solved on ``b``: where ``branch`` has no fixed point of its own, the solve
    still finds the one it merges into, and says so)."""
    own = set(ties(module, branch))
    out = []
    for b in module.UNIT_TIES or {}:
        if set(ties(module, b)) > own:
            out.append((tie_projection(module, b)(x), b))
    return out


def canonical_units(module: GeneratedModel, x: np.ndarray, xhat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reported labelling of a specialised state of two exchangeable units: swapping the two
    teacher units exchanges ``theta``'s diagonal and off-diagonal values (each an orbit of two
    entries), a symmetry of the equations; the diagonal is reported the larger (student unit ``k``
    learns teacher unit ``k``). Other states are returned unchanged."""
    if module.UNIT_ANSATZ != "specialised" or any(len(b) != 2 for b in module.UNIT_BLOCKS[0]):
        return x, xhat
    x, xhat = x.copy(), xhat.copy()
    for g in {g for b in module.UNIT_TIES or {} for g in ties(module, b)}:
        if len(g) == 2 and module.ORBIT_SIZES[g[0]] == module.ORBIT_SIZES[g[1]] and x[g[0]] < x[g[1]]:
            x[list(g)] = x[[g[1], g[0]]]
            xhat[list(g)] = xhat[[g[1], g[0]]]
    return x, xhat


#: nodes a unit module's default tensor rule may keep after folding (about those of the two-unit
#: committee's order-14 rule in four dimensions, folded by its mirror and its unit swap)
FOLDED_NODE_BUDGET = 20_000


def permutation_group(perms) -> set[tuple[int, ...]]:
    """Every element of the group of coordinate permutations generated by ``perms`` (non-empty)."""
    dim = len(perms[0])
    group = {tuple(range(dim))}
    todo = list(group)
    while todo:
        g = todo.pop()
        for p in perms:
            h = tuple(g[i] for i in p)
            if h not in group:
                group.add(h)
                todo.append(h)
    return group


def group_order(perms) -> int:
    """The order of the group of coordinate permutations generated by ``perms``."""
    return len(permutation_group(perms)) if perms else 1


def folded_order(module: GeneratedModel, flips: int = 0, budget: int = FOLDED_NODE_BUDGET) -> int | None:
    """The tensor Gauss-Hermite order per axis whose rule, folded by the unit permutations (and
    ``flips`` independent sign flips), keeps about ``budget`` nodes; None without unit permutations.
    Symmetry makes tensor rules affordable in dimension five and up: the committee of ``K`` units
    folds its ``2K``-dimensional rule by ``K!`` (times 2 for the mirror)."""
    if not module.UNIT_PERMUTATIONS:
        return None
    dim = len(module.GAUSSIANS)
    size = group_order(module.UNIT_PERMUTATIONS) * 2 ** flips
    order = 3
    while (order + 1) ** dim / size <= budget and order < 24:
        order += 1
    return order

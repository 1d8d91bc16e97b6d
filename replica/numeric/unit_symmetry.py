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
from .quadrature import SOBOL_SCRAMBLINGS

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


#: relative step of the central differences along a breaking direction
FD_STEP = 1e-4
#: the unit branches by name (replica.symbolic.permutations); the breaking directions leave the
#: unspecialised one's fixed subspace
SPECIALISED, UNSPECIALISED = "specialised", "unspecialised"


def breaking_eigenvalues(solver, x: np.ndarray, alpha: float) -> np.ndarray:
    """Eigenvalues of the saddle-point map's Jacobian along the breaking directions at ``x`` (an
    unspecialised fixed point), by central differences (two map evaluations per direction);
    ``solver`` (a :class:`~replica.numeric.solver.Solver`) solves a branch without ties. The map
    commutes with the unspecialised branch's group, so at its fixed point the Jacobian maps these
    directions onto themselves and their block is computed alone."""
    mod = solver.module
    E = breaking_directions(mod, UNSPECIALISED)
    sizes = np.asarray(mod.ORBIT_SIZES, dtype=float)
    scale = max(float(np.linalg.norm(x)), 1e-3)
    cols = []
    for e in E:
        h = FD_STEP * scale / max(float(np.linalg.norm(e)), 1e-300)
        plus = solver.evaluate_map(x + h * e, alpha).x_new
        minus = solver.evaluate_map(x - h * e, alpha).x_new
        cols.append((plus - minus) / (2 * h))
    # components along the (orbit-size orthonormal) breaking basis
    M = np.array([[float(np.sum(sizes * e * c)) for c in cols] for e in E])
    return np.linalg.eigvals(M)


def largest_breaking(ev: np.ndarray) -> float:
    """The largest real part of breaking eigenvalues (the one whose crossing of one is the
    bifurcation); nan without any."""
    return float(np.max(ev.real)) if ev.size else float("nan")


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


def _tying_more(module: GeneratedModel, branch: str | None) -> list[tuple[str, list[tuple[int, ...]]]]:
    """``(b, groups)`` for every unit branch ``b`` with tie groups that ``branch`` does not have
    (``groups``), unless ``b``'s ties are a strict part of ``branch``'s."""
    own = set(ties(module, branch))
    out = []
    for b in module.UNIT_TIES or {}:
        extra = [g for g in ties(module, b) if g not in own]
        if extra and not set(ties(module, b)) < own:
            out.append((b, extra))
    return out


def unit_branch_notes(module: GeneratedModel, branch: str | None, x: np.ndarray, prefix: str) -> list[str]:
    """A note when a fixed point of ``branch`` lies (within 1e-4 relative) on a unit branch that ties
    more: e.g. a solve of the specialised branch that converged to equal diagonal and off-diagonal
    ``theta``, which is the unspecialised fixed point (no specialised one from this start)."""
    if not has_units(module):
        return []
    out = []
    for b, extra in _tying_more(module, branch):
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


def unresolved_ties(module: GeneratedModel, branch: str | None, x: np.ndarray, errors) -> list[str]:
    """A note where a fixed point of ``branch`` is off a unit branch that ties more (e.g. ``theta``'s
    diagonal above its off-diagonal) by no more than its error bars (``errors``: bar per order
    parameter name): on those rules the point is not resolved from the tied subspace. A rule that is
    not symmetric under the units' permutations (scrambled Sobol points) moves the tied fixed point
    off its subspace by about its own error, so a weakly specialised point within its bars may be
    the unspecialised one; ``--branch`` solves the tied branch exactly."""
    if not has_units(module):
        return []
    out = []
    for b, extra in _tying_more(module, branch):
        names = module.ORDER_PARAMETERS
        within = []
        for g in extra:
            vals = [float(x[i]) for i in g]
            bars = [float(errors.get(names[i], np.nan)) for i in g]
            spread = max(vals) - min(vals)
            # on the subspace to 1e-4 (relative) it is the tied fixed point, as unit_branch_notes says
            on = spread <= 1e-4 * max(abs(float(np.mean(vals))), 1e-3)
            if all(np.isfinite(bars)) and not on and spread <= sum(sorted(bars)[-2:]):
                low = len(vals) > 1 and vals[0] < max(vals[1:])   # what _anti_specialised flags, unresolved too
                within.append(f"{', '.join(names[i] for i in g)} differ by {spread:.2g}, within their bars ("
                              + ", ".join(f"±{e:.2g}" for e in bars) + ")"
                              + (" -- the diagonal below the rest (anti-specialised) is not resolved either"
                                 if low else ""))
        if within:
            out.append(f"{'; '.join(within)}: on these rules this fixed point is not resolved from the {b} subspace "
                       f"(a rule that is not symmetric under the units' permutations moves the {b} fixed point off "
                       f"it by about its error); --branch {b} solves that branch with its ties imposed")
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


#: nodes a unit module's default rule may have (about those of the two-unit committee's order-14 rule
#: in four dimensions, folded by its mirror and its unit swap)
UNIT_RULE_NODE_BUDGET = 20_000


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


def default_unit_rule(module: GeneratedModel, budget: int = UNIT_RULE_NODE_BUDGET) -> str | None:
    """The default energetic rule of a module with unit permutations in five Gaussian dimensions and
    more: scrambled Sobol points (``sobol:M``: ``SOBOL_SCRAMBLINGS`` sets of ``2^M``, the
    largest ``M`` within ``budget`` nodes); None for other modules.

    Not a tensor Gauss-Hermite rule folded by the unit permutations to as many nodes (order 7 for
    three units): on three tanh units (six dimensions) orders 5 to 11 do not converge -- at
    alpha = 6 the specialised fixed point's ``V_11 - V_12`` is 7.2, 1.1, 2.5, 5.9 and 5.2 on orders
    6, 7, 9, 10 and 11, where scrambled Sobol rules of 2^14 and 2^15 points per set agree on 5.53
    (to 0.06 %) -- and order 7 loses the specialised branch below alpha = 4.47 (a saddle-node of
    that rule alone). A randomised rule converges at its own rate whatever the integrand, and the
    spread of its scramblings is its bar (:mod:`replica.numeric.rqmc`)."""
    if not module.UNIT_PERMUTATIONS or len(module.GAUSSIANS) < 5:
        return None
    m = 1
    while SOBOL_SCRAMBLINGS * 2 ** (m + 1) <= budget:
        m += 1
    return f"sobol:{m}"

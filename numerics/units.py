"""Exchangeable units at finite size: where a run starts, and how its units are matched to the theory.

A model with exchangeable units (:mod:`replica.symbolic.permutations`) is derived in the
unit-symmetric ansatz: its order parameters are orbit values (``q_1_11`` every diagonal entry of
``q``, ``q_1_12`` every off-diagonal one, ``theta_1_11`` the diagonal of ``theta`` on the specialised
branch). A finite-size minimiser has its own labelling of the units, so it is compared through
functions that do not depend on it:

* **specialised** branch (a student block matched with a teacher block): the student units are
  first permuted to the teacher units they learn (the assignment that maximises the trace of
  ``theta``, :func:`best_permutation`), then every orbit is averaged -- ``matching = "permutation"``;
* **unspecialised** branch: the orbit averages of the unspecialised group (all of ``theta``'s entries
  together), symmetric functions of the units -- ``matching = "symmetric"``.

Starts follow the branch: random weights for the specialised search (gradient descent then breaks
the symmetry by itself, never by a start that puts unit ``k`` on teacher unit ``k``); for the
unspecialised branch every student unit starts on the teacher units' mean direction (plus noise),
and with ``constrain`` the weights stay orthogonal to the teacher units' contrasts, so that each
student unit overlaps every teacher unit alike.
"""
from __future__ import annotations

import itertools
from typing import Mapping

import numpy as np

#: the unit branches (replica.symbolic.permutations)
SPECIALISED, UNSPECIALISED = "specialised", "unspecialised"


def unit_branch(model, branch: str | None) -> str | None:
    """The unit branch a run of ``model`` on ``branch`` searches (``free`` is the module's ansatz), or
    None for a model without exchangeable units."""
    if model.unit_ansatz is None:
        return None
    if branch in (None, "free") or branch not in model.unit_branches:
        return model.unit_ansatz.kind
    return branch


def matching(model, branch: str | None) -> str:
    """``"permutation"``, ``"symmetric"`` or ``"none"`` (the check's ``matching`` key)."""
    kind = unit_branch(model, branch)
    if kind is None:
        return "none"
    return "permutation" if kind == SPECIALISED else "symmetric"


def initial_weights(model, W: np.ndarray, Qstar: np.ndarray, branch: str | None,
                    rng: np.random.Generator) -> np.ndarray:
    """Initial weights (d, r) of a unit model on ``branch`` (module docstring); ``W`` is the small
    noise every start carries."""
    kind = unit_branch(model, branch)
    d = W.shape[0]
    if kind == UNSPECIALISED and Qstar.shape[1]:
        mean = Qstar.mean(axis=1)
        return W + mean[:, None] + 0.1 * rng.standard_normal((d, W.shape[1]))
    return W + rng.standard_normal(W.shape)   # random, of the teacher's scale (columns of norm ~ sqrt(d))


def constraint_directions(model, Qstar: np.ndarray, gamma: np.ndarray, branch: str | None) -> list[np.ndarray]:
    """Directions the weights avoid on the unspecialised branch: ``Sigma_l (Q*_j - Q*_1)`` for every
    teacher unit ``j`` of a block of exchangeable teacher units (then ``theta_kj`` does not depend on
    ``j``); none on other branches."""
    if unit_branch(model, branch) != UNSPECIALISED:
        return []
    out = []
    for block in model.unit_blocks.teacher:
        for j in block[1:]:
            out += [g * (Qstar[:, j] - Qstar[:, block[0]]) for g in gamma]
    return out


def best_permutation(theta: np.ndarray, model) -> list[int]:
    """The order of the student units (a permutation of ``range(r)``) that puts on the diagonal of
    every matched block the teacher units they overlap most (the assignment maximising the trace;
    ``theta`` is ``(r, r_t)``, summed over tokens beforehand). Units outside matched blocks stay."""
    order = list(range(theta.shape[0]))
    for sb, tb in model.unit_blocks.matched:
        sub = theta[np.ix_(sb, tb)]
        best = max(itertools.permutations(range(len(sb))),
                   key=lambda p: sum(sub[p[k], k] for k in range(len(tb))))
        for k, i in enumerate(best):
            order[sb[k]] = sb[i]
    return order


def orbit_values(model, module, overlaps: Mapping[str, np.ndarray], branch: str | None) -> dict[str, float]:
    """The measured order parameters under the module's names: each the average of its orbit's entries
    (of the unspecialised group on that branch, of the module's ansatz otherwise), ``V`` excluded."""
    from replica.symbolic.permutations import UnitAnsatz

    kind = unit_branch(model, branch)
    ansatz = UnitAnsatz(model.unit_blocks, kind)
    slots = list(model.data.slot_labels)
    out = {}
    for name in module.ORDER_PARAMETERS:
        fam, token, i, j, rows, cols = module.LAYOUT[name]
        if fam == "V":
            continue
        t = 0 if token is None else (slots.index(token) if isinstance(token, str) else int(token) - 1)
        M = overlaps[fam][t]
        if fam == "m":
            M = M[:, None]
            j = 0
        orbit = next(o for o in ansatz.family_orbits(fam, (rows, cols)) if (min(i, j), max(i, j)) in o or (i, j) in o)
        out[name] = float(np.mean([M[a, b] for a, b in orbit]))
    return out

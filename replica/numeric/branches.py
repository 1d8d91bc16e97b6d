"""Branches: invariant subspaces of the saddle-point equations, and how they relate.

A model declares branches as named sets of order-parameter families pinned to zero (module
``BRANCHES``). The relations the phase machinery needs follow from the pinned sets alone, for
any model: a branch *merges into* a declared branch that pins strictly more (the families it
adds are this branch's *defining* families: where they vanish, the two coincide). For the
paper's model, ``agnostic`` (``m = theta = 0``) is where ``semantic`` (``m = 0``; defining
``theta``) and ``positional`` (``theta = 0``; defining ``m``) end.
"""
from __future__ import annotations


from ..interface.families import FREE, PINNABLE
from ..interface.generated_model import GeneratedModel
from .unit_symmetry import ties
from ..errors import ParameterError


def pinned(module: GeneratedModel, branch: str | None) -> tuple[str, ...]:
    """Families pinned to zero on ``branch`` (``None`` or ``"free"``: none)."""
    if branch in (None, FREE):
        return ()
    if branch not in module.BRANCHES:
        raise ParameterError("branch", f"unknown branch {branch!r}; choose from {[FREE, *module.BRANCHES]}")
    return tuple(module.BRANCHES[branch])


def merge_targets(module: GeneratedModel, branch: str) -> list[str]:
    """Declared branches that constrain strictly more than ``branch`` (pin more families, or tie
    more order parameters: the unit branches of :mod:`replica.numeric.unit_symmetry`), least
    constrained first."""
    own, own_t = set(pinned(module, branch)), set(ties(module, branch))

    def more(b: str) -> bool:
        p, t = set(module.BRANCHES[b]), set(ties(module, b))
        return own <= p and own_t <= t and (own < p or own_t < t)
    out = [b for b in module.BRANCHES if b != branch and more(b)]
    return sorted(out, key=lambda b: len(module.BRANCHES[b]) + len(ties(module, b)))


def merge_target(module: GeneratedModel, branch: str) -> str | None:
    """The branch ``branch`` merges into (the smallest declared superset), or None."""
    targets = merge_targets(module, branch)
    return targets[0] if targets else None


def defining_ties(module: GeneratedModel, branch: str) -> list[tuple[int, ...]]:
    """Groups of order parameters free on ``branch`` but tied on its merge target: where their
    members become equal, the branch has merged (e.g. ``theta``'s diagonal and off-diagonal on the
    specialised branch of a committee); empty if it merges into nothing."""
    target = merge_target(module, branch)
    if target is None:
        return []
    own = set(ties(module, branch))
    return [g for g in ties(module, target) if g not in own]


def defining_families(module: GeneratedModel, branch: str) -> list[str]:
    """Families free on ``branch`` but pinned on its merge target (module ``FAMILIES`` order):
    the overlaps that distinguish the branch; empty if it merges into nothing."""
    target = merge_target(module, branch)
    if target is None:
        return []
    extra = set(module.BRANCHES[target]) - set(pinned(module, branch))
    return [f for f in module.FAMILIES if f in extra]


def branch_pinning(module: GeneratedModel, families: set[str] | tuple[str, ...]) -> str | None:
    """The declared branch whose pinned families are exactly ``families``, or None."""
    want = set(families)
    return next((b for b, p in module.BRANCHES.items() if set(p) == want), None)

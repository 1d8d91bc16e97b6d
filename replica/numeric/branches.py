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
from ..errors import ParameterError


def pinned(module: GeneratedModel, branch: str | None) -> tuple[str, ...]:
    """Families pinned to zero on ``branch`` (``None`` or ``"free"``: none)."""
    if branch in (None, FREE):
        return ()
    if branch not in module.BRANCHES:
        raise ParameterError("branch", f"unknown branch {branch!r}; choose from {[FREE, *module.BRANCHES]}")
    return tuple(module.BRANCHES[branch])


def merge_targets(module: GeneratedModel, branch: str) -> list[str]:
    """Declared branches that pin strictly more than ``branch``, fewest pinned first."""
    own = set(pinned(module, branch))
    out = [b for b, p in module.BRANCHES.items() if b != branch and own < set(p)]
    return sorted(out, key=lambda b: len(module.BRANCHES[b]))


def merge_target(module: GeneratedModel, branch: str) -> str | None:
    """The branch ``branch`` merges into (the smallest declared superset), or None."""
    targets = merge_targets(module, branch)
    return targets[0] if targets else None


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

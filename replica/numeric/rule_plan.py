"""What a refinement ladder will cost, known before it runs (``replica solve --accuracy``).

:func:`ladder_plan` lists the energetic rules :func:`replica.numeric.accuracy.solve_to_accuracy` would
refine through within the node budget (``REPLICA_MAX_NODES``), counted without building them;
:func:`plan_line` says it in one line with a rough time, before any refinement starts;
:func:`over_budget` stops pre-integration's ladder at the budget as tensor rules stop at theirs
(its levels grow ~2.5x in points each and had no budget: eight levels ran for many minutes).
"""
from __future__ import annotations

import time

import numpy as np

from ..validation import max_nodes, rule_nodes

#: map evaluations one level of the ladder costs, roughly: a warm re-solve (3-5), its
#: Newton-corrected check, the extra prox starts and the coarser solve of the convergence check
EVALUATIONS_PER_LEVEL = 8


def budget() -> int:
    """The node budget (:func:`replica.validation.max_nodes`)."""
    return max_nodes()


def level_nodes(integ) -> int | None:
    """The points one map evaluation of energetic integrator ``integ`` visits: a tensor rule's
    (folded) nodes; pre-integration's lines x points per line (a lower bound: the pieces between
    located jumps add more); None for other integrators."""
    size = getattr(integ, "size", None)
    if isinstance(size, (int, np.integer)):
        return int(size)
    lines = getattr(integ, "line_orders", None)
    if lines is not None:
        return int(np.prod([int(k) for k in lines])) * int(getattr(integ, "u_order", 1))
    return None


def _next_lines(lines, u: int) -> tuple[list[int], int]:
    """Pre-integration's ``refined()`` orders: ``k + max(2, k // 3)`` per line axis, ``u + 2``."""
    return [k + max(2, k // 3) for k in lines], u + 2


def next_preint_nodes(integ) -> int | None:
    """:func:`level_nodes` of pre-integration's next level, unbuilt (None for other integrators)."""
    lines = getattr(integ, "line_orders", None)
    if lines is None:
        return None
    nxt, u = _next_lines(list(lines), int(integ.u_order))
    return int(np.prod(nxt)) * u


def over_budget(integ) -> str | None:
    """Why refining pre-integration ``integ`` once more is refused (its next level over the node
    budget), or None."""
    n = next_preint_nodes(integ)
    if n is None or n <= budget():
        return None
    return (f"the next pre-integration level has over {n:,} points, over the budget of {budget():,} "
            "(REPLICA_MAX_NODES)")


def ladder_plan(solver, max_levels: int) -> list[tuple[str, int]]:
    """``[(rule, points), ...]``: the energetic rules the ladder would refine through within the
    node budget, without building them (empty where the working integrator's levels cannot be
    counted in advance). Tensor Gauss-Hermite ``order + max(2, order // 3)`` per axis (folded as
    the working rule is), pre-integration :func:`next_preint_nodes`."""
    integ, cap = solver.integrator, budget()
    rule = getattr(integ, "rule", None)
    out: list[tuple[str, int]] = []
    if getattr(rule, "kind", None) == "gauss-hermite" and isinstance(getattr(integ, "size", None), int):
        fold = rule.size / max(int(integ.size), 1)
        order = rule.order
        for _ in range(max_levels):
            order = order + max(2, order // 3)
            n = rule_nodes("gh", rule.dim, order)
            if n > cap:
                break
            out.append((f"gh:{order}", int(n / fold)))
        return out
    lines = getattr(integ, "line_orders", None)
    if lines is not None:
        lines, u = list(lines), int(integ.u_order)
        for _ in range(max_levels):
            lines, u = _next_lines(lines, u)
            n = int(np.prod(lines)) * u
            if n > cap:
                break
            out.append(("pre-integration lines " + "x".join(map(str, lines)), n))
    return out


#: a jump check (:func:`jump_check_refusal`) runs where one evaluation of its pre-integration level
#: visits at most this many times the working rule's points: 2x on the paper's 4-D model (14^3
#: lines x 14 points against 14^4 nodes folded to 19 208), ~280x in 6-D (14^5 lines: 7.5e6 points,
#: minutes and gigabytes per evaluation, against gh:6's 23 328 folded nodes)
JUMP_CHECK_COST = 16


def preint_points(dim: int, level: str) -> int:
    """The points one evaluation of pre-integration ``level`` (:data:`replica.preintegration.ACCURACY`)
    visits on a ``dim``-dimensional average, counted without building it: ``line_order^(dim-1)``
    lines of ``u_order + 2`` points (a lower bound: the pieces between located jumps add more)."""
    from .preintegration import ACCURACY  # (pre-integration imports the compiled kernels: only here)

    lines, u, _, _ = ACCURACY[level]
    return int(lines) ** max(int(dim) - 1, 0) * (int(u) + 2)


def jump_check_refusal(solver, level: str) -> str | None:
    """Why the jump check on pre-integration ``level`` is not run for ``solver``'s working rule (its
    points over :data:`JUMP_CHECK_COST` x the working rule's, or over the node budget
    ``REPLICA_MAX_NODES``), or None where it runs. The working rule's points: its folded nodes."""
    work = level_nodes(solver.integrator)
    n = preint_points(len(solver.module.GAUSSIANS), level)
    cap = min(budget(), JUMP_CHECK_COST * work) if work else budget()
    if n <= cap:
        return None
    return (f"the jump check's pre-integration would visit over {n:,} points per evaluation"
            + (f", {n / work:.0f}x the working rule's {work:,}" if work else "")
            + f" (limit: {JUMP_CHECK_COST}x, and the node budget {budget():,} of REPLICA_MAX_NODES)")


#: pre-integration level of the jump check (two map evaluations, ~1 s on the paper's model): the
#: ``fast`` level's own error (~5e-4 relative on the paper point, docs/reference/accuracy.md) would dominate
#: the check where the tensor rule is 1e-4-accurate
JUMP_CHECK_LEVEL = "default"
#: and the level a solve moves to when the check's shift alone exceeds the accuracy
JUMP_AWARE_LEVEL = "default"


def plan_line(solver, fp, accuracy: float, max_levels: int) -> str:
    """One line said before the ladder starts: how many levels the node budget allows, the finest
    rule, and a rough time (one timed map evaluation of the working rule at ``fp``, scaled by the
    points of each level, :data:`EVALUATIONS_PER_LEVEL` evaluations per level)."""
    plan = ladder_plan(solver, max_levels)
    work = level_nodes(solver.integrator)
    head = f"refining to accuracy {accuracy:g}: "
    if not plan:
        if work is None:
            return head + f"up to {max_levels} levels (their sizes are not known in advance)"
        return head + "the working rule is already the finest within the node budget (REPLICA_MAX_NODES)"
    t0 = time.perf_counter()
    solver.evaluate_map(fp.x, fp.alpha, use_warm=False)
    t_eval = time.perf_counter() - t0
    secs = sum(EVALUATIONS_PER_LEVEL * t_eval * n / work for _, n in plan)
    rule, n = plan[-1]
    line = (head + f"up to {len(plan)} level{'s' if len(plan) > 1 else ''} within the node budget (finest {rule}, "
            f"{n:,} points, {n / work:.0f}x the working rule's), roughly {duration(secs)} if every level is needed "
            "(estimated from one timed map evaluation)")
    if getattr(getattr(solver.integrator, "rule", None), "kind", None) and solver.jump_aware(JUMP_AWARE_LEVEL) is not None:
        more = ladder_plan(solver.jump_aware(JUMP_AWARE_LEVEL), max_levels)
        line += (f"; should the jump check move the solve to pre-integration, up to {len(more) + 1} levels of it "
                 "instead (each several times a tensor level's cost)")
    return line


def duration(s: float) -> str:
    """``12 s``, ``7 min``, ``2.5 h``."""
    return f"{s:.0f} s" if s < 120 else (f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h")

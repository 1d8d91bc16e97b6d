"""Crossings on followed branches: where two branches' free entropies cross (``alpha_c``), which
branch is the global minimum where (segments), and where its test error crosses a baseline
(``alpha_l``). Every value a root finder uses is a solved point; interpolants only bracket.

Generic in the branches: the pair ``(high, low)`` is any two declared branches, ``high`` the one
that wins at large ``alpha``; where ``low`` has merged into the branch it merges into, that one
competes in its place (:class:`Competitor`).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
from scipy.optimize import brentq

from .follower import BranchFollower
from .results import BranchCurve, BranchPoint, Crossing, CrossingStatus, EndReason, PhaseError


def brent(f: Callable[[float], float], a: float, b: float, fa: float, fb: float, xtol: float) -> float:
    """Brent's method with known end values (saves two evaluations)."""
    cache = {a: fa, b: fb}

    def g(x: float) -> float:
        if x in cache:
            return cache[x]
        cache[x] = v = f(x)
        return v

    return float(brentq(g, a, b, xtol=xtol, rtol=4 * np.finfo(float).eps, maxiter=60))


class Competitor:
    """The solution that competes with the ``high`` branch: the ``low`` branch where it exists, and
    the branch it merges into where it has merged. ``parts`` is a priority-ordered list of
    ``(follower, curve)``."""

    def __init__(self, parts: Sequence[tuple[BranchFollower, BranchCurve]]):
        self.parts = [(f, c) for f, c in parts if c is not None and len(c)]

    def part(self, alpha: float) -> tuple[BranchFollower, BranchCurve] | None:
        for f, c in self.parts:
            if c.covers(alpha):
                return f, c
        return None

    def covers(self, alpha: float) -> bool:
        return self.part(alpha) is not None

    def name(self, alpha: float) -> str:
        p = self.part(alpha)
        return p[1].branch if p else "-"

    @property
    def alphas(self) -> np.ndarray:
        return np.unique(np.concatenate([c.alphas for _, c in self.parts])) if self.parts else np.array([])

    def phi_interp(self, alpha: float) -> float:
        return float(self.part(alpha)[1].phi_interp(alpha))

    def point_at(self, alpha: float) -> BranchPoint:
        f, c = self.part(alpha)
        return f.point_at(c, alpha)


def find_crossing(high: BranchFollower, high_curve: BranchCurve, low: BranchFollower, low_curve: BranchCurve,
                  xtol: float = 1e-4, fallback: tuple[BranchFollower, BranchCurve] | None = None) -> Crossing:
    """``alpha_c``: the first ``alpha`` where ``Phi_high - Phi_low`` turns from negative (``low`` is
    the global minimum) to positive, by Brent's method on points solved on both branches.

    The cubic Hermite interpolants of ``Phi`` on the followed curves only provide the bracket
    and the first guess; every value the root finder uses is a solved point. Where ``low`` has
    merged into the branch it merges into, ``fallback`` (that branch, if given) takes its place.
    If ``high`` is already the better one where it appears (it bifurcates continuously, or its
    spinodal lies above the crossing), ``alpha_c`` is that end point.
    """
    hb, lb = high.branch, low.branch
    comp = Competitor([(low, low_curve)] + ([fallback] if fallback is not None else []))
    if not len(high_curve):
        return Crossing(None, f"no {hb} branch was found in the scanned range")
    if not comp.parts:
        alt = f" (or {fallback[1].branch})" if fallback is not None else ""
        return Crossing(None, f"no {lb}{alt} branch was found in the scanned range")
    s0, s1 = high_curve.range
    grid = np.unique(np.concatenate([high_curve.alphas, comp.alphas]))
    grid = np.array([a for a in grid if s0 - 1e-12 <= a <= s1 + 1e-12 and comp.covers(float(a))])
    if len(grid) < 1:
        ranges = ", ".join(f"{c.branch} on [{c.range[0]:.4g}, {c.range[1]:.4g}]" for _, c in comp.parts)
        return Crossing(None, f"the branches do not coexist: {hb} solved on [{s0:.4g}, {s1:.4g}], {ranges}")
    lo, hi = float(grid[0]), float(grid[-1])
    diff = np.array([float(high_curve.phi_interp(a)) - comp.phi_interp(float(a)) for a in grid])
    up = [i for i in range(len(grid) - 1) if diff[i] < 0 <= diff[i + 1]]
    names = {comp.name(float(a)) for a in grid}
    other = "/".join(sorted(names, key=lambda n: n != lb))
    if not up:
        if np.all(diff >= 0):
            end = next((e for e in high_curve.ends if abs(e.alpha - s0) < 1e-12
                        and e.reason is not EndReason.NO_SOLUTION), None)
            if end is not None and end.reason is EndReason.ITERATION_BUDGET:
                return Crossing(None, f"the {hb} branch stops at alpha = {s0:.6g} only because the solve below it ran "
                                      "out of its iteration budget: a threshold built on an unconverged solve is not a "
                                      "number (raise --max-iter)")
            if end is not None and abs(lo - s0) < 1e-12:
                kind = (f"continuous transition: the {hb} branch bifurcates from the "
                        f"{comp.name(s0)} one" if end.reason is EndReason.MERGED else
                        f"the {hb} branch appears ({end.reason} below) already with the larger Phi")
                return Crossing(s0, f"{kind} at alpha = {s0:.6g} (located to within one smallest step)",
                                (end.alpha_next, s0), status=CrossingStatus.BRANCH_END)
            return Crossing(None, f"Phi_{hb} > Phi_{other} on the whole overlap [{lo:.4g}, {hi:.4g}] "
                                  "of the branches: alpha_c is below it")
        if np.all(diff < 0):
            return Crossing(None, f"Phi_{other} > Phi_{hb} on the whole overlap [{lo:.4g}, {hi:.4g}] "
                                  "of the branches: no transition in the scanned range")
        return Crossing(None, f"Phi_{hb} - Phi_{other} only decreases through zero in the scanned range")
    i = up[0]
    a, b = float(grid[i]), float(grid[i + 1])
    evals = [0]

    def F(alpha: float) -> float:
        evals[0] += 1
        return high.point_at(high_curve, alpha).phi - comp.point_at(alpha).phi

    # first guess from the Hermite interpolants, then a tight bracket around it
    try:
        guess = float(brentq(lambda t: float(high_curve.phi_interp(t)) - comp.phi_interp(t), a, b, xtol=1e-10))
    except ValueError:
        guess = 0.5 * (a + b)
    delta = max(20 * xtol, 0.02 * (b - a))
    lo_b, hi_b = max(a, guess - delta), min(b, guess + delta)
    try:
        f_lo, f_hi = F(lo_b), F(hi_b)
        if not (f_lo < 0 <= f_hi):
            lo_b, hi_b = a, b
            f_lo, f_hi = F(a), F(b)
        if not (f_lo < 0 <= f_hi):
            return Crossing(None, f"solved Phi_{hb} - Phi_{other} has no sign change on [{a:.4g}, {b:.4g}] "
                                  f"although the interpolants cross at {guess:.4g}", (a, b), evals[0])
        root = brent(F, lo_b, hi_b, f_lo, f_hi, xtol)
    except PhaseError as exc:
        return Crossing(None, f"root refinement failed: {exc}", (a, b), evals[0], status=CrossingStatus.FAILED)
    note = "" if len(up) == 1 else f"; {len(up) - 1} further crossing(s) in the range"
    against = comp.name(root)
    merged = "" if against == lb else f" (the {lb} branch has merged into the {against} one here)"
    return Crossing(root, f"Brent root of Phi_{hb} - Phi_{against} on solved points (xtol={xtol:g}){merged}{note}",
                    (lo_b, hi_b), evals[0])


def global_segments(curves: Mapping[str, BranchCurve], alpha_c: Crossing, alpha_min: float,
                    alpha_max: float, candidates: Sequence[str], high: str) -> list[tuple[float, float, str]]:
    """Intervals of ``alpha`` and the branch with the larger ``Phi`` there (the global minimum
    among ``candidates``). A switch involving ``high`` sits at ``alpha_c``; other switches (a branch
    ends, or no ``alpha_c`` was found) at the branch end or the interpolated crossing."""
    cs = {b: curves[b] for b in candidates if b in curves and len(curves[b])}
    if not cs:
        return []
    grid = np.unique(np.concatenate([c.alphas for c in cs.values()] + [[alpha_min, alpha_max]]))
    grid = grid[(grid >= alpha_min - 1e-12) & (grid <= alpha_max + 1e-12)]

    def best(a: float) -> str | None:
        vals = {b: float(c.phi_interp(a)) for b, c in cs.items() if c.covers(a)}
        return max(vals, key=vals.get) if vals else None

    labels = [best(float(a)) for a in grid]
    segs: list[list] = []
    for k, (a, lab) in enumerate(zip(grid, labels)):
        if lab is None:
            continue
        if segs and segs[-1][2] == lab and labels[k - 1] == lab:
            segs[-1][1] = float(a)
            continue
        start = float(a)
        if segs and labels[k - 1] is not None:
            prev = segs[-1]
            a_prev = float(grid[k - 1])
            prev_ends = not cs[prev[2]].covers(a)
            new_starts = not cs[lab].covers(a_prev)
            if alpha_c.value is not None and a_prev <= alpha_c.value <= a and high in (prev[2], lab):
                end = start = alpha_c.value
            elif prev_ends or new_starts:
                # a branch ends or begins here: switch there (possibly leaving a gap)
                end = cs[prev[2]].range[1] if prev_ends else cs[lab].range[0]
                start = cs[lab].range[0] if new_starts else end
                end = min(end, start)
            else:
                def g(t):
                    return float(cs[lab].phi_interp(t) - cs[prev[2]].phi_interp(t))
                end = float(brentq(g, a_prev, a)) if g(a_prev) * g(a) < 0 else 0.5 * (a_prev + a)
                start = end
            prev[1] = end
        segs.append([start, float(a), lab])
    return [(float(a0), float(a1), b) for a0, a1, b in segs if a1 >= a0]


def find_baseline_crossing(followers: Mapping[str, BranchFollower], curves: Mapping[str, BranchCurve],
                           segments: Sequence[tuple[float, float, str]], eps_lin: float,
                           xtol: float = 1e-4) -> Crossing:
    """``alpha_l``: the first ``alpha`` where the global-minimum ``eps_g`` drops below the baseline
    ``eps_lin``.

    Inside a segment the root is refined by Brent's method on solved points of that branch;
    if ``eps_g`` jumps below ``eps_lin`` at a switch of branch (e.g. at ``alpha_c``),
    ``alpha_l`` is that switch.
    """
    if not segments:
        return Crossing(None, "no branch was solved in the scanned range")
    prev_sign: float | None = None
    for a0, a1, b in segments:
        c, fol = curves[b], followers[b]
        grid = np.unique(np.concatenate([c.alphas, [a0, a1]]))
        grid = grid[(grid >= a0 - 1e-12) & (grid <= a1 + 1e-12)]
        e = np.asarray(c.interp("eps_g", grid)) - eps_lin
        if prev_sign is None and e[0] <= 0:
            return Crossing(None, f"the global-minimum eps_g ({b} branch) is already below eps_lin at "
                                  f"alpha = {a0:.4g}: alpha_l is below the scanned range")
        if prev_sign is not None and prev_sign > 0 and e[0] <= 0:
            return Crossing(a0, f"eps_g jumps below eps_lin where the global minimum switches to the {b} "
                                f"branch (alpha = {a0:.6g})", (a0, a0), status=CrossingStatus.SWITCH)
        for i in range(len(grid) - 1):
            if e[i] > 0 >= e[i + 1]:
                ga, gb = float(grid[i]), float(grid[i + 1])
                evals = [0]

                def F(alpha: float) -> float:
                    evals[0] += 1
                    return fol.point_at(c, alpha).eps_g - eps_lin
                try:
                    fa, fb = F(ga), F(gb)
                    if not (fa > 0 >= fb):
                        return Crossing(None, f"solved eps_g - eps_lin has no sign change on [{ga:.4g}, "
                                              f"{gb:.4g}] ({b} branch)", (ga, gb), evals[0])
                    root = brent(F, ga, gb, fa, fb, xtol)
                except PhaseError as exc:
                    return Crossing(None, f"root refinement failed: {exc}", (ga, gb), evals[0],
                                    status=CrossingStatus.FAILED)
                return Crossing(root, f"Brent root of eps_g - eps_lin on solved points of the {b} branch "
                                      f"(xtol={xtol:g})", (ga, gb), evals[0])
        prev_sign = float(np.sign(e[-1])) or 1.0
    last = segments[-1]
    return Crossing(None, f"the global-minimum eps_g stays above eps_lin = {eps_lin:.4g} up to "
                          f"alpha = {last[1]:.4g} ({last[2]} branch)")

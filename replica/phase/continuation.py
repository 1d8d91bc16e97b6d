"""The phase analysis by continuation: whole branches along ``alpha``, their ends, the crossing
of a pair and the baseline crossing (:func:`continuation_point`).

For any model that declares branches: ``high`` (the branch that wins at large ``alpha``) is
followed down from ``alpha_max``; ``low`` is started where it competes with ``high`` (at the
lower end of ``high``, keeping the solution with the largest ``Phi`` there: a branch can hold
several) and followed both ways; other requested branches are followed up from ``alpha_min``.
Where ``low`` merges into the branch it merges into (:mod:`replica.numeric.branches`), that branch is
followed on from there and competes in its place.
"""
from __future__ import annotations

import concurrent.futures as cf
import time
from typing import Callable, Iterable, Mapping

from ..interface.generated_model import GeneratedModel
from ..numeric.baselines import baseline
from ..numeric.branches import merge_target
from ..artifacts.cache import PointCache
from ..runtime.progress import Progress
from .common import as_module, check_range, resolve_pair
from .crossings import find_baseline_crossing, find_crossing, global_segments
from .follower import BranchFollower
from .parallel import executor_for, module_from_ref, module_ref
from .results import BranchCurve, BranchPoint, Crossing, EndReason, PhaseResult
from .settings import SolverSettings, StepControl


def _follow_task(ref, branch, parameters, a_start, a_stop, settings, steps, cache_root, cache_on):
    module = module_from_ref(ref)
    f = BranchFollower(module, branch, parameters, settings, steps, PointCache(cache_root, cache_on))
    return f.follow(a_start, a_stop), f.solves, f.cached


def note_function(progress: Progress | Callable[[str], None] | None, label: str) -> Callable[[str], None] | None:
    """A ``note(message)`` callback for followers: a :class:`~replica.runtime.progress.Progress` note
    prefixed by ``label``, or the callable given."""
    if isinstance(progress, Progress):
        prefix = f"{label} " if label else ""
        return lambda msg: progress.note(prefix + msg)
    return progress


def baseline_value(module: GeneratedModel, parameters: Mapping[str, float]) -> tuple[float, float, str | None]:
    """``(eps_lin, its error, kind)`` of the model's declared baseline (``nan`` without one)."""
    kind = module.BASELINE
    value = baseline(module, parameters, kind)
    if value is None:
        return float("nan"), float("nan"), None
    return value[0], value[1], kind


def no_baseline(module: GeneratedModel) -> Crossing:
    return Crossing(None, f"{module.MODEL} declares no baseline to compare the test error with")


def continuation_point(module: GeneratedModel | str, parameters: Mapping[str, float] | None = None, *,
                       pair: tuple[str, str] | None = None, alpha_min: float = 0.1, alpha_max: float = 4.0,
                       branches: Iterable[str] | None = None, settings: SolverSettings | None = None,
                       steps: StepControl | None = None, cache: PointCache | None = None,
                       progress: Progress | Callable[[str], None] | None = None, jobs: int = 1,
                       early_stop: bool = False, xtol: float = 1e-4, label: str = "",
                       executor: cf.Executor | None = None) -> PhaseResult:
    """Branches, spinodals, ``alpha_c``, the baseline ``eps_lin`` and ``alpha_l`` at one set of
    parameters, by continuation (see the module docstring).

    ``pair``: ``(high, low)`` (default: the model's ``TRANSITION``); ``branches``: further
    branches to follow (default: every declared branch; the pair is always followed).
    ``early_stop=True`` stops the ``low`` continuation once its ``Phi`` is below that of
    ``high`` (past ``alpha_c``: enough for ``alpha_c`` and ``alpha_l``, with fewer solves, but
    its spinodal is then not searched for); it needs ``high`` first and hence runs sequentially.
    With ``jobs > 1`` or an ``executor`` (any :class:`concurrent.futures.Executor`), and no early
    stop, the branches other than ``low`` are followed in parallel.
    """
    t0 = time.perf_counter()
    module = as_module(module)
    check_range(alpha_min, alpha_max)
    high, low = resolve_pair(module, pair)
    params = dict(parameters or {})
    wanted = set(module.BRANCHES if branches is None else branches) | {high, low}
    branches = [high, low] + [b for b in module.BRANCHES if b in wanted and b not in (high, low)]
    settings = settings or SolverSettings()
    cache = cache if cache is not None else PointCache(enabled=False)
    note = note_function(progress, label)
    followers = {b: BranchFollower(module, b, params, settings, steps, cache, note) for b in branches}
    eps_lin, eps_lin_err, kind = baseline_value(module, params)
    start = {b: (alpha_max if b == high else alpha_min) for b in branches}
    stop_at = {b: (alpha_min if b == high else alpha_max) for b in branches}
    curves: dict[str, BranchCurve] = {}
    extra_solves = extra_cached = 0
    if (jobs > 1 or executor is not None) and not early_stop and len(branches) > 2:
        # the branches other than low in parallel; low (which starts at the lower end of high) in
        # this process once that is known
        others = [b for b in branches if b != low]
        with executor_for(min(jobs, len(others)), executor) as ex:
            futs = {b: ex.submit(_follow_task, module_ref(module), b, params, start[b], stop_at[b],
                                       settings, followers[b].steps, cache.root, cache.enabled) for b in others}
            curves[high], s, c = futs[high].result()
            extra_solves += s
            extra_cached += c
            hc = curves[high]
            a_mid = min(max(alpha_min, hc.range[0]), alpha_max) if len(hc) else alpha_min
            curves[low] = followers[low].follow_both(a_mid, alpha_min, alpha_max)
            for b in others[1:]:
                curves[b], s, c = futs[b].result()
                extra_solves += s
                extra_cached += c
        curves = {b: curves[b] for b in branches}
    else:
        for b in branches:  # high first: low may stop once it is beaten
            stop = None
            if b == low and early_stop and len(curves.get(high, ())):
                stop = _beaten_by(curves[high])
            if b == low and len(curves.get(high, ())):
                # start where it competes with high (its lower end), then both ways
                a_mid = min(max(alpha_min, curves[high].range[0]), alpha_max)
                curves[b] = followers[b].follow_both(a_mid, alpha_min, alpha_max, stop=stop)
            else:
                curves[b] = followers[b].follow(start[b], stop_at[b], stop=stop)
    # where low merged into the branch it merges into, that branch is high's competitor: follow
    # it on from there if it was not followed
    lc = curves[low]
    merge = next((e for e in lc.ends if e.reason is EndReason.NO_SOLUTION
                  or (e.reason is EndReason.MERGED and e.alpha_next > e.alpha)), None)
    target = merge_target(module, low)
    fallback = None
    if merge is not None and target is not None:
        a_from = merge.alpha if merge.reason is EndReason.MERGED else alpha_min
        if target not in curves or not curves[target].covers(min(alpha_max, a_from + 1e-9)):
            if target not in followers:
                followers[target] = BranchFollower(module, target, params, settings, steps, cache, note)
            x0 = None
            if merge.reason is EndReason.MERGED and len(lc):
                x0 = lc.points[-1].x.copy()
                x0[~followers[target].free] = 0.0
            stop = _beaten_by(curves[high]) if early_stop and len(curves[high]) else None
            fc = followers[target].follow(a_from, alpha_max, x0=x0, stop=stop)
            if target in curves:
                for p in fc.points:
                    curves[target].insert(p)
            else:
                curves[target] = fc
        if target in curves:
            fallback = (followers[target], curves[target])
    alpha_c = find_crossing(followers[high], curves[high], followers[low], curves[low], xtol=xtol,
                            fallback=fallback)
    segments = global_segments(curves, alpha_c, alpha_min, alpha_max, candidates=list(curves), high=high)
    alpha_l = (find_baseline_crossing(followers, curves, segments, eps_lin, xtol=xtol) if kind is not None
               else no_baseline(module))
    quad = followers[high].solver.integrator.describe()
    return PhaseResult(
        model=module.MODEL, parameters=followers[high].parameters, alpha_min=float(alpha_min),
        alpha_max=float(alpha_max), curves=curves, alpha_c=alpha_c, alpha_l=alpha_l, eps_lin=eps_lin,
        eps_lin_error=eps_lin_err, quadrature=quad, seconds=time.perf_counter() - t0,
        solves=sum(f.solves for f in followers.values()) + extra_solves,
        cached=sum(f.cached for f in followers.values()) + extra_cached, segments=segments,
        pair=(high, low), baseline=kind, label=label)


def _beaten_by(curve: BranchCurve) -> Callable[[BranchPoint], bool]:
    """A stop condition: the point's ``Phi`` is below ``curve``'s at its ``alpha``."""
    def stop(pt: BranchPoint) -> bool:
        return curve.covers(pt.alpha) and pt.phi < float(curve.phi_interp(pt.alpha))
    return stop



"""One phase point (:func:`phase_point`: the continuation or the fast thresholds path), many
phase points in worker processes (:func:`phase_points`), and a sweep of one parameter
(:func:`phase_sweep`)."""
from __future__ import annotations

import concurrent.futures as cf
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..interface.generated_model import GeneratedModel
from ..artifacts.cache import PointCache
from ..errors import ParameterError
from ..runtime.executors import describe, run_chains
from ..runtime.progress import Progress
from .common import as_module
from .continuation import continuation_point
from .parallel import executor_for, module_from_ref, module_ref
from .results import PhaseResult
from .settings import SolverSettings, StepControl
from .thresholds import thresholds


def phase_point(module: GeneratedModel | str, parameters: Mapping[str, float] | None = None, *,
                pair: tuple[str, str] | None = None, alpha_min: float = 0.1, alpha_max: float = 4.0,
                branches: Iterable[str] | None = None, settings: SolverSettings | None = None,
                steps: StepControl | None = None, cache: PointCache | None = None,
                progress: Progress | Callable[[str], None] | None = None, jobs: int = 1,
                early_stop: bool = False, xtol: float = 1e-4, thresholds_only: bool = False,
                label: str = "", executor: cf.Executor | None = None) -> PhaseResult:
    """Branches, spinodals, ``alpha_c``, the baseline ``eps_lin`` and ``alpha_l`` at one set of
    parameters, for any model that declares branches.

    ``pair`` = ``(high, low)``: the branches compared (default: the model's declared
    ``TRANSITION``); ``alpha_c`` is where ``Phi_high - Phi_low`` turns positive, ``alpha_l`` where
    the global-minimum test error crosses the model's declared baseline. By continuation of whole
    branches (:func:`~replica.phase.continuation.continuation_point`: curves and spinodals), or
    with ``thresholds_only=True`` from a few root-finder solves
    (:func:`~replica.phase.thresholds.thresholds`; ``curves`` then hold those points, no
    spinodals). ``label`` names the point in progress lines (e.g. ``omega=0.3``). The
    continuation follows its other branches in parallel with ``jobs > 1`` local processes or on
    ``executor`` (:mod:`replica.runtime.executors`).
    """
    if not (parameters is None or isinstance(parameters, Mapping)):
        raise ParameterError("parameters", f"must be a mapping of parameter names to values, got {parameters!r} "
                                           "(the attention study's omega: replica.applications.attention.phase_point)")
    if thresholds_only:
        return thresholds(module, parameters, pair=pair, alpha_min=alpha_min, alpha_max=alpha_max,
                          settings=settings, steps=steps, cache=cache, xtol=xtol, progress=progress, label=label)
    return continuation_point(module, parameters, pair=pair, alpha_min=alpha_min, alpha_max=alpha_max,
                              branches=branches, settings=settings, steps=steps, cache=cache, progress=progress,
                              jobs=jobs, early_stop=early_stop, xtol=xtol, label=label, executor=executor)


def _task(point: Callable[..., PhaseResult], ref, task: Mapping[str, Any], cache_root, cache_on) -> PhaseResult:
    return point(module_from_ref(ref), cache=PointCache(cache_root, cache_on), **task)


def phase_points(module: GeneratedModel | str, tasks: Sequence[Mapping[str, Any]], *, jobs: int = 1,
                 cache: PointCache | None = None, progress: Progress | None = None,
                 point: Callable[..., PhaseResult] = phase_point,
                 executor: cf.Executor | None = None) -> list[PhaseResult]:
    """``point(module, **task)`` for each task (a dict of its keyword arguments), on ``executor``
    (any :class:`concurrent.futures.Executor`, e.g. a Dask client's) or else in ``jobs`` local
    processes; ``point`` is :func:`phase_point` or an application's (a module-level function, so
    that it reaches the workers).

    Results come back in the order of ``tasks``; ``progress`` advances once per task. Each worker
    solves its own points and shares the on-disk cache.
    """
    module = as_module(module)
    if jobs < 1:
        raise ParameterError("jobs", f"must be >= 1, got {jobs}")
    cache = cache if cache is not None else PointCache(enabled=False)
    results: list[PhaseResult | None] = [None] * len(tasks)
    if executor is None and (jobs == 1 or len(tasks) <= 1):
        for i, task in enumerate(tasks):
            results[i] = point(module, cache=cache, progress=progress, **task)
            if progress is not None:
                progress.advance(results[i].summary())
        return results  # type: ignore[return-value]
    # full-curve tasks first: they take longest
    order = sorted(range(len(tasks)), key=lambda i: bool(tasks[i].get("early_stop", False)))
    ref = module_ref(module)

    def step(i: int, done: list):
        return _task, point, ref, dict(tasks[i]), cache.root, cache.enabled

    def finished(c: int, k: int, r: PhaseResult, ready: bool) -> None:
        results[order[c]] = r
        if progress is not None:
            progress.advance(r.summary())

    with executor_for(min(jobs, len(tasks)), executor) as ex:
        if progress is not None:
            progress.note(f"{len(tasks)} phase points on {describe(ex)}")
        run_chains(ex, [[i] for i in order], step, on_result=finished)
    return results  # type: ignore[return-value]


def phase_sweep(module: GeneratedModel | str, name: str, values: Sequence[float],
                parameters: Mapping[str, float] | None = None, *, jobs: int = 1,
                cache: PointCache | None = None, progress: Progress | None = None,
                executor: cf.Executor | None = None, **kwargs) -> list[PhaseResult]:
    """:func:`phase_point` at every value of the parameter ``name`` (on ``executor``, else in
    ``jobs`` processes); results in ``values`` order. ``kwargs`` go to :func:`phase_point`."""
    tasks = [dict(kwargs, parameters=dict(parameters or {}, **{name: float(w)}), label=f"{name}={float(w):g}")
             for w in values]
    return phase_points(module, tasks, jobs=jobs, cache=cache, progress=progress, executor=executor)

"""The attention study's phase analysis: the core's phase machinery with the paper's conventions.

The core (:mod:`replica.phase`) compares any declared pair of branches and crosses any declared
baseline. This study names what the paper looks at: the ``semantic`` branch (wins at large
``alpha``) against the ``positional`` one, with the ``agnostic`` branch taking over where the
positional branch merges into it, the linear baseline, and phase points labelled and swept by
the positionality ``omega`` of the target (its ``A`` matrix as further parameters).
"""
from __future__ import annotations

import concurrent.futures as cf
from typing import Any, Mapping, Sequence

from ...interface.generated_model import GeneratedModel
from ...artifacts.cache import PointCache
from ...phase import PhaseResult, phase_points as core_phase_points
from ...phase import phase_point as core_phase_point
from ...phase import thresholds as core_thresholds
from ...phase import thresholds_sweep
from ...runtime.progress import Progress
from .paper import BRANCHES, TRANSITION

#: the branches a phase point follows by default, in the order they are reported
STUDY_BRANCHES = tuple(BRANCHES)
#: the model the study runs on by default (``replica figures``)
MODEL = "attention"


def study_parameters(omega: float | None, parameters: Mapping[str, float] | None) -> dict[str, float]:
    """The parameters of a point: ``parameters`` with ``omega`` (if given) set."""
    out = dict(parameters or {})
    if omega is not None:
        out["omega"] = float(omega)
    return out


def label(parameters: Mapping[str, float]) -> str:
    """How a point is named in progress lines and summaries: ``omega=0.3`` (empty without omega)."""
    return f"omega={parameters['omega']:g}" if "omega" in parameters else ""


def phase_point(module: GeneratedModel | str = MODEL, omega: float | None = None,
                parameters: Mapping[str, float] | None = None, *, branches: Sequence[str] = STUDY_BRANCHES,
                **kwargs: Any) -> PhaseResult:
    """:func:`replica.phase.phase_point` at positionality ``omega``: the semantic and positional
    branches compared (the agnostic one followed too by default), the linear baseline crossed.
    ``kwargs``: ``alpha_min``, ``alpha_max``, ``settings``, ``steps``, ``cache``, ``progress``,
    ``jobs``, ``early_stop``, ``xtol``, ``thresholds_only``."""
    params = study_parameters(omega, parameters)
    return core_phase_point(module, params, pair=TRANSITION, branches=branches, label=label(params), **kwargs)


def thresholds(module: GeneratedModel | str = MODEL, omega: float | None = None,
               parameters: Mapping[str, float] | None = None, **kwargs: Any) -> PhaseResult:
    """:func:`replica.phase.thresholds` (the fast path: ``alpha_c``, ``alpha_l`` only) at ``omega``."""
    params = study_parameters(omega, parameters)
    return core_thresholds(module, params, pair=TRANSITION, label=label(params), **kwargs)


def phase_points(module: GeneratedModel | str, tasks: Sequence[Mapping[str, Any]], *, jobs: int = 1,
                 cache: PointCache | None = None, progress: Progress | None = None,
                 executor: cf.Executor | None = None) -> list[PhaseResult]:
    """:func:`phase_point` for each task (a dict of its keyword arguments: ``omega``,
    ``parameters``, ``alpha_max``, ``early_stop``, ``thresholds_only`` ...) on ``executor``, else
    in ``jobs`` processes."""
    return core_phase_points(module, tasks, jobs=jobs, cache=cache, progress=progress, point=phase_point,
                             executor=executor)


def phase_diagram(module: GeneratedModel | str, omegas: Sequence[float], parameters: Mapping[str, float] | None = None,
                  *, jobs: int = 1, cache: PointCache | None = None, progress: Progress | None = None,
                  executor: cf.Executor | None = None, **kwargs: Any) -> list[PhaseResult]:
    """:func:`phase_point` at every ``omega`` (on ``executor``, else in ``jobs`` processes); results
    in ``omegas`` order."""
    tasks = [dict(kwargs, omega=float(w), parameters=dict(parameters or {})) for w in omegas]
    return phase_points(module, tasks, jobs=jobs, cache=cache, progress=progress, executor=executor)


def thresholds_diagram(module: GeneratedModel | str, omegas: Sequence[float],
                       parameters: Mapping[str, float] | None = None, *, jobs: int = 1,
                       cache: PointCache | None = None, progress: Progress | None = None,
                       executor: cf.Executor | None = None, **kwargs: Any) -> list[PhaseResult]:
    """The fast thresholds at every ``omega``, each seeded by its neighbours
    (:func:`replica.phase.thresholds_sweep` along ``omega``, ``jobs`` runs); results in ``omegas`` order."""
    return thresholds_sweep(module, "omega", omegas, parameters, jobs=jobs, cache=cache, progress=progress,
                            executor=executor, pair=TRANSITION, **kwargs)

"""Phase analysis of any model that declares branches (docs/explanation/theory.md §6), split by concept:

* :mod:`~replica.phase.settings` -- how points are solved and how steps in ``alpha`` adapt;
* :mod:`~replica.phase.results` -- solved points, branch curves and their ends (spinodals),
  crossings, the result of one phase point (status in enums);
* :mod:`~replica.phase.follower` -- following one branch by continuation;
* :mod:`~replica.phase.crossings` -- ``alpha_c`` (where the free entropies of a pair of branches
  cross), the global minimum along ``alpha``, ``alpha_l`` (where its test error crosses the
  model's declared baseline);
* :mod:`~replica.phase.continuation` -- one phase point by continuation of whole branches;
* :mod:`~replica.phase.thresholds` -- the fast path: ``alpha_c``, ``alpha_l`` from a few
  root-finder solves, and sweeps along a parameter seeded by their neighbours;
* :mod:`~replica.phase.points` -- either path for one point, many points in processes;
* :mod:`~replica.phase.parallel` -- the worker processes.

Nothing here knows a branch name or a parameter: the pair of branches compared is the model's
``TRANSITION`` (or given), branches merge into the declared branch that pins more
(:mod:`replica.numeric.branches`), the baseline is the model's ``BASELINE``
(:mod:`replica.numeric.baselines`). The attention study (:mod:`replica.applications.attention`) is
built on top, the way another architecture's study would be.
"""
from __future__ import annotations

from typing import Mapping

from ..interface.generated_model import GeneratedModel
from ..numeric.baselines import linear_baseline
from .common import as_module
from .continuation import continuation_point
from .crossings import Competitor, find_baseline_crossing, find_crossing, global_segments
from .follower import BranchFollower, follow_branch
from .points import phase_point, phase_points, phase_sweep
from .results import (BranchCurve, BranchEnd, BranchPoint, Crossing, CrossingStatus, EndReason, PhaseError,
                      PhaseResult)
from .settings import SolverSettings, StepControl
from .thresholds import Guess, thresholds, thresholds_sweep


def linear_baseline_error(module: GeneratedModel | str, parameters: Mapping[str, float] | None = None
                          ) -> tuple[float, float]:
    """``eps_g^lin`` of the best predictor linear in the tokens (paper Result 5.1) and its error estimate."""
    return linear_baseline(as_module(module), parameters)


__all__ = ["BranchCurve", "BranchEnd", "BranchFollower", "BranchPoint", "Competitor", "Crossing", "CrossingStatus",
           "EndReason", "Guess", "PhaseError", "PhaseResult", "SolverSettings", "StepControl", "continuation_point",
           "find_baseline_crossing", "find_crossing", "follow_branch", "global_segments", "linear_baseline_error",
           "phase_point", "phase_points", "phase_sweep", "thresholds", "thresholds_sweep"]

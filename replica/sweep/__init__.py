"""Parameter sweeps: a spec (:mod:`~replica.sweep.spec`) -> every grid point computed once, on any
executor (:mod:`~replica.sweep.run`, :mod:`replica.runtime.executors`) -> a labelled dataset
(:mod:`~replica.sweep.dataset`), with plotting helpers for 2-D slices (:mod:`~replica.sweep.plots`).

What a point computes is a registered task kind (:mod:`~replica.sweep.kinds`: ``solve``,
``thresholds``, ``phase``, ``simulate``). The command line is ``replica sweep SPEC``;
``docs/how-to/sweeps.md`` has the spec format and examples.

    from replica.sweep import load_spec, run_sweep
    ds = run_sweep(load_spec("ridge.toml"), jobs=2).dataset()
"""
from __future__ import annotations

from .dataset import open_sweep, to_dataset, write_dataset
from .kinds import KINDS, TaskKind, register
from .run import SweepResult, plan_chains, run_sweep
from .spec import Axis, SweepSpec, load_spec, parse_spec

__all__ = ["Axis", "KINDS", "SweepResult", "SweepSpec", "TaskKind", "load_spec", "open_sweep", "parse_spec",
           "plan_chains", "register", "run_sweep", "to_dataset", "write_dataset"]

"""Running a sweep: the grid cut into chains, the chains on an executor, every finished point in
the cache (:func:`run_sweep`, :class:`SweepResult`).

* **Chains.** Along the warm-start axis the grid is cut into contiguous runs of at most
  ``chunk`` points (for every combination of the other axes); a run is walked from its point
  nearest the middle of the axis outwards, each point starting from its finished neighbours
  (the kind's ``hint``; the fast thresholds path along ``omega`` does the same). Without a
  warm-start axis every point is its own chain. The chains depend on the spec only, never on the
  executor or the number of workers, so every executor gives the same numbers, bit for bit.
* **Executors.** One task per point (:func:`replica.sweep.kinds.compute_point`), one task in
  flight per chain, on any :class:`concurrent.futures.Executor` (:mod:`replica.runtime.executors`:
  this process, local processes, a Dask cluster).
* **Cache.** This process stores each finished point's record in the point cache
  (:mod:`replica.artifacts.cache`) as soon as it arrives, keyed by the kind, the model's hashes, the
  settings, the point and -- for a point started from a neighbour -- the key of that neighbour
  (so a cached record is only reused where the same chain would have computed it). A rerun, or a
  sweep resumed after an interrupt or a lost worker, computes only what is missing, and gives the
  same dataset as an uninterrupted run.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from .. import __version__
from ..artifacts.cache import PointCache, cache_key
from ..errors import ParameterError
from ..runtime.executors import Ready, describe, open_executor, run_chains
from ..phase.parallel import module_ref
from ..phase.thresholds import contiguous_runs, visit_order
from ..runtime.progress import Progress
from .kinds import Context, compute_point, get_kind
from .spec import SweepSpec

__all__ = ["SweepResult", "plan_chains", "run_sweep"]

#: bump when the records stored in the cache change meaning
SWEEP_FORMAT = 1


@dataclass
class SweepResult:
    """Everything a sweep computed: one record per grid index (see :mod:`replica.sweep.kinds`),
    the checked settings, the kind's extra dimensions, what identifies the model, and the work
    done (``computed`` tasks, ``cached`` records, ``seconds``, ``where`` it ran)."""

    spec: SweepSpec
    settings: dict[str, Any]
    dims: dict[str, list[str]]
    records: dict[tuple[int, ...], dict]
    model_info: dict[str, str]
    computed: int = 0
    cached: int = 0
    seconds: float = 0.0
    where: str = ""
    chains: list[list[tuple[int, ...]]] = field(default_factory=list)
    variables: tuple[list[str], list[str]] = ([], [])

    @property
    def failed(self) -> list[tuple[int, ...]]:
        """Grid indices whose computation failed or did not converge on some row."""
        return [i for i, r in self.records.items() if failure(r)]

    def dataset(self):
        """The results as an :class:`xarray.Dataset` (:func:`replica.sweep.dataset.to_dataset`)."""
        from .dataset import to_dataset

        return to_dataset(self)


def failure(record: dict) -> str:
    """Why a record is a failure ('' if it is not)."""
    if record.get("error"):
        return str(record["error"])
    bad = [r.get("notes", "") for r in record.get("rows", []) if r.get("converged") is False]
    if bad:
        return bad[0] or "not converged"
    if record.get("values", {}).get("converged") is False:
        return record["values"].get("notes") or "not converged"
    return ""


def plan_chains(spec: SweepSpec) -> list[list[tuple[int, ...]]]:
    """The chains of grid indices (see the module docstring), in the order they are started."""
    if spec.warm_axis is None:
        return [[index] for index in spec.indices()]
    p = [a.name for a in spec.axes].index(spec.warm_axis)
    axis = spec.axes[p]
    order = sorted(range(len(axis)), key=lambda i: axis.values[i])
    ws = [axis.values[i] for i in order]
    centre = float(np.median(ws))
    runs = contiguous_runs(len(ws), math.ceil(len(ws) / spec.chunk))
    others = [range(n) for k, n in enumerate(spec.shape) if k != p]
    chains = []
    for rest in (np.ndindex(*[len(r) for r in others]) if others else [()]):
        for run in runs:
            visit = visit_order([ws[k] for k in run], centre)
            chains.append([tuple(rest[:p]) + (order[run[v]],) + tuple(rest[p:]) for v in visit])
    return chains


def _model_info(spec: SweepSpec, module, settings: dict) -> dict[str, str]:
    info = {"model": spec.model, "replica_version": __version__}
    if module is not None:
        stamp = module.stamp
        info.update(model=module.MODEL, model_source_hash=module.SOURCE_HASH,
                    model_generator_version=stamp.version if stamp else "",
                    model_stamp=stamp.line() if stamp else "")
    if "simulator" in settings:
        info["simulator"] = str(settings["simulator"])
    return info


def _label(spec: SweepSpec, index: tuple[int, ...]) -> str:
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in spec.coordinates(index).items())


@contextlib.contextmanager
def _executor(executor: cf.Executor | None, jobs: int, scheduler: str | None) -> Iterator[cf.Executor]:
    if executor is not None:
        yield executor
        return
    with open_executor(jobs, scheduler) as ex:
        yield ex


def prepare(spec: SweepSpec):
    """Check a spec completely (kind, settings, every grid point) and load its model: ``(spec with
    its warm-start axis resolved, kind, module or None, settings)``. No work is started."""
    from ..registry import load_module

    kind = get_kind(spec.kind)
    module = load_module(spec.model) if kind.needs_model else None
    settings = kind.check(spec, module)
    if kind.hint is None:
        if spec.warm_given and spec.warm_axis is not None:
            raise ParameterError("warm_start.axis", f"kind {kind.name!r} computes independent points: no warm start")
        spec = spec.with_warm_start(None)
    elif not spec.warm_given:
        spec = spec.with_warm_start(kind.default_warm(spec))
    return spec, kind, module, settings


def run_sweep(spec: SweepSpec, *, executor: cf.Executor | None = None, jobs: int = 1, scheduler: str | None = None,
              cache: PointCache | None = None, progress: Progress | None = None,
              estimate: str | None = None) -> SweepResult:
    """Compute every grid point of ``spec`` once (see the module docstring).

    ``executor``: any :class:`concurrent.futures.Executor` (left open); otherwise one is opened
    from ``jobs`` / ``scheduler`` (:func:`replica.runtime.executors.open_executor`) after the spec has
    been checked. ``cache``: the point cache (default: disabled -- nothing resumes);
    ``progress`` advances once per point (cached points do not count towards its ETA); ``estimate``
    (a line on the sweep's size and cost) is said with the executor's description, once the executor
    is open and before any point runs (an executor that cannot be opened is then the only line).
    """
    t0 = time.perf_counter()
    spec, kind, module, settings = prepare(spec)
    cache = cache if cache is not None else PointCache(enabled=False)
    ctx = Context(kind.name, module_ref(module) if module is not None else None, spec.model, settings,
                  str(cache.root), cache.enabled)
    info = _model_info(spec, module, settings)
    base = dict(kind="sweep-point", format=SWEEP_FORMAT, task=kind.name, model=info["model"],
                source_hash=info.get("model_source_hash", ""), generator=info.get("model_generator_version", ""),
                simulator=info.get("simulator", ""), settings=settings)
    store = f"sweep-{info['model']}"
    chains = plan_chains(spec)
    result = SweepResult(spec, settings, kind.dims(settings), {}, info, chains=chains,
                         variables=kind.variables(settings, module))
    pending: dict[tuple[int, ...], tuple[dict, str]] = {}
    warm = spec.warm_axis

    def step(index: tuple[int, ...], done: list):
        point = spec.point(index)
        desc = dict(base, point=point, after=done[-1]["key"] if (done and warm) else None)
        key = cache_key(desc)
        hit = cache.get(store, desc)
        if hit is not None and isinstance(hit.get("values"), dict):
            hit["key"] = key
            return Ready(hit)
        pending[index] = (desc, key)
        at = point[warm] if warm else None
        hint = kind.hint([(r["at"], r) for r in done], at) if (warm and kind.hint is not None) else None
        return compute_point, ctx, point, hint, at

    def finished(c: int, k: int, record: dict, ready: bool) -> None:
        index = chains[c][k]
        if ready:
            result.cached += 1
        else:
            desc, key = pending.pop(index)
            record["key"] = key
            cache.put(store, desc, record)
            result.computed += 1
        result.records[index] = record
        if progress is not None:
            why = failure(record)
            progress.advance(f"{_label(spec, index)}: " + (f"failed ({why[:80]})" if why else "ok")
                             + (" (cached)" if ready else ""), cached=ready)

    if progress is not None and progress.total is None:
        progress.total = spec.size
    with _executor(executor, jobs, scheduler) as ex:
        result.where = describe(ex)
        if progress is not None:
            progress.note(f"{spec.size} points in {len(chains)} chains on {result.where}"
                          + (f"; {estimate}" if estimate else ""))
        run_chains(ex, chains, step, on_result=finished)
    result.seconds = time.perf_counter() - t0
    return result

"""What a sweep computes at each grid point: a small registry of task kinds.

A :class:`TaskKind` says how to check its ``[compute]`` settings (in this process, before any work),
how to compute one point (in a worker: :func:`compute_point`, a module-level function so that any
executor can run it), and -- for kinds where neighbours help -- how a point's result seeds the
next point of its chain (``hint``). Built in:

=============  ======================================================================================
``solve``      the saddle point at ``alpha`` on each of ``branches`` (a ``branch`` dimension); order
               parameters, conjugates, every declared observable with its error estimate, ``phi``,
               ``train_loss``, ``iterations``, ``residual``, ``converged``; ``baseline = true`` adds
               the model's ``eps_lin``. Warm start: the nearest solved neighbour's state per branch.
``thresholds`` ``alpha_c`` and ``alpha_l`` by the fast path (:func:`replica.phase.thresholds`), seeded by
               the neighbours' thresholds and states (:func:`replica.phase.thresholds.next_guess`).
``phase``      the continuation (:func:`replica.phase.continuation_point`): thresholds and each
               followed branch's spinodal. Independent points.
``simulate``   a registered simulator (``simulator = "glm" | "attention" | "linear"`` with the
               project's simulator installed, :mod:`replica.simulators`): means and standard
               errors over seeds.
=============  ======================================================================================

Adding a kind is one :func:`register` call with
its ``check`` and ``compute`` functions.

A point's result is a small JSON-able record ``{"values": {...}, "rows": [...], "seed": ...,
"at": ...}``: ``values`` per grid point, ``rows`` one per entry of the kind's extra dimensions
(the branches of ``solve``), ``seed`` what the next point of the chain starts from. A failure that
the toolkit reports (no convergence, an inadmissible state) is a record with ``error`` (the
dataset then holds NaN and the message in ``notes``), never an exception that stops the sweep.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..interface.generated_model import GeneratedModel
from .. import validation
from ..artifacts.cache import PointCache
from ..errors import ConvergenceError, InvalidStateError, ParameterError, ReplicaError
from ..numeric.integrators import from_spec
from ..numeric.prox import prox_convention
from ..phase.parallel import module_from_ref
from .spec import SweepSpec

__all__ = ["Context", "KINDS", "TaskKind", "compute_point", "register"]


@dataclass(frozen=True)
class Context:
    """What every point of a sweep shares, sent with each task: the kind, the generated module
    (by reference; ``None`` for kinds without one), the model's name, the checked settings and the
    point cache of the inner solves."""

    kind: str
    module: tuple[str, str | None] | None
    model: str
    settings: Mapping[str, Any]
    cache_root: str | None = None
    cache_on: bool = False

    def cache(self) -> PointCache:
        return PointCache(self.cache_root, self.cache_on)


@dataclass(frozen=True)
class TaskKind:
    """One entry of the registry (see the module docstring).

    ``check(spec, module) -> settings``: the ``[compute]`` settings checked and completed with
    their defaults (one-line errors naming ``compute.<key>``); ``compute(ctx, point, hint) ->
    record``; ``hint(done, at) -> hint``: from the ``(warm-axis value, record)`` of the chain's
    finished points, what the point at ``at`` starts from (``None``: points are independent);
    ``dims(settings) -> {name: labels}``: extra dimensions of ``rows``; ``default_warm(spec)``:
    the warm-start axis when the spec names none; ``needs_model``: whether ``model`` must be a
    declared model (a generated module is loaded); ``alpha``: ``"axis"`` if ``alpha`` is a grid
    axis or fixed parameter the kind needs, ``"none"`` if it must not be one (thresholds scan it);
    ``variables(settings, module) -> (value names, row names)``: what the records hold, so that the
    dataset has these variables even where every point failed. ``seconds(settings)``: a rough cost of
    one point on one core, for the estimate said before a sweep starts (None: no estimate).
    """

    name: str
    summary: str
    check: Callable[[SweepSpec, GeneratedModel | None], dict]
    compute: Callable[[Context, dict, Any], dict]
    hint: Callable[[list, float], Any] | None = None
    dims: Callable[[Mapping[str, Any]], dict[str, list[str]]] = field(default=lambda settings: {})
    default_warm: Callable[[SweepSpec], str | None] = field(default=lambda spec: None)
    needs_model: bool = True
    alpha: str = "axis"
    variables: Callable[[Mapping[str, Any], GeneratedModel | None], tuple[list[str], list[str]]] = field(
        default=lambda settings, module: ([], []))
    seconds: Callable[[Mapping[str, Any]], float] | None = None


#: the registered kinds, by name
KINDS: dict[str, TaskKind] = {}


def register(kind: TaskKind) -> TaskKind:
    """Add a kind to :data:`KINDS` (its name must be new)."""
    if kind.name in KINDS:
        raise ValueError(f"task kind {kind.name!r} is already registered")
    KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> TaskKind:
    """The registered kind ``name`` (a one-line error naming ``compute.kind`` otherwise)."""
    if name not in KINDS:
        raise ParameterError("compute.kind", f"unknown kind {name!r}; known: {', '.join(KINDS)}")
    return KINDS[name]


def compute_point(ctx: Context, point: dict, hint: Any, at: Any) -> dict:
    """One grid point, in a worker: the kind's ``compute``; toolkit failures become a record with
    ``error`` (the sweep goes on). ``at`` (the warm-axis value) is echoed for the chain's hints."""
    kind = KINDS[ctx.kind]
    try:
        record = kind.compute(ctx, point, hint)
    except ReplicaError as exc:
        record = {"values": {}, "rows": [], "seed": None, "error": _first_line(exc)}
    record["at"] = at
    return record


# --------------------------------------------------------------------------- shared checks
def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


class _Settings:
    """Pops the ``[compute]`` keys a kind knows, so that the rest can be reported as unknown."""

    def __init__(self, spec: SweepSpec):
        self.raw = dict(spec.settings)
        self.kind = spec.kind

    def number(self, key: str, default: float, low: float | None = None) -> float:
        v = self.raw.pop(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise ParameterError(f"compute.{key}", f"must be a finite number, got {v!r}")
        if low is not None and v < low:
            raise ParameterError(f"compute.{key}", f"must be >= {low:g}, got {v!r}")
        return float(v)

    def integer(self, key: str, default: int, low: int = 1, high: int = 10**9) -> int:
        return validation.integer(self.raw.pop(key, default), f"compute.{key}", low=low, high=high)

    def flag(self, key: str, default: bool) -> bool:
        v = self.raw.pop(key, default)
        if not isinstance(v, bool):
            raise ParameterError(f"compute.{key}", f"must be true or false, got {v!r}")
        return v

    def text(self, key: str, default: str | None) -> str | None:
        v = self.raw.pop(key, default)
        if v is not None and not isinstance(v, str):
            raise ParameterError(f"compute.{key}", f"must be a string, got {v!r}")
        return v

    def names(self, key: str, default: Sequence[str] | None) -> list[str] | None:
        v = self.raw.pop(key, default)
        if v is None:
            return None
        if isinstance(v, str):
            v = [s.strip() for s in v.split(",") if s.strip()]
        if not isinstance(v, (list, tuple)) or not v or not all(isinstance(s, str) for s in v):
            raise ParameterError(f"compute.{key}", f"must be a non-empty list of names, got {v!r}")
        return list(v)

    def done(self) -> None:
        if self.raw:
            raise ParameterError(f"compute.{sorted(self.raw)[0]}", f"unknown setting for kind {self.kind!r}")


def _check_names(spec: SweepSpec, module: GeneratedModel, alpha: str) -> None:
    """Grid axes and fixed parameters are the model's parameters (and ``alpha`` where the kind
    takes it); each grid point's parameters pass the model's checks."""
    from ..numeric.parameters import parameter_vector

    names = [a.name for a in spec.axes] + list(spec.parameters)
    for n in names:
        where = f"grid.{n}" if n in [a.name for a in spec.axes] else f"parameters.{n}"
        if n == "alpha":
            if alpha == "none":
                raise ParameterError(where, f"kind {spec.kind!r} scans alpha itself (alpha_min, alpha_max in "
                                            "[compute]); alpha cannot be a grid axis or fixed here")
            continue
        if n not in module.PARAMETERS:
            raise ParameterError(where, f"model {module.MODEL} has no parameter {n!r}; it has "
                                        f"{list(module.PARAMETERS)}")
    for a in spec.axes:
        if not a.numeric:
            raise ParameterError(f"grid.{a.name}", "a model parameter takes numbers, not strings")
    if alpha == "axis" and "alpha" not in names:
        raise ParameterError("grid", f"kind {spec.kind!r} needs alpha: a grid axis or a fixed parameter")
    for index in spec.indices():
        p = spec.point(index)
        if "alpha" in p:
            validation.sample_complexity(p["alpha"], "alpha")
        try:
            parameter_vector(module, {k: v for k, v in p.items() if k != "alpha"})
        except ParameterError as exc:
            at = " ".join(f"{k}={v:g}" for k, v in spec.coordinates(index).items())
            raise ParameterError(exc.name, f"{str(exc).split(': ', 1)[-1]} (at grid point {at})") from None


def _first_warm_axis(spec: SweepSpec) -> str | None:
    for a in spec.axes:
        if a.numeric:
            return a.name
    return None


# --------------------------------------------------------------------------- solve
def _solve_check(spec: SweepSpec, module: GeneratedModel) -> dict:
    s = _Settings(spec)
    declared = list(module.BRANCHES)
    branches = s.names("branches", declared or ["free"])
    for b in branches:
        if b != "free" and b not in module.BRANCHES:
            raise ParameterError("compute.branches", f"{module.MODEL} has no branch {b!r} (it has "
                                                     f"{declared + ['free']})")
    quadrature = s.text("quadrature", "auto")
    prox = _prox_setting(s)
    try:
        for b in branches:
            from_spec(quadrature, module, None if b == "free" else b, prox_convention(prox))
    except ParameterError as exc:
        raise ParameterError("compute.quadrature", str(exc).split(": ", 1)[-1]) from None
    out = dict(branches=branches, quadrature=quadrature, prox=prox,
               tol=validation.tolerance(s.number("tol", 1e-8), "compute.tol"),
               max_iter=s.integer("max_iter", 500, high=100_000),
               error_estimate=s.flag("error_estimate", True), baseline=s.flag("baseline", False))
    s.done()
    if out["baseline"] and module.BASELINE is None:
        raise ParameterError("compute.baseline", f"{module.MODEL} declares no baseline")
    _check_names(spec, module, "axis")
    return out


def _solve_compute(ctx: Context, point: dict, hint: Any) -> dict:
    from ..numeric.baselines import baseline
    from ..numeric.point import PointOptions, solve_point

    module = module_from_ref(ctx.module)
    st = ctx.settings
    alpha = float(point["alpha"])
    params = {k: v for k, v in point.items() if k != "alpha"}
    rows, seed = [], {}
    for b in st["branches"]:
        # the one pipeline of replica solve (replica.numeric.point): with error_estimate, the bars of replica
        # solve -- the distance to the fixed point re-solved on refined rules and with more prox starts, not
        # the companion rule's residual (~1e-16 where the error was 1e-10 to 1e-8); the values are the refined
        # ones, as replica solve reports. A neighbour's state warm-starts the point (cold starts if it fails).
        options = PointOptions(branch=None if b == "free" else b, quadrature=st["quadrature"],
                               prox=st.get("prox", "global"), tol=st["tol"], max_iter=st["max_iter"],
                               error_bars=st["error_estimate"], replicon=False, companion_residual=False, scout=False)
        x0 = (hint or {}).get(b)
        try:
            solved = solve_point(module, params, alpha, options, x0=None if x0 is None else np.asarray(x0, dtype=float))
        except (ConvergenceError, InvalidStateError) as exc:
            rows.append({"converged": False, "notes": _first_line(exc)})
            continue
        fp, x_seed = solved.fp, solved.seed
        bar = {k: (math.nan if v is None else float(v)) for k, v in (fp.errors or {}).items()}
        row: dict[str, Any] = {}
        for k, v in [*fp.order.items(), *fp.conjugates.items(), *fp.observables.items()]:
            row[k] = float(v)
            row[f"{k}_error"] = bar.get(k, math.nan)
        row.update(phi=float(fp.phi), phi_error=bar.get("phi", math.nan), train_loss=float(fp.train_loss),
                   train_loss_error=bar.get("train_loss", math.nan), psi_y=float(fp.psi_y),
                   iterations=int(fp.iterations), residual=float(fp.residual),
                   quadrature_residual=float(fp.quadrature_residual), converged=bool(fp.converged),
                   notes="; ".join(fp.notes))
        if fp.errors:
            row["accuracy_met"] = bool(fp.accuracy_met)  # every bar below 1e-3 relative (replica.numeric.accuracy)
        rows.append(row)
        seed[b] = [float(v) for v in x_seed]  # the working rule's state: the neighbours solve on that rule
    values: dict[str, Any] = {}
    if st["baseline"]:
        eps, err = baseline(module, params, module.BASELINE)
        values.update(eps_lin=float(eps), eps_lin_error=float(err))
    return {"values": values, "rows": rows, "seed": seed}


def _solve_variables(st: Mapping[str, Any], module: GeneratedModel) -> tuple[list[str], list[str]]:
    obs = list(module.OBSERVABLES)
    names = list(module.ORDER_PARAMETERS) + list(module.CONJUGATES) + obs
    rows = [c for n in names for c in (n, f"{n}_error")]
    rows += ["phi", "phi_error", "train_loss", "train_loss_error", "psi_y", "iterations", "residual",
             "quadrature_residual", "converged", "notes"] + (["accuracy_met"] if st["error_estimate"] else [])
    return (["eps_lin", "eps_lin_error"] if st["baseline"] else []), rows


def _solve_hint(done: list, at: float) -> dict[str, list[float]]:
    """Per branch, the state of the nearest finished neighbour that solved it."""
    out: dict[str, tuple[float, list[float]]] = {}
    for w, rec in done:
        for b, x in (rec.get("seed") or {}).items():
            if b not in out or abs(w - at) < out[b][0]:
                out[b] = (abs(w - at), x)
    return {b: x for b, (_, x) in out.items()}


def _solve_warm(spec: SweepSpec) -> str | None:
    names = [a.name for a in spec.axes]
    return "alpha" if "alpha" in names else _first_warm_axis(spec)


#: rough seconds of one point on one core at default settings (the paper's attention model on this
#: project's 2-core machine: a solve with its error bars ~2 s, a thresholds-only point ~25 s (19 solves),
#: a continuation of both branches ~100 s; a simulation seed at d ~ 1000 ~30 s). Only for the estimate
#: said before a sweep starts: a model with a 1-D average is 10-100x faster.
ROUGH_SECONDS = {"solve": 2.0, "thresholds": 25.0, "phase": 100.0, "simulate": 30.0}

register(TaskKind("solve", "the saddle point on each of the given branches", _solve_check, _solve_compute,
                  hint=_solve_hint, dims=lambda st: {"branch": list(st["branches"])}, default_warm=_solve_warm,
                  variables=_solve_variables, seconds=lambda st: ROUGH_SECONDS["solve"] * len(st["branches"])))


# --------------------------------------------------------------------------- thresholds / phase
def _phase_check(spec: SweepSpec, module: GeneratedModel, continuation: bool) -> dict:
    from ..phase.common import check_range, resolve_pair

    s = _Settings(spec)
    between = s.names("between", None)
    pair = list(resolve_pair(module, between))
    out = dict(pair=pair, alpha_min=s.number("alpha_min", 0.1), alpha_max=s.number("alpha_max", 4.0),
               quadrature=s.text("quadrature", None), prox=_prox_setting(s),
               tol=validation.tolerance(s.number("tol", 1e-8), "compute.tol"),
               max_iter=s.integer("max_iter", 200, high=100_000), xtol=s.number("xtol", 1e-4))
    try:
        check_range(out["alpha_min"], out["alpha_max"])
    except ParameterError as exc:
        raise ParameterError(f"compute.{exc.name.replace('-', '_')}", str(exc).split(": ", 1)[-1]) from None
    if not 0 < out["xtol"] <= 0.1:
        raise ParameterError("compute.xtol", f"must be in (0, 0.1], got {out['xtol']:g}")
    if continuation:
        branches = s.names("branches", list(module.BRANCHES))
        for b in branches:
            if b not in module.BRANCHES:
                raise ParameterError("compute.branches", f"{module.MODEL} has no branch {b!r}")
        out.update(branches=branches, early_stop=s.flag("early_stop", False))
    s.done()
    if out["quadrature"] is not None:
        try:
            for b in pair:
                from_spec(out["quadrature"], module, b, prox_convention(out["prox"]))
        except ParameterError as exc:
            raise ParameterError("compute.quadrature", str(exc).split(": ", 1)[-1]) from None
    _check_names(spec, module, "none")
    return out


def _phase_values(r) -> dict[str, Any]:
    return dict(alpha_c=r.alpha_c.value, alpha_l=r.alpha_l.value, eps_lin=r.eps_lin, eps_lin_error=r.eps_lin_error,
                alpha_c_status=r.alpha_c.status.value, alpha_l_status=r.alpha_l.status.value,
                alpha_c_reason=r.alpha_c.reason, alpha_l_reason=r.alpha_l.reason, solves=r.solves + r.cached)


def _settings_of(st: Mapping[str, Any]):
    from ..phase import SolverSettings

    return SolverSettings(rule=st["quadrature"], tol=st["tol"], max_iter=st["max_iter"],
                          prox=prox_convention(st.get("prox", "global")))


def _prox_setting(s) -> str:
    """``compute.prox``: the prox convention's name (``global``, the default, or ``local``)."""
    name = s.text("prox", "global")
    try:
        return prox_convention(name).kind
    except ParameterError as exc:
        raise ParameterError("compute.prox", str(exc).split(": ", 1)[-1]) from None


def _label(point: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items())


def _thresholds_compute(ctx: Context, point: dict, hint: Any) -> dict:
    from ..phase import thresholds

    st = ctx.settings
    r = thresholds(module_from_ref(ctx.module), point, pair=tuple(st["pair"]), alpha_min=st["alpha_min"],
                   alpha_max=st["alpha_max"], settings=_settings_of(st), cache=ctx.cache(), xtol=st["xtol"],
                   guess=hint, label=_label(point))
    from ..phase.thresholds import Seed

    return {"values": _phase_values(r), "rows": [], "seed": Seed.of(r).to_dict()}


def _thresholds_hint(done: list, at: float):
    from ..phase.thresholds import Seed, next_guess

    return next_guess([(w, Seed.from_dict(rec["seed"])) for w, rec in done if rec.get("seed")], at)


def _continuation_compute(ctx: Context, point: dict, hint: Any) -> dict:
    from ..phase import continuation_point

    st = ctx.settings
    r = continuation_point(module_from_ref(ctx.module), point, pair=tuple(st["pair"]), alpha_min=st["alpha_min"],
                           alpha_max=st["alpha_max"], branches=st["branches"], settings=_settings_of(st),
                           cache=ctx.cache(), early_stop=st["early_stop"], xtol=st["xtol"], label=_label(point))
    values = _phase_values(r)
    for b in st["branches"]:
        values[f"spinodal_{b}"] = (r.spinodals.get(b) or [None])[0]
    return {"values": values, "rows": [], "seed": None}


PHASE_VALUES = ["alpha_c", "alpha_l", "eps_lin", "eps_lin_error", "alpha_c_status", "alpha_l_status", "alpha_c_reason",
                "alpha_l_reason", "solves"]

register(TaskKind("thresholds", "alpha_c and alpha_l by the fast path, seeded by the neighbours",
                  lambda spec, module: _phase_check(spec, module, False), _thresholds_compute,
                  hint=_thresholds_hint, default_warm=_first_warm_axis, alpha="none",
                  variables=lambda st, module: (list(PHASE_VALUES), []), seconds=lambda st: ROUGH_SECONDS["thresholds"]))
register(TaskKind("phase", "alpha_c, alpha_l and the spinodals by continuation of whole branches",
                  lambda spec, module: _phase_check(spec, module, True), _continuation_compute, alpha="none",
                  variables=lambda st, module: (PHASE_VALUES + [f"spinodal_{b}" for b in st["branches"]], []),
                  seconds=lambda st: ROUGH_SECONDS["phase"]))


# --------------------------------------------------------------------------- simulate
def _simulator(name: str) -> Callable[..., dict]:
    """A registered sweep simulator (:mod:`replica.simulators`): a spec names one, never a function to import."""
    from ..simulators import sweep_simulator

    return sweep_simulator(name, "compute.simulator")


def _simulate_check(spec: SweepSpec, module: GeneratedModel | None) -> dict:
    s = _Settings(spec)
    name = s.text("simulator", None)
    if name is None:
        from ..simulators import sweep_simulators

        raise ParameterError("compute.simulator", f"kind 'simulate' needs simulator = one of "
                                                  f"{sorted(sweep_simulators())}")
    run = _simulator(name)
    options = dict(s.raw)
    check = getattr(run, "check", None)
    names = [a.name for a in spec.axes] + list(spec.parameters)
    if "alpha" not in names:
        raise ParameterError("grid", "kind 'simulate' needs alpha: a grid axis or a fixed parameter")
    if check is not None:  # the adapter checks its options and every point before any run
        for index in spec.indices():
            check(spec.model, spec.point(index), options)
    return dict(simulator=name, options=options)


def _simulate_compute(ctx: Context, point: dict, hint: Any) -> dict:
    st = ctx.settings
    values = _simulator(st["simulator"])(ctx.model, dict(point), **st["options"])
    return {"values": dict(values), "rows": [], "seed": None}


register(TaskKind("simulate", "a registered simulator (means and standard errors over seeds)", _simulate_check,
                  _simulate_compute, needs_model=False,
                  seconds=lambda st: ROUGH_SECONDS["simulate"] * int(st["options"].get("seeds", 1))))

"""Fast thresholds: ``alpha_c`` and ``alpha_l`` with as few solves as possible.

:func:`~replica.phase.continuation.continuation_point` follows whole branches over ``alpha``
(~90 solves per point of the paper's diagram), which curves need but a phase diagram does not.
Here only the points that the root finders ask for are solved, for any pair ``(high, low)`` of
declared branches (``high`` wins at large ``alpha``):

* ``alpha_c``: safeguarded Newton on ``D(alpha) = Phi_high - Phi_low``. Every evaluation is a
  solved point on both branches, and it comes with its exact derivative
  ``D' = Psi_y,high - Psi_y,low`` (``dPhi/dalpha = Psi_y`` at a saddle point, envelope theorem),
  so from a good first guess two or three evaluations reach ``xtol``; the last Newton
  correction (below ``xtol``) is applied without another solve.
* ``alpha_l``: safeguarded secant on ``eps_g,high(alpha) - eps_lin`` from the last ``alpha_c``
  evaluation (``alpha_l > alpha_c`` on the high branch, the paper's case), or ``alpha_c``
  itself where ``eps_g`` jumps below ``eps_lin`` there.
* Warm starts: each branch keeps one solver, so every solve starts from the previous
  minimisers of the proximal problems, and from the secant extrapolation in ``alpha`` of the
  two nearest solved points. Along a parameter (:func:`thresholds_sweep`) each process walks a
  contiguous run of its values: the first guesses of ``alpha_c``, ``alpha_l`` are extrapolated
  from the previous values and the branches are warm-started from their states (no cold
  multistarts after the first).
* Branch identity (the same checks as the continuation): a solve that merges into the
  branch it merges into or lands farther than ``max(jump, |dalpha|/alpha)`` from its prediction
  is rejected and the step halved (down to ``min_step``); ``high`` is started cold above the
  guess (it exists at large ``alpha``) and walked down, ``low`` from the generic starts at the
  guess, keeping the largest ``Phi`` (as the continuation does).

Where the fast path meets something it does not handle -- a branch ends or merges on the
way, ``D`` has no sign change in ``[alpha_min, alpha_max]``, the ``low`` branch's ``eps_g`` is
already below ``eps_lin`` at ``alpha_c`` -- it falls back to the continuation
(``early_stop=True``), which gives the threshold or ``None`` with the reason; the retry is
recorded in :attr:`~replica.phase.results.Crossing.retries` and the reasons. Spinodals are not
searched for on the fast path (``spinodals`` lists are empty unless the fallback ran);
``curves`` hold the solved points.
"""
from __future__ import annotations

import concurrent.futures as cf
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..interface.generated_model import GeneratedModel
from ..artifacts.cache import PointCache
from ..errors import ConvergenceError, InvalidStateError, ParameterError
from ..runtime.progress import Progress
from .common import as_module, check_range, resolve_pair
from .continuation import baseline_value, continuation_point, no_baseline, note_function
from .follower import BranchFollower
from ..runtime.executors import describe, run_chains
from .parallel import executor_for, module_from_ref, module_ref
from .results import BranchCurve, Crossing, CrossingStatus, PhaseResult
from .settings import SolverSettings, StepControl

__all__ = ["Guess", "Seed", "next_guess", "thresholds", "thresholds_sweep"]

#: a neutral first guess of (alpha_c, alpha_l / alpha_c); Newton does the rest (the paper's
#: instance has alpha_c in [0.6, 2.2])
DEFAULT_GUESS = (1.0, 1.2)


@dataclass
class Guess:
    """First guesses for one point (typically from the previous value of a swept parameter):
    ``alpha_c``, ``alpha_l`` and branch states ``x[branch]`` solved at ``alpha_x``."""

    alpha_c: float | None = None
    alpha_l: float | None = None
    x: dict[str, np.ndarray] = field(default_factory=dict)
    alpha_x: dict[str, float] = field(default_factory=dict)


class _Lost(Exception):
    """A branch could not be reached at the requested ``alpha`` (it ends, merges or jumps)."""


class _Walker:
    """Sparse points of one branch, each solved from the extrapolation of its neighbours."""

    def __init__(self, follower: BranchFollower, min_step: float = 0.01, max_depth: int = 5):
        self.f = follower
        self.curve = BranchCurve(follower.module.MODEL, follower.branch, dict(follower.parameters), [],
                                 families=dict(follower.families))
        self.min_step, self.max_depth = min_step, max_depth

    def _check(self, pt, pred: np.ndarray, scale: np.ndarray, tol: float) -> str:
        if self.f.merged(pt.x):
            return f"{'/'.join(self.f.defining)} -> 0: merged into the {self.f.merges_into} branch"
        d = self.f.distance(pt.x, pred, scale)
        if d > tol:
            return f"converged {d:.2f} (relative) away from the prediction (tolerance {tol:.2f})"
        pt.step_error = d
        return ""

    def attempt(self, alpha: float, x0: np.ndarray, pred: np.ndarray, scale: np.ndarray, tol: float):
        """Solve at ``alpha`` from ``x0``; the point, or None and why."""
        x0 = x0 if self.f.solver._admissible(x0) else scale
        try:
            pt = self.f.solve(alpha, x0, reference=pred)
        except (ConvergenceError, InvalidStateError) as exc:
            return None, str(exc).splitlines()[0]
        why = self._check(pt, pred, scale, tol)
        if why:
            return None, why
        self.curve.insert(pt)
        return pt, ""

    def start_cold(self, alpha: float, multistart: bool):
        """A first point at ``alpha`` from generic starts (largest ``Phi`` with ``multistart``)."""
        x0 = None if multistart else self.f.solver.initial_state()
        pt, why = self.f.start(alpha, x0)
        if pt is None:
            raise _Lost(f"{self.f.branch} branch: no solution from generic starts at alpha={alpha:.4g} ({why})")
        self.curve.insert(pt)
        return pt

    def at(self, alpha: float, depth: int = 0):
        """The branch at ``alpha``, reached from the nearest solved points (halving the step on failure)."""
        alpha = float(alpha)
        hit = self.curve.point(alpha)
        if hit is not None:
            return hit
        pts = sorted(self.curve.points, key=lambda p: abs(p.alpha - alpha))
        if not pts:
            raise _Lost(f"{self.f.branch} branch has no solved point")
        p1 = pts[0]
        pred = p1.x.copy()
        if len(pts) > 1:
            p2 = pts[1]
            pred = p1.x + (alpha - p1.alpha) * (p1.x - p2.x) / (p1.alpha - p2.alpha)
        dist = abs(alpha - p1.alpha)
        tol = max(self.f.steps.jump, dist / alpha * (0.5 if len(pts) > 1 else 1.0))
        pt, why = self.attempt(alpha, pred, pred, p1.x, tol)
        if pt is not None:
            return pt
        if depth >= self.max_depth or dist <= self.min_step:
            weak = self.f.defining_size(p1.x) < self.f.steps.weak
            raise _Lost(f"{self.f.branch} branch lost between alpha={p1.alpha:.4g} and {alpha:.4g}: {why}"
                        + (f" (barely distinct from the {self.f.merges_into} branch)" if weak else ""))
        self.at(0.5 * (p1.alpha + alpha), depth + 1)
        return self.at(alpha, depth + 1)

    def from_state(self, alpha: float, x: np.ndarray, tol: float):
        """A first point at ``alpha`` warm-started from ``x`` (e.g. the branch at the previous
        value of a swept parameter); None if it does not land within ``tol`` of ``x``."""
        x = np.asarray(x, dtype=float).copy()
        x[~self.f.free] = 0.0
        pt, _ = self.attempt(alpha, x, x, x, tol)
        return pt


def thresholds(module: GeneratedModel | str, parameters: Mapping[str, float] | None = None, *,
               pair: tuple[str, str] | None = None, alpha_min: float = 0.1, alpha_max: float = 4.0,
               settings: SolverSettings | None = None, steps: StepControl | None = None,
               cache: PointCache | None = None, xtol: float = 1e-4, guess: Guess | None = None,
               fallback: bool = True, progress: Callable[[str], None] | Progress | None = None,
               max_evaluations: int = 16, verify_distance: float = 0.1, label: str = "") -> PhaseResult:
    """``alpha_c`` and ``alpha_l`` at one set of parameters from a few solved points.

    Returns a :class:`~replica.phase.results.PhaseResult` (the same JSON as the continuation):
    its ``curves`` hold only the solved points, ``spinodals`` are not searched for. ``pair``:
    ``(high, low)`` (default: the model's ``TRANSITION``). ``guess`` (:class:`Guess`) seeds the
    root finders and the warm starts. With ``fallback`` (default) anything the fast path does
    not handle is handed to the continuation with ``early_stop=True`` (see the module
    docstring); otherwise the threshold is ``None`` with the reason.
    """
    t0 = time.perf_counter()
    module = as_module(module)
    check_range(alpha_min, alpha_max)
    high, low = resolve_pair(module, pair)
    params = dict(parameters or {})
    settings = settings or SolverSettings()
    cache = cache if cache is not None else PointCache(enabled=False)
    note = note_function(progress, label)
    seeded = guess is not None and (guess.alpha_c is not None or bool(guess.x))
    guess = guess or Guess()
    fol = {b: BranchFollower(module, b, params, settings, steps, cache, note) for b in (high, low)}
    W = {b: _Walker(f) for b, f in fol.items()}
    hi_w, lo_w = W[high], W[low]
    eps_lin, eps_lin_err, kind = baseline_value(module, params)
    g_c, g_l = DEFAULT_GUESS
    g_c = float(np.clip(guess.alpha_c if guess.alpha_c else g_c, alpha_min, alpha_max))
    g_l = guess.alpha_l if guess.alpha_l else g_c * g_l

    def finish(alpha_c: Crossing, alpha_l: Crossing, segments) -> PhaseResult:
        return PhaseResult(
            model=module.MODEL, parameters=fol[high].parameters, alpha_min=float(alpha_min),
            alpha_max=float(alpha_max), curves={b: w.curve for b, w in W.items()}, alpha_c=alpha_c,
            alpha_l=alpha_l, eps_lin=eps_lin, eps_lin_error=eps_lin_err,
            quadrature=fol[high].solver.integrator.describe(), seconds=time.perf_counter() - t0,
            solves=sum(f.solves for f in fol.values()), cached=sum(f.cached for f in fol.values()),
            segments=segments, pair=(high, low), baseline=kind, label=label)

    def handed_over(r: PhaseResult, what: str, why: str) -> PhaseResult:
        # the result of a retry, with the reason it was needed and this attempt's solves counted
        for c in (r.alpha_c, r.alpha_l):
            c.reason += f" [{what}: {why}]"
            c.retries.insert(0, f"{what}: {why}")
        r.solves += sum(f.solves for f in fol.values())
        r.cached += sum(f.cached for f in fol.values())
        r.seconds = time.perf_counter() - t0
        return r

    def give_up(why: str) -> PhaseResult:
        if seeded:
            # A neighbour's states can steer a branch onto a nearby solution it then loses (at
            # omega = 0 of the paper's diagram several positional solutions lie close together):
            # a cold start of the fast path costs a few solves, the continuation dozens.
            r = thresholds(module, params, pair=(high, low), alpha_min=alpha_min, alpha_max=alpha_max,
                           settings=settings, steps=steps, cache=cache, xtol=xtol, guess=None,
                           fallback=fallback, progress=progress, max_evaluations=max_evaluations,
                           verify_distance=verify_distance, label=label)
            return handed_over(r, "cold restart", why)
        if not fallback:
            return finish(Crossing(None, f"fast path: {why}"), Crossing(None, f"fast path: {why}"), [])
        r = continuation_point(module, params, pair=(high, low), alpha_min=alpha_min, alpha_max=alpha_max,
                               branches=(high, low), settings=settings, steps=steps, cache=cache,
                               progress=progress, early_stop=True, xtol=xtol, label=label)
        return handed_over(r, "continuation fallback", why)

    try:
        # ---- first points: warm from the previous point's states, else cold
        low_cold = None
        for b, w in W.items():
            x = guess.x.get(b)
            if x is not None and w.from_state(g_c, x, tol=max(0.3, abs(g_c - guess.alpha_x.get(b, g_c)) / g_c)):
                continue
            if b == low:
                low_cold = g_c
            if b == high:
                # the high branch exists at large alpha: start well above the guess, walk down
                w.start_cold(min(alpha_max, max(1.5 * g_c, g_c + 0.3)), multistart=False)
            else:
                w.start_cold(g_c, multistart=True)

        # ---- alpha_c: safeguarded Newton on D = Phi_high - Phi_low, D' = Psi_high - Psi_low
        def newton(a: float):
            lo = hi = None            # D(lo) < 0 <= D(hi)
            last = None
            for _ in range(max_evaluations):
                ps, pp = hi_w.at(a), lo_w.at(a)
                d, dd = ps.phi - pp.phi, ps.psi_y - pp.psi_y
                last = (a, ps, pp)
                if d < 0:
                    lo = a
                else:
                    hi = a
                step = -d / dd if dd > 0 else (0.3 * a if d < 0 else -0.25 * a)
                new = a + step
                if lo is not None and hi is not None:
                    if not (min(lo, hi) < new < max(lo, hi)):
                        new = 0.5 * (lo + hi)
                else:  # not bracketed yet: at most a factor 1.5 per step, inside the range
                    new = float(np.clip(new, a / 1.5, a * 1.5))
                    if new >= alpha_max and d < 0 and a >= alpha_max - 1e-12:
                        raise _Lost(f"Phi_{low} > Phi_{high} up to alpha_max = {alpha_max:g}")
                    if new <= alpha_min and d >= 0 and a <= alpha_min + 1e-12:
                        raise _Lost(f"Phi_{high} >= Phi_{low} down to alpha_min = {alpha_min:g}")
                    new = float(np.clip(new, alpha_min, alpha_max))
                if abs(new - a) < xtol:
                    return new, last, lo, hi
                a = new
            raise _Lost(f"Newton on Phi_{high} - Phi_{low} did not converge in {max_evaluations} evaluations")

        root, last, lo, hi = newton(g_c)
        low_from = low_cold if low_cold is not None else guess.alpha_x.get(low, g_c)
        if abs(root - low_from) > verify_distance * root:
            # the low branch was started far from alpha_c: where it matters, the generic starts
            # may reach a solution with a larger Phi (a branch can hold several)
            a_last, _, pp = last
            fresh = _Walker(fol[low])
            alt = fresh.start_cold(a_last, multistart=True)
            if alt.phi > pp.phi + 1e-12 * abs(alt.phi) and fol[low].distance(alt.x, pp.x) > 1e-3:
                W[low] = lo_w = fresh
                root, last, lo, hi = newton(root)
        a_last, ps, pp = last
        alpha_c = Crossing(root, f"Newton root of Phi_{high} - Phi_{low} on solved points (dPhi/dalpha = Psi_y; "
                                 f"xtol={xtol:g}; thresholds-only path)",
                           (min(lo if lo is not None else a_last, a_last), max(hi if hi is not None else a_last, a_last)),
                           len({p.alpha for p in hi_w.curve.points} & {p.alpha for p in lo_w.curve.points}))
        segments = [(float(alpha_min), root, low), (root, float(alpha_max), high)]
        if kind is None:
            return finish(alpha_c, no_baseline(module), segments)

        # ---- alpha_l: global-minimum eps_g = eps_lin (high branch above alpha_c)
        e_low, e_high = pp.eps_g - eps_lin, ps.eps_g - eps_lin
        if e_low <= 0:
            return give_up(f"the {low} eps_g is already below eps_lin at alpha_c")
        if e_high <= 0:
            alpha_l = Crossing(root, f"eps_g jumps below eps_lin where the global minimum switches to the {high} "
                                     f"branch (alpha = {root:.6g}; thresholds-only path)", (root, root),
                               status=CrossingStatus.SWITCH)
            return finish(alpha_c, alpha_l, segments)
        x0, f0 = a_last, e_high
        x1 = float(np.clip(max(g_l, a_last + 0.05), a_last, alpha_max))
        lo_l, hi_l = x0, None     # E(lo_l) > 0 >= E(hi_l)
        n = 0
        while True:
            n += 1
            if n > max_evaluations:
                return give_up(f"secant on eps_g - eps_lin did not converge in {max_evaluations} evaluations")
            f1 = hi_w.at(x1).eps_g - eps_lin
            if f1 > 0:
                lo_l = max(lo_l, x1)
            else:
                hi_l = x1 if hi_l is None else min(hi_l, x1)
            new = x1 - f1 * (x1 - x0) / (f1 - f0) if f1 != f0 else float("nan")
            if hi_l is None:
                if not (math.isfinite(new) and new > x1):
                    new = 1.3 * x1
                new = min(new, x1 + 2.0 * max(x1 - x0, 0.05), alpha_max)
                if x1 >= alpha_max - 1e-12:
                    alpha_l = Crossing(None, f"the global-minimum eps_g ({high} branch) stays above eps_lin = "
                                             f"{eps_lin:.4g} up to alpha = {alpha_max:.4g} (thresholds-only path)")
                    return finish(alpha_c, alpha_l, segments)
            elif not (math.isfinite(new) and lo_l < new < hi_l):
                new = 0.5 * (lo_l + hi_l)
            if abs(new - x1) < xtol or (hi_l is not None and hi_l - lo_l < xtol):
                root_l = new
                break
            x0, f0, x1 = x1, f1, new
        alpha_l = Crossing(root_l, f"secant root of eps_g - eps_lin on solved points of the {high} branch "
                                   f"(xtol={xtol:g}; thresholds-only path)", (lo_l, hi_l or lo_l), n)
        return finish(alpha_c, alpha_l, segments)
    except _Lost as exc:
        return give_up(str(exc))


@dataclass
class Seed:
    """What a solved point passes on to its neighbours along a swept parameter: its ``alpha_c``
    (and whether it is a root refined on solved points), ``alpha_l``, and each branch's state
    ``x[branch]`` at the solved ``alpha_x[branch]`` nearest ``alpha_c``. Small and JSON-able (a
    sweep stores it with the point, so that a resumed run seeds its neighbours the same way)."""

    alpha_c: float | None
    root: bool
    alpha_l: float | None
    x: dict[str, np.ndarray] = field(default_factory=dict)
    alpha_x: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, r: PhaseResult) -> "Seed":
        s = cls(r.alpha_c.value, r.alpha_c.is_root, r.alpha_l.value)
        if r.alpha_c.value is not None:
            for b, c in r.curves.items():
                if len(c):
                    p = min(c.points, key=lambda p: abs(p.alpha - r.alpha_c.value))
                    s.x[b], s.alpha_x[b] = p.x.copy(), p.alpha
        return s

    def to_dict(self) -> dict:
        return dict(alpha_c=self.alpha_c, root=self.root, alpha_l=self.alpha_l,
                    x={b: [float(v) for v in x] for b, x in self.x.items()}, alpha_x=dict(self.alpha_x))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Seed":
        return cls(d["alpha_c"], bool(d["root"]), d["alpha_l"],
                   {b: np.array(x, dtype=float) for b, x in d["x"].items()},
                   {b: float(a) for b, a in d["alpha_x"].items()})


def next_guess(done: Sequence[tuple[float, PhaseResult | Seed | None]], value: float) -> Guess:
    """First guesses at ``value`` of a swept parameter from the results ``done`` (pairs
    ``(value, result or its Seed)``) of the same run: ``alpha_c``, ``alpha_l`` linearly
    extrapolated from the two nearest values whose ``alpha_c`` is a root, and the branch states
    of the nearest one at its last ``alpha_c`` evaluation."""
    seeds = [(w, r if isinstance(r, Seed) else Seed.of(r)) for w, r in done if r is not None]
    ok = sorted([(w, r) for w, r in seeds if r.root and r.alpha_c is not None],
                key=lambda wr: abs(wr[0] - value))
    if not ok:
        return Guess()
    w1, r1 = ok[0]
    g = Guess(alpha_c=r1.alpha_c, alpha_l=r1.alpha_l)
    if len(ok) > 1:
        w0, r0 = ok[1]
        if w1 != w0:
            t = (value - w1) / (w1 - w0)
            g.alpha_c = r1.alpha_c + t * (r1.alpha_c - r0.alpha_c)
            if r1.alpha_l is not None and r0.alpha_l is not None:
                g.alpha_l = r1.alpha_l + t * (r1.alpha_l - r0.alpha_l)
    if g.alpha_c <= 0:
        g.alpha_c = r1.alpha_c
    if g.alpha_l is not None and g.alpha_l <= g.alpha_c:
        g.alpha_l = None
    for b, x in r1.x.items():
        g.x[b], g.alpha_x[b] = x.copy(), r1.alpha_x[b]
    return g


def visit_order(ws: Sequence[float], centre: float) -> list[int]:
    """Indices of the sorted ``ws`` of one run: from the one nearest ``centre`` outwards (up
    first, then down), so that every value after the first has a neighbour to start from."""
    k = int(np.argmin([abs(w - centre) for w in ws]))
    return list(range(k, len(ws))) + list(range(k - 1, -1, -1))


def contiguous_runs(n: int, count: int) -> list[list[int]]:
    """``range(n)`` split into ``count`` contiguous runs of nearly equal length (none empty)."""
    return [[int(i) for i in r] for r in np.array_split(np.arange(n), min(count, n)) if len(r)]


def _run(module: GeneratedModel, name: str, ws: Sequence[float], centre: float, kwargs: Mapping[str, Any],
         cache: PointCache, progress: Progress | None = None) -> list[PhaseResult | None]:
    out: list[PhaseResult | None] = [None] * len(ws)
    done: list[tuple[float, PhaseResult | None]] = []
    base = dict(kwargs.get("parameters") or {})
    kw = {k: v for k, v in kwargs.items() if k != "parameters"}
    for i in visit_order(ws, centre):
        g = next_guess(done, ws[i])
        out[i] = thresholds(module, dict(base, **{name: ws[i]}), cache=cache, guess=g, progress=progress,
                            label=f"{name}={ws[i]:g}", **kw)
        done.append((ws[i], out[i]))
        if progress is not None:
            progress.advance(out[i].summary())
    return out


def _point(ref, name: str, w: float, kwargs: Mapping[str, Any], guess: Guess, cache_root,
           cache_on) -> tuple[float, PhaseResult]:
    # one value of a run, in a worker: the same call as in _run
    base = dict(kwargs.get("parameters") or {})
    kw = {k: v for k, v in kwargs.items() if k != "parameters"}
    r = thresholds(module_from_ref(ref), dict(base, **{name: w}), cache=PointCache(cache_root, cache_on),
                   guess=guess, progress=None, label=f"{name}={w:g}", **kw)
    return w, r


def thresholds_sweep(module: GeneratedModel | str, name: str, values: Sequence[float],
                     parameters: Mapping[str, float] | None = None, *, jobs: int = 1,
                     cache: PointCache | None = None, progress: Progress | None = None,
                     executor: cf.Executor | None = None, **kwargs) -> list[PhaseResult]:
    """:func:`thresholds` at every value of the parameter ``name``; results in ``values`` order.

    The values are split into ``jobs`` contiguous runs (sorted), run concurrently on
    ``executor`` (any :class:`concurrent.futures.Executor`) or else in ``jobs`` local processes;
    inside a run every point starts from the previous ones' thresholds and states
    (:class:`Guess`, :func:`next_guess`). The runs, hence the numbers, depend on ``jobs`` only,
    not on where they are computed. ``kwargs`` go to :func:`thresholds` (``pair``,
    ``alpha_min``, ``alpha_max``, ``settings``, ``xtol`` ...).
    """
    module = as_module(module)
    if jobs < 1:
        raise ParameterError("jobs", f"must be >= 1, got {jobs}")
    if name not in module.PARAMETERS:
        raise ParameterError(name, f"model {module.MODEL} has no parameter {name!r}; known: {list(module.PARAMETERS)}")
    cache = cache if cache is not None else PointCache(enabled=False)
    kw = dict(kwargs, parameters=dict(parameters or {}))
    order = sorted(range(len(values)), key=lambda i: values[i])
    ws = [float(values[i]) for i in order]
    if not ws:
        return []
    # contiguous runs, each started at its value nearest the middle of the whole range (a first
    # guess there is typically better than at the ends, and the ends then get neighbours)
    centre = float(np.median(ws))
    runs = contiguous_runs(len(ws), jobs)
    results: list = [None] * len(values)
    if len(runs) <= 1 and executor is None:
        for k, r in enumerate(_run(module, name, ws, centre, kw, cache, progress)):
            results[order[k]] = r
        return results
    ref = module_ref(module)
    chains = [[run[i] for i in visit_order([ws[k] for k in run], centre)] for run in runs]

    def step(k: int, done: list):
        return _point, ref, name, ws[k], kw, next_guess(done, ws[k]), cache.root, cache.enabled

    def finished(c: int, j: int, wr: tuple[float, PhaseResult], ready: bool) -> None:
        results[order[chains[c][j]]] = wr[1]
        if progress is not None:
            progress.advance(wr[1].summary())

    with executor_for(len(runs), executor) as ex:
        if progress is not None:
            progress.note(f"{len(ws)} values of {name} in {len(runs)} runs on {describe(ex)}")
        run_chains(ex, chains, step, on_result=finished)
    return results

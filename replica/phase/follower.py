"""Following one branch along ``alpha``: warm starts, the cache, jump and merge checks (:class:`BranchFollower`).

Each point is warm-started from the secant extrapolation of the two previous ones, the step
adapts to the extrapolation error, and the branch *ends* (a spinodal, reported as a
:class:`~replica.phase.results.BranchEnd`) where the continuation fails even with the smallest
step -- the iteration no longer converges, the state leaves the admissible domain, the branch
merges into the branch it merges into (:mod:`replica.numeric.branches`: its defining families vanish),
or the converged point jumps far from the extrapolated one (it landed on another solution). A
branch never silently continues on another solution.

Solved points are cached on disk (:mod:`replica.artifacts.cache`); a cached point is only used when it
agrees with the warm start the continuation would have used, so a cache entry can never move a
curve to another branch.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

from ..interface.generated_model import GeneratedModel
from ..numeric.branches import defining_families, merge_target
from ..artifacts.cache import PointCache
from ..numeric.convergence import cached_point_converged
from ..errors import ConvergenceError, InvalidStateError, ParameterError
from .common import as_module, check_positive
from .results import BranchCurve, BranchEnd, BranchPoint, EndReason, PhaseError
from .settings import SolverSettings, StepControl


class BranchFollower:
    """Solves points of one branch: cache, warm starts, jump / merge checks, continuation.

    Most users want :func:`follow_branch` or :func:`phase_point`; this class is what they
    share, so that root finding can solve more points on an already-followed curve.
    """

    def __init__(self, module: GeneratedModel, branch: str, parameters: Mapping[str, float] | None = None,
                 settings: SolverSettings | None = None, steps: StepControl | None = None,
                 cache: PointCache | None = None, progress: Callable[[str], None] | None = None):
        if branch not in module.BRANCHES:
            raise ParameterError("branch", f"model {module.MODEL} has no branch {branch!r} "
                                           f"(it has {list(module.BRANCHES)})")
        self.module, self.branch = module, branch
        self.settings = settings or SolverSettings()
        self.steps = steps or StepControl()
        self.cache = cache if cache is not None else PointCache(enabled=False)
        self.progress = progress
        self.solver = self.settings.make_solver(module, parameters, branch)
        self.parameters = self.solver.parameter_dict
        self.free = self.solver.free
        self.solves = 0
        self.cached = 0
        # the families that distinguish this branch from the one it merges into
        self.merges_into = merge_target(module, branch)
        self.defining = defining_families(module, branch)
        self.families = {f: list(idx) for f, idx in module.FAMILIES.items()}
        rb = np.atleast_1d(np.asarray(module.rho_bar(self.solver.p), dtype=float))
        self._rho = float(np.mean(rb)) if rb.size and np.mean(rb) > 0 else 1.0

    # ---------------------------------------------------------------- cache keys
    def describe(self) -> dict:
        s = self.solver
        out = dict(model=self.module.MODEL, source_hash=self.module.SOURCE_HASH,
                   generator=self.module.stamp.version if self.module.stamp else "", parameters=self.parameters,
                   branch=self.branch, quadrature=s.integrator.describe(), test_rule=s.test_rule.describe(),
                   tol=s.tol)
        if s.entropic_rule is not None:  # a non-quadratic regularizer: its rule is part of the point
            out["entropic_rule"] = s.entropic_rule.describe()
        return out

    def _key(self, alpha: float) -> dict:
        return dict(self.describe(), alpha=float(alpha), kind="point")

    # ---------------------------------------------------------------- checks
    def distance(self, x: np.ndarray, ref: np.ndarray, scale: np.ndarray | None = None) -> float:
        """Largest relative difference over the free entries (floor 1e-3 on the scale)."""
        scale = np.abs(ref) if scale is None else np.maximum(np.abs(scale), np.abs(ref))
        d = np.abs(x - ref) / np.maximum(scale, 1e-3)
        return float(np.max(d[self.free])) if self.free.any() else 0.0

    def defining_size(self, x: np.ndarray) -> float:
        """Relative size of the defining family: ``|theta| / sqrt(q rho)``, ``|m| / sqrt(q)``."""
        if not self.defining:
            return float("inf")
        qi = self.families.get("q", [])
        diag = [i for i in qi if i in self.module.SYMMETRIC_DIAGONAL] or qi
        qs = float(np.mean(np.abs(x[diag]))) if diag else 1.0
        sizes = []
        for fam in self.defining:
            v = float(np.linalg.norm(x[self.families[fam]]))
            norm = math.sqrt(max(qs, 1e-300) * (self._rho if fam.startswith("theta") else 1.0))
            sizes.append(v / norm)
        return min(sizes)

    def merged(self, x: np.ndarray) -> bool:
        return self.defining_size(x) < self.steps.merge

    # ---------------------------------------------------------------- one point
    def solve(self, alpha: float, x0: np.ndarray, reference: np.ndarray | None = None,
              keyed_by_start: bool = False) -> BranchPoint:
        """Solve at ``alpha`` from ``x0`` (raises ConvergenceError / InvalidStateError).

        Cache: a result solved from the same ``x0`` is reused as is (the iteration is
        deterministic); otherwise a point cached at this ``alpha`` from another start is
        reused only if it is within ``jump`` of ``reference`` (default ``x0``) -- never with
        ``keyed_by_start`` (cold starts, whose result depends on the start).
        """
        alpha = float(alpha)
        x0 = np.asarray(x0, dtype=float)
        reference = x0 if reference is None else reference
        model = self.module.MODEL
        start_key = dict(self._key(alpha), x0=[float(f"{v:.12g}") for v in x0], max_iter=self.solver.max_iter)
        hit = self.cache.get(model, start_key)
        if hit is not None:
            status = hit.get("status")
            if status == "failed":
                self.cached += 1
                msg = str(hit.get("message", "cached failure")) + " (cached)"
                if hit.get("kind") == "inadmissible":
                    raise InvalidStateError("state", msg)
                raise ConvergenceError(msg, [], int(hit.get("iterations", 0)))
            try:
                pt = BranchPoint.from_dict(hit)
                if pt.x.shape == x0.shape and cached_point_converged(pt, self.solver.tol):
                    pt.cached = True
                    self.cached += 1
                    return pt
            except (KeyError, TypeError, ValueError):
                pass
        if not keyed_by_start:
            hit = self.cache.get(model, self._key(alpha))
            if hit is not None and hit.get("status") == "ok":
                try:
                    pt = BranchPoint.from_dict(hit)
                    if (pt.x.shape == x0.shape and cached_point_converged(pt, self.solver.tol)
                            and self.distance(pt.x, reference) <= self.steps.jump):
                        pt.cached = True
                        self.cached += 1
                        return pt
                except (KeyError, TypeError, ValueError):
                    pass
        if self.progress:
            self.progress(f"{self.branch} alpha={alpha:.4g}")
        self.solves += 1
        try:
            fp = self.solver.solve(alpha, x0=x0)
        except ConvergenceError as exc:
            self.cache.put(model, start_key, dict(status="failed", kind="no-convergence", message=str(exc),
                                                  iterations=exc.iterations))
            raise
        except InvalidStateError as exc:
            self.cache.put(model, start_key, dict(status="failed", kind="inadmissible", message=str(exc)))
            raise
        pt = BranchPoint.from_fixed_point(fp)
        entry = dict(pt.to_dict(), status="ok")
        self.cache.put(model, start_key, entry)
        self.cache.put(model, self._key(alpha), entry)
        return pt

    def _attempt(self, alpha: float, pred: np.ndarray, last: BranchPoint
                 ) -> tuple[BranchPoint | None, EndReason | None, str]:
        pt, reason, detail = self._attempt_raw(alpha, pred, last)
        if pt is None and reason not in (EndReason.MERGED, EndReason.ITERATION_BUDGET) \
                and self.defining_size(last.x) < self.steps.weak:
            # a barely-distinguished branch (|m|/sqrt(q) or |theta|/sqrt(q rho) below `weak`)
            # failing to continue: it is at the merged state within the numerical accuracy
            fams = "/".join(self.defining)
            return None, EndReason.MERGED, (f"{fams} is small (relative size {self.defining_size(last.x):.2g}) and the "
                                    f"continuation fails ({reason}): the branch merges into the {self.merges_into} one "
                                    "within the quadrature accuracy")
        return pt, reason, detail

    def _attempt_raw(self, alpha: float, pred: np.ndarray, last: BranchPoint
                     ) -> tuple[BranchPoint | None, EndReason | None, str]:
        x0 = pred if self.solver._admissible(pred) else last.x
        try:
            pt = self.solve(alpha, x0, reference=pred)
        except ConvergenceError as exc:
            # out of --max-iter: the solve was cut short, which says nothing about the branch
            budget = exc.iterations >= self.solver.max_iter and "within" in str(exc)
            return None, EndReason.ITERATION_BUDGET if budget else EndReason.NO_CONVERGENCE, str(exc)
        except InvalidStateError as exc:
            return None, EndReason.INADMISSIBLE, str(exc)
        if self.merged(pt.x):
            fams = "/".join(self.defining)
            return None, EndReason.MERGED, (f"{fams} -> 0 (relative size {self.defining_size(pt.x):.1e}): "
                                    f"the branch merged into the {self.merges_into} one")
        d = self.distance(pt.x, pred, last.x)
        if d > self.steps.jump:
            return None, EndReason.JUMP, (f"converged {d:.2f} (relative) away from the extrapolated state: "
                                  "another solution, this branch no longer exists")
        pt.step_error = d
        return pt, None, ""

    # ---------------------------------------------------------------- start
    def _seeds(self, x0: np.ndarray | None) -> list[np.ndarray]:
        if x0 is not None:
            return [np.asarray(x0, dtype=float)]
        base = self.solver.initial_state()
        seeds = [base]
        s = base.copy()
        for fam in self.defining:
            s[self.families[fam]] *= 0.3
        seeds.append(s)
        # a state nearer typical solutions (V ~ 10 rho_bar / rho_bar..., q small)
        s = base.copy()
        for i in self.families.get("V", []):
            if i in self.module.SYMMETRIC_DIAGONAL:
                s[i] *= 40.0
        for i in self.families.get("q", []):
            if i in self.module.SYMMETRIC_DIAGONAL:
                s[i] *= 0.5
        for fam in self.defining:
            s[self.families[fam]] *= 0.6
        if self.solver._admissible(s):
            seeds.append(s)
        return seeds

    def start(self, alpha: float, x0: np.ndarray | None = None) -> tuple[BranchPoint | None, str]:
        """A first point at ``alpha`` on this branch: from ``x0``, or else from a few generic
        starts, keeping the solution with the largest ``Phi`` (a branch can hold several
        solutions, e.g. a strongly and a weakly positional one of the paper's model; the larger ``Phi`` is the one
        that competes for the global minimum)."""
        why = ""
        found: list[BranchPoint] = []
        cold_iter = max(500, 2 * self.settings.max_iter) if x0 is None else self.settings.max_iter
        for seed in self._seeds(x0):
            seed = seed.copy()
            seed[~self.free] = 0.0
            self.solver.max_iter = cold_iter  # a cold start needs more iterations than a warm one
            try:
                pt = self.solve(alpha, seed, keyed_by_start=True)
            except (ConvergenceError, InvalidStateError) as exc:
                why = str(exc)
                continue
            finally:
                self.solver.max_iter = self.settings.max_iter
            if self.merged(pt.x):
                why = f"the iteration converged to {'/'.join(self.defining)} = 0 (the {self.merges_into} state)"
                continue
            found.append(pt)
        if not found:
            return None, why or "no start converged"
        return max(found, key=lambda p: p.phi), ""

    # ---------------------------------------------------------------- continuation
    def _min_step(self, alpha: float) -> float:
        return min(self.steps.min, max(self.steps.min_rel * abs(alpha), 1e-4))

    def _max_step(self, alpha: float) -> float:
        return max(self._min_step(alpha), min(self.steps.max, self.steps.max_rel * abs(alpha)))

    @staticmethod
    def _predict(points: Sequence[BranchPoint], alpha: float) -> np.ndarray:
        last = points[-1]
        if len(points) < 2:
            return last.x.copy()
        prev = points[-2]
        t = (alpha - last.alpha) / (last.alpha - prev.alpha)
        return last.x + t * (last.x - prev.x)

    def follow(self, alpha_start: float, alpha_stop: float, x0: np.ndarray | None = None,
               stop: Callable[[BranchPoint], bool] | None = None) -> BranchCurve:
        """Continue the branch from ``alpha_start`` to ``alpha_stop`` (either direction).

        ``stop(point)`` may end the continuation early (``curve.stopped_early``).
        """
        curve = BranchCurve(self.module.MODEL, self.branch, dict(self.parameters), [],
                            alpha_start=float(alpha_start), alpha_stop=float(alpha_stop),
                            families=dict(self.families))
        direction = 1.0 if alpha_stop >= alpha_start else -1.0
        first, why = self.start(alpha_start, x0)
        if first is None:
            curve.ends.append(BranchEnd(float(alpha_start), float(alpha_start), EndReason.NO_SOLUTION, why))
            return curve
        path = [first]
        # the first step has no secant predictor: make it the smallest one, then grow
        h = self._min_step(alpha_start)
        while direction * (alpha_stop - path[-1].alpha) > 1e-12:
            if stop is not None and stop(path[-1]):
                curve.stopped_early = True
                break
            a0 = path[-1].alpha
            hmin = self._min_step(a0)
            h = float(np.clip(h, hmin, self._max_step(a0)))
            remaining = abs(alpha_stop - a0)
            h_eff = remaining if remaining <= h * 1.25 else h
            a1 = alpha_stop if h_eff == remaining else a0 + direction * h_eff
            pred = self._predict(path, a1)
            pt, reason, detail = self._attempt(a1, pred, path[-1])
            if pt is not None:
                path.append(pt)
                factor = 0.9 * math.sqrt(self.steps.target / max(pt.step_error, 1e-12))
                h = h_eff * float(np.clip(factor, 0.5, 4.0))
                continue
            # the end: the smallest step failed, or the last stretch to alpha_stop (taken whole when
            # it is within 1.25 steps) failed and no smaller step would be tried instead of it
            if h_eff <= hmin * (1 + 1e-9) or (h_eff == remaining and remaining <= 1.25 * hmin):
                curve.ends.append(BranchEnd(a0, float(a1), reason, detail))
                break
            h = max(h_eff / 2.0, hmin)
        for p in path:
            curve.insert(p)
        return curve

    def follow_both(self, alpha_start: float, alpha_lo: float, alpha_hi: float,
                    stop: Callable[[BranchPoint], bool] | None = None) -> BranchCurve:
        """Start at ``alpha_start`` (inside ``[alpha_lo, alpha_hi]``) and continue both ways.

        Where a branch holds several solutions, the start (largest ``Phi`` there) fixes
        which one is followed: start where the branch matters. ``stop`` applies upward.
        """
        up = self.follow(alpha_start, alpha_hi, stop=stop)
        if not len(up) or alpha_start <= alpha_lo + 1e-12:
            return up
        first = up.point(alpha_start) or up.points[0]
        down = self.follow(first.alpha, alpha_lo, x0=first.x)
        for p in down.points:
            up.insert(p)
        up.ends = down.ends + up.ends
        up.alpha_start = float(alpha_start)
        return up

    def point_at(self, curve: BranchCurve, alpha: float) -> BranchPoint:
        """Solve at ``alpha`` inside the curve's range, warm-started from the interpolated
        state; the point is checked to lie on the same branch and added to ``curve``."""
        existing = curve.point(alpha)
        if existing is not None:
            return existing
        if not curve.covers(alpha):
            raise PhaseError(f"alpha={alpha:g} is outside the solved range {curve.range} of the "
                             f"{self.branch} branch")
        ref = curve.interpolate_x(alpha)
        alphas = curve.alphas
        neighbour = curve.points[int(np.argmin(np.abs(alphas - alpha)))]
        # warm starts: the interpolated state, then the nearest solved point
        why = ""
        for x0 in (ref, neighbour.x):
            try:
                pt = self.solve(alpha, x0, reference=ref)
            except (ConvergenceError, InvalidStateError) as exc:
                why = str(exc)
                continue
            d = self.distance(pt.x, ref, neighbour.x)
            if self.merged(pt.x) or d > self.steps.jump:
                why = f"the solution left the branch (relative distance {d:.2f} from the interpolated state)"
                continue
            pt.step_error = d
            curve.insert(pt)
            return pt
        raise PhaseError(f"{self.branch} branch at alpha={alpha:g}: {why}")


def follow_branch(module: GeneratedModel | str, branch: str, alpha_start: float, alpha_stop: float,
                  parameters: Mapping[str, float] | None = None, *, x0: np.ndarray | None = None,
                  settings: SolverSettings | None = None, steps: StepControl | None = None,
                  cache: PointCache | None = None, progress: Callable[[str], None] | None = None,
                  stop: Callable[[BranchPoint], bool] | None = None) -> BranchCurve:
    """Follow ``branch`` from ``alpha_start`` to ``alpha_stop`` by continuation.

    Returns the solved points and, if the branch ends inside the interval, a
    :class:`~replica.phase.results.BranchEnd` (the spinodal, located to within the smallest step).
    """
    module = as_module(module)
    check_positive("alpha_start", alpha_start)
    check_positive("alpha_stop", alpha_stop)
    f = BranchFollower(module, branch, parameters, settings, steps, cache, progress)
    return f.follow(alpha_start, alpha_stop, x0=x0, stop=stop)

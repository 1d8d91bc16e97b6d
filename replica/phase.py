"""Branches along alpha, spinodals, the transition alpha_c, the linear baseline and alpha_l.

THEORY §5. For a model whose loss is even in ``m`` and ``theta`` the saddle-point
equations have invariant subspaces, the *branches* of the generated module
(``semantic``: ``m = 0``; ``positional``: ``theta = 0``; ``agnostic``: both). This module

* follows one branch along ``alpha`` by continuation (:func:`follow_branch`): each point
  is warm-started from the secant extrapolation of the two previous ones, the step adapts
  to the extrapolation error, and the branch *ends* (a spinodal, reported as a
  :class:`BranchEnd`) where the continuation fails even with the smallest step -- the
  iteration no longer converges, the state leaves the admissible domain, the branch
  merges into a smaller one (``theta -> 0`` or ``m -> 0``), or the converged point jumps
  far from the extrapolated one (it landed on another solution). A branch never silently
  continues on another solution;
* finds ``alpha_c`` where ``Phi_semantic = Phi_positional`` by Brent's method on solved
  points (:func:`find_alpha_c`), the ``alpha``-independent linear-baseline error
  ``eps_lin`` (:func:`linear_baseline_error`), and ``alpha_l`` where the global-minimum
  test error (the branch with the larger ``Phi``) crosses ``eps_lin`` (:func:`find_alpha_l`);
* bundles all of it for one set of parameters in :func:`phase_point` and over several
  ``omega`` (in parallel processes) in :func:`phase_diagram`.

Solved points are cached on disk (:mod:`replica.cache`); a cached point is only used
when it agrees with the warm start the continuation would have used, so a cache entry
can never move a curve to another branch.
"""
from __future__ import annotations

import concurrent.futures as cf
import importlib
import importlib.util
import inspect
import math
import sys
import time
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .cache import PointCache
from .convergence import cached_point_converged
from .errors import ConvergenceError, InvalidStateError, ParameterError, ReplicaError
from .progress import Progress
from .integrators import from_spec
from .quadrature import QuadratureRule
from .solver import FixedPoint, Solver, linear_baseline

#: the branches a phase analysis needs, in the order they are reported
BRANCHES = ("semantic", "positional", "agnostic")
#: continuation direction: the semantic branch exists at large alpha, the others at small alpha
DIRECTION = {"semantic": -1, "positional": +1, "agnostic": +1}


class PhaseError(ReplicaError, RuntimeError):
    """A phase computation could not be carried out (e.g. a refinement left its branch)."""


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class SolverSettings:
    """How every point is solved.

    ``rule`` is a :class:`~replica.quadrature.QuadratureRule`, an energetic integrator, a
    spec string for :func:`~replica.quadrature.parse_rule` (``"fast"``, ``"gh:10"``) or
    ``"preint:fast|default|high"`` (:func:`replica.preintegration.make_integrator`), ``None``
    (the solver's default), or a mapping branch -> any of these (key ``"default"`` for the
    others), e.g. ``{"positional": "preint:fast", "default": "gh:12"}``. ``max_iter`` is kept moderate: a warm-started point
    converges in tens of iterations, and a point that does not is the end of a branch.
    ``error_estimate``: the solver's companion-rule residual per point (off: ~10% faster,
    ``quadrature_residual`` is then nan; ``eps_g_error`` is always there).
    """

    rule: Any = None
    test_rule: QuadratureRule | None = None
    tol: float = 1e-8
    max_iter: int = 200
    error_estimate: bool = False

    def rule_for(self, module: ModuleType, branch: str) -> Any:
        """The rule / integrator object for ``branch`` (resolving per-branch maps and specs)."""
        rule = self.rule
        if isinstance(rule, Mapping):
            rule = rule.get(branch, rule.get("default"))
        return from_spec(rule, module, branch)

    def make_solver(self, module: ModuleType, parameters: Mapping[str, float] | None,
                    branch: str) -> Solver:
        rule = self.rule_for(module, branch)
        kw = {}
        if "error_estimate" in inspect.signature(Solver.__init__).parameters:
            kw["error_estimate"] = self.error_estimate
        return Solver(module, parameters, branch, rule=rule, test_rule=self.test_rule, tol=self.tol,
                      max_iter=self.max_iter, **kw)


@dataclass(frozen=True)
class StepControl:
    """Adaptive continuation step in ``alpha``.

    ``initial``/``min``/``max``: absolute step bounds; near ``alpha = 0`` the order
    parameters scale like ``alpha``, so steps are also capped at ``max_rel * alpha`` and
    the smallest step is ``min(min, min_rel * alpha)``. ``target`` is the aimed-at
    relative distance between the extrapolated and the converged state; a point farther
    than ``jump`` is rejected as a jump to another solution. A branch whose defining
    family (``theta`` on the semantic, ``m`` on the positional branch) has relative size
    below ``merge`` has merged into the agnostic one; so has one whose relative size is below
    ``weak`` when the continuation fails (it is then within the quadrature accuracy of it).
    """

    initial: float = 0.1
    min: float = 0.01
    max: float = 0.3
    max_rel: float = 0.5
    min_rel: float = 0.05
    target: float = 0.04
    jump: float = 0.15
    merge: float = 1e-3
    weak: float = 0.1

    def __post_init__(self):
        if not 0 < self.min <= self.initial <= self.max:
            raise ParameterError("step", f"need 0 < min <= initial <= max, got {self.min}, "
                                         f"{self.initial}, {self.max}")
        if not 0 < self.target < self.jump:
            raise ParameterError("step", "need 0 < target < jump")


# --------------------------------------------------------------------------- results
@dataclass
class BranchPoint:
    """One solved point of a branch (order parameters in ``module.ORDER_PARAMETERS`` order).

    ``psi_y = dPhi/dalpha`` at the saddle point (envelope theorem), used to interpolate
    ``Phi`` by cubic Hermite splines between solved points. ``step_error`` is the relative
    distance from the warm start (extrapolation) to the converged state.
    """

    alpha: float
    x: np.ndarray
    order: dict[str, float]
    eps_g: float
    eps_g_error: float
    phi: float
    psi_y: float
    train_loss: float
    iterations: int
    residual: float
    quadrature_residual: float
    seconds: float
    cached: bool = False
    step_error: float = float("nan")

    @classmethod
    def from_fixed_point(cls, fp: FixedPoint) -> "BranchPoint":
        return cls(alpha=float(fp.alpha), x=np.array(fp.x, dtype=float), order=dict(fp.order),
                   eps_g=float(fp.eps_g), eps_g_error=float(fp.eps_g_error), phi=float(fp.phi),
                   psi_y=float(fp.psi_y), train_loss=float(fp.train_loss), iterations=int(fp.iterations),
                   residual=float(fp.residual), quadrature_residual=float(fp.quadrature_residual),
                   seconds=float(fp.seconds))

    def to_dict(self) -> dict:
        return dict(alpha=self.alpha, x=[float(v) for v in self.x], order=dict(self.order),
                    eps_g=self.eps_g, eps_g_error=self.eps_g_error, phi=self.phi, psi_y=self.psi_y,
                    train_loss=self.train_loss, iterations=self.iterations, residual=self.residual,
                    quadrature_residual=self.quadrature_residual, seconds=self.seconds)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "BranchPoint":
        return cls(alpha=float(d["alpha"]), x=np.array(d["x"], dtype=float),
                   order={k: float(v) for k, v in d["order"].items()}, eps_g=float(d["eps_g"]),
                   eps_g_error=float(d["eps_g_error"]), phi=float(d["phi"]), psi_y=float(d["psi_y"]),
                   train_loss=float(d["train_loss"]), iterations=int(d["iterations"]),
                   residual=float(d["residual"]), quadrature_residual=float(d["quadrature_residual"]),
                   seconds=float(d["seconds"]))


@dataclass
class BranchEnd:
    """Where a followed branch stops inside the scanned range (a spinodal).

    The branch was solved at ``alpha`` but not at ``alpha_next`` (one smallest step
    further); ``reason`` is ``no-convergence``, ``inadmissible``, ``merged`` (into the
    agnostic branch), ``jump`` (the iteration converged to another solution) or
    ``no-solution`` (not even the start point was found); ``detail`` says more.
    """

    alpha: float
    alpha_next: float
    reason: str
    detail: str

    def to_dict(self) -> dict:
        return dict(alpha=self.alpha, alpha_next=self.alpha_next, reason=self.reason, detail=self.detail)


@dataclass
class BranchCurve:
    """A branch followed along ``alpha``: solved points (sorted by ``alpha``) and where it ends."""

    model: str
    branch: str
    parameters: dict[str, float]
    points: list[BranchPoint]
    ends: list[BranchEnd] = field(default_factory=list)
    alpha_start: float = float("nan")
    alpha_stop: float = float("nan")
    families: dict[str, list[int]] = field(default_factory=dict)
    stopped_early: bool = False

    def __post_init__(self):
        self.points.sort(key=lambda p: p.alpha)

    def __len__(self) -> int:
        return len(self.points)

    @property
    def alphas(self) -> np.ndarray:
        return np.array([p.alpha for p in self.points])

    @property
    def range(self) -> tuple[float, float] | None:
        """``(min alpha, max alpha)`` of the solved points, ``None`` if there are none."""
        return (self.points[0].alpha, self.points[-1].alpha) if self.points else None

    def covers(self, alpha: float) -> bool:
        r = self.range
        return r is not None and r[0] - 1e-12 <= alpha <= r[1] + 1e-12

    def values(self, name: str) -> np.ndarray:
        """Per-point values: an observable (``phi``, ``eps_g`` ...), an order parameter
        name, or a family (``q``, ``m``, ``theta``, ``V``: its first, token-1 entry)."""
        if self.points and hasattr(self.points[0], name) and name not in ("x", "order"):
            return np.array([float(getattr(p, name)) for p in self.points])
        if self.points and name in self.points[0].order:
            return np.array([p.order[name] for p in self.points])
        if name in self.families:
            i = self.families[name][0]
            return np.array([p.x[i] for p in self.points])
        raise KeyError(name)

    def insert(self, point: BranchPoint) -> None:
        for i, p in enumerate(self.points):
            if abs(p.alpha - point.alpha) <= 1e-12:
                self.points[i] = point
                return
        self.points.append(point)
        self.points.sort(key=lambda p: p.alpha)

    def point(self, alpha: float) -> BranchPoint | None:
        for p in self.points:
            if abs(p.alpha - alpha) <= 1e-12:
                return p
        return None

    def interpolate_x(self, alpha: float) -> np.ndarray:
        """Order parameters at ``alpha`` by linear interpolation between solved points."""
        a = self.alphas
        X = np.array([p.x for p in self.points])
        return np.array([np.interp(alpha, a, X[:, j]) for j in range(X.shape[1])])

    def phi_interp(self, alpha: float | np.ndarray) -> np.ndarray | float:
        """``Phi`` by cubic Hermite interpolation with ``dPhi/dalpha = Psi_y`` (inside the range)."""
        a = self.alphas
        if len(a) == 1:
            return np.full_like(np.asarray(alpha, dtype=float), self.points[0].phi)
        from scipy.interpolate import CubicHermiteSpline

        spl = CubicHermiteSpline(a, self.values("phi"), self.values("psi_y"))
        return spl(alpha)

    def interp(self, name: str, alpha: float | np.ndarray) -> np.ndarray | float:
        """Any per-point value, linearly interpolated (inside the range)."""
        return np.interp(alpha, self.alphas, self.values(name))

    @property
    def spinodals(self) -> list[float]:
        """Last solved ``alpha`` before each end of the branch."""
        return [e.alpha for e in self.ends if e.reason != "no-solution"]

    def arrays(self) -> dict[str, list[float]]:
        """JSON-ready columns: ``alpha``, the token-1 entry of each family, ``eps_g``, ``phi``..."""
        out: dict[str, list[float]] = {"alpha": self.alphas.tolist()}
        for fam in self.families:
            out[fam] = self.values(fam).tolist()
        for k in ("eps_g", "eps_g_error", "phi", "train_loss", "psi_y", "residual", "quadrature_residual"):
            out[k] = self.values(k).tolist() if self.points else []
        return out

    def to_dict(self) -> dict:
        d = self.arrays()
        d.update(branch=self.branch, ends=[e.to_dict() for e in self.ends], spinodals=self.spinodals,
                 alpha_start=self.alpha_start, alpha_stop=self.alpha_stop, stopped_early=self.stopped_early)
        return d


@dataclass
class Crossing:
    """A threshold found by root finding (``value``) or ``None`` with the ``reason``.

    ``reason`` says how it was found or why it does not exist in the scanned range;
    ``bracket`` is the interval of solved points that contained the root; ``evaluations``
    counts the root-finder's function evaluations (each one a solved point per branch).
    """

    value: float | None
    reason: str
    bracket: tuple[float, float] | None = None
    evaluations: int = 0

    def to_dict(self) -> dict:
        return dict(value=self.value, reason=self.reason,
                    bracket=list(self.bracket) if self.bracket else None, evaluations=self.evaluations)


@dataclass
class PhaseResult:
    """Everything :func:`phase_point` computes for one set of parameters."""

    model: str
    parameters: dict[str, float]
    alpha_min: float
    alpha_max: float
    curves: dict[str, BranchCurve]
    alpha_c: Crossing
    alpha_l: Crossing
    eps_lin: float
    eps_lin_error: float
    quadrature: str
    seconds: float = 0.0
    solves: int = 0
    cached: int = 0
    segments: list[tuple[float, float, str]] = field(default_factory=list)

    @property
    def omega(self) -> float | None:
        return self.parameters.get("omega")

    @property
    def spinodals(self) -> dict[str, list[float]]:
        """Branch -> the ``alpha`` where it ends strictly inside ``(alpha_min, alpha_max)``."""
        out = {}
        for b, c in self.curves.items():
            out[b] = [a for a in c.spinodals if self.alpha_min < a < self.alpha_max]
        return out

    def global_branch(self, alpha: float) -> str | None:
        """The branch of the global minimum (larger ``Phi``) at ``alpha``."""
        for a0, a1, b in self.segments:
            if a0 - 1e-12 <= alpha <= a1 + 1e-12:
                return b
        return None

    def delta_phi(self) -> tuple[np.ndarray, np.ndarray]:
        """``(alpha, Phi_pos - Phi_sem)`` on the solved ``alpha`` of both branches in their overlap.

        At an ``alpha`` solved on one branch only, the other branch's ``Phi`` comes from its
        cubic Hermite interpolant (``dPhi/dalpha = Psi_y`` is exact at every solved point).
        ``Phi_pos - Phi_sem = e_t,sem - e_t,pos``.
        """
        s, p = self.curves.get("semantic"), self.curves.get("positional")
        if not s or not p or not len(s) or not len(p):
            return np.array([]), np.array([])
        lo, hi = max(s.range[0], p.range[0]), min(s.range[1], p.range[1])
        if lo >= hi:
            return np.array([]), np.array([])
        a = np.unique(np.concatenate([s.alphas, p.alphas]))
        a = a[(a >= lo - 1e-12) & (a <= hi + 1e-12)]
        return a, np.asarray(p.phi_interp(a)) - np.asarray(s.phi_interp(a))

    def to_dict(self) -> dict:
        """The JSON contract of ``replica phase --json``."""
        return dict(
            model=self.model, parameters=dict(self.parameters), alpha_min=self.alpha_min,
            alpha_max=self.alpha_max,
            alpha_c=self.alpha_c.value, alpha_c_reason=self.alpha_c.reason,
            alpha_l=self.alpha_l.value, alpha_l_reason=self.alpha_l.reason,
            eps_lin=self.eps_lin, eps_lin_error=self.eps_lin_error,
            spinodals=self.spinodals,
            branch_ends={b: [e.to_dict() for e in c.ends] for b, c in self.curves.items()},
            global_minimum=[dict(alpha_from=a0, alpha_to=a1, branch=b) for a0, a1, b in self.segments],
            crossings=dict(alpha_c=self.alpha_c.to_dict(), alpha_l=self.alpha_l.to_dict()),
            curves={b: c.arrays() for b, c in self.curves.items()},
            quadrature=self.quadrature, seconds=self.seconds, solves=self.solves, cached=self.cached)


# --------------------------------------------------------------------------- one branch
class BranchFollower:
    """Solves points of one branch: cache, warm starts, jump / merge checks, continuation.

    Most users want :func:`follow_branch` or :func:`phase_point`; this class is what they
    share, so that root finding can solve more points on an already-followed curve.
    """

    def __init__(self, module: ModuleType, branch: str, parameters: Mapping[str, float] | None = None,
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
        # the families that distinguish this branch from the agnostic one (theta, m)
        pinned_here = set(module.BRANCHES[branch])
        pinned_all = set(module.BRANCHES.get("agnostic", ()))
        self.defining = [f for f in module.FAMILIES if f in pinned_all - pinned_here]
        self.families = {f: list(idx) for f, idx in module.FAMILIES.items()}
        rb = np.atleast_1d(np.asarray(module.rho_bar(self.solver.p), dtype=float))
        self._rho = float(np.mean(rb)) if rb.size and np.mean(rb) > 0 else 1.0

    # ---------------------------------------------------------------- cache keys
    def describe(self) -> dict:
        s = self.solver
        return dict(model=self.module.MODEL, source_hash=getattr(self.module, "SOURCE_HASH", ""),
                    generator=getattr(self.module, "GENERATOR_VERSION", ""), parameters=self.parameters,
                    branch=self.branch, quadrature=s.integrator.describe(), test_rule=s.test_rule.describe(),
                    tol=s.tol)

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
                 ) -> tuple[BranchPoint | None, str, str]:
        pt, reason, detail = self._attempt_raw(alpha, pred, last)
        if pt is None and reason != "merged" and self.defining_size(last.x) < self.steps.weak:
            # a barely-distinguished branch (|m|/sqrt(q) or |theta|/sqrt(q rho) below `weak`)
            # failing to continue: it is at the agnostic state within the numerical accuracy
            fams = "/".join(self.defining)
            return None, "merged", (f"{fams} is small (relative size {self.defining_size(last.x):.2g}) and the "
                                    f"continuation fails ({reason}): the branch merges into the agnostic one "
                                    "within the quadrature accuracy")
        return pt, reason, detail

    def _attempt_raw(self, alpha: float, pred: np.ndarray, last: BranchPoint
                     ) -> tuple[BranchPoint | None, str, str]:
        x0 = pred if self.solver._admissible(pred) else last.x
        try:
            pt = self.solve(alpha, x0, reference=pred)
        except ConvergenceError as exc:
            return None, "no-convergence", str(exc)
        except InvalidStateError as exc:
            return None, "inadmissible", str(exc)
        if self.merged(pt.x):
            fams = "/".join(self.defining)
            return None, "merged", (f"{fams} -> 0 (relative size {self.defining_size(pt.x):.1e}): "
                                    "the branch merged into the agnostic one")
        d = self.distance(pt.x, pred, last.x)
        if d > self.steps.jump:
            return None, "jump", (f"converged {d:.2f} (relative) away from the extrapolated state: "
                                  "another solution, this branch no longer exists")
        pt.step_error = d
        return pt, "", ""

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
        solutions, e.g. a strongly and a weakly positional one; the larger ``Phi`` is the one
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
                why = f"the iteration converged to {'/'.join(self.defining)} = 0 (agnostic state)"
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
            curve.ends.append(BranchEnd(float(alpha_start), float(alpha_start), "no-solution", why))
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
            if h_eff <= hmin * (1 + 1e-9):
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


# --------------------------------------------------------------------------- helpers
def _as_module(module: ModuleType | str) -> ModuleType:
    if isinstance(module, str):
        from .registry import load_module

        return load_module(module)
    return module


def _module_ref(module: ModuleType) -> tuple[str, str | None]:
    return module.__name__, getattr(module, "__file__", None)


def _module_from_ref(ref: tuple[str, str | None]) -> ModuleType:
    name, path = ref
    if name in sys.modules:
        return sys.modules[name]
    try:
        return importlib.import_module(name)
    except ImportError:
        if path is None:
            raise
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod


def _merge_parameters(omega: float | None, parameters: Mapping[str, float] | None) -> dict[str, float]:
    out = dict(parameters or {})
    if omega is not None:
        out["omega"] = float(omega)
    return out


def _require_phase_branches(module: ModuleType) -> None:
    """A phase analysis compares the semantic and positional branches: both must be declared."""
    for b in ("semantic", "positional"):
        if b not in module.BRANCHES:
            raise ParameterError("model", f"{module.MODEL} declares no {b} branch; a phase analysis needs "
                                          f"semantic and positional branches")


def _check_range(alpha_min: float, alpha_max: float) -> None:
    for name, v in (("alpha_min", alpha_min), ("alpha_max", alpha_max)):
        if not (isinstance(v, (int, float)) and math.isfinite(v)) or v <= 0:
            raise ParameterError(name.replace("_", "-"), f"must be a finite number > 0, got {v}")
    if alpha_max <= alpha_min:
        raise ParameterError("alpha-max", f"must be larger than alpha-min ({alpha_min}), got {alpha_max}")


# --------------------------------------------------------------------------- public API
def follow_branch(module: ModuleType | str, branch: str, alpha_start: float, alpha_stop: float,
                  parameters: Mapping[str, float] | None = None, *, x0: np.ndarray | None = None,
                  settings: SolverSettings | None = None, steps: StepControl | None = None,
                  cache: PointCache | None = None, progress: Callable[[str], None] | None = None,
                  stop: Callable[[BranchPoint], bool] | None = None) -> BranchCurve:
    """Follow ``branch`` from ``alpha_start`` to ``alpha_stop`` by continuation.

    Returns the solved points and, if the branch ends inside the interval, a
    :class:`BranchEnd` (the spinodal, located to within the smallest step).
    """
    module = _as_module(module)
    for name, v in (("alpha_start", alpha_start), ("alpha_stop", alpha_stop)):
        if not (isinstance(v, (int, float)) and math.isfinite(v)) or v <= 0:
            raise ParameterError(name, f"must be a finite number > 0, got {v}")
    f = BranchFollower(module, branch, parameters, settings, steps, cache, progress)
    return f.follow(alpha_start, alpha_stop, x0=x0, stop=stop)


def linear_baseline_error(module: ModuleType | str, parameters: Mapping[str, float] | None = None
                          ) -> tuple[float, float]:
    """``eps_g^lin`` of the purely positional linear model (paper Result 5.1) and its error estimate."""
    return linear_baseline(_as_module(module), parameters)


def _brent(f: Callable[[float], float], a: float, b: float, fa: float, fb: float,
           xtol: float) -> float:
    """Brent's method with known end values (saves two evaluations)."""
    from scipy.optimize import brentq

    cache = {a: fa, b: fb}

    def g(x: float) -> float:
        if x in cache:
            return cache[x]
        cache[x] = v = f(x)
        return v

    return float(brentq(g, a, b, xtol=xtol, rtol=4 * np.finfo(float).eps, maxiter=60))


class Competitor:
    """The non-semantic solution that competes with the semantic branch: the positional branch
    where it exists, and the agnostic one (``m = theta = 0``) where the positional branch has
    merged into it. ``parts`` is a priority-ordered list of ``(follower, curve)``."""

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


def find_alpha_c(sem: BranchFollower, sem_curve: BranchCurve, pos: BranchFollower, pos_curve: BranchCurve,
                 xtol: float = 1e-4, agnostic: tuple[BranchFollower, BranchCurve] | None = None) -> Crossing:
    """``alpha_c``: the first ``alpha`` where ``Phi_sem - Phi_pos`` turns from negative (positional
    global minimum) to positive, by Brent's method on points solved on both branches.

    The cubic Hermite interpolants of ``Phi`` on the followed curves only provide the bracket
    and the first guess; every value the root finder uses is a solved point. Where the
    positional branch has merged into the agnostic one, ``agnostic`` (if given) takes its place.
    If the semantic branch is already the better one where it appears (it bifurcates
    continuously, or its spinodal lies above the crossing), ``alpha_c`` is that end point.
    """
    comp = Competitor([(pos, pos_curve)] + ([agnostic] if agnostic is not None else []))
    if not len(sem_curve):
        return Crossing(None, "no semantic branch was found in the scanned range")
    if not comp.parts:
        return Crossing(None, "no positional (or agnostic) branch was found in the scanned range")
    s0, s1 = sem_curve.range
    grid = np.unique(np.concatenate([sem_curve.alphas, comp.alphas]))
    grid = np.array([a for a in grid if s0 - 1e-12 <= a <= s1 + 1e-12 and comp.covers(float(a))])
    if len(grid) < 1:
        ranges = ", ".join(f"{c.branch} on [{c.range[0]:.4g}, {c.range[1]:.4g}]" for _, c in comp.parts)
        return Crossing(None, f"the branches do not coexist: semantic solved on [{s0:.4g}, {s1:.4g}], {ranges}")
    lo, hi = float(grid[0]), float(grid[-1])
    diff = np.array([float(sem_curve.phi_interp(a)) - comp.phi_interp(float(a)) for a in grid])
    up = [i for i in range(len(grid) - 1) if diff[i] < 0 <= diff[i + 1]]
    names = {comp.name(float(a)) for a in grid}
    other = "/".join(sorted(names, key=lambda n: n != "positional"))
    if not up:
        if np.all(diff >= 0):
            end = next((e for e in sem_curve.ends if abs(e.alpha - s0) < 1e-12 and e.reason != "no-solution"), None)
            if end is not None and abs(lo - s0) < 1e-12:
                kind = ("continuous transition: the semantic branch bifurcates from the "
                        f"{comp.name(s0)} one" if end.reason == "merged" else
                        f"the semantic branch appears ({end.reason} below) already with the larger Phi")
                return Crossing(s0, f"{kind} at alpha = {s0:.6g} (located to within one smallest step)",
                                (end.alpha_next, s0))
            return Crossing(None, f"Phi_semantic > Phi_{other} on the whole overlap [{lo:.4g}, {hi:.4g}] "
                                  "of the branches: alpha_c is below it")
        if np.all(diff < 0):
            return Crossing(None, f"Phi_{other} > Phi_semantic on the whole overlap [{lo:.4g}, {hi:.4g}] "
                                  "of the branches: no transition in the scanned range")
        return Crossing(None, f"Phi_semantic - Phi_{other} only decreases through zero in the scanned range")
    i = up[0]
    a, b = float(grid[i]), float(grid[i + 1])
    evals = [0]

    def F(alpha: float) -> float:
        evals[0] += 1
        return sem.point_at(sem_curve, alpha).phi - comp.point_at(alpha).phi

    from scipy.optimize import brentq

    # first guess from the Hermite interpolants, then a tight bracket around it
    try:
        guess = float(brentq(lambda t: float(sem_curve.phi_interp(t)) - comp.phi_interp(t), a, b, xtol=1e-10))
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
            return Crossing(None, f"solved Phi_sem - Phi_{other} has no sign change on [{a:.4g}, {b:.4g}] "
                                  f"although the interpolants cross at {guess:.4g}", (a, b), evals[0])
        root = _brent(F, lo_b, hi_b, f_lo, f_hi, xtol)
    except PhaseError as exc:
        return Crossing(None, f"root refinement failed: {exc}", (a, b), evals[0])
    note = "" if len(up) == 1 else f"; {len(up) - 1} further crossing(s) in the range"
    against = comp.name(root)
    merged = "" if against == "positional" else " (the positional branch has merged into the agnostic one here)"
    return Crossing(root, f"Brent root of Phi_sem - Phi_{against} on solved points (xtol={xtol:g}){merged}{note}",
                    (lo_b, hi_b), evals[0])


def global_segments(curves: Mapping[str, BranchCurve], alpha_c: Crossing, alpha_min: float,
                    alpha_max: float, candidates: Sequence[str] = ("semantic", "positional", "agnostic")
                    ) -> list[tuple[float, float, str]]:
    """Intervals of ``alpha`` and the branch with the larger ``Phi`` there (the global minimum
    among ``candidates``). The semantic/positional switch sits at ``alpha_c``; other switches
    (a branch ends, or no ``alpha_c`` was found) at the branch end or the interpolated crossing."""
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
            if alpha_c.value is not None and a_prev <= alpha_c.value <= a and "semantic" in (prev[2], lab):
                end = start = alpha_c.value
            elif prev_ends or new_starts:
                # a branch ends or begins here: switch there (possibly leaving a gap)
                end = cs[prev[2]].range[1] if prev_ends else cs[lab].range[0]
                start = cs[lab].range[0] if new_starts else end
                end = min(end, start)
            else:
                from scipy.optimize import brentq

                def g(t):
                    return float(cs[lab].phi_interp(t) - cs[prev[2]].phi_interp(t))
                end = float(brentq(g, a_prev, a)) if g(a_prev) * g(a) < 0 else 0.5 * (a_prev + a)
                start = end
            prev[1] = end
        segs.append([start, float(a), lab])
    return [(float(a0), float(a1), b) for a0, a1, b in segs if a1 >= a0]


def find_alpha_l(followers: Mapping[str, BranchFollower], curves: Mapping[str, BranchCurve],
                 segments: Sequence[tuple[float, float, str]], eps_lin: float,
                 xtol: float = 1e-4) -> Crossing:
    """``alpha_l``: the first ``alpha`` where the global-minimum ``eps_g`` drops below ``eps_lin``.

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
                                f"branch (alpha = {a0:.6g})", (a0, a0))
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
                    root = _brent(F, ga, gb, fa, fb, xtol)
                except PhaseError as exc:
                    return Crossing(None, f"root refinement failed: {exc}", (ga, gb), evals[0])
                return Crossing(root, f"Brent root of eps_g - eps_lin on solved points of the {b} branch "
                                      f"(xtol={xtol:g})", (ga, gb), evals[0])
        prev_sign = float(np.sign(e[-1])) or 1.0
    last = segments[-1]
    return Crossing(None, f"the global-minimum eps_g stays above eps_lin = {eps_lin:.4g} up to "
                          f"alpha = {last[1]:.4g} ({last[2]} branch)")


def _follow_task(ref, branch, parameters, a_start, a_stop, settings, steps, cache_root, cache_on):
    module = _module_from_ref(ref)
    f = BranchFollower(module, branch, parameters, settings, steps, PointCache(cache_root, cache_on))
    return f.follow(a_start, a_stop), f.solves, f.cached


def phase_point(module: ModuleType | str, omega: float | None = None,
                parameters: Mapping[str, float] | None = None, *, alpha_min: float = 0.1,
                alpha_max: float = 4.0, branches: Iterable[str] = BRANCHES,
                settings: SolverSettings | None = None, steps: StepControl | None = None,
                cache: PointCache | None = None, progress: Progress | Callable[[str], None] | None = None,
                jobs: int = 1, early_stop: bool = False, xtol: float = 1e-4,
                thresholds_only: bool = False) -> PhaseResult:
    """Branches, spinodals, ``alpha_c``, ``eps_lin`` and ``alpha_l`` at one set of parameters.

    The semantic branch is followed down from ``alpha_max``, the positional and agnostic
    branches up from ``alpha_min`` (the semantic and positional branches are always
    followed). ``early_stop=True`` stops the positional continuation once its ``Phi`` is
    below the semantic one (past ``alpha_c``: enough for ``alpha_c`` and ``alpha_l``, with
    fewer solves, but the positional spinodal is then not searched for); it needs the
    semantic branch first and hence runs sequentially. The positional branch is started where
    it competes with the semantic one (at the semantic branch's lower end, taking the
    solution with the largest ``Phi`` there: the positional sector can hold several) and
    followed both ways. With ``jobs > 1`` (and no early stop) the semantic and agnostic
    branches are followed in parallel processes. Where the positional branch merges into
    the agnostic one (``m -> 0``, e.g. for a positional target a tied attention cannot
    express), the agnostic branch is followed on from there and competes in its place.
    ``thresholds_only=True``: only ``alpha_c`` and ``alpha_l``, from a few solved points
    (:func:`replica.thresholds.thresholds`; ``curves`` then hold those points, no spinodals).
    """
    if thresholds_only:
        # only alpha_c and alpha_l: a few root-finder solves (replica.thresholds), no curves
        from .thresholds import thresholds

        return thresholds(module, omega, parameters, alpha_min=alpha_min, alpha_max=alpha_max,
                          settings=settings, steps=steps, cache=cache, xtol=xtol, progress=progress)
    t0 = time.perf_counter()
    module = _as_module(module)
    _check_range(alpha_min, alpha_max)
    params = _merge_parameters(omega, parameters)
    wanted = set(branches) | {"semantic", "positional"}
    branches = [b for b in BRANCHES if b in wanted] + sorted(wanted - set(BRANCHES))
    _require_phase_branches(module)
    settings = settings or SolverSettings()
    cache = cache if cache is not None else PointCache(enabled=False)
    if isinstance(progress, Progress):
        prog = progress
        label = f"omega={params['omega']:g} " if "omega" in params else ""

        def note(msg: str) -> None:
            prog.note(label + msg)
    else:
        note = progress
    followers = {b: BranchFollower(module, b, params, settings, steps, cache, note) for b in branches}
    eps_lin, eps_lin_err = linear_baseline(module, params)
    start = {b: (alpha_max if DIRECTION.get(b, 1) < 0 else alpha_min) for b in branches}
    stop_at = {b: (alpha_min if DIRECTION.get(b, 1) < 0 else alpha_max) for b in branches}
    curves: dict[str, BranchCurve] = {}
    extra_solves = extra_cached = 0
    if jobs > 1 and not early_stop and len(branches) > 2:
        # the branches other than the positional one in parallel; the positional one (which
        # starts at the semantic branch's lower end) in this process once that is known
        others = [b for b in branches if b != "positional"]
        with _pool(min(jobs, len(others))) as pool:
            futs = {b: pool.submit(_follow_task, _module_ref(module), b, params, start[b], stop_at[b],
                                   settings, followers[b].steps, cache.root, cache.enabled) for b in others}
            curves["semantic"], s, c = futs["semantic"].result()
            extra_solves += s
            extra_cached += c
            sc = curves["semantic"]
            a_mid = min(max(alpha_min, sc.range[0]), alpha_max) if len(sc) else alpha_min
            curves["positional"] = followers["positional"].follow_both(a_mid, alpha_min, alpha_max)
            for b in others[1:]:
                curves[b], s, c = futs[b].result()
                extra_solves += s
                extra_cached += c
        curves = {b: curves[b] for b in branches}
    else:
        for b in branches:  # semantic first: the positional branch may stop once it is beaten
            stop = None
            if b == "positional" and early_stop and len(curves.get("semantic", ())):
                sc = curves["semantic"]

                def stop(pt: BranchPoint, sc=sc) -> bool:
                    return sc.covers(pt.alpha) and pt.phi < float(sc.phi_interp(pt.alpha))
            if b == "positional" and len(curves.get("semantic", ())):
                # start where it competes with the semantic branch (its lower end), then both ways
                a_mid = min(max(alpha_min, curves["semantic"].range[0]), alpha_max)
                curves[b] = followers[b].follow_both(a_mid, alpha_min, alpha_max, stop=stop)
            else:
                curves[b] = followers[b].follow(start[b], stop_at[b], stop=stop)
    # where the positional branch merged into the agnostic one (m -> 0), the agnostic branch
    # is the semantic branch's competitor: follow it on from there if it was not followed
    pc = curves["positional"]
    merge = next((e for e in pc.ends if e.reason == "no-solution"
                  or (e.reason == "merged" and e.alpha_next > e.alpha)), None)
    agnostic = None
    if merge is not None and "agnostic" in module.BRANCHES:
        a_from = merge.alpha if merge.reason == "merged" else alpha_min
        if "agnostic" not in curves or not curves["agnostic"].covers(min(alpha_max, a_from + 1e-9)):
            if "agnostic" not in followers:
                followers["agnostic"] = BranchFollower(module, "agnostic", params, settings, steps, cache, note)
            x0 = None
            if merge.reason == "merged" and len(pc):
                x0 = pc.points[-1].x.copy()
                x0[~followers["agnostic"].free] = 0.0
            stop = None
            if early_stop and len(curves["semantic"]):
                sc = curves["semantic"]

                def stop(pt: BranchPoint, sc=sc) -> bool:
                    return sc.covers(pt.alpha) and pt.phi < float(sc.phi_interp(pt.alpha))
            ag = followers["agnostic"].follow(a_from, alpha_max, x0=x0, stop=stop)
            if "agnostic" in curves:
                for p in ag.points:
                    curves["agnostic"].insert(p)
            else:
                curves["agnostic"] = ag
        if "agnostic" in curves:
            agnostic = (followers["agnostic"], curves["agnostic"])
    alpha_c = find_alpha_c(followers["semantic"], curves["semantic"], followers["positional"],
                           curves["positional"], xtol=xtol, agnostic=agnostic)
    segments = global_segments(curves, alpha_c, alpha_min, alpha_max)
    alpha_l = find_alpha_l(followers, curves, segments, eps_lin, xtol=xtol)
    quad = followers["semantic"].solver.integrator.describe()
    return PhaseResult(
        model=module.MODEL, parameters=followers["semantic"].parameters, alpha_min=float(alpha_min),
        alpha_max=float(alpha_max), curves=curves, alpha_c=alpha_c, alpha_l=alpha_l, eps_lin=eps_lin,
        eps_lin_error=eps_lin_err, quadrature=quad, seconds=time.perf_counter() - t0,
        solves=sum(f.solves for f in followers.values()) + extra_solves,
        cached=sum(f.cached for f in followers.values()) + extra_cached, segments=segments)


def _phase_task(ref, task: Mapping[str, Any], cache_root, cache_on) -> PhaseResult:
    module = _module_from_ref(ref)
    return phase_point(module, cache=PointCache(cache_root, cache_on), **task)


def _pool(jobs: int):
    # one place owns worker processes: they die with this one on SIGTERM/SIGINT (replica.workers)
    from .workers import worker_pool

    return worker_pool(jobs)


def phase_points(module: ModuleType | str, tasks: Sequence[Mapping[str, Any]], *, jobs: int = 1,
                 cache: PointCache | None = None, progress: Progress | None = None) -> list[PhaseResult]:
    """:func:`phase_point` for each task (a dict of its keyword arguments: ``omega``,
    ``parameters``, ``alpha_max``, ``early_stop`` ...), in ``jobs`` processes.

    Results come back in the order of ``tasks``; ``progress`` advances once per task.
    Each process solves its own points and shares the on-disk cache.
    """
    module = _as_module(module)
    if jobs < 1:
        raise ParameterError("jobs", f"must be >= 1, got {jobs}")
    cache = cache if cache is not None else PointCache(enabled=False)
    results: list[PhaseResult | None] = [None] * len(tasks)
    if jobs == 1 or len(tasks) <= 1:
        for i, task in enumerate(tasks):
            results[i] = phase_point(module, cache=cache, progress=progress, **task)
            if progress is not None:
                progress.advance(_summary(results[i]))
        return results  # type: ignore[return-value]
    # full-curve tasks first: they take longest
    order = sorted(range(len(tasks)), key=lambda i: bool(tasks[i].get("early_stop", False)))
    if progress is not None:
        progress.note(f"{len(tasks)} phase points on {min(jobs, len(tasks))} processes")
    with _pool(min(jobs, len(tasks))) as pool:
        futs = {pool.submit(_phase_task, _module_ref(module), dict(tasks[i]), cache.root, cache.enabled): i
                for i in order}
        for fut in cf.as_completed(futs):
            i = futs[fut]
            results[i] = fut.result()
            if progress is not None:
                progress.advance(_summary(results[i]))
    return results  # type: ignore[return-value]


def phase_diagram(module: ModuleType | str, omegas: Sequence[float],
                  parameters: Mapping[str, float] | None = None, *, jobs: int = 1,
                  cache: PointCache | None = None, progress: Progress | None = None,
                  **kwargs) -> list[PhaseResult]:
    """:func:`phase_point` at every ``omega`` (in ``jobs`` processes); results in ``omegas`` order.

    ``kwargs`` go to :func:`phase_point` (``alpha_min``, ``alpha_max``, ``settings``,
    ``branches``, ``early_stop`` ...). ``progress`` advances once per ``omega``.
    """
    tasks = [dict(kwargs, omega=float(w), parameters=dict(parameters or {})) for w in omegas]
    return phase_points(module, tasks, jobs=jobs, cache=cache, progress=progress)


def _summary(r: PhaseResult) -> str:
    def f(v):
        return "null" if v is None else f"{v:.4g}"
    w = r.parameters.get("omega")
    return (f"omega={w:g}: alpha_c={f(r.alpha_c.value)} alpha_l={f(r.alpha_l.value)} "
            f"({r.solves} solves, {r.cached} cached, {r.seconds:.0f} s)")


from .thresholds import Guess, thresholds, thresholds_diagram  # noqa: E402  (fast path, issue 9)

"""What the phase machinery returns: solved points, branch curves and their ends, crossings.

Status is carried in enums (:class:`EndReason`, :class:`CrossingStatus`), never parsed out of
the human-readable ``reason``/``detail`` strings.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import ReplicaError
from ..numeric.solver import FixedPoint


class PhaseError(ReplicaError, RuntimeError):
    """A phase computation could not be carried out (e.g. a refinement left its branch)."""


@dataclass
class BranchPoint:
    """One solved point of a branch (order parameters in ``module.ORDER_PARAMETERS`` order).

    ``psi_y = dPhi/dalpha`` at the saddle point (envelope theorem), used to interpolate
    ``Phi`` by cubic Hermite splines between solved points. ``step_error`` is the relative
    distance from the warm start (extrapolation) to the converged state. ``observables`` /
    ``observable_errors``: every declared observable (``eps_g`` first) and its error estimate.
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
    observables: dict[str, float] = field(default_factory=dict)
    observable_errors: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        if not self.observables:
            self.observables = {"eps_g": self.eps_g}
            self.observable_errors = {"eps_g": self.eps_g_error}

    @classmethod
    def from_fixed_point(cls, fp: FixedPoint) -> "BranchPoint":
        return cls(alpha=float(fp.alpha), x=np.array(fp.x, dtype=float), order=dict(fp.order),
                   eps_g=float(fp.eps_g), eps_g_error=float(fp.eps_g_error), phi=float(fp.phi),
                   psi_y=float(fp.psi_y), train_loss=float(fp.train_loss), iterations=int(fp.iterations),
                   residual=float(fp.residual), quadrature_residual=float(fp.quadrature_residual),
                   seconds=float(fp.seconds), observables=dict(fp.observables),
                   observable_errors=dict(fp.observable_errors))

    def to_dict(self) -> dict:
        return dict(alpha=self.alpha, x=[float(v) for v in self.x], order=dict(self.order),
                    eps_g=self.eps_g, eps_g_error=self.eps_g_error, phi=self.phi, psi_y=self.psi_y,
                    train_loss=self.train_loss, iterations=self.iterations, residual=self.residual,
                    quadrature_residual=self.quadrature_residual, seconds=self.seconds,
                    observables=dict(self.observables), observable_errors=dict(self.observable_errors))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "BranchPoint":
        return cls(alpha=float(d["alpha"]), x=np.array(d["x"], dtype=float),
                   order={k: float(v) for k, v in d["order"].items()}, eps_g=float(d["eps_g"]),
                   eps_g_error=float(d["eps_g_error"]), phi=float(d["phi"]), psi_y=float(d["psi_y"]),
                   train_loss=float(d["train_loss"]), iterations=int(d["iterations"]),
                   residual=float(d["residual"]), quadrature_residual=float(d["quadrature_residual"]),
                   seconds=float(d["seconds"]),
                   observables={k: float(v) for k, v in d.get("observables", {}).items()},
                   observable_errors={k: float(v) for k, v in d.get("observable_errors", {}).items()})


class EndReason(str, enum.Enum):
    """Why a followed branch stops (the value is what JSON and the text output show)."""

    NO_CONVERGENCE = "no-convergence"   # the iteration no longer converges
    INADMISSIBLE = "inadmissible"       # the state leaves the admissible domain
    MERGED = "merged"                   # the branch merged into the one it merges into
    JUMP = "jump"                       # the iteration converged to another solution
    NO_SOLUTION = "no-solution"         # not even the start point was found
    ITERATION_BUDGET = "iteration-budget"  # the solve ran out of --max-iter: unresolved, not a branch end

    @property
    def resolved(self) -> bool:
        """Whether an end of this kind is a property of the equations (a spinodal, a merge): not one
        where the solver gave up on its iteration budget, nor a start never found."""
        return self not in (EndReason.NO_SOLUTION, EndReason.ITERATION_BUDGET)

    def __str__(self) -> str:
        return self.value


@dataclass
class BranchEnd:
    """Where a followed branch stops inside the scanned range (a spinodal).

    The branch was solved at ``alpha`` but not at ``alpha_next`` (one smallest step
    further); ``reason`` says why (:class:`EndReason`), ``detail`` says more.
    """

    alpha: float
    alpha_next: float
    reason: EndReason
    detail: str

    def __post_init__(self):
        self.reason = EndReason(self.reason)

    def to_dict(self) -> dict:
        return dict(alpha=self.alpha, alpha_next=self.alpha_next, reason=self.reason.value, detail=self.detail)


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
        """Per-point values: a point field (``phi``, ``eps_g`` ...), a declared observable (or
        ``<observable>_error``), an order parameter name, or a family (``q``, ``m``, ``theta``,
        ``V``: its first, token-1 entry)."""
        if self.points and hasattr(self.points[0], name) and name not in ("x", "order"):
            return np.array([float(getattr(p, name)) for p in self.points])
        if self.points and name in self.points[0].observables:
            return np.array([p.observables[name] for p in self.points])
        if self.points and name.endswith("_error") and name[:-6] in self.points[0].observable_errors:
            return np.array([p.observable_errors[name[:-6]] for p in self.points])
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
        from scipy.interpolate import CubicHermiteSpline  # scipy.interpolate: 0.2 s, only when needed

        spl = CubicHermiteSpline(a, self.values("phi"), self.values("psi_y"))
        return spl(alpha)

    def interp(self, name: str, alpha: float | np.ndarray) -> np.ndarray | float:
        """Any per-point value, linearly interpolated (inside the range)."""
        return np.interp(alpha, self.alphas, self.values(name))

    @property
    def spinodals(self) -> list[float]:
        """Last solved ``alpha`` before each end of the branch."""
        return [e.alpha for e in self.ends if e.reason.resolved]

    @property
    def unresolved_ends(self) -> list["BranchEnd"]:
        """Ends where the continuation stopped only because a solve ran out of its iteration budget:
        not spinodals (a derived quantity built on an unconverged solve is not a number)."""
        return [e for e in self.ends if e.reason is EndReason.ITERATION_BUDGET]

    def arrays(self) -> dict[str, list[float]]:
        """JSON-ready columns: ``alpha``, the token-1 entry of each family, every observable and
        its error (``eps_g``, ``eps_g_error`` ...), ``phi``, ``train_loss``, ``psi_y``..."""
        out: dict[str, list[float]] = {"alpha": self.alphas.tolist()}
        for fam in self.families:
            out[fam] = self.values(fam).tolist()
        names = list(self.points[0].observables) if self.points else ["eps_g"]
        cols = [c for n in names for c in (n, f"{n}_error")]
        for k in cols + ["phi", "train_loss", "psi_y", "residual", "quadrature_residual"]:
            out[k] = self.values(k).tolist() if self.points else []
        return out

    def to_dict(self) -> dict:
        d = self.arrays()
        d.update(branch=self.branch, ends=[e.to_dict() for e in self.ends], spinodals=self.spinodals,
                 alpha_start=self.alpha_start, alpha_stop=self.alpha_stop, stopped_early=self.stopped_early)
        return d


class CrossingStatus(str, enum.Enum):
    """How a threshold was obtained, or why there is none."""

    ROOT = "root"              # a root of the difference, refined on solved points
    BRANCH_END = "branch-end"  # where a branch appears or ends (e.g. a continuous transition)
    SWITCH = "switch"          # the test error jumps across the baseline where the global minimum switches
    NONE = "none"              # no crossing in the scanned range (``reason`` says why)
    FAILED = "failed"          # the root refinement failed

    def __str__(self) -> str:
        return self.value


@dataclass
class Crossing:
    """A threshold found by root finding (``value``) or ``None`` with the ``reason``.

    ``status`` says how it was found (:class:`CrossingStatus`); ``reason`` says the same in
    words (and why it does not exist in the scanned range); ``bracket`` is the interval of
    solved points that contained the root; ``evaluations`` counts the root-finder's function
    evaluations (each one a solved point per branch); ``retries`` the earlier attempts whose
    failure led to this result (cold restart, continuation fallback), in order.
    """

    value: float | None
    reason: str
    bracket: tuple[float, float] | None = None
    evaluations: int = 0
    status: CrossingStatus | None = None
    retries: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.status is None:
            self.status = CrossingStatus.NONE if self.value is None else CrossingStatus.ROOT
        self.status = CrossingStatus(self.status)

    @property
    def is_root(self) -> bool:
        """Whether the value is a root refined on solved points (not a branch end or switch)."""
        return self.value is not None and self.status is CrossingStatus.ROOT

    def to_dict(self) -> dict:
        return dict(value=self.value, reason=self.reason, status=self.status.value,
                    bracket=list(self.bracket) if self.bracket else None, evaluations=self.evaluations,
                    retries=list(self.retries))


@dataclass
class PhaseResult:
    """Everything :func:`replica.phase.phase_point` computes for one set of parameters.

    ``pair``: ``(high, low)``, the branches compared (``alpha_c`` is where ``Phi_high - Phi_low``
    turns positive); ``baseline``: the kind of the baseline ``eps_lin`` the global-minimum test
    error crosses at ``alpha_l`` (None if the model declares none); ``label``: a short name of
    the point for progress lines and summaries (e.g. ``omega=0.3``).
    """

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
    pair: tuple[str, str] = ("", "")
    baseline: str | None = None
    label: str = ""
    #: the specialisation threshold of a model with exchangeable units (replica.phase.specialisation)
    alpha_spec: Crossing | None = None

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
        """``(alpha, Phi_low - Phi_high)`` on the solved ``alpha`` of both branches in their overlap.

        At an ``alpha`` solved on one branch only, the other branch's ``Phi`` comes from its
        cubic Hermite interpolant (``dPhi/dalpha = Psi_y`` is exact at every solved point).
        ``Phi_low - Phi_high = e_t,high - e_t,low``.
        """
        s, p = self.curves.get(self.pair[0]), self.curves.get(self.pair[1])
        if not s or not p or not len(s) or not len(p):
            return np.array([]), np.array([])
        lo, hi = max(s.range[0], p.range[0]), min(s.range[1], p.range[1])
        if lo >= hi:
            return np.array([]), np.array([])
        a = np.unique(np.concatenate([s.alphas, p.alphas]))
        a = a[(a >= lo - 1e-12) & (a <= hi + 1e-12)]
        return a, np.asarray(p.phi_interp(a)) - np.asarray(s.phi_interp(a))

    def summary(self) -> str:
        """One line: the label, both thresholds and the work done."""
        def f(v):
            return "null" if v is None else f"{v:.4g}"
        head = f"{self.label}: " if self.label else ""
        return (f"{head}alpha_c={f(self.alpha_c.value)} alpha_l={f(self.alpha_l.value)} "
                f"({self.solves} solves, {self.cached} cached, {self.seconds:.0f} s)")

    def unresolved(self) -> str | None:
        """Where a branch stopped only on the solver's iteration budget (``EndReason.ITERATION_BUDGET``),
        in words, or None: those places are not spinodals, and a "no transition" or "below the range"
        that rests on them is not a finding."""
        parts = [f"{b} at alpha = {e.alpha_next:.6g}" for b, c in self.curves.items() for e in c.unresolved_ends
                 if self.alpha_min <= e.alpha_next <= self.alpha_max]
        if not parts:
            return None
        return ("the continuation stopped on the iteration budget (--max-iter), not at a branch end, on "
                + ", ".join(parts) + ": raise --max-iter")

    def to_dict(self) -> dict:
        """The JSON contract of ``replica phase --json``."""
        cut = self.unresolved()

        def why(crossing) -> str:
            return crossing.reason if crossing.value is not None or cut is None else f"{crossing.reason}; but {cut}"

        extra = {} if cut is None else {"spinodals_reason": f"listed only where resolved; {cut}"}
        return dict(
            model=self.model, parameters=dict(self.parameters), alpha_min=self.alpha_min,
            alpha_max=self.alpha_max, pair=list(self.pair), baseline=self.baseline,
            alpha_c=self.alpha_c.value, alpha_c_reason=why(self.alpha_c),
            alpha_l=self.alpha_l.value, alpha_l_reason=why(self.alpha_l),
            alpha_spec=None if self.alpha_spec is None else self.alpha_spec.value,
            alpha_spec_reason=("not computed" if self.alpha_spec is None else why(self.alpha_spec)),
            eps_lin=self.eps_lin, eps_lin_error=self.eps_lin_error,
            spinodals=self.spinodals, **extra,
            branch_ends={b: [e.to_dict() for e in c.ends] for b, c in self.curves.items()},
            global_minimum=[dict(alpha_from=a0, alpha_to=a1, branch=b) for a0, a1, b in self.segments],
            crossings=dict(alpha_c=self.alpha_c.to_dict(), alpha_l=self.alpha_l.to_dict(),
                           **({} if self.alpha_spec is None else {"alpha_spec": self.alpha_spec.to_dict()})),
            curves={b: c.arrays() for b, c in self.curves.items()},
            quadrature=self.quadrature, seconds=self.seconds, solves=self.solves, cached=self.cached)

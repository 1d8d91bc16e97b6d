"""Bayes-optimal branches and thresholds of any declared model: ``alpha_WR``, ``alpha_alg``, ``alpha_IT``, ``alpha_spec``.

On the Nishimori line (:mod:`replica.numeric.bayes`) the state evolution has two starts: *uninformed*
(``q`` near 0: the state AMP reaches from a random start) and *informed* (``q`` near ``rho``). Their
fixed points define

* ``alpha_wr`` -- where the uninformative fixed point ``q = 0`` becomes linearly unstable: the map is
  ``q -> alpha M q + O(q^2)`` near it (``M`` the linear response of the input side times that of the
  output side, by finite differences with a Richardson step, at ``alpha = 1``), so
  ``alpha_wr = 1 / lambda_max(M)`` exactly. ``null`` where ``q = 0`` is not a fixed point (the labels
  correlate with the teacher's fields at zero overlap, ``E[y h*] != 0``: the overlap is positive at every
  ``alpha > 0``, weak recovery needs no threshold);
* ``alpha_alg`` -- where the uninformed branch jumps: bisection on whether the uninformed start still
  reaches a fixed point distinct from the informed one;
* ``alpha_it`` -- where the free entropies of the two branches cross (``Phi_informed = Phi_uninformed``,
  Brent's method), inside the interval where both exist;
* ``alpha_spec`` -- for a model with permutable teacher units (a committee: the label law invariant under
  permutations of the teacher's fields, the prior i.i.d.), where the unit-symmetric (unspecialised)
  fixed point ``q = c 1 1^T`` becomes linearly unstable towards specialisation ``q_d (I - 1 1^T / K)``: the
  eigenvalue ``lambda_spec = d q_d' / d q_d`` at ``q_d = 0`` crosses 1.

The unit-symmetric ansatz here is the Bayes-optimal one (one overlap ``c`` on the Nishimori line); a
threshold that does not exist in ``[alpha_min, alpha_max]`` is ``None`` with the reason. Every threshold
has an error bar: the root finder's bracket plus the shift of the threshold when its last evaluations are
repeated on the refined quadrature (:meth:`replica.numeric.bayes.BayesPlan.refined`).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import ConvergenceError, ParameterError
from ..numeric.bayes import BayesPoint, BayesSolver, EPS_START, upper_entries

#: two fixed points are the same branch when their overlaps differ by less than this (times rho)
SAME = 1e-7
#: the bisection of alpha_alg and the root of alpha_it stop at this relative bracket
XTOL = 1e-6


@dataclass
class BayesThresholds:
    """The thresholds (``None`` with a reason where one does not exist), their error bars, and the branch
    curves that located them."""

    model: str
    parameters: dict[str, float]
    alpha_range: tuple[float, float]
    values: dict[str, float | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)
    curves: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seconds: float = 0.0
    permutable: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``replica phase --bayes`` (``<key>_reason`` beside every ``null``)."""
        out: dict[str, Any] = {"model": self.model, "mode": "bayes", "parameters": self.parameters,
                               "alpha_min": self.alpha_range[0], "alpha_max": self.alpha_range[1]}
        keys = ["alpha_wr", "alpha_alg", "alpha_it"] + (["alpha_spec"] if self.permutable else [])
        for k in keys:
            out[k] = self.values.get(k)
            if out[k] is None:
                out[f"{k}_reason"] = self.reasons.get(k, "not computed")
        out["errors"] = {k: v for k, v in self.errors.items() if self.values.get(k) is not None}
        out["curves"] = self.curves
        out["seconds"] = self.seconds
        return out


# --------------------------------------------------------------------------- weak recovery
def uninformative(solver: BayesSolver, scale: float = 1e-11) -> bool:
    """Whether ``q = 0`` is a fixed point: the prior has mean zero and the output side gives ``qhat = 0``
    there."""
    if abs(solver.prior.mean) > 1e-12 * math.sqrt(solver.rho):
        return False
    K = solver.K
    en = solver.output.energetic(np.zeros((K, K)), solver.rho * np.eye(K))
    return float(np.max(np.abs(en.qhat1))) * solver.rho <= scale


def _basis(K: int) -> list[np.ndarray]:
    """Symmetric positive semi-definite directions spanning the symmetric ``K x K`` matrices:
    ``e_i e_i^T`` and ``(e_i + e_j)(e_i + e_j)^T``."""
    out = []
    for i in range(K):
        for j in range(i, K):
            v = np.zeros(K)
            v[i] += 1.0
            if j != i:
                v[j] += 1.0
            out.append(np.outer(v, v))
    return out


def weak_recovery_operator(solver: BayesSolver, h: float = 1e-4) -> tuple[np.ndarray, float]:
    """``M`` (on the independent entries) of ``q -> alpha M q`` near ``q = 0`` at ``alpha = 1``, and the
    estimate of its finite-difference error (the difference between steps ``h`` and ``2h``, Richardson)."""
    K, rho = solver.K, solver.rho
    basis = _basis(K)

    def response(step: float) -> np.ndarray:
        cols = []
        for D in basis:
            q = step * rho * D
            en = solver.output.energetic(q, rho * np.eye(K) - q)
            A = (en.qhat1 + en.qhat1.T) / 2
            ent = solver.prior.entropic(A)
            cols.append(upper_entries((ent.q + ent.q.T) / 2) / (step * rho))
        # columns are the images of the directions; express them on the entry basis
        P = np.array([upper_entries(D) for D in basis]).T
        return np.array(cols).T @ np.linalg.inv(P)

    m1, m2 = response(h), response(2 * h)
    M = 2 * m1 - m2
    return M, float(np.max(np.abs(m1 - m2)))


def alpha_wr(solver: BayesSolver) -> tuple[float | None, float | None, str | None]:
    """``(alpha_wr, bar, reason)`` (see the module docstring)."""
    if not uninformative(solver):
        why = ("q = 0 is not a fixed point: " + ("the prior has a non-zero mean" if abs(solver.prior.mean) > 0 else
               "the labels correlate with the teacher's fields at zero overlap (E[y h*] != 0)")
               + ", so the overlap is positive at every alpha > 0 and weak recovery needs no threshold")
        return None, None, why
    M, fd = weak_recovery_operator(solver)
    fine = weak_recovery_operator(solver.with_plan(solver.plan.refined()))[0]
    lam = float(np.max(np.real(np.linalg.eigvals(M))))
    lam_fine = float(np.max(np.real(np.linalg.eigvals(fine))))
    if not lam_fine > 0:
        return None, None, "the uninformative fixed point is stable at every alpha (its linear response vanishes)"
    value = 1.0 / lam_fine
    bar = abs(1.0 / lam_fine - 1.0 / lam) + fd / lam_fine ** 2 + 1e-14 * value
    return value, bar, None


# --------------------------------------------------------------------------- the two branches
def _same(a: BayesPoint, b: BayesPoint) -> bool:
    return float(np.max(np.abs(a.q - b.q))) <= SAME * a.rho


def _solve(solver: BayesSolver, alpha: float, branch: str, start=None) -> BayesPoint | None:
    try:
        return solver.solve(alpha, branch, start=start)
    except ConvergenceError:
        return None


def _curve_point(p: BayesPoint) -> dict[str, Any]:
    out = {"alpha": p.alpha, "free_entropy": p.free_entropy, "mmse": float(np.trace(p.mmse)) / p.q.shape[0],
           "q": float(np.trace(p.q)) / p.q.shape[0]}
    for k in ("eps_g", "classification_error"):
        if getattr(p, k) is not None:
            out[k] = getattr(p, k)
    return out


def _bisect_jump(solver: BayesSolver, lo: float, hi: float, xtol: float) -> tuple[float, float]:
    """``(alpha, half-width)`` of the jump of the uninformed branch in ``(lo, hi)``: ``lo`` has an uninformed
    fixed point distinct from the informed one, ``hi`` none."""
    below = _solve(solver, lo, "uninformed")
    while hi - lo > xtol * hi:
        mid = 0.5 * (lo + hi)
        u = _solve(solver, mid, "uninformed", start=_seeded(below) if below is not None else None)
        i = _solve(solver, mid, "informed")
        jumped = u is None or i is None or _same(u, i)
        if jumped:
            hi = mid
        else:
            lo, below = mid, u
    return 0.5 * (lo + hi), 0.5 * (hi - lo)


def input_inverse(solver: BayesSolver, q: float) -> float:
    """``qhat`` with ``q = E f_a^2`` at ``qhat`` (one teacher field; the input side is increasing in ``qhat``)."""
    from scipy.optimize import brentq

    rho = solver.rho

    def f(u: float) -> float:
        return float(solver.prior.entropic(np.array([[math.exp(u)]])).q[0, 0]) / rho - q / rho

    lo, hi = -40.0, 2.0
    while f(hi) < 0:
        lo, hi = hi, hi + 4.0
        if hi > 700:
            return float("inf")
    if f(lo) > 0:
        return 0.0
    return math.exp(brentq(f, lo, hi, xtol=1e-13, rtol=1e-15))


def alpha_of_q(solver: BayesSolver, q: float) -> float:
    """The ``alpha`` at which ``q`` is a fixed point (one teacher field): ``qhat = alpha qhat1(q)`` is linear in
    ``alpha``, so ``alpha = qhat(q) / qhat1(q)`` with ``qhat(q)`` the input side's inverse."""
    rho = solver.rho
    en = solver.output.energetic(np.array([[q]]), np.array([[rho - q]]))
    return input_inverse(solver, q) / float(en.qhat1[0, 0])


def fold(solver: BayesSolver, points: int = 96) -> tuple[float, float] | None:
    """``(alpha_alg, q at the fold)`` of one teacher field: the first local maximum of ``alpha(q)`` along the
    branch from ``q = 0`` (where the uninformed fixed point ceases to exist), ``None`` if ``alpha(q)`` increases
    up to ``q = rho``."""
    from scipy.optimize import minimize_scalar

    rho = solver.rho
    us = np.linspace(-9.0, 13.0, points)
    qs = rho / (1.0 + np.exp(-us))
    alphas = np.array([alpha_of_q(solver, float(q)) for q in qs])
    for k in range(1, points - 1):
        if alphas[k] >= alphas[k - 1] and alphas[k] > alphas[k + 1]:
            res = minimize_scalar(lambda u: -alpha_of_q(solver, rho / (1.0 + math.exp(-u))),
                                  bracket=(us[k - 1], us[k], us[k + 1]), tol=1e-10)
            return float(-res.fun), rho / (1.0 + math.exp(-res.x))
    return None


def thresholds(solver: BayesSolver, alpha_min: float = 0.05, alpha_max: float = 5.0, points: int = 24,
               progress: Callable[[str], None] | None = None) -> BayesThresholds:
    """Every Bayes-optimal threshold of the solver's model in ``[alpha_min, alpha_max]`` (module docstring)."""
    if not (0 < alpha_min < alpha_max and math.isfinite(alpha_max)):
        raise ParameterError("alpha", f"need 0 < alpha_min < alpha_max, got [{alpha_min}, {alpha_max}]")
    t0 = time.perf_counter()
    say = progress or (lambda m: None)
    out = BayesThresholds(solver.bm.MODEL, dict(solver.parameters), (alpha_min, alpha_max))
    fine = solver.with_plan(solver.plan.refined())
    say("alpha_wr: the linear response at q = 0")
    v, bar, why = alpha_wr(solver)
    out.values["alpha_wr"] = v
    if why:
        out.reasons["alpha_wr"] = why
    else:
        out.errors["alpha_wr"] = bar
    # the two branches on a grid (geometric: the transitions of the canon sit at alpha ~ 1)
    grid = [float(a) for a in np.geomspace(alpha_min, alpha_max, points)]
    unin, inf = [], []
    for k, a in enumerate(grid):
        say(f"branches: alpha = {a:.4g} ({k + 1}/{points})")
        unin.append(_solve(solver, a, "uninformed", start=_warm(unin)))
        inf.append(_solve(solver, a, "informed"))
    out.curves = {"uninformed": [_curve_point(p) for p in unin if p is not None],
                  "informed": [_curve_point(p) for p in inf if p is not None]}
    distinct = [u is not None and i is not None and not _same(u, i) for u, i in zip(unin, inf)]
    if not any(distinct):
        why = (f"one fixed point at every alpha in [{alpha_min:g}, {alpha_max:g}]: the uninformed and informed starts "
               "reach the same state, no first-order transition")
        for k in ("alpha_alg", "alpha_it"):
            out.values[k], out.reasons[k] = None, why
    else:
        last = max(k for k, d in enumerate(distinct) if d)
        if last == points - 1:
            out.values["alpha_alg"] = None
            out.reasons["alpha_alg"] = (f"the uninformed branch does not jump up to alpha_max = {alpha_max:g}; "
                                        "raise --alpha-max")
        else:
            say("alpha_alg: where the uninformed branch ends")
            if solver.K == 1:
                work = fold(solver)
                if work is None:  # the jump is not a fold of alpha(q): bisect on it
                    a_alg, half = _bisect_jump(solver, grid[last], grid[last + 1], XTOL)
                    out.values["alpha_alg"], out.errors["alpha_alg"] = a_alg, half
                else:
                    a_alg, q_fold = work
                    a_fine = alpha_of_q(fine, q_fold)  # alpha(q) is stationary there: its quadrature shift
                    out.values["alpha_alg"] = a_fine
                    out.errors["alpha_alg"] = abs(a_fine - a_alg) + 1e-9 * a_alg
            else:
                a_alg, half = _bisect_jump(solver, grid[last], grid[last + 1], XTOL)
                lo_f, hi_f = a_alg - 4 * half, a_alg + 4 * half
                a_fine, half_f = (_bisect_jump(fine, lo_f, hi_f, XTOL) if _check_bracket(fine, lo_f, hi_f)
                                  else (a_alg, 0.0))
                out.values["alpha_alg"] = a_fine
                out.errors["alpha_alg"] = abs(a_fine - a_alg) + half + half_f
        say("alpha_it: the crossing of the free entropies")
        _crossing(out, solver, fine, grid, unin, inf, distinct)
    # committees: specialisation
    out.permutable = permutable(solver)
    if out.permutable:
        say("alpha_spec: the specialisation eigenvalue along the unit-symmetric branch")
        value, bar, why = alpha_spec(solver, alpha_min, alpha_max, points)
        out.values["alpha_spec"] = value
        if why:
            out.reasons["alpha_spec"] = why
        else:
            out.errors["alpha_spec"] = bar
    out.seconds = time.perf_counter() - t0
    return out


def _warm(points: list) -> tuple[np.ndarray, np.ndarray] | None:
    """The last uninformed fixed point as the next start (the branch moves continuously until it jumps), with the
    uninformed start's seed ``EPS_START rho I`` added: a committee's unspecialised state is exactly invariant,
    and the seed is what lets the iteration leave it where it has become unstable, as from a random start."""
    last = points[-1] if points else None
    return _seeded(last) if last is not None else None


def _seeded(p: BayesPoint) -> tuple[np.ndarray, np.ndarray]:
    K = p.q.shape[0]
    q = np.minimum(p.q + EPS_START * p.rho * np.eye(K), p.rho)
    return q, p.rho * np.eye(K) - q


def _crossing(out: BayesThresholds, solver: BayesSolver, fine: BayesSolver, grid, unin, inf, distinct) -> None:
    """``alpha_it``: Brent's method on ``Phi_informed - Phi_uninformed`` between grid points that bracket its
    sign change where both branches exist, then one secant step of that difference on the refined rules."""
    a_alg = out.values.get("alpha_alg")
    ks = [k for k, d in enumerate(distinct) if d]
    diffs = {k: inf[k].free_entropy - unin[k].free_entropy for k in ks}

    def diff(a: float, s: BayesSolver = solver) -> float:
        start = _warm([p for p, g in zip(unin, grid) if p is not None and g <= a and not _same(p, inf[grid.index(g)])])
        u = _solve(s, a, "uninformed", start=start)
        i = _solve(s, a, "informed")
        if u is None or i is None or _same(u, i):
            raise ConvergenceError(f"the branches do not coexist at alpha = {a:g}", [], 0)
        return i.free_entropy - u.free_entropy

    bracket = None
    if diffs[ks[0]] > 0:
        out.values["alpha_it"] = None
        out.reasons["alpha_it"] = (f"the informed branch already has the larger free entropy at alpha = {grid[ks[0]]:g}, "
                                   "where the two branches first differ: lower --alpha-min")
        return
    for k in ks:
        if diffs[k] > 0:
            bracket = (grid[k - 1], grid[k]) if k - 1 in diffs else None
            break
    if bracket is None and a_alg is not None:  # the sign change lies between the last grid point and the jump
        hi = a_alg * (1 - 1e-3)
        try:
            if diff(hi) > 0:
                bracket = (grid[ks[-1]], hi)
        except ConvergenceError:
            bracket = None
    if bracket is None:
        out.values["alpha_it"] = None
        out.reasons["alpha_it"] = "the uninformed branch keeps the larger free entropy up to its jump: no crossing"
        return
    from scipy.optimize import brentq

    a_it = float(brentq(diff, *bracket, xtol=XTOL * bracket[1]))
    d_f = diff(a_it, fine)
    slope = (diff(a_it * (1 + 1e-4), fine) - d_f) / (a_it * 1e-4)
    shift = -d_f / slope if slope != 0 else 0.0
    out.values["alpha_it"] = a_it + shift
    out.errors["alpha_it"] = abs(shift) + XTOL * a_it


def _check_bracket(solver: BayesSolver, lo: float, hi: float) -> bool:
    """Whether the uninformed branch is distinct from the informed one at ``lo`` and jumps by ``hi``."""
    u_lo, i_lo = _solve(solver, lo, "uninformed"), _solve(solver, lo, "informed")
    u_hi, i_hi = _solve(solver, hi, "uninformed"), _solve(solver, hi, "informed")
    ok_lo = u_lo is not None and i_lo is not None and not _same(u_lo, i_lo)
    ok_hi = u_hi is None or i_hi is None or _same(u_hi, i_hi)
    return ok_lo and ok_hi


# --------------------------------------------------------------------------- specialisation
def permutable(solver: BayesSolver, trials: int = 3, seed: int = 0) -> bool:
    """Whether the model's teacher units are permutable: ``K >= 2`` and ``log Z_out(y; P omega, P V P^T)
    = log Z_out(y; omega, V)`` for every transposition ``P`` of neighbouring units, at random states (the
    prior's entries are i.i.d. by construction)."""
    K, bm = solver.K, solver.bm
    if K < 2:
        return False
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        X = rng.standard_normal((K, K))
        V = X @ X.T / K + 0.1 * np.eye(K)
        omega = rng.standard_normal((K, 4))
        labels = bm.LABEL_VALUES if bm.discrete else tuple(rng.standard_normal(2))
        for i in range(K - 1):
            P = np.eye(K)
            P[[i, i + 1]] = P[[i + 1, i]]
            for y in labels:
                yy = np.full((1, 4), float(y))
                with np.errstate(all="ignore"):
                    a = bm.output_law(omega, yy, upper_entries(V), solver.p)[0]
                    b = bm.output_law(P @ omega, yy, upper_entries(P @ V @ P.T), solver.p)[0]
                if not np.allclose(a, b, rtol=1e-10, atol=1e-12):
                    return False
    return True


def unit_symmetric_projector(K: int) -> Callable[[np.ndarray], np.ndarray]:
    """The projection of a ``K x K`` overlap on the unspecialised subspace ``c 1 1^T`` (the Bayes-optimal
    unit-symmetric ansatz with no specialisation)."""
    one = np.ones((K, K)) / K

    def project(q: np.ndarray) -> np.ndarray:
        return float(np.sum(q * one)) * one

    return project


def unspecialised_point(solver: BayesSolver, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The unit-symmetric fixed point ``q = c 1 1^T`` at ``alpha``: the state evolution iterated on that
    (invariant) subspace from ``c = EPS_START``."""
    K, rho = solver.K, solver.rho
    project = unit_symmetric_projector(K)
    q = EPS_START * rho * np.ones((K, K)) / K
    for _ in range(solver.max_iter):
        q_new, _, *_ = solver.step(q, rho * np.eye(K) - q, alpha)
        q_new = project(q_new)
        if np.max(np.abs(q_new - q)) <= solver.tol * rho:
            return q_new, rho * np.eye(K) - q_new
        q = q_new
    raise ConvergenceError(f"the unit-symmetric fixed point at alpha = {alpha:g} did not converge", [], solver.max_iter)


def specialisation_eigenvalue(solver: BayesSolver, alpha: float, h: float = 1e-5) -> tuple[float, float]:
    """``(lambda_spec, finite-difference error)`` at the unit-symmetric fixed point: the growth factor of a
    small specialisation ``q_d (I - 1 1^T / K)`` per step of the map (Richardson over steps ``h``, ``2h``)."""
    K, rho = solver.K, solver.rho
    q0, V0 = unspecialised_point(solver, alpha)
    D = np.eye(K) - np.ones((K, K)) / K
    norm = float(np.sum(D * D))

    def grow(step: float) -> float:
        q = q0 + step * rho * D
        q_new, *_ = solver.step(q, rho * np.eye(K) - q, alpha)
        return float(np.sum(q_new * D)) / norm / (step * rho)

    g1, g2 = grow(h), grow(2 * h)
    return 2 * g1 - g2, abs(g1 - g2)


def alpha_spec(solver: BayesSolver, alpha_min: float, alpha_max: float, points: int
               ) -> tuple[float | None, float | None, str | None]:
    """``(alpha_spec, bar, reason)``: where ``lambda_spec`` crosses 1 along the unit-symmetric branch."""
    grid = np.geomspace(alpha_min, alpha_max, points)
    prev = None
    for a in grid:
        lam, _ = specialisation_eigenvalue(solver, float(a))
        if lam > 1.0:
            if prev is None:
                return None, None, (f"the unit-symmetric fixed point is already unstable at alpha_min = {alpha_min:g}: "
                                    "lower --alpha-min")
            lo = prev

            def f(x: float, s: BayesSolver = solver) -> float:
                return specialisation_eigenvalue(s, x)[0] - 1.0

            from scipy.optimize import brentq

            a_spec = float(brentq(f, lo, float(a), xtol=XTOL * float(a)))
            fine = solver.with_plan(solver.plan.refined())
            lam_f, fd = specialisation_eigenvalue(fine, a_spec)
            lam_p = specialisation_eigenvalue(fine, a_spec * (1 + 1e-3))[0]
            slope = (lam_p - lam_f) / (a_spec * 1e-3)
            shift = -(lam_f - 1.0) / slope if slope != 0 else 0.0
            bar = abs(shift) + fd / max(abs(slope), 1e-300) + XTOL * a_spec
            return a_spec + shift, bar, None
        prev = float(a)
    return None, None, f"the unit-symmetric fixed point stays stable up to alpha_max = {alpha_max:g}: raise --alpha-max"

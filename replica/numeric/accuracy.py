"""Error bars on every reported number, and solves refined until they meet an accuracy.

An error bar here is the difference between two *fixed points*, not the residual of one
state under a second rule: the saddle point is re-solved with every average refined

* the energetic average (the integrator's ``refined()``: Gauss-Hermite ``order + order // 3``
  per axis, a finer pre-integration),
* the entropic average of a non-quadratic regularizer (its Gauss-Hermite order x 1.5: the
  integrand is kinked wherever the regularizer is, e.g. soft thresholding),
* the test-point average (``eps_g`` and the declared test observables),

warm-started from the working fixed point with its Newton Jacobian (a few map evaluations).
Before it, the inner minimum is sought from more starts (:func:`replica.numeric.integrators.extra_starts`)
at the working fixed point: one map evaluation; if no node finds a lower bracket, the map --
hence the fixed point -- is exactly unchanged and that part of the bar is 0; otherwise the point
is re-solved with the extra starts (the shift is added to the bar) and refined from there.
A re-solve one level coarser checks that the refinements converge (:func:`_convergence_guard`).
Where the argmin of the bracket jumps, :func:`jump_check` compares a tensor rule with the
jump-aware pre-integration (a second rule family): its first-order shift joins the bars, and
where it alone exceeds the accuracy the point is re-solved and refined on pre-integration.

The reported values are those of the finest solve; each bar is ``|finest - working|`` (plus
what the iteration left, :attr:`FixedPoint.iteration_error`). That bounds the error of the
reported value whenever a refinement at least halves the error (Gauss-Hermite on smooth
integrands: far more; on kinked ones algebraically, e.g. ``~ n^-4`` for soft thresholding,
x 1.5 in order divides it by ~5). The bars are checked (``tests/test_accuracy.py``)
against cases known to 1e-10: the ridge closed form and LASSO state evolution.

:func:`solve_to_accuracy` repeats the refinement until every bar is below ``accuracy``
relative, or stops -- node budget, no finer rule, ``max_levels`` -- with a note naming the
numbers whose bars stayed above it and why.
"""
from __future__ import annotations

import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import ConvergenceError, InvalidStateError, ParameterError
from . import rqmc, rule_plan
from .energetic import EnergeticAverage
from .integrators import QuadratureIntegrator, preintegration_refusal
from .solver import BRANCH_NOT_FOUND, ITERATION_SAFETY, SADDLE_NOTE, FixedPoint, Solver
from .stability import switching

#: relative accuracy a result is checked against when none is requested
DEFAULT_ACCURACY = 1e-3
#: bars below this (absolute) count as met whatever the value (values that are 0 by symmetry)
ABSOLUTE_FLOOR = 1e-12
#: a component (energetic / entropic) whose refinement moves the fixed point by less than this
#: fraction of the requested accuracy is not refined further by :func:`solve_to_accuracy`
FREEZE_FRACTION = 1e-2
#: relative round-off every bar includes: sums over ~1e5-1e6 nodes in float64 (~sqrt(N) eps)
ROUNDOFF = 1e-13


def values(fp: FixedPoint) -> dict[str, float]:
    """Every number a result reports, flat by name (:meth:`FixedPoint.values`)."""
    return fp.values()


#: a Newton correction below this (relative to the state) is round-off: no contraction measured
ROUNDOFF_STEP = 1e-12


def contraction(fp: FixedPoint, corrected: FixedPoint) -> float:
    """How much of the Newton correction a second step would still add: ``|J^{-1} g(y)| /
    |J^{-1} g(x)|`` at the corrected state ``y`` (its :attr:`FixedPoint.iteration_error`) over the
    solve's own. Near 0 with a good Jacobian; a Broyden / other-rule Jacobian can leave it at
    ~0.8 (the default logistic solve: the correction then covers a third of what the iteration
    left). 0 where the correction is at round-off, where the ratio means nothing."""
    first = np.linalg.norm(list(fp.iteration_error.values()) or [0.0])
    second = np.linalg.norm(list(corrected.iteration_error.values()) or [0.0])
    if not (math.isfinite(first) and math.isfinite(second)):
        return math.inf
    if first <= ROUNDOFF_STEP * max(np.linalg.norm(fp.x), 1e-300):
        return 0.0
    return float(second / first)


def _iteration_part(fp: FixedPoint, corrected: FixedPoint | None = None) -> dict[str, float]:
    """What the iteration left, ``ITERATION_SAFETY`` times: on every number its change at the
    Newton-corrected state ``corrected`` (:meth:`Solver.newton_corrected`) summed as a geometric
    series over the correction's :func:`contraction` ``k`` (``/ (1 - k)``: what repeated steps with
    the same Jacobian would add; nan where ``k >= 1``, when the Jacobian does not resolve what is
    left); without one, ``|J^{-1} g|`` on the order parameters and 10x its relative size on the
    derived numbers."""
    vf = values(fp)
    if corrected is not None:
        vc = values(corrected)
        k_c = contraction(fp, corrected)
        series = ITERATION_SAFETY / (1.0 - k_c) if k_c < 1 else math.nan

        def times(d: float) -> float:  # a number the correction does not move stays at 0
            return series * d if d > 0 else 0.0

        out = {k: times(abs(vc[k] - v)) if math.isfinite(vc.get(k, math.nan) - v) else 0.0 for k, v in vf.items()}
        for k, v in fp.iteration_error.items():
            t = times(v)
            out[k] = t if math.isnan(t) else max(out.get(k, 0.0), t)  # (max() would drop a nan)
        return out
    it = {k: ITERATION_SAFETY * v for k, v in fp.iteration_error.items()}
    rel = float(np.linalg.norm(list(it.values())) / max(np.linalg.norm(fp.x), 1e-300)) if it else 0.0
    out = {k: 10 * rel * abs(v) for k, v in vf.items()}
    out.update({k: float(v) for k, v in it.items()})
    return out


def bars(fine: FixedPoint, *coarser: FixedPoint, corrected: FixedPoint | None = None) -> dict[str, float]:
    """``sum |fine - c|`` over the coarser solves (each a re-solved fixed point), plus the
    iteration's part of ``fine`` (``corrected``: see :func:`_iteration_part`), by name (``nan``
    where a value is not finite)."""
    vf = values(fine)
    scale = _roundoff_scale(fine, vf)
    out = {k: v + ROUNDOFF * scale[k] for k, v in _iteration_part(fine, corrected).items()}
    for c in coarser:
        vc = values(c)
        for k, v in vf.items():
            d = abs(v - vc.get(k, float("nan")))
            if not (math.isfinite(v) and math.isfinite(vc.get(k, float("nan")))):
                d = 0.0 if (v == vc.get(k) or (math.isnan(v) and math.isnan(vc.get(k, 0.0)))) else float("nan")
            out[k] = out.get(k, 0.0) + d
    return out


def _roundoff_scale(fp: FixedPoint, vals: dict[str, float]) -> dict[str, float]:
    """What each number's round-off is relative to: its size, but for ``phi = psi_t + psi_w + alpha
    psi_y`` (and ``train_loss = -phi``) the sizes of the terms, whose round-off the sum keeps when
    they cancel (LASSO at alpha = 2: terms ~0.5, phi ~0.075)."""
    out = {k: abs(v) for k, v in vals.items()}
    terms = abs(fp.psi_t) + abs(fp.psi_w) + abs(fp.alpha) * abs(fp.psi_y)
    if math.isfinite(terms):
        for k in ("phi", "train_loss"):
            if k in out:
                out[k] = max(out[k], terms)
    return out


#: an entry of a matrix / vector order parameter or conjugate: ``q_12``, ``theta_1_21``, ``qhat_1_12``
_ENTRY = re.compile(r"^([A-Za-z]+)_[0-9_]+$")


def sizes(vals: dict[str, float]) -> dict[str, float]:
    """What "relative" means for each number: its size, but for an entry of a matrix or vector
    order parameter (or conjugate) the largest entry of that parameter (normwise relative error):
    an off-diagonal overlap that is zero by symmetry (``q_1_12 ~ 1e-10`` next to ``q_1_11 ~ 3``) is
    resolved when its bar is small against the matrix, not against its own round-off size."""
    family: dict[str, float] = {}
    for k, v in vals.items():
        m = _ENTRY.match(k)
        if m and math.isfinite(v):
            family[m.group(1)] = max(family.get(m.group(1), 0.0), abs(v))
    out = {}
    for k, v in vals.items():
        m = _ENTRY.match(k)
        out[k] = max(abs(v), family.get(m.group(1), 0.0)) if m else abs(v)
    return out


#: an order parameter or conjugate below this fraction of the largest of its kind is zero by symmetry
#: (``mhat``, ``m_1`` on a branch or model whose symmetry pins them): judged against that largest
ZERO_BY_SYMMETRY = 1e-8


def state_sizes(fp: FixedPoint, vals: dict[str, float] | None = None) -> dict[str, float]:
    """:func:`sizes`, but an order parameter (or conjugate) that is zero by symmetry -- below
    :data:`ZERO_BY_SYMMETRY` x the largest order parameter (conjugate) -- is judged against that
    largest one: its own size is round-off (``mhat ~ 3e-16``), and a bar of 1e-11 on it is not a
    "4.6e+289 relative" error but a normwise 1e-11 one."""
    vals = values(fp) if vals is None else vals
    out = sizes(vals)
    for group in (fp.order, fp.conjugates):
        big = max((abs(float(v)) for v in group.values() if math.isfinite(float(v))), default=0.0)
        for k in group:
            v = vals.get(k, math.nan)
            if math.isfinite(v) and abs(v) <= ZERO_BY_SYMMETRY * big:
                out[k] = max(out.get(k, 0.0), big)
    return out


def unresolved(fp: FixedPoint, errors: dict[str, float], accuracy: float) -> list[str]:
    """Names whose bar exceeds ``accuracy`` relative to :func:`state_sizes` (or is not finite)."""
    vals = values(fp)
    size = state_sizes(fp, vals)
    bad = []
    for k, e in errors.items():
        v = vals.get(k, float("nan"))
        if math.isnan(v) and math.isnan(e):
            continue  # a number the model does not have (e.g. psi_w in closed form is finite anyway)
        if not (math.isfinite(e) and e <= max(accuracy * size.get(k, abs(v)), ABSOLUTE_FLOOR)):
            bad.append(k)
    return bad


def _more_starts(solver: Solver, fp: FixedPoint, alpha: float) -> tuple[Solver, FixedPoint | None]:
    """The solver with one more level of prox starts, and its fixed point if the extra starts
    change the map at ``fp`` (else None: the map at ``fp``, hence the fixed point, is exactly
    ``fp``'s)."""
    if not hasattr(solver.integrator, "with_extra_starts"):
        return solver, None  # no extra starts (pre-integration repairs misses along its lines)
    try:
        more = solver.refined(energetic=False, entropic=False, test=False, starts=True)
    except ParameterError:
        return solver, None
    integ = more.integrator
    integ.last_improved = 0
    more.evaluate_map(fp.x, alpha, use_warm=False)
    if not getattr(integ, "last_improved", 0):
        return more, None
    return more, more.solve(alpha, x0=fp.x, jacobian=solver.last_jacobian)


#: the jump check's pre-integration level and the level a solve moves to (defined with the ladder's
#: plan, which names them too: replica.numeric.rule_plan)
JUMP_CHECK_LEVEL = rule_plan.JUMP_CHECK_LEVEL
JUMP_AWARE_LEVEL = rule_plan.JUMP_AWARE_LEVEL


@dataclass
class JumpCheck:
    """A tensor rule's fixed point against the jump-aware pre-integration (:func:`jump_check`).

    ``errors``: per number, ``|first-order jump-aware fixed point - fp|``; ``shift``: the norm of
    the order-parameter shift relative to the state's; ``lines``/``switch_lines``: outer lines of
    the check and those on which the global minimiser of the bracket jumps; ``solver``: the
    check's solver (its direction, estimated at this state, frozen)."""

    errors: dict[str, float]
    shift: float
    lines: int
    switch_lines: int
    solver: Solver
    jacobian: np.ndarray
    #: whether a re-solve on the check's rule can resolve what it finds (False: the local
    #: convention's randomised check, :func:`local_check`, whose shift only joins the bars)
    resolvable: bool = True
    #: what the result says about a check that did not run (:func:`switching_check`), or None
    note: str | None = None
    #: False where the bars may miss the tensor rule's error across the jumps (the check did not
    #: run and the minimiser switches): the result then does not claim its accuracy
    covers: bool = True


def jump_check(solver: Solver, fp: FixedPoint, alpha: float) -> JumpCheck | None:
    """Where the argmin of the bracket jumps (non-convex prox), compare the working tensor rule's
    fixed point ``fp`` with the jump-aware pre-integration's, to first order.

    Tensor Gauss-Hermite converges erratically across the jump set of the argmin and puts
    nodes on symmetry planes where the prox starts miss global minima (docs/explanation/quadrature.md,
    docs/reference/certified.md §1); refining it then moves the fixed point by less than its error, so
    its refinement bars under-cover. Pre-integration locates every jump on its lines and
    repairs prox misses by continuation: one map evaluation of it at ``fp`` (a different rule
    family, not a refinement), mapped through the Newton Jacobian, estimates the tensor rule's
    error where it matters. None where the check does not apply (not a tensor rule, no
    pre-integration for the model) or where no line sees a jump or a repaired miss (the
    integrand is smooth along every line: the refinements are the bar). Where the check's
    pre-integration costs more than :data:`replica.numeric.rule_plan.JUMP_CHECK_COST` x the working
    rule's points or exceeds the node budget (6-D averages), :func:`switching_check` stands in."""
    if solver.convention.local and not hasattr(solver.integrator, "correction_replicates"):
        return local_check(solver, fp, alpha)  # a plain local rule: against randomised QMC
    if solver.convention.local:
        return None  # a locally corrected rule: its base is jump-aware, its correction's bar is correction_check
    if not isinstance(solver.integrator, QuadratureIntegrator) or preintegration_refusal(solver.module) is not None:
        return None  # (Solver.jump_aware's conditions, without building the integrator)
    too_costly = rule_plan.jump_check_refusal(solver, JUMP_CHECK_LEVEL)
    if too_costly is not None:
        return switching_check(solver, fp, too_costly)
    aware = solver.jump_aware(JUMP_CHECK_LEVEL)
    if aware is None:
        return None
    x = np.asarray(fp.x, dtype=float)
    free = solver.free
    at_x = solver.map_and_numbers(x, alpha)
    aware_x = aware.map_and_numbers(x, alpha)
    if at_x is None or aware_x is None:
        return None
    stats = aware.integrator.last_stats
    if not (stats.switches or stats.corrected or stats.breaks):
        return None
    J = solver.fixed_point_jacobian(x, alpha, mapped=at_x[0])
    if J is None:
        return None
    y = x.copy()
    try:
        y[free] -= np.linalg.solve(J, (aware_x[0] - at_x[0])[free])
    except np.linalg.LinAlgError:
        return None
    at_y = solver.numbers_at(y, alpha)
    if at_y is None:
        return None
    # The jump-aware fixed point's numbers to first order: its rule at x, moved by the change
    # x -> y of the working rule's numbers (the two rules' derivatives differ at second order)
    # -- one pre-integration evaluation instead of two.
    v0, vx, va, vy = values(fp), values(at_x[1]), values(aware_x[1]), values(at_y)
    errors = {}
    for k, v in v0.items():
        e = va.get(k, math.nan) + vy.get(k, math.nan) - vx.get(k, math.nan) - v
        errors[k] = abs(e) if math.isfinite(e) else 0.0
    shift = float(np.linalg.norm((y - x)[free]) / max(np.linalg.norm(x[free]), 1e-300))
    return JumpCheck(errors=errors, shift=shift, lines=int(stats.lines), switch_lines=int(stats.switch_lines),
                     solver=aware, jacobian=J)


#: Monte-Carlo nodes of :func:`switching_check` (~1 s in 6-D: every start's local minimum per node)
SWITCHING_SAMPLES = 20_000


def switching_check(solver: Solver, fp: FixedPoint, why: str) -> JumpCheck:
    """What stands in for :func:`jump_check` where its pre-integration costs too much (``why``,
    :func:`replica.rule_plan.jump_check_refusal`: 6-D averages): whether the global minimiser of
    the bracket switches between minima at ``fp`` on :data:`SWITCHING_SAMPLES` Monte-Carlo nodes
    (:func:`replica.stability.switching`, the replicon's test). Without switching the integrand
    is smooth and the refinements are the bar, as where the check sees no jump on any line;
    with switching the refinements of a tensor rule can under-cover across the jumps
    (docs/reference/certified.md), so the result says so and does not claim its accuracy (``covers`` False).
    No error is added to the bars either way: the check's own estimate is not available."""
    sw = switching(solver.module, np.asarray(fp.x, dtype=float), solver.p, samples=SWITCHING_SAMPLES,
                   prox_tol=solver.prox_tol, backend=solver.backend)
    if sw.detected:
        note = (f"the global minimiser of the bracket switches between minima at this state ({sw.near} of "
                f"{sw.samples:,} Monte-Carlo nodes nearly degenerate) and the jump check was not run ({why}): the "
                "bars are the tensor rule's refinements, which can under-cover across the jumps, so the accuracy is "
                "not claimed")
    else:
        note = (f"the jump check was not run ({why}); the global minimiser does not switch between minima on "
                f"{sw.samples:,} Monte-Carlo nodes at this state, so the refinements give the bars")
    return JumpCheck(errors={}, shift=0.0, lines=sw.samples, switch_lines=sw.near, solver=solver, jacobian=None,
                     resolvable=False, note=note, covers=not sw.detected)


#: the local convention's check (:func:`local_check`): scrambled Sobol sets of 2^LOCAL_CHECK_LOG2 points each
LOCAL_CHECK_LOG2 = 12
LOCAL_CHECK_SCRAMBLINGS = 8
#: two-sided 99 % quantile of Student's t with LOCAL_CHECK_SCRAMBLINGS - 1 degrees of freedom: the check's
#: statistical error enters the bars at this many standard errors
LOCAL_CHECK_T = 3.5


def local_check(solver: Solver, fp: FixedPoint, alpha: float) -> JumpCheck | None:
    """The local convention's counterpart of :func:`jump_check`: the working rule's fixed point
    against randomised quasi-Monte-Carlo, to first order.

    Under the local convention the minimiser jumps where the start sits on a basin boundary, a
    set that pre-integration (built on the global minimiser's Maxwell set) does not locate. A
    randomised rule has no such bias: ``LOCAL_CHECK_SCRAMBLINGS`` independent scrambled Sobol
    sets each give an unbiased estimate of the map at ``fp``; through the Newton Jacobian, each
    estimates the working rule's fixed-point error, and the bars get ``|mean| +
    LOCAL_CHECK_T x standard error`` of those estimates (a 99 % bound, not a refinement
    difference). None where the check does not apply (a rule with labels or a teacher channel)."""
    from .integrators import QuadratureIntegrator
    from .quadrature import QuadratureRule, sobol_rqmc

    mod = solver.module
    if not isinstance(solver.integrator, QuadratureIntegrator) or mod.DISCRETE \
            or mod.WEIGHTED:
        return None
    x = np.asarray(fp.x, dtype=float)
    free = solver.free
    at_x = solver.map_and_numbers(x, alpha)
    if at_x is None:
        return None
    J = solver.fixed_point_jacobian(x, alpha, mapped=at_x[0])
    if J is None:
        return None
    dim = len(mod.GAUSSIANS)
    full = sobol_rqmc(dim, LOCAL_CHECK_LOG2, scramblings=LOCAL_CHECK_SCRAMBLINGS)
    n = 2 ** LOCAL_CHECK_LOG2
    v0 = values(fp)
    replicates = []
    for r in range(LOCAL_CHECK_SCRAMBLINGS):
        rule = QuadratureRule(full.nodes[:, r * n:(r + 1) * n], np.full(n, 1.0 / n), "sobol", LOCAL_CHECK_LOG2)
        replicates.append(solver._with_integrator(solver.integrator.with_rule(rule)))
    found = rqmc.replicate_estimates(x, alpha, at_x, J, free, replicates, solver, at_x[1])
    if found is None:
        return None
    estimates, shifts = found
    per = [{k: e.get(k, math.nan) - v for k, v in v0.items()} for e in estimates]
    errors = {}
    R = len(per)
    for k in v0:
        e = np.array([p[k] for p in per], dtype=float)
        errors[k] = (abs(float(e.mean())) + LOCAL_CHECK_T * float(e.std(ddof=1)) / math.sqrt(R)
                     if np.all(np.isfinite(e)) else 0.0)
    aware = solver.jump_aware(JUMP_AWARE_LEVEL)
    return JumpCheck(errors=errors, shift=float(np.mean(shifts)), lines=R * n, switch_lines=0,
                     solver=solver if aware is None else aware, jacobian=J, resolvable=aware is not None)


class _GivenAverage:
    """An energetic integrator that returns one given average (a replicate of a local correction)."""

    def __init__(self, avg: EnergeticAverage, dim: int):
        self.avg, self.dim = avg, dim

    def average(self, module, x, p, warm=None, multistart=True, prox_tol=1e-12) -> EnergeticAverage:
        return self.avg

    def companion(self) -> "_GivenAverage":
        return self

    def describe(self) -> str:
        return "a given energetic average"


def correction_check(solver: Solver, fp: FixedPoint, alpha: float) -> dict[str, float] | None:
    """The statistical error of a locally corrected rule's correction
    (:class:`replica.numeric.integrators.LocallyCorrectedIntegrator`), per number: the fixed point moved,
    to first order through the Newton Jacobian, by each scrambled set's correction in place of their
    mean; the bar is ``LOCAL_CHECK_T`` standard errors of the mean over the sets (a 99 % bound).
    None where the working integrator has no such correction."""
    integ = solver.integrator
    if not hasattr(integ, "correction_replicates"):
        return None
    x = np.asarray(fp.x, dtype=float)
    free, mod = solver.free, solver.module
    at_x = solver.map_and_numbers(x, alpha)
    if at_x is None:
        return None
    J = solver.fixed_point_jacobian(x, alpha, mapped=at_x[0])
    if J is None:
        return None
    base = integ.base.average(mod, x, solver.p, prox_tol=solver.prox_tol)
    reps = integ.correction_replicates(mod, x, solver.p, prox_tol=solver.prox_tol)
    # the numbers' first-order response to the small replicate shifts of the state: from the local
    # convention on the default tensor rule (a smooth map; the correction's own spread is the point)
    cheap = Solver(mod, solver.parameter_dict, None if solver.branch == "free" else solver.branch,
                   prox=solver.convention, backend=solver.backend, error_estimate=False,
                   entropic_rule=solver.entropic_rule)
    replicates = [solver._with_integrator(_GivenAverage(EnergeticAverage(base.grad + dg, base.psi_y + dpsi,
                                                                          base.state, 0, 0), integ.dim))
                  for dg, dpsi in reps]
    found = rqmc.replicate_estimates(x, alpha, at_x, J, free, replicates, cheap)
    if found is None:
        return None
    per = found[0]
    R = len(per)
    out = {}
    for k in values(at_x[1]):
        e = np.array([p.get(k, math.nan) for p in per], dtype=float)
        out[k] = LOCAL_CHECK_T * float(e.std(ddof=1)) / math.sqrt(R) if np.all(np.isfinite(e)) else math.inf
    return out


def _finish(fp: FixedPoint, errors: dict[str, float], accuracy: float, why: str | None,
            doubt: str | None = None) -> FixedPoint:
    """Attach the bars; ``doubt``: why the bars may not cover, whatever their size (the accuracy
    is then not met, and a note says why)."""
    fp.errors = errors
    fp.accuracy = float(accuracy)
    bad = unresolved(fp, errors, accuracy)
    fp.accuracy_met = not bad and doubt is None
    if doubt is not None and not bad:
        fp.notes.append(f"accuracy {accuracy:g} NOT claimed although every bar is below it: {doubt}")
    # the observable bars are the full ones (the test-rule-only estimate misses the rest)
    fp.observable_errors = {k: errors.get(k, float("nan")) for k in fp.observables}
    fp.eps_g_error = fp.observable_errors.get("eps_g", fp.eps_g_error)
    if bad:
        size = state_sizes(fp)
        worst = sorted(bad, key=lambda k: -(errors[k] / max(size[k], 1e-300)
                                             if math.isfinite(errors[k]) else math.inf))
        shown = ", ".join(f"{k} (±{errors[k]:.1e}, {errors[k] / max(size[k], 1e-300):.1e} relative)"
                          for k in worst[:6]) + (f" and {len(worst) - 6} more" if len(worst) > 6 else "")
        fp.notes.append(f"accuracy {accuracy:g} NOT met: error bars above it on {shown}"
                        + (f"; {why}" if why else "; rerun with --accuracy to refine the rules"))
    return fp


def with_error_bars(solver: Solver, fp: FixedPoint, alpha: float, accuracy: float = DEFAULT_ACCURACY
                    ) -> FixedPoint:
    """``fp`` (a fixed point of ``solver``) re-solved once on refined rules and with more prox
    starts: the refined result with :attr:`FixedPoint.errors`, ``accuracy`` and ``accuracy_met``."""
    return solve_to_accuracy(solver, fp, alpha, accuracy, max_levels=1)


def solve_to_accuracy(solver: Solver, fp: FixedPoint, alpha: float, accuracy: float = DEFAULT_ACCURACY,
                      max_levels: int = 8, progress: Callable[[str], None] | None = None,
                      beside: Callable[[FixedPoint], None] | None = None,
                      keep_rule: bool = False) -> FixedPoint:
    """Refine the rules and prox starts from ``fp`` (a fixed point of ``solver``) until every
    error bar is below ``accuracy`` relative (at most ``max_levels`` refinements).

    Returns the finest fixed point with its bars; when the accuracy is not met, ``accuracy_met``
    is False and a note names the numbers left above it and what stopped the refinement.
    ``keep_rule``: return ``fp`` itself, the fixed point of the rule asked for (``--quadrature``:
    a discretisation chosen on purpose, such as the paper code's ``d7``), with the finest
    fixed point beside it as its error: every bar is the distance to the finest value plus the
    finest value's own bar (:func:`kept_rule`).
    ``beside``: called with the ladder's finest fixed point (bars not yet attached) when the
    ladder ends before the jump check running beside it, so that the caller can start work on
    that state meanwhile; the returned fixed point is that very object unless the check sent
    the solve to the jump-aware rule.
    """
    if not (math.isfinite(accuracy) and 0 < accuracy < 1):
        raise ParameterError("accuracy", f"must be in (0, 1), got {accuracy}")
    # The jump check (one pre-integration evaluation) runs beside the refinement ladder of the
    # working rule, whose result stands unless the check sends the solve to the jump-aware rule
    # (the ladder then stops at its next level; its progress lines are held until then). The
    # check touches the working solver only through map evaluations, and its Jacobian is the last
    # solve's: where it is not (a fixed point from elsewhere) the check runs first, alone.
    say = progress if progress is not None else (lambda line: None)
    working, requested = solver, fp
    held: list[str] = []
    concurrent = getattr(solver, "_last_x", None) is not None and solver.last_jacobian is not None \
        and np.array_equal(solver._last_x, np.asarray(fp.x, dtype=float))
    # the rule asked for keeps its values: what its iteration left is measured now, by the Newton
    # correction of its own solve (the bar's fallback, 10x the state's relative residual on every
    # derived number, is 1e-7 where the correction gives 1e-9)
    requested_corrected = solver.newton_corrected(alpha) if keep_rule and concurrent else None
    if concurrent:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="replica-jump-check") as pool:
            future = pool.submit(jump_check, solver, fp, alpha)

            def switch() -> bool:
                return future.done() and future.exception() is None and _needs_jump_aware(future.result(), fp,
                                                                                           accuracy)

            def relay(line: str) -> None:
                held.append(line)
                if future.done() and not switch():  # the ladder stands: its lines go out as they come
                    for h in held:
                        say(h)
                    held.clear()

            ladder = _ladder(solver, fp, alpha, accuracy, max_levels, relay, switch)
            if beside is not None and ladder is not None and not future.done():
                beside(ladder[0])
            check = future.result()
    else:
        check = jump_check(solver, fp, alpha)
        ladder = None
    jump_notes: list[str] = []
    if _needs_jump_aware(check, fp, accuracy):
        # The tensor rule's error across the jumps of the argmin alone exceeds the accuracy:
        # re-solve on the jump-aware rule (along the check's direction), whose refinements
        # converge, and refine that instead.
        direction = getattr(check.solver.integrator, "direction", None)
        aware = solver.jump_aware(JUMP_AWARE_LEVEL, direction="auto" if direction is None else direction)
        try:
            moved = aware.solve(alpha, x0=fp.x, jacobian=check.jacobian)
        except (ConvergenceError, InvalidStateError) as exc:
            jump_notes.append(f"the jump-aware re-solve failed ({exc}); the bars include the jump check's shift")
        else:
            if solver.convention.local:
                jump_notes.append(
                    f"under the local prox convention the randomised check ({check.lines} scrambled Sobol points) put "
                    f"the tensor rule's fixed point {check.shift:.1e} (relative) off: re-solved as the jump-aware "
                    "pre-integration's global average plus the local correction on randomised points, whose "
                    "refinements and spread give the bars")
            else:
                jump_notes.append(
                    f"the global minimiser of the bracket jumps on {check.switch_lines} of {check.lines} lines at "
                    f"this state and the tensor rule's fixed point is {check.shift:.1e} (relative) off the jump-aware "
                    f"one: re-solved with the jump-aware pre-integration, whose refinements give the bars")
            moved.notes = [n for n in _carried(fp.notes) if n not in moved.notes] + moved.notes
            solver, fp, check, ladder = aware, moved, None, None
            held.clear()
    if ladder is None:
        held.clear()
    for line in held:  # the lines of the ladder that stands
        say(line)
    if ladder is None:  # not run yet, stopped for the jump-aware rule whose re-solve failed, or discarded
        ladder = _ladder(solver, fp, alpha, accuracy, max_levels, say, lambda: False)
    best, errors, why, erratic, best_solver = ladder
    # A randomised rule: the spread of the scramblings of the rule whose values are reported (the
    # finest), which its refinement, sharing its points, misses (replica.numeric.rqmc). Not the working
    # rule's: a few points per scrambling are far from the regime where a first-order spread holds.
    spread = rqmc.scramble_errors(best_solver, best, alpha) if solver is working else None
    if spread is not None:
        errors = _add(errors, spread)
    doubt = None
    if check is not None:
        # the tensor rule's error across the jumps (first order), on top of its refinements
        errors = _add(errors, check.errors)
        if check.note is not None:
            best.notes.append(check.note)
        if not check.covers:
            doubt = "the jump check did not run where the minimiser switches"
        if not check.resolvable and unresolved(best, check.errors, accuracy):
            best.notes.append(f"under the local prox convention the randomised check ({check.lines} scrambled Sobol "
                              f"points) puts the working rule {check.shift:.1e} (relative) off: its estimate and "
                              "statistical error are in the bars; a finer rule (--quadrature gh:N) lowers the first")
    corr = correction_check(solver, best, alpha)
    if corr is not None:
        # the local correction's statistical error (its points are the same at every level)
        errors = _add(errors, corr)
    best.notes.extend(jump_notes)
    if erratic:
        best.notes.append("the rules are not in their asymptotic regime on " + ", ".join(erratic[:6])
                          + " (a refinement did not halve the previous difference): their bars are the larger "
                            "of the last two differences")
    if keep_rule and best is not requested:  # (also where the jump check moved the solve to another rule)
        return kept_rule(requested, best, errors, accuracy, why, doubt, corrected=requested_corrected)
    return _finish(best, errors, accuracy, why, doubt)


def kept_rule(fp: FixedPoint, finest: FixedPoint, errors: dict[str, float], accuracy: float,
              why: str | None = None, doubt: str | None = None,
              corrected: FixedPoint | None = None) -> FixedPoint:
    """``fp`` (the rule asked for) with bars ``|fp - finest| + errors`` (``errors``: the finest
    fixed point's bars) plus what ``fp``'s iteration left (``corrected``: its solve's Newton-corrected
    numbers, see :func:`bars`), the finest fixed point's notes and one saying where its values are."""
    fp.notes = [n for n in fp.notes if n not in finest.notes] + [n for n in _carried(finest.notes) if n not in fp.notes]
    shown = ", ".join(f"{k} = {finest.order[k]:.6g}" for k in list(finest.order)[:4])
    fp.notes.append(f"the values are those of the rule asked for ({fp.quadrature}); the refined rules' fixed point "
                    f"({finest.quadrature}: {shown}) is beside them as their error: each bar is the distance to it "
                    "plus its own bar")
    return _finish(fp, _add(errors, bars(fp, finest, corrected=corrected)), accuracy, why, doubt)


def _needs_jump_aware(check: JumpCheck | None, fp: FixedPoint, accuracy: float) -> bool:
    """Whether the jump check's shift alone exceeds the accuracy (the solve moves to the jump-aware rule)."""
    return check is not None and check.resolvable and bool(unresolved(fp, check.errors, accuracy))


def _ladder(solver: Solver, fp: FixedPoint, alpha: float, accuracy: float, max_levels: int,
            progress: Callable[[str], None], stop: Callable[[], bool]
            ) -> tuple[FixedPoint, dict[str, float], str | None, list[str], Solver] | None:
    """The refinement ladder of :func:`solve_to_accuracy` on ``solver``'s rules from ``fp``: the
    finest fixed point, its bars, why it stopped short (or None), the numbers whose refinements
    were erratic and the finest fixed point's solver; None where ``stop()`` turned true before a
    level after the first."""
    work_solver, work = solver, fp
    best_solver = solver
    refine = {"energetic": True, "entropic": solver.entropic_refinable}
    why = None
    best, errors = fp, bars(fp)
    # one level coarser than the working rule: the convergence check of the first refinement
    # (the scout's fixed point where the solve started on that very rule, else re-solved)
    try:
        coarse = solver.coarsened()
        prev = fp.scouted
        if prev is None or (prev.rules, prev.tol, prev.alpha) != (coarse.rules(), coarse.tol, alpha):
            prev = coarse.solve(alpha, x0=fp.x, jacobian=solver.last_jacobian)
    except (ParameterError, ConvergenceError, InvalidStateError):
        prev = None
    erratic: list[str] = []
    for level in range(1, max_levels + 1):
        if level > 1 and stop():
            return None
        # more prox starts at the working fixed point (one map evaluation on the working rule; a
        # re-solve only where some node finds a lower bracket), then the refined rules from there
        st_solver, st = _more_starts(work_solver, work, alpha)
        base_solver, base = (st_solver, st) if st is not None else (work_solver, work)
        over = rule_plan.over_budget(base_solver.integrator) if refine["energetic"] else None
        if over:  # pre-integration's levels grow ~2.5x each: stop at the node budget, as tensor rules do
            why = f"stopped: {over}"
            break
        try:
            ref_solver = base_solver.refined(starts=False, **refine)
        except ParameterError as exc:
            why = f"stopped: {exc}"
            break
        ref = ref_solver.solve(alpha, x0=base.x, jacobian=base_solver.last_jacobian)
        finest = ref
        corrected = ref_solver.newton_corrected(alpha)
        errors = bars(finest, base, corrected=corrected)
        if corrected is not None and not contraction(finest, corrected) < 1:
            finest.notes.append("the Newton correction does not contract at the fixed point (a noisy map or a poor "
                                "Jacobian): what the iteration left is unknown and its bars are nan; try a smaller "
                                "--tol or a finer rule")
        if st is not None:
            errors = _add(errors, bars(st, work))
        if prev is not None:
            errors, erratic = _convergence_guard(errors, finest, base, prev, accuracy)
        best, best_solver = finest, ref_solver
        best.notes = [n for n in _carried(work.notes) if not n.startswith(BRANCH_NOT_FOUND) and n not in best.notes] \
            + best.notes
        bad = unresolved(best, errors, accuracy)
        progress(f"level {level}: {best.rules.get('energetic', '')}; {len(bad)} bars above {accuracy:g}"
                 + (f" ({', '.join(bad[:4])})" if bad else ""))
        if not bad:
            break
        if level == max_levels:
            why = (f"stopped after {max_levels} refinements" if max_levels > 1 else None)
            break
        if sum(refine.values()) == 1:
            # one average refined: whether it still matters is what this level's re-solve moved
            # (the check below would evaluate the next level's map at this very point, which the
            # next level's solve does first anyway)
            if _shift(finest, base) < FREEZE_FRACTION * accuracy and st is None:
                why = ("stopped: refining the averages no longer moves the fixed point; the bars come "
                       "from the prox starts or the iteration")
                break
        elif level == 1:
            refine = _components_to_refine(ref_solver, best, alpha, accuracy, refine)
            if not any(refine.values()) and st is None:
                why = ("stopped: refining the averages no longer moves the fixed point; the bars come "
                       "from the prox starts or the iteration")
                break
        prev = base
        work_solver, work = ref_solver, best
    return best, errors, why, erratic, best_solver


def _shift(a: FixedPoint, b: FixedPoint) -> float:
    """The relative distance of two fixed points' states."""
    xa, xb = np.asarray(a.x, dtype=float), np.asarray(b.x, dtype=float)
    return float(np.linalg.norm(xa - xb) / max(np.linalg.norm(xa), 1e-300))


def _convergence_guard(errors: dict[str, float], finest: FixedPoint, work: FixedPoint, prev: FixedPoint,
                       accuracy: float) -> tuple[dict[str, float], list[str]]:
    """Widen each bar to the previous refinement's difference where the last refinement did not
    at least halve it: ``|finest - work|`` bounds the finest value's error only when the
    refinements converge geometrically (Gauss-Hermite across the prox's jumps scatters instead,
    docs/explanation/quadrature.md). Returns the bars and the names that mattered at ``accuracy``."""
    vf, vw, vp = values(finest), values(work), values(prev)
    size = state_sizes(finest, vf)  # (a number zero by symmetry is judged against its kind)
    out, erratic = dict(errors), []
    for k, e in errors.items():
        d2, d1 = abs(vf[k] - vw.get(k, math.nan)), abs(vw.get(k, math.nan) - vp.get(k, math.nan))
        if not (math.isfinite(d1) and math.isfinite(d2)) or d2 <= 0.5 * d1:
            continue
        out[k] = e - d2 + max(d1, d2)
        if max(d1, d2) > 0.1 * accuracy * size.get(k, abs(vf[k])):
            erratic.append(k)
    return out, erratic


def _carried(notes: list[str]) -> list[str]:
    """The notes of one fixed point that hold for another rule's too: not the count of its own nodes'
    saddles (:data:`replica.numeric.solver.SADDLE_NOTE`), which its ``prox_saddle`` reports."""
    return [n for n in notes if not n.startswith(SADDLE_NOTE)]


def _add(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: a.get(k, 0.0) + b.get(k, 0.0) for k in set(a) | set(b)}


def _components_to_refine(solver: Solver, fp: FixedPoint, alpha: float, accuracy: float,
                          refine: dict[str, bool]) -> dict[str, bool]:
    """Which averages still matter: refine each alone, one map evaluation at ``fp``, and map the
    change through the Newton Jacobian to a fixed-point shift (``J^{-1} delta map``); one that
    moves the fixed point by less than ``FREEZE_FRACTION * accuracy`` (relative) stays."""
    J = solver.last_jacobian
    if J is None:
        return refine
    free = solver.free
    x = fp.x
    base = solver.evaluate_map(x, alpha, use_warm=False).x_new
    out = dict(refine)
    for comp in [c for c, on in refine.items() if on]:
        try:
            alone = solver.refined(starts=False, test=False, **{c: c == comp for c in refine})
            moved = alone.evaluate_map(x, alpha, use_warm=False).x_new
        except ParameterError:
            continue
        shift = np.linalg.solve(J, (moved - base)[free])
        rel = float(np.linalg.norm(shift) / max(np.linalg.norm(x[free]), 1e-300))
        out[comp] = not (rel < FREEZE_FRACTION * accuracy)
    return out

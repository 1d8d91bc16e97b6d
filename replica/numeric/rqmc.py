"""Error bars of a randomised rule: the spread of its independent scramblings.

A scrambled Sobol rule (``--quadrature sobol:M``, :func:`replica.numeric.quadrature.sobol_rqmc`) is ``R``
independent randomised sets of ``2^M`` points. Its refinement (twice the points, the same
scramblings) contains the working points: the difference of the two fixed points is correlated
with the working rule's own error and under-covered it (the paper point at ``sobol:2``: ``phi`` ±
8.6e-6 where it is 6e-5 off; ridge at ``sobol:2``: ``V``, ``phi``, ``eps_g`` about 2x outside their
bars). Each scrambling alone is an unbiased estimate of the average, so their spread measures the
rule's statistical error: :func:`scramble_errors` evaluates the map at the fixed point on each
scrambling, carries each difference through the Newton Jacobian to a first-order fixed point
(as the jump check does), and returns, per number, ``T x`` the standard error of the mean of those
``R`` estimates, ``T`` Student's two-sided 99.9 % quantile with ``R - 1`` degrees of freedom. The
bars of :func:`replica.numeric.accuracy.solve_to_accuracy` add it to the refinement difference.
"""
from __future__ import annotations

import math

import numpy as np

#: two-sided 99.9 % quantiles of Student's t, by degrees of freedom (scipy.stats.t.ppf(0.9995, dof))
_T999 = {1: 636.6, 2: 31.60, 3: 12.92, 4: 8.610, 5: 6.869, 6: 5.959, 7: 5.408, 8: 5.041, 9: 4.781,
         10: 4.587, 11: 4.437, 12: 4.318, 13: 4.221, 14: 4.140, 15: 4.073}


def coverage_factor(scramblings: int) -> float:
    """Standard errors per bar for ``scramblings`` independent estimates (99.9 %, Student's t)."""
    dof = max(1, int(scramblings) - 1)
    return _T999.get(dof, 3.92 if dof > 30 else 4.0)


def scramblings_of(rule) -> int:
    """The independent scramblings of a Sobol rule (nodes / points per scrambling; a rule times
    cluster labels or a channel's label values counts those of its Gaussian rule)."""
    base = getattr(rule, "base", None)
    if base is not None:
        return scramblings_of(base)
    return max(1, rule.size // (2 ** rule.order))


def scramblings(rule) -> list:
    """Each scrambling of a Sobol rule alone, as a rule of the same kind: equal weights on its own
    points, times the same cluster labels or channel label values as ``rule`` (whose nodes repeat
    the Gaussian rule once per label: splitting them into consecutive blocks would cut labels
    apart, not scramblings)."""
    from .labels import ChannelRule, LabelledRule, with_channel, with_labels
    from .quadrature import QuadratureRule

    if isinstance(rule, ChannelRule):
        return [with_channel(r, rule.values) for r in scramblings(rule.base)]
    if isinstance(rule, LabelledRule):
        return [with_labels(r, rule.values, rule.probabilities) for r in scramblings(rule.base)]
    R = scramblings_of(rule)
    n = rule.size // R
    return [QuadratureRule(rule.nodes[:, r * n:(r + 1) * n], np.full(n, 1.0 / n), "sobol", rule.order)
            for r in range(R)]


def scramble_errors(solver, fp, alpha: float) -> dict[str, float] | None:
    """Per number, the statistical part of the bar of a fixed point ``fp`` of ``solver`` on a
    scrambled Sobol rule (see the module docstring); None where the working rule is not one (or has
    a single scrambling); nan for every number where a scrambling alone cannot be evaluated at ``fp``
    (too few points: the state it maps to is not admissible) or the Jacobian is singular."""
    from .integrators import QuadratureIntegrator

    integ = solver.integrator
    rule = getattr(integ, "rule", None)
    if not isinstance(integ, QuadratureIntegrator) or rule is None or rule.kind != "sobol":
        return None
    R = scramblings_of(rule)
    if R < 2:
        return None
    x = np.asarray(fp.x, dtype=float)
    free = solver.free
    at_x = solver.map_and_numbers(x, alpha)
    if at_x is None:
        return None
    J = solver.fixed_point_jacobian(x, alpha, mapped=at_x[0])
    if J is None:
        return {k: math.nan for k in at_x[1].values()}
    vx = at_x[1].values()
    # The map is linear in the rule's weights, the numbers are not linear in the state: their response
    # to a scrambling's shift is taken on a short step along it (1e-4 relative) and scaled back, so
    # that a noisy scrambling's large shift is not evaluated far from x.
    found = replicate_estimates(x, alpha, at_x, J, free,
                                [solver._with_integrator(integ.with_rule(sub)) for sub in scramblings(rule)],
                                solver, at_x[1], short_step=1e-4)
    if found is None:  # a scrambling too small to evaluate: the bar is unknown, not small
        return {k: math.nan for k in vx}
    per = [{k: e.get(k, math.nan) - vx[k] for k in vx} for e in found[0]]
    t = coverage_factor(R)
    out = {}
    for k in vx:
        e = np.array([p[k] for p in per], dtype=float)
        out[k] = t * float(e.std(ddof=1)) / math.sqrt(R) if np.all(np.isfinite(e)) else math.nan
    return out


def replicate_estimates(x: np.ndarray, alpha: float, at_x, J: np.ndarray, free: np.ndarray, replicates: list,
                        numbers, numbers_at_x=None, short_step: float | None = None
                        ) -> tuple[list[dict[str, float]], list[float]] | None:
    """Each replicate's fixed point to first order, as numbers.

    A replicate's map ``m_r`` at ``x`` moves the state by ``s_r = -J^{-1} (m_r(x) - m(x))``
    (``at_x``: the working map and numbers at ``x``, ``J`` its Jacobian on the ``free`` entries);
    its numbers are the replicate's at ``x`` plus their change along ``s_r`` under ``numbers`` (a
    solver of the same problem; ``numbers_at_x``: its numbers at ``x`` when known). With
    ``short_step`` that change is taken on a step of ``short_step |x|`` along ``s_r`` and scaled
    back (a first-order response, whatever the size of ``s_r``); else at ``x + s_r`` itself.
    Returns the numbers per replicate and the relative shifts ``|s_r| / |x|``; None where a state
    is not admissible or ``J`` is singular. ``replicates``: solvers whose map is one replicate's."""
    base = numbers_at_x if numbers_at_x is not None else numbers.numbers_at(x, alpha)
    if base is None:
        return None
    vb = base.values()
    scale = max(float(np.linalg.norm(x[free])), 1e-300)
    estimates, shifts = [], []
    for rep in replicates:
        at_r = rep.map_and_numbers(x, alpha)
        if at_r is None:
            return None
        try:
            step = -np.linalg.solve(J, (at_r[0] - at_x[0])[free])
        except np.linalg.LinAlgError:
            return None
        eps = 1.0 if short_step is None else min(1.0, short_step * scale / max(float(np.linalg.norm(step)), 1e-300))
        y = np.array(x, dtype=float, copy=True)
        y[free] += eps * step
        at_y = numbers.numbers_at(y, alpha)
        if at_y is None:
            return None
        vr, vy = at_r[1].values(), at_y.values()
        estimates.append({k: vr.get(k, math.nan) + (vy.get(k, math.nan) - v) / eps for k, v in vb.items()})
        shifts.append(float(np.linalg.norm(step)) / scale)
    return estimates, shifts

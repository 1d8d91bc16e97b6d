"""What ``converged`` means, and failures that say where, how far and what to try.

A fixed point is *converged* (:func:`is_converged`) only if its relative residual is
finite and below a tolerance that is itself sane (``0 < tol <= MAX_TOL``, see
:func:`replica.validation.tolerance`) **and** the state is admissible (finite, every
validity quantity of the model positive). :class:`~replica.numeric.solver.FixedPoint` computes
its ``converged`` from these fields; :func:`explained_failures` wraps
:meth:`Solver.solve <replica.numeric.solver.Solver.solve>` so that it never returns a state that
is not converged, and so that every failure names the parameter point, the iterations,
the residual and what to try.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ConvergenceError, InvalidStateError
from ..validation import MAX_TOL

#: an order parameter this many times the token scale ``rho_bar`` is a state running off to
#: infinity (a divergence of the equations such as an interpolation peak), not a solution:
#: float64 residuals are then met by rounding, whatever the state
DIVERGENCE = 1e8
#: a parameter closer than this to an end of its domain is reported as on the boundary
NEAR = 1e-6


def is_converged(residual: float, tol: float, admissible: bool = True) -> bool:
    """``admissible and residual < tol <= MAX_TOL`` (all finite, ``tol > 0``)."""
    try:
        r, t = float(residual), float(tol)
    except (TypeError, ValueError):
        return False
    return bool(admissible) and math.isfinite(r) and math.isfinite(t) and 0 < t <= MAX_TOL and r < t


def cached_point_converged(point: Any, tol: float) -> bool:
    """A point read back from the cache counts only if it is converged at ``tol`` (finite state,
    residual below it): an edited or foreign entry cannot pass an unconverged state as solved."""
    try:
        finite = bool(np.all(np.isfinite(np.asarray(point.x, dtype=float))))
    except (TypeError, ValueError):
        return False
    return finite and is_converged(point.residual, tol)


def describe_point(solver: Any, alpha: float) -> str:
    """``attention_tied, semantic branch, alpha=2 (omega=0.3, lam=0, ...)``."""
    params = ", ".join(f"{k}={v:g}" for k, v in solver.parameter_dict.items())
    return f"{solver.module.MODEL}, {solver.branch} branch, alpha={float(alpha):g} ({params})"


def boundary_parameters(solver: Any) -> list[str]:
    """Advice for every parameter sitting on an end of its declared domain (``lam = 0``,
    ``omega = 1``, ``sigma = 0``): where the saddle point is typically ill-posed."""
    out = []
    values = solver.parameter_dict
    for k, (lo, hi) in getattr(solver.module, "DOMAINS", {}).items():
        v = values.get(k)
        if v is None:
            continue
        where = "on" if v in (lo, hi) else f"within {NEAR:g} of"
        if lo is not None and v - lo < NEAR:
            out.append(f"{k} = {v:g} is {where} the boundary of its domain, where the equations can be "
                       f"ill-posed: use {k} >= {lo + NEAR:g}")
        elif hi is not None and hi - v < NEAR:
            out.append(f"{k} = {v:g} is {where} the boundary of its domain, where the equations can be "
                       f"ill-posed: use {k} <= {hi - NEAR:g}")
    return out


def advice(solver: Any, alpha: float, iterations: int, residuals: Sequence[float]) -> str:
    """What to try, most specific first."""
    tips = boundary_parameters(solver)
    res = [r for r in residuals if math.isfinite(r)]
    if iterations >= solver.max_iter:
        trend = residual_trend(res)
        if trend == "stalled":
            k = _recent(len(res))
            tips.append(f"the residual stalled near {min(res[-k:]):.1e} over the last {k} iterations: more iterations "
                        f"(--max-iter, now {solver.max_iter}) will not help; try another quadrature, a nearby start "
                        "or another branch")
        else:
            tips.append(f"raise --max-iter (now {solver.max_iter})" + (": the residual was still falling"
                                                                      if trend == "falling" else ""))
    if solver.branch != "free":
        tips.append(f"the {solver.branch} branch may not exist at this point ('replica phase "
                    f"{solver.module.MODEL}' shows where each branch ends)")
    if not tips:
        tips.append("start from a converged neighbouring point (x0), or try another branch or quadrature")
    return "; ".join(tips)


def _recent(n: int) -> int:
    """How many of ``n`` residuals count as the recent part of a run: a fifth, at least 5."""
    return max(5, n // 5)


def residual_trend(residuals: Sequence[float]) -> str:
    """``"falling"`` where the best residual of the last fifth of the run (at least 5 iterations) is
    under half the best before it, ``"stalled"`` where it is not (a plateau: 5e-5 from iteration 500
    to 3000 is no reason to raise --max-iter), ``"unknown"`` for runs too short to say."""
    res = [float(r) for r in residuals if math.isfinite(r)]
    k = _recent(len(res))
    if len(res) < 2 * k:
        return "unknown"
    recent, before = min(res[-k:]), min(res[:-k])
    return "falling" if recent < 0.5 * before else "stalled"


def _trace(solver: Any, exc: Exception) -> tuple[int, list[float]]:
    """Iterations and residual history of the failed solve."""
    if isinstance(exc, ConvergenceError) and (exc.residuals or exc.iterations):
        return exc.iterations, list(exc.residuals)
    res = list(getattr(solver, "_residuals", None) or [])
    return len(res), res


def explain(solver: Any, alpha: float, exc: ConvergenceError | InvalidStateError) -> Exception:
    """The same kind of error, its message rewritten to name the point, the iterations, the
    residual, and what to try."""
    if getattr(exc, "explained", False):
        return exc
    it, residuals = _trace(solver, exc)
    r = residuals[-1] if residuals else float("nan")
    what = str(exc)
    if isinstance(exc, ConvergenceError):
        what = what.rsplit(" (iterations=", 1)[0]
    text = (f"{describe_point(solver, alpha)}: {what}; {it} iteration{'s' if it != 1 else ''}, last residual "
            f"{r:.3e}. Try: {advice(solver, alpha, it, residuals)}")
    if isinstance(exc, ConvergenceError):
        new: Exception = ConvergenceError(what, exc.residuals, exc.iterations, exc.last_state)
    else:
        new = InvalidStateError(exc.quantity, what, exc.state)
    new.args = (text,)
    new.explained = True  # type: ignore[attr-defined]
    return new


def runaway(solver: Any, order: dict) -> str | None:
    """Why the state ``order`` (name -> value) is running off to infinity (an order parameter over
    :data:`DIVERGENCE` x the token scale), or None. Checked at every iteration of
    :meth:`Solver.solve <replica.numeric.solver.Solver.solve>` (a state growing geometrically toward
    infinity never meets the residual test, and its prox gets ever harder: ``replica solve
    logistic --param lam=0`` on separable data) and on every result."""
    rb = np.atleast_1d(np.asarray(solver.module.rho_bar(solver.p), dtype=float))
    scale = max(float(np.max(np.abs(rb))) if rb.size else 1.0, 1.0)
    big = {k: v for k, v in order.items() if not abs(v) <= DIVERGENCE * scale}
    if not big:
        return None
    k, v = max(big.items(), key=lambda kv: abs(kv[1]))
    return (f"the state runs off to infinity ({k} = {v:.3g}, over {DIVERGENCE:g} x the token scale rho_bar): the "
            "equations have no finite solution here (a divergence such as an interpolation peak, or data that "
            "an unregularised loss separates)")


def check_result(solver: Any, alpha: float, fp: Any) -> None:
    """Raise unless ``fp`` is converged and finite-sized (see :data:`DIVERGENCE`)."""
    why = runaway(solver, fp.order)
    if why is not None:
        raise explain(solver, alpha, ConvergenceError(why, fp.residuals, fp.iterations, dict(fp.order)))
    if not fp.converged:
        why = ("the state is not admissible" if not fp.admissible
               else f"residual {fp.residual:.3e} is not below tol={fp.tol:g} <= {MAX_TOL:g}")
        raise explain(solver, alpha, ConvergenceError(f"not converged: {why}", fp.residuals, fp.iterations,
                                                      dict(fp.order)))


def explained_failures(solve: Callable) -> Callable:
    """Decorate ``Solver.solve``: failures are rewritten by :func:`explain`, results checked by
    :func:`check_result` (so that ``solve`` never returns an unconverged state)."""

    @functools.wraps(solve)
    def wrapper(self, alpha, *args, **kwargs):
        self._residuals = []  # the solve's residual history (solve fills its own list in)
        try:
            fp = solve(self, alpha, *args, **kwargs)
        except (ConvergenceError, InvalidStateError) as exc:
            raise explain(self, alpha, exc) from None
        check_result(self, alpha, fp)
        return fp

    return wrapper

"""The fixed-point iteration of a :class:`~replica.numeric.solver.Solver`: Anderson, Newton, damping.

The iteration runs on the free (un-pinned) order parameters with Anderson acceleration (type II,
memory ``anderson``), falling back to damped steps that keep ``damping`` of the old value whenever
Anderson proposes an inadmissible state or increases the residual. Once the residual is small,
Newton steps on ``map(x) - x``: the Jacobian by forward differences (from the current minimisers),
then Broyden updates. Warm starts of the inner minimisation in between; every start to confirm
convergence. :meth:`FixedPointIteration.solve_best` runs cold solves from several generic starts and
keeps the largest free entropy. Non-convergence raises :class:`~replica.errors.ConvergenceError`
with the residual history (:func:`replica.numeric.convergence.explained_failures`).
"""
from __future__ import annotations

import contextlib
import functools
import math
import sys
import time
from typing import Mapping, Sequence

import numpy as np

from .. import validation
from ..errors import ConvergenceError, InvalidStateError, ParameterError
from .branches import PINNABLE
from .convergence import explained_failures, runaway
from .fixed_point import FixedPoint, same_point
from .saddle_map import MapResult
from .unit_symmetry import (SPECIALISED, UNSPECIALISED, breaking_eigenvalues, has_units, largest_breaking,
                            tie_gap, tie_projection, tied_starts, ties)

#: the iteration's part of an error is this times the Newton correction ``|J^{-1} g|``: the correction
#: is the linearised remaining error, with a finite-difference / Broyden Jacobian that can be tens of
#: percent off (on the ridge closed form the correction equals the true error)
ITERATION_SAFETY = 2.0

#: open tallies of fixed-point iterations (:func:`iteration_tally`)
_TALLIES: list[list[int]] = []


@contextlib.contextmanager
def iteration_tally():
    """``with iteration_tally() as t: ...``: ``t[0]`` counts the fixed-point iterations of every
    :meth:`Solver.solve` run in the block, converged or not (scout, starts, refined rules): what a
    command's ``iterations`` reports, not only those of the last solve."""
    t = [0]
    _TALLIES.append(t)
    try:
        yield t
    finally:
        _TALLIES.remove(t)


def _tallied(solve):
    """Add a solve's iterations to the open :func:`iteration_tally` counters."""
    @functools.wraps(solve)
    def wrapper(self, *args, **kwargs):
        n = None
        try:
            fp = solve(self, *args, **kwargs)
            n = fp.iterations
            return fp
        finally:
            if n is None:  # failed: the iterations it ran (solve's residual history)
                n = len(getattr(self, "_residuals", None) or ())
            for t in _TALLIES:
                t[0] += int(n)

    return wrapper


#: iterations without halving the residual after which a cold start of :meth:`FixedPointIteration.solve_best`'s
#: first round is given up (a plateau; the second round, where no start converged, waits for max_iter)
STALL_PATIENCE = 100


class FixedPointIteration:
    """:meth:`solve` and what builds on it (:meth:`solve_best`, :meth:`newton_corrected`, the Jacobian
    of the map) for a :class:`~replica.numeric.solver.Solver` (module docstring)."""

    @_tallied
    @explained_failures
    def solve(self, alpha: float, x0: np.ndarray | Mapping[str, float] | None = None,
              jacobian: np.ndarray | None = None, cold: bool = False, need_jacobian: bool = False,
              patience: int | None = None) -> FixedPoint:
        """Iterate to the fixed point at sample complexity ``alpha`` (from ``x0`` if given).

        ``jacobian``: the Newton Jacobian of a nearby solve (:attr:`last_jacobian`, e.g. the same
        point on another rule) to start Newton from without finite differences (with ``x0``).
        ``cold``: ``x0`` is a generic start, not a nearby solution: Newton waits for Anderson as
        from the default start (:meth:`solve_best`'s starts). ``need_jacobian``: end with a Newton
        Jacobian (:attr:`last_jacobian`) even where the iteration converged without one (forward
        differences at the fixed point, warm from its minimisers). ``patience``: give up (raise
        :class:`ConvergenceError`) once the best residual of the last ``patience`` iterations is not
        under half the best before them (a stall), instead of iterating to ``max_iter``.

        Returns a converged :class:`FixedPoint` or raises :class:`ConvergenceError` /
        :class:`InvalidStateError` naming the point, the iterations and the residual.
        """
        alpha = validation.sample_complexity(alpha)
        t0 = time.perf_counter()
        x = self.initial_state() if x0 is None else validation.state_vector(x0, self.names)
        x[self.pinned] = 0.0
        if self.project is not None:
            x = self.project(x)
        self.check_state(x)
        if self.verbose:
            print(f"  solve at alpha = {alpha:g} on {self.integrator.describe()}", file=sys.stderr)
        free = self.free
        hist_x: list[np.ndarray] = []
        hist_g: list[np.ndarray] = []
        residuals: list[float] = []
        self._residuals = residuals  # read by replica.numeric.convergence when the solve fails
        # A continuation (x0 given) starts from the minimisers of the previous solve, with warm
        # starts only; a cold solve from every start. Convergence is always confirmed with
        # every start (below), so the answer does not depend on this choice. A re-solve of a
        # nearby fixed point on another rule (x0 and its Jacobian given, no minimisers of this
        # rule yet) is a continuation too: without minimisers every node starts from every
        # module start anyway, and the extras of an every-start evaluation (pre-integration's
        # every-start prox on its pieces: ~1.4 s of a 24^3-line evaluation) wait for the
        # confirmation.
        if x0 is None:
            self._warm = None
        full = self._warm is None and not (x0 is not None and jacobian is not None and not cold)
        res = self.evaluate_map(x, alpha, multistart=full)
        sticky = False   # every start at every iteration (warm starts keep missing global minima)
        J: np.ndarray | None = None          # Jacobian of map(x) - x (free entries), Newton mode
        nf = int(free.sum())
        if x0 is not None and jacobian is not None and np.shape(jacobian) == (nf, nf) \
                and np.all(np.isfinite(jacobian)):
            J = np.array(jacobian, dtype=float)
        prev: tuple[np.ndarray, np.ndarray, float, bool] | None = None  # x, g, r, newton step?
        newton_failures = 0
        misses = 0       # evaluations from every start that found minima the warm starts missed
        since = 0        # divergence is judged on the residuals since the last miss
        was_full = full  # type of the evaluation behind the previous residual
        predicted = False  # this evaluation is from every start because it should converge
        # From a given x0 (continuation) Newton can start early; from the generic initial state
        # let Anderson approach first, so that Newton does not jump to another solution.
        switch = self.newton_switch if x0 is None or cold else max(self.newton_switch, 0.1)
        it = 0
        for it in range(1, self.max_iter + 1):
            g = (res.x_new - x)[free]
            r = float(np.linalg.norm(g) / max(np.linalg.norm(x[free]), 1e-12))
            miss = False
            if r < self.tol and not full and self._newton_small(J, g, x):
                # Converged with warm starts only: the answer must be the global minimum over
                # every start, so re-evaluate the map at this state from every start.
                res = self.evaluate_map(x, alpha, multistart=True)
                full = True
                g = (res.x_new - x)[free]
                r_full = float(np.linalg.norm(g) / max(np.linalg.norm(x[free]), 1e-12))
                miss = r_full >= self.tol
                r = r_full
            elif full and not was_full and prev is not None and r > 10 * max(prev[2], self.tol):
                miss = True  # a periodic every-start evaluation jumped: same situation
            if miss:
                # Some node's global minimum is in another basin than the warm start's: the
                # warm-start map was a different map. Forget its history and go on from the new
                # minimisers (the next warm starts); after a few such misses use every start at
                # every iteration.
                misses += 1
                sticky = misses >= 3
                since = len(residuals)
                hist_x.clear()
                hist_g.clear()
            elif J is not None and prev is not None:
                J, newton_failures = self._update_jacobian(J, x, g, r, prev, newton_failures)
            was_full = full
            residuals.append(r)
            if self.verbose:
                print(f"  iter {it:4d}  residual {r:.3e}" + ("" if full else "  (warm starts)")
                      + ("  newton" if prev is not None and prev[3] else ""), file=sys.stderr)
            if not math.isfinite(r) or (it > 5 and len(residuals) - since > 1
                                        and r > 1e6 * min(residuals[since:])):
                raise ConvergenceError("fixed-point iteration diverged", residuals, it,
                                       dict(zip(self.names, x.tolist())))
            if patience and len(residuals) - since >= 2 * patience and r >= self.tol \
                    and min(residuals[-patience:]) >= 0.5 * min(residuals[since:-patience]):
                raise ConvergenceError(f"the residual stalled near {min(residuals[-patience:]):.1e} over the last "
                                       f"{patience} iterations", residuals, it, dict(zip(self.names, x.tolist())))
            far = runaway(self, dict(zip(self.names, x.tolist())))
            if far is not None:  # growing geometrically toward infinity: no finite fixed point
                raise ConvergenceError(far, residuals, it, dict(zip(self.names, x.tolist())))
            if r < self.tol and ((full and not predicted) or self._newton_small(J, g, x)):
                break
            x_next = None
            if self.newton and r < switch and newton_failures < 3:
                if J is None:
                    J = self._fd_jacobian(x, g, alpha)
                x_next = self._newton_step(x, g, J) if J is not None else None
            newton_step = x_next is not None
            if not newton_step:
                x_next = self._next(x, g, hist_x, hist_g, residuals)
            ratio = r / prev[2] if (prev is not None and prev[3] and prev[2] > 0) else None
            prev = (x[free].copy(), g.copy(), r, newton_step)
            # Warm starts (the previous minimisers, and h = omega) in between; every start every
            # 10th iteration, and to confirm convergence (above).
            full = sticky or it % 10 == 0 or (misses > 0 and r < 1e3 * self.tol)
            # A Newton step that the last one's reduction predicts to converge is evaluated from
            # every start at once: the confirmation it would need anyway, without the warm-start
            # evaluation before it (a 24^3-line pre-integration evaluation: 3.5 s). Converged
            # only where its Newton correction is small too, as after a warm evaluation.
            predicted = bool(newton_step and not full and misses == 0 and ratio is not None
                             and r * ratio < self.tol)
            full = full or predicted
            try:
                if newton_step and not full and misses == 0:
                    # Newton steps evaluate the map from the warm starts alone, like the finite
                    # differences of J: a smooth map that Newton converges on quickly -- unless
                    # the warm starts have been seen to miss global minima in this solve (then
                    # from the warm starts and h = omega, which catch most basin changes).
                    res = self._warm_only_map(x_next, alpha)
                else:
                    res = self.evaluate_map(x_next, alpha, multistart=full)
                if self.project is not None or has_units(self.module):
                    if not self._admissible(res.x_new):
                        # an admissible state whose image is not (lambda + Vhat no longer positive where
                        # the committee's non-convex loss makes Vhat negative): the step went too far.
                        # Only for unit modules so far: on the paper's model it changes which positional
                        # solution a cold start at alpha = 2 reaches (CONTRIBUTING.md)
                        raise InvalidStateError("state", "the map leaves the admissible domain")
                x = x_next
            except InvalidStateError:
                # The step left the admissible domain: restart with a damped step, shortened until
                # the map's image is admissible too.
                hist_x.clear()
                hist_g.clear()
                J, prev = None, None
                x, res = self._damped_admissible(x, g, alpha, full)
        else:
            raise ConvergenceError(f"no convergence to tol={self.tol:g} within {self.max_iter} iterations",
                                   residuals, self.max_iter, dict(zip(self.names, x.tolist())))
        if J is None and need_jacobian:
            J = self._fd_jacobian(x, (res.x_new - x)[free], alpha)
        fp = self._observables(x, res, alpha, residuals, it)
        fp.seconds = time.perf_counter() - t0
        notes = self._branch_notes(fp)
        fp.notes += notes
        fp.branch_found = not notes
        self.last_jacobian = J
        fp.iteration_error = self._iteration_error(J, (res.x_new - x)[free], x, residuals[-1])
        self._state_part_of_observable_errors(fp, x, res, J)
        fp.rules = self.rules()
        return fp

    def _state_part_of_observable_errors(self, fp: FixedPoint, x: np.ndarray, res: MapResult,
                                         J: np.ndarray | None) -> None:
        """Add to every test observable's error (``eps_g_error`` first) what the state's own error moves
        it by, to first order through the Newton Jacobian ``J``: ``ITERATION_SAFETY`` times its change
        under the Newton correction ``-J^{-1} g`` (what the iteration left), and, where the companion
        rule was evaluated (``error_estimate``), its change under the shift ``-J^{-1} (g_c - g)`` to the
        companion rule's fixed point (the energetic average's error, measured by the coarser rule).
        The test rule's own error alone misses both: a softplus teacher on Gauss-Hermite 16 at
        tol 1e-10 had 1.4 times that error on ``eps_g``. Nothing is added without a Jacobian."""
        if J is None:
            return
        free = self.free
        g = (res.x_new - x)[free]
        shifts: list[tuple[float, np.ndarray]] = []
        step = getattr(self, "_last_step", None)
        if step is not None:
            shifts.append((ITERATION_SAFETY, step))
        comp = getattr(self, "_companion_map", None)
        if comp is not None and np.array_equal(comp[0], x):
            try:
                shifts.append((1.0, -np.linalg.solve(J, (comp[1] - x)[free] - g)))
            except np.linalg.LinAlgError:
                pass
        base = {k: fp.observables[k] for k in fp.observable_errors if k in fp.observables}
        for factor, shift in shifts:
            y = x.copy()
            y[free] += shift
            if not (np.all(np.isfinite(y)) and self._admissible(y)):
                continue
            moved, _ = self.test_observables(self._fix_signs(y, res.xhat)[0], estimate=False)
            for k, v in base.items():
                d = abs(moved.get(k, v) - v)
                if math.isfinite(d):
                    fp.observable_errors[k] = fp.observable_errors[k] + factor * d
        fp.eps_g_error = fp.observable_errors.get("eps_g", fp.eps_g_error)

    def _iteration_error(self, J, g, x, r, remember: bool = True) -> dict[str, float]:
        """What the iteration left on each order parameter: the Newton correction ``|J^{-1} g|``
        (free entries; 0 on pinned ones), or ``r |x|`` on every free entry without a Jacobian.
        ``remember``: keep ``x`` and the step for :meth:`newton_corrected`."""
        err = np.zeros(len(self.names))
        corr = None
        if remember:
            self._last_x, self._last_step = x.copy(), None
        if J is not None:
            try:
                step = -np.linalg.solve(J, g)
                if np.all(np.isfinite(step)):
                    if remember:
                        self._last_step = step
                    corr = np.abs(step)
            except np.linalg.LinAlgError:
                corr = None
        if corr is None:
            corr = np.full(int(self.free.sum()), r * float(np.linalg.norm(x[self.free])))
        err[self.free] = corr
        return dict(zip(self.names, err.tolist()))

    def newton_corrected(self, alpha: float) -> FixedPoint | None:
        """The last solve's state moved by its Newton correction ``-J^{-1} g`` and its numbers
        there (one map evaluation, warm from the solve's minimisers): how much what the
        iteration left moves every derived number.
        None without a Jacobian or where the corrected state is not admissible."""
        step = getattr(self, "_last_step", None)
        if step is None:
            return None
        y = self._last_x.copy()
        y[self.free] += step
        if not self._admissible(y):
            return None
        # from the minimisers of the solve's last (every-start) evaluation alone: the step is
        # tiny (~ the tolerance), so they are the global ones at y too -- the every-start map
        # there would cost ~1.4x as much on a fine pre-integration level and give the same numbers
        try:
            res = self._warm_only_map(y, alpha) if self._warm is not None else self.evaluate_map(y, alpha)
        except InvalidStateError:
            return None
        out = self._observables(y, res, alpha, [0.0], 0)
        # what a second Newton step from y would still move (same Jacobian, no extra evaluation):
        # with the first step it gives the correction's contraction (replica.numeric.accuracy)
        out.iteration_error = self._iteration_error(self.last_jacobian, (res.x_new - y)[self.free], y, 0.0,
                                                    remember=False)
        return out

    def numbers_at(self, x: np.ndarray, alpha: float) -> FixedPoint | None:
        """Every reported number at state ``x`` (not a fixed point: one map evaluation from every
        start gives the conjugates and potentials), or None where ``x`` is not admissible. The
        first-order estimate of a nearby fixed point's numbers (:meth:`newton_corrected`)."""
        out = self.map_and_numbers(x, alpha)
        return None if out is None else out[1]

    def map_and_numbers(self, x: np.ndarray, alpha: float) -> tuple[np.ndarray, FixedPoint] | None:
        """``map(x)`` and every reported number at ``x`` from one map evaluation (every start), or
        None where ``x`` is not admissible."""
        y = np.asarray(x, dtype=float)
        if not self._admissible(y):
            return None
        try:
            res = self.evaluate_map(y, alpha, use_warm=False)
        except InvalidStateError:
            return None
        return res.x_new, self._observables(y, res, alpha, [0.0], 0)

    def fixed_point_jacobian(self, x: np.ndarray, alpha: float, mapped: np.ndarray | None = None
                             ) -> np.ndarray | None:
        """The Jacobian of ``map(x) - x`` on the free entries at ``x``: the last solve's Newton
        Jacobian when that solve ended at ``x``, else forward differences (one map evaluation per
        free entry, plus one for ``map(x)`` unless given as ``mapped``); None where a perturbed
        state is not admissible."""
        x = np.asarray(x, dtype=float)
        last = getattr(self, "_last_x", None)
        if self.last_jacobian is not None and last is not None and np.array_equal(last, x):
            return self.last_jacobian
        if mapped is None:
            mapped = self.evaluate_map(x, alpha, use_warm=False).x_new
        return self._fd_jacobian(x, (mapped - x)[self.free], alpha)

    def solve_best(self, alpha: float, spread: Sequence[tuple[float, float]] = ((1.0, 1.0), (1.0, 0.5),
                                                                               (0.1, 0.5)),
                   scout: "Solver | None" = None) -> FixedPoint:
        """Cold solves from several generic starts; the fixed point with the largest ``Phi``.

        The saddle-point equations of a branch can have several solutions at one ``alpha``
        (e.g. two positional ones at ``omega = 0.3, alpha = 1.5``, docs/explanation/theory.md §6); which one a
        single cold start reaches depends on its basin. Each start scales the generic
        :meth:`initial_state` (``q`` by the first factor, ``m``/``theta`` by the second);
        the solution with the largest free entropy -- the lowest training loss, i.e. the
        minimum GD reaches from the branch's own initialisation -- is returned, with a note
        when distinct solutions were found. Raises the last error if no start converged.

        ``scout``: a solver of the same problem on a cheaper rule (e.g. the companion's). The
        cold solves then run on it, and every distinct fixed point it finds is re-solved on
        this solver's rule from there (Newton from the scout's Jacobian: a few map
        evaluations), so the starts cost a fraction of full solves.
        """
        base = self.initial_state()
        untied = not ties(self.module, self.branch)  # a branch that may specialise (not --branch unspecialised)
        qidx = [i for i in self.module.SYMMETRIC_DIAGONAL if self.names[i].startswith("q")]
        mt = [i for f in PINNABLE for i in self.module.FAMILIES.get(f, [])]
        found: list[FixedPoint] = []
        error: Exception | None = None
        first = scout or self
        jacobians: list = []
        # Newton switched on at residual 0.1 (a continuation's setting) can send every generic start
        # away (hinge at lam = 1e-3, alpha = 5: 500 iterations in vain each): if none converged, the
        # starts once more with Newton waiting as from the default start (cold). In the first round a
        # start whose residual stalls for STALL_PATIENCE iterations is given up: the two-unit committee
        # near alpha_spec has two generic starts that plateau near 7e-4 (on the scout's rule) and cost
        # 1000 of a cold solve's 1070 iterations; the second round, run only if no start converged,
        # gives every start its max_iter.
        starts: list[tuple[np.ndarray, str | None]] = []
        for qs, ms in spread:
            x0 = base.copy()
            x0[qidx] *= qs
            x0[mt] *= ms
            starts.append((x0, None))
        # a unit module: the start on every unit branch that ties more, solved there, so that where
        # this branch has no fixed point of its own the solve ends on the one it merges into
        starts += tied_starts(self.module, base, self.branch)
        for cold in (False, True):
            for x0, on in starts:
                try:
                    first._warm = None
                    with first.on_branch(on):
                        fp = first.solve(alpha, x0=x0, cold=cold, patience=None if cold else STALL_PATIENCE)
                except (ConvergenceError, InvalidStateError) as exc:
                    error = exc
                    continue
                if scout is not None and any(same_point(fp, d) for d in found):
                    continue
                found.append(fp)
                jacobians.append(first.last_jacobian)
            if found:
                break
        if scout is not None:
            # The scout's Jacobian starts Newton here when its rule is this one's companion; a
            # coarser scout's is too far off for the error bars' contraction estimate
            # (replica.numeric.accuracy), so this rule's own is taken by differences instead.
            try:
                adjacent = scout.integrator.describe() == self.integrator.companion().describe()
            except ParameterError:  # no companion (a degenerate one): the scout is not it
                adjacent = False
            polished = []
            for fp, J in zip(found, jacobians):
                try:
                    self._warm = None
                    with self.on_branch(fp.branch if fp.branch != self.branch else None):
                        out = self.solve(alpha, x0=fp.x, jacobian=J if adjacent else None, need_jacobian=True)
                except (ConvergenceError, InvalidStateError) as exc:
                    error = exc
                    continue
                out.seconds += fp.seconds
                out.scouted = fp
                polished.append(out)
            found = polished
        if not found:
            raise error  # type: ignore[misc]
        # a unit branch that ties more (tied_starts) stands in only where this branch found nothing
        own = [fp for fp in found if fp.branch == self.branch]
        best = max(own or found, key=lambda fp: fp.phi)
        distinct = [best]
        for fp in found:
            if all(not same_point(fp, d) for d in distinct):
                distinct.append(fp)
        if len(distinct) > 1:
            # the phis of this rule (the reported one may be refined later), the tied branches' by name
            best.notes.append(f"{len(distinct)} distinct fixed points on this branch from {len(starts)} starts; "
                              f"reporting the one with the largest phi ({best.phi:.6g} on "
                              f"{self.integrator.describe()}; others: "
                              + ", ".join(f"phi={d.phi:.6g}" + (f" on the {d.branch} branch" if d.branch != best.branch
                                                                else "") for d in distinct[1:]) + ")")
            higher = [d for d in distinct[1:] if d.branch != best.branch and d.phi > best.phi]
            if higher:
                best.notes.append(f"the {higher[0].branch} fixed point has the larger phi ({higher[0].phi:.6g}); the "
                                  f"{best.branch} one is reported where one converged (--branch {higher[0].branch} "
                                  f"solves the other)")
        best.seconds = sum(fp.seconds for fp in found)
        if best.branch != self.branch:
            # only a unit branch that ties more had a fixed point: this solver works on it from now on
            # (error bars, refinements), and the result says which branch it is
            best.notes.append(f"no {self.branch} fixed point converged from its starts at this alpha; reporting the "
                              f"{best.branch} fixed point, into which the {self.branch} branch merges (see "
                              f"'replica phase' for where each branch exists)")
            self._adopt_branch(best.branch)
        if untied:
            best.notes += self._specialisation_notes(best, alpha)
        return best

    def _specialisation_notes(self, fp: FixedPoint, alpha: float) -> list[str]:
        """Why a cold solve of a model with a specialised branch reports an unspecialised fixed point:
        whether that point is linearly stable towards specialisation (the largest eigenvalue of the
        map's Jacobian along the breaking directions below one: ``alpha`` below ``alpha_spec``) or
        not. Two map evaluations; nothing for other models or fixed points."""
        mod = self.module
        if not has_units(mod) or SPECIALISED not in mod.BRANCHES or tie_gap(mod, UNSPECIALISED, fp.x) >= 1e-4:
            return []
        warm = self._warm  # the fixed point's minimisers stay the warm start of what follows (error bars)
        try:
            with self.on_branch(SPECIALISED):
                mu = largest_breaking(breaking_eigenvalues(self, fp.x, alpha))
        except InvalidStateError:  # identical units (q's diagonal = off-diagonal): no breaking step fits
            return ["a step off the unspecialised subspace is not admissible here (the units are identical: the "
                    "specialised ansatz is singular), so no specialised fixed point branches off this one"]
        finally:
            self._warm = warm
        if not math.isfinite(mu):
            return []
        if mu < 1:
            return [f"the unspecialised fixed point is linearly stable towards specialisation here (largest breaking "
                    f"eigenvalue {mu:.3g} < 1: alpha is below alpha_spec) and no specialised fixed point converged from "
                    f"the starts; a specialised branch that does not leave it continuously (three units or more) can "
                    f"exist below alpha_spec: 'replica phase' follows both branches"]
        return [f"the unspecialised fixed point is linearly UNSTABLE towards specialisation (largest breaking "
                f"eigenvalue {mu:.3g} > 1: alpha is above alpha_spec), yet no specialised fixed point converged from "
                f"the starts; 'replica phase' follows the specialised branch"]

    @contextlib.contextmanager
    def on_branch(self, branch: str | None):
        """Solve on the unit branch ``branch`` (its ties imposed; results carry its name) inside the
        block; ``None``: this solver's own branch."""
        if branch is None or branch == self.branch:
            yield self
            return
        saved = (self.branch, self.project)
        self.branch, self.project = branch, tie_projection(self.module, branch)
        try:
            yield self
        finally:
            self.branch, self.project = saved

    def _adopt_branch(self, branch: str) -> None:
        self.branch, self.project = branch, tie_projection(self.module, branch)
        self._init["branch"] = branch

    def _update_jacobian(self, J, x, g, r, prev, failures):
        """Broyden ("good") update of the Newton Jacobian with the latest step, or None (a
        fresh finite-difference Jacobian) when the last Newton step did not halve the residual."""
        step = x[self.free] - prev[0]
        if prev[3] and r > 0.5 * prev[2]:
            return None, failures + 1
        if step @ step > 0:
            J = J + np.outer((g - prev[1]) - J @ step, step) / (step @ step)
        return J, failures

    def _newton_small(self, J, g, x) -> bool:
        """In Newton mode, also require the Newton correction ``|J^{-1} g| / |x|`` below
        ``tol``: along a slowly contracting direction a residual below ``tol`` can still
        leave ``x`` ~100 ``tol`` away from the fixed point, and the next step is cheap."""
        if J is None:
            return True
        try:
            corr = np.linalg.solve(J, g)
        except np.linalg.LinAlgError:
            return True
        return bool(np.linalg.norm(corr) <= self.tol * max(np.linalg.norm(x[self.free]), 1e-12))

    def _fd_jacobian(self, x: np.ndarray, g: np.ndarray, alpha: float) -> np.ndarray | None:
        """Jacobian of ``map(x) - x`` on the free entries by forward differences.

        Each difference restarts the inner minimisation from the current minimisers only
        (no other start): the perturbed map then follows the same local minima, so the
        difference is smooth even where the global minimum jumps between basins. Returns
        None if a perturbed state is inadmissible.
        """
        free_idx = np.flatnonzero(self.free)
        n = free_idx.size
        J = np.empty((n, n))
        base_warm = self._warm
        integ = self.integrator
        ws = getattr(integ, "warm_starts", None)
        try:
            if ws is not None:
                integ.warm_starts = 0
            for k, i in enumerate(free_idx):
                d = 1e-6 * max(abs(x[i]), 1e-3)
                xp = x.copy()
                xp[i] += d
                if not self._admissible(xp):
                    d = -d
                    xp[i] = x[i] + d
                    if not self._admissible(xp):
                        return None
                self._warm = base_warm
                rp = self.evaluate_map(xp, alpha, multistart=False)
                J[:, k] = ((rp.x_new - xp)[self.free] - g) / d
        except InvalidStateError:
            return None
        finally:
            if ws is not None:
                integ.warm_starts = ws
            self._warm = base_warm
        return J if np.all(np.isfinite(J)) else None

    def _newton_step(self, x: np.ndarray, g: np.ndarray, J: np.ndarray) -> np.ndarray | None:
        """``x - J^{-1} g`` on the free entries, shortened to stay admissible and to change no
        entry by more than half its size (floor 1e-3); None if no such step exists."""
        try:
            s = np.linalg.solve(J, -g)
        except np.linalg.LinAlgError:
            s = np.linalg.lstsq(J, -g, rcond=1e-12)[0]
        if not np.all(np.isfinite(s)):
            return None
        rel = float(np.max(np.abs(s) / np.maximum(np.abs(x[self.free]), 1e-3)))
        if rel > 0.5:
            s *= 0.5 / rel
        for _ in range(20):
            y = x.copy()
            y[self.free] += s
            if self._admissible(y):
                return y
            s *= 0.5
        return None

    def _damped(self, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        beta = 1.0 - self.damping
        for _ in range(30):
            y = x.copy()
            y[self.free] += beta * g
            if self._admissible(y):
                return y
            beta *= 0.5
        raise InvalidStateError("state", "every damped step along the fixed-point direction (shortened 30 "
                                "times) leaves the admissible domain", dict(zip(self.names, x.tolist())))

    def _damped_admissible(self, x: np.ndarray, g: np.ndarray, alpha: float, full: bool
                           ) -> tuple[np.ndarray, MapResult]:
        """A damped step from ``x`` along ``g`` whose state and image are both admissible (the step
        halved up to 8 times; the last one is kept if none is)."""
        step = self._damped(x, g) - x
        for _ in range(8):
            y = x + step
            try:
                res = self.evaluate_map(y, alpha, multistart=full)
            except InvalidStateError:
                step = 0.5 * step
                continue
            if self._admissible(res.x_new):
                break
            step = 0.5 * step
        else:
            y = x + step
            res = self.evaluate_map(y, alpha, multistart=full)
        return y, res

    def _next(self, x, g, hist_x, hist_g, residuals) -> np.ndarray:
        """Anderson (type II) step with safeguards; damped step otherwise."""
        free = self.free
        hist_x.append(x[free].copy())
        hist_g.append(g.copy())
        if len(hist_x) > self.anderson + 1:
            hist_x.pop(0)
            hist_g.pop(0)
        if self.anderson == 0 or len(hist_x) < 2 or (len(residuals) > 1 and residuals[-1] > 2 * residuals[-2]):
            if len(residuals) > 1 and residuals[-1] > 2 * residuals[-2]:
                del hist_x[:-1], hist_g[:-1]
            return self._damped(x, g)
        dX = np.diff(np.array(hist_x), axis=0).T
        dG = np.diff(np.array(hist_g), axis=0).T
        gamma, *_ = np.linalg.lstsq(dG, g, rcond=1e-12)
        beta = 1.0 - self.damping if len(residuals) < 3 else 1.0
        y = x.copy()
        y[free] = x[free] + beta * g - (dX + beta * dG) @ gamma
        if not self._admissible(y):
            del hist_x[:-1], hist_g[:-1]
            return self._damped(x, g)
        return y

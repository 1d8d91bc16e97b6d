"""One point, solved and reported: the one pipeline of every command that reports a fixed point.

:func:`solve_point` solves the saddle point of a generated model at one ``alpha`` and reports it
-- the fixed point from cold starts (or a warm start), its error bars, the replicon with its bar,
the companion rule's residual, the notes -- with every option of ``replica solve`` in one
:class:`PointOptions`. ``replica solve``, ``replica check``'s theory, the sweeps' ``solve`` kind
and the simulator's comparisons (GLM, GAMP) call it; ``replica phase`` and ``replica figures``
resolve their rules and prox convention through the same :class:`PointOptions`.

Adding an option: a field of :class:`PointOptions` (its default keeps every caller's numbers),
read in :func:`solve_point` (or in :meth:`PointOptions.solver`, for what the solver takes), and
its flag in :func:`replica.cli.commands.common.add_numeric_flags` /
:func:`~replica.cli.commands.common.options_from_args`; CONTRIBUTING.md says the same.
"""
from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import InvalidStateError, ParameterError
from ..interface.generated_model import GeneratedModel
from .accuracy import DEFAULT_ACCURACY, solve_to_accuracy
from .integrators import from_spec
from .prox import ProxConvention, prox_convention
from .report import result_dict
from .rule_plan import plan_line
from .solver import FixedPoint, Solver, iteration_tally
from .stability import perturbed_replicons, replicon_summary, state_error
from .unit_symmetry import unresolved_ties

#: why a number of a point's report can be null
REASONS = {"quadrature_residual": "not computed: the companion rule's map is not defined at this state "
                                  "(it leaves the admissible domain)"}


@dataclass(frozen=True)
class PointOptions:
    """Every option of solving and reporting one point (the flags of ``replica solve``).

    ``quadrature``: the energetic rule (:func:`replica.numeric.integrators.from_spec`; ``None``: the
    solver's own default); ``entropic_quadrature``: ``aligned:N`` or ``gh:N`` for a non-quadratic
    penalty; ``prox``, ``prox_start``, ``prox_saddles``: the minimiser convention
    (:func:`replica.numeric.prox.prox_convention`); ``accuracy``: refine the rules until every bar
    is below it (up to 8 levels; ``None``: one refinement, checked against
    :data:`~replica.numeric.accuracy.DEFAULT_ACCURACY`); ``error_bars=False``: no refinement, no
    bars; ``replicon`` and ``perturbed_replicon`` (the replicon's bar includes what the state's bars
    move it by); ``companion_residual``: the residual under the companion rule; ``scout``: cold
    starts on a cheaper rule first (:meth:`Solver.scout`), else the working rule's cold starts;
    ``keep_rule``: report the working rule's fixed point, the refined one beside it as its error
    (``solve_to_accuracy``'s ``keep_rule``: a rule asked for by name), not the refined one.

    ``rsb``: 1 reports the zero-temperature 1RSB point instead (:mod:`replica.numeric.rsb`; the
    replica-symmetric point, with its bars, is its start and ``rs_train_loss``)."""

    branch: str | None = None
    quadrature: str | None = "auto"
    entropic_quadrature: str | None = None
    prox: str = "global"
    prox_start: Sequence[float] | None = None
    prox_saddles: str | None = None
    tol: float = 1e-8
    max_iter: int = 500
    verbose: bool = False
    accuracy: float | None = None
    error_bars: bool = True
    replicon: bool = True
    perturbed_replicon: bool = True
    companion_residual: bool = True
    scout: bool = True
    keep_rule: bool = False
    rsb: int = 0

    def replace(self, **changes) -> "PointOptions":
        """A copy with some options changed."""
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ what the options resolve to
    def convention(self) -> ProxConvention:
        """The prox convention (a bad value: one line naming ``prox``, ``prox-start`` or ``prox-saddles``)."""
        try:
            return prox_convention(self.prox or "global", self.prox_start, self.prox_saddles)
        except ParameterError as exc:  # name the flag
            raise ParameterError(exc.name.replace("_", "-"), str(exc).split(": ", 1)[-1]) from None

    def rule(self, module: GeneratedModel, branch: str | None = None):
        """The energetic rule or integrator of ``quadrature`` for this convention (``None``: the solver's)."""
        if self.quadrature is None:
            return None
        return from_spec(self.quadrature, module, branch if branch is not None else self.branch, self.convention())

    def entropic_rule(self, module: GeneratedModel):
        """The entropic rule of ``entropic_quadrature`` (``None``: the solver's default)."""
        spec = self.entropic_quadrature
        if spec is None:
            return None
        if module.ENTROPIC != "envelope":
            raise ParameterError("entropic-quadrature", f"{module.MODEL} has a quadratic regularizer: its entropic "
                                                        "average is in closed form, there is no rule to set")
        from .integrators import AlignedEntropicRule
        from .quadrature import parse_rule

        dim = len(module.ENTROPIC_GAUSSIANS)
        kind, _, n = spec.partition(":")
        if kind not in ("aligned", "gh", "gauss-hermite"):
            raise ParameterError("entropic-quadrature", f"expected aligned:N or gh:N, got {spec!r}")
        try:
            if kind == "aligned":
                if module.ENTROPIC_DIM != 1:
                    raise ParameterError("entropic-quadrature", f"aligned rules need a scalar prox (r = 1); "
                                                                f"{module.MODEL} has r = {module.ENTROPIC_DIM}: use gh:N")
                try:
                    order = int(n)
                except ValueError:
                    raise ParameterError("entropic-quadrature", f"bad order in {spec!r} (expected an integer)") from None
                return AlignedEntropicRule(dim, order)
            return parse_rule(spec, dim)
        except ParameterError as exc:
            if exc.name == "entropic-quadrature":
                raise
            message = str(exc)
            if message.startswith(f"{exc.name}: "):  # one name in the line: the flag's
                message = message[len(exc.name) + 2:]
            raise ParameterError("entropic-quadrature", message) from None

    def solver(self, module: GeneratedModel, parameters: Mapping[str, float] | None) -> Solver:
        """The solver of these options (validates the parameters, the branch and the rules: one line each)."""
        entropic = self.entropic_rule(module)
        return Solver(module, parameters, branch=self.branch, rule=self.rule(module), tol=self.tol,
                      max_iter=self.max_iter, verbose=self.verbose, error_estimate=False, entropic_rule=entropic,
                      prox=self.convention())


@dataclass
class Point:
    """A solved and reported point: the fixed point, its report (the JSON object of ``replica
    solve --json``, :data:`REASONS` for its nulls), the solver and the notes of a warm start."""

    fp: FixedPoint
    result: dict[str, Any]
    solver: Solver
    seed: np.ndarray | None = None
    #: the 1RSB point (``PointOptions.rsb = 1``; ``fp`` is then the replica-symmetric point it starts from)
    rsb: Any = None


def solve_point(module: GeneratedModel, parameters: Mapping[str, float] | None, alpha: float,
                options: PointOptions = PointOptions(), *, solver: Solver | None = None,
                x0: np.ndarray | None = None, progress: Callable[[str], None] | None = None,
                stage: Callable[[str], None] | None = None, rsb_module: Any = None) -> Point:
    """Solve ``module`` at ``parameters`` and ``alpha`` and report it (see the module docstring).

    ``solver``: one built by :meth:`PointOptions.solver` (to validate before other work); ``x0``: a
    warm start (a sweep's neighbour; if it fails, the cold starts, with a note); ``progress``: the
    ``--accuracy`` plan and levels; ``stage``: called with each stage's name (long solves name them).
    ``Point.seed`` is the working rule's state before the refinement (a neighbour's warm start).
    ``rsb_module``: the model's 1RSB module (:func:`replica.registry.rsb.load_rsb_module`), which
    ``options.rsb = 1`` needs."""
    if options.rsb and rsb_module is None:
        raise ParameterError("rsb", "a 1RSB point needs the model's 1RSB module (replica.registry.rsb.load_rsb_module)")
    solver = solver or options.solver(module, parameters)
    say = stage or (lambda what: None)
    notes: list[str] = []
    t0 = time.perf_counter()
    tally = iteration_tally()
    iterations = tally.__enter__()  # every solve of the point (scout, starts, refined rules) counts
    try:
        fp = None
        if x0 is not None:
            from ..errors import ConvergenceError

            try:
                fp = solver.solve(alpha, np.asarray(x0, dtype=float))
            except (ConvergenceError, InvalidStateError) as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                notes.append(f"warm start from the neighbour failed ({first}); cold starts")
        if fp is None:
            if options.scout:
                # Cold solves try a few generic starts (a branch can have several solutions at one
                # alpha), on a cheaper rule (Solver.scout); each distinct one is then re-solved on the
                # working rule.
                scout = solver.scout()
                say(f"cold starts on {(scout or solver).integrator.describe()}")
                fp = solver.solve_best(alpha, scout=scout)
            else:
                fp = solver.solve_best(alpha)
    except BaseException:
        tally.__exit__(None, None, None)
        raise
    seed = fp.x
    qres = companion_residual(solver, fp) if options.companion_residual else None
    accuracy = DEFAULT_ACCURACY if options.accuracy is None else options.accuracy
    if options.accuracy is not None and progress is not None:
        progress(plan_line(solver, fp, accuracy, 8))
    res: dict[str, Any]
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="replica-replicon") as pool:
        # The replicon of the ladder's fixed point starts while the jump check finishes (the
        # kernels release the GIL); it stands unless the check moved the solve to another rule.
        early: list = []

        def beside(best) -> None:
            if options.replicon:
                early.append((best, pool.submit(replicon_summary, module, best)))

        try:
            if options.error_bars:
                say("error bars: re-solves on refined rules and with more prox starts, jump check")
                fp = solve_to_accuracy(solver, fp, alpha, accuracy,
                                       max_levels=1 if options.accuracy is None else 8,
                                       progress=progress if options.accuracy is not None else None, beside=beside,
                                       keep_rule=options.keep_rule)
                fp.notes += unresolved_ties(module, solver.branch, fp.x, fp.errors)
        finally:
            tally.__exit__(None, None, None)
        # the whole point's work, not the last rule's (its re-solve from the ladder took 1 iteration)
        fp.iterations, fp.seconds = iterations[0], time.perf_counter() - t0
        if qres is not None:
            fp.quadrature_residual = qres  # of the working rule (a diagnostic; the bars are in errors)
        fp.notes = notes + list(fp.notes)
        res = result_dict(module, fp)
        if options.replicon:
            say("replicon and its error bar")
            # The replicon's bar: its quadrature error plus what the fixed point's own bars move it
            # by (docs/explanation/replicon.md); null where the replicon is not computed.
            perturbed = (pool.submit(perturbed_replicons, module, fp, fp.errors)
                         if fp.errors and options.perturbed_replicon else None)
            res.update(early[0][1].result() if early and early[0][0] is fp else replicon_summary(module, fp))
            if perturbed is not None:
                bar = res.get("replicon_error")
                if bar is not None and res.get("replicon") is not None:
                    bar = bar + state_error(module, fp, fp.errors, base=res["replicon"], perturbed=perturbed.result())
                res["errors"]["replicon"] = bar
    if options.rsb:
        return _rsb_point(module, fp, res, solver, seed, alpha, rsb_module, progress or stage)
    return Point(fp=fp, result=res, solver=solver, seed=seed)


def _rsb_point(module: GeneratedModel, fp: FixedPoint, rs_result: dict, solver: Solver, seed, alpha: float,
               rsb_module: Any, say: Callable[[str], None] | None) -> Point:
    """The 1RSB point from the replica-symmetric one: :func:`replica.numeric.rsb.solve`, its bars, its JSON
    (with the replica-symmetric point's replicon as ``rs_replicon`` / ``rs_stable``)."""
    from . import rsb

    t0 = time.perf_counter()
    rsolver = rsb.RSBSolver(rsb_module, solver, verbose=solver.verbose)
    if say is not None:
        say(f"1RSB on {rsolver.rule.describe()}")
    point = rsb.solve(rsolver, alpha, fp, progress=say)
    point = rsb.with_error_bars(rsolver, point, alpha, progress=say)
    point.seconds = fp.seconds + time.perf_counter() - t0
    res = rsb.result_dict(rsolver, point)
    for key in ("replicon", "rs_stable"):
        if key in rs_result:
            res["rs_replicon" if key == "replicon" else key] = rs_result[key]
    return Point(fp=fp, result=res, solver=solver, seed=seed, rsb=point)


def companion_residual(solver: Solver, fp: FixedPoint) -> float:
    """``quadrature_residual`` of ``fp``: its relative fixed-point residual under the companion
    rule (nan where that map is not defined at this state). A diagnostic; the error bars are
    :mod:`replica.numeric.accuracy`'s."""
    x = fp.x
    try:
        comp = solver.evaluate_map(x, fp.alpha, integrator=solver.integrator.companion(), use_warm=False)
    except InvalidStateError:
        return float("nan")
    return float(np.linalg.norm((comp.x_new - x)[solver.free]) / max(np.linalg.norm(x[solver.free]), 1e-12))


__all__ = ["Point", "PointOptions", "REASONS", "companion_residual", "solve_point"]

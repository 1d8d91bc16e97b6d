"""Fixed-point solver that runs any generated module (see :mod:`replica.codegen`).

One iteration of the saddle-point map (docs/explanation/theory.md §4):

1. energetic side: solve the proximal problem at every quadrature node
   (:func:`replica.numeric.prox.prox`), average ``dF/dx`` at the minimiser to get
   ``grad_x Psi_y`` (envelope theorem) and map it to the conjugates with the
   generated ``energetic_update``;
2. entropic side: the generated ``entropic_update`` gives the new order parameters.

The iteration runs on the free (un-pinned) order parameters with Anderson
acceleration, falling back to damped steps that keep ``damping`` (default 0.8, the
paper's choice) of the old value whenever Anderson proposes an inadmissible state or
increases the residual. Branches pin families to zero (e.g. ``m = 0``): invariant subspaces
of the equations (:mod:`replica.numeric.branches`, :mod:`replica.symbolic.symmetries`).
Non-convergence raises :class:`~replica.errors.ConvergenceError` with the residual
history; an inadmissible state raises :class:`~replica.errors.InvalidStateError`.
"""
from __future__ import annotations

import contextlib
import functools
import math
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Mapping, Sequence

import numpy as np

from ..interface.generated_model import GeneratedModel, as_model
from .baselines import linear_baseline  # noqa: F401  (re-exported: replica.numeric.solver.linear_baseline)
from .branches import FREE, PINNABLE, branch_pinning, pinned
from .compiled import compiled, resolve_backend
from .. import validation
from .convergence import explained_failures, is_converged, runaway
from ..errors import ConvergenceError, InvalidStateError, ParameterError
from .integrators import (TENSOR_ENTROPIC_ORDERS, AlignedEntropicRule, EnergeticAverage, EnergeticIntegrator,
                          LocallyCorrectedIntegrator, QuadratureIntegrator, fold_nodes, preintegration_refusal)
from .kinks import EntropicKinkRule, KinkIntegrator
from .labels import labelled
from .parameters import parameter_vector
from .preintegration import PreintegrationIntegrator, make_integrator
from .prox import ProxConvention, prox, prox_convention
from .quadrature import QuadratureRule, default_rule, gauss_hermite

#: prefix of the note that a branch's solve landed on another branch's solution
BRANCH_NOT_FOUND = "branch not found"
#: the most levels of extra prox starts (:func:`replica.numeric.integrators.extra_starts`)
MAX_EXTRA_STARTS = 5
#: the lowest Gauss-Hermite order per axis of :meth:`Solver.scout`'s second companion level
SCOUT_MIN_ORDER = 7
#: growth of the entropic rule's order per refinement (its integrand is kinked wherever the
#: regularizer is, e.g. soft thresholding: algebraic convergence, so a larger step than the
#: energetic rule's ``+ order // 3``; a 1-2-D rule stays cheap)
ENTROPIC_REFINEMENT = 1.5


#: points per smooth piece of the default :class:`AlignedEntropicRule` (soft thresholding: 1e-14
#: relative from 10 on; 20 leaves room for regularizers with curved pieces)
ALIGNED_ORDER = 20


def default_entropic_rule(module: GeneratedModel) -> "EntropicKinkRule | AlignedEntropicRule | QuadratureRule":
    """The entropic rule of a non-quadratic regularizer when none is given: panels at the module's
    closed-form kinks where it has them (one weight, one atom: :class:`~replica.numeric.kinks.EntropicKinkRule`;
    the aligned rule was 8.5e-4 off on LASSO at alpha = 5 where this one is exact), else aligned with
    the kinks of a scalar (``r = 1``) prox located numerically
    (:class:`~replica.numeric.integrators.AlignedEntropicRule`; tensor Gauss-Hermite wherever its assumptions
    fail at a state), tensor Gauss-Hermite for ``r > 1``."""
    dim = len(module.ENTROPIC_GAUSSIANS)
    if module.ENTROPIC_KINK_RULE:
        # the module's kinks in closed form (one weight, one atom): exact panel boundaries
        return EntropicKinkRule(module)
    if module.ENTROPIC_DIM == 1:
        return AlignedEntropicRule(dim, ALIGNED_ORDER)
    return gauss_hermite(dim, TENSOR_ENTROPIC_ORDERS.get(dim, 12))


@dataclass
class FixedPoint:
    """A solution of the saddle-point equations and its observables.

    ``converged`` is a property, not a claim: ``residual < tol <= 1e-3`` and the state
    ``admissible`` (:func:`replica.numeric.convergence.is_converged`); ``Solver.solve`` returns
    nothing else.

    ``order`` / ``conjugates`` map names (``q``, ``m``, ``theta_1``, ``qhat`` ...) to values.
    ``phi`` is the free entropy, ``train_loss = -phi`` (docs/explanation/theory.md §5), ``eps_g`` the test
    error with its quadrature error estimate ``eps_g_error``; ``observables`` every
    observable the model declares (:mod:`replica.symbolic.observables`, ``eps_g`` first) and
    ``observable_errors`` their quadrature error estimates (``nan`` where none);
    ``quadrature_residual`` is the fixed-point residual of the solution under the companion
    (lower-order) rule, an estimate of the quadrature error on the order parameters.
    """

    model: str
    branch: str
    alpha: float
    parameters: dict[str, float]
    order: dict[str, float]
    conjugates: dict[str, float]
    phi: float
    psi_t: float
    psi_w: float
    psi_y: float
    eps_g: float
    eps_g_error: float
    train_loss: float
    tol: float
    iterations: int
    residual: float
    residuals: list[float] = field(default_factory=list)
    quadrature: str = ""
    quadrature_residual: float = float("nan")
    prox_disagree: int = 0
    prox_failed: int = 0
    #: the prox convention of the equations (``"global"`` or ``"local"``, :class:`replica.numeric.prox.ProxConvention`)
    #: and, under the local one, the nodes whose descent from the start stopped on a saddle
    prox: str = "global"
    prox_saddle: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    observables: dict[str, float] = field(default_factory=dict)
    observable_errors: dict[str, float] = field(default_factory=dict)
    admissible: bool = True
    #: error bars (:mod:`replica.numeric.accuracy`): absolute, by value name (order parameters,
    #: conjugates, observables, ``phi``, ``psi_t``, ``psi_w``, ``psi_y``, ``train_loss``);
    #: empty when none was computed
    errors: dict[str, float] = field(default_factory=dict)
    #: the relative accuracy the bars are checked against, and whether every bar meets it
    #: (``None``: no bars)
    accuracy: float = float("nan")
    accuracy_met: bool | None = None
    #: the rules of the reported values (``energetic``, ``entropic``, ``test``, ``prox_starts``)
    rules: dict[str, str] = field(default_factory=dict)
    #: ``|J^{-1} g|`` at the last iterate, by order parameter: what the iteration left
    iteration_error: dict[str, float] = field(default_factory=dict)
    #: False when a branch's free family vanished (the solve landed on a smaller branch)
    branch_found: bool = True
    #: the same solution on the cheaper rule it was first found on (:meth:`Solver.solve_best`'s
    #: scout), or None: the coarse end of the error bars' convergence check, already solved
    scouted: "FixedPoint | None" = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if not self.observables:  # a FixedPoint built by hand: the test loss at least
            self.observables = {"eps_g": self.eps_g}
            self.observable_errors = {"eps_g": self.eps_g_error}

    @property
    def converged(self) -> bool:
        """Residual below a sane tolerance (``<= 1e-3``) on an admissible state."""
        return is_converged(self.residual, self.tol, self.admissible)

    @property
    def x(self) -> np.ndarray:
        """The order parameters as a vector in the module's ``ORDER_PARAMETERS`` order."""
        return np.array(list(self.order.values()))

    @property
    def xhat(self) -> np.ndarray:
        """The conjugates as a vector in the module's ``CONJUGATES`` order."""
        return np.array(list(self.conjugates.values()))

    def values(self) -> dict[str, float]:
        """Every number the result reports, flat by name: order parameters, conjugates, observables,
        ``phi``, ``psi_t``, ``psi_w``, ``psi_y`` and ``train_loss`` (what error bars are given for)."""
        out = {k: float(v) for k, v in self.order.items()}
        out.update({k: float(v) for k, v in self.conjugates.items()})
        out.update({k: float(v) for k, v in self.observables.items()})
        out.update(phi=self.phi, psi_t=self.psi_t, psi_w=self.psi_w, psi_y=self.psi_y, train_loss=self.train_loss)
        return out

    def to_dict(self) -> dict:
        """JSON-ready summary (order parameters, conjugates and observables at top level, every
        observable with its ``<name>_error``)."""
        out = {k: float(v) for k, v in self.order.items()}
        out.update({k: float(v) for k, v in self.conjugates.items()})
        out.update(observable_dict(self))
        out.update(train_loss=self.train_loss,
                   phi=self.phi, psi_t=self.psi_t, psi_w=self.psi_w, psi_y=self.psi_y,
                   converged=self.converged, tol=self.tol, iterations=self.iterations, residual=self.residual,
                   alpha=self.alpha, branch=self.branch, model=self.model,
                   parameters=dict(self.parameters), quadrature=self.quadrature,
                   quadrature_residual=self.quadrature_residual,
                   prox_disagree=self.prox_disagree, prox_failed=self.prox_failed, prox=self.prox,
                   seconds=self.seconds, notes=list(self.notes))
        return out


def observable_dict(fp: FixedPoint) -> dict[str, float | None]:
    """Every observable of ``fp`` and its error, ``{name: value, name_error: error}`` (the JSON
    form; an error the solver has no estimate for is ``None``, strict JSON)."""
    out: dict[str, float | None] = {}
    for name, v in fp.observables.items():
        out[name] = float(v)
        err = float(fp.observable_errors.get(name, float("nan")))
        out[f"{name}_error"] = err if math.isfinite(err) else None
    return out


@dataclass
class _MapResult:
    x_new: np.ndarray
    xhat: np.ndarray
    psi_y: float
    h: object
    n_disagree: int
    n_failed: int
    psi_w: float = float("nan")
    entropic_observables: np.ndarray | None = None
    n_saddle: int = 0


def _correctable(module: GeneratedModel) -> bool:
    """Whether the local convention's default rule can be a locally corrected one (plain Gaussian
    nodes: no token-cluster labels, no teacher channel's label law)."""
    return not module.DISCRETE and not module.WEIGHTED


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


class Solver:
    """Solve the saddle-point equations of one generated module.

    Parameters
    ----------
    module:
        A generated model (:func:`replica.registry.load_module`).
    parameters:
        Overrides of the model parameters by name (``{"omega": 0.3, "A_12": 0.4}``).
    branch:
        ``None``/``"free"`` or one of ``module.BRANCHES``.
    rule:
        Quadrature rule for the energetic average (default :func:`default_rule`), or any
        :class:`~replica.numeric.integrators.EnergeticIntegrator`.
    test_rule:
        Rule for ``eps_g`` (no proximal step, so a finer rule is cheap).
    tol:
        Relative residual ``|map(x) - x| / |x|`` at which to stop.
    damping:
        Fraction of the old value kept in a plain damped step.
    anderson:
        Anderson memory (0 disables acceleration).
    newton:
        Once the relative residual is below ``newton_switch`` (1e-2; 0.1 when ``x0`` is given,
        i.e. in continuations), take Newton steps on the
        residual ``map(x) - x`` of the free entries: the Jacobian by forward differences
        (one cheap map evaluation per free entry, from the current minimisers), then
        Broyden updates; recomputed when a step fails to halve the residual, Anderson
        again after repeated failures. A warm-started solve then converges in ~5 steps
        instead of ~12. ``False``: Anderson only.
    verbose:
        Print the residual of every iteration to stderr.
    error_estimate:
        Compute :attr:`FixedPoint.quadrature_residual`, the residual of the solution under
        the companion (lower-order) rule: one extra map evaluation from every start, ~10%
        of a solve. On by default; turn it off inside continuations and phase diagrams,
        where only the fixed points matter (the field is then ``nan``). ``eps_g_error``
        (a cheap second test rule) is always computed.
    backend:
        ``"auto"`` (compiled per-node kernels when numba is importable, see
        :mod:`replica.numeric.kernels`), ``"numba"`` or ``"numpy"``. Only used when ``rule`` is
        a quadrature rule (or None).
    prox:
        Which minimiser of the bracket the equations use (:class:`replica.numeric.prox.ProxConvention`):
        ``"global"`` (default, the lowest minimum) or ``"local"`` (the minimum reached by descent
        from ``prox_start``, the origin by default). The local convention runs on quadrature
        rules (a model whose default is the kink-aware rule gets the tensor rule instead).
    """

    def __init__(self, module: GeneratedModel, parameters: Mapping[str, float] | None = None,
                 branch: str | None = None, rule: QuadratureRule | EnergeticIntegrator | None = None,
                 test_rule: QuadratureRule | None = None, tol: float = 1e-8, max_iter: int = 500,
                 damping: float = 0.8, anderson: int = 6, prox_tol: float = 1e-12,
                 verbose: bool = False, error_estimate: bool = True, backend: str = "auto",
                 newton: bool = True, entropic_rule: QuadratureRule | int | None = None,
                 extra_starts: int = 0, prox: ProxConvention | str | None = None, prox_start=None):
        self.module = module = as_model(module)
        self.convention = prox_convention(prox, prox_start)
        if self.convention.local and module.PIECEWISE:
            raise ParameterError("prox", f"the local convention needs a smooth bracket; the loss of {module.MODEL} is "
                                         "piecewise (its prox is exact, and unique where the loss is convex)")
        self.names = list(module.ORDER_PARAMETERS)
        self.conj_names = list(module.CONJUGATES)
        self.p = parameter_vector(module, parameters)
        self.branch = branch or FREE
        pinned_fams = pinned(module, self.branch)  # raises on an unknown branch
        self.pinned = np.zeros(len(self.names), dtype=bool)
        for fam in pinned_fams:
            self.pinned[module.FAMILIES.get(fam, [])] = True
        self.free = ~self.pinned
        dim = len(module.GAUSSIANS)
        self.backend = backend
        resolve_backend(module, backend)  # validates the name (and availability of "numba")
        self.symmetries = self._branch_symmetries()
        # Token clusters: Gaussian rules become products with the label configurations
        # (replica.numeric.labels); z then has len(GAUSSIANS) + len(DISCRETE) coordinates, and a
        # teacher channel's label one more. A channel model with a one-dimensional prox gets
        # the kink-aware rule by default (replica.numeric.kinks), built afresh at every state.
        if rule is None and module.KINK_RULE and not self.convention.local:
            rule = KinkIntegrator(module, backend=backend)
        rule = labelled(rule or _cached_rule("energetic", dim), module, self.p)
        self.integrator = (QuadratureIntegrator(rule, self.symmetries, backend)
                           if isinstance(rule, QuadratureRule) else rule)
        if hasattr(self.integrator, "with_convention"):
            self.integrator = self.integrator.with_convention(self.convention)
        elif self.convention.local and isinstance(self.integrator, (PreintegrationIntegrator, KinkIntegrator)):
            raise ParameterError("prox", f"the local convention runs on quadrature rules, not on "
                                         f"{self.integrator.describe()}; give a rule such as gh:14")
        self.test_rule = labelled(test_rule or _cached_rule("test", dim), module, self.p)
        dim += len(module.DISCRETE) + (1 if module.LABEL_VALUES else 0)
        self.error_estimate = bool(error_estimate)
        # A non-quadratic regularizer: the entropic side is a Moreau envelope averaged over
        # (xi, tau) too, whose integrand has kinks (soft thresholding): a scalar prox gets the
        # rule aligned with them (default_entropic_rule); replica.numeric.kinks.EntropicKinkRule, from the
        # module's symbolic kinks, can be given instead; else a fine tensor rule (r + r_t dims).
        self.entropic_rule = None
        if module.ENTROPIC == "envelope":
            validation.convex_penalty(module, self.p)
            dim_w = len(module.ENTROPIC_GAUSSIANS)
            if entropic_rule is None:
                entropic_rule = default_entropic_rule(module)
            elif isinstance(entropic_rule, (int, np.integer)):
                entropic_rule = gauss_hermite(dim_w, int(entropic_rule))
            if entropic_rule.dim != dim_w:
                raise ParameterError("entropic_rule", f"quadrature dimension must be {dim_w} "
                                                      f"(the entropic Gaussians of {module.MODEL})")
            validation.check_rule(entropic_rule, "entropic_rule")
            self.entropic_rule = entropic_rule
        self.extra_starts = validation.integer(extra_starts, "extra_starts", low=0, high=MAX_EXTRA_STARTS)
        if self.extra_starts:
            if not hasattr(self.integrator, "with_extra_starts"):
                raise ParameterError("extra_starts", f"the integrator {self.integrator.describe()} takes no extra "
                                                     "prox starts")
            self.integrator = self.integrator.with_extra_starts(self.extra_starts)
        self._init = dict(parameters=self.parameter_dict_from(module, self.p), branch=branch,
                          tol=tol, max_iter=max_iter, damping=damping, anderson=anderson, prox_tol=prox_tol,
                          verbose=verbose, error_estimate=error_estimate, backend=backend, newton=newton,
                          prox=self.convention)
        self.newton = bool(newton)
        self.newton_switch = 1e-2
        if self.integrator.dim != dim or self.test_rule.dim != dim:
            raise ParameterError("rule", f"quadrature dimension must be {dim} for {module.MODEL}")
        if not 0 <= damping < 1:
            raise ParameterError("damping", f"must be in [0, 1), got {damping}")
        validation.check_rule(self.integrator)
        tol, max_iter = validation.tolerance(tol), validation.integer(max_iter, "max_iter", low=1)
        self.tol, self.max_iter, self.damping = tol, max_iter, damping
        self.anderson, self.prox_tol, self.verbose = anderson, prox_tol, verbose
        self._warm: np.ndarray | None = None
        self.last_jacobian: np.ndarray | None = None

    # ------------------------------------------------------------ parameters
    def _branch_symmetries(self) -> tuple[tuple[int, ...], ...]:
        """Sign flips of ``z`` (module ``SYMMETRIES``) valid on this branch: those whose
        families are pinned to zero (or are not order parameters of the model)."""
        mod = self.module
        own = set(pinned(mod, self.branch))
        out = []
        for fams, idx in mod.SYMMETRIES:
            if all(f in own or f not in mod.FAMILIES for f in fams):
                out.append(tuple(idx))
        return tuple(out)

    @staticmethod
    def parameter_dict_from(module: GeneratedModel, p: np.ndarray) -> dict[str, float]:
        return dict(zip(module.PARAMETERS, np.asarray(p, dtype=float).tolist()))

    # ------------------------------------------------------------ rules
    def rules(self) -> dict[str, str]:
        """What each average uses: ``energetic``, ``entropic`` (``closed form`` for a quadratic
        regularizer), ``test`` and ``prox_starts`` (the module's starts plus extra ones)."""
        starts = self.module.N_STARTS
        return {"energetic": self.integrator.describe(),
                "entropic": "closed form" if self.entropic_rule is None else self.entropic_rule.describe(),
                "test": self.test_rule.describe(),
                "prox_starts": (self.convention.describe() if self.convention.local else f"{starts} module starts"
                                + (f" + extra level {self.extra_starts}" if self.extra_starts else ""))}

    def refined(self, energetic: bool = True, entropic: bool = True, test: bool = True,
                starts: bool = True, **overrides) -> "Solver":
        """The same problem on finer rules (:meth:`QuadratureRule.refined`, the integrator's
        ``refined()``) and with more prox starts (``extra_starts + 1``): the second solve of an
        error bar (:mod:`replica.numeric.accuracy`). The flags choose which averages are refined; raises
        :class:`ParameterError` (naming the rule) when a refinement exceeds the node budget or
        the integrator has no finer level."""
        integ = self.integrator
        if energetic:
            if not hasattr(integ, "refined"):
                raise ParameterError("quadrature", f"{integ.describe()} has no refined level")
            integ = integ.refined()
        kw = dict(self._init)
        kw.update(overrides)
        ent = self.entropic_rule
        if entropic and ent is not None:
            ent = ent.refined(factor=ENTROPIC_REFINEMENT)
        extra = self.extra_starts + 1 if starts and hasattr(integ, "with_extra_starts") else self.extra_starts
        if extra != self.extra_starts:
            integ = integ.with_extra_starts(extra)
        out = Solver(self.module, rule=integ, test_rule=self.test_rule.refined(factor=1.1) if test else self.test_rule,
                     entropic_rule=ent, **kw)
        out.extra_starts = extra
        return out

    def scout(self, **overrides) -> "Solver | None":
        """A solver of the same problem on a cheaper rule, for :meth:`solve_best`'s cold starts:
        the energetic integrator's companion, and for tensor Gauss-Hermite the companion's own
        companion while its order stays >= :data:`SCOUT_MIN_ORDER` (gh:14 -> gh:7, 16x fewer
        nodes than the working rule). The starts only have to find the basins: every solution
        they find is re-solved on this rule. None where the companion is degenerate."""
        kw = dict(self._init)
        kw.update(error_estimate=False, verbose=False)
        kw.update(overrides)
        try:
            integ = self.integrator
            if isinstance(integ, LocallyCorrectedIntegrator):
                # cold starts only have to find the basins: the local convention on the base's rule
                # (plain, no correction), coarsened as a tensor rule is below
                integ = integ.base.with_convention(self.convention) if hasattr(integ.base, "with_convention") \
                    else integ
            integ = integ.companion()
            if isinstance(integ, QuadratureIntegrator) and integ.rule.kind == "gauss-hermite":
                coarser = integ.companion()
                if coarser.rule.order >= SCOUT_MIN_ORDER:
                    integ = coarser
            return Solver(self.module, rule=integ, test_rule=self.test_rule, entropic_rule=self.entropic_rule, **kw)
        except ParameterError:  # a degenerate companion (gh:4 -> gh:2): the starts on this rule
            return None

    def coarsened(self) -> "Solver":
        """The same problem on the energetic integrator's companion (a lower order), the other
        rules unchanged: the coarse end of an error bar's convergence check (:mod:`replica.numeric.accuracy`)."""
        integ = self.integrator.companion()
        if hasattr(integ, "with_extra_starts") and self.extra_starts:
            integ = integ.with_extra_starts(self.extra_starts)
        out = self._with_integrator(integ)
        out.extra_starts = self.extra_starts
        return out

    def _with_integrator(self, integ: EnergeticIntegrator) -> "Solver":
        """The same problem and settings with the energetic average by ``integ``."""
        return Solver(self.module, rule=integ, test_rule=self.test_rule, entropic_rule=self.entropic_rule,
                      **self._init)

    def jump_aware(self, level: str = "default", direction: np.ndarray | str = "auto") -> "Solver | None":
        """The same problem with the energetic average by the jump-aware pre-integration
        (:func:`replica.numeric.preintegration.make_integrator` at ``level``, along ``direction``), the other
        rules unchanged; None where the working integrator is not a tensor rule (it already is
        jump-aware, or is the kink-aware rule) or the model has no pre-integration
        (:func:`replica.numeric.integrators.preintegration_refusal`)."""
        integ = self.integrator
        if self.convention.local:
            # pre-integration follows the global minimiser: under the local convention it is the
            # base of a locally corrected rule, the global average plus the local correction on
            # randomised points (replica.numeric.integrators.LocallyCorrectedIntegrator)
            if isinstance(integ, LocallyCorrectedIntegrator):
                integ = integ.base
            if (not isinstance(integ, QuadratureIntegrator) or preintegration_refusal(self.module) is not None
                    or not _correctable(self.module)):
                return None
            aware = make_integrator(self.module, level, direction=direction, backend=self.backend)
            return self._with_integrator(LocallyCorrectedIntegrator.around(aware, self.convention, self.backend))
        if not isinstance(integ, QuadratureIntegrator) or preintegration_refusal(self.module) is not None:
            return None
        return self._with_integrator(make_integrator(self.module, level, direction=direction, backend=self.backend))

    @property
    def parameter_dict(self) -> dict[str, float]:
        """The model parameters this solver uses, by name (defaults merged with overrides)."""
        return dict(zip(self.module.PARAMETERS, self.p.tolist()))

    # ------------------------------------------------------------ states
    def initial_state(self) -> np.ndarray:
        """A generic admissible start near the small-``alpha`` end of every branch.

        ``V`` takes its ``alpha -> 0`` value (the entropic update at ``xhat = 0``, e.g.
        ``sigma^2 / lambda`` for l2; ``rho_bar`` if that is not admissible), ``q = rho_bar/5``
        (small, as at small ``alpha``), and the free ``m`` and ``theta`` are set half-way so
        that the iteration does not sit on the symmetric (agnostic) point. Starting from the
        small-``alpha`` side selects the solution connected to the branch at small ``alpha``
        where the equations have several (e.g. the positional branch at ``alpha = 2``).
        """
        mod = self.module
        rb = float(np.mean(mod.rho_bar(self.p)))
        rb = rb if rb > 0 else 1.0
        v0 = np.full(len(self.names), np.nan)
        if self.entropic_rule is None:
            with np.errstate(all="ignore"):
                v0 = np.asarray(mod.entropic_update(np.zeros(len(self.conj_names)), self.p), dtype=float)
        x = np.zeros(len(self.names))
        for fam, idx in mod.FAMILIES.items():
            if fam in ("q", "V"):
                continue
            x[idx] = 0.5 * math.sqrt(0.2 * rb * rb) if fam == "theta" else 0.5
        for i in mod.SYMMETRIC_DIAGONAL:
            if mod.ORDER_PARAMETERS[i].startswith("q"):
                x[i] = 0.2 * rb
            else:
                x[i] = v0[i] if np.isfinite(v0[i]) and 0 < v0[i] < 1e6 else rb
        x[self.pinned] = 0.0
        # With several teacher fields the equal theta entries above can make the teacher's
        # residual covariance rho - theta^T q^-1 theta singular (r = r_t = 2: exactly); shrink
        # them until every validity quantity is clearly positive (other models: unchanged).
        th = self.module.FAMILIES.get("theta", [])
        for _ in range(10):
            vals = np.atleast_1d(np.asarray(self.module.validity(x, self.p), dtype=float))
            if not th or np.all(vals > 1e-3 * rb):
                break
            x[th] *= 0.5
        return x

    def check_state(self, x: np.ndarray) -> None:
        """Raise :class:`InvalidStateError` unless every validity quantity is positive."""
        vals = np.atleast_1d(self.module.validity(x, self.p))
        bad = ~(vals > 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidStateError(self.module.VALIDITY[i],
                                    f"must be positive, got {vals[i]:.3e} at "
                                    + ", ".join(f"{n}={v:.4g}" for n, v in zip(self.names, x)),
                                    dict(zip(self.names, x.tolist())))

    def _admissible(self, x: np.ndarray) -> bool:
        if not np.all(np.isfinite(x)):
            return False
        with np.errstate(all="ignore"):
            vals = np.atleast_1d(self.module.validity(x, self.p))
        return bool(np.all(vals > 0))

    # ------------------------------------------------------------ the map
    def energetic(self, x: np.ndarray, integrator: EnergeticIntegrator | None = None,
                  warm=None, multistart: bool = True) -> EnergeticAverage:
        """``dPsi_y/dx``, ``Psi_y`` and the minimisers by the (default) integrator."""
        integrator = integrator or self.integrator
        return integrator.average(self.module, x, self.p, warm=warm, multistart=multistart,
                                  prox_tol=self.prox_tol)

    def evaluate_map(self, x: np.ndarray, alpha: float, integrator: EnergeticIntegrator | None = None,
                     use_warm: bool = True, multistart: bool = True) -> _MapResult:
        """One application of the saddle-point map ``x -> x_new`` (pinned entries stay 0).

        With ``multistart=False`` the proximal problem starts only from the previous
        minimisers and ``h = omega`` (cheap intermediate iterations); the final
        iterations always use every start, so the global minimum is what converges.
        """
        self.check_state(x)
        same = integrator is None or integrator is self.integrator
        warm = self._warm if (use_warm and same) else None
        avg = self.energetic(x, integrator, warm, multistart)
        if same:
            self._warm = avg.state
        grad = np.array(avg.grad, dtype=float)
        grad[self.pinned] = 0.0
        xhat = np.asarray(self.module.energetic_update(grad, alpha), dtype=float)
        xhat[self.pinned] = 0.0  # conjugate entries are paired one-to-one with order entries
        x_new, psi_w, ent_obs = self._entropic(xhat)
        x_new[self.pinned] = 0.0
        if not np.all(np.isfinite(x_new)):
            raise InvalidStateError("entropic_update", "produced a non-finite state "
                                    "(is lambda + A positive definite?)",
                                    dict(zip(self.conj_names, xhat.tolist())))
        return _MapResult(x_new, xhat, avg.psi_y, avg.state, avg.n_disagree, avg.n_failed, psi_w, ent_obs,
                          getattr(avg, "n_saddle", 0))

    def entropic(self, xhat: np.ndarray) -> tuple[np.ndarray, float]:
        """Order parameters from conjugates, and ``Psi_w`` (``nan`` when it has a closed form).

        Closed form (quadratic regularizer): the generated ``entropic_update``. Moreau
        envelope (general separable regularizer): ``x = -K^{-T} grad Psi_w`` with
        ``grad Psi_w = -E[dB/dxhat at w = prox]`` over the entropic rule, the prox in
        closed form when the module has one, by damped Newton otherwise.
        """
        x, psi_w, _ = self._entropic(xhat)
        return x, psi_w

    def entropic_argmin(self, nodes: np.ndarray, xhat: np.ndarray, tol: float | None = None) -> np.ndarray:
        """The entropic prox ``(r, N)`` at ``nodes`` and conjugates ``xhat``: the module's closed form
        when it has one, the damped-Newton prox otherwise (to ``tol``, default the solver's)."""
        mod = self.module
        if mod.ENTROPIC_ARGMIN:
            return np.asarray(mod.entropic_argmin(nodes, xhat, self.p))
        return prox(_EntropicView(mod), nodes, xhat, self.p, tol=self.prox_tol if tol is None else tol).h

    def entropic_nodes_weights(self, xhat: np.ndarray, argmin) -> tuple[np.ndarray, np.ndarray]:
        """Nodes and weights of the entropic rule at conjugates ``xhat``: the aligned rule places
        them on the prox's smooth pieces (``argmin(nodes)`` is the prox), else its tensor fallback."""
        rule = self.entropic_rule
        if isinstance(rule, EntropicKinkRule):  # the module's symbolic kinks (replica.numeric.kinks)
            return rule.rule(xhat, self.p)
        if isinstance(rule, AlignedEntropicRule):
            nw = rule.nodes_weights(self.module.entropic_bracket, argmin, xhat, self.p)
            if nw is not None:
                return nw
            rule = rule.fallback
        return rule.nodes, rule.weights

    def _entropic(self, xhat: np.ndarray) -> tuple[np.ndarray, float, np.ndarray | None]:
        """:meth:`entropic` and the entropic observables at the entropic minimiser (None without)."""
        mod = self.module
        if self.entropic_rule is None:
            return np.asarray(mod.entropic_update(xhat, self.p), dtype=float), float("nan"), None
        vals = np.atleast_1d(mod.entropic_validity(xhat, self.p))
        bad = ~(vals > 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidStateError(mod.ENTROPIC_VALIDITY[i], f"must be positive, got {vals[i]:.3e}",
                                    dict(zip(self.conj_names, xhat.tolist())))
        def argmin(nodes: np.ndarray) -> np.ndarray:
            return self.entropic_argmin(nodes, xhat)

        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            nodes, weights = self.entropic_nodes_weights(xhat, argmin)
            w = argmin(nodes)
            value = mod.entropic_bracket(w, nodes, xhat, self.p)
            G = mod.entropic_parameter_gradient(w, nodes, xhat, self.p)
            obs = None
            if mod.ENTROPIC_OBSERVABLES:
                obs = np.asarray(mod.entropic_observables(w, nodes, xhat, self.p), dtype=float) @ weights
        x = np.asarray(mod.entropic_from_gradient(-(G @ weights), self.p), dtype=float)
        return x, -float(value @ weights), obs

    # ------------------------------------------------------------ iteration
    @_tallied
    @explained_failures
    def solve(self, alpha: float, x0: np.ndarray | Mapping[str, float] | None = None,
              jacobian: np.ndarray | None = None, cold: bool = False, need_jacobian: bool = False) -> FixedPoint:
        """Iterate to the fixed point at sample complexity ``alpha`` (from ``x0`` if given).

        ``jacobian``: the Newton Jacobian of a nearby solve (:attr:`last_jacobian`, e.g. the same
        point on another rule) to start Newton from without finite differences (with ``x0``).
        ``cold``: ``x0`` is a generic start, not a nearby solution: Newton waits for Anderson as
        from the default start (:meth:`solve_best`'s starts). ``need_jacobian``: end with a Newton
        Jacobian (:attr:`last_jacobian`) even where the iteration converged without one (forward
        differences at the fixed point, warm from its minimisers).

        Returns a converged :class:`FixedPoint` or raises :class:`ConvergenceError` /
        :class:`InvalidStateError` naming the point, the iterations and the residual.
        """
        alpha = validation.sample_complexity(alpha)
        t0 = time.perf_counter()
        x = self.initial_state() if x0 is None else validation.state_vector(x0, self.names)
        x[self.pinned] = 0.0
        self.check_state(x)
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
                x = x_next
            except InvalidStateError:
                # The step left the admissible domain: restart with a damped step.
                hist_x.clear()
                hist_g.clear()
                J, prev = None, None
                x = self._damped(x, g)
                res = self.evaluate_map(x, alpha, multistart=full)
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
        fp.rules = self.rules()
        return fp

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
        qidx = [i for i in self.module.SYMMETRIC_DIAGONAL if self.names[i].startswith("q")]
        mt = [i for f in PINNABLE for i in self.module.FAMILIES.get(f, [])]
        found: list[FixedPoint] = []
        error: Exception | None = None
        first = scout or self
        jacobians: list = []
        # Newton switched on at residual 0.1 (a continuation's setting) can send every generic start
        # away (hinge at lam = 1e-3, alpha = 5: 500 iterations in vain each): if none converged, the
        # starts once more with Newton waiting as from the default start (cold)
        for cold in (False, True):
            for qs, ms in spread:
                x0 = base.copy()
                x0[qidx] *= qs
                x0[mt] *= ms
                try:
                    first._warm = None
                    fp = first.solve(alpha, x0=x0, cold=cold)
                except (ConvergenceError, InvalidStateError) as exc:
                    error = exc
                    continue
                if scout is not None and any(_same_point(fp, d) for d in found):
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
        best = max(found, key=lambda fp: fp.phi)
        distinct = [best]
        for fp in found:
            if all(not _same_point(fp, d) for d in distinct):
                distinct.append(fp)
        if len(distinct) > 1:
            best.notes.append(f"{len(distinct)} distinct fixed points on this branch from {len(spread)} starts; "
                              f"reporting the one with the largest phi (others: "
                              + ", ".join(f"phi={d.phi:.6g}" for d in distinct[1:]) + ")")
        best.seconds = sum(fp.seconds for fp in found)
        return best

    def _branch_notes(self, fp: FixedPoint) -> list[str]:
        """Flag a branch that has merged into a smaller one (a family it leaves free is ~ 0)."""
        if self.branch == FREE:
            return []
        mod = self.module
        own = set(pinned(mod, self.branch))
        x = fp.x
        q = np.array([x[i] for i in mod.SYMMETRIC_DIAGONAL if self.names[i].startswith("q")])
        scale = math.sqrt(max(float(np.mean(q)), 1e-300)) if q.size else 1.0
        notes = []
        for fam in PINNABLE:
            idx = mod.FAMILIES.get(fam, [])
            if fam in own or not idx:
                continue
            size = float(np.max(np.abs(x[idx]))) / scale
            if size < 0.05:
                target = branch_pinning(mod, own | {fam})
                where = f"the {target} one" if target else f"on the subspace {fam} = 0"
                notes.append(f"{BRANCH_NOT_FOUND}: {fam} is {size:.1e} of sqrt(q), so this is not a {self.branch} "
                             f"fixed point but (within quadrature accuracy) {where}; no {self.branch} solution was "
                             f"found at this alpha from the starts tried (see 'replica phase' for where the "
                             f"{self.branch} branch ends)")
        return notes

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

    def _warm_only_map(self, x: np.ndarray, alpha: float) -> _MapResult:
        """The map with the inner minimisation started from the current minimisers only."""
        integ = self.integrator
        ws = getattr(integ, "warm_starts", None)
        if ws is None or self._warm is None:
            return self.evaluate_map(x, alpha, multistart=False)
        try:
            integ.warm_starts = 0
            return self.evaluate_map(x, alpha, multistart=False)
        finally:
            integ.warm_starts = ws

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

    # ------------------------------------------------------------ observables
    def _observables(self, x, res: _MapResult, alpha, residuals, it) -> FixedPoint:
        mod = self.module
        xhat = res.xhat
        psi_t = float(mod.trace_potential(x, xhat))
        psi_w = res.psi_w if self.entropic_rule is not None else float(mod.entropic_potential(xhat, self.p))
        phi = psi_t + psi_w + alpha * res.psi_y
        # Quadrature error estimate: residual of this state under the companion rule.
        qres = float("nan")
        if self.error_estimate:
            try:
                comp = self.evaluate_map(x, alpha, integrator=self.integrator.companion(), use_warm=False)
                qres = float(np.linalg.norm((comp.x_new - x)[self.free]) / max(np.linalg.norm(x[self.free]), 1e-12))
            except InvalidStateError:
                pass
        x_rep, xh_rep = self._fix_signs(x, xhat)
        # the observables of the reported state (sign convention applied)
        values, errors = self.test_observables(x_rep)
        ent = res.entropic_observables
        if ent is not None and not np.array_equal(xh_rep, xhat):
            ent = self._entropic(xh_rep)[2]
        for name, v in zip(mod.ENTROPIC_OBSERVABLES, () if ent is None else ent):
            values[name], errors[name] = float(v), float("nan")
        fp = FixedPoint(
            model=mod.MODEL, branch=self.branch, alpha=float(alpha), parameters=self.parameter_dict,
            order=dict(zip(self.names, x_rep.tolist())), conjugates=dict(zip(self.conj_names, xh_rep.tolist())),
            phi=phi, psi_t=psi_t, psi_w=psi_w, psi_y=res.psi_y, eps_g=values["eps_g"],
            eps_g_error=errors["eps_g"], train_loss=-phi, tol=self.tol, iterations=it, residual=residuals[-1],
            residuals=residuals, quadrature=self.integrator.describe(), quadrature_residual=qres,
            prox_disagree=res.n_disagree, prox_failed=res.n_failed, prox=self.convention.kind,
            prox_saddle=res.n_saddle, observables=values, observable_errors=errors,
            admissible=self._admissible(x) and bool(np.all(np.isfinite(xhat))))
        if res.n_saddle:
            fp.notes.append(f"the descent from the local convention's start stopped on a saddle at {res.n_saddle} "
                            "nodes (the start lies on a boundary between basins there): each counts half for the "
                            "minimum on either side, never the saddle itself")
        return fp

    def _fix_signs(self, x: np.ndarray, xhat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flip ``m`` / ``theta`` (and conjugates) to the sign convention ``m, theta >= 0``."""
        x, xhat = x.copy(), xhat.copy()
        for fam in self.module.SIGN_FLIPS:
            idx = self.module.FAMILIES.get(fam, [])
            if idx and x[idx[0]] < 0:
                x[idx] *= -1
                xhat[idx] *= -1
        return x, xhat

    def test_error(self, x: np.ndarray, estimate: bool = True) -> tuple[float, float]:
        """``eps_g = E l(m + g, h*)`` (no proximal step) and a two-order error estimate
        (``nan`` when ``estimate`` is false)."""
        values, errors = self.test_observables(x, estimate)
        return values["eps_g"], errors["eps_g"]

    def test_observables(self, x: np.ndarray, estimate: bool = True) -> tuple[dict[str, float], dict[str, float]]:
        """Every test-point observable (module ``TEST_OBSERVABLES``, ``eps_g`` first) at state
        ``x`` on the test rule, and a two-order error estimate of each (``nan`` when ``estimate``
        is false)."""
        x = np.asarray(x, dtype=float)
        names = self.module.TEST_OBSERVABLES
        if isinstance(self.integrator, KinkIntegrator):
            # the test integrands have their own discontinuities (e.g. omega = 0 of a
            # classification error): a kink-aware rule at this state, and its companion
            rule = self.integrator.test_rule(x, self.p)
            comp = self.integrator.companion().test_rule(x, self.p) if estimate else None
            sym: tuple = ()
        else:
            rule, sym = self.test_rule, self.symmetries
            comp = _companion(self.test_rule) if estimate else None
        fine = self._test_average(*fold_nodes(rule.nodes, rule.weights, sym), x)
        if comp is None:
            err = np.full(len(names), np.nan)
        else:
            err = np.abs(fine - self._test_average(*fold_nodes(comp.nodes, comp.weights, sym), x))
        values = dict(zip(names, fine.tolist()))
        errors = dict(zip(names, err.tolist()))
        for name, v in zip(self.module.STATE_OBSERVABLES, self._state_observables(x)):
            values[name], errors[name] = float(v), 0.0
        return values, errors

    def _state_observables(self, x: np.ndarray) -> np.ndarray:
        """The state observables (functions of the order parameters) at ``x``."""
        if not self.module.STATE_OBSERVABLES:
            return np.empty(0)
        with np.errstate(all="ignore"):
            return np.atleast_1d(np.asarray(self.module.state_observables(x, self.p), dtype=float))

    def _test_average(self, nodes: np.ndarray, weights: np.ndarray, x: np.ndarray) -> np.ndarray:
        mod = self.module
        if resolve_backend(mod, self.backend) == "numba":
            out = np.zeros(mod.N_OBSERVABLES)
            compiled(mod).node_test_average(nodes, weights, x, self.p, out)
            return out
        with np.errstate(over="ignore", under="ignore"):
            return np.asarray(mod.test_observables(nodes, x, self.p), dtype=float) @ weights


def _same_point(a: FixedPoint, b: FixedPoint) -> bool:
    """Two fixed points within ``1e-4`` relative of each other (one solution, found twice)."""
    return bool(np.linalg.norm(a.x - b.x) <= 1e-4 * max(np.linalg.norm(b.x), 1e-12))


def default_test_rule(dim: int) -> QuadratureRule:
    """The rule for ``eps_g`` when none is given (a smooth integrand: no proximal step).

    Gauss-Hermite 20 per axis up to 4 dimensions: within 5e-13 of order 40 at the paper's
    semantic point and 3e-10 (relative 1e-7) over the states probed, at half the cost of
    order 24."""
    return gauss_hermite(dim, 20) if dim <= 4 else default_rule(dim, "high")


@lru_cache(maxsize=16)
def _cached_rule(kind: str, dim: int) -> QuadratureRule:
    # Default rules are shared by every Solver (building and folding 24^4 nodes costs ~0.1 s).
    return default_rule(dim) if kind == "energetic" else default_test_rule(dim)


_COMPANIONS: dict[int, tuple[QuadratureRule, QuadratureRule]] = {}


def _companion(rule: QuadratureRule) -> QuadratureRule:
    hit = _COMPANIONS.get(id(rule))
    if hit is None or hit[0] is not rule:
        hit = (rule, rule.companion())
        if len(_COMPANIONS) > 16:
            _COMPANIONS.clear()
        _COMPANIONS[id(rule)] = hit
    return hit[1]


def solve(module: GeneratedModel, alpha: float, branch: str | None = None,
          parameters: Mapping[str, float] | None = None, **kwargs) -> FixedPoint:
    """Convenience wrapper: ``Solver(module, parameters, branch, **kwargs).solve(alpha)``."""
    return Solver(module, parameters, branch, **kwargs).solve(alpha)


def order_vector(module: GeneratedModel, values: Mapping[str, float] | Sequence[float]) -> np.ndarray:
    """An order-parameter vector in ``module.ORDER_PARAMETERS`` order from a mapping or sequence."""
    if isinstance(values, Mapping):
        return np.array([float(values[n]) for n in module.ORDER_PARAMETERS])
    return np.asarray(values, dtype=float)


class _EntropicView:
    """The entropic functions of a module under the names :func:`replica.numeric.prox.prox` uses."""

    PIECEWISE = False  # the entropic bracket's prox is Newton's

    def __init__(self, module: GeneratedModel):
        self.PROX_DIM = module.ENTROPIC_DIM
        self.N_STARTS = module.ENTROPIC_N_STARTS
        self.bracket = module.entropic_bracket
        self.bracket_newton = module.entropic_bracket_newton
        self.prox_starts = module.entropic_starts

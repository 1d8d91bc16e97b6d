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

:class:`Solver` is composed by concern, one module each:

* :mod:`replica.numeric.solver_state` -- admissibility, the generic start, branches, signs;
* :mod:`replica.numeric.saddle_map` -- one evaluation of the map (energetic and entropic sides);
* :mod:`replica.numeric.iteration` -- the iteration (Anderson, Newton, damping), cold starts;
* :mod:`replica.numeric.solver_observables` -- the numbers reported at a state;
* :mod:`replica.numeric.solver_rules` -- the rules, and the same problem on finer, coarser or
  jump-aware ones (error bars);
* :mod:`replica.numeric.fixed_point` -- the result, :class:`FixedPoint`.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .. import validation
from ..errors import ParameterError
from .baselines import linear_baseline  # noqa: F401  (re-exported: replica.numeric.solver.linear_baseline)
from .branches import FREE, pinned
from .compiled import resolve_backend
from .fixed_point import FixedPoint, observable_dict  # noqa: F401  (re-exported)
from ..interface.generated_model import GeneratedModel, as_model
from .integrators import EnergeticIntegrator, QuadratureIntegrator
from .iteration import ITERATION_SAFETY, FixedPointIteration, iteration_tally  # noqa: F401  (re-exported)
from .kinks import KinkIntegrator
from .labels import labelled
from .loss_bounds import check_loss_bounded
from .parameters import parameter_vector
from .preintegration import PreintegrationIntegrator
from .prox import ProxConvention, prox_convention
from .quadrature import QuadratureRule, gauss_hermite
from .saddle_map import ALIGNED_ORDER, SaddlePointMap, default_entropic_rule  # noqa: F401  (re-exported)
from .solver_observables import SADDLE_NOTE, ReportedNumbers, _cached_rule, default_test_rule  # noqa: F401  (re-exported)
from .solver_rules import ENTROPIC_REFINEMENT, SolverRules  # noqa: F401  (re-exported)
from .solver_state import BRANCH_NOT_FOUND, SolverState  # noqa: F401  (re-exported)
from .unit_symmetry import tie_projection

#: the most levels of extra prox starts (:func:`replica.numeric.integrators.extra_starts`)
MAX_EXTRA_STARTS = 5


class Solver(SolverRules, FixedPointIteration, ReportedNumbers, SaddlePointMap, SolverState):
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
        Rule for the test-point observables (no proximal step, so a finer rule is cheap). By default
        a kink-aware energetic integrator's own test rule, and for a model with a kink-aware rule
        (``KINK_RULE``: a channel GLM) the kink-aware test rule (boundaries at the observables'
        discontinuities, e.g. ``omega = 0`` of a classification error) whatever the energetic rule
        and prox convention: the observables are functions of the order parameters only (a
        quadrature rule given here is then not used). A :class:`~replica.numeric.kinks.KinkIntegrator`
        given here is that rule (its ``test_rule`` at every state).
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
        ``"auto"`` (compiled per-node kernels when numba is importable and the inner
        minimisation has two or more dimensions, see :func:`replica.numeric.compiled.resolve_backend`
        and :mod:`replica.numeric.kernels`), ``"numba"`` or ``"numpy"``. Only used when ``rule`` is
        a quadrature rule (or None).
    prox:
        Which minimiser of the bracket the equations use (:class:`replica.numeric.prox.ProxConvention`):
        ``"global"`` (default, the lowest minimum) or ``"local"`` (the minimum reached by descent
        from ``prox_start``, the origin by default). The local convention runs on quadrature
        rules (a model whose default is the kink-aware rule gets the tensor rule instead).
    """

    def __init__(self, module: GeneratedModel, parameters: Mapping[str, float] | None = None,
                 branch: str | None = None, rule: QuadratureRule | EnergeticIntegrator | None = None,
                 test_rule: QuadratureRule | KinkIntegrator | None = None, tol: float = 1e-8, max_iter: int = 500,
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
        self.project = tie_projection(module, self.branch)  # a unit branch's ties (unit_symmetry)
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
        # The test-point observables see no prox: their rule follows the model, never the energetic
        # rule or the convention (a Gauss-Hermite rule on a classification error's step at omega = 0
        # is ~1e-2 off, with a companion estimate ten times smaller).
        self.test_kinks: KinkIntegrator | None = None
        if isinstance(test_rule, KinkIntegrator):
            self.test_kinks, test_rule = test_rule, None
        elif isinstance(self.integrator, KinkIntegrator):  # (a line rule too: its test rule has the kinks)
            self.test_kinks = self.integrator
        elif module.KINK_RULE:
            self.test_kinks = KinkIntegrator(module, backend=backend)
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
        check_loss_bounded(module, self.p, self.initial_state())  # a bracket with no minimum: refused


def solve(module: GeneratedModel, alpha: float, branch: str | None = None,
          parameters: Mapping[str, float] | None = None, **kwargs) -> FixedPoint:
    """Convenience wrapper: ``Solver(module, parameters, branch, **kwargs).solve(alpha)``."""
    return Solver(module, parameters, branch, **kwargs).solve(alpha)


def order_vector(module: GeneratedModel, values: Mapping[str, float] | Sequence[float]) -> np.ndarray:
    """An order-parameter vector in ``module.ORDER_PARAMETERS`` order from a mapping or sequence."""
    if isinstance(values, Mapping):
        return np.array([float(values[n]) for n in module.ORDER_PARAMETERS])
    return np.asarray(values, dtype=float)

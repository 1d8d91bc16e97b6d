"""How the phase machinery solves points (:class:`SolverSettings`) and steps along ``alpha``
(:class:`StepControl`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..interface.generated_model import GeneratedModel
from ..errors import ParameterError
from ..numeric.integrators import from_spec
from ..numeric.prox import GLOBAL, ProxConvention
from ..numeric.quadrature import QuadratureRule
from ..numeric.solver import ENTROPIC_REFINEMENT, Solver


@dataclass(frozen=True)
class SolverSettings:
    """How every point is solved.

    ``rule`` is a :class:`~replica.numeric.quadrature.QuadratureRule`, an energetic integrator, a
    spec string for :func:`~replica.numeric.quadrature.parse_rule` (``"fast"``, ``"gh:10"``) or
    ``"preint:fast|default|high"`` (:func:`replica.numeric.preintegration.make_integrator`), ``None``
    (the solver's default), or a mapping branch -> any of these (key ``"default"`` for the
    others), e.g. ``{"positional": "preint:fast", "default": "gh:12"}``. ``max_iter`` is kept
    moderate: a warm-started point converges in tens of iterations, and a point that does not is
    the end of a branch. ``error_estimate``: the solver's companion-rule residual per point
    (off: ~10% faster, ``quadrature_residual`` is then nan; ``eps_g_error`` is always there).
    ``prox``: the prox convention of every point (:class:`replica.numeric.prox.ProxConvention`).
    """

    rule: Any = None
    test_rule: QuadratureRule | None = None
    tol: float = 1e-8
    max_iter: int = 200
    error_estimate: bool = False
    entropic_rule: QuadratureRule | None = None
    prox: ProxConvention = GLOBAL

    def refined(self, module: GeneratedModel, branches) -> "SolverSettings":
        """These settings with every rule refined once (the energetic integrator of each of
        ``branches``, the test rule, the entropic rule): the second pass of an error bar."""
        from dataclasses import replace

        rules = {}
        for b in branches:
            r = Solver(module, None, b, rule=self.rule_for(module, b), error_estimate=False, prox=self.prox)
            rules[b] = r.integrator.refined()
            test = r.test_rule.refined(factor=1.1)
            ent = r.entropic_rule
        return replace(self, rule=rules, test_rule=test,
                       entropic_rule=None if ent is None else ent.refined(factor=ENTROPIC_REFINEMENT))

    def rule_for(self, module: GeneratedModel, branch: str) -> Any:
        """The rule / integrator object for ``branch`` (resolving per-branch maps and specs)."""
        rule = self.rule
        if isinstance(rule, Mapping):
            rule = rule.get(branch, rule.get("default"))
        return from_spec(rule, module, branch, self.prox)

    def make_solver(self, module: GeneratedModel, parameters: Mapping[str, float] | None,
                    branch: str) -> Solver:
        """A :class:`~replica.numeric.solver.Solver` of ``branch`` with these settings."""
        return Solver(module, parameters, branch, rule=self.rule_for(module, branch), test_rule=self.test_rule,
                      tol=self.tol, max_iter=self.max_iter, error_estimate=self.error_estimate,
                      entropic_rule=self.entropic_rule, prox=self.prox)


@dataclass(frozen=True)
class StepControl:
    """Adaptive continuation step in ``alpha``.

    ``initial``/``min``/``max``: absolute step bounds; near ``alpha = 0`` the order
    parameters scale like ``alpha``, so steps are also capped at ``max_rel * alpha`` and
    the smallest step is ``min(min, min_rel * alpha)``. ``target`` is the aimed-at
    relative distance between the extrapolated and the converged state; a point farther
    than ``jump`` is rejected as a jump to another solution. A branch whose defining
    families (:func:`replica.numeric.branches.defining_families`) have relative size below ``merge``
    has merged into the branch it merges into; so has one whose relative size is below
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

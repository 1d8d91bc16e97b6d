"""The rules of a :class:`~replica.numeric.solver.Solver` and the same problem on other rules.

An error bar compares a solve with the same problem on finer rules (:meth:`SolverRules.refined`),
on the energetic companion (:meth:`SolverRules.coarsened`), on a cheaper scout for cold starts
(:meth:`SolverRules.scout`) and on the jump-aware pre-integration (:meth:`SolverRules.jump_aware`)
(:mod:`replica.numeric.accuracy`). Each is a new solver of the same class with the same settings.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .integrators import EnergeticIntegrator, LocallyCorrectedIntegrator, QuadratureIntegrator, preintegration_refusal
from .kinks import KinkIntegrator
from .preintegration import make_integrator
from .quadrature import QuadratureRule
from .saddle_map import correctable

#: the lowest Gauss-Hermite order per axis of :meth:`Solver.scout`'s second companion level
SCOUT_MIN_ORDER = 7
#: growth of the entropic rule's order per refinement (its integrand is kinked wherever the
#: regularizer is, e.g. soft thresholding: algebraic convergence, so a larger step than the
#: energetic rule's ``+ order // 3``; a 1-2-D rule stays cheap)
ENTROPIC_REFINEMENT = 1.5


class SolverRules:
    """What each average of a :class:`~replica.numeric.solver.Solver` uses, and the same solver on other
    rules (module docstring)."""

    def rules(self) -> dict[str, str]:
        """What each average uses: ``energetic``, ``entropic`` (``closed form`` for a quadratic
        regularizer), ``test`` and ``prox_starts`` (the module's starts plus extra ones)."""
        starts = self.module.N_STARTS
        return {"energetic": self.integrator.describe(),
                "entropic": (self.module.ENTROPIC_DESCRIPTION if self.entropic_rule is None
                             else self.entropic_rule.describe()),
                "test": self.describe_test(),
                "prox_starts": (self.convention.describe() if self.convention.local else f"{starts} module starts"
                                + (f" + extra level {self.extra_starts}" if self.extra_starts else ""))}

    def describe_test(self) -> str:
        """The rule of the test-point observables, in one line (reports and cache keys)."""
        if self.test_kinks is not None:
            return f"{self.test_kinks.describe()} at the test fields"
        return self.test_rule.describe()

    @property
    def test_rule_argument(self) -> "QuadratureRule | KinkIntegrator":
        """What ``test_rule=`` reproduces this solver's test rule in a derived solver."""
        return self.test_kinks if self.test_kinks is not None else self.test_rule

    def refined_test_rule(self) -> "QuadratureRule | KinkIntegrator":
        """:attr:`test_rule_argument` one level finer (the test side of an error bar)."""
        if self.test_kinks is not None:
            return self.test_kinks.refined()
        return self.test_rule.refined(factor=1.1)

    def _derived_test_rule(self) -> "QuadratureRule | KinkIntegrator":
        """The test rule of a solver on another energetic integrator: this one's, unless it is the
        energetic kink rule itself (then the derived solver's own integrator serves)."""
        return self.test_rule if self.test_kinks is self.integrator else self.test_rule_argument

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
        ent, module = self.entropic_rule, self.module
        if entropic and ent is not None:
            ent = ent.refined(factor=ENTROPIC_REFINEMENT)
        if entropic and module.refined_entropic is not None:  # a closed form summed on a rule's nodes
            module = module.refined_entropic()
        extra = self.extra_starts + 1 if starts and hasattr(integ, "with_extra_starts") else self.extra_starts
        if extra != self.extra_starts:
            integ = integ.with_extra_starts(extra)
        out = type(self)(module, rule=integ,
                         test_rule=self.refined_test_rule() if test else self._derived_test_rule(),
                         entropic_rule=ent, **kw)
        out.extra_starts = extra
        return out

    @property
    def entropic_refinable(self) -> bool:
        """Whether the entropic side has a finer level for an error bar: a non-quadratic
        regularizer's rule, or a closed form summed on a rule's nodes (the module's
        ``refined_entropic``, e.g. a continuous spectral law, :mod:`replica.numeric.spectrum`)."""
        return self.entropic_rule is not None or self.module.refined_entropic is not None

    def scout(self, **overrides) -> "Solver | None":
        """A solver of the same problem on a cheaper rule, for :meth:`solve_best`'s cold starts:
        the energetic integrator's companion, and for tensor Gauss-Hermite the companion's own
        companion while its order stays >= :data:`SCOUT_MIN_ORDER` (gh:14 -> gh:7, 16x fewer
        nodes than the working rule). The starts only have to find the basins: every solution
        they find is re-solved on this rule. None where the companion is degenerate."""
        kw = dict(self._init)
        kw.update(error_estimate=False)  # verbose stays: the scout's iterations are most of a cold solve's
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
            return type(self)(self.module, rule=integ, test_rule=self._derived_test_rule(),
                              entropic_rule=self.entropic_rule, **kw)
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
        return type(self)(self.module, rule=integ, test_rule=self._derived_test_rule(),
                          entropic_rule=self.entropic_rule, **self._init)

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
                    or not correctable(self.module)):
                return None
            aware = make_integrator(self.module, level, direction=direction, backend=self.backend)
            return self._with_integrator(LocallyCorrectedIntegrator.around(aware, self.convention, self.backend))
        if not isinstance(integ, QuadratureIntegrator) or preintegration_refusal(self.module) is not None:
            return None
        return self._with_integrator(make_integrator(self.module, level, direction=direction, backend=self.backend))

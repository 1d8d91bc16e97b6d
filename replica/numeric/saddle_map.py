"""One application of the saddle-point map ``x -> x_new`` (docs/explanation/theory.md §4).

1. energetic side: the proximal problem at every node of the energetic integrator, ``dPsi_y/dx`` at
   the minimisers (envelope theorem), mapped to the conjugates by the generated ``energetic_update``;
2. entropic side: the generated ``entropic_update`` (quadratic regularizer), or the Moreau envelope
   averaged on the entropic rule (any separable convex regularizer).

:class:`SaddlePointMap` is the part of :class:`~replica.numeric.solver.Solver` that evaluates it
(pinned entries stay 0); the iteration that drives it to a fixed point is :mod:`replica.numeric.iteration`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidStateError
from ..interface.generated_model import GeneratedModel
from .integrators import TENSOR_ENTROPIC_ORDERS, AlignedEntropicRule, EnergeticAverage, EnergeticIntegrator
from .kinks import EntropicKinkRule
from .prox import prox
from .quadrature import QuadratureRule, gauss_hermite

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
class MapResult:
    """One evaluation of the map: the new state, the conjugates, ``Psi_y`` and ``Psi_w``, the
    integrator's minimisers (``h``, the next warm start) and its prox diagnostics."""

    x_new: np.ndarray
    xhat: np.ndarray
    psi_y: float
    h: object
    n_disagree: int
    n_failed: int
    psi_w: float = float("nan")
    entropic_observables: np.ndarray | None = None
    n_saddle: int = 0


def correctable(module: GeneratedModel) -> bool:
    """Whether the local convention's default rule can be a locally corrected one (plain Gaussian
    nodes: no token-cluster labels, no teacher channel's label law)."""
    return not module.DISCRETE and not module.WEIGHTED


class EntropicView:
    """The entropic functions of a module under the names :func:`replica.numeric.prox.prox` uses."""

    PIECEWISE = False  # the entropic bracket's prox is Newton's

    def __init__(self, module: GeneratedModel):
        self.PROX_DIM = module.ENTROPIC_DIM
        self.N_STARTS = module.ENTROPIC_N_STARTS
        self.bracket = module.entropic_bracket
        self.bracket_newton = module.entropic_bracket_newton
        self.prox_starts = module.entropic_starts


class SaddlePointMap:
    """The saddle-point map of a :class:`~replica.numeric.solver.Solver` (module docstring): reads the
    solver's ``module``, parameters ``p``, ``pinned`` entries, ``integrator``, ``entropic_rule``,
    ``prox_tol`` and keeps the minimisers of the last evaluation (``_warm``) for the next one."""

    def energetic(self, x: np.ndarray, integrator: EnergeticIntegrator | None = None,
                  warm=None, multistart: bool = True) -> EnergeticAverage:
        """``dPsi_y/dx``, ``Psi_y`` and the minimisers by the (default) integrator."""
        integrator = integrator or self.integrator
        return integrator.average(self.module, x, self.p, warm=warm, multistart=multistart,
                                  prox_tol=self.prox_tol)

    def evaluate_map(self, x: np.ndarray, alpha: float, integrator: EnergeticIntegrator | None = None,
                     use_warm: bool = True, multistart: bool = True) -> MapResult:
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
        if self.project is not None:
            xhat = self.project(xhat)
        x_new, psi_w, ent_obs = self._entropic(xhat)
        x_new[self.pinned] = 0.0
        if self.project is not None:
            x_new = self.project(x_new)
        if not np.all(np.isfinite(x_new)):
            raise InvalidStateError("entropic_update", "produced a non-finite state "
                                    "(is lambda + A positive definite?)",
                                    dict(zip(self.conj_names, xhat.tolist())))
        return MapResult(x_new, xhat, avg.psi_y, avg.state, avg.n_disagree, avg.n_failed, psi_w, ent_obs,
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
        return prox(EntropicView(mod), nodes, xhat, self.p, tol=self.prox_tol if tol is None else tol).h

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

    def _warm_only_map(self, x: np.ndarray, alpha: float) -> MapResult:
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

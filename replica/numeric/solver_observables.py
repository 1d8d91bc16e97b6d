"""What a :class:`~replica.numeric.solver.Solver` reports at a state: potentials, observables, their errors.

At a state ``x`` (a fixed point, or a nearby state for a first-order estimate) and the map's result
there: the free entropy ``phi = Psi_t + Psi_w + alpha Psi_y``, the test-point observables on the
test rule with a two-order error estimate (``eps_g`` first), the state and entropic observables,
and the residual under the companion rule (an estimate of the quadrature error on the order
parameters), collected into a :class:`~replica.numeric.fixed_point.FixedPoint`.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..errors import InvalidStateError
from .compiled import compiled, resolve_backend
from .fixed_point import FixedPoint
from .integrators import fold_nodes
from .quadrature import QuadratureRule, default_rule, gauss_hermite
from .saddle_map import MapResult

#: how the note on the local convention's saddles starts: it counts its own rule's nodes (the
#: ``prox_saddle`` of its fixed point), so it is not carried to another rule's fixed point
SADDLE_NOTE = "the descent from the local convention's start stopped"


class ReportedNumbers:
    """The numbers of a :class:`~replica.numeric.solver.Solver` at a state (module docstring)."""

    def _observables(self, x, res: MapResult, alpha, residuals, it) -> FixedPoint:
        mod = self.module
        xhat = res.xhat
        psi_t = float(mod.trace_potential(x, xhat))
        psi_w = res.psi_w if self.entropic_rule is not None else float(mod.entropic_potential(xhat, self.p))
        phi = psi_t + psi_w + alpha * res.psi_y
        # Quadrature error estimate: residual of this state under the companion rule.
        qres = float("nan")
        self._companion_map = None
        if self.error_estimate:
            try:
                comp = self.evaluate_map(x, alpha, integrator=self.integrator.companion(), use_warm=False)
                self._companion_map = (x.copy(), comp.x_new)
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
            where = f"{res.n_saddle} nodes of {self.integrator.describe()}"
            fp.notes.append(f"{SADDLE_NOTE} on a stationary point that is no minimum at {where}: kept there, as the "
                            "convention's saddles = 'stay' asks (the default counts each half for the minimum on "
                            "either side)" if self.convention.saddles == "stay" else
                            f"{SADDLE_NOTE} on a saddle at {where} (the start lies on a boundary between basins "
                            "there): each counts half for the minimum on either side, never the saddle itself")
        return fp

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
        if self.test_kinks is not None:
            # the test integrands have their own discontinuities (e.g. omega = 0 of a
            # classification error): a kink-aware rule at this state, and its companion
            rule = self.test_kinks.test_rule(x, self.p)
            comp = self.test_kinks.companion().test_rule(x, self.p) if estimate else None
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

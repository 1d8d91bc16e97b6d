"""The result of a solve: a fixed point of the saddle-point equations and every number it reports.

:class:`FixedPoint` holds the order parameters, conjugates, potentials, observables and their error
bars; :func:`observable_dict` is their strict-JSON form; :func:`same_point` says whether two solves
found one solution. :class:`~replica.numeric.solver.Solver` produces them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .convergence import is_converged


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


def same_point(a: FixedPoint, b: FixedPoint) -> bool:
    """Two fixed points within ``1e-4`` relative of each other (one solution, found twice)."""
    return bool(np.linalg.norm(a.x - b.x) <= 1e-4 * max(np.linalg.norm(b.x), 1e-12))

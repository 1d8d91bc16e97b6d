"""Zero-temperature 1RSB, numerically: nested averages, the saddle point, the Parisi parameter and bars.

The equations are :mod:`replica.symbolic.rsb`'s (docs/how-to/rsb.md); their node functions come from the
model's 1RSB module (:mod:`replica.codegen.rsb`), read here into an :class:`RSBModel`. What is computed:

* **Nested averages** (:func:`nested_average`). At every outer node ``i`` (the Gaussians ``xi, eta`` and
  noise, or ``xi`` and a channel's label) and inner node ``j`` (``zeta``) the global prox of the bracket
  (:mod:`replica.numeric.prox`, compiled kernels for a smooth bracket, the exact piecewise prox for a
  piecewise one), its value ``M_ij`` and its envelope gradient ``G_ij = dF/dx``. With the tilted weights
  ``p_ij = w_j exp(-m M_ij) / sum_j w_j exp(-m M_ij)`` (log-sum-exp, no overflow):
  ``Psi = sum_i w_i (1/m) log sum_j w_j exp(-m M_ij)``, ``dPsi/dx = -sum_i w_i sum_j p_ij G_ij`` and
  ``dPsi/dm = sum_i w_i [-(1/m^2) log sum_j w_j exp(-m M_ij) - (1/m) sum_j p_ij M_ij]`` (a channel's label
  law ``W_i`` multiplies the outer terms, and ``dW/dx (1/m) log ...`` joins the gradient). The same
  function averages the entropic envelope of a non-quadratic penalty.
* **Rules** (:class:`TensorRule`, :class:`KinkRule`). Tensor Gauss--Hermite outside and inside; for a
  one-dimensional prox the outer rule is the replica-symmetric module's kink-aware rule at the state
  ``(q0, delta_q, theta)`` (the kinks of a kinked label and of the prox at ``zeta = 0`` as panel
  boundaries) and the inner one, for a piecewise bracket, a composite rule along ``zeta`` with the
  prox's changes of piece located at every outer node (:func:`replica.numeric.kinks.line_changes`).
* **The saddle point at fixed m** (:meth:`RSBSolver.solve_fixed_m`): the map ``x -> xhat -> x`` of the
  derived equations, damped, then Powell's hybrid method on ``map(x) - x``. A start off the replica-
  symmetric point (``q0 < q1``) either converges to a 1RSB point or flows to ``q1 - q0 -> 0``: the
  1RSB solution *collapses* onto the replica-symmetric one, which it then is.
* **The Parisi parameter** (:meth:`RSBSolver.solve`): the complexity ``Sigma = -m^2 dPhi/dm`` at the
  fixed-m solutions along a ladder in ``m``, then the root of ``Sigma(m)`` by Brent's method in
  ``log m``. No root (``Sigma`` of one sign up to the ladder's ends) is a Parisi parameter that runs
  away: a one-line :class:`~replica.errors.ConvergenceError` naming the branch and the point.
* **Bars** (:func:`with_error_bars`): the point re-solved on a refined rule (every order up by a third,
  panels halved), warm-started; each bar is ``|refined - working|`` plus what the iteration left, as for
  the replica-symmetric bars (:mod:`replica.numeric.accuracy`).
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional

import numpy as np

from ..errors import ConvergenceError, InvalidStateError
from .compiled import compiled, resolve_backend
from .energetic import chunk_map
from ..interface.generated_model import vectorised
from .kinks import (KinkIntegrator, PanelPlan, _base_grid, composite_normal_rule, composite_normal_rules,
                    line_changes, prox_piece)
from .prox import AGREE_TOL, NEWTON_MAX_ITER, envelope_gradient, piecewise_prox, prox
from .quadrature import hermite_1d
from .solver import FixedPoint, Solver

#: ``q1 - q0`` below this fraction of ``q1`` is the replica-symmetric limit (the 1RSB point collapsed)
COLLAPSE = 1e-9
#: the relative residual of the fixed-m saddle point at which it is solved
TOL = 1e-10
#: ``q0`` of uncorrelated states (``q0 = 0``; a positive floor keeps ``theta / sqrt(q0)`` = 0 / tiny finite)
Q0_ZERO = 1e-200
#: ``q0 / q1`` below which a field-free branch's solution is followed as uncorrelated (``q0 = 0``)
Q0_SMALL = 1e-4
#: the relative residual at which a fixed-m solution is accepted, and the spread ``(q1 - q0) / q1`` below which
#: a solution whose map shrinks it further is the flow to replica symmetry
ACCEPT = 1e-8
SMALL_SPREAD = 1e-4
#: damped steps of the fixed-point map before Powell's hybrid method takes over
PICARD_STEPS = 4
#: Parisi parameters tried, in units of ``alpha / (e_t + floor)``, before the root of the complexity is
#: bracketed; beyond the ladder's ends the parameter runs away
M_LADDER = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)


# --------------------------------------------------------------------------- the module
@dataclass
class RSBModel:
    """A 1RSB module (:mod:`replica.codegen.rsb`), read once: its constants, vectorised functions and
    per-node leaves, under the names :mod:`replica.numeric.prox` and the compiled kernels read."""

    MODEL: str
    BASE_MODEL: str
    L: int
    R: int
    R_T: int
    PARAMETERS: tuple
    ORDER_PARAMETERS: tuple
    CONJUGATES: tuple
    FAMILIES: dict
    PARISI: str
    PROX_DIM: int
    GAUSSIANS: tuple
    INNER: tuple
    N_STARTS: int
    N_OBSERVABLES: int
    VALIDITY: tuple
    CONJUGATE_VALIDITY: tuple
    WEIGHTED: bool
    LABEL_VALUES: Optional[tuple]
    ENTROPIC: str
    PIECEWISE: bool = False
    N_BREAKS: int = 0
    N_BRANCHES: int = 0
    STATIONARY_ROOTS: int = 0
    STATIONARY_CLOSED: tuple = ()
    MOVING_BREAKS: bool = False
    N_TEACHER_KINKS: int = 0
    ENTROPIC_GAUSSIANS: tuple = ()
    ENTROPIC_INNER: tuple = ()
    ENTROPIC_DIM: int = 0
    ENTROPIC_ARGMIN: bool = False
    ENTROPIC_N_STARTS: int = 0
    N_CONSTANTS: int = 0
    functions: dict = field(default_factory=dict, repr=False)
    leaves: dict = field(default_factory=dict, repr=False)
    path: Optional[Path] = None

    def __getattr__(self, name: str):
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(name)

    @classmethod
    def from_module(cls, module: ModuleType) -> "RSBModel":
        """Read a generated 1RSB module."""
        ns = vars(module)
        values = {f.name: ns[f.name] for f in dataclasses.fields(cls) if f.name.isupper() and f.name in ns}
        fns = {}
        for name, spec in ns["FUNCTIONS"].items():
            if len(spec) == 2:
                continue
            constants = ns.get(spec[3]) if spec[3] else None
            fns[name] = vectorised(name, ns[spec[0]], spec[1], spec[2], constants, int(ns.get("N_CONSTANTS", 0)))
        leaves = {n: ns[n] for n in ("node_constants", "node_bracket_newton", "node_parameter_gradient", "node_starts",
                                     "node_test_observables", "node_weight") if n in ns}
        if len(leaves) < 6:
            leaves = {}
        return cls(**values, functions=fns, leaves=leaves,
                   path=Path(module.__file__) if getattr(module, "__file__", None) else None)

    @property
    def n_outer(self) -> int:
        """Outer Gaussians (the label of a channel is not one)."""
        return len(self.GAUSSIANS) - len(self.INNER)


# --------------------------------------------------------------------------- rules
@dataclass
class NestedRule:
    """Nodes of a nested average: ``outer`` ``(n_outer, No)`` Gaussians with ``outer_weights`` (a
    channel's label values in ``label``, one per outer node), ``inner`` ``(n_inner, No, Ni)`` with
    ``inner_weights`` ``(No, Ni)`` (zero weights pad rules of unequal size)."""

    outer: np.ndarray
    outer_weights: np.ndarray
    inner: np.ndarray
    inner_weights: np.ndarray
    label: Optional[np.ndarray] = None
    description: str = ""

    @property
    def size(self) -> int:
        """Nodes in all (outer x inner)."""
        return int(self.inner_weights.size)

    def nodes(self) -> np.ndarray:
        """``z`` of every (outer, inner) node, outer-major: outer Gaussians, inner, label."""
        No, Ni = self.inner_weights.shape
        rows = [np.repeat(self.outer, Ni, axis=1), self.inner.reshape(self.inner.shape[0], No * Ni)]
        if self.label is not None:
            rows.append(np.repeat(self.label[None, :], Ni, axis=1))
        return np.ascontiguousarray(np.vstack(rows))


def _fold_out(rule: "NestedRule", rows: np.ndarray) -> "NestedRule":
    """``rule`` with the outer Gaussians ``rows`` integrated out (set to 0, coinciding nodes merged): the
    integrand does not depend on them (uncorrelated states, ``q0 = 0``)."""
    outer = rule.outer.copy()
    outer[rows] = 0.0
    keys = np.round(outer, 13)
    if rule.label is not None:
        keys = np.vstack([keys, rule.label[None, :]])
    _, first, inverse = np.unique(keys.T, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    w = np.bincount(inverse, weights=rule.outer_weights, minlength=first.size)
    # nodes merged into one keep the first one's inner rule (the inner rule depends on the outer node
    # only through the integrand, which does not depend on the rows folded out)
    return NestedRule(np.ascontiguousarray(outer[:, first]), w, rule.inner[:, first], rule.inner_weights[first],
                      None if rule.label is None else rule.label[first], rule.description + ", q0 = 0")


def _tensor(dim: int, order: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = hermite_1d(order)
    if dim == 0:
        return np.zeros((0, 1)), np.ones(1)
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    wg = np.meshgrid(*([w] * dim), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids])
    weights = np.prod(np.stack([g.ravel() for g in wg]), axis=0)
    keep = weights > 1e-300
    return nodes[:, keep], weights[keep]


class TensorRule:
    """Tensor Gauss--Hermite rules outside (``outer`` points per axis, times a channel's labels) and
    inside (``inner`` points per axis). ``flips``: sign flips of the outer Gaussians under which the
    outer integrand is invariant (the replica-symmetric module's symmetries on the branch,
    :attr:`replica.numeric.solver.Solver.symmetries`): the outer rule is folded by them. A flip that
    mirrors the centres is one of ``zeta`` too, and the inner rule is symmetric under it."""

    def __init__(self, mod: RSBModel, outer: int = 12, inner: int = 12, flips: tuple = ()):
        self.mod, self.outer, self.inner, self.flips = mod, int(outer), int(inner), tuple(flips)
        self._cache = None

    def rule(self, x: np.ndarray, p: np.ndarray, pm: float | None = None) -> NestedRule:
        """The rule (the same at every state)."""
        if self._cache is None:
            self._cache = self._build()
        return self._cache

    def _build(self) -> NestedRule:
        mod = self.mod
        on, ow = _tensor(mod.n_outer, self.outer)
        if self.flips and mod.LABEL_VALUES is None:
            from .integrators import fold_nodes

            on, ow = fold_nodes(on, ow, self.flips)
        label = None
        if mod.LABEL_VALUES is not None:
            K = len(mod.LABEL_VALUES)
            label = np.repeat(np.asarray(mod.LABEL_VALUES, dtype=float), on.shape[1])
            on, ow = np.tile(on, (1, K)), np.tile(ow, K)
        inn, iw = _tensor(len(mod.INNER), self.inner)
        No = on.shape[1]
        return NestedRule(on, ow, np.repeat(inn[:, None, :], No, axis=1), np.repeat(iw[None, :], No, axis=0),
                          label, self.describe())

    def refined(self) -> "TensorRule":
        """Every order up by a third."""
        return TensorRule(self.mod, self.outer + max(2, self.outer // 3), self.inner + max(2, self.inner // 3),
                          self.flips)

    def describe(self) -> str:
        """One line for reports."""
        fold = f", folded by {len(self.flips)} sign symmetries" if self.flips else ""
        return (f"nested gauss-hermite (outer {self.mod.n_outer}-dim order {self.outer}{fold}, inner "
                f"{len(self.mod.INNER)}-dim order {self.inner})")


#: panels of the kink-aware rules: outer (along the student's Gaussian) and inner (along zeta)
OUTER_PLAN = PanelPlan(order=10, spacing=2.0, cut=9.0)
OUTER_ACROSS = 24
INNER_PLAN = PanelPlan(order=8, spacing=2.0, cut=8.0)
#: points per unit of ``zeta`` at which the prox's piece is read before its changes are bisected, and the
#: bisection steps (a cell of 1/2 to ~5e-13)
INNER_SCAN = 2.0
INNER_BISECT = 40


class _LabelLines:
    """Outer rule for a kinked label (``|h*|``, ``max(0, h*)``): the label changes branch where a linear
    form ``g . z + c`` of the outer Gaussians vanishes. In coordinates rotated so that the first axis is
    along ``g`` (the standard Gaussian is rotation invariant), that is one point on every line along it:
    composite Gauss--Legendre along ``g`` with a panel boundary there, Gauss--Hermite across. Several
    such forms, or one that is not linear, give tensor Gauss--Hermite."""

    def __init__(self, rsm, plan: PanelPlan, across: int, dim: int):
        self.rsm, self.plan, self.across, self.dim = rsm, plan, int(across), int(dim)

    def _form(self, x: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, float] | None:
        G = self.dim
        probe = np.hstack([np.zeros((G, 1)), np.eye(G), 2.0 * np.eye(G)])
        with np.errstate(all="ignore"):
            c = np.asarray(self.rsm.teacher_kinks(probe, x, p), dtype=float).reshape(-1, 2 * G + 1)
        if c.shape[0] != 1 or not np.all(np.isfinite(c)):
            return None
        g = c[0, 1:G + 1] - c[0, 0]
        if not np.allclose(c[0, G + 1:] - c[0, 0], 2.0 * g, rtol=1e-9, atol=1e-12 * (1 + abs(c[0, 0]))):
            return None  # not linear in the Gaussians
        return g, float(c[0, 0])

    def rule(self, x: np.ndarray, p: np.ndarray):
        G = self.dim
        form = self._form(x, p)
        if form is None or not np.linalg.norm(form[0]) > 0:
            nodes, weights = _tensor(G, 2 * self.across)
            return _Rule(nodes, weights)
        g, c0 = form
        norm = float(np.linalg.norm(g))
        basis, _ = np.linalg.qr(np.column_stack([g / norm, np.eye(G)]))
        basis[:, 0] *= np.sign(basis[:, 0] @ g)
        u, wu = composite_normal_rule(np.concatenate([_base_grid(self.plan), [-c0 / norm]]), self.plan)
        t, wt = _tensor(G - 1, self.across)
        U = np.vstack([np.repeat(u, t.shape[1]), np.tile(t, (1, u.size))])
        return _Rule(np.ascontiguousarray(basis @ U), np.repeat(wu, wt.size) * np.tile(wt, u.size))

    def describe(self) -> str:
        return (f"composite Gauss-Legendre across the kinked label's kink ({self.plan.describe()}) x "
                f"gauss-hermite order {self.across} along it")


@dataclass
class _Rule:
    nodes: np.ndarray
    weights: np.ndarray


class KinkRule:
    """Kink-aware nested rules for a one-dimensional prox (GLMs).

    Outside: with a channel, the replica-symmetric module's kink-aware rule in ``xi``
    (:class:`replica.numeric.kinks.KinkIntegrator`: the label law's transitions and the prox's kinks as
    panel boundaries) at the state ``(q = q0, V = delta_q, theta)``; with a kinked label, lines along
    ``xi`` with its kinks located (:class:`~replica.numeric.kinks.LineKinkIntegrator`'s rule); else
    Gauss--Hermite. Inside: for a piecewise bracket, composite Gauss--Legendre along ``zeta`` with the
    prox's changes of piece located at every outer node (where the global minimiser jumps or reaches a
    breakpoint, the inner integrand has a jump or a kink); else Gauss--Hermite.
    """

    def __init__(self, mod: RSBModel, rs: Solver, outer_plan: PanelPlan = OUTER_PLAN, across: int = OUTER_ACROSS,
                 inner_plan: PanelPlan = INNER_PLAN, inner_order: int = 16, outer_order: int = 24):
        self.mod, self.rs = mod, rs
        self.outer_plan, self.across, self.inner_plan = outer_plan, int(across), inner_plan
        self.inner_order, self.outer_order = int(inner_order), int(outer_order)
        rsm = rs.module
        if rsm.KINK_RULE:
            self.outer = KinkIntegrator(rsm, outer_plan)
        elif rsm.N_TEACHER_KINKS:
            self.outer = _LabelLines(rsm, outer_plan, self.across, mod.n_outer)
        else:
            self.outer = None

    def rule(self, x: np.ndarray, p: np.ndarray) -> NestedRule:
        """The rule at the 1RSB state ``x``."""
        mod = self.mod
        label = None
        if self.outer is not None:
            conv = _Convert(mod, self.rs.module)
            r = self.outer.rule(conv.rs_state(x, "q0"), p)
            nodes, weights = r.nodes, r.weights
            if mod.LABEL_VALUES is not None:
                label, nodes = nodes[-1], nodes[:-1]
        else:
            nodes, weights = _tensor(mod.n_outer, self.outer_order)
        No = nodes.shape[1]
        if mod.PIECEWISE and len(mod.INNER) == 1:
            inner, iw = self._located(nodes, label, x, p)
        else:
            inn, w = _tensor(len(mod.INNER), self.inner_order)
            inner, iw = np.repeat(inn[:, None, :], No, axis=1), np.repeat(w[None, :], No, axis=0)
        return NestedRule(np.ascontiguousarray(nodes), weights, inner, iw, label, self.describe())

    def _located(self, outer: np.ndarray, label, x: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Composite rules along ``zeta`` with the prox's located changes of piece as panel boundaries."""
        mod, plan = self.mod, self.inner_plan
        y = outer if label is None else np.vstack([outer, label[None, :]])
        n = int(np.ceil(2 * plan.cut * INNER_SCAN * plan.split))
        u = np.linspace(-plan.cut, plan.cut, n + 1)
        breaks = line_changes(lambda z: prox_piece(mod, z, x, p), y, u, row=outer.shape[0], steps=INNER_BISECT)
        base = _base_grid(plan)
        K = max((b.size for b in breaks), default=0)
        table = np.full((len(breaks), base.size + K), np.nan)
        table[:, :base.size] = base
        for i, b in enumerate(breaks):
            table[i, base.size:base.size + b.size] = b
        nodes, weights = composite_normal_rules(table, plan)
        return nodes[None], weights

    def refined(self) -> "KinkRule":
        """Panels halved, four more points per panel, a third more lines across and Gauss--Hermite points."""
        return KinkRule(self.mod, self.rs, self.outer_plan.refined(), self.across + max(2, self.across // 3),
                        self.inner_plan.refined(), self.inner_order + max(2, self.inner_order // 3),
                        self.outer_order + max(2, self.outer_order // 3))

    def describe(self) -> str:
        """One line for reports."""
        inner = (f"composite Gauss-Legendre along zeta with the prox's located kinks ({self.inner_plan.describe()})"
                 if self.mod.PIECEWISE and len(self.mod.INNER) == 1 else f"gauss-hermite order {self.inner_order}")
        outer = self.outer.describe() if self.outer is not None else f"gauss-hermite order {self.outer_order}"
        return f"nested kinks (outer: {outer}; inner: {inner})"


class LaplaceRule(TensorRule):
    """:class:`TensorRule` with the inner rule adapted, at every outer node, to the tilted measure
    ``phi(zeta) exp(-m M(zeta))``: its Laplace approximation ``N(mu, Sigma)``, ``Sigma^{-1} = I + m
    d^2M/dzeta^2`` and ``mu = -Sigma m dM/dzeta`` (central differences of the minimum at ``zeta = 0``,
    eigenvalues of ``Sigma^{-1}`` floored at ``LAPLACE_FLOOR``), carries the Gauss--Hermite nodes
    ``zeta = mu + chol(Sigma) t`` with the weights ``w_t phi(zeta) / phi(t) det chol(Sigma)``: the
    integral is unchanged, and where ``m (q1 - q0)`` is large -- a peaked tilt that a fixed rule misses --
    the integrand the rule sees is nearly a polynomial. Without the Parisi parameter (or with ``m M``
    flat) it is the plain tensor rule."""

    def __init__(self, mod: RSBModel, outer: int = 12, inner: int = 12, flips: tuple = (), backend: str = "auto"):
        super().__init__(mod, outer, inner, flips)
        self.backend = backend

    def rule(self, x: np.ndarray, p: np.ndarray, pm: float | None = None) -> NestedRule:
        base = super().rule(x, p)
        n = len(self.mod.INNER)
        if pm is None or n == 0:
            return base
        No, Ni = base.inner_weights.shape
        eps = LAPLACE_STEP
        probes = [np.zeros(n)]
        for k in range(n):
            e = np.zeros(n)
            e[k] = eps
            probes += [e, -e]
        pairs = [(j, k) for j in range(n) for k in range(j + 1, n)]
        for j, k in pairs:
            e = np.zeros(n)
            e[j] = e[k] = eps
            probes.append(e)
        z = np.hstack([self._nodes(base, pr) for pr in probes])
        Mv, _, _ = minima(self.mod, z, x, p, self.backend)
        Mv = Mv.reshape(len(probes), No)
        grad = np.stack([(Mv[1 + 2 * k] - Mv[2 + 2 * k]) / (2 * eps) for k in range(n)], axis=1)   # (No, n)
        hess = np.zeros((No, n, n))
        for k in range(n):
            hess[:, k, k] = (Mv[1 + 2 * k] - 2 * Mv[0] + Mv[2 + 2 * k]) / eps ** 2
        for i, (j, k) in enumerate(pairs):
            hess[:, j, k] = hess[:, k, j] = (Mv[1 + 2 * n + i] - Mv[1 + 2 * j] - Mv[1 + 2 * k] + Mv[0]) / eps ** 2
        ok = np.all(np.isfinite(grad), axis=1) & np.all(np.isfinite(hess), axis=(1, 2))
        grad[~ok], hess[~ok] = 0.0, 0.0
        lam, U = np.linalg.eigh(np.eye(n)[None] + pm * hess)
        lam = np.maximum(lam, LAPLACE_FLOOR)
        cov = np.einsum("nij,nj,nkj->nik", U, 1.0 / lam, U)
        mu = -pm * np.einsum("nij,nj->ni", cov, grad)
        chol = np.linalg.cholesky(cov)
        t = base.inner[:, 0, :]                                               # (n, Ni): the same t everywhere
        zeta = mu.T[:, :, None] + np.einsum("nij,jk->ink", chol, t)         # (n, No, Ni)
        logw = -0.5 * (np.sum(zeta ** 2, axis=0) - np.sum(t ** 2, axis=0)[None, :])
        det = np.prod(np.diagonal(chol, axis1=1, axis2=2), axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            weights = base.inner_weights * np.exp(np.minimum(logw, 700.0)) * det[:, None]
        weights = np.where(np.isfinite(weights), weights, 0.0)
        return NestedRule(base.outer, base.outer_weights, zeta, weights, base.label, self.describe())

    @staticmethod
    def _nodes(rule: NestedRule, inner: np.ndarray) -> np.ndarray:
        No = rule.outer.shape[1]
        rows = [rule.outer, np.repeat(inner[:, None], No, axis=1)]
        if rule.label is not None:
            rows.append(rule.label[None, :])
        return np.vstack(rows)

    def refined(self) -> "LaplaceRule":
        """Every order up by a third."""
        return LaplaceRule(self.mod, self.outer + max(2, self.outer // 3), self.inner + max(2, self.inner // 3),
                           self.flips, self.backend)

    def describe(self) -> str:
        return super().describe().replace("nested gauss-hermite", "nested gauss-hermite, inner rule adapted to "
                                                                   "the tilted measure (Laplace)")


#: the difference step (in zeta) and the eigenvalue floor of :class:`LaplaceRule`
LAPLACE_STEP = 1e-3
LAPLACE_FLOOR = 0.05


def default_rule(mod: RSBModel, rs: Solver):
    """The kink-aware nested rule for a one-dimensional prox, else tensor Gauss--Hermite (orders by
    dimension: ~2e5 nodes in all)."""
    rsm = rs.module
    if mod.PROX_DIM == 1 and not rsm.DISCRETE and (rsm.KINK_RULE or not mod.WEIGHTED):
        return KinkRule(mod, rs)
    dims = mod.n_outer + len(mod.INNER)
    order = max(4, int(round(2e5 ** (1.0 / max(dims, 1)))))
    return LaplaceRule(mod, order, order, rs.symmetries)


class _EntropicBracket:
    """The entropic bracket under the names :func:`replica.numeric.prox.newton_minimize` reads."""

    def __init__(self, mod: RSBModel):
        self.mod = mod

    def bracket_newton(self, w, z, xhat, p):
        return self.mod.entropic_bracket_newton(w, z, xhat, p)

    def bracket(self, w, z, xhat, p):
        return self.mod.entropic_bracket(w, z, xhat, p)


class EntropicRule:
    """Nested rule of a separable penalty's entropic average: tensor Gauss--Hermite over the outer
    ``(xi^w, tau)``; along the inner ``zeta^w`` (one weight), a composite rule with the changes of sign
    of the minimiser located at every outer node (soft thresholding has its kinks where the minimiser
    leaves 0), else Gauss--Hermite."""

    def __init__(self, mod: RSBModel, outer: int = 32, inner_plan: PanelPlan = INNER_PLAN, inner: int = 24):
        self.mod, self.outer, self.inner_plan, self.inner = mod, int(outer), inner_plan, int(inner)

    def rule(self, xhat: np.ndarray, p: np.ndarray) -> "NestedRule":
        mod = self.mod
        n_in = len(mod.ENTROPIC_INNER)
        on, ow = _tensor(len(mod.ENTROPIC_GAUSSIANS) - n_in, self.outer)
        No = on.shape[1]
        if n_in == 1 and mod.ENTROPIC_ARGMIN:
            plan = self.inner_plan
            n = int(np.ceil(2 * plan.cut * INNER_SCAN * plan.split))
            u = np.linspace(-plan.cut, plan.cut, n + 1)

            def piece(z):
                with np.errstate(all="ignore"):
                    w = np.asarray(mod.entropic_argmin(z, xhat, p), dtype=float).reshape(mod.ENTROPIC_DIM, -1)
                return np.sign(w[0]).astype(int)

            breaks = line_changes(piece, on, u, row=on.shape[0], steps=INNER_BISECT)
            base = _base_grid(plan)
            K = max((b.size for b in breaks), default=0)
            table = np.full((No, base.size + K), np.nan)
            table[:, :base.size] = base
            for i, b in enumerate(breaks):
                table[i, base.size:base.size + b.size] = b
            nodes, weights = composite_normal_rules(table, plan)
            return NestedRule(on, ow, nodes[None], weights)
        inn, iw = _tensor(n_in, self.inner)
        return NestedRule(on, ow, np.repeat(inn[:, None, :], No, axis=1), np.repeat(iw[None, :], No, axis=0))

    def refined(self) -> "EntropicRule":
        return EntropicRule(self.mod, self.outer + max(2, self.outer // 3), self.inner_plan.refined(),
                            self.inner + max(2, self.inner // 3))

    def describe(self) -> str:
        return f"nested entropic (outer gauss-hermite order {self.outer}, inner {self.inner_plan.describe()})"


class _Convert:
    """Maps between the 1RSB vectors and the replica-symmetric module's (by family)."""

    def __init__(self, mod: RSBModel, rsm):
        self.mod, self.rsm = mod, rsm

    def rs_state(self, x: np.ndarray, which: str = "q1") -> np.ndarray:
        """The replica-symmetric state ``(q = q0 or q1, V = delta_q, m, theta)``."""
        F, G = self.mod.FAMILIES, self.rsm.FAMILIES
        out = np.zeros(len(self.rsm.ORDER_PARAMETERS))
        for rs_fam, fam in (("q", which), ("V", "delta_q"), ("m", "m"), ("theta", "theta")):
            if rs_fam in G and fam in F:
                out[G[rs_fam]] = np.asarray(x)[F[fam]]
        return out

    def from_rs(self, x_rs: np.ndarray, spread: float, p: np.ndarray | None = None) -> np.ndarray:
        """A 1RSB state off the replica-symmetric one: ``q1 = q`` and ``q0`` the fraction ``spread`` of the
        way from ``q`` to its lower bound ``theta^2 / rho`` (so that ``rho - theta^2 / q0 >= 0`` holds;
        ``rho`` from the module's ``rho_bar(p)``, per token, for a rank-one teacher)."""
        F, G = self.mod.FAMILIES, self.rsm.FAMILIES
        x_rs = np.asarray(x_rs, dtype=float)
        out = np.zeros(len(self.mod.ORDER_PARAMETERS))
        q = x_rs[G["q"]]
        floor = np.zeros_like(q)
        if "theta" in G and p is not None and len(G["theta"]) == len(G["q"]):
            rho = np.atleast_1d(np.asarray(self.rsm.rho_bar(p), dtype=float))
            floor = x_rs[G["theta"]] ** 2 / rho[:len(G["q"])] if rho.size >= len(G["q"]) else floor
        out[F["q1"]] = q
        out[F["q0"]] = q - spread * (q - floor)
        out[F["delta_q"]] = x_rs[G["V"]]
        for fam in ("m", "theta"):
            if fam in F and fam in G:
                out[F[fam]] = x_rs[G[fam]]
        return out


# --------------------------------------------------------------------------- nested averages
@dataclass
class NestedAverage:
    """``Psi``, ``dPsi/dx``, ``dPsi/dm`` of a nested average, and prox diagnostics."""

    psi: float
    grad: np.ndarray
    dpsi_dm: float
    n_failed: int = 0
    #: the mean over the outer nodes of the tilted spread ``< M^2 > - < M >^2`` (0 when q1 = q0)
    spread: float = 0.0


def nested_average(M: np.ndarray, G: np.ndarray, outer_weights: np.ndarray, inner_weights: np.ndarray, pm: float,
                   W: np.ndarray | None = None, dW: np.ndarray | None = None) -> NestedAverage:
    """The nested average of minima ``M`` ``(No, Ni)`` and their gradients ``G`` ``(nx, No, Ni)``
    (module docstring); ``W``/``dW`` a channel's label law ``(No,)`` and its gradient ``(nx, No)``."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        a = np.where(inner_weights > 0, -pm * M + np.log(np.where(inner_weights > 0, inner_weights, 1.0)), -np.inf)
        c = np.max(a, axis=1, keepdims=True)
        e = np.exp(a - c)
        Z = np.sum(e, axis=1, keepdims=True)
        P = e / Z
        log_e = (c + np.log(Z))[:, 0]
        Mw = np.where(inner_weights > 0, M, 0.0)
        tM = np.sum(P * Mw, axis=1)
        tM2 = np.sum(P * Mw * Mw, axis=1)
        tG = np.einsum("kij,ij->ki", np.where((inner_weights[None] > 0) & (P[None] > 0), G, 0.0), P)
    w = outer_weights if W is None else outer_weights * W
    psi = float(np.sum(w * log_e) / pm)
    grad = -(tG @ w)
    if dW is not None:
        grad = grad + dW @ (outer_weights * log_e / pm)
    dm = float(np.sum(w * (-log_e / pm ** 2 - tM / pm)))
    spread = float(np.sum(w * np.maximum(tM2 - tM * tM, 0.0)) / max(np.sum(w), 1e-300))
    return NestedAverage(psi, grad, dm, 0, spread)


def minima(mod: RSBModel, z: np.ndarray, x: np.ndarray, p: np.ndarray, backend: str = "auto",
           chunk: int = 65536) -> tuple[np.ndarray, np.ndarray, int]:
    """The global prox's minimum ``M`` ``(N,)`` and the envelope gradient ``dF/dx`` ``(nx, N)`` at the nodes
    ``z`` (compiled kernels for a smooth bracket where numba is available, else numpy; the exact prox of a
    piecewise bracket), and the number of nodes where the prox failed."""
    N = z.shape[1]
    nx = len(x)
    Mv = np.empty(N)
    G = np.empty((nx, N))
    x = np.ascontiguousarray(x, dtype=float)
    p = np.ascontiguousarray(p, dtype=float)
    failed = 0
    if not mod.PIECEWISE and resolve_backend(mod, backend) == "numba":
        k = compiled(mod)
        D = mod.PROX_DIM
        h = np.empty((D, N))
        bad = np.zeros(N, dtype=np.bool_)

        def run(a: int, b: int):
            hc = np.empty((D, b - a))
            k.node_prox_average(np.ascontiguousarray(z[:, a:b]), np.zeros(b - a), np.zeros((D, 1)), False,
                                mod.N_STARTS, x, p, 1e-12, NEWTON_MAX_ITER, AGREE_TOL, hc, bad[a:b], np.zeros(nx))
            h[:, a:b] = hc
            return 0

        chunk_map(run, N)
        if bad.any():
            idx = np.flatnonzero(bad)
            res = prox(mod, z[:, idx], x, p)
            h[:, idx] = res.h
            failed = int(res.n_failed)
        with np.errstate(all="ignore"):
            for a in range(0, N, chunk):
                sl = slice(a, min(a + chunk, N))
                Mv[sl] = mod.bracket(h[:, sl], z[:, sl], x, p)
                G[:, sl] = mod.bracket_parameter_gradient(h[:, sl], z[:, sl], x, p)
        return Mv, G, failed
    with np.errstate(all="ignore"):
        for a in range(0, N, chunk):
            sl = slice(a, min(a + chunk, N))
            res = piecewise_prox(mod, z[:, sl], x, p) if mod.PIECEWISE else prox(mod, z[:, sl], x, p)
            Mv[sl] = res.value
            G[:, sl] = envelope_gradient(mod, res, z[:, sl], x, p)
            failed += int(res.n_failed)
    return Mv, G, failed


def energetic_average(mod: RSBModel, rule: NestedRule, x: np.ndarray, pm: float, p: np.ndarray,
                      backend: str = "auto") -> NestedAverage:
    """``Psi_y``, its gradient in the order parameters and in ``m`` on the nested ``rule`` at state ``x``."""
    z = rule.nodes()
    No, Ni = rule.inner_weights.shape
    Mv, G, failed = minima(mod, z, x, p, backend)
    W = dW = None
    if mod.WEIGHTED:
        zo = z[:, ::Ni]
        with np.errstate(all="ignore"):
            W = np.asarray(mod.label_weight(zo, x, p), dtype=float).reshape(No)
            dW = np.asarray(mod.label_weight_gradient(zo, x, p), dtype=float).reshape(len(x), No)
    avg = nested_average(Mv.reshape(No, Ni), G.reshape(len(x), No, Ni), rule.outer_weights, rule.inner_weights,
                         pm, W, dW)
    avg.n_failed = failed
    return avg


# --------------------------------------------------------------------------- the saddle point
@dataclass
class RSBState:
    """A state of the 1RSB equations at fixed Parisi parameter: order parameters, conjugates, the
    energetic average there and what the map returned."""

    x: np.ndarray
    xhat: np.ndarray
    pm: float
    average: NestedAverage
    mapped: np.ndarray
    collapsed: bool = False
    #: a non-quadratic penalty's nested entropic average at ``xhat`` (None for the closed form)
    entropic_average: Optional[NestedAverage] = None

    def residual(self) -> float:
        """``|map(x) - x| / |x|``."""
        return float(np.linalg.norm(self.mapped - self.x) / max(np.linalg.norm(self.x), 1e-300))


class RSBSolver:
    """The 1RSB saddle point of one model at one point (see the module docstring).

    ``rsb``: the model's :class:`RSBModel`; ``rs``: a replica-symmetric :class:`~replica.numeric.solver.Solver`
    of the same model at the same parameters and branch (its module's test observables give ``eps_g`` at
    ``q = q1``; its fixed point is the start and the baseline). ``rule``: a nested rule
    (:func:`default_rule` by default).
    """

    def __init__(self, rsb: RSBModel, rs: Solver, rule=None, tol: float = TOL, max_iter: int = 400,
                 damping: float = 0.5, backend: str = "auto", verbose: bool = False):
        self.mod, self.rs = rsb, rs
        self.p = rs.p
        self.branch = rs.branch
        self.conv = _Convert(rsb, rs.module)
        self.rule = rule if rule is not None else default_rule(rsb, rs)
        self.tol, self.max_iter, self.damping, self.backend, self.verbose = tol, max_iter, damping, backend, verbose
        pinned_fams = [f for f, idx in rs.module.FAMILIES.items() if rs.pinned[idx].all()] if rs.pinned.any() else []
        self.pinned = np.zeros(len(rsb.ORDER_PARAMETERS), dtype=bool)
        self.pinned_hat = np.zeros(len(rsb.CONJUGATES), dtype=bool)
        for fam in pinned_fams:
            self.pinned[rsb.FAMILIES.get(fam, [])] = True
        hat_of = {"m": "mhat", "theta": "thetahat"}
        for i, name in enumerate(rsb.CONJUGATES):
            for fam in pinned_fams:
                if fam in hat_of and name.split("_")[0] == hat_of[fam]:
                    self.pinned_hat[i] = True
        F = rsb.FAMILIES
        self._q0, self._q1, self._dq = np.asarray(F["q0"]), np.asarray(F["q1"]), np.asarray(F["delta_q"])
        self._q0hat = np.array([i for i, n in enumerate(rsb.CONJUGATES) if n.split("_")[0] == "q0hat"], dtype=int)
        self._q1hat = np.array([i for i, n in enumerate(rsb.CONJUGATES) if n.split("_")[0] == "q1hat"], dtype=int)
        #: one scalar overlap per token (r = 1): the projections onto q1 >= q0 are entrywise
        self.R1 = rsb.R == 1
        self._xi_rows = np.array([i for i, n in enumerate(rsb.GAUSSIANS[:rsb.n_outer]) if n.startswith("xi")],
                                 dtype=int)
        #: no family couples the outer Gaussians to a field (m and theta pinned or absent): the sign
        #: symmetry makes q0 = 0 an exact solution (uncorrelated states), followed where the
        #: iteration drives q0 to 0 (:attr:`uncorrelated`)
        self.field_free = all(f not in F or self.pinned[F[f]].all() for f in ("m", "theta"))
        #: the relative step of the Newton solves' differences: a rule that moves with the state through
        #: differences of its own (Laplace) makes the map noisier than a fixed one
        self.fd_step = 1e-5 if isinstance(self.rule, LaplaceRule) else 1e-7
        self.uncorrelated = False
        self.evaluations = 0

    # ------------------------------------------------------------ the map
    def spread(self, x: np.ndarray) -> float:
        """``max (q1 - q0) / q1`` over the diagonal-like entries (0 at the replica-symmetric limit)."""
        q1 = np.abs(np.asarray(x)[self._q1])
        return float(np.max((np.asarray(x)[self._q1] - np.asarray(x)[self._q0]) / np.maximum(q1, 1e-300)))

    def check(self, x: np.ndarray) -> None:
        """Raise :class:`InvalidStateError` unless ``x`` is admissible (``q1 - q0`` may vanish)."""
        with np.errstate(all="ignore"):
            v = np.atleast_1d(np.asarray(self.mod.validity(x, self.p), dtype=float))
        for name, val in zip(self.mod.VALIDITY, v):
            ok = val >= 0 if name.startswith("q1 - q0") else val > 0
            if not (np.isfinite(val) and ok):
                raise InvalidStateError(name.split(" [")[0], f"= {val:.3g} at the 1RSB state", None)

    def conjugates(self, x: np.ndarray, pm: float, alpha: float, collapsed: bool = False
                   ) -> tuple[np.ndarray, NestedAverage]:
        """``xhat`` from the energetic side at ``x`` (``collapsed``: the replica-symmetric limit
        ``q1 = q0``, where ``dF/dq1`` is replaced by the common shift's regular derivative)."""
        mod = self.mod
        self.check(x)
        rule = self.rule.rule(x, self.p, pm) if isinstance(self.rule, TensorRule) else self.rule.rule(x, self.p)
        if self.uncorrelated and self._xi_rows.size:
            rule = _fold_out(rule, self._xi_rows)
        if collapsed:
            avg = self._collapsed_average(rule, x, pm)
        else:
            avg = energetic_average(mod, rule, x, pm, self.p, self.backend)
        self.evaluations += 1
        if self.uncorrelated:  # q0 is held at 0: its derivative (through 1/sqrt(q0)) is not used
            avg.grad[self._q0] = 0.0
        if not np.all(np.isfinite(avg.grad)) or not math.isfinite(avg.psi):
            raise InvalidStateError("energetic average", "not finite at the 1RSB state", None)
        xhat = np.asarray(mod.energetic_update(avg.grad, alpha, np.array([pm])), dtype=float)
        xhat[self.pinned_hat] = 0.0
        if collapsed:  # q0hat = q1hat exactly in the limit (equal up to round-off by construction)
            xhat[self._q0hat] = xhat[self._q1hat]
        return xhat, avg

    def _collapsed_average(self, rule: NestedRule, x: np.ndarray, pm: float) -> NestedAverage:
        """The energetic average at ``q1 = q0`` written so that the energetic update gives the
        replica-symmetric limit: ``dPsi/dq0 = -m dPsi/d delta_q`` (so that ``q0hat = q1hat``) and
        ``dPsi/dq1`` the rest of the common shift's derivative."""
        mod = self.mod
        x = np.array(x, dtype=float)
        x[self._q0] = x[self._q1]
        rs_rule = getattr(self.rs.integrator, "rule", None)
        if callable(rs_rule):  # the limit's outer integrand has the prox's kinks: the replica-symmetric rule
            r = rs_rule(self.conv.rs_state(x, "q1"), self.p)
            nodes, label = r.nodes, None
            if self.mod.LABEL_VALUES is not None:
                label, nodes = nodes[-1], nodes[:-1]
            No = nodes.shape[1]
            rule = NestedRule(np.ascontiguousarray(nodes), r.weights, np.zeros((len(self.mod.INNER), No, 1)),
                              np.ones((No, 1)), label)
        z = rule.nodes()
        No, Ni = rule.inner_weights.shape
        avg = energetic_average(mod, rule, x, pm, self.p, self.backend)
        with np.errstate(all="ignore"):
            if mod.PIECEWISE:
                res = piecewise_prox(mod, z, x, self.p)
                h = res.h
            else:
                res = prox(mod, z, x, self.p)
                h = res.h
            Gc = np.asarray(mod.bracket_common_gradient(h, z, x, self.p), dtype=float).reshape(len(self._q0), No, Ni)
        W = None
        if mod.WEIGHTED:
            W = np.asarray(mod.label_weight(z[:, ::Ni], x, self.p), dtype=float).reshape(No)
        w = rule.outer_weights if W is None else rule.outer_weights * W
        common = -np.einsum("kij,ij,i->k", Gc, rule.inner_weights, w)
        if mod.WEIGHTED:
            dW = np.asarray(mod.label_weight_gradient(z[:, ::Ni], x, self.p), dtype=float).reshape(len(x), No)
            Mv, _, _ = minima(mod, z, x, self.p, self.backend)
            psi_i = -np.sum(Mv.reshape(No, Ni) * rule.inner_weights, axis=1)
            common = common + (dW[self._q0] + dW[self._q1]) @ (rule.outer_weights * psi_i)
        g = avg.grad.copy()
        g[self._q0] = -pm * g[self._dq]
        g[self._q1] = common - g[self._q0]
        avg.grad = g
        return avg

    def entropic(self, xhat: np.ndarray, pm: float) -> tuple[np.ndarray, Optional[NestedAverage]]:
        """``x`` from the entropic side: the closed form for l2; for a separable penalty
        ``x = -K(m)^{-T} grad_xhat Psi_w`` with ``Psi_w`` the nested average of the penalty's Moreau
        envelope (:meth:`entropic_average`), returned too."""
        mod = self.mod
        with np.errstate(all="ignore"):
            ok = np.atleast_1d(np.asarray(mod.conjugate_validity(xhat, np.array([pm]), self.p), dtype=float))
        for name, val in zip(mod.CONJUGATE_VALIDITY, ok):
            # the inner field's variance vanishes in the replica-symmetric limit, the outer one for
            # uncorrelated states
            positive = val > 0 or (val >= 0 and mod.ENTROPIC != "closed" and "qhat" in name)
            if not (np.isfinite(val) and positive):
                raise InvalidStateError(name.split(" [")[0], f"= {val:.3g} at the 1RSB conjugates (m = {pm:.4g})")
        if mod.ENTROPIC == "closed":
            x = np.asarray(mod.entropic_update(xhat, np.array([pm]), self.p), dtype=float)
            went = None
        else:
            went = self.entropic_average(xhat, pm)
            x = np.asarray(mod.entropic_from_gradient(went.grad, np.array([pm])), dtype=float)
        x[self.pinned] = 0.0
        return x, went

    def entropic_average(self, xhat: np.ndarray, pm: float) -> NestedAverage:
        """``Psi_w``, ``dPsi_w/dxhat`` and ``dPsi_w/dm`` of a separable penalty: the nested average of its
        Moreau envelope over the outer ``(xi^w, tau)`` and the inner ``zeta^w`` (:attr:`entropic_rule`),
        the minimiser in closed form (the penalty's prox) or by damped Newton from the module's starts."""
        mod = self.mod
        rule = self.entropic_rule.rule(xhat, self.p)
        z = rule.nodes()
        No, Ni = rule.inner_weights.shape
        with np.errstate(all="ignore"):
            w = self._entropic_argmin(z, xhat)
            M = np.asarray(mod.entropic_bracket(w, z, xhat, self.p), dtype=float)
            G = np.asarray(mod.entropic_parameter_gradient(w, z, xhat, self.p), dtype=float)
        avg = nested_average(M.reshape(No, Ni), G.reshape(len(xhat), No, Ni), rule.outer_weights,
                             rule.inner_weights, pm)
        if not (np.all(np.isfinite(avg.grad)) and math.isfinite(avg.psi)):
            raise InvalidStateError("entropic average", "not finite at the 1RSB conjugates", None)
        return avg

    def _entropic_argmin(self, z: np.ndarray, xhat: np.ndarray) -> np.ndarray:
        mod = self.mod
        if mod.ENTROPIC_ARGMIN:
            return np.asarray(mod.entropic_argmin(z, xhat, self.p), dtype=float).reshape(mod.ENTROPIC_DIM, -1)
        from .prox import newton_minimize

        view = _EntropicBracket(mod)
        starts = np.asarray(mod.entropic_starts(z, xhat, self.p), dtype=float).reshape(
            mod.ENTROPIC_N_STARTS, mod.ENTROPIC_DIM, -1)
        best, F = None, None
        for st in starts:
            h, Fv, _, _ = newton_minimize(view, st, z, xhat, self.p)
            if best is None:
                best, F = h, Fv
            else:
                better = Fv < F
                best[:, better], F[better] = h[:, better], Fv[better]
        return best

    @property
    def entropic_rule(self) -> "EntropicRule":
        """The nested rule of a separable penalty's entropic average (made on first use)."""
        if getattr(self, "_entropic_rule", None) is None:
            self._entropic_rule = EntropicRule(self.mod)
        return self._entropic_rule

    def state(self, x: np.ndarray, pm: float, alpha: float, collapsed: bool = False) -> RSBState:
        """The map at ``x``: conjugates, the energetic average and ``map(x)`` (with :attr:`uncorrelated`,
        ``q0 = 0`` and ``q0hat = 0`` held)."""
        x = np.array(x, dtype=float)
        if self.uncorrelated:
            x[self._q0] = Q0_ZERO
        xhat, avg = self.conjugates(x, pm, alpha, collapsed)
        if self.uncorrelated:
            xhat[self._q0hat] = 0.0
        if self.mod.ENTROPIC != "closed" and self._q1hat.size == self._q0hat.size:
            # the inner field's variance B1 - B0 >= 0: a map that overshoots the replica-symmetric
            # limit is projected onto it
            xhat[self._q0hat] = np.minimum(xhat[self._q0hat], xhat[self._q1hat])
        mapped, went = self.entropic(xhat, pm)
        if self.R1:  # q1 - q0 >= 0 likewise (one scalar per token)
            mapped[self._q0] = np.minimum(mapped[self._q0], mapped[self._q1])
        if collapsed:
            mapped[self._q0] = mapped[self._q1]
        if self.uncorrelated:
            mapped[self._q0] = Q0_ZERO
        return RSBState(x, xhat, pm, avg, mapped, collapsed, went)

    # ------------------------------------------------------------ potentials
    def potentials(self, st: RSBState, alpha: float) -> dict[str, float]:
        """``psi_t, psi_w, psi_y, phi`` and ``dphi_dm``, ``complexity`` at a state."""
        mod, pm = self.mod, st.pm
        mv = np.array([pm])
        psi_t = float(mod.trace_potential(st.x, st.xhat, mv))
        if st.entropic_average is None:
            psi_w = float(mod.entropic_potential(st.xhat, mv, self.p))
            dpsi_w = float(mod.entropic_parisi(st.xhat, mv, self.p))
        else:
            psi_w, dpsi_w = st.entropic_average.psi, st.entropic_average.dpsi_dm
        psi_y = st.average.psi
        dphi = float(mod.trace_parisi(st.x, st.xhat)) + dpsi_w + alpha * st.average.dpsi_dm
        return dict(psi_t=psi_t, psi_w=psi_w, psi_y=psi_y, phi=psi_t + psi_w + alpha * psi_y, dphi_dm=dphi,
                    complexity=-pm * pm * dphi)

    def classify(self, st: RSBState) -> str:
        """``collapsed`` (``q1 - q0`` vanished, or is small and the map shrinks it further: the flow goes to
        replica symmetry), ``solved`` (residual below :data:`ACCEPT`) or ``unconverged``."""
        if st.collapsed:
            return "collapsed"
        spread = self.spread(st.x)
        if spread < SMALL_SPREAD and not self.uncorrelated and self.spread(st.mapped) < spread * (1 - 1e-6):
            return "collapsed"
        return "solved" if st.residual() <= max(ACCEPT, 10 * self.tol) else "unconverged"

    # ------------------------------------------------------------ unknowns
    def _layout(self) -> None:
        """The free unknowns: ``q0``, ``D = q1 - q0`` (for the diagonal entries: both >= 0, where the
        Cholesky factors of the nested average exist), ``delta_q`` and the other free entries."""
        if hasattr(self, "_lo"):
            return
        rsm = self.rs.module
        G = rsm.FAMILIES
        diag_q = [G["q"].index(i) for i in rsm.SYMMETRIC_DIAGONAL if i in G["q"]]
        diag_v = [G["V"].index(i) for i in rsm.SYMMETRIC_DIAGONAL if i in G["V"]]
        n = len(self.mod.ORDER_PARAMETERS)
        lo = np.full(n, -np.inf)
        lo[self._q0[diag_q]] = 0.0
        lo[self._q1[diag_q]] = 0.0   # D
        lo[self._dq[diag_v]] = 0.0
        self._lo = lo

    @property
    def _free(self) -> np.ndarray:
        free = ~self.pinned
        if self.uncorrelated:
            free = free.copy()
            free[self._q0] = False
        return free

    def _pack(self, x: np.ndarray) -> np.ndarray:
        u = np.array(x, dtype=float)
        u[self._q1] = x[self._q1] - x[self._q0]
        return u[self._free]

    def _unpack(self, v: np.ndarray, like: np.ndarray) -> np.ndarray:
        u = np.array(like, dtype=float)
        u[self._q1] = like[self._q1] - like[self._q0]
        u[self._free] = v
        x = u.copy()
        x[self._q1] = u[self._q0] + u[self._q1]
        return x

    def _bounds(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower bounds (a floor ``1e-13 q1`` on ``q0`` and ``D``: the Cholesky factors' derivatives are
        ``1/sqrt``), no upper ones."""
        scale = float(np.max(np.abs(np.asarray(x)[self._q1]))) or 1.0
        lo = np.where(np.isfinite(self._lo), 1e-13 * scale, -np.inf)[self._free]
        return lo, np.full(lo.size, np.inf)

    # ------------------------------------------------------------ fixed m
    def solve_fixed_m(self, alpha: float, pm: float, x0: np.ndarray) -> tuple[RSBState, int]:
        """The saddle point at Parisi parameter ``pm`` from ``x0``: a few damped steps of the map, then a
        bounded least-squares solve of ``map(x) - x = 0`` (trust region, ``q0 >= 0``, ``q1 - q0 >= 0``).
        Returns the state and the map evaluations; ``collapsed`` is set when ``q1 - q0`` vanished (the
        replica-symmetric limit)."""
        return self._solve(alpha, x0, pm, None)

    def solve_joint(self, alpha: float, x0: np.ndarray, pm0: float, bracket: tuple[float, float]
                    ) -> tuple[RSBState, int]:
        """The saddle point and the Parisi parameter together: ``map(x) - x = 0`` and ``Sigma = 0`` with
        ``log m`` in ``bracket``."""
        return self._solve(alpha, x0, pm0, bracket)

    def _solve(self, alpha: float, x0: np.ndarray, pm: float, bracket) -> tuple[RSBState, int]:
        self._layout()
        n0 = self.evaluations
        x = np.array(x0, dtype=float)
        beta = self.damping
        st = self.state(x, pm, alpha)
        for _ in range(PICARD_STEPS if bracket is None else 0):
            if st.residual() < self.tol or self.spread(st.x) < COLLAPSE:
                break
            try:  # damped: a map projected onto q1 = q0 (an overshoot) halves the spread, it does not end it
                st = self.state((1 - beta) * st.x + beta * st.mapped, pm, alpha)
            except InvalidStateError:
                beta *= 0.5
        if self.spread(st.x) < COLLAPSE:
            return dataclasses.replace(st, collapsed=True), self.evaluations - n0
        like = st.x
        scale = max(float(np.linalg.norm(like)), 1e-300)
        states: dict[bytes, RSBState] = {}
        sigma_scale: list = [None]

        def fun(v: np.ndarray) -> np.ndarray | None:
            m = pm if bracket is None else float(np.exp(v[-1]))
            xv = self._unpack(v if bracket is None else v[:-1], like)
            try:
                s = self.state(xv, m, alpha)
            except InvalidStateError:
                return None
            states[v.tobytes()] = s
            r = (s.mapped - s.x)[self._free] / scale
            if bracket is None:
                return r
            sig = self.potentials(s, alpha)["complexity"]
            if sigma_scale[0] is None:
                sigma_scale[0] = max(abs(sig), 1e-3 * max(abs(s.average.psi), 1e-12))
            return np.append(r, sig / sigma_scale[0])

        v0 = self._pack(st.x)
        lo, hi = self._bounds(st.x)
        v0 = np.clip(v0, lo, hi)
        if bracket is not None:
            v0 = np.append(v0, np.clip(np.log(pm), np.log(bracket[0]), np.log(bracket[1])))
            lo, hi = np.append(lo, np.log(bracket[0])), np.append(hi, np.log(bracket[1]))
        typical = self._pack(np.where(np.isin(np.arange(like.size), np.concatenate([self._q0, self._q1])),
                                      np.max(np.abs(like[self._q1])), np.abs(like)))
        if bracket is not None:
            typical = np.append(typical, 1.0)
        v = newton(fun, v0, lo, hi, tol=self.tol, max_eval=NEWTON_EVALS * (v0.size + 1), typical=typical,
                   fd_step=self.fd_step)
        final = states.get(v.tobytes())
        if final is None:
            m = pm if bracket is None else float(np.exp(v[-1]))
            final = self.state(self._unpack(v if bracket is None else v[:-1], like), m, alpha)
        if self.spread(final.x) < 1e-12 + COLLAPSE:
            final = dataclasses.replace(final, collapsed=True)
        return final, self.evaluations - n0


#: map evaluations per unknown (plus one) a Newton solve may spend
NEWTON_EVALS = 12


def newton(fun: Callable[[np.ndarray], Optional[np.ndarray]], v0: np.ndarray, lo: np.ndarray, hi: np.ndarray,
           tol: float = TOL, max_eval: int = 200, typical: np.ndarray | None = None, fd_step: float = 1e-7
           ) -> np.ndarray:
    """A root of ``fun`` in the box ``[lo, hi]`` from ``v0``: Newton steps with a forward-difference
    Jacobian (one-sided into the box), Broyden updates while steps succeed, backtracking on ``|fun|``
    and projection onto the box (a root on a bound, ``q0 = 0`` or ``q1 - q0 = 0``, is reached in a
    step). ``fun`` returns ``None`` at an inadmissible point; ``typical``: the size of each unknown (the
    difference steps are ``1e-7`` of it: an unknown near its bound 0 is not differenced on its own
    round-off; ``fd_step``: the relative difference step). Returns the best point found."""
    typ = np.abs(v0) if typical is None else np.maximum(np.abs(typical), 1e-300)
    used = [0]

    def f(v):
        used[0] += 1
        return fun(v)

    v = np.clip(np.array(v0, dtype=float), lo, hi)
    r = f(v)
    if r is None:
        return v
    best = (float(np.linalg.norm(r)), v.copy())

    def jacobian(v, r):
        n = v.size
        J = np.empty((r.size, n))
        for i in range(n):
            h = fd_step * max(abs(v[i]), typ[i], 1e-6 * (np.max(np.abs(v)) or 1.0))
            if v[i] + h > hi[i]:
                h = -h
            vi = v.copy()
            vi[i] += h
            ri = f(vi)
            if ri is None:
                vi[i] = v[i] - h
                ri = f(vi)
                h = -h
                if ri is None:
                    J[:, i] = 0.0
                    continue
            J[:, i] = (ri - r) / h
        return J

    J = jacobian(v, r)
    fresh = True
    while used[0] < max_eval and np.linalg.norm(r) > tol:
        step = -np.linalg.lstsq(J, r, rcond=None)[0]
        t, accepted = 1.0, False
        for _ in range(10):
            vn = np.clip(v + t * step, lo, hi)
            rn = f(vn)
            if rn is not None and np.linalg.norm(rn) < (1 - 1e-4 * t) * np.linalg.norm(r):
                accepted = True
                break
            t *= 0.5
            if used[0] >= max_eval:
                break
        if not accepted:
            if fresh:
                break
            J, fresh = jacobian(v, r), True
            continue
        dv, dr = vn - v, rn - r
        v, r = vn, rn
        if np.linalg.norm(r) < best[0]:
            best = (float(np.linalg.norm(r)), v.copy())
        if t < 0.25:
            J, fresh = jacobian(v, r), True
        else:
            J = J + np.outer(dr - J @ dv, dv) / max(dv @ dv, 1e-300)
            fresh = False
    return best[1]


# --------------------------------------------------------------------------- the Parisi parameter
@dataclass
class RSBPoint:
    """A 1RSB saddle point with its Parisi parameter, or its collapse onto the replica-symmetric one.

    ``order``/``conjugates`` by 1RSB name; ``parisi_m`` is None where the solution collapsed
    (``q1 = q0``: the parameter is undetermined, ``complexity`` 0); ``phi`` the 1RSB free entropy and
    ``train_loss = -phi`` (the ground-state energy, normalised as the replica-symmetric one); ``rs`` the
    replica-symmetric fixed point at the same point; ``observables`` (``eps_g`` first) are the
    replica-symmetric module's test integrands at ``(q = q1, m, theta)``; ``errors`` the bars by name
    (:func:`with_error_bars`).
    """

    model: str
    branch: str
    alpha: float
    parameters: dict
    order: dict
    conjugates: dict
    parisi_m: Optional[float]
    complexity: float
    phi: float
    psi_t: float
    psi_w: float
    psi_y: float
    rs: FixedPoint
    collapsed: bool
    observables: dict = field(default_factory=dict)
    observable_errors: dict = field(default_factory=dict)
    residual: float = 0.0
    evaluations: int = 0
    seconds: float = 0.0
    rule: str = ""
    notes: list = field(default_factory=list)
    errors: dict = field(default_factory=dict)
    tol: float = TOL
    state: Optional[RSBState] = field(default=None, repr=False, compare=False)

    @property
    def train_loss(self) -> float:
        """``e_t = -phi``."""
        return -self.phi

    @property
    def converged(self) -> bool:
        """The fixed-point residual (and the complexity) below a sane tolerance."""
        return bool(math.isfinite(self.residual) and self.residual <= max(10 * self.tol, 1e-8))

    def values(self) -> dict[str, float]:
        """Every number with a bar, flat by name."""
        out = {k: float(v) for k, v in self.order.items()}
        out.update({k: float(v) for k, v in self.conjugates.items()})
        out.update({k: float(v) for k, v in self.observables.items()})
        out.update(phi=self.phi, psi_t=self.psi_t, psi_w=self.psi_w, psi_y=self.psi_y, train_loss=self.train_loss,
                   complexity=self.complexity, parisi_m=self.parisi_m if self.parisi_m is not None else math.nan)
        return out


class RunawayError(ConvergenceError):
    """The complexity has no zero: the Parisi parameter runs away to 0 or infinity."""


def m_scale(solver: "RSBSolver", fp: FixedPoint, alpha: float) -> float:
    """A first Parisi parameter: the inverse spread of the bracket's minimum over the energetic nodes at
    the replica-symmetric point (where ``m M`` varies by O(1) the inner measure is tilted by O(1))."""
    x = solver.conv.from_rs(fp.x, 0.5, solver.p)
    rule = solver.rule.rule(x, solver.p)
    z = rule.nodes()
    Ni = rule.inner_weights.shape[1]
    Mv, _, _ = minima(solver.mod, z[:, ::Ni], x, solver.p, solver.backend)
    w = rule.outer_weights
    ok = np.isfinite(Mv)
    mean = float(np.sum(w[ok] * Mv[ok]) / np.sum(w[ok]))
    sd = float(np.sqrt(np.sum(w[ok] * (Mv[ok] - mean) ** 2) / np.sum(w[ok]))) if ok.any() else math.nan
    return 1.0 / sd if math.isfinite(sd) and sd > 1e-12 else 1.0


def solve(solver: "RSBSolver", alpha: float, fp: FixedPoint, spread: float = 0.3, m0: float | None = None,
          progress: Callable[[str], None] | None = None) -> RSBPoint:
    """The 1RSB point at ``alpha`` from the replica-symmetric fixed point ``fp`` (module docstring):
    fixed-m solutions along a ladder (factors of 3) from ``m0`` (default :func:`m_scale`) until the
    complexity changes sign, then the joint solve of the saddle point and ``Sigma = 0``. A start that
    collapses onto the replica-symmetric point at two Parisi parameters a decade apart is reported as
    the collapse. Raises :class:`RunawayError` when ``Sigma`` keeps one sign over ``M_LADDER``'s span."""
    t0 = time.perf_counter()
    say = progress or (lambda s: None)
    n0 = solver.evaluations
    m = float(m0) if m0 is not None else m_scale(solver, fp, alpha)
    x = solver.conv.from_rs(fp.x, spread, solver.p)
    ladder: list[tuple[float, RSBState, float]] = []
    collapses: list[float] = []
    failed: list[float] = []
    lo_m, hi_m = m * M_LADDER[0], m * M_LADDER[-1]
    direction = 1
    bracket = None
    while lo_m <= m <= hi_m:
        try:
            st, _ = solver.solve_fixed_m(alpha, m, x)
        except InvalidStateError as exc:  # the start is outside the admissible domain at this m
            failed.append(m)
            say(f"1RSB at m = {m:.4g}: no fixed point ({exc})")
            m = m * 3.0 if direction > 0 else m / 3.0
            continue
        if (solver.field_free and not solver.uncorrelated and not st.collapsed
                and np.max(st.x[solver._q0] / np.maximum(st.x[solver._q1], 1e-300)) < Q0_SMALL):
            say(f"1RSB at m = {m:.4g}: q0 -> 0 on a field-free branch; following the uncorrelated solution q0 = 0")
            solver.uncorrelated = True
            st, _ = solver.solve_fixed_m(alpha, m, st.x)
        kind = solver.classify(st)
        if kind == "collapsed":
            collapses.append(m)
            say(f"1RSB at m = {m:.4g}: collapses onto replica symmetry (q1 - q0 -> 0)")
            if len(collapses) >= 2 and max(collapses) >= 10 * min(collapses) and not ladder:
                return _collapsed(solver, fp, alpha, t0, n0, collapses)
            x = solver.conv.from_rs(fp.x, spread, solver.p)
        elif kind == "unconverged":
            failed.append(m)
            say(f"1RSB at m = {m:.4g}: no fixed point (residual {st.residual():.2e})")
        else:
            sig = solver.potentials(st, alpha)["complexity"]
            say(f"1RSB at m = {m:.4g}: q0 = {st.x[solver._q0][0]:.6g}, q1 = {st.x[solver._q1][0]:.6g}, "
                f"complexity {sig:.4g} (residual {st.residual():.2e})")
            ladder.append((m, st, sig))
            x = st.x
            if len(ladder) >= 2 and np.sign(ladder[-1][2]) != np.sign(ladder[-2][2]):
                bracket = (ladder[-2], ladder[-1])
                break
            direction = 1 if sig > 0 else -1
        m = m * 3.0 if direction > 0 else m / 3.0
    where = f"branch {solver.branch}, alpha = {alpha:g}"
    if bracket is None:
        if not ladder and collapses:
            return _collapsed(solver, fp, alpha, t0, n0, collapses)
        if not ladder:
            raise ConvergenceError(f"no 1RSB fixed point on {where} at m = "
                                   f"{', '.join(f'{v:.3g}' for v in failed + collapses)} on the nested rule "
                                   f"{solver.rule.describe()}; try another branch", [], len(failed))
        sign = "positive" if ladder[-1][2] > 0 else "negative"
        to = "infinity" if ladder[-1][2] > 0 else "0"
        solved = ", ".join(f"{l[0]:.3g} ({l[2]:+.2e})" for l in sorted(ladder, key=lambda l: l[0]))
        unresolved = (f"; no fixed point at m = {', '.join(f'{v:.3g}' for v in sorted(failed))} on the nested "
                      f"rule {solver.rule.describe()}") if failed else ""
        # the residuals reported are the fixed-m saddle points', not the complexity's
        raise RunawayError(f"the Parisi parameter runs away to {to} on {where}: the complexity stays {sign} at "
                           f"every solved m (Sigma at m = {solved}){unresolved}",
                           [l[1].residual() for l in ladder], len(ladder) + len(failed))
    (m_a, s_a, g_a), (m_b, s_b, g_b) = bracket
    # interpolate log m linearly in Sigma between the bracket's ends, then solve jointly
    t = g_a / (g_a - g_b)
    m_start = math.exp(math.log(m_a) + t * (math.log(m_b) - math.log(m_a)))
    lo, hi = min(m_a, m_b), max(m_a, m_b)
    st, _ = solver.solve_joint(alpha, (1 - t) * s_a.x + t * s_b.x, m_start, (lo, hi))
    if solver.classify(st) != "solved":
        say(f"1RSB: the joint solve stopped at residual {st.residual():.2e}; bisecting the complexity in m")
        st = _bisect(solver, alpha, bracket)
    pot = solver.potentials(st, alpha)
    say(f"1RSB solved: m = {st.pm:.6g}, complexity {pot['complexity']:.3g}, residual {st.residual():.2e}")
    if solver.classify(st) != "solved":
        raise ConvergenceError(f"the 1RSB saddle point on {where} did not converge (m = {st.pm:.4g}); try another "
                               "--quadrature", [st.residual()], solver.evaluations - n0)
    return _point(solver, fp, alpha, st, pot, t0, n0)


def _bisect(solver: "RSBSolver", alpha: float, bracket) -> RSBState:
    """The zero of the complexity between the bracket's ends by Brent's method in ``log m`` on converged
    fixed-m solutions (each warm-started from the nearest end)."""
    from scipy.optimize import brentq

    (m_a, s_a, _), (m_b, s_b, _) = bracket
    last: list = [None]

    def sigma(lm: float) -> float:
        m = math.exp(lm)
        near = s_a if abs(lm - math.log(m_a)) < abs(lm - math.log(m_b)) else s_b
        st, _ = solver.solve_fixed_m(alpha, m, near.x)
        last[0] = st
        if solver.classify(st) != "solved":
            raise ConvergenceError(f"no 1RSB fixed point at m = {m:.4g} (residual {st.residual():.2e})",
                                   [st.residual()], 0)
        return solver.potentials(st, alpha)["complexity"]

    brentq(sigma, math.log(min(m_a, m_b)), math.log(max(m_a, m_b)), xtol=1e-7, rtol=1e-10)
    return last[0]


def _point(solver: "RSBSolver", fp: FixedPoint, alpha: float, st: RSBState, pot: dict, t0: float, n0: int
           ) -> RSBPoint:
    mod = solver.mod
    order = dict(zip(mod.ORDER_PARAMETERS, map(float, st.x)))
    conj = dict(zip(mod.CONJUGATES, map(float, st.xhat)))
    vals, errs = solver.rs.test_observables(solver.conv.rs_state(st.x, "q1"))
    notes = []
    if st.collapsed:
        notes.append("1RSB collapses onto replica symmetry here (q1 = q0): the Parisi parameter is undetermined")
    return RSBPoint(fp.model, solver.branch, alpha, dict(fp.parameters), order, conj, None if st.collapsed else st.pm,
                    0.0 if st.collapsed else pot["complexity"], pot["phi"], pot["psi_t"], pot["psi_w"], pot["psi_y"],
                    fp, st.collapsed, vals, errs, st.residual(), solver.evaluations - n0, time.perf_counter() - t0,
                    solver.rule.describe(), notes, tol=solver.tol, state=st)


def _collapsed(solver: "RSBSolver", fp: FixedPoint, alpha: float, t0: float, n0: int, at: list) -> RSBPoint:
    """The collapse: the 1RSB solution is the replica-symmetric one (``q0 = q1 = q``, ``delta_q = V``,
    ``q0hat = q1hat = qhat``, ``Vhat``, the other families equal), whatever the Parisi parameter; every
    1RSB potential then equals its replica-symmetric value (tests/test_rsb.py checks the identity)."""
    mod = solver.mod
    x = solver.conv.from_rs(fp.x, 0.0)
    xhat = np.zeros(len(mod.CONJUGATES))
    rs_hat = {"q0hat": "qhat", "q1hat": "qhat", "Vhat": "Vhat", "mhat": "mhat", "thetahat": "thetahat"}
    for i, name in enumerate(mod.CONJUGATES):
        fam = name.split("_")[0]
        xhat[i] = fp.conjugates.get(rs_hat[fam] + name[len(fam):], 0.0)
    avg = NestedAverage(fp.psi_y, np.zeros(len(x)), 0.0)
    st = RSBState(x, xhat, float(at[-1]) if at else 1.0, avg, x.copy(), True)
    pot = dict(psi_t=fp.psi_t, psi_w=fp.psi_w, psi_y=fp.psi_y, phi=fp.phi, complexity=0.0)
    point = _point(solver, fp, alpha, st, pot, t0, n0)
    point.residual = fp.residual
    point.notes.append(f"starts off replica symmetry collapsed at m = {', '.join(f'{m:.3g}' for m in at)}")
    return point


# --------------------------------------------------------------------------- bars and the JSON
#: what the iteration left counts this many times its relative residual on every number
ITERATION_SAFETY = 10.0


def with_error_bars(solver: "RSBSolver", point: RSBPoint, alpha: float,
                    progress: Callable[[str], None] | None = None) -> RSBPoint:
    """``point`` re-solved on the refined nested rule (:meth:`TensorRule.refined` / :meth:`KinkRule.refined`:
    every order up by a third, panels halved), warm-started, with the Parisi parameter solved again; the
    refined point is returned with ``errors``: ``|refined - working|`` plus what the iteration left
    (``ITERATION_SAFETY`` times the relative residual of each), plus the test rule's own estimate on the
    observables. A collapsed point carries the replica-symmetric bars (it is that point)."""
    say = progress or (lambda s: None)
    if point.collapsed:
        rs = point.rs
        e = dict(rs.errors)
        out = dataclasses.replace(point)
        mod = solver.mod
        errs: dict[str, float] = {}
        for name in point.order:
            fam = _family(mod.FAMILIES, mod.ORDER_PARAMETERS, name)
            rs_name = _rs_name(solver.rs.module, fam, name, mod)
            errs[name] = float(e.get(rs_name, math.nan)) if fam in ("q0", "q1", "delta_q", "m", "theta") else 0.0
        rs_hat = {"q0hat": "qhat", "q1hat": "qhat", "Vhat": "Vhat", "mhat": "mhat", "thetahat": "thetahat"}
        for name in point.conjugates:
            fam = name.split("_")[0]
            suffix = name[len(fam):]
            errs[name] = float(e.get(rs_hat.get(fam, fam) + suffix, math.nan))
        for k in ("phi", "psi_t", "psi_w", "psi_y", "train_loss"):
            errs[k] = float(e.get(k, math.nan))
        for k in point.observables:
            errs[k] = float(e.get(k, math.nan))
        errs["complexity"] = 0.0
        out.errors = errs
        return out
    fine_solver = RSBSolver(solver.mod, solver.rs, rule=solver.rule.refined(), tol=solver.tol,
                            max_iter=solver.max_iter, damping=solver.damping, backend=solver.backend)
    fine_solver.uncorrelated = solver.uncorrelated
    if solver.mod.ENTROPIC != "closed":
        fine_solver._entropic_rule = solver.entropic_rule.refined()
    say(f"error bars: re-solving on the refined rule ({fine_solver.rule.describe()})")
    t0 = time.perf_counter()
    m = float(point.parisi_m)
    st, n = fine_solver.solve_joint(alpha, point.state.x, m, (m / 3.0, m * 3.0))
    if fine_solver.classify(st) != "solved":
        out = dataclasses.replace(point)
        out.errors = {k: math.nan for k in point.values()}
        out.notes = list(point.notes) + [f"no error bars: the re-solve on the refined rule stopped at residual "
                                         f"{st.residual():.1e}"]
        return out
    fine = _point(fine_solver, point.rs, alpha, st, fine_solver.potentials(st, alpha), t0, 0)
    fine.evaluations = point.evaluations + n
    fine.seconds = point.seconds + fine.seconds
    fine.notes = list(point.notes)
    vf, vw = fine.values(), point.values()
    errors = {}
    for k, v in vf.items():
        d = abs(v - vw.get(k, math.nan))
        it = ITERATION_SAFETY * max(fine.residual, point.residual) * abs(v)
        errors[k] = d + it if math.isfinite(d) else math.nan
    for k, e in fine.observable_errors.items():
        if k in errors and math.isfinite(e):
            errors[k] += e
    errors["parisi_m"] = errors.get("parisi_m", math.nan)
    fine.errors = errors
    return fine


def _family(families: dict, names: tuple, name: str) -> str:
    i = names.index(name)
    return next(f for f, idx in families.items() if i in idx)


def _rs_name(rsm, family: str, name: str, mod: RSBModel) -> str:
    """The replica-symmetric order parameter a 1RSB one reduces to (``q0_1 -> q_1``, ``delta_q -> V``)."""
    rs_fam = {"q0": "q", "q1": "q", "delta_q": "V", "m": "m", "theta": "theta"}[family]
    k = list(mod.FAMILIES[family]).index(mod.ORDER_PARAMETERS.index(name))
    return rsm.ORDER_PARAMETERS[rsm.FAMILIES[rs_fam][k]]


def result_dict(solver: "RSBSolver", point: RSBPoint) -> dict:
    """The ``replica solve --rsb 1 --json`` contract: ``q0, q1, delta_q, parisi_m, complexity``,
    ``train_loss`` (``-phi``) and ``phi``, every observable (``eps_g`` first) with ``<name>_error``, the
    other order parameters and conjugates by family (token 1), ``rs_train_loss`` (the replica-symmetric
    value at the same point), diagnostics, and ``errors`` (the same keys)."""
    mod = solver.mod
    out: dict = {}
    shown = dict(point.order)
    if solver.uncorrelated:  # q0 = 0 exactly: the solver holds it at the floor Q0_ZERO only to divide by it
        shown.update({mod.ORDER_PARAMETERS[i]: 0.0 for i in solver._q0})
    order = _by_family(mod, mod.FAMILIES, mod.ORDER_PARAMETERS, shown)
    hat_fams = {n: n.split("_")[0] for n in mod.CONJUGATES}
    conj: dict = {}
    for n, v in point.conjugates.items():
        conj.setdefault(hat_fams[n], v)
    out.update(order)
    out.update(parisi_m=point.parisi_m, complexity=point.complexity, train_loss=point.train_loss, phi=point.phi)
    for k, v in point.observables.items():
        out[k] = v
        out[f"{k}_error"] = point.errors.get(k, point.observable_errors.get(k, math.nan))
    out.update(conj)
    out.update(psi_t=point.psi_t, psi_w=point.psi_w, psi_y=point.psi_y, rs_train_loss=point.rs.train_loss,
               rs_phi=point.rs.phi, rs_order_parameters=dict(point.rs.order), collapsed=point.collapsed,
               uncorrelated=bool(solver.uncorrelated), converged=point.converged, residual=point.residual,
               evaluations=point.evaluations, alpha=point.alpha, branch=point.branch, model=point.model,
               parameters=point.parameters, rule=point.rule, seconds=point.seconds,
               order_parameters=shown, conjugate_parameters=dict(point.conjugates), notes=point.notes)
    if point.errors:
        e = point.errors
        errs = {k: e.get(n, math.nan) for k, n in zip(order, _first_names(mod.FAMILIES, mod.ORDER_PARAMETERS))}
        errs.update({k: e.get(k, math.nan) for k in ("parisi_m", "complexity", "train_loss", "phi", "psi_t", "psi_w",
                                                      "psi_y")})
        errs.update({k: e.get(k, math.nan) for k in point.observables})
        seen = set()
        for n in mod.CONJUGATES:
            if hat_fams[n] not in seen:
                seen.add(hat_fams[n])
                errs[hat_fams[n]] = e.get(n, math.nan)
        rs_e = point.rs.errors or {}
        errs["rs_train_loss"] = rs_e.get("train_loss", math.nan)
        errs.update(order_parameters={k: e.get(k, math.nan) for k in point.order},
                    conjugate_parameters={k: e.get(k, math.nan) for k in point.conjugates})
        out["errors"] = errs
    return out


def _first_names(families: dict, names: tuple) -> list[str]:
    return [names[idx[0]] for f, idx in families.items()]


def _by_family(mod: RSBModel, families: dict, names: tuple, values: dict) -> dict:
    """Token-1 value of every family: its first entry (a scalar family of a one-token or reduced model,
    the first entry of a vector or matrix one)."""
    return {f: float(values[names[idx[0]]]) for f, idx in families.items()}


def reasons() -> dict[str, str]:
    """Why a number of the 1RSB JSON can be null."""
    return {"parisi_m": "undetermined: the 1RSB solution collapses onto the replica-symmetric one (q1 = q0)",
            "errors": "no error bar"}

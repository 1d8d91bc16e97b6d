"""Kink-aware quadrature for one-dimensional energetic and entropic averages.

The averages of a GLM (one token, one rank: one Gaussian ``xi`` and a one-dimensional prox) are
integrals over the real line of functions that are smooth *between known points*:

* the label law ``W(y | xi)`` of a teacher channel changes on a scale ``1/a`` around the
  thresholds (``a = theta / sqrt(q rho - theta^2)`` for a sign teacher: a near-step as
  ``theta^2 -> q rho``), at centres and widths the module computes (``channel_transitions``);
* the prox of a piecewise loss has kinks where its minimiser reaches a breakpoint ``b``:
  ``omega = b + V l'(b-)`` and ``b + V l'(b+)`` (``prox_kinks``); the test integrands have
  discontinuities (``test_breaks``, e.g. ``omega = 0`` of a classification error);
* a smooth loss (logistic) varies on its own scale in ``h``, which the prox stretches to
  ``omega = h + V l'(h)``: with ``q`` ~ 200 and ``V`` ~ 600 (logistic at ``lambda = 1e-3``) that
  is a feature of width ~1 at ``|omega|`` up to ~200, i.e. ``1/sqrt(q)`` ~ 0.07 in ``xi``.

A fixed Gauss--Hermite rule resolves none of this: its error decays like a power of the order
on a kink, and the logistic features need ~1e4 nodes. :class:`KinkIntegrator` builds, at every
state, a *composite Gauss--Legendre rule* in ``xi`` on ``[-CUT, CUT]`` with the normal density in
the weights, whose panel boundaries are: a base grid, the label-law transitions (a ladder of
points at multiples of the width around every centre), the prox kinks, and the images
``omega(h) = h + V l'(h)`` of points ``h`` where the loss's curvature changes (found once per
parameter set by scanning ``l''``, :func:`loss_points`). Between boundaries the integrand is
analytic and Gauss--Legendre converges geometrically; every boundary moves continuously with
the state, so the fixed-point map stays smooth. :class:`EntropicKinkRule` does the same for the
entropic average of a one-weight penalty (LASSO's soft thresholding): the bracket depends on the
Gaussians only through ``Z = mu + a . z``, so the rule is composite Gauss--Legendre along ``a``
with boundaries at the prox's kinks ``Z = A b + r'(b)``, times Gauss--Hermite across (where the
integrands are polynomial of degree <= 1: two points are exact).

Both are described by a :class:`PanelPlan` (Gauss--Legendre order per panel, base spacing,
cut-off, sub-division of every panel), and every plan knows a cheaper :meth:`~PanelPlan.companion`
(for the solver's error estimates) and a :meth:`~PanelPlan.refined` version (for error bars by
re-solving at a finer rule).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..interface.generated_model import GeneratedModel
from .energetic import EnergeticAverage, average_on_nodes
from ..errors import ParameterError
from .quadrature import QuadratureRule, hermite_1d, legendre_1d

#: normal mass beyond CUT standard deviations is ~1e-23: neglected
CUT = 10.0
#: a transition of width w gets boundaries at centre + w * LADDER
LADDER = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 13.0])
LADDER = np.concatenate([-LADDER[:0:-1], LADDER])


@dataclass(frozen=True)
class PanelPlan:
    """How a kink-aware rule is built: ``order`` Gauss--Legendre points per panel, a base grid of
    ``spacing`` in the Gaussian variable on ``[-cut, cut]``, every panel split into ``split``
    equal parts, ``across`` Gauss--Hermite points in the directions without kinks (entropic)."""

    order: int = 10
    spacing: float = 0.5
    cut: float = CUT
    split: int = 1
    across: int = 2

    def __post_init__(self) -> None:
        if self.order < 2 or self.split < 1 or not self.spacing > 0 or not self.cut > 0 or self.across < 1:
            raise ParameterError("quadrature", f"kinks: need order >= 2, split >= 1, spacing > 0, cut > 0, got "
                                               f"order={self.order}, split={self.split}, spacing={self.spacing}, "
                                               f"cut={self.cut}")

    def companion(self) -> "PanelPlan":
        """A cheaper plan of the same panels (lower order): its disagreement estimates the error."""
        return replace(self, order=max(2, self.order - max(2, self.order // 3)))

    def refined(self) -> "PanelPlan":
        """A finer plan: every panel split in two, four more points per panel."""
        return replace(self, order=self.order + 4, split=2 * self.split)

    def describe(self) -> str:
        """One line for reports and cache keys."""
        return f"order={self.order}, spacing={self.spacing:g}, cut={self.cut:g}, split={self.split}"


def composite_normal_rule(breaks: np.ndarray, plan: PanelPlan, floor: float = 1e-14) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights for ``E_{xi ~ N(0,1)} f(xi)`` on ``[-cut, cut]``: Gauss--Legendre on every
    panel between consecutive ``breaks`` (sorted, inside ``[-cut, cut]``), the normal density in
    the weights. Panels narrower than ``floor`` relative to their position are dropped (0: every panel
    kept, for a transition of width ``1e-150`` around ``xi = 0``)."""
    b = np.unique(np.concatenate([[-plan.cut, plan.cut],
                                  np.clip(breaks[np.isfinite(breaks)], -plan.cut, plan.cut)]))
    if plan.split > 1:
        t = np.arange(plan.split) / plan.split
        b = np.unique(np.concatenate([(b[:-1, None] + t[None, :] * np.diff(b)[:, None]).ravel(), b[-1:]]))
    a, c = b[:-1], b[1:]
    keep = c - a > floor * (1.0 + np.abs(a))
    a, c = a[keep], c[keep]
    x, w = legendre_1d(plan.order)
    half, mid = 0.5 * (c - a), 0.5 * (c + a)
    nodes = (mid[:, None] + half[:, None] * x[None, :]).ravel()
    weights = (half[:, None] * w[None, :]).ravel() * np.exp(-0.5 * nodes * nodes) / np.sqrt(2.0 * np.pi)
    return nodes, weights


def composite_normal_rules(breaks: np.ndarray, plan: PanelPlan) -> tuple[np.ndarray, np.ndarray]:
    """:func:`composite_normal_rule` for many lines at once: ``breaks`` ``(M, K)`` (``nan`` where a line has
    fewer), nodes and weights ``(M, n)`` of one size for all (unused panels have zero weight). Without
    ``plan.split``."""
    M = breaks.shape[0]
    b = np.where(np.isfinite(breaks), np.clip(breaks, -plan.cut, plan.cut), np.nan)
    b = np.hstack([np.full((M, 1), -plan.cut), b, np.full((M, 1), plan.cut)])
    b = np.sort(np.where(np.isnan(b), plan.cut, b), axis=1)
    a, c = b[:, :-1], b[:, 1:]
    keep = c - a > 1e-14 * (1.0 + np.abs(a))
    x, w = legendre_1d(plan.order)
    half, mid = 0.5 * (c - a), 0.5 * (c + a)
    nodes = (mid[:, :, None] + half[:, :, None] * x[None, None, :]).reshape(M, -1)
    weights = (np.where(keep, half, 0.0)[:, :, None] * w[None, None, :]).reshape(M, -1)
    weights = weights * np.exp(-0.5 * nodes * nodes) / np.sqrt(2.0 * np.pi)
    return nodes, weights


def _base_grid(plan: PanelPlan) -> np.ndarray:
    n = int(round(plan.cut / plan.spacing))
    return np.linspace(-n * plan.spacing, n * plan.spacing, 2 * n + 1)


# --------------------------------------------------------------------------- the loss's own scale
def loss_points(module: GeneratedModel, p: np.ndarray, label: float, samples: int = 601) -> np.ndarray:
    """Points ``h`` where a smooth loss's curvature changes (for label ``label``).

    ``l''`` (module ``loss_profile``) on a symmetric log-spaced grid out to ``1e4``; where it is
    non-negligible (above 1e-16 of its largest value) a point at every ``1/16`` of the change of
    ``l'`` and at every factor ``e`` of change of ``l''``. Empty for a piecewise-polynomial loss
    (its curvature is piecewise constant: its kinks are the prox kinks).
    """
    pos = np.logspace(-3, 4, samples // 2)
    h = np.concatenate([-pos[::-1], [0.0], pos])
    z = np.full((len(module.GAUSSIANS) + len(module.DISCRETE), h.size), 0.0)
    z = np.vstack([z, np.full((1, h.size), float(label))])
    with np.errstate(all="ignore"):
        g, c = (np.asarray(a, dtype=float) for a in module.loss_profile(h[None, :], z, p))
    c = np.where(np.isfinite(c), np.abs(c), 0.0)
    cmax = float(c.max()) if c.size else 0.0
    if not cmax > 0:
        return np.empty(0)
    active = c > 1e-16 * cmax
    logc = np.log(np.where(active, c, 1e-16 * cmax))
    if np.ptp(logc[active]) < 1e-9:  # constant curvature (a quadratic piece): nothing to resolve
        return np.empty(0)
    ha, ga = h[active], g[active]
    pts = [ha[[0, -1]]]
    # every factor e of change of the curvature
    level = np.floor(logc[active])
    pts.append(ha[1:][np.diff(level) != 0])
    # every 1/16 of the change of the slope (a convex loss: l' non-decreasing)
    if np.all(np.isfinite(ga)) and np.all(np.diff(ga) >= 0) and ga[-1] > ga[0]:
        levels = ga[0] + (ga[-1] - ga[0]) * np.arange(1, 16) / 16
        pts.append(np.interp(levels, ga, ha))
    return np.unique(np.concatenate(pts))


# --------------------------------------------------------------------------- the energetic rule
class KinkIntegrator:
    """Energetic averages of a channel model with a one-dimensional prox on kink-aware rules.

    For every label value the rule in ``xi`` is :func:`composite_normal_rule` on the boundaries
    described in the module docstring; the prox and the envelope gradient run on its nodes
    through :class:`~replica.numeric.integrators.QuadratureIntegrator` (compiled kernels for a smooth
    loss, the exact piecewise prox of :mod:`replica.numeric.prox` for a non-smooth one).
    """

    def __init__(self, module: GeneratedModel, plan: PanelPlan | None = None, backend: str = "auto"):
        if not module.KINK_RULE:
            raise ParameterError("quadrature", f"kinks: model {module.MODEL} has no kink-aware rule (it needs a "
                                               "teacher channel and a one-dimensional prox with one Gaussian)")
        if len(module.GAUSSIANS) != 1 or module.DISCRETE:
            raise ParameterError("quadrature", f"kinks: model {module.MODEL} averages over "
                                               f"{len(module.GAUSSIANS)} Gaussians; the kink-aware rule needs one")
        self.module = module
        self.plan = plan or PanelPlan()
        self.backend = backend
        self.dim = 2  # (xi, label)
        self._points: dict[tuple, list[np.ndarray]] = {}
        self._V = module.FAMILIES["V"][0]

    # ---------------------------------------------------------------- rule construction
    def _loss_points(self, p: np.ndarray) -> list[np.ndarray]:
        key = tuple(np.asarray(p, dtype=float).tolist())
        if key not in self._points:
            self._points[key] = [loss_points(self.module, p, y) for y in self.module.LABEL_VALUES]
        return self._points[key]

    def _to_xi(self, omega: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``xi`` of prox centres ``omega`` (the centre is affine in ``xi``)."""
        mod = self.module
        c = np.asarray(mod.center_of(np.array([[0.0, 1.0], [0.0, 0.0]]), x), dtype=float)
        slope = c[1] - c[0]
        with np.errstate(all="ignore"):
            return (np.asarray(omega, dtype=float) - c[0]) / slope

    def breaks(self, x: np.ndarray, p: np.ndarray, label_index: int, test: bool = False) -> np.ndarray:
        """The panel boundaries in ``xi`` for one label value (energetic rule; ``test``: the rule of
        the test-point observables, where the prox is the identity: ``V = 0``)."""
        mod, plan = self.module, self.plan
        y = float(mod.LABEL_VALUES[label_index])
        zl = np.array([[0.0], [y]])
        xs = np.array(x, dtype=float)
        if test:
            xs[self._V] = 0.0
        parts = [_base_grid(plan)]
        if mod.N_TRANSITIONS:
            centres, widths = (np.asarray(a, dtype=float) for a in mod.channel_transitions(x, p))
            for c, w in zip(np.atleast_1d(centres), np.atleast_1d(widths)):
                if np.isfinite(c) and np.isfinite(w):
                    parts.append(c + w * LADDER)
        with np.errstate(all="ignore"):
            kinks = np.asarray(mod.prox_kinks(zl, xs, p), dtype=float).ravel()
            parts.append(self._to_xi(kinks, x))
            h = self._loss_points(p)[label_index]
            if h.size:
                g = np.asarray(mod.loss_profile(h[None, :], np.repeat(zl, h.size, axis=1), p)[0], dtype=float)
                parts.append(self._to_xi(h + xs[self._V] * g, x))
            if test:
                tb = np.asarray(mod.test_breaks(zl, p), dtype=float).ravel()
                parts.append(self._to_xi(tb, x))
        b = np.concatenate(parts)
        return np.sort(b[np.isfinite(b) & (np.abs(b) < plan.cut)])

    def rule(self, x: np.ndarray, p: np.ndarray, test: bool = False) -> QuadratureRule:
        """The rule at state ``x``: nodes ``(xi, label)`` over every label value, unit label weights."""
        nodes, weights = [], []
        for k, y in enumerate(self.module.LABEL_VALUES):
            xi, w = composite_normal_rule(self.breaks(x, p, k, test), self.plan)
            nodes.append(np.stack([xi, np.full(xi.size, float(y))]))
            weights.append(w)
        return QuadratureRule(np.ascontiguousarray(np.concatenate(nodes, axis=1)), np.concatenate(weights),
                              "kinks", self.plan.order)

    # ---------------------------------------------------------------- the integrator protocol
    def average(self, module: GeneratedModel, x: np.ndarray, p: np.ndarray, warm: Any = None,
                multistart: bool = True, prox_tol: float = 1e-12) -> EnergeticAverage:
        """``Psi_y`` and its gradient on the rule at ``x`` (every prox start; warm starts do not
        carry over between states, whose rules differ)."""
        rule = self.rule(x, p)
        return average_on_nodes(module, rule.nodes, rule.weights, x, p, None, True, prox_tol, self.backend)

    def test_rule(self, x: np.ndarray, p: np.ndarray) -> QuadratureRule:
        """The rule of the test-point observables at ``x`` (boundaries at their discontinuities)."""
        return self.rule(x, p, test=True)

    def companion(self) -> "KinkIntegrator":
        """The same boundaries with fewer points per panel (error estimates)."""
        return self.with_plan(self.plan.companion())

    def refined(self) -> "KinkIntegrator":
        """A finer rule (panels halved, higher order)."""
        return self.with_plan(self.plan.refined())

    def with_plan(self, plan: PanelPlan) -> "KinkIntegrator":
        """This integrator with another plan (loss scans shared)."""
        out = KinkIntegrator(self.module, plan, self.backend)
        out._points = self._points
        return out

    def describe(self) -> str:
        """One line for reports."""
        return f"kinks(composite Gauss-Legendre in xi, {self.plan.describe()}, x {len(self.module.LABEL_VALUES)} labels)"


# --------------------------------------------------------------------------- piecewise losses
#: transverse Gauss--Hermite points per axis of :class:`LineKinkIntegrator` (the line integrals
#: are smooth functions of the transverse coordinates once the kinks are located on every line)
LINE_ACROSS = 24
#: points per unit of the Gaussian variable at which the prox's piece is read along every line
#: before the changes are bisected (two kinks closer than this on one line can be missed; the
#: refined rule reads twice as densely)
LINE_SCAN = 8
#: bisection steps per located kink (a cell of 1/LINE_SCAN down to ~1e-16)
LINE_BISECT = 52


def prox_piece(module: GeneratedModel, z: np.ndarray, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """An integer per node naming the piece of a piecewise bracket's exact prox at ``z``: ``-1 - k``
    on breakpoint ``k``, else ``N_BRANCHES x`` (breakpoints below the minimiser) ``+`` its branch;
    ``-10**6`` where the prox failed. Any module with the piecewise functions (``PIECEWISE``)."""
    from .prox import piecewise_prox

    mod = module
    res = piecewise_prox(mod, np.ascontiguousarray(z), x, p)
    h = np.asarray(res.h, dtype=float).reshape(1, -1)
    with np.errstate(all="ignore"):
        b = np.asarray(mod.loss_breaks(z, x, p), dtype=float).reshape(mod.N_BREAKS, -1)
        below = np.sum(np.isfinite(b) & (b < h), axis=0)
        br = np.asarray(mod.branch_index(h, z, x, p), dtype=float).ravel()
    br = np.nan_to_num(br, nan=-1.0).astype(int)
    piece = below * mod.N_BRANCHES + br
    on = np.asarray(res.on_break if res.on_break is not None else np.full(piece.size, -1), dtype=int).ravel()
    piece = np.where(on >= 0, -1 - on, piece)
    return np.where(np.isfinite(h.ravel()), piece, -10**6)


def line_changes(piece, y: np.ndarray, u: np.ndarray, row: int = 0, steps: int | None = None) -> list[np.ndarray]:
    """Where ``piece(z)`` (an integer per node) changes along lines: ``z`` has the line's coordinate
    at ``row`` and the transverse coordinates ``y`` ``(dim - 1, M)`` (one line per column) in the
    other rows. The piece is read on the grid ``u`` and every change is bisected to round-off
    (``LINE_BISECT`` steps; a cell holding several changes gives them one after the other). One
    sorted array of located points per line (``steps``: bisection steps, default ``LINE_BISECT``)."""
    M = y.shape[1]
    steps = LINE_BISECT if steps is None else int(steps)

    def nodes(t: np.ndarray, yl: np.ndarray) -> np.ndarray:
        return np.vstack([yl[:row], t[None, :], yl[row:]])

    grid = nodes(np.tile(u, M), np.repeat(y, u.size, axis=1)) if M else u[None, :]
    s = piece(grid).reshape(max(M, 1), u.size)
    line, cell = np.nonzero(s[:, 1:] != s[:, :-1])
    lo, hi, end = u[cell].copy(), u[cell + 1].copy(), u[cell + 1].copy()
    s_lo, s_end = s[line, cell], s[line, cell + 1]
    found_u, found_line = [], []
    for _ in range(4):
        if not line.size:
            break
        yl = y[:, line] if M else np.empty((0, line.size))
        for _ in range(steps):
            mid = 0.5 * (lo + hi)
            left = piece(nodes(mid, yl)) == s_lo
            lo = np.where(left, mid, lo)
            hi = np.where(left, hi, mid)
            if np.all(hi - lo <= 1e-15 * (1.0 + np.abs(lo))):
                break
        found_u.append(0.5 * (lo + hi))
        found_line.append(line)
        s_hi = piece(nodes(hi, yl))
        more = (s_hi != s_end) & (end - hi > 1e-15 * (1.0 + np.abs(hi)))
        line, lo, hi, end, s_lo, s_end = line[more], hi[more], end[more], end[more], s_hi[more], s_end[more]
    kinks = np.concatenate(found_u) if found_u else np.empty(0)
    lines = np.concatenate(found_line) if found_line else np.empty(0, dtype=int)
    return [np.sort(kinks[lines == j]) for j in range(max(M, 1))]


def line_rule_applies(module: GeneratedModel) -> bool:
    """Whether :class:`LineKinkIntegrator` averages ``module``: a piecewise loss (module
    ``PIECEWISE``, exact prox :func:`replica.numeric.prox.piecewise_prox`) or a kinked label (module
    ``N_TEACHER_KINKS``, e.g. ``|h*|``) of a one-dimensional prox, no teacher channel (whose law
    :class:`KinkIntegrator` weighs) and no cluster labels."""
    return ((bool(module.PIECEWISE) or module.N_TEACHER_KINKS > 0) and module.PROX_DIM == 1
            and not module.KINK_RULE and not module.WEIGHTED
            and not module.DISCRETE and module.LABEL_VALUES is None
            and len(module.GAUSSIANS) >= 1)


def kink_integrator(module: GeneratedModel, plan: PanelPlan | None = None, backend: str = "auto") -> "KinkIntegrator":
    """The kink-aware energetic integrator of ``module``: :class:`KinkIntegrator` for a channel
    model, :class:`LineKinkIntegrator` for a piecewise loss with the teacher in the loss."""
    if line_rule_applies(module):
        return LineKinkIntegrator(module, plan, backend)
    return KinkIntegrator(module, plan, backend)


class LineKinkIntegrator(KinkIntegrator):
    """Energetic averages of a piecewise loss whose label is a function of the teacher (and noise)
    fields written into the loss (``max(0, 1 - tanh(h*) h)``, ``|h* + sqrt(Delta) z - h|``), or of
    a kinked label (``(|h*| - |h|)^2``, ``(max(0, h*) + sqrt(Delta) z - h)^2``): kinks located along
    lines, no channel.

    The integrand ``dF/dx`` at the exact piecewise prox is smooth in the Gaussians ``z`` except
    where the minimiser reaches or leaves a breakpoint of the loss (a kink) or jumps between
    pieces: curves in ``z``-space that no axis follows, on which tensor Gauss--Hermite converges
    algebraically and erratically (refinements then differ by less than their error). Along every
    line ``z = (u, y)`` (``u`` the student's Gaussian ``GAUSSIANS[0]``, ``y`` the others on a tensor
    Gauss--Hermite rule of ``across`` points per axis), the prox's piece -- the breakpoint it sits
    on, else the interval between breakpoints and the branch -- is read at ``LINE_SCAN`` points per
    unit of ``u`` and every change is bisected to round-off; the rule along the line is
    :func:`composite_normal_rule` with those points as panel boundaries. The line integrals are
    then smooth in ``y``, and both rules converge geometrically. The test rule does the same with
    the loss's piece at ``h = omega`` (the test integrands at a fresh sample).

    A kinked label changes branch where one of the module's ``teacher_kinks`` changes sign: the
    branch pattern joins the piece. Where such a condition does not depend on ``u`` at the state (an
    uninformed student, ``theta = 0``: ``h* = sqrt(rho) eta``), the kink is transverse; where it
    moves along one transverse axis only, the rule across is composite on that axis with a panel
    boundary at the kink (:meth:`_across`).
    """

    def __init__(self, module: GeneratedModel, plan: PanelPlan | None = None, backend: str = "auto",
                 across: int | None = None, scan: float = LINE_SCAN):
        if not line_rule_applies(module):
            raise ParameterError("quadrature", f"kinks: model {module.MODEL} has no kink-aware rule (it needs a "
                                               "teacher channel, or a piecewise loss of a one-dimensional prox)")
        self.module = module
        self.plan = plan or PanelPlan()
        self.backend = backend
        self.across = int(across if across is not None else LINE_ACROSS)
        self.scan = float(scan)
        self.dim = len(module.GAUSSIANS)
        self._points = {}
        self._V = module.FAMILIES["V"][0]

    # ---------------------------------------------------------------- the prox's piece
    def _label_branches(self, z: np.ndarray, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The kinked label's branch at every node, as bits (which ``teacher_kinks`` are positive)."""
        mod = self.module
        with np.errstate(all="ignore"):
            c = np.asarray(mod.teacher_kinks(z, x, p), dtype=float).reshape(mod.N_TEACHER_KINKS, -1)
        return np.sum((c > 0).astype(np.int64) << np.arange(mod.N_TEACHER_KINKS, dtype=np.int64)[:, None], axis=0)

    def _piece(self, z: np.ndarray, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        """An integer per node naming the piece of the prox at ``z``: ``-1 - k`` on breakpoint ``k``,
        else ``N_BRANCHES x`` (breakpoints below the minimiser) ``+`` its branch; with a kinked
        label, times ``2^N_TEACHER_KINKS`` plus the label's branch."""
        mod = self.module
        if not mod.PIECEWISE:
            return self._label_branches(z, x, p)
        piece = self._prox_piece(z, x, p)
        if mod.N_TEACHER_KINKS:
            piece = piece * (1 << mod.N_TEACHER_KINKS) + self._label_branches(z, x, p)
        return piece

    def _prox_piece(self, z: np.ndarray, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The piece of the exact piecewise prox (see :meth:`_piece`)."""
        return prox_piece(self.module, z, x, p)

    def _line_breaks(self, x: np.ndarray, p: np.ndarray, y: np.ndarray, test: bool) -> list[np.ndarray]:
        """Located changes of the prox's piece in ``u`` on every line (transverse points ``y``
        ``(dim - 1, M)``): one sorted array per line."""
        plan = self.plan
        xs = np.array(x, dtype=float)
        if test:  # at a fresh sample h = omega: the prox as V -> 0
            xs[self._V] = 1e-13 * max(abs(float(x[self._V])), 1e-300)
        n = int(np.ceil(2 * plan.cut * self.scan * plan.split))
        u = np.linspace(-plan.cut, plan.cut, n + 1)
        return line_changes(lambda z: self._piece(z, xs, p), y, u)

    def rule(self, x: np.ndarray, p: np.ndarray, test: bool = False) -> QuadratureRule:
        """The rule at state ``x``: composite Gauss--Legendre along ``u`` with the located kinks of
        every line as panel boundaries, times Gauss--Hermite across (``test``: the test rule)."""
        plan = self.plan
        G = self.dim
        if G > 1:
            axes = self._across(x, p)
            grids = np.meshgrid(*[a[0] for a in axes], indexing="ij")
            wgrids = np.meshgrid(*[a[1] for a in axes], indexing="ij")
            y = np.stack([g.ravel() for g in grids])
            wy = np.prod(np.stack([g.ravel() for g in wgrids]), axis=0)
            keep = wy > 0
            y, wy = y[:, keep], wy[keep]
        else:
            y, wy = np.empty((0, 0)), np.ones(1)
        base = _base_grid(plan)
        nodes, weights = [], []
        for j, kinks in enumerate(self._line_breaks(x, p, y, test)):
            u, wu = composite_normal_rule(np.concatenate([base, kinks]), plan)
            cols = [u[None, :]] + ([np.repeat(y[:, j:j + 1], u.size, axis=1)] if G > 1 else [])
            nodes.append(np.vstack(cols))
            weights.append(wu * wy[j])
        return QuadratureRule(np.ascontiguousarray(np.concatenate(nodes, axis=1)), np.concatenate(weights),
                              "kinks", self.plan.order)

    def _across(self, x: np.ndarray, p: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Nodes and weights on every transverse axis: Gauss--Hermite of ``across`` points, or, on an
        axis along which a kinked label's condition alone moves at this state (it does not depend on
        ``u`` there), a composite rule with a panel boundary where the condition vanishes."""
        G = self.dim
        xv, wv = hermite_1d(self.across)
        axes = [(xv, wv)] * (G - 1)
        mod = self.module
        if not mod.N_TEACHER_KINKS:
            return axes
        probe = np.zeros((G, G + 1))
        for j in range(G):
            probe[j, j + 1] = 1.0  # column 0: the origin; column j + 1: the unit point of axis j
        with np.errstate(all="ignore"):
            c = np.asarray(mod.teacher_kinks(probe, x, p), dtype=float).reshape(mod.N_TEACHER_KINKS, G + 1)
        slope = c[:, 1:] - c[:, :1]
        breaks: dict[int, list[float]] = {}
        for k in range(mod.N_TEACHER_KINKS):
            if not np.all(np.isfinite(slope[k])):
                continue
            scale = np.max(np.abs(slope[k])) + abs(c[k, 0])
            moving = np.flatnonzero(np.abs(slope[k, 1:]) > 1e-12 * scale)
            if abs(slope[k, 0]) <= 1e-12 * scale and moving.size == 1:
                j = int(moving[0])
                breaks.setdefault(j, []).append(-c[k, 0] / slope[k, j + 1])
        plan = PanelPlan(order=max(4, self.across // 2), spacing=2.5, cut=self.plan.cut)
        for j, b in breaks.items():
            axes[j] = composite_normal_rule(np.concatenate([_base_grid(plan), b]), plan)
        return axes

    def breaks(self, x: np.ndarray, p: np.ndarray, label_index: int = 0, test: bool = False) -> np.ndarray:
        """Every line's located kinks, together (for reports; the rule uses them line by line)."""
        G = self.dim
        y = (np.stack([g.ravel() for g in np.meshgrid(*([hermite_1d(self.across)[0]] * (G - 1)), indexing="ij")])
             if G > 1 else np.empty((0, 0)))
        return np.sort(np.concatenate(self._line_breaks(x, p, y, test)))

    def companion(self) -> "LineKinkIntegrator":
        """Fewer points per panel and across (error estimates)."""
        return LineKinkIntegrator(self.module, self.plan.companion(), self.backend,
                                  max(2, self.across - max(2, self.across // 3)), self.scan)

    def refined(self) -> "LineKinkIntegrator":
        """A finer rule: panels halved (kinks read twice as densely), higher order, more lines."""
        return LineKinkIntegrator(self.module, self.plan.refined(), self.backend,
                                  self.across + max(2, self.across // 3), self.scan)

    def with_plan(self, plan: PanelPlan) -> "LineKinkIntegrator":
        """This integrator with another plan."""
        return LineKinkIntegrator(self.module, plan, self.backend, self.across, self.scan)

    def describe(self) -> str:
        """One line for reports."""
        across = f" x gauss-hermite({self.dim - 1}-dim, order {self.across}) across" if self.dim > 1 else ""
        return (f"kinks(composite Gauss-Legendre along {self.module.GAUSSIANS[0]} with the prox's kinks located on "
                f"every line, {self.plan.describe()}{across})")


# --------------------------------------------------------------------------- the entropic rule
class EntropicKinkRule:
    """The entropic average of a one-weight penalty with one spectral atom on a kink-aware rule.

    The bracket ``r(w) + A w^2/2 - w Z`` depends on the Gaussians ``z`` only through
    ``Z = mu + a . z`` (module ``entropic_field``); with ``s = |a|`` and ``u = a . z / s`` the
    minimiser is a function of ``u`` with kinks at ``u = (Z_k - mu)/s`` (``entropic_kinks``).
    Nodes: composite Gauss--Legendre in ``u`` with those boundaries, times ``plan.across``
    Gauss--Hermite points in every orthogonal direction (the envelope gradient is linear there).
    """

    def __init__(self, module: GeneratedModel, plan: PanelPlan | None = None):
        if not module.ENTROPIC_KINK_RULE:
            raise ParameterError("entropic_rule", f"model {module.MODEL} has no kink-aware entropic rule "
                                                  "(it needs one weight per row and one spectral atom)")
        self.module = module
        self.plan = plan or PanelPlan()
        self.dim = len(module.ENTROPIC_GAUSSIANS)

    def rule(self, xhat: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Nodes ``(dim, N)`` and weights at the conjugates ``xhat``."""
        mod, plan = self.module, self.plan
        f = np.asarray(mod.entropic_field(xhat, p), dtype=float).ravel()
        mu, a = f[0], f[1:]
        s = float(np.linalg.norm(a))
        d = a / s if s > 0 else np.eye(self.dim)[0]
        with np.errstate(all="ignore"):
            kinks = np.asarray(mod.entropic_kinks(xhat, p), dtype=float).ravel()
            u_k = (kinks - mu) / s if s > 0 else np.empty(0)
        u, wu = composite_normal_rule(np.concatenate([_base_grid(plan), u_k]), plan)
        if self.dim == 1:
            return (d[:, None] * u[None, :]), wu
        # orthonormal complement of d (Householder), tensor Gauss-Hermite across
        e = np.zeros(self.dim)
        e[0] = 1.0
        v = d - e
        Hh = np.eye(self.dim) - 2.0 * np.outer(v, v) / (v @ v) if v @ v > 1e-30 else np.eye(self.dim)
        perp = Hh[:, 1:]  # columns orthonormal, orthogonal to d = Hh[:, 0]
        xv, wv = hermite_1d(plan.across)
        grids = np.meshgrid(*([xv] * (self.dim - 1)), indexing="ij")
        wgrids = np.meshgrid(*([wv] * (self.dim - 1)), indexing="ij")
        V = np.stack([g.ravel() for g in grids])            # (dim - 1, M)
        Wv = np.prod(np.stack([g.ravel() for g in wgrids]), axis=0)
        nodes = (d[:, None, None] * u[None, :, None] + (perp @ V)[:, None, :]).reshape(self.dim, -1)
        weights = (wu[:, None] * Wv[None, :]).ravel()
        return nodes, weights

    def companion(self) -> "EntropicKinkRule":
        """Fewer points per panel (error estimates)."""
        return EntropicKinkRule(self.module, self.plan.companion())

    def refined(self, factor: float | None = None) -> "EntropicKinkRule":
        """A finer rule (the panel plan's refinement; ``factor`` is accepted for the solver's
        rule interface and not used)."""
        return EntropicKinkRule(self.module, self.plan.refined())

    def describe(self) -> str:
        """One line for reports."""
        return f"entropic kinks(composite Gauss-Legendre along Z, {self.plan.describe()})"


def parse_plan(spec: str) -> PanelPlan:
    """``kinks`` or ``kinks:ORDER`` (Gauss--Legendre points per panel)."""
    _, _, order = spec.partition(":")
    if not order:
        return PanelPlan()
    try:
        n = int(order)
    except ValueError:
        raise ParameterError("quadrature", f"bad order in {spec!r} (expected kinks:N, N an integer)") from None
    if not 2 <= n <= 64:
        raise ParameterError("quadrature", f"{spec!r}: the order per panel must be in [2, 64]")
    return PanelPlan(order=n)

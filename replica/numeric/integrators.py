"""Energetic averages ``E_z[...]`` of the Moreau envelope, behind one small interface.

The solver needs, at a state ``x``, the energetic potential ``Psi_y = -E min_h F``
and its gradient ``dPsi_y/dx = -E[dF/dx at h = argmin]`` (envelope theorem). An
*integrator* computes both; :class:`QuadratureIntegrator` does it with a fixed
quadrature rule and the batched proximal solver. Other integrators (e.g. ones that
treat the discontinuities of ``argmin`` across quadrature cells) plug in by
implementing :meth:`average`, :meth:`companion` and :meth:`describe`.
"""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Sequence

import hashlib
import itertools
import math
import os
import tempfile

import numpy as np

from ..interface.generated_model import GeneratedModel
from ..artifacts.cache import default_cache_dir
from .energetic import EnergeticAverage, EnergeticIntegrator, average_on_nodes, label_weighted, start_minima
from .prox import GLOBAL, ProxConvention
from ..errors import ParameterError
from .kinks import kink_integrator, line_rule_applies, parse_plan
from .preintegration import CUT, householder, make_integrator, truncated_normal_rule
from .quadrature import QuadratureRule, gauss_hermite, parse_rule
from .unit_symmetry import default_unit_rule, permutation_group

__all__ = ["EnergeticAverage", "EnergeticIntegrator", "QuadratureIntegrator", "AlignedEntropicRule", "fold_nodes",
           "Permutation",
           "from_spec", "default_spec"]


class QuadratureIntegrator:
    """Average over the nodes of one :class:`~replica.numeric.quadrature.QuadratureRule`.

    ``symmetries`` (tuples of indices of ``z``) are sign flips under which the minimum of
    the bracket and the needed gradients are invariant (the module's ``SYMMETRIES`` that
    hold on the solver's branch, e.g. ``z -> -z`` on the semantic branch): each node is
    replaced by a canonical image and coincident nodes merged, which halves the node
    count of a symmetric rule per independent flip without changing the sums.
    ``backend`` is ``"auto"`` (the compiled per-node kernel of :mod:`replica.numeric.kernels`
    when numba is importable and the module carries node kernels, else numpy),
    ``"numba"`` or ``"numpy"``. ``chunk`` bounds the nodes the numpy path processes at
    once (memory ~ chunk x starts x temporaries).

    ``multistart=False`` with a warm start runs the inner minimisation from the warm start
    and the first ``warm_starts`` module starts (default 1: the previous minimisers and
    ``h = omega``, as :func:`replica.numeric.prox.prox`). The solver confirms convergence with
    every start. ``warm_starts=0`` is ~25% faster on branches where the bracket is
    unimodal at almost every node (semantic), but on the positional branch, where the
    argmin jumps between local minima from one iteration to the next, it takes more
    iterations and can settle on a neighbouring fixed point of the discretised map.
    """

    def __init__(self, rule: QuadratureRule, symmetries: Sequence[Sequence[int]] = (),
                 backend: str = "auto", chunk: int = 4096, warm_starts: int = 1, extra_starts: int = 0,
                 convention: ProxConvention = GLOBAL):
        self.rule = rule
        self.convention = convention
        # the local convention has one start by definition: no extra starts; and a start off the
        # origin is not invariant under the sign flips, so the rule is not folded by them
        self.extra_starts = 0 if convention.local else int(extra_starts)
        self.dim = rule.dim
        if convention.local and not convention.symmetric_start:
            symmetries = ()
        self.symmetries = tuple(s if isinstance(s, Permutation) else tuple(int(i) for i in s) for s in symmetries)
        self.backend = backend
        self.chunk = int(chunk)
        self.warm_starts = int(warm_starts)
        self.nodes, self.weights = fold_nodes(rule.nodes, rule.weights, self.symmetries)

    @property
    def size(self) -> int:
        """Number of nodes actually evaluated (after folding)."""
        return self.nodes.shape[1]

    def average(self, module, x, p, warm=None, multistart=True, prox_tol=1e-12) -> EnergeticAverage:
        """``Ψ_y`` and its gradient by the batched multistart prox on every (folded) node of the rule."""
        avg = self._average(module, x, p, warm, multistart, prox_tol)
        if self.extra_starts and multistart and not module.PIECEWISE:
            # (a piecewise bracket's prox is exact already: replica.numeric.prox.piecewise_prox)
            avg = self._more_starts(module, np.asarray(x, dtype=float), np.asarray(p, dtype=float), avg, prox_tol)
        return avg

    def _average(self, module, x, p, warm, multistart, prox_tol, n_starts=None) -> EnergeticAverage:
        return average_on_nodes(module, self.nodes, self.weights, x, p, warm, multistart, prox_tol, self.backend,
                                self.chunk, self.warm_starts, n_starts=n_starts, convention=self.convention)

    def _more_starts(self, module, x, p, avg: EnergeticAverage, prox_tol: float) -> EnergeticAverage:
        """``avg`` with the inner minimum also sought from :func:`extra_starts` at every node;
        nodes where one reaches a lower bracket take it (and the average is recomputed).
        Unchanged (the same object) when no node improves: the map, hence the fixed point, is
        then exactly the one of the module's starts."""
        nodes, weights = self.nodes, self.weights
        h = np.array(avg.state, dtype=float)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            base = np.asarray(module.prox_starts(nodes, x, p), dtype=float).reshape(module.N_STARTS, *h.shape)
            # the minimiser found so far first: a start that comes deep into its basin stops there
            starts = np.array([h] + extra_starts(base, h, self.extra_starts))
            hk, Fk, ok = start_minima(module, nodes, starts, x, p, prox_tol, self.backend)
            best, pick = Fk[0].copy(), np.zeros(h.shape[1], dtype=int)
            for s in range(1, len(starts)):
                better = ok[s] & (Fk[s] < best - 1e-12 * (1.0 + np.abs(best)))
                best[better], pick[better] = Fk[s, better], s
            moved = np.flatnonzero(pick)
            h[:, moved] = hk[pick[moved], :, moved].T
            n_better = int(moved.size)
            self.last_improved = n_better
            if not n_better:
                return avg
            F = np.asarray(module.bracket(h, nodes, x, p), dtype=float)
            G = module.bracket_parameter_gradient(h, nodes, x, p)  # d(W F)/dx with a channel's W
            psi = float(label_weighted(module, F, nodes, x, p) @ weights)
        return EnergeticAverage(-(G @ weights), -psi, h, avg.n_disagree + n_better, avg.n_failed)

    def with_extra_starts(self, level: int) -> "QuadratureIntegrator":
        """The same rule with the inner minimum also sought from :func:`extra_starts` of ``level``."""
        if self.convention.local:
            return self  # one start by definition (the convention's)
        return QuadratureIntegrator(self.rule, self.symmetries, self.backend, self.chunk, self.warm_starts,
                                    extra_starts=level, convention=self.convention)

    def with_convention(self, convention: ProxConvention) -> "QuadratureIntegrator":
        """The same rule with the minimiser chosen by ``convention`` (:class:`replica.numeric.prox.ProxConvention`)."""
        if convention == self.convention:
            return self
        return QuadratureIntegrator(self.rule, self.symmetries, self.backend, self.chunk, self.warm_starts,
                                    self.extra_starts, convention=convention)

    def with_rule(self, rule: QuadratureRule) -> "QuadratureIntegrator":
        """The same integrator (symmetries, backend, convention) on another rule."""
        return QuadratureIntegrator(rule, self.symmetries, self.backend, self.chunk, self.warm_starts,
                                    self.extra_starts, convention=self.convention)

    def refined(self) -> "QuadratureIntegrator":
        """The same integrator on the rule's refinement (:meth:`QuadratureRule.refined`); where that is
        over the node budget, one order more per axis (a tensor rule folded by many symmetries, e.g. a
        committee's in eight dimensions, is refined this way rather than not at all)."""
        try:
            rule = self.rule.refined()
        except ParameterError:
            if self.rule.kind != "gauss-hermite":
                raise
            rule = self.rule.refined(factor=1.0)
        return QuadratureIntegrator(rule, self.symmetries, self.backend, self.chunk,
                                    self.warm_starts, self.extra_starts, convention=self.convention)

    def companion(self) -> "QuadratureIntegrator":
        """The same integrator on the rule's companion (a lower order), for error estimates."""
        if getattr(self, "_companion", None) is None:
            self._companion = QuadratureIntegrator(self.rule.companion(), self.symmetries, self.backend,
                                                   self.chunk, self.warm_starts, convention=self.convention)
        return self._companion

    def describe(self) -> str:
        """The rule's description, with the symmetry folding (and the convention, where local)."""
        d = self.rule.describe()
        if self.size != self.rule.size:
            d += f" folded by symmetry to {self.size} nodes"
        if self.extra_starts:
            d += f", extra prox starts level {self.extra_starts}"
        if self.convention.local:
            d += f", {self.convention.describe()}"
        return d


#: the local correction's randomised rule (:class:`LocallyCorrectedIntegrator`): scrambled Sobol sets of
#: 2^LOCAL_CORRECTION_LOG2 points each, LOCAL_CORRECTION_SCRAMBLINGS of them (their spread is the bar)
LOCAL_CORRECTION_LOG2 = 12
LOCAL_CORRECTION_SCRAMBLINGS = 8


class LocallyCorrectedIntegrator:
    """Energetic averages under the local prox convention, as the global ones plus a correction.

    ``E[dF/dx at h_loc] = E[dF/dx at h_glob] + E[dF/dx(h_loc) - dF/dx(h_glob)]`` (and the same for
    ``F``): the first term by ``base``, a global integrator with its own accuracy and refinements
    (a tensor rule, or the jump-aware pre-integration where the jump check sends the solve); the
    second -- zero wherever the descent from the start reaches the global minimum, which on the
    paper's model is all but ~0.1-1 % of the nodes -- by randomised quasi-Monte-Carlo
    (``correction``: scrambled Sobol sets, the global minimum there sought with one level of extra
    starts). The correction's statistical error is measured by its spread across the sets
    (:meth:`correction_replicates`, :func:`replica.numeric.accuracy.correction_check`); ``refined()`` and
    ``companion()`` keep the correction's points, so that the refinement ladder measures ``base``.
    """

    def __init__(self, base, correction: QuadratureRule, convention: ProxConvention, backend: str = "auto",
                 scramblings: int = LOCAL_CORRECTION_SCRAMBLINGS):
        if not convention.local:
            raise ValueError("a local correction needs the local convention")
        self.base, self.correction, self.convention = base, correction, convention
        self.backend = backend
        self.scramblings = int(scramblings)
        self.dim = base.dim
        self._global = QuadratureIntegrator(correction, (), backend, extra_starts=1)
        self._local = QuadratureIntegrator(correction, (), backend, convention=convention)

    @classmethod
    def around(cls, base, convention: ProxConvention, backend: str = "auto") -> "LocallyCorrectedIntegrator":
        """``base`` with the default correction rule (:data:`LOCAL_CORRECTION_LOG2`)."""
        from .quadrature import sobol_rqmc

        rule = sobol_rqmc(base.dim, LOCAL_CORRECTION_LOG2, scramblings=LOCAL_CORRECTION_SCRAMBLINGS)
        return cls(base, rule, convention, backend)

    def with_base(self, base) -> "LocallyCorrectedIntegrator":
        """The same correction around another global integrator."""
        return LocallyCorrectedIntegrator(base, self.correction, self.convention, self.backend, self.scramblings)

    @property
    def size(self) -> int:
        """Nodes of one evaluation of ``base`` (the correction's are fixed)."""
        return int(getattr(self.base, "size", 0))

    @property
    def last_stats(self):
        """The base integrator's statistics of its last evaluation (pre-integration's switches)."""
        return getattr(self.base, "last_stats", None)

    @property
    def direction(self):
        return getattr(self.base, "direction", None)

    def _terms(self, module, x, p, prox_tol, rule_slice=None):
        loc, glo = self._local, self._global
        if rule_slice is not None:
            nodes, weights = rule_slice
            sub = QuadratureRule(nodes, weights, "sobol", self.correction.order)
            loc = QuadratureIntegrator(sub, (), self.backend, convention=self.convention)
            glo = QuadratureIntegrator(sub, (), self.backend, extra_starts=1)
        a_loc = loc.average(module, x, p, prox_tol=prox_tol)
        a_glo = glo.average(module, x, p, prox_tol=prox_tol)
        return a_loc.grad - a_glo.grad, a_loc.psi_y - a_glo.psi_y, a_loc

    def average(self, module, x, p, warm=None, multistart=True, prox_tol=1e-12) -> EnergeticAverage:
        """The base's global average plus the local correction on the randomised points."""
        avg = self.base.average(module, x, p, warm=warm, multistart=multistart, prox_tol=prox_tol)
        dg, dpsi, a_loc = self._terms(module, np.asarray(x, dtype=float), np.asarray(p, dtype=float), prox_tol)
        return EnergeticAverage(avg.grad + dg, avg.psi_y + dpsi, avg.state, avg.n_disagree,
                                avg.n_failed + a_loc.n_failed, a_loc.n_saddle)

    def correction_replicates(self, module, x, p, prox_tol=1e-12) -> list[tuple[np.ndarray, float]]:
        """The correction ``(d grad, d Psi_y)`` on each scrambled set alone (their mean is the
        correction :meth:`average` adds): the replicates behind its statistical error."""
        x, p = np.asarray(x, dtype=float), np.asarray(p, dtype=float)
        R = self.scramblings
        n = self.correction.size // R
        out = []
        for r in range(R):
            sl = slice(r * n, (r + 1) * n)
            nodes = np.ascontiguousarray(self.correction.nodes[:, sl])
            dg, dpsi, _ = self._terms(module, x, p, prox_tol, (nodes, np.full(n, 1.0 / n)))
            out.append((dg, dpsi))
        return out

    def refined(self) -> "LocallyCorrectedIntegrator":
        """The base refined, the same correction points."""
        return self.with_base(self.base.refined())

    def companion(self) -> "LocallyCorrectedIntegrator":
        """The base's companion, the same correction points."""
        if getattr(self, "_companion", None) is None:
            self._companion = self.with_base(self.base.companion())
        return self._companion

    def with_extra_starts(self, level: int) -> "LocallyCorrectedIntegrator":
        """More starts for the base's global minimum (where it takes them)."""
        if not hasattr(self.base, "with_extra_starts"):
            return self
        return self.with_base(self.base.with_extra_starts(level))

    def describe(self) -> str:
        """The base's description, the convention and the correction's rule."""
        return (f"{self.base.describe()} + {self.convention.describe()} correction on "
                f"{self.correction.describe()}")


#: scale factors applied to the module's starts, two more per level of :func:`extra_starts`
_START_SCALES = (0.5, 2.0, -1.0, 1.5, 0.25, 3.0, -0.5, -2.0, 4.0, 0.75)


def extra_starts(base: np.ndarray, h: np.ndarray, level: int) -> list[np.ndarray]:
    """More starting points for the inner minimum at every node (``level >= 1``), generic in the
    model: a ``3^D - 1`` grid around 0 on the node's scale of the starts (``D <= 3``; it breaks the
    invariant lines such as ``h_1 = h_2`` on which the module's starts sit at symmetric nodes), the
    midpoints of every pair of module starts ``base`` ``(S, D, N)``, ``level`` seeded Gaussian
    perturbations of the current minimiser ``h`` ``(D, N)``, and from level 2 on the module's
    starts scaled by ``2 (level - 1)`` factors. A start can only find a lower bracket (the
    caller keeps the lower one), never a worse one."""
    if level <= 0:
        return []
    S, D = base.shape[0], base.shape[1]
    scale = np.max(np.abs(base), axis=(0, 1)) + np.max(np.abs(h), axis=0) + 1e-3
    out: list[np.ndarray] = []
    if D <= 3:
        for offset in itertools.product((-1.0, 0.0, 1.0), repeat=D):
            if any(offset):
                out.append(0.5 * np.asarray(offset)[:, None] * scale[None, :])
    out += [0.5 * (base[i] + base[j]) for i in range(S) for j in range(i + 1, S)]
    rng = np.random.default_rng(level)
    out += [h + scale * rng.standard_normal(h.shape) for _ in range(level)]
    out += [c * b for c in _START_SCALES[:min(2 * (level - 1), len(_START_SCALES))] for b in base
            if np.any(b != 0)]
    return [np.ascontiguousarray(np.broadcast_to(s, h.shape), dtype=float) for s in out]


#: tensor Gauss-Hermite orders per axis of an entropic average (by dimension ``r + r_t``) where no
#: aligned rule applies, and the fallback of :class:`AlignedEntropicRule`
TENSOR_ENTROPIC_ORDERS = {1: 400, 2: 120, 3: 30}


#: most points per piece of an aligned rule: it converges exponentially (the default 40 reaches
#: round-off on soft thresholding), and its Golub--Welsch step grows like the cube of the order
#: (aligned:100000 ran for minutes inside LAPACK, deaf to SIGINT and SIGTERM)
MAX_ALIGNED_ORDER = 200


class AlignedEntropicRule:
    """The entropic average of a scalar (``r = 1``) separable regularizer, aligned with its kinks.

    The entropic bracket ``B(w; nu) = r(w) + 1/2 Vhat w^2 - w b(nu)`` depends on the Gaussians
    ``nu = (xi, tau)`` through one affine combination ``b = b_0 + c . nu`` (docs/explanation/theory.md §3). In the
    rotated coordinates ``u = c . nu / |c|`` (first axis) and the orthogonal complement
    (Householder), the minimiser depends on ``u`` alone and every integrand (``B``, ``dB/dxhat``,
    entropic observables) is a polynomial of degree <= 2 in the transverse coordinates:
    Gauss-Hermite of order ``transverse`` (3: exact to degree 5) there. Along ``u`` the integrand
    is piecewise smooth, with kinks where the minimiser enters or leaves a flat piece (``w = 0``
    for l1): they are located (flat runs of the minimiser on a ``detect``-point grid, then
    bisection to round-off) and each piece gets an ``order``-point truncated-normal Gauss rule
    (:func:`replica.numeric.preintegration.truncated_normal_rule`), so the average converges
    exponentially in ``order`` instead of algebraically as a tensor rule across the kinks does
    (soft thresholding: 2e-5 relative on ``V`` at 1368^2 tensor nodes).

    :meth:`nodes_weights` returns None where the assumptions fail (``b`` not affine in ``nu``,
    ``c = 0``): the solver then uses the tensor rule ``fallback``.
    """

    kind = "aligned"

    def __init__(self, dim: int, order: int = 40, transverse: int = 3, detect: int = 801,
                 fallback: QuadratureRule | None = None):
        if dim < 1 or order < 2 or transverse < 1 or detect < 3:
            raise ParameterError("entropic_rule", f"need dim >= 1, order >= 2, transverse >= 1, detect >= 3; "
                                                  f"got {dim}, {order}, {transverse}, {detect}")
        if order > MAX_ALIGNED_ORDER:
            raise ParameterError("entropic_rule", f"aligned:{order}: at most {MAX_ALIGNED_ORDER} points per piece "
                                                  "(the aligned rule converges exponentially in them; the default "
                                                  "is 40)")
        self.dim, self.order, self.transverse, self.detect = int(dim), int(order), int(transverse), int(detect)
        self.fallback = fallback or gauss_hermite(dim, TENSOR_ENTROPIC_ORDERS.get(dim, 12))
        self.last_used_fallback = False

    def refined(self, factor: float | None = None) -> "AlignedEntropicRule":
        """More points per piece (x ``factor``, default 1.5), a finer detection grid and fallback."""
        f = 1.5 if factor is None else factor
        order = min(MAX_ALIGNED_ORDER, max(self.order + 1, math.ceil(f * self.order)))
        return AlignedEntropicRule(self.dim, order, self.transverse + 1, 2 * self.detect - 1, self.fallback.refined(f))

    def describe(self) -> str:
        return (f"aligned(dim={self.dim}, order={self.order} per piece, transverse=gh{self.transverse}, "
                f"detect={self.detect}; fallback {self.fallback.describe()})")

    def nodes_weights(self, bracket, argmin, xhat, p):
        """Nodes ``(dim, N)`` and weights of the rule at conjugates ``xhat`` (None: use the fallback).
        ``bracket(w, nodes, xhat, p)`` and ``argmin(nodes)`` are the module's."""
        d = self.dim
        one = np.ones((1, 1))
        with np.errstate(all="ignore"):
            b0 = -float(np.asarray(bracket(one, np.zeros((d, 1)), xhat, p)).ravel()[0])

            c = np.array([-float(np.asarray(bracket(one, np.eye(d)[:, [j]], xhat, p)).ravel()[0]) - b0
                          for j in range(d)])
            check = -float(np.asarray(bracket(one, np.ones((d, 1)) * 0.7, xhat, p)).ravel()[0]) - b0
        norm = float(np.linalg.norm(c))
        if not (np.all(np.isfinite(c)) and norm > 0 and abs(check - 0.7 * c.sum()) <= 1e-9 * (1 + abs(check))):
            self.last_used_fallback = True
            return None

        Q = householder(c / norm)
        ax = Q[:, 0]

        def w_of(u):
            return np.asarray(argmin(ax[:, None] * np.atleast_1d(u)[None, :]), dtype=float)[0]

        grid = np.linspace(-CUT, CUT, self.detect)
        wg = w_of(grid)
        flat = np.abs(np.diff(wg)) <= 1e-13 * (1.0 + np.abs(wg[1:]))
        breaks = []
        for i in np.flatnonzero(np.diff(flat.astype(int)) != 0):
            # flat[i] != flat[i+1]: a kink in [grid[i], grid[i + 2]] where w leaves its flat value
            if flat[i]:
                lo, hi, wflat = grid[i + 1], grid[i + 2], wg[i + 1]
            else:
                lo, hi, wflat = grid[i], grid[i + 1], wg[i + 1]
            inside_lo = abs(w_of(lo)[0] - wflat) <= 1e-13 * (1 + abs(wflat))
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                if (abs(w_of(mid)[0] - wflat) <= 1e-13 * (1 + abs(wflat))) == inside_lo:
                    lo = mid
                else:
                    hi = mid
            breaks.append(0.5 * (lo + hi))
        edges = np.array([-CUT] + sorted(breaks) + [CUT])
        # the discretised weight needs well over order points for the rule to be exact to degree 2 order - 1
        un, uw = truncated_normal_rule(edges[:-1], edges[1:], self.order, max(96, 2 * self.order))
        un, uw = un.ravel(), uw.ravel()
        keep = uw > 0
        un, uw = un[keep], uw[keep]
        uw = uw / uw.sum()
        if d == 1:
            nodes = ax[:, None] * un[None, :]
            self.last_used_fallback = False
            return nodes, uw
        t = gauss_hermite(d - 1, self.transverse)
        U = np.vstack([np.repeat(un, t.size), np.tile(t.nodes, (1, un.size))])
        W = np.repeat(uw, t.size) * np.tile(t.weights, un.size)
        self.last_used_fallback = False
        return Q @ U, W


_FOLDED: "OrderedDict[tuple, tuple]" = OrderedDict()


class Permutation(tuple):
    """A permutation of the coordinates of ``z`` (``z -> z[perm]``) among a fold's generators, beside
    the sign flips (tuples of flipped indices): the unit permutations of a model with exchangeable
    units (module ``UNIT_PERMUTATIONS``, :mod:`replica.numeric.unit_symmetry`)."""

    def __repr__(self) -> str:
        return f"Permutation({tuple(self)!r})"


def fold_nodes(nodes: np.ndarray, weights: np.ndarray, flips: Sequence[Sequence[int]]
               ) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of a rule folded by the sign-flip group generated by ``flips``.

    Every node is mapped to its lexicographically largest image under the group and the
    weights of coincident images are summed: ``sum_j w_j f(z_j)`` is unchanged for every
    ``f`` invariant under the flips, whatever the rule (a symmetric rule such as tensor
    Gauss-Hermite or Smolyak loses a factor 2 of nodes per independent flip). Generators that
    are :class:`Permutation` of the coordinates fold the same way, after the flips (every node is
    still mapped to one of its images, so the sums of invariant functions are unchanged; a tensor
    rule loses up to the group's order). The last few results are cached by the identity of the arrays.
    """
    key = (id(nodes), id(weights), tuple(("p", *f) if isinstance(f, Permutation) else tuple(int(i) for i in f)
                                         for f in flips))
    hit = _FOLDED.get(key)
    if hit is not None and hit[0] is nodes and hit[1] is weights:
        _FOLDED.move_to_end(key)
        return hit[2]
    out = _stored_fold(nodes, weights, key[2]) if key[2] and nodes.shape[1] >= STORE_FOLDS_FROM else None
    if out is None:
        out = _fold(nodes, weights, key[2])
        if key[2] and nodes.shape[1] >= STORE_FOLDS_FROM:
            _store_fold(nodes, weights, key[2], out)
    _FOLDED[key] = (nodes, weights, out)
    while len(_FOLDED) > 8:
        _FOLDED.popitem(last=False)
    return out


#: rules with at least this many nodes keep their folding in the user cache (``<cache>/folds``):
#: folding a 4-D rule of 1e5 nodes costs ~0.05 s, a fresh ``replica solve`` folds ~10 of them
STORE_FOLDS_FROM = 20_000


def _fold_path(nodes: np.ndarray, weights: np.ndarray, flips) -> Path:
    h = hashlib.blake2b(digest_size=20)
    h.update(repr((nodes.shape, str(nodes.dtype), flips, FOLD_FORMAT)).encode())
    h.update(np.ascontiguousarray(nodes).tobytes())
    h.update(np.ascontiguousarray(weights).tobytes())
    return default_cache_dir() / "folds" / f"{h.hexdigest()}.npz"


#: bump when :func:`_fold` changes what it returns
FOLD_FORMAT = 1


def _stored_fold(nodes: np.ndarray, weights: np.ndarray, flips) -> tuple[np.ndarray, np.ndarray] | None:
    """The folding of this rule (keyed by its exact bytes and the flips) from the user cache, or None."""
    try:
        with np.load(_fold_path(nodes, weights, flips)) as f:
            out = np.ascontiguousarray(f["nodes"]), np.ascontiguousarray(f["weights"])
    except (OSError, KeyError, ValueError, EOFError):
        return None
    if out[0].ndim != 2 or out[0].shape[0] != nodes.shape[0] or out[1].shape != (out[0].shape[1],):
        return None
    return out


def _store_fold(nodes: np.ndarray, weights: np.ndarray, flips, out: tuple[np.ndarray, np.ndarray]) -> None:
    """Write the folding atomically (a temporary file moved into place); a cache that cannot be
    written is skipped."""
    path = _fold_path(nodes, weights, flips)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, nodes=out[0], weights=out[1])
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def _fold(nodes: np.ndarray, weights: np.ndarray, gens) -> tuple[np.ndarray, np.ndarray]:
    perms = [tuple(int(i) for i in g[1:]) for g in gens if g and g[0] == "p"]
    flips = [g for g in gens if not (g and g[0] == "p")]
    nodes, weights = _fold_flips(nodes, weights, flips)
    return _fold_permutations(nodes, weights, perms)


def _fold_permutations(nodes: np.ndarray, weights: np.ndarray, perms) -> tuple[np.ndarray, np.ndarray]:
    """Every node mapped to its lexicographically largest image under the group the coordinate
    permutations ``perms`` generate; coincident nodes merged."""
    if not perms:
        return nodes, weights
    return _fold_images(nodes, weights, (nodes[list(g), :] for g in permutation_group(perms)))


def _fold_flips(nodes: np.ndarray, weights: np.ndarray, flips) -> tuple[np.ndarray, np.ndarray]:
    """The same for the group of sign flips of the coordinate sets ``flips``."""
    if not flips:
        return nodes, weights
    group = {frozenset()}
    for f in flips:
        group |= {g ^ frozenset(f) for g in group}
    signs = []
    for g in group:
        sign = np.ones(nodes.shape[0])
        sign[list(g)] = -1.0
        signs.append(sign)
    return _fold_images(nodes, weights, (nodes * sign[:, None] for sign in signs))


def _fold_images(nodes: np.ndarray, weights: np.ndarray, images) -> tuple[np.ndarray, np.ndarray]:
    """Every node (a column) replaced by the lexicographically largest of its ``images`` (arrays
    shaped like ``nodes``, column by column; compared rounded to 1e-12), coincident nodes merged
    with their weights summed."""
    canon = nodes.copy()
    key = np.round(canon, 12) + 0.0
    cols = np.arange(nodes.shape[1])
    for img in images:
        ikey = np.round(img, 12) + 0.0
        diff = ikey != key
        first = np.argmax(diff, axis=0)
        greater = diff.any(axis=0) & (ikey[first, cols] > key[first, cols])
        canon[:, greater] = img[:, greater]
        key[:, greater] = ikey[:, greater]
    _, index, inverse = np.unique(key.T, axis=0, return_index=True, return_inverse=True)
    folded_w = np.bincount(inverse.ravel(), weights=weights, minlength=index.size)
    return np.ascontiguousarray(canon[:, index]), folded_w


def from_spec(spec: "str | QuadratureRule | EnergeticIntegrator | None", module: GeneratedModel,
              branch: str | None = None, prox: ProxConvention = GLOBAL):
    """A quadrature rule or integrator from a user-facing spec (CLI ``--quadrature``).

    ``"gh:N"``, ``"smolyak:N"``, ``"sobol:LOG2N"``, ``"d7"``, ``"fast|default|high"`` (rules, see
    :func:`replica.numeric.quadrature.parse_rule`); ``"preint"`` or ``"preint:fast|default|high"``
    (the jump-aware pre-integration of :mod:`replica.numeric.preintegration`); ``"auto"``: Gauss-
    Hermite or pre-integration by :func:`default_spec`. Objects pass through; ``None`` means the
    solver's default. Under the local convention (``prox``) only rules apply: ``"auto"`` is the
    default rule, and the integrators that follow the global minimiser are refused.
    """
    if spec is None or not isinstance(spec, str):
        return spec
    if prox.local:
        if spec == "auto":
            return None  # the solver's default under the local convention (a locally corrected rule)
        if spec.startswith(("preint", "kinks")):
            raise ParameterError("quadrature", f"{spec!r} follows the global minimiser; with the local prox "
                                               "convention use a rule (gh:N, sobol:LOG2N, d7, default)")
    if spec == "auto":
        spec = default_spec(module, branch)
    if spec.startswith("preint"):
        why = preintegration_refusal(module)
        if why is not None:
            raise ParameterError("quadrature", f"{spec!r}: {why}")

    if spec.startswith("kinks"):
        return kink_integrator(module, parse_plan(spec))
    try:
        if spec.startswith("preint"):
            _, _, level = spec.partition(":")
            return make_integrator(module, level or "default")
        return parse_rule(spec, len(module.GAUSSIANS))
    except ParameterError as exc:  # name the user's flag, whatever the inner parameter was
        if exc.name == "quadrature":
            raise
        raise ParameterError("quadrature", f"{spec!r}: {exc}") from None


def preintegration_refusal(module: GeneratedModel) -> str | None:
    """Why the jump-aware pre-integration (:mod:`replica.numeric.preintegration`) cannot average the
    energetic potential of ``module``, or None where it can."""
    if module.DISCRETE:  # token clusters: Gaussian rules x labels
        return (f"the pre-integration integrator does not average over the cluster labels of {module.MODEL}; "
                "use a rule (gh:N, default, ...)")
    if module.WEIGHTED or module.PIECEWISE:
        return ("pre-integration follows Newton minimisers along lines and does not weight by a channel's label "
                f"law; for {module.MODEL} use kinks (the kink-aware rule) or a Gauss-Hermite rule (gh:N)")
    return None


def default_spec(module: GeneratedModel, branch: str | None = None) -> str:
    """The ``auto`` quadrature of ``branch``: Gauss-Hermite (``default``) where a mirror symmetry
    holds on the branch (a fold symmetry mapping the minimiser ``h -> -h``, module ``MIRRORED``:
    the bracket's minima come in mirror pairs that the folded rule treats alike, and the argmin
    barely ever switches between minima -- measured on the semantic branch of the paper's
    model), the jump-aware pre-integration (``preint:default``) elsewhere, where tensor
    Gauss-Hermite converges erratically (docs/explanation/quadrature.md); for a model with token clusters
    always Gauss-Hermite (the solver multiplies Gaussian rules by the label configurations,
    :mod:`replica.numeric.labels`, which pre-integration does not), and for a channel model without a
    kink-aware rule (several Gaussians: e.g. a three-class argmax) or a piecewise loss."""
    if module.KINK_RULE or line_rule_applies(module):
        return "kinks"  # a channel model, or a piecewise loss, with a one-dimensional prox (replica.numeric.kinks)
    if module.DISCRETE or module.WEIGHTED or module.PIECEWISE:
        return "default"  # labels, a channel's weight or a piecewise prox: pre-integration has none of them
    pinned = set(module.BRANCHES.get(branch or "free", ()))
    mirror = any(mirrored and all(f in pinned or f not in module.FAMILIES for f in fams)
                 for (fams, _), mirrored in zip(module.SYMMETRIES, module.MIRRORED))
    # exchangeable units in five dimensions and more: scrambled Sobol points (tensor Gauss-Hermite
    # rules, even folded by the unit permutations, do not converge there: default_unit_rule)
    spec = default_unit_rule(module)
    if spec is not None:
        return spec
    return "default" if mirror else "preint:default"

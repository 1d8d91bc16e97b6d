"""Gaussian quadrature rules for ``E_{z ~ N(0, I_dim)} f(z)``.

* :func:`gauss_hermite` -- tensor Gauss-Hermite, exact for polynomials of degree
  ``2n - 1`` per axis; the default up to 4-5 dimensions;
* :func:`smolyak` -- a sparse grid (Smolyak combination of Gauss-Hermite rules) for
  7-8 dimensions, where a tensor rule would need ``n^dim`` nodes;
* :func:`sobol_rqmc` -- randomised quasi-Monte-Carlo (scrambled Sobol points),
  whose spread across scramblings is a statistical error estimate.

Every rule knows a *companion* (:meth:`QuadratureRule.companion`), a cheaper rule of
the same family, so that every expectation can be reported with an error estimate:
the difference between the two orders.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import ParameterError
from ..validation import check_rule_order, check_rule_size


@dataclass(frozen=True)
class QuadratureRule:
    """Nodes ``(dim, N)`` and weights ``(N,)`` (summing to 1) for a standard Gaussian."""

    nodes: np.ndarray
    weights: np.ndarray
    kind: str
    order: int

    @property
    def dim(self) -> int:
        """Dimension of the rule (number of Gaussian coordinates)."""
        return self.nodes.shape[0]

    @property
    def size(self) -> int:
        """Number of nodes."""
        return self.nodes.shape[1]

    def expect(self, values: np.ndarray) -> np.ndarray:
        """``E f`` from ``values`` of shape ``(..., N)``."""
        return values @ self.weights

    def companion(self) -> "QuadratureRule":
        """A lower-order rule of the same family (for error estimates)."""
        if self.kind == "gauss-hermite":
            return gauss_hermite(self.dim, max(2, self.order - max(2, self.order // 3)))
        if self.kind == "smolyak":
            return smolyak(self.dim, max(1, self.order - 1))
        if self.kind == "sobol":
            return sobol_rqmc(self.dim, max(0, self.order - 1), seed=1)
        if self.kind == "degree-7 pairs":  # no lower member: a tensor rule of lower degree per axis
            return gauss_hermite(self.dim, 3)
        raise ValueError(self.kind)

    def refined(self, factor: float | None = None) -> "QuadratureRule":
        """A higher-order rule of the same family: the second rule of an error bar
        (:mod:`replica.numeric.accuracy`). Gauss-Hermite: ``order + max(2, order // 3)`` per axis (the
        inverse of :meth:`companion`), or ``ceil(factor * order)``; Smolyak: one level more;
        Sobol: twice the points. Raises :class:`ParameterError` (``quadrature``) over the node
        budget (:func:`replica.validation.check_rule_size`)."""
        try:
            if self.kind == "gauss-hermite":
                order = (self.order + max(2, self.order // 3) if factor is None
                         else max(self.order + 1, math.ceil(factor * self.order)))
                return gauss_hermite(self.dim, order)
            if self.kind == "smolyak":
                return smolyak(self.dim, self.order + 1)
            if self.kind == "sobol":
                return sobol_rqmc(self.dim, self.order + 1)
            if self.kind == "degree-7 pairs":  # no higher member: the tensor rule of degree 15 per axis
                return gauss_hermite(self.dim, 8)
        except ParameterError as exc:
            raise ParameterError("quadrature", f"cannot refine {self.describe()}: {exc}") from None
        raise ValueError(self.kind)

    def describe(self) -> str:
        """A one-line description, e.g. ``gauss-hermite(dim=4, order=14, nodes=38416)``."""
        return f"{self.kind}(dim={self.dim}, order={self.order}, nodes={self.size})"


#: above this order numpy's ``hermegauss`` overflows (NaN weights from order ~350 on);
#: up to it, it agrees with scipy's ``roots_hermitenorm`` to 1e-15 and is kept so that every
#: result at the usual orders stays bit-identical
_HERMEGAUSS_MAX = 150


@lru_cache(maxsize=64)
def hermite_1d(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` probabilists' Gauss-Hermite nodes and weights, normalised to the N(0, 1) density (cached:
    do not modify the arrays)."""
    if n <= _HERMEGAUSS_MAX:
        x, w = np.polynomial.hermite_e.hermegauss(n)
    else:
        # Golub-Welsch / asymptotic expansions (scipy): stable at every order; the outermost
        # weights underflow to exactly 0, which is harmless
        from scipy.special import roots_hermitenorm

        x, w = roots_hermitenorm(n)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0):
        raise ParameterError("order", f"Gauss-Hermite rule of order {n} has non-finite nodes or weights")
    return x, w / w.sum()


@lru_cache(maxsize=32)
def legendre_1d(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` Gauss-Legendre nodes and weights on ``[-1, 1]`` (cached: do not modify the arrays)."""
    return np.polynomial.legendre.leggauss(n)


def gauss_hermite(dim: int, order: int) -> QuadratureRule:
    """Tensor Gauss-Hermite rule with ``order`` points per axis (``order**dim`` nodes)."""
    if dim < 1:
        raise ParameterError("dim", f"quadrature dimension must be >= 1, got {dim}")
    if order < 1:
        raise ParameterError("order", f"quadrature order must be >= 1, got {order}")
    check_rule_size("gh", dim, order, "order")
    x, w = hermite_1d(order)
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    wgrids = np.meshgrid(*([w] * dim), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids])
    weights = np.prod(np.stack([g.ravel() for g in wgrids]), axis=0)
    return QuadratureRule(nodes, weights, "gauss-hermite", order)


def smolyak(dim: int, level: int) -> QuadratureRule:
    """Smolyak sparse grid of level ``level`` built from Gauss-Hermite rules with ``2l-1`` points.

    Combination technique: ``sum_{level <= |l| <= level + dim - 1}
    (-1)^{level + dim - 1 - |l|} C(dim - 1, level + dim - 1 - |l|) (U_{l_1} x ... x U_{l_dim})``.
    Exact for polynomials of total degree ``4 level - 3``. Coincident nodes are merged.
    """
    if dim < 1 or level < 1:
        raise ParameterError("level", f"need dim >= 1 and level >= 1, got dim={dim}, level={level}")
    check_rule_size("smolyak", dim, level, "level")
    q = level + dim - 1
    acc: dict[tuple, float] = {}
    for lvec in itertools.product(range(1, level + 1), repeat=dim):
        s = sum(lvec)
        if s < max(dim, q - dim + 1) or s > q:
            continue
        coef = (-1) ** (q - s) * math.comb(dim - 1, q - s)
        rules = [hermite_1d(2 * l - 1) for l in lvec]
        for combo in itertools.product(*[range(len(r[0])) for r in rules]):
            node = tuple(round(float(rules[k][0][i]), 12) for k, i in enumerate(combo))
            weight = coef * float(np.prod([rules[k][1][i] for k, i in enumerate(combo)]))
            acc[node] = acc.get(node, 0.0) + weight
    keys = [k for k, v in acc.items() if abs(v) > 1e-300]
    nodes = np.array(keys, dtype=float).T.reshape(dim, -1)
    weights = np.array([acc[k] for k in keys])
    return QuadratureRule(nodes, weights, "smolyak", level)


#: independent scramblings of a ``sobol:M`` rule (their spread is its bar, replica.numeric.rqmc)
SOBOL_SCRAMBLINGS = 8


def sobol_rqmc(dim: int, log2_points: int, scramblings: int = SOBOL_SCRAMBLINGS, seed: int = 0) -> QuadratureRule:
    """Randomised QMC: ``scramblings`` independent scrambled Sobol sets of ``2**log2_points`` points.

    The points are mapped to Gaussians by the inverse normal CDF. Equal weights.
    """
    from scipy.stats import norm, qmc

    if dim < 1 or log2_points < 0 or scramblings < 1:
        raise ParameterError("log2_points", f"need dim >= 1, log2_points >= 0 and scramblings >= 1, got "
                                            f"dim={dim}, log2_points={log2_points}, scramblings={scramblings}")
    check_rule_size("sobol", dim, log2_points, "log2_points")
    pts = []
    for s in range(scramblings):
        u = qmc.Sobol(d=dim, scramble=True, seed=seed * 1000 + s).random_base2(m=log2_points)
        pts.append(norm.ppf(np.clip(u, 1e-15, 1 - 1e-15)).T)
    nodes = np.concatenate(pts, axis=1)
    weights = np.full(nodes.shape[1], 1.0 / nodes.shape[1])
    return QuadratureRule(nodes, weights, "sobol", log2_points)


def _degree7_plane() -> tuple[np.ndarray, np.ndarray]:
    """A fully symmetric 12-point cubature of degree 7 for the standard Gaussian in the plane.

    Orbits ``(±a, 0), (0, ±a)`` and ``(±b_k, ±b_k)``, ``k = 1, 2``; the moment equations of the
    even monomials up to degree 7 give ``a^2 = 6``, weight ``1/36``, and ``(b_k^2, 4 w_k)`` the
    two-point Gauss rule of the measure with moments ``8/9, 2/3, 1, 3`` (a rule of the family
    Stroud tabulates for ``E_2^{r^2}`` with 12 points, in the Gaussian's scaling)."""
    mu = np.array([8 / 9, 2 / 3, 1.0, 3.0])
    # two-point Gauss rule from the moments: the monic orthogonal quadratic t^2 + c1 t + c0
    c1, c0 = np.linalg.solve(np.array([[mu[1], mu[0]], [mu[2], mu[1]]]), -np.array([mu[2], mu[3]]))
    u = np.roots([1.0, c1, c0]).real
    W = np.linalg.solve(np.vander(u, 2, increasing=True).T, mu[:2])
    a = math.sqrt(6.0)
    pts = [(a, 0), (-a, 0), (0, a), (0, -a)]
    wts = [1 / 36] * 4
    for uk, Wk in zip(u, W):
        b = math.sqrt(uk)
        pts += [(b, b), (b, -b), (-b, b), (-b, -b)]
        wts += [Wk / 4] * 4
    return np.array(pts, dtype=float).T, np.array(wts, dtype=float)


def degree7_pairs(dim: int) -> QuadratureRule:
    """Product of the plane's 12-point degree-7 cubature (:func:`_degree7_plane`) over the
    coordinate pairs ``(k, k + dim/2)`` (for token models: each token's student and teacher
    Gaussians): ``12^(dim/2)`` nodes, exact for polynomials of degree 7 in each pair. A low-order
    rule of the kind hand-written theory codes use; its error on a model is measured against the
    project's rules (``--quadrature d7``)."""
    if dim % 2:
        raise ParameterError("quadrature", f"d7 pairs the Gaussians, so it needs an even dimension, got {dim}")
    P, w = _degree7_plane()
    half = dim // 2
    nodes = np.empty((dim, 12 ** half))
    weights = np.ones(12 ** half)
    for j, combo in enumerate(itertools.product(range(12), repeat=half)):
        for k, c in enumerate(combo):
            nodes[k, j], nodes[k + half, j] = P[0, c], P[1, c]
            weights[j] *= w[c]
    return QuadratureRule(nodes, weights, "degree-7 pairs", 7)


def default_rule(dim: int, accuracy: str = "default") -> QuadratureRule:
    """The rule used when none is given: tensor Gauss-Hermite up to 6 dimensions, Smolyak above.

    ``accuracy`` is ``"fast"``, ``"default"`` or ``"high"``. In 6 dimensions (untied or rank-2
    attention, ``L = 3``) tensor Gauss-Hermite of order 5/6/8 replaces the Smolyak grid: the
    proximal argmin jumps between minima across nodes, and on such kinked integrands Smolyak
    converges poorly (or, level 7, not at all), while order 6 reaches ~1e-3 relative accuracy
    on the fixed points (benchmarks/quadrature_6d.py, docs/how-to/extensions.md).
    """
    table = {"fast": (10, 8, 5, 4), "default": (14, 10, 6, 5), "high": (20, 14, 8, 6)}
    if accuracy not in table:
        raise ParameterError("accuracy", f"unknown accuracy {accuracy!r}; use fast, default or high")
    gh4, gh5, gh6, sm = table[accuracy]
    if dim <= 4:
        return gauss_hermite(dim, gh4 if dim == 4 else 2 * gh4)
    if dim == 5:
        return gauss_hermite(dim, gh5)
    if dim == 6:
        return gauss_hermite(dim, gh6)
    return smolyak(dim, sm)


def parse_rule(spec: str, dim: int) -> QuadratureRule:
    """``"gh:14"``, ``"smolyak:5"``, ``"sobol:12"``, ``"d7"`` (:func:`degree7_pairs`) or
    ``"fast|default|high"``.

    Degenerate orders (:data:`replica.validation.MIN_ORDER`: ``gh:1``, ``gh:2``, ``sobol:0``
    ...) and rules over the node budget (:func:`replica.validation.check_rule_size`) are
    refused before anything is allocated.
    """
    if spec == "d7":
        return degree7_pairs(dim)
    if ":" not in spec:
        return default_rule(dim, spec)
    kind, _, n = spec.partition(":")
    try:
        k = int(n)
    except ValueError:
        raise ParameterError("quadrature", f"bad order in {spec!r} (expected an integer)") from None
    kind = {"gauss-hermite": "gh"}.get(kind, kind)
    if kind not in ("gh", "smolyak", "sobol"):
        raise ParameterError("quadrature", f"unknown rule {kind!r}; use gh, smolyak or sobol")
    check_rule_order(kind, k, "quadrature", spec)
    check_rule_size(kind, dim, k, "quadrature", spec)
    return {"gh": gauss_hermite, "smolyak": smolyak, "sobol": sobol_rqmc}[kind](dim, k)

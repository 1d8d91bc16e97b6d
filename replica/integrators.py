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
from types import ModuleType
from typing import Sequence

import numpy as np

from .compiled import compiled, resolve_backend
from .energetic import EnergeticAverage, EnergeticIntegrator
from .errors import ParameterError
from .preintegration import make_integrator
from .prox import prox
from .quadrature import QuadratureRule, parse_rule

__all__ = ["EnergeticAverage", "EnergeticIntegrator", "QuadratureIntegrator", "fold_nodes", "from_spec",
           "default_spec"]


class QuadratureIntegrator:
    """Average over the nodes of one :class:`~replica.quadrature.QuadratureRule`.

    ``symmetries`` (tuples of indices of ``z``) are sign flips under which the minimum of
    the bracket and the needed gradients are invariant (the module's ``SYMMETRIES`` that
    hold on the solver's branch, e.g. ``z -> -z`` on the semantic branch): each node is
    replaced by a canonical image and coincident nodes merged, which halves the node
    count of a symmetric rule per independent flip without changing the sums.
    ``backend`` is ``"auto"`` (the compiled per-node kernel of :mod:`replica.kernels`
    when numba is importable and the module carries node kernels, else numpy),
    ``"numba"`` or ``"numpy"``. ``chunk`` bounds the nodes the numpy path processes at
    once (memory ~ chunk x starts x temporaries).

    ``multistart=False`` with a warm start runs the inner minimisation from the warm start
    and the first ``warm_starts`` module starts (default 1: the previous minimisers and
    ``h = omega``, as :func:`replica.prox.prox`). The solver confirms convergence with
    every start. ``warm_starts=0`` is ~25% faster on branches where the bracket is
    unimodal at almost every node (semantic), but on the positional branch, where the
    argmin jumps between local minima from one iteration to the next, it takes more
    iterations and can settle on a neighbouring fixed point of the discretised map.
    """

    def __init__(self, rule: QuadratureRule, symmetries: Sequence[Sequence[int]] = (),
                 backend: str = "auto", chunk: int = 4096, warm_starts: int = 1):
        self.rule = rule
        self.dim = rule.dim
        self.symmetries = tuple(tuple(int(i) for i in s) for s in symmetries)
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
        if warm is not None and np.shape(warm) != (module.PROX_DIM, self.size):
            warm = None
        if resolve_backend(module, self.backend) == "numba":
            return self._average_compiled(module, x, p, warm, multistart, prox_tol)
        nodes, weights = self.nodes, self.weights
        N = self.size
        grad = np.zeros(len(module.ORDER_PARAMETERS))
        psi = 0.0
        h_all = np.empty((module.PROX_DIM, N))
        n_dis = n_fail = 0
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            for a in range(0, N, max(self.chunk, 1)):
                sl = slice(a, min(a + self.chunk, N))
                z = nodes[:, sl]
                res = prox(module, z, x, p, warm=None if warm is None else warm[:, sl], tol=prox_tol,
                           multistart=multistart, n_starts=None if multistart else self.warm_starts)
                G = module.bracket_parameter_gradient(res.h, z, x, p)
                grad += G @ weights[sl]
                psi += float(res.value @ weights[sl])
                h_all[:, sl] = res.h
                n_dis += res.n_disagree
                n_fail += res.n_failed
        return EnergeticAverage(-grad, -psi, h_all, n_dis, n_fail)

    def _average_compiled(self, module, x, p, warm, multistart, prox_tol) -> EnergeticAverage:
        k = compiled(module)
        nodes, weights = self.nodes, self.weights
        N, D = self.size, module.PROX_DIM
        x = np.ascontiguousarray(x, dtype=float)
        p = np.ascontiguousarray(p, dtype=float)
        use_warm = warm is not None
        # Same starts as the numpy path: every start of the module (plus the warm one), or,
        # with multistart=False and a warm start, the warm start and warm_starts more.
        n_starts = module.N_STARTS if (multistart or not use_warm) else self.warm_starts
        w_arr = np.ascontiguousarray(warm, dtype=float) if use_warm else np.zeros((D, 1))
        h_out = np.empty((D, N))
        failed = np.zeros(N, dtype=np.bool_)
        grad = np.zeros(len(x))
        psi, n_dis, n_fail = k.node_prox_average(
            nodes, weights, w_arr, use_warm, n_starts, x, p, float(prox_tol), 50, 1e-6, h_out, failed, grad)
        if n_fail:
            # Robust numpy/scipy fallback (per-node L-BFGS) for the rare failed nodes.
            idx = np.flatnonzero(failed)
            z = nodes[:, idx]
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                res = prox(module, z, x, p, warm=warm[:, idx] if use_warm else None, tol=prox_tol,
                           multistart=True)
                G = module.bracket_parameter_gradient(res.h, z, x, p)
            grad += G @ weights[idx]
            psi += float(res.value @ weights[idx])
            h_out[:, idx] = res.h
            n_fail = res.n_failed
        return EnergeticAverage(-grad, -float(psi), h_out, int(n_dis), int(n_fail))

    def companion(self) -> "QuadratureIntegrator":
        """The same integrator on the rule's companion (a lower order), for error estimates."""
        if getattr(self, "_companion", None) is None:
            self._companion = QuadratureIntegrator(self.rule.companion(), self.symmetries, self.backend,
                                                   self.chunk, self.warm_starts)
        return self._companion

    def describe(self) -> str:
        """The rule's description, with the symmetry folding."""
        d = self.rule.describe()
        if self.size != self.rule.size:
            d += f" folded by symmetry to {self.size} nodes"
        return d


_FOLDED: "OrderedDict[tuple, tuple]" = OrderedDict()


def fold_nodes(nodes: np.ndarray, weights: np.ndarray, flips: Sequence[Sequence[int]]
               ) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of a rule folded by the sign-flip group generated by ``flips``.

    Every node is mapped to its lexicographically largest image under the group and the
    weights of coincident images are summed: ``sum_j w_j f(z_j)`` is unchanged for every
    ``f`` invariant under the flips, whatever the rule (a symmetric rule such as tensor
    Gauss-Hermite or Smolyak loses a factor 2 of nodes per independent flip). The last
    few results are cached by the identity of the arrays.
    """
    key = (id(nodes), id(weights), tuple(tuple(int(i) for i in f) for f in flips))
    hit = _FOLDED.get(key)
    if hit is not None and hit[0] is nodes and hit[1] is weights:
        _FOLDED.move_to_end(key)
        return hit[2]
    out = _fold(nodes, weights, key[2])
    _FOLDED[key] = (nodes, weights, out)
    while len(_FOLDED) > 8:
        _FOLDED.popitem(last=False)
    return out


def _fold(nodes: np.ndarray, weights: np.ndarray, flips) -> tuple[np.ndarray, np.ndarray]:
    if not flips:
        return nodes, weights
    dim = nodes.shape[0]
    group = {frozenset()}
    for f in flips:
        group |= {g ^ frozenset(f) for g in group}
    canon = nodes.copy()
    key = np.round(canon, 12) + 0.0
    cols = np.arange(nodes.shape[1])
    for g in group:
        if not g:
            continue
        sign = np.ones(dim)
        sign[list(g)] = -1.0
        img = nodes * sign[:, None]
        ikey = np.round(img, 12) + 0.0
        diff = ikey != key
        first = np.argmax(diff, axis=0)
        greater = diff.any(axis=0) & (ikey[first, cols] > key[first, cols])
        canon[:, greater] = img[:, greater]
        key[:, greater] = ikey[:, greater]
    _, index, inverse = np.unique(key.T, axis=0, return_index=True, return_inverse=True)
    folded_w = np.bincount(inverse.ravel(), weights=weights, minlength=index.size)
    return np.ascontiguousarray(canon[:, index]), folded_w


def from_spec(spec: "str | QuadratureRule | EnergeticIntegrator | None", module: ModuleType,
              branch: str | None = None):
    """A quadrature rule or integrator from a user-facing spec (CLI ``--quadrature``).

    ``"gh:N"``, ``"smolyak:N"``, ``"sobol:LOG2N"``, ``"fast|default|high"`` (rules, see
    :func:`replica.quadrature.parse_rule`); ``"preint"`` or ``"preint:fast|default|high"``
    (the jump-aware pre-integration of :mod:`replica.preintegration`); ``"auto"``: Gauss-
    Hermite or pre-integration by :func:`default_spec`. Objects pass through; ``None`` means the
    solver's default.
    """
    if spec is None or not isinstance(spec, str):
        return spec
    labels = bool(getattr(module, "DISCRETE", ()))  # token clusters: Gaussian rules x labels
    if spec == "auto":
        spec = default_spec(module, branch)
    if labels and spec.startswith("preint"):
        raise ParameterError("quadrature", f"{spec!r}: the pre-integration integrator does not average over "
                                           f"the cluster labels of {module.MODEL}; use a rule (gh:N, default, ...)")

    try:
        if spec.startswith("preint"):
            _, _, level = spec.partition(":")
            return make_integrator(module, level or "default")
        return parse_rule(spec, len(module.GAUSSIANS))
    except ParameterError as exc:  # name the user's flag, whatever the inner parameter was
        if exc.name == "quadrature":
            raise
        raise ParameterError("quadrature", f"{spec!r}: {exc}") from None


def default_spec(module: ModuleType, branch: str | None = None) -> str:
    """The ``auto`` quadrature of ``branch``: Gauss-Hermite (``default``) where a mirror symmetry
    holds on the branch (a fold symmetry mapping the minimiser ``h -> -h``, module ``MIRRORED``:
    the bracket's minima come in mirror pairs that the folded rule treats alike, and the argmin
    barely ever switches between minima -- measured on the semantic branch of the paper's
    model), the jump-aware pre-integration (``preint:default``) elsewhere, where tensor
    Gauss-Hermite converges erratically (docs/quadrature.md); for a model with token clusters
    always Gauss-Hermite (the solver multiplies Gaussian rules by the label configurations,
    :mod:`replica.labels`, which pre-integration does not)."""
    if getattr(module, "DISCRETE", ()):
        return "default"
    pinned = set(module.BRANCHES.get(branch or "free", ()))
    for (fams, _), mirrored in zip(module.SYMMETRIES, getattr(module, "MIRRORED", ())):
        if mirrored and all(f in pinned or f not in module.FAMILIES for f in fams):
            return "default"
    return "preint:default"

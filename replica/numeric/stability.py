"""Stability of a replica-symmetric fixed point: the replicon (docs/explanation/replicon.md).

GAMP's linearisation around a fixed point, restricted to the microscopic fluctuations
(perturbations of the ``d`` weight rows incoherent with every macroscopic direction),
propagates the per-token covariance ``Ψ_κ = (1/d) Σ_i γ_{κ,i} δW_i δW_iᵀ`` (``R×R``) by the
positive linear map

    𝓛(Ψ)_κ = α E_ν[ γ_κ J (Σ_ℓ γ_ℓ E_z[(G diag(Ψ_1..Ψ_L) Gᵀ)_{ℓℓ}]) Jᵀ ],

with ``G = ∂g_out/∂ω = V⁻¹H⁻¹V⁻¹ − V⁻¹`` the output channel's Jacobian at the minimiser of
the energetic bracket (``H`` its Hessian in the ``L·R`` fields, ``V = diag(V_1..V_L)``), the
average over the energetic quadrature nodes, and ``J = ∂prox_in/∂B`` the input channel's
Jacobian (``(Λ + 𝔸)⁻¹`` for ℓ2). The replicon is the spectral radius of ``𝓛``; the RS fixed
point is stable (and GAMP can converge to it, with any damping) iff it is ``< 1``. For a
GLM (``L = R = 1``) it is the classical ``α E[(∂_ω g_out)²] E[γ² (∂_B prox_in)²]``.

One call gives the value and its details::

    rep = replicon(module, fixed_point_or_x, alpha, parameters, branch)
    rep.value, rep.error, rep.rs_stable, rep.to_dict()
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..interface.generated_model import GeneratedModel
from .compiled import resolve_backend
from .energetic import average_on_nodes, label_weighted, start_minima
from ..errors import InvalidStateError, ParameterError
from ..interface.labels import draw_labels
from .prox import GLOBAL, ProxConvention, newton_direction, newton_minimize, prox, prox_convention
from .quadrature import QuadratureRule
from .solver import FixedPoint, Solver

__all__ = ["Replicon", "Switching", "replicon", "replicon_summary", "rs_stable", "switching", "state_error",
           "perturbed_replicons", "output_jacobians", "variance_blocks", "curve_stability", "unstable_intervals"]


@dataclass
class Switching:
    """Whether the global minimiser of the energetic bracket jumps between minima.

    On a Monte-Carlo sample of ``samples`` Gaussian nodes: ``multi_fraction``, the fraction
    with two or more distinct local minima (from the module's starts); ``gap_scale``, the
    median gap ``ΔF`` between the global and the next minimum there; ``near``, the number of
    nodes whose gap is below ``0.05 gap_scale``. A gap density that does not vanish at
    ``ΔF = 0`` means a surface on which the minimiser -- hence ``g_out`` -- jumps: ``∂g_out/∂ω``
    then has a delta part and the replicon is formally infinite (docs/explanation/replicon.md). ``detected``
    is ``near > 0``; a gap distribution bounded away from 0 (a second minimum that never wins)
    gives ``near = 0``.
    """

    samples: int
    multi_fraction: float
    gap_scale: float
    near: int

    @property
    def detected(self) -> bool:
        """``True`` when nearly degenerate competing minima were found."""
        return self.near > 0

    @property
    def density(self) -> float:
        """``P(ΔF < ε)/ε`` at ``ε = 0.05 gap_scale``: the gap density near 0 (per unit of F)."""
        eps = 0.05 * self.gap_scale
        return float(self.near / self.samples / eps) if eps > 0 else 0.0


@dataclass
class Replicon:
    """The replicon of one fixed point.

    ``value``: spectral radius of the fluctuation map (``< 1``: RS stable); ``error``: its
    change under the companion (lower-order) quadrature rule, an estimate of the quadrature
    error (``nan`` if not computed); ``matrix``: the map on the ``L·R(R+1)/2`` independent
    entries of ``(Ψ_1, ..., Ψ_L)``; ``energetic``: ``α E[G²]`` per token pair for ``R = 1``
    (``α Σ_z w (G_{ℓκ})²``), ``entropic``: ``E[J²]`` (``R = 1``) -- the two factors of the GLM
    formula; ``quadrature``: the rule's description; ``prox_failed``: nodes whose inner
    minimisation failed.
    """

    value: float
    error: float
    matrix: np.ndarray
    energetic: np.ndarray | None = None
    entropic: float | None = None
    quadrature: str = ""
    prox_failed: int = 0
    switching: Switching | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def rs_stable(self) -> bool:
        """``True`` when the replicon is below 1 and the prox does not switch between minima
        (a switching prox makes the replicon formally infinite; see :class:`Switching`)."""
        return bool(self.value < 1.0 and not (self.switching is not None and self.switching.detected))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``replicon``, ``replicon_error``, ``rs_stable`` and the factors."""
        out: dict[str, Any] = {"replicon": float(self.value), "replicon_error": float(self.error),
                               "rs_stable": self.rs_stable, "replicon_quadrature": self.quadrature}
        if self.energetic is not None:
            out["replicon_energetic"] = np.asarray(self.energetic).tolist()
        if self.entropic is not None:
            out["replicon_entropic"] = float(self.entropic)
        if self.switching is not None:
            sw = self.switching
            out.update(replicon_switching=sw.detected, replicon_multi_minima=sw.multi_fraction,
                       replicon_gap_density=sw.density, replicon_switching_samples=sw.samples)
        if self.notes:
            out["replicon_notes"] = list(self.notes)
        return out


def variance_blocks(module: GeneratedModel, x: np.ndarray) -> np.ndarray:
    """Per-token ``V_ℓ`` (L, R, R) from an order-parameter vector (shared entries to every token)."""
    L, R = module.L, module.R
    V = np.zeros((L, R, R))
    for k, name in enumerate(module.ORDER_PARAMETERS):
        fam, token, i, j, _, _ = module.LAYOUT[name]
        if fam != "V":
            continue
        toks = range(L) if token is None else [int(token) - 1]
        for t in toks:
            V[t, i, j] = V[t, j, i] = x[k]
    return V


def output_jacobians(module: GeneratedModel, x: np.ndarray, p: np.ndarray, nodes: np.ndarray,
                     chunk: int = 4096, prox_tol: float = 1e-12, backend: str = "numpy",
                     convention: ProxConvention = GLOBAL) -> tuple[np.ndarray, int]:
    """``G = ∂g_out/∂ω`` (N, D, D) at the minimiser of the bracket at every node: the global one,
    or under the local ``convention`` the one reached by descent from its start.

    The minimisers come from the multistart prox of ``backend`` (``"auto"``/``"numba"``: the
    compiled kernel of the energetic average, the same algorithm as the numpy path,
    :mod:`replica.numeric.kernels`), the Hessians from the module's vectorised ``bracket_newton``."""
    D = module.PROX_DIM
    Vinv = np.zeros((D, D))
    R = module.R
    for l, block in enumerate(np.linalg.inv(variance_blocks(module, x))):
        Vinv[l * R:(l + 1) * R, l * R:(l + 1) * R] = block
    N = nodes.shape[1]
    out = np.empty((N, D, D))
    failed = 0
    # A piecewise bracket takes the exact piecewise prox, which says which nodes sit on a kink.
    piecewise = bool(module.PIECEWISE)
    compiled_path = (resolve_backend(module, backend) == "numba" or convention.local) and not piecewise
    if compiled_path:
        avg = average_on_nodes(module, nodes, np.zeros(N), x, p, prox_tol=prox_tol, backend=backend,
                               convention=convention)
        h_all, failed = avg.state, avg.n_failed
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for a in range(0, N, chunk):
            z = nodes[:, a:a + chunk]
            stuck = None
            if compiled_path:
                h = h_all[:, a:a + chunk]
            else:
                res = prox(module, z, x, p, tol=prox_tol, multistart=True)
                failed += res.n_failed
                h = res.h
                stuck = getattr(res, "on_break", None)
            _, g, H = module.bracket_newton(h, z, x, p)
            if not piecewise:
                # The prox stops once F's decrease is at round-off, which can leave h off by
                # ~sqrt(1e-15 F/H) (2e-7 on logistic at V ~ 600). The averages of the saddle point
                # feel that only at second order, G through H at first: one Newton step, kept
                # where it is small and lowers the gradient.
                d = newton_direction(g, H)
                small = np.max(np.abs(d), axis=0) <= 1e-6 * (1.0 + np.max(np.abs(h), axis=0))
                _, g2, H2 = module.bracket_newton(h + d, z, x, p)
                better = small & (np.max(np.abs(g2), axis=0) <= np.max(np.abs(g), axis=0))
                H = np.where(better[None, :], H2, H)
            Hm = H.T.reshape(-1, D, D)
            Hm = 0.5 * (Hm + Hm.transpose(0, 2, 1))
            out[a:a + chunk] = Vinv @ np.linalg.inv(Hm) @ Vinv - Vinv
            if stuck is not None:
                # A piecewise prox sitting on a breakpoint of the loss (which does not move with
                # omega) stays there: dh/domega = 0, G = -V^{-1} (the branch Hessian says nothing).
                out[a:a + chunk][np.asarray(stuck) >= 0] = -Vinv
    return out, failed


def switching(module: GeneratedModel, x: np.ndarray, p: np.ndarray, samples: int = 50_000, seed: int = 0,
              chunk: int = 10_000, prox_tol: float = 1e-12, backend: str = "numpy") -> Switching:
    """Detect a jumping global minimiser of the bracket at state ``x`` (see :class:`Switching`).
    Newton from each start alone by :func:`replica.numeric.energetic.start_minima` (``backend``: the
    compiled kernel or numpy, the same minima)."""
    rng = np.random.default_rng(seed)
    D, S = module.PROX_DIM, module.N_STARTS
    gaps = []
    for a in range(0, samples, chunk):
        N = min(chunk, samples - a)
        z = rng.standard_normal((len(module.GAUSSIANS), N))
        if module.WEIGHTED:
            z = _draw_labels(module, z, x, p, rng)
        starts = module.prox_starts(z, x, p).reshape(S, D, N)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            hs, F, conv = start_minima(module, z, starts, x, p, prox_tol, backend)
        Fs = np.where(conv & np.isfinite(F), F, np.inf)
        best = np.argmin(Fs, axis=0)
        cols = np.arange(N)
        hb, Fb = hs[best, :, cols].T, Fs[best, cols]
        dist = np.max(np.abs(hs - hb[None]), axis=1)
        other = np.where(dist > 1e-5 * (1.0 + np.max(np.abs(hb), axis=0)), Fs, np.inf).min(axis=0)
        gaps.append(other - Fb)
    gap = np.concatenate(gaps)
    multi = np.isfinite(gap)
    scale = float(np.median(gap[multi])) if multi.any() else 0.0
    near = int(np.sum(gap[multi] < 0.05 * scale)) if multi.sum() > 1 else 0
    return Switching(samples=int(samples), multi_fraction=float(multi.mean()), gap_scale=scale, near=near)


def local_switching(module: GeneratedModel, x: np.ndarray, p: np.ndarray, convention: ProxConvention,
                    samples: int = 50_000, seed: int = 0, eps: float = 0.02, chunk: int = 10_000,
                    prox_tol: float = 1e-12, backend: str = "numpy") -> Switching:
    """Whether the local convention's minimiser jumps, on ``samples`` Monte-Carlo pairs of nodes
    ``z`` and ``z + eps u`` (``u`` a random unit vector): the minimiser at ``z``, continued to
    ``z + eps u`` by warm Newton, is compared with the descent's own minimiser there; a pair where
    they differ straddles a boundary of the start's basin, across which ``g_out`` jumps (a delta
    part in ``∂g_out/∂ω``: the replicon is formally infinite, as for a switching global
    minimiser). Reported as a :class:`Switching` with ``near`` the straddling pairs,
    ``multi_fraction`` their fraction and ``gap_scale = eps`` (the pairs' distance, in ``z``)."""
    rng = np.random.default_rng(seed)
    near = 0
    for a in range(0, samples, chunk):
        N = min(chunk, samples - a)
        z = rng.standard_normal((len(module.GAUSSIANS), N))
        if module.WEIGHTED:
            z = _draw_labels(module, z, x, p, rng)
        u = rng.standard_normal((len(module.GAUSSIANS), N))
        u /= np.linalg.norm(u, axis=0)
        z2 = z.copy()
        z2[:len(module.GAUSSIANS)] += eps * u
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            zz = np.concatenate([z, z2], axis=1)
            avg = average_on_nodes(module, zz, np.zeros(2 * N), x, p, prox_tol=prox_tol, backend=backend,
                                   convention=convention)
            h1, h2 = avg.state[:, :N], avg.state[:, N:]
            ok = np.all(np.isfinite(h1), axis=0) & np.all(np.isfinite(h2), axis=0)
            hc, _, conv, _ = newton_minimize(module, np.where(ok, h1, 0.0), z2, x, p, tol=prox_tol)
        jump = ok & conv & (np.max(np.abs(hc - h2), axis=0) > 1e-5 * (1.0 + np.max(np.abs(h2), axis=0)))
        near += int(jump.sum())
    return Switching(samples=int(samples), multi_fraction=near / max(samples, 1), gap_scale=float(eps), near=near)


def _draw_labels(module: GeneratedModel, z: np.ndarray, x: np.ndarray, p: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
    """``z`` with a teacher channel's label row appended, each label drawn from its law
    ``W(y | z; x)`` (module ``label_weight``), as the energetic average weighs it."""
    values = np.asarray(module.LABEL_VALUES, dtype=float)
    N = z.shape[1]
    W = np.array([np.asarray(module.label_weight(np.vstack([z, np.full((1, N), y)]), x, p), dtype=float)
                  * np.ones(N) for y in values])
    return np.vstack([z, draw_labels(W / W.sum(axis=0), values, rng)[None, :]])


def _rule_at(integ: Any, x: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the energetic average at state ``x``: a fixed rule's, or the rule a
    state-dependent integrator (the kink-aware rule of a channel model) builds at ``x``."""
    if hasattr(integ, "nodes"):
        return integ.nodes, integ.weights
    if hasattr(integ, "rule"):
        rule = integ.rule(x, p)
        return rule.nodes, rule.weights
    raise ParameterError("rule", "the replicon needs a quadrature rule (nodes and weights)")


def _sym_basis(R: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(R) for j in range(i, R)]


def _entropic_factor(solver: Solver, x: np.ndarray, alpha: float) -> tuple[np.ndarray | None, float | None]:
    """``J`` (R, R) for a quadratic regularizer, or ``E[J²]`` (R = 1, separable regularizer)."""
    mod = solver.module
    rb = np.asarray(mod.rho_bar(solver.p), dtype=float).reshape(-1)
    V = variance_blocks(mod, x)
    if solver.entropic_rule is None:
        # l2, single-atom law: V_l = gamma_l (Lambda + A)^{-1}, so J = (Lambda + A)^{-1} = V_l / gamma_l.
        return V[0] / rb[0], None
    if mod.R != 1:
        raise ParameterError("model", f"{mod.MODEL}: the replicon of a separable regularizer needs r = 1")
    # Separable, R = 1: J = dw/dB and w depends on xi through B = b + sqrt(BB) xi, so with
    # w_xi = dw/dxi: E[J] = V / gamma and E[J^2] = E[w_xi^2] / BB = (V/gamma)^2 E[w_xi^2] / E[w_xi]^2.
    xhat = solver.evaluate_map(x, alpha).xhat
    xi_rows = [k for k, g in enumerate(mod.ENTROPIC_GAUSSIANS) if g.startswith("xiw")]
    eps = 1e-6

    def argmins(zw):
        return solver.entropic_argmin(zw, xhat, tol=1e-13)

    def argmin(zw):
        return argmins(zw)[0]

    with np.errstate(all="ignore"):
        nodes, weights = solver.entropic_nodes_weights(xhat, argmins)

    zp, zm = nodes.copy(), nodes.copy()
    zp[xi_rows] += eps
    zm[xi_rows] -= eps
    with np.errstate(all="ignore"):
        wxi = (argmin(zp) - argmin(zm)) / (2 * eps)
    m1, m2 = float(wxi @ weights), float(wxi ** 2 @ weights)
    if m1 <= 0:
        return None, 0.0
    return None, float((V[0, 0, 0] / rb[0]) ** 2 * m2 / m1 ** 2)


def _map_matrix(module: GeneratedModel, G: np.ndarray, weights: np.ndarray, alpha: float, gammas: np.ndarray,
                J: np.ndarray | None, EJ2: float | None) -> np.ndarray:
    """Matrix of 𝓛 on the independent entries of (Ψ_1..Ψ_L) (symmetric R×R blocks)."""
    L, R = module.L, module.R
    basis = _sym_basis(R)
    nb = len(basis)
    M = np.zeros((L * nb, L * nb))
    for l0 in range(L):
        for b0, (i0, j0) in enumerate(basis):
            Psi = np.zeros((L * R, L * R))
            Psi[l0 * R + i0, l0 * R + j0] = Psi[l0 * R + j0, l0 * R + i0] = 1.0
            GPG = np.einsum("n,nab,bc,ndc->ad", weights, G, Psi, G, optimize=True)
            Bcov = alpha * sum(gammas[l] * GPG[l * R:(l + 1) * R, l * R:(l + 1) * R] for l in range(L))
            for k in range(L):
                out = gammas[k] * (J @ Bcov @ J.T if J is not None else EJ2 * Bcov)
                for b1, (i1, j1) in enumerate(basis):
                    M[k * nb + b1, l0 * nb + b0] = out[i1, j1]
    return M


def _value(module, solver, x, alpha, nodes, weights, J, EJ2):
    G, failed = output_jacobians(module, x, solver.p, nodes, prox_tol=solver.prox_tol, backend=solver.backend,
                                 convention=solver.convention)
    weights = label_weighted(module, weights, nodes, x, solver.p)  # a teacher channel's label law W(y | z; x)
    rb = np.asarray(module.rho_bar(solver.p), dtype=float).reshape(-1)
    gam = np.broadcast_to(rb, (module.L,)) if rb.size in (1, module.L) else rb
    M = _map_matrix(module, G, weights, alpha, np.asarray(gam, dtype=float), J, EJ2)
    ev = np.linalg.eigvals(M)
    energetic = None
    if module.R == 1:
        energetic = alpha * np.einsum("n,nab->ab", weights, G ** 2)
    return float(np.max(np.abs(ev))), M, energetic, failed


def replicon(module: GeneratedModel, fixed_point: FixedPoint | np.ndarray | Mapping[str, float], alpha: float | None = None,
             parameters: Mapping[str, float] | None = None, branch: str | None = None,
             rule: QuadratureRule | None = None, error_estimate: bool = True,
             switching_samples: int = 50_000, backend: str = "auto",
             prox: ProxConvention | str | None = None) -> Replicon:
    """The replicon of a fixed point of ``module`` (see the module docstring).

    ``fixed_point``: a :class:`~replica.numeric.solver.FixedPoint` (its ``alpha``, parameters and
    branch are used unless given) or an order-parameter vector / mapping. The energetic
    average uses ``rule`` (default: the solver's default Gauss-Hermite rule, folded by the
    branch's symmetries) and, with ``error_estimate``, its companion rule for ``error``.
    Needs isotropic tokens (atoms of the spectral law sharing their eigenvalues) and no token
    clusters -- every model of the toolkit but ``attention_clusters``. ``switching_samples`` Monte-Carlo nodes test whether the prox switches between minima
    (:func:`switching`; 0 skips the test). ``rs_stable`` needs both ``value < 1`` and no
    switching. ``backend``: the inner minimisations' (``"auto"``: the compiled kernels where the
    module has them, :class:`~replica.numeric.solver.Solver`'s choice; ``"numpy"``). ``prox``: the prox
    convention (default: the fixed point's, else global); under the local one the minimisers are
    the descent's from its start and the switching test asks whether that minimiser jumps
    (:func:`local_switching`).
    """
    if prox is None:
        prox = getattr(fixed_point, "prox", None) if isinstance(fixed_point, FixedPoint) else None
    convention = prox_convention(prox)
    if isinstance(fixed_point, FixedPoint):
        x = fixed_point.x
        alpha = fixed_point.alpha if alpha is None else alpha
        parameters = fixed_point.parameters if parameters is None else parameters
        branch = fixed_point.branch if branch is None else branch
    elif isinstance(fixed_point, Mapping):
        x = np.array([float(fixed_point[n]) for n in module.ORDER_PARAMETERS])
    else:
        x = np.asarray(fixed_point, dtype=float)
    if alpha is None or not math.isfinite(alpha) or alpha < 0:
        raise ParameterError("alpha", f"must be a finite number >= 0, got {alpha}")
    if module.DISCRETE:
        raise ParameterError("model", f"{module.MODEL}: the replicon is not implemented for token clusters")
    solver = Solver(module, parameters, branch, rule=rule, backend=backend, prox=convention)
    solver.check_state(x)
    _check_isotropic(module, solver.parameter_dict)
    integ = solver.integrator
    nodes, weights = _rule_at(integ, x, solver.p)
    J, EJ2 = _entropic_factor(solver, x, alpha)
    value, M, energetic, failed = _value(module, solver, x, alpha, nodes, weights, J, EJ2)
    error = float("nan")
    if error_estimate:
        comp = _rule_at(integ.companion(), x, solver.p)
        error = abs(value - _value(module, solver, x, alpha, *comp, J, EJ2)[0])
    if not switching_samples:
        sw = None
    elif convention.local:
        sw = local_switching(module, x, solver.p, convention, samples=switching_samples, prox_tol=solver.prox_tol,
                             backend=solver.backend)
    else:
        sw = switching(module, x, solver.p, samples=switching_samples, prox_tol=solver.prox_tol, backend=solver.backend)
    notes = []
    if sw is not None and sw.detected and convention.local:
        notes.append(f"the local minimiser jumps between basins ({sw.near} of {sw.samples} sample pairs "
                     f"{sw.gap_scale:g} apart cross a basin boundary of the start): RS unstable whatever the replicon")
    elif sw is not None and sw.detected:
        notes.append(f"the prox switches between minima ({sw.near} of {sw.samples} samples nearly degenerate, "
                     f"{100 * sw.multi_fraction:.2g}% with several minima): RS unstable whatever the replicon")
    if failed:
        notes.append(f"inner minimisation failed at {failed} nodes")
    return Replicon(value=value, error=error, matrix=M, energetic=energetic, entropic=EJ2 if J is None else
                    (float(J[0, 0] ** 2) if module.R == 1 else None), quadrature=integ.describe(),
                    prox_failed=failed, switching=sw, notes=notes)


def _check_isotropic(module: GeneratedModel, parameters: Mapping[str, float]) -> None:
    """The entropic factor ``J = V_ℓ/γ_ℓ`` needs every atom of the spectral law to share its
    eigenvalues (isotropic tokens). Read from the generated module (``ISOTROPIC_TOKENS``, else the
    numbers of ``atom_eigenvalues``); a module without either is refused, not computed unchecked:
    the numeric layer never reads the sympy declaration (every module the generator writes has them,
    and a stale module is regenerated when loaded)."""
    if module.ISOTROPIC_TOKENS:
        return
    if module.atom_eigenvalues is not None:
        p = np.array([float(parameters.get(n, d)) for n, d in zip(module.PARAMETERS, module.DEFAULTS)])
        gam = np.asarray(module.atom_eigenvalues(p), dtype=float).reshape(-1, module.L)
    else:
        raise ParameterError("model", f"{module.MODEL}: its generated module gives neither ISOTROPIC_TOKENS nor "
                                      f"atom_eigenvalues, which the replicon reads; regenerate it "
                                      f"(replica generate {module.MODEL})")
    if any(not np.allclose(g, gam[0]) for g in gam):
        raise ParameterError("model", f"{module.MODEL}: the replicon is implemented for isotropic tokens "
                                      "(every atom with the same eigenvalues)")


def replicon_summary(module: GeneratedModel, fixed_point: FixedPoint, **options: Any) -> dict[str, Any]:
    """The ``replicon`` / ``rs_stable`` keys of ``replica solve --json`` (and their details).

    :meth:`Replicon.to_dict` of :func:`replicon` (``options`` passed on); where the replicon
    is not implemented for the model (token clusters, non-isotropic tokens, a separable
    regularizer with ``r > 1``, a rule without nodes), ``replicon`` and ``rs_stable`` are
    ``null`` and ``replicon_reason`` / ``rs_stable_reason`` say why -- never a failed solve.
    """
    try:
        return replicon(module, fixed_point, **options).to_dict()
    except ParameterError as exc:
        why = f"not computed: {exc}"
        return {"replicon": None, "replicon_reason": why, "rs_stable": None, "rs_stable_reason": why}


def perturbed_replicons(module: GeneratedModel, fixed_point: FixedPoint, errors: Mapping[str, float]
                        ) -> dict[str, float]:
    """The replicon at ``x + delta_k e_k`` for every order parameter with a positive finite bar
    ``delta_k`` in ``errors`` (keyed by name; at ``x - delta_k e_k`` where the first is not
    admissible, ``nan`` where neither is): the values :func:`state_error` compares with the
    replicon at ``x``. Independent of it, so the two can be computed side by side."""
    x = np.asarray(fixed_point.x, dtype=float)
    out: dict[str, float] = {}
    for k, name in enumerate(module.ORDER_PARAMETERS):
        delta = errors.get(name)
        if delta is None or not math.isfinite(delta) or delta <= 0:
            continue
        out[name] = math.nan
        for sign in (1.0, -1.0):
            y = x.copy()
            y[k] += sign * delta
            try:
                out[name] = replicon(module, y, fixed_point.alpha, fixed_point.parameters, fixed_point.branch,
                                     error_estimate=False, switching_samples=0,
                                     prox=getattr(fixed_point, "prox", None)).value
                break
            except (InvalidStateError, ParameterError):
                continue
    return out


def state_error(module: GeneratedModel, fixed_point: FixedPoint, errors: Mapping[str, float],
                base: float | None = None, perturbed: Mapping[str, float] | None = None) -> float:
    """The replicon's error from the fixed point's own error bars (first order, worst case).

    ``sum_k |R(x + delta_k e_k) - R(x)|`` over the order parameters with a positive finite bar
    ``delta_k`` in ``errors`` (the other side where ``x + delta_k e_k`` is not admissible, ``inf``
    where neither is). Adds to :attr:`Replicon.error`, which is the quadrature error at fixed
    ``x`` only: ``replica solve``'s ``errors["replicon"]`` is their sum. ``base``: the replicon at
    ``x`` when already known (saves one evaluation); ``perturbed``: :func:`perturbed_replicons`
    when already computed.
    """
    if base is None:
        base = replicon(module, fixed_point, error_estimate=False, switching_samples=0).value
    if perturbed is None:
        perturbed = perturbed_replicons(module, fixed_point, errors)
    return float(sum(abs(v - base) if math.isfinite(v) else math.inf for v in perturbed.values()))


def rs_stable(module: GeneratedModel, fixed_point: FixedPoint | np.ndarray, alpha: float | None = None,
              parameters: Mapping[str, float] | None = None, branch: str | None = None) -> bool:
    """Whether the replicon of the fixed point is below 1."""
    return replicon(module, fixed_point, alpha, parameters, branch, error_estimate=False).rs_stable


def curve_stability(module: GeneratedModel, curve: Any, points: int = 10, switching_samples: int = 10_000
                    ) -> list[tuple[float, float, bool]]:
    """``(alpha, replicon, rs_stable)`` at up to ``points`` fixed points of a followed branch.

    ``curve``: a :class:`~replica.phase.BranchCurve` (its ``points`` with ``alpha`` and ``x``,
    its ``parameters`` and ``branch``). The points are spread evenly over the curve's
    ``alpha`` range (the nearest computed point to each of ``points`` equally spaced
    ``alpha``); diagrams do not need the quadrature error, and 10 000 Monte-Carlo nodes see
    the switching fractions met on the paper's branches (>= 0.2 %, docs/explanation/replicon.md).
    """
    pts = sorted(curve.points, key=lambda p: p.alpha)
    if not pts:
        return []
    alphas = np.array([p.alpha for p in pts])
    targets = np.linspace(alphas[0], alphas[-1], max(1, min(points, len(pts))))
    chosen = sorted({int(np.argmin(np.abs(alphas - t))) for t in targets})
    out = []
    for k in chosen:
        rep = replicon(module, pts[k].x, float(alphas[k]), curve.parameters, curve.branch, error_estimate=False,
                       switching_samples=switching_samples)
        out.append((float(alphas[k]), rep.value, rep.rs_stable))
    return out


def unstable_intervals(samples: Any) -> list[tuple[float, float]]:
    """``alpha`` intervals where ``rs_stable`` is false, from ``(alpha, ..., rs_stable)`` samples.

    Boundaries lie halfway between a stable and an unstable sample (the resolution of the
    sampling); an unstable run at either end stops at that end's sample.
    """
    s = sorted((float(x[0]), bool(x[-1])) for x in samples)
    out: list[tuple[float, float]] = []
    k = 0
    while k < len(s):
        if s[k][1]:
            k += 1
            continue
        j = k
        while j + 1 < len(s) and not s[j + 1][1]:
            j += 1
        lo = s[k][0] if k == 0 else 0.5 * (s[k - 1][0] + s[k][0])
        hi = s[j][0] if j == len(s) - 1 else 0.5 * (s[j][0] + s[j + 1][0])
        out.append((lo, hi))
        k = j + 1
    return out

"""Generalized Approximate Message Passing for any declared model (paper Appendix B, Algorithm 1).

The empirical risk GAMP minimises is the paper's simplified risk (its eq. 41, docs/explanation/theory.md §1):

    R(W) = Σ_μ ℓ(h^μ, h*^μ) + Σ_i r(W_i),     h^μ_ℓ = Wᵀ(x^μ_ℓ + p_ℓ)/√d ∈ R^R,

with ``ℓ`` the per-sample loss of the generated module (for attention
``½ Σ_{ℓκ} ρ̄_κ (T(h*) − S(h))²_{ℓκ}``; the label enters only through ``T(h*)``, which the
data determine, ``y = T(h*) x``). It differs from the simulator's exact risk
``Σ_μ ‖y − S(x+P)‖²/2d`` by the fluctuations of ``x_ℓ·x_κ/d`` around ``δ_ℓκ ρ̄_κ``, a
finite-size effect (gradient descent on the exact risk from the same data lands O(1/d) away
in the overlaps, docs/explanation/gamp.md).

One iteration, with ``F_ℓ`` the ``n × d`` matrix of rows ``(x^μ_ℓ + p_ℓ)/√d`` and
``c_{ℓi} = mean_μ F_{ℓ,μi}²`` (the data side of the variances):

    V_ℓ   = Σ_i c_{ℓi} Ĉ_i                                  (R×R, one per token)
    ω_μℓ  = (F_ℓ Ŵ)_μ − V_ℓ g_μℓ(previous)                  (Onsager term)
    h_μ   = argmin_h Σ_ℓ ½(h_ℓ − ω_μℓ)ᵀV_ℓ⁻¹(h_ℓ − ω_μℓ) + ℓ(h, h*_μ)   (output channel:
            the generated module's bracket and its multistart prox, L×R fields jointly)
    g_μ   = V⁻¹(h_μ − ω_μ),   ∂g_μ/∂ω = V⁻¹ H_μ⁻¹ V⁻¹ − V⁻¹      (H_μ: the bracket's Hessian)
    A_i   = Σ_ℓ c_{ℓi} Σ_μ (−∂g_μ/∂ω)_{ℓℓ}                    (R×R)
    B_i   = Σ_ℓ (F_ℓᵀ g_ℓ)_i + A_i Ŵ_i                        (Onsager term)
    Ŵ_i   = argmin_w r(w) + ½wᵀA_i w − wᵀB_i,   Ĉ_i = ∂Ŵ_i/∂B_i   (input channel: closed form
            (Λ + A_i)⁻¹B_i for ℓ2, the regularizer's separable prox otherwise)

Damping (default 0.8) mixes the old ``Ŵ, Ĉ`` and ``g`` into the new ones. At a fixed point
``h_μ = ω_μ + V g_μ = F Ŵ`` and ``g_μ = −∇ℓ(h_μ)``, so for ℓ2
``ΛŴ = Fᵀg = −∇(Σ_μ ℓ)``: a zero-gradient point of ``R`` whatever ``V`` and ``A`` are (paper
B.4). The summary statistics of ``Ŵ^t`` (``q, m, θ``) and ``V^t`` follow the saddle-point map
iterated without damping from GAMP's initial overlaps (the time-indexed state evolution,
:func:`state_evolution`), up to O(1/√d) fluctuations.

API::

    run_gamp("attention", alpha=2, d=1000, init="semantic", seeds=1, parameters={"omega": 0.3})
    problem = make_problem(spec, alpha, d, seed); result = GAMP(spec, problem).run("semantic")
    state_evolution(spec, alpha, x0, iterations)

CLI::

    python -m numerics.gamp attention --omega 0.3 --alpha 2 --d 1000 --init semantic --seeds 1 --json

The linear algebra (two ``n L × d`` matrix products per iteration) runs in numpy or, with
``--device cpu|cuda`` and ``--backend torch``, in torch; the per-sample channel (O(n)) runs
in numpy on the module's functions either way.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from replica.interface.generated_model import GeneratedModel, as_model

__all__ = [
    "INITS",
    "GampSpec",
    "GampProblem",
    "GampResult",
    "Switching",
    "switching_samples",
    "OutputChannel",
    "InputChannel",
    "GAMP",
    "model_spec",
    "make_problem",
    "initial_weights",
    "weights_with_overlaps",
    "overlaps",
    "state_evolution",
    "se_state",
    "run_gamp_seed",
    "run_gamp",
    "main",
]

#: Initialisations (see :func:`initial_weights`).
INITS: tuple[str, ...] = ("semantic", "positional", "random")
#: Scale of the random initialisation (iid N(0, 1) entries).
INIT_NOISE = 0.5
#: Final iterations whose per-sample minimisers the switching diagnostic compares (two periods of
#: the default multistart schedule, so a cycle tied to it shows).
SWITCH_WINDOW = 20
#: A sample switches basins when its minimiser jumps by this many times the median sample's
#: largest move: a minimiser that follows its field moves by ~|dω|·|∂h/∂ω| like the others
#: (within ~10x of the median in the cycles measured), a jump between minima by O(|h|).
SWITCH_FACTOR = 100.0


# --------------------------------------------------------------------------- model
@dataclass
class GampSpec:
    """What GAMP needs from a generated module and its declaration.

    ``gammas``: per-token eigenvalue (isotropic tokens); ``pis`` (atoms, L) and ``pi_weights``:
    the positional projections of the spectral law's atoms and their probabilities; ``rho_bar``: ``tr Σ_ℓ/d`` (also ``ρ_ℓ``, iid teacher); ``Lambda``: the ℓ2
    penalty matrix (``None`` for a separable regularizer, whose prox is ``sep_prox``).
    """

    module: GeneratedModel
    name: str
    parameters: dict[str, float]
    p: np.ndarray
    L: int
    R: int
    R_T: int
    gammas: np.ndarray
    pis: np.ndarray
    rho_bar: np.ndarray
    Lambda: np.ndarray | None
    sep_prox: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None
    n_noise: int
    sep_penalty: Callable[[np.ndarray], np.ndarray] | None = None
    pi_weights: np.ndarray | None = None

    def encodings(self, d: int) -> np.ndarray:
        """Positional encodings ``P`` (L, d) whose projections ``√d p_ℓ(i)`` have the declared law:
        the simulator's :func:`numerics.data.default_positional_encodings` when its columns
        follow that law (so that GAMP and GD see the same data), else blocks of coordinates
        per atom."""
        from .data import default_positional_encodings

        w = self.pi_weights if self.pi_weights is not None else np.ones(len(self.pis)) / len(self.pis)
        try:
            P = default_positional_encodings(self.L, d)
            cols = np.round(P.T * math.sqrt(d), 9)
            freq = np.array([np.mean(np.all(cols == np.round(pi, 9), axis=1)) for pi in self.pis])
            if np.all(np.abs(freq - w) <= 2.0 ** self.L / d) and abs(freq.sum() - 1) < 1e-12:
                return P
        except ValueError:
            pass
        counts = np.floor(w * d).astype(int)
        counts[0] += d - counts.sum()
        return np.repeat(self.pis, counts, axis=0).T / math.sqrt(d)


def _declaration_values(model, parameters: Mapping[str, float]) -> dict:
    return {s: float(parameters.get(str(s), v)) for s, v in model.defaults.items()}


def model_spec(model: str | GeneratedModel, parameters: Mapping[str, float] | None = None) -> GampSpec:
    """The :class:`GampSpec` of a declared model (name, alias such as ``attention``, path to a
    declaration file, or generated module of a model in ``derivations/``).

    Parameters are validated by the generated module's checks (``ParameterError`` naming
    the parameter). Needs a single-atom spectral law without token clusters (every
    attention model but ``attention_clusters``, and GLMs such as ``ridge``).
    """
    import sympy as sp

    from replica.errors import ParameterError
    from replica.registry import load_model, load_module
    from replica.symbolic.regularizers import L2, SeparableRegularizer
    from replica.numeric.solver import Solver

    module = load_module(model) if isinstance(model, str) else as_model(model)
    solver = Solver(module, parameters or {})  # validates names, domains and constraints
    params = solver.parameter_dict
    if module.DISCRETE:
        raise ParameterError("model", f"{module.MODEL}: token clusters are not supported by GAMP")
    # The declaration (a name or a path to a file) gives the regularizer and the data law.
    decl = load_model(model if isinstance(model, str) else module.MODEL)
    values = _declaration_values(decl, params)
    atoms = decl.data.atoms
    gam = [np.array([float(sp.sympify(g).subs(values)) for g in a.gamma]) for a in atoms]
    if decl.data.has_clusters or any(not np.allclose(g, gam[0]) for g in gam):
        raise ParameterError("model", f"{module.MODEL}: GAMP needs isotropic tokens (every atom of the "
                                      "spectral law with the same eigenvalues) and no clusters")
    gammas = gam[0]
    pis = np.array([[float(sp.sympify(v).subs(values)) for v in a.pi] for a in atoms])      # (atoms, L)
    pi_weights = np.array([float(sp.sympify(a.weight).subs(values)) for a in atoms])
    reg = decl.regularizer
    R = module.R
    Lambda = sep = sep_pen = None
    if isinstance(reg, L2):
        Lambda = np.array(reg.matrix(R).subs(values), dtype=float)
    elif isinstance(reg, SeparableRegularizer) and R == 1:
        z, t = sp.Symbol("z", real=True), sp.Symbol("t", positive=True)
        expr = reg.scalar_prox(z, t)
        if expr is None:
            raise ParameterError("model", f"{module.MODEL}: no closed-form prox for the regularizer")
        expr = expr.subs(values)
        f = sp.lambdify((z, t), expr, "numpy")
        df = sp.lambdify((z, t), sp.diff(expr, z), "numpy")

        def sep(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            a, b = A[:, 0, 0], B[:, 0]
            zz, tt = b / a, 1.0 / a
            w = np.broadcast_to(np.asarray(f(zz, tt), dtype=float), zz.shape)
            c = np.broadcast_to(np.asarray(df(zz, tt), dtype=float), zz.shape) / a
            return w[:, None].copy(), c[:, None, None].copy()

        wsym = sp.Symbol("w", real=True)
        sep_pen = sp.lambdify(wsym, reg.expression(sp.Matrix([wsym])).subs(values), "numpy")
    else:
        raise ParameterError("model", f"{module.MODEL}: GAMP supports l2 or a scalar (r = 1) separable "
                                      "regularizer")
    n_noise = sum(1 for g in module.GAUSSIANS if not (g.startswith("xi_") or g.startswith("eta_")))
    return GampSpec(module=module, name=module.MODEL, parameters=params, p=solver.p, L=module.L, R=R,
                    R_T=module.R_T, gammas=gammas, pis=pis, pi_weights=pi_weights,
                    rho_bar=np.asarray(module.rho_bar(solver.p), dtype=float).reshape(-1),
                    Lambda=Lambda, sep_prox=sep, n_noise=n_noise, sep_penalty=sep_pen)


# --------------------------------------------------------------------------- channels
def _gaussian_slots(module: GeneratedModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices in ``GAUSSIANS`` of ``xi`` (L, R), ``eta`` (L, R_T) and the noise variables."""
    L, R, RT = module.L, module.R, module.R_T
    xi = np.full((L, R), -1)
    eta = np.full((L, RT), -1)
    noise = []
    for k, name in enumerate(module.GAUSSIANS):
        m = re.fullmatch(r"(xi|eta)_(\d+)(?:_(\d+))?", name)
        if m is None:
            noise.append(k)
            continue
        tok, col = int(m.group(2)) - 1, int(m.group(3) or 1) - 1
        (xi if m.group(1) == "xi" else eta)[tok, col] = k
    if (xi < 0).any() or (eta < 0).any():
        raise ValueError(f"{module.MODEL}: cannot map GAUSSIANS {module.GAUSSIANS} to fields")
    return xi, eta, np.array(noise, dtype=int)


class OutputChannel:
    """The energetic prox of a generated module at arbitrary ``(ω, V, h*)``, per sample.

    The module's bracket is parametrised by quadrature variables; at ``q = I``, ``m = 0``,
    ``θ = 0`` its fields are ``ω_ℓ = ξ_ℓ`` and ``h*_ℓ = ρ_ℓ^{1/2} η_ℓ`` (``ρ_ℓ = ρ̄_ℓ I``),
    so feeding ``ξ = ω`` and ``η = h*/√ρ̄`` evaluates ``½(h−ω)ᵀV⁻¹(h−ω) + ℓ(h, h*)`` exactly.
    The constructor checks this on random fields (one of the module's starts is ``h = ω``).
    """

    def __init__(self, spec: GampSpec, prox_tol: float = 1e-12):
        mod = spec.module
        self.spec, self.module, self.p = spec, mod, spec.p
        self.L, self.R, self.D = spec.L, spec.R, mod.PROX_DIM
        if self.D != self.L * self.R:
            raise ValueError(f"{mod.MODEL}: PROX_DIM={self.D} is not L*R={self.L * self.R}")
        self.xi, self.eta, self.noise = _gaussian_slots(mod)
        self.prox_tol = prox_tol
        self.x0 = np.zeros(len(mod.ORDER_PARAMETERS))
        self.v_entries: list[tuple[int, int | None, int, int]] = []
        for k, name in enumerate(mod.ORDER_PARAMETERS):
            fam, token, i, j, _, _ = mod.LAYOUT[name]
            if fam == "q":
                self.x0[k] = 1.0 if i == j else 0.0
            elif fam == "V":
                self.v_entries.append((k, None if token is None else int(token) - 1, i, j))
        self.shared_v = any(t is None for _, t, _, _ in self.v_entries)
        self._check()

    def state(self, V: np.ndarray) -> np.ndarray:
        """The module's order-parameter vector for the channel at variances ``V`` (L, R, R)."""
        x = self.x0.copy()
        for k, tok, i, j in self.v_entries:
            x[k] = V[0 if tok is None else tok, i, j]
        return x

    def nodes(self, omega: np.ndarray, hstar: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Quadrature-variable columns ``z`` (nz, n) for fields ``ω`` (n, L, R), ``h*`` (n, L, R_T)."""
        n = omega.shape[0]
        z = np.empty((len(self.module.GAUSSIANS), n))
        z[self.xi.ravel()] = omega.reshape(n, -1).T
        z[self.eta.ravel()] = (hstar / np.sqrt(self.spec.rho_bar)[None, :, None]).reshape(n, -1).T
        if self.noise.size:
            z[self.noise] = noise.T
        return z

    def _check(self) -> None:
        rng = np.random.default_rng(0)
        om = rng.standard_normal((5, self.L, self.R))
        hs = rng.standard_normal((5, self.L, self.spec.R_T))
        V = np.broadcast_to(np.eye(self.R), (self.L, self.R, self.R))
        z = self.nodes(om, hs, rng.standard_normal((5, self.noise.size)))
        starts = self.module.prox_starts(z, self.state(V), self.p).reshape(self.module.N_STARTS, self.D, 5)
        if not any(np.allclose(s, om.reshape(5, -1).T, atol=1e-12) for s in starts):
            raise ValueError(f"{self.module.MODEL}: the bracket's fields are not omega = xi at q = I, m = 0 "
                             "(unexpected parametrisation)")

    def shared(self, V: np.ndarray) -> np.ndarray:
        """``V`` as the module sees it: the token mean where the module shares one ``V``."""
        if self.shared_v:
            return np.broadcast_to(V.mean(axis=0), V.shape).copy()
        return V

    def __call__(self, omega: np.ndarray, V: np.ndarray, hstar: np.ndarray, noise: np.ndarray,
                 warm: np.ndarray | None = None, local: bool = False, n_starts: int | None = None,
                 convention: Any = None):
        """``(g, ∂g/∂ω, h, n_failed)``: ``g`` (n, L, R), ``∂g/∂ω`` (n, D, D), minimisers ``h`` (D, n).

        The lowest minimum over the module's starts and ``warm``; ``n_starts`` (with a
        ``warm`` start) keeps only the first module starts (1: ``h = ω``); with ``local`` the
        minimum reached from ``warm`` alone, which follows each sample's basin continuously
        (no switching between minima). ``convention``: a local :class:`replica.numeric.prox.ProxConvention`
        takes the minimum reached by descent from its start instead, at every iteration (the
        theory's local convention; ``warm`` and ``local`` are then not used)."""
        from replica.numeric.prox import local_prox, prox

        n = omega.shape[0]
        z = self.nodes(omega, hstar, noise)
        x = self.state(V)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            if convention is not None and convention.local:
                res = local_prox(self.module, z, x, self.p, convention, tol=self.prox_tol)
            else:
                res = prox(self.module, z, x, self.p, warm=warm, tol=self.prox_tol,
                           n_starts=0 if (local and warm is not None) else n_starts)
            _, _, H = self.module.bracket_newton(res.h, z, x, self.p)
        Vinv = _block_diag(np.linalg.inv(V))
        Hm = H.T.reshape(n, self.D, self.D)
        Hm = 0.5 * (Hm + Hm.transpose(0, 2, 1))
        g = (res.h.T - omega.reshape(n, self.D)) @ Vinv.T
        dg = Vinv @ _inv_psd(Hm) @ Vinv - Vinv
        return g.reshape(n, self.L, self.R), dg, res.h, res.n_failed

    def loss(self, h: np.ndarray, hstar: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-sample loss ``ℓ(h, h*)`` (n,) and its gradient in ``h`` (n, L, R): the bracket at ``ω = h``."""
        n = h.shape[0]
        z = self.nodes(h, hstar, noise)
        x = self.state(np.broadcast_to(np.eye(self.R), (self.L, self.R, self.R)))
        with np.errstate(over="ignore", under="ignore"):
            F, G, _ = self.module.bracket_newton(h.reshape(n, -1).T, z, x, self.p)
        return np.asarray(F, dtype=float), G.T.reshape(n, self.L, self.R)


def _inv_psd(H: np.ndarray, floor: float = 1e-12) -> np.ndarray:
    """Inverse of symmetric matrices (n, D, D) whose eigenvalues are floored at ``floor``
    times the largest: at a minimiser ``H`` is positive semi-definite, and a (numerically)
    singular direction -- an inflection of the bracket -- must not abort the run."""
    lam, U = np.linalg.eigh(H)
    lam = np.maximum(lam, floor * np.maximum(np.abs(lam).max(axis=-1, keepdims=True), 1e-300))
    return (U / lam[..., None, :]) @ U.transpose(0, 2, 1)


def _block_diag(blocks: np.ndarray) -> np.ndarray:
    L, R, _ = blocks.shape
    out = np.zeros((L * R, L * R))
    for l in range(L):
        out[l * R:(l + 1) * R, l * R:(l + 1) * R] = blocks[l]
    return out


class InputChannel:
    """``Ŵ_i = argmin_w r(w) + ½wᵀA_i w − wᵀB_i`` and ``Ĉ_i = ∂Ŵ_i/∂B_i`` for every row ``i``."""

    def __init__(self, spec: GampSpec):
        self.spec = spec

    def __call__(self, A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self.spec
        if s.Lambda is not None:
            C = np.linalg.inv(s.Lambda[None] + A)
            return np.einsum("irs,is->ir", C, B), C
        assert s.sep_prox is not None
        return s.sep_prox(A, B)

    def penalty(self, W: np.ndarray) -> float:
        """``Σ_i r(W_i)``."""
        s = self.spec
        if s.Lambda is not None:
            return 0.5 * float(np.einsum("ir,rs,is->", W, s.Lambda, W))
        assert s.sep_penalty is not None
        return float(np.sum(np.broadcast_to(s.sep_penalty(W[:, 0]), W[:, 0].shape)))


# --------------------------------------------------------------------------- data
@dataclass
class GampProblem:
    """One data set: ``F`` (n·L, d) rows ``(x^μ_ℓ + p_ℓ)/√d`` (sample-major), teacher
    ``Q*`` (d, R_T), teacher fields ``h*`` (n, L, R_T), label noise (n, n_noise), ``P``
    (L, d), token variances (L, d), and ``c`` (L, d) = ``mean_μ F_{ℓ,μi}²``."""

    d: int
    n: int
    alpha: float
    seed: int
    F: Any
    Qstar: np.ndarray
    hstar: np.ndarray
    noise: np.ndarray
    P: np.ndarray
    variances: np.ndarray
    c: np.ndarray
    streams: Any
    data: Any


def make_problem(spec: GampSpec, alpha: float, d: int, seed: int, normalize_teacher: bool = True,
                 chunk: int = 1024) -> GampProblem:
    """The data of seed ``seed`` -- the same teacher and training sentences as
    :func:`numerics.simulate.run_attention_seed` with that seed (same streams and draws)."""
    from .data import DataModel, make_teacher, seed_streams

    streams = seed_streams(seed)
    L = spec.L
    P = spec.encodings(d)
    data = DataModel.create(d=d, L=L, variances=list(spec.gammas), P=P)
    Qstar = make_teacher(d, spec.R_T, lambda h: h, streams.teacher, normalize=normalize_teacher).Qstar
    n = int(round(alpha * d))
    if n < 1:
        raise ValueError(f"alpha*d must give at least one sample (alpha={alpha}, d={d})")
    X = data.sample(n, streams.train)                       # (n, L, d), as the simulator draws it
    hstar = X @ Qstar / math.sqrt(d)                         # (n, L, R_T)
    X += P[None]
    X /= math.sqrt(d)
    c = np.einsum("nld,nld->ld", X, X) / n
    noise_rng = np.random.default_rng(np.random.SeedSequence(int(seed)).spawn(5)[4])
    noise = noise_rng.standard_normal((n, spec.n_noise))
    return GampProblem(d=d, n=n, alpha=float(alpha), seed=int(seed), F=X.reshape(n * L, d), Qstar=Qstar,
                       hstar=hstar, noise=noise, P=P, variances=data.variances, c=c, streams=streams,
                       data=data)


def _directions(problem: GampProblem, rng: np.random.Generator, R: int):
    """``u = p_1/‖p_1‖`` (None without encodings), the teacher orthogonal to ``u``, and ``R``
    noise vectors orthogonal to both (Gram-Schmidt)."""
    d = problem.d
    p1 = problem.P[0]
    u = p1 / np.linalg.norm(p1) if np.linalg.norm(p1) > 0 else None
    Qs = problem.Qstar[:, 0].copy()
    Qp = Qs - (Qs @ u) * u if u is not None else Qs
    Z = rng.standard_normal((d, R))
    for j in range(R):
        if u is not None:
            Z[:, j] -= (Z[:, j] @ u) * u
        Z[:, j] -= (Z[:, j] @ Qp) / (Qp @ Qp) * Qp
    return u, Qs, Qp, Z


def initial_weights(kind: str, spec: GampSpec, problem: GampProblem, rng: np.random.Generator) -> np.ndarray:
    """GAMP's start ``Ŵ⁰`` (d, R), independent of the training data (so that the state
    evolution applies from iteration 0). With ``u = p_1/‖p_1‖`` and ``Q*_⊥``, ``Z_⊥`` the
    teacher and iid N(0, 1) noise made orthogonal to ``u`` (and ``Z_⊥`` to ``Q*_⊥``), every column is

    * ``semantic``: ``0.5 Q*_⊥ + 0.5 Z_⊥`` (``m = 0``, ``θ ≈ ρ/2``, ``q ≈ ρ̄/2``);
    * ``positional``: ``0.2 √d u + 0.3 Z_⊥`` (``m = 0.2``, ``θ = O(d^-1/2)``, ``q ≈ 0.13 ρ̄``);
    * ``random``: ``0.5 N(0, 1)``.

    The informed starts have overlaps of the size of the branches' fixed points at the
    paper's parameters, strictly inside the state evolution's domain (``θ² < qρ``); from
    much larger overlaps (e.g. GD's ``Q = Q*``) the first GAMP steps overshoot far.
    """
    if kind not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)} (got {kind!r})")
    d, R = problem.d, spec.R
    if kind == "random":
        return INIT_NOISE * rng.standard_normal((d, R))
    u, _, Qp, Z = _directions(problem, rng, R)
    if kind == "semantic":
        return 0.5 * Qp[:, None] + 0.5 * Z
    if u is None:
        raise ValueError(f"init: {spec.name} has no positional encodings; use semantic or random")
    return 0.2 * math.sqrt(d) * u[:, None] + 0.3 * Z


def weights_with_overlaps(q: float, m: float, theta: float, problem: GampProblem,
                          rng: np.random.Generator) -> np.ndarray:
    """A rank-one start ``Ŵ⁰ = c u + a Q*_⊥ + b Z_⊥`` (d, 1) whose token-1 overlaps are exactly
    ``q, m, θ`` (isotropic tokens with positional encodings; see :func:`initial_weights`)."""
    d = problem.d
    gamma = float(problem.variances[0, 0])
    if not np.allclose(problem.variances, gamma):
        raise ValueError("overlaps: prescribed starts need isotropic tokens")
    u, Qs, Qp, Z = _directions(problem, rng, 1)
    if u is None:
        raise ValueError("overlaps: prescribed starts need positional encodings")
    Z = Z[:, 0]
    c = m * math.sqrt(d) / np.linalg.norm(problem.P[0])
    a = (theta * d / gamma - c * (u @ Qs)) / (Qp @ Qs)
    b2 = (q * d / gamma - c * c - a * a * (Qp @ Qp)) / (Z @ Z)
    if not b2 > 0:
        raise ValueError(f"overlaps: (q, m, theta) = ({q}, {m}, {theta}) needs q > m^2 gamma + theta^2/rho "
                         "(about)")
    return (c * u + a * Qp + math.sqrt(b2) * Z)[:, None]


# --------------------------------------------------------------------------- linear algebra
class _Numpy:
    def __init__(self, F: np.ndarray):
        self.F = F

    def forward(self, W: np.ndarray) -> np.ndarray:
        return self.F @ W

    def backward(self, G: np.ndarray) -> np.ndarray:
        return self.F.T @ G


class _Torch:
    """The two products on a torch device (float64); the channel stays in numpy."""

    def __init__(self, F: np.ndarray, device: str):
        import torch

        from .simulate import resolve_device

        self.torch = torch
        self.device = resolve_device(device)
        self.F = torch.as_tensor(F, dtype=torch.float64, device=self.device)

    def forward(self, W: np.ndarray) -> np.ndarray:
        t = self.torch
        return (self.F @ t.as_tensor(W, dtype=t.float64, device=self.device)).cpu().numpy()

    def backward(self, G: np.ndarray) -> np.ndarray:
        t = self.torch
        return (self.F.T @ t.as_tensor(G, dtype=t.float64, device=self.device)).cpu().numpy()


# --------------------------------------------------------------------------- the algorithm
@dataclass
class GampResult:
    """Final estimate and diagnostics of one GAMP run.

    ``trace``: one dict per iteration ``t`` with the summary statistics of ``Ŵ^t`` (raw
    signs, per token: ``q``, ``m``, ``theta`` as nested lists) and ``V^t``, the residual
    ``|Ŵ^{t+1} − Ŵ^t|/|Ŵ^t|`` and the mean ``−∂g/∂ω``.
    """

    W: np.ndarray
    C: np.ndarray
    V: np.ndarray
    converged: bool
    iterations: int
    residual: float
    residuals: list[float]
    trace: list[dict]
    prox_failed: int
    seconds: float
    message: str = ""
    switching: "Switching | None" = None


@dataclass
class Switching:
    """The samples whose prox minimiser jumped between minima in a run's final iterations.

    ``samples``: their indices (largest jump first); ``jumps``: each one's largest ``|Δh|``
    (max over components) between consecutive iterations; ``minima``: how many distinct
    minimisers each visited; ``median_jump``: the median sample's largest move (the smooth
    drift of the others); ``period``: the smallest ``p`` with every switching sample in the
    same minimum as ``p`` iterations before, throughout the window (``None``: no such cycle)."""

    samples: list[int]
    jumps: list[float]
    minima: list[int]
    median_jump: float
    period: int | None
    window: int

    def describe(self, shown: int = 3) -> str:
        """One clause for a run's message."""
        k = len(self.samples)
        if not k:
            return f"no sample switches between prox minima in the last {self.window} iterations"
        each = ", ".join(f"sample {i}: {m} minima, |dh| up to {j:.2g}"
                         for i, j, m in zip(self.samples[:shown], self.jumps[:shown], self.minima[:shown]))
        more = f" and {k - shown} more" if k > shown else ""
        cyc = f"; the flips repeat every {self.period} iterations" if self.period else ""
        return (f"{k} sample{'s' if k > 1 else ''} switch{'' if k > 1 else 'es'} between prox minima in the last "
                f"{self.window} iterations ({each}{more}; the median sample moves {self.median_jump:.1e}){cyc}")

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "jumps": self.jumps, "minima": self.minima,
                "median_jump": self.median_jump, "period": self.period, "window": self.window}


def switching_samples(minimisers: Sequence[np.ndarray], factor: float = SWITCH_FACTOR) -> Switching:
    """Which samples switch basins over consecutive iterations' prox minimisers.

    ``minimisers``: the ``(D, n)`` minimisers of the last iterations, oldest first. A sample
    switches where its largest jump exceeds ``factor`` times the median sample's (and round-off:
    1e-9 of the minimisers' scale). Two of its positions are the same minimum when they differ
    by at most a tenth of that jump: its distinct minima and the cycle's period count those."""
    H = np.asarray(minimisers, dtype=float)                       # (T, D, n)
    window = max(H.shape[0] - 1, 0)
    if window < 1:
        return Switching([], [], [], 0.0, None, window)
    jump = np.abs(np.diff(H, axis=0)).max(axis=(0, 1))            # (n,)
    median = float(np.median(jump))
    floor = 1e-9 * max(float(np.sqrt(np.mean(H[-1] ** 2))), 1e-300)
    flagged = np.nonzero(jump > max(factor * median, floor))[0]
    flagged = flagged[np.argsort(-jump[flagged], kind="stable")]
    same = 0.1 * jump[flagged]                                    # (k,) one minimum's extent
    minima = []
    for i, r in zip(flagged, same):
        centres: list[np.ndarray] = []
        for h in H[:, :, i]:
            if not any(np.max(np.abs(h - c)) <= r for c in centres):
                centres.append(h)
        minima.append(len(centres))
    period = None
    if flagged.size:
        F = H[:, :, flagged]
        period = next((p for p in range(1, H.shape[0] // 2 + 1)
                       if np.all(np.abs(F[p:] - F[:-p]).max(axis=1) <= same[None, :])), None)
    return Switching([int(i) for i in flagged], [float(jump[i]) for i in flagged], minima, median, period, window)


def overlaps(W: np.ndarray, problem: GampProblem) -> dict[str, np.ndarray]:
    """Per-token ``q`` (L, R, R), ``m`` (L, R), ``theta`` (L, R, R_T) of ``W`` (raw signs)."""
    d = problem.d
    v = problem.variances
    return {"q": np.einsum("di,ld,dj->lij", W, v, W) / d,
            "m": np.einsum("di,ld->li", W, problem.P) / math.sqrt(d),
            "theta": np.einsum("di,ld,dt->lit", W, v, problem.Qstar) / d}


class GAMP:
    """GAMP on one :class:`GampProblem` (see the module docstring for the iteration).

    ``damping`` is the fraction of the old ``Ŵ, Ĉ`` and output messages ``g`` kept at each
    step (0: plain GAMP, whose summary statistics follow the undamped state evolution); it
    does not change the fixed points. ``backend``: ``numpy`` or ``torch`` (``device`` cpu/cuda). ``local_prox``: after
    the first iteration, each sample's prox is continued from its previous minimiser only
    (a continuous output channel); its fixed points are still critical points of the
    risk, but its dynamics is no longer the global-minimum state evolution.
    ``multistart_every``: the prox starts from every module start on the first iteration,
    every ``multistart_every``-th one and to confirm convergence, and from the previous
    minimiser and ``h = ω`` in between (half the cost; 1: every start at every iteration,
    as the state evolution's map does).
    """

    def __init__(self, spec: GampSpec, problem: GampProblem, damping: float = 0.0,
                 backend: str = "numpy", device: str = "cpu", prox_tol: float = 1e-12,
                 local_prox: bool = False, multistart_every: int = 10, prox: Any = None):
        from replica.numeric.prox import prox_convention

        self.convention = prox_convention(prox)
        if not 0.0 <= damping < 1.0:
            raise ValueError(f"damping must be in [0, 1) (got {damping})")
        if backend not in ("numpy", "torch"):
            raise ValueError(f"backend must be numpy or torch (got {backend!r})")
        self.spec, self.problem, self.damping = spec, problem, float(damping)
        self.local_prox = bool(local_prox)
        if int(multistart_every) < 1:
            raise ValueError(f"multistart_every must be >= 1 (got {multistart_every})")
        self.multistart_every = int(multistart_every)
        self.out = OutputChannel(spec, prox_tol=prox_tol)
        self.inp = InputChannel(spec)
        self.ops = _Numpy(problem.F) if backend == "numpy" else _Torch(problem.F, device)

    def fields(self, W: np.ndarray) -> np.ndarray:
        """Student fields ``h = F W`` (n, L, R)."""
        pr = self.problem
        return self.ops.forward(W).reshape(pr.n, self.spec.L, self.spec.R)

    def run(self, init: str | np.ndarray = "semantic", max_iter: int = 200, tol: float = 1e-10,
            C0: float = 1.0, trace: bool = True, progress: Callable[[str], None] | None = None,
            log_every: int = 50, stop_residual: float = 1e6) -> GampResult:
        """Iterate from ``init`` (a name of :data:`INITS` or a (d, R) array) and ``Ĉ⁰ = C0·I``.

        Stops when the relative change of ``Ŵ`` falls below ``tol`` (``converged``), after
        ``max_iter`` iterations, or when the state blows up (residual above ``stop_residual``
        or non-finite).
        """
        t0 = time.perf_counter()
        sp_, pr = self.spec, self.problem
        L, R, n, d = sp_.L, sp_.R, pr.n, pr.d
        if isinstance(init, str):
            from .data import seed_streams

            # a fresh copy of the seed's init stream: every run of this problem starts alike
            W = initial_weights(init, sp_, pr, seed_streams(pr.seed).init)
        else:
            W = np.array(init, dtype=float).reshape(d, R)
        C = np.broadcast_to(C0 * np.eye(R), (d, R, R)).copy()
        g_prev = np.zeros((n, L, R))
        warm = None
        residuals: list[float] = []
        records: list[dict] = []
        failed = 0
        converged = False
        message = f"no convergence to tol={tol:g} within {max_iter} iterations"
        beta = self.damping
        V = np.zeros((L, R, R))
        it = 0
        confirm = False
        stopped = False   # diverged or failed (not just out of iterations)
        recent: deque[np.ndarray] = deque(maxlen=SWITCH_WINDOW + 1)   # the last minimisers (D, n)
        for it in range(max_iter + 1):
            full = confirm or it % self.multistart_every == 0
            V = self.out.shared(np.einsum("li,irs->lrs", pr.c, C))
            if not (np.all(np.isfinite(V)) and np.all(np.linalg.eigvalsh(V) > 0)):
                # A non-convex channel can make -dg/domega, hence A and V, negative: the
                # Gaussian model of the fields behind GAMP no longer exists.
                message = f"diverged at iteration {it}: V is not positive definite"
                stopped = True
                break
            omega = self.fields(W) - np.einsum("lrs,nls->nlr", V, g_prev)
            try:
                g, dg, warm, nf = self.out(omega, V, pr.hstar, pr.noise, warm=warm, local=self.local_prox,
                                           n_starts=None if full else 1, convention=self.convention)
            except np.linalg.LinAlgError as exc:
                message = f"output channel failed at iteration {it}: {exc}"
                stopped = True
                break
            failed += nf
            recent.append(np.array(warm, dtype=float, copy=True))
            if beta and it > 0:
                # Damp the output messages too (Rangan et al.'s damped GAMP): a sample whose
                # prox switches between two minima otherwise flips back and forth through the
                # Onsager term -V g, a period-2 cycle that damping W and C alone cannot stop.
                g = beta * g_prev + (1 - beta) * g
            blocks = np.stack([dg[:, l * R:(l + 1) * R, l * R:(l + 1) * R] for l in range(L)], axis=1)
            S = -blocks.sum(axis=0)                                  # (L, R, R)
            A = np.einsum("li,lrs->irs", pr.c, S)                    # (d, R, R)
            B = self.ops.backward(g.reshape(n * L, R)) + np.einsum("irs,is->ir", A, W)
            W_new, C_new = self.inp(A, B)
            if beta:
                W_new = beta * W + (1 - beta) * W_new
                C_new = beta * C + (1 - beta) * C_new
            res = float(np.linalg.norm(W_new - W) / max(np.linalg.norm(W), 1e-300))
            if trace:
                ov = overlaps(W, pr)
                records.append({"t": it, "q": ov["q"].tolist(), "m": ov["m"].tolist(),
                                "theta": ov["theta"].tolist(), "V": V.tolist(), "residual": res,
                                "minus_dg": (S / n).tolist()})
            residuals.append(res)
            if progress and log_every and it % log_every == 0:
                progress(f"    GAMP iteration {it:4d}  residual {res:.3e}")
            if not (math.isfinite(res) and res < stop_residual) or not np.all(np.isfinite(W_new)):
                message = f"diverged at iteration {it} (residual {res:.3e})"
                stopped = True
                break
            W, C, g_prev = W_new, C_new, g
            if res < tol and (full or self.local_prox):
                converged = True
                message = f"converged: relative change {res:.2e} < tol {tol:g}"
                break
            confirm = res < tol   # below tol with the cheap starts: confirm with every start
        switching = None
        if not (converged or stopped) and len(recent) == recent.maxlen:
            # why it did not settle: a sample whose global minimiser flips keeps GAMP in a cycle
            switching = switching_samples(list(recent))
            message += "; " + switching.describe()
        return GampResult(W=W, C=C, V=V, converged=converged, iterations=it, residual=residuals[-1] if residuals else float("nan"),
                          residuals=residuals, trace=records, prox_failed=failed,
                          seconds=time.perf_counter() - t0, message=message, switching=switching)

    # ------------------------------------------------------------------ diagnostics
    def risk_gradient(self, W: np.ndarray) -> dict[str, float]:
        """Risk ``R(W)`` and the relative norm of its (proximal) gradient, computed from the
        loss alone (independently of GAMP's messages).

        ℓ2: ``|∇R| / max(|∇ data|, |ΛW|)`` (the two parts cancel at a critical point). A
        separable penalty: the gradient mapping ``W − prox_r(W − ∇data)`` over ``|∇data|``.
        """
        sp_, pr = self.spec, self.problem
        h = self.fields(W)
        losses, gh = self.out.loss(h, pr.hstar, pr.noise)
        G = self.ops.backward(gh.reshape(pr.n * sp_.L, sp_.R))
        data = float(np.sum(losses))
        if sp_.Lambda is not None:
            reg = W @ sp_.Lambda.T
            num = np.linalg.norm(G + reg)
            den = max(np.linalg.norm(G), np.linalg.norm(reg), 1e-300)
            pen = self.inp.penalty(W)
        else:
            one = np.ones((pr.d, 1, 1))
            prox_w, _ = sp_.sep_prox(one, W - G)     # prox_r(W - grad) with unit step
            num = np.linalg.norm(W - prox_w)
            den = max(np.linalg.norm(G), 1e-300)
            pen = self.inp.penalty(W)
        return {"risk": data + pen, "data_risk": data, "grad_norm": float(num / den)}

    def test_error(self, W: np.ndarray, n_test: int = 10_000, chunk: int = 2048) -> tuple[float, float]:
        """Monte-Carlo ``ε_g = E ℓ(h, h*)`` on fresh sentences from the seed's test stream
        (the per-sample loss of the theory; mean and its standard error)."""
        sp_, pr = self.spec, self.problem
        rng_noise = np.random.default_rng(np.random.SeedSequence(pr.seed).spawn(6)[5])
        vals = []
        done = 0
        while done < n_test:
            k = min(chunk, n_test - done)
            x = pr.data.sample(k, pr.streams.test)
            hs = x @ pr.Qstar / math.sqrt(pr.d)
            h = (x + pr.P[None]) @ W / math.sqrt(pr.d)
            lv, _ = self.out.loss(h, hs, rng_noise.standard_normal((k, sp_.n_noise)))
            vals.append(lv)
            done += k
        v = np.concatenate(vals)
        return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else float("nan")


# --------------------------------------------------------------------------- state evolution
def se_state(spec: GampSpec, stats: Mapping[str, Any]) -> np.ndarray:
    """The module's order-parameter vector from per-token overlaps ``q, m, theta, V``
    (nested lists or arrays as in :attr:`GampResult.trace`); shared entries take token 1's."""
    mod = spec.module
    arrs = {k: np.asarray(stats[k], dtype=float) for k in ("q", "m", "theta", "V")}
    x = np.zeros(len(mod.ORDER_PARAMETERS))
    for k, name in enumerate(mod.ORDER_PARAMETERS):
        fam, token, i, j, _, _ = mod.LAYOUT[name]
        tok = 0 if token is None else int(token) - 1
        a = arrs[fam][tok]
        x[k] = a[i] if a.ndim == 1 else a[i, j]
    return x


def state_evolution(spec: GampSpec, alpha: float, x0: np.ndarray, iterations: int,
                    rule=None) -> list[np.ndarray]:
    """The saddle-point map of the generated solver iterated WITHOUT damping from ``x0``:
    ``[x0, map(x0), map(map(x0)), ...]`` (``iterations`` applications, fewer if the state
    leaves the admissible domain). No branch is pinned (GAMP pins nothing)."""
    from replica.errors import InvalidStateError
    from replica.numeric.solver import Solver

    solver = Solver(spec.module, spec.parameters, rule=rule)
    xs = [np.asarray(x0, dtype=float)]
    for _ in range(iterations):
        try:
            xs.append(solver.evaluate_map(xs[-1], alpha).x_new)
        except InvalidStateError:
            break
    return xs


# --------------------------------------------------------------------------- runs
def _plain(v: Any) -> Any:
    return v.tolist() if isinstance(v, np.ndarray) else v


def run_gamp_seed(model: str | GeneratedModel | GampSpec, seed: int, *, alpha: float = 2.0, d: int = 1000,
                  init: str = "semantic", parameters: Mapping[str, float] | None = None,
                  damping: float = 0.8, max_iter: int = 1000, tol: float = 1e-10,
                  backend: str = "numpy", device: str = "cpu", n_test: int = 10_000,
                  normalize_teacher: bool = True, trace: bool = False, local_prox: bool = False,
                  multistart_every: int = 10, prox: Any = None,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """One GAMP run: its fixed point's order parameters (token 1, signs fixed so that
    ``m, θ ≥ 0`` as in :mod:`numerics.metrics`), ``eps_g``, ``train_loss``, ``grad_norm``,
    ``iterations``, ``converged`` (and the per-iteration ``trace`` if asked)."""
    from .metrics import order_parameters

    spec = model if isinstance(model, GampSpec) else model_spec(model, parameters)
    _check_run(alpha=alpha, d=d, init=init, damping=damping, max_iter=max_iter, tol=tol, n_test=n_test)
    t0 = time.perf_counter()
    problem = make_problem(spec, alpha, d, seed, normalize_teacher=normalize_teacher)
    gamp = GAMP(spec, problem, damping=damping, backend=backend, device=device, local_prox=local_prox,
                multistart_every=multistart_every, prox=prox)
    res = gamp.run(init, max_iter=max_iter, tol=tol, trace=True, progress=progress)
    ops = order_parameters(res.W, problem.Qstar, problem.variances, problem.P, [list(range(spec.R))])
    grad = gamp.risk_gradient(res.W)
    eps, eps_se = gamp.test_error(res.W, n_test=n_test)
    out: dict[str, Any] = {k: _plain(ops[k]) for k in ("q", "m", "theta", "rho", "rho_bar")}
    Vt = res.V[0]
    out["V"] = float(Vt[0, 0]) if Vt.size == 1 else Vt.tolist()
    out["per_token"] = {k: _plain(v) for k, v in ops["per_token"].items()}
    out.update(seed=int(seed), n=problem.n, eps_g=eps, eps_g_mc_se=eps_se,
               train_loss=grad["risk"] / d, risk=grad["risk"], grad_norm=grad["grad_norm"],
               iterations=res.iterations, converged=bool(res.converged), residual=res.residual,
               prox_failed=res.prox_failed, message=res.message,
               switching=None if res.switching is None else res.switching.to_dict(),
               prox=gamp.convention.kind, seconds=time.perf_counter() - t0)
    if trace:
        out["trace"] = res.trace
    return out


def _check_run(**kw: Any) -> None:
    def finite(v: Any) -> bool:
        try:
            return math.isfinite(float(v))
        except (TypeError, ValueError):
            return False

    a, d = kw.get("alpha"), kw.get("d")
    if a is not None and (not finite(a) or float(a) <= 0):
        raise ValueError(f"alpha must be > 0 (got {a!r})")
    if d is not None and (not finite(d) or int(d) != float(d) or int(d) < 2):
        raise ValueError(f"d must be an integer >= 2 (got {d!r})")
    if kw.get("init") is not None and kw["init"] not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)} (got {kw['init']!r})")
    dmp = kw.get("damping")
    if dmp is not None and (not finite(dmp) or not 0 <= float(dmp) < 1):
        raise ValueError(f"damping must be in [0, 1) (got {dmp!r})")
    mi = kw.get("max_iter")
    if mi is not None and (not finite(mi) or int(mi) != float(mi) or int(mi) < 1):
        raise ValueError(f"max_iter must be a positive integer (got {mi!r})")
    tol = kw.get("tol")
    if tol is not None and (not finite(tol) or not 0 < float(tol) < 1):
        raise ValueError(f"tol must be in (0, 1) (got {tol!r})")
    nt = kw.get("n_test")
    if nt is not None and (not finite(nt) or int(nt) != float(nt) or int(nt) < 2):
        raise ValueError(f"n_test must be an integer >= 2 (got {nt!r})")
    s = kw.get("seeds")
    if s is not None and (not finite(s) or int(s) != float(s) or int(s) < 1):
        raise ValueError(f"seeds must be a positive integer (got {s!r})")


def run_gamp(model: str | GeneratedModel = "attention", alpha: float = 2.0, d: int = 1000, init: str = "semantic",
             seeds: int = 1, *, seed_start: int = 0, parameters: Mapping[str, float] | None = None,
             verbose: bool = False, **kwargs: Any) -> dict[str, Any]:
    """GAMP on ``seeds`` seeds: means and standard errors over seeds and the per-seed runs
    (keys as :func:`numerics.simulate.run_attention`, plus ``iterations`` and ``V``)."""
    from .metrics import aggregate

    _check_run(alpha=alpha, d=d, init=init, seeds=seeds)
    spec = model_spec(model, parameters)
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if verbose else None
    runs = []
    for k, s in enumerate(range(seed_start, seed_start + int(seeds))):
        if log:
            log(f"[gamp {spec.name} alpha={alpha} d={d} init={init}] seed {s} ({k + 1}/{seeds}) ...")
        run = run_gamp_seed(spec, s, alpha=alpha, d=d, init=init, progress=log, **kwargs)
        if log:
            log(f"    done in {run['seconds']:.1f}s: {run['message']}; grad_norm={run['grad_norm']:.2e} "
                f"eps_g={run['eps_g']:.4e}")
        runs.append(run)
    out: dict[str, Any] = {"model": spec.name, "params": dict(alpha=alpha, d=d, n=runs[0]["n"], init=init,
                                                              seeds=list(range(seed_start, seed_start + int(seeds))),
                                                              parameters=spec.parameters,
                                                              **{k: v for k, v in kwargs.items()
                                                                 if k not in ("progress",)})}
    keys = ["q", "m", "theta", "rho", "V", "eps_g", "eps_g_mc_se", "train_loss", "grad_norm", "iterations"]
    out["teacher"] = "normalized" if kwargs.get("normalize_teacher", True) else "iid"  # rho exact, or per seed
    out.update(aggregate(runs, keys))
    out["converged"] = all(r["converged"] for r in runs)
    out["n_converged"] = sum(bool(r["converged"]) for r in runs)
    out["runs"] = runs
    return out


def expected_convergence(module: GeneratedModel, alpha: float, init: str, parameters: Mapping[str, float] | None = None
                         ) -> dict[str, Any]:
    """Whether GAMP (global-minimum prox) is expected to converge: the replicon of the theory's
    fixed point on the branch named like ``init`` (the model's default branch otherwise).

    Keys ``theory_branch``, ``replicon``, ``rs_stable`` (and the replicon's details, or ``null``
    with a reason where it is not implemented) and ``expected_to_converge`` (= ``rs_stable``):
    where the RS fixed point is unstable -- replicon >= 1 or a prox switching between minima --
    GAMP cannot settle on it (docs/explanation/replicon.md).
    """
    from replica.numeric.point import PointOptions, solve_point

    branch = init if init in module.BRANCHES else None
    # the theory's fixed point and its replicon, through the one pipeline (no bars: only the replicon is read)
    point = solve_point(module, parameters or {}, alpha,
                        PointOptions(branch=branch, quadrature=None, error_bars=False, companion_residual=False,
                                     scout=False))
    out: dict[str, Any] = {"theory_branch": point.fp.branch}
    out.update({k: v for k, v in point.result.items() if k.startswith(("replicon", "rs_stable"))})
    out["expected_to_converge"] = out["rs_stable"]
    return out


# --------------------------------------------------------------------------- CLI
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``argv``, it has the parameter flags of the model ``argv`` names."""
    from replica.applications import parameter_help
    from replica.errors import ReplicaError
    from replica.cli.flags import add_parameter_flags, peek_positional

    p = _Parser(prog="python -m numerics.gamp",
                description="GAMP (paper Appendix B, Algorithm 1) for a declared model: runs the algorithm "
                            "on synthetic data (the simulator's data for the same seed) and prints its fixed "
                            "point's order parameters (token 1, m, theta >= 0), eps_g, training loss, the "
                            "relative gradient norm of the empirical risk there, iterations and convergence.",
                epilog="Example: python -m numerics.gamp attention --omega 0.3 --alpha 2 --d 1000 "
                       "--init semantic --seeds 1 --json")
    p.add_argument("model", help="a declared model (e.g. 'attention', 'ridge') or a path to a .py file defining "
                                 "`model`")
    p.add_argument("--alpha", type=float, default=2.0, help="sample complexity n/d (> 0)")
    p.add_argument("--d", type=int, default=1000, help="dimension d")
    p.add_argument("--init", default="semantic", help="semantic, positional or random")
    p.add_argument("--seeds", type=int, default=1, help="number of seeds")
    p.add_argument("--seed-start", type=int, default=0, help="first seed")
    g = p.add_argument_group("algorithm")
    g.add_argument("--damping", type=float, default=0.8,
                   help="fraction of the old estimate and messages kept per step (default 0.8, the paper's "
                        "choice for its saddle-point iteration; 0: plain GAMP, which the undamped state "
                        "evolution describes but which oscillates away at the paper's points)")
    g.add_argument("--local-prox", action="store_true",
                   help="continue each sample's prox from its previous minimiser (no switching between "
                        "minima); fixed points are still critical points of the risk")
    g.add_argument("--prox", default="global", metavar="global|local",
                   help="the output channel's minimiser, as the theory's prox convention: global (default, the lowest "
                        "minimum) or local (the minimum reached by descent from the origin at every iteration; "
                        "docs/explanation/conventions.md)")
    g.add_argument("--max-iter", type=int, default=1000, help="maximum iterations")
    g.add_argument("--tol", type=float, default=1e-10, help="relative change of the estimate at convergence")
    g.add_argument("--backend", choices=["numpy", "torch"], default="numpy",
                   help="linear algebra backend (torch for large d, with --device)")
    g.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:K (implies --backend torch "
                                                    "unless cpu)")
    g.add_argument("--n-test", type=int, default=10_000, help="fresh sentences for eps_g")
    g.add_argument("--iid-teacher", action="store_true",
                   help="teacher with iid N(0,1) entries as the paper (rho = sigma^2 only up to O(d^-1/2)); default: "
                        "columns of norm sqrt(d), rho exact as the theory assumes")
    g.add_argument("--normalize-teacher", action="store_true",
                   help="the default teacher (columns of norm sqrt(d)); accepted so that older command lines run")
    p.add_argument("--replicon", action="store_true",
                   help="first solve the theory on the branch named by --init and report its replicon: "
                        "'expected_to_converge' is false where the RS fixed point is unstable")
    p.add_argument("--trace", action="store_true", help="include the per-iteration summary statistics")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    module = None
    name = peek_positional(p, list(argv)) if argv is not None else None
    if name is not None:
        from replica.registry import load_module

        try:
            module = load_module(name)
        except ReplicaError:
            module = None  # _run says why, in one line
    add_parameter_flags(p, module, parameter_help())
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit code: 2 for bad input, 1 if a seed did not converge,
    130/143 when interrupted (Ctrl-C / SIGTERM)."""
    from .checks import run_cli

    argv = sys.argv[1:] if argv is None else list(argv)
    return run_cli(build_parser(argv), _run, argv)  # SIGTERM ends like Ctrl-C: one line, no traceback


def _run(args: argparse.Namespace, prog: str) -> int:
    from replica.artifacts import jsonio
    from replica.cli.flags import parameters_from_args
    from replica.errors import ReplicaError
    from replica.registry import load_module
    from replica.runtime.workers import exit_status

    try:
        _check_run(alpha=args.alpha, d=args.d, init=args.init, damping=args.damping, max_iter=args.max_iter,
                   tol=args.tol, n_test=args.n_test, seeds=args.seeds)
        from replica.numeric.prox import prox_convention

        prox_convention(args.prox)  # a bad name is refused before any work
        if args.iid_teacher and args.normalize_teacher:
            raise ValueError("--iid-teacher and --normalize-teacher contradict each other; give one (the "
                             "normalized teacher is the default)")
        module = load_module(args.model)
        parameters = parameters_from_args(module, args)
        backend = "torch" if (args.backend == "torch" or args.device != "cpu") else "numpy"
        if backend == "torch":
            from .deps import require
            from .simulate import resolve_device

            require("torch", f"--backend torch{' --device ' + args.device if args.device != 'cpu' else ''}")

            resolve_device(args.device)
        expected = expected_convergence(module, args.alpha, args.init, parameters) if args.replicon else {}
        if expected and expected["rs_stable"] is False and not args.quiet:
            print(f"{prog}: note: the theory's {expected['theory_branch']} fixed point is RS-unstable (replicon "
                  f"{expected['replicon']:.3g}, prox switching: {expected.get('replicon_switching')}): GAMP with "
                  "the global-minimum prox is expected not to converge (docs/explanation/replicon.md)", file=sys.stderr)
        # by its name or path: a declaration file gives its regularizer and data law to model_spec
        res = run_gamp(args.model, args.alpha, args.d, args.init, args.seeds, seed_start=args.seed_start,
                       parameters=parameters, verbose=not args.quiet, damping=args.damping,
                       max_iter=args.max_iter, tol=args.tol, backend=backend, device=args.device,
                       n_test=args.n_test, normalize_teacher=not args.iid_teacher, trace=args.trace,
                       local_prox=args.local_prox, prox=args.prox)
    except (ReplicaError, ValueError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        name = "SIGTERM" if getattr(exc, "signum", None) else "SIGINT"
        print(f"{prog}: interrupted ({name}); nothing is saved, rerun it", file=sys.stderr)
        return exit_status(exc)
    res.update(expected)
    if args.json:
        print(jsonio.dumps(res))
    else:
        p = res["params"]
        print(f"gamp {res['model']}  alpha={p['alpha']} d={p['d']} n={p['n']} init={p['init']} "
              f"seeds={len(p['seeds'])}  " + " ".join(f"{k}={v:g}" for k, v in p["parameters"].items()))
        for k in ("q", "m", "theta", "rho", "V", "eps_g", "train_loss", "grad_norm", "iterations"):
            se = res.get(k + "_se")
            known = isinstance(se, (int, float)) and math.isfinite(se)
            print(f"  {k:<11} {res[k]!s:>24}" + (f"  (se {se:.2g})" if known else ""))
        print(f"  converged: {res['n_converged']}/{len(p['seeds'])}")
        if expected:
            print(f"  theory ({expected['theory_branch']}): replicon {expected['replicon']}, RS stable "
                  f"{expected['rs_stable']}, expected to converge: {expected['expected_to_converge']}")
        for r in res["runs"]:
            print(f"  seed {r['seed']}: {r['message']}")
    if not res["converged"]:
        failed = len(res["runs"]) - res["n_converged"]
        flipping = sum(bool(r.get("switching") and r["switching"]["samples"]) for r in res["runs"])
        if flipping:
            print(f"{prog}: warning: {failed} run(s) did not converge; in {flipping} of them a sample's global "
                  "prox minimiser flips between minima (see each seed's message), which neither more iterations "
                  "nor damping settle (docs/explanation/replicon.md); --local-prox follows each sample's basin instead (its "
                  "fixed points are critical points of the risk, not the global-minimum state)", file=sys.stderr)
        else:
            print(f"{prog}: warning: {failed} run(s) did not converge (see each seed's message and grad_norm); "
                  "try a larger --damping (fixed points are unchanged), more --max-iter, or --local-prox: where "
                  "the prox switches between minima (replica.numeric.stability.replicon), the global-minimum GAMP cannot "
                  "settle", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

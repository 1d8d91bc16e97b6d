"""The Gaussian covariate model's data law as numbers: a spectrum and the entropic sums over it.

A GLM on structured data (Loureiro et al. 2021, the Gaussian covariate model): student inputs
``x ~ N(0, Ω)``, teacher inputs ``u`` with covariance ``Ψ`` and cross-covariance ``Φ = E[u xᵀ]``,
teacher weights ``θ``, teacher field ``ν = θ·u/√N``, student field ``w·x/√N``. Written in the
eigenbasis ``Ω = Σ_k γ_k e_k e_kᵀ``, the entropic potential of a penalty diagonal in that basis is
a sum of independent one-mode terms,

    Ψ_w = (1/N) Σ_k ψ(γ_k, t_k; x̂),     t_k = e_kᵀ Φᵀ θ   (the teacher's projection on mode k),

and the energetic side depends on the data only through ``ρ = θᵀΨθ/N``, the variance of the
teacher field. In the well-specified case (``Ω = Ψ = Φ = diag(γ)``, the ``--spectrum`` file)
``t_k = γ_k θ_k`` and ``ρ = Σ_k γ_k θ_k² / N``.

This module holds the numbers only (no sympy): :class:`Spectrum` (the modes, read from a CSV
file or built from matrices), :class:`SpectralEntropic` (the sums of the per-mode term and of
its gradient, vectorised over the modes: linear in ``N``) and :func:`spectral_module` (a
generated GLM module whose entropic side is replaced by those sums). The per-mode term ``ψ``
itself is derived with sympy from the model's declaration by :mod:`replica.registry.spectral`.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import InvalidStateError, ParameterError
from ..interface.generated_model import GeneratedModel, as_model

#: the columns of a spectrum file
COLUMNS = ("k", "lambda", "theta")
#: relative mismatch allowed between the spectrum's rho and the module's teacher variance
RHO_TOLERANCE = 1e-10


@dataclass(frozen=True, eq=False)
class Spectrum:
    """The modes of a Gaussian covariate model.

    ``eigenvalues``: ``γ_k`` of the student covariance ``Ω`` (``N`` of them);
    ``projections``: ``t_k = e_kᵀ Φᵀ θ``; ``rho``: ``θᵀΨθ/N``; ``teacher``: ``θ`` in the
    eigenbasis of ``Ω`` where the model is well specified (``Ω = Ψ = Φ``; what the simulator
    draws its teacher from), else ``None``; ``source``: where it came from (for messages);
    ``canonical``: the eigenbasis is the canonical basis (``Ω`` diagonal), where a penalty
    separable in the weights' coordinates is separable in the modes too.
    """

    eigenvalues: np.ndarray
    projections: np.ndarray
    rho: float
    teacher: np.ndarray | None = None
    source: str = "spectrum"
    canonical: bool = True

    @property
    def N(self) -> int:
        """The number of modes (the input dimension)."""
        return int(self.eigenvalues.size)

    @property
    def isotropic(self) -> bool:
        """Every eigenvalue the same (``Ω ∝ I``)."""
        g = self.eigenvalues
        return bool(np.all(g == g[0]))

    def digest(self) -> str:
        """SHA-256 of the modes and ``ρ`` (what a cached result depends on)."""
        h = hashlib.sha256()
        for a in (self.eigenvalues, self.projections, np.array([self.rho])):
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
        return h.hexdigest()

    # ------------------------------------------------------------ constructors
    @classmethod
    def well_specified(cls, eigenvalues: Sequence[float], theta: Sequence[float],
                       source: str = "spectrum") -> "Spectrum":
        """``Ω = Ψ = Φ = diag(eigenvalues)`` with teacher weights ``theta`` in that basis."""
        g = _finite_vector(eigenvalues, "lambda", source)
        th = _finite_vector(theta, "theta", source)
        if g.size != th.size:
            raise ParameterError("spectrum", f"{source}: {g.size} eigenvalues but {th.size} teacher weights")
        if np.any(g < 0):
            k = int(np.flatnonzero(g < 0)[0])
            raise ParameterError("spectrum", f"{source}: lambda must be >= 0 (a covariance), got {g[k]:g} "
                                             f"in row {k + 1}")
        if not np.any(g > 0):
            raise ParameterError("spectrum", f"{source}: every lambda is 0 (no input variance)")
        rho = float(np.mean(g * th * th))
        if not rho > 0:
            raise ParameterError("spectrum", f"{source}: the teacher field has no variance "
                                             "(sum of lambda * theta^2 is 0)")
        return cls(g, g * th, rho, th, source)

    @classmethod
    def from_csv(cls, path: str | Path) -> "Spectrum":
        """Read a spectrum file: a header with the columns ``k, lambda, theta`` (any order, other
        columns ignored) and one row per mode. Raises a one-line :class:`ParameterError` naming
        ``spectrum`` for a missing or unreadable file, a missing column, an empty table, a value
        that is not a finite number or a negative ``lambda``."""
        source = str(path)
        try:
            with open(path, newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh, skipinitialspace=True)
                header = [c.strip() for c in (reader.fieldnames or [])]
                missing = [c for c in COLUMNS if c not in header]
                if missing:
                    raise ParameterError("spectrum", f"{source}: missing column(s) {', '.join(missing)} "
                                                     f"(need a header with {', '.join(COLUMNS)})")
                rows = [{(k or "").strip(): v for k, v in row.items()} for row in reader]
        except OSError as exc:
            raise ParameterError("spectrum", f"cannot read {source}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ParameterError("spectrum", f"{source} is not a text (CSV) file") from None
        except csv.Error as exc:
            raise ParameterError("spectrum", f"{source}: not a CSV table ({exc})") from None
        rows = [r for r in rows if any((v or "").strip() for v in r.values() if isinstance(v, str))]
        if not rows:
            raise ParameterError("spectrum", f"{source}: no modes (the table is empty)")
        cols = {c: [] for c in COLUMNS}
        for i, row in enumerate(rows):
            for c in COLUMNS:
                text = (row.get(c) or "").strip()
                try:
                    v = float(text)
                except ValueError:
                    raise ParameterError("spectrum", f"{source}: row {i + 1}, column {c}: {text!r} is not a "
                                                     "number") from None
                if not math.isfinite(v):
                    raise ParameterError("spectrum", f"{source}: row {i + 1}, column {c}: {text!r} is not "
                                                     "finite")
                cols[c].append(v)
        k = np.array(cols["k"])
        if np.unique(k).size != k.size:
            raise ParameterError("spectrum", f"{source}: the mode index k repeats")
        return cls.well_specified(cols["lambda"], cols["theta"], source)

    @classmethod
    def from_matrices(cls, omega: np.ndarray, theta: Sequence[float], psi: np.ndarray | None = None,
                      phi: np.ndarray | None = None, source: str = "matrices") -> "Spectrum":
        """The Gaussian covariate model from its matrices: ``Ω`` (``p x p``, the student's
        covariance), ``θ`` (``d`` teacher weights), ``Ψ`` (``d x d``, the teacher's covariance, default
        ``Ω``) and ``Φ = E[u xᵀ]`` (``d x p``, default ``Ω``). With student field ``w·x/√p`` and
        teacher field ``θ·u/√d`` the modes are those of ``Ω`` with ``t = √(p/d) Eᵀ Φᵀ θ`` and
        ``ρ = θᵀΨθ/d``. ``Ω`` is diagonalised once (``O(p³)``); only the well-specified case
        (``Ψ``, ``Φ`` not given) keeps a teacher for the simulator."""
        om = np.asarray(omega, dtype=float)
        th = np.asarray(theta, dtype=float).reshape(-1)
        d = th.size
        p = om.shape[0] if om.ndim == 2 else -1
        if om.shape != (p, p) or (psi is None and p != d) or (phi is None and psi is not None and p != d):
            raise ParameterError("Omega", f"must be square, {d} x {d} where Psi or Phi are not given (theta has "
                                          f"{d} entries), got {om.shape}")
        names = {"Omega": (om, (p, p)),
                 "Psi": (om if psi is None else np.asarray(psi, dtype=float), (d, d)),
                 "Phi": (om if phi is None else np.asarray(phi, dtype=float), (d, p))}
        for name, (M, shape) in names.items():
            if M.shape != shape:
                raise ParameterError(name, f"must be {shape[0]} x {shape[1]}, got {M.shape}")
            if not np.all(np.isfinite(M)):
                raise ParameterError(name, "has entries that are not finite")
        for name in ("Omega", "Psi"):
            M = names[name][0]
            if not np.allclose(M, M.T, atol=1e-12 * max(1.0, np.abs(M).max())):
                raise ParameterError(name, "is not symmetric")
        diagonal = not np.any(om - np.diag(np.diag(om)))
        # a diagonal Omega keeps the canonical basis (eigh may rotate degenerate eigenspaces)
        g, E = (np.diag(om).copy(), np.eye(p)) if diagonal else np.linalg.eigh(om)
        if g.min() < -1e-10 * max(1.0, g.max()):
            raise ParameterError("Omega", f"is not positive semi-definite (eigenvalue {g.min():.3g})")
        g = np.clip(g, 0.0, None)
        t = math.sqrt(p / d) * (E.T @ (names["Phi"][0].T @ th))
        rho = float(th @ names["Psi"][0] @ th) / d
        if not rho > 0:
            raise ParameterError("Psi", "the teacher field has no variance (theta^T Psi theta = 0)")
        well = psi is None and phi is None
        return cls(g, t, rho, E.T @ th if well else None, source, diagonal)

    def write_csv(self, path: str | Path) -> None:
        """Write a well-specified spectrum as a ``k, lambda, theta`` file (17 significant digits)."""
        if self.teacher is None:
            raise ParameterError("spectrum", "a misspecified model has no k, lambda, theta file")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("k,lambda,theta\n")
            for k, (g, th) in enumerate(zip(self.eigenvalues, self.teacher)):
                fh.write(f"{k + 1},{float(g)!r},{float(th)!r}\n")


def _finite_vector(values: Sequence[float], column: str, source: str) -> np.ndarray:
    a = np.asarray(values, dtype=float).reshape(-1)
    if a.size == 0:
        raise ParameterError("spectrum", f"{source}: no modes (the table is empty)")
    if not np.all(np.isfinite(a)):
        k = int(np.flatnonzero(~np.isfinite(a))[0])
        raise ParameterError("spectrum", f"{source}: {column} in row {k + 1} is not finite ({a[k]})")
    return a


def power_law(N: int, exponent: float, teacher_exponent: float = 0.0) -> Spectrum:
    """A power-law spectrum ``γ_k ∝ k^-exponent`` (normalised to ``tr Ω / N = 1``) with teacher
    weights ``θ_k ∝ k^-teacher_exponent / ...`` normalised to ``ρ = 1`` (capacity and source
    conditions in the kernel literature's parametrisation)."""
    k = np.arange(1, N + 1, dtype=float)
    g = k ** -float(exponent)
    g *= N / g.sum()
    th = k ** -float(teacher_exponent)
    th /= math.sqrt(float(np.mean(g * th * th)))
    return Spectrum.well_specified(g, th, f"power law (a={exponent:g}, b={teacher_exponent:g}, N={N})")


@dataclass(frozen=True)
class ModeFunctions:
    """The per-mode entropic term as numeric functions of ``(*xhat, *p, gamma, t)`` (``gamma``, ``t``
    arrays over the modes): ``potential`` gives ``ψ``, ``gradient`` the list of its derivatives by the
    conjugates (the module's ``CONJUGATES`` order; an entry may be a scalar where it does not depend
    on the mode). Built by :func:`replica.registry.spectral.mode_functions`."""

    conjugates: tuple[str, ...]
    parameters: tuple[str, ...]
    potential: Callable
    gradient: Callable


class SpectralEntropic:
    """``Ψ_w`` and ``x = -K^{-T} ∇_x̂ Ψ_w`` as sums over the modes of a :class:`Spectrum`.

    ``K = ∂²Ψ_t/∂x∂x̂`` is read off the module's (bilinear) trace potential at unit vectors, so
    the factors 2 of ``V``'s and ``q``'s conjugates come from the module, not from here.
    """

    def __init__(self, module: GeneratedModel, spectrum: Spectrum, terms: ModeFunctions):
        if tuple(terms.conjugates) != tuple(module.CONJUGATES):
            raise ParameterError("spectrum", f"the per-mode term's conjugates {terms.conjugates} are not "
                                             f"{module.MODEL}'s {tuple(module.CONJUGATES)}")
        if tuple(terms.parameters) != tuple(module.PARAMETERS):
            raise ParameterError("spectrum", f"the per-mode term's parameters {terms.parameters} are not "
                                             f"{module.MODEL}'s {tuple(module.PARAMETERS)}")
        self.spectrum, self.terms = spectrum, terms
        n, m = len(module.ORDER_PARAMETERS), len(module.CONJUGATES)
        K = np.zeros((n, m))
        for i in range(n):
            for j in range(m):
                x, xh = np.zeros(n), np.zeros(m)
                x[i], xh[j] = 1.0, 1.0
                K[i, j] = float(module.trace_potential(x, xh))
        self.coupling = K
        self._gamma = spectrum.eigenvalues
        self._t = spectrum.projections

    def _call(self, f: Callable, xhat: np.ndarray, p: np.ndarray):
        return f(*np.asarray(xhat, dtype=float), *np.asarray(p, dtype=float), self._gamma, self._t)

    @staticmethod
    def _mean(v) -> float:
        v = np.asarray(v, dtype=float)
        return float(v) if v.ndim == 0 else float(np.mean(v))

    def gradient(self, xhat: np.ndarray, p: np.ndarray) -> np.ndarray:
        """``∇_x̂ Ψ_w = (1/N) Σ_k ∇_x̂ ψ(γ_k, t_k)`` (one pass over the modes)."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.array([self._mean(v) for v in self._call(self.terms.gradient, xhat, p)])

    def update(self, xhat: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The order parameters from the conjugates: ``x = -K^{-T} ∇_x̂ Ψ_w``."""
        return -np.linalg.solve(self.coupling.T, self.gradient(xhat, p))

    def potential(self, xhat: np.ndarray, p: np.ndarray) -> float:
        """``Ψ_w = (1/N) Σ_k ψ(γ_k, t_k)``."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self._mean(self._call(self.terms.potential, xhat, p))


def _checked_glm(module: GeneratedModel, spectrum: Spectrum) -> GeneratedModel:
    """``module`` as a :class:`GeneratedModel`, refused (one line naming ``spectrum``) unless it is a
    one-token GLM derived with the spectrum's teacher variance ``ρ``."""
    module = as_model(module)
    if module.DISCRETE:
        raise ParameterError("spectrum", f"{module.MODEL}: a spectrum replaces the data law of a GLM "
                                         "(one token, no clusters)")
    defaults = np.asarray(module.DEFAULTS, dtype=float)
    rho_model = np.atleast_1d(np.asarray(module.rho_bar(defaults), dtype=float))
    if rho_model.size != 1:
        raise ParameterError("spectrum", f"{module.MODEL}: a spectrum needs a model with one token")
    rho0 = float(rho_model[0])
    if abs(spectrum.rho - rho0) > RHO_TOLERANCE * max(1.0, abs(rho0)):
        raise ParameterError("spectrum", f"{spectrum.source}: the teacher field has variance "
                                         f"rho = sum(lambda theta^2)/N = {spectrum.rho:.12g}, but {module.MODEL} "
                                         f"is derived with rho = {rho0:g}; rescale theta by "
                                         f"{math.sqrt(rho0 / spectrum.rho):.12g}")
    return module


def _on_spectrum(module: GeneratedModel, spectrum: Spectrum, entropic, envelope: bool = False,
                 **changes) -> GeneratedModel:
    """``module`` with the entropic side of ``entropic`` (``update``, ``potential``): a closed
    entropic side, the spectrum's digest in the stamp, the spectrum's eigenvalues as the atoms."""
    def entropic_update(xhat, p):
        """Order parameters from conjugates: ``x = -K^{-T} ∇ Ψ_w``, spectral sums."""
        x = entropic.update(xhat, p)
        # at xhat = 0 (the solver's alpha -> 0 probe for its start) an envelope's NaN says "no value"
        if not np.all(np.isfinite(x)) and (np.any(xhat) or not envelope):
            raise InvalidStateError("entropic_update", "the spectral sums are not finite (is lambda + gamma_k "
                                    "Vhat > 0 for every mode?)", dict(zip(module.CONJUGATES, np.asarray(xhat).tolist())))
        return x

    def entropic_potential(xhat, p):
        """``Ψ_w(x̂)``, spectral sum."""
        return entropic.potential(xhat, p)

    def atom_eigenvalues(p):
        """The eigenvalues of the spectral law, one row per mode."""
        return spectrum.eigenvalues.reshape(-1, 1)

    changes = dict(dict(ENTROPIC="closed", entropic_update=entropic_update, entropic_potential=entropic_potential,
                        atom_eigenvalues=atom_eigenvalues, ISOTROPIC_TOKENS=spectrum.isotropic), **changes)
    if module.stamp is not None:  # the model's part of a cache key is read off its stamp
        tag = f"+spectrum-{spectrum.digest()[:16]}"
        changes["stamp"] = dataclasses.replace(module.stamp, declaration=f"{module.stamp.declaration}{tag}")
    out = module.replace(**changes)
    out.SPECTRUM = spectrum
    out.SPECTRAL_ENTROPIC = entropic
    return out


def spectral_module(module: GeneratedModel, spectrum: Spectrum, terms: ModeFunctions) -> GeneratedModel:
    """``module`` (a generated GLM module with an l2 penalty) on the data law of ``spectrum``.

    A copy of the module whose entropic side (``entropic_update``, ``entropic_potential``) is the
    spectral sums of :class:`SpectralEntropic`; its energetic side is the module's, which sees the
    data only through the teacher variance ``ρ`` it was derived with (``rho_bar``): the spectrum's
    ``ρ`` must equal it (a one-line error otherwise). ``SOURCE_HASH`` carries the spectrum's digest
    (cached results of another spectrum never match), ``ISOTROPIC_TOKENS`` and ``atom_eigenvalues``
    describe the spectrum (the replicon is refused, with its reason, unless ``Ω ∝ I``).
    A separable non-quadratic penalty goes through :func:`spectral_envelope_module`.
    """
    module = as_model(module)
    if module.ENTROPIC != "closed":
        raise ParameterError("spectrum", f"{module.MODEL}: its entropic side is a Moreau envelope: the spectral "
                                         "sums of a separable penalty are spectral_envelope_module's")
    module = _checked_glm(module, spectrum)
    return _on_spectrum(module, spectrum, SpectralEntropic(module, spectrum, terms))


class SpectralEnvelope:
    """``Ψ_w`` and ``x`` of a separable penalty on a spectrum with the canonical eigenbasis, as sums over the modes.

    With ``Ω = diag(γ)`` and ``r(w)`` separable in the canonical basis, the entropic problem
    splits into one scalar Moreau envelope per mode (docs/explanation/theory.md §3 with one atom of
    eigenvalue ``γ_k`` and the teacher Gaussian ``τ`` replaced by the mode's projection ``t_k``):

        ψ_k(x̂) = -E_ξ min_w [ r(w) + ½ γ_k V̂ w² - w (√(γ_k q̂) ξ + θ̂ t_k) ],

    i.e. the isotropic model's entropic bracket at the conjugates ``(γ_k q̂, γ_k V̂, m̂, θ̂)`` with
    ``τ = t_k`` held fixed. The module's own kernels (closed-form prox ``entropic_argmin``, bracket,
    envelope gradient) are evaluated on every mode at once; ``∂ψ_k/∂q̂ = γ_k ∂/∂q̂'`` and the same
    for ``V̂`` (chain rule). For l2, ``r = λw²/2``, the bracket's minimum gives
    ``ψ_k = ½ (γ_k q̂ + θ̂² t_k²)/(λ + γ_k V̂)``, :mod:`replica.registry.spectral`' term. The
    average over ``ξ`` is, per mode, the composite Gauss--Legendre rule of
    :class:`replica.numeric.kinks.EntropicKinkRule` in ``ξ`` with panel boundaries at the prox's kinks
    ``(Z_j - θ̂ t_k)/√(γ_k q̂)``: cost linear in the number of modes (every mode has as many nodes).
    """

    def __init__(self, module: GeneratedModel, spectrum: Spectrum, plan=None):
        from .kinks import PanelPlan, _base_grid
        from .quadrature import legendre_1d

        self.module, self.spectrum = module, spectrum
        self.plan = plan or PanelPlan()
        self._base = _base_grid(self.plan)
        self._x, self._w = legendre_1d(self.plan.order)
        fam = module.FAMILIES
        self._scaled = [fam["q"][0], fam["V"][0]]  # q̂, V̂ carry the mode's eigenvalue
        self._gamma = spectrum.eigenvalues
        self._t = spectrum.projections

    def _kinks(self, xh: tuple, p: np.ndarray, n_modes: int) -> np.ndarray:
        """The prox's kinks ``Z_j`` per mode, ``(n_kinks, n_modes)``."""
        n = int(self.module.N_ENTROPIC_KINKS)
        try:  # kinks that do not depend on the mode come out once
            return np.broadcast_to(np.asarray(self.module.entropic_kinks(xh, p), dtype=float).reshape(n, -1),
                                   (n, n_modes))
        except (ValueError, TypeError):  # kinks that move with gamma_k Vhat: one mode at a time
            cols = [np.broadcast_to(v, (n_modes,)) for v in xh]
            return np.array([np.asarray(self.module.entropic_kinks(tuple(c[k] for c in cols), p), dtype=float).ravel()
                             for k in range(n_modes)]).T

    def mode_terms(self, xhat: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``ψ_k`` ``(N,)`` and ``∂ψ_k/∂x̂`` ``(n_conjugates, N)`` of every mode (in blocks of
        :attr:`BLOCK` modes: the nodes of a block fit in a few tens of MB)."""
        parts = [self._block_terms(np.asarray(xhat, dtype=float), np.asarray(p, dtype=float), slice(i, i + self.BLOCK))
                 for i in range(0, self.spectrum.N, self.BLOCK)]
        return np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts], axis=1)

    #: modes per block of :meth:`mode_terms`
    BLOCK = 2048

    def _block_terms(self, xhat: np.ndarray, p: np.ndarray, block: slice) -> tuple[np.ndarray, np.ndarray]:
        mod, plan = self.module, self.plan
        g, tk = self._gamma[block], self._t[block]
        xh = tuple(v * g if i in self._scaled else v for i, v in enumerate(xhat))  # (γ q̂, γ V̂, m̂, θ̂)
        qh, thh = float(xhat[self._scaled[0]]), float(xhat[mod.FAMILIES["theta"][0]])
        with np.errstate(all="ignore"):
            s = np.sqrt(g * qh)                                          # the field's spread, per mode
            u_k = (self._kinks(xh, p, g.size) - thh * tk[None, :]) / s   # kinks in xi
            u_k = np.where(np.isfinite(u_k), u_k, -plan.cut).T
        b = np.sort(np.clip(np.concatenate([np.broadcast_to(self._base, (g.size, self._base.size)), u_k], axis=1),
                            -plan.cut, plan.cut), axis=1)
        if plan.split > 1:
            t = np.arange(plan.split) / plan.split
            b = np.concatenate([(b[:, :-1, None] + t * np.diff(b, axis=1)[:, :, None]).reshape(g.size, -1),
                                b[:, -1:]], axis=1)
        half, mid = 0.5 * np.diff(b, axis=1), 0.5 * (b[:, 1:] + b[:, :-1])  # empty panels weigh 0
        u = (mid[:, :, None] + half[:, :, None] * self._x).reshape(g.size, -1)
        wt = (half[:, :, None] * self._w).reshape(g.size, -1) * np.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)
        nodes = np.stack([u, np.broadcast_to(tk[:, None], u.shape)])  # (xi, tau = t_k)
        xh_nodes = tuple(np.asarray(v)[:, None] if np.ndim(v) else v for v in xh)
        with np.errstate(all="ignore"):
            w = mod.entropic_argmin(nodes, xh_nodes, p)
            value = np.asarray(mod.entropic_bracket(w, nodes, xh_nodes, p))
            G = np.asarray(mod.entropic_parameter_gradient(w, nodes, xh_nodes, p))
        psi = -np.sum(value * wt, axis=-1)
        grad = -np.sum(G * wt, axis=-1)
        grad[self._scaled] *= g
        return psi, grad

    def gradient(self, xhat: np.ndarray, p: np.ndarray) -> np.ndarray:
        """``∇_x̂ Ψ_w = (1/N) Σ_k ∇_x̂ ψ_k``."""
        return np.mean(self.mode_terms(xhat, p)[1], axis=1)

    def update(self, xhat: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The order parameters from the conjugates (the module's ``entropic_from_gradient``)."""
        xhat = np.asarray(xhat, dtype=float)
        vals = np.atleast_1d(self.module.entropic_validity(xhat, np.asarray(p, dtype=float)))
        bad = ~(vals > 0)
        if not np.any(xhat):  # alpha -> 0: no finite envelope of a penalty without curvature
            return np.full(len(self.module.ORDER_PARAMETERS), np.nan)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidStateError(self.module.ENTROPIC_VALIDITY[i], f"must be positive, got {vals[i]:.3e}",
                                    dict(zip(self.module.CONJUGATES, xhat.tolist())))
        return np.asarray(self.module.entropic_from_gradient(self.gradient(xhat, p), np.asarray(p, dtype=float)),
                          dtype=float)

    def potential(self, xhat: np.ndarray, p: np.ndarray) -> float:
        """``Ψ_w = (1/N) Σ_k ψ_k``."""
        return float(np.mean(self.mode_terms(xhat, p)[0]))


def spectral_envelope_module(module: GeneratedModel, spectrum: Spectrum, plan=None) -> GeneratedModel:
    """``module`` (a generated GLM module whose penalty is separable, one weight per row) on the data
    law of ``spectrum``: the entropic side is :class:`SpectralEnvelope`'s sums, the rest as in
    :func:`spectral_module`. Refused (one line naming ``spectrum``) where the penalty is not diagonal in
    the eigenbasis (``Ω`` not diagonal in the weights' basis: the spectrum is not ``canonical``), or the
    module has no closed-form scalar prox with located kinks. The entropic observables (e.g. LASSO's
    fraction of zero weights) are not reported on a spectrum; the replicon is refused."""
    module = as_model(module)
    if module.ENTROPIC != "envelope":
        raise ParameterError("spectrum", f"{module.MODEL}: its penalty is quadratic: use spectral_module")
    if not spectrum.canonical:
        raise ParameterError("spectrum", f"{spectrum.source}: {module.MODEL}'s penalty is separable in the weights' "
                                         "coordinates, which are not Omega's eigenbasis (Omega is not diagonal): "
                                         "the penalty is not diagonal in the modes")
    if not (module.ENTROPIC_KINK_RULE and module.ENTROPIC_ARGMIN and len(module.ENTROPIC_GAUSSIANS) == 2
            and module.ENTROPIC_DIM == 1):
        raise ParameterError("spectrum", f"{module.MODEL}: the spectral envelope needs one weight per mode with a "
                                         "closed-form prox and located kinks (a scalar penalty such as l1)")
    module = _checked_glm(module, spectrum)
    entropic = SpectralEnvelope(module, spectrum, plan)
    kept = tuple(o for o in module.OBSERVABLES if o not in module.ENTROPIC_OBSERVABLES)

    def atom_eigenvalues(p):
        """Refused: the replicon (which reads the atoms) is derived for a penalty averaged on one atom."""
        raise ParameterError("model", f"{module.MODEL}: the replicon of a non-quadratic penalty on a spectrum "
                                      "is not implemented")

    return _on_spectrum(module, spectrum, entropic, envelope=True, ENTROPIC_OBSERVABLES=(), OBSERVABLES=kept,
                        ISOTROPIC_TOKENS=False, atom_eigenvalues=atom_eigenvalues)


# ---------------------------------------------------------------------------- random features
@dataclass(frozen=True)
class GaussianEquivalence:
    """The coefficients of ``σ(g) ≈ κ₀ + κ₁ g + κ* ξ`` (``g, ξ ~ N(0, 1)`` independent): ``κ₀ = E σ(g)``,
    ``κ₁ = E g σ(g)``, ``κ*² = E σ(g)² − κ₀² − κ₁²`` and the quadrature's error estimate."""

    kappa0: float
    kappa1: float
    kappa_star: float
    error: float


def gaussian_equivalence(activation: Callable[[float], float], breakpoints: Sequence[float] = (0.0,)
                         ) -> GaussianEquivalence:
    """κ₀, κ₁, κ* of ``activation`` by adaptive Gauss-Kronrod quadrature (:func:`scipy.integrate.quad`)
    against the standard Gaussian, on the pieces between ``breakpoints`` (where the activation has a
    kink or a jump: the rule converges fast on each smooth piece)."""
    from scipy.integrate import quad

    cuts = sorted({float(b) for b in breakpoints})
    edges = [-math.inf, *cuts, math.inf]
    norm = 1.0 / math.sqrt(2.0 * math.pi)

    def expect(f: Callable[[float], float]) -> tuple[float, float]:
        total, err = 0.0, 0.0
        for a, b in zip(edges[:-1], edges[1:]):
            v, e = quad(lambda g: f(g) * norm * math.exp(-0.5 * g * g), a, b, epsabs=1e-14, epsrel=1e-13, limit=200)
            total, err = total + v, err + e
        return total, err

    k0, e0 = expect(lambda g: float(activation(g)))
    k1, e1 = expect(lambda g: g * float(activation(g)))
    m2, e2 = expect(lambda g: float(activation(g)) ** 2)
    ks2 = m2 - k0 * k0 - k1 * k1
    if ks2 < -1e-12:
        raise ParameterError("activation", f"E sigma^2 - kappa0^2 - kappa1^2 = {ks2:.3g} < 0 (quadrature failed)")
    return GaussianEquivalence(k0, k1, math.sqrt(max(ks2, 0.0)), e0 + e1 + e2)


def marchenko_pastur_quantiles(ratio: float, n: int) -> np.ndarray:
    """``n`` quantile midpoints ``F⁻¹((k + ½)/n)`` of the Marchenko-Pastur law of ratio ``c = ratio ≤ 1``
    (the eigenvalues of ``FFᵀ/d``, ``F`` a ``p x d`` standard Gaussian matrix, ``c = p/d``): density
    ``√((b − s)(s − a)) / (2π c s)`` on ``[a, b] = [(1 ∓ √c)²]``. The CDF is integrated in
    ``s = a + (b − a)(1 − cos u)/2``, which removes the square-root edges (and the ``1/√s`` of ``c = 1``)."""
    c = float(ratio)
    if not 0 < c <= 1:
        raise ParameterError("ratio", f"the Marchenko-Pastur quantiles need 0 < c <= 1, got {c}")
    a, b = (1 - math.sqrt(c)) ** 2, (1 + math.sqrt(c)) ** 2
    u = np.linspace(0.0, math.pi, 40001)
    s = a + (b - a) * (1 - np.cos(u)) / 2
    ds = (b - a) * np.sin(u) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.sqrt(np.clip((b - s) * (s - a), 0, None)) / (2 * math.pi * c * s) * ds
    if c == 1.0:  # a = 0: f ds has a finite limit at u = 0 that the grid evaluates as 0/0
        f[0] = f[1]
    f = np.nan_to_num(f)
    cdf = np.concatenate([[0.0], np.cumsum((f[1:] + f[:-1]) / 2 * np.diff(u))])
    cdf /= cdf[-1]
    return np.interp((np.arange(n) + 0.5) / n, cdf, s)


def random_features(coefficients: GaussianEquivalence, p: int, d: int, F: np.ndarray | None = None,
                    theta: np.ndarray | None = None) -> Spectrum:
    """The Gaussian covariate model of random features ``x = σ(F z/√d)``, ``z ~ N(0, I_d)``, teacher
    ``ν = θ·z/√d`` (``Ψ = I``, ``ρ = |θ|²/d``), student ``w·x/√p`` (Gaussian equivalence):
    ``Ω = κ₀² 11ᵀ + κ₁² FFᵀ/d + κ*² I_p`` and ``Φ = κ₁ Fᵀ/√d``.

    Without ``F`` (the ``p, d → ∞`` limit at fixed ``p/d``): the eigenvalues ``s`` of ``FFᵀ/d`` are the
    Marchenko-Pastur quantiles (``p − d`` zeros where ``p > d``), the teacher iid with ``ρ = 1``, whose
    projections enter only through their mean square ``t² = (p/d) κ₁² s`` (self-averaging); the
    ``κ₀`` spike carries no teacher projection and weighs ``O(1/p)`` in the sums, so it is left out.
    With ``F`` (``p x d``) and ``theta``: the exact matrices of that instance (``O(p³)``)."""
    k0, k1, ks = coefficients.kappa0, coefficients.kappa1, coefficients.kappa_star
    p, d = int(p), int(d)
    if p < 1 or d < 1:
        raise ParameterError("p", f"need p, d >= 1, got p={p}, d={d}")
    if F is not None:
        F = np.asarray(F, dtype=float)
        if F.shape != (p, d):
            raise ParameterError("F", f"must be p x d = {p} x {d}, got {F.shape}")
        if theta is None:
            raise ParameterError("theta", "an instance F needs its teacher weights theta (d of them)")
        omega = k0 * k0 * np.ones((p, p)) + k1 * k1 * (F @ F.T) / d + ks * ks * np.eye(p)
        return Spectrum.from_matrices(omega, theta, psi=np.eye(d), phi=k1 * F.T / math.sqrt(d),
                                      source=f"random features (p={p}, d={d}, one F)")
    if p <= d:
        s = marchenko_pastur_quantiles(p / d, p)
    else:
        s = np.concatenate([np.zeros(p - d), (p / d) * marchenko_pastur_quantiles(d / p, d)])
    g = k1 * k1 * s + ks * ks
    t = k1 * np.sqrt(s * p / d)
    return Spectrum(g, t, 1.0, None, f"random features (p/d={p / d:g}, Marchenko-Pastur, {p} modes)",
                    canonical=False)

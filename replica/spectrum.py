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
itself is derived with sympy from the model's declaration by :mod:`replica.spectral_modes`.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import math
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .errors import InvalidStateError, ParameterError

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
    draws its teacher from), else ``None``; ``source``: where it came from (for messages).
    """

    eigenvalues: np.ndarray
    projections: np.ndarray
    rho: float
    teacher: np.ndarray | None = None
    source: str = "spectrum"

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
                      phi: np.ndarray | None = None) -> "Spectrum":
        """The Gaussian covariate model from its matrices (student and teacher of the same
        dimension ``N``): ``Ω`` (student covariance), ``Ψ`` (teacher covariance, default ``Ω``),
        ``Φ = E[u xᵀ]`` (default ``Ω``) and ``θ``. ``Ω`` is diagonalised once (``O(N³)``); the
        misspecified case (``Ψ``, ``Φ`` other than ``Ω``) has no teacher for the simulator."""
        om = np.asarray(omega, dtype=float)
        th = np.asarray(theta, dtype=float).reshape(-1)
        N = th.size
        names = {"Omega": om, "Psi": om if psi is None else np.asarray(psi, dtype=float),
                 "Phi": om if phi is None else np.asarray(phi, dtype=float)}
        for name, M in names.items():
            if M.shape != (N, N):
                raise ParameterError(name, f"must be {N} x {N} (theta has {N} entries), got {M.shape}")
            if not np.all(np.isfinite(M)):
                raise ParameterError(name, "has entries that are not finite")
        for name in ("Omega", "Psi"):
            M = names[name]
            if not np.allclose(M, M.T, atol=1e-12 * max(1.0, np.abs(M).max())):
                raise ParameterError(name, "is not symmetric")
        g, E = np.linalg.eigh(om)
        if g.min() < -1e-10 * max(1.0, g.max()):
            raise ParameterError("Omega", f"is not positive semi-definite (eigenvalue {g.min():.3g})")
        g = np.clip(g, 0.0, None)
        t = E.T @ (names["Phi"].T @ th)
        rho = float(th @ names["Psi"] @ th) / N
        if not rho > 0:
            raise ParameterError("Psi", "the teacher field has no variance (theta^T Psi theta = 0)")
        well = psi is None and phi is None
        return cls(g, t, rho, E.T @ th if well else None, "matrices")

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
    """The per-mode entropic term as numeric functions of ``(xhat, p, gamma, t)`` (arrays over the
    modes): ``potential`` gives ``ψ``, ``gradient[j]`` its derivative by the ``j``-th conjugate
    (the module's ``CONJUGATES`` order). Built by :func:`replica.spectral_modes.mode_functions`."""

    conjugates: tuple[str, ...]
    parameters: tuple[str, ...]
    potential: Callable
    gradient: tuple[Callable, ...]


class SpectralEntropic:
    """``Ψ_w`` and ``x = -K^{-T} ∇_x̂ Ψ_w`` as sums over the modes of a :class:`Spectrum`.

    ``K = ∂²Ψ_t/∂x∂x̂`` is read off the module's (bilinear) trace potential at unit vectors, so
    the factors 2 of ``V``'s and ``q``'s conjugates come from the module, not from here.
    """

    def __init__(self, module: types.ModuleType, spectrum: Spectrum, terms: ModeFunctions):
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

    def _mean(self, f: Callable, xhat: np.ndarray, p: np.ndarray) -> float:
        v = f(*np.asarray(xhat, dtype=float), *np.asarray(p, dtype=float), self._gamma, self._t)
        v = np.asarray(v, dtype=float)
        return float(v) if v.ndim == 0 else float(np.mean(v))

    def gradient(self, xhat: np.ndarray, p: np.ndarray) -> np.ndarray:
        """``∇_x̂ Ψ_w = (1/N) Σ_k ∇_x̂ ψ(γ_k, t_k)``."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.array([self._mean(f, xhat, p) for f in self.terms.gradient])

    def update(self, xhat: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The order parameters from the conjugates: ``x = -K^{-T} ∇_x̂ Ψ_w``."""
        return -np.linalg.solve(self.coupling.T, self.gradient(xhat, p))

    def potential(self, xhat: np.ndarray, p: np.ndarray) -> float:
        """``Ψ_w = (1/N) Σ_k ψ(γ_k, t_k)``."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self._mean(self.terms.potential, xhat, p)


def spectral_module(module: types.ModuleType, spectrum: Spectrum, terms: ModeFunctions) -> types.ModuleType:
    """``module`` (a generated GLM module) on the data law of ``spectrum``.

    A copy of the module whose entropic side (``entropic_update``, ``entropic_potential``) is the
    spectral sums of :class:`SpectralEntropic`; its energetic side is the module's, which sees the
    data only through the teacher variance ``ρ`` it was derived with (``rho_bar``): the spectrum's
    ``ρ`` must equal it (a one-line error otherwise). ``SOURCE_HASH`` carries the spectrum's digest
    (cached results of another spectrum never match), ``ISOTROPIC_TOKENS`` and ``atom_eigenvalues``
    describe the spectrum (the replicon is refused, with its reason, unless ``Ω ∝ I``).
    """
    if getattr(module, "ENTROPIC", "closed") != "closed":
        raise ParameterError("spectrum", f"{module.MODEL}: a spectrum needs a quadratic (l2) penalty; "
                                         "this model's entropic side is a Moreau envelope")
    if getattr(module, "DISCRETE", ()):
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
    entropic = SpectralEntropic(module, spectrum, terms)
    tag = f"+spectrum-{spectrum.digest()[:16]}"

    def entropic_update(xhat, p):
        """Order parameters from conjugates: ``x = -K^{-T} ∇ Ψ_w``, spectral sums."""
        x = entropic.update(xhat, p)
        if not np.all(np.isfinite(x)):
            raise InvalidStateError("entropic_update", "the spectral sums are not finite (is lambda + gamma_k "
                                    "Vhat > 0 for every mode?)", dict(zip(module.CONJUGATES, np.asarray(xhat).tolist())))
        return x

    def entropic_potential(xhat, p):
        """``Ψ_w(x̂)``, spectral sum."""
        return entropic.potential(xhat, p)

    def atom_eigenvalues(p):
        """The eigenvalues of the spectral law, one row per mode."""
        return spectrum.eigenvalues.reshape(-1, 1)

    changes = dict(entropic_update=entropic_update, entropic_potential=entropic_potential,
                   atom_eigenvalues=atom_eigenvalues, ISOTROPIC_TOKENS=spectrum.isotropic)
    if hasattr(module, "replace") and dataclasses.is_dataclass(module):
        # a typed generated model (replica.generated_model): its cache key is read off its stamp
        stamp = getattr(module, "stamp", None)
        if stamp is not None and dataclasses.is_dataclass(stamp) and hasattr(stamp, "declaration"):
            changes["stamp"] = dataclasses.replace(stamp, declaration=f"{stamp.declaration}{tag}")
        out = module.replace(**changes)
    else:
        out = types.ModuleType(f"{module.__name__}__spectrum")
        out.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
        out.__doc__ = f"{module.MODEL} on the spectrum {spectrum.source} (N = {spectrum.N} modes)"
        out.__dict__.update(changes, SOURCE_HASH=f"{module.SOURCE_HASH}{tag}")
    out.SPECTRUM = spectrum
    out.SPECTRAL_ENTROPIC = entropic
    return out

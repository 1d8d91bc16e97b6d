"""Synthetic tokens and teachers for student/target models (docs/explanation/theory.md §1), numpy first.

Conventions (docs/explanation/theory.md §1):

* a sentence is ``x ∈ R^{L×d}`` with independent rows ``x_ℓ ~ N(0, Σ_ℓ)``; here the
  ``Σ_ℓ`` are diagonal (isotropic ``σ² I`` by default), which is the common
  eigenbasis assumed by the theory (its assumption 4.1);
* positional encodings ``P ∈ R^{L×d}`` with rows ``p_ℓ`` of norm O(1);
* a teacher ``Q* ∈ R^{d×r_t}`` with iid N(0, 1) entries, teacher fields
  ``h*_ℓ = Q*ᵀ x_ℓ / √d`` (the teacher sees ``x`` WITHOUT positional encodings) and labels
  ``y = T(h*) x``.

A *target* is any callable mapping teacher fields ``h*`` of shape ``(n, L, r_t)`` to the
row matrices ``T(h*)`` of shape ``(n, L, L)`` (an application's, e.g. the attention study's
mixed target in :mod:`numerics.applications.attention.targets`). Arrays are generated with numpy
(so that a seed gives the same data on every device) and converted to torch tensors on the
requested device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence, Union

import numpy as np

try:  # the tensors of the simulator; the numpy samplers (DataModel, seed_streams, make_teacher) also
    import torch  # serve GAMP's numpy backend, which runs without torch installed
except ImportError:
    torch = None  # type: ignore[assignment]

__all__ = [
    "TargetFn",
    "default_positional_encodings",
    "token_variances",
    "DataModel",
    "Teacher",
    "SeedStreams",
    "seed_streams",
    "make_teacher",
    "sample_dataset",
    "iter_batches",
]


ArrayLike = Union[float, Sequence[float], Sequence[Sequence[float]], np.ndarray]
#: A target ``T``: teacher fields ``h*`` (n, L, r_t) -> attention matrices (n, L, L).
TargetFn = Callable[["torch.Tensor"], "torch.Tensor"]


# --------------------------------------------------------------------------- data model
def _hadamard_row(k: int, d: int) -> np.ndarray:
    """Row ``k`` of the Sylvester–Hadamard matrix on columns ``0..d-1``: ``(−1)^{popcount(k & i)}``."""
    i = np.arange(d)
    bits = np.bitwise_and(i, k)
    parity = np.zeros(d, dtype=np.int64)
    while np.any(bits):
        parity ^= bits & 1
        bits = bits >> 1
    return 1.0 - 2.0 * parity


def default_positional_encodings(L: int, d: int) -> np.ndarray:
    """Default positional encodings ``P ∈ R^{L×d}``.

    * ``L = 2``: the paper's ``p_1 = −p_2 = 1_d/√d``.
    * other ``L``: ``p_ℓ = h_{ℓ−1}/√d`` with ``h_k`` the k-th row of the Sylvester–Hadamard
      matrix restricted to the first ``d`` columns (``h_k(i) = (−1)^{popcount(k & i)}``).
      So ``p_1 = 1_d/√d`` again, every ``p_ℓ`` has unit norm and ±1/√d entries, and the
      rows are exactly orthogonal when ``d`` is a multiple of ``2^⌈log2 L⌉`` (otherwise
      their overlaps are at most ``2^⌈log2 L⌉/d``).
    """
    if L < 1 or d < 1:
        raise ValueError(f"L and d must be >= 1 (got L={L}, d={d})")
    if L == 2:
        one = np.ones(d) / math.sqrt(d)
        return np.stack([one, -one])
    return np.stack([_hadamard_row(k, d) for k in range(L)]) / math.sqrt(d)


def token_variances(variances: ArrayLike, L: int, d: int) -> np.ndarray:
    """Diagonal token covariances as an (L, d) array: ``Σ_ℓ = diag(v[ℓ])``.

    Accepts a scalar ``σ²`` (all tokens isotropic), a length-L sequence whose entries are
    scalars or length-d vectors, or an (L, d) array.
    """
    if isinstance(variances, (int, float, np.number)) or (
        isinstance(variances, np.ndarray) and variances.ndim == 0
    ):
        v = np.full((L, d), float(variances))
    else:
        rows = list(variances)  # type: ignore[arg-type]
        if len(rows) != L:
            raise ValueError(f"variances must have one entry per token (L={L}, got {len(rows)})")
        v = np.stack([np.broadcast_to(np.asarray(r, dtype=float), (d,)) for r in rows])
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError("variances must be finite and non-negative")
    return v


@dataclass
class DataModel:
    """Token distribution and positional encodings: ``x_ℓ ~ N(0, diag(variances[ℓ]))``, ``P``.

    Build it with :meth:`create`. ``rho_bar[ℓ] = tr Σ_ℓ / d``.
    """

    d: int
    L: int
    variances: np.ndarray  # (L, d), diagonal of Σ_ℓ
    P: np.ndarray  # (L, d), rows p_ℓ

    @classmethod
    def create(
        cls,
        d: int,
        L: int = 2,
        sigma: float = 0.5,
        variances: ArrayLike | None = None,
        P: np.ndarray | Sequence[Sequence[float]] | None = None,
    ) -> "DataModel":
        """Data model with ``Σ_ℓ = σ² I`` (or the given ``variances``) and ``P`` (default:
        :func:`default_positional_encodings`)."""
        if int(d) != d or d <= 0:
            raise ValueError(f"d must be a positive integer (got {d})")
        if int(L) != L or L <= 0:
            raise ValueError(f"L must be a positive integer (got {L})")
        d, L = int(d), int(L)
        if variances is None:
            if not (sigma >= 0 and math.isfinite(sigma)):
                raise ValueError(f"sigma must be >= 0 (got {sigma})")
            variances = sigma**2
        v = token_variances(variances, L, d)
        if P is None:
            Pm = default_positional_encodings(L, d)
        else:
            Pm = np.asarray(P, dtype=float)
            if Pm.shape != (L, d):
                raise ValueError(f"P must have shape (L, d) = ({L}, {d}) (got {Pm.shape})")
        return cls(d=d, L=L, variances=v, P=Pm)

    @property
    def rho_bar(self) -> np.ndarray:
        """``ρ̄_ℓ = tr Σ_ℓ / d`` for each token, shape (L,)."""
        return self.variances.mean(axis=1)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``n`` sentences, an (n, L, d) float64 array."""
        return rng.standard_normal((n, self.L, self.d)) * np.sqrt(self.variances)


@dataclass
class Teacher:
    """Teacher ``Q* ∈ R^{d×r_t}`` and target ``T``; labels ``y = T(h*) x``, ``h*_ℓ = Q*ᵀx_ℓ/√d``."""

    Qstar: np.ndarray  # (d, r_t)
    target: TargetFn

    @property
    def d(self) -> int:
        return self.Qstar.shape[0]

    @property
    def r_t(self) -> int:
        return self.Qstar.shape[1]

    def fields(self, x: torch.Tensor) -> torch.Tensor:
        """Teacher fields ``h* = x Q*/√d`` (no positional encodings), shape (n, L, r_t)."""
        Qs = torch.as_tensor(self.Qstar, dtype=x.dtype, device=x.device)
        return x @ Qs / math.sqrt(self.d)

    def labels(self, x: torch.Tensor) -> torch.Tensor:
        """Labels ``y = T(h*) x``, shape (n, L, d)."""
        return self.target(self.fields(x)) @ x


# --------------------------------------------------------------------------- seeding
@dataclass
class SeedStreams:
    """Independent random streams derived from one integer seed.

    ``teacher`` draws ``Q*``, ``train`` the training sentences, ``test`` the test
    sentences, ``init`` the student initialisation. Because they are spawned from the
    same :class:`numpy.random.SeedSequence`, changing e.g. ``n_test`` or the init does
    not change the teacher or the training set of the same seed.
    """

    teacher: np.random.Generator
    train: np.random.Generator
    test: np.random.Generator
    init: np.random.Generator


def seed_streams(seed: int) -> SeedStreams:
    """The four independent generators of a run with integer ``seed``."""
    children = np.random.SeedSequence(int(seed)).spawn(4)
    return SeedStreams(*(np.random.default_rng(c) for c in children))


def make_teacher(
    d: int, r_t: int, target: TargetFn, rng: np.random.Generator, normalize: bool = False
) -> Teacher:
    """Teacher with iid N(0, 1) ``Q* ∈ R^{d×r_t}`` drawn from ``rng`` (the paper's choice).

    ``normalize=True`` rescales each column to norm ``√d``, so that ``ρ = σ²`` exactly for
    ``Σ = σ²I`` instead of up to an O(1/√d) fluctuation (±4.5% at d = 1000) — the theory
    uses ``ρ = σ²``, so this removes a finite-size seed-to-seed spread of ``θ, q, ε_g``.
    """
    Qs = rng.standard_normal((d, r_t))
    if normalize:
        Qs *= math.sqrt(d) / np.linalg.norm(Qs, axis=0)
    return Teacher(Qstar=Qs, target=target)


def sample_dataset(
    data: DataModel,
    teacher: Teacher,
    n: int,
    rng: np.random.Generator,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` sentences and their labels as tensors ``(X, Y)``, each of shape (n, L, d)."""
    X = torch.as_tensor(data.sample(n, rng), dtype=torch.float64 if dtype is None else dtype, device=device)
    return X, teacher.labels(X)


def iter_batches(
    data: DataModel,
    teacher: Teacher,
    n: int,
    rng: np.random.Generator,
    chunk: int = 4096,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield ``n`` fresh sentences in chunks of at most ``chunk`` (bounded memory)."""
    done = 0
    while done < n:
        k = min(chunk, n - done)
        yield sample_dataset(data, teacher, k, rng, device=device, dtype=dtype)
        done += k

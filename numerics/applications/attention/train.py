"""Empirical risk, training and test error (docs/explanation/theory.md §1 and §9).

The risk is exactly docs/explanation/theory.md §1's (a SUM over samples, not a mean):

    R(W) = Σ_μ (1/2d) ‖y^μ − f_W(x^μ)‖_F² + Σ_params r(param),

with ``n = round(α d)`` samples, and the reported training loss is ``e_t = R(Ŵ)/d``.

Learning-rate normalisation
---------------------------
Gradient descent runs on ``R`` itself (the paper's convention: PyTorch full-batch GD on the
sum risk, the ℓ2 term acting as weight decay), with ``lr = 0.15``. Why this is the right
scale: ``R`` depends on ``Q`` through the fields ``h = Qᵀ(x+p)/√d``, so
``∇_Q R = Σ_μ (x^μ+p)/√d ⊗ ∂ℓ/∂h``. Its coherent part is ``≈ α σ² E[∂²ℓ/∂h²] Q`` per
entry, i.e. the Hessian of ``R`` has O(1) eigenvalues, bounded by about
``λ + c σ² (1 + √α)²`` (Marchenko–Pastur edge of ``Σ_μ x xᵀ/d``) with ``c`` the curvature of
the field loss ``ℓ(h, h*)`` (small, ≲ 0.1 here). For α ≤ 2, σ = 0.5 that is ≪ 2/0.15, so
``lr = 0.15`` is stable and independent of ``d``; the slowest modes relax at rate
``≈ lr·λ`` (0.0015 per step), which is why 5000 steps are needed. Normalising by ``d``
(GD on ``e_t = R/d``) would divide every step by ``d`` — 1000× too slow at d = 1000 —
and normalising by ``n`` likewise. The fixed point does not depend on the normalisation,
only the path to it.

Convergence monitoring
----------------------
``grad_norm = ‖G‖_F/√d`` with ``G`` the (proximal) gradient mapping of ``R`` — the plain
gradient ``∇R`` for a smooth regulariser. Dividing by ``√d`` makes it the RMS over the
``d`` rows of ``W``, which is O(1) and d-independent. A run is ``converged`` when
``grad_norm ≤ tol_grad`` AND the relative change of ``R`` over the last ``check_every``
steps is ``≤ tol_loss``. Defaults ``tol_grad = 3e-5``, ``tol_loss = 1e-6``: the slowest
GD mode has curvature ≈ λ (ridge directions), so the per-row RMS distance to the fixed
point is ≈ ``grad_norm/λ`` = 3e-3 at λ = 0.01, which moves ``q, θ`` by ≲ 1% at the paper's
point — below the d = 1000 finite-size effects — and is what the paper's protocol (lr 0.15,
5000 steps) reaches there (grad_norm halves every ~500 steps from ~2e-2). A run that is not converged is still returned (field
``converged = False``) and a :class:`NonConvergenceWarning` is emitted.
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import torch
from torch import nn

from numerics.penalties import L2, ElasticNet, Regularizer, TheoryRegularizer  # noqa: F401  (re-exported)

__all__ = [
    "Regularizer",
    "TheoryRegularizer",
    "L2",
    "ElasticNet",
    "GramStats",
    "sample_losses",
    "data_risk",
    "penalty",
    "risk",
    "test_error",
    "TrainConfig",
    "TrainResult",
    "NonConvergenceWarning",
    "train",
    "fit_linear",
]


Regularizers = Mapping[str, Regularizer]


# --------------------------------------------------------------------------- risk
@dataclass
class GramStats:
    """Per-sample L×L statistics of a FIXED data set, for students ``f = S(x+P)·(x+P)``.

    With ``xp = x + P``: ``‖y − S xp‖_F² = ‖y‖² − 2⟨S, y xpᵀ⟩ + ⟨S xp xpᵀ, S⟩``, so once
    ``yy = ‖y‖²``, ``Gyp = y xpᵀ`` and ``Gpp = xp xpᵀ`` are stored, a training step only
    needs the fields ``h = xp W/√d`` — two passes over the data (forward and backward of
    one matmul) instead of about ten for the explicit ``(n, L, d)`` output. This is an
    exact rewriting of the same loss (checked against the direct path in the tests);
    in float64 the cancellation in the expansion costs ~2 of the 16 digits.
    """

    Xp: torch.Tensor  # (n, L, d)
    yy: torch.Tensor  # (n,)
    Gyp: torch.Tensor  # (n, L, L)
    Gpp: torch.Tensor  # (n, L, L)

    @classmethod
    @torch.no_grad()
    def build(cls, student: nn.Module, X: torch.Tensor, Y: torch.Tensor) -> "GramStats":
        Xp = student.encoded(X)  # type: ignore[operator]
        return cls(
            Xp=Xp,
            yy=(Y * Y).sum(dim=(-2, -1)),
            Gyp=Y @ Xp.transpose(-1, -2),
            Gpp=Xp @ Xp.transpose(-1, -2),
        )


def _has_gram_form(student: nn.Module) -> bool:
    """Students whose output is ``S(x+P)(x+P)`` (attention students) admit :class:`GramStats`."""
    return hasattr(student, "attention_encoded") and hasattr(student, "encoded")


def sample_losses(
    student: nn.Module,
    X: torch.Tensor,
    Y: torch.Tensor,
    stats: GramStats | None = None,
) -> torch.Tensor:
    """Per-sample losses ``(1/2d)‖y^μ − f(x^μ)‖_F²``, shape (n,). The one loss of the package:
    training risk, training loss and test error are all built from it, for every student.

    ``stats`` (optional, attention students only): precomputed :class:`GramStats` of
    ``(X, Y)``, giving the same values faster when the same data are used many times.
    """
    d = X.shape[-1]
    if stats is not None:
        S = student.attention_encoded(stats.Xp)  # type: ignore[operator]
        sq = stats.yy - 2.0 * (S * stats.Gyp).sum(dim=(-2, -1)) + ((S @ stats.Gpp) * S).sum(dim=(-2, -1))
        return sq / (2.0 * d)
    diff = Y - student(X)
    return (diff * diff).sum(dim=(-2, -1)) / (2.0 * d)


def data_risk(
    student: nn.Module, X: torch.Tensor, Y: torch.Tensor, stats: GramStats | None = None
) -> torch.Tensor:
    """Data part of the risk, ``Σ_μ (1/2d)‖y^μ − f(x^μ)‖_F²`` (a sum over samples)."""
    return sample_losses(student, X, Y, stats).sum()


def penalty(student: nn.Module, regs: Regularizers, smooth_only: bool = False) -> torch.Tensor:
    """``Σ_params r(param)`` for the parameters named in ``regs`` (others are unregularised)."""
    params = dict(student.named_parameters())
    unknown = set(regs) - set(params)
    if unknown:
        raise KeyError(f"regularizers given for unknown parameters {sorted(unknown)}")
    total = next(iter(params.values())).new_zeros(())
    for name, reg in regs.items():
        w = params[name]
        total = total + (reg.smooth(w) if smooth_only else reg(w))
    return total


def risk(student: nn.Module, X: torch.Tensor, Y: torch.Tensor, regs: Regularizers) -> torch.Tensor:
    """Empirical risk ``R = Σ_μ (1/2d)‖y^μ − f(x^μ)‖_F² + Σ r(param)`` (docs/explanation/theory.md §1)."""
    return data_risk(student, X, Y) + penalty(student, regs)


@torch.no_grad()
def test_error(
    student: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]
) -> tuple[float, float]:
    """Test error ``ε_g = E (1/2d)‖y − f(x)‖_F²`` over fresh batches, evaluated chunk by chunk.

    Returns ``(ε_g, standard error of the Monte-Carlo mean)``.
    """
    total, total_sq, count = 0.0, 0.0, 0
    for X, Y in batches:
        losses = sample_losses(student, X, Y).double()
        total += float(losses.sum())
        total_sq += float((losses * losses).sum())
        count += losses.numel()
    if count == 0:
        raise ValueError("test set is empty")
    mean = total / count
    var = max(total_sq / count - mean * mean, 0.0)
    se = math.sqrt(var / (count - 1)) if count > 1 else float("nan")
    return mean, se


# --------------------------------------------------------------------------- training
class NonConvergenceWarning(RuntimeWarning):
    """Emitted when training stops without meeting the convergence criteria."""


@dataclass
class TrainConfig:
    """Settings of :func:`train` (defaults: docs/explanation/theory.md §9, full-batch GD, lr 0.15, 5000 steps).

    ``tol_grad``: bound on ``grad_norm = ‖G‖_F/√d`` for ``converged``. ``tol_loss``: bound
    on the relative change of ``R`` over ``check_every`` steps. ``stop_grad``: stop before
    ``steps`` once converged AND ``grad_norm ≤ stop_grad`` (default 1e-7: further steps
    would not change any reported digit; 0 always runs all ``steps``, the paper's protocol).
    """

    lr: float = 0.15
    steps: int = 5000
    optimizer: str = "gd"
    tol_grad: float = 3e-5
    tol_loss: float = 1e-6
    check_every: int = 50
    stop_grad: float = 1e-7
    log_every: int = 0  # progress line to stderr every this many steps (0: never)

    def __post_init__(self) -> None:
        if self.optimizer not in ("gd", "adam"):
            raise ValueError(f"optimizer must be 'gd' or 'adam' (got {self.optimizer!r})")
        if not (self.lr > 0):
            raise ValueError(f"lr must be > 0 (got {self.lr})")
        if int(self.steps) != self.steps or self.steps < 0:
            raise ValueError(f"steps must be a non-negative integer (got {self.steps})")
        if self.check_every < 1:
            raise ValueError(f"check_every must be >= 1 (got {self.check_every})")


@dataclass
class TrainResult:
    """Outcome of :func:`train`.

    ``risk``: final ``R``; ``train_loss``: ``e_t = R/d``; ``grad_norm``: final
    ``‖G‖_F/√d``; ``rel_change``: last relative change of ``R`` over ``check_every``
    steps; ``history``: (step, R, grad_norm) at every check.
    """

    risk: float
    train_loss: float
    grad_norm: float
    rel_change: float
    converged: bool
    steps: int
    history: list[tuple[int, float, float]] = field(default_factory=list)


def _gradient_mapping(
    params: dict[str, nn.Parameter], regs: Regularizers, step: float
) -> float:
    """``‖G‖_F`` with ``G = (w − prox(w − step ∇))/step``, ``∇`` the smooth gradient in ``.grad``."""
    sq = 0.0
    for name, p in params.items():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        reg = regs.get(name)
        if reg is not None and reg.has_prox:
            g = (p - reg.prox(p - step * g, step)) / step
        sq += float((g * g).sum())
    return math.sqrt(sq)


def train(
    student: nn.Module,
    X: torch.Tensor,
    Y: torch.Tensor,
    regs: Regularizers,
    config: TrainConfig | None = None,
    progress: Callable[[str], None] | None = None,
    use_gram: bool = True,
) -> TrainResult:
    """Minimise ``R`` (docs/explanation/theory.md §1) over the parameters of ``student`` in place.

    Full-batch gradient descent (``torch.optim.SGD`` with plain ``lr``, no momentum) on
    ``R`` itself, or Adam; a regulariser with a non-smooth part is applied by its proximal
    map after each step (proximal GD). See the module docstring for the normalisation and
    the convergence criteria. ``progress`` receives a line every ``config.log_every``
    steps (default: stderr when ``log_every > 0``). ``use_gram``: use :class:`GramStats`
    for attention students (same risk, faster); False forces the direct path.
    """
    cfg = config or TrainConfig()
    params = dict(student.named_parameters())
    if any(r.has_prox for r in regs.values()) and cfg.optimizer != "gd":
        raise ValueError("a non-smooth regularizer needs optimizer='gd' (proximal GD)")
    d = X.shape[-1]
    sqrt_d = math.sqrt(d)
    if cfg.optimizer == "gd":
        opt: torch.optim.Optimizer = torch.optim.SGD(params.values(), lr=cfg.lr)
    else:
        opt = torch.optim.Adam(params.values(), lr=cfg.lr)
    log = progress or (lambda s: print(s, file=sys.stderr, flush=True))

    # Attention students: precompute the L×L Gram statistics once (exact, ~6x faster steps).
    stats = GramStats.build(student, X, Y) if (use_gram and _has_gram_form(student)) else None

    def smooth_risk() -> torch.Tensor:
        return data_risk(student, X, Y, stats) + penalty(student, regs, smooth_only=True)

    def objective() -> tuple[float, float]:
        """Forward + backward at the current point; returns (R incl. non-smooth part, ‖G‖/√d)."""
        opt.zero_grad(set_to_none=True)
        smooth = smooth_risk()
        smooth.backward()
        with torch.no_grad():
            nons = sum(
                (float(r.nonsmooth(params[k])) for k, r in regs.items() if r.has_prox), 0.0
            )
            gnorm = _gradient_mapping(params, regs, cfg.lr) / sqrt_d
        return float(smooth.detach()) + nons, gnorm

    history: list[tuple[int, float, float]] = []
    prev_R: float | None = None
    rel = float("inf")
    R, gnorm = float("nan"), float("nan")
    step = 0
    converged = False
    for step in range(cfg.steps + 1):
        check = step % cfg.check_every == 0 or step == cfg.steps
        if check:
            R, gnorm = objective()
            if prev_R is not None:
                rel = abs(R - prev_R) / max(abs(R), 1e-300)
            prev_R = R
            history.append((step, R, gnorm))
            if not (math.isfinite(R) and math.isfinite(gnorm)):
                break  # diverged: report as non-converged below
            converged = gnorm <= cfg.tol_grad and rel <= cfg.tol_loss
            if cfg.log_every and (step % cfg.log_every == 0 or step == cfg.steps):
                log(f"  step {step:6d}  e_t={R / d:.6e}  grad_norm={gnorm:.3e}  rel={rel:.2e}")
            if step == cfg.steps or (converged and gnorm <= cfg.stop_grad):
                break
        else:
            opt.zero_grad(set_to_none=True)
            smooth_risk().backward()
        opt.step()
        with torch.no_grad():
            for k, r in regs.items():
                if r.has_prox:
                    params[k].copy_(r.prox(params[k], cfg.lr))
    if not converged:
        warnings.warn(
            f"training did not converge after {step} steps: grad_norm={gnorm:.3e} "
            f"(tol {cfg.tol_grad:g}), relative loss change={rel:.2e} (tol {cfg.tol_loss:g})",
            NonConvergenceWarning,
            stacklevel=2,
        )
    return TrainResult(
        risk=R,
        train_loss=R / d,
        grad_norm=gnorm,
        rel_change=rel,
        converged=converged,
        steps=step,
        history=history,
    )


@torch.no_grad()
def fit_linear(X: torch.Tensor, Y: torch.Tensor, ridge: float = 1e-4) -> torch.Tensor:
    """Exact minimiser ``B̂`` of ``R(B) = Σ_μ (1/2d)‖y^μ − B x^μ‖_F² + (ridge/2)‖B‖_F²``.

    ``R`` is a quadratic in the L×L matrix ``B``, so instead of gradient descent we solve
    its normal equations ``B (G_xx + ridge·I) = G_yx`` with ``G_xx = Σ_μ x^μ x^μᵀ/d`` and
    ``G_yx = Σ_μ y^μ x^μᵀ/d`` (L×L Gram matrices; ``x`` without positional encodings).
    """
    if ridge < 0:
        raise ValueError(f"ridge must be >= 0 (got {ridge})")
    d = X.shape[-1]
    L = X.shape[-2]
    Gxx = torch.einsum("nld,nkd->lk", X, X) / d
    Gyx = torch.einsum("nld,nkd->lk", Y, X) / d
    M = Gxx + ridge * torch.eye(L, dtype=X.dtype, device=X.device)
    # B M = Gyx  <=>  M^T B^T = Gyx^T  (M is symmetric)
    return torch.linalg.solve(M, Gyx.T).T

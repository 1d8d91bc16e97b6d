"""Tied attention with a trainable low-rank value matrix (paper Appendix E.3, Fig. 13).

Student (same data, teacher and targets as :mod:`numerics.tokens` and :mod:`.targets`)::

    f(x) = S(h) (x + P) V,   V = I_d + U Wᵀ/√d,   U, W ∈ R^{d×r_v},   S(h) = softmax_row(h hᵀ),

with ``h = (x + P) Q/√d`` as in :class:`numerics.applications.attention.students.TiedAttention`, and the risk of
docs/explanation/theory.md §1 with ``λ/2 (‖Q‖² + ‖U‖² + ‖W‖²)``. ``Q, U, W`` are trained together by full-batch
gradient descent (:func:`numerics.applications.attention.train.train`).

Why ``I + U Wᵀ/√d``. The paper keeps the target ``y = T(h*) x ∈ R^{L×d}`` and says only that
the value matrix is low rank (its text lost the formula). A value matrix of rank ``r_v = O(1)``
alone cannot produce a ``d``-dimensional output, so the identity must stay; the ``1/√d``
(with O(1) entries of ``U, W``) is the largest scale at which the risk stays O(d): then
``(x+P) U Wᵀ/√d = a Wᵀ`` with fields ``a = (x+P)U/√d`` has rows of norm O(√d), like ``x``.
With ``1/d`` the correction would change the risk only at O(1/d). The consequences for the
theory are worked out in docs/explanation/value_matrix.md: at leading order in ``d`` the correction only
costs (``½ (WᵀW/d) ‖S a‖²`` per sample) and gains nothing (its overlap with ``y`` is
O(d^{-1/2})), so ``U Wᵀ → 0`` and the tied model's equations and transition line hold.

Protocol. ``Q`` starts at the informed (semantic, ``Q = Q*``) or positional (``Q = 1_d/√d``)
initialisation of docs/explanation/theory.md §9, ``U, W`` at iid ``N(0, 1)`` entries (``value_init = 1``: the
correction starts as large as the identity, ``‖V − I‖_F/‖I‖_F ≈ 1``, far from the tied
model). Full-batch GD at ``lr = 1.5`` until ``grad_norm ≤ 1e-6`` as in
:mod:`numerics.applications.attention.finite_size` (same minimum as lr 0.15, ten times sooner; at d = 200, α = 1.2
both give the same ``q, m, θ`` to 1e-6); ``value_init = 2`` makes lr 1.5 diverge (reported as
not converged).

GD transition. For each seed (same teacher and training set for both inits) the student is
trained from the semantic and from the positional initialisation of ``Q`` and the training
losses compared; :func:`gd_transition` finds the ``α`` where ``e_t,sem − e_t,pos`` changes
sign (linear fit through the α grid), per seed, for this student and for the tied one.
"""
from __future__ import annotations

import inspect
import math
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["make_value_student", "run_value_seed", "run_key", "run_pair", "gd_transition", "crossing"]


def make_value_student(Q0: np.ndarray, U0: np.ndarray, W0: np.ndarray, P: np.ndarray) -> "torch.nn.Module":
    """The student of the module docstring (float64, CPU; move it with ``.to``)."""
    import torch
    from torch import nn

    from .targets import softmax_row_gram
    from .students import TiedAttention

    class ValueAttention(nn.Module):
        """``f = S(h)(x+P)(I + U Wᵀ/√d)``. The attention is a :class:`TiedAttention` (parameter
        ``attn.Q``); the output is not of the form ``S(x+P)(x+P)``, so training takes the direct
        path of :func:`numerics.applications.attention.train.sample_losses` (no ``attention_encoded`` here)."""

        def __init__(self) -> None:
            super().__init__()
            self.attn = TiedAttention(Q0, P)
            d = self.attn.d
            U = torch.tensor(np.asarray(U0, dtype=float))
            W = torch.tensor(np.asarray(W0, dtype=float))
            if U.shape != W.shape or U.ndim != 2 or U.shape[0] != d:
                raise ValueError(f"U and W must both have shape (d, r_v), d={d} "
                                 f"(got {tuple(U.shape)} and {tuple(W.shape)})")
            self.U = nn.Parameter(U)
            self.W = nn.Parameter(W)

        @property
        def d(self) -> int:
            return self.attn.d

        def encoded(self, x: torch.Tensor) -> torch.Tensor:
            return self.attn.encoded(x)

        def attention(self, x: torch.Tensor) -> torch.Tensor:
            return self.attn.attention(x)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            xp = self.attn.encoded(x)
            S = softmax_row_gram(xp @ self.attn.Q / math.sqrt(self.d))
            a = xp @ self.U / math.sqrt(self.d)  # value fields (n, L, r_v)
            return S @ xp + (S @ a) @ self.W.T

        def weights(self) -> torch.Tensor:
            return self.attn.Q

        def sign_groups(self) -> list[list[int]]:
            return self.attn.sign_groups()

        def value_correction(self) -> float:
            """``‖V − I‖_F/‖I‖_F = ‖U Wᵀ‖_F/d``: size of the learnt correction relative to ``I``."""
            with torch.no_grad():
                return float(torch.linalg.matrix_norm(self.U @ self.W.T) / self.d)

    return ValueAttention()


def run_value_seed(seed: int, *, omega: float = 0.3, alpha: float = 1.0, d: int = 400, init: str = "semantic",
                   value: bool = True, value_rank: int = 1, value_init: float = 1.0, lam: float = 0.01,
                   lr: float = 1.5, steps: int = 20_000, tol_grad: float = 1e-5, stop_grad: float = 1e-6,
                   n_test: int = 10_000, device: "str | torch.device" = "cpu", log_every: int = 0,
                   **problem: Any) -> dict[str, Any]:
    """One run: tied attention (``value=False``) or the value-matrix student, from ``init``.

    ``U, W`` start iid ``value_init·N(0, 1)`` (drawn after ``Q``'s init from the seed's init
    stream), i.e. ``‖V − I‖_F/‖I‖_F ≈ value_init²``. ``problem``: further arguments of the
    data model (``sigma``, ``A``, ``normalize_teacher``, …) as in
    :func:`numerics.applications.attention.simulate.run_attention_seed`. Returns ``q, m, theta`` (of ``Q``, theory
    conventions), ``eps_g``, ``train_loss`` (``e_t = R/d``), ``converged``, ``steps``,
    ``value_correction`` at the start and the end, ``seconds``, ``cpu_seconds``.
    """
    from numerics.tokens import iter_batches
    from numerics.metrics import order_parameters
    from .students import TiedAttention, init_columns
    from numerics.simulate import resolve_device, torch_dtype
    from .simulate import _problem, validate
    from .train import L2, TrainConfig, test_error, train

    validate(omega=omega, alpha=alpha, d=d, lam=lam, init=init, steps=steps, lr=lr, n_test=n_test)
    if int(value_rank) != value_rank or value_rank < 1:
        raise ValueError(f"value_rank must be a positive integer (got {value_rank!r})")
    if not (math.isfinite(value_init) and value_init >= 0):
        raise ValueError(f"value_init must be >= 0 (got {value_init!r})")
    dev, dt = resolve_device(device), torch_dtype("float64")
    t0, c0 = time.perf_counter(), time.process_time()
    defaults = dict(L=None, sigma=0.5, variances=None, P=None, A=None, r_t=1, target=None,
                    normalize_teacher=False)
    defaults.update(problem)
    data, teacher, streams, n, X, Y = _problem(seed, omega=omega, alpha=alpha, d=d, device=dev, dtype=dt, **defaults)
    Q0 = init_columns(init, d, 1, teacher.Qstar, data.P, streams.init)
    regs = {"Q": L2(lam)}
    if value:
        U0 = value_init * streams.init.standard_normal((d, int(value_rank)))
        W0 = value_init * streams.init.standard_normal((d, int(value_rank)))
        student = make_value_student(Q0, U0, W0, data.P)
        regs = {"attn.Q": L2(lam), "U": L2(lam), "W": L2(lam)}
        corr0 = student.value_correction()
    else:
        student = TiedAttention(Q0, data.P)
        corr0 = 0.0
    student = student.to(device=dev, dtype=dt)
    cfg = TrainConfig(lr=lr, steps=steps, tol_grad=tol_grad, stop_grad=stop_grad, log_every=log_every)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = train(student, X, Y, regs, cfg)
    for w in caught:
        warnings.warn(f"seed {seed}, init {init}, alpha {alpha}, value {value}: {w.message}", w.category,
                      stacklevel=2)
    eps, eps_se = test_error(student, iter_batches(data, teacher, n_test, streams.test, device=dev, dtype=dt))
    Wq = student.weights().detach().cpu().double().numpy()
    ops = order_parameters(Wq, teacher.Qstar, data.variances, data.P, student.sign_groups())
    return {
        "seed": int(seed), "omega": float(omega), "alpha": float(alpha), "d": int(d), "init": init,
        "model": "value" if value else "tied", "n": n,
        "q": float(ops["q"]), "m": float(ops["m"]), "theta": float(ops["theta"]),
        "eps_g": eps, "eps_g_mc_se": eps_se, "train_loss": res.train_loss, "grad_norm": res.grad_norm,
        "converged": bool(res.converged), "steps": res.steps,
        "value_correction_init": corr0,
        "value_correction": student.value_correction() if value else 0.0,
        "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
    }


def crossing(alphas: Sequence[float], gaps: Sequence[float]) -> float | None:
    """Root of a straight line fitted (least squares) through ``(α, gap)``.

    ``None`` with fewer than two finite points, or when the root lies farther than one grid
    span outside the fitted ``α`` range (a flat fit; extrapolating further is no measurement).
    The gap ``e_t,sem − e_t,pos`` is smooth and nearly linear in α over the ±15 % windows used
    here (curvature well below the seed spread)."""
    a = np.asarray(alphas, dtype=float)
    g = np.asarray(gaps, dtype=float)
    ok = np.isfinite(a) & np.isfinite(g)
    if ok.sum() < 2 or np.ptp(a[ok]) == 0:
        return None
    slope, icpt = np.polyfit(a[ok], g[ok], 1)
    lo, hi = a[ok].min(), a[ok].max()
    span = hi - lo
    if slope == 0 or not (lo - span) * abs(slope) <= -icpt * np.sign(slope) <= (hi + span) * abs(slope):
        return None
    return float(-icpt / slope)


#: settings of :func:`run_value_seed` that identify a cached run, with their defaults (read from its signature)
KEY_DEFAULTS = {k: inspect.signature(run_value_seed).parameters[k].default for k in ("lr", "value_init", "lam")}


def run_key(*, model: str, omega: float, alpha: float, d: int, seed: int, init: str, **settings: Any) -> tuple:
    """Identity of one run in a cache: the model, the point, the seed, the init and the settings."""
    return (model, round(float(omega), 10), round(float(alpha), 10), int(d), int(seed), init,
            tuple(sorted((k, round(float(v), 12)) for k, v in settings.items())))


def run_pair(seed: int, alpha: float, *, omega: float, d: int, value: bool, cache: Any = None,
             log: Callable[[str], None] | None = None, **kw: Any) -> dict[str, Any]:
    """Semantic and positional runs of one seed at one ``α``; ``gap = e_t,sem − e_t,pos``.

    ``branches_ok`` is False when a run did not converge or ended on the other branch (the
    semantic run with ``θ < m``, the positional one with ``m < θ``): the gap would then not
    compare the two minima, and it is left out of the crossing fit. ``cache``: an object with
    ``get(key)``/``put(key, run)`` (keys from :func:`run_key`), to resume.
    """
    log = log or (lambda s: None)
    model = "value" if value else "tied"
    runs = {}
    # the settings that change the trained state (n_test only changes the noise of eps_g)
    settings = {k: float(kw.get(k, KEY_DEFAULTS[k])) for k in KEY_DEFAULTS}
    for init in ("semantic", "positional"):
        key = run_key(model=model, omega=omega, alpha=alpha, d=d, seed=seed, init=init, **settings)
        run = cache.get(key) if cache is not None else None
        if run is None:
            log(f"  [{model} omega={omega:g} alpha={alpha:.4g} d={d} seed={seed} {init}] ...")
            run = run_value_seed(seed, omega=omega, alpha=alpha, d=d, init=init, value=value, **kw)
            if cache is not None:
                cache.put(key, run)
        runs[init] = run
    sem, pos = runs["semantic"], runs["positional"]
    ok = bool(sem["converged"] and pos["converged"] and sem["theta"] > sem["m"] and pos["m"] > pos["theta"])
    return {"semantic": sem, "positional": pos, "gap": sem["train_loss"] - pos["train_loss"], "branches_ok": ok}


def gd_transition(omega: float, alphas: Sequence[float], seeds: Sequence[int], *, d: int = 400,
                  value: bool = True, log: Callable[[str], None] | None = None, cache: Any = None,
                  threads: int | None = 1, **kw: Any) -> dict[str, Any]:
    """GD transition per seed (root of the straight line through ``e_t,sem − e_t,pos`` over
    ``alphas``, see :func:`crossing`), mean and standard error over seeds, and the gaps.

    Keyword arguments go to :func:`run_value_seed` (``lr``, ``value_init``, ``lam``, …).
    ``threads``: torch CPU threads during the runs (default 1, see
    :func:`numerics.simulate.torch_threads`; None leaves torch's setting).
    """
    from numerics.simulate import torch_threads

    with torch_threads(threads):
        return _gd_transition(omega, alphas, seeds, d=d, value=value, log=log, cache=cache, **kw)


def _gd_transition(omega, alphas, seeds, *, d, value, log, cache, **kw) -> dict[str, Any]:
    per_seed, gaps_all = [], []
    for s in seeds:
        gaps, used = [], []
        for a in alphas:
            pair = run_pair(s, a, omega=omega, d=d, value=value, cache=cache, log=log, **kw)
            gaps_all.append({"seed": int(s), "alpha": float(a), "gap": pair["gap"], "branches_ok": pair["branches_ok"],
                             "value_correction": max(pair["semantic"]["value_correction"],
                                                     pair["positional"]["value_correction"])})
            if pair["branches_ok"]:
                gaps.append(pair["gap"])
                used.append(a)
        per_seed.append(crossing(used, gaps))
    vals = [v for v in per_seed if v is not None]
    mean = float(np.mean(vals)) if vals else None
    se = float(np.std(vals, ddof=1) / math.sqrt(len(vals))) if len(vals) > 1 else None
    return {"omega": float(omega), "model": "value" if value else "tied", "d": int(d), "alphas": [float(a) for a in alphas],
            "seeds": [int(s) for s in seeds], "alpha_c_per_seed": per_seed, "alpha_c": mean, "alpha_c_se": se,
            "gaps": gaps_all}

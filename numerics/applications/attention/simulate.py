"""Simulations of the attention model and of the linear baseline: Python API and CLI.

API (plain Python types in, plain floats / lists out)::

    run_attention(omega=0.3, alpha=2.0, d=1000, init="semantic", seeds=3) -> dict
    run_linear(omega=0.3, alpha=2.0, d=1000, seeds=3) -> dict
    sweep(omega=0.3, alphas=[0.5, 1, 2], d=1000, inits=["semantic", "positional"],
          seeds=3, out="points.csv") -> list[dict]

CLI::

    python -m numerics.simulate attention --omega 0.3 --alpha 2 --d 1000 --seeds 3 [--json]
    python -m numerics.simulate linear    --omega 0.3 --alpha 2 --d 1000
    python -m numerics.simulate sweep     --omega 0.3 --alphas 0.5,1,2 --d 1000 \\
        --inits semantic,positional --seeds 3 --out points.csv

Every seed ``s`` determines the teacher, the training set, the test set and the
initialisation (:func:`numerics.tokens.seed_streams`); ``seeds=K`` means seeds
``seed_start, …, seed_start+K−1``. Means and standard errors over seeds are reported for
every metric, together with the per-seed values.

torch is imported lazily so that argument checking (and ``--help``) is fast and the
error messages for bad input do not depend on torch.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from replica.applications.attention.paper import PAPER_A

from numerics.checks import INITS
from numerics.simulate import (CommandParser, check_memory, check_output_csv, floats, replicates, resolve_device,
                               seed_list, standard_error_reasons, stderr_log, strings, torch_dtype, torch_threads)
from numerics.applications.attention.simulate import floats, strings
from .validation import check_row_stochastic

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "run_attention",
    "run_attention_seed",
    "run_linear",
    "run_linear_seed",
    "sweep",
    "validate",
    "resolve_device",
    "CSV_COLUMNS",
    "main",
]

CSV_COLUMNS = (
    "model,omega,alpha,d,init,seeds,q,q_se,m,m_se,theta,theta_se,"
    "eps_g,eps_g_se,train_loss,train_loss_se,converged"
).split(",")
_DEFAULT_A = tuple(v for row in PAPER_A for v in row)  # the paper's A, row-major


# --------------------------------------------------------------------------- validation
def validate(
    *,
    omega: float | None = None,
    alpha: float | None = None,
    d: int | None = None,
    lam: float | None = None,
    ridge: float | None = None,
    init: str | None = None,
    A: Any = None,
    sigma: float | None = None,
    seeds: int | Sequence[int] | None = None,
    steps: int | None = None,
    lr: float | None = None,
    n_test: int | None = None,
    optimizer: str | None = None,
    l1: float | None = None,
    tol_grad: float | None = None,
    stop_grad: float | None = None,
    lam_K: float | None = None,
    untied: bool | None = None,
) -> np.ndarray | None:
    """Check the run parameters; raise ``ValueError`` naming the first bad one.

    Returns ``A`` as an L×L array when given (flat lists of L² numbers are accepted).
    """

    def bad(name: str, rule: str, value: Any) -> ValueError:
        return ValueError(f"{name} must be {rule} (got {value!r})")

    def finite(x: Any) -> bool:
        try:
            return math.isfinite(float(x))
        except (TypeError, ValueError):
            return False

    if d is not None and (not finite(d) or int(d) != float(d) or int(d) <= 0):
        raise bad("d", "a positive integer", d)
    if alpha is not None and (not finite(alpha) or float(alpha) <= 0):
        raise bad("alpha", "> 0", alpha)
    if omega is not None and (not finite(omega) or not 0.0 <= float(omega) <= 1.0):
        raise bad("omega", "in [0, 1]", omega)
    if lam is not None and (not finite(lam) or float(lam) < 0):
        raise bad("lam", ">= 0", lam)
    if ridge is not None and (not finite(ridge) or float(ridge) < 0):
        raise bad("ridge", ">= 0", ridge)
    if sigma is not None and (not finite(sigma) or float(sigma) < 0):
        raise bad("sigma", ">= 0", sigma)
    if init is not None and init not in INITS:
        raise bad("init", "one of " + ", ".join(INITS), init)
    if optimizer is not None and optimizer not in ("gd", "adam"):
        raise bad("optimizer", "'gd' or 'adam'", optimizer)
    if steps is not None and (not finite(steps) or int(steps) != float(steps) or int(steps) < 1):
        raise bad("steps", "a positive integer (0 steps train nothing)", steps)
    if l1 is not None and (not finite(l1) or float(l1) < 0):
        raise bad("l1", ">= 0", l1)
    if tol_grad is not None and (not finite(tol_grad) or float(tol_grad) < 0):
        raise bad("tol_grad", ">= 0 (the gradient-norm bound of convergence; 0: never converged by it)", tol_grad)
    if stop_grad is not None and (not finite(stop_grad) or float(stop_grad) < 0):
        raise bad("stop_grad", ">= 0", stop_grad)
    if lam_K is not None:
        if not finite(lam_K) or float(lam_K) < 0:
            raise bad("lam_K", ">= 0", lam_K)
        if untied is not None and not untied:
            raise ValueError(f"lam_K (--lam-k {lam_K:g}) is the key matrix's penalty of the untied model; "
                             "the tied model has no key matrix: add --untied (untied=True) or leave it out")
    if lr is not None and (not finite(lr) or float(lr) <= 0):
        raise bad("lr", "> 0", lr)
    if n_test is not None and (not finite(n_test) or int(n_test) != float(n_test) or int(n_test) < 2):
        raise bad("n_test", "an integer >= 2", n_test)
    if seeds is not None:
        if isinstance(seeds, (int, np.integer)):
            if seeds < 1:
                raise bad("seeds", ">= 1", seeds)
        elif len(list(seeds)) == 0:
            raise bad("seeds", "a non-empty list", seeds)
    if d is not None and alpha is not None and round(float(alpha) * int(d)) < 1:
        raise ValueError(f"alpha*d must give at least one sample (alpha={alpha}, d={d})")
    A = None if A is None else check_row_stochastic(A)
    if d is not None and alpha is not None:  # the training set fits (a float64 lower bound, on the host)
        check_memory(d=int(d), alpha=float(alpha), L=2 if A is None else A.shape[0])
    return A


def _problem(seed: int, *, omega, alpha, d, L, sigma, variances, P, A, r_t, target,
             normalize_teacher, device, dtype):
    """Data model, teacher, train set and the seed's streams, shared by both run kinds."""
    from numerics.tokens import DataModel, make_teacher, sample_dataset, seed_streams
    from .targets import MixedTarget

    streams = seed_streams(seed)
    A_arr = validate(A=A if A is not None else _DEFAULT_A)
    assert A_arr is not None
    if L is None:
        L = A_arr.shape[0] if P is None else np.asarray(P).shape[0]
    if A_arr.shape[0] != L and target is None:
        raise ValueError(f"A must be {L} x {L} for L={L} (got {A_arr.shape[0]} x {A_arr.shape[1]})")
    import torch

    check_memory(d=d, alpha=alpha, L=L, itemsize=torch.finfo(dtype).bits // 8, device=device)
    data = DataModel.create(d=d, L=L, sigma=sigma, variances=variances, P=P)
    tgt = target if target is not None else MixedTarget(omega, A_arr)
    teacher = make_teacher(d, r_t, tgt, streams.teacher, normalize=normalize_teacher)
    n = int(round(alpha * d))
    X, Y = sample_dataset(data, teacher, n, streams.train, device=device, dtype=dtype)
    return data, teacher, streams, n, X, Y


# --------------------------------------------------------------------------- attention
def run_attention_seed(
    seed: int,
    *,
    omega: float = 0.3,
    alpha: float = 2.0,
    d: int = 1000,
    init: str = "semantic",
    L: int | None = None,
    sigma: float = 0.5,
    variances: Any = None,
    P: Any = None,
    A: Any = None,
    target: Any = None,
    normalize_teacher: bool = True,
    lam: float = 0.01,
    l1: float = 0.0,
    init_scale: float = 1.0,
    r: int = 1,
    r_t: int = 1,
    untied: bool = False,
    lam_K: float | None = None,
    steps: int = 5000,
    lr: float = 0.15,
    optimizer: str = "gd",
    tol_grad: float = 3e-5,
    tol_loss: float = 1e-6,
    stop_grad: float = 1e-7,
    n_test: int = 10_000,
    test_chunk: int = 2048,
    device: "str | torch.device" = "cpu",
    dtype: "str | torch.dtype" = "float64",
    log_every: int = 0,
) -> dict[str, Any]:
    """One attention run (one seed): train from ``init``, then measure everything.

    Returns a dict with the token-1 order parameters ``q, m, theta, rho, rho_bar`` (floats
    for r = r_t = 1, nested lists otherwise; signs fixed as in :mod:`numerics.metrics`),
    ``per_token`` (all tokens), ``eps_g`` and its Monte-Carlo SE ``eps_g_mc_se``,
    ``train_loss`` (``e_t = R/d``), ``risk``, ``grad_norm``, ``converged``, ``steps``,
    ``n``, ``seed``, ``seconds``, and ``zero_fraction`` (the fraction of weights that are
    exactly 0, which the ℓ1 prox produces).

    ``init_scale`` multiplies the initial weights. With ``l1 > 0``, ``W = 0`` is a local
    minimum of the risk (the data term is quadratic in ``W`` there, the ℓ1 term linear), and
    the default positional init (``m = d^{-1/2}``) falls into its basin more often as ``d``
    grows (l1 = 0.003, α = 0.5: 4 of 10 seeds at d = 200, 10 of 10 at d = 800); pass e.g.
    ``init_scale = 0.2 √d`` to start at the finite overlap ``m = 0.2``.
    """
    import torch

    from numerics.tokens import iter_batches
    from numerics.metrics import order_parameters
    from .students import TiedAttention, UntiedAttention, init_columns
    from .train import L2, ElasticNet, TrainConfig, test_error, train

    validate(omega=omega, alpha=alpha, d=d, lam=lam, init=init, sigma=sigma, steps=steps,
             lr=lr, n_test=n_test, optimizer=optimizer, l1=l1, tol_grad=tol_grad, stop_grad=stop_grad,
             lam_K=lam_K, untied=untied)
    dev, dt = resolve_device(device), torch_dtype(dtype)
    t0 = time.perf_counter()
    data, teacher, streams, n, X, Y = _problem(
        seed, omega=omega, alpha=alpha, d=d, L=L, sigma=sigma, variances=variances, P=P,
        A=A, r_t=r_t, target=target, normalize_teacher=normalize_teacher, device=dev, dtype=dt,
    )
    reg_Q = ElasticNet(l1=l1, l2=lam) if l1 > 0 else L2(lam)
    if not (math.isfinite(init_scale) and init_scale > 0):
        raise ValueError(f"init_scale must be > 0 (got {init_scale!r})")
    Q0 = init_scale * init_columns(init, d, r, teacher.Qstar, data.P, streams.init)
    if untied:
        # semantic/positional: K starts equal to Q (both = Q*, resp. ∝ p_1); random: independent
        K0 = Q0.copy() if init != "random" else init_scale * init_columns(init, d, r, teacher.Qstar, data.P,
                                                                            streams.init)
        student: torch.nn.Module = UntiedAttention(Q0, K0, data.P)
        lk = lam if lam_K is None else lam_K
        regs = {"Q": reg_Q, "K": ElasticNet(l1=l1, l2=lk) if l1 > 0 else L2(lk)}
    else:
        student = TiedAttention(Q0, data.P)
        regs = {"Q": reg_Q}
    student = student.to(device=dev, dtype=dt)
    cfg = TrainConfig(lr=lr, steps=steps, optimizer=optimizer, tol_grad=tol_grad,
                      tol_loss=tol_loss, stop_grad=stop_grad, log_every=log_every)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = train(student, X, Y, regs, cfg, progress=stderr_log(True))
    for w in caught:  # re-emit with the run's identity attached
        warnings.warn(f"seed {seed}, init {init}, alpha {alpha}: {w.message}", w.category, stacklevel=2)
    del X, Y
    eps, eps_se = test_error(
        student, iter_batches(data, teacher, n_test, streams.test, chunk=test_chunk, device=dev, dtype=dt)
    )
    W = student.weights().detach().cpu().double().numpy()
    ops = order_parameters(W, teacher.Qstar, data.variances, data.P, student.sign_groups())

    def plain(v: Any) -> Any:
        return v.tolist() if isinstance(v, np.ndarray) else v

    out: dict[str, Any] = {k: plain(ops[k]) for k in ("q", "m", "theta", "rho", "rho_bar")}
    out["per_token"] = {k: plain(v) for k, v in ops["per_token"].items()}
    out.update(
        seed=int(seed), n=n, eps_g=eps, eps_g_mc_se=eps_se, train_loss=res.train_loss,
        zero_fraction=float(np.mean(W == 0.0)),
        risk=res.risk, grad_norm=res.grad_norm, rel_change=res.rel_change,
        converged=bool(res.converged), steps=res.steps, seconds=time.perf_counter() - t0,
    )
    return out


def _summarise(runs: list[dict[str, Any]], keys: Sequence[str], token_keys: Sequence[str]) -> dict[str, Any]:
    from numerics.metrics import aggregate, mean_se

    out = aggregate(runs, keys)
    out["per_seed"] = {k: [r[k] for r in runs] for k in ["seed", *keys, "converged", "steps"] if k in runs[0]}
    if token_keys:
        per_tok: dict[str, Any] = {}
        for k in token_keys:
            mean, se = mean_se([r["per_token"][k] for r in runs])
            per_tok[k] = np.asarray(mean).tolist()
            per_tok[k + "_se"] = np.asarray(se).tolist()
        out["per_token"] = per_tok
    out["converged"] = all(r["converged"] for r in runs)
    out["n_converged"] = sum(bool(r["converged"]) for r in runs)
    out["runs"] = runs
    return out


def run_attention(
    omega: float = 0.3,
    alpha: float = 2.0,
    d: int = 1000,
    init: str = "semantic",
    seeds: int | Sequence[int] = 1,
    *,
    seed_start: int = 0,
    device: "str | torch.device" = "cpu",
    verbose: bool = False,
    threads: int | None = 1,
    cache: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Train the attention student on ``seeds`` seeds; means, standard errors, per-seed values.

    Parameters (the notation of docs/explanation/theory.md): ``omega`` positionality ω, ``alpha`` = n/d, ``d``,
    ``init`` ∈ {semantic, positional, random}, ``seeds`` a count K (seeds
    ``seed_start..seed_start+K−1``) or an explicit list; keyword arguments of
    :func:`run_attention_seed` (``sigma=0.5, lam=0.01, A=[[.6,.4],[.4,.6]], r=1, r_t=1,
    untied=False, lam_K=None, l1=0, steps=5000, lr=0.15, optimizer='gd', n_test=10000,
    dtype='float64', P=None, variances=None, target=None, normalize_teacher=True, …``).
    ``threads``: torch CPU threads during the run (default 1, see :func:`torch_threads`; None
    leaves torch's). ``cache``: a :class:`replica.artifacts.cache.PointCache` holding every finished seed
    (:func:`numerics.simulate.replicates`), so that a rerun after an interrupt does not train it again.

    Returns ``{"model", "params", q, q_se, m, m_se, theta, theta_se, rho, rho_se,
    eps_g, eps_g_se, train_loss, train_loss_se, grad_norm, grad_norm_se, "converged"
    (all seeds), "n_converged", "per_seed" {metric: [..]}, "per_token" {metric: [L values],
    metric_se: [..]}, "runs" [per-seed dicts]}``. ``*_se`` is NaN for a single seed.
    """
    validate(omega=omega, alpha=alpha, d=d, init=init, seeds=seeds,
             lam=kwargs.get("lam"), A=kwargs.get("A"))
    resolve_device(device)
    log = stderr_log(verbose)
    listed = seed_list(seeds, seed_start)
    model = "untied" if kwargs.get("untied") else "attention"
    point = dict(omega=omega, alpha=alpha, d=d, init=init, device=str(device), threads=threads, **kwargs)
    with torch_threads(threads):
        runs = replicates(
            listed, lambda s: run_attention_seed(s, omega=omega, alpha=alpha, d=d, init=init, device=device, **kwargs),
            label=f"{model} omega={omega} alpha={alpha} d={d} init={init}", log=log, cache=cache,
            describe=lambda s: _seed_description("attention", s, point),
            report=lambda run: (f"    done in {run['seconds']:.1f}s: eps_g={run['eps_g']:.4e} "
                                f"e_t={run['train_loss']:.4e} rho={_fmt_val(run['rho'])} "
                                f"grad_norm={run['grad_norm']:.2e} steps={run['steps']} converged={run['converged']}"))
    out = {"model": model, "params": _params(omega, alpha, d, init, listed, device, kwargs, runs[0]["n"]),
           "teacher": _teacher(kwargs)}
    out.update(_summarise(runs, ["q", "m", "theta", "rho", "eps_g", "eps_g_mc_se", "train_loss", "grad_norm"],
                          ["q", "m", "theta", "rho"]))
    return out


def _teacher(kwargs: Mapping[str, Any]) -> str:
    """``normalized`` (columns of norm √d: ρ = σ² exactly, the default) or ``iid`` (N(0, 1) entries)."""
    return "normalized" if kwargs.get("normalize_teacher", True) else "iid"


#: the simulator's own code: a change to any of these files changes every cached seed's key
_SOURCES = ("numerics/tokens.py", "numerics/metrics.py", "numerics/penalties.py", "numerics/simulate.py",
            "numerics/applications/attention/targets.py", "numerics/applications/attention/students.py",
            "numerics/applications/attention/train.py", "numerics/applications/attention/simulate.py")
_SOURCE_HASH: list[str] = []


def _source_hash() -> str:
    if not _SOURCE_HASH:
        import hashlib

        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        h = hashlib.sha256()
        for name in _SOURCES:
            with open(os.path.join(root, *name.split("/")), "rb") as fh:
                h.update(fh.read())
        _SOURCE_HASH.append(h.hexdigest())
    return _SOURCE_HASH[0]


def _seed_description(kind: str, seed: int, point: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a seed's result depends on: the run kind, the seed, every setting and the simulator's
    source (None where a setting is a Python object that has no stable description: not cached)."""
    if any(point.get(k) is not None for k in ("target", "P", "variances")):
        return None
    settings = {k: (np.asarray(v).tolist() if isinstance(v, (np.ndarray, list, tuple)) else v)
                for k, v in point.items() if k not in ("log_every",)}
    settings.setdefault("normalize_teacher", True)
    return dict(kind=f"simulate-{kind}-seed", seed=int(seed), settings=settings, source=_source_hash())


def _params(omega, alpha, d, init, seed_list, device, kwargs, n) -> dict[str, Any]:
    p = {"omega": omega, "alpha": alpha, "d": d, "n": n, "init": init, "seeds": seed_list,
         "device": str(device)}
    for k, v in kwargs.items():
        if k in ("target",) or v is None:
            continue
        p[k] = np.asarray(v).tolist() if isinstance(v, (np.ndarray, list, tuple)) else v
    return p


# --------------------------------------------------------------------------- linear
def run_linear_seed(
    seed: int,
    *,
    omega: float = 0.3,
    alpha: float = 2.0,
    d: int = 1000,
    L: int | None = None,
    sigma: float = 0.5,
    variances: Any = None,
    P: Any = None,
    A: Any = None,
    target: Any = None,
    normalize_teacher: bool = True,
    r_t: int = 1,
    ridge: float = 1e-4,
    n_test: int = 10_000,
    test_chunk: int = 2048,
    device: "str | torch.device" = "cpu",
    dtype: "str | torch.dtype" = "float64",
) -> dict[str, Any]:
    """One linear-baseline run: exact ridge minimiser ``B̂`` (normal equations, see
    :func:`numerics.applications.attention.train.fit_linear`), its ``e_t = R(B̂)/d`` and ``ε_g``.

    Returns ``{"B", "eps_g", "eps_g_mc_se", "train_loss", "risk", "rho", "rho_bar", "n",
    "seed", "converged" (always True: exact solve), "steps" (0), "seconds"}``.
    """
    from numerics.tokens import iter_batches
    from .students import LinearBaseline
    from .train import L2, fit_linear, risk, test_error

    validate(omega=omega, alpha=alpha, d=d, ridge=ridge, sigma=sigma, n_test=n_test)
    dev, dt = resolve_device(device), torch_dtype(dtype)
    t0 = time.perf_counter()
    data, teacher, streams, n, X, Y = _problem(
        seed, omega=omega, alpha=alpha, d=d, L=L, sigma=sigma, variances=variances, P=P,
        A=A, r_t=r_t, target=target, normalize_teacher=normalize_teacher, device=dev, dtype=dt,
    )
    student = LinearBaseline(fit_linear(X, Y, ridge).cpu()).to(device=dev, dtype=dt)
    R = float(risk(student, X, Y, {"B": L2(ridge)}).detach())
    del X, Y
    eps, eps_se = test_error(
        student, iter_batches(data, teacher, n_test, streams.test, chunk=test_chunk, device=dev, dtype=dt)
    )
    Qs = teacher.Qstar
    rho = np.einsum("dt,ld,du->ltu", Qs, data.variances, Qs) / d
    return {
        "B": student.B.detach().cpu().double().numpy().tolist(),
        "eps_g": eps, "eps_g_mc_se": eps_se, "train_loss": R / d, "risk": R,
        "rho": [float(x[0, 0]) if x.size == 1 else x.tolist() for x in rho],
        "rho_bar": data.rho_bar.tolist(), "n": n, "seed": int(seed),
        "converged": True, "steps": 0, "seconds": time.perf_counter() - t0,
    }


def run_linear(
    omega: float = 0.3,
    alpha: float = 2.0,
    d: int = 1000,
    seeds: int | Sequence[int] = 1,
    *,
    seed_start: int = 0,
    device: "str | torch.device" = "cpu",
    verbose: bool = False,
    threads: int | None = 1,
    cache: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Linear baseline ``f_B(x) = Bx`` over ``seeds`` (same seeds → same teacher and data as
    :func:`run_attention`). Keyword arguments of :func:`run_linear_seed` (``ridge=1e-4`` …).

    Returns ``{"model": "linear", "params", eps_g, eps_g_se, train_loss, train_loss_se,
    B, B_se, "per_seed", "runs", "converged"}``.
    """
    validate(omega=omega, alpha=alpha, d=d, seeds=seeds, A=kwargs.get("A"))
    resolve_device(device)
    log = stderr_log(verbose)
    listed = seed_list(seeds, seed_start)
    point = dict(omega=omega, alpha=alpha, d=d, device=str(device), threads=threads, **kwargs)
    with torch_threads(threads):
        runs = replicates(listed, lambda s: run_linear_seed(s, omega=omega, alpha=alpha, d=d, device=device, **kwargs),
                          label=f"linear omega={omega} alpha={alpha} d={d}", log=log, cache=cache,
                          describe=lambda s: _seed_description("linear", s, point))
    out = {"model": "linear", "params": _params(omega, alpha, d, None, listed, device, kwargs, runs[0]["n"]),
           "teacher": _teacher(kwargs)}
    out.update(_summarise(runs, ["eps_g", "eps_g_mc_se", "train_loss", "rho", "B"], []))
    return out


# --------------------------------------------------------------------------- sweep
def _csv_key(row: Mapping[str, Any]) -> tuple:
    return (str(row["model"]), round(float(row["omega"]), 12), round(float(row["alpha"]), 12),
            int(row["d"]), str(row["init"]), int(row["seeds"]))


def _fmt(x: Any) -> str:
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        return repr(x)
    return str(x)


def sweep(
    omega: float,
    alphas: Sequence[float],
    d: int,
    inits: Sequence[str] = ("semantic", "positional"),
    seeds: int = 1,
    out: str | os.PathLike | None = None,
    models: Sequence[str] = ("attention",),
    *,
    device: "str | torch.device" = "cpu",
    verbose: bool = True,
    attention_kwargs: Mapping[str, Any] | None = None,
    linear_kwargs: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Run every (alpha, init) point and append one CSV row per point to ``out``.

    Rows already in ``out`` with the same key ``(model, omega, alpha, d, init, seeds)`` are
    skipped (resume). ``models`` may contain ``attention`` (one row per alpha and init;
    ``untied=True`` in ``attention_kwargs`` gives untied rows) and ``linear`` (one row per
    alpha, ``init = -``, order parameters NaN). Returns the rows written by this call.
    """
    validate(omega=omega, d=d, seeds=seeds)
    for a in alphas:
        validate(alpha=a)
    for i in inits:
        validate(init=i)
    for m in models:
        if m not in ("attention", "linear"):
            raise ValueError(f"models must be attention and/or linear (got {m!r})")
    if out is not None:
        check_output_csv(out)
    resolve_device(device)
    log = stderr_log(verbose)
    akw = dict(attention_kwargs or {})
    lkw = dict(linear_kwargs or {})
    done: set[tuple] = set()
    if out is not None and os.path.exists(out) and os.path.getsize(out) > 0:
        done = {_csv_key(r) for r in complete_rows(out, log)}
    jobs: list[tuple[str, float, str]] = []
    for a in alphas:
        for m in models:
            if m == "linear":
                jobs.append(("linear", float(a), "-"))
            else:
                for i in inits:
                    jobs.append(("untied" if akw.get("untied") else "attention", float(a), i))
    written: list[dict[str, Any]] = []
    for k, (model, a, init) in enumerate(jobs):
        base = {"model": model, "omega": float(omega), "alpha": a, "d": int(d), "init": init, "seeds": int(seeds)}
        if _csv_key(base) in done:
            log(f"[sweep {k + 1}/{len(jobs)}] {model} alpha={a} init={init}: already in {out}, skipped")
            continue
        log(f"[sweep {k + 1}/{len(jobs)}] {model} alpha={a} init={init} ...")
        if model == "linear":
            res = run_linear(omega, a, d, seeds, device=device, verbose=verbose, **lkw)
            row = dict(base, q=math.nan, q_se=math.nan, m=math.nan, m_se=math.nan,
                       theta=math.nan, theta_se=math.nan)
        else:
            res = run_attention(omega, a, d, init, seeds, device=device, verbose=verbose, **akw)
            row = dict(base, **{c: _scalar(res[c]) for c in ("q", "q_se", "m", "m_se", "theta", "theta_se")})
        row.update(eps_g=res["eps_g"], eps_g_se=res["eps_g_se"], train_loss=res["train_loss"],
                   train_loss_se=res["train_loss_se"], converged=bool(res["converged"]))
        if out is not None:
            _append_row(out, [_fmt(row[c]) for c in CSV_COLUMNS])
        done.add(_csv_key(base))
        written.append(row)
    return written


def _row_complete(row: Mapping[str, Any]) -> bool:
    """Every column present, the numbers numbers and ``converged`` a bool: a row cut short by an
    interrupted or failing writer (a truncated last line) is not."""
    if any(row.get(c) is None for c in CSV_COLUMNS) or None in row:
        return False
    try:
        _csv_key(row)
        for c in CSV_COLUMNS[6:-1]:
            float(row[c] or "nan")
    except (TypeError, ValueError):
        return False
    return row["converged"] in ("True", "False")


def complete_rows(out: str | os.PathLike, log: Callable[[str], None] = lambda s: None) -> list[dict[str, str]]:
    """The complete rows of the sweep CSV ``out``. A row that is not complete (a last line cut
    short: no newline at its end, missing or unparsable fields) is dropped from the file, which is
    rewritten atomically without it, so that its point is computed again instead of being kept as
    done. Raises ``ValueError`` naming ``out`` if the file has other columns."""
    with open(out, newline="", encoding="utf-8") as fh:
        text = fh.read()
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines = lines[:-1]  # the writer did not finish this line
    reader = csv.DictReader(lines)
    if reader.fieldnames != CSV_COLUMNS:
        raise ValueError(f"out: {out} exists with other columns {reader.fieldnames}")
    rows = list(reader)
    good = [r for r in rows if _row_complete(r)]
    dropped = len(rows) - len(good) + (len(text.splitlines()) - len(lines))
    if dropped:
        from replica.artifacts.outputs import atomic_write

        log(f"[sweep] {out}: {dropped} incomplete row(s) dropped (an interrupted write); their points run again")
        with atomic_write(out, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, CSV_COLUMNS)
            w.writeheader()
            w.writerows(good)
    return good


def _append_row(out: str | os.PathLike, values: Sequence[str]) -> None:
    """Add one row to the CSV ``out`` (header first if new), atomically: the file is rewritten
    to a temporary file and moved into place, so an interrupted run leaves every finished row
    and never a half-written one."""
    from replica.artifacts.outputs import atomic_write

    old = ""
    if os.path.exists(out) and os.path.getsize(out) > 0:
        with open(out, newline="", encoding="utf-8") as fh:
            old = fh.read()
        if not old.endswith("\n"):
            old += "\n"
    with atomic_write(out, "w", newline="", encoding="utf-8") as fh:
        fh.write(old)
        w = csv.writer(fh)
        if not old:
            w.writerow(CSV_COLUMNS)
        w.writerow(values)


def _scalar(v: Any) -> float:
    """Token-1 scalar for CSV: the value for rank 1, the (0, 0) entry otherwise."""
    a = np.asarray(v, dtype=float)
    return float(a.reshape(-1)[0])


# --------------------------------------------------------------------------- CLI
def _common(p: argparse.ArgumentParser, linear: bool = False) -> None:
    p.add_argument("--omega", type=float, default=0.3, help="positionality ω of the target, in [0, 1]")
    p.add_argument("--d", type=int, default=1000, help="dimension d")
    p.add_argument("--sigma", type=float, default=0.5, help="token std σ (Σ_ℓ = σ² I)")
    p.add_argument("--A", type=floats, default=list(_DEFAULT_A), metavar="a11,a12,...",
                   help="row-stochastic L×L matrix A, row-major (default 0.6,0.4,0.4,0.6)")
    p.add_argument("--rt", type=int, default=1, help="teacher rank r_t")
    p.add_argument("--iid-teacher", action="store_true",
                   help="draw Q* with iid N(0,1) entries as the paper (ρ = σ² only up to O(d^-1/2): about ±4.5%% "
                        "per seed at d = 1000); default: columns rescaled to norm √d, ρ = σ² exactly as the theory")
    p.add_argument("--normalize-teacher", action="store_true",
                   help="the default teacher (columns of norm √d); accepted so that older command lines still run")
    p.add_argument("--seeds", type=int, default=1, help="number of seeds K")
    p.add_argument("--seed-start", type=int, default=0, help="first seed")
    p.add_argument("--n-test", type=int, default=50_000, help="test sentences (evaluated in chunks)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:K or auto")
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: faster for these small per-step ops)")
    p.add_argument("--cache", metavar="DIR", default=None,
                   help="where finished seeds are kept, so that a rerun after an interrupt does not train them "
                        "again (default $REPLICA_CACHE, else the user cache directory of replica)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor keep finished seeds")
    if linear:
        p.add_argument("--ridge", type=float, default=1e-4, help="ridge of the linear baseline")


def _attention_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lam", type=float, default=0.01, help="ℓ2 regularisation λ")
    p.add_argument("--l1", type=float, default=0.0, help="ℓ1 strength (elastic net via proximal GD)")
    p.add_argument("--r", type=int, default=1, help="student rank r")
    p.add_argument("--untied", action="store_true", help="untied key/query W = [Q K]")
    p.add_argument("--lam-k", type=float, default=None, help="λ_K of the key matrix (untied; default λ)")
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--lr", type=float, default=0.15)
    p.add_argument("--optimizer", choices=["gd", "adam"], default="gd")
    p.add_argument("--tol-grad", type=float, default=3e-5, help="convergence: ‖∇R‖_F/√d bound")
    p.add_argument("--stop-grad", type=float, default=1e-7,
                   help="stop before --steps once grad_norm <= this (0: always run all steps)")
    p.add_argument("--log-every", type=int, default=0, help="training progress every N steps")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m numerics.simulate", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    pa = sub.add_parser("attention", help="train the attention student")
    pa.add_argument("--alpha", type=float, default=2.0, help="sample complexity α = n/d")
    pa.add_argument("--init", default="semantic", help="semantic, positional or random")
    _common(pa)
    _attention_opts(pa)
    pa.add_argument("--json", action="store_true", help="print the full result as JSON")
    pl = sub.add_parser("linear", help="the linear baseline f_B(x) = Bx")
    pl.add_argument("--alpha", type=float, default=2.0)
    _common(pl, linear=True)
    pl.add_argument("--json", action="store_true")
    ps = sub.add_parser("sweep", help="CSV rows over alphas x inits (resumable)")
    ps.add_argument("--alphas", type=floats, required=True, help="comma-separated α values")
    ps.add_argument("--inits", type=strings, default=["semantic", "positional"])
    ps.add_argument("--models", type=strings, default=["attention"], help="attention and/or linear")
    ps.add_argument("--out", required=True, help="CSV file (appended to; existing rows skipped)")
    _common(ps, linear=True)
    _attention_opts(ps)
    return parser


def _fmt_val(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.6g}"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt_val(x) for x in v) + "]"
    return str(v)


def _table(res: Mapping[str, Any], keys: Sequence[str]) -> str:
    p = res["params"]
    head = f"{res['model']}  omega={p['omega']} alpha={p['alpha']} d={p['d']} n={p['n']}"
    if p.get("init"):
        head += f" init={p['init']}"
    head += f"  seeds={len(p['seeds'])}"
    lines = [head, f"{'metric':<12} {'mean':>16} {'se':>16}"]
    for k in keys:
        lines.append(f"{k:<12} {_fmt_val(res[k]):>16} {_fmt_val(res[k + '_se']):>16}")
    lines.append(f"converged: {res['n_converged']}/{len(p['seeds'])}")
    if "grad_norm" in res["per_seed"]:
        lines.append("grad_norm per seed: " + ", ".join(f"{g:.2e}" for g in res["per_seed"]["grad_norm"])
                     + "   steps: " + ", ".join(str(s) for s in res["per_seed"]["steps"]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit code (2 for bad input, 130/143 when interrupted)."""
    from numerics.checks import run_cli

    return run_cli(build_parser(), _run, argv)  # SIGTERM ends like Ctrl-C: one line, no traceback


def _run(args: argparse.Namespace, prog: str) -> int:
    cache = None
    try:
        common = dict(omega=args.omega, d=args.d, seeds=args.seeds)
        if args.command in ("attention", "sweep"):
            validate(lam=args.lam, steps=args.steps, lr=args.lr, l1=args.l1, tol_grad=args.tol_grad,
                     stop_grad=args.stop_grad, lam_K=args.lam_k, untied=args.untied)
            if args.r < 1 or args.rt < 1:
                raise ValueError(f"r and rt must be >= 1 (got r={args.r}, rt={args.rt})")
        if args.command == "attention":
            validate(alpha=args.alpha, init=args.init, **common)
        elif args.command == "linear":
            validate(alpha=args.alpha, ridge=args.ridge, **common)
        else:
            validate(**common)
            for a in args.alphas:
                validate(alpha=a, d=args.d)
            for i in args.inits:
                validate(init=i)
        A = validate(A=args.A, sigma=args.sigma, n_test=args.n_test)
        alphas = args.alphas if args.command == "sweep" else [args.alpha]
        if args.command == "sweep":
            check_output_csv(args.out)
        device = resolve_device(args.device) if str(args.device).startswith("cuda") else "cpu"
        check_memory(d=args.d, alpha=max(alphas), L=A.shape[0], itemsize=4 if args.dtype == "float32" else 8,
                     device=device)
        resolve_device(args.device)
        if args.threads < 1:
            raise ValueError(f"threads must be >= 1 (got {args.threads})")
        if args.iid_teacher and args.normalize_teacher:
            raise ValueError("--iid-teacher and --normalize-teacher contradict each other; give one "
                             "(the normalized teacher is the default)")
        from replica.artifacts.cache import cache_from_flags

        cache = cache_from_flags(args.cache, args.no_cache)
        shared = dict(sigma=args.sigma, A=A, r_t=args.rt, n_test=args.n_test, dtype=args.dtype,
                      threads=args.threads, normalize_teacher=not args.iid_teacher, cache=cache)
        att = dict(shared, lam=args.lam, l1=args.l1, r=args.r, untied=args.untied, lam_K=args.lam_k,
                   steps=args.steps, lr=args.lr, optimizer=args.optimizer, tol_grad=args.tol_grad,
                   stop_grad=args.stop_grad,
                   log_every=args.log_every) if args.command != "linear" else {}
        verbose = not args.quiet
        if args.command == "attention":
            res = run_attention(args.omega, args.alpha, args.d, args.init, args.seeds,
                                seed_start=args.seed_start, device=args.device, verbose=verbose, **att)
            keys = ["q", "m", "theta", "rho", "eps_g", "eps_g_mc_se", "train_loss", "grad_norm"]
        elif args.command == "linear":
            res = run_linear(args.omega, args.alpha, args.d, args.seeds, seed_start=args.seed_start,
                             device=args.device, verbose=verbose, ridge=args.ridge, **shared)
            keys = ["eps_g", "eps_g_mc_se", "train_loss", "rho", "B"]
        else:
            rows = sweep(args.omega, args.alphas, args.d, args.inits, args.seeds, args.out,
                         args.models, device=args.device, verbose=verbose,
                         attention_kwargs=dict(att, seed_start=args.seed_start),
                         linear_kwargs=dict(shared, ridge=args.ridge, seed_start=args.seed_start))
            print(f"{len(rows)} row(s) written to {args.out}")
            return 0
    except ValueError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: one line; finished seeds are in the cache
        from replica.runtime.workers import exit_status, interrupt_message

        kept = cache is not None and cache.enabled
        msg = interrupt_message(prog, e)
        where = [f"finished seeds are cached in {cache.root}"] if kept else []
        if args.command == "sweep":
            where.insert(0, f"finished rows are in {args.out}")
        if where:
            msg = msg.replace("rerun to resume", f"rerun to resume ({'; '.join(where)})")
        else:
            msg = msg.replace("rerun to resume", "nothing was kept (--no-cache): a rerun starts again")
        print(msg, file=sys.stderr)
        import signal  # said and decided: a second signal while exiting changes nothing (no traceback, same status)

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        return exit_status(e)
    if args.json:
        from replica.artifacts import jsonio

        print(jsonio.dumps(res, standard_error_reasons(res), indent=1))
    else:
        print(_table(res, keys))
    if not res["converged"]:
        print(f"{prog}: warning: {len(res['runs']) - res['n_converged']} run(s) did not converge "
              "(see grad_norm); results reported anyway", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Token clusters (paper Appendix C.10, docs/explanation/theory.md §8): Gaussian-mixture tokens with correlated labels.

Data model: token ``ℓ`` of a sentence is drawn from cluster ``c_ℓ``,

    x_ℓ | c_ℓ = c ~ N(μ_{ℓc}, diag(v_{ℓc})),       (c_1, …, c_L) ~ P   (a joint law),

with cluster means ``μ_{ℓc} = a_{ℓc} u`` along one unit direction ``u`` orthogonal to the
encodings (a Sylvester–Hadamard row ``/√d``, entries ±1/√d, half of each sign — the direction
:meth:`replica.symbolic.data.TokenStatistics.mixture` assumes), or any given ``(L, K, d)`` means. The
teacher, target, students, risk and training are those of :mod:`numerics.simulate`;
:class:`ClusterDataModel` only replaces the sampler (it has the ``sample(n, rng)`` and ``P``
of :class:`numerics.data.DataModel`, so :func:`numerics.data.iter_batches` and
:func:`numerics.train.train` use it unchanged).

Order parameters are reported per *slot* ``s = (ℓ, c)`` (labels ``1a, 1b, 2a, …`` as in the
theory): ``q_s = WᵀΣ_sW/d``, ``m_s = Wᵀ(μ_s + p_ℓ)/√d``, ``θ_s = WᵀΣ_sQ*/d``, with the sign
convention of :mod:`numerics.metrics` applied to slot ``1a`` (the theory's ``_fix_signs``).

Teacher: ``center_teacher=True`` (default) removes from ``Q*`` its components along the mean
directions and rescales the columns to norm ``√d``: the theory takes ``Q*ᵀμ_s/√d → 0`` and
``ρ_s = σ_s²`` exactly, which an iid teacher only meets up to O(d^{-1/2}) per seed.

API::

    run_clusters(omega=0.3, alpha=2.0, d=1000, init="semantic", seeds=4) -> dict
    python -m numerics.clusters --alpha 2 --d 1000 --init semantic --seeds 4 [--json]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["ClusterDataModel", "mean_direction", "DEFAULT_SLOTS", "DEFAULT_LABELS", "slot_order_parameters",
           "run_clusters_seed", "run_clusters", "observables", "theory", "study", "summarise", "tolerance",
           "main"]

LETTERS = "abcdefghijklmnopqrstuvwxyz"
#: The defaults of ``derivations/attention_clusters.py``: (sigma, mean amplitude) per slot.
DEFAULT_SLOTS: dict[str, tuple[float, float]] = {"1a": (0.5, 0.8), "1b": (0.35, -0.4),
                                                 "2a": (0.5, 0.4), "2b": (0.35, -0.8)}


def DEFAULT_LABELS(p_same: float = 0.8) -> dict[tuple[int, ...], float]:
    """``P(c_1 = c_2) = p_same`` with uniform marginals (the declaration's label law)."""
    return {(0, 0): p_same / 2, (1, 1): p_same / 2, (0, 1): (1 - p_same) / 2, (1, 0): (1 - p_same) / 2}


def mean_direction(L: int, d: int) -> np.ndarray:
    """Unit ``u ⊥ p_1, …, p_L`` with entries ±1/√d: Hadamard row ``2^⌈log2 L⌉`` (for L = 2 the
    pattern ``++−−++−−…``), orthogonal to the default encodings when ``d`` is a multiple of
    ``2^(⌈log2 L⌉+1)``."""
    from .data import _hadamard_row

    k = 1 << max(0, math.ceil(math.log2(max(L, 1))))
    return _hadamard_row(k, d) / math.sqrt(d)


@dataclass
class ClusterDataModel:
    """Mixture tokens: ``variances`` (S, d) and ``means`` (S, d) per slot, slots token-major;
    ``clusters`` K_ℓ per token; ``configs`` (C, L) label configurations with ``probs`` (C,)."""

    d: int
    L: int
    clusters: tuple[int, ...]
    variances: np.ndarray
    means: np.ndarray
    P: np.ndarray
    configs: np.ndarray
    probs: np.ndarray

    @classmethod
    def create(cls, d: int, sigmas: Sequence[Sequence[float]] | None = None,
               amplitudes: Sequence[Sequence[float]] | None = None,
               labels: Mapping[tuple[int, ...], float] | None = None,
               P: np.ndarray | None = None, means: np.ndarray | None = None) -> "ClusterDataModel":
        """``sigmas[ℓ][c]``: std of slot (ℓ, c) (isotropic); ``amplitudes[ℓ][c]``: ``μ_{ℓc} = a u``
        (:func:`mean_direction`), or ``means`` (L, K, d) directly; ``labels``: joint law
        ``{(c_1, …, c_L): prob}`` (default :data:`DEFAULT_LABELS`); ``P`` the encodings
        (default :func:`numerics.data.default_positional_encodings`). Defaults: the declaration."""
        from .data import default_positional_encodings

        if int(d) != d or d <= 0:
            raise ValueError(f"d must be a positive integer (got {d})")
        d = int(d)
        if sigmas is None:
            sigmas = [[DEFAULT_SLOTS[f"{l}{c}"][0] for c in "ab"] for l in (1, 2)]
            if amplitudes is None and means is None:
                amplitudes = [[DEFAULT_SLOTS[f"{l}{c}"][1] for c in "ab"] for l in (1, 2)]
        L = len(sigmas)
        clusters = tuple(len(s) for s in sigmas)
        if L < 1 or min(clusters) < 1:
            raise ValueError("sigmas needs at least one cluster per token")
        sig = np.array([float(s) for row in sigmas for s in row])
        if not np.all(np.isfinite(sig)) or np.any(sig < 0):
            raise ValueError("sigmas must be finite and >= 0")
        Pm = default_positional_encodings(L, d) if P is None else np.asarray(P, dtype=float)
        if Pm.shape != (L, d):
            raise ValueError(f"P must have shape (L, d) = ({L}, {d}) (got {Pm.shape})")
        S = sum(clusters)
        if means is not None:
            mu = np.concatenate([np.asarray(means[l][:clusters[l]], dtype=float) for l in range(L)])
        else:
            amp = np.zeros(S) if amplitudes is None else np.array([float(a) for row in amplitudes for a in row])
            if amp.size != S:
                raise ValueError(f"amplitudes needs one value per token and cluster ({S}), got {amp.size}")
            mu = amp[:, None] * mean_direction(L, d)[None, :]
        if mu.shape != (S, d):
            raise ValueError(f"means must give one length-d vector per slot ({S}), got {mu.shape}")
        labels = DEFAULT_LABELS() if labels is None else labels
        configs = np.array([tuple(int(c) for c in k) for k in labels], dtype=int).reshape(-1, L)
        probs = np.array([float(v) for v in labels.values()])
        for k in configs:
            if any(not 0 <= c < clusters[l] for l, c in enumerate(k)):
                raise ValueError(f"label configuration {tuple(k)} names a cluster that does not exist")
        if np.any(probs < 0) or abs(probs.sum() - 1) > 1e-9:
            raise ValueError("label probabilities must be >= 0 and sum to 1")
        var = np.repeat((sig ** 2)[:, None], d, axis=1)
        return cls(d, L, clusters, var, mu, Pm, configs, probs)

    # ------------------------------------------------------------------ slots
    @property
    def S(self) -> int:
        return int(sum(self.clusters))

    @property
    def offsets(self) -> np.ndarray:
        """Index of slot (ℓ, 0) for every token."""
        return np.concatenate([[0], np.cumsum(self.clusters)[:-1]]).astype(int)

    @property
    def slot_labels(self) -> list[str]:
        return [f"{l + 1}{LETTERS[c]}" for l in range(self.L) for c in range(self.clusters[l])]

    @property
    def slot_shifts(self) -> np.ndarray:
        """``μ_s + p_ℓ`` for every slot, (S, d)."""
        tok = np.repeat(np.arange(self.L), self.clusters)
        return self.means + self.P[tok]

    @property
    def rho_bar(self) -> np.ndarray:
        """``tr Σ_s / d`` per slot."""
        return self.variances.mean(axis=1)

    # ------------------------------------------------------------------ sampling
    def sample_labels(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` label configurations (n, L) drawn from the joint law."""
        return self.configs[rng.choice(len(self.probs), size=n, p=self.probs)]

    def sample_with_labels(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` sentences (n, L, d) and their labels (n, L)."""
        c = self.sample_labels(n, rng)
        slot = self.offsets[None, :] + c                     # (n, L)
        z = rng.standard_normal((n, self.L, self.d))
        return self.means[slot] + z * np.sqrt(self.variances[slot]), c

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` sentences, an (n, L, d) array (the :class:`numerics.data.DataModel` interface)."""
        return self.sample_with_labels(n, rng)[0]


def slot_order_parameters(W: np.ndarray, Qstar: np.ndarray, data: ClusterDataModel) -> dict[str, Any]:
    """Per-slot ``q, m, θ, ρ, ρ̄`` (docs/explanation/theory.md §2 with slots), signs fixed on slot 1a.

    :func:`numerics.metrics.order_parameters` with the slot covariances and the shifts
    ``μ_s + p_ℓ`` in place of the token covariances and encodings. Returns
    ``{"slots": labels, "q": (S,), "m": (S,), "theta": (S,), "rho": (S,), "rho_bar": (S,)}``
    (rank 1; ``per_token`` arrays of :func:`order_parameters` otherwise).
    """
    from .metrics import order_parameters

    ops = order_parameters(W, Qstar, data.variances, data.slot_shifts)
    pt = ops["per_token"]
    out: dict[str, Any] = {"slots": data.slot_labels}
    for k in ("q", "m", "theta", "rho", "rho_bar"):
        v = np.asarray(pt[k])
        out[k] = v.reshape(v.shape[0]).tolist() if v.size == v.shape[0] else v.tolist()
    return out


def _teacher(d: int, target: Any, rng: np.random.Generator, data: ClusterDataModel, center: bool):
    from .data import make_teacher

    t = make_teacher(d, 1, target, rng, normalize=center)
    if center:
        # Q*ᵀμ_s/√d -> 0 in the theory: project the mean directions out, keep norm √d.
        M = data.means[np.linalg.norm(data.means, axis=1) > 0]
        if M.size:
            U, _, _ = np.linalg.svd(M.T, full_matrices=False)
            Qs = t.Qstar - U @ (U.T @ t.Qstar)
            t.Qstar = Qs * math.sqrt(d) / np.linalg.norm(Qs, axis=0)
    return t


def run_clusters_seed(seed: int, *, omega: float = 0.3, alpha: float = 2.0, d: int = 1000,
                      init: str = "semantic", data_kwargs: Mapping[str, Any] | None = None,
                      A: Any = None, lam: float = 0.01, steps: int = 20_000, lr: float = 1.5,
                      tol_grad: float = 3e-5, stop_grad: float = 1e-6, center_teacher: bool = True,
                      n_test: int = 20_000, test_chunk: int = 2048, device: str = "cpu",
                      dtype: str = "float64") -> dict[str, Any]:
    """One run: tied attention (r = r_t = 1) trained by full-batch GD on mixture tokens.

    Defaults follow the finite-size study (:mod:`numerics.finite_size`): ``lr = 1.5`` until
    ``grad_norm ≤ 1e-6`` (the same minimum as the paper's lr = 0.15, ten times sooner), a
    centred normalised teacher. Returns per-slot order parameters, ``eps_g`` (+ Monte-Carlo
    SE), ``train_loss = R/d``, ``grad_norm``, ``converged``, ``steps``, ``seconds``.
    """
    import torch

    from .data import PAPER_A, MixedTarget, iter_batches, sample_dataset, seed_streams
    from .models import TiedAttention, init_columns
    from .simulate import _dtype, resolve_device, validate
    from .train import L2, TrainConfig, test_error, train

    validate(omega=omega, alpha=alpha, d=d, lam=lam, init=init, steps=steps, lr=lr, n_test=n_test)
    dev, dt = resolve_device(device), _dtype(dtype)
    t0 = time.perf_counter()
    data = ClusterDataModel.create(d, **dict(data_kwargs or {}))
    streams = seed_streams(seed)
    A_arr = validate(A=A if A is not None else PAPER_A)
    teacher = _teacher(d, MixedTarget(omega, A_arr), streams.teacher, data, center_teacher)
    n = int(round(alpha * d))
    X, Y = sample_dataset(data, teacher, n, streams.train, device=dev, dtype=dt)
    student = TiedAttention(init_columns(init, d, 1, teacher.Qstar, data.P, streams.init), data.P).to(dev, dt)
    cfg = TrainConfig(lr=lr, steps=steps, tol_grad=tol_grad, stop_grad=stop_grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # non-convergence is reported in the result
        res = train(student, X, Y, {"Q": L2(lam)}, cfg, progress=lambda s: None)
    del X, Y
    eps, eps_se = test_error(student, iter_batches(data, teacher, n_test, streams.test, chunk=test_chunk,
                                                   device=dev, dtype=dt))
    W = student.weights().detach().cpu().double().numpy()
    out = slot_order_parameters(W, teacher.Qstar, data)
    out.update(seed=int(seed), n=n, eps_g=eps, eps_g_mc_se=eps_se, train_loss=res.train_loss,
               grad_norm=res.grad_norm, converged=bool(res.converged), steps=res.steps,
               seconds=time.perf_counter() - t0)
    return out


def run_clusters(omega: float = 0.3, alpha: float = 2.0, d: int = 1000, init: str = "semantic",
                 seeds: int | Sequence[int] = 4, *, seed_start: int = 0, threads: int | None = 1,
                 verbose: bool = False, **kwargs: Any) -> dict[str, Any]:
    """:func:`run_clusters_seed` over seeds; means, standard errors and per-seed spreads.

    Returns ``{"params", "slots", X, X_se, X_std (X in q, m, theta: per-slot lists; eps_g,
    train_loss: floats), "converged", "runs"}``.
    """
    from .metrics import mean_se
    from .simulate import torch_threads

    seed_list = list(range(seed_start, seed_start + seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    runs = []
    with torch_threads(threads):
        for s in seed_list:
            r = run_clusters_seed(s, omega=omega, alpha=alpha, d=d, init=init, **kwargs)
            if verbose:
                print(f"[clusters alpha={alpha} d={d} init={init}] seed {s}: eps_g={r['eps_g']:.5e} "
                      f"grad_norm={r['grad_norm']:.1e} steps={r['steps']} {r['seconds']:.1f}s",
                      file=sys.stderr, flush=True)
            runs.append(r)
    out: dict[str, Any] = {"params": dict(omega=omega, alpha=alpha, d=d, init=init, seeds=seed_list, **{
        k: v for k, v in kwargs.items() if isinstance(v, (int, float, str, bool))}), "slots": runs[0]["slots"]}
    for k in ("q", "m", "theta", "eps_g", "train_loss", "grad_norm"):
        vals = np.asarray([r[k] for r in runs], dtype=float)
        mean, se = mean_se(vals)
        std = vals.std(axis=0, ddof=1) if len(runs) > 1 else np.full_like(vals[0], np.nan)
        conv = (lambda v: v.tolist() if isinstance(v, np.ndarray) else float(v))
        out[k], out[k + "_se"], out[k + "_std"] = conv(mean), conv(se), conv(np.asarray(std) if np.ndim(std) else float(std))
    out["converged"] = all(r["converged"] for r in runs)
    out["runs"] = runs
    return out


# --------------------------------------------------------------------------- theory vs simulation
#: observables compared with the theory: per-slot order parameters, eps_g, e_t
def observables(slots: Sequence[str] = ("1a", "1b", "2a", "2b")) -> list[str]:
    return [f"{f}_{s}" for f in ("q", "m", "theta") for s in slots] + ["eps_g", "train_loss"]


def theory(alpha: float, branch: str, omega: float = 0.3, p_same: float = 0.8,
           quadrature: str = "gh:14") -> dict[str, float]:
    """The replica fixed point of ``attention_clusters`` on ``branch`` (cold start), in the
    simulator's names (``q_1a``...), with ``u_<name>``: the quadrature uncertainty
    ``quadrature_residual · |X|`` (at least 1e-12)."""
    from replica.numeric.integrators import from_spec
    from replica.registry import load_module
    from replica.numeric.solver import Solver

    mod = load_module("attention_clusters")
    params = {"omega": omega, "p_same": p_same}
    fp = Solver(mod, params, branch, rule=from_spec(quadrature, mod, branch)).solve(alpha)
    out = {k: float(v) for k, v in fp.order.items()}
    out.update(eps_g=fp.eps_g, train_loss=fp.train_loss)
    qres = fp.quadrature_residual if math.isfinite(fp.quadrature_residual) else 0.0
    for k in list(out):
        out["u_" + k] = max(qres * abs(out[k]), fp.eps_g_error if k == "eps_g" else 0.0, 1e-12)
    return out


_RUN_COLS = ["init", "alpha", "d", "seed"] + observables() + ["grad_norm", "converged", "steps", "seconds"]


def _flatten(run: Mapping[str, Any]) -> dict[str, Any]:
    row = {f"{k}_{s}": v for k in ("q", "m", "theta") for s, v in zip(run["slots"], run[k])}
    row.update({k: run[k] for k in ("eps_g", "train_loss", "grad_norm", "converged", "steps", "seconds")})
    return row


#: agreement points: each branch where it is the global minimum (alpha_c ~ 2.6 for the defaults)
STUDY_POINTS: tuple[tuple[str, float], ...] = (("semantic", 4.0), ("positional", 0.5))


def study(out_csv: str, points: Sequence[tuple[str, float]] = STUDY_POINTS,
          ds: Sequence[int] = (100, 200, 400, 800, 1600), seeds: Sequence[int] = (8, 6, 6, 6, 4),
          seed_start: int = 0, **kwargs: Any) -> list[dict[str, Any]]:
    """Finite-size study: every (init, alpha) point at every d with ``seeds[i]`` seeds, one CSV row
    per run appended to ``out_csv`` (resumable: rows already there are skipped). Returns all rows."""
    import csv
    import os

    from .simulate import torch_threads

    done: dict[tuple, dict] = {}
    if os.path.exists(out_csv):
        with open(out_csv, newline="") as fh:
            for r in csv.DictReader(fh):
                done[(r["init"], float(r["alpha"]), int(r["d"]), int(r["seed"]))] = r
    for init, alpha in points:
        for d, K in zip(ds, seeds):
            for seed in range(seed_start, seed_start + K):
                key = (init, float(alpha), int(d), seed)
                if key in done:
                    continue
                with torch_threads(1):  # 1 thread is ~4x faster for these small ops (numerics.simulate)
                    run = run_clusters_seed(seed, alpha=alpha, d=d, init=init, **kwargs)
                row = dict(init=init, alpha=float(alpha), d=int(d), seed=seed, **_flatten(run))
                new = not os.path.exists(out_csv)
                with open(out_csv, "a", newline="") as fh:
                    w = csv.DictWriter(fh, fieldnames=_RUN_COLS)
                    if new:
                        w.writeheader()
                    w.writerow(row)
                print(f"[clusters study] {init} alpha={alpha} d={d} seed={seed}: eps_g={run['eps_g']:.5e} "
                      f"steps={run['steps']} {run['seconds']:.1f}s", file=sys.stderr, flush=True)
                done[key] = row
    return list(done.values())


def summarise(rows: Sequence[Mapping[str, Any]], theories: Mapping[tuple[str, float], Mapping[str, float]]
              ) -> list[dict[str, Any]]:
    """Per (init, alpha, d, observable): theory, its uncertainty, K, mean, SE, per-seed std and
    bias = mean - theory. Non-converged runs are left out (and counted)."""
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["init"], float(r["alpha"]), int(r["d"])), []).append(r)
    out = []
    for (init, alpha, d), rs in sorted(groups.items()):
        ok = [r for r in rs if str(r["converged"]) == "True"]
        th = theories[(init, alpha)]
        for k in observables():
            v = np.array([float(r[k]) for r in ok])
            std = float(v.std(ddof=1)) if v.size > 1 else math.nan
            out.append(dict(init=init, alpha=alpha, d=d, observable=k, theory=th[k], u_theory=th["u_" + k],
                            K=int(v.size), n_nonconverged=len(rs) - len(ok), mean=float(v.mean()),
                            se=std / math.sqrt(v.size), std=std, bias=float(v.mean()) - th[k]))
    return out


def tolerance(summary_row: Mapping[str, Any], K: int, k_se: float = 4.0) -> float:
    """Agreement tolerance for a fresh K-seed mean at the same point and d as ``summary_row``::

        tol = k_se · std/√K  +  |bias| + 2 SE  +  u_theory

    with ``std`` the per-seed spread, ``bias`` the mean - theory and ``SE`` its standard error
    measured by the study at that d (the bias term bounds the finite-size bias at 2 SE)."""
    r = summary_row
    return (k_se * float(r["std"]) / math.sqrt(K) + abs(float(r["bias"])) + 2 * float(r["se"])
            + float(r["u_theory"]))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m numerics.clusters", description=__doc__.split("\n\n")[0])
    p.add_argument("--omega", type=float, default=0.3)
    p.add_argument("--alpha", type=float, default=2.0)
    p.add_argument("--d", type=int, default=1000)
    p.add_argument("--init", default="semantic", help="semantic, positional or random")
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--seed-start", type=int, default=0)
    p.add_argument("--p-same", type=float, default=0.8, help="P(c_1 = c_2) (uniform marginals)")
    p.add_argument("--lam", type=float, default=0.01)
    p.add_argument("--lr", type=float, default=1.5)
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--n-test", type=int, default=20_000)
    p.add_argument("--json", action="store_true")
    p.add_argument("--study", metavar="DIR", help="finite-size study instead (semantic init at alpha=4, "
                   "positional at 0.5; d = 100 ... 1600): DIR/runs.csv (resumable) and DIR/summary.csv; "
                   "tests/test_clusters.py reads the summary as docs/figures/clusters_finite_size.csv, "
                   "and docs/figures/clusters_finite_size_runs.csv is the committed runs.csv")
    p.add_argument("--ds", default="100,200,400,800,1600", help="--study: the dimensions d")
    p.add_argument("--study-seeds", default="8,6,6,6,4", metavar="K,...",
                   help="--study: seeds per d (one number for all, or one per d)")
    args = p.parse_args(argv)
    if args.study:
        import csv
        import os

        points = STUDY_POINTS
        try:
            ds = [int(x) for x in args.ds.split(",") if x]
            ks = [int(x) for x in args.study_seeds.split(",") if x]
        except ValueError:
            print(f"{p.prog}: error: --ds and --study-seeds take comma-separated integers", file=sys.stderr)
            return 2
        if len(ks) == 1:
            ks = ks * len(ds)
        if len(ks) != len(ds) or not ds or min(ds) < 1 or min(ks) < 1:
            print(f"{p.prog}: error: --study-seeds needs one count >= 1 per d (or one for all)", file=sys.stderr)
            return 2
        os.makedirs(args.study, exist_ok=True)
        rows = study(os.path.join(args.study, "runs.csv"), points, ds=ds, seeds=ks, seed_start=args.seed_start,
                     lam=args.lam, lr=args.lr, steps=args.steps, n_test=args.n_test)
        th = {(i, a): theory(a, i, args.omega) for i, a in points}
        summ = summarise(rows, th)
        with open(os.path.join(args.study, "summary.csv"), "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(summ[0]))
            w.writeheader()
            w.writerows(summ)
        for r in summ:
            print(f"{r['init']:<10} {r['alpha']:<4} d={r['d']:<4} {r['observable']:<12} theory={r['theory']:.5g} "
                  f"mean={r['mean']:.5g} se={r['se']:.2g} std={r['std']:.2g} bias={r['bias']:+.2g}")
        return 0
    try:
        res = run_clusters(args.omega, args.alpha, args.d, args.init, args.seeds, seed_start=args.seed_start,
                           verbose=True, data_kwargs={"labels": DEFAULT_LABELS(args.p_same)}, lam=args.lam,
                           lr=args.lr, steps=args.steps, n_test=args.n_test)
    except ValueError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        from replica.artifacts import jsonio

        from .simulate import standard_error_reasons

        out = {k: v for k, v in res.items() if k != "runs"} | {"runs": res["runs"]}
        print(jsonio.dumps(out, standard_error_reasons(out), indent=1))
        return 0
    print(f"clusters omega={args.omega} alpha={args.alpha} d={args.d} init={args.init} seeds={args.seeds}")
    for k in ("q", "m", "theta"):
        print(f"  {k:<6} " + "  ".join(f"{s}={v:.5f}±{e:.5f}" for s, v, e in zip(res["slots"], res[k], res[k + "_se"])))
    for k in ("eps_g", "train_loss"):
        print(f"  {k:<10} {res[k]:.6e} ± {res[k + '_se']:.1e}")
    print(f"  converged: {res['converged']}")
    return 0


if __name__ == "__main__":
    from numerics.deps import missing_line

    sys.exit(missing_line("python -m numerics.clusters", main))   # no torch: one line saying what to install

"""Bayes-optimal AMP (sum-product GAMP) for any declared model, against its state evolution.

Where :mod:`numerics.gamp` minimises the empirical risk (max-sum: the prox of the loss and the penalty),
this is GAMP in its sum-product form for the Bayes-optimal student: the input channel is the posterior-mean
denoiser of the declared prior (``f_a``, ``f_v`` of :class:`replica.numeric.bayes.PriorNumerics`) and the output
channel the ``g_out`` of the declared label law (the generated Bayes-optimal module,
:mod:`replica.codegen.bayes`). With ``F = X / sqrt(d)`` (``n x d``, ``x ~ N(0, I_d)``) and rows of ``K`` teacher
fields, one iteration reads (the variances shared across samples and coordinates, their ``1/d`` sums being
the same for i.i.d. Gaussian data)::

    V     = mean_i C_i                                    (K x K)
    omega = F W - g V                                     (Onsager term; g from the previous step)
    g     = g_out(y, omega, V),   dg = d g_out / d omega
    A     = -alpha mean_mu dg                             (K x K)
    B     = F^T g + W A                                   (Onsager term)
    W, C  = f_a(B, A), f_v(B, A)

From the uninformed start ``W = E_P0 w``, ``C = Var_P0 w`` its overlaps ``q_t = W^T W* / d`` follow the state
evolution of :class:`replica.numeric.bayes.BayesSolver` iterated from ``q = 0`` (``step``), up to ``O(d^-1/2)``
fluctuations; at a fixed point, ``W^T W / d = W^T W* / d`` (Nishimori) and ``mean_i C_i = rho - q``.

Data: the teacher's rows from the prior's mixture components, labels from the declared label law at the
teacher's fields (``Z_out(y; h*, 0)``, or the continuous label's law), both from the Bayes-optimal module --
one sampler for every declared model.

API::

    run_bayes_amp("binary_perceptron", alpha=1.0, d=2000, seeds=4)
    python -m numerics.bayes_amp binary_perceptron --alpha 1 --d 2000 --seeds 4 --json
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from replica.numeric.bayes import V_FLOOR, BayesSolver, upper_entries
from replica.numeric.bayes_model import BayesModel

__all__ = ["BayesProblem", "make_bayes_problem", "BayesAMP", "state_evolution", "run_bayes_amp", "main"]


@dataclass
class BayesProblem:
    """Synthetic data of a declared model: ``X`` (``n x d``), the teacher ``W_star`` (``d x K``), labels ``y``."""

    X: np.ndarray
    W_star: np.ndarray
    y: np.ndarray
    alpha: float
    seed: int


def sample_teacher(solver: BayesSolver, d: int, rng: np.random.Generator) -> np.ndarray:
    """``d`` teacher rows from the prior's mixture components. A prior written as a density is sampled on the
    grid the state evolution integrates (its nodes with their weights), so AMP and the state evolution see
    the same law."""
    pn = solver.prior
    which = rng.choice(pn.weights.size, size=d, p=pn.weights / pn.weights.sum())
    K = solver.K
    out = pn.means[which].copy()
    for t in np.unique(which):
        sel = which == t
        if np.any(pn.covs[t]):
            L = np.linalg.cholesky(pn.covs[t])
            out[sel] += rng.standard_normal((int(sel.sum()), K)) @ L.T
    return out


def sample_labels(solver: BayesSolver, hstar: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Labels drawn from the declared law at the teacher's fields ``hstar`` (``n x K``)."""
    bm, K = solver.bm, solver.K
    V0 = upper_entries(V_FLOOR * np.eye(K))
    omega = hstar.T
    if bm.discrete:
        with np.errstate(all="ignore"):
            Z = np.stack([np.exp(bm.output_law(omega, np.full((1, omega.shape[1]), float(y)), V0, solver.p)[0])
                          for y in bm.LABEL_VALUES])
        Z = Z / Z.sum(axis=0)
        u = rng.random(omega.shape[1])
        idx = (np.cumsum(Z, axis=0) < u).sum(axis=0)
        return np.asarray(bm.LABEL_VALUES, dtype=float)[np.minimum(idx, len(bm.LABEL_VALUES) - 1)]
    mean, var = bm.label_law(omega, V0, solver.p)
    return mean + np.sqrt(var) * rng.standard_normal(omega.shape[1])


def make_bayes_problem(solver: BayesSolver, alpha: float, d: int, seed: int) -> BayesProblem:
    """Data of ``n = round(alpha d)`` samples for one seed."""
    rng = np.random.default_rng(seed)
    n = int(round(alpha * d))
    W = sample_teacher(solver, d, rng)
    X = rng.standard_normal((n, d))
    y = sample_labels(solver, X @ W / math.sqrt(d), rng)
    return BayesProblem(X, W, y, alpha, seed)


class BayesAMP:
    """Sum-product GAMP of a declared model on one problem (see the module docstring)."""

    def __init__(self, solver: BayesSolver, problem: BayesProblem, damping: float = 0.0):
        self.solver, self.problem, self.damping = solver, problem, damping
        self.F = problem.X / math.sqrt(problem.X.shape[1])

    def g_out(self, omega: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        bm, K = self.solver.bm, self.solver.K
        with np.errstate(all="ignore"):
            _, g, dg = bm.output_law(omega.T, self.problem.y[None, :], upper_entries(V + V_FLOOR * np.eye(K)), self.solver.p)
        g = np.reshape(g, (K, -1)).T
        dg = np.reshape(dg, (K, K, -1)).transpose(2, 0, 1)
        return np.nan_to_num(g), np.nan_to_num(dg)

    def run(self, iterations: int = 60, tol: float = 1e-9) -> dict[str, Any]:
        """Iterate from the uninformed start; the overlaps per iteration and at the end."""
        pn, K = self.solver.prior, self.solver.K
        n, d = self.F.shape
        W = np.tile(pn.mean, (d, K)) if np.ndim(pn.mean) == 0 else np.tile(pn.mean, (d, 1))
        C = np.broadcast_to((pn.rho - pn.mean ** 2) * np.eye(K), (d, K, K)).copy()
        g = np.zeros((n, K))
        trace = []
        Ws = self.problem.W_star
        for t in range(iterations):
            V = C.mean(axis=0)
            omega = self.F @ W - g @ V
            g_new, dg = self.g_out(omega, V)
            A = -dg.mean(axis=0) * (n / d)
            A = (A + A.T) / 2
            B = self.F.T @ g_new + W @ A
            f_a, f_v, _ = pn.denoise(B.T, A)
            W_new, C_new = f_a.T, f_v.transpose(2, 0, 1)
            if self.damping:
                W_new = self.damping * W + (1 - self.damping) * W_new
                C_new = self.damping * C + (1 - self.damping) * C_new
            change = float(np.max(np.abs(W_new - W))) / max(math.sqrt(pn.rho), 1e-300)
            W, C, g = W_new, C_new, g_new
            trace.append({"iteration": t + 1, "m": (W.T @ Ws / d).tolist(), "q": (W.T @ W / d).tolist(),
                          "V": C.mean(axis=0).tolist()})
            if change < tol:
                break
        return {"m": W.T @ Ws / d, "q": W.T @ W / d, "V": C.mean(axis=0),
                "mse": float(np.mean(np.sum((W - Ws) ** 2, axis=1))) / K, "iterations": len(trace), "trace": trace}


def state_evolution(solver: BayesSolver, alpha: float, iterations: int) -> list[np.ndarray]:
    """The overlaps ``q_t`` of the state evolution from the uninformed start ``q_0 = mean^2``: the map
    iterated without acceleration (what AMP follows)."""
    K, pn = solver.K, solver.prior
    q = pn.mean ** 2 * np.ones((K, K))
    V = pn.rho * np.eye(K) - q
    out = []
    for _ in range(iterations):
        q, V, *_ = solver.step(q, V, alpha)
        out.append(q)
    return out


def run_bayes_amp(model: str | BayesModel, alpha: float, d: int = 2000, seeds: int = 4, seed_start: int = 0,
                  parameters: Mapping[str, float] | None = None, iterations: int = 60) -> dict[str, Any]:
    """AMP over ``seeds`` problems at ``alpha``: mean and standard error of the overlap ``m = W^T W*/d``
    (the trace over units for ``K > 1``), against the state evolution after as many iterations and its
    fixed point from the uninformed start."""
    if isinstance(model, str):
        from replica.registry.bayes import load_bayes

        model = load_bayes(model)
    solver = BayesSolver(model, parameters)
    runs = []
    for s in range(seed_start, seed_start + seeds):
        res = BayesAMP(solver, make_bayes_problem(solver, alpha, d, s)).run(iterations)
        runs.append(res)
    K = solver.K
    ms = np.array([np.trace(r["m"]) / K for r in runs])
    qs = np.array([np.trace(r["q"]) / K for r in runs])
    se_iters = max(r["iterations"] for r in runs)
    se = state_evolution(solver, alpha, se_iters)
    fixed = solver.solve(alpha, "uninformed")
    return {"model": model.MODEL, "alpha": alpha, "d": d, "seeds": seeds, "parameters": dict(solver.parameters),
            "m": float(ms.mean()), "m_se": float(ms.std(ddof=1) / math.sqrt(seeds)) if seeds > 1 else None,
            "q": float(qs.mean()), "mse": float(np.mean([r["mse"] for r in runs])),
            "iterations": [r["iterations"] for r in runs],
            "state_evolution": float(np.trace(se[-1]) / K), "fixed_point": float(np.trace(fixed.q) / K)}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m numerics.bayes_amp MODEL --alpha A --d D --seeds S [--param k=v] [--json]``; exit 2 on bad input."""
    from replica.artifacts import jsonio
    from replica.errors import ReplicaError

    p = argparse.ArgumentParser(prog="python -m numerics.bayes_amp",
                                description="Bayes-optimal AMP (sum-product GAMP: the declared prior's posterior-mean "
                                            "denoiser, the declared label law's g_out) on synthetic data, against "
                                            "the state evolution.")
    p.add_argument("model")
    p.add_argument("--alpha", type=float, required=True)
    p.add_argument("--d", type=int, default=2000)
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--seed-start", type=int, default=0)
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        if not (math.isfinite(args.alpha) and args.alpha > 0):
            raise ValueError(f"alpha: must be a finite number > 0, got {args.alpha}")
        if args.d < 10 or args.seeds < 1 or args.iterations < 1:
            raise ValueError("d: need d >= 10, seeds >= 1, iterations >= 1")
        params = {}
        for item in args.param:
            k, sep, v = item.partition("=")
            if not sep:
                raise ValueError(f"param: expected NAME=VALUE, got {item!r}")
            params[k.strip()] = float(v)
        res = run_bayes_amp(args.model, args.alpha, args.d, args.seeds, args.seed_start, params, args.iterations)
    except (ReplicaError, ValueError) as exc:
        print(f"python -m numerics.bayes_amp: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(jsonio.dumps(res))
    else:
        se = res["m_se"]
        print(f"bayes-amp {res['model']} alpha={res['alpha']:g} d={res['d']} seeds={res['seeds']}: m = {res['m']:.5f}"
              + (f" ± {se:.1e}" if se is not None else "") + f", state evolution {res['state_evolution']:.5f} "
              f"(fixed point {res['fixed_point']:.5f}), iterations {res['iterations']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

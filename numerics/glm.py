"""Empirical risk minimisation for the GLM canon: the simulator the GLM theory is checked against.

Models (teacher ``w* ~ N(0, I_d)`` rescaled to ``|w*|² = d`` so that ``ρ = 1`` exactly, inputs
``x ~ N(0, I_d)``, ``h = w·x/√d``, ``n = round(α d)`` samples)::

    ridge              y = h* + √Δ z         ½ (y − h)²          + (λ/2) |w|²
    lasso              y = h* + √Δ z         ½ (y − h)²          + λ₁ |w|₁
    logistic           y = sign(h*)          log(1 + e^{−y h})   + (λ/2) |w|²
    hinge              y = sign(h*)          max(0, 1 − y h)     + (λ/2) |w|²
    perceptron_probit  y = sign(h* + √Δ z)   log(1 + e^{−y h})   + (λ/2) |w|²

with the loss SUMMED over samples, ``R(w) = Σ_μ ℓ(y_μ, h_μ) + Σ_i r(w_i)`` (the literature's
convention; ``train_loss = R(ŵ)/d``). Each model is its declaration ``derivations/MODEL.py`` at finite
size (:class:`numerics.problem.Problem`, the generic simulator of ``replica check``: data, teacher,
labels, loss and penalty come from the sympy declaration, nothing here is written per model name);
this module holds the exact solvers that problem sends convex GLMs to -- chosen by the declared loss
and penalty -- and the canon's command line. Solvers, each to a tight, *checked* optimality:

* ridge: the normal equations ``(X'ᵀX' + λ) w = X'ᵀ y`` (``X' = X/√d``), Cholesky;
* logistic / perceptron_probit: scikit-learn ``LogisticRegression(C = 1/λ, fit_intercept=False,
  solver="newton-cholesky")`` on ``X'`` — sklearn minimises ``½|w|² + C Σ_μ ℓ``, i.e. ours divided
  by λ — then up to 3 exact Newton steps on ``R`` if its gradient is not yet below 1e-10;
* lasso: scikit-learn ``Lasso(alpha = λ₁/n, fit_intercept=False)`` on ``X'`` — sklearn minimises
  ``(1/2n)|y − X'w|² + alpha |w|₁``, i.e. ours divided by n — then an exact polish: on the
  support ``S`` with signs ``s`` it solves ``X'_Sᵀ X'_S w_S = X'_Sᵀ y − λ₁ s`` and keeps the result
  if it satisfies the KKT conditions better;
* hinge: scikit-learn ``LinearSVC(C = 1/λ, loss="hinge", dual=True, fit_intercept=False)``
  (liblinear minimises ``½|w|² + C Σ_μ max(0, 1 − y h)``, ours divided by λ) to tolerance 1e-4,
  which finds the active sets; then the primal–dual active-set method solves the dual box QP
  ``min_a (1/2λ)|Zᵀa|² − Σa, 0 ≤ a ≤ 1`` (``Z = y ∘ X'``, ``w = Zᵀa/λ``) exactly (points on the
  margin solve ``Z_I w = 1``, the others' ``a`` at 0 or 1). L-BFGS on the primal would stall at
  the kink.

Reported per seed: ``q = |ŵ|²/d``, ``theta = ŵ·w*/d``, ``train_loss``, ``kkt_norm`` (max violation of
the optimality conditions of ``R``: gradient ∞-norm for smooth problems, sub-gradient/complementarity
residual for LASSO and hinge), ``converged`` (``kkt_norm ≤ 1e-8``), ``solver``; test errors on a fresh
test set (``classification_error``, ``test_loss``, ``test_mse``; the test samples' fields drawn from
their exact Gaussian law given ŵ) and their population values given ŵ
(exact by Gaussianity: ``classification_error_population = arccos(θ/√(q(ρ + Δ)))/π``,
``test_mse_population = ½(q − 2θ + ρ + Δ)``); ``zero_fraction`` for LASSO.

CLI: ``python -m numerics.glm MODEL --alpha A --d D --param NAME=VALUE --seeds N --json``; with
``--theory`` the same command also solves the replica theory at the point (``replica solve MODEL``,
the generated module of ``derivations/MODEL.py``) and prints theory next to simulation, the
deviation in standard errors of the seed mean (theory vs simulation in one command).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np
import sympy as sp

from .glm_solvers import _solve_hinge, _solve_lasso, _solve_logistic, _solve_ridge  # noqa: F401

__all__ = ["MODELS", "PARAMETERS", "THEORY_KEYS", "problem", "run_glm", "run_seed", "summarize", "theory", "compare",
           "main"]

#: Parameters of each model (the toolkit's names) with their defaults.
PARAMETERS: dict[str, dict[str, float]] = {
    "ridge": {"lam": 0.1, "Delta": 0.25},
    "logistic": {"lam": 0.1},
    "hinge": {"lam": 0.1},
    "lasso": {"lam1": 0.1, "Delta": 0.25},
    "perceptron_probit": {"lam": 0.1, "Delta": 0.25},
}
MODELS = tuple(PARAMETERS)
KKT_TOL = 1e-8


def check_inputs(model: str, alpha: float, d: int, params: dict[str, float], seeds: int = 1,
                 n_test: int = 1) -> dict[str, float]:
    """Validate and complete the inputs; raise ``ValueError('<name>: <why>')`` naming the parameter."""
    if model not in PARAMETERS:
        raise ValueError(f"MODEL: unknown model {model!r}; choose from {', '.join(MODELS)}")
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"--alpha: must be a finite number > 0, got {alpha}")
    if int(d) != d or d < 2:
        raise ValueError(f"--d: must be an integer >= 2, got {d}")
    if round(alpha * d) < 1:
        raise ValueError(f"--alpha: alpha * d = {alpha * d:g} gives no samples; increase --alpha or --d")
    if int(seeds) != seeds or seeds < 1:
        raise ValueError(f"--seeds: must be an integer >= 1, got {seeds}")
    if int(n_test) != n_test or n_test < 1:
        raise ValueError(f"--n-test: must be an integer >= 1, got {n_test}")
    unknown = sorted(set(params) - set(PARAMETERS[model]))
    if unknown:
        raise ValueError(f"--param {unknown[0]}: {model} has no parameter {unknown[0]!r}; "
                         f"it takes {', '.join(PARAMETERS[model])}")
    p = {**PARAMETERS[model], **params}
    for name, v in p.items():
        if not math.isfinite(v):
            raise ValueError(f"--param {name}: must be finite, got {v}")
        if name in ("lam", "lam1") and v <= 0:
            raise ValueError(f"--param {name}: must be > 0 (the minimiser is not unique or not finite "
                             f"without a penalty), got {v:g}")
        if name == "Delta" and v < 0:
            raise ValueError(f"--param Delta: noise variance must be >= 0, got {v:g}")
    return p


# --- the declared models at finite size --------------------------------------------------------------------

def problem(model: str, params: Mapping[str, float]):
    """The declared model ``derivations/MODEL.py`` at finite size (:class:`numerics.problem.Problem`,
    parameters by name): its data law, teacher, channel or label noise, loss and penalty come from the
    declaration, and :meth:`~numerics.problem.Problem.fit` sends it to the exact solver below that fits
    the declared loss and penalty. Cached per model and parameters."""
    return _problem(model, tuple(sorted((k, float(v)) for k, v in params.items())))


@lru_cache(maxsize=32)
def _problem(model: str, items: tuple):
    from replica.registry import load_model

    from .problem import Problem

    return Problem(load_model(model), None, dict(items))


# --- one seed ----------------------------------------------------------------------------------------------

def run_seed(model: str, alpha: float, d: int, params: dict[str, float], seed: int, n_test: int = 20000
             ) -> dict[str, Any]:
    """Draw one instance (seed) of the declared model, minimise ``R`` exactly and measure. See the module
    docstring for the keys."""
    p = check_inputs(model, alpha, d, params, 1, n_test)
    t0 = time.perf_counter()
    pb = problem(model, p)
    inst = pb.instance(alpha, d, seed)
    fit = pb.fit(inst)
    w, wstar = fit.W[:, 0], inst.Qstar[:, 0]
    q, theta = float(w @ w / d), float(w @ wstar / d)
    out: dict[str, Any] = {"seed": seed, "n": inst.n, "q": q, "theta": theta,
                           "train_loss": pb.train_loss(inst, fit.W), "kkt_norm": fit.grad_norm,
                           "converged": bool(fit.grad_norm <= KKT_TOL), "solver": fit.solver}
    # fresh test samples: their fields (h, h*) drawn from their exact law given w (jointly Gaussian)
    rng = inst.rng["test"]
    H, HS, _ = pb.test_fields(pb.overlaps(inst, fit.W), n_test, rng)
    ht = H[:, 0, 0]
    teach = pb._teacher_args(HS, rng)
    noise = [rng.standard_normal(n_test) for _ in pb.noise_syms]
    out["test_loss"] = float(np.mean(np.broadcast_to(pb._loss_np(ht, *teach, *noise), (n_test,))))
    if pb.channel is not None:      # a +-1 label: the 0-1 error, and its value given w (Gaussianity)
        delta = float(sp.sympify(pb.channel.noise_variance()).subs(pb.subs))
        out["classification_error"] = float(np.mean(np.where(ht >= 0, 1.0, -1.0) != teach[0]))
        c = theta / math.sqrt(q * (1.0 + delta)) if q > 0 else 0.0
        out["classification_error_population"] = math.acos(max(-1.0, min(1.0, c))) / math.pi
    else:                           # a continuous label y = h* + sqrt(Delta) z: the test MSE
        yt = np.broadcast_to(pb.glm["target"](*teach, *noise), (n_test,))
        out["test_mse"] = float(np.mean(0.5 * (yt - ht) ** 2))
        out["test_mse_population"] = 0.5 * (q - 2 * theta + 1.0 + p.get("Delta", 0.0))
    if pb.glm["penalty"][0] == "l1":
        out["zero_fraction"] = float(np.mean(w == 0))
    out["seconds"] = time.perf_counter() - t0
    return out


SUMMARY_KEYS = ("q", "theta", "train_loss", "test_loss", "classification_error", "classification_error_population",
                "test_mse", "test_mse_population", "zero_fraction", "kkt_norm")


def summarize(runs: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float | None]]:
    """Mean and standard error (``std/√K``, None for one seed) of every numeric observable."""
    mean: dict[str, float] = {}
    se: dict[str, float | None] = {}
    for k in SUMMARY_KEYS:
        if k in runs[0]:
            v = np.array([r[k] for r in runs], dtype=float)
            mean[k] = float(v.mean())
            se[k] = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else None
    return mean, se


def run_glm(model: str, alpha: float, d: int, params: dict[str, float] | None = None, seeds: int = 1,
            seed0: int = 0, n_test: int = 20000, progress: bool = False) -> dict[str, Any]:
    """``seeds`` independent instances (seeds ``seed0, seed0 + 1, …``) with their mean and standard error."""
    p = check_inputs(model, alpha, d, dict(params or {}), seeds, n_test)
    runs = []
    for k in range(seeds):
        runs.append(run_seed(model, alpha, d, p, seed0 + k, n_test))
        if progress:
            r = runs[-1]
            print(f"[glm] {model} alpha={alpha:g} d={d} seed {seed0 + k} ({k + 1}/{seeds}): q={r['q']:.5g} "
                  f"theta={r['theta']:.5g} kkt={r['kkt_norm']:.1e} {r['seconds']:.1f}s", file=sys.stderr, flush=True)
    mean, se = summarize(runs)
    return {"model": model, "alpha": alpha, "d": d, "n": runs[0]["n"], "parameters": p, "n_test": n_test,
            "seeds": runs, "mean": mean, "se": se, "converged": all(r["converged"] for r in runs)}


# --- theory at the same point ------------------------------------------------------------------------

#: simulator observable -> the key of ``replica solve --json`` that predicts it (the population test
#: errors are exact given the weights; the test-set ones carry test-set noise as well)
THEORY_KEYS = {"q": "q", "theta": "theta", "train_loss": "train_loss", "test_loss": "eps_g",
               "classification_error": "classification_error",
               "classification_error_population": "classification_error",
               "test_mse": "eps_g", "test_mse_population": "eps_g", "zero_fraction": "zero_fraction"}


def theory(model: str, alpha: float, params: dict[str, float], max_iter: int = 2000) -> dict[str, Any]:
    """``replica solve MODEL --alpha A --param ... --json --no-replicon`` in process, through the one
    pipeline (:func:`replica.numeric.point.solve_point`): the replica-symmetric fixed point of the
    declared model (derivations/MODEL.py) with its error bars, as the CLI solves it."""
    from replica.numeric.point import PointOptions, solve_point
    from replica.registry import load_module

    return solve_point(load_module(model), params, alpha, PointOptions(max_iter=max_iter, replicon=False)).result


def compare(res: dict[str, Any], th: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per observable: simulation mean, its standard error, the theory and ``(mean - theory)/SE``."""
    out: dict[str, dict[str, float | None]] = {}
    for obs, key in THEORY_KEYS.items():
        if obs in res["mean"] and th.get(key) is not None:
            se = res["se"][obs]
            dev = (res["mean"][obs] - th[key]) / se if se else None
            out[obs] = {"simulation": res["mean"][obs], "se": se, "theory": th[key], "deviation_in_se": dev}
    return out


# --- CLI ---------------------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _param(s: str) -> tuple[str, float]:
    name, sep, value = s.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {s!r}")
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: expected a number, got {value!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m numerics.glm",
                description="Empirical risk minimisation for the GLM canon (teacher h* ~ N(0,1), x ~ N(0, I_d), "
                            "loss summed over samples + penalty): q = |w|^2/d, theta = w.w*/d, training loss per d, "
                            "test errors, KKT residual, over several seeds with standard errors.")
    p.add_argument("model", help=f"one of {', '.join(MODELS)}")
    p.add_argument("--alpha", type=float, required=True, help="sample complexity n/d (> 0)")
    p.add_argument("--d", type=int, default=400, help="dimension (default 400)")
    p.add_argument("--param", type=_param, action="append", default=[], metavar="NAME=VALUE",
                   help="model parameter (repeatable): lam (ridge/logistic/hinge/perceptron_probit, > 0), "
                        "lam1 (lasso, > 0), Delta (ridge/lasso/perceptron_probit, >= 0)")
    p.add_argument("--seeds", type=int, default=3, help="number of independent instances (default 3)")
    p.add_argument("--seed0", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--n-test", type=int, default=20000, help="fresh test samples per seed (default 20000)")
    p.add_argument("--json", action="store_true", help="print one JSON object (strict: no NaN)")
    p.add_argument("--quiet", action="store_true", help="no per-seed progress on stderr")
    p.add_argument("--theory", action="store_true",
                   help="also solve the replica theory at this point (replica solve MODEL) and print it next to "
                        "the simulation, with the deviation in standard errors")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit code (2 for bad input, 1 if a seed did not converge,
    130/143 when interrupted)."""
    from replica.artifacts import jsonio
    from replica.errors import ParameterError, ReplicaError
    from replica.runtime.workers import exit_status, terminate_raises

    parser = build_parser()
    a = parser.parse_args(argv)
    params = dict(a.param)
    try:
        check_inputs(a.model, a.alpha, a.d, params, a.seeds, a.n_test)
        if a.model != "ridge":   # the other solvers are scikit-learn's (ridge: scipy's Cholesky)
            from .deps import require

            require("sklearn", f"the {a.model} solver of python -m numerics.glm")
    except ValueError as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    except ReplicaError as e:   # a missing optional dependency: one line saying what to install
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    try:
        with terminate_raises():  # SIGTERM ends like Ctrl-C: one line, no traceback
            if a.theory:  # first: a theory that cannot be solved should not cost the simulation
                th = theory(a.model, a.alpha, params)
            res = run_glm(a.model, a.alpha, a.d, params, a.seeds, a.seed0, a.n_test, progress=not a.quiet)
            if a.theory:
                res["theory"], res["agreement"] = th, compare(res, th)
    except ReplicaError as e:
        parser.exit(2 if isinstance(e, ParameterError) else 1, f"{parser.prog}: error: theory: {e}\n")
    except KeyboardInterrupt as e:
        name = getattr(e, "signum", None)
        print(f"{parser.prog}: interrupted ({'SIGTERM' if name else 'SIGINT'}); nothing is saved, rerun it",
              file=sys.stderr)
        return exit_status(e)
    if a.json:
        print(jsonio.dumps(res))
    else:
        print(f"{a.model}  alpha={a.alpha:g}  d={a.d}  n={res['n']}  "
              + "  ".join(f"{k}={v:g}" for k, v in res["parameters"].items()) + f"  seeds={a.seeds}")
        for k, v in res["mean"].items():
            se = res["se"][k]
            print(f"  {k:32s} {v:.6g}" + (f" ± {se:.2g}" if se is not None else ""))
        print(f"  converged (KKT <= {KKT_TOL:g}) on every seed: {res['converged']}")
        if a.theory:
            print(f"  theory (replica solve {a.model}): converged={res['theory']['converged']}")
            print(f"  {'observable':32s} {'simulation':>12s} {'± SE':>9s} {'theory':>12s} {'(sim-th)/SE':>11s}")
            for k, c in res["agreement"].items():
                se = f"{c['se']:.2g}" if c["se"] is not None else "n/a"
                dev = f"{c['deviation_in_se']:+.2f}" if c["deviation_in_se"] is not None else "n/a"
                print(f"  {k:32s} {c['simulation']:12.6g} {se:>9s} {c['theory']:12.6g} {dev:>11s}")
    return 0 if res["converged"] else 1


if __name__ == "__main__":
    sys.exit(main())

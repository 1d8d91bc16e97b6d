"""Learning curves on structured data, theory over finite-N simulation: ``python -m benchmarks.structured_data``.

Writes the figures and tables of docs/how-to/structured_data.md:

* ``docs/figures/structured_power_law.{png,csv}``: ridge (test error ``eps_g``) and logistic regression
  (classification error) on the power-law spectrum ``lambda_k ∝ k^-1.2``, teacher ``theta_k ∝ k^-0.4``
  (``N = 400`` modes, ``rho = 1``, ``lam = 0.1``, ridge noise ``Delta = 0.25``): the theory of that
  spectrum (``replica solve MODEL --spectrum``) against ``alpha``, and the simulator of ``replica check
  --spectrum`` (:class:`numerics.structured.SpectralProblem`: ``x ~ N(0, diag(lambda))`` at ``d = N``,
  exact ridge, scikit-learn logistic regression) at four ``alpha``, 20 seeds each, mean ± standard
  error;
* ``docs/figures/rf_double_descent.{png,csv}``: ridge on random features ``x = tanh(F z/√d)`` at
  ``n/d = 2``, ``lam = 1e-4``, ``Delta = 0.25`` against ``p/d``: the Gaussian-equivalent theory in the
  ``p, d -> oo`` limit (Marchenko-Pastur spectrum of ``FFᵀ/d``, 1000 teacher modes) and
  scikit-learn ridge on the true features at ``d = 100`` (8 draws of ``F``, teacher and data each).

Takes a few minutes on 2 cores. Not a test: tests/test_spectrum.py checks the same agreement at a
few points with stated tolerances.
"""
from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures"

POWER_LAW = dict(N=400, exponent=1.2, teacher_exponent=0.4)
MODELS = {"ridge": ({"lam": 0.1, "Delta": 0.25}, "eps_g"),
          "logistic": ({"lam": 0.1}, "classification_error")}
SIM_ALPHAS = (0.5, 1.0, 2.0, 4.0)
THEORY_ALPHAS = np.unique(np.concatenate([np.round(np.geomspace(0.2, 5.0, 16), 4), SIM_ALPHAS]))
SEEDS = 20

RF = dict(alpha_d=2.0, lam=1e-4, Delta=0.25, d_theory=1000, d_sim=100, draws=8)
RF_SIM_RATIOS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
RF_THEORY_RATIOS = np.unique(np.round(np.concatenate([np.linspace(0.1, 1.8, 18), np.linspace(1.85, 2.15, 7),
                                                      np.linspace(2.2, 5.0, 15), RF_SIM_RATIOS]), 4))


def power_law_curves(say=print) -> list[dict]:
    """Theory and simulation rows of the power-law learning curves."""
    from numerics.structured import SpectralProblem
    from replica.registry import load_model, load_module
    from replica.numeric.solver import Solver
    from replica.registry.spectral import gcm_module
    from replica.numeric.spectrum import power_law

    spec = power_law(**POWER_LAW)
    rows = []
    for name, (params, key) in MODELS.items():
        module = gcm_module(load_module(name), spec)
        solver = Solver(module, params, tol=1e-10)
        x0 = None
        for a in THEORY_ALPHAS:
            fp = solver.solve(float(a), x0=x0)
            x0 = fp.order
            rows.append(dict(model=name, kind="theory", alpha=float(a), value=fp.observables[key], error=0.0,
                             q=fp.order["q_1"], theta=fp.order["theta_1"], z=""))
        problem = SpectralProblem(load_model(name), module, params, spec)
        for a in SIM_ALPHAS:
            t0 = time.perf_counter()
            runs = [problem.run(a, spec.N, s, n_test=50_000)["values"] for s in range(SEEDS)]
            v = np.array([r[key] for r in runs])
            q = np.array([r["q"] for r in runs])
            th = np.array([r["theta"] for r in runs])
            se = float(v.std(ddof=1) / math.sqrt(len(v)))
            theory = next(r["value"] for r in rows if r["model"] == name and r["kind"] == "theory" and r["alpha"] == a)
            rows.append(dict(model=name, kind="simulation", alpha=float(a), value=float(v.mean()), error=se,
                             q=float(q.mean()), theta=float(th.mean()), z=(float(v.mean()) - theory) / se))
            say(f"{name} alpha={a:g}: simulation {v.mean():.4f} ± {rows[-1]['error']:.4f}, "
                f"{time.perf_counter() - t0:.1f} s")
    return rows


def rf_curve(say=print) -> list[dict]:
    """Theory (p, d -> oo) and finite-d simulation rows of the random-features double descent."""
    import sympy as sp
    from sklearn.linear_model import Ridge

    from replica.registry import load_module
    from replica.numeric.solver import Solver
    from replica.registry.spectral import activation_coefficients, gcm_module
    from replica.numeric.spectrum import random_features

    z = sp.Symbol("z", real=True)
    ge = activation_coefficients(sp.tanh(z), z)
    ridge = load_module("ridge")
    params = {"lam": RF["lam"], "Delta": RF["Delta"]}
    rows = []
    d = RF["d_theory"]
    for c in RF_THEORY_RATIOS:
        p = int(round(c * d))
        fp = Solver(gcm_module(ridge, random_features(ge, p, d)), params, tol=1e-10).solve(RF["alpha_d"] * d / p)
        rows.append(dict(kind="theory", p_over_d=p / d, value=fp.eps_g, error=0.0, kappa0=ge.kappa0,
                         kappa1=ge.kappa1, kappa_star=ge.kappa_star))
    d = RF["d_sim"]
    n = int(round(RF["alpha_d"] * d))
    for c in RF_SIM_RATIOS:
        p = int(round(c * d))
        errs = []
        for s in range(RF["draws"]):
            r = np.random.default_rng([s, p])
            F = r.standard_normal((p, d))
            theta = r.standard_normal(d)
            theta *= math.sqrt(d) / np.linalg.norm(theta)
            Z, Zt = r.standard_normal((n, d)), r.standard_normal((20_000, d))
            X, Xt = (np.tanh(A @ F.T / math.sqrt(d)) / math.sqrt(p) for A in (Z, Zt))
            y, yt = (A @ theta / math.sqrt(d) + math.sqrt(RF["Delta"]) * r.standard_normal(len(A)) for A in (Z, Zt))
            w = Ridge(alpha=RF["lam"], fit_intercept=False, solver="cholesky").fit(X, y).coef_
            errs.append(0.5 * np.mean((yt - Xt @ w) ** 2))
        e = np.array(errs)
        rows.append(dict(kind="simulation", p_over_d=p / d, value=float(e.mean()),
                         error=float(e.std(ddof=1) / math.sqrt(len(e))), kappa0="", kappa1="", kappa_star=""))
        say(f"random features p/d={p / d:g}: simulation {e.mean():.4f} ± {rows[-1]['error']:.4f}")
    return rows


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def read_csv(path: Path) -> list[dict]:
    """The rows of a CSV written by :func:`write_csv`, numbers as floats."""
    def num(v: str):
        try:
            return float(v)
        except ValueError:
            return v

    with open(path, newline="", encoding="utf-8") as fh:
        return [{k: num(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def plot_power_law(rows: Sequence[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, (name, (_, key)) in zip(axes, MODELS.items()):
        th = [r for r in rows if r["model"] == name and r["kind"] == "theory"]
        sim = [r for r in rows if r["model"] == name and r["kind"] == "simulation"]
        ax.plot([r["alpha"] for r in th], [r["value"] for r in th], "-", label="theory (replica solve --spectrum)")
        ax.errorbar([r["alpha"] for r in sim], [r["value"] for r in sim], yerr=[r["error"] for r in sim], fmt="o",
                    capsize=3, label=f"ERM, N = {POWER_LAW['N']}, {SEEDS} seeds")
        ax.set_xscale("log")
        ax.set_xticks([0.2, 0.5, 1, 2, 5])
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(r"$\alpha = n/N$")
        ax.set_ylabel(key)
        ax.set_title(f"{name}, power law $\\lambda_k \\propto k^{{-{POWER_LAW['exponent']}}}$")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_rf(rows: Sequence[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    th = [r for r in rows if r["kind"] == "theory"]
    sim = [r for r in rows if r["kind"] == "simulation"]
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot([r["p_over_d"] for r in th], [r["value"] for r in th], "-", label="theory (Gaussian equivalence)")
    ax.errorbar([r["p_over_d"] for r in sim], [r["value"] for r in sim], yerr=[r["error"] for r in sim], fmt="o",
                capsize=3, label=f"ridge on tanh features, d = {RF['d_sim']}")
    ax.axvline(RF["alpha_d"], color="grey", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_xlabel("p / d")
    ax.set_ylabel("eps_g")
    ax.set_title(f"random-features ridge, n/d = {RF['alpha_d']:g}, lambda = {RF['lam']:g}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.structured_data", description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=("power_law", "rf"), default=None, help="one of the two figures")
    ap.add_argument("--replot", action="store_true", help="redraw the figures from their CSVs (no computation)")
    args = ap.parse_args(argv)
    FIGURES.mkdir(parents=True, exist_ok=True)
    if args.replot:
        plot_power_law(read_csv(FIGURES / "structured_power_law.csv"), FIGURES / "structured_power_law.png")
        plot_rf(read_csv(FIGURES / "rf_double_descent.csv"), FIGURES / "rf_double_descent.png")
        return 0
    if args.only in (None, "power_law"):
        rows = power_law_curves()
        write_csv(FIGURES / "structured_power_law.csv", rows)
        plot_power_law(rows, FIGURES / "structured_power_law.png")
    if args.only in (None, "rf"):
        rows = rf_curve()
        write_csv(FIGURES / "rf_double_descent.csv", rows)
        plot_rf(rows, FIGURES / "rf_double_descent.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

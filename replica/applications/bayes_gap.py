"""The gap between empirical risk minimisation and Bayes-optimal inference: figures for the GLM canon and the committee.

For each model, on a grid of ``alpha``, the test error of the empirical-risk estimator at the declaration's
parameters (``replica solve MODEL``) beside the Bayes-optimal one (``replica solve MODEL --bayes``): the
classification error for a discrete label, ``eps_g`` of the declared square loss for a continuous one. The
committee panel marks ``alpha_spec`` (``replica phase committee_sign --bayes``). Each figure is a PNG with the CSV
behind it::

    python -m replica.applications.bayes_gap --out docs/figures [--quick]

(docs/how-to/bayes_optimal.md shows them.)
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

#: the GLM canon: (model, the quantity compared, its label in the figure)
CANON = (("ridge", "eps_g", "ridge (square loss)"), ("lasso", "eps_g", "LASSO (square loss)"),
         ("logistic", "classification_error", "logistic"), ("hinge", "classification_error", "SVM (hinge)"),
         ("perceptron_probit", "classification_error", "logistic, probit teacher"),
         ("binary_perceptron", "classification_error", "SVM, +-1 teacher"))
COMMITTEE = "committee_sign"


def _erm(name: str, alphas: Sequence[float], key: str) -> list[float | None]:
    from ..errors import ReplicaError
    from ..numeric.point import PointOptions, solve_point
    from ..registry import load_module

    module = load_module(name)
    options = PointOptions(error_bars=False, replicon=False, companion_residual=False)
    out = []
    for a in alphas:
        try:
            out.append(float(solve_point(module, {}, a, options).fp.observables[key]))
        except ReplicaError:
            out.append(None)
    return out


def _bayes(name: str, alphas: Sequence[float], key: str) -> list[float | None]:
    from ..registry.bayes import load_bayes
    from ..errors import ReplicaError
    from ..numeric.bayes import BayesSolver

    solver = BayesSolver(load_bayes(name))
    out = []
    for a in alphas:
        try:
            out.append(float(getattr(solver.solve(a, "uninformed"), key)))
        except ReplicaError:
            out.append(None)
    return out


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rows:
            w.writerow(["" if v is None else (f"{v:.10g}" if isinstance(v, float) else v) for v in r])


def glm_figure(out: Path, alphas: Sequence[float], dpi: int, say) -> list[Path]:
    """``bayes_gap_glm.png`` and ``.csv``: ERM and Bayes-optimal errors of the canon along ``alpha``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = []
    fig, axes = plt.subplots(2, 3, figsize=(11, 6.5), sharex=True)
    for ax, (name, key, title) in zip(axes.ravel(), CANON):
        say(f"{name}: empirical risk and Bayes-optimal along alpha")
        erm, bo = _erm(name, alphas, key), _bayes(name, alphas, key)
        rows += [[name, key, a, e, b] for a, e, b in zip(alphas, erm, bo)]
        ax.plot(alphas, [np.nan if v is None else v for v in erm], "o-", ms=3, label="ERM (declared lambda)")
        ax.plot(alphas, [np.nan if v is None else v for v in bo], "s-", ms=3, label="Bayes-optimal")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(key.replace("_", " "))
        ax.set_yscale("log")
    for ax in axes[-1]:
        ax.set_xlabel(r"$\alpha = n/d$")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("Test error of empirical risk minimisation and the Bayes-optimal error", fontsize=11)
    fig.tight_layout()
    png, table = out / "bayes_gap_glm.png", out / "bayes_gap_glm.csv"
    fig.savefig(png, dpi=dpi)
    plt.close(fig)
    _write_csv(table, ["model", "quantity", "alpha", "erm", "bayes_optimal"], rows)
    return [png, table]


def committee_figure(out: Path, alphas: Sequence[float], dpi: int, say, erm_points: int) -> list[Path]:
    """``bayes_gap_committee.png`` and ``.csv``: the committee's test loss (the declared square loss) of empirical
    risk minimisation where it was solved and the Bayes-optimal one (its Bayes risk), and the Bayes-optimal
    classification error with the unspecialised fixed point and ``alpha_spec`` marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..registry.bayes import load_bayes
    from ..numeric.bayes import BayesSolver
    from ..phase.bayes import alpha_spec, unspecialised_point

    solver = BayesSolver(load_bayes(COMMITTEE))
    say(f"{COMMITTEE}: alpha_spec")
    a_spec, bar, why = alpha_spec(solver, float(alphas[0]), float(alphas[-1]), 12)
    say(f"{COMMITTEE}: Bayes-optimal along alpha")
    points = [solver.solve(a, "uninformed") for a in alphas]
    unsp = []
    for a in alphas:
        q, V = unspecialised_point(solver, a)
        unsp.append(solver.evaluate(q, V, a, "unspecialised"))
    erm_alphas = [float(a) for a in np.geomspace(alphas[0], alphas[-1], erm_points)] if erm_points else []
    say(f"{COMMITTEE}: empirical risk at {len(erm_alphas)} points")
    erm = _erm(COMMITTEE, erm_alphas, "eps_g") if erm_alphas else []
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4))
    ax0.plot(alphas, [p.eps_g for p in points], "s-", ms=3, label="Bayes-optimal (Bayes risk)")
    if erm:
        ax0.plot(erm_alphas, [np.nan if v is None else v for v in erm], "o-", ms=4, label="ERM (declared lambda)")
    ax0.set_ylabel("test loss (square loss of the label)")
    ax1.plot(alphas, [p.classification_error for p in points], "s-", ms=3, label="Bayes-optimal (AMP's state)")
    ax1.plot(alphas, [p.classification_error for p in unsp], "--", label="unspecialised fixed point")
    ax1.set_ylabel("classification error")
    for ax in (ax0, ax1):
        if a_spec is not None:
            ax.axvline(a_spec, color="gray", lw=0.8)
        ax.set_xlabel(r"$\alpha = n/d$")
        ax.legend(fontsize=8)
    if a_spec is not None:
        ax1.set_title(rf"$\alpha_\mathrm{{spec}} = {a_spec:.4f}$", fontsize=9)
    fig.suptitle("two-unit sign committee", fontsize=11)
    fig.tight_layout()
    png, table = out / "bayes_gap_committee.png", out / "bayes_gap_committee.csv"
    fig.savefig(png, dpi=dpi)
    plt.close(fig)
    rows = [["bayes_optimal", a, p.eps_g, p.classification_error, u.classification_error]
            for a, p, u in zip(alphas, points, unsp)]
    rows += [["erm", a, e, None, None] for a, e in zip(erm_alphas, erm)]
    rows.append(["alpha_spec", a_spec, bar, None, None])
    _write_csv(table, ["curve", "alpha", "eps_g", "classification_error", "unspecialised_classification_error"], rows)
    return [png, table]


def main(argv: Sequence[str] | None = None) -> int:
    """Draw both figures into ``--out``."""
    p = argparse.ArgumentParser(prog="python -m replica.applications.bayes_gap",
                                description="ERM against Bayes-optimal test errors for the GLM canon and the "
                                            "two-unit committee (PNG + CSV).")
    p.add_argument("--out", default="figures")
    p.add_argument("--quick", action="store_true", help="a coarse alpha grid")
    p.add_argument("--committee-erm-points", type=int, default=0, metavar="N",
                   help="empirical-risk solves of the committee to overlay (each takes tens of seconds; default 0)")
    p.add_argument("--dpi", type=int, default=150)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = 8 if args.quick else 16
    alphas = [float(a) for a in np.geomspace(0.25, 6.0, n)]

    def say(m: str) -> None:
        print(f"bayes_gap: {m}", file=sys.stderr)

    for path in glm_figure(out, alphas, args.dpi, say) + committee_figure(
            out, [float(a) for a in np.geomspace(0.5, 5.0, n)], args.dpi, say, args.committee_erm_points):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

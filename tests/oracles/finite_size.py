"""Oracle (state evolution) vs ERM (numerics/glm.py) at d = 200, 400, 800: the finite-size study
behind the GLM agreement test's tolerance (docs/reference/glm_references.md).

``python -m tests.oracles.finite_size run --csv docs/figures/glm_finite_size.csv`` runs every point of
:data:`POINTS` at each ``d`` with its seeds, one CSV row per run, resuming a partial file (rows already
there are skipped). ``python -m tests.oracles.finite_size summary --csv …`` prints, per point and
observable, the theory, the mean ± SE at each ``d``, the seed spread and the fits

* fluctuations ``std(d) = C_f d^{−1/2}`` (one-parameter weighted fit; the free exponent is printed too),
* bias ``mean(d) − theory = B/d`` (one-parameter weighted fit, with χ²/dof against the SEs),

and :func:`tolerance` turns them into the agreement test's bound at ``d`` with ``K`` seeds:
``4 C_f d^{−1/2} / √K + B_env / d`` with ``B_env = |B| + 2 B_se · max(1, √(χ²/dof))``, the largest
bias the three ``d``'s allow under the ``1/d`` law (an unresolved bias still gets its envelope; a
poor fit widens it).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from . import state_evolution

#: (id, model, alpha, parameters): two hard points (small penalty, large q) among ordinary ones.
POINTS: list[tuple[str, str, float, dict[str, float]]] = [
    ("ridge_a2", "ridge", 2.0, {"lam": 0.1, "Delta": 0.25}),
    ("logistic_a2", "logistic", 2.0, {"lam": 0.1}),
    ("logistic_a5_lam1e-3", "logistic", 5.0, {"lam": 1e-3}),
    ("hinge_a2", "hinge", 2.0, {"lam": 0.1}),
    ("hinge_a0.5_lam1e-3", "hinge", 0.5, {"lam": 1e-3}),
    ("lasso_a2_D0", "lasso", 2.0, {"lam1": 0.1, "Delta": 0.0}),
    ("lasso_a0.5_lam1_1", "lasso", 0.5, {"lam1": 1.0, "Delta": 0.25}),
    ("probit_a2", "perceptron_probit", 2.0, {"lam": 0.1, "Delta": 0.25}),
]
DS = (200, 400, 800)
SEEDS = (16, 10, 6)
N_TEST = 10000
#: ERM observable -> oracle key. The population test errors are exact given ŵ (no test-set noise).
OBSERVABLES = {"q": "q", "theta": "theta", "train_loss": "train_loss",
               "classification_error_population": "classification_error",
               "test_mse_population": "eps_g", "zero_fraction": "zero_fraction"}
FIELDS = ["point", "model", "alpha", "parameters", "d", "seed", "kkt_norm", "converged", "seconds",
          *OBSERVABLES, "classification_error", "test_mse"]
DEFAULT_CSV = Path(__file__).resolve().parents[2] / "docs" / "figures" / "glm_finite_size.csv"


def _point(pid: str) -> tuple[str, float, dict[str, float]]:
    for p, model, alpha, params in POINTS:
        if p == pid:
            return model, alpha, params
    raise KeyError(f"unknown point {pid!r}")


def run(csv_path: Path, ds=DS, seeds=SEEDS, points=None) -> None:
    """Run the study, appending to ``csv_path`` (rows present are skipped: a rerun resumes)."""
    from numerics.glm import run_seed

    done = set()
    if csv_path.exists():
        with open(csv_path) as f:
            done = {(r["point"], int(r["d"]), int(r["seed"])) for r in csv.DictReader(f)}
    new = not csv_path.exists()
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        for pid, model, alpha, params in POINTS:
            if points and pid not in points:
                continue
            for d, k in zip(ds, seeds):
                for seed in range(k):
                    if (pid, d, seed) in done:
                        continue
                    r = run_seed(model, alpha, d, params, seed, n_test=N_TEST)
                    row = {"point": pid, "model": model, "alpha": alpha, "parameters": json.dumps(params), "d": d,
                           "seed": seed, **{k2: r.get(k2, "") for k2 in FIELDS if k2 in r}}
                    w.writerow(row)
                    f.flush()
                    print(f"[finite_size] {pid} d={d} seed={seed}: q={r['q']:.5g} theta={r['theta']:.5g} "
                          f"kkt={r['kkt_norm']:.1e} {r['seconds']:.1f}s", file=sys.stderr, flush=True)


def load(csv_path: Path = DEFAULT_CSV) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """Rows grouped by point and d."""
    out: dict[str, dict[int, list[dict[str, Any]]]] = {}
    with open(csv_path) as f:
        for r in csv.DictReader(f):
            out.setdefault(r["point"], {}).setdefault(int(r["d"]), []).append(r)
    return out


def analyse(csv_path: Path = DEFAULT_CSV) -> dict[str, dict[str, dict[str, Any]]]:
    """Per point and observable: theory, per-d mean/SE/std/bias and the two fits."""
    data = load(csv_path)
    result: dict[str, dict[str, dict[str, Any]]] = {}
    for pid, by_d in data.items():
        model, alpha, params = _point(pid)
        th = state_evolution(model, alpha, **params)
        result[pid] = {}
        for obs, key in OBSERVABLES.items():
            if key not in th or by_d[min(by_d)][0].get(obs, "") == "":
                continue
            ds, mean, se, std, kk = [], [], [], [], []
            for d in sorted(by_d):
                v = np.array([float(r[obs]) for r in by_d[d]])
                ds.append(d), mean.append(v.mean()), std.append(v.std(ddof=1)), kk.append(v.size)
                se.append(std[-1] / math.sqrt(v.size))
            ds_a, mean_a, se_a, std_a, k_a = map(np.array, (ds, mean, se, std, kk))
            bias = mean_a - th[key]
            # fluctuations: std = C_f d^{-1/2}; weights from the relative error 1/sqrt(2(K-1)) of a sample std
            wf = 2 * (k_a - 1)
            logc = np.sum(wf * (np.log(std_a) + 0.5 * np.log(ds_a))) / np.sum(wf)
            gamma = -np.polyfit(np.log(ds_a), np.log(std_a), 1, w=np.sqrt(wf))[0] if len(ds) > 2 else float("nan")
            # bias: B/d, weighted by 1/SE^2
            x = 1.0 / ds_a
            wb = 1.0 / se_a ** 2
            B = float(np.sum(wb * x * bias) / np.sum(wb * x * x))
            B_se = float(1.0 / math.sqrt(np.sum(wb * x * x)))
            chi2 = float(np.sum(wb * (bias - B * x) ** 2) / max(1, len(ds) - 1))
            B_env = abs(B) + 2 * B_se * max(1.0, math.sqrt(chi2))
            result[pid][obs] = {"theory": th[key], "d": ds, "mean": mean, "se": se, "std": std, "seeds": kk,
                                "bias": bias.tolist(), "C_f": float(math.exp(logc)), "gamma_f": float(gamma),
                                "B": B, "B_se": B_se, "chi2_dof": chi2, "B_env": B_env}
    return result


def tolerance(stats: dict[str, Any], d: int, seeds: int) -> float:
    """Agreement bound for a mean over ``seeds`` runs at ``d`` (see the module docstring)."""
    return 4.0 * stats["C_f"] / math.sqrt(d) / math.sqrt(seeds) + stats["B_env"] / d


def _markdown(res) -> str:
    lines = ["| point | observable | theory | " + " | ".join(f"d={d}: mean − theory ± SE (K)" for d in DS)
             + " | std·√d (C_f) | γ_f | B (bias·d) | χ²/dof | B_env |",
             "|---|---|---|" + "---|" * len(DS) + "---|---|---|---|---|"]
    for pid, obs in res.items():
        for o, s in obs.items():
            cells = []
            for d in DS:
                if d in s["d"]:
                    i = s["d"].index(d)
                    cells.append(f"{s['bias'][i]:+.2e} ± {s['se'][i]:.1e} ({s['seeds'][i]})")
                else:
                    cells.append("–")
            lines.append(f"| {pid} | {o} | {s['theory']:.6g} | " + " | ".join(cells)
                         + f" | {s['C_f']:.3g} | {s['gamma_f']:.2f} | {s['B']:+.3g} ± {s['B_se']:.2g} | "
                           f"{s['chi2_dof']:.2f} | {s['B_env']:.3g} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.oracles.finite_size", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run (or resume) the study")
    r.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    r.add_argument("--points", default="", help="comma-separated subset of point ids")
    r.add_argument("--ds", default=",".join(map(str, DS)), help="comma-separated dimensions (default %(default)s)")
    r.add_argument("--seeds", default=",".join(map(str, SEEDS)),
                   help="seeds per dimension, same length as --ds (default %(default)s); seeds already in the CSV "
                        "are skipped, so a larger count adds seeds")
    s = sub.add_parser("summary", help="fits and the Markdown table")
    s.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    s.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.cmd == "run":
        pts = [x for x in a.points.split(",") if x]
        bad = [x for x in pts if x not in {q[0] for q in POINTS}]
        if bad:
            p.exit(2, f"{p.prog}: error: --points: unknown point(s) {bad}\n")
        try:
            ds = [int(x) for x in a.ds.split(",")]
            seeds = [int(x) for x in a.seeds.split(",")]
        except ValueError:
            p.exit(2, f"{p.prog}: error: --ds/--seeds: expected comma-separated integers\n")
        if len(ds) != len(seeds) or min(ds) < 2 or min(seeds) < 1:
            p.exit(2, f"{p.prog}: error: --seeds: need one count >= 1 per dimension >= 2 in --ds\n")
        run(a.csv, ds, seeds, points=pts or None)
        return 0
    if not a.csv.exists():
        p.exit(2, f"{p.prog}: error: --csv: no such file {a.csv}\n")
    res = analyse(a.csv)
    print(json.dumps(res, indent=1) if a.json else _markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())

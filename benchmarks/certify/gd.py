"""Gradient descent (the ``numerics`` simulator) as the arbiter where the theory has several
candidates: runs, cached JSON, and the extrapolation in ``1/d``.

Runs (``python -m benchmarks.certify.gd run KIND``; each run is one ``python -m numerics.simulate
attention ... --json`` process, stored under ``results/gd/``):

* ``semantic_alpha0.5`` -- ``omega = 0.3``, ``alpha = 0.5``, init ``Q = Q*``, ``d = 400, 800, 1600``,
  2 seeds, up to 40 000 steps (the issue's ``theta ~ 0.06`` at ``d = 400`` came from 5 000 steps);
* ``positional_omega0.1`` -- ``omega = 0.1``, ``alpha = 0.7``, init positional and semantic,
  ``d = 1000, 2000``, 3 seeds: which positional solution GD reaches and its training loss.

The extrapolation fits ``y(d) = y_inf + c / d`` by weighted least squares over ``d`` (weights
from the seed standard errors) and reports ``y_inf`` with its standard error.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
GD_DIR = Path(__file__).resolve().parent / "results" / "gd"

KINDS = {
    "semantic_alpha0.5": [dict(omega=0.3, alpha=0.5, d=d, init="semantic", seeds=2, steps=40000)
                          for d in (400, 800, 1600)],
    "positional_omega0.1": [dict(omega=0.1, alpha=0.7, d=d, init=init, seeds=3, steps=20000)
                            for d in (1000, 2000) for init in ("positional", "semantic")],
    # Which prox convention describes gradient descent (docs/explanation/conventions.md): normalised teacher (rho = sigma^2
    # exactly, as the theory assumes), semantic initialisation, the sizes in increasing order so that a partial run
    # already gives a 1/d fit.
    # d = 4000 wants a GPU (benchmarks/cuda_check.sh shows how to run on one)
    "judge_omega0.3": [dict(omega=0.3, alpha=a, d=d, init="semantic", seeds=3, steps=30000, normalize=True)
                       for d in (500, 1000) for a in (0.6, 0.8, 1.0, 1.25)]
                      + [dict(omega=0.3, alpha=a, d=2000, init="semantic", seeds=3, steps=30000, normalize=True)
                         for a in (0.6, 0.8, 1.0, 1.25)],
}
#: the runs docs/reference/certified.md §7 renders (the judge runs render in docs/explanation/conventions.md)
CERTIFIED_KINDS = ("semantic_alpha0.5", "positional_omega0.1")


def _name(r: dict) -> str:
    tail = "_nt" if r.get("normalize") else ""
    return f"om{r['omega']}_a{r['alpha']}_d{r['d']}_{r['init']}_s{r['seeds']}_n{r['steps']}{tail}.json"


def run(kind: str) -> None:
    GD_DIR.mkdir(parents=True, exist_ok=True)
    for r in KINDS[kind]:
        out = GD_DIR / _name(r)
        if out.exists():
            continue
        cmd = [sys.executable, "-m", "numerics.simulate", "attention", "--omega", str(r["omega"]),
               "--alpha", str(r["alpha"]), "--d", str(r["d"]), "--init", r["init"], "--seeds", str(r["seeds"]),
               "--steps", str(r["steps"]), "--json", "--quiet"] + ([] if r.get("normalize") else ["--iid-teacher"])
        print("running", " ".join(cmd[2:]), file=sys.stderr, flush=True)
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ))
        if res.returncode != 0:
            raise RuntimeError(res.stderr.strip().splitlines()[-1])
        out.write_text(res.stdout)


def load_gd(kind: str) -> list[dict]:
    """Per run: means and standard errors over seeds of ``q, m, theta, e_t, eps_g``."""
    rows = []
    for r in KINDS[kind]:
        path = GD_DIR / _name(r)
        if not path.exists():
            continue
        d = json.loads(path.read_text())
        ps = d["per_seed"]
        row = dict(r)
        for k, src in (("q", "q"), ("m", "m"), ("theta", "theta"), ("e_t", "train_loss"), ("eps_g", "eps_g")):
            v = np.asarray(ps[src], dtype=float)
            row[k] = float(v.mean())
            row[k + "_se"] = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
            row[k + "_seeds"] = v.tolist()
        row["converged"] = bool(all(ps["converged"]))
        row["steps_used"] = ps["steps"]
        rows.append(row)
    return rows


def extrapolate(rows: list[dict], key: str) -> tuple[float, float]:
    """``y_inf`` and its standard error from ``y = y_inf + c/d`` (weighted least squares)."""
    d = np.array([r["d"] for r in rows], float)
    y = np.array([r[key] for r in rows])
    se = np.array([r[key + "_se"] for r in rows])
    se = np.where(np.isfinite(se) & (se > 0), se, np.nanmax(np.where(np.isfinite(se), se, 0)) or 1e-3)
    X = np.stack([np.ones_like(d), 1 / d], axis=1)
    W = 1 / se ** 2
    cov = np.linalg.inv(X.T @ (W[:, None] * X))
    beta = cov @ (X.T @ (W * y))
    return float(beta[0]), float(np.sqrt(cov[0, 0]))


def gd_markdown(kinds=CERTIFIED_KINDS) -> str:
    lines = []
    for kind in kinds:
        rows = load_gd(kind)
        if not rows:
            lines.append(f"*{kind}: not run yet (`python -m benchmarks.certify.gd run {kind}`).*\n")
            continue
        lines.append(f"**{kind}** (mean ± standard error over seeds)\n")
        lines.append("| init | d | steps (per seed) | q | m | θ | e_t | ε_g |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for r in sorted(rows, key=lambda r: (r["init"], r["d"])):
            lines.append(f"| {r['init']} | {r['d']} | {r['steps_used']} | {r['q']:.4f} ± {r['q_se']:.4f} | "
                         f"{r['m']:.4f} ± {r['m_se']:.4f} | {r['theta']:.4f} ± {r['theta_se']:.4f} | "
                         f"{r['e_t']:.4e} ± {r['e_t_se']:.1e} | {r['eps_g']:.4e} ± {r['eps_g_se']:.1e} |")
        for init in sorted({r["init"] for r in rows}):
            sub = [r for r in rows if r["init"] == init]
            if len(sub) >= 2:
                ext = {k: extrapolate(sub, k) for k in ("q", "m", "theta", "e_t")}
                lines.append("| " + init + " | ∞ (fit c/d) | | " + " | ".join(
                    f"{ext[k][0]:.4f} ± {ext[k][1]:.4f}" if k != "e_t" else f"{ext[k][0]:.4e} ± {ext[k][1]:.1e}"
                    for k in ("q", "m", "theta", "e_t")) + " | |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.certify.gd", description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["run", "show"])
    ap.add_argument("kind", choices=sorted(KINDS))
    a = ap.parse_args(argv)
    if a.action == "run":
        run(a.kind)
    print(gd_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The error-bar protocol, measured (issue 14, item 3b): does the difference between the fixed point
at a working rule and at a refined rule cover the true error?

For each point of the table (reference values from ``results/points.jsonl``):

* ``replica gh:N`` -- ``replica solve ... --quadrature gh:N --json`` (the library as it is: tensor
  Gauss-Hermite, three prox starts), N = 10, 14, 18;
* ``tensor N`` -- the reference code's tensor Gauss-Hermite with the five structured starts and
  ties averaged (what the library's rule becomes with the global prox of item 3a), N = 10, 14, 18.

A rung ``N -> N'`` *covers* a quantity when ``|x_N - x_N'| >= |x_N - x_ref|`` (the refinement
difference, used as the error bar of ``x_N``, is at least the true error): "yes" when that holds
for any reference within its own bar ``|fine - check|``, "no" when it fails for all of them,
"undecided" otherwise. Writes
``docs/figures/certified_ladder.csv``; ``python -m benchmarks.certify.ladder``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from . import study
from .energetic import TensorGH
from .fixedpoint import NotConverged, solve
from .report import FIG, write_csv

ORDERS = (10, 14, 18)
QUANTS = ("q", "V", "m", "theta", "phi", "eps_g")
CSV_COLUMNS = ["label", "rule", "order", "refined"] + [f"{q}_{s}" for q in QUANTS for s in ("err", "bar", "covered")]


def replica_rule(omega, A, branch, alpha, order) -> dict:
    def compute():
        root = Path(__file__).resolve().parents[2]
        cmd = [sys.executable, "-m", "replica", "solve", "attention", "--omega", repr(omega), "--alpha", repr(alpha),
               "--branch", branch, "--quadrature", f"gh:{order}", "--json"]
        if [list(r) for r in A] != [list(r) for r in study.PAPER_A]:
            cmd += ["--A", ",".join(repr(float(v)) for r in A for v in r)]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
        study.log("ladder: " + " ".join(cmd[3:]))
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env)
        if r.returncode != 0:
            return dict(error=(r.stderr.strip().splitlines() or ["?"])[-1])
        d = json.loads(r.stdout)
        return {k: d.get(k) for k in QUANTS + ("converged", "seconds")}

    return study.cached("replica_rule", compute, omega=omega, A=[list(r) for r in A], branch=branch,
                        alpha=float(alpha), order=order)


def tensor_rule(omega, A, branch, alpha, order, x0) -> dict:
    p = study.params(omega, A)

    def compute():
        study.log(f"ladder: tensor {order} {branch} omega={omega} alpha={alpha}")
        try:
            s = solve(alpha, x0, branch, p, TensorGH(order, certify=False), tol=1e-9)
        except NotConverged as exc:
            return dict(error=str(exc))
        d = s.as_dict()
        return {k: d[k] for k in QUANTS + ("seconds",)}

    return study.cached("tensor_rule", compute, omega=omega, A=[list(r) for r in A], branch=branch,
                        alpha=float(alpha), order=order)


def run(only=None, kinds=("replica", "tensor")) -> list[dict]:
    """Ladder rows for the table points whose reference is cached (``only``: label substrings)."""
    rows = []
    for label, omega, A, branch, alpha, start in study.TABLE_POINTS:
        if only and not any(o in label for o in only):
            continue
        fine_rule = study.RULE_PAIRS[branch][1]
        if not _has(omega, A, branch, alpha, fine_rule):
            continue
        fine = study.fixed_point(omega, A, branch, alpha, None, fine_rule)
        check = study.fixed_point(omega, A, branch, alpha, None, study.RULE_PAIRS[branch][0])
        for kind in kinds:
            vals = {}
            try:
                for n in ORDERS:
                    vals[n] = (replica_rule(omega, A, branch, alpha, n) if kind == "replica"
                               else tensor_rule(omega, A, branch, alpha, n, fine["x"]))
            except study.MissingPoint:
                continue
            for n, n2 in zip(ORDERS[:-1], ORDERS[1:]):
                a, b = vals[n], vals[n2]
                row = dict(label=label, rule=kind, order=n, refined=n2)
                if "error" in a or "error" in b:
                    row["error"] = a.get("error") or b.get("error")
                    rows.append(row)
                    continue
                for qn in QUANTS:
                    ref = fine[qn]
                    if ref == 0.0:
                        continue
                    err = abs(a[qn] - ref)
                    bar = abs(a[qn] - b[qn])
                    ref_bar = abs(ref - check[qn])
                    row[qn + "_err"] = err / abs(ref)
                    row[qn + "_bar"] = bar / abs(ref)
                    # covered / not covered only where the reference's own bar cannot decide
                    row[qn + "_covered"] = ("yes" if bar >= err + ref_bar else
                                            "no" if bar < err - ref_bar else "undecided")
                row["seconds"] = a.get("seconds")
                rows.append(row)
    return rows


def _has(omega, A, branch, alpha, rule_name) -> bool:
    k = study._key(kind="fixed_point", omega=omega, A=[list(r) for r in A], branch=branch, alpha=float(alpha),
                   rule=rule_name)
    return k in study.load_store()


def markdown(rows: list[dict]) -> str:
    lines = ["| point | rule | N → N′ | " + " | ".join(f"{q}: err / bar" for q in QUANTS) + " |",
             "|---|---|---|" + "---|" * len(QUANTS)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['label']} | {r['rule']} | {r['order']} → {r['refined']} | failed: {r['error']} |")
            continue
        cells = []
        for q in QUANTS:
            if q + "_err" not in r:
                cells.append("—")
                continue
            mark = {"yes": "", "no": " **✗**", "undecided": " ?"}[r[q + "_covered"]]
            cells.append(f"{r[q + '_err']:.1e} / {r[q + '_bar']:.1e}{mark}")
        lines.append(f"| {r['label']} | {r['rule']} | {r['order']} → {r['refined']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.certify.ladder", description=__doc__.splitlines()[0])
    ap.add_argument("--points", default="", help="table rows whose label contains one of these")
    ap.add_argument("--rules", default="replica,tensor", help="comma-separated: replica, tensor")
    a = ap.parse_args(argv)
    kinds = tuple(k for k in a.rules.split(",") if k)
    bad = set(kinds) - {"replica", "tensor"}
    if bad:
        print(f"python -m benchmarks.certify.ladder: error: --rules: unknown {sorted(bad)}", file=sys.stderr)
        return 2
    rows = run([p for p in a.points.split(",") if p] or None, kinds)
    write_csv(FIG / "certified_ladder.csv", rows, CSV_COLUMNS)
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

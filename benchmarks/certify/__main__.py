"""``python -m benchmarks.certify``: regenerate the tables and figures of ``docs/reference/certified.md``.

Every reference fixed point is cached in ``benchmarks/certify/results/points.jsonl`` (committed),
so a rerun only renders (seconds); ``--recompute`` moves the cache aside and recomputes everything
(hours on 2 cores). ``--only table,branch,thresholds,ladder,gd`` restricts the tasks; ``--check``
renders from the cache alone and fails if ``docs/reference/certified.md`` is not current (the slow test).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time

from . import report, study


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.certify", description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="table,branch,thresholds,ladder,gd",
                    help="comma-separated tasks: table, branch, thresholds, ladder, gd")
    ap.add_argument("--points", default="", help="table rows whose label contains one of these (comma-separated)")
    ap.add_argument("--omegas", default="", help="comma-separated omegas for the thresholds task (default: the "
                    "grid 0, 0.05, ..., 0.45; an omega not in the cache is solved from the library's phase "
                    "diagram as anchors, 5-40 CPU-minutes each)")
    ap.add_argument("--recompute", action="store_true", help="ignore the committed cache (hours)")
    ap.add_argument("--cache-only", action="store_true",
                    help="render from the cache only; a missing point is an error (exit 1) instead of a computation")
    ap.add_argument("--check", action="store_true",
                    help="cache only, write nothing; exit 1 if docs/reference/certified.md differs from the rendering")
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite the tables in docs/reference/certified.md")
    a = ap.parse_args(argv)
    tasks = {t.strip() for t in a.only.split(",") if t.strip()}
    bad = tasks - {"table", "branch", "thresholds", "ladder", "gd"}
    if bad:
        print(f"python -m benchmarks.certify: error: --only: unknown task(s) {sorted(bad)}", file=sys.stderr)
        return 2
    if a.recompute and a.cache_only:
        print("python -m benchmarks.certify: error: --recompute and --cache-only exclude each other", file=sys.stderr)
        return 2
    study.CACHE_ONLY = a.cache_only or a.check
    if a.recompute and study.STORE.exists():
        shutil.move(str(study.STORE), str(study.STORE) + f".{int(time.time())}.bak")
    doc = original = report.DOC.read_text() if report.DOC.exists() else None
    write = not a.check
    if "table" in tasks:
        rows = study.table([p for p in a.points.split(",") if p] or None)
        if write:
            report.table_csv(rows)
            report.table_figure(rows, report.FIG / "certified_points.png")
        if doc is not None:
            doc = report.replace_block(doc, "TABLE", report.table_markdown(rows))
            doc = report.replace_block(doc, "VERDICT", report.verdict_markdown(rows))
    if "branch" in tasks:
        br = study.semantic_branch()
        rep_curve = [dict(alpha=al, **study.replica_or_missing(0.3, study.PAPER_A, "semantic", al))
                     for al in (2.0, 1.5, 1.25, 1.0, 0.9, 0.8, 0.76, 0.75, 0.74, 0.72, 0.7, 0.68)]
        from .gd import load_gd
        gd_rows = load_gd(kind="semantic_alpha0.5")
        if write:
            report.semantic_csv(br)
            report.semantic_figure(br, rep_curve, gd_rows, report.FIG / "certified_semantic_branch.png")
        if doc is not None:
            doc = report.replace_block(doc, "BRANCH", report.branch_markdown(br, rep_curve))
    if "thresholds" in tasks:
        oms = [float(o) for o in a.omegas.split(",") if o] or list(study.OMEGAS)
        rep = report.replica_phase_table()
        rows = study.thresholds(oms, replica_rows=rep)
        if write:
            report.thresholds_csv(rows)
            report.thresholds_figure(rows, rep, report.FIG / "certified_phase_diagram.png")
        if doc is not None:
            doc = report.replace_block(doc, "THRESHOLDS", report.thresholds_markdown(rows, rep))
    if "ladder" in tasks:
        from . import ladder
        lrows = ladder.run([p for p in a.points.split(",") if p] or None, kinds=("replica",))
        if write:
            report.write_csv(report.FIG / "certified_ladder.csv", lrows, ladder.CSV_COLUMNS)
        if doc is not None:
            doc = report.replace_block(doc, "LADDER", ladder.markdown(lrows))
    if "gd" in tasks:
        from .gd import gd_markdown
        if doc is not None:
            doc = report.replace_block(doc, "GD", gd_markdown())
    if a.check:
        if doc != original:
            print("python -m benchmarks.certify: docs/reference/certified.md is not current: run python -m benchmarks.certify",
                  file=sys.stderr)
            return 1
        return 0
    if doc is not None and not a.no_doc:
        report.DOC.write_text(doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

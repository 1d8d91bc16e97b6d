"""Tables (CSV + the Markdown blocks of ``docs/reference/certified.md``) and figures of the certified study."""
from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FIG = ROOT / "docs" / "figures"
DOC = ROOT / "docs" / "reference" / "certified.md"


def fmt(v: float, bar: float | None = None) -> str:
    """``value ± bar`` with the bar to 2 significant digits and the value to the same decimal."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if bar is None or bar <= 0 or not math.isfinite(bar):
        return f"{v:.6g}"
    e = math.floor(math.log10(bar)) - 1
    scale = 10.0 ** e
    b = math.ceil(bar / scale) * scale
    if abs(v) >= 1e-2 or v == 0:
        d = max(0, -e)
        return f"{v:.{d}f} ± {b:.{max(0, -e)}f}"
    # small numbers: common exponent
    ex = math.floor(math.log10(abs(v)))
    d = max(0, ex - e)
    return f"({v / 10 ** ex:.{d}f} ± {b / 10 ** ex:.{d}f})e{ex}"


def rel_diff(a, b) -> str:
    if a is None or b is None:
        return "—"
    if b == 0:
        return "—" if a == 0 else "∞"
    return f"{(a - b) / abs(b):+.1e}"


def replace_block(text: str, name: str, body: str) -> str:
    pat = re.compile(rf"(<!-- BEGIN {name} -->\n)(.*?)(<!-- END {name} -->)", re.S)
    if not pat.search(text):
        raise KeyError(f"docs/reference/certified.md has no block {name}")
    return pat.sub(lambda m: m.group(1) + body.rstrip() + "\n" + m.group(3), text)


def write_csv(path: Path, rows: list[dict], cols: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for r in rows:
            w.writerow([r.get(c, "") for c in cols])


# ----------------------------------------------------------------------------- the table
QUANTS = ("q", "V", "m", "theta", "eps_g", "phi")


#: the paper's published numbers that this repository holds: docs/explanation/theory.md §6's orientation values at
#: its Fig. 2 point (the seed text has its tables and figures stripped); everything else "n/a"
PAPER = {"paper point (Fig. 2)": {"q": "≈ 0.11", "theta": "≈ 0.16", "eps_g": "≈ 1.4e-3"}}


def replica_bar(r: dict, qn: str) -> float | None:
    """``replica solve``'s own error bar on ``qn`` (its JSON ``errors``), or None."""
    b = (r.get("replica", {}).get("errors") or {}).get(qn)
    return float(b) if isinstance(b, (int, float)) and math.isfinite(b) else None


def covered(r: dict, qn: str) -> bool | None:
    """Whether ``|replica - reference|`` is within the sum of the two bars (None: not comparable)."""
    rep, b = r["replica"].get(qn), replica_bar(r, qn)
    if rep is None or b is None:
        return None
    return abs(rep - r["reference"][qn]) <= b + abs(r["bar"][qn])


def table_markdown(rows: list[dict]) -> str:
    lines = ["| point | quantity | reference ± bar | replica solve ± its bar | replica − ref (rel.) | bar / value "
             "| within the bars | paper |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['label']} | — | not solved: {r['error']} | — | — | — |")
            continue
        first = True
        for qn in QUANTS:
            v = r["reference"][qn]
            if qn in ("m", "theta") and _vanishes(r, qn):
                if v != 0.0:     # a free m/theta that converged to the agnostic subspace
                    rep = r["replica"].get(qn)
                    lines.append(f"| {r['label'] if first else ''} | {qn} | {v:.1e} (≈ 0: the agnostic state) | "
                                 f"{'—' if rep is None else f'{rep:.1e}'} | — | — | — | n/a |")
                    first = False
                continue
            b = r["bar"][qn]
            rep = r["replica"].get(qn) if "error" not in r["replica"] else None
            rb = replica_bar(r, qn)
            rep_s = "—" if rep is None else (fmt(rep, rb) if rb else "%.6g" % rep)
            cov = covered(r, qn)
            label = r["label"] if first else ""
            paper = PAPER.get(r["label"], {}).get(qn, "n/a")
            lines.append(f"| {label} | {qn} | {fmt(v, b)} | {rep_s} | {rel_diff(rep, v)} | "
                         f"{abs(b / v) if v else 0:.0e} | {'—' if cov is None else ('yes' if cov else '**no**')} "
                         f"| {paper} |")
            first = False
    return "\n".join(lines)


def _vanishes(r: dict, qn: str) -> bool:
    """``m`` or ``theta`` at the agnostic subspace (below 1e-6 of ``sqrt(q)``: Newton's round-off)."""
    return abs(r["reference"][qn]) < 1e-6 * math.sqrt(r["reference"]["q"])


def verdict_markdown(rows: list[dict]) -> str:
    """Per point: the largest ``|replica - reference|`` against the two bars (the reference's and
    ``replica solve``'s own), all relative, and the numbers where the difference exceeds their sum
    (``replica``'s bar broke its promise, or the reference's did)."""
    lines = ["| point | reference bar (max rel.) | replica's bar (max rel.) | replica − ref (max rel.) | "
             "max |replica − ref| / (both bars) | outside both bars | replica accuracy met |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r or "error" in r.get("replica", {}):
            lines.append(f"| {r['label']} | — | — | — | — | not compared: {r.get('error') or r['replica']['error']} "
                         "| — |")
            continue
        worst_b, worst_rb, worst_d, ratio, names = 0.0, 0.0, 0.0, 0.0, []
        for qn in QUANTS:
            v = r["reference"][qn]
            rep = r["replica"].get(qn)
            if not v or rep is None or (qn in ("m", "theta") and _vanishes(r, qn)):
                continue
            rb = replica_bar(r, qn) or 0.0
            b, d = abs(r["bar"][qn] / v), abs((rep - v) / v)
            worst_b, worst_rb, worst_d = max(worst_b, b), max(worst_rb, rb / abs(v)), max(worst_d, d)
            ratio = max(ratio, d / (b + rb / abs(v)) if b + rb else math.inf)
            if d > b + rb / abs(v):
                names.append(qn)
        out = ", ".join(names) if names else "none"
        met = r["replica"].get("accuracy_met")
        met_s = "—" if met is None else (f"yes ({r['replica'].get('accuracy'):g})" if met
                                          else f"no ({r['replica'].get('accuracy'):g})")
        lines.append(f"| {r['label']} | {worst_b:.1e} | {worst_rb:.1e} | {worst_d:.1e} | {ratio:.2f} | {out} "
                     f"| {met_s} |")
    return "\n".join(lines)


def table_figure(rows: list[dict], out: Path) -> None:
    """``replica - reference`` relative to the reference, per point and quantity, with the
    reference's bar drawn as an error bar around zero (symmetric log scale)."""
    import matplotlib
    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if "error" not in r and "error" not in r["replica"]]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(QUANTS)
    for j, qn in enumerate(QUANTS):
        xs, ds, bs, rbs = [], [], [], []
        for i, r in enumerate(ok):
            v, rep = r["reference"][qn], r["replica"].get(qn)
            if not v or rep is None or (qn in ("m", "theta") and _vanishes(r, qn)):
                continue
            xs.append(i + (j - len(QUANTS) / 2 + 0.5) * width)
            ds.append((rep - v) / abs(v))
            bs.append(abs(r["bar"][qn] / v))
            rbs.append((replica_bar(r, qn) or 0.0) / abs(v))
        ax.errorbar(xs, [0.0] * len(xs), yerr=bs, fmt="none", ecolor=f"C{j}", alpha=0.35, capsize=2, lw=3)
        ax.errorbar(xs, ds, yerr=rbs, fmt="o", color=f"C{j}", ms=4, capsize=2, label=qn)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.set_xticks(range(len(ok)))
    ax.set_xticklabels([r["label"] for r in ok], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("(replica − reference) / |reference|")
    ax.set_title("replica solve ± its error bar vs the certified reference (shaded at 0: the reference's bar)",
                 fontsize=9)
    ax.legend(fontsize=7, ncol=len(QUANTS))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    plt.close(fig)


def table_csv(rows: list[dict]) -> None:
    out = []
    for r in rows:
        if "error" in r:
            continue
        d = dict(label=r["label"], omega=r["omega"], A=json.dumps(r["A"]), branch=r["branch"], alpha=r["alpha"])
        for qn in QUANTS:
            d[qn] = r["reference"][qn]
            d[qn + "_bar"] = r["bar"][qn]
            d["replica_" + qn] = r["replica"].get(qn)
            d["replica_" + qn + "_bar"] = replica_bar(r, qn)
        out.append(d)
    cols = ["label", "omega", "A", "branch", "alpha"] + [c for qn in QUANTS
                                                         for c in (qn, qn + "_bar", "replica_" + qn, "replica_" + qn + "_bar")]
    write_csv(FIG / "certified_points.csv", out, cols)


# ----------------------------------------------------------------------------- the semantic branch
def semantic_figure(branch: dict, replica_curve: list[dict], gd: list[dict], out: Path) -> None:
    import matplotlib
    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = sorted(branch["points"], key=lambda r: r["theta"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ax = axes[0]
    ax.plot([r["alpha"] for r in pts], [r["theta"] for r in pts], "o-", color="C0", ms=4,
            label="semantic branch, reference (θ-parametrised)")
    ab, abb = branch["alpha_b_fine"], branch["alpha_b_bar"]
    ax.plot([0.4, 2.4], [0, 0], "-", color="C2", lw=2, label="agnostic branch (θ = m = 0)")
    ax.errorbar([ab], [0], xerr=[abb], fmt="*", color="C3", ms=12, capsize=3,
                label=f"merger (pitchfork) α_b = {fmt(ab, abb)}")
    if replica_curve:
        rc = [r for r in replica_curve if r.get("converged")]
        ax.plot([r["alpha"] for r in rc], [r["theta"] for r in rc], "x--", color="C1", ms=5,
                label="replica solve --branch semantic (GH 14)")
    if gd:
        for g in gd:
            ax.errorbar([g["alpha"]], [g["theta"]], yerr=[g["theta_se"]], fmt="s", color="k", ms=4, capsize=2)
        ax.plot([], [], "s", color="k", ms=4, label="GD from Q = Q*, d = 400–1600")
    ax.set_xlabel("α")
    ax.set_ylabel("θ")
    ax.set_xlim(0.4, 2.3)
    ax.set_ylim(-0.005, 0.17)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"ω = {branch['omega']}: the semantic branch ends on the agnostic one")
    ax = axes[1]
    small = [r for r in pts if r["theta"] <= 0.06]
    ax.plot([r["theta"] ** 2 for r in small], [r["alpha"] for r in small], "o", color="C0",
            label="reference")
    tt = np.linspace(0, max(r["theta"] for r in small), 100)
    ax.plot(tt ** 2, branch["alpha_b"] + branch["c2"] * tt ** 2 + branch["c4"] * tt ** 4, "-", color="C3",
            lw=0.8, label="α_b + c₂θ² + c₄θ⁴ (least squares, 5 smallest θ)")
    ax.set_xlabel("θ²")
    ax.set_ylabel("α")
    ax.set_title("α(θ) is even and monotone: no fold")
    ax.legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    plt.close(fig)


def semantic_csv(branch: dict) -> None:
    cols = ["theta", "alpha", "q", "V", "phi", "eps_g", "residual"]
    write_csv(FIG / "certified_semantic_branch.csv", sorted(branch["points"], key=lambda r: -r["theta"]), cols)


# ----------------------------------------------------------------------------- thresholds
def thresholds_markdown(rows: list[dict], replica_rows: dict) -> str:
    lines = ["| ω | α_c reference | α_c replica (figures, GH 12) | α_l reference | α_l replica (figures) | ε_lin | "
             "m of the positional solution at α_c |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        rep = replica_rows.get(round(r["omega"], 6), {})
        cells = []
        for name in ("alpha_c", "alpha_l"):
            rv = rep.get(name)
            if name in r:
                cells.append(fmt(r[name], r[name + "_bar"]))
                cells.append("—" if rv is None else "%.4f (%s)" % (rv, rel_diff(rv, r[name])))
            else:
                cells.append(r.get(name + "_error", "—"))
                cells.append("—" if rv is None else "%.4f" % rv)
        el = f"{r['eps_lin']:.6e}" if "eps_lin" in r else "—"
        mp = f"{r['m_pos']:.4f}" if "m_pos" in r else "—"
        lines.append(f"| {r['omega']:g} | " + " | ".join(cells) + f" | {el} | {mp} |")
    return "\n".join(lines)


def thresholds_csv(rows: list[dict]) -> None:
    cols = ["omega", "alpha_c", "alpha_c_bar", "alpha_c_trunc", "alpha_l", "alpha_l_bar", "eps_lin", "m_pos",
            "theta_sem", "eps_g_at_alpha_c"]
    write_csv(FIG / "certified_thresholds.csv", rows, cols)


def thresholds_figure(rows: list[dict], replica_rows: dict, out: Path) -> None:
    """Left: the thresholds (reference with bars, the library's figures as lines); right: the
    reference's bars and ``replica figures - reference``, relative (the bars are invisible on the
    left's scale)."""
    import matplotlib
    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4.2))
    ro = sorted(replica_rows)
    ax.plot(ro, [replica_rows[o]["alpha_c"] for o in ro], "x--", color="C0", alpha=0.6, label="α_c replica (GH 12)")
    ax.plot(ro, [replica_rows[o]["alpha_l"] for o in ro], "+--", color="C1", alpha=0.6, label="α_l replica (GH 12)")
    for k, (name, mk, col) in enumerate((("alpha_c", "o", "C0"), ("alpha_l", "s", "C1"))):
        ok = [r for r in rows if name in r]
        label = name.replace("alpha_", "α_")
        ax.errorbar([r["omega"] for r in ok], [r[name] for r in ok], yerr=[r[name + "_bar"] for r in ok],
                    fmt=mk, color=col, ms=5, capsize=3, label=f"{label} reference")
        xs = [r["omega"] + (k - 0.5) * 0.006 for r in ok]
        bx.errorbar(xs, [0.0] * len(ok), yerr=[r[name + "_bar"] / r[name] for r in ok], fmt="none", ecolor=col,
                    alpha=0.5, capsize=3, lw=3, label=f"{label} reference bar")
        rep = [(x, (replica_rows[round(r["omega"], 6)][name] - r[name]) / r[name]) for x, r in zip(xs, ok)
               if replica_rows.get(round(r["omega"], 6), {}).get(name) is not None]
        bx.plot([x for x, _ in rep], [d for _, d in rep], mk, color=col, ms=5, mfc="none",
                label=f"{label} replica figures − reference")
    ax.set_xlabel("ω")
    ax.set_ylabel("α")
    ax.legend(fontsize=8)
    ax.set_title("phase diagram, A = [[0.6, 0.4], [0.4, 0.6]]")
    bx.axhline(0, color="k", lw=0.5)
    bx.set_xlabel("ω")
    bx.set_ylabel("relative to the reference")
    bx.legend(fontsize=7)
    bx.set_title("reference bars and the library's figures (GH 12)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


def replica_phase_table() -> dict:
    """The committed ``replica figures`` phase diagram (docs/figures/fig3_right_phase_diagram.csv)."""
    path = FIG / "fig3_right_phase_diagram.csv"
    out = {}
    if path.exists():
        with open(path) as fh:
            for r in csv.DictReader(fh):
                out[round(float(r["omega"]), 6)] = dict(alpha_c=float(r["alpha_c"]) if r["alpha_c"] else None,
                                                        alpha_l=float(r["alpha_l"]) if r["alpha_l"] else None)
    return out


def branch_markdown(branch: dict, replica_curve: list[dict]) -> str:
    pts = sorted(branch["points"], key=lambda r: -r["theta"])
    lines = [f"Reference, rule `{branch['rule']}`, ω = {branch['omega']} (θ-parametrised; every row a solved "
             "fixed point, residual ≤ 1e-9):", "",
             "| θ | α | q | V | Φ | ε_g |", "|---|---|---|---|---|---|"]
    for r in pts:
        lines.append(f"| {r['theta']:g} | {r['alpha']:.6f} | {r['q']:.6f} | {r['V']:.4f} | {r['phi']:.7e} | "
                     f"{r['eps_g']:.6e} |")
    fp = branch["fine_point"]
    if fp is None:
        rule_txt = ("The fine-rule point that measures the rule part of the bar is not in the cache: "
                    f"α_b = {fmt(branch['alpha_b'], branch['alpha_b_bar'])} carries the fit part only; ")
    else:
        shift = fp["alpha"] - next(r["alpha"] for r in pts if r["theta"] == fp["theta"])
        rule_txt = (f"On the fine rule (n_t = 24) the θ = {fp['theta']:g} point sits at α = {fp['alpha']:.5f} "
                    f"(shift {shift:+.1e}), so **α_b = {fmt(branch['alpha_b_fine'], branch['alpha_b_bar'])}** "
                    "(bar: that rule shift plus the change of α_b when the fit drops its θ⁴ term and uses the three smallest θ); ")
    lines += ["", f"Least-squares fit over the five smallest θ: α_b = {branch['alpha_b']:.5f}, "
              f"α ≈ α_b + {branch['c2']:.2f} θ² + {branch['c4']:.0f} θ⁴. " + rule_txt +
              f"turning points of α along the branch: {branch['folds'] or 'none'}.", "",
              "replica solve --branch semantic (defaults, fresh process):", "",
              "| α | θ | q | V | converged | notes |", "|---|---|---|---|---|---|"]
    for r in replica_curve:
        if "error" in r:
            lines.append(f"| {r['alpha']} | — | — | — | error | {r['error']} |")
        else:
            lines.append(f"| {r['alpha']} | {r['theta']:.5f} | {r['q']:.5f} | {r['V']:.3f} | {r['converged']} | "
                         f"{'; '.join(r.get('notes') or [])[:80]} |")
    return "\n".join(lines)

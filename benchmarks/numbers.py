"""The numbers the README, the docs and the notebooks quote, from the computations that produce them.

``python -m benchmarks.numbers`` reads the committed results

* ``docs/figures/certified_thresholds.csv``, ``certified_points.csv`` and the certified study's point
  cache (``python -m benchmarks.certify --cache-only`` renders them; the reference with error bars),
* ``docs/figures/fig3_right_phase_diagram.csv`` (``replica figures --out docs/figures``: the figures'
  own thresholds, Gauss-Hermite of order 12, no jump check),

and writes ``docs/reference/numbers.json`` (every quantity: value, bar, the text quoted, its source
and the command that regenerates it), the table of ``docs/reference/numbers.md`` and the generated
blocks of the pages listed in :data:`BLOCKS`. ``--check`` only compares (exit 1 on a difference).

A page quotes a number as ``<!--n:KEY-->TEXT<!--/n-->`` (invisible when rendered), where ``TEXT``
is the entry's ``text``; ``tests/test_numbers.py`` fails when a marked number differs from its
entry, when a generated block is stale, or when a threshold is quoted without a marker.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIG = ROOT / "docs" / "figures"
JSON_PATH = ROOT / "docs" / "reference" / "numbers.json"
PAGE = ROOT / "docs" / "reference" / "numbers.md"

CERTIFY = "python -m benchmarks.certify --cache-only"
FIGURES = "replica figures --out docs/figures"
MARK = re.compile(r"<!--n:([^<>\n`]+?)-->([^<>\n`]*)<!--/n-->")
BLOCK = re.compile(r"(<!-- BEGIN numbers:(\w+) -->\n)(.*?)(<!-- END numbers:\2 -->)", re.S)


def _fmt(value: float, bar: float | None) -> str:
    from benchmarks.certify.report import fmt  # the certified tables' own format: one convention
    return fmt(value, bar)


def sci(value: float, digits: int = 5) -> str:
    """``1.9714·10⁻³`` (``digits`` significant digits)."""
    if value == 0:
        return "0"
    ex = math.floor(math.log10(abs(value)))
    mant = f"{value / 10 ** ex:.{digits - 1}f}"
    sup = str(ex).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{mant}·10{sup}"


def _rows(name: str) -> list[dict]:
    with open(FIG / name, newline="") as fh:
        return list(csv.DictReader(fh))


def _num(s: str) -> float | None:
    return float(s) if s not in ("", None) else None


def _entry(value, text, source, command, bar=None, what="") -> dict:
    return {"value": value, "bar": bar, "text": text, "what": what, "source": source, "command": command}


def collect() -> dict:
    """Every quoted quantity, keyed ``name@omega`` (or ``name@omega,branch,alpha``)."""
    out: dict[str, dict] = {}
    for r in _rows("certified_thresholds.csv"):
        w = float(r["omega"])
        src = f"docs/figures/certified_thresholds.csv (omega = {w:g})"
        for name, what in (("alpha_c", "α_c: Φ_semantic = Φ_positional (certified)"),
                           ("alpha_l", "α_l: ε_g of the global minimum = ε_g^lin (certified)")):
            v, b = _num(r[name]), _num(r[name + "_bar"])
            if v is not None:
                out[f"{name}@{w:g}"] = _entry(v, _fmt(v, b), src, CERTIFY, b, what)
        v = _num(r["eps_lin"])
        if v is not None:
            out[f"eps_lin@{w:g}"] = _entry(v, sci(v), src, CERTIFY, None, "ε_g^lin, the linear positional baseline")
    for r in _rows("certified_points.csv"):
        if r["label"] != "paper point (Fig. 2)":
            continue
        key = f"@{float(r['omega']):g},{r['branch']},{float(r['alpha']):g}"
        src = "docs/figures/certified_points.csv (paper point (Fig. 2))"
        for name in ("q", "V", "theta", "eps_g"):
            v, b = float(r[name]), float(r[name + "_bar"])
            out[name + key] = _entry(v, _fmt(v, b), src, CERTIFY, b, f"{name} at the paper's point (certified)")
        v, b = -float(r["phi"]), float(r["phi_bar"])
        out["e_t" + key] = _entry(v, _fmt(v, b), src, CERTIFY, b, "e_t = −Φ at the paper's point (certified)")
    for r in _rows("fig3_right_phase_diagram.csv"):
        w = float(r["omega"])
        src = f"docs/figures/fig3_right_phase_diagram.csv (omega = {w:g})"
        for name in ("alpha_c", "alpha_l", "semantic_spinodal"):
            v = _num(r[name])
            if v is not None:  # the figure legends print alpha_c, alpha_l with 3 decimals
                out[f"figure_{name}@{w:g}"] = _entry(v, f"{v:.3f}", src, FIGURES, None,
                                                     f"{name} of the figures (GH 12, no jump check)")
    for name in ("alpha_c", "alpha_l"):  # how far the figures' GH 12 thresholds are from the certified ones
        devs = {k.split("@")[1]: out[f"figure_{name}@{k.split('@')[1]}"]["value"] / e["value"] - 1
                for k, e in out.items() if k.startswith(name + "@") and f"figure_{name}@{k.split('@')[1]}" in out}
        w = max(devs, key=lambda k: abs(devs[k]))
        out[f"figure_{name}_max_deviation"] = _entry(
            100 * devs[w], f"{100 * abs(devs[w]):.1f} %", f"figure_{name}@{w} against {name}@{w}",
            "python -m benchmarks.numbers", None,
            f"largest relative deviation of the figures' {name} from the certified one (at omega = {w}, "
            + ("above" if devs[w] > 0 else "below") + ")")
    branch = _semantic_branch()
    v, b = branch["alpha_b_fine"], branch["alpha_b_bar"]
    out["alpha_b@0.3"] = _entry(v, _fmt(v, b), "benchmarks/certify/results/points.jsonl (semantic branch)",
                                CERTIFY, b, "α_b: the semantic branch merges into the agnostic one (certified)")
    return dict(sorted(out.items()))


def _semantic_branch() -> dict:
    from benchmarks.certify import study
    study.CACHE_ONLY = True  # read the committed cache, never compute (a missing point is an error)
    return study.semantic_branch()


# ----------------------------------------------------------------------------- generated blocks
def thresholds_block(numbers: dict) -> str:
    """The phase diagram's thresholds, certified and as the figures draw them."""
    ws = sorted({float(k.split("@")[1]) for k in numbers if k.startswith(("alpha_c@", "figure_alpha_c@"))})
    lines = ["| ω | α_c (certified) | α_c (figures) | α_l (certified) | α_l (figures) | semantic branch ends (figures) |",
             "|---|---|---|---|---|---|"]
    for w in ws:
        def t(key):
            e = numbers.get(f"{key}@{w:g}")
            return e["text"] if e else "—"
        lines.append(f"| {w:g} | {t('alpha_c')} | {t('figure_alpha_c')} | {t('alpha_l')} | {t('figure_alpha_l')} | "
                     f"{t('figure_semantic_spinodal')} |")
    return "\n".join(lines)


def all_table(numbers: dict) -> str:
    lines = ["| key | quoted as | what | source | regenerated by |", "|---|---|---|---|---|"]
    for k, e in numbers.items():
        lines.append(f"| `{k}` | {e['text']} | {e['what']} | `{e['source']}` | `{e['command']}` |")
    return "\n".join(lines)


#: generated blocks: (page, block name) -> renderer
BLOCKS = {
    ("docs/reference/numbers.md", "all"): all_table,
    ("docs/how-to/phase.md", "thresholds"): thresholds_block,
}


def render_blocks(text: str, page: str, numbers: dict) -> str:
    def sub(m):
        fn = BLOCKS.get((page, m.group(2)))
        if fn is None:
            raise KeyError(f"{page}: unknown generated block {m.group(2)!r}")
        return m.group(1) + fn(numbers).rstrip() + "\n" + m.group(4)
    return BLOCK.sub(sub, text)


def json_text(numbers: dict) -> str:
    return json.dumps(numbers, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.numbers", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 when a file would change")
    args = ap.parse_args(argv)
    numbers = collect()
    stale = []
    targets = {JSON_PATH: json_text(numbers)}
    for page in sorted({p for p, _ in BLOCKS}):
        path = ROOT / page
        targets[path] = render_blocks(path.read_text(), page, numbers)
    for path, text in targets.items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path.relative_to(ROOT).as_posix())
        if not args.check:
            path.write_text(text)
    if args.check and stale:
        print("stale: " + ", ".join(stale) + " (python -m benchmarks.numbers)", file=sys.stderr)
        return 1
    print(("rewrote " + ", ".join(stale)) if stale else "numbers current")
    return 0


if __name__ == "__main__":
    sys.exit(main())

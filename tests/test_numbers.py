"""Every number the README, the docs and the notebooks quote agrees with its generated source.

``docs/reference/numbers.json`` is written by ``python -m benchmarks.numbers`` from the committed
results (the certified study's tables and cache, the figures' CSV). A page quotes an entry as
``<!--n:KEY-->TEXT<!--/n-->`` or, rounded, ``<!--n:KEY:N-->`` (N decimals) / ``<!--n:KEY:sN-->``
(N significant digits, ``1.9714·10⁻³``).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import numbers as gen

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md"),
                *(ROOT / "notebooks").glob("*.py")])
#: a threshold of the paper's model quoted with a number: "α_c = 1.25", "`α_l` ≈ 1.49", "alpha_c(0.05) = 0.6"
THRESHOLD = re.compile(r"(α_c|α_l|α_b|alpha_c|alpha_l|alpha_b)[^|\n=≈ω]{0,25}?[=≈]\s*`?\s*\d\.\d+")
#: a line that names the other computation its threshold comes from (a rule, a model, the paper's figure)
OTHER = re.compile(r"GH ?\d|gh:|preint|\bd7\b|--accuracy|accuracy 1e|untied|rank|paper's|Fig\. 9|fit|order \d|cluster|p_same|\.sel\(")


@pytest.fixture(scope="module")
def committed() -> dict:
    return json.loads(gen.JSON_PATH.read_text())


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _unblocked(text: str) -> str:
    """The text without generated blocks (checked by their generators) and without marked numbers."""
    text = re.sub(r"<!-- BEGIN (\S+) -->.*?<!-- END \1 -->", "", text, flags=re.S)
    return gen.MARK.sub("", text)


def test_numbers_json_and_generated_blocks_are_current(committed):
    numbers = gen.collect()
    assert committed == json.loads(gen.json_text(numbers)), "docs/reference/numbers.json: python -m benchmarks.numbers"
    for page in sorted({p for p, _ in gen.BLOCKS}):
        text = (ROOT / page).read_text()
        assert gen.render_blocks(text, page, numbers) == text, f"{page}: python -m benchmarks.numbers"


def test_every_marked_number_equals_its_source(committed):
    bad, seen = [], 0
    for path in PAGES:
        for m in gen.MARK.finditer(path.read_text()):
            seen += 1
            key, _, digits = m.group(1).partition(":")
            entry = committed.get(key)
            if entry is None:
                bad.append(f"{_rel(path)}: unknown key {key!r}")
                continue
            if not digits:
                want = entry["text"]
            elif digits.startswith("s"):  # significant digits, 1.9714·10⁻³
                want = gen.sci(entry["value"], int(digits[1:]))
            else:  # decimals
                want = f"{entry['value']:.{int(digits)}f}"
            if m.group(2) != want:
                bad.append(f"{_rel(path)}: {key} quoted as {m.group(2)!r}, source says {want!r}")
    assert seen >= 10, "the README and the docs quote their key numbers through markers"
    assert not bad, "\n".join(bad)


def test_thresholds_are_not_quoted_unmarked():
    """α_c, α_l, α_b of the paper's model come from the source; a line quoting another computation's
    threshold names it (a rule, another model, the paper's figure)."""
    bad = []
    for path in PAGES:
        for n, line in enumerate(_unblocked(path.read_text()).splitlines(), 1):
            if THRESHOLD.search(line) and not OTHER.search(line):
                bad.append(f"{_rel(path)}: {line.strip()[:120]}")
    assert not bad, "quote these through <!--n:KEY-->...<!--/n--> (docs/reference/numbers.md):\n" + "\n".join(bad)


def test_the_checks_catch_a_disagreement(committed):
    """The three checks fail on the disagreements they exist for."""
    key = "alpha_c@0.3"
    wrong = f"<!--n:{key}-->1.255<!--/n-->"
    m = gen.MARK.search(wrong)
    assert m.group(2) != committed[key]["text"]
    assert f"{committed[key]['value']:.2f}" == "1.25"
    assert THRESHOLD.search("Measured at `ω = 0.3`: `α_c = 1.255`, `α_l = 1.488`")
    assert THRESHOLD.search("The reference's `α_c(0.05) = 0.623` is the crossing")
    assert not THRESHOLD.search(_unblocked(f"`α_c = {wrong}`"))


def test_figure_legends_print_the_quoted_figure_values(committed):
    """Fig. 2's legend prints alpha_c, alpha_l with 3 decimals from the computation its CSV records
    (replica/applications/attention/figures.py); they are the figures' entries of the source."""
    import csv

    with open(gen.FIG / "fig2_right_test_error.csv", newline="") as fh:
        rows = {r["series"]: r for r in csv.DictReader(fh)}
    for name in ("alpha_c", "alpha_l"):
        assert f"{float(rows[name]['alpha']):.3f}" == committed[f"figure_{name}@0.3"]["text"], name

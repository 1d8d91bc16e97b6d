"""The committed LaTeX exports (derivations/<model>.tex|.md) as a theorist reads them.

Structure (runs everywhere, reads the committed files, no derivation): balanced environments, numbered
``align`` only (no breqn, no starred forms), the packages a journal class accepts, a Notation section
that defines every Greek letter the equations use, one meaning per symbol (no ``\\Phi(`` CDF beside the
free entropy, no ``\\theta(`` Heaviside, no ``r(w)`` regulariser beside the rank), none of the ASCII
leaks of the old writer, the prox / ``f_out`` form, and every row estimated to fit a two-column page.
Compilation (pdflatex) and page rendering (pdftoppm) run where those tools are installed and skip with
that reason where they are not.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from replica.symbolic.latex import ROW_BUDGET, width
from replica.registry import declared_models

ROOT = Path(__file__).resolve().parent.parent
MODELS = declared_models()
#: spellings the old writer leaked into the exports (ASCII math, sympy names, the operatorname acos)
LEAKS = ("w_{reg", "!=", "acos", "sqrt(", "lam1", r"\operatorname{acos}", "breqn", "dmath", "center_", "_tok",
         "dPsi", "dfdomega", "y_{label}", r"\Phi\left(", r"\theta\left(", "r(w)")
GREEK = re.compile(r"\\(alpha|beta|gamma|delta|Delta|epsilon|varepsilon|zeta|eta|theta|kappa|lambda|mu|nu|xi|pi|"
                   r"rho|sigma|Sigma|tau|phi|Phi|psi|Psi|omega|Omega|Gamma|Lambda)(?![A-Za-z])")


def _tex(name: str) -> str:
    return (ROOT / "derivations" / f"{name}.tex").read_text()


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"\\section\{([^}]*)\}", text)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@pytest.mark.parametrize("name", MODELS)
def test_export_structure(name):
    text = _tex(name)
    for env in set(re.findall(r"\\begin\{(\w+\*?)\}", text)):
        assert text.count(rf"\begin{{{env}}}") == text.count(rf"\end{{{env}}}"), env
    assert set(re.findall(r"\\begin\{(\w+\*?)\}", text)) <= {"document", "align", "description", "cases", "matrix"}
    assert r"\begin{align*}" not in text and "dmath" not in text
    pkgs = set(",".join(re.findall(r"\\usepackage(?:\[[^]]*\])?\{([^}]*)\}", text)).split(","))
    assert pkgs <= {"amsmath", "amssymb", "bm", "geometry"}, pkgs
    for leak in LEAKS:
        assert leak not in text, f"{name}: {leak!r} in the export"
    secs = _sections(text)
    assert {"Model", "Notation", "Potentials", "Saddle-point equations", "Observables"} <= set(secs)
    # every align is numbered: no \nonumber on a last row, no \notag, no starred environments
    for body in re.findall(r"\\begin\{align\}(.*?)\\end\{align\}", text, re.S):
        rows = body.split(r"\\")
        assert r"\nonumber" not in rows[-1] and r"\notag" not in body
    # the prox / f_out form
    sad = secs["Saddle-point equations"]
    assert re.search(r"f(_a)? &= (\\frac\{\\hat h(_a)? - \\omega(_a)?\}\{V(_a)?\}|V(_a)?\^\{-1\})", sad), name
    assert r"\hat q" in sad and r"\alpha" in sad


@pytest.mark.parametrize("name", MODELS)
def test_notation_defines_every_greek_letter(name):
    secs = _sections(_tex(name))
    notation = secs["Notation"]
    defined = {m for m in GREEK.findall(notation.split(r"\item[")[0])}
    for item in re.findall(r"\\item\[\$(.*?)\$\]", notation):
        defined |= set(GREEK.findall(item))
    # the constant pi (sqrt(pi), 2/pi) is not a symbol of the notation
    math = re.sub(r"\\sqrt\{\\pi\}|\\frac\{2\}\{\\pi\}|\{\\pi\}", "", "".join(v for k, v in secs.items()
                                                                                  if k != "Notation"))
    used = set(GREEK.findall(math))
    # the sample complexity, the model parameters and the data statistics are all items of Notation
    missing = used - defined
    assert not missing, f"{name}: used but not in Notation: {sorted(missing)}"
    symbols = re.findall(r"\\item\[\$(.*?)\$\]", notation)
    assert len(symbols) == len(set(symbols)), "one Notation entry per symbol"


@pytest.mark.parametrize("name", MODELS)
def test_rows_fit_a_two_column_page(name):
    """Every row of every align is estimated (replica.symbolic.latex.width) below ROW_BUDGET letter widths."""
    text = _tex(name)
    wide = []
    for body in re.findall(r"\\begin\{align\}\n(.*?)\n\\end\{align\}", text, re.S):
        for row in body.split("\\nonumber \\\\\n"):
            w = width(row)
            if w > ROW_BUDGET:
                wide.append((round(w), row[:80]))
    assert not wide, f"{name}: {len(wide)} rows too wide for a column, e.g. {wide[:3]}"


def test_width_estimate_sees_fractions_and_scripts():
    assert width(r"\frac{a + b}{c}") == pytest.approx(width("a + b") + 0.4)
    assert width("q^{2}") == pytest.approx(1.7)
    assert width(r"\left(x\right)") == pytest.approx(2.2)
    assert width("x" * 60) > ROW_BUDGET


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
@pytest.mark.parametrize("name", MODELS)
def test_export_compiles_and_renders(name, tmp_path):
    """pdflatex compiles the committed export with no overfull line; pdftoppm renders every page."""
    (tmp_path / "doc.tex").write_text(_tex(name))
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:]
    log = (tmp_path / "doc.log").read_text(errors="replace")
    assert "Overfull \\hbox" not in log, re.findall(r"Overfull \\hbox.*", log)[:3]
    pages = int(re.search(r"Output written on doc.pdf \((\d+) page", log).group(1))
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm (poppler) not installed: compiled, pages not rendered")
    subprocess.run(["pdftoppm", "-r", "50", "-png", "doc.pdf", "page"], cwd=tmp_path, check=True, timeout=120)
    pngs = sorted(tmp_path.glob("page*.png"))
    assert len(pngs) == pages and all(p.stat().st_size > 1000 for p in pngs)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
@pytest.mark.parametrize("cls", ["revtex4-2", "elsarticle"])
def test_export_body_compiles_under_journal_classes(cls, tmp_path):
    """The body of the paper's export compiles under revtex4-2 and elsarticle (no package clash)."""
    text = _tex("attention_tied").replace(r"\documentclass[10pt]{article}", rf"\documentclass{{{cls}}}")
    text = text.replace(r"\usepackage[margin=2cm]{geometry}", "")
    (tmp_path / "doc.tex").write_text(text)
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    if res.returncode != 0 and f"{cls}.cls' not found" in res.stdout:
        pytest.skip(f"{cls} not installed")
    assert res.returncode == 0, res.stdout[-2000:]


@pytest.mark.parametrize("name", MODELS)
def test_every_row_is_balanced(name):
    """pdflatex refuses a \\left without its \\right in the same align row and unbalanced braces: checked row
    by row (the rows the writer splits long equations into), and for braces in the whole file."""
    text = _tex(name)
    unescaped = re.sub(r"\\[{}]", "", text)
    assert unescaped.count("{") == unescaped.count("}")
    for body in re.findall(r"\\begin\{align\}\n(.*?)\n\\end\{align\}", text, re.S):
        for row in re.split(r"\\\\\s*\n", body):
            r = re.sub(r"\\[{}]", "", row)
            assert r.count("{") == r.count("}"), row[:120]
            assert len(re.findall(r"\\left(?![a-z])", row)) == len(re.findall(r"\\right(?![a-z])", row)), row[:120]

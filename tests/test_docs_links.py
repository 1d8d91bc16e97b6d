"""Every relative link and repository path the user docs give resolves (the docs moved into
docs/tutorial, how-to, reference and explanation; a stale path must fail here, not for a reader)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
#: a repository path in prose or code: docs/..., with a file suffix
DOCS_PATH = re.compile(r"(?<![\w./-])(docs/[\w./-]+\.(?:md|json|csv|png))")


def _broken(page: Path) -> list[str]:
    text = page.read_text()
    bad = []
    for target in LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (page.parent / target).resolve().exists():
            bad.append(f"{page.relative_to(ROOT)}: link {target}")
    for path in DOCS_PATH.findall(text):
        if not (ROOT / path).exists():
            bad.append(f"{page.relative_to(ROOT)}: path {path}")
    return bad


def test_doc_links_and_paths_resolve():
    bad = [b for page in PAGES for b in _broken(page)]
    assert not bad, "\n".join(bad)


def test_nothing_points_outside_the_repository():
    """No page, notebook or library text sends a reader to the team's shared folder."""
    files = PAGES + sorted((ROOT / "notebooks").glob("*.py"))
    bad = [str(f.relative_to(ROOT)) for f in files if re.search(r"shared/THEORY|\.\./shared/|shared/seeds", f.read_text())]
    assert not bad, bad


def test_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    pages = [p for p in (ROOT / "docs").rglob("*.md") if p.name != "README.md"]
    missing = [str(p.relative_to(ROOT)) for p in pages if str(p.relative_to(ROOT / "docs")) not in index]
    assert not missing, f"add to docs/README.md: {missing}"


def test_docs_paths_in_code_help_and_notebooks_exist():
    """--help texts, docstrings, tests and notebooks name docs pages by path; those paths exist."""
    files = [p for d in ("replica", "numerics", "benchmarks", "notebooks", "tests") for p in (ROOT / d).rglob("*.py")]
    bad = sorted({f"{f.relative_to(ROOT)}: {path}" for f in files for path in DOCS_PATH.findall(f.read_text())
                  if not (ROOT / path).exists()})
    assert not bad, "\n".join(bad)


def test_theory_is_cited_as_the_project_page():
    """The theory is docs/explanation/theory.md; the team's former THEORY file is not in the repository."""
    pattern = re.compile("THEORY" + r"(\.md| ?§)")  # split so that this file does not match itself
    files = PAGES + [p for d in ("replica", "numerics", "benchmarks", "notebooks", "tests", "derivations")
                     for p in (ROOT / d).rglob("*.py")]
    bad = [str(f.relative_to(ROOT)) for f in files if pattern.search(f.read_text())]
    assert not bad, bad


def test_tutorial_model_declares(tmp_path):
    """The declaration the tutorial asks a reader to save as my_glm.py is a model the toolkit loads
    (its outputs in the tutorial were produced from it; a change of the declaration API must fail
    here)."""
    from replica.registry import load_model

    text = (ROOT / "docs" / "tutorial" / "getting_started.md").read_text()
    block = text.split("Save this as `my_glm.py`", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "my_glm.py"
    path.write_text(block)
    model = load_model(str(path))
    assert model.name == "my_glm" and {s.name for s in model.defaults} == {"Delta", "lam"}

"""The simulator's core is generic: it samples and minimises a model from its declaration and never
dispatches on a declared model's name. What one study adds lives in its plug-in
(``numerics/applications/<study>/``), registered as protocols of ``python -m numerics.simulate``."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from replica.registry import aliases, declared_models

ROOT = Path(__file__).resolve().parent.parent
APPLICATIONS = ROOT / "numerics" / "applications"


def _in_core(path: Path) -> bool:
    """Not inside an application's package (``numerics/applications/<study>/``), which owns its models."""
    return not (path.is_relative_to(APPLICATIONS) and len(path.relative_to(APPLICATIONS).parts) > 1)


#: every module of numerics/ but the application plug-ins: a subpackage added to the core is checked too
CORE = sorted(p for p in (ROOT / "numerics").rglob("*.py") if _in_core(p))
#: string literals of the core that equal a model's name but are not one: (file, keyword) of a call
#: into another library (scikit-learn's ``LinearSVC(loss="hinge")`` names its own loss)
NOT_MODEL_NAMES = {("glm_solvers.py", "loss")}


def model_names() -> set[str]:
    return set(declared_models()) | set(aliases())


def named_models(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """``(line, literal)`` of every string literal of ``source`` that is a declared model's name, other
    than docstrings and the keyword arguments of :data:`NOT_MODEL_NAMES`."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            skip.add(id(body[0].value))
        if isinstance(node, ast.keyword) and (Path(filename).name, node.arg) in NOT_MODEL_NAMES:
            skip.add(id(node.value))
    names = model_names()
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names
                  and id(n) not in skip)


def test_the_check_finds_a_dispatch_on_a_model_name():
    """The check below can fail: a comparison, a default, a table key naming a model are found."""
    src = ('"""ridge"""\ndef f(model="attention"):\n    if model == "ridge":\n        return {"lasso": 1}\n'
           '    return g(loss="hinge")\n')
    assert named_models(src, "elsewhere.py") == [(2, "attention"), (3, "ridge"), (4, "lasso"), (5, "hinge")]
    assert named_models(src, "glm_solvers.py") == [(2, "attention"), (3, "ridge"), (4, "lasso")]


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.relative_to(ROOT / "numerics").as_posix())
def test_core_names_no_declared_model(path):
    """No module of numerics/ outside its application plug-ins names a declared model (or an alias) in
    a string literal: no table of models, no default model, no ``if model == ...``."""
    found = named_models(path.read_text(), path.name)
    assert not found, f"{path.relative_to(ROOT)} names declared models at (line, name) {found}"


def test_protocols_come_from_the_plug_ins():
    """``python -m numerics.simulate`` lists the protocols the applications register (the attention
    study's paper protocol among them) and refuses an unknown one in one line (exit 2)."""
    from numerics.applications import protocols

    found = protocols()
    assert {"attention", "linear", "sweep", "finite-size", "histogram"} <= set(found)
    out = subprocess.run([sys.executable, "-m", "numerics.simulate", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and all(name in out.stdout for name in found)
    bad = subprocess.run([sys.executable, "-m", "numerics.simulate", "ridge"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "replica check" in bad.stderr


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.relative_to(ROOT / "numerics").as_posix())
def test_core_imports_no_application(path):
    """The core finds the plug-ins through :func:`numerics.applications.protocols` only; it never imports
    a study's package (the plug-ins import the core, not the other way round)."""
    tree = ast.parse(path.read_text())
    bad = []
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [("." * node.level) + (node.module or "")] if isinstance(node, ast.ImportFrom) else []
        bad += [n for n in names if n.startswith(("numerics.applications.", ".applications."))]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"

"""Where models and their generated modules live, and the freshness path that keeps them in step.

Declared models are the modules of the ``derivations`` folder that define ``model`` (a
:class:`~replica.symbolic.model.Model`); a user's own model can also be given as a path to a ``.py``
file defining ``model``. Generated numeric modules live in ``derivations/generated/<name>.py``
(committed, checked against the derivation by the test suite) or, for a model given by path,
in ``generated/<file stem>.py`` next to that file.

:func:`load_module` is the one place that turns a model name into a numeric model (a
:class:`~replica.numeric.generated_model.GeneratedModel`, the typed interface of the module): it checks
the module's freshness stamp against the declaration and the generator
(:mod:`replica.artifacts.freshness`, no sympy needed) and regenerates a missing or stale module -- saying
so on stderr -- or refuses with a one-line message where the tree must not be written. Importing
a fresh module needs no sympy; generating one takes seconds to a minute.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ..errors import ParameterError, ReplicaError
from .freshness import frozen, staleness
from .paths import DERIVATIONS_DIR
from ..numeric.generated_model import GeneratedModel, as_model



def aliases() -> dict[str, str]:
    """Short names of declared models: ``ALIASES = {"short": "declared", ...}`` in
    ``derivations/__init__.py``, read as a literal (the folder's business, not the library's)."""
    init = DERIVATIONS_DIR / "__init__.py"
    try:
        tree = ast.parse(init.read_text())
    except (OSError, SyntaxError):
        return {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["ALIASES"]:
            return dict(ast.literal_eval(node.value))
    return {}


def canonical(name: str) -> str:
    """The canonical model name of ``name`` (resolves a declared alias)."""
    return aliases().get(name, name) if not (DERIVATIONS_DIR / f"{name}.py").exists() else name


def declared_models() -> list[str]:
    """Names of the declaration files in ``derivations/`` (read from the folder, not imported)."""
    return sorted(p.stem for p in DERIVATIONS_DIR.glob("*.py") if not p.stem.startswith("_"))


def _is_path(name: str) -> bool:
    return name.endswith(".py") or "/" in name


def _import_path(path: Path, prefix: str = "replica_user_model_") -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{prefix}{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ParameterError("model", f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    except ReplicaError:  # a declaration error already names what to change
        sys.modules.pop(spec.name, None)
        raise
    except SyntaxError as exc:
        sys.modules.pop(spec.name, None)
        raise ParameterError("model", f"{path}, line {exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:  # the user's file failed: one line, not its traceback
        sys.modules.pop(spec.name, None)
        raise ParameterError("model", f"{path} failed to import: {type(exc).__name__}: {exc}") from None
    return mod


def declaration_path(name: str) -> Path:
    """The declaration file of ``name`` (a declared model or a path to a file)."""
    if _is_path(name):
        path = Path(name)
        if not path.exists():
            raise ParameterError("model", f"no such file {name}")
        return path.resolve()
    name = canonical(name)
    if name not in declared_models():
        raise ParameterError("model", f"unknown model {name!r}; known: {declared_models()} "
                                      f"(aliases: {aliases()})")
    return DERIVATIONS_DIR / f"{name}.py"


def load_declaration(name: str) -> ModuleType:
    """The declaration module of ``name`` (a derivations module or a path to a file)."""
    path = declaration_path(name)
    if _is_path(name):
        return _import_path(path)
    return importlib.import_module(f"derivations.{path.stem}")


def load_model(name: str):
    """The :class:`~replica.symbolic.model.Model` declared under ``name`` (``model.declared_in`` is set to
    its file, whose hash the generated artifacts record)."""
    from ..symbolic.model import Model  # the symbolic pipeline (sympy): only when a declaration is loaded

    mod = load_declaration(name)
    if not hasattr(mod, "model"):
        raise ParameterError("model", f"{name} defines no 'model'")
    if not isinstance(mod.model, Model):
        raise ParameterError("model", f"{name}: 'model' must be a replica.Model, got "
                                      f"{type(mod.model).__name__} {mod.model!r:.60}")
    model = mod.model
    model.declared_in = declaration_path(name)
    return model


def generated_path(name: str) -> Path:
    """Path of the generated module of model ``name``: ``derivations/generated/<name>.py``, or
    ``generated/<stem>.py`` next to a declaration given by path."""
    if _is_path(name):
        p = declaration_path(name)
        return p.parent / "generated" / f"{p.stem}.py"
    return DERIVATIONS_DIR / "generated" / f"{canonical(name)}.py"


def generate(name: str, path: Path | None = None, why: str | None = None) -> Path:
    """Derive ``name`` and write its module (default :func:`generated_path`). Imports sympy.
    ``why``: the reason, said on stderr once the declaration has loaded (a declaration that fails
    to load is one line of error, not a notice and an error)."""
    from ..codegen import write_module  # the symbolic pipeline, only when generating
    from ..symbolic.derivation import Derivation

    model = load_model(name)
    path = path or generated_path(name)
    if why is not None:
        print(f"replica: generating {_display(path)} ({why}); this takes a few seconds to a minute",
              file=sys.stderr)
    return write_module(Derivation(model), path, declaration=model.declared_in)


def load_module(name: str, regenerate: bool = False) -> GeneratedModel:
    """The generated model of ``name``, read and checked (:class:`~replica.numeric.generated_model.GeneratedModel`):
    its module is imported, (re)generated first if it is missing or stale (see the module
    docstring); ``regenerate=True`` always regenerates."""
    path = generated_path(name)
    why = "regeneration requested" if regenerate else staleness(path, declaration_path(name), "module")
    if why is not None:
        rel = _display(path)
        if why != "missing" and frozen(path):
            raise ParameterError("model", f"{rel} is stale ({why}) and this tree must not be rewritten; "
                                          f"run `replica generate {name}` where it can be")
        generate(name, path, why)
        importlib.invalidate_caches()
    if path.parent == DERIVATIONS_DIR / "generated":
        modname = f"derivations.generated.{path.stem}"
        if why is not None and modname in sys.modules:
            del sys.modules[modname]
        return as_model(importlib.import_module(modname))
    return as_model(_import_path(path, prefix="replica_generated_"))


def _display(path: Path) -> str:
    """``path`` relative to the repository root where it lies inside it."""
    try:
        return str(path.resolve().relative_to(DERIVATIONS_DIR.parent))
    except ValueError:
        return str(path)

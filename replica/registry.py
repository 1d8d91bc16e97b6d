"""Where models and their generated modules live.

Declared models are the modules of the :mod:`derivations` package that define
``model`` (a :class:`~replica.model.Model`); a user's own model can also be given
as a path to a ``.py`` file defining ``model``. Generated numeric modules live in
``derivations/generated/<name>.py`` (committed, checked against the derivation by
the test suite) or, for a model given by path, in ``generated/`` next to that file.
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

from .errors import ParameterError, ReplicaError

#: short names accepted on the command line
ALIASES = {"attention": "attention_tied"}

DERIVATIONS_DIR = Path(__file__).resolve().parent.parent / "derivations"


def canonical(name: str) -> str:
    """The canonical model name of ``name`` (resolves aliases such as ``attention``)."""
    return ALIASES.get(name, name)


def declared_models() -> list[str]:
    """Names of the modules in :mod:`derivations` that declare a model."""
    import derivations

    names = []
    for info in pkgutil.iter_modules(derivations.__path__):
        if info.ispkg or info.name.startswith("_"):
            continue
        names.append(info.name)
    return sorted(names)


def _import_path(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"replica_user_model_{path.stem}", path)
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


def load_declaration(name: str) -> ModuleType:
    """The declaration module of ``name`` (a derivations module or a path to a file)."""
    if name.endswith(".py") or "/" in name:
        path = Path(name)
        if not path.exists():
            raise ParameterError("model", f"no such file {name}")
        return _import_path(path)
    name = canonical(name)
    if name not in declared_models():
        raise ParameterError("model", f"unknown model {name!r}; known: {declared_models()} "
                                      f"(aliases: {ALIASES})")
    return importlib.import_module(f"derivations.{name}")


def load_model(name: str):
    """The :class:`~replica.model.Model` declared under ``name``."""
    from .model import Model

    mod = load_declaration(name)
    if not hasattr(mod, "model"):
        raise ParameterError("model", f"{name} defines no 'model'")
    if not isinstance(mod.model, Model):
        raise ParameterError("model", f"{name}: 'model' must be a replica.Model, got "
                                      f"{type(mod.model).__name__} {mod.model!r:.60}")
    return mod.model


def generated_path(name: str) -> Path:
    """Path of the generated module of model ``name`` under ``derivations/generated/``."""
    if name.endswith(".py") or "/" in name:
        p = Path(name)
        model = load_model(name)
        return p.resolve().parent / "generated" / f"{model.name}.py"
    return DERIVATIONS_DIR / "generated" / f"{canonical(name)}.py"


def load_module(name: str, regenerate: bool = False) -> ModuleType:
    """Import the generated numeric module of ``name``, generating it first if missing.

    Importing a committed module needs no sympy; generating one takes seconds.
    """
    path = generated_path(name)
    if regenerate or not path.exists():
        from .codegen import write_module
        from .derivation import Derivation

        write_module(Derivation(load_model(name)), path)
    if path.parent == DERIVATIONS_DIR / "generated" and not regenerate:
        return importlib.import_module(f"derivations.generated.{path.stem}")
    return _import_path(path)

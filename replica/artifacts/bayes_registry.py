"""Loading a model's Bayes-optimal module: built into the cache, named by what it came from.

The module (:mod:`replica.codegen.bayes`) lives in ``<cache>/bayes/<model>-<declaration>-<generator>.py``
(``<cache>``: :func:`replica.artifacts.cache.default_cache_dir`), its name carrying the declaration's and
the Bayes-optimal generator's hashes (:mod:`replica.artifacts.freshness`, kind ``bayes``): a stale module
is never loaded, a fresh one is imported without sympy, a missing one is generated (seconds; said on
stderr when it is a terminal).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ..errors import ParameterError
from ..numeric.bayes_model import BayesModel
from .cache import default_cache_dir
from .freshness import current_stamp
from .registry import declaration_path, load_model

_LOADED: dict[Path, BayesModel] = {}


def bayes_module_path(name: str) -> Path:
    """Where the Bayes-optimal module of ``name`` (a declared model or a path to a file) is cached."""
    decl = declaration_path(name)
    stamp = current_stamp(decl, "bayes")
    return default_cache_dir() / "bayes" / f"{decl.stem}-{stamp.declaration}-{stamp.generator}.py"


def generate_bayes(name: str, path: Path | None = None, quiet: bool = False) -> Path:
    """Derive the Bayes-optimal equations of ``name`` and write its module (imports sympy)."""
    from ..codegen.bayes import write_bayes_module
    from ..symbolic.bayes import BayesDerivation

    model = load_model(name)
    derivation = BayesDerivation(model)  # refuses what has no Bayes-optimal free entropy, before any notice
    path = path or bayes_module_path(name)
    if not quiet and sys.stderr.isatty():  # on a terminal only: a script reading stderr gets one line on failure
        print(f"replica: generating the Bayes-optimal module of {model.name} (a few seconds)", file=sys.stderr)
    return write_bayes_module(derivation, path, declaration=model.declared_in)


def bayes_model(model) -> BayesModel:
    """The Bayes-optimal module of a :class:`~replica.symbolic.model.Model` object, generated in memory (no
    file, no cache: for a model built in a session or a test)."""
    import types

    from ..codegen.bayes import generate_bayes_module
    from ..symbolic.bayes import BayesDerivation

    source = generate_bayes_module(BayesDerivation(model), declaration=getattr(model, "declared_in", None))
    mod = types.ModuleType(f"replica_bayes_{model.name}")
    exec(compile(source, f"<Bayes-optimal module of {model.name}>", "exec"), mod.__dict__)
    return BayesModel.from_module(mod)


def load_bayes(name: str) -> BayesModel:
    """The Bayes-optimal module of ``name``, generated into the cache when missing."""
    path = bayes_module_path(name)
    hit = _LOADED.get(path)
    if hit is not None:
        return hit
    if not path.exists():
        generate_bayes(name, path)
    spec = importlib.util.spec_from_file_location(f"replica_bayes_{path.stem.replace('-', '_')}", path)
    if spec is None or spec.loader is None:
        raise ParameterError("model", f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except SyntaxError:  # a truncated file: write it again
        generate_bayes(name, path, quiet=True)
        spec.loader.exec_module(mod)
    model = _LOADED[path] = BayesModel.from_module(mod)
    return model

"""Loading a model's Bayes-optimal module: built into the cache, named by what it came from.

The module (:mod:`replica.codegen.bayes`) lives in ``<cache>/bayes/<model>-<declaration>-<generator>.py``
(``<cache>``: :func:`replica.artifacts.cache.default_cache_dir`), its name carrying the declaration's and the
Bayes-optimal generator's hashes (:mod:`replica.artifacts.freshness`, kind ``bayes``), as the empirical-risk
modules of :mod:`replica.registry.loader`: a stale module is never loaded, a fresh one is imported without
sympy, a missing one is generated under a lock (a few seconds; said on stderr when it is a terminal).
"""
from __future__ import annotations

import sys
import types
from pathlib import Path

from ..artifacts.cache import writable_cache_subdir
from ..artifacts.freshness import current_stamp, read_stamp
from ..numeric.bayes_model import BayesModel
from .loader import _generation_lock, _import_path, _stem, declaration_path, load_model

_LOADED: dict[str, BayesModel] = {}
_DIRS: dict[str, Path] = {}


def bayes_module_path(name: str) -> Path:
    """Where the Bayes-optimal module of ``name`` (a declared model or a path to a file) is cached."""
    from ..artifacts.cache import default_cache_dir

    root = str(default_cache_dir())
    if root not in _DIRS:
        _DIRS[root] = writable_cache_subdir("bayes")
    stamp = current_stamp(declaration_path(name), "bayes")
    return _DIRS[root] / f"{_stem(name)}-{stamp.declaration}-{stamp.generator}.py"


def generate_bayes(name: str, path: Path | None = None) -> Path:
    """Derive the Bayes-optimal equations of ``name`` and write its module (imports sympy)."""
    from ..codegen.bayes import write_bayes_module
    from ..symbolic.bayes import BayesDerivation

    model = load_model(name)
    derivation = BayesDerivation(model)  # refuses what has no Bayes-optimal free entropy, before any notice
    path = path or bayes_module_path(name)
    if sys.stderr.isatty():  # on a terminal only: a script reading stderr gets one line on failure
        print(f"replica: generating the Bayes-optimal module of {model.name} (a few seconds)", file=sys.stderr)
    return write_bayes_module(derivation, path, declaration=model.declared_in)


def load_bayes(name: str) -> BayesModel:
    """The Bayes-optimal module of ``name``, generated into the cache when missing; read once per process."""
    path = bayes_module_path(name)
    hit = _LOADED.get(str(path))
    if hit is not None:
        return hit
    stamp = current_stamp(declaration_path(name), "bayes")
    if read_stamp(path) != stamp:
        with _generation_lock(path):
            if read_stamp(path) != stamp:  # another process may have written it meanwhile
                generate_bayes(name, path)
    model = _LOADED[str(path)] = BayesModel.from_module(_import_path(path, prefix="replica_bayes_"))
    return model


def bayes_model(model) -> BayesModel:
    """The Bayes-optimal module of a :class:`~replica.symbolic.model.Model` object, generated in memory (no
    file, no cache: for a model built in a session or a test)."""
    from ..codegen.bayes import generate_bayes_module
    from ..symbolic.bayes import BayesDerivation

    source = generate_bayes_module(BayesDerivation(model), declaration=getattr(model, "declared_in", None))
    mod = types.ModuleType(f"replica_bayes_{model.name}")
    exec(compile(source, f"<Bayes-optimal module of {model.name}>", "exec"), mod.__dict__)
    return BayesModel.from_module(mod)

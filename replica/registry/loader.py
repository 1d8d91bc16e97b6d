"""Where models and their generated modules live: declarations are source, generated modules a build product.

Declared models are the modules of the ``derivations`` folder that define ``model`` (a
:class:`~replica.symbolic.model.Model`); a user's own model can also be given as a path to a ``.py``
file defining ``model``. Their generated numeric modules are built into the user cache,
``<cache>/generated/<name>-<declaration hash>-<generator hash>.py`` (:func:`generated_path`;
``<cache>`` as for the point cache, :func:`replica.artifacts.cache.default_cache_dir`): the key is what
the module's freshness stamp records (:mod:`replica.artifacts.freshness`, no sympy needed), so a
module found there is the one the declaration and the generator give today, and an edit of either
names a new file. A module there holds the model's own arrays and imports the kernels of its
factors (trace, penalty, loss, channel, data law) from ``<cache>/generated/kernels/<factor>-<hash>.py``,
named by the hash of their text: models whose factor generates the same code share one file, and a
module whose kernel file is missing or damaged is generated again. ``replica generate MODEL --out
FILE.py`` writes one self-contained file, the kernels in place, where a user wants to read or ship it.

:func:`load_module` is the one place that turns a model name into a numeric model (a
:class:`~replica.interface.generated_model.GeneratedModel`, the typed interface of the module): it
generates a module that is not in the cache yet -- saying so on stderr, once -- under a lock, so
that concurrent first uses (test workers, sweep workers) generate it once and never read half of
it; each module is read once per process. Importing a cached module needs no sympy; generating
one takes seconds to a minute.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

from ..errors import ParameterError, ReplicaError
from ..artifacts.cache import default_cache_dir, writable_cache_subdir
from ..artifacts.freshness import Stamp, current_stamp, read_stamp
from ..artifacts.paths import DERIVATIONS_DIR
from ..interface.generated_model import GeneratedModel, as_model, stale_kernels


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
    """The declaration module of ``name`` (a derivations module or a path to a file), imported once
    per process and content (a file edited since is imported again). What it prints while it is
    imported goes to stderr: a ``--json`` command's stdout is its JSON object alone."""
    path = declaration_path(name)
    if not _is_path(name):
        with contextlib.redirect_stdout(sys.stderr):
            return importlib.import_module(f"derivations.{path.stem}")
    from ..artifacts.freshness import declaration_hash

    key = (str(path), declaration_hash(path))
    if key not in _DECLARATIONS:
        with contextlib.redirect_stdout(sys.stderr):
            _DECLARATIONS[key] = _import_path(path)
    return _DECLARATIONS[key]


#: the declarations given by path that :func:`load_declaration` imported, by file and content hash
_DECLARATIONS: dict[tuple[str, str], ModuleType] = {}


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


def generated_dir() -> Path:
    """The cache of generated modules: ``<cache>/generated`` (a temporary folder where the cache
    cannot be written: modules are then generated afresh in every process)."""
    root = str(default_cache_dir())
    if root not in _GENERATED_DIRS:  # one temporary folder per process, not one per call
        _GENERATED_DIRS[root] = writable_cache_subdir("generated")
    return _GENERATED_DIRS[root]


_GENERATED_DIRS: dict[str, Path] = {}


def _stem(name: str) -> str:
    """The file stem of model ``name``'s generated module: its canonical name, or the stem of a
    declaration given by path (characters other than letters, digits and ``_`` replaced)."""
    stem = declaration_path(name).stem if _is_path(name) else canonical(name)
    return re.sub(r"\W", "_", stem)


def generated_path(name: str, stamp: Stamp | None = None) -> Path:
    """Where the generated module of model ``name`` lives in the cache, for the declaration and the
    generator of today (``stamp``: :func:`~replica.artifacts.freshness.current_stamp`, computed if
    not given)."""
    stamp = stamp or current_stamp(declaration_path(name), "module")
    return generated_dir() / f"{_stem(name)}-{stamp.declaration}-{stamp.generator}.py"


def generate(name: str, path: Path | None = None, why: str | None = None) -> Path:
    """Derive ``name`` and write its module. Imports sympy. Into the cache (``path`` not given:
    :func:`generated_path`) the model's own file and its factors' kernels beside it, shared with the
    other models (:func:`replica.codegen.write_module`); to a given ``path`` one self-contained file.
    ``why``: the reason, said on stderr once the declaration has loaded (a declaration that fails
    to load is one line of error, not a notice and an error)."""
    from ..codegen import write_module  # the symbolic pipeline, only when generating
    from ..symbolic.derivation import Derivation

    model = load_model(name)
    into_cache = path is None
    path = Path(path) if path is not None else generated_path(name)
    if why is not None:
        print(f"replica: generating the numeric module of {model.name} ({why}) into {path}; "
              "this takes a few seconds to a minute", file=sys.stderr)
    return write_module(Derivation(model), path, declaration=model.declared_in, shared_kernels=into_cache)


def load_module(name: str, regenerate: bool = False) -> GeneratedModel:
    """The generated model of ``name``, read and checked (:class:`~replica.interface.generated_model.GeneratedModel`):
    its module in the cache (:func:`generated_path`), generated first if it is not there (see the
    module docstring); ``regenerate=True`` always generates it anew. Read once per process."""
    stamp = current_stamp(declaration_path(name), "module")
    path = generated_path(name, stamp)
    hit = _LOADED.get(str(path))
    if hit is not None and not regenerate:
        return hit
    if regenerate or _unusable(path, stamp):
        with _generation_lock(path):
            # another process may have generated it while this one waited for the lock
            if regenerate or _unusable(path, stamp):
                generate(name, None, "regeneration requested" if regenerate else _why_missing(path, stamp))
        importlib.invalidate_caches()
    sys.modules.pop(f"replica_generated_{path.stem}", None)
    model = as_model(_import_path(path, prefix="replica_generated_"))
    _LOADED[str(path)] = model
    return model


#: the models :func:`load_module` has read in this process, by module file
_LOADED: dict[str, GeneratedModel] = {}


def _unusable(path: Path, stamp: Stamp) -> bool:
    """Whether the cached module at ``path`` must be generated: missing, stamped otherwise (another
    version of replica wrote it), or one of its factors' kernel files missing or damaged."""
    return read_stamp(path) != stamp or bool(stale_kernels(path))


def _why_missing(path: Path, stamp: Stamp) -> str:
    """Why the module is generated, for the notice: first use, or what changed since the newest
    module of the same name in the cache was generated."""
    prefix = path.name.rsplit("-", 2)[0]
    older = sorted((p for p in path.parent.glob(f"{prefix}-*.py") if p != path),
                   key=lambda p: p.stat().st_mtime, reverse=True)
    old = read_stamp(older[0]) if older else None
    if old is None:
        return "first use" if not path.exists() else "written by another replica version"
    why = [what for what, a, b in (("the declaration", old.declaration, stamp.declaration),
                                   ("the generator", old.generator, stamp.generator),
                                   ("the replica version", old.version, stamp.version)) if a != b]
    return " and ".join(why) + " changed" if why else "first use"


@contextlib.contextmanager
def _generation_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``path`` while its module is generated, so that concurrent
    first uses generate it once. Where ``fcntl`` is missing (not POSIX) no lock is taken: the
    atomic write alone keeps readers safe, and two generations write the same bytes."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

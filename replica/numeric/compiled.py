"""The compiled unit of a generated module: its per-node leaves and the generic kernels, JIT-compiled.

A generated module (:mod:`replica.codegen`) holds only the model's mathematics; its per-node
*leaves* (``node_constants``, ``node_bracket_newton``, ...) are plain Python over ``math``. The
generic algorithm that calls them -- the multistart damped Newton prox and the test-point
average -- is library code, :mod:`replica.numeric.kernels`. At first use :func:`compiled` assembles the
two into one *compiled unit* (the leaves' source, then the kernels' source, one file) and
compiles it with numba: one generic runtime, backends that compile only the model's arrays, as
in PyDy.

The unit is a file in the user cache directory (``<cache>/compiled/``, see
:func:`replica.artifacts.cache.default_cache_dir`: ``$REPLICA_CACHE``, else the platform's cache directory,
``$XDG_CACHE_HOME/replica`` on Linux) named by the model and two hashes, of the leaves (the
generated module's numeric content) and of the kernels, so that a change to either compiles a
new unit and never reuses a stale one. numba caches the machine code in ``<cache>/numba``
(``cache=True``, :func:`numba_cache_dir`; ``$NUMBA_CACHE_DIR`` where set): the first use of a
model compiles for ~10-20 CPU-s (a two-unit committee's command: 9.4), later processes load it in
a fraction of a second. If the cache directory cannot be written the unit goes to a temporary
directory (compiled afresh in every process).

Backends: ``"numba"`` (this unit), ``"numpy"`` (the generated module's vectorised functions and
:func:`replica.numeric.prox.prox`), ``"auto"`` (numba when importable, the module has leaves and its
inner minimisation has at least :data:`COMPILED_MIN_PROX_DIM` dimensions).
``REPLICA_BACKEND=numpy`` disables the compiled path globally.

Why not numba for a one-dimensional prox: there the numpy path is a handful of array operations per
Newton iteration over thousands of nodes, as fast as the compiled loop, and it needs no compilation
(10-20 s the first time a model is used, and a ~1 s load from numba's cache after). Measured on 2
cores, the default ``replica solve --alpha 2`` in a fresh process, CPU seconds numpy / numba warm /
numba cold: a square-loss GLM 1.0 / 2.0 / 20, logistic 0.9 / 1.4 / 11.8, phase retrieval 5.6 / 5.8 /
6.8, the binary perceptron 2.1 / 2.1 / 2.7. From two dimensions on, the per-node small matrices
make the compiled kernels pay: a two-unit committee 60 (numpy) against 24 (numba warm) / 41 (cold).
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType, SimpleNamespace

from . import kernels
from ..interface import bivariate
from ..artifacts.cache import writable_cache_subdir
from ..errors import ParameterError
from ..interface.generated_model import EXP_CAP, GeneratedModel

#: the generated leaves a module needs for the compiled path, in the unit's order
LEAF_NAMES = kernels.LEAF_NAMES
#: the scalar versions of the helpers a kernel calls (:class:`replica.codegen.backends.KernelBackend`;
#: :mod:`replica.interface.generated_model` defines the array versions), numba-compilable source; the unit
#: includes those its leaves use, and the library functions they call (:data:`LIBRARY_HELPERS`)
SCALAR_HELPERS = {
    "_exp": "def _exp(u):\n    return math.exp(min(u, EXP_CAP))\n",
    "_erfc": "def _erfc(u):\n    return math.erfc(u)\n",
    "_ndtr": "def _ndtr(u):\n    return 0.5 * math.erfc(-0.7071067811865476 * u)\n",
    "_bvn": "def _bvn(h, k, r):\n    return bvn_scalar(h, k, r)\n",
    "_where": "def _where(c, a, b):\n    return a if c else b\n",
}
LIBRARY_HELPERS = {"_bvn": ("bvn_scalar", bivariate.bvn_scalar)}
#: runtime backends a :class:`~replica.numeric.solver.Solver` accepts
BACKENDS = ("auto", "numba", "numpy")
#: ``"auto"`` compiles the unit only for an inner minimisation of at least this many dimensions
#: (``PROX_DIM``; below, the numpy path is as fast and needs no compilation: module docstring)
COMPILED_MIN_PROX_DIM = 2

_UNITS: dict[int, tuple[GeneratedModel, SimpleNamespace]] = {}


def numba_cache_dir() -> Path:
    """Where numba keeps machine code: ``$NUMBA_CACHE_DIR`` if set, else ``<cache>/numba`` (a
    temporary directory if that cannot be written).

    Without it numba writes the machine code of a library function compiled with ``cache=True``
    (pre-integration's kernels) beside its source: into the source tree's ``replica/__pycache__``,
    even with ``REPLICA_CACHE`` set, and nowhere at all in a read-only installation.
    :func:`use_numba_cache_dir` points numba here before it is imported."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return Path(env)
    return writable_cache_subdir("numba")


def use_numba_cache_dir() -> None:
    """Set ``NUMBA_CACHE_DIR`` to :func:`numba_cache_dir` (numba reads it when imported; where it
    was imported already, its configuration is updated too). A value the user set is kept."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    os.environ["NUMBA_CACHE_DIR"] = str(numba_cache_dir())
    if "numba.core.config" in sys.modules:
        sys.modules["numba.core.config"].CACHE_DIR = os.environ["NUMBA_CACHE_DIR"]


def numba_available() -> bool:
    """True when numba can be imported and ``REPLICA_BACKEND`` does not ask for numpy."""
    if os.environ.get("REPLICA_BACKEND", "").lower() == "numpy":
        return False
    use_numba_cache_dir()
    try:
        import numba  # noqa: F401
    except Exception:  # ImportError, or a broken install
        return False
    return True


def has_node_kernels(module: GeneratedModel) -> bool:
    """Whether a generated model carries the per-node leaves (off for a piecewise loss)."""
    return bool(module.leaves)


def resolve_backend(module: GeneratedModel, backend: str = "auto") -> str:
    """``"numba"`` or ``"numpy"`` for ``backend`` in ``auto|numba|numpy`` (``"auto"``: numba where it
    pays, see :data:`COMPILED_MIN_PROX_DIM`)."""
    if backend not in BACKENDS:
        raise ParameterError("backend", f"unknown backend {backend!r}; use auto, numba or numpy")
    if backend == "numpy":
        return "numpy"
    if backend == "auto" and int(getattr(module, "PROX_DIM", 0)) < COMPILED_MIN_PROX_DIM:
        return "numpy"
    ok = has_node_kernels(module) and numba_available()
    if backend == "numba" and not ok:
        why = ("numba is not importable (pip install numba)" if not numba_available()
               else f"module {module.MODEL} has no per-node leaves; regenerate it (replica generate)")
        raise ParameterError("backend", why)
    return "numba" if ok else "numpy"


# --------------------------------------------------------------------------- the unit's source
def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def kernel_source() -> str:
    """Source of the generic kernels (:data:`replica.numeric.kernels.KERNEL_NAMES`), as the unit includes it."""
    return "\n\n".join(inspect.getsource(getattr(kernels, n)).rstrip() + "\n" for n in kernels.KERNEL_NAMES)


def helper_names(module: GeneratedModel) -> tuple[str, ...]:
    """The helpers (:data:`SCALAR_HELPERS`) and the library functions (:data:`LIBRARY_HELPERS`) the
    module's leaves call, in the unit's order (each after what it calls)."""
    leaves = "".join(inspect.getsource(module.leaves[n]) for n in LEAF_NAMES)
    used = [n for n in SCALAR_HELPERS if f"{n}(" in leaves]
    return tuple(LIBRARY_HELPERS[n][0] for n in used if n in LIBRARY_HELPERS) + tuple(used)


def leaf_source(module: GeneratedModel) -> str:
    """The model's part of the unit: its sizes, the scalar helpers its leaves call, and the
    source of its per-node leaves."""
    sizes = "".join(f"{n} = {int(getattr(module, n))}\n" for n in kernels.SIZE_NAMES)
    library = {name: fn for name, fn in LIBRARY_HELPERS.values()}
    helpers = "".join((inspect.getsource(library[n]) if n in library else SCALAR_HELPERS[n]).rstrip() + "\n\n\n"
                      for n in helper_names(module))
    leaves = "\n\n".join(inspect.getsource(module.leaves[n]).rstrip() + "\n" for n in LEAF_NAMES)
    return f"EXP_CAP = {float(EXP_CAP)!r}\n{sizes}\n\n{helpers}{leaves}"


def unit_source(module: GeneratedModel) -> tuple[str, str]:
    """``(file name, source)`` of the compiled unit of ``module`` (see the module docstring)."""
    leaves, kern = leaf_source(module), kernel_source()
    lh, kh = _digest(leaves)[:12], _digest(kern)[:12]
    name = f"{module.MODEL}-{lh}-{kh}.py"
    text = (f'"""Compiled unit of model {module.MODEL}: its per-node leaves (generated module, leaves hash {lh})\n'
            f'and the generic kernels of replica.numeric.kernels (kernels hash {kh}). Assembled by replica.numeric.compiled;\n'
            '"""\n'
            "import math\n\nimport numpy as np\n\n" + leaves + "\n\n" + kern)
    return name, text


def units_dir() -> Path:
    """Where compiled units live: ``<cache>/compiled`` (a temporary directory if that is not writable)."""
    return writable_cache_subdir("compiled")


def _write_once(path: Path, text: str) -> None:
    """Create ``path`` with ``text`` unless it exists (never rewritten: numba's cache is keyed on
    the file's time stamp). Concurrent writers: the first link wins, the others find it."""
    if path.exists():
        return
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".py", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def load_unit(module: GeneratedModel) -> ModuleType:
    """The unit of ``module`` as a plain Python module (written to the cache on first use)."""
    name, text = unit_source(module)
    path = units_dir() / name
    _write_once(path, text)
    if path.read_text(encoding="utf-8") != text:  # a foreign file under our name: never trust it
        path = Path(tempfile.mkdtemp(prefix="replica-compiled-")) / name
        path.write_text(text, encoding="utf-8")
    modname = "replica_unit_" + path.stem.replace("-", "_")
    spec = importlib.util.spec_from_file_location(modname, path)
    unit = importlib.util.module_from_spec(spec)
    sys.modules[modname] = unit
    spec.loader.exec_module(unit)
    return unit


def compiled(module: GeneratedModel, jit: bool = True) -> SimpleNamespace:
    """The compiled unit of ``module``: its leaves and :data:`~replica.numeric.kernels.KERNEL_NAMES`.

    ``jit=True`` compiles every function with numba (dependency order, rebinding the unit's
    globals to the dispatchers, which is how numba resolves calls between jitted functions;
    machine code cached on disk). ``jit=False`` returns the same unit as plain Python (slow;
    for tests of the kernels). Units are cached per module object.
    """
    key = id(module)
    hit = _UNITS.get(key)
    if jit and hit is not None and hit[0] is module:
        return hit[1]
    unit = load_unit(module)
    names = helper_names(module) + LEAF_NAMES + kernels.KERNEL_NAMES
    if jit:
        use_numba_cache_dir()
        import numba

        opts = dict(cache=True, nogil=True, error_model="numpy")
        for n in names:
            setattr(unit, n, numba.njit(**opts)(getattr(unit, n)))
    ns = SimpleNamespace(**{n: getattr(unit, n) for n in names}, unit=unit)
    if jit:
        _UNITS[key] = (module, ns)
    return ns

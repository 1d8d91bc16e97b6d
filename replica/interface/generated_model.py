"""The typed interface of a generated model: what :func:`replica.registry.load_module` returns.

A generated module (built into the cache by :mod:`replica.codegen`) holds the
model's metadata as constants and every function once, in *kernel form*
(:class:`~replica.codegen.backends.KernelBackend`): arguments unpacked along their first axis,
stacked outputs written into arrays it is given, one bare expression returned. The same text
runs on node arrays under numpy and, compiled by numba, on one node (:mod:`replica.numeric.compiled`).

:class:`GeneratedModel` is that module read once and checked: typed metadata fields (named as
the module's constants, defaults for the optional ones), the vectorised functions the numerics
call -- built here from the kernels and the module's ``FUNCTIONS`` table (allocation of the
outputs at the nodes' broadcast shape, the ``h``-free constants of the bracket computed first)
-- and the per-node leaves the compiled unit takes. :meth:`GeneratedModel.from_module` refuses a
module that lacks a piece with one line naming it. This module also defines the array versions
of the helpers the kernels call (``_exp``, ``_erfc``, ``_ndtr``, ``_bvn``, ``_where``); the
compiled unit binds scalar ones. No sympy, no scipy at import.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional

import numpy as np

from ..errors import ParameterError
from ..artifacts.freshness import Stamp, read_stamp

#: the exponent cap of ``_exp``: exp(300) ~ 1e130 already saturates every softmax to machine
#: precision, and the cap keeps ratios of powers of exp finite
EXP_CAP = 300.0


# --------------------------------------------------------------------------- array helpers
def _exp(u):
    """exp with the exponent capped at :data:`EXP_CAP`, on arrays."""
    return np.exp(np.minimum(u, EXP_CAP))


def _erfc(u):
    """erfc on arrays (scipy.special, imported on first use; numpy has none)."""
    from scipy.special import erfc

    return erfc(u)


def _ndtr(u):
    """The standard normal CDF on arrays (scipy.special.ndtr, accurate in both tails)."""
    from scipy.special import ndtr

    return ndtr(u)


def _bvn(h, k, r):
    """The bivariate normal CDF P(X < h, Y < k), corr(X, Y) = r, on arrays (replica.interface.bivariate:
    Genz's algorithm, ~1e-15 absolute)."""
    from .bivariate import bivariate_normal_cdf

    return bivariate_normal_cdf(h, k, r)


_where = np.where


# --------------------------------------------------------------------------- factor kernels
#: the folder beside a generated module that holds the kernels of its factors (see :func:`factor_kernels`)
KERNELS_DIR = "kernels"
#: how a generated module names a factor's kernel file: ``<factor>-<16 hex digits of its text's SHA-256>``
_KERNEL_CALL = re.compile(r'factor_kernels\(\s*__file__, "([a-z]+-[0-9a-f]{16})"')


def kernel_key(factor: str, text: str) -> str:
    """The name of a factor's kernel file without ``.py``: the factor and the hash of the file's text.

    The key is the content: two models whose factor generates the same code share one file, and a
    file can never be stale (another text is another name)."""
    return f"{factor}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def kernel_path(module_file: str | Path, key: str) -> Path:
    """Where the kernel file ``key`` of the generated module at ``module_file`` lives."""
    return Path(module_file).parent / KERNELS_DIR / f"{key}.py"


def factor_kernels(module_file: str, key: str, names: tuple[str, ...]) -> tuple[Callable, ...]:
    """The functions ``names`` of the factor kernel file ``key`` beside the generated module at
    ``module_file`` (imported once per process; a file whose text does not hash to its name is
    refused with one line: regenerate the model)."""
    module = _KERNEL_MODULES.get(key)
    if module is None:
        path = kernel_path(module_file, key)
        if not _intact(path, key):
            raise ParameterError("model", f"the factor kernels {path} of {Path(module_file).name} are missing or "
                                          "damaged; regenerate the model (replica generate MODEL)")
        spec = importlib.util.spec_from_file_location(f"replica_kernels_{key.replace('-', '_')}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # as the generated modules are: their functions pickle by reference
        spec.loader.exec_module(module)
        _KERNEL_MODULES[key] = module
    return tuple(getattr(module, n) for n in names)


_KERNEL_MODULES: dict[str, ModuleType] = {}


def stale_kernels(module_path: str | Path) -> list[Path]:
    """The factor kernel files the generated module at ``module_path`` imports that are missing or
    whose text does not hash to their name (empty when the module can be imported)."""
    try:
        text = Path(module_path).read_text(encoding="utf-8")
    except OSError:
        return []
    paths = [(kernel_path(module_path, key), key) for key in _KERNEL_CALL.findall(text)]
    return [path for path, key in paths if not _intact(path, key)]


def _intact(path: Path, key: str) -> bool:
    """Whether the kernel file at ``path`` exists and its text hashes to its name ``key``."""
    try:
        return kernel_key(key.split("-")[0], path.read_text(encoding="utf-8")) == key
    except OSError:
        return False


#: the per-node leaves of the compiled unit (:mod:`replica.numeric.kernels` calls them), by the name of the
#: vectorised function built from the same kernel
LEAVES = {"bracket_newton": "node_bracket_newton", "bracket_parameter_gradient": "node_parameter_gradient",
          "prox_starts": "node_starts", "test_observables": "node_test_observables", "label_weight": "node_weight"}

Fn = Optional[Callable[..., Any]]


@dataclass
class GeneratedModel:
    """A generated model, read and checked (see the module docstring).

    Field names are those of the generated module's constants and functions (the contract of
    :mod:`replica.codegen`): ``x``/``xhat`` are 1-d in ``ORDER_PARAMETERS``/``CONJUGATES`` order,
    ``p`` in ``PARAMETERS`` order, ``h`` of shape ``(PROX_DIM, ...)`` and ``z`` of shape
    ``(len(GAUSSIANS) + len(DISCRETE) [+ 1 for a label], ...)`` with broadcastable node axes.
    Functions a model does not have are ``None``.
    """

    # ---- identity
    MODEL: str
    L: int
    R: int
    R_T: int
    PARAMETERS: tuple
    DEFAULTS: tuple
    DOMAINS: dict
    ORDER_PARAMETERS: tuple
    CONJUGATES: tuple
    FAMILIES: dict
    LAYOUT: dict
    SYMMETRIC_DIAGONAL: tuple
    BRANCHES: dict
    TRANSITION: Optional[tuple]
    BASELINE: Optional[str]
    PROX_DIM: int
    GAUSSIANS: tuple
    N_STARTS: int
    VALIDITY: tuple
    HAS_TARGET: bool
    OBSERVABLES: tuple
    TEST_OBSERVABLES: tuple
    ENTROPIC_OBSERVABLES: tuple
    N_OBSERVABLES: int
    SIGN_FLIPS: tuple
    CONSTRAINTS: tuple
    SYMMETRIES: tuple
    MIRRORED: tuple
    ISOTROPIC_TOKENS: bool
    WEIGHTED: bool
    ENTROPIC: str
    # ---- a teacher channel
    LABEL: Optional[str] = None
    LABEL_VALUES: Optional[tuple] = None
    CHANNEL: Optional[str] = None
    KINK_RULE: bool = False
    N_TRANSITIONS: int = 0
    N_PROX_KINKS: int = 0
    N_TEST_BREAKS: int = 0
    # ---- a piecewise loss
    PIECEWISE: bool = False
    N_BREAKS: int = 0
    N_BRANCHES: int = 0
    STATIONARY_ROOTS: int = 0
    STATIONARY_CLOSED: tuple = ()
    MOVING_BREAKS: bool = False
    # ---- a kinked label (Abs, Max of the teacher fields in the loss)
    N_TEACHER_KINKS: int = 0
    STATE_OBSERVABLES: tuple = ()
    # ---- token clusters
    SLOTS: tuple = ()
    DISCRETE: tuple = ()
    CONFIGURATIONS: tuple = ()
    LABELS: tuple = ()
    # ---- a Moreau-envelope entropic side
    ENTROPIC_GAUSSIANS: tuple = ()
    ENTROPIC_DIM: int = 0
    ENTROPIC_ARGMIN: bool = False
    ENTROPIC_N_STARTS: int = 0
    ENTROPIC_VALIDITY: tuple = ()
    ENTROPIC_KINK_RULE: bool = False
    #: what a closed entropic side is, as :meth:`replica.numeric.solver.Solver.rules` reports it (a
    #: spectral law summed on a quadrature rule's nodes names the rule)
    ENTROPIC_DESCRIPTION: str = "closed form"
    N_ENTROPIC_KINKS: int = 0
    N_CONSTANTS: int = 0
    # ---- the unit-symmetric ansatz (replica.symbolic.permutations)
    UNIT_BLOCKS: tuple = ()
    UNIT_ANSATZ: Optional[str] = None
    ORBIT_SIZES: tuple = ()
    UNIT_TIES: Optional[dict] = None
    UNIT_PERMUTATIONS: tuple = ()
    ORBITS: Optional[dict] = None
    # ---- the vectorised functions
    energetic_update: Fn = None
    trace_potential: Fn = None
    bracket: Fn = None
    bracket_newton: Fn = None
    bracket_parameter_gradient: Fn = None
    label_weight: Fn = None
    prox_starts: Fn = None
    test_loss: Fn = None
    test_observables: Fn = None
    validity: Fn = None
    parameter_checks: Fn = None
    rho_bar: Fn = None
    entropic_update: Fn = None
    entropic_potential: Fn = None
    state_observables: Fn = None
    target_entries: Fn = None
    atom_eigenvalues: Fn = None
    token_rho_bar: Fn = None
    label_probabilities: Fn = None
    loss_breaks: Fn = None
    branch_index: Fn = None
    branch_newton: Fn = None
    branch_stationary: Fn = None
    break_parameter_gradient: Fn = None
    teacher_kinks: Fn = None
    channel_transitions: Fn = None
    prox_kinks: Fn = None
    loss_profile: Fn = None
    test_breaks: Fn = None
    center_of: Fn = None
    entropic_from_gradient: Fn = None
    entropic_bracket: Fn = None
    entropic_parameter_gradient: Fn = None
    entropic_validity: Fn = None
    entropic_argmin: Fn = None
    entropic_bracket_newton: Fn = None
    entropic_starts: Fn = None
    regularizer: Fn = None
    entropic_field: Fn = None
    entropic_kinks: Fn = None
    entropic_observables: Fn = None
    #: a closed entropic side summed on the nodes of a rule (a continuous spectral law,
    #: :mod:`replica.numeric.spectrum`): the same module on a finer rule, the refinement of an error
    #: bar (:meth:`replica.numeric.solver.Solver.refined`); None where the entropic side is exact
    refined_entropic: Fn = None
    # ---- where it came from
    #: the per-node kernels of the compiled unit (:data:`replica.numeric.kernels.LEAF_NAMES`), empty where
    #: the compiled path is off (a piecewise loss)
    leaves: dict = field(default_factory=dict)
    #: the module's file, its import name and its freshness stamp
    path: Optional[Path] = None
    module_name: str = ""
    stamp: Optional[Stamp] = None

    @property
    def SOURCE_HASH(self) -> str:
        """What the module was generated from (the declaration and generator hashes of its stamp):
        the model's part of a cache key."""
        return f"{self.stamp.declaration}-{self.stamp.generator}" if self.stamp else ""

    def entries(self, name: str) -> tuple:
        """The ``(row, column)`` entries of its token's matrix that the order parameter or conjugate
        ``name`` stands for: its ``LAYOUT`` position, or every entry of its orbit in the unit-symmetric
        ansatz (``ORBITS``; both triangles of a symmetric matrix)."""
        if self.ORBITS is not None and name in self.ORBITS:
            return tuple(tuple(e) for e in self.ORBITS[name])
        _, _, i, j, _, _ = self.LAYOUT[name]
        return ((i, j),)

    def replace(self, **changes) -> "GeneratedModel":
        """A copy with some fields changed (e.g. another entropic side)."""
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ reading a module
    @classmethod
    def from_module(cls, module: ModuleType) -> "GeneratedModel":
        """Read and check a generated module (one-line :class:`~replica.errors.ParameterError`
        naming the missing piece, with the command that regenerates it)."""
        if isinstance(module, GeneratedModel):
            return module
        where = getattr(module, "__file__", None) or getattr(module, "__name__", "?")
        name = getattr(module, "MODEL", None) or Path(str(where)).stem

        def missing(what: str) -> ParameterError:
            return ParameterError("model", f"generated module {where} has no {what}; regenerate it "
                                           f"(replica generate {name})")

        ns = vars(module)
        table = ns.get("FUNCTIONS")
        if not isinstance(table, dict):
            raise missing("FUNCTIONS table (generated by an older replica)")
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name.isupper():
                if f.name in ns:
                    values[f.name] = ns[f.name]
                elif f.default is dataclasses.MISSING:
                    raise missing(f.name)
        for fname, spec in table.items():
            if fname not in _FUNCTION_FIELDS:
                continue
            if len(spec) == 2:
                continue  # an entry of another function's output: below
            kernel = ns.get(spec[0])
            constants = ns.get(spec[3]) if spec[3] else None
            if kernel is None or (spec[3] and constants is None):
                raise missing(f"kernel {spec[3] if kernel is not None else spec[0]} (of {fname})")
            values[fname] = vectorised(fname, kernel, spec[1], spec[2], constants, int(ns.get("N_CONSTANTS", 0)))
        for fname, spec in table.items():
            if fname in _FUNCTION_FIELDS and len(spec) == 2:
                if spec[0] not in values:
                    raise missing(f"{spec[0]} (of {fname})")
                values[fname] = _entry(values[spec[0]], spec[1], fname)
        required = ["energetic_update", "trace_potential", "bracket", "bracket_newton", "bracket_parameter_gradient",
                    "label_weight", "prox_starts", "test_loss", "test_observables", "validity", "parameter_checks",
                    "rho_bar"]
        required += (["entropic_update", "entropic_potential"] if values["ENTROPIC"] == "closed" else
                     ["entropic_from_gradient", "entropic_bracket", "entropic_parameter_gradient",
                      "entropic_validity", "regularizer"])
        if values.get("PIECEWISE"):
            required += ["loss_breaks", "branch_index", "branch_newton", "branch_stationary"]
        for r in required:
            if r not in values:
                raise missing(f"function {r}")
        leaves = {}
        if "node_constants" in ns:
            leaves["node_constants"] = ns["node_constants"]
            for fname, leaf in LEAVES.items():
                if table.get(fname, ("",))[0] != leaf or leaf not in ns:
                    raise missing(f"per-node kernel {leaf}")
                leaves[leaf] = ns[leaf]
        path = Path(module.__file__) if getattr(module, "__file__", None) else None
        return cls(**values, leaves=leaves, path=path, module_name=module.__name__,
                   stamp=read_stamp(path) if path is not None else None)


_FUNCTION_FIELDS = frozenset(f.name for f in dataclasses.fields(GeneratedModel) if f.type == "Fn")


def _entry(fn: Callable, k: int, name: str) -> Callable:
    def entry(*args):
        return fn(*args)[k]

    entry.__name__ = entry.__qualname__ = name
    entry.__doc__ = f"Entry {k} of {fn.__name__}'s output."
    return entry


def vectorised(name: str, kernel: Callable, n_node: int, blocks: tuple, constants: Callable | None = None,
               n_constants: int = 0) -> Callable:
    """The vectorised function ``name`` of a kernel: its arguments as the kernel's (the first
    ``n_node`` with trailing node axes that broadcast), its outputs allocated at the nodes' shape,
    one per block (``blocks``: entries of a stacked block, 0 for one value per node), returned
    in order (alone if there is one). ``constants``: the kernel of the ``h``-free constants
    (``constants(*args[1:], c)``), evaluated first into ``c`` for ``kernel(h, c, *outputs)``."""
    def function(*args):
        shape = np.broadcast_shapes(*(np.shape(a[0]) for a in args[:n_node])) if n_node else ()
        outs = [np.empty((k,) + shape) for k in blocks if k]
        if constants is not None:
            c = np.empty((max(n_constants, 1),) + np.shape(args[1][0]))
            constants(*args[1:], c)
            value = kernel(args[0], c, *outs)
        else:
            value = kernel(*args, *outs)
        result, it = [], iter(outs)
        for k in blocks:
            if k:
                result.append(next(it))
            elif n_node:
                out = np.empty(shape)
                out[...] = value
                result.append(out)
            else:
                result.append(value)
        return result[0] if len(result) == 1 else tuple(result)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = kernel.__doc__
    return function


def as_model(module: "GeneratedModel | ModuleType") -> GeneratedModel:
    """``module`` as a :class:`GeneratedModel` (read once per module object)."""
    if isinstance(module, GeneratedModel):
        return module
    hit = _READ.get(id(module))
    if hit is not None and hit[0] is module:
        return hit[1]
    model = GeneratedModel.from_module(module)
    _READ[id(module)] = (module, model)
    return model


_READ: dict[int, tuple[ModuleType, GeneratedModel]] = {}

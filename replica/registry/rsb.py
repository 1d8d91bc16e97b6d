"""The 1RSB module of a model (:mod:`replica.codegen.rsb`), built into the cache and read as an
:class:`~replica.numeric.rsb.RSBModel`.

Like a model's replica-symmetric module (:func:`replica.registry.load_module`), it lives in
``<cache>/generated/``, named by the hashes its stamp records (the declaration's, and the 1RSB
generator's: freshness kind ``rsb``), generated on first use under the same lock and read once per
process. Generating it imports the declaration (sympy); reading it does not.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

from ..artifacts.freshness import current_stamp, read_stamp
from ..artifacts.outputs import atomic_write_text
from ..numeric.rsb import RSBModel
from .loader import _generation_lock, _import_path, _stem, declaration_path, generated_dir, load_model

#: the freshness kind of the 1RSB modules (:data:`replica.artifacts.freshness.WRITERS`)
KIND = "rsb"


def rsb_module_path(name: str) -> Path:
    """Where the 1RSB module of model ``name`` lives: ``<cache>/generated/<stem>-rsb1-<declaration>-<generator>.py``."""
    stamp = current_stamp(declaration_path(name), KIND)
    return generated_dir() / f"{_stem(name)}-rsb1-{stamp.declaration}-{stamp.generator}.py"


def load_rsb_module(name: str, quiet: bool = False) -> RSBModel:
    """The 1RSB module of model ``name`` (a declared model or a path), generated first if it is not in the
    cache (a note on stderr unless ``quiet``)."""
    path = rsb_module_path(name)
    hit = _LOADED.get(str(path))
    if hit is not None:
        return hit
    stamp = current_stamp(declaration_path(name), KIND)
    if read_stamp(path) != stamp:
        with _generation_lock(path):
            if read_stamp(path) != stamp:
                from ..codegen.rsb import generate_rsb_module  # the symbolic pipeline: only when generating
                from ..symbolic.rsb import RSBDerivation

                model = load_model(name)
                if not quiet:
                    print(f"replica: generating the 1RSB module of {model.name} ({path}); this takes a few seconds "
                          "to a minute", file=sys.stderr)
                atomic_write_text(path, generate_rsb_module(RSBDerivation(model), model.declared_in))
        importlib.invalidate_caches()
    sys.modules.pop(f"replica_rsb_{path.stem}", None)
    out = RSBModel.from_module(_import_path(path, prefix="replica_rsb_"))
    _LOADED[str(path)] = out
    return out


#: the 1RSB modules read in this process, by file
_LOADED: dict[str, RSBModel] = {}

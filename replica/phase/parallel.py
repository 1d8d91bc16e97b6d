"""Worker processes of the phase machinery: the pool, and passing a generated module to a worker.

One place for process parallelism in :mod:`replica.phase` (issue 19 replaces this with any
``concurrent.futures`` executor). A module crosses the process boundary by reference (its
import name and file).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from ..workers import worker_pool


def pool(jobs: int):
    """``with pool(jobs) as executor``: ``jobs`` worker processes that die with this one on
    SIGTERM/SIGINT (:func:`replica.workers.worker_pool`; forked where the platform allows)."""
    return worker_pool(jobs)


def module_ref(module: ModuleType) -> tuple[str, str | None]:
    """A picklable reference to a generated module: its import name and file."""
    return module.__name__, getattr(module, "__file__", None)


def module_from_ref(ref: tuple[str, str | None]) -> ModuleType:
    """The module of :func:`module_ref` (imported, or loaded from its file, in this process)."""
    name, path = ref
    if name in sys.modules:
        return sys.modules[name]
    try:
        return importlib.import_module(name)
    except ImportError:
        if path is None:
            raise
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

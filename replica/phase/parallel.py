"""The phase machinery's side of the executor layer (:mod:`replica.runtime.executors`): which executor a
call runs on, and passing a generated module to a worker.

Parallel work in :mod:`replica.phase` goes through :func:`executor_for` -- the caller's
executor (e.g. a Dask client's) when one is given, else :func:`replica.runtime.executors.open_executor`
with ``jobs`` local processes that die with this one. A module crosses the process boundary by
reference (its import name and file).
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import importlib
import importlib.util
import sys
from typing import Iterator

from ..interface.generated_model import GeneratedModel, as_model
from ..runtime.executors import open_executor


@contextlib.contextmanager
def executor_for(jobs: int, executor: cf.Executor | None = None) -> Iterator[cf.Executor]:
    """``executor`` if given (left open: its owner closes it), else ``jobs`` local worker
    processes (:func:`replica.runtime.executors.open_executor`; this process when ``jobs == 1``)."""
    if executor is not None:
        yield executor
        return
    with open_executor(jobs) as ex:
        yield ex


def module_ref(module: GeneratedModel) -> tuple[str, str | None]:
    """A picklable reference to a generated model: its module's import name and file."""
    return module.module_name, str(module.path) if module.path is not None else None


def module_from_ref(ref: tuple[str, str | None]) -> GeneratedModel:
    """The model of :func:`module_ref` (imported, or loaded from its file, in this process)."""
    name, path = ref
    if name not in sys.modules:
        try:
            importlib.import_module(name)
        except ImportError:
            if path is None:
                raise
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
    return as_model(sys.modules[name])

"""Simulator plug-ins: what an application adds to the one simulator, found here at run time.

The simulator's core (:mod:`numerics.problem`, :mod:`numerics.check`, :mod:`numerics.glm`,
:mod:`numerics.gamp`) simulates any declared model from its declaration and names none. A study whose
experiments need more than a declaration says -- a student written as a torch module, an optimiser and
its schedule, a task with its own data, a finite-size study -- registers them as *protocols* of
``python -m numerics.simulate``: a subpackage of this folder defines ``PROTOCOLS``, a tuple of
:class:`Protocol`. :func:`protocols` finds every such subpackage by name at run time (no core module
imports an application), as :mod:`replica.applications` does for the command line.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

__all__ = ["Protocol", "protocols"]


@dataclass(frozen=True)
class Protocol:
    """One protocol of ``python -m numerics.simulate``.

    ``name``: its subcommand; ``summary``: one line of the simulator's ``--help``; ``entry``:
    ``"module:function"`` of its command line, ``function(argv) -> exit code``, imported only when
    the protocol runs; ``named``: whether that command line takes the subcommand itself as its first
    argument (one parser for several protocols)."""

    name: str
    summary: str
    entry: str
    named: bool = False

    def main(self, argv: Sequence[str]) -> int:
        """Run the protocol's command line on ``argv`` (the arguments after its name)."""
        module, _, func = self.entry.partition(":")
        run: Callable[[list[str]], int] = getattr(importlib.import_module(module), func)
        return run([self.name, *argv] if self.named else list(argv))


@lru_cache(maxsize=1)
def protocols() -> dict[str, Protocol]:
    """Every protocol the application packages of this folder register, by name."""
    found: dict[str, Protocol] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        for p in getattr(importlib.import_module(f"{__name__}.{info.name}"), "PROTOCOLS", ()):
            if isinstance(p, Protocol):
                found.setdefault(p.name, p)
    return found

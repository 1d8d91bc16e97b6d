"""Applications: studies built on the generic core, found here at run time as plug-ins.

The core (:mod:`replica.numeric.solver`, :mod:`replica.phase`, ...) knows branches, crossings and
baselines of *any* model that declares them. An application package adds what belongs to one
line of work -- its words for its parameters in ``--help``, its figures (``replica figures``),
its paper's constants -- by defining ``APPLICATION = Application(...)`` in its ``__init__``.
:func:`applications` finds every subpackage of this folder that does (by name, at run time: no
core module imports an application), and the generic commands loop over what they register.
:mod:`replica.applications.attention` is the study of the seed paper (Cui et al. 2024: tied
dot-product attention, semantic vs positional learning).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Mapping


@dataclass(frozen=True)
class Application:
    """What one study registers with the generic command line.

    ``parameter_help``: a parameter's (or a matrix parameter's) description in a model's
    ``--help``, for the models that declare it. ``figures``: ``"module:function"`` of the function
    that draws the study's figures from the parsed arguments of ``replica figures`` (imported
    only when that command runs), with ``figures_help``, one line for the command's description."""

    name: str
    summary: str
    parameter_help: Mapping[str, str] = field(default_factory=dict)
    figures: str | None = None
    figures_help: str = ""

    def figure_function(self) -> Callable:
        """The registered figures function (imports its module)."""
        module, _, func = (self.figures or "").partition(":")
        if not func:
            raise LookupError(f"application {self.name!r} registers no figures")
        return getattr(importlib.import_module(module), func)


@lru_cache(maxsize=1)
def applications() -> tuple[Application, ...]:
    """Every application package of this folder that registers an :class:`Application`, by name."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        app = getattr(importlib.import_module(f"{__name__}.{info.name}"), "APPLICATION", None)
        if isinstance(app, Application):
            found.append(app)
    return tuple(found)


def parameter_help() -> dict[str, str]:
    """Every registered parameter description (an application's words for its parameters)."""
    out: dict[str, str] = {}
    for app in applications():
        out.update(app.parameter_help)
    return out

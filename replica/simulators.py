"""Simulators: the finite-size checks of a theory, found at run time as plug-ins.

The library solves the theory; a *simulator* trains the same learning problem at finite size
and measures it (gradient descent in PyTorch, GAMP, exact ERM ...). A simulator package
registers one :class:`Simulator` under the entry-point group :data:`GROUP` in its distribution's
metadata (``[project.entry-points."replica.simulators"]`` in pyproject.toml: ``NAME =
"package.module:OBJECT"``), the way applications register themselves
(:mod:`replica.applications`): the library never names a simulator package, and
``replica check`` and ``replica sweep`` (``kind = "simulate"``) run what is registered.
A source checkout whose installed metadata predates its entry points is read from its own
pyproject.toml, so a development tree needs no reinstall.

A check (``Simulator.check``) is a module with ``run_check(model, alpha, **options) -> dict``,
``format_table(result) -> str``, ``plot(result, path)``, ``REASONS`` (why a JSON number can be null)
and ``progress(message)`` (a progress line on stderr); a sweep simulator
(``Simulator.sweep``: short name -> ``"module:function"``) is called as ``function(model, point,
**options)`` and may carry ``function.check(model, point, options)``, run on every point first.
"""
from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Callable, Mapping

from .errors import ParameterError

#: the entry-point group simulators register under
GROUP = "replica.simulators"


@dataclass(frozen=True)
class Simulator:
    """What one simulator package registers: its finite-size check (a module, see the module
    docstring) and its sweep simulators (short name -> ``"module:function"``)."""

    name: str
    summary: str
    check: str | None = None
    sweep: Mapping[str, str] = field(default_factory=dict)


def _registrations() -> dict[str, str]:
    """``name -> "module:object"`` of every registration: the installed metadata's, then a source
    checkout's own pyproject.toml (beside this package) for names the metadata lacks."""
    found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=GROUP)}
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.is_file():
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            try:
                import tomli as tomllib  # type: ignore[no-redef]
            except ModuleNotFoundError:
                tomllib = None  # type: ignore[assignment]
        if tomllib is not None:
            try:
                table = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                table = {}
            for name, value in table.get("project", {}).get("entry-points", {}).get(GROUP, {}).items():
                found.setdefault(name, value)
    return found


@lru_cache(maxsize=1)
def simulators() -> tuple[Simulator, ...]:
    """Every registered simulator (a registration that cannot be imported is left out: its package
    or one of its dependencies is not installed)."""
    out = []
    for name, target in sorted(_registrations().items()):
        module, _, attr = target.partition(":")
        try:
            sim = getattr(importlib.import_module(module), attr or "SIMULATOR")
        except (ImportError, AttributeError):
            continue
        if isinstance(sim, Simulator):
            out.append(sim)
    return tuple(out)


def _none_installed(what: str) -> ParameterError:
    return ParameterError("simulator", f"no simulator that provides {what} is installed; install one "
                                       "(this project's: pip install -e '.[sim]')")


def check_module() -> ModuleType:
    """The module of the first registered simulator that provides a finite-size check."""
    for sim in simulators():
        if sim.check:
            return importlib.import_module(sim.check)
    raise _none_installed("a finite-size check")


def sweep_simulators() -> dict[str, str]:
    """Every registered sweep simulator: short name -> ``"module:function"``."""
    out: dict[str, str] = {}
    for sim in simulators():
        for name, target in sim.sweep.items():
            out.setdefault(name, target)
    return out


def sweep_simulator(name: str, flag: str = "compute.simulator") -> Callable[..., dict]:
    """The sweep simulator registered as ``name``: registered names only (a spec cannot name an
    arbitrary function to import and call); one line naming ``flag`` otherwise."""
    known = sweep_simulators()
    if name not in known:
        raise ParameterError(flag, f"{name!r} is not a registered simulator; registered: {sorted(known) or 'none'}")
    module, _, func = known[name].partition(":")
    try:
        return getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ParameterError(flag, f"cannot load simulator {name!r} ({known[name]}): {first}") from None

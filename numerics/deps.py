"""Optional dependencies of the simulators: one line saying what to install, never a traceback.

``torch`` (the generic gradient-based minimiser, the attention simulators) and ``scikit-learn``
(the exact solvers of convex GLMs) are the ``sim`` extra (``pip install -e ".[sim]"``). A command
that needs one of them and does not find it stops with :class:`MissingDependency`, a
:class:`replica.errors.ReplicaError` whose message is one line naming the package, what needs it and
the command that installs it.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from replica.errors import ReplicaError

__all__ = ["MissingDependency", "INSTALL", "require", "available", "missing_line"]

#: how to install each optional dependency (the ``sim`` extra holds torch and scikit-learn)
INSTALL = {
    "torch": "pip install torch (or pip install -e \".[sim]\")",
    "sklearn": "pip install scikit-learn (or pip install -e \".[sim]\")",
    "matplotlib": "pip install matplotlib",
}
#: the distribution name of an importable module, where they differ
PACKAGE = {"sklearn": "scikit-learn"}


class MissingDependency(ReplicaError, ImportError):
    """An optional package a command needs is not installed (the message says how to install it)."""


def available(module: str) -> bool:
    """Whether ``module`` can be imported (without raising)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependency`:
    ``"<purpose> needs <package>, which is not installed: <how to install it>"``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = PACKAGE.get(module, module)
        how = INSTALL.get(module, f"pip install {package}")
        raise MissingDependency(f"{purpose} needs {package}, which is not installed: {how}") from None


def missing_line(prog: str, main, *args):
    """``main(*args)``, or, where it stops on a missing optional package (:data:`INSTALL`), one line
    ``"<prog>: error: needs <package>, which is not installed: <how>"`` on stderr and status 2: for
    command lines that do not go through :func:`numerics.checks.run_cli`."""
    import sys

    try:
        return main(*args)
    except ModuleNotFoundError as exc:
        if exc.name not in INSTALL:
            raise
        print(f"{prog}: error: needs {PACKAGE.get(exc.name, exc.name)}, which is not installed: {INSTALL[exc.name]}",
              file=sys.stderr)
        return 2

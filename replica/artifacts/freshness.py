"""Freshness of generated artifacts: every generated module and export knows what it came from.

Every generated module (``derivations/generated/<model>.py``) and LaTeX/Markdown export
(``derivations/<model>.tex``, ``.md``) carries a *stamp* line near its top::

    replica-artifact: version=0.1.0 declaration=<hash> generator=<hash>

* ``declaration``: SHA-256 of the declaration file and of every local module it imports,
  followed recursively -- other declarations (``derivations.*``), application packages
  (``replica.applications.*``) and, for a user's file, modules next to it. Library and
  third-party imports are not followed (the library is covered by the generator hash).
* ``generator``: SHA-256 of the library sources that decide what is written -- the symbolic
  pipeline (model, data, regularizers, observables, order parameters, potentials, derivation,
  symmetries) plus the code generator for modules, plus the LaTeX writer for exports.
* ``version``: the package version.

Computing and comparing them reads files and hashes bytes: no sympy, no import of the
declaration, a few milliseconds. :func:`replica.artifacts.registry.load_module` regenerates a stale
module, or refuses with a one-line message naming the file when it cannot (a read-only tree, or
``REPLICA_FROZEN_TREE=1``, which the test suite sets so that a stale committed module fails
loudly instead of being rewritten under the drift tests). The version of sympy is not part of
the stamp on purpose: a user with another sympy would otherwise regenerate every committed
module; the drift tests compare the committed text byte for byte instead.
"""
from __future__ import annotations

import ast
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .. import __version__

LIBRARY = Path(__file__).resolve().parent.parent
ROOT = LIBRARY.parent

#: library sources of the symbolic pipeline (shared by modules and exports)
SYMBOLIC_SOURCES = tuple(f"symbolic/{name}.py" for name in (
    "channels", "constraints", "data", "derivation", "losses", "model", "observables",
    "order_parameters", "potentials", "regularizers", "symbols", "symmetries"))
#: what else decides a generated module / an export
MODULE_SOURCES = SYMBOLIC_SOURCES + ("codegen/__init__.py", "codegen/backends.py", "codegen/dag.py",
                                     "codegen/generator.py", "codegen/printers.py")
EXPORT_SOURCES = SYMBOLIC_SOURCES + ("symbolic/latex.py",)

STAMP = re.compile(r"replica-artifact: version=(\S+) declaration=(\S+) generator=(\S+)")

#: local import roots followed by the declaration hash (relative to the repository root)
LOCAL_PACKAGES = ("derivations", "replica/applications")


@dataclass(frozen=True)
class Stamp:
    """What an artifact was generated from."""

    version: str
    declaration: str
    generator: str

    def line(self) -> str:
        """The stamp as it appears in an artifact (after a comment marker)."""
        return f"replica-artifact: version={self.version} declaration={self.declaration} generator={self.generator}"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def generator_hash(kind: str = "module") -> str:
    """Hash of the library sources that decide a generated ``module`` or an ``export``."""
    files = MODULE_SOURCES if kind == "module" else EXPORT_SOURCES
    h = hashlib.sha256(kind.encode())
    for name in files:
        h.update(name.encode() + b"\0" + (LIBRARY / name).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _imports(path: Path) -> Iterable[tuple[str, int, list[str]]]:
    """``(module, level, imported names)`` of every import statement in ``path``."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, 0, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.module or "", node.level, [a.name for a in node.names]))
    return out


def _candidates(base: Path, dotted: str) -> list[Path]:
    parts = [p for p in dotted.split(".") if p]
    if not parts:
        return [base / "__init__.py"]
    stem = base.joinpath(*parts)
    return [stem.with_suffix(".py"), stem / "__init__.py"]


def _local(path: Path, home: Path) -> bool:
    """Whether ``path`` is a local module the declaration hash follows."""
    path = path.resolve()
    if any(path.is_relative_to(ROOT / pkg) for pkg in LOCAL_PACKAGES):
        return True
    return path.parent == home and not path.is_relative_to(LIBRARY)


def declaration_files(path: str | os.PathLike) -> list[Path]:
    """The declaration file and the local modules it imports, recursively (sorted)."""
    first = Path(path).resolve()
    home = first.parent
    seen: dict[Path, None] = {first: None}
    todo = [first]
    while todo:
        f = todo.pop()
        for module, level, names in _imports(f):
            if level:
                base = f.parent
                for _ in range(level - 1):
                    base = base.parent
                roots = [base]
            else:
                roots = [ROOT, home]
            found = []
            for root in roots:
                found += [c for c in _candidates(root, module) if c.is_file()]
                found += [c for n in names for c in _candidates(root, f"{module}.{n}") if c.is_file()]
            for c in found:
                c = c.resolve()
                if c not in seen and _local(c, home):
                    seen[c] = None
                    todo.append(c)
    return sorted(seen)


def declaration_hash(path: str | os.PathLike) -> str:
    """Hash of the declaration at ``path`` and its local imports (location independent)."""
    digests = sorted(_sha(f.read_bytes()) for f in declaration_files(path))
    return _sha("\n".join(digests).encode())[:16]


def current_stamp(declaration: str | os.PathLike | None, kind: str = "module") -> Stamp:
    """The stamp an artifact generated now from ``declaration`` would carry (``-`` without a file)."""
    return Stamp(__version__, declaration_hash(declaration) if declaration is not None else "-",
                 generator_hash(kind))


def read_stamp(path: str | os.PathLike) -> Stamp | None:
    """The stamp of an artifact (searched in its first 4 kB), ``None`` if it has none."""
    try:
        with open(path, encoding="utf-8") as fh:
            head = fh.read(4096)
    except OSError:
        return None
    m = STAMP.search(head)
    return Stamp(*m.groups()) if m else None


def staleness(artifact: str | os.PathLike, declaration: str | os.PathLike | None,
              kind: str = "module") -> str | None:
    """Why ``artifact`` is stale (``None`` if it is fresh): missing, unstamped, or which of the
    version, the declaration and the generator changed since it was generated."""
    path = Path(artifact)
    if not path.exists():
        return "missing"
    old = read_stamp(path)
    if old is None:
        return "no replica-artifact stamp (generated by an older replica)"
    new = current_stamp(declaration, kind)
    why = [what for what, a, b in (("the declaration", old.declaration, new.declaration),
                                   ("the generator", old.generator, new.generator),
                                   ("the replica version", old.version, new.version)) if a != b and a != "-"]
    return " and ".join(why) + " changed" if why else None


def frozen(path: str | os.PathLike) -> bool:
    """Whether a stale artifact at ``path`` must be refused rather than rewritten: its directory
    is not writable, or ``REPLICA_FROZEN_TREE=1`` and it lies in the package tree."""
    p = Path(path).resolve()
    if os.environ.get("REPLICA_FROZEN_TREE", "") == "1" and p.is_relative_to(ROOT / "derivations"):
        return True
    d = p.parent if p.parent.exists() else p.parent.parent
    return not os.access(d, os.W_OK)

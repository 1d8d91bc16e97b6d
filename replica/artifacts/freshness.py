"""Freshness of generated artifacts: every generated module and export knows what it came from.

Every generated module (in the cache, see :mod:`replica.registry`) and LaTeX/Markdown export
(``derivations/<model>.tex``, ``.md``) carries a *stamp* line near its top::

    replica-artifact: version=0.1.0 declaration=<hash> generator=<hash>

* ``declaration``: SHA-256 of the declaration file and of every local module it imports,
  followed recursively -- other declarations (``derivations.*``), application packages
  (``replica.applications.*``) and, for a user's file, modules next to it. Library and
  third-party imports are not followed (the library is covered by the generator hash).
* ``generator``: SHA-256 of the *code* of the library packages that decide what is written --
  the symbolic pipeline plus the code generator (:data:`GENERATOR_PACKAGES`) for modules, the
  symbolic pipeline and the LaTeX writer for exports: every ``.py`` file of those packages, found
  by walking their folders (no hand-kept list), hashed as its syntax tree without docstrings, so
  that editing a comment or a docstring leaves every artifact fresh.
* ``version``: the package version.

Computing and comparing them reads files and hashes bytes: no sympy, no import of the
declaration, a few milliseconds. A generated module is built into the cache under the name of its
declaration and generator hashes (:func:`replica.registry.generated_path`): one that is
found there is fresh. The committed exports keep their stamp, which ``replica generate --check``
and the test suite compare. The version of sympy is not part of the stamp on purpose: a user with
another sympy would otherwise regenerate every module; the golden-file tests of the generator
(tests/golden/) and of the exports compare the text byte for byte instead.
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

#: the library packages (folders under ``replica/``) whose code may decide a generated artifact
GENERATOR_PACKAGES = ("symbolic", "codegen")
#: where each kind of artifact is written from: the code generator's package for a module, the LaTeX
#: writer for an export, the Bayes-optimal and the 1RSB module (file names); its hash covers these and
#: what they import from the packages. A file named here for one kind is not a writer of another kind
#: by its folder alone (``codegen/rsb.py`` and ``codegen/bayes.py`` do not decide the replica-symmetric modules)
WRITERS = {"module": ("codegen/",), "export": ("latex.py",), "bayes": ("codegen/bayes.py", "bayes_latex.py"),
           "rsb": ("codegen/rsb.py",)}

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


def _package_files() -> set[str]:
    """Every ``.py`` file of :data:`GENERATOR_PACKAGES`, as strings (LIBRARY is resolved, and a
    start-up pays for every ``Path`` hashed or resolved here)."""
    out = set()
    for pkg in GENERATOR_PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(LIBRARY, pkg)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            out.update(os.path.join(folder, f) for f in files if f.endswith(".py"))
    return out


def generator_files(kind: str = "module") -> list[Path]:
    """The library files whose code decides a generated ``module`` or an ``export`` (sorted): the
    writer's (:data:`WRITERS`) and, followed recursively, every file of :data:`GENERATOR_PACKAGES`
    they import (module-level or inside a function). Found by reading the packages' folders and
    imports, so that a moved or a new file is covered without a list to keep."""
    pool = _package_files()
    lib = str(LIBRARY) + os.sep
    named = {w for k, ws in WRITERS.items() if k != kind for w in ws if w.endswith(".py")}
    todo = [f for f in pool if any(f[len(lib):].replace(os.sep, "/").startswith(w) or os.path.basename(f) == w
                                   for w in WRITERS[kind])
            and f[len(lib):].replace(os.sep, "/") not in named]
    seen = set(todo)
    while todo:
        f = todo.pop()
        for module, level, names in _facts(f)[1]:
            if level:
                base = os.path.dirname(f)
                for _ in range(level - 1):
                    base = os.path.dirname(base)
            elif module == "replica" or module.startswith("replica."):
                base = str(ROOT)
            else:
                continue
            for dotted in [module] + [f"{module}.{n}" for n in names]:
                stem = os.path.join(base, *[p for p in dotted.split(".") if p])
                for c in (stem + ".py", os.path.join(stem, "__init__.py")):
                    if c in pool and c not in seen:
                        seen.add(c)
                        todo.append(c)
    return [Path(f) for f in sorted(seen)]


def code_digest(source: bytes) -> bytes:
    """The code of a Python file without its comments and docstrings: the source with those cut out
    (positions from :mod:`ast` and :mod:`tokenize`), trailing blanks and empty lines dropped. Text,
    not a syntax-tree dump, so that the digest is the same under every Python version. The raw
    bytes if the file does not parse."""
    import io
    import tokenize

    try:
        text = source.decode("utf-8")
        tree = ast.parse(text)
        lines = text.splitlines(keepends=True)
        spans = []  # (row, start column, end row, end column), in characters
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
                d = node.body[0]
                if isinstance(d, ast.Expr) and isinstance(d.value, ast.Constant) and isinstance(d.value.value, str):
                    # ast columns count UTF-8 bytes
                    def col(row: int, byte: int) -> int:
                        return len(lines[row - 1].encode()[:byte].decode())

                    spans.append((d.lineno, col(d.lineno, d.col_offset), d.end_lineno,
                                  col(d.end_lineno, d.end_col_offset)))
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                spans.append((*tok.start, *tok.end))
    except (SyntaxError, ValueError, UnicodeDecodeError, tokenize.TokenError):
        return source
    for r0, c0, r1, c1 in sorted(spans, reverse=True):
        if r0 == r1:
            lines[r0 - 1] = lines[r0 - 1][:c0] + lines[r0 - 1][c1:]
        else:
            lines[r0 - 1:r1] = [lines[r0 - 1][:c0] + lines[r1 - 1][c1:]]
    kept = [line.rstrip() for line in "".join(lines).splitlines()]
    return "\n".join(line for line in kept if line).encode()


def generator_hash(kind: str = "module") -> str:
    """Hash of the code (:func:`code_digest`) of :func:`generator_files`: where a file lies does not
    count, only what it says."""
    digests = sorted(_facts(f)[0] for f in generator_files(kind))
    _save_memo()
    return _sha((kind + "\n" + "\n".join(digests)).encode())[:16]


#: per library file: ``[[mtime_ns, size], code digest, imports]`` (see :func:`_facts`)
_MEMO: dict | None = None
_MEMO_CHANGED = False


def _memo_path() -> Path:
    """Beside the library's bytecode (``replica/__pycache__``): derived from its sources like the
    bytecode, and as writable (no memo where it is not)."""
    return LIBRARY / "__pycache__" / "freshness-memo.json"


def _facts(path: str | Path) -> tuple[str, list[tuple[str, int, list[str]]]]:
    """``(code digest, imports)`` of a library file, memoised (:func:`_memo_path`) by the file's
    size and modification time: parsing and tokenising the generator's files costs ~0.3 s,
    which every command would pay at start-up. The memo is keyed by this module's own source too,
    so that a change to how digests are computed never reads an old one."""
    import json

    global _MEMO, _MEMO_CHANGED
    if _MEMO is None:
        _MEMO = {}
        try:
            memo = json.loads(_memo_path().read_text(encoding="utf-8"))
            if memo.get("code") == _sha(Path(__file__).read_bytes()):
                _MEMO = memo.get("files", {})
        except (OSError, ValueError, AttributeError):
            pass
    st = os.stat(path)
    key, stat = str(path), [st.st_mtime_ns, st.st_size]
    hit = _MEMO.get(key)
    if hit is None or hit[0] != stat:
        with open(path, "rb") as fh:
            data = fh.read()
        hit = _MEMO[key] = [stat, _sha(code_digest(data)), [[m, lv, n] for m, lv, n in _imports(Path(path))]]
        _MEMO_CHANGED = True
    return hit[1], [(m, lv, n) for m, lv, n in hit[2]]


def _save_memo() -> None:
    """Write the memo of :func:`_facts` if it changed (atomically; silently not where it cannot be
    written)."""
    import json
    import tempfile

    global _MEMO_CHANGED
    if not _MEMO_CHANGED:
        return
    _MEMO_CHANGED = False
    try:
        path = _memo_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".freshness-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"code": _sha(Path(__file__).read_bytes()), "files": _MEMO}, fh)
        os.replace(tmp, path)
    except OSError:
        pass


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
        for module, level, names in _facts(f)[1]:
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

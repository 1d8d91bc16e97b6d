"""Output files: checked before the work starts, written atomically.

A long computation must not fail at its last step because its output path is a missing
directory or a read-only place (``/proc``), nor leave a half-written file behind when it is
interrupted. :func:`check_output_file` / :func:`check_output_dir` run before the work
(they create nothing but a probe they remove again); :func:`atomic_write` writes a
temporary file in the target's directory and moves it into place with :func:`os.replace`
(atomic on POSIX), so a reader sees the old file or the complete new one.

Only regular files are staged and replaced. An output path that names something else is written
*through* (opened and written like a shell redirection) or refused (:func:`output_target`): a
symbolic link has its target replaced, the link kept; a FIFO, a character device
(``/dev/null``, a terminal) and every path under ``/dev`` or ``/proc`` (``/dev/stdout`` is a link
to the process's own descriptor, which may be a pipe or the file the shell redirected it to) are
written through; a block device or a socket is refused. Replacing them put a regular file where a
device node was (run as root, ``--plot /dev/full`` replaced the system's ``/dev/full`` by a PNG).
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import tempfile
import threading
from pathlib import Path
from typing import IO, Iterator, Mapping

from ..errors import ParameterError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: files are created with the permissions ``open`` would give them (mkstemp's are 0600)
_MODE = 0o666 & ~_umask()


def _probe_dir(directory: Path, name: str, shown: str) -> None:
    """Raise unless a file can be created in ``directory`` (tried for real: permissions,
    read-only mounts and pseudo file systems such as ``/proc`` all answer differently)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".replica-probe-", dir=directory)
    except OSError as exc:
        raise ParameterError(name, f"cannot write in {directory} ({exc.strerror or exc}) for {shown}") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


#: outputs under these directories are never replaced, only written through
SYSTEM_DIRS = ("/dev", "/proc")
#: what :func:`output_target` says of a path
NEW, REGULAR, STREAM, DIRECTORY, REFUSED = "new", "regular", "stream", "directory", "refused"


def _in_system_dir(p: str) -> bool:
    return any(p == d or p.startswith(d + "/") for d in SYSTEM_DIRS)


def output_target(path: str | os.PathLike) -> tuple[Path, str]:
    """Where an output written to ``path`` goes, and how: ``(target, kind)``.

    ``kind`` is :data:`NEW` (nothing there yet: ``target`` is created), :data:`REGULAR` (a regular
    file, replaced atomically; ``target`` is the file a symbolic link points to, so the link
    stays), :data:`STREAM` (a FIFO, a character device or anything under ``/dev`` or ``/proc``:
    ``target`` is opened and written through, never replaced), :data:`DIRECTORY` or
    :data:`REFUSED` (a block device, a socket)."""
    p = Path(path).expanduser()
    absolute = os.path.abspath(p)
    resolved = os.path.realpath(p)
    if _in_system_dir(absolute) or _in_system_dir(resolved):
        return p, STREAM
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:  # nothing there, or a dangling link: its target is created
        return Path(resolved), NEW
    except OSError:
        return p, REFUSED
    if stat.S_ISDIR(mode):
        return p, DIRECTORY
    if stat.S_ISREG(mode):
        return Path(resolved), REGULAR
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return p, STREAM
    return p, REFUSED


def check_output_file(path: str | os.PathLike, name: str) -> Path:
    """``path`` can be written: its directory exists and is writable, and it is not a directory
    (nor a block device or a socket; a FIFO or a character device can be written through, see
    :func:`output_target`).

    Missing parent directories are not created (a typo must not make ``/tmp/a/b/c``
    appear): the message says which one is missing.
    """
    p = Path(path).expanduser()
    if str(path) == "" or p.name in ("", ".", ".."):
        raise ParameterError(name, f"{str(path)!r} is not a file name")
    target, kind = output_target(p)
    if kind == DIRECTORY:
        raise ParameterError(name, f"{p} is a directory; give a file name")
    if kind == REFUSED:
        raise ParameterError(name, f"{p} is neither a regular file nor a FIFO or character device; give a file name")
    if kind == STREAM:
        if p.exists() and not os.access(p, os.W_OK):
            raise ParameterError(name, f"{p} cannot be written")
        return p
    _check_parent(target, name)
    return p


def check_output_files(outputs: Mapping[str, str | os.PathLike | None],
                       inputs: Mapping[str, str | os.PathLike | None] | None = None) -> dict[str, Path]:
    """Every output given (``{flag: path or None}``) can be written (:func:`check_output_file`),
    no two of them name the same file, and none is one of the command's ``inputs`` (``{flag:
    path}``: a declaration, a spec, a data file), which the output would overwrite. Streams
    (``/dev/stdout``, a FIFO) may be shared. Returns the given outputs as paths."""
    out: dict[str, Path] = {}
    seen: dict[str, str] = {}
    known = {}
    for flag, path in (inputs or {}).items():
        if path is not None and output_target(path)[1] == REGULAR:
            known[str(output_target(path)[0])] = flag
    for flag, path in outputs.items():
        if path is None:
            continue
        out[flag] = check_output_file(path, flag)
        target, kind = output_target(path)
        if kind == STREAM:
            continue
        key = str(target)
        if key in known:
            raise ParameterError(flag, f"{path} is the {_flag(known[key])} file itself; give the output another name")
        if key in seen:
            raise ParameterError(flag, f"{path} is also given as {_flag(seen[key])}; give each output its own file")
        seen[key] = flag
    return out


def check_figure_file(path: str | os.PathLike, name: str) -> Path:
    """:func:`check_output_file`, and a suffix naming a format matplotlib writes (none: PNG), checked
    before the work: ``--plot c.txt`` failed after every simulation had run, and took the results
    with it."""
    p = check_output_file(path, name)
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix:
        from matplotlib.backend_bases import FigureCanvasBase

        known = FigureCanvasBase.get_supported_filetypes()
        if suffix not in known:
            raise ParameterError(name, f"{path}: matplotlib writes no .{suffix} figures; use one of "
                                       f"{', '.join('.' + k for k in sorted(known))}")
    return p


def _flag(name: str) -> str:
    """How a parameter reads on the command line (``--latex``; a positional keeps its name)."""
    return name if name in ("model", "spec") else "--" + name.replace("_", "-")


def _check_parent(p: Path, name: str) -> None:
    """The directory of ``p`` exists (else name the first missing or non-directory ancestor)
    and can be written in."""
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        missing = parent
        while not missing.parent.is_dir() and missing.parent != missing:
            missing = missing.parent
        if missing.exists():
            raise ParameterError(name, f"{missing} is not a directory, so {p} cannot be created")
        raise ParameterError(name, f"directory {missing} does not exist (create it first) for {p}")
    _probe_dir(parent, name, str(p))


def check_output_dir(path: str | os.PathLike, name: str) -> Path:
    """``path`` is a writable directory, or can be created as one (its parent exists)."""
    p = Path(path).expanduser()
    if str(path) == "":
        raise ParameterError(name, "empty directory name")
    if p.exists() and not p.is_dir():
        raise ParameterError(name, f"{p} exists and is not a directory")
    if p.is_dir():
        _probe_dir(p, name, str(p))
        return p
    _check_parent(p, name)
    return p


def make_output_dir(path: str | os.PathLike, name: str = "out") -> Path:
    """Create the output directory ``path`` (its parent must exist, see :func:`check_output_dir`)."""
    p = check_output_dir(path, name)
    try:
        p.mkdir(exist_ok=True)
    except OSError as exc:
        raise ParameterError(name, f"cannot create {p} ({exc.strerror or exc})") from None
    return p


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator[IO]:
    """``with atomic_write(path) as fh: ...``: the file appears complete or not at all.

    The temporary file lives next to ``path`` (same file system, so the final
    :func:`os.replace` is atomic) and is removed if the block raises. A symbolic link has its
    target replaced; a FIFO or a device is written through (:func:`output_target`).
    """
    p, kind = output_target(path)
    if kind == STREAM:  # written through: there is nothing to replace atomically
        with open(p, mode, **kwargs) as fh:
            yield fh
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent if str(p.parent) else ".")
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _MODE)
        os.replace(tmp, p)
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def place(tmp: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Put the finished file ``tmp`` where ``path`` says: replace a regular file (a link's target),
    or copy ``tmp``'s bytes through a FIFO or device (then remove ``tmp``). ``tmp`` should lie on
    ``path``'s file system (its directory) for the replacement to be atomic."""
    target, kind = output_target(path)
    if kind == STREAM:
        try:
            with open(tmp, "rb") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return target
    if kind in (DIRECTORY, REFUSED):
        raise OSError(f"{path} is not a regular file; not replaced")
    try:
        os.replace(tmp, target)
    except OSError as exc:  # a link's target on another file system: copy, then replace there
        if exc.errno != errno.EXDEV:
            raise
        with atomic_write(target, "wb") as fh, open(tmp, "rb") as src:
            shutil.copyfileobj(src, fh)
        os.unlink(tmp)
    return target


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`)."""
    with atomic_write(path, "w", encoding=encoding) as fh:
        fh.write(text)
    return Path(path)


@contextlib.contextmanager
def staged_dir(out: str | os.PathLike, last: str | None = None, name: str = "out") -> Iterator[Path]:
    """``with staged_dir(out, last="summary.json") as stage: <write files into stage>``: the files
    replace those of ``out`` together, or none does.

    A set of files written one after another into ``out`` left, when interrupted, a mix of old and
    new files beside an old summary describing the old run. Here they go into a staging directory
    inside ``out`` (same file system); when the block ends normally they are moved into ``out``
    with :func:`os.replace`, ``SIGINT``/``SIGTERM`` held back meanwhile (delivered once the move is
    done), and ``last`` (the file describing the set) removed before the first move and moved in
    after all others: even a ``kill -9`` during the move leaves no ``last`` describing a mix. If
    the block raises (an interrupt, an error), ``out`` is untouched and the staging directory is
    removed. Files of ``out`` the block did not write (other tools' outputs) are left alone.
    """
    final = make_output_dir(out, name)
    stage = Path(tempfile.mkdtemp(prefix=".staging-", dir=final))
    try:
        yield stage
        names = sorted(p.name for p in stage.iterdir() if p.name != last)
        if last is not None and (stage / last).exists():
            names.append(last)
        held = _hold_signals()
        try:
            if last is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(final / last)
            for n in names:
                target = final / n
                if (stage / n).is_dir():
                    if target.is_dir() and not target.is_symlink():
                        shutil.rmtree(target)
                    os.replace(stage / n, target)
                else:  # a regular file replaced, a link's target replaced, a FIFO written through
                    place(stage / n, target)
        finally:
            _release_signals(held)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _hold_signals():
    """Block SIGINT and SIGTERM in this thread (the main one: where Python handles them)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def _release_signals(previous) -> None:
    if previous is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)

"""On-disk cache of solved saddle points (used by :mod:`replica.phase`).

One JSON file per entry under ``<root>/points/<model>/<key[:2]>/<key>.json``. The key is
the SHA-256 of a canonical JSON description of everything the result depends on
(model, the generated module's freshness stamp -- ``GeneratedModel.SOURCE_HASH`` and the replica
version --, every
parameter, branch, ``alpha``, quadrature / integrator description, tolerance, and for
failures the warm start). The root is ``$REPLICA_CACHE`` if set, else the platform's user
cache directory (:func:`platformdirs.user_cache_dir`: ``$XDG_CACHE_HOME/replica``, by
default ``~/.cache/replica``, on Linux; ``~/Library/Caches/replica`` on macOS); compiled
units (:mod:`replica.numeric.compiled`) live beside the points, in ``<root>/compiled``.

Concurrency and crashes: an entry is written to a temporary file in the same directory
and moved into place with :func:`os.replace` (atomic on POSIX), so a reader sees either
no file or a complete one; two runs writing the same key write the same content. An
entry that cannot be read or parsed (truncated, corrupted, other format) counts as a
miss and is overwritten by the next write.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

import platformdirs

#: bump when the format of the stored entries changes
CACHE_FORMAT = 1


def default_cache_dir() -> Path:
    """``$REPLICA_CACHE`` if set (and non-empty), else the platform's user cache directory of
    replica (platformdirs: ``$XDG_CACHE_HOME/replica`` or ``~/.cache/replica`` on Linux)."""
    env = os.environ.get("REPLICA_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("replica", appauthor=False))


def writable_cache_subdir(name: str) -> Path:
    """``<cache>/<name>`` (:func:`default_cache_dir`), created; a fresh temporary directory where that
    cannot be written (a read-only home: what is kept there is then rebuilt in every process)."""
    d = default_cache_dir() / name
    try:
        d.mkdir(parents=True, exist_ok=True)
        if os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix=f"replica-{name}-"))


def _canonical(obj: Any) -> Any:
    """JSON-stable form: floats by ``repr`` (exact), mappings sorted, sequences as lists."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return repr(float(obj))
    if hasattr(obj, "dtype") and getattr(obj, "shape", None) == ():  # numpy scalar
        return _canonical(obj.item())
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)) or hasattr(obj, "tolist"):
        seq = obj.tolist() if hasattr(obj, "tolist") else obj
        return [_canonical(v) for v in seq]
    return str(obj)


def cache_key(description: Mapping[str, Any]) -> str:
    """Hex SHA-256 of the canonical JSON of ``description``."""
    blob = json.dumps(_canonical(dict(description, _format=CACHE_FORMAT)), sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _json_safe(obj: Any) -> Any:
    """Replace non-finite floats by strings so that the file is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    if isinstance(obj, Mapping):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _json_restore(obj: Any) -> Any:
    if obj in ("nan", "inf", "-inf"):
        return float(obj)
    if isinstance(obj, dict):
        return {k: _json_restore(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_json_restore(v) for v in obj]
    return obj


class PointCache:
    """A directory of cached entries; ``PointCache(None)`` uses :func:`default_cache_dir`.

    ``enabled=False`` turns every lookup into a miss and every store into a no-op.
    ``hits``, ``misses`` and ``writes`` count this object's traffic.
    """

    def __init__(self, root: str | os.PathLike | None = None, enabled: bool = True):
        self.root = Path(root).expanduser() if root is not None else default_cache_dir()
        self.enabled = enabled
        self.hits = self.misses = self.writes = 0

    def writable(self) -> bool:
        """Whether entries can be stored under :attr:`root` (created if missing; a file written and
        removed again to find out: permissions, read-only mounts and full disks all answer)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".probe-", dir=self.root)
        except OSError:
            return False
        os.close(fd)
        try:
            os.unlink(probe)
        except OSError:
            pass
        return True

    def path(self, model: str, key: str) -> Path:
        """The file holding the entry of ``key`` (content-addressed by its hash)."""
        safe = "".join(c if (c.isalnum() or c in "-_.") else "_" for c in model) or "model"
        return self.root / "points" / safe / key[:2] / f"{key}.json"

    def get(self, model: str, description: Mapping[str, Any]) -> dict | None:
        """The stored payload, or ``None`` (miss, disabled, unreadable or mismatching entry)."""
        if not self.enabled:
            return None
        key = cache_key(description)
        try:
            with open(self.path(model, key), encoding="utf-8") as fh:
                entry = json.load(fh)
            if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("payload"), dict):
                raise ValueError("not a cache entry")
            payload = _json_restore(entry["payload"])
        except (OSError, ValueError, TypeError, UnicodeDecodeError):
            self.misses += 1
            return None
        self.hits += 1
        return payload

    def put(self, model: str, description: Mapping[str, Any], payload: Mapping[str, Any]) -> None:
        """Store atomically (temp file + :func:`os.replace`); I/O errors are ignored."""
        if not self.enabled:
            return
        key = cache_key(description)
        target = self.path(model, key)
        entry = {"key": key, "format": CACHE_FORMAT, "description": _canonical(description),
                 "payload": _json_safe(dict(payload))}
        tmp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=target.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(entry, fh, allow_nan=False)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
            tmp = None
            self.writes += 1
        except OSError:
            pass
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


def cache_from_flags(root: str | os.PathLike | None, disabled: bool = False, name: str = "cache") -> PointCache:
    """The cache of a command's ``--cache DIR`` / ``--no-cache``, checked before any work.

    A ``--cache`` that is a file, a directory nothing can be written in, or a path whose parent
    does not exist is refused (a one-line error naming ``name``): before, such a run went on
    uncached while its interrupt message said "rerun to resume". Where the default directory
    cannot be written, the cache is turned off (``enabled`` False), so that nothing claims
    points are kept.
    """
    from .outputs import check_output_dir

    if disabled:
        return PointCache(root, enabled=False)
    if root is not None:
        check_output_dir(root, name)
    cache = PointCache(root)
    if not cache.writable():
        from ..errors import ParameterError

        if root is not None:
            raise ParameterError(name, f"cannot write in {cache.root}")
        cache.enabled = False
    return cache

"""Strict JSON: no ``NaN`` / ``Infinity`` tokens, ``null`` with a reason instead.

Python's :mod:`json` writes ``NaN`` and ``Infinity`` by default, which JavaScript, ``jq``
and most other parsers refuse. Everything replica prints or writes as JSON goes through
:func:`strict`, which turns every non-finite number into ``null`` and, next to a key
whose value (or some entry of whose list) became ``null``, adds ``<key>_reason`` saying
why the number is missing; the result is dumped with ``allow_nan=False``, so a
non-finite number that slipped through is an error, not an invalid file.
"""
from __future__ import annotations

import json
import math
import os
from typing import IO, Any, Mapping

import numpy as np

from .outputs import atomic_write

#: why a number is missing, for the keys where replica leaves numbers out on purpose
REASONS = {
    "quadrature_residual": "not computed: continuation and phase points skip the companion-rule residual "
                           "(SolverSettings.error_estimate=False); 'replica solve' computes it",
    "eps_g_error": "not computed (the second test rule was skipped)",
    "step_error": "not computed: the point was not predicted from two earlier ones",
    "alpha_start": "the branch was not followed",
    "alpha_stop": "the branch was not followed",
}
#: reason for a key without an entry in REASONS
DEFAULT_REASON = "not a finite number (not computed, or undefined at this point)"
#: reason for a key whose value was ``None`` already (not a number that became null)
NULL_REASON = "not available (not computed, or not applicable here)"


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and not math.isfinite(float(v)))


def _has_missing(v: Any) -> bool:
    if _missing(v):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_missing(x) for x in v)
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return not bool(np.all(np.isfinite(v)))
    return False


def strict(obj: Any, reasons: Mapping[str, str] | None = None) -> Any:
    """A copy of ``obj`` that :func:`json.dumps` writes with ``allow_nan=False``.

    Non-finite floats become ``None``; numpy scalars and arrays become Python numbers and
    lists; tuples become lists; mapping keys become strings. In a mapping, a key whose
    value is (or contains) a missing number or a ``None`` gets a ``<key>_reason`` sibling (from
    ``reasons``, then :data:`REASONS`, then :data:`DEFAULT_REASON`, or :data:`NULL_REASON` for a
    value that was ``None``) unless one is there: no ``null`` is ever written without a reason.
    """
    why = dict(REASONS, **(reasons or {}))
    return _strict(obj, why)


def _strict(obj: Any, why: Mapping[str, str]) -> Any:
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out[str(k)] = _strict(v, why)
        for k, v in obj.items():
            key = f"{k}_reason"
            if _has_missing(v) and key not in obj and not str(k).endswith("_reason"):
                out[key] = why.get(str(k), NULL_REASON if v is None else DEFAULT_REASON)
        return out
    if isinstance(obj, np.ndarray):
        return _strict(obj.tolist(), why)
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_strict(v, why) for v in obj]
    if hasattr(obj, "to_dict"):
        return _strict(obj.to_dict(), why)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")


def dumps(obj: Any, reasons: Mapping[str, str] | None = None, **kwargs) -> str:
    """Strict JSON text of ``obj`` (see :func:`strict`); ``kwargs`` go to :func:`json.dumps`."""
    return json.dumps(strict(obj, reasons), allow_nan=False, **kwargs)


def dump(obj: Any, fh: IO[str], reasons: Mapping[str, str] | None = None, **kwargs) -> None:
    """Write strict JSON of ``obj`` to the open text file ``fh``."""
    fh.write(dumps(obj, reasons, **kwargs))


def write(path: str | os.PathLike, obj: Any, reasons: Mapping[str, str] | None = None, **kwargs) -> None:
    """Write strict JSON of ``obj`` to ``path`` atomically (:func:`replica.artifacts.outputs.atomic_write`).

    The text is built first, so an object that cannot be written leaves ``path`` untouched.
    """
    text = dumps(obj, reasons, **kwargs)
    with atomic_write(path, "w", encoding="utf-8") as fh:
        fh.write(text)

"""Helpers every benchmark section shares: a result row and the environment of a timed fresh
process. They live apart from :mod:`benchmarks.run` so that the sections it imports
(:mod:`benchmarks.sweeps`, :mod:`benchmarks.generation`) need not import it back."""
from __future__ import annotations

import os


def user_env() -> dict[str, str]:
    """The environment of a timed fresh process: this one's, with Python's bytecode cache on as a
    user's interpreter has it. A sandbox's ``PYTHONDONTWRITEBYTECODE`` would otherwise recompile
    every module of the package at each start (~0.1 s of the 2 s target); the first, untimed run
    of a measurement writes the cache, as a user's first command does."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def row(section, name, value, unit, baseline=None, note=""):
    """One result row; ``ratio`` is ``baseline / value`` (above 1: faster than the baseline)."""
    r = {"section": section, "name": name, "value": value, "unit": unit, "note": note}
    if baseline is not None:
        r["baseline"] = baseline
        r["ratio"] = baseline / value if value else None
    return r

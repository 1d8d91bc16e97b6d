"""A sweep's specification: model, fixed parameters, grid axes, what to compute per point, and
how neighbours warm-start each other (:class:`SweepSpec`, :func:`load_spec`).

A spec is a small TOML file (YAML also works if PyYAML is installed)::

    model = "ridge"                      # a declared model or a path to a declaration .py
    output = "ridge.nc"                  # optional: .nc (NetCDF), .zarr, .csv (--out overrides)

    [parameters]                         # fixed parameters (the model's defaults otherwise)
    Delta = 0.25

    [grid]                               # the axes, in order: the dataset's dimensions
    alpha = [0.5, 1.0, 2.0, 4.0]         # explicit values ...
    lam = {start = 0.01, stop = 1.0, num = 5, spacing = "log"}   # ... or a range (linear|log)

    [compute]                            # what each point computes: a registered task kind
    kind = "solve"                       # solve | thresholds | phase | simulate
    branches = ["centered"]
    quadrature = "gh:12"

    [warm_start]                         # optional
    axis = "alpha"                       # neighbours along this axis warm-start each other
    chunk = 8                            # points per chain (one task after another)

Every key is checked before any work starts; a bad one is a one-line error naming it
(``grid.lam: ...``), exit status 2. The kind checks its own settings
(:mod:`replica.sweep.kinds`).
"""
from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..errors import ParameterError

__all__ = ["Axis", "SweepSpec", "load_spec", "parse_spec"]

TOP_KEYS = ("model", "description", "output", "parameters", "grid", "compute", "warm_start")
#: the most points one sweep may have (a typo in ``num`` should not start a month of work)
MAX_POINTS = 1_000_000
#: default points per chain along the warm-start axis
DEFAULT_CHUNK = 8


@dataclass(frozen=True)
class Axis:
    """One grid axis: a parameter name (or ``alpha``) and its values (numbers or strings)."""

    name: str
    values: tuple

    @property
    def numeric(self) -> bool:
        return all(isinstance(v, float) for v in self.values)

    def __len__(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class SweepSpec:
    """A parsed, checked spec (see the module docstring). ``settings`` are the ``[compute]``
    table without ``kind``; ``warm_axis`` is ``None`` when no neighbour warm-starts another;
    ``text`` is the spec as written (it goes into the dataset's attributes)."""

    model: str
    kind: str
    parameters: dict[str, Any]
    axes: tuple[Axis, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    warm_axis: str | None = None
    warm_given: bool = False
    chunk: int = DEFAULT_CHUNK
    output: str | None = None
    description: str = ""
    text: str = ""
    source: str | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(a) for a in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise KeyError(name)

    def indices(self) -> Iterator[tuple[int, ...]]:
        """Every grid index, in C order of the axes."""
        return itertools.product(*(range(n) for n in self.shape))

    def coordinates(self, index: tuple[int, ...]) -> dict[str, Any]:
        """``{axis: value}`` at a grid index."""
        return {a.name: a.values[i] for a, i in zip(self.axes, index)}

    def point(self, index: tuple[int, ...]) -> dict[str, Any]:
        """Everything that defines a grid point: the fixed parameters with the axes' values set."""
        return dict(self.parameters, **self.coordinates(index))

    def with_warm_start(self, axis: str | None) -> "SweepSpec":
        """The same spec with the warm-start axis set (the kind's default when the spec gives none)."""
        return SweepSpec(self.model, self.kind, self.parameters, self.axes, self.settings, axis, self.warm_given,
                         self.chunk, self.output, self.description, self.text, self.source)

    def to_dict(self) -> dict[str, Any]:
        """The parsed spec (JSON-ready: the attribute ``spec_json`` of the dataset)."""
        return dict(model=self.model, description=self.description, parameters=dict(self.parameters),
                    grid={a.name: list(a.values) for a in self.axes},
                    compute=dict(self.settings, kind=self.kind),
                    warm_start=dict(axis=self.warm_axis, chunk=self.chunk), output=self.output)


# --------------------------------------------------------------------------- parsing
def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ParameterError(where, f"must be a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise ParameterError(where, f"must be finite, got {v}")
    return v


def _axis(name: str, raw: Any) -> Axis:
    where = f"grid.{name}"
    if isinstance(raw, Mapping):
        if "values" in raw:
            extra = set(raw) - {"values"}
            if extra:
                raise ParameterError(where, f"a 'values' axis takes no other keys, got {sorted(extra)}")
            raw = raw["values"]
        else:
            known = {"start", "stop", "num", "spacing"}
            extra = set(raw) - known
            if extra or not {"start", "stop", "num"} <= set(raw):
                raise ParameterError(where, "a range needs start, stop, num (and optionally spacing = "
                                            f"'linear' or 'log'), got keys {sorted(raw)}")
            start, stop = _number(raw["start"], f"{where}.start"), _number(raw["stop"], f"{where}.stop")
            num = raw["num"]
            if isinstance(num, bool) or not isinstance(num, int) or num < 1:
                raise ParameterError(f"{where}.num", f"must be an integer >= 1, got {num!r}")
            if num > MAX_POINTS:  # refused before the values are made (num = 1e9: 8 GB of floats)
                raise ParameterError(f"{where}.num", f"{num} values is more than a sweep may have ({MAX_POINTS}); "
                                                     "split the sweep")
            spacing = raw.get("spacing", "linear")
            if spacing not in ("linear", "log"):
                raise ParameterError(f"{where}.spacing", f"must be 'linear' or 'log', got {spacing!r}")
            if spacing == "log" and (start <= 0 or stop <= 0):
                raise ParameterError(where, f"a log range needs start, stop > 0, got {start:g}, {stop:g}")
            import numpy as np

            vals = (np.geomspace(start, stop, num) if spacing == "log" else np.linspace(start, stop, num))
            raw = [float(v) for v in vals]
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)) or not raw:
        raise ParameterError(where, f"must be a non-empty list of values or a range table, got {raw!r}")
    if all(isinstance(v, str) for v in raw):
        values = tuple(raw)
    else:
        values = tuple(_number(v, where) for v in raw)
    if len(set(values)) != len(values):
        raise ParameterError(where, f"values must be distinct, got {list(raw)}")
    return Axis(name, values)


def parse_spec(data: Mapping[str, Any], text: str = "", source: str | None = None) -> SweepSpec:
    """A :class:`SweepSpec` from the parsed TOML/YAML mapping (checked; see the module docstring)."""
    if not isinstance(data, Mapping):
        raise ParameterError("spec", "must be a table of keys (model, parameters, grid, compute ...)")
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise ParameterError(str(unknown[0]), f"unknown key in the spec (known: {', '.join(TOP_KEYS)})")
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ParameterError("model", "the spec must name a model (a declared model or a .py declaration)")
    params_raw = data.get("parameters", {})
    if not isinstance(params_raw, Mapping):
        raise ParameterError("parameters", "must be a table NAME = VALUE")
    parameters = {str(k): _number(v, f"parameters.{k}") for k, v in params_raw.items()}
    grid = data.get("grid")
    if not isinstance(grid, Mapping) or not grid:
        raise ParameterError("grid", "the spec needs a [grid] table with at least one axis (NAME = [values])")
    axes = tuple(_axis(str(k), v) for k, v in grid.items())
    for a in axes:
        if a.name in parameters:
            raise ParameterError(f"grid.{a.name}", "is also a fixed parameter: give it in one place")
    size = math.prod(len(a) for a in axes)
    if size > MAX_POINTS:
        raise ParameterError("grid", f"{size} points is more than {MAX_POINTS}; split the sweep")
    compute = data.get("compute")
    if not isinstance(compute, Mapping) or "kind" not in compute:
        raise ParameterError("compute", "the spec needs a [compute] table with kind = 'solve' | 'thresholds' | "
                                        "'phase' | 'simulate'")
    kind = compute["kind"]
    settings = {str(k): v for k, v in compute.items() if k != "kind"}
    warm = data.get("warm_start", {})
    if not isinstance(warm, Mapping):
        raise ParameterError("warm_start", "must be a table (axis = NAME, chunk = N)")
    extra = set(warm) - {"axis", "chunk"}
    if extra:
        raise ParameterError(f"warm_start.{sorted(extra)[0]}", "unknown key (known: axis, chunk)")
    warm_axis = warm.get("axis")
    warm_given = "axis" in warm
    if warm_axis == "none":
        warm_axis = None
    if warm_axis is not None:
        names = [a.name for a in axes]
        if warm_axis not in names:
            raise ParameterError("warm_start.axis", f"must be one of the grid axes {names} or 'none', got "
                                                    f"{warm_axis!r}")
        if not next(a for a in axes if a.name == warm_axis).numeric:
            raise ParameterError("warm_start.axis", f"{warm_axis} has non-numeric values: no neighbours to "
                                                    "start from")
    chunk = warm.get("chunk", DEFAULT_CHUNK)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ParameterError("warm_start.chunk", f"must be an integer >= 1, got {chunk!r}")
    output = data.get("output")
    if output is not None and (not isinstance(output, str) or not output.strip()):
        raise ParameterError("output", f"must be a file name, got {output!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ParameterError("description", "must be a string")
    return SweepSpec(model=model.strip(), kind=str(kind), parameters=parameters, axes=axes, settings=settings,
                     warm_axis=warm_axis, warm_given=warm_given, chunk=chunk, output=output,
                     description=description, text=text, source=source)


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read and check a spec file (``.toml``; ``.yaml``/``.yml`` with PyYAML)."""
    p = Path(path)
    if not p.is_file():
        raise ParameterError("spec", f"no such file: {path}")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError("spec", f"cannot read {path}: {exc}") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ParameterError("spec", "a YAML spec needs PyYAML (pip install pyyaml); or write it as TOML") \
                from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ParameterError("spec", f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    else:
        try:
            import tomllib
        except ImportError:  # Python 3.10: the same parser as a package
            import tomli as tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ParameterError("spec", f"{path} is not valid TOML: {exc}") from None
    return parse_spec(data, text, str(p))

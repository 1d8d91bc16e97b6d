"""A sweep's results as a labelled dataset: :func:`to_dataset` (an :class:`xarray.Dataset`),
:func:`write_dataset` (NetCDF, Zarr or CSV) and :func:`open_sweep`.

Dimensions are the grid axes (in the spec's order) plus the kind's own (``branch`` for
``solve``); coordinates their values. Variables: whatever the kind reports -- order parameters,
conjugates, every declared observable and ``<name>_error`` (its error estimate: quadrature for the
theory, the standard error over seeds for simulations), ``converged``, ``iterations``,
``residual``, ``alpha_c``/``alpha_l`` with their status and reason, ``notes`` -- and ``error``,
the message of a point that failed ('' otherwise). A missing number is NaN in the dataset; the
JSON written anywhere else stays strict (:mod:`replica.artifacts.jsonio`).

Attributes say what produced it: ``model``, ``model_source_hash``, ``model_generator_version``,
``model_stamp`` (the generated module's freshness stamp), ``replica_version``, ``kind``, ``spec``
(the spec file as written) and ``spec_json`` / ``settings_json`` (parsed and checked), the
warm-start axis and chunk. Nothing about where or when it ran, so two runs of one spec on
different executors give identical datasets.

NetCDF is written with h5netcdf (``pip install h5netcdf h5py``, the ``sweep`` extra) or netCDF4,
Zarr with zarr when installed; CSV (one row per grid point and branch, :func:`write_csv`) needs
nothing beyond the standard library.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..artifacts import jsonio
from ..errors import ParameterError

if TYPE_CHECKING:  # pragma: no cover
    import xarray as xr

__all__ = ["FORMATS", "check_output", "open_sweep", "table", "to_dataset", "write_csv", "write_dataset"]

#: file suffix -> format
FORMATS = {".nc": "netcdf", ".nc4": "netcdf", ".netcdf": "netcdf", ".zarr": "zarr", ".csv": "csv"}
INSTALL = "pip install xarray h5netcdf h5py (or the replica extra: pip install -e '.[sweep]')"

DESCRIPTIONS = {
    "alpha_c": "transition: where the free entropies of the compared branches cross",
    "alpha_l": "where the global-minimum test error crosses the model's baseline",
    "eps_lin": "the model's baseline test error",
    "eps_g": "test error",
    "phi": "free entropy at the saddle point",
    "train_loss": "training loss (-phi)",
    "psi_y": "dphi/dalpha (energetic potential)",
    "converged": "residual below tol on an admissible state (every seed for simulations)",
    "iterations": "fixed-point iterations",
    "residual": "relative residual of the fixed point",
    "quadrature_residual": "fixed-point residual under the companion quadrature rule (NaN: not estimated)",
    "solves": "points solved or read from the cache for this grid point",
    "notes": "what the solver or simulator noted",
    "error": "why this grid point failed ('' if it did not)",
}


def _require_xarray():
    try:
        import xarray as xr
    except ImportError:
        raise ParameterError("out", f"labelled datasets need xarray: {INSTALL}") from None
    return xr


def _column(values: list[Any]) -> np.ndarray:
    """A typed array from per-point values (None: missing): bool, int, float (NaN) or str ('')."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, (bool, np.bool_)) for v in present):
        return np.array([bool(v) if v is not None else False for v in values], dtype=bool)
    if present and all(isinstance(v, str) for v in present):
        return np.array(["" if v is None else v for v in values], dtype=object)
    if present and len(present) == len(values) and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                                       for v in present):
        return np.array(values, dtype=np.int64)
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
            out[i] = float(v)
    return out


def _describe(name: str) -> str:
    if name in DESCRIPTIONS:
        return DESCRIPTIONS[name]
    if name.endswith("_error"):
        return (f"error estimate of {name[:-6]} (quadrature error for the theory, standard error over seeds "
                "for simulations; NaN: none)")
    if name.endswith("_status"):
        return f"how {name[:-7]} was found (root, branch-end, switch, none, failed)"
    if name.endswith("_reason"):
        return f"how {name[:-7]} was found or why there is none, in words"
    if name.startswith("spinodal_"):
        return f"where the {name[9:]} branch ends inside the alpha range (NaN: not inside)"
    return ""


def _names(dicts, declared=()) -> list[str]:
    seen: dict[str, None] = dict.fromkeys(declared)
    for d in dicts:
        for k in d:
            seen.setdefault(k, None)
    return list(seen)


def to_dataset(result: Any) -> "xr.Dataset":
    """The labelled dataset of a :class:`~replica.sweep.run.SweepResult` (see the module docstring;
    not imported here: ``run`` imports this module)."""
    xr = _require_xarray()
    spec = result.spec
    shape = spec.shape
    axes = [a.name for a in spec.axes]
    extra = list(result.dims)
    extra_shape = tuple(len(v) for v in result.dims.values())
    n_rows = int(np.prod(extra_shape)) if extra else 0
    indices = list(spec.indices())
    records = [result.records.get(i, {"values": {}, "rows": [], "error": "not computed"}) for i in indices]
    data_vars: dict[str, Any] = {}
    for name in _names((r.get("values", {}) for r in records), result.variables[0]):
        col = _column([r.get("values", {}).get(name) for r in records])
        data_vars[name] = (axes, col.reshape(shape))
    if extra:
        rows = [r.get("rows") or [] for r in records]
        for name in _names((row for rs in rows for row in rs), result.variables[1]):
            vals = []
            for rs in rows:
                rs = list(rs) + [{}] * (n_rows - len(rs)) if len(rs) < n_rows else rs
                vals.extend(row.get(name) for row in rs[:n_rows])
            col = _column(vals)
            data_vars[name] = (axes + extra, col.reshape(shape + extra_shape))
    data_vars["error"] = (axes, _column([str(r.get("error") or "") for r in records]).reshape(shape))
    coords: dict[str, Any] = {a.name: np.array(a.values, dtype=float if a.numeric else object) for a in spec.axes}
    coords.update({k: np.array(v, dtype=object) for k, v in result.dims.items()})
    ds = xr.Dataset(data_vars, coords=coords)
    for name in ds.data_vars:
        d = _describe(name)
        if d:
            ds[name].attrs["description"] = d
    ds.attrs.update({k: str(v) for k, v in result.model_info.items()})
    ds.attrs.update(title=f"replica sweep: {spec.kind} of {result.model_info.get('model', spec.model)}",
                    kind=spec.kind, spec=spec.text, spec_json=jsonio.dumps(spec.to_dict()),
                    settings_json=jsonio.dumps(result.settings),
                    warm_start=(f"axis {spec.warm_axis}, chunks of {spec.chunk}" if spec.warm_axis else "none"),
                    failed_points=len(result.failed), description=spec.description)
    return ds


def table(result: Any) -> tuple[list[str], list[list[Any]]]:
    """``(columns, rows)``: the sweep as one row per grid point (and per entry of the kind's extra
    dimensions), the same columns as the dataset's CSV export, without xarray: the axes and extra
    dimensions, then the per-point variables, the per-row variables and ``error``."""
    spec = result.spec
    indices = list(spec.indices())
    records = [result.records.get(i, {"values": {}, "rows": [], "error": "not computed"}) for i in indices]
    values = _names((r.get("values", {}) for r in records), result.variables[0])
    extra = list(result.dims)
    labels = list(itertools.product(*result.dims.values())) if extra else [()]
    row_names = _names((row for r in records for row in (r.get("rows") or [])), result.variables[1]) if extra else []
    columns = [a.name for a in spec.axes] + extra + values + row_names + ["error"]
    out = []
    for index, rec in zip(indices, records):
        coords = [a.values[i] for a, i in zip(spec.axes, index)]
        rows = list(rec.get("rows") or [])
        for k, lab in enumerate(labels):
            row = rows[k] if k < len(rows) else {}
            out.append(coords + list(lab) + [rec.get("values", {}).get(n) for n in values]
                       + [row.get(n) for n in row_names] + [str(rec.get("error") or "")])
    return columns, out


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v)) if np.isfinite(v) else ""
    return str(v)


def write_csv(result: Any, path: str | os.PathLike) -> Path:
    """Write :func:`table` to ``path`` atomically (no xarray needed; a missing number is empty)."""
    import csv

    from ..artifacts.outputs import atomic_write, check_output_file

    check_output_file(path, "out")
    columns, rows = table(result)
    with atomic_write(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(columns)
        w.writerows([_cell(v) for v in row] for row in rows)
    return Path(path)


# --------------------------------------------------------------------------- files
def _format(path: str | os.PathLike) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ParameterError("out", f"{path}: unknown format {suffix or '(no suffix)'!r}; use "
                                    f"{', '.join(sorted(FORMATS))}")
    return FORMATS[suffix]


def _netcdf_engine() -> str:
    for engine, modules in (("h5netcdf", ("h5netcdf", "h5py")), ("netcdf4", ("netCDF4",))):
        if all(importlib.util.find_spec(m) is not None for m in modules):
            return engine
    raise ParameterError("out", f"writing NetCDF needs h5netcdf or netCDF4: {INSTALL}")


def check_output(path: str | os.PathLike) -> str:
    """Before any work: the suffix names a known format whose writer is installed, and the file
    can be written (a one-line error naming ``out`` otherwise). Returns the format."""
    from ..artifacts.outputs import check_output_file

    fmt = _format(path)
    if fmt != "csv":  # a CSV table needs no labelled dataset (write_csv)
        _require_xarray()
    if fmt == "netcdf":
        _netcdf_engine()
    if fmt == "zarr" and importlib.util.find_spec("zarr") is None:
        raise ParameterError("out", "writing Zarr needs zarr: pip install zarr (or write .nc / .csv)")
    if fmt == "zarr":
        p = Path(path)
        if not p.parent.is_dir():
            raise ParameterError("out", f"{path}: directory {p.parent} does not exist")
    else:
        check_output_file(path, "out")
    return fmt


def write_dataset(ds: "xr.Dataset", path: str | os.PathLike) -> Path:
    """Write ``ds`` to ``path`` (format by suffix: ``.nc`` NetCDF-4, ``.zarr``, ``.csv``), atomically
    (a temporary file in the same directory, then moved into place)."""
    from ..artifacts.outputs import STREAM, output_target, place

    fmt = check_output(path)
    path = Path(path)
    target, kind = output_target(path)  # staged beside the file it replaces; a FIFO's in the temp dir
    tmpdir = tempfile.mkdtemp(prefix=".tmp-sweep-", dir=None if kind == STREAM else target.parent)
    try:
        tmp = Path(tmpdir) / path.name
        if fmt == "netcdf":
            ds.to_netcdf(tmp, engine=_netcdf_engine())
        elif fmt == "zarr":
            with warnings.catch_warnings():  # zarr 3 warns that consolidated metadata is not in its v3 spec
                warnings.filterwarnings("ignore", message="Consolidated metadata")
                ds.to_zarr(tmp, mode="w")
        else:
            df = ds.drop_vars([v for v in ds.data_vars if ds[v].dtype == object and not ds[v].dims]).to_dataframe()
            df.reset_index().to_csv(tmp, index=False, na_rep="")
        if fmt == "zarr":  # a directory store
            if path.exists():
                shutil.rmtree(path)
            os.replace(tmp, path)
        else:  # a regular file replaced, a FIFO or device written through
            place(tmp, path)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return path


def open_sweep(path: str | os.PathLike) -> "xr.Dataset":
    """Open a written sweep (NetCDF or Zarr) as an :class:`xarray.Dataset`, read into memory."""
    xr = _require_xarray()
    fmt = _format(path)
    if fmt == "csv":
        raise ParameterError("path", "a CSV export is a table (pandas.read_csv); open the .nc or .zarr file")
    if fmt == "zarr":
        return xr.open_zarr(path).load()
    with xr.open_dataset(path, engine=_netcdf_engine()) as ds:
        return ds.load()

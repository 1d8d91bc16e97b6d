"""Plots of 2-D slices of a sweep: a heat map of one variable over two axes (:func:`heatmap`, e.g.
``alpha_c`` over ``(omega, sigma)``) and the zero line of a difference (:func:`zero_contour`, e.g.
``eps_g - eps_lin = 0``: where the test error crosses the baseline).

Both take an :class:`xarray.DataArray` with exactly two dimensions left after ``sel`` (the other
axes fixed by keyword: ``heatmap(ds.eps_g, "alpha", "lam", branch="centered")``), draw on ``ax``
(a new figure if ``None``) and return the axes. Cells are centred on the grid values, which may
be unevenly spaced (a log axis is drawn on a log scale). NaN cells (failed points) stay blank.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["heatmap", "zero_contour"]


def _slice(data, x: str, y: str, sel: dict[str, Any]):
    da = data.sel(**sel) if sel else data
    extra = [d for d in da.dims if d not in (x, y)]
    for d in extra:  # a dimension of length 1 left unselected
        if da.sizes[d] == 1:
            da = da.isel({d: 0})
    missing = [d for d in (x, y) if d not in da.dims]
    extra = [d for d in da.dims if d not in (x, y)]
    if missing or extra:
        raise ValueError(f"need a 2-D slice over ({x}, {y}); dims are {list(da.dims)} -- fix the others with "
                         f"keywords, e.g. {extra[0] if extra else 'axis'}=value")
    return da.transpose(y, x).sortby(x).sortby(y)


def _edges(v: np.ndarray, log: bool) -> np.ndarray:
    v = np.log(v) if log else v
    if len(v) == 1:
        e = np.array([v[0] - 0.5, v[0] + 0.5]) if not log else np.array([v[0] - 0.1, v[0] + 0.1])
    else:
        mid = 0.5 * (v[1:] + v[:-1])
        e = np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])
    return np.exp(e) if log else e


def _is_log(v: np.ndarray) -> bool:
    """Geometrically spaced (a ``spacing = "log"`` axis): ratios equal, all positive, wide."""
    if len(v) < 3 or np.any(v <= 0):
        return False
    r = v[1:] / v[:-1]
    return bool(np.allclose(r, r[0], rtol=1e-6) and v[-1] / v[0] > 20)


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6.0, 4.2))
    return ax


def _label(da) -> str:
    text = str(da.name) if da.name is not None else ""
    desc = da.attrs.get("description")
    return f"{text} ({desc})" if desc and len(desc) < 40 else text


def heatmap(data, x: str, y: str, *, ax=None, cmap: str = "viridis", colorbar: bool = True,
            label: str | None = None, **sel: Any):
    """A heat map of ``data`` over ``(x, y)`` (the other dimensions fixed by ``sel``)."""
    da = _slice(data, x, y, sel)
    ax = _axes(ax)
    xv, yv = np.asarray(da[x].values, dtype=float), np.asarray(da[y].values, dtype=float)
    xlog, ylog = _is_log(xv), _is_log(yv)
    values = np.ma.masked_invalid(np.asarray(da.values, dtype=float))
    mesh = ax.pcolormesh(_edges(xv, xlog), _edges(yv, ylog), values, cmap=cmap, shading="flat")
    if xlog:
        ax.set_xscale("log")
    if ylog:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if colorbar:
        ax.figure.colorbar(mesh, ax=ax, label=label if label is not None else _label(da))
    return ax


def zero_contour(data, x: str, y: str, *, ax=None, level: float = 0.0, color: str = "w",
                 label: str | None = None, **sel: Any):
    """The line where ``data`` equals ``level`` over ``(x, y)`` (e.g. ``ds.eps_g - ds.eps_lin``:
    where the test error crosses the baseline), linearly interpolated between grid points."""
    da = _slice(data, x, y, sel)
    ax = _axes(ax)
    xv, yv = np.asarray(da[x].values, dtype=float), np.asarray(da[y].values, dtype=float)
    z = np.ma.masked_invalid(np.asarray(da.values, dtype=float))
    if len(xv) < 2 or len(yv) < 2:
        raise ValueError(f"a contour needs at least 2 values along {x} and {y}")
    ax.contour(xv, yv, z, levels=[level], colors=[color], linewidths=1.8)
    if label:
        ax.plot([], [], color=color, lw=1.8, label=label)
        ax.legend(loc="best", framealpha=0.8)
    return ax

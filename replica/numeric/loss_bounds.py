"""Refuse a loss whose proximal bracket has no minimum (or no value), before any solve.

Every energetic average of the saddle point is taken at the minimiser of the bracket
``F(h) = (h - omega)^T V^-1 (h - omega) / 2 + l(h)``. That minimiser exists for every ``V > 0``
only if the loss is bounded below by ``-o(|h|^2)``: a loss that falls to ``-inf`` at a point
(``1/h``, ``log h``) or like ``-|h|^2`` at infinity (a concave square) has none, and the
iteration then either runs without end or "converges" on a local minimum beside the pole
(``q ~ 1e-21``, a training loss of ``-5e17``).

The check reads the loss from the generated bracket itself, so it sees the model exactly as the
solver does: the bracket is linear in ``1/v`` when ``V = v I``, so ``l(h) = 2 F_{v=2}(h) - F_{v=1}(h)``
at any state. It follows ``l`` along lines ``h = t u`` through the origin (the coordinate axes and
a few random directions) at a handful of teacher fields, label values and cluster configurations:

* at infinity, ``l(t u) / t^2`` at ``t = 1e4`` and ``1e8``: a negative ratio that does not shrink
  with ``t`` (a loss falling like ``-t^2`` or faster; ``-t^p`` with ``p < 2`` passes, its bracket
  has a minimum);
* at finite points, every local minimum of ``l`` on a grid is zoomed in on (the interval between
  its neighbours, shrunk a hundredfold each time): at a genuine minimum the decrease shrinks
  geometrically from one zoom to the next, at a pole it does not (``log``: a constant step per
  zoom, ``1/h``: a growing one). A value ``-inf`` anywhere is a pole outright.

A loss that is not defined somewhere near the origin (``nan`` at ``|t| <= NEAR``: ``sqrt(h^2 - 1)``
at ``|h| < 1``) is refused too: the bracket is minimised over every real field. Farther out a
``nan`` or ``+inf`` (an overflow) is ignored.
"""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..interface.generated_model import GeneratedModel

#: the grid along every line: dense near the origin, logarithmic out to 1e8
_LINEAR = np.linspace(-20.0, 20.0, 801)
_LOG = np.logspace(-6, 8, 43)
GRID = np.unique(np.concatenate([-_LOG[::-1], _LINEAR, _LOG]))
#: where the growth at infinity is read (the ratio l / t^2 at both)
FAR = (1e4, 1e8)
#: zooms per candidate minimum, points per zoom, candidates per line (the lowest local minima of the
#: grid with ``|t| <= NEAR``: beyond it only the growth at infinity is read)
ZOOMS, ZOOM_POINTS, MAX_CANDIDATES, NEAR = 6, 101, 2, 20.0
#: where in its cell every zoom point sits (off the centre: see :func:`_pole`)
SHIFT = (3.0 - 5.0 ** 0.5) / 2.0


def _loss_on(module: GeneratedModel, h: np.ndarray, z: np.ndarray, x1: np.ndarray, x2: np.ndarray,
             p: np.ndarray) -> np.ndarray:
    """``l(h; z)`` at every column of ``h`` (``(PROX_DIM, N)``) for one node ``z``."""
    zz = np.repeat(z[:, None], h.shape[1], axis=1)
    with np.errstate(all="ignore"):
        f1 = np.asarray(module.bracket(h, zz, x1, p), dtype=float)
        f2 = np.asarray(module.bracket(h, zz, x2, p), dtype=float)
        out = 2.0 * f2 - f1
    # an infinite loss stays infinite (not inf - inf = nan); nan only where the bracket is nan
    out = np.where(np.isposinf(f1) | np.isposinf(f2), np.inf, out)
    return np.where(np.isneginf(f1) & np.isneginf(f2), -np.inf, out)


def _with_unit_V(module: GeneratedModel, x: np.ndarray, v: float) -> np.ndarray:
    """``x`` with ``V = v I`` (diagonal entries ``v``, off-diagonal ones 0)."""
    out = np.array(x, dtype=float)
    idx = list(module.FAMILIES.get("V", []))
    out[idx] = 0.0
    diag = [i for i in module.SYMMETRIC_DIAGONAL if i in idx]
    out[diag] = v
    return out


def _nodes(module: GeneratedModel, p: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """A few nodes ``z``: Gaussian coordinates (zero and one draw) x cluster configurations (at most
    two) x label values (at most four)."""
    gauss = [np.zeros(len(module.GAUSSIANS)), rng.normal(size=len(module.GAUSSIANS))]
    configs: list[np.ndarray] = [np.empty(0)]
    if module.DISCRETE:
        from .labels import label_law

        law = label_law(module, p)
        if law is not None:
            configs = [law[0][:, j] for j in range(min(2, law[0].shape[1]))]
    labels: list[np.ndarray] = [np.empty(0)]
    if module.LABEL_VALUES:
        labels = [np.array([float(y)]) for y in list(module.LABEL_VALUES)[:4]]
    return [np.concatenate([g, c, y]) for g in gauss for c in configs for y in labels]


def _pole(f, lo: float, hi: float) -> tuple[float, float] | None:
    """Zoom on the minimum of ``f`` in ``[lo, hi]``: ``(t, l)`` at the last zoom when the decrease
    does not shrink from one zoom to the next (a pole), else None. The points of a zoom are shifted
    off its interval's centre and ends, so that a grid point that landed on a pole by chance (a huge
    but finite value) is never read again."""
    best, steps, t_best = None, [], lo
    for _ in range(ZOOMS):
        width = (hi - lo) / ZOOM_POINTS
        if not width > 1e-300:
            break
        t = lo + (np.arange(ZOOM_POINTS) + SHIFT) * width
        vals = f(t)
        if np.any(np.isneginf(vals)):
            return float(t[np.isneginf(vals)][0]), -np.inf
        finite = np.where(np.isfinite(vals), vals, np.inf)
        i = int(np.argmin(finite))
        if not np.isfinite(finite[i]):
            return None
        if best is not None:
            steps.append(best - finite[i])
        best, t_best = float(finite[i]), float(t[i])
        lo, hi = t_best - width, t_best + width
    if len(steps) >= 3:
        a, b = steps[-2], steps[-1]
        if b > 1e-3 * (1.0 + abs(best)) and b >= 0.5 * a:
            return t_best, best
    return None


def unbounded_direction(module: GeneratedModel, p: np.ndarray, x: np.ndarray) -> str | None:
    """Why the loss of ``module`` at parameters ``p`` is unbounded below (one clause), or None.
    ``x`` is any admissible state (it places the prox centre; the loss does not depend on it)."""
    if module.bracket is None or "V" not in module.FAMILIES:
        return None
    rng = np.random.default_rng(0)
    dim = int(module.PROX_DIM)
    dirs = list(np.eye(dim))
    if dim > 1:
        dirs += [u / np.linalg.norm(u) for u in rng.normal(size=(3, dim))]
    x1, x2 = _with_unit_V(module, x, 1.0), _with_unit_V(module, x, 2.0)
    p = np.asarray(p, dtype=float)
    for z in _nodes(module, p, rng):
        for u in dirs:
            def f(t, u=u, z=z):
                return _loss_on(module, np.outer(u, np.atleast_1d(t)), z, x1, x2, p)

            vals = f(GRID)
            where = _at(u, GRID[np.isnan(vals) & (np.abs(GRID) <= NEAR)])
            if where is not None:
                return f"is not defined at h = {where} (nan)"
            where = _at(u, GRID[np.isneginf(vals)])
            if where is not None:
                return f"is unbounded below: l = -inf at h = {where}"
            for sign in (1.0, -1.0):
                near, far = (f(sign * np.array([t]))[0] / t ** 2 for t in FAR)
                if np.isfinite(near) and np.isfinite(far) and far < -1e-8 and far <= 0.5 * near:
                    return (f"is unbounded below: l falls like -|h|^2 or faster as |h| grows (l = "
                            f"{far * FAR[1] ** 2:.3g} at "
                            f"h = {_at(u, [sign * FAR[1]])})")
            finite = np.where(np.isfinite(vals), vals, np.inf)
            inner = np.flatnonzero((finite[1:-1] <= finite[:-2]) & (finite[1:-1] <= finite[2:])
                                   & np.isfinite(finite[1:-1]) & (np.abs(GRID[1:-1]) <= NEAR)) + 1
            for i in inner[np.argsort(finite[inner])][:MAX_CANDIDATES]:
                hit = _pole(f, GRID[i - 1], GRID[i + 1])
                if hit is not None:
                    return f"is unbounded below: no lower bound near h = {_at(u, [hit[0]])} (l = {hit[1]:.3g} there)"
    return None


def _at(u: np.ndarray, ts) -> str | None:
    """The point ``t u`` (the first of ``ts``) in a few digits, None if ``ts`` is empty."""
    ts = list(ts)
    if not ts:
        return None
    h = ts[0] * np.asarray(u)
    return f"{h[0]:.3g}" if h.size == 1 else "(" + ", ".join(f"{v:.3g}" for v in h) + ")"


#: verdicts by (model, what it was generated from, parameters): solvers are built many times per run
_VERDICTS: dict[tuple, str | None] = {}


def check_loss_bounded(module: GeneratedModel, p: np.ndarray, x: np.ndarray) -> None:
    """Raise :class:`ParameterError` (naming ``loss``) when the bracket has no minimum (see the
    module docstring); once per model and parameters."""
    key = (module.MODEL, module.SOURCE_HASH, str(module.path), tuple(np.asarray(p, dtype=float).tolist()))
    if key not in _VERDICTS:
        if len(_VERDICTS) > 256:
            _VERDICTS.clear()
        _VERDICTS[key] = unbounded_direction(module, p, x)
    why = _VERDICTS[key]
    if why is not None:
        raise ParameterError("loss", f"the loss of {module.MODEL} {why}: its proximal "
                                     "bracket (h - omega)^2/(2V) + l(h) has no minimum")

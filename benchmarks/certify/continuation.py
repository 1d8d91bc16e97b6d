"""Pseudo-arclength continuation of ``F(x, alpha) = 0`` through folds (Keller's method).

Generic: ``F`` maps ``(x, alpha)`` (``x`` an ``n``-vector) to an ``n``-vector. The curve is
parametrised by arclength ``s`` in the scaled space ``X = (x / scale, alpha)``, so it can be
followed around a fold where ``alpha`` turns back (a natural-parameter continuation in
``alpha`` fails there: ``dF/dx`` is singular). Each step:

* predictor ``X_p = X + ds T`` along the unit tangent ``T``;
* corrector: Newton (chord: the augmented Jacobian ``[[F_x, F_alpha], [T^T]]`` by forward
  differences at the last point, refreshed when the contraction is poor) on
  ``F(X) = 0, T.(X - X_p) = 0``;
* new tangent: the null vector of ``[F_x, F_alpha]`` with the orientation of the previous one;
* step control: ``ds`` grows after an easy corrector, shrinks after a hard or failed one.

A fold is where ``dalpha/ds`` (the tangent's last component) changes sign; its position is the
vertex of the parabola ``alpha(s)`` through the three points around the sign change, refined by
:func:`refine_fold` if asked (an extended system ``F = 0``, ``F_x v = 0``, ``|v| = 1``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np


@dataclass
class Point:
    x: np.ndarray
    alpha: float
    tangent: np.ndarray      # in scaled coordinates (x / scale, alpha)
    s: float                 # arclength (scaled)


@dataclass
class Path:
    points: list[Point] = field(default_factory=list)
    folds: list[dict] = field(default_factory=list)
    stop_reason: str = ""

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array([p.x for p in self.points]), np.array([p.alpha for p in self.points])


def _jac(G: Callable[[np.ndarray], np.ndarray], X: np.ndarray, g0: np.ndarray, h: float) -> np.ndarray:
    J = np.empty((g0.size, X.size))
    for k in range(X.size):
        Xp = X.copy()
        Xp[k] += h
        J[:, k] = (G(Xp) - g0) / h
    return J


def _null_tangent(J: np.ndarray, prev: np.ndarray | None) -> np.ndarray:
    """Unit null vector of the ``n x (n+1)`` matrix ``J`` oriented like ``prev``."""
    _, _, vt = np.linalg.svd(J)
    t = vt[-1]
    if prev is not None and t @ prev < 0:
        t = -t
    return t / np.linalg.norm(t)


def follow(F: Callable[[np.ndarray, float], np.ndarray], x0: Sequence[float], alpha0: float, *,
           direction: float = -1.0, ds: float = 0.05, ds_min: float = 1e-4, ds_max: float = 0.2,
           max_steps: int = 60, tol: float = 1e-9, scale: Sequence[float] | None = None,
           fd_step: float = 1e-6, alpha_range: tuple[float, float] = (0.0, np.inf),
           stop: Callable[[Point], str | None] | None = None, max_folds: int = 2,
           verbose: bool = False) -> Path:
    """Follow the solution curve from a solution ``(x0, alpha0)``, initially towards
    ``direction`` in ``alpha``. Stops after ``max_steps``, outside ``alpha_range``, after
    ``max_folds`` folds, when ``ds`` falls below ``ds_min``, or when ``stop(point)`` returns a
    reason."""
    x0 = np.asarray(x0, dtype=float)
    n = x0.size
    sc = np.asarray(scale if scale is not None else np.maximum(np.abs(x0), 1e-3), dtype=float)

    def G(X):
        return np.asarray(F(X[:n] * sc, float(X[n])), dtype=float)

    def res_norm(g):
        return float(np.linalg.norm(g))

    X = np.concatenate([x0 / sc, [alpha0]])
    g = G(X)
    J = _jac(G, X, g, fd_step)
    T = _null_tangent(J, None)
    if T[n] * direction < 0:
        T = -T
    A0 = np.vstack([J, T[None, :]])
    path = Path()
    s = 0.0
    path.points.append(Point(X[:n] * sc, float(X[n]), T.copy(), s))
    for step in range(max_steps):
        accepted = False
        while not accepted:
            Xp = X + ds * T
            Y = Xp.copy()
            A = A0           # chord: start from the Jacobian at the last accepted point
            ok = False
            last = np.inf
            for it in range(12):
                gy = G(Y)
                r = res_norm(gy) + abs(T @ (Y - Xp))
                if verbose:
                    print(f"    corrector {it}: |F| = {r:.2e}  alpha = {Y[n]:.6f}")
                if r < tol:
                    ok = True
                    break
                if A is None or r > 0.3 * last:
                    Jy = _jac(G, Y, gy, fd_step)
                    A = np.vstack([Jy, T[None, :]])
                last = r
                try:
                    dY = np.linalg.solve(A, -np.concatenate([gy, [T @ (Y - Xp)]]))
                except np.linalg.LinAlgError:
                    break
                Y = Y + dY
            if ok:
                accepted = True
                iters = it
            else:
                ds *= 0.5
                if ds < ds_min:
                    path.stop_reason = f"step below {ds_min} at alpha={X[n]:.6f} (corrector failed)"
                    return path
        gY = G(Y)
        Jn = _jac(G, Y, gY, fd_step)
        Tn = _null_tangent(Jn, T)
        s += ds
        pt = Point(Y[:n] * sc, float(Y[n]), Tn.copy(), s)
        path.points.append(pt)
        if verbose:
            print(f"  step {step}: alpha = {Y[n]:.6f}, x = {pt.x}, dalpha/ds = {Tn[n]:+.3e}, ds = {ds:.3g}")
        if T[n] * Tn[n] < 0:
            p0, p1, p2 = path.points[-3:] if len(path.points) >= 3 else (path.points[0],) + tuple(path.points[-2:])
            ss = np.array([p0.s, p1.s, p2.s])
            aa = np.array([p0.alpha, p1.alpha, p2.alpha])
            c = np.polyfit(ss - ss[1], aa, 2)
            s_v = -c[1] / (2 * c[0]) if c[0] != 0 else 0.0
            a_v = float(np.polyval(c, s_v))
            xs = np.array([p0.x, p1.x, p2.x])
            x_v = np.array([np.polyval(np.polyfit(ss - ss[1], xs[:, k], 2), s_v) for k in range(n)])
            path.folds.append(dict(alpha=a_v, x=x_v, between=(p1.alpha, p2.alpha)))
            if len(path.folds) >= max_folds:
                path.stop_reason = f"{max_folds} fold(s) passed"
                return path
        X, T = Y, Tn
        A0 = np.vstack([Jn, Tn[None, :]])
        if not (alpha_range[0] <= X[n] <= alpha_range[1]):
            path.stop_reason = f"left alpha range at alpha={X[n]:.6f}"
            return path
        if stop is not None:
            reason = stop(pt)
            if reason:
                path.stop_reason = reason
                return path
        ds = min(ds * (1.5 if iters <= 2 else (1.0 if iters <= 4 else 0.6)), ds_max)
    path.stop_reason = f"{max_steps} steps"
    return path


def refine_fold(F: Callable[[np.ndarray, float], np.ndarray], x: Sequence[float], alpha: float, *,
                scale: Sequence[float] | None = None, fd_step: float = 1e-6, tol: float = 1e-10,
                max_iter: int = 20) -> tuple[np.ndarray, float]:
    """Newton on the extended system ``F(x, a) = 0, F_x(x, a) v = 0, c.v = 1`` (``c``: the
    initial null vector) from an estimate of a fold; returns ``(x, alpha)``."""
    x = np.asarray(x, dtype=float)
    n = x.size
    sc = np.asarray(scale if scale is not None else np.maximum(np.abs(x), 1e-3), dtype=float)

    def Fs(xs, a):
        return np.asarray(F(xs * sc, a), dtype=float)

    xs = x / sc
    g = Fs(xs, alpha)
    Jx = np.column_stack([(Fs(xs + fd_step * e, alpha) - g) / fd_step for e in np.eye(n)])
    _, _, vt = np.linalg.svd(Jx)
    v = vt[-1]
    c = v.copy()

    def H(Z):
        xx, a, vv = Z[:n], Z[n], Z[n + 1:]
        f = Fs(xx, a)
        Jv = (Fs(xx + fd_step * vv, a) - f) / fd_step
        return np.concatenate([f, Jv, [c @ vv - 1.0]])

    Z = np.concatenate([xs, [alpha], v])
    for _ in range(max_iter):
        h = H(Z)
        if np.linalg.norm(h) < tol:
            break
        JH = np.column_stack([(H(Z + 1e-6 * e) - h) / 1e-6 for e in np.eye(Z.size)])
        Z = Z + np.linalg.lstsq(JH, -h, rcond=None)[0]
    return Z[:n] * sc, float(Z[n])

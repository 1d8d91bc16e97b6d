"""Non-smooth losses and penalties: their piecewise structure, found and checked at declaration.

A loss written with ``Max``, ``Min``, ``Abs``, ``Heaviside``, ``sign`` or ``Piecewise`` (hinge
``Max(0, 1 - y h)``, absolute deviation ``Abs(y - h)``, Huber, squared hinge
``(1 - y h)**2 Heaviside(1 - y h)``, epsilon-insensitive ``Max(0, Abs(y - h) - eps)``) is smooth
except at finitely many *breakpoints* in the student field ``h``. Newton cannot minimise such a
bracket reliably and sympy cannot differentiate it into code (``DiracDelta``, ``Derivative``).
:func:`analyse` rewrites it as one flat ``Piecewise`` in ``h``:

* the *branches* -- the smooth expressions of the pieces, and the conditions that select them;
* the *breakpoints* -- the roots in ``h`` of every condition's boundary (``1 - y h = 0`` gives
  ``h = 1/y``), expressions of the label, the teacher fields and the parameters.

The proximal map of such a loss (``PROX_DIM = 1``) is then found exactly
(:func:`replica.numeric.prox.piecewise_prox`): the global minimum over the stationary points of every
branch inside its interval (closed form when sympy solves the stationarity condition, a
safeguarded 1-D Newton otherwise) and the breakpoints themselves. Its *kinks* -- where the
minimiser sits on a breakpoint ``b`` -- are the centres ``omega = b + V l'(b-) .. b + V l'(b+)``,
which the kink-aware quadrature puts on panel boundaries (:mod:`replica.numeric.kinks`). By the envelope
theorem the derivatives of the (smooth) Moreau envelope are those of the active branch at fixed
``h``, or, when the minimiser sits on a breakpoint ``b(x)`` that moves with the order parameters,
the total derivative of the bracket along ``h = b(x)``.

What is refused, with one line naming the problem (:class:`~replica.errors.DeclarationError`):

* a loss that jumps at a breakpoint (a ``Heaviside`` or ``sign`` of ``h`` not multiplied by
  something that vanishes there, e.g. the 0-1 loss): its Moreau envelope has no derivative;
* a non-smooth function of the teacher fields alone (``sign(hstar)`` in the loss): the envelope
  then jumps with the teacher and its overlap derivatives are delta functions -- the label must
  be declared as a channel (:mod:`replica.symbolic.channels`);
* a piecewise loss of a prox of dimension above one (``L r > 1``);
* a branch whose stationary points have no closed form and that is not convex on its interval.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import sympy as sp

from ..errors import DeclarationError

#: functions that make an expression piecewise smooth
NONSMOOTH = (sp.Max, sp.Min, sp.Abs, sp.Heaviside, sp.sign, sp.Piecewise)


def is_nonsmooth(expr: sp.Expr, variables: Iterable[sp.Symbol] | None = None) -> bool:
    """Whether ``expr`` contains a non-smooth function (of ``variables``, if given)."""
    expr = sp.sympify(expr)
    vs = set(variables) if variables is not None else None
    for f in NONSMOOTH:
        for a in expr.atoms(f):
            if vs is None or a.free_symbols & vs:
                return True
    return False


def _as_piecewise(e: sp.Expr) -> sp.Expr:
    """One non-smooth function as a ``Piecewise`` of its real arguments. Written out by hand:
    sympy's ``rewrite(Piecewise)`` leaves ``Abs(x)`` alone unless it can prove ``x`` real, and
    ``sqrt(Delta)`` of a real parameter is not provably real (all our symbols are real)."""
    a = e.args[0]
    if isinstance(e, sp.Abs):
        return sp.Piecewise((a, a >= 0), (-a, True))
    if isinstance(e, sp.sign):
        return sp.Piecewise((1, a > 0), (-1, a < 0), (0, True))
    if isinstance(e, sp.Heaviside):  # the value at a = 0 is a null set for every average
        return sp.Piecewise((0, a < 0), (1, True))
    rest = e.func(*e.args[1:])
    return sp.Piecewise((a, a >= rest if isinstance(e, sp.Max) else a <= rest), (rest, True))


def flat_piecewise(expr: sp.Expr) -> sp.Expr:
    """``expr`` with every non-smooth function rewritten as one flat ``Piecewise`` (or unchanged)."""
    out = sp.sympify(expr).replace(lambda e: isinstance(e, (sp.Max, sp.Min, sp.Abs, sp.Heaviside, sp.sign)),
                                   _as_piecewise)
    return sp.piecewise_fold(out)


@dataclass
class PiecewiseStructure:
    """A function of one variable ``h`` that is smooth between breakpoints.

    ``expr`` is the flat ``Piecewise``; ``branches[i]`` its smooth expressions and
    ``conditions[i]`` what selects them (the first true condition wins, as in ``Piecewise``);
    ``breakpoints`` the roots in ``h`` of the conditions' boundaries (duplicates removed).
    """

    variable: sp.Symbol
    expr: sp.Expr
    branches: list[sp.Expr]
    conditions: list[sp.Basic]
    breakpoints: list[sp.Expr]

    @property
    def n_branches(self) -> int:
        """Number of smooth branches."""
        return len(self.branches)

    def branch_selector(self, index_symbol: Callable[[int], sp.Expr] | None = None) -> sp.Expr:
        """A ``Piecewise`` giving the index of the active branch (the first true condition)."""
        return sp.Piecewise(*[(sp.Integer(i), c) for i, c in enumerate(self.conditions)])


def analyse(expr: sp.Expr, variable: sp.Symbol, *, what: str = "loss",
            teacher: Sequence[sp.Symbol] = (), discrete: Sequence[sp.Symbol] = ()) -> PiecewiseStructure | None:
    """The piecewise structure of ``expr`` in ``variable`` (``None`` if it is smooth in it).

    ``teacher``: continuous teacher symbols (fields, noise) -- a condition that depends on them
    but not on ``variable`` makes the function non-differentiable in the teacher (refused);
    ``discrete``: label symbols, whose conditions only select a branch.
    """
    expr = sp.sympify(expr)
    teacher, discrete = set(teacher), set(discrete)
    for f in NONSMOOTH:
        for a in expr.atoms(f):
            if a.free_symbols & teacher and not a.free_symbols & {variable}:
                bad = a
                raise DeclarationError(
                    f"{what}: {bad} is a non-smooth function of the teacher fields alone, so the overlap "
                    "derivatives of the energetic potential would be delta functions; declare the label as a "
                    "channel (replica.symbolic.channels, e.g. channel=Sign(hstar[0])) and write the loss in its label y")
    if not is_nonsmooth(expr):
        return None
    flat = flat_piecewise(expr)
    if not isinstance(flat, sp.Piecewise):
        if is_nonsmooth(flat, {variable}):
            raise DeclarationError(f"{what}: could not rewrite {expr} as one piecewise-smooth function of "
                                   f"{variable} (nested non-smooth functions)")
        return None
    branches = [pc.expr for pc in flat.args]
    conditions = [pc.cond for pc in flat.args]
    for b in branches:
        if is_nonsmooth(b, {variable}):
            raise DeclarationError(f"{what}: branch {b} is still non-smooth in {variable}")
    points: list[sp.Expr] = []
    for cond in conditions:
        if cond in (sp.true, sp.false):
            continue
        for rel in cond.atoms(sp.core.relational.Relational):
            f = sp.expand(rel.lhs - rel.rhs)
            if variable not in f.free_symbols:
                extra = f.free_symbols & teacher
                if extra:
                    raise DeclarationError(
                        f"{what}: the condition {rel} depends on the teacher ({sorted(map(str, extra))}) but not "
                        f"on {variable}: not differentiable in the teacher fields; declare the label as a channel "
                        "(replica.symbolic.channels) and write the loss in its label y")
                continue  # a condition on the label or the parameters only selects a branch
            try:
                roots = sp.solve(sp.Eq(f, 0), variable)
            except (NotImplementedError, ValueError):
                roots = None
            if not roots:
                raise DeclarationError(f"{what}: cannot locate the breakpoints of {rel} in {variable} "
                                       "(write the condition so that sympy can solve its boundary)")
            for r in roots:
                if r.has(sp.I):
                    continue
                if not any(sp.simplify(r - p) == 0 for p in points):
                    points.append(sp.simplify(r))
    if not points:
        return None  # piecewise in the label or the parameters only: smooth in h at every node
    return PiecewiseStructure(variable, flat, branches, conditions, points)


# --------------------------------------------------------------------------- numeric checks
def _samples(symbols: Sequence[sp.Symbol], defaults: dict, label_values: dict, rng: random.Random,
             n: int) -> list[dict]:
    out = []
    for _ in range(n):
        vals = {}
        for s in symbols:
            if s in defaults:
                vals[s] = defaults[s]
            elif s in label_values:
                vals[s] = rng.choice(label_values[s])
            else:
                vals[s] = rng.uniform(-2.0, 2.0)
        out.append(vals)
    return out


def _piecewise_functions(pw: PiecewiseStructure):
    """The symbols besides the variable (sorted), the function of (variable, *others) and the
    breakpoints as functions of the others, all lambdified for plain floats."""
    others = sorted((pw.expr.free_symbols | set().union(*[sp.sympify(b).free_symbols for b in pw.breakpoints]))
                    - {pw.variable}, key=str)
    f = sp.lambdify([pw.variable, *others], pw.expr, "math")
    return others, f, [sp.lambdify(others, b, "math") for b in pw.breakpoints]


def check_continuous(pw: PiecewiseStructure, defaults: dict, label_values: dict | None = None,
                     what: str = "loss", trials: int = 24, seed: int = 0) -> None:
    """Refuse a function that jumps at a breakpoint (numerically, at random values of the other
    symbols and the parameter defaults): its Moreau envelope would not be differentiable."""
    label_values = label_values or {}
    rng = random.Random(seed)
    others, f, fb = _piecewise_functions(pw)
    for vals in _samples(others, defaults, label_values, rng, trials):
        args = [vals[s] for s in others]
        for b, g in zip(pw.breakpoints, fb):
            try:
                x = float(g(*args))
            except (ValueError, ZeroDivisionError, TypeError, OverflowError):
                continue
            if not math.isfinite(x):
                continue
            eps = 1e-7 * (1.0 + abs(x))
            try:
                left, right = float(f(x - eps, *args)), float(f(x + eps, *args))
            except (ValueError, ZeroDivisionError, TypeError, OverflowError):
                continue
            if abs(left - right) > 1e-4 * (1.0 + abs(left) + abs(right)):
                raise DeclarationError(
                    f"{what}: jumps at {pw.variable} = {b} (from {left:.4g} to {right:.4g}); the Moreau envelope of a "
                    "discontinuous function has no derivative (a 0-1 loss cannot be trained by this theory); "
                    "use a continuous surrogate")


def convex_on_samples(f: Callable[[float], float], points: Sequence[float], scale: float = 1.0) -> float:
    """The most negative midpoint-convexity defect ``(f(a) + f(b))/2 - f((a + b)/2)`` over pairs of
    ``points`` (non-negative for a convex function), relative to ``scale``."""
    worst = 0.0
    for i, a in enumerate(points):
        for b in points[i + 1:]:
            try:
                d = 0.5 * (f(a) + f(b)) - f(0.5 * (a + b))
            except (ValueError, ZeroDivisionError, OverflowError):
                continue
            if math.isfinite(d):
                worst = min(worst, d / scale)
    return worst


def check_convex(expr: sp.Expr, variable: sp.Symbol, defaults: dict, what: str,
                 label_values: dict | None = None, trials: int = 6, seed: int = 1) -> None:
    """Refuse ``expr`` unless it is convex in ``variable`` (midpoint convexity on a grid, at the
    parameter defaults and random values of the other symbols)."""
    rng = random.Random(seed)
    others = sorted(sp.sympify(expr).free_symbols - {variable}, key=str)
    f = sp.lambdify([variable, *others], expr, "math")
    grid = [-6.0, -3.0, -1.5, -0.7, -0.2, 0.0, 0.3, 0.8, 1.6, 3.2, 6.5]
    for vals in _samples(others, defaults, label_values or {}, rng, trials):
        args = [vals[s] for s in others]
        scale = 1.0 + max(abs(float(f(x, *args))) for x in grid)
        worst = convex_on_samples(lambda x: float(f(x, *args)), grid, scale)
        if worst < -1e-9:
            at = ", ".join(f"{s}={v:g}" for s, v in zip(others, args))
            raise DeclarationError(f"{what}: {expr} is not convex in {variable}" + (f" (at {at})" if at else "")
                                   + "; the entropic Moreau envelope needs a convex penalty")


def is_convex_piecewise(pw: PiecewiseStructure, defaults: dict, label_values: dict | None = None,
                        trials: int = 8, seed: int = 2) -> bool:
    """Whether a continuous piecewise-smooth function is convex in its variable: midpoint convexity
    on a grid that brackets every breakpoint (at the parameter defaults and random values of the
    other symbols). Accepts every convex form (a ``Max`` of linear pieces, a Huber loss written as
    ``Piecewise``, an ``Abs``), not one syntax."""
    rng = random.Random(seed)
    others, f, fb = _piecewise_functions(pw)
    base = [-6.0, -3.0, -1.5, -0.7, -0.2, 0.0, 0.3, 0.8, 1.6, 3.2, 6.5]
    for vals in _samples(others, defaults, label_values or {}, rng, trials):
        args = [vals[s] for s in others]
        grid = list(base)
        for g in fb:
            try:
                x = float(g(*args))
            except (ValueError, ZeroDivisionError, TypeError, OverflowError):
                continue
            if math.isfinite(x):
                grid += [x - 0.5, x - 0.05, x, x + 0.05, x + 0.5]
        grid = sorted(set(grid))
        try:
            scale = 1.0 + max(abs(float(f(x, *args))) for x in grid)
        except (ValueError, ZeroDivisionError, TypeError, OverflowError):
            continue
        if convex_on_samples(lambda x: float(f(x, *args)), grid, scale) < -1e-9:
            return False
    return True

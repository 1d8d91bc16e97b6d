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
* a function of the teacher fields alone that *jumps* (``sign(hstar)``, ``Heaviside(hstar)`` in the
  loss): the envelope then jumps with the teacher and its overlap derivatives are delta functions --
  the label must be declared as a channel (:mod:`replica.symbolic.channels`). A *kinked* continuous
  label (``Abs(hstar)``, ``Max(0, hstar)``, ``Min``, a continuous ``Piecewise``, with or without
  noise) is accepted (:func:`teacher_kinks`): it has a density, its overlap derivatives jump but stay
  bounded, and the quadrature puts panel boundaries where the teacher crosses its kinks;
* a piecewise loss of a prox of dimension above one (``L r > 1``);
* a branch whose stationary points have no closed form and that is not convex on its interval.

Losses are factors of a model (:mod:`replica.symbolic.factors`, role ``loss``): :class:`SquareLoss`,
:class:`LogisticLoss` and :class:`HingeLoss` say what they are (their exact prox where one exists; the
simulator's exact solvers read them), :class:`Loss` is any expression, and :func:`as_loss` recognises a
bare expression that is exactly one of the named ones.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
import sympy as sp

from ..errors import DeclarationError
from .factors import Factor, numeric

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


def flat_piecewise(expr: sp.Expr, variable: sp.Symbol | None = None) -> sp.Expr:
    """``expr`` with every non-smooth function rewritten as one flat ``Piecewise`` (or unchanged).

    ``variable``: rewrite only the non-smooth functions of ``variable`` (those of the teacher alone,
    a kinked label such as ``Abs(hstar)``, stay as they are: constants of the minimisation in ``h``)."""
    def hit(e) -> bool:
        if not isinstance(e, (sp.Max, sp.Min, sp.Abs, sp.Heaviside, sp.sign, sp.Piecewise)):
            return False
        return variable is None or variable in e.free_symbols

    expr = sp.sympify(expr)
    if variable is None:
        out = expr.replace(lambda e: hit(e) and not isinstance(e, sp.Piecewise), _as_piecewise)
        return sp.piecewise_fold(out)
    out = expr.replace(lambda e: hit(e) and not isinstance(e, sp.Piecewise), _as_piecewise)
    # fold only the Piecewise that involve the variable: a teacher-only Piecewise stays inside a branch
    kept: dict = {}

    def shield(e):
        sym = sp.Dummy("kinked")
        kept[sym] = e
        return sym

    out = out.replace(lambda e: isinstance(e, sp.Piecewise) and variable not in e.free_symbols, shield)
    return sp.piecewise_fold(out).xreplace(kept)


#: non-smooth functions of the teacher alone that are continuous (a kinked label has a density)
KINKED = (sp.Max, sp.Min, sp.Abs, sp.Piecewise)


def teacher_kinks(expr: sp.Expr, teacher: Iterable[sp.Symbol], variables: Iterable[sp.Symbol] = ()
                  ) -> list[sp.Expr]:
    """The kinked functions of the teacher (and noise) alone in ``expr`` -- ``Abs(hstar_1)``,
    ``Max(0, hstar_1)`` -- outermost first (none of them involves ``variables``, the student's fields)."""
    teacher, variables = set(teacher), set(variables)
    out: list[sp.Expr] = []
    for e in sp.preorder_traversal(sp.sympify(expr)):
        if isinstance(e, NONSMOOTH) and e.free_symbols & teacher and not e.free_symbols & variables:
            if e not in out:
                out.append(e)
    return out


def kink_conditions(kink: sp.Expr) -> list[sp.Expr]:
    """Expressions whose sign changes where a kinked teacher function changes branch (``u`` for
    ``Abs(u)``, ``a - b`` for ``Max(a, b)``; a ``Piecewise``'s conditions), to be located by the
    quadrature."""
    if isinstance(kink, sp.Abs):
        return [kink.args[0]]
    if isinstance(kink, (sp.Max, sp.Min)):
        a = kink.args
        return [sp.expand(a[i] - a[j]) for i in range(len(a)) for j in range(i + 1, len(a))]
    out = []
    for _, c in kink.args:
        if c in (sp.true, sp.false):
            continue
        for rel in c.atoms(sp.core.relational.Relational):
            out.append(sp.expand(rel.lhs - rel.rhs))
    return out


def kinked_label_derivative(expr: sp.Expr) -> sp.Expr:
    """``expr`` with the ``sign`` and ``Heaviside`` that differentiating a kinked label leaves
    (``d|u|/du = sign(u)``, ``d max(0, u)/du = Heaviside(u)``) written as ``Piecewise``: what the code
    printers evaluate on arrays and per node alike (their value at the kink is a null set)."""
    return sp.sympify(expr).replace(lambda e: isinstance(e, (sp.sign, sp.Heaviside)), _as_piecewise)


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
    for bad in teacher_kinks(expr, teacher, {variable}) + [a for f in (sp.sign, sp.Heaviside) for a in expr.atoms(f)
                                                         if a.free_symbols & teacher and variable not in a.free_symbols]:
        if not isinstance(bad, KINKED) or (isinstance(bad, sp.Piecewise) and not _continuous_in(bad, teacher)):
            raise DeclarationError(
                f"{what}: {bad} jumps as a function of the teacher fields alone, so the overlap "
                "derivatives of the energetic potential would be delta functions; declare the label as a "
                "channel (replica.symbolic.channels, e.g. channel=Sign(hstar[0])) and write the loss in its label y "
                "(a kinked continuous label such as Abs(hstar) or Max(0, hstar) is fine)")
    if not is_nonsmooth(expr, {variable}):
        return None
    flat = flat_piecewise(expr, variable)
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


def _continuous_in(pw: sp.Piecewise, teacher: set, trials: int = 16, seed: int = 3) -> bool:
    """Whether a ``Piecewise`` of the teacher alone is continuous across its boundaries (sampled at
    random values of the other symbols; parameters at 0.5)."""
    rng = random.Random(seed)
    syms = sorted(pw.free_symbols, key=str)
    f = sp.lambdify(syms, pw, "math")
    for cond in kink_conditions(pw):
        var = next((s for s in syms if s in teacher and s in cond.free_symbols), None)
        if var is None:
            continue
        for _ in range(trials):
            vals = {s: rng.uniform(-2.0, 2.0) if s in teacher else 0.5 for s in syms}
            others = {s: v for s, v in vals.items() if s is not var}
            try:
                roots = [complex(r) for r in sp.solve(sp.Eq(cond.subs(others), 0), var)]
            except (NotImplementedError, ValueError, TypeError):
                return False
            for r in roots:
                if abs(r.imag) > 1e-12:
                    continue
                x = r.real
                eps = 1e-7 * (1.0 + abs(x))
                left = float(f(*[x - eps if s is var else vals[s] for s in syms]))
                right = float(f(*[x + eps if s is var else vals[s] for s in syms]))
                if abs(left - right) > 1e-4 * (1.0 + abs(left) + abs(right)):
                    return False
    return True


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


# --------------------------------------------------------------------------- loss factors
class Loss(Factor):
    """A per-sample loss ``l(h, y)`` as a factor: any sympy expression of the student fields, the
    label (or the teacher fields) and the noise symbols (``Model(loss=...)``; a bare expression is
    wrapped in this class).

    It carries its potential (:meth:`expression`, what the energetic potential is built from), its
    LaTeX and, for the scalar losses below, which student field it reads (``field``) and its exact
    proximal map ``prox(omega, V, y) = argmin_h l(h, y) + (h - omega)^2 / (2 V)`` where a closed form
    exists (:attr:`has_prox`). A generic expression has none: the solver minimises its bracket
    numerically (:mod:`replica.numeric.prox`), the simulator its risk.
    """

    role = "loss"
    #: whether :meth:`prox` is a closed form
    has_prox: bool = False

    def __init__(self, expr: sp.Expr):
        self.expr = sp.sympify(expr)
        self.field: sp.Symbol | None = None

    def expression(self) -> sp.Expr:
        """The loss as a sympy expression."""
        return self.expr

    def latex(self) -> str:
        """The loss as LaTeX."""
        return sp.latex(self.expression())

    def parameters(self) -> set[sp.Symbol]:
        """Every symbol of the loss (fields, label, noise and parameters: the model sorts them)."""
        return set(self.expression().free_symbols)

    def prox(self, omega, V, y, values: dict[str, float] | None = None):
        """``argmin_h l(h, y) + (h - omega)^2 / (2 V)`` (numpy, elementwise in ``omega``, ``V``, ``y``)."""
        raise NotImplementedError(f"{type(self).__name__}: no closed-form proximal map")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.expression()})"


class SquareLoss(Loss):
    """``l = c/2 (y - h)^2`` of one student field ``h`` and a target ``y`` (an expression of the
    teacher fields and the noise, e.g. ``h* + sqrt(Delta) z``; ``c > 0`` the curvature).

    Its proximal map is linear, ``(omega + c V y) / (1 + c V)``; the simulator solves its risk with an
    l2 or l1 penalty exactly (normal equations, LASSO)."""

    has_prox = True

    def __init__(self, target: sp.Expr, field: sp.Symbol, curvature: sp.Expr = 1):
        self.target, self.curvature = sp.sympify(target), sp.sympify(curvature)
        super().__init__(self.curvature * sp.Rational(1, 2) * (self.target - field) ** 2)
        self.field = field

    def prox(self, omega, V, y, values=None):
        c = numeric(self.curvature, values, "curvature")
        return (np.asarray(omega, dtype=float) + c * V * np.asarray(y, dtype=float)) / (1.0 + c * V)


class LogisticLoss(Loss):
    """``l = log(1 + exp(-y h))`` of one student field ``h`` and a label ``y`` (``+-1`` from a channel).
    No closed-form proximal map (a Lambert-type equation): the solver's Newton prox minimises it."""

    def __init__(self, label: sp.Symbol, field: sp.Symbol):
        self.label = label
        super().__init__(sp.log(1 + sp.exp(-label * field)))
        self.field = field


class HingeLoss(Loss):
    """``l = max(0, 1 - y h)`` of one student field ``h`` and a label ``y`` (``+-1`` from a channel).

    Its proximal map is exact: ``omega`` where the margin ``y omega >= 1`` holds, ``omega + V y``
    where even that step leaves the margin unmet (``y omega + V y^2 <= 1``), else the kink ``h = 1/y``."""

    has_prox = True

    def __init__(self, label: sp.Symbol, field: sp.Symbol):
        self.label = label
        super().__init__(sp.Max(0, 1 - label * field))
        self.field = field

    def prox(self, omega, V, y, values=None):
        omega, y = np.asarray(omega, dtype=float), np.asarray(y, dtype=float)
        V = np.broadcast_to(np.asarray(V, dtype=float), np.broadcast(omega, y).shape)
        step = omega + V * y
        return np.where(y * omega >= 1.0, omega, np.where(y * step <= 1.0, step, 1.0 / y))


def as_loss(loss: "Loss | sp.Expr", fields: Sequence[sp.Symbol] = (), label: sp.Symbol | None = None) -> Loss:
    """``loss`` as a :class:`Loss` factor. A bare sympy expression of one student field that is, exactly
    (sympy), a square loss ``c/2 (y - h)^2`` (``c`` a positive number), or, with a channel's ``label``,
    the logistic or hinge loss of it, is that factor (keeping the expression as written); any other
    expression is the generic :class:`Loss`."""
    if isinstance(loss, Loss):
        return loss
    expr = sp.sympify(loss)
    used = [f for f in fields if expr.has(f)]
    found: Loss | None = None
    if len(used) == 1:
        h = used[0]
        if label is not None:
            found = next((c for c in (LogisticLoss(label, h), HingeLoss(label, h)) if c.expression() == expr), None)
        elif expr.is_polynomial(h) and sp.degree(expr, h) == 2:
            a2 = sp.expand(expr).coeff(h, 2)
            if a2.is_number and a2 > 0:
                target = sp.simplify(-sp.expand(expr).coeff(h, 1) / (2 * a2))
                if sp.simplify(expr - a2 * (target - h) ** 2) == 0:
                    found = SquareLoss(target, h, 2 * a2)
    if found is None:
        return Loss(expr)
    found.expr = expr   # the declaration's own spelling (the same function)
    return found

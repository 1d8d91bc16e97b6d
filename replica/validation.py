"""Checks of user input at the boundary: numbers, tolerances, sizes, state vectors.

Every check raises :class:`~replica.errors.ParameterError` naming the parameter, so that
the command line turns it into a one-line message (exit status 2) instead of a traceback,
a silent ``nan`` or minutes of work on a meaningless request. The command line, the
:class:`~replica.numeric.solver.Solver` and the quadrature rules all call these functions, so a
bad value is refused the same way whichever door it comes in by.
"""
from __future__ import annotations

import argparse
import math
import numbers
import os
from typing import Mapping, Sequence

import numpy as np

from .errors import ParameterError

#: the loosest relative residual at which a fixed point may be called converged
MAX_TOL = 1e-3
#: the tightest one: the residual is a relative difference of float64 numbers
MIN_TOL = 1e-14
#: largest sample complexity the solver accepts: the conjugates grow like alpha, and far
#: below the float64 overflow every branch has reached its large-alpha limit
MAX_ALPHA = 1e6
#: default budget of quadrature nodes (time and memory of one map evaluation are
#: proportional to it); ``REPLICA_MAX_NODES`` overrides it
MAX_NODES = 2_097_152


def real(value: object, name: str, *, low: float | None = None, high: float | None = None,
         low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a finite float in ``[low, high]`` (ends open on request).

    Accepts Python and numpy integers and floats (``np.int64(2)``), refuses ``bool``,
    strings, ``None``, ``nan`` and infinities with a message naming ``name``.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:  # a 0-d array from numpy arithmetic
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterError(name, f"must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ParameterError(name, f"must be finite, got {v}")
    if low is not None and (v < low or (low_open and v == low)):
        raise ParameterError(name, f"must be {'>' if low_open else '>='} {low:g}, got {v:g}"
                             + (f" (and <= {high:g})" if high is not None else ""))
    if high is not None and (v > high or (high_open and v == high)):
        raise ParameterError(name, f"must be {'<' if high_open else '<='} {high:g}, got {v:g}")
    return v


def integer(value: object, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]`` (numpy integers accepted, bools and floats refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ParameterError(name, f"must be an integer, got {value!r}")
    v = int(value)
    if low is not None and v < low:
        raise ParameterError(name, f"must be an integer >= {low}, got {v}")
    if high is not None and v > high:
        raise ParameterError(name, f"must be an integer <= {high}, got {v}")
    return v


def tolerance(value: object, name: str = "tol") -> float:
    """A convergence tolerance: finite, in ``[MIN_TOL, MAX_TOL]``.

    Above ``MAX_TOL`` a "converged" state can be the starting guess (a residual of 0.3
    passes ``tol = 1``); below ``MIN_TOL`` the relative residual of float64 numbers cannot
    get there and the iteration only burns its ``max_iter``.
    """
    v = real(value, name)
    if not MIN_TOL <= v <= MAX_TOL:
        raise ParameterError(name, f"must be in [{MIN_TOL:g}, {MAX_TOL:g}] (a relative residual: above "
                                   f"{MAX_TOL:g} a far-off state would pass as converged), got {v:g}")
    return v


def sample_complexity(value: object, name: str = "alpha") -> float:
    """``alpha = n/d``: finite, ``0 <= alpha <= MAX_ALPHA``."""
    v = real(value, name, low=0.0)
    if v > MAX_ALPHA:
        raise ParameterError(name, f"must be <= {MAX_ALPHA:g}, got {v:g} (the conjugates grow like alpha; "
                                   "every branch has reached its large-alpha limit long before)")
    return v


def parameter_values(overrides: Mapping[str, object], known: Sequence[str], model: str) -> dict[str, float]:
    """Model-parameter overrides as finite floats, unknown names and non-numbers refused."""
    out = {}
    for k, v in overrides.items():
        if k not in known:
            raise ParameterError(str(k), f"unknown parameter of model {model}; known: {list(known)}")
        out[k] = real(v, str(k))
    return out


def state_vector(x0: object, names: Sequence[str], name: str = "x0") -> np.ndarray:
    """A starting state as a float vector in ``names`` order (mapping or sequence)."""
    n = len(names)
    if isinstance(x0, Mapping):
        missing = [k for k in names if k not in x0]
        if missing:
            raise ParameterError(name, f"missing entries {missing} (needs {list(names)})")
        vals = [x0[k] for k in names]
    else:
        try:
            vals = list(np.asarray(x0, dtype=object).ravel()) if np.ndim(x0) else None
        except (TypeError, ValueError):
            vals = None
        if vals is None:
            raise ParameterError(name, f"must be a sequence of {n} numbers ({list(names)}) or a mapping, "
                                       f"got {x0!r}")
        if np.ndim(x0) != 1 or len(vals) != n:
            raise ParameterError(name, f"needs {n} entries ({', '.join(names)}), got shape {np.shape(x0)}")
    return np.array([real(v, f"{name}[{k}]") for k, v in zip(names, vals)], dtype=float)


# --------------------------------------------------------------------------- rule sizes
def max_nodes() -> int:
    """The node budget: :data:`MAX_NODES`, or ``$REPLICA_MAX_NODES`` when set."""
    env = os.environ.get("REPLICA_MAX_NODES")
    if env:
        try:
            return max(1, int(float(env)))
        except ValueError:
            raise ParameterError("REPLICA_MAX_NODES", f"must be an integer, got {env!r}") from None
    return MAX_NODES


def smolyak_size(dim: int, level: int) -> int:
    """Tensor-product points the Smolyak combination of level ``level`` enumerates in
    ``dim`` dimensions (an upper bound on its merged nodes), counted without building it.

    ``sum`` over level vectors ``l`` (``1 <= l_i <= level``) with
    ``max(dim, level) <= |l| <= level + dim - 1`` of ``prod_i (2 l_i - 1)``, by dynamic
    programming over the dimensions.
    """
    q = level + dim - 1
    counts = {0: 1}  # sum of |l| over the first k dims -> sum of products
    for _ in range(dim):
        nxt: dict[int, int] = {}
        for s, c in counts.items():
            for li in range(1, level + 1):
                if s + li <= q:
                    nxt[s + li] = nxt.get(s + li, 0) + c * (2 * li - 1)
        counts = nxt
    lo = max(dim, q - dim + 1)
    return sum(c for s, c in counts.items() if lo <= s <= q)


def rule_nodes(kind: str, dim: int, order: int, scramblings: int = 8) -> int:
    """Number of nodes of a rule before it is built (``gh``, ``smolyak``, ``sobol``)."""
    if kind == "gh":
        return order ** dim
    if kind == "smolyak":
        return 2 * order - 1 if dim == 1 else smolyak_size(dim, order)
    if kind == "sobol":
        return scramblings * 2 ** order
    raise ValueError(kind)


def format_bytes(n: float) -> str:
    """``1.23 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


def check_rule_size(kind: str, dim: int, order: int, name: str = "quadrature",
                    spec: str | None = None) -> int:
    """Refuse a rule whose node count exceeds the budget, before allocating anything.

    The cost of one saddle-point map evaluation is one proximal problem per node, so the
    node count is both the time and the memory budget; the message gives both.
    """
    # exponents first: 47^4 is cheap, but sobol:10**6 or gh:10**3 in 6-D are not
    budget = max_nodes()
    if kind == "sobol" and order > 62:
        n = float("inf")
    elif kind == "gh" and dim * math.log2(max(order, 2)) > 62:
        n = float("inf")
    elif kind == "smolyak" and dim > 1 and order > 300:
        n = float("inf")  # more than (2/3) 300^3 = 1.8e7 points: not worth counting exactly
    else:
        n = rule_nodes(kind, dim, order)
    if n > budget:
        what = spec or f"{kind}:{order}"
        if math.isfinite(n):
            size = f"{n:,} nodes ({format_bytes(8.0 * (dim + 1) * n)} for the nodes alone"
        else:
            size = ("more than 1.8e7 nodes (uncounted" if kind == "smolyak"
                    else "more nodes than any memory holds (over 2^62")
        instead = {"gh": "a lower order, or smolyak in high dimension", "smolyak": "a lower level",
                   "sobol": "fewer points"}[kind]
        raise ParameterError(name, f"{what} in {dim}-D has {size}, and one proximal problem per node per "
                                   f"iteration): over the budget of {budget:,} nodes; use {instead}, or raise "
                                   "REPLICA_MAX_NODES")
    return int(n)


#: smallest order of each family whose companion (the error estimate) is a distinct rule
#: with at least two nodes per axis: gh:2's companion is gh:2 itself (an error estimate of
#: exactly 0), gh:1 / smolyak:1 are the single node z = 0
MIN_ORDER = {"gh": 3, "smolyak": 3, "sobol": 2}


def check_rule_order(kind: str, order: int, name: str = "quadrature", spec: str | None = None) -> None:
    """Refuse a degenerate rule (see :data:`MIN_ORDER`)."""
    lo = MIN_ORDER[kind]
    if order < lo:
        what = spec or f"{kind}:{order}"
        why = {("gh", 1): "a single node per axis (z = 0)",
               ("gh", 2): "its companion rule, which gives the error estimate, is itself (an error estimate of 0)",
               ("smolyak", 1): "a single node (z = 0)",
               ("smolyak", 2): "its companion rule, which gives the error estimate, is the single node z = 0",
               }.get((kind, order), "its companion rule, which gives the error estimate, has at most "
                                    "one point per scrambling" if kind == "sobol" else "too few nodes")
        raise ParameterError(name, f"{what} is degenerate: {why}; use {kind}:{lo} or more")


def check_rule(rule: object, name: str = "rule") -> None:
    """Refuse a degenerate quadrature rule (or the rule of a quadrature integrator) given to
    the solver."""
    rule = getattr(rule, "rule", rule)
    kind = {"gauss-hermite": "gh", "smolyak": "smolyak", "sobol": "sobol"}.get(getattr(rule, "kind", None))
    if kind is None:
        return  # an integrator of another kind checks its own settings
    check_rule_order(kind, int(rule.order), name)


def token_scale(module, p: np.ndarray) -> None:
    """Refuse parameters whose token second moment ``rho_bar`` is not positive and finite
    (``sigma = 0``: no state is admissible; ``sigma = 1e200``: it overflows).

    The parameter named is the one whose value, put back to its default, makes ``rho_bar``
    valid again (else one on the boundary of its domain)."""
    def valid(q: np.ndarray) -> bool:
        with np.errstate(all="ignore"):
            rb = np.atleast_1d(np.asarray(module.rho_bar(q), dtype=float))
        return bool(rb.size == 0 or (np.all(np.isfinite(rb)) and np.all(rb > 0)))

    p = np.asarray(p, dtype=float)
    if valid(p):
        return
    names = list(module.PARAMETERS)
    defaults = np.asarray(module.DEFAULTS, dtype=float)
    culprits = []
    for i, k in enumerate(names):
        if p[i] != defaults[i]:
            q = p.copy()
            q[i] = defaults[i]
            if valid(q):
                culprits.append(k)
    if not culprits:
        culprits = [k for k, (lo, hi) in module.DOMAINS.items()
                    if k in names and p[names.index(k)] in (lo, hi)]
    with np.errstate(all="ignore"):
        rb = np.atleast_1d(np.asarray(module.rho_bar(p), dtype=float))
    name = culprits[0] if culprits else "parameters"
    shown = ", ".join(f"{k}={p[names.index(k)]:g}" for k in culprits) or "these parameters"
    raise ParameterError(name, f"{shown} give{'s' if len(culprits) == 1 else ''} the tokens a second moment "
                               f"rho_bar = {np.array2string(rb, precision=3)}: no state is admissible (rho_bar "
                               "must be positive and finite)")


def convex_penalty(module, p: np.ndarray) -> None:
    """Refuse parameters at which a non-quadratic penalty is not convex (midpoint convexity of
    the generated ``regularizer`` on a grid of weights): its entropic Moreau envelope would have
    no unique minimiser. Names the parameters that differ from their defaults."""
    if module.regularizer is None:
        return
    r = int(module.R)
    grid = np.array([-6.0, -3.0, -1.5, -0.7, -0.2, 0.0, 0.3, 0.8, 1.6, 3.2, 6.5])
    rng = np.random.default_rng(0)
    dirs = np.eye(r) if r > 1 else np.ones((1, 1))
    if r > 1:
        dirs = np.vstack([dirs, rng.normal(size=(4, r))])
    for d in dirs:
        a = grid[:, None] * d[None, :]
        i, j = np.triu_indices(grid.size, 1)
        with np.errstate(all="ignore"):
            fa = np.asarray(module.regularizer(a.T, p), dtype=float)
            fm = np.asarray(module.regularizer((0.5 * (a[i] + a[j])).T, p), dtype=float)
        defect = 0.5 * (fa[i] + fa[j]) - fm
        scale = 1.0 + np.nanmax(np.abs(fa))
        if np.nanmin(defect) < -1e-9 * scale:
            changed = [f"{n}={v:g}" for n, v, dv in zip(module.PARAMETERS, p, module.DEFAULTS) if v != dv]
            raise ParameterError("regularizer", "the penalty r(w) is not convex" +
                                 (f" at {', '.join(changed)}" if changed else "") +
                                 " (its entropic Moreau envelope needs a convex penalty)")


# --------------------------------------------------------------------------- command-line strings
class _StoreOnce(argparse._StoreAction):
    """argparse's ``store`` action, refusing a second occurrence of its flag: ``--alpha 2 --alpha 3``
    solved at alpha = 3 without a word."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_flags_given", set())
        if self.dest in given and option_string is not None:
            parser.error(f"argument {option_string}: given twice ({getattr(namespace, self.dest)!r} and "
                         f"{values!r}); give it once")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


def refuse_repeated_flags(parser: argparse.ArgumentParser) -> None:
    """Make every value-taking flag that ``parser`` adds from now on (``store``, argparse's default
    action; its argument groups share it) refuse being given twice. ``append`` flags (``--param``)
    are meant to repeat and are left alone."""
    parser.register("action", None, _StoreOnce)
    parser.register("action", "store", _StoreOnce)


def given_strings(actions, args: object) -> None:
    """Refuse a flag or argument given as an empty (or blank) string.

    ``--out ""`` is falsy, and code written as ``args.out or DEFAULT`` took it for the default:
    ``replica generate ridge --out ""`` overwrote the committed module, ``--branch ""`` solved the
    free branch. Every parser of the command line calls this on its parsed arguments (the
    ``replica`` parser and the simulators'), so an empty value is an error naming the flag, whatever
    the command does with it later. ``actions``: the parser's argparse actions; values equal to
    the flag's default (given or not) pass, as do flags whose default is itself empty.
    """
    for action in actions:
        dest = getattr(action, "dest", None)
        if not dest or dest == "help" or not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        items = value if isinstance(value, list) else [value]
        if value == action.default or not any(isinstance(v, str) and not v.strip() for v in items):
            continue
        flag = max(action.option_strings, key=len).lstrip("-") if action.option_strings else dest
        raise ParameterError(flag, "is empty: give a value, or leave the flag out for its default")

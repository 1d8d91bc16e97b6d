"""The simulators as task kinds of ``replica sweep`` (``[compute] kind = "simulate"``).

Each adapter takes the sweep's model name, one grid point (the model's parameter names, ``alpha``,
and any string axis such as ``init``) and the spec's ``[compute]`` options (``d``, ``seeds`` ...),
runs a simulator of this package, and returns flat numbers: the mean of every metric and its
standard error over seeds as ``<metric>_error`` (NaN with one seed), ``converged`` (every seed),
and ``notes``. ``<adapter>.check(model, point, options)`` validates a point before any run (a
one-line :class:`~replica.errors.ParameterError`), so a typo does not surface hours into a sweep.

* ``glm``: :func:`numerics.glm.run_glm` (any declared model the exact solvers fit: a convex GLM;
  options ``d``, ``seeds``, ``seed0``, ``n_test``).

An application's protocols add their own adapters with these helpers (the attention study's
``attention`` and ``linear``: :mod:`numerics.applications.attention.sweep`).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from replica.errors import ParameterError

__all__ = ["glm", "flat_result", "simulator_error", "with_check"]


def simulator_error(exc: Exception) -> ParameterError:
    """A simulator's ``ValueError`` (which names its flag) as a one-line sweep error."""
    return ParameterError("simulate", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def flat_result(means: Mapping[str, Any], ses: Mapping[str, Any], converged: bool, notes: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in means.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
            se = ses.get(k)
            out[f"{k}_error"] = float(se) if isinstance(se, (int, float)) and se is not None else math.nan
    out["converged"] = bool(converged)
    out["notes"] = notes
    return out


def with_check(check: Callable[[str, Mapping[str, Any], Mapping[str, Any]], None]):
    def wrap(fn):
        fn.check = check
        return fn
    return wrap


# --------------------------------------------------------------------------- GLMs
GLM_OPTIONS = ("d", "seeds", "seed0", "n_test")


def _glm_check(model: str, point: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    from . import glm as g

    extra = sorted(set(options) - set(GLM_OPTIONS))
    if extra:
        raise ParameterError(f"compute.{extra[0]}", f"not an option of the glm simulator ({', '.join(GLM_OPTIONS)})")
    if "d" not in options:
        raise ParameterError("compute.d", "the glm simulator needs the dimension d")
    p = dict(point)
    alpha = p.pop("alpha", None)
    try:
        g.check_inputs(model, alpha, options["d"], p, options.get("seeds", 1), options.get("n_test", 20000))
    except ValueError as exc:
        raise simulator_error(exc) from None


@with_check(_glm_check)
def glm(model: str, point: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    """:func:`numerics.glm.run_glm` at one grid point (``alpha`` and the model's parameters)."""
    from .glm import run_glm

    p = dict(point)
    alpha = float(p.pop("alpha"))
    r = run_glm(model, alpha, int(options["d"]), p, int(options.get("seeds", 1)), int(options.get("seed0", 0)),
                int(options.get("n_test", 20000)))
    return flat_result(r["mean"], r["se"], r["converged"])

"""The simulators as task kinds of ``replica sweep`` (``[compute] kind = "simulate"``).

Each adapter takes the sweep's model name, one grid point (the model's parameter names, ``alpha``,
and any string axis such as ``init``) and the spec's ``[compute]`` options (``d``, ``seeds`` ...),
runs a simulator of this package, and returns flat numbers: the mean of every metric and its
standard error over seeds as ``<metric>_error`` (NaN with one seed), ``converged`` (every seed),
and ``notes``. ``<adapter>.check(model, point, options)`` validates a point before any run (a
one-line :class:`~replica.errors.ParameterError`), so a typo does not surface hours into a sweep.

* ``glm``: :func:`numerics.glm.run_glm` (ridge, lasso, logistic, hinge, perceptron_probit;
  options ``d``, ``seeds``, ``seed0``, ``n_test``);
* ``attention``: :func:`numerics.simulate.run_attention` (models ``attention``/``attention_tied``,
  ``attention_untied``; parameters ``omega, sigma, lam, A_11 ... A_22``; options ``d``, ``seeds``,
  ``init``, ``steps``, ``lr`` ... of the simulator; torch);
* ``linear``: :func:`numerics.simulate.run_linear` (the linear baseline of the attention study).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from replica.errors import ParameterError

__all__ = ["attention", "glm", "linear"]


def _error(exc: Exception) -> ParameterError:
    """A simulator's ``ValueError`` (which names its flag) as a one-line sweep error."""
    return ParameterError("simulate", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def _flat(means: Mapping[str, Any], ses: Mapping[str, Any], converged: bool, notes: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in means.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
            se = ses.get(k)
            out[f"{k}_error"] = float(se) if isinstance(se, (int, float)) and se is not None else math.nan
    out["converged"] = bool(converged)
    out["notes"] = notes
    return out


def _with_check(check: Callable[[str, Mapping[str, Any], Mapping[str, Any]], None]):
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
        raise _error(exc) from None


@_with_check(_glm_check)
def glm(model: str, point: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    """:func:`numerics.glm.run_glm` at one grid point (``alpha`` and the model's parameters)."""
    from .glm import run_glm

    p = dict(point)
    alpha = float(p.pop("alpha"))
    r = run_glm(model, alpha, int(options["d"]), p, int(options.get("seeds", 1)), int(options.get("seed0", 0)),
                int(options.get("n_test", 20000)))
    return _flat(r["mean"], r["se"], r["converged"])


# --------------------------------------------------------------------------- attention
ATTENTION_MODELS = {"attention": False, "attention_tied": False, "attention_untied": True}


def _attention_kwargs(model: str, point: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    from replica.applications.attention.paper import PAPER_A

    if model not in ATTENTION_MODELS:
        raise ParameterError("model", f"the attention simulator runs {list(ATTENTION_MODELS)}, not {model!r}")
    kw = dict(options)
    p = dict(point)
    A = [list(row) for row in PAPER_A]
    for i in range(2):
        for j in range(2):
            key = f"A_{i + 1}{j + 1}"
            if key in p:
                A[i][j] = float(p.pop(key))
    kw.update(p)
    kw["A"] = A
    if ATTENTION_MODELS[model]:
        kw["untied"] = True
    for k in ("d", "seeds"):
        if k not in kw:
            raise ParameterError(f"compute.{k}", f"the attention simulator needs {k}")
    kw["d"], kw["seeds"] = int(kw["d"]), int(kw["seeds"])
    return kw


def _attention_check(model: str, point: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    from .simulate import validate

    kw = _attention_kwargs(model, point, options)
    try:
        validate(omega=kw.get("omega"), alpha=kw.get("alpha"), d=kw["d"], lam=kw.get("lam"), init=kw.get("init"),
                 A=kw["A"], sigma=kw.get("sigma"), seeds=kw["seeds"], steps=kw.get("steps"), lr=kw.get("lr"))
    except ValueError as exc:
        raise _error(exc) from None


@_with_check(_attention_check)
def attention(model: str, point: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    """:func:`numerics.simulate.run_attention` at one grid point."""
    from .simulate import run_attention

    r = run_attention(**_attention_kwargs(model, point, options))
    keys = ("q", "m", "theta", "rho", "eps_g", "train_loss", "grad_norm")
    return _flat({k: r[k] for k in keys if k in r}, {k: r.get(f"{k}_se") for k in keys}, r["converged"])


def _linear_check(model: str, point: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    from .simulate import validate

    kw = _attention_kwargs(model, point, options)
    try:
        validate(omega=kw.get("omega"), alpha=kw.get("alpha"), d=kw["d"], A=kw["A"], seeds=kw["seeds"])
    except ValueError as exc:
        raise _error(exc) from None


@_with_check(_linear_check)
def linear(model: str, point: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    """:func:`numerics.simulate.run_linear` (the attention study's linear baseline) at one grid point."""
    from .simulate import run_linear

    kw = _attention_kwargs(model, point, options)
    kw.pop("untied", None)
    for k in ("sigma", "lam", "init"):
        kw.pop(k, None)
    r = run_linear(**kw)
    keys = ("eps_g", "train_loss")
    return _flat({k: r[k] for k in keys}, {k: r.get(f"{k}_se") for k in keys}, r["converged"])

"""The attention study's simulators as task kinds of ``replica sweep`` (``[compute] kind = "simulate"``).

* ``attention``: :func:`numerics.applications.attention.simulate.run_attention` (models
  ``attention``/``attention_tied``, ``attention_untied``; parameters ``omega, sigma, lam, A_11 ... A_22``;
  options ``d``, ``seeds``, ``init``, ``steps``, ``lr`` ... of the simulator; torch);
* ``linear``: :func:`numerics.applications.attention.simulate.run_linear` (the study's linear baseline).

Both return flat numbers as :mod:`numerics.sweep`'s adapters do (means, ``<metric>_error``, ``converged``).
"""
from __future__ import annotations

from typing import Any, Mapping

from replica.errors import ParameterError

from numerics.sweep import flat_result, simulator_error, with_check

__all__ = ["attention", "linear"]


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
        raise simulator_error(exc) from None


@with_check(_attention_check)
def attention(model: str, point: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    """:func:`numerics.applications.attention.simulate.run_attention` at one grid point."""
    from .simulate import run_attention

    r = run_attention(**_attention_kwargs(model, point, options))
    keys = ("q", "m", "theta", "rho", "eps_g", "train_loss", "grad_norm")
    return flat_result({k: r[k] for k in keys if k in r}, {k: r.get(f"{k}_se") for k in keys}, r["converged"])


def _linear_check(model: str, point: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    from .simulate import validate

    kw = _attention_kwargs(model, point, options)
    try:
        validate(omega=kw.get("omega"), alpha=kw.get("alpha"), d=kw["d"], A=kw["A"], seeds=kw["seeds"])
    except ValueError as exc:
        raise simulator_error(exc) from None


@with_check(_linear_check)
def linear(model: str, point: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    """:func:`numerics.applications.attention.simulate.run_linear` (the attention study's linear baseline) at one grid point."""
    from .simulate import run_linear

    kw = _attention_kwargs(model, point, options)
    kw.pop("untied", None)
    for k in ("sigma", "lam", "init"):
        kw.pop(k, None)
    r = run_linear(**kw)
    keys = ("eps_g", "train_loss")
    return flat_result({k: r[k] for k in keys}, {k: r.get(f"{k}_se") for k in keys}, r["converged"])

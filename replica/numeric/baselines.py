"""Baselines the test error of a model is compared with (the ``alpha_l`` of :mod:`replica.phase`).

A model declares one (``Model(baseline=...)``, module ``BASELINE``); :func:`baseline` evaluates
it. Known kinds:

* ``"linear"`` -- the best predictor *linear in the tokens*, ``f_B(x) = B x`` (paper Result 5.1),
  for student/target models: its test error does not depend on ``alpha`` and is
  ``1/2 sum_{l,k} rho_bar_k Var[T(h*)_{lk}]`` (:func:`linear_baseline`).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..interface.generated_model import GeneratedModel
from ..errors import ParameterError
from .labels import label_law, with_labels
from .parameters import parameter_vector
from .quadrature import default_rule, gauss_hermite

#: baseline kinds and what they need
KINDS = {"linear": "a target T(h*) (student/target models)"}


def baseline(module: GeneratedModel, parameters: Mapping[str, float] | None = None,
             kind: str | None = None) -> tuple[float, float] | None:
    """The value and error estimate of the baseline ``kind`` (default: the module's declared
    ``BASELINE``); ``None`` when the model declares none."""
    kind = kind if kind is not None else module.BASELINE
    if kind is None:
        return None
    if kind == "linear":
        return linear_baseline(module, parameters)
    raise ParameterError("baseline", f"unknown baseline {kind!r}; known: {list(KINDS)}")


def linear_baseline(module: GeneratedModel, parameters: Mapping[str, float] | None = None,
                    order: int = 40) -> tuple[float, float]:
    """``eps_g^lin = 1/2 sum_{l,k} rho_bar_k Var[T(h*)_{lk}]`` with ``h*_l ~ N(0, rho_l)`` (Result 5.1).

    Returns the value and a two-order quadrature error estimate. Needs a model with a target.
    """
    if not module.HAS_TARGET:
        raise ParameterError("model", f"{module.MODEL} declares no target T(h*); no linear baseline")
    p = parameter_vector(module, parameters)
    L = module.L
    dim = L * module.R_T

    def value(n: int) -> float:
        rule = gauss_hermite(dim, n) if dim <= 4 else default_rule(dim, "high")
        with np.errstate(over="ignore", under="ignore"):
            T = module.target_entries(rule.nodes, p).reshape(L, L, -1)
        mean = T @ rule.weights
        var = ((T - mean[..., None]) ** 2) @ rule.weights
        rb = np.asarray(module.rho_bar(p))
        return float(0.5 * np.sum(var * rb[None, :]))

    def value_labelled(n: int) -> float:
        # Token clusters: conditionally on the labels c, the risk of B is
        # 1/2 sum_{l,k} rho_bar_{k c_k} (T - B)_{lk}^2, so B_lk = E[rho_bar_k T_lk] / E[rho_bar_k]
        # and eps = 1/2 sum_{l,k} E[rho_bar_k (T_lk - B_lk)^2] (expectations over c and h*).
        values, probs = label_law(module, p)
        rule = gauss_hermite(dim, n) if dim <= 4 else default_rule(dim, "high")
        nodes = with_labels(rule, values, probs)
        with np.errstate(over="ignore", under="ignore"):
            T = module.target_entries(nodes.nodes, p).reshape(L, L, -1)
        rb = np.asarray(module.token_rho_bar(nodes.nodes[dim:], p)).reshape(L, -1)   # (k, N)
        w = nodes.weights
        B = (T * rb[None]) @ w / (rb @ w)[None, :]
        return float(0.5 * np.sum(((T - B[..., None]) ** 2 * rb[None]) @ w))

    value_fn = value_labelled if label_law(module, p) is not None else value
    fine = value_fn(order)
    return fine, abs(fine - value_fn(max(4, order * 2 // 3)))

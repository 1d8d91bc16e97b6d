"""Hand-written state-evolution oracles for the GLM canon (issues 13 and 14).

Independent references the toolkit is checked against: nothing here imports :mod:`replica`,
and the library never imports this package. Conventions (the toolkit's, docs/explanation/theory.md
§3–4 with ``L = r = r_t = 1``, ``σ = ρ = 1``, ``m = 0``) are spelled out in
:mod:`tests.oracles.common`; the equations of each model in its module:

* :mod:`tests.oracles.ridge` — random-matrix closed form and state evolution;
* :mod:`tests.oracles.lasso` — Bayati–Montanari state evolution, closed-form averages;
* :mod:`tests.oracles.classification` — ℓ2 logistic / hinge / square on a sign or probit teacher
  (Aubin, Krzakala, Lu, Zdeborová 2020), adaptive quadrature split at every kink.

Entry points: :func:`state_evolution` (one point, by model name and the toolkit's parameter
names) and :func:`reference_table` (the agreement grid of issue 13).
"""
from __future__ import annotations

from typing import Any

# The models the oracles know and their parameters with defaults, by the toolkit's names: the
# declarations' defaults (derivations/<model>.py; tests/test_oracles.py checks they agree), written
# here as plain data so that the references share nothing with the code they check.
PARAMETERS: dict[str, dict[str, float]] = {
    "ridge": {"lam": 0.1, "Delta": 0.25},
    "logistic": {"lam": 0.1},
    "hinge": {"lam": 0.1},
    "lasso": {"lam1": 0.1, "Delta": 0.25},
    "perceptron_probit": {"lam": 0.1, "Delta": 0.25},
}
MODELS = tuple(PARAMETERS)

from .classification import classification_state_evolution
from .lasso import lasso_state_evolution
from .ridge import ridge_closed_form, ridge_state_evolution

__all__ = ["MODELS", "PARAMETERS", "state_evolution", "reference_table", "TABLE_ALPHAS"]

TABLE_ALPHAS = (0.5, 1.0, 2.0, 5.0)
TABLE_LAMS = (1e-3, 0.1, 1.0)
TABLE_LAM1S = (0.1, 1.0)
TABLE_DELTAS_LASSO = (0.0, 0.25)
TABLE_DELTA = 0.25  # ridge and perceptron_probit


def state_evolution(model: str, alpha: float, start: tuple[float, float, float] | None = None,
                    **params: float) -> dict[str, Any]:
    """The fixed point of ``model`` at ``alpha`` (parameters by the toolkit's names, defaults from
    :data:`PARAMETERS`). Returns the order parameters ``q, V, theta``, conjugates ``qhat, Vhat,
    thetahat``, potentials ``psi_t, psi_w, psi_y``, ``phi``, ``train_loss`` (``= −phi``), ``eps_g``
    (the loss at a fresh sample, the toolkit's ε_g; for regression the test MSE ``½E(y − h)²``),
    ``classification_error`` (classifiers), ``zero_fraction`` (LASSO), and ``residual``."""
    if model not in PARAMETERS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    unknown = set(params) - set(PARAMETERS[model])
    if unknown:
        raise ValueError(f"{model} has no parameter(s) {sorted(unknown)}; it takes {sorted(PARAMETERS[model])}")
    p = {**PARAMETERS[model], **params}
    if model == "ridge":
        out = ridge_state_evolution(alpha, p["lam"], p["Delta"], start)
    elif model == "lasso":
        out = lasso_state_evolution(alpha, p["lam1"], p["Delta"], start)
    elif model == "perceptron_probit":
        out = classification_state_evolution("logistic", alpha, p["lam"], p["Delta"], start)
    else:
        out = classification_state_evolution(model, alpha, p["lam"], 0.0, start)
    return {"model": model, "alpha": alpha, "parameters": p, **out}


def _grid() -> list[tuple[str, dict[str, float]]]:
    rows: list[tuple[str, dict[str, float]]] = []
    rows += [("ridge", {"lam": lam, "Delta": TABLE_DELTA}) for lam in TABLE_LAMS]
    rows += [("logistic", {"lam": lam}) for lam in TABLE_LAMS]
    rows += [("hinge", {"lam": lam}) for lam in TABLE_LAMS]
    rows += [("perceptron_probit", {"lam": lam, "Delta": TABLE_DELTA}) for lam in TABLE_LAMS]
    rows += [("lasso", {"lam1": lam1, "Delta": delta}) for lam1 in TABLE_LAM1S for delta in TABLE_DELTAS_LASSO]
    return rows


def reference_table(models: tuple[str, ...] = MODELS, alphas: tuple[float, ...] = TABLE_ALPHAS
                    ) -> list[dict[str, Any]]:
    """The oracle values on issue 13's agreement grid: ``α ∈ {0.5, 1, 2, 5}`` and ``λ ∈ {1e-3,
    0.1, 1}`` for ridge (Δ = 0.25), logistic, hinge and perceptron_probit (Δ = 0.25); LASSO at
    ``λ₁ ∈ {0.1, 1}``, ``Δ ∈ {0, 0.25}``. One dict per point (see :func:`state_evolution`);
    ridge rows also carry the random-matrix closed form's ``q, V, theta`` under ``closed_form``.
    Each series is continued in α from the previous point (a start, not a shortcut: every
    point is solved to the same tolerance)."""
    table = []
    for model, params in _grid():
        if model not in models:
            continue
        start = None
        for alpha in alphas:
            row = state_evolution(model, alpha, start=start, **params)
            start = (row["q"], row["V"], row["theta"])
            if model == "ridge":
                cf = ridge_closed_form(alpha, params["lam"], params["Delta"])
                row["closed_form"] = {k: cf[k] for k in ("q", "V", "theta", "train_loss_rmt", "eps_g")}
            table.append(row)
    return table

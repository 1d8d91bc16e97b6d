"""The JSON of a fixed point: the ``replica solve --json`` contract, shared by the command line and
the simulator's checks (``numerics/``), which must not import the command line.

:func:`result_dict` gives the token-1 order parameters and conjugates, every declared observable
with its ``<name>_error``, the solve's diagnostics and ``errors`` (:func:`error_dict`: the absolute
error bar of every number, same keys).
"""
from __future__ import annotations

import math

import numpy as np

from ..interface.generated_model import GeneratedModel
from .solver import observable_dict


def error_dict(module, fp) -> dict:
    """``errors``: the absolute error bar of every number of :func:`result_dict`, under the same
    keys and in the same shape (token-1 families, observables, potentials, the full
    ``order_parameters`` / ``conjugate_parameters``)."""
    # a number without a bar is nan here, so that the JSON says why (null + <key>_reason), never a bare null
    err = {k: v if v is not None else math.nan for k, v in fp.errors.items()}
    err = {**{k: math.nan for k in (*fp.order, *fp.conjugates, *fp.observables)}, **err}
    order = {k: err.get(k, math.nan) for k in fp.order}
    conj = {k: err.get(k, math.nan) for k in fp.conjugates}
    out: dict = {}
    out.update(token_one(module, order))
    out.update(token_one(module, conj))
    out.update({k: err.get(k, math.nan) for k in fp.observables})
    out.update({k: err.get(k, math.nan) for k in ("train_loss", "phi", "psi_t", "psi_w", "psi_y")})
    out.update(order_parameters=order, conjugate_parameters=conj)
    return out


def result_dict(module, fp) -> dict:
    """The JSON contract: token-1 q, m, theta, V (+ conjugates), every declared observable with its
    ``<name>_error`` (``eps_g`` first), the solve's diagnostics, and ``errors`` (the
    absolute error bar of every number, same keys), ``accuracy`` and ``accuracy_met``,
    ``branch_found`` and the ``rules`` of the reported values."""
    out: dict = {}
    out.update(token_one(module, fp.order))
    out.update(token_one(module, fp.conjugates))
    out.update(observable_dict(fp))
    out.update(train_loss=fp.train_loss, phi=fp.phi, converged=fp.converged, tol=fp.tol,
               iterations=fp.iterations, residual=fp.residual, alpha=fp.alpha, branch=fp.branch,
               quadrature=fp.quadrature,
               quadrature_residual=fp.quadrature_residual, psi_t=fp.psi_t, psi_w=fp.psi_w,
               psi_y=fp.psi_y, parameters=fp.parameters, order_parameters=fp.order,
               conjugate_parameters=fp.conjugates, seconds=fp.seconds, notes=fp.notes)
    if fp.errors:
        out.update(errors=error_dict(module, fp), accuracy=fp.accuracy, accuracy_met=fp.accuracy_met)
    out.update(branch_found=fp.branch_found, rules=fp.rules, prox=fp.prox, prox_saddle=fp.prox_saddle)
    return out


def token_one(module: GeneratedModel, values: dict[str, float]) -> dict[str, object]:
    """Token-1 value of every family (scalar, vector or matrix), in docs/explanation/theory.md §2 conventions
    (with token clusters: slot 1a, the first cluster of token 1)."""
    out: dict[str, object] = {}
    fams: dict[str, dict] = {}
    first = (None, 1, *module.SLOTS[:1])
    for name, v in values.items():
        fam, token, i, j, rows, cols = module.LAYOUT[name]
        if token not in first:
            continue
        entry = fams.setdefault(fam, {"M": np.zeros((rows, cols))})
        entry["M"][i, j] = v
        if rows == cols and fam in ("q", "V", "qhat", "Vhat"):
            entry["M"][j, i] = v
    for fam, entry in fams.items():
        M = entry["M"]
        out[fam] = float(M[0, 0]) if M.size == 1 else (M[:, 0].tolist() if M.shape[1] == 1 else M.tolist())
    return out

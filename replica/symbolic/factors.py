"""Factors: the pieces a model is composed of, each carrying its theory and its sampler.

A model (:class:`replica.symbolic.model.Model`) is a composition of factors, the way message-passing
toolkits (tramp) build a model from its priors, channels and likelihoods. The energetic side of
the free entropy is loss x channel x data law, the entropic side penalty (or prior) x data law
(docs/explanation/theory.md §1-3). Each factor is a small class in the module of its kind, and
carries what every consumer needs from it:

=============  ======================================  ==============================================
role           module                                  carries
=============  ======================================  ==============================================
``loss``       :mod:`replica.symbolic.losses`          ``expression()`` (sympy, in the student
                                                       fields and the label), ``latex()``, ``prox``
                                                       (exact, where a closed form exists)
``penalty``    :mod:`replica.symbolic.regularizers`    ``expression(w)``, ``latex(w)``, ``prox``
                                                       (exact, where a closed form exists)
``channel``    :mod:`replica.symbolic.channels`        ``likelihood`` (the ``Z_out`` potential),
                                                       ``latex()``, ``probabilities``, ``sample``
``data law``   :mod:`replica.symbolic.data`            the spectral law's moments (``rho``,
                                                       ``rho_bar``), ``latex()``, ``sample``
``prior``      :mod:`replica.symbolic.priors`          ``density``, the ``Z_0`` terms of Bayes-optimal
                                                       inference, ``sample`` (the teacher's weights)
=============  ======================================  ==============================================

A numeric method takes the parameter values by name (``{"lam": 0.1}``); what it needs but is not
given raises :class:`ValueError` naming it. ``prox`` is ``None`` on a factor without a closed form
(the solver and the simulator then minimise numerically). :func:`model_factors` lists the factors of
a model; the simulator (``numerics``) samples and minimises from them, and ``tests/test_factors.py``
checks every factor by finite differences (its potential's derivatives, its prox against a
numerical argmin, its sampler against its law).
"""
from __future__ import annotations

from typing import Any, ClassVar, Mapping

import sympy as sp

__all__ = ["Factor", "numeric", "model_factors"]


class Factor:
    """Base class of a factor (module docstring): its ``role`` and its parameters."""

    #: ``"loss"``, ``"penalty"``, ``"channel"``, ``"prior"`` or ``"data law"``
    role: ClassVar[str] = ""

    def parameters(self) -> set[sp.Symbol]:
        """The numeric parameters the factor depends on."""
        return set()


def numeric(expr: Any, values: Mapping[str, float] | None, what: str) -> float:
    """``expr`` (a sympy expression of parameters, or a number) as a float at ``values`` (by name);
    raises :class:`ValueError` naming ``what`` and the parameters without a value."""
    val = sp.sympify(expr)
    if values:
        val = val.subs({s: float(values[s.name]) for s in val.free_symbols if s.name in values})
    if val.free_symbols:
        raise ValueError(f"{what}: give values for {sorted(map(str, val.free_symbols))}")
    return float(val)


def model_factors(model) -> dict[str, Factor]:
    """The factors a model is composed of, by role: ``loss``, ``penalty``, ``data law`` and, where
    declared, ``channel`` (and ``prior``)."""
    out = {"loss": model.loss_factor, "penalty": model.regularizer, "data law": model.data}
    if model.channel is not None:
        out["channel"] = model.channel
    prior = getattr(model, "prior", None)
    if prior is not None:
        out["prior"] = prior
    return out

"""The typed interface of a generated Bayes-optimal module (:mod:`replica.codegen.bayes`).

:class:`BayesModel` is the module read once and checked: its metadata, and the vectorised functions
built from its kernels with :func:`replica.interface.generated_model.vectorised` (outputs allocated at the
broadcast shape of the node arguments). This module also defines the array helpers the kernels call
(those of :mod:`replica.interface.generated_model`, plus ``_log_ndtr``). No sympy.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional

import numpy as np

from ..errors import ParameterError
from ..interface.generated_model import _bvn, _erfc, _exp, _ndtr, _where, vectorised  # noqa: F401  (kernel helpers)


def _log_ndtr(u):
    """``log Phi(u)`` on arrays (scipy.special.log_ndtr: accurate far in the lower tail)."""
    from scipy.special import log_ndtr

    return log_ndtr(u)


Fn = Optional[Callable[..., Any]]


@dataclass
class BayesModel:
    """A generated Bayes-optimal module, read (field names are the module's constants and functions)."""

    MODEL: str
    K: int
    R: int
    PARAMETERS: tuple
    DEFAULTS: tuple
    DOMAINS: dict
    CONSTRAINTS: tuple
    PRIOR: str
    PRIOR_NAME: str
    N_TERMS: int
    SUPPORT: Optional[tuple]
    N_KINKS: int
    LABEL_VALUES: Optional[tuple]
    N_SWITCHES: int
    NOISE_PARAMETERS: tuple
    prior_terms: Fn = None
    prior_teacher: Fn = None
    prior_moments: Fn = None
    prior_log_density: Fn = None
    prior_kinks: Fn = None
    output_law: Fn = None
    output_laws: Fn = None
    output_switches: Fn = None
    label_law: Fn = None
    test_loss: Fn = None
    path: Optional[Path] = None

    @property
    def discrete(self) -> bool:
        """Whether the label takes finitely many values."""
        return self.LABEL_VALUES is not None

    @property
    def n_entries(self) -> int:
        """Independent entries of a symmetric ``K x K`` matrix (``q``, ``qhat``, ``V``)."""
        return self.K * (self.K + 1) // 2

    @classmethod
    def from_module(cls, module: ModuleType) -> "BayesModel":
        """Read ``module`` (one-line :class:`ParameterError` naming a missing piece)."""
        ns = vars(module)
        where = getattr(module, "__file__", "?")
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name.isupper():
                if f.name not in ns:
                    raise ParameterError("model", f"Bayes-optimal module {where} has no {f.name}; delete it to "
                                                  "regenerate")
                values[f.name] = ns[f.name]
        table = ns.get("FUNCTIONS", {})
        for name, spec in table.items():
            if len(spec) == 2:
                continue
            values[name] = vectorised(name, ns[spec[0]], spec[1], spec[2])
        required = ["output_law", "test_loss"] + (["prior_terms", "prior_teacher", "prior_moments"]
                                                  if values["PRIOR"] == "mixture" else ["prior_log_density"])
        for r in required:
            if r not in values:
                raise ParameterError("model", f"Bayes-optimal module {where} has no function {r}")
        return cls(**values, path=Path(where) if where != "?" else None)

    # ------------------------------------------------------------------ parameters
    def parameter_vector(self, overrides: dict[str, float] | None = None) -> np.ndarray:
        """The parameters in ``PARAMETERS`` order: the defaults, with ``overrides`` by name, checked against
        the domains and constraints (one-line :class:`ParameterError`), and the noise of a continuous label
        positive (at 0 it has no density)."""
        overrides = dict(overrides or {})
        unknown = set(overrides) - set(self.PARAMETERS)
        if unknown:
            name = sorted(unknown)[0]
            raise ParameterError(name, f"unknown parameter of {self.MODEL}; known: {list(self.PARAMETERS)}")
        vals = dict(zip(self.PARAMETERS, self.DEFAULTS))
        vals.update({k: float(v) for k, v in overrides.items()})
        for name, v in vals.items():
            if not np.isfinite(v):
                raise ParameterError(name, f"must be a finite number, got {v}")
            low, high = self.DOMAINS.get(name, (None, None))
            if (low is not None and v < low) or (high is not None and v > high):
                raise ParameterError(name, f"{v:g} is outside its domain [{low}, {high}]")
        for name in self.NOISE_PARAMETERS:
            if vals[name] <= 0:
                raise ParameterError(name, f"the continuous label has no density at {name} = {vals[name]:g} "
                                           f"(Bayes-optimal inference needs P(y | h*)): use {name} > 0")
        return np.array([vals[n] for n in self.PARAMETERS], dtype=float)

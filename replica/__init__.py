"""replica: replica-symmetric saddle-point equations from sympy models.

Declare a :class:`Model`, derive it with :class:`Derivation`, export LaTeX with
:func:`replica.latex.write_latex`, generate a numeric module with
:func:`replica.codegen.write_module` (or load one by name, regenerated when stale, with
:func:`replica.registry.load_module`), solve it with :class:`replica.solver.Solver`, and follow
its branches with :mod:`replica.phase`. The layers: docs/explanation/architecture.md.

The symbolic names below are imported lazily, so that solving a generated module
(``replica.solver``) never imports sympy.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "SpectralAtom": "data", "TokenStatistics": "data",
    "Derivation": "derivation", "Equation": "derivation", "SaddlePoint": "derivation",
    "ConvergenceError": "errors", "DeclarationError": "errors", "InvalidStateError": "errors",
    "ParameterError": "errors", "ReplicaError": "errors",
    "Constraint": "constraints", "Domain": "model", "Model": "model", "row_stochastic": "constraints",
    "OrderParameters": "order_parameters", "TokenReduction": "order_parameters",
    "L2": "regularizers", "Regularizer": "regularizers", "SeparableRegularizer": "regularizers",
    "L1": "regularizers", "ElasticNet": "regularizers",
    "Observable": "observables", "TestObservable": "observables", "EntropicObservable": "observables",
    "StateObservable": "observables", "classification_error": "observables",
    "student_teacher_angle": "observables",
    "Channel": "channels", "Sign": "channels", "Probit": "channels", "LabelFlip": "channels",
    "Thresholds": "channels", "Argmax": "channels",
    "cholesky_lower": "symbolic", "fields": "symbolic", "matrix_parameter": "symbolic",
    "parameter": "symbolic", "softmax_rows": "symbolic", "symbol": "symbolic", "teacher_fields": "symbolic",
    "Solver": "solver", "FixedPoint": "solver", "linear_baseline": "solver",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'replica' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)

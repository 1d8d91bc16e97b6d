"""replica: replica-symmetric saddle-point equations from sympy models.

Declare a :class:`Model`, derive it with :class:`Derivation`, export LaTeX with
:func:`replica.symbolic.latex.write_latex`, generate a numeric module with
:func:`replica.codegen.write_module` (or load one by name, regenerated when stale, with
:func:`replica.registry.load_module`), solve it with :class:`replica.numeric.solver.Solver`, and follow
its branches with :mod:`replica.phase`. The layers: docs/explanation/architecture.md.

The symbolic names below are imported lazily, so that solving a generated module
(``replica.numeric.solver``) never imports sympy.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "SpectralAtom": "symbolic.data", "TokenStatistics": "symbolic.data", "Derivation": "symbolic.derivation",
    "Equation": "symbolic.derivation", "SaddlePoint": "symbolic.derivation", "ConvergenceError": "errors",
    "DeclarationError": "errors", "InvalidStateError": "errors", "ParameterError": "errors",
    "ReplicaError": "errors", "Constraint": "symbolic.constraints", "Domain": "symbolic.model",
    "Model": "symbolic.model", "row_stochastic": "symbolic.constraints",
    "OrderParameters": "symbolic.order_parameters", "TokenReduction": "symbolic.order_parameters",
    "L2": "symbolic.regularizers", "Regularizer": "symbolic.regularizers",
    "SeparableRegularizer": "symbolic.regularizers", "L1": "symbolic.regularizers",
    "ElasticNet": "symbolic.regularizers", "Observable": "symbolic.observables",
    "TestObservable": "symbolic.observables", "EntropicObservable": "symbolic.observables",
    "StateObservable": "symbolic.observables", "classification_error": "symbolic.observables",
    "student_teacher_angle": "symbolic.observables", "Channel": "symbolic.channels", "Sign": "symbolic.channels",
    "Probit": "symbolic.channels", "LabelFlip": "symbolic.channels", "Thresholds": "symbolic.channels",
    "Argmax": "symbolic.channels", "cholesky_lower": "symbolic.symbols", "fields": "symbolic.symbols",
    "matrix_parameter": "symbolic.symbols", "parameter": "symbolic.symbols", "softmax_rows": "symbolic.symbols",
    "symbol": "symbolic.symbols", "teacher_fields": "symbolic.symbols", "Solver": "numeric.solver",
    "FixedPoint": "numeric.solver", "linear_baseline": "numeric.solver",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'replica' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)

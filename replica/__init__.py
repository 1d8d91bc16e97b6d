"""replica: replica-symmetric saddle-point equations from sympy models.

Declare a :class:`Model`, derive it with :class:`Derivation`, export LaTeX with
:func:`replica.latex.write_latex`, generate a numeric module with
:func:`replica.codegen.generate_module`, and solve it with :class:`replica.solver.Solver`.
"""
from .data import SpectralAtom, TokenStatistics
from .derivation import Derivation, Equation, SaddlePoint
from .errors import (ConvergenceError, DeclarationError, InvalidStateError, ParameterError,
                     ReplicaError)
from .model import Constraint, Domain, Model, row_stochastic
from .order_parameters import OrderParameters, TokenReduction
from .regularizers import L2, Regularizer, SeparableRegularizer
from .symbolic import (cholesky_lower, fields, matrix_parameter, parameter, softmax_rows,
                       symbol, teacher_fields)

__version__ = "0.1.0"

__all__ = [
    "Model", "Domain", "Constraint", "row_stochastic", "Derivation", "Equation", "SaddlePoint", "TokenStatistics", "SpectralAtom",
    "OrderParameters", "TokenReduction", "L2", "Regularizer", "SeparableRegularizer",
    "fields", "teacher_fields", "parameter", "matrix_parameter", "softmax_rows", "symbol",
    "cholesky_lower", "ReplicaError", "DeclarationError", "ParameterError", "InvalidStateError",
    "ConvergenceError",
]

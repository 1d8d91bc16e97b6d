"""Exceptions raised by replica.

Every error names the offending parameter so that a command-line user sees a
one-line message that says what to change.
"""
from __future__ import annotations

from typing import Sequence


class ReplicaError(Exception):
    """Base class of all errors raised by the toolkit."""


class DeclarationError(ReplicaError, ValueError):
    """A model declaration is malformed (wrong shapes, non-symmetric covariance, ...)."""


class ParameterError(ReplicaError, ValueError):
    """A numeric parameter is out of its domain (negative alpha, lambda < 0, ...)."""

    def __init__(self, name: str, message: str):
        self.name = name
        super().__init__(f"{name}: {message}")


class InvalidStateError(ReplicaError, ArithmeticError):
    """An order-parameter state is outside the domain of the potentials.

    Raised instead of letting NaN propagate, e.g. when ``rho - theta^T q^{-1} theta``
    is not positive semi-definite or ``q`` / ``V`` are not positive definite.
    """

    def __init__(self, quantity: str, message: str, state: dict | None = None):
        self.quantity = quantity
        self.state = state
        super().__init__(f"{quantity}: {message}")


class ConvergenceError(ReplicaError, RuntimeError):
    """The fixed-point iteration did not converge.

    Carries the residual history so that the caller can see whether it stalled,
    oscillated or diverged. Never silently replaced by an unconverged state.
    """

    def __init__(self, message: str, residuals: Sequence[float], iterations: int,
                 last_state: dict | None = None):
        self.residuals = list(residuals)
        self.iterations = iterations
        self.last_state = last_state
        last = self.residuals[-1] if self.residuals else float("nan")
        super().__init__(f"{message} (iterations={iterations}, residual={last:.3e})")

"""A GLM on structured data at finite size: the declared model with inputs drawn from a spectrum.

:class:`SpectralProblem` is :class:`numerics.problem.Problem` (data, labels, loss, penalty and
observables from the sympy declaration; the exact GLM solvers of :mod:`numerics.glm`) with the
declaration's isotropic inputs replaced by the Gaussian covariate model of a well-specified
:class:`replica.numeric.spectrum.Spectrum`: ``x ~ N(0, diag(lambda))`` at ``d = N`` (the number of modes) and
the teacher ``Q* = theta``, the spectrum's weights, fixed for every seed (only the training and test
sets are redrawn). The measured ``q = wᵀΩw/N`` and ``theta = θᵀΩw/N`` are then those of
``replica solve MODEL --spectrum FILE.csv``.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from replica.errors import ParameterError
from replica.numeric.spectrum import Spectrum

from .problem import Instance, Problem


class SpectralProblem(Problem):
    """``Problem(model, module, parameters)`` on the inputs and teacher of ``spectrum`` (module docstring)."""

    def __init__(self, model, module, parameters: Mapping[str, float] | None, spectrum: Spectrum):
        super().__init__(model, module, parameters)
        if spectrum.teacher is None:
            raise ParameterError("spectrum", "the simulator draws a well-specified model (Omega = Psi = Phi): "
                                             "this spectrum's teacher sees other features")
        if self.L != 1 or self.r_t != 1 or self.label_syms or self.has_encodings:
            raise ParameterError("spectrum", f"{model.name}: a spectrum is the data law of a GLM (one token, one "
                                             "teacher field, no clusters or encodings)")
        self.spectrum = spectrum

    def _dimension(self, d: int) -> None:
        if d != self.spectrum.N:
            raise ParameterError("d", f"a spectrum of {self.spectrum.N} modes is simulated at d = {self.spectrum.N}, "
                                      f"got d = {d}")

    def coordinates(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """``(gamma, P)``: the spectrum's eigenvalues on the ``d = N`` coordinates, no encodings."""
        self._dimension(d)
        return self.spectrum.eigenvalues[None, :].copy(), np.zeros((1, d))

    def instance(self, alpha: float, d: int, seed: int) -> Instance:
        """The training set of ``seed`` with the spectrum's teacher: ``h* = θ·x/√N``, labels from it."""
        self._dimension(d)
        inst = super().instance(alpha, d, seed)
        inst.Qstar = self.spectrum.teacher.reshape(d, 1).astype(float)
        HS = np.einsum("nld,dt->nlt", inst.X, inst.Qstar) / math.sqrt(d)
        inst.teacher = self._teacher_args(HS, inst.rng["train"])
        return inst

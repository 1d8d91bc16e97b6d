"""This package as a simulator plug-in of replica (:mod:`replica.simulators`): registered in
pyproject.toml under the entry-point group ``replica.simulators``. Imports nothing heavy.

The core registers what simulates any declared model (the finite-size check, the exact GLM sweep);
a study's plug-in registers its own sweep simulators beside it (the attention study's:
:mod:`numerics.applications.attention.plugin`)."""
from __future__ import annotations

from replica.simulators import Simulator

SIMULATOR = Simulator(
    name="numerics",
    summary="PyTorch gradient descent, GAMP and exact ERM of any declared model, from its declaration",
    check="numerics.check",
    sweep={"glm": "numerics.sweep:glm"},
)

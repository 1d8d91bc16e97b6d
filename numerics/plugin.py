"""This package as a simulator plug-in of replica (:mod:`replica.simulators`): registered in
pyproject.toml under the entry-point group ``replica.simulators``. Imports nothing heavy."""
from __future__ import annotations

from replica.simulators import Simulator

SIMULATOR = Simulator(
    name="numerics",
    summary="PyTorch gradient descent, GAMP and exact ERM of any declared model, from its declaration",
    check="numerics.check",
    sweep={"glm": "numerics.sweep:glm", "attention": "numerics.sweep:attention", "linear": "numerics.sweep:linear"},
)

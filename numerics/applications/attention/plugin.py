"""The attention study's simulator as a plug-in of replica (:mod:`replica.simulators`): its sweep
simulators, the paper's gradient-descent protocol and its linear baseline (registered in pyproject.toml
under the entry-point group ``replica.simulators``). Imports nothing heavy."""
from __future__ import annotations

from replica.simulators import Simulator

SIMULATOR = Simulator(
    name="attention",
    summary="the attention study's gradient-descent protocol and linear baseline at finite size",
    sweep={"attention": "numerics.applications.attention.sweep:attention",
           "linear": "numerics.applications.attention.sweep:linear"},
)

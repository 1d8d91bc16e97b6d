"""The seed paper's study (Cui et al. 2024): tied dot-product attention on a mixed semantic and
positional target, built on the generic core.

* :mod:`~replica.applications.attention.paper` -- its constants (``PAPER_A``, ``SECOND_A``, the
  branch names and their pair), imported by the declarations in ``derivations/`` and by the
  simulator;
* :mod:`~replica.applications.attention.phase` -- phase points, diagrams and thresholds along
  ``omega`` (the core's machinery with this study's pair, baseline and labels);
* :mod:`~replica.applications.attention.figures` -- the paper's Figs. 2, 3 and 9
  (``replica figures``);
* :mod:`~replica.applications.attention.cli` -- the command-line flags ``--omega`` and ``--A``.

A new architecture's study would be a sibling package with the same parts.
"""
from __future__ import annotations

from .paper import BRANCHES, LAM, OMEGA, PAPER_A, SECOND_A, SIGMA, TRANSITION, A_parameters

__all__ = ["A_parameters", "BRANCHES", "LAM", "OMEGA", "PAPER_A", "SECOND_A", "SIGMA", "TRANSITION"]

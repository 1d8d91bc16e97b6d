"""The seed paper's study (Cui et al. 2024): tied dot-product attention on a mixed semantic and
positional target, built on the generic core.

* :mod:`~replica.applications.attention.paper` -- its constants (``PAPER_A``, ``SECOND_A``, the
  branch names and their pair), imported by the declarations in ``derivations/`` and by the
  simulator;
* :mod:`~replica.applications.attention.phase` -- phase points, diagrams and thresholds along
  ``omega`` (the core's machinery with this study's pair, baseline and labels);
* :mod:`~replica.applications.attention.figures` -- the paper's Figs. 2, 3 and 9
  (``replica figures``);

:data:`APPLICATION` registers it with the command line (:mod:`replica.applications`): the words
``--help`` uses for its parameters and the figures ``replica figures`` draws. A new
architecture's study would be a sibling package with the same parts.
"""
from __future__ import annotations

from .. import Application
from .paper import BRANCHES, LAM, OMEGA, PAPER_A, SECOND_A, SIGMA, TRANSITION, A_parameters

__all__ = ["APPLICATION", "A_parameters", "BRANCHES", "LAM", "OMEGA", "PAPER_A", "SECOND_A", "SIGMA", "TRANSITION"]

APPLICATION = Application(
    name="attention",
    summary="tied dot-product attention on a mixed semantic and positional target (Cui et al. 2024)",
    parameter_help={"omega": "positionality of the target, in [0, 1]",
                    "A": "positional target matrix, rows summing to 1",
                    "sigma": "token standard deviation (Sigma = sigma^2 I)",
                    "lam": "l2 regularization strength lambda >= 0"},
    figures="replica.applications.attention.figures:figures_command",
    figures_help="the attention study: Fig. 2 (q, m, theta; eps_g with eps_lin, alpha_c, alpha_l), Fig. 3 "
                 "(training-loss difference of the branches; phase diagram alpha_c(omega), alpha_l(omega)) and "
                 "Fig. 9 (phase diagram for A = [[0.3, 0.7], [0.8, 0.2]])",
)

"""The attention study's simulator: the paper's protocols, registered with ``python -m numerics.simulate``.

The declared attention models (``derivations/attention_*.py``) are simulated from their declarations
like any model (:class:`numerics.problem.Problem`, ``replica check``). What the study adds is not in a
declaration: the paper's experiment -- the exact finite-``d`` risk ``Σ_μ ‖y − S(x+P)‖²/2d`` of a torch
student (:mod:`.students`: tied, untied, a linear baseline) trained by gradient descent from its
semantic, positional or random initialisation (:mod:`.simulate`, :mod:`.train`), with the paper's
mixed target (:mod:`.targets`) -- and the studies built on it: the finite-size study
(:mod:`.finite_size`), token clusters (:mod:`.clusters`), a trainable value matrix
(:mod:`.value_matrix`), the histogram task (:mod:`.histogram`), their figures (:mod:`.experiments`)
and GAMP against gradient descent (:mod:`.gamp_study`).
"""
from __future__ import annotations

from numerics.applications import Protocol

_HERE = __name__

PROTOCOLS = (
    Protocol("attention", "train the attention student by gradient descent (the paper's protocol)",
             f"{_HERE}.simulate:main", named=True),
    Protocol("linear", "the linear baseline f_B(x) = Bx on the same data", f"{_HERE}.simulate:main", named=True),
    Protocol("sweep", "attention and linear runs over alphas x inits into a resumable CSV",
             f"{_HERE}.simulate:main", named=True),
    Protocol("finite-size", "the attention model's finite-size study (runs, 1/d fits, tolerances)",
             f"{_HERE}.finite_size:main"),
    Protocol("clusters", "tied attention on token clusters at finite size against its theory",
             f"{_HERE}.clusters:main"),
    Protocol("histogram", "the histogram task: a one-layer transformer's positional and semantic minima",
             f"{_HERE}.histogram:main"),
    Protocol("experiments", "the figures of the histogram task and of a trainable value matrix",
             f"{_HERE}.experiments:main"),
    Protocol("gamp-study", "GAMP against its state evolution and gradient descent on the attention model",
             f"{_HERE}.gamp_study:main"),
)

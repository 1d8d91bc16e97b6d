"""The simulator: any declared model at finite size, checked against its replica theory.

The core simulates a model from its declaration alone and names no model:

* :mod:`numerics.problem` — the declared model at finite size: its data law, teacher or channel,
  loss, penalty and observables read from the declaration's factors, minimised exactly (convex
  GLMs: :mod:`numerics.glm_solvers`) or in torch, and measured; :mod:`numerics.structured` — the
  same for a spectral data law; :mod:`numerics.check` — ``replica check``: that simulation
  extrapolated in ``1/d`` and held against the theory; :mod:`numerics.check_models` — the table of
  every declared model in docs/how-to/check.md;
* :mod:`numerics.glm` — the exact solvers' command line for a declared convex GLM;
  :mod:`numerics.gamp` — GAMP for a declared model or a declaration file (numpy, or torch with
  ``--backend torch``);
* :mod:`numerics.tokens` — tokens ``x_ℓ ~ N(0, Σ_ℓ)``, positional encodings, teachers, seed streams;
  :mod:`numerics.penalties` — the theory's penalties on torch weights (smooth part and prox);
  :mod:`numerics.metrics` — order parameters in the theory's conventions and seed statistics;
* :mod:`numerics.simulate` — ``python -m numerics.simulate PROTOCOL ...``: the protocols that
  applications register (:mod:`numerics.applications`; the attention study's
  :mod:`numerics.applications.attention`: the paper's gradient-descent protocol, the linear
  baseline, sweeps, the finite-size study, token clusters, a trainable value matrix, the histogram
  task, GAMP against gradient descent), and what every protocol shares;
* :mod:`numerics.sweep` — the simulators as task kinds of ``replica sweep``;
* :mod:`numerics.deps` — a missing optional package (torch, scikit-learn) is one line saying what
  to install.

Importing this package does not import torch.
"""

"""PyTorch simulator of the attention model, to check the replica theory (docs/explanation/theory.md §1, §9).

Modules:

* :mod:`numerics.data`     — sentences ``x_ℓ ~ N(0, Σ_ℓ)``, positional encodings ``P``,
  teacher ``Q*`` and targets ``T(h*)`` (the paper's mixed target and others);
* :mod:`numerics.models`   — students: tied / untied dot-product attention, linear baseline;
* :mod:`numerics.train`    — the risk ``R = Σ_μ (1/2d)‖y − f‖² + Σ r(·)``, full-batch
  (proximal) GD / Adam with convergence monitoring, exact linear baseline, test error;
* :mod:`numerics.metrics`  — order parameters ``q, m, θ, ρ`` in the theory's conventions;
* :mod:`numerics.simulate` — ``run_attention``, ``run_linear``, ``sweep`` and the CLI
  ``python -m numerics.simulate {attention,linear,sweep} ...``;
* :mod:`numerics.value_matrix` — tied attention with a trainable low-rank value matrix
  (paper App. E.3) and its GD transition;
* :mod:`numerics.histogram` — the paper's histogram task (App. A): a one-layer transformer,
  its positional and semantic minima, ``python -m numerics.histogram``;
* :mod:`numerics.experiments` — ``python -m numerics.experiments --out docs/figures``: the
  figures of those two experiments;
* :mod:`numerics.problem` — any declared model at finite size, built from its own declaration
  (data law, teacher or channel, loss, penalty, observables), minimised exactly (convex GLMs) or in
  torch, and measured; :mod:`numerics.check` — ``replica check``: that simulation extrapolated in
  ``1/d`` and held against the theory; :mod:`numerics.check_models` — the table of every declared
  model in docs/how-to/check.md;
* :mod:`numerics.glm` — the GLM canon's exact solvers and CLI (its models are their declarations
  at finite size); :mod:`numerics.gamp` — GAMP for a declared model or a declaration file (numpy,
  or torch with ``--backend torch``);
* :mod:`numerics.deps` — a missing optional package (torch, scikit-learn) is one line saying what
  to install.

Importing this package does not import torch; the submodules (except ``simulate``'s
argument checking) need it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_attention", "run_linear", "sweep"]


def __getattr__(name: str) -> Any:
    # lazy: keep `import numerics` (and the CLI's argument checks) free of torch
    if name in __all__:
        from . import simulate

        return getattr(simulate, name)
    raise AttributeError(f"module 'numerics' has no attribute {name!r}")

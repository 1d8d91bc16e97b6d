# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # How to add your architecture
#
# This notebook walks through the whole path for a new model, using **linear attention**
# `S(h) = h hᵀ` learning a linear-attention teacher `T(h*) = h* h*ᵀ` as the example:
#
# 1. declare the model (a short file in `derivations/`),
# 2. derive the replica-symmetric saddle point with sympy,
# 3. export it as LaTeX,
# 4. generate the numeric solver module,
# 5. solve the saddle point on each branch,
# 6. simulate the same empirical risk minimisation with the PyTorch simulator (`numerics/`)
#    at small `d`,
# 7. compare.
#
# Run it top to bottom (`python notebooks/03_your_architecture.py`, or open it with jupytext);
# it takes about half a minute on one CPU core. With `REPLICA_NOTEBOOK_QUICK=1` in the
# environment the simulation is smaller (one `α`, `d = 100, 200` instead of 200, 800); the
# tests run it this way (`tests/test_notebooks.py`). Nothing here is specific to
# attention: any per-sample loss of the low-dimensional fields `h = Wᵀ(x + p)/√d` and
# `h* = Q*ᵀx/√d` works.

# %%
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path.cwd() if (Path.cwd() / "replica").is_dir() else Path.cwd().parent
sys.path.insert(0, str(ROOT))
QUICK = os.environ.get("REPLICA_NOTEBOOK_QUICK", "") not in ("", "0")

# %% [markdown]
# ## 1. Declare
#
# A declaration says *what* is learnt, never how the equations look. For an attention-type
# model give the student fields `h` (`L × r` symbols), the teacher fields `h*` (`L × r_t`), the
# score map `S(h)` and the target `T(h*)` (both `L × L`; the loss
# `ℓ = ½ Σ_{ℓκ} ρ̄_κ (T − S)²_{ℓκ}` is built from them), the token statistics (covariances and
# positional encodings), the regularizer, the parameters with defaults and domains, and
# optionally token symmetries (`reduction`) and branches (families of order parameters pinned
# to zero). A GLM instead gives `loss=` directly (see `derivations/ridge.py`).
#
# The file for this tutorial is `derivations/linear_attention.py`:

# %%
print((ROOT / "derivations" / "linear_attention.py").read_text())

# %%
from replica.registry import load_model

model = load_model("linear_attention")  # derivations/linear_attention.py (the registry notes the file)
print(model.description)
print("loss:", model.loss)

# %% [markdown]
# What to decide for your own model:
#
# * **Branches.** If `S` and `T` are even in `h` (resp. `h*`), then `m = 0` (resp. `θ = 0`) is an
#   invariant subspace of the equations and a branch can pin it (the toolkit derives the sign-flip
#   symmetries that make it so: `Derivation(model).symmetries`). Here `h hᵀ` is even, so `semantic`
#   pins `m = 0`. Declaring `transition=(high, low)` (two branches whose free entropies cross) and
#   `baseline="linear"` gives `replica phase` its pair and its baseline; `observables=[...]` adds
#   what the model reports besides the test loss (`replica.symbolic.observables`).
# * **Reductions.** With `p_2 = −p_1` and equal covariances the two tokens share `q, V, θ` and
#   `m_2 = −m_1` (docs/explanation/theory.md §6); `TokenReduction` states it once, the conjugates follow.
# * **Dimension of the average.** The energetic average is over `L r + L r_t` Gaussians
#   (here 4); it sets the quadrature cost (see the last section).

# %% [markdown]
# ## 2. Derive

# %%
from replica import Derivation

t0 = time.perf_counter()
derivation = Derivation(model)
saddle = derivation.saddle_point
print(f"saddle point derived in {time.perf_counter() - t0:.1f} s")
print("free order parameters:", derivation.order_symbols)
for eq in saddle.entropic:
    print(f"  {eq.lhs} = {eq.rhs}")
for eq in saddle.energetic:
    print(f"  {eq.lhs} = {eq.rhs}")
print("sign conventions:", derivation.sign_flips)
print("fold symmetries (pinned families, flipped Gaussians):", derivation.symmetries.folds)

# %% [markdown]
# ## 3. LaTeX
#
# `python -m replica derive linear_attention --write` writes `derivations/linear_attention.tex`
# and `.md` (committed next to the declaration). The same from Python:

# %%
import tempfile

from replica.symbolic.latex import markdown_document, write_latex

tmp = Path(tempfile.mkdtemp())
print(write_latex(derivation, tmp / "linear_attention.tex", tmp / "linear_attention.md"))
md = markdown_document(derivation)
start = md.index("## Saddle-point equations")
print(md[start:start + 900])

# %% [markdown]
# ## 4. Generate the solver module
#
# Every command generates the module it needs into the cache at first use;
# `python -m replica generate linear_attention --out linear_attention.py` writes it where you want to
# read it: the model's mathematics only, numpy functions, plus per-node leaves that `replica.numeric.compiled`
# turns into a numba unit with the library's generic kernels at first use (cached on disk). Here we
# generate it into a temporary folder and check it is the one `load_module` uses (the freshness stamp in its
# header records the declaration's and the generator's hashes: they name the module in the cache).

# %%
from replica.codegen import generate_module, write_module
from replica.registry import _import_path

t0 = time.perf_counter()
path = write_module(derivation, tmp / "linear_attention.py")
print(f"generated {path} in {time.perf_counter() - t0:.1f} s")
from replica.registry import load_module

print("same as the cached module:", load_module("linear_attention").path.read_text() == path.read_text())
module = _import_path(path)
print(module.ORDER_PARAMETERS, module.GAUSSIANS)

# %% [markdown]
# ## 5. Solve
#
# `python -m replica solve linear_attention --alpha 2 --branch semantic` does the same from the
# command line. The generic start of the solver works for this model; for harder ones pass a
# starting point `x0` close to the branch you want (a dict of order parameters).

# %%
from replica.numeric.quadrature import gauss_hermite
from replica.numeric.solver import Solver

rule = gauss_hermite(4, 14)   # 4 Gaussians: a tensor Gauss-Hermite rule is accurate and cheap
alphas = [1.0, 2.0, 3.0]
theory = {}
for branch in ("semantic", "agnostic"):
    x0 = {"q": 0.2, "V": 1.0, "m": 0.0, "theta": 0.15}
    for alpha in alphas:
        fp = Solver(module, branch=branch, rule=rule).solve(alpha, x0)
        x0 = fp.order
        theory[branch, alpha] = fp
        print(f"{branch:9s} alpha={alpha:.1f}  q={fp.order['q']:.4f}  theta={fp.order['theta']:.4f}  "
              f"V={fp.order['V']:.3f}  eps_g={fp.eps_g:.5f}  e_t={fp.train_loss:.5f}  ({fp.iterations} it)")

# %% [markdown]
# Without numba (`REPLICA_BACKEND=numpy`) the same cell gives the same fixed points to round-off
# (`tests/test_fast_paths.py`). The agnostic branch has one solution here: at `α = 2`, nine starts
# with `q` from 0.02 to 1 and `V` from 0.3 to 5 all reach it on either backend (one, `q = 0.02,
# V = 0.3`, stops with a message instead), and at `α = 1` three distant starts do.
#
# The global minimiser is the branch with the larger free entropy `Φ` (smaller `e_t = −Φ`).

# %%
for alpha in alphas:
    best = max(("semantic", "agnostic"), key=lambda b: theory[b, alpha].phi)
    print(f"alpha={alpha:.1f}: global minimum on the {best} branch")

# %% [markdown]
# ## 6. Simulate
#
# The simulator trains any student whose output is `S(h)(x + P)` (an `AttentionStudent`):
# linear attention is three lines on top of `TiedAttention`. Data, teacher, training (full-batch
# gradient descent on the same risk, docs/explanation/theory.md §9), test error and order parameters all come from
# `numerics`. The teacher columns are normalised to norm `√d` so that `ρ = σ²` exactly, as in the
# theory (otherwise `ρ` fluctuates by `O(d^{-1/2})` from seed to seed).

# %%
import torch

from numerics.data import DataModel, iter_batches, make_teacher, sample_dataset, seed_streams
from numerics.metrics import mean_se, order_parameters
from numerics.models import TiedAttention
from numerics.train import L2, TrainConfig, test_error, train


class LinearAttention(TiedAttention):
    """``S(h) = h h^T`` with ``h = (x + P) Q / sqrt(d)``."""

    def attention_encoded(self, xp):
        h = xp @ self.Q / self.d ** 0.5
        return h @ h.transpose(-1, -2)


def linear_target(hstar):
    return hstar @ hstar.transpose(-1, -2)


def simulate(alpha, d, seed, lam=0.01):
    streams = seed_streams(seed)
    data = DataModel.create(d=d, L=2, sigma=0.5)
    teacher = make_teacher(d, 1, linear_target, streams.teacher, normalize=True)
    X, Y = sample_dataset(data, teacher, int(round(alpha * d)), streams.train)
    student = LinearAttention(teacher.Qstar.copy(), data.P)      # informed start Q = Q*
    # full-batch GD on the paper's risk; lr 0.5 reaches the same minimum as the paper's 0.15 sooner
    # (the quartic loss is stiffer than softmax attention: lr 1.5 diverges here at alpha >= 2)
    res = train(student, X, Y, {"Q": L2(lam)}, TrainConfig(lr=0.5, steps=20_000, stop_grad=1e-6))
    eps, _ = test_error(student, iter_batches(data, teacher, 20000, streams.test))
    ops = order_parameters(student.Q.detach().numpy(), teacher.Qstar, data.variances, data.P)
    return {"q": ops["q"], "theta": ops["theta"], "m": ops["m"], "eps_g": eps, "e_t": res.train_loss}


torch.set_num_threads(1)
# the quick run keeps two sizes (the comparison below is about the trend with d) but small ones
sim_alphas, ds, seeds = ([2.0], [100, 200], [0, 1]) if QUICK else ([1.0, 2.0], [200, 800], [0, 1])
sim = {}
for alpha in sim_alphas:
    for d in ds:
        t0 = time.perf_counter()
        runs = [simulate(alpha, d, s) for s in seeds]
        sim[alpha, d] = {k: mean_se([r[k] for r in runs]) for k in runs[0]}
        print(f"alpha={alpha:.1f} d={d}: {len(seeds)} seeds in {time.perf_counter() - t0:.0f} s")

# %% [markdown]
# ## 7. Compare
#
# One finite-size effect is known exactly. The simulator's output `S(h)(x + P)` carries the
# encodings, so `y − f = (T − S)x − S P` and every sample's loss has an extra `‖S P‖²/2d`, an
# `O(1/d)` term that the `d → ∞` theory drops. Here `p_2 = −p_1`, so `‖S P‖² = Σ_ℓ (S_ℓ1 − S_ℓ2)²`.
# It is added once to `ε_g` and `α` times to `e_t = R/d` (a sum over `n = αd` samples, over `d`).
# The rest of the gap shrinks as `d` grows (compare the two sizes); ± is the standard error over
# seeds.

# %%
from replica.numeric.quadrature import gauss_hermite as _gh

xi = _gh(2, 20)


def encoding_term(fp, d):
    """(1/2d) E[sum_l (S_l1 - S_l2)^2] with S = h h^T, h_1 = m + sqrt(q) xi_1, h_2 = -m + sqrt(q) xi_2."""
    q, m = fp.order["q"], fp.order["m"]
    h1, h2 = m + np.sqrt(q) * xi.nodes[0], -m + np.sqrt(q) * xi.nodes[1]
    val = (h1 * h1 - h1 * h2) ** 2 + (h2 * h1 - h2 * h2) ** 2
    return float(val @ xi.weights) / (2 * d)


print(f"{'alpha':>5} {'d':>5} {'':>8} {'q':>16} {'theta':>16} {'eps_g':>18} {'e_t':>18}")
for alpha in sim_alphas:
    fp = theory["semantic", alpha]
    for d in ds:
        c = encoding_term(fp, d)
        s = sim[alpha, d]
        print(f"{alpha:5.1f} {d:5d} {'theory':>8} {fp.order['q']:16.4f} {fp.order['theta']:16.4f} "
              f"{fp.eps_g + c:18.5f} {fp.train_loss + alpha * c:18.5f}")
        print(f"{'':5} {'':5} {'sim':>8} {s['q'][0]:9.4f}±{s['q'][1]:.4f} {s['theta'][0]:9.4f}±{s['theta'][1]:.4f} "
              f"{s['eps_g'][0]:11.5f}±{s['eps_g'][1]:.5f} {s['e_t'][0]:11.5f}±{s['e_t'][1]:.5f}")

# %% [markdown]
# ## Checklist for your own architecture
#
# * **Tractability.** Time `Derivation(model).saddle_point` and `generate_module`; softmax
#   attention with `L r + L r_t = 6` Gaussians takes seconds to derive and about a minute to
#   generate (`docs/how-to/extensions.md`).
# * **Quadrature.** Up to 6 Gaussians the default rule is a tensor Gauss–Hermite rule; in 6
#   dimensions it beats Smolyak grids on the kinked integrands of the proximal step (study in
#   `docs/how-to/extensions.md`). Check a fixed point against a finer rule before trusting it
#   (`python -m benchmarks.quadrature_6d MODEL ... --solve`).
# * **Starting points.** The solver's generic start suits scalar order parameters; with
#   matrix order parameters start near the branch you want (e.g. the tied solution embedded).
# * **Finite size.** Compare with the simulator at two sizes at least; look for exact `O(1/d)`
#   terms like the encoding term above before blaming the theory.
# * **Tests.** Add an exact identity of your model (a symmetry, a limit where it reduces to a
#   known model) and a theory-vs-simulation check whose tolerance comes from the measured
#   spread over seeds (see `tests/test_attention_variants.py`).

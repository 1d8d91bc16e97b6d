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
# # Parameter sweeps: a grid in a spec file, a labelled dataset out
#
# A theorist's next question after one phase diagram is a grid. `replica sweep SPEC` takes a
# small TOML file (model, fixed parameters, grid axes, what to compute per point), computes every
# grid point once on local processes or a Dask cluster, caches each finished point (a rerun or an
# interrupted sweep computes only what is missing) and writes an xarray dataset to NetCDF, Zarr
# or CSV. This notebook runs two small sweeps of the paper's attention model end to end:
#
# 1. the test error on the semantic branch and the linear baseline over `(α, ω)`, and the line
#    `ε_g − ε_lin = 0` where attention starts to beat the baseline (the paper's `α_l(ω)`);
# 2. the thresholds `α_c` and `α_l` over `(ω, σ)` on a Dask `LocalCluster`, as a heat map.
#
# Run it top to bottom (`python notebooks/04_sweeps.py`, or open it with jupytext). Needs the
# `sweep` extra (`pip install -e ".[sweep]"`; `dev` includes it). With
# `REPLICA_NOTEBOOK_QUICK=1` the grids are smaller and the quadrature coarser; the tests run it
# this way (`tests/test_notebooks.py`). `REPLICA_NOTEBOOK_OUT=DIR` says where figures and
# datasets go (default `notebooks/_out/04`, not tracked by git). The spec format, the kinds and
# the executors are described in `docs/how-to/sweeps.md`.

# %%
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path.cwd() if (Path.cwd() / "replica").is_dir() else Path.cwd().parent
sys.path.insert(0, str(ROOT))
QUICK = os.environ.get("REPLICA_NOTEBOOK_QUICK", "") not in ("", "0")
OUT = Path(os.environ.get("REPLICA_NOTEBOOK_OUT") or ROOT / "notebooks" / "_out" / "04")
OUT.mkdir(parents=True, exist_ok=True)
# a private point cache for this notebook, so that the "rerun" below is honest about what it reads
CACHE = Path(tempfile.mkdtemp(prefix="replica-04-cache-"))

import matplotlib

if "MPLBACKEND" not in os.environ and not hasattr(sys, "ps1"):
    matplotlib.use("Agg")
import matplotlib.pyplot as plt

# %% [markdown]
# ## 1. A spec
#
# The grid axes are model parameters (and `α` for kinds that take it); everything else is fixed
# in `[parameters]` or left at the model's defaults. `kind = "solve"` solves the saddle point at
# each `(α, ω)` on the listed branches; `baseline = true` adds the model's baseline test error
# `eps_lin`. Neighbours along `α` warm-start each other in chains of `chunk` points; the chains
# follow from the spec alone, so every executor gives the same numbers, bit for bit.

# %%
alphas = np.round(np.linspace(0.5, 2.5, 4 if QUICK else 11), 3)
omegas = [0.3, 0.4] if QUICK else [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4]
quadrature = "gh:8" if QUICK else "auto"
spec_text = f"""\
model = "attention"
description = "semantic test error and the linear baseline over (alpha, omega)"

[grid]
alpha = {list(map(float, alphas))}
omega = {omegas}

[compute]
kind = "solve"
branches = ["semantic"]
baseline = true
quadrature = "{quadrature}"

[warm_start]
axis = "alpha"
chunk = 6
"""
spec = OUT / "error_curves.toml"
spec.write_text(spec_text)
print(spec_text)

# %% [markdown]
# ## 2. Run it
#
# The command users run: two local worker processes here (`--scheduler local:N` starts a Dask
# `LocalCluster`, `--scheduler tcp://host:8786` uses a running cluster). `--dry-run` prints the
# plan first.

# %%
def replica(*args: str) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "replica", *args], cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"replica {' '.join(args)} exited {res.returncode}: {res.stderr.strip()[-2000:]}")
    return res


print(replica("sweep", str(spec), "--dry-run", "--jobs", "2", "--out", str(OUT / "error_curves.nc")).stdout)
t0 = time.perf_counter()
res = replica("sweep", str(spec), "--jobs", "2", "--quiet", "--out", str(OUT / "error_curves.nc"),
              "--csv", str(OUT / "error_curves.csv"), "--cache", str(CACHE))
print(res.stderr.strip(), f"({time.perf_counter() - t0:.0f} s)")

# %% [markdown]
# Every finished point is in the cache: the same command again computes nothing (an interrupted
# sweep resumes the same way).

# %%
res = replica("sweep", str(spec), "--jobs", "2", "--quiet", "--out", str(OUT / "error_curves.nc"),
              "--cache", str(CACHE))
print(res.stderr.strip())
assert "0 computed" in res.stderr

# %% [markdown]
# ## 3. The dataset
#
# `xr.open_dataset` is all a plot needs. Dimensions are the grid axes (and `branch` for
# `solve`); variables the order parameters, observables with their error estimates, convergence
# flags and notes; the attributes say which model (its hashes), which spec and which version
# produced it.

# %%
import xarray as xr

ds = xr.open_dataset(OUT / "error_curves.nc").load()  # or replica.sweep.open_sweep(path)
print(ds)
print("model:", ds.attrs["model"], "source hash:", ds.attrs["model_source_hash"],
      "replica", ds.attrs["replica_version"])
assert bool(ds.converged.all()), "a point did not converge: see ds.notes"

# %% [markdown]
# ## 4. Plots of 2-D slices
#
# `heatmap` draws one variable over two axes (the others fixed by keyword), `zero_contour` the
# line where a difference vanishes: here `ε_g − ε_lin = 0`, where the semantic minimum's test
# error crosses the linear baseline.

# %%
from replica.sweep.plots import heatmap, zero_contour

fig, ax = plt.subplots(figsize=(6.4, 4.4))
heatmap(ds.eps_g - ds.eps_lin, "alpha", "omega", ax=ax, cmap="RdBu_r", label="eps_g - eps_lin (semantic)",
        branch="semantic")
zero_contour(ds.eps_g - ds.eps_lin, "alpha", "omega", ax=ax, color="k", label="eps_g = eps_lin", branch="semantic")
ax.set_title("semantic test error minus the linear baseline")
fig.savefig(OUT / "eps_minus_baseline.png", dpi=120, bbox_inches="tight")
diff = (ds.eps_g - ds.eps_lin).sel(branch="semantic")
for w in ds.omega.values:
    row = diff.sel(omega=w).values
    cross = [f"({a:g}, {b:g})" for a, b, x, y in zip(ds.alpha.values[:-1], ds.alpha.values[1:], row[:-1], row[1:])
             if np.sign(x) != np.sign(y)]
    print(f"omega = {w:g}: eps_g - eps_lin changes sign for alpha in {', '.join(cross) or 'none of the grid'}")

# %% [markdown]
# ## 5. Thresholds over (ω, σ) on a Dask cluster
#
# `kind = "thresholds"` finds `α_c` (where the free entropies of the semantic and positional
# minima cross) and `α_l` (where the global minimum's test error crosses the baseline) by the
# fast path, each point seeded by its neighbours along `ω`. Here the work runs on a Dask
# `LocalCluster` of two processes on 127.0.0.1, started and closed by the sweep. From Python it is
# `run_sweep(load_spec(path), scheduler="local:2")`; Dask starts its workers by *spawning* fresh
# interpreters, which re-import the calling script, so in a script (not in Jupyter) put that call
# under `if __name__ == "__main__":` -- or run the command, as here.

# %%
grid_omega = [0.3, 0.4] if QUICK else [0.25, 0.3, 0.35, 0.4]
grid_sigma = [0.45, 0.55] if QUICK else [0.4, 0.5, 0.6]
thresholds_spec = OUT / "thresholds.toml"
thresholds_spec.write_text(f"""\
model = "attention"
description = "alpha_c and alpha_l over (omega, sigma)"
[grid]
omega = {grid_omega}
sigma = {grid_sigma}
[compute]
kind = "thresholds"
alpha_max = 3.0
quadrature = "{'gh:8' if QUICK else 'auto'}"
xtol = {1e-3 if QUICK else 1e-4}
""")
t0 = time.perf_counter()
res = replica("sweep", str(thresholds_spec), "--scheduler", "local:2", "--quiet", "--cache", str(CACHE),
              "--out", str(OUT / "thresholds.nc"))
print(res.stderr.strip(), f"({time.perf_counter() - t0:.0f} s)")
th = xr.open_dataset(OUT / "thresholds.nc").load()
print(th[["alpha_c", "alpha_l", "alpha_c_status", "alpha_l_status"]].to_dataframe())

fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
heatmap(th.alpha_c, "omega", "sigma", ax=axes[0], label="alpha_c")
heatmap(th.alpha_l, "omega", "sigma", ax=axes[1], label="alpha_l")
axes[0].set_title("alpha_c over (omega, sigma)")
axes[1].set_title("alpha_l over (omega, sigma)")
fig.savefig(OUT / "thresholds_omega_sigma.png", dpi=120, bbox_inches="tight")
print(f"alpha_c over (omega, sigma): {np.count_nonzero(np.isfinite(th.alpha_c.values))} of "
      f"{th.alpha_c.size} points have a transition below alpha = 3")

# %% [markdown]
# Where a point has no transition in `[α_min, α_max]`, `α_c` is NaN and `alpha_c_status` /
# `alpha_c_reason` say why; a failed point is NaN with its message in `error`. Bigger grids run
# the same way on a real cluster: `replica sweep thresholds.toml --scheduler tcp://HOST:8786`.

# %%
import shutil

shutil.rmtree(CACHE, ignore_errors=True)  # this notebook's private cache (your own runs keep theirs)

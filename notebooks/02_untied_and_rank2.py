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
# # Beyond the paper's model: untied key/query, rank 2, three tokens
#
# The paper's appendices ask what changes when the attention is less constrained. Each variant
# is a short declaration in `derivations/` that goes through the same path as the tied model
# (`Derivation` → LaTeX → generated module → `Solver`), and the PyTorch simulator trains the
# same students (`docs/how-to/extensions.md`):
#
# * **untied key/query** (`attention_untied.py`, paper App. C.10 / E.3): `S = softmax(h^Q h^Kᵀ)`
#   with separate `Q` and `K`, penalties `λ_Q, λ_K`;
# * **rank-2 student, rank-1 teacher** (`attention_rank2.py`, App. E.3, Fig. 11): `Q ∈ R^{d×2}`;
# * **three tokens** (`attention_L3.py`): `L = 3` with Hadamard positional encodings and a
#   `3 × 3` positional target `A`.
#
# This notebook derives the three, solves a point of each, compares the positional-to-semantic
# transition of the untied model with the tied one, and checks one point against gradient
# descent. With two fields per token (untied, rank 2) or three tokens, the energetic average is
# over 6 Gaussians instead of 4: the solver's default there is a tensor Gauss–Hermite rule of
# order 6 (46 656 nodes; `docs/explanation/quadrature.md`), and the generic start of the solver is far from
# the fixed points, so each solve starts next to a known one (measured in `tests/test_attention_variants.py`).
#
# **Running it.** From the repository root, `python notebooks/02_untied_and_rank2.py` (or open it
# with jupytext / Jupyter). Environment variables:
#
# * `REPLICA_NOTEBOOK_QUICK=1`: reduced resolution (Gauss–Hermite of order 4 in 6 dimensions,
#   a shorter `α` range, a smaller simulation); under a minute on one core. The tests run it this
#   way (`tests/test_notebooks.py`). Without it: about two minutes on one core.
# * `REPLICA_NOTEBOOK_OUT=DIR`: where figures go (default `notebooks/_out/02`, not tracked by git).

# %%
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path.cwd() if (Path.cwd() / "replica").is_dir() else Path.cwd().parent
sys.path.insert(0, str(ROOT))

QUICK = os.environ.get("REPLICA_NOTEBOOK_QUICK", "") not in ("", "0")
OUT = Path(os.environ.get("REPLICA_NOTEBOOK_OUT") or ROOT / "notebooks" / "_out" / "02")
OUT.mkdir(parents=True, exist_ok=True)
print(f"{'quick' if QUICK else 'full'} resolution; output in {OUT}")
T_START = time.perf_counter()


def show(png):
    """Display a saved figure inline under Jupyter; a script run only says where it is
    (figures are saved with matplotlib's Agg backend, so a headless run needs no display)."""
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(Image(filename=str(png)))
    else:
        print(f"figure: {png}")


def show_math(lines):
    """LaTeX lines as rendered maths under Jupyter, as text otherwise."""
    try:
        from IPython import get_ipython
        from IPython.display import Math, display
    except ImportError:
        get_ipython = None
    for line in lines:
        if get_ipython is not None and get_ipython() is not None:
            display(Math(line))
        else:
            print(line)


# %% [markdown]
# ## 1. Three declarations, three saddle points
#
# The untied model's fields are `h = (h^Q, h^K) ∈ R^{2×2}`, so `q, V` become `2 × 2` matrices
# (`q_12` is the query–key overlap) and `m, θ` 2-vectors; the rank-2 model has the same shapes
# (two columns of `Q`). With `L = 3` the order parameters stay scalars except `m_1, m_2, m_3`:
# the Hadamard encodings are not related by a sign, so only `q, V, θ` are shared by the tokens.

# %%
import importlib

from replica import Derivation

derivations = {}
print(f"{'model':18s} {'h':>6} {'order params':>13} {'equations':>10} {'Gaussians':>10} {'derive':>8}")
for name in ("attention_tied", "attention_untied", "attention_rank2", "attention_L3"):
    declared = importlib.import_module(f"derivations.{name}").model
    t0 = time.perf_counter()
    d = Derivation(declared)
    sp_eqs = d.saddle_point
    derivations[name] = d
    n_eq = len(sp_eqs.entropic) + len(sp_eqs.energetic)
    n_gauss = len(d.energetic_potential.gaussians)
    print(f"{name:18s} {declared.L}x{len(declared.h) // declared.L:<4d} {len(d.order_symbols):13d} {n_eq:10d} "
          f"{n_gauss:10d} {time.perf_counter() - t0:7.1f}s")
print("untied order parameters:", derivations["attention_untied"].order_symbols)
print("L = 3 order parameters: ", derivations["attention_L3"].order_symbols)

# %% [markdown]
# The untied model's entropic equations for `q` (the `2 × 2` generalisation of the tied
# `q = σ²(m̂² + σ²q̂ + σ⁴θ̂²)/(σ²V̂ + λ)²`: the penalties `λ_Q`, `λ_K` act on the two
# fields separately):

# %%
from replica.symbolic.latex import tex

untied_eqs = derivations["attention_untied"].saddle_point.entropic
show_math([f"{tex(eq.lhs)} = {tex(eq.rhs)}" for eq in untied_eqs if eq.lhs.name.startswith("q_")])

# %% [markdown]
# ## 2. A fixed point of each
#
# Each solve starts next to a fixed point measured at Gauss–Hermite order 8
# (`tests/test_attention_variants.py`); with the default order 6 (full run) or order 4 (quick run) the
# fixed point moves a little, within the quadrature error.

# %%
from replica.numeric.quadrature import gauss_hermite
from replica.registry import load_module
from replica.numeric.solver import Solver

RULE_6D = gauss_hermite(6, 4) if QUICK else None   # None: the solver's default (GH order 6 in 6-D)
TOL = 1e-7

STARTS = {
    ("attention_untied", "semantic", 2.0): dict(
        q_11=0.0767, q_12=0.0751, q_22=0.0767, V_11=17.0, V_12=2.59, V_22=18.6,
        m_1=0.0, m_2=0.0, theta_1=0.1216, theta_2=0.1158),
    ("attention_untied", "positional", 2.0): dict(
        q_11=0.0364, q_12=0.0308, q_22=0.0364, V_11=14.6, V_12=-1.63, V_22=18.2,
        m_1=0.274, m_2=0.263, theta_1=0.0, theta_2=0.0),
    # free branch: column 1 semantic, column 2 positional (where GD from Q = [Q*, noise] goes)
    ("attention_rank2", "free", 2.0): dict(
        q_11=0.0795, q_12=0.0, q_22=0.0175, V_11=14.7, V_12=0.0, V_22=14.3,
        m_1=0.0, m_2=0.215, theta_1=0.129, theta_2=0.0),
    ("attention_L3", "semantic", 2.0): dict(q=0.195, V=9.0, m_1=0.0, m_2=0.0, m_3=0.0, theta=0.214),
    ("attention_L3", "positional", 2.0): dict(q=0.118, V=26.2, m_1=0.097, m_2=0.0, m_3=-0.097, theta=0.0),
}
solved = {}
for (name, branch, alpha), x0 in STARTS.items():
    module = load_module(name)
    fp = Solver(module, {}, branch, rule=RULE_6D, tol=TOL).solve(alpha, x0)
    solved[name, branch] = fp
    print(f"{name:17s} {branch:10s} alpha={alpha:g}: eps_g={fp.eps_g:.4e} e_t={fp.train_loss:.4e} "
          f"({fp.iterations} it, {fp.seconds:.1f} s)")
    print("   " + "  ".join(f"{k}={v:.4g}" for k, v in fp.order.items()))
print(f"quadrature: {solved['attention_untied', 'semantic'].quadrature}")

# %% [markdown]
# Reading the numbers, against the tied model at the same point (`ω = 0.3`, `α = 2`):
#
# * **untied:** the semantic fixed point has `q_12 ≈ q_11 = q_22` — the learnt key and query
#   are nearly parallel — but `θ` is smaller than the tied one and `ε_g` larger: the untied
#   model has twice the parameters to fit from the same data.
# * **rank 2:** a fixed point with column 1 semantic (`θ_1 ≠ 0, m_1 = 0`) and column 2
#   positional (`m_2 ≠ 0, θ_2 = 0`): the student uses both mechanisms at once and its `ε_g`
#   and training loss are below the tied semantic ones. Fixed points of rank 2 come in
#   `O(2)` orbits (`S(hO) = S(h)`), so only rotation invariants are meaningful: the eigenvalues
#   of `q`, `|m|`, `|θ|`.
# * **L = 3:** both branches exist at `α = 2`; the semantic one has the larger `Φ`.

# %%
tied = load_module("attention")
# the positional start has m near 0.26: the tied positional branch holds a second, weaker solution
# (m ~ 0.08, lower Phi) at alpha = 2, which a start at small m reaches (docs/reference/finite_size.md)
tied_fp = {b: Solver(tied, {}, b).solve(2.0, x0)
           for b, x0 in (("semantic", [0.11, 12.0, 0.0, 0.15]), ("positional", [0.05, 20.0, 0.25, 0.0]))}
print(f"tied   semantic: q={tied_fp['semantic'].order['q']:.4f} theta={tied_fp['semantic'].order['theta']:.4f} "
      f"eps_g={tied_fp['semantic'].eps_g:.4e} e_t={tied_fp['semantic'].train_loss:.4e}")
r2 = solved["attention_rank2", "free"].order
q2 = np.array([[r2["q_11"], r2["q_12"]], [r2["q_12"], r2["q_22"]]])
print(f"rank 2 free:     eig(q)={np.round(np.linalg.eigvalsh(q2), 4)} |m|={np.hypot(r2['m_1'], r2['m_2']):.4f} "
      f"|theta|={np.hypot(r2['theta_1'], r2['theta_2']):.4f} eps_g={solved['attention_rank2', 'free'].eps_g:.4e} "
      f"e_t={solved['attention_rank2', 'free'].train_loss:.4e}")
for name in ("attention_untied", "attention_L3"):
    gap = solved[name, "semantic"].phi - solved[name, "positional"].phi
    print(f"{name}: Phi_sem - Phi_pos = {gap:+.3e} at alpha = 2 -> global minimum "
          f"{'semantic' if gap > 0 else 'positional'}")
gap_tied = tied_fp["semantic"].phi - tied_fp["positional"].phi
print(f"attention_tied:   Phi_sem - Phi_pos = {gap_tied:+.3e} at alpha = 2")

# %% [markdown]
# ## 3. Untying key and query delays the transition
#
# The paper's App. E.3 (Fig. 12) finds that untied attention needs more samples to turn
# semantic. `replica.phase.follow_branch` continues each untied branch in `α` from its
# solved point at `α = 2` (the same continuation the tied phase diagram uses: secant
# predictor, adaptive steps, a branch never jumps to another solution); `Φ` between solved
# points is a cubic Hermite interpolant (`dΦ/dα = Ψ_y`). For the tied model the attention
# study's `phase_point` (`replica.applications.attention.phase`, the core's `replica.phase` with the
# semantic/positional pair) does the whole analysis from generic starts.

# %%
from scipy.optimize import brentq

from replica.applications.attention.phase import phase_point
from replica.phase import SolverSettings, StepControl, follow_branch
from replica.numeric.solver import order_vector

untied = load_module("attention_untied")
settings_6d = SolverSettings(rule="gh:4" if QUICK else None, tol=TOL)
alpha_lo, alpha_hi = (1.75, 2.75) if QUICK else (1.25, 3.5)
steps = StepControl(max=0.25 if QUICK else 0.15)
t0 = time.perf_counter()
untied_curves = {}
for branch in ("semantic", "positional"):
    x0 = solved["attention_untied", branch].x
    up = follow_branch(untied, branch, 2.0, alpha_hi, x0=x0, settings=settings_6d, steps=steps)
    down = follow_branch(untied, branch, 2.0, alpha_lo, x0=x0, settings=settings_6d, steps=steps)
    for p in down.points:
        up.insert(p)
    up.ends += down.ends
    untied_curves[branch] = up
    print(f"untied {branch:10s}: {len(up)} points on [{up.range[0]:.2f}, {up.range[1]:.2f}]"
          + "".join(f"; ends at alpha={e.alpha:.3f} ({e.reason})" for e in up.ends))
lo = max(c.range[0] for c in untied_curves.values())
hi = min(c.range[1] for c in untied_curves.values())


def untied_gap(alpha):
    return float(untied_curves["semantic"].phi_interp(alpha) - untied_curves["positional"].phi_interp(alpha))


alpha_c_untied = brentq(untied_gap, lo, hi, xtol=1e-4) if untied_gap(lo) * untied_gap(hi) < 0 else None
print(f"untied curves in {time.perf_counter() - t0:.0f} s")

if QUICK:
    tied_settings, tied_steps = SolverSettings(rule="gh:8", tol=1e-7), StepControl(max=0.5)
else:
    tied_settings, tied_steps = SolverSettings(rule="gh:12"), StepControl(max=0.15)
t0 = time.perf_counter()
tied_phase = phase_point("attention", 0.3, alpha_min=0.1, alpha_max=alpha_hi, settings=tied_settings,
                         steps=tied_steps, branches=("semantic", "positional"), xtol=1e-4)
print(f"tied phase point in {time.perf_counter() - t0:.0f} s")
print(f"alpha_c: tied {tied_phase.alpha_c.value:.3f}, untied "
      + (f"{alpha_c_untied:.3f}" if alpha_c_untied is not None else f"not in [{lo:.2f}, {hi:.2f}]"))

# %%
import matplotlib

if "ipykernel" not in sys.modules:
    matplotlib.use("Agg")   # a script run writes PNGs only; Jupyter keeps its inline backend
import matplotlib.pyplot as plt

a_tied, pos_minus_sem = tied_phase.delta_phi()
a_untied = np.linspace(lo, hi, 200)
fig, ax = plt.subplots(figsize=(6.5, 3.8))
ax.plot(a_tied, -1e3 * pos_minus_sem, color="tab:blue", label="tied ($Q = K$)")
ax.plot(a_untied, [1e3 * untied_gap(a) for a in a_untied], color="tab:red", label="untied ($Q \\neq K$)")
for a_c, col in ((tied_phase.alpha_c.value, "tab:blue"), (alpha_c_untied, "tab:red")):
    if a_c is not None:
        ax.plot([a_c], [0.0], "o", color=col, ms=6, zorder=5)
        ax.annotate(rf"$\alpha_c = {a_c:.2f}$", (a_c, 0.0), textcoords="offset points", xytext=(6, -14), color=col)
ax.axhline(0.0, color="0.3", lw=0.8)
ax.set_xlim(min(lo, 0.75), hi)
ax.set_xlabel(r"sample complexity $\alpha = n/d$")
ax.set_ylabel(r"$\Phi_{\rm sem} - \Phi_{\rm pos}$  ($\times 10^{-3}$)")
ax.set_title(r"Semantic minus positional free entropy, $\omega = 0.3$")
ax.grid(alpha=0.25)
ax.legend(loc="upper left")
fig.savefig(OUT / "untied_vs_tied_transition.png", dpi=120, bbox_inches="tight")
plt.close(fig)
show(OUT / "untied_vs_tied_transition.png")

# %% [markdown]
# Measured with the default rule (`docs/how-to/extensions.md`, `tests/test_attention_variants.py`): untied
# `Φ_sem − Φ_pos = −2.6e-4` at `α = 2` and untied `α_c ≈ 2.28`, against `+9.2e-4` and `α_c` ≈ <!--n:alpha_c@0.3:2-->1.25<!--/n-->
# for the tied model. (The tied positional branch holds two solutions at `α = 2`; the gap is
# taken to the one continued from small `α`, `m ≈ 0.26`, which has the larger `Φ` and is where
# gradient descent goes — `docs/reference/finite_size.md`, "Disagreements" 1.) The quick run's order-4
# rule puts the untied `α_c` near 2.4: its error on `Φ` (~1e-4) is a sizeable fraction of the
# small gap between the branches.

# %% [markdown]
# ## 4. One point against gradient descent
#
# The untied semantic fixed point at `α = 2` against full-batch gradient descent from
# `Q = K = Q*` (`numerics.simulate.run_attention(untied=True)`). Signs are fixed per seed by
# `θ_1 > 0` (`S` is invariant under flipping `Q` and `K` together). The positional encodings'
# `O(1/d)` contribution to `ε_g` is negligible here (`p_2 = −p_1`,
# `tests/test_attention_variants.py::_output_encoding_term`). Measured at `d = 200` over 5 seeds: biases
# ≤ 2e-3 on `q` and `θ`, seed spread ≈ 8e-3 (`q`) and 1e-2 (`θ`); at `d = 100` some seeds leave
# the semantic state, hence `d ≥ 200`.

# %%
from numerics.metrics import mean_se
from numerics.simulate import run_attention

sim_d, sim_seeds = (200, [10, 11]) if QUICK else (400, [10, 11, 12, 13])
t0 = time.perf_counter()
res = run_attention(0.3, 2.0, sim_d, "semantic", sim_seeds, untied=True, lr=1.5, steps=20_000,
                    stop_grad=1e-6, normalize_teacher=True, n_test=20_000)
print(f"d={sim_d}, {len(sim_seeds)} seeds in {time.perf_counter() - t0:.0f} s, all converged: {res['converged']}")
per_seed = []
for run in res["runs"]:
    q, th = np.asarray(run["q"], float), np.ravel(run["theta"]).astype(float)
    s = 1.0 if th[0] >= 0 else -1.0
    per_seed.append(dict(q_11=q[0, 0], q_12=q[0, 1], q_22=q[1, 1], theta_1=s * th[0], theta_2=s * th[1],
                         eps_g=run["eps_g"], e_t=run["train_loss"]))
theory = dict(solved["attention_untied", "semantic"].order, eps_g=solved["attention_untied", "semantic"].eps_g,
              e_t=solved["attention_untied", "semantic"].train_loss)
print(f"{'':8s} {'theory':>10s} {'GD mean ± SE':>22s}")
for k in per_seed[0]:
    mean, se = mean_se([p[k] for p in per_seed])
    print(f"{k:8s} {theory[k]:10.5f} {mean:12.5f} ± {se:.5f}")

# %% [markdown]
# The same comparison for every extension, with tolerances from the measured finite-size
# spread, is `tests/test_attention_variants.py::test_theory_matches_simulation` (and its `d = 400`
# slow variant).

# %%
print(f"notebook ran in {time.perf_counter() - T_START:.0f} s; figures in {OUT}")

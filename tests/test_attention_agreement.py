"""Simulation (numerics/) vs replica theory (replica/) at ω = 0.3 (issue 7, item 4).

Every tolerance comes from the finite-size study ``python -m numerics.simulate finite-size``
(docs/reference/finite_size.md; its fits are read from docs/figures/finite_size_fits.csv). For a mean
over K seeds at dimension d the test asserts, observable by observable,

    |mean_sim − theory| ≤ 4 · std_fit(d)/√K  +  b(d)  +  u_theory            (TOLERANCE MODEL)

* ``std_fit(d) = C_f d^{−γ_f}``: the per-seed spread measured in the study (fitted on
  log–log axes). The model std is used rather than the sample SE of K = 3 seeds, whose
  own error is too large to build a bound on; 4 of them leave ~6e-5 two-sided probability
  per check for Gaussian fluctuations;
* ``b(d) = C_b d^{−γ_b}``: the measured systematic bias (the fit's upper 2σ band; where the
  study never resolved a bias, the largest |bias| + 2σ_b it saw, scaled as d^{-1/2});
* ``u_theory``: the theory's own quadrature uncertainty, ``fp.quadrature_residual · |X|``
  computed live (≈1e-2 relative on the positional branch, 1e-4…1e-3 on the semantic one).

See :func:`numerics.applications.attention.finite_size.tolerance`. Nothing here was tuned to pass: the constants
are the study's. The seeds (1000…) are not the study's (0…), so each test is a prediction.

Theory: :func:`numerics.applications.attention.finite_size.theory_point`, i.e. ``Solver(...).solve(alpha)``
continued in α from the branch's home point (positional 0.5, semantic 2), because at
α = 2 a cold start lands on a second positional solution that GD does not reach
(``test_cold_start_positional_solution_at_alpha_2``, a strict xfail). Semantic init at
α = 0.5 disagrees with the theory beyond any finite-size trend: a strict xfail, see
``SEMANTIC_05``.

The simulator runs as in the study: normalised teacher (ρ = σ² exactly, as in the theory),
full-batch GD with lr = 1.5 until ``grad_norm ≤ 1e-6`` (the same minimum as the paper's
lr = 0.15, ten times sooner: see ``test_step_size_does_not_change_the_minimum``),
50 000 test sentences. Every seed must converge and end nearer (in (m, θ)) to the fixed
point of the branch it was started on than to the other one; a run that does not is a
failure that names the seed, never silently averaged in.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

from numerics.applications.attention import simulate  # noqa: E402
from numerics.applications.attention.finite_size import (  # noqa: E402
    OBSERVABLES,
    fit_power_law,
    load_fits,
    load_runs,
    parse_points,
    run_study,
    summarise,
    theory_point,
    tolerance,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FITS_PATH = os.path.join(REPO, "docs", "figures", "finite_size_fits.csv")
OMEGA = 0.3
SEED0 = 1000  # independent of the study's seeds 0, 1, ...
SIM = dict(lr=1.5, steps=20_000, stop_grad=1e-6, normalize_teacher=True, n_test=50_000)
K_SE = 4.0

#: (init, alpha) points: the issue's agreement points and its branch check α ∈ {0.5, 1, 2}
POINTS = [("semantic", 2.0), ("positional", 0.5), ("semantic", 1.0), ("positional", 1.0),
          ("positional", 2.0)]

#: Semantic init at α = 0.5 does NOT reach a semantic fixed point, and cannot: the semantic
#: branch ends at its spinodal α ≈ 0.748 (replica/phase at ω = 0.3; the Solver's branch
#: continued down from α = 2 drops from θ = 0.039 to 0.015 between α = 0.74 and 0.72).
#: ``Solver(branch="semantic").solve(0.5)`` still returns a near-agnostic fixed point
#: (θ = 0.0022) that GD does not reach: in the study every seed ends at θ ≈ 0.05
#: (0.053 ± 0.003 at d = 200, 0.050 ± 0.002 at d = 800: no finite-size trend), often with
#: m ≠ 0, and 7/12 (d = 100) and 4/10 (d = 200) seeds end on the positional fixed point.
#: Its own study fits are therefore a disagreement, not a finite-size model, and are not
#: used as a tolerance: the check uses the fits of the same branch at α = 1. Kept as a
#: strict xfail so that it turns into a failure (XPASS) the day theory or simulator change
#: (docs/reference/finite_size.md).
SEMANTIC_05 = pytest.param(
    "semantic", 0.5, marks=pytest.mark.xfail(
        strict=True, reason="alpha=0.5 is below the semantic spinodal (0.748): sim theta ~0.05 vs "
                            "Solver theta 0.0022, no finite-size trend (docs/reference/finite_size.md)"))
FITS_FROM = {("semantic", 0.5): ("semantic", 1.0)}


@pytest.fixture(scope="module")
def fits():
    return load_fits(FITS_PATH)


def _other(init: str) -> str:
    return "positional" if init == "semantic" else "semantic"


def _simulate(init: str, alpha: float, d: int, K: int) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # non-convergence is asserted on below, seed by seed
        return simulate.run_attention(OMEGA, alpha, d, init, seeds=K, seed_start=SEED0, **SIM)


def _check_point(fits, init: str, alpha: float, d: int, K: int) -> None:
    """Convergence, branch and agreement checks of the module docstring at one point."""
    res = _simulate(init, alpha, d, K)
    runs = res["runs"]
    bad = [f"seed {r['seed']}: grad_norm={r['grad_norm']:.2e} after {r['steps']} steps"
           for r in runs if not r["converged"]]
    assert not bad, f"{init} init, alpha={alpha}, d={d}: runs did not converge: " + "; ".join(bad)
    th = theory_point(OMEGA, alpha, init)
    th_o = theory_point(OMEGA, alpha, _other(init))
    for r in runs:
        own = math.hypot(r["m"] - th["m"], r["theta"] - th["theta"])
        oth = math.hypot(r["m"] - th_o["m"], r["theta"] - th_o["theta"])
        assert own <= oth, (
            f"{init} init, alpha={alpha}, d={d}, seed {r['seed']} ended nearer the {_other(init)} "
            f"fixed point: (m, theta) = ({r['m']:.4f}, {r['theta']:.4f}); {init} "
            f"({th['m']:.4f}, {th['theta']:.4f}), {_other(init)} ({th_o['m']:.4f}, {th_o['theta']:.4f})")
    lines, failed = [], []
    for o in OBSERVABLES:
        fi, fa = FITS_FROM.get((init, alpha), (init, alpha))
        fit = fits[("attention", fi, fa, o)]
        tol = tolerance(fit, d, K, u_theory=th["u_" + o], k_se=K_SE)
        dev = res[o] - th[o]
        lines.append(f"  {o:<10} theory {th[o]:.5g}  sim {res[o]:.5g} ± {res[o + '_se']:.2g} (SE)  "
                     f"|dev| {abs(dev):.3g}  tol {tol:.3g}")
        if not abs(dev) <= tol:
            failed.append(o)
    report = f"{init} init, alpha={alpha}, d={d}, K={K}:\n" + "\n".join(lines)
    print(report)  # shown with pytest -s (the agreement table of docs/reference/finite_size.md)
    assert not failed, f"outside the finite-size tolerance: {failed}\n{report}"


# ----------------------------------------------------------------------------- fast
@pytest.mark.parametrize("init,alpha", POINTS)
def test_agreement_small_d(fits, init, alpha):
    """d = 100, K = 3 seeds: the smallest d of the study, so the tolerance is its widest
    (from the study's fits at d = 100, see the module docstring)."""
    _check_point(fits, init, alpha, d=100, K=3)


@pytest.mark.xfail(strict=True, reason="cold-started Solver returns the other positional solution at "
                                       "alpha=2 (q=0.099, m=0.084, higher e_t); see theory_point")
def test_cold_start_positional_solution_at_alpha_2():
    """At α = 2 the positional saddle-point equations have two solutions. GD from the
    positional init reaches the one continued from α = 0.5 (q ≈ 0.052, m ≈ 0.256, the lower
    e_t); a cold ``Solver(...).solve(2.0)`` returns q ≈ 0.099, m ≈ 0.084. This documents it
    (tolerance: the theory's own ``u`` of the continued solution); the agreement tests use the
    continued solution (:func:`numerics.applications.attention.finite_size.theory_point`)."""
    cont = theory_point(OMEGA, 2.0, "positional")
    cold = theory_point(OMEGA, 2.0, "positional", continuation=False)
    for o in ("q", "m"):
        assert abs(cold[o] - cont[o]) <= 2 * cont["u_" + o], (o, cold[o], cont[o])


def test_linear_baseline_agreement(fits):
    """Linear baseline ε_g (and e_t vs α ε_g^lin) against ``linear_baseline``: tolerance from
    the study's linear-baseline fits at α = 2 (same model, std_fit and b(d))."""
    _check_linear(fits, d=100, K=8)


def _check_linear(fits, d: int, K: int, alpha: float = 2.0) -> None:
    res = simulate.run_linear(OMEGA, alpha, d, seeds=K, seed_start=SEED0,
                              normalize_teacher=True, n_test=50_000)
    th = theory_point(OMEGA, alpha, "linear")
    for o in ("eps_g", "train_loss"):
        tol = tolerance(fits[("linear", "-", alpha, o)], d, K, u_theory=th["u_" + o], k_se=K_SE)
        assert abs(res[o] - th[o]) <= tol, (o, res[o], res[o + "_se"], th[o], tol)


def test_step_size_does_not_change_the_minimum():
    """The study and these tests use lr = 1.5; the paper uses 0.15. Both must reach the same
    minimum: the difference must be far below the d = 100 seed spread (std_fit ~ 1e-2)."""
    kw = dict(omega=OMEGA, alpha=2.0, d=40, init="semantic", steps=40_000, stop_grad=1e-7,
              normalize_teacher=True, n_test=200)
    a = simulate.run_attention_seed(SEED0, lr=0.15, **kw)
    b = simulate.run_attention_seed(SEED0, lr=1.5, **kw)
    assert a["converged"] and b["converged"]
    for o in ("q", "m", "theta", "train_loss"):
        assert abs(a[o] - b[o]) <= 1e-4 * max(abs(a[o]), 1e-2), (o, a[o], b[o])


def test_fit_power_law_recovers_exponent():
    rng = np.random.default_rng(0)
    d = np.geomspace(100, 1600, 9)
    y = 0.7 * d**-0.5 * np.exp(0.05 * rng.standard_normal(d.size))
    f = fit_power_law(d, y, np.full(d.size, 0.05))
    assert abs(f["gamma"] - 0.5) < 3 * f["gamma_err"] and f["gamma_err"] < 0.05
    assert f["C"] == pytest.approx(0.7, rel=0.2)


def test_summary_reports_nonconverged_and_escaped_runs():
    """The study leaves out (and counts) runs that did not converge or changed branch."""
    th = {"semantic": dict(q=0.1, m=0.0, theta=0.16, eps_g=1e-3, train_loss=3e-3),
          "positional": dict(q=0.1, m=0.08, theta=0.0, eps_g=4e-3, train_loss=5e-3)}
    for t in th.values():
        t.update({"u_" + k: 0.0 for k in list(t)})

    def theory(omega, alpha, branch, **kw):
        return th[branch]

    base = dict(model="attention", init="semantic", omega=0.3, alpha=2.0, teacher="normalized", d=100,
                lam=0.01, sigma=0.5, q=0.1, eps_g=1e-3, eps_g_mc_se=1e-5, train_loss=3e-3, steps=10,
                seconds=1.0)
    rows = [dict(base, m=0.01, theta=0.15 + 0.01 * i, converged=True) for i in range(3)]
    rows.append(dict(base, m=0.01, theta=0.15, converged=False))          # not converged
    rows.append(dict(base, m=0.09, theta=0.01, converged=True))           # went positional
    s = {r["observable"]: r for r in summarise(rows, theory)}
    assert s["theta"]["K"] == 3 and s["theta"]["n_nonconverged"] == 1 and s["theta"]["n_other_branch"] == 1
    assert s["theta"]["mean"] == pytest.approx(0.16)


def test_finite_size_resume_cli_and_bad_input(tmp_path):
    out = str(tmp_path / "fs")
    kw = dict(omega=OMEGA, n_test=100, max_steps=50, linear=False, verbose=False)
    pts = parse_points("semantic:2")
    assert run_study(out, pts, [20, 40], [2], **kw) == 4
    assert run_study(out, pts, [20, 40], [2], **kw) == 0  # resumed: every row is cached
    assert run_study(out, pts, [20, 40], [3], **kw) == 2  # one more seed per d
    assert len(load_runs(os.path.join(out, "runs.csv"))) == 6
    p = subprocess.run([sys.executable, "-m", "numerics.simulate", "finite-size", "--out", out, "--analyse-only"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "3 non-converged" in p.stderr  # 50 steps: every run is reported as not converged
    for f in ("runs.csv", "summary.csv", "fits.csv", "finite_size.md", "finite_size.png"):
        assert os.path.exists(os.path.join(out, f)), f
    bad = {"point": ["--points", "magic:1"], "alpha": ["--points", "semantic:-1"],
           "d": ["--ds", "0,100"], "seeds": ["--ds", "100,200", "--seeds", "1,2,3"]}
    procs = {name: subprocess.Popen([sys.executable, "-m", "numerics.simulate", "finite-size", "--out", out, *extra],
                                    cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, extra in bad.items()}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        lines = err.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and name in lines[0], (name, err)


def test_simulate_sweep_and_linear_bad_input(tmp_path):
    """Issue 7's CLI contract (d ≤ 0, α ≤ 0, unknown init, cuda without a GPU → one-line error,
    exit 2) for the sweep and linear subcommands (tests/test_numerics.py covers attention)."""
    out = str(tmp_path / "x.csv")
    cases = {
        "d": ["sweep", "--alphas", "1", "--d", "-5", "--out", out],
        "alpha": ["sweep", "--alphas", "0.5,0", "--out", out],
        "init": ["sweep", "--alphas", "1", "--inits", "semantic,magic", "--out", out],
        "alpha ": ["linear", "--alpha", "0"],
        "d ": ["linear", "--d", "0"],
    }
    if not torch.cuda.is_available():
        cases["device"] = ["sweep", "--alphas", "1", "--device", "cuda", "--out", out]
    procs = {name: subprocess.Popen([sys.executable, "-m", "numerics.simulate", *args], cwd=REPO,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, args in cases.items()}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        lines = err.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and name.strip() in lines[0], (name, err)
    assert not os.path.exists(out)


# ----------------------------------------------------------------------------- slow
@pytest.mark.slow
@pytest.mark.parametrize("init,alpha", POINTS + [SEMANTIC_05])
def test_agreement_large_d(fits, init, alpha):
    """d = 800, K = 4 seeds (inside the study's range for every point; tolerance from the
    study's fits at d = 800, module docstring)."""
    _check_point(fits, init, alpha, d=800, K=4)


@pytest.mark.slow
@pytest.mark.parametrize("init,alpha", [("semantic", 2.0), ("positional", 0.5)])
def test_agreement_largest_d(fits, init, alpha):
    """d = 1600, K = 4 seeds, the two main points (tolerance from the study at d = 1600)."""
    _check_point(fits, init, alpha, d=1600, K=4)


@pytest.mark.slow
def test_linear_baseline_agreement_large_d(fits):
    """d = 1600, K = 4 seeds; tolerance from the study's linear-baseline fits at d = 1600."""
    _check_linear(fits, d=1600, K=4)

"""Finite-size study: simulation vs replica theory as ``d`` grows at fixed ``α`` (issue 7, item 5).

For every point ``(init, α)`` (default: semantic init at α = 2 and positional init at
α = 0.5, ω = 0.3, the paper's parameters) and every ``d`` of a log-spaced list, the
attention student is trained on several seeds (:func:`numerics.simulate.run_attention_seed`)
and compared with the replica fixed point of the branch it was started on
(:class:`replica.numeric.solver.Solver`, continued in α from the branch's home point, see
:func:`theory_point`). The linear baseline is run on the same seeds and compared
with :func:`replica.numeric.solver.linear_baseline`. For each observable ``X ∈ {q, m, θ, ε_g, e_t}``
and each ``d`` the study reports

* the seed mean, its standard error ``SE = std/√K`` and the per-seed spread ``std``;
* the bias ``mean − theory`` and its uncertainty ``σ_b = √(SE² + u²)``, ``u`` the theory's
  own quadrature uncertainty (``fp.quadrature_residual`` × |X|, see :func:`theory_point`);

and fits two power laws by weighted least squares on log–log axes:

* fluctuations: ``std(d) ≈ C_f d^{−γ_f}`` (log-weights ``1/√(2(K−1))``, the relative error
  of a sample standard deviation);
* bias: ``|mean − theory| ≈ C_b d^{−γ_b}`` on the points where the bias is resolved
  (``|bias| ≥ 2σ_b``; log-weights ``σ_b/|bias|``);
* the tolerance envelope of the agreement tests: a power law through ``|bias| + 2σ_b`` at
  every d (:func:`tolerance`).

The parameter covariances are scaled by the reduced χ² when that exceeds 1. For ε_g the
fluctuation exponent is also fitted without the (d-independent) Monte-Carlo noise of the
finite test set, ``√(std² − mc_se²)``.

Runs that do not converge, or that end nearer (in ``(m, θ)``) to the other branch's fixed
point than to their own, are reported (columns ``n_nonconverged`` / ``n_other_branch``) and
left out of the statistics.

Resumable: every finished run is appended to ``DIR/runs.csv`` at once; rows already there
(same model, init, ω, α, d, seed and settings) are skipped. Interrupt and rerun at will.
Progress goes to stderr. Outputs in ``DIR``: ``runs.csv`` (cache), ``summary.csv`` (one row
per point, d, observable), ``fits.csv`` (one row per point, observable), ``finite_size.png``
(the default points and their linear baselines; any other points in ``finite_size_other.png``)
and ``finite_size.md`` (the fitted exponents as a Markdown table).

Step size: the study minimises the same risk as the paper (full-batch GD from the
informed / positional init) but with ``lr = 1.5`` instead of 0.15 and until
``grad_norm ≤ 1e-6``: the Hessian of ``R`` has O(1), d-independent eigenvalues ≲ 0.2 here
(:mod:`numerics.train`), so GD is stable far beyond 0.15 and reaches the same minimum about
ten times sooner (on 16 seeds at d = 100, semantic α = 2, lr 0.15 and 1.5 agree to ≤ 1.1e-5
in q, m, θ and 1e-7 in ε_g). ``--lr 0.15`` reproduces the paper's step size.

Teacher: ``--teacher normalized`` (default) rescales ``Q*`` to column norm ``√d`` so that
``ρ = σ²`` holds exactly as in the theory; ``--teacher iid`` is the paper's iid N(0, 1)
``Q*`` whose ``ρ`` fluctuates by O(d^{-1/2}) per seed (an extra, theory-irrelevant spread).

Example::

    python -m numerics.finite_size --out DIR                    # docs/reference/finite_size.md
    python -m numerics.finite_size --out DIR --points semantic:0.5,semantic:1,positional:1,positional:2 \\
        --ds 100,200,400,800 --seeds 12,10,8,6 --max-steps 8000 --no-linear
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "OBSERVABLES",
    "RUN_COLUMNS",
    "Point",
    "parse_points",
    "theory_point",
    "BRANCH_HOME",
    "run_study",
    "load_runs",
    "summarise",
    "fit_power_law",
    "fit_all",
    "load_fits",
    "tolerance",
    "main",
]

#: Observables compared with the theory (``train_loss`` is ``e_t = R/d``).
OBSERVABLES: tuple[str, ...] = ("q", "m", "theta", "eps_g", "train_loss")
#: Observables of the linear baseline (``e_t`` is compared with ``α ε_g^lin``).
LINEAR_OBSERVABLES: tuple[str, ...] = ("eps_g", "train_loss")
LABELS = {"q": "q", "m": "m", "theta": "θ", "eps_g": "ε_g", "train_loss": "e_t"}

RUN_COLUMNS = (
    "model,init,omega,alpha,d,seed,teacher,lam,sigma,n_test,lr,max_steps,stop_grad,tol_grad,"
    "q,m,theta,rho,eps_g,eps_g_mc_se,train_loss,grad_norm,steps,converged,seconds"
).split(",")
_KEY = ("model", "init", "omega", "alpha", "d", "seed", "teacher", "lam", "sigma", "n_test",
        "lr", "max_steps", "stop_grad", "tol_grad")

DEFAULT_POINTS = "semantic:2,positional:0.5"
DEFAULT_DS = "100,141,200,283,400,566,800,1131,1600"
DEFAULT_SEEDS = "32,32,24,24,20,16,16,12,12"


@dataclass(frozen=True)
class Point:
    """A study point: ``model`` (attention or linear), ``init`` (the branch), ``alpha``."""

    model: str
    init: str
    alpha: float

    @property
    def label(self) -> str:
        if self.model == "linear":
            return f"linear α={self.alpha:g}"
        return f"{self.init} α={self.alpha:g}"


def parse_points(s: str) -> list[Point]:
    """``"semantic:2,positional:0.5"`` -> attention points (init must be semantic/positional)."""
    pts = []
    for item in s.replace(" ", "").split(","):
        if not item:
            continue
        try:
            init, a = item.split(":")
            alpha = float(a)
        except ValueError:
            raise ValueError(f"points must look like init:alpha,... (got {item!r})") from None
        if init not in ("semantic", "positional"):
            raise ValueError(f"point init must be semantic or positional (got {init!r})")
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"point alpha must be > 0 (got {alpha})")
        pts.append(Point("attention", init, alpha))
    if not pts:
        raise ValueError("points must name at least one init:alpha")
    return pts


# --------------------------------------------------------------------------- theory
_THEORY_CACHE: dict[tuple, dict[str, float]] = {}


#: Where each branch's continuation starts: the sample complexity at which GD from that
#: init is on the branch's global minimum (positional below α_c, semantic above).
BRANCH_HOME = {"positional": 0.5, "semantic": 2.0}
#: Largest α step of the continuation.
CONTINUATION_STEP = 0.25


def theory_point(omega: float, alpha: float, branch: str, lam: float = 0.01,
                 sigma: float = 0.5, continuation: bool = True) -> dict[str, float]:
    """Replica prediction on ``branch`` at ``(ω, α)`` with its uncertainty.

    ``continuation`` (default): the fixed point is followed in α from
    :data:`BRANCH_HOME` (positional α = 0.5, semantic α = 2) in steps ≤ 0.25, each solve
    warm-started at the previous one, i.e. the solution connected to where GD from that
    init is on the branch's minimum. This matters: at ω = 0.3, α = 2 the positional
    equations have two solutions, and a cold start returns q = 0.099, m = 0.084
    (e_t = 4.67e-3), while the continued branch — the one GD from the positional init
    reaches, with the lower training loss — is q = 0.052, m = 0.256 (e_t = 4.51e-3).
    ``continuation=False`` is a plain ``Solver(...).solve(alpha)``.

    Returns ``{q, m, theta, eps_g, train_loss}`` and ``u_<obs>`` (absolute theory
    uncertainty): ``fp.quadrature_residual`` (the fixed-point residual under the companion
    quadrature rule, a relative error estimate of the order parameters) times ``|X|`` for
    every observable, plus ``fp.eps_g_error`` for ``ε_g``. ``branch="linear"`` gives the
    linear baseline: ``eps_g = ε_g^lin`` and ``train_loss = α ε_g^lin`` (the trained ``B̂`` is
    the population optimum as d → ∞, so ``R/d → α ε_g^lin``).
    """
    key = (round(omega, 12), round(alpha, 12), branch, lam, sigma, continuation)
    if key in _THEORY_CACHE:
        return _THEORY_CACHE[key]
    from replica.registry import load_module
    from replica.numeric.solver import Solver, linear_baseline

    module = load_module("attention")
    params = {"omega": float(omega)}
    names = set(module.PARAMETERS)
    if "lam" in names:
        params["lam"] = lam
    elif "lambda" in names:
        params["lambda"] = lam
    if "sigma" in names:
        params["sigma"] = sigma
    if branch == "linear":
        eps, err = linear_baseline(module, params)
        out = {"eps_g": eps, "train_loss": alpha * eps, "u_eps_g": err, "u_train_loss": alpha * err,
               "quadrature_residual": 0.0}
    else:
        x0 = None
        home = BRANCH_HOME.get(branch)
        if continuation and home is not None and abs(alpha - home) > 1e-12:
            n = max(1, math.ceil(abs(alpha - home) / CONTINUATION_STEP - 1e-9))
            path = Solver(module, params, branch=branch, error_estimate=False)
            for a in np.linspace(home, alpha, n + 1)[:-1]:
                x0 = path.solve(float(a), x0=x0).order
        fp = Solver(module, params, branch=branch).solve(float(alpha), x0=x0)
        if not fp.converged:
            raise RuntimeError(f"theory did not converge on the {branch} branch at alpha={alpha}")
        rel = float(fp.quadrature_residual) if math.isfinite(fp.quadrature_residual) else 0.0
        out = {"q": fp.order["q"], "m": abs(fp.order["m"]), "theta": abs(fp.order["theta"]),
               "eps_g": fp.eps_g, "train_loss": fp.train_loss, "quadrature_residual": rel}
        for k in OBSERVABLES:
            out["u_" + k] = rel * abs(out[k])
        out["u_eps_g"] += float(fp.eps_g_error) if math.isfinite(fp.eps_g_error) else 0.0
    _THEORY_CACHE[key] = out
    return out


# --------------------------------------------------------------------------- runs
def _row_key(row: Mapping[str, Any]) -> tuple:
    out = []
    for k in _KEY:
        v = row[k]
        if k in ("d", "seed", "n_test", "max_steps"):
            out.append(int(float(v)))
        elif k in ("omega", "alpha", "lam", "sigma", "lr", "stop_grad", "tol_grad"):
            out.append(round(float(v), 12))
        else:
            out.append(str(v))
    return tuple(out)


def load_runs(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a ``runs.csv`` (numbers parsed; incomplete trailing lines skipped)."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return []
    rows = []
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != RUN_COLUMNS:
            raise ValueError(f"{path} has columns {reader.fieldnames}, expected {RUN_COLUMNS}")
        for r in reader:
            if any(r.get(c) in (None, "") for c in RUN_COLUMNS):
                continue  # a line cut by an interruption
            row: dict[str, Any] = dict(r)
            for c in RUN_COLUMNS:
                if c in ("model", "init", "teacher"):
                    continue
                if c == "converged":
                    row[c] = r[c] == "True"
                elif c in ("d", "seed", "n_test", "max_steps", "steps"):
                    row[c] = int(float(r[c]))
                else:
                    row[c] = float(r[c])
            rows.append(row)
    return rows


def _append(path: str, row: Mapping[str, Any]) -> None:
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    line = [repr(row[c]) if isinstance(row[c], float) else str(row[c]) for c in RUN_COLUMNS]
    with open(path, "a", newline="") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(RUN_COLUMNS)
        w.writerow(line)
        fh.flush()
        os.fsync(fh.fileno())


def _seeds_per_d(ds: Sequence[int], seeds: Sequence[int]) -> dict[int, int]:
    if len(seeds) == 1:
        return {d: int(seeds[0]) for d in ds}
    if len(seeds) != len(ds):
        raise ValueError(f"seeds must be one count or one per d ({len(ds)}), got {len(seeds)}")
    return {d: int(k) for d, k in zip(ds, seeds)}


def run_study(
    out: str | os.PathLike,
    points: Sequence[Point],
    ds: Sequence[int],
    seeds: Sequence[int],
    *,
    omega: float = 0.3,
    seed_start: int = 0,
    linear: bool = True,
    teacher: str = "normalized",
    lam: float = 0.01,
    sigma: float = 0.5,
    n_test: int = 50_000,
    lr: float = 1.5,
    max_steps: int = 20_000,
    stop_grad: float = 1e-6,
    tol_grad: float = 3e-5,
    threads: int = 1,
    max_runs: int | None = None,
    verbose: bool = True,
) -> int:
    """Run every missing (point, d, seed) and append it to ``out/runs.csv``; returns the
    number of new runs. Small ``d`` first, so an interrupted study already covers a range.

    Training stops once ``grad_norm ≤ stop_grad`` (default 1e-6: the per-row distance to
    the minimum ≈ grad_norm/λ = 1e-4, far below every finite-size effect measured here) or
    after ``max_steps``; ``converged`` is the simulator's criterion (``grad_norm ≤ tol_grad``
    and relative loss change ≤ 1e-6).
    """
    from .simulate import run_attention_seed, run_linear_seed, torch_threads

    if teacher not in ("normalized", "iid"):
        raise ValueError(f"teacher must be normalized or iid (got {teacher!r})")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "runs.csv")
    done = {_row_key(r) for r in load_runs(path)}
    per_d = _seeds_per_d(ds, seeds)
    all_points = list(points)
    if linear:
        for a in sorted({p.alpha for p in points}):
            all_points.append(Point("linear", "-", a))
    jobs = []
    for d in sorted(ds):
        for p in all_points:
            for s in range(seed_start, seed_start + per_d[d]):
                base = dict(model=p.model, init=p.init, omega=float(omega), alpha=float(p.alpha),
                            d=int(d), seed=int(s), teacher=teacher, lam=float(lam),
                            sigma=float(sigma), n_test=int(n_test), lr=float(lr), max_steps=int(max_steps),
                            stop_grad=float(stop_grad), tol_grad=float(tol_grad))
                if _row_key(base) not in done:
                    jobs.append(base)
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if verbose else (lambda s: None)
    total = len(jobs) if max_runs is None else min(len(jobs), max_runs)
    log(f"[finite_size] {len(done)} run(s) cached in {path}; {len(jobs)} to do"
        + (f", doing {total} now" if total < len(jobs) else ""))
    t_start = time.perf_counter()
    n = 0
    with torch_threads(threads):
        for base in jobs[:total]:
            t0 = time.perf_counter()
            common = dict(omega=base["omega"], alpha=base["alpha"], d=base["d"], sigma=sigma,
                          normalize_teacher=(teacher == "normalized"), n_test=n_test)
            if base["model"] == "linear":
                res = run_linear_seed(base["seed"], **common)
                res.update(q=math.nan, m=math.nan, theta=math.nan, grad_norm=0.0)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # non-convergence is recorded in the row
                    res = run_attention_seed(base["seed"], init=base["init"], lam=lam,
                                             lr=lr, steps=max_steps, stop_grad=stop_grad,
                                             tol_grad=tol_grad, **common)
            rho = res["rho"][0] if isinstance(res["rho"], list) else res["rho"]
            row = dict(base, q=float(res["q"]), m=float(res["m"]), theta=float(res["theta"]),
                       rho=float(np.asarray(rho).reshape(-1)[0]), eps_g=float(res["eps_g"]),
                       eps_g_mc_se=float(res["eps_g_mc_se"]), train_loss=float(res["train_loss"]),
                       grad_norm=float(res["grad_norm"]), steps=int(res["steps"]),
                       converged=bool(res["converged"]), seconds=time.perf_counter() - t0)
            _append(path, row)
            n += 1
            el = time.perf_counter() - t_start
            log(f"[finite_size {n}/{total}] {base['model']} {base['init']} alpha={base['alpha']:g} "
                f"d={base['d']} seed={base['seed']}: {row['seconds']:.1f}s steps={row['steps']} "
                f"q={row['q']:.4g} m={row['m']:.4g} theta={row['theta']:.4g} eps_g={row['eps_g']:.4g} "
                f"e_t={row['train_loss']:.4g} grad={row['grad_norm']:.1e} converged={row['converged']}"
                f"  (elapsed {el / 60:.1f} min)")
    return n


# --------------------------------------------------------------------------- analysis
def _other_branch(init: str) -> str:
    return "positional" if init == "semantic" else "semantic"


def _nearest_is_own(row: Mapping[str, Any], own: Mapping[str, float], other: Mapping[str, float]) -> bool:
    """True when the run's ``(m, θ)`` is nearer its own branch's fixed point than the other's."""
    d_own = math.hypot(row["m"] - own["m"], row["theta"] - own["theta"])
    d_oth = math.hypot(row["m"] - other["m"], row["theta"] - other["theta"])
    return d_own <= d_oth


def summarise(rows: Sequence[Mapping[str, Any]], theory: Any = theory_point) -> list[dict[str, Any]]:
    """One row per (model, init, α, teacher, d, observable): theory, mean, SE, std, bias,
    σ_b, counts (``K`` used, ``n_nonconverged``, ``n_other_branch``), ``mc_se`` (ε_g only:
    the RMS Monte-Carlo SE of the per-seed test errors)."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["init"], r["omega"], r["alpha"], r["teacher"], r["d"]), []).append(r)
    out = []
    for (model, init, omega, alpha, teach, d), rs in sorted(groups.items(), key=lambda kv: (
            kv[0][0] != "attention", kv[0][1], kv[0][3], kv[0][4], kv[0][5])):
        lam, sigma = rs[0]["lam"], rs[0]["sigma"]
        branch = "linear" if model == "linear" else init
        th = theory(omega, alpha, branch, lam=lam, sigma=sigma)
        nonconv = [r for r in rs if not r["converged"]]
        ok = [r for r in rs if r["converged"]]
        other = []
        if model != "linear":
            th_o = theory(omega, alpha, _other_branch(init), lam=lam, sigma=sigma)
            other = [r for r in ok if not _nearest_is_own(r, th, th_o)]
            ok = [r for r in ok if _nearest_is_own(r, th, th_o)]
        obs = LINEAR_OBSERVABLES if model == "linear" else OBSERVABLES
        for o in obs:
            vals = np.array([r[o] for r in ok], dtype=float)
            K = len(vals)
            mean = float(vals.mean()) if K else math.nan
            std = float(vals.std(ddof=1)) if K > 1 else math.nan
            se = std / math.sqrt(K) if K > 1 else math.nan
            u = float(th["u_" + o])
            bias = mean - th[o]
            sb = math.sqrt(se**2 + u**2) if K > 1 else math.nan
            mc = float(np.sqrt(np.mean([r["eps_g_mc_se"] ** 2 for r in ok]))) if (o == "eps_g" and K) else math.nan
            out.append(dict(model=model, init=init, omega=omega, alpha=alpha, teacher=teach, d=d,
                            observable=o, theory=float(th[o]), u_theory=u, K=K, mean=mean, se=se,
                            std=std, bias=bias, sigma_bias=sb,
                            resolved=bool(K > 1 and abs(bias) >= 2 * sb), mc_se=mc,
                            n_nonconverged=len(nonconv), n_other_branch=len(other),
                            mean_steps=float(np.mean([r["steps"] for r in rs])),
                            mean_seconds=float(np.mean([r["seconds"] for r in rs]))))
    return out


def fit_power_law(d: Sequence[float], y: Sequence[float], sigma_log: Sequence[float]) -> dict[str, float]:
    """Weighted least squares of ``log y = log C − γ log d`` with ``σ(log y) = sigma_log``.

    Returns ``{C, gamma, gamma_err, logC_err, cov (2×2 on (log C, −γ)), chi2, dof, npts,
    x0}``; the covariance is multiplied by ``χ²/dof`` when that exceeds 1 (under-estimated
    errors), and ``gamma_err`` is its square root. Needs two points at distinct ``d``.
    """
    d = np.asarray(d, dtype=float)
    y = np.asarray(y, dtype=float)
    s = np.asarray(sigma_log, dtype=float)
    keep = np.isfinite(y) & (y > 0) & np.isfinite(s) & (s > 0)
    d, y, s = d[keep], y[keep], s[keep]
    if len(np.unique(d)) < 2:
        return dict(C=math.nan, gamma=math.nan, gamma_err=math.nan, logC_err=math.nan,
                    cov=np.full((2, 2), math.nan), chi2=math.nan, dof=0, npts=len(d))
    x = np.log(d)
    Y = np.log(y)
    Amat = np.stack([np.ones_like(x), x], axis=1)
    W = 1.0 / s**2
    M = Amat.T @ (W[:, None] * Amat)
    cov = np.linalg.inv(M)
    beta = cov @ (Amat.T @ (W * Y))
    resid = Y - Amat @ beta
    chi2 = float(np.sum(W * resid**2))
    dof = len(x) - 2
    if dof > 0 and chi2 / dof > 1:
        cov = cov * (chi2 / dof)
    return dict(C=float(math.exp(beta[0])), gamma=float(-beta[1]), gamma_err=float(math.sqrt(cov[1, 1])),
                logC_err=float(math.sqrt(cov[0, 0])), cov=cov, chi2=chi2, dof=dof, npts=len(x))


def _band(fit: Mapping[str, Any], d: float, nsig: float) -> float:
    """``C d^{−γ}`` times ``exp(nsig·σ)``, σ the fit's standard error of ``log y`` at ``d``."""
    if not math.isfinite(fit["C"]):
        return math.nan
    v = np.array([1.0, math.log(d)])
    var = float(v @ np.asarray(fit["cov"]) @ v)
    return fit["C"] * d ** (-fit["gamma"]) * math.exp(nsig * math.sqrt(max(var, 0.0)))


def fit_all(summary: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Fluctuation and bias power laws for every (model, init, α, teacher, observable)."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in summary:
        groups.setdefault((r["model"], r["init"], r["omega"], r["alpha"], r["teacher"], r["observable"]), []).append(r)
    out = []
    for (model, init, omega, alpha, teach, o), rs in groups.items():
        rs = sorted(rs, key=lambda r: r["d"])
        ds = [r["d"] for r in rs]
        good = [r for r in rs if r["K"] > 1]
        fl = fit_power_law([r["d"] for r in good], [r["std"] for r in good],
                           [1.0 / math.sqrt(2 * (r["K"] - 1)) for r in good])
        res = [r for r in good if r["resolved"]]
        bi = fit_power_law([r["d"] for r in res], [abs(r["bias"]) for r in res],
                           [r["sigma_bias"] / abs(r["bias"]) for r in res])
        # envelope of the bias for the tests' tolerance: U(d) = |bias| + 2σ_b at every d
        env = fit_power_law([r["d"] for r in good], [abs(r["bias"]) + 2 * r["sigma_bias"] for r in good],
                            [r["sigma_bias"] / (abs(r["bias"]) + 2 * r["sigma_bias"]) for r in good])
        # ε_g: the seed spread without the Monte-Carlo noise of the finite test set
        intr = [r for r in good if o == "eps_g" and r["std"] ** 2 > r["mc_se"] ** 2]
        fi = fit_power_law([r["d"] for r in intr], [math.sqrt(r["std"] ** 2 - r["mc_se"] ** 2) for r in intr],
                           [1.0 / math.sqrt(2 * (r["K"] - 1)) * r["std"] ** 2 / (r["std"] ** 2 - r["mc_se"] ** 2)
                            for r in intr])
        sign = ""
        if res:
            signs = {np.sign(r["bias"]) for r in res}
            sign = "+" if signs == {1.0} else "-" if signs == {-1.0} else "±"
        out.append(dict(model=model, init=init, omega=omega, alpha=alpha, teacher=teach, observable=o,
                        theory=rs[0]["theory"], d_min=min(ds), d_max=max(ds), n_d=len(ds),
                        fluct_C=fl["C"], fluct_gamma=fl["gamma"], fluct_gamma_err=fl["gamma_err"],
                        fluct_chi2=fl["chi2"], fluct_dof=fl["dof"], fluct_cov=fl["cov"],
                        bias_C=bi["C"], bias_gamma=bi["gamma"], bias_gamma_err=bi["gamma_err"],
                        bias_chi2=bi["chi2"], bias_dof=bi["dof"], bias_cov=bi["cov"],
                        bias_npts=bi["npts"], bias_sign=sign,
                        env_C=env["C"], env_gamma=env["gamma"], env_gamma_err=env["gamma_err"],
                        env_cov=env["cov"],
                        intr_gamma=fi["gamma"], intr_gamma_err=fi["gamma_err"], intr_npts=fi["npts"]))
    return out


def load_fits(path: str | os.PathLike) -> dict[tuple[str, str, float, str], dict[str, Any]]:
    """``fits.csv`` as ``{(model, init, alpha, observable): fit}`` (covariances as 2×2 arrays)."""
    out = {}
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            f: dict[str, Any] = dict(r)
            for c in _FIT_COLS:
                if c in ("model", "init", "teacher", "observable", "bias_sign"):
                    continue
                if c.endswith("_cov"):
                    f[c] = np.array([float(x) for x in r[c].split(";")]).reshape(2, 2)
                elif c in ("d_min", "d_max", "n_d", "fluct_dof", "bias_dof", "bias_npts", "intr_npts"):
                    f[c] = int(float(r[c]))
                else:
                    f[c] = float(r[c])
            out[(f["model"], f["init"], round(f["alpha"], 12), f["observable"])] = f
    return out


def tolerance(fit: Mapping[str, Any], d: float, K: int, u_theory: float = 0.0,
              k_se: float = 4.0, nsig_band: float = 2.0) -> float:
    """Finite-size tolerance for a K-seed mean at dimension ``d`` (used by the agreement tests)::

        tol = k_se · std_fit(d)/√K  +  B(d)  +  u_theory

    ``std_fit(d) = C_f d^{−γ_f}`` is the fluctuation power law (central value); ``B(d)`` the
    bias envelope: the power law fitted to ``|bias| + 2σ_b`` at every studied d (so it bounds
    resolved and unresolved biases alike), taken at its upper ``nsig_band``-σ band.
    """
    fl = dict(C=fit["fluct_C"], gamma=fit["fluct_gamma"], cov=fit["fluct_cov"])
    std = _band(fl, d, 0.0)
    b = _band(dict(C=fit["env_C"], gamma=fit["env_gamma"], cov=fit["env_cov"]), d, nsig_band)
    return k_se * std / math.sqrt(K) + b + u_theory


# --------------------------------------------------------------------------- outputs
_SUMMARY_COLS = ("model,init,omega,alpha,teacher,d,observable,theory,u_theory,K,mean,se,std,bias,"
                 "sigma_bias,resolved,mc_se,n_nonconverged,n_other_branch,mean_steps,mean_seconds").split(",")
_FIT_COLS = ("model,init,omega,alpha,teacher,observable,theory,d_min,d_max,n_d,fluct_C,fluct_gamma,"
             "fluct_gamma_err,fluct_chi2,fluct_dof,bias_C,bias_gamma,bias_gamma_err,bias_chi2,bias_dof,"
             "bias_npts,bias_sign,env_C,env_gamma,env_gamma_err,intr_gamma,intr_gamma_err,intr_npts,"
             "fluct_cov,bias_cov,env_cov").split(",")


def _write_csv(path: str, rows: Iterable[Mapping[str, Any]], cols: Sequence[str]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for r in rows:
            line = []
            for c in cols:
                v = r[c]
                if isinstance(v, np.ndarray):
                    v = ";".join(repr(float(x)) for x in v.reshape(-1))
                elif isinstance(v, float):
                    v = repr(v)
                line.append(str(v))
            w.writerow(line)


def _fmt_gamma(g: float, e: float) -> str:
    if not math.isfinite(g):
        return "—"
    return f"{g:.2f} ± {e:.2f}"


def markdown(fits: Sequence[Mapping[str, Any]], summary: Sequence[Mapping[str, Any]]) -> str:
    """Markdown tables: fitted exponents per point and observable, and the per-d data."""
    lines = ["| point | observable | theory | d range | γ_fluct (std ∝ d^-γ) | C_fluct | "
             "γ_bias (\\|bias\\| ∝ d^-γ) | C_bias | bias sign | resolved d's | γ_env (tolerance) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in fits:
        pt = Point(f["model"], f["init"], f["alpha"]).label
        fl = _fmt_gamma(f["fluct_gamma"], f["fluct_gamma_err"])
        if f["observable"] == "eps_g" and math.isfinite(f["intr_gamma"]):
            fl += f" (w/o MC noise: {_fmt_gamma(f['intr_gamma'], f['intr_gamma_err'])}, {f['intr_npts']} d's)"
        elif f["observable"] == "eps_g":
            fl += " (MC noise dominated)"
        lines.append(
            f"| {pt} | {LABELS[f['observable']]} | {f['theory']:.5g} | {f['d_min']}–{f['d_max']} | "
            f"{fl} | {f['fluct_C']:.3g} | "
            f"{_fmt_gamma(f['bias_gamma'], f['bias_gamma_err']) if f['bias_npts'] >= 3 else '—'} | "
            f"{f['bias_C']:.3g} | {f['bias_sign'] or '—'} | {f['bias_npts']}/{f['n_d']} | "
            f"{_fmt_gamma(f['env_gamma'], f['env_gamma_err'])} |")
    lines += ["", "| point | d | K | observable | theory ± u | mean ± SE | std | bias / σ_b | "
              "non-conv. | other branch |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary:
        pt = Point(r["model"], r["init"], r["alpha"]).label
        lines.append(
            f"| {pt} | {r['d']} | {r['K']} | {LABELS[r['observable']]} | {r['theory']:.5g} ± {r['u_theory']:.1g} | "
            f"{r['mean']:.5g} ± {r['se']:.2g} | {r['std']:.3g} | {r['bias'] / r['sigma_bias']:+.1f} | "
            f"{r['n_nonconverged']} | {r['n_other_branch']} |")
    return "\n".join(lines) + "\n"


def plot(fits: Sequence[Mapping[str, Any]], summary: Sequence[Mapping[str, Any]], path: str,
         rows: Sequence[tuple[str, str, float]] | None = None) -> None:
    """Log–log panels, one row per point (``rows``: (model, init, α) keys, default all) and
    one column per observable: |bias| (circles, filled where resolved, error bars σ_b), seed
    std (triangles), fitted power laws."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    pts = []
    for r in summary:
        k = (r["model"], r["init"], r["alpha"])
        if k not in pts and (rows is None or k in rows):
            pts.append(k)
    ncol = len(OBSERVABLES)
    fig, axes = plt.subplots(len(pts), ncol, figsize=(3.0 * ncol, 2.6 * len(pts)), squeeze=False)
    fitmap = {(f["model"], f["init"], f["alpha"], f["observable"]): f for f in fits}
    for i, k in enumerate(pts):
        for j, o in enumerate(OBSERVABLES):
            ax = axes[i, j]
            rs = sorted([r for r in summary if (r["model"], r["init"], r["alpha"]) == k and r["observable"] == o],
                        key=lambda r: r["d"])
            vals = [v for r in rs for v in (abs(r["bias"]), r["std"]) if math.isfinite(v) and v > 0]
            if not rs or not vals:
                ax.axis("off")
                continue
            d = np.array([r["d"] for r in rs], dtype=float)
            b = np.array([abs(r["bias"]) for r in rs])
            sb = np.array([r["sigma_bias"] for r in rs])
            res = np.array([r["resolved"] for r in rs], dtype=bool)
            st = np.array([r["std"] for r in rs])
            lo = np.minimum(sb, b * 0.7)  # keep log-scale error bars positive and readable
            ax.errorbar(d[res], b[res], yerr=[lo[res], sb[res]], fmt="o", color="C0", ms=4,
                        label="|mean−theory|")
            ax.errorbar(d[~res], b[~res], yerr=[lo[~res], sb[~res]], fmt="o", mfc="none", color="C0",
                        ms=4, label="|mean−theory| (unresolved)")
            ax.plot(d, st, "^", color="C1", ms=4, label="seed std")
            f = fitmap.get((k[0], k[1], k[2], o))
            dd = np.geomspace(d.min(), d.max(), 50)
            if f is not None and math.isfinite(f["bias_C"]) and f["bias_npts"] >= 3:
                ax.plot(dd, f["bias_C"] * dd ** -f["bias_gamma"], "-", color="C0", lw=1,
                        label=f"γ_b={f['bias_gamma']:.2f}±{f['bias_gamma_err']:.2f}")
            if f is not None and math.isfinite(f["env_C"]):
                ax.plot(dd, [_band(dict(C=f["env_C"], gamma=f["env_gamma"], cov=f["env_cov"]), x, 2.0)
                             for x in dd], ":", color="0.4", lw=1, label="tolerance envelope B(d)")
            if f is not None and math.isfinite(f["fluct_C"]):
                ax.plot(dd, f["fluct_C"] * dd ** -f["fluct_gamma"], "--", color="C1", lw=1,
                        label=f"γ_f={f['fluct_gamma']:.2f}±{f['fluct_gamma_err']:.2f}")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ticks = [t for t in (100, 200, 400, 800, 1600, 3200) if d.min() <= t <= d.max()] or list(d)
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(int(t)) for t in ticks])
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            th = rs[0]["theory"]
            ax.set_title(f"{Point(*k).label}: {LABELS[o]} (theory {th:.3g})", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6, loc="lower left")
            if i == len(pts) - 1:
                ax.set_xlabel("d", fontsize=8)
    fig.suptitle("Simulation vs replica theory at fixed α, ω = 0.3 (log–log)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def analyse(out: str, verbose: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Summary, fits, PNG and Markdown from ``out/runs.csv``."""
    rows = load_runs(os.path.join(out, "runs.csv"))
    if not rows:
        raise ValueError(f"no runs in {out}/runs.csv")
    summary = summarise(rows)
    fits = fit_all(summary)
    _write_csv(os.path.join(out, "summary.csv"), summary, _SUMMARY_COLS)
    _write_csv(os.path.join(out, "fits.csv"), fits, _FIT_COLS)
    with open(os.path.join(out, "finite_size.md"), "w") as fh:
        fh.write(markdown(fits, summary))
    keys = list(dict.fromkeys((r["model"], r["init"], r["alpha"]) for r in summary))
    main_pts = [(p.model, p.init, p.alpha) for p in parse_points(DEFAULT_POINTS)]
    main_pts += [("linear", "-", p[2]) for p in main_pts]
    first = [k for k in keys if k in main_pts] or keys
    plot(fits, summary, os.path.join(out, "finite_size.png"), first)
    rest = [k for k in keys if k not in first]
    if rest:
        plot(fits, summary, os.path.join(out, "finite_size_other.png"), rest)
    if verbose:
        bad = [r for r in summary if r["observable"] in ("eps_g",) and (r["n_nonconverged"] or r["n_other_branch"])]
        for r in bad:
            print(f"[finite_size] {Point(r['model'], r['init'], r['alpha']).label} d={r['d']}: "
                  f"{r['n_nonconverged']} non-converged and {r['n_other_branch']} other-branch run(s) "
                  "left out", file=sys.stderr)
        print(f"[finite_size] wrote summary.csv, fits.csv, finite_size.md, finite_size.png in {out}",
              file=sys.stderr)
    return summary, fits


# --------------------------------------------------------------------------- CLI
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _ints(s: str) -> list[int]:
    try:
        vals = [int(x) for x in s.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {s!r}")
    return vals


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m numerics.finite_size", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (runs.csv there is the resumable cache)")
    p.add_argument("--omega", type=float, default=0.3)
    p.add_argument("--points", default=DEFAULT_POINTS, help="init:alpha,... (default %(default)s)")
    p.add_argument("--ds", type=_ints, default=_ints(DEFAULT_DS), help="dimensions (default %s)" % DEFAULT_DS)
    p.add_argument("--seeds", type=_ints, default=_ints(DEFAULT_SEEDS),
                   help="seeds per d: one count, or one per d (default %s)" % DEFAULT_SEEDS)
    p.add_argument("--seed-start", type=int, default=0)
    p.add_argument("--teacher", choices=["normalized", "iid"], default="normalized",
                   help="Q* with column norm √d (ρ = σ² exactly; default) or iid N(0,1) as the paper")
    p.add_argument("--no-linear", action="store_true", help="skip the linear baseline")
    p.add_argument("--lam", type=float, default=0.01)
    p.add_argument("--sigma", type=float, default=0.5)
    p.add_argument("--n-test", type=int, default=50_000)
    p.add_argument("--lr", type=float, default=1.5,
                   help="GD step size (default %(default)s: the same minimum as the paper's 0.15, ~10x sooner)")
    p.add_argument("--max-steps", type=int, default=20_000)
    p.add_argument("--stop-grad", type=float, default=1e-6)
    p.add_argument("--tol-grad", type=float, default=3e-5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-runs", type=int, default=None, help="stop after this many new runs")
    p.add_argument("--analyse-only", action="store_true", help="no new runs: redo the analysis")
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from .simulate import validate

        points = parse_points(args.points)
        validate(omega=args.omega, lam=args.lam, sigma=args.sigma, n_test=args.n_test, steps=args.max_steps,
                 lr=args.lr)
        for d in args.ds:
            for p in points:
                validate(d=d, alpha=p.alpha)
        _seeds_per_d(args.ds, args.seeds)
        if args.threads < 1:
            raise ValueError(f"threads must be >= 1 (got {args.threads})")
        if not args.analyse_only:
            run_study(args.out, points, args.ds, args.seeds, omega=args.omega, seed_start=args.seed_start,
                      linear=not args.no_linear, teacher=args.teacher, lam=args.lam, sigma=args.sigma,
                      n_test=args.n_test, lr=args.lr, max_steps=args.max_steps, stop_grad=args.stop_grad,
                      tol_grad=args.tol_grad, threads=args.threads, max_runs=args.max_runs,
                      verbose=not args.quiet)
        analyse(args.out, verbose=not args.quiet)
    except ValueError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

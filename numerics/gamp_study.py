"""GAMP against its state evolution, gradient descent and the theory.

Two studies, each resumable (rows already in the CSV are skipped) and each writing the
CSV the slow tests read:

``trajectories``
    Plain (undamped) GAMP from prescribed overlaps against the time-indexed state
    evolution: the generated solver's saddle-point map iterated WITHOUT damping from
    GAMP's own initial overlaps (:func:`numerics.gamp.state_evolution`). One row per
    (point, d, seed, t) with GAMP's summary statistics and the state evolution's. The
    teacher is normalised (``ρ = σ²`` exactly, as in the theory) so that the measured
    spread is GAMP's own.
``fixed-points``
    Damped GAMP to its fixed point (the local prox on the paper's positional point, see
    :data:`FIXED_POINTS`) and full-batch GD (``numerics.simulate``, same seed,
    i.e. the same teacher and training set; step 1.5 until ``grad_norm ≤ 1e-8``) on the
    paper's iid teacher, with the theory's fixed point of the branch.

::

    python -m numerics.gamp_study trajectories --out docs/figures/gamp_state_evolution.csv \\
        --plot docs/figures/gamp_state_evolution.png
    python -m numerics.gamp_study fixed-points --out docs/figures/gamp_fixed_points.csv
    python -m numerics.gamp_study replicon-check --ds 600,1200,2400

``replicon-check`` measures GAMP's one-step fluctuation multiplier at its own fixed point
and compares it with the replicon (docs/explanation/replicon.md).
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

#: (name, omega, alpha, start (q, m, theta, V), iterations) of the trajectory study: a point
#: of each branch where the prox does not switch between minima along the trajectory (the
#: paper's semantic point; positional at omega = 0.6, since at the paper's omega = 0.3 the
#: positional prox switches, docs/explanation/gamp.md), started near (not at) the branch's fixed point.
TRAJECTORY_POINTS = {
    "semantic": (0.3, 2.0, (0.09, 0.02, 0.13, 10.0), 4),
    "positional": (0.6, 1.0, (0.028, 0.25, 0.01, 12.0), 4),
}
#: (name, omega, alpha, GAMP/GD init, theory branch, GAMP's local prox) of the fixed-point
#: study. The paper's semantic point (the prox never switches: global-minimum GAMP converges);
#: the paper's positional point, where the global minimiser switches on a set of positive
#: density (docs/explanation/replicon.md), with the local prox, whose fixed points are critical points of
#: the risk as GD's are; and omega = 0.6, alpha = 1 with the global-minimum prox, where
#: switching is rare but single samples near a switching surface still stop GAMP at finite d.
FIXED_POINTS = {
    "semantic": (0.3, 2.0, "semantic", "semantic", False),
    "positional": (0.3, 0.5, "positional", "positional", True),
    "positional_w06_global": (0.6, 1.0, "positional", "positional", False),
}
TRAJ_COLUMNS = ["point", "omega", "alpha", "d", "seed", "t", "q", "m", "theta", "V",
                "se_q", "se_m", "se_theta", "se_V"]
FP_COLUMNS = ["point", "omega", "alpha", "d", "seed", "gamp_q", "gamp_m", "gamp_theta", "gamp_eps_g",
              "gamp_train_loss", "gamp_grad_norm", "gamp_iterations", "gamp_converged", "gd_q", "gd_m",
              "gd_theta", "gd_eps_g", "gd_train_loss", "gd_grad_norm", "gd_converged", "theory_q",
              "theory_m", "theory_theta", "theory_eps_g"]


def _log(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def _done(path: str, keys: Sequence[str]) -> set[tuple]:
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return set()
    with open(path, newline="") as fh:
        return {tuple(r[k] for k in keys) for r in csv.DictReader(fh)}


def _append(path: str, columns: Sequence[str], rows: Sequence[dict]) -> None:
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns))
        if new:
            w.writeheader()
        for r in rows:
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})


# --------------------------------------------------------------------------- trajectories
def trajectory(point: str, d: int, seed: int) -> list[dict]:
    """Plain GAMP and the undamped state evolution from GAMP's initial overlaps."""
    from .gamp import GAMP, make_problem, model_spec, se_state, state_evolution, weights_with_overlaps

    omega, alpha, (q0, m0, th0, V0), T = TRAJECTORY_POINTS[point]
    spec = model_spec("attention", {"omega": omega})
    pr = make_problem(spec, alpha, d, seed, normalize_teacher=True)
    W0 = weights_with_overlaps(q0, m0, th0, pr, pr.streams.init)
    gamma = float(spec.gammas[0])
    res = GAMP(spec, pr, damping=0.0, multistart_every=1).run(W0, max_iter=T, C0=V0 / gamma, stop_residual=1e3)
    xs = state_evolution(spec, alpha, se_state(spec, res.trace[0]), T)
    mod = spec.module
    idx = {f: mod.FAMILIES[f][0] for f in ("q", "V", "m", "theta")}
    rows = []
    for t, rec in enumerate(res.trace[:T + 1]):
        x = xs[t] if t < len(xs) else np.full(len(mod.ORDER_PARAMETERS), np.nan)
        rows.append(dict(point=point, omega=omega, alpha=alpha, d=d, seed=seed, t=t,
                         q=rec["q"][0][0][0], m=rec["m"][0][0], theta=rec["theta"][0][0][0], V=rec["V"][0][0][0],
                         se_q=float(x[idx["q"]]), se_m=float(x[idx["m"]]), se_theta=float(x[idx["theta"]]),
                         se_V=float(x[idx["V"]])))
    return rows


def _run(kind: str, make_rows, columns: Sequence[str], out: str, points: Sequence[str], ds: Sequence[int],
         seeds: Sequence[int]) -> None:
    """Every (point, d, seed) not yet in ``out``: its rows appended as soon as they are computed."""
    done = _done(out, ["point", "d", "seed"])
    for point in points:
        for d, k in zip(ds, seeds):
            for s in range(k):
                if (point, str(d), str(s)) in done:
                    continue
                t0 = time.perf_counter()
                _append(out, columns, make_rows(point, d, s))
                _log(f"[{kind}] {point} d={d} seed={s}: {time.perf_counter() - t0:.1f}s")


def run_trajectories(out: str, points: Sequence[str], ds: Sequence[int], seeds: Sequence[int]) -> None:
    """The trajectory study (resumable)."""
    _run("trajectories", trajectory, TRAJ_COLUMNS, out, points, ds, seeds)


@dataclass
class Deviation:
    """RMS over seeds of GAMP − state evolution, per (point, d, t) and observable."""

    rms: dict[tuple[str, int, int], dict[str, float]]
    seeds: dict[tuple[str, int, int], int]


def deviations(path: str) -> Deviation:
    """RMS deviation ``sqrt(mean_seeds (GAMP − SE)²)`` per (point, d, t) for q, m, theta, V."""
    acc: dict[tuple[str, int, int], dict[str, list[float]]] = {}
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            key = (r["point"], int(r["d"]), int(r["t"]))
            e = acc.setdefault(key, {k: [] for k in ("q", "m", "theta", "V")})
            for k in e:
                e[k].append(float(r[k]) - float(r["se_" + k]))
    rms = {k: {o: float(np.sqrt(np.mean(np.square(v)))) for o, v in e.items()} for k, e in acc.items()}
    return Deviation(rms=rms, seeds={k: len(e["q"]) for k, e in acc.items()})


def scaling(path: str) -> list[dict]:
    """Least-squares exponent ``γ`` of ``RMS(d) ∝ d^{−γ}`` per (point, t, observable)."""
    dev = deviations(path)
    out = []
    groups: dict[tuple[str, int], list[int]] = {}
    for (p, d, t) in dev.rms:
        groups.setdefault((p, t), []).append(d)
    for (p, t), ds in sorted(groups.items()):
        if t == 0 or len(ds) < 3:
            continue
        ds = sorted(ds)
        for o in ("q", "m", "theta", "V"):
            y = np.array([dev.rms[(p, d, t)][o] for d in ds])
            if np.any(y <= 0):
                continue
            slope = np.polyfit(np.log(ds), np.log(y), 1)[0]
            out.append(dict(point=p, t=t, observable=o, gamma=-slope,
                            rms={d: dev.rms[(p, d, t)][o] for d in ds}))
    return out


def plot_trajectories(path: str, png: str, show_ds: Sequence[int] | None = None) -> None:
    """Both branches: the state evolution (line) and GAMP's median and 16-84 % range over seeds
    per d (robust to the rare seed that the unstable modes carry far by the last iteration)."""
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg",) and "inline" not in matplotlib.get_backend():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(csv.DictReader(open(path, newline="")))
    points = [p for p in TRAJECTORY_POINTS if any(r["point"] == p for r in rows)]
    obs = [("q", "q"), ("m", "m"), ("theta", r"$\theta$"), ("V", "V")]
    fig, axes = plt.subplots(len(points), 4, figsize=(13, 3.0 * len(points)), squeeze=False)
    ds = sorted({int(r["d"]) for r in rows})
    if show_ds is not None:
        ds = [d for d in ds if d in show_ds]
    colors = plt.cm.viridis(np.linspace(0.1, 0.85, len(ds)))
    for i, p in enumerate(points):
        pr = [r for r in rows if r["point"] == p]
        T = max(int(r["t"]) for r in pr)
        for j, (o, label) in enumerate(obs):
            ax = axes[i, j]
            se = {}
            for r in pr:
                se.setdefault(int(r["t"]), float(r["se_" + o]))
            ts = np.arange(T + 1)
            ax.plot(ts, [se[t] for t in ts], "k-", lw=1.5, label="state evolution", zorder=3)
            for c, d in zip(colors, ds):
                vals = np.array([[float(r[o]) for r in pr if int(r["d"]) == d and int(r["t"]) == t] for t in ts],
                                dtype=object)
                med = np.array([np.median(v) for v in vals])
                lo = np.array([np.quantile(v, 0.16) for v in vals])
                hi = np.array([np.quantile(v, 0.84) for v in vals])
                off = (list(ds).index(d) - (len(ds) - 1) / 2) * 0.08
                ax.errorbar(ts + off, med, yerr=[med - lo, hi - med], fmt="o", ms=3.5, color=c, capsize=2,
                            label=f"GAMP d={d} ({len(vals[0])} seeds)")
            ax.set_title(f"{p} (ω={pr[0]['omega']}, α={pr[0]['alpha']}): {label}", fontsize=9)
            ax.set_xlabel("iteration t")
            if j == 0:
                ax.legend(fontsize=7)
    fig.suptitle("Plain GAMP vs the undamped state evolution from GAMP's initial overlaps "
                 "(GAMP: median and 16-84 % range over seeds)", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------- fixed points
def fixed_point_row(point: str, d: int, seed: int, gd: bool = True) -> dict:
    """Damped GAMP, GD on the same data, and the theory at one fixed-point study point."""
    from replica.registry import load_module
    from replica.numeric.solver import Solver

    from .gamp import run_gamp_seed
    from .simulate import run_attention_seed

    omega, alpha, init, branch, local = FIXED_POINTS[point]
    g = run_gamp_seed("attention", seed, alpha=alpha, d=d, init=init, parameters={"omega": omega},
                      damping=0.8, max_iter=3000, n_test=20_000, local_prox=local,
                      normalize_teacher=False)  # the paper's iid teacher, as the committed study
    row: dict[str, Any] = dict(point=point, omega=omega, alpha=alpha, d=d, seed=seed, gamp_q=g["q"], gamp_m=g["m"],
                               gamp_theta=g["theta"], gamp_eps_g=g["eps_g"], gamp_train_loss=g["train_loss"],
                               gamp_grad_norm=g["grad_norm"], gamp_iterations=g["iterations"],
                               gamp_converged=g["converged"])
    if gd:
        s = run_attention_seed(seed, omega=omega, alpha=alpha, d=d, init=init, lr=1.5, steps=40_000,
                               stop_grad=1e-8, tol_grad=1e-6, n_test=20_000, normalize_teacher=False)
        row.update(gd_q=s["q"], gd_m=s["m"], gd_theta=s["theta"], gd_eps_g=s["eps_g"],
                   gd_train_loss=s["train_loss"], gd_grad_norm=s["grad_norm"], gd_converged=s["converged"])
    fp = Solver(load_module("attention"), {"omega": omega}, branch=branch).solve(alpha)
    row.update(theory_q=fp.order["q"], theory_m=fp.order["m"], theory_theta=fp.order["theta"],
               theory_eps_g=fp.eps_g)
    return row


def run_fixed_points(out: str, points: Sequence[str], ds: Sequence[int], seeds: Sequence[int]) -> None:
    """The fixed-point study (resumable)."""
    _run("fixed-points", lambda p, d, s: [fixed_point_row(p, d, s)], FP_COLUMNS, out, points, ds, seeds)


def fixed_point_table(path: str) -> str:
    """Markdown summary of the fixed-point CSV per (point, d): GAMP runs converged, their
    largest gradient, RMS over seeds of GAMP − GD (same data) and of GAMP − theory for q, m, θ."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["point"], int(r["d"])), []).append(r)
    obs = ("q", "m", "theta")
    lines = ["| point | d | GAMP converged | max grad (converged) | RMS GAMP−GD q, m, θ | RMS GAMP−theory q, m, θ |",
             "|---|---|---|---|---|---|"]
    order = {p: k for k, p in enumerate(FIXED_POINTS)}
    for (point, d), rs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])):
        conv = [r for r in rs if r["gamp_converged"] == "True"]
        grad = max((float(r["gamp_grad_norm"]) for r in conv), default=math.nan)

        def rms(a: str, b: str) -> str:
            return ", ".join(f"{math.sqrt(np.mean([(float(r[a + o]) - float(r[b + o])) ** 2 for r in rs])):.1e}"
                             for o in obs)
        lines.append(f"| {point} | {d} | {len(conv)}/{len(rs)} | {grad:.1e} | {rms('gamp_', 'gd_')} | "
                     f"{rms('gamp_', 'theory_')} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- replicon check
def replicon_check(d: int, seed: int = 0, probes: int = 20, omega: float = 0.3, alpha: float = 2.0) -> dict:
    """GAMP's one-step fluctuation multiplier at its own fixed point against the replicon.

    Converges damped GAMP (semantic start), then propagates ``probes`` random perturbations
    ``Z`` orthogonal to ``Ŵ``, ``Q*`` and ``p_1`` through one linearised iteration,
    ``δŴ = J (Fᵀ G F Z + A Z)`` (``G = ∂g/∂ω`` per sample at the fixed point, ``J = (λ + A)⁻¹``),
    and compares ``|δŴ|²/|Z|²`` (the fluctuation ratio ``Ψ'/Ψ``) with
    :func:`replica.numeric.stability.replicon` at GAMP's own overlaps.
    """
    from replica.numeric.stability import replicon

    from .gamp import GAMP, make_problem, model_spec, overlaps

    spec = model_spec("attention", {"omega": omega})
    pr = make_problem(spec, alpha, d, seed, normalize_teacher=False)  # iid, as the committed study
    g = GAMP(spec, pr, damping=0.8)
    res = g.run("semantic", max_iter=3000)
    W, V, n, L = res.W, res.V, pr.n, spec.L
    h = g.fields(W)
    _, grad = g.out.loss(h, pr.hstar, pr.noise)
    omega_ = h + np.einsum("lrs,nls->nlr", V, grad)          # ω = h − V g with g = −∇ℓ(h)
    _, dg, _, _ = g.out(omega_, V, pr.hstar, pr.noise)
    A = pr.c.T @ (-np.stack([dg[:, l, l] for l in range(L)], axis=1).sum(axis=0))
    lam = float(spec.Lambda[0, 0])
    J = 1.0 / (lam + A)
    Qb, _ = np.linalg.qr(np.stack([W[:, 0], pr.Qstar[:, 0], pr.P[0]], axis=1))
    rng = np.random.default_rng(seed + 1)
    ratios = []
    for _ in range(probes):
        Z = rng.standard_normal(pr.d)
        Z -= Qb @ (Qb.T @ Z)
        dom = (pr.F @ Z).reshape(n, L)
        dW = J * (pr.F.T @ np.einsum("nab,nb->na", dg, dom).reshape(-1) + A * Z)
        dW -= Qb @ (Qb.T @ dW)
        ratios.append(float(dW @ dW) / float(Z @ Z))
    ov = overlaps(W, pr)
    x = np.array([ov["q"][0, 0, 0], V[0, 0, 0], ov["m"][0, 0], ov["theta"][0, 0, 0]])
    rep = replicon(spec.module, x, alpha, {"omega": omega}, switching_samples=0)
    return dict(d=d, seed=seed, converged=res.converged, ratio=float(np.mean(ratios)),
                ratio_se=float(np.std(ratios, ddof=1) / math.sqrt(probes)), replicon=rep.value,
                replicon_error=rep.error)


# --------------------------------------------------------------------------- CLI
def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m numerics.gamp_study", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    pt = sub.add_parser("trajectories", help="plain GAMP vs the undamped state evolution")
    pt.add_argument("--out", required=True)
    pt.add_argument("--plot", default=None, help="PNG of both trajectories")
    pt.add_argument("--points", default="semantic,positional")
    pt.add_argument("--ds", type=_ints, default=[1000, 2000, 4000, 8000])
    pt.add_argument("--seeds", type=_ints, default=[12, 10, 6, 3])
    pf = sub.add_parser("fixed-points", help="damped GAMP vs GD vs theory at fixed points")
    pf.add_argument("--out", required=True)
    pf.add_argument("--points", default="semantic,positional,positional_w06_global")
    pf.add_argument("--ds", type=_ints, default=[500, 1000, 2000])
    pf.add_argument("--seeds", type=_ints, default=[4, 4, 3])
    pr_ = sub.add_parser("replicon-check", help="GAMP's fluctuation multiplier vs the replicon")
    pr_.add_argument("--ds", type=_ints, default=[600, 1200, 2400])
    pr_.add_argument("--seeds", type=_ints, default=[1, 1, 1])
    args = p.parse_args(argv)
    if args.command == "replicon-check":
        for d, k in zip(args.ds, args.seeds):
            for s in range(k):
                r = replicon_check(d, s)
                print(f"d={d} seed={s}: one-step ratio {r['ratio']:.4f} ± {r['ratio_se']:.4f}, replicon at "
                      f"GAMP's overlaps {r['replicon']:.4f} ± {r['replicon_error']:.4f} (converged {r['converged']})",
                      flush=True)
        return 0
    if len(args.ds) != len(args.seeds):
        print(f"{p.prog}: error: --ds and --seeds need the same length", file=sys.stderr)
        return 2
    points = [x for x in args.points.split(",") if x]
    table = TRAJECTORY_POINTS if args.command == "trajectories" else FIXED_POINTS
    bad = [x for x in points if x not in table]
    if bad:
        print(f"{p.prog}: error: points: unknown {bad}; choose from {list(table)}", file=sys.stderr)
        return 2
    if args.command == "trajectories":
        run_trajectories(args.out, points, args.ds, args.seeds)
        if args.plot:
            plot_trajectories(args.out, args.plot)
        for s in scaling(args.out):
            print(f"{s['point']:<11} t={s['t']} {s['observable']:<6} RMS ~ d^-{s['gamma']:.2f}  "
                  + " ".join(f"{d}:{v:.2e}" for d, v in s["rms"].items()))
    else:
        run_fixed_points(args.out, points, args.ds, args.seeds)
        print(fixed_point_table(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Theory against simulation for any declared model: the engine of ``replica check``.

:func:`run_check` solves the replica-symmetric theory at one point exactly as ``replica solve``
does (values, error bars, the replicon), simulates the model from its own declaration
(:class:`numerics.problem.Problem`) at several dimensions ``d`` and seeds, extrapolates every
quantity linearly in ``1/d`` by weighted least squares (weights ``1/se^2``, ``se`` the standard
error of the seed mean at each ``d``), and gives a verdict per quantity::

    z = (simulation - theory) / sqrt(simulation_error^2 + theory_error^2),   agrees = |z| <= 3

``simulation`` is the extrapolation's intercept and ``simulation_error`` its standard error (with a
single ``d``: the seed mean there and its standard error); the standard error at each ``d`` pools the
seed spread of all dimensions (:func:`seed_statistics`). Reported per quantity, besides the
contract's keys (``theory``, ``theory_error``, ``simulation``, ``simulation_error``, ``z``,
``agrees``, ``per_d``): the fitted ``slope`` (per unit ``1/d``) with its error and ``chi2`` of the fit
(``dof`` degrees of freedom). A slope more than 3 standard errors from 0 is a *finite-size drift*
and is named in ``notes``, as are a replica-symmetry-unstable theory (replicon >= 1), a branch the
theory did not find, and runs whose minimiser did not converge.
"""
from __future__ import annotations

import math
import sys
import time
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

__all__ = ["AGREE_Z", "theory", "check_theory_result", "seed_statistics", "extrapolate", "verdict", "quantity_names", "run_check",
           "format_table", "plot", "limited_threads", "REASONS"]

#: a quantity agrees when |z| is at most this many combined standard errors
AGREE_Z = 3.0
#: why a number of ``replica check --json`` can be null
REASONS = {
    "z": "no finite combined standard error (the simulation and the theory both have a zero error bar and differ)",
    "theory": "the theory does not report this quantity at this point",
    "theory_error": "the theory reports no error bar for this quantity",
    "slope": "one dimension only: nothing to extrapolate",
    "slope_error": "one dimension only: nothing to extrapolate",
    "chi2": "fewer dimensions than fitted coefficients + 1",
}


def theory(module, parameters: Mapping[str, float], alpha: float, branch: str | None,
           replicon: bool = True, quadrature: str | None = None, error_bars: bool = True,
           options=None, solver=None) -> dict[str, Any]:
    """``replica solve MODEL --alpha A --branch B [--quadrature RULE] --json`` in process, through the
    one pipeline (:func:`replica.numeric.point.solve_point`): the fixed point from the CLI's cold
    starts, its error bars (one refinement, checked against 1e-3), the replicon and its bar, the
    companion rule's residual. ``options``: every option of ``replica solve`` at once (a
    :class:`~replica.numeric.point.PointOptions`; then ``branch``, ``replicon``, ``quadrature`` and
    ``error_bars`` are its own); ``error_bars=False`` skips the bars (their refinement and jump check
    take minutes for the six-dimensional models): no ``errors`` in the result."""
    from replica.numeric.point import PointOptions, solve_point

    if options is None:
        options = PointOptions(branch=branch, quadrature=quadrature or "auto", replicon=replicon,
                               error_bars=error_bars)
    return solve_point(module, dict(parameters), alpha, options, solver=solver).result


def check_theory_result(th: Mapping[str, Any], model: str, alpha: float, branch: str | None,
                        params: Mapping[str, float]) -> None:
    """Refuse (:class:`replica.errors.ParameterError` naming ``theory``) a ``replica solve --json`` result
    that is not of this point: another alpha, branch or parameter value, or not converged."""
    from replica.errors import ParameterError

    if not isinstance(th, Mapping) or "order_parameters" not in th or "alpha" not in th:
        raise ParameterError("theory", "not a replica solve --json result (no alpha / order_parameters)")
    if not th.get("converged"):
        raise ParameterError("theory", "the given result is not converged")
    if not math.isclose(float(th["alpha"]), float(alpha), rel_tol=1e-12, abs_tol=1e-15):
        raise ParameterError("theory", f"the given result is at alpha = {th['alpha']:g}, the check at {alpha:g}")
    if (th.get("branch") or "free") != (branch or "free"):
        raise ParameterError("theory", f"the given result is on branch {th.get('branch')}, the check on "
                                       f"{branch or 'free'}")
    given = th.get("parameters") or {}
    for k, v in params.items():
        if k not in given or not math.isclose(float(given[k]), float(v), rel_tol=1e-12, abs_tol=1e-15):
            raise ParameterError("theory", f"the given result has {k} = {given.get(k)}, the check {v:g} "
                                           f"(model {model})")


def extrapolate(ds: Sequence[int], means: Sequence[float], ses: Sequence[float]) -> dict[str, float | None]:
    """Weighted least squares of ``mean = a + b / d`` (weights ``1/se^2``): the intercept ``a`` with
    its standard error, the slope ``b`` with its, and ``chi2`` with ``dof``. One ``d``: ``a`` is the
    mean there. A zero standard error (a quantity equal on every seed) is floored at 1e-12 relative."""
    x = 1.0 / np.asarray(ds, dtype=float)
    y = np.asarray(means, dtype=float)
    se = np.asarray(ses, dtype=float)
    se = np.maximum(se, 1e-12 * np.maximum(1.0, np.abs(y)))
    if len(set(ds)) < 2:
        return {"value": float(y[0]), "error": float(se[0]), "slope": None, "slope_error": None, "chi2": None,
                "dof": 0}
    A = np.stack([np.ones_like(x), x], axis=1)
    w = 1.0 / se ** 2
    cov = np.linalg.inv(A.T @ (A * w[:, None]))
    beta = cov @ (A.T @ (w * y))
    resid = (y - A @ beta) / se
    dof = len(y) - 2
    return {"value": float(beta[0]), "error": float(math.sqrt(cov[0, 0])), "slope": float(beta[1]),
            "slope_error": float(math.sqrt(cov[1, 1])), "chi2": float(resid @ resid) if dof > 0 else None,
            "dof": dof}


def seed_statistics(samples: Mapping[int, np.ndarray]) -> list[dict[str, float]]:
    """``per_d``: the seed mean at every ``d`` and its standard error.

    ``se_seeds`` is the plain ``std / sqrt(K)`` of the ``K`` seeds at that ``d``; with a handful of
    seeds it is itself uncertain by tens of percent, and a chance small value makes the weighted fit
    overconfident. The seed spread of a self-averaging quantity scales as ``d^(-1/2)``, so all runs
    together estimate it better: ``c^2 = sum_d d sum_k (x_dk - mean_d)^2 / sum_d (K_d - 1)`` and the
    pooled ``sqrt(c^2 / (d K))``. ``se`` is the larger of the two (the plain one also covers what does
    not shrink with ``d``, e.g. the test samples' Monte-Carlo error)."""
    dof = sum(len(v) - 1 for v in samples.values())
    c2 = sum(d * float(np.sum((v - v.mean()) ** 2)) for d, v in samples.items()) / dof if dof > 0 else math.nan
    out = []
    for d, v in samples.items():
        raw = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan
        pooled = math.sqrt(c2 / (d * v.size)) if math.isfinite(c2) else math.nan
        out.append({"d": int(d), "mean": float(v.mean()), "se": max(raw, pooled), "se_seeds": raw})
    return out


def verdict(per_d: Sequence[Mapping[str, float]], theory_value: float | None, theory_error: float | None
            ) -> dict[str, Any]:
    """The entry of one quantity in ``quantities``: the extrapolation of ``per_d`` (``[{"d", "mean",
    "se"}, ...]``) held against ``theory_value`` ± ``theory_error`` (module docstring)."""
    ex = extrapolate([p["d"] for p in per_d], [p["mean"] for p in per_d], [p["se"] for p in per_d])
    sim, err = ex["value"], ex["error"]
    th_err = 0.0 if theory_error is None or not math.isfinite(theory_error) else float(theory_error)
    z: float | None = None
    agrees: bool | None = None
    if theory_value is not None and math.isfinite(theory_value):
        diff = sim - float(theory_value)
        comb = math.sqrt(err ** 2 + th_err ** 2)
        if comb > 0:
            z = diff / comb
        elif diff == 0:
            z = 0.0
        agrees = z is not None and abs(z) <= AGREE_Z
    return {"theory": theory_value, "theory_error": theory_error, "simulation": sim, "simulation_error": err,
            "z": z, "agrees": agrees, "per_d": [dict(p) for p in per_d], "slope": ex["slope"],
            "slope_error": ex["slope_error"], "chi2": ex["chi2"], "dof": ex["dof"]}


def quantity_names(problem, branch: str | None) -> tuple[list[tuple[str, bool]], list[str]]:
    """``([(name, is an order-parameter quantity), ...], notes)``: what is compared. The order
    parameters' quantities (:meth:`numerics.problem.Problem.order_families`: entries, or rotation
    invariants), not those that are zero by construction (``m`` without encodings; a family the branch
    pins); every observable; the training loss."""
    pinned = set(problem.pinned(branch))
    notes = []
    out: list[tuple[str, bool]] = []
    skipped = set()
    for name, fams in problem.order_families().items():
        hit = [f for f in fams if f in pinned]
        if hit:
            skipped.add(f"{name} ({hit[0]} pinned to 0 on branch {branch})")
            continue
        if "m" in fams and not problem.has_encodings:
            skipped.add(f"{name} (no positional encodings: m = 0 by construction)")
            continue
        out.append((name, True))
    if skipped:
        notes.append("not compared: " + "; ".join(sorted(skipped)))
    if problem.rotation_free:
        notes.append("the loss is invariant under rotations of the student's field columns: compared are the "
                     "rotation invariants of token 1's order parameters (q's eigenvalues, theta^T theta, ...)")
    out += [(o.name, False) for o in problem.observables]
    out.append(("train_loss", False))
    return out, notes


def _theory_value(th: Mapping[str, Any], name: str, order: bool, problem) -> tuple[float | None, float | None]:
    errors = th.get("errors") or {}
    if order:
        values = problem.order_quantities(th["order_parameters"])
        bars = problem.order_quantity_errors(th["order_parameters"], errors.get("order_parameters") or {})
        return values.get(name), bars.get(name)
    v = th.get(name)
    return (float(v) if isinstance(v, (int, float)) else None, errors.get(name))


def run_check(model: str, alpha: float, *, parameters: Mapping[str, float] | None = None, branch: str | None = None,
              ds: Sequence[int] = (200, 400, 800), seeds: int = 4, seed0: int = 0, n_test: int = 100_000,
              tol: float | None = None, max_iter: int = 20000, device: str = "cpu", constrain: bool = True,
              replicon: bool = True, threads: int = 1, theory_result: Mapping[str, Any] | None = None,
              quadrature: str | None = None, theory_bars: bool = True,
              progress: Callable[[str], None] | None = None, spectrum=None, module=None, options=None,
              solver=None) -> dict[str, Any]:
    """Theory against simulation for ``model`` (a declared name or a path to a ``.py`` file) at
    ``alpha``: the ``replica check`` result (module docstring; keys listed in docs/how-to/check.md).
    ``threads``: BLAS and torch threads of the simulation (default 1: its linear algebra is small,
    and on a shared machine more threads spin-wait; 800 x 800 Cholesky solves ran 10x slower on 2).
    ``theory_result``: a ``replica solve --json`` result of this very point to use instead of solving
    (:func:`check_theory_result` checks that it is); ``quadrature``: the solve's energetic rule
    (``replica solve --quadrature``; default ``auto``); ``theory_bars=False``: solve without error bars.
    ``spectrum``: a :class:`replica.numeric.spectrum.Spectrum` for a GLM on structured data (``replica solve
    --spectrum``; simulated by :class:`numerics.structured.SpectralProblem` at ``d`` = its number of modes).
    ``module``: the generated model, loaded once by the caller (on the spectrum's data law when
    ``spectrum`` is given); ``options``, ``solver``: the theory's
    :class:`~replica.numeric.point.PointOptions` and the solver built from them (``replica check``
    passes its flags'), else those of ``replica solve`` with ``quadrature``, ``replicon`` and
    ``theory_bars``."""
    from replica.registry import load_model, load_module

    from .problem import DEFAULT_TOL, Problem

    say = progress or (lambda line: None)
    t0 = time.perf_counter()
    given = module is not None
    module = module if given else load_module(model)
    decl = load_model(model)
    if spectrum is None:
        problem = Problem(decl, module, parameters)
    else:
        from replica.errors import ParameterError
        from replica.registry.spectral import gcm_module

        from .structured import SpectralProblem

        if any(int(d) != spectrum.N for d in ds):
            raise ParameterError("d", f"a spectrum of {spectrum.N} modes is simulated at d = {spectrum.N}, "
                                      f"got {', '.join(str(int(d)) for d in ds)}")
        if not given:
            module = gcm_module(module, spectrum)
        problem = SpectralProblem(decl, module, parameters, spectrum)
    from replica.errors import ParameterError

    from .simulate import check_memory

    try:
        check_memory(d=max(ds), alpha=alpha, L=problem.L)
    except ValueError as exc:
        raise ParameterError("d", str(exc)) from None
    from .deps import require

    for package, what in problem.requirements(branch):   # before any work: one line if missing
        require(package, what)
    params = {k: problem.values[k] for k in module.PARAMETERS}
    if theory_result is not None:
        check_theory_result(theory_result, module.MODEL, alpha, branch, params)
        th = dict(theory_result)
        say("theory: from the given replica solve result")
    else:
        say(f"theory: {module.MODEL} alpha={alpha:g} branch={branch or 'free'} (replica solve)")
        th = theory(module, params, alpha, branch, replicon=replicon, quadrature=quadrature, error_bars=theory_bars,
                    options=options, solver=solver)
    say(f"theory: converged, {th.get('seconds', 0.0):.1f} s"
        + (f"; replicon {th['replicon']:.3g} (RS {'stable' if th['rs_stable'] else 'UNSTABLE'})"
           if th.get("replicon") is not None else ""))
    names, notes = quantity_names(problem, branch)
    runs: list[dict[str, Any]] = []
    with limited_threads(threads):
        _simulate(problem, alpha, ds, seeds, seed0, branch, runs, say, n_test=n_test, tol=tol or DEFAULT_TOL,
                  max_iter=max_iter, device=device, constrain=constrain)
    quantities: dict[str, Any] = {}
    for name, order in names:
        samples = {d: np.array([r["values"][name] for r in runs if r["d"] == d], dtype=float) for d in ds}
        if not all(np.all(np.isfinite(v)) for v in samples.values()):
            notes.append(f"{name}: not measured (it depends on V, which the weights do not give)")
            continue
        per_d = seed_statistics(samples)
        tv, te = _theory_value(th, name, order, problem)
        quantities[name] = verdict(per_d, tv, te)
    for name, q in quantities.items():
        if q["slope"] is not None and q["slope_error"] and abs(q["slope"]) > AGREE_Z * q["slope_error"]:
            notes.append(f"{name}: finite-size drift (slope {q['slope']:+.3g} per unit 1/d, "
                         f"{abs(q['slope']) / q['slope_error']:.1f} standard errors from 0)")
    if th.get("rs_stable") is False:
        why = (f"replicon {th['replicon']:.3g} >= 1" if th.get("replicon") is not None and th["replicon"] >= 1
               else "the prox switches between minima" if th.get("replicon_switching") else "see replica solve")
        notes.append(f"the theory is replica-symmetry UNSTABLE here ({why}): its values need not describe the "
                     "minimiser, whatever the verdicts")
    if not th.get("errors"):
        notes.append("the theory has no error bars here (not computed): each verdict rests on the simulation's "
                     "standard error alone")
    if th.get("accuracy_met") is False:
        notes.append("the theory's error bars are above 1e-3 relative on some numbers (replica solve's notes: "
                     + "; ".join(n for n in th.get("notes", []) if "NOT met" in n)[:200] + ")")
    if th.get("branch_found") is False:
        notes.append(f"the theory did not find branch {branch}: the solve landed on another branch's solution")
    bad = [r for r in runs if not r["converged"]]
    if bad:
        notes.append(f"{len(bad)} of {len(runs)} runs did not converge (residual up to "
                     f"{max(r['grad_norm'] for r in bad):.1e}); their values are included")
    for r in runs:
        for n in r["notes"]:
            if n not in notes:
                notes.append(n)
    agrees = all(q["agrees"] for q in quantities.values() if q["agrees"] is not None)
    return {"model": module.MODEL, "alpha": float(alpha), "branch": branch or "free", "parameters": params,
            "d": [int(d) for d in ds], "seeds": int(seeds), "seed0": int(seed0), "n_test": int(n_test),
            "device": str(device), "agrees": bool(agrees), "converged": not bad,
            "quantities": quantities,
            "theory": {k: th.get(k) for k in ("converged", "branch_found", "accuracy_met", "replicon", "rs_stable",
                                              "replicon_switching", "seconds", "notes") if k in th},
            "solver": sorted({r["solver"].split(":")[0] for r in runs}),
            "runs": [{k: r[k] for k in ("d", "seed", "n", "converged", "grad_norm", "iterations", "seconds", "values")}
                     for r in runs],
            "notes": notes, "seconds": time.perf_counter() - t0}


def _simulate(problem, alpha, ds, seeds, seed0, branch, runs, say, **options) -> None:
    total = len(ds) * seeds
    for d in ds:
        for k in range(seeds):
            res = problem.run(alpha, d, seed0 + k, branch, **options)
            runs.append(res)
            say(f"d={d} seed {seed0 + k} ({len(runs)}/{total}): {res['solver'].split(':')[0]}, "
                f"{'converged' if res['converged'] else 'NOT converged'} (residual {res['grad_norm']:.1e}), "
                f"{res['seconds']:.1f} s")


@contextmanager
def limited_threads(n: int) -> Iterator[None]:
    """BLAS (threadpoolctl, where installed) and torch intra-op threads limited to ``n`` meanwhile."""
    with ExitStack() as stack:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            pass
        else:
            stack.enter_context(threadpool_limits(n))
        torch = sys.modules.get("torch")
        if torch is None:
            try:
                import torch
            except ImportError:
                torch = None
        if torch is not None:
            old = torch.get_num_threads()
            torch.set_num_threads(n)
            stack.callback(torch.set_num_threads, old)
        yield


def _fmt(v: float | None, prec: int = 6) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{prec}g}"


def format_table(res: Mapping[str, Any]) -> str:
    """The text table of a :func:`run_check` result (one row per quantity)."""
    params = "  ".join(f"{k}={v:g}" for k, v in res["parameters"].items())
    ds = ",".join(str(d) for d in res["d"])
    lines = [f"{res['model']}  alpha={res['alpha']:g}  branch={res['branch']}  {params}",
             f"simulation: d = {ds}, {res['seeds']} seeds each, {res['n_test']} test samples per seed; "
             f"{', '.join(res['solver'])}",
             f"simulation: extrapolated linearly in 1/d; agrees = within {AGREE_Z:g} combined standard errors", ""]
    head = f"{'quantity':<22} {'theory':>13} {'± err':>8} {'simulation':>13} {'± se':>8} {'z':>6}  verdict"
    per_d_head = "".join(f"  {'d=' + str(d):>14}" for d in res["d"])
    lines.append(head + per_d_head)
    for name, q in res["quantities"].items():
        z = "n/a" if q["z"] is None else f"{q['z']:+.1f}"
        v = {True: "agrees", False: "DISAGREES", None: "no theory"}[q["agrees"]]
        cells = "".join(f"  {_fmt(p['mean'], 6):>14}" for p in q["per_d"])
        lines.append(f"{name:<22} {_fmt(q['theory'], 7):>13} {_fmt(q['theory_error'], 1):>8} "
                     f"{_fmt(q['simulation'], 7):>13} {_fmt(q['simulation_error'], 2):>8} {z:>6}  {v:<9}" + cells)
    th = res["theory"]
    if th.get("replicon") is not None:
        why = " (the prox switches between minima)" if th.get("replicon_switching") and th["replicon"] < 1 else ""
        lines.append(f"\nreplicon {th['replicon']:.4g}: RS {'stable' if th['rs_stable'] else 'UNSTABLE' + why}")
    lines.append(f"\nverdict: {'every quantity agrees' if res['agrees'] else 'some quantity DISAGREES'}"
                 f"{'' if res['converged'] else ' (and some runs did not converge)'}")
    for n in res["notes"]:
        lines.append(f"note: {n}")
    return "\n".join(lines)


def plot(res: Mapping[str, Any], path: str) -> None:
    """Value against ``1/d`` for every quantity: seed means with standard errors, the weighted fit
    and its intercept at ``1/d = 0``, the theory as a line (with its error band)."""
    from .deps import require

    require("matplotlib", "replica check --plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    qs = list(res["quantities"].items())
    cols = min(3, len(qs))
    rows = math.ceil(len(qs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    xmax = max(1.0 / d for d in res["d"]) * 1.1
    for ax, (name, q) in zip(axes.flat, qs):
        x = [1.0 / p["d"] for p in q["per_d"]]
        ax.errorbar(x, [p["mean"] for p in q["per_d"]], yerr=[p["se"] for p in q["per_d"]], fmt="o", ms=4,
                    capsize=3, label="simulation")
        if q["slope"] is not None:
            xs = np.linspace(0.0, xmax, 20)
            ax.plot(xs, q["simulation"] + q["slope"] * xs, "-", lw=0.8, color="C0")
        ax.errorbar([0.0], [q["simulation"]], yerr=[q["simulation_error"]], fmt="s", ms=4, color="C0", capsize=3)
        if q["theory"] is not None:
            ax.axhline(q["theory"], color="C3", lw=1.2, label="theory")
            if q["theory_error"]:
                ax.axhspan(q["theory"] - q["theory_error"], q["theory"] + q["theory_error"], color="C3", alpha=0.2)
        verdict_ = {True: "agrees", False: "DISAGREES", None: ""}[q["agrees"]]
        ax.set_title(f"{name}  ({verdict_}{'' if q['z'] is None else f', z = {q[chr(122)]:+.1f}'})", fontsize=9)
        ax.set_xlabel("1/d")
        ax.set_xlim(-0.05 * xmax, xmax)
    for ax in list(axes.flat)[len(qs):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"{res['model']}  alpha={res['alpha']:g}  branch={res['branch']}", fontsize=10)
    fig.tight_layout()
    from replica.artifacts.outputs import atomic_write

    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format=path.rsplit(".", 1)[-1] if "." in path else "png", dpi=120)
    plt.close(fig)


def progress(line: str) -> None:
    print(f"replica check: {line}", file=sys.stderr, flush=True)

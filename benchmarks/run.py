"""Benchmarks of the generated solver (issue 9): ``python -m benchmarks`` or ``python benchmarks/run.py``.

Every figure is measured in the same run, and every ratio is against a baseline measured in
that run. Sections (``--only`` selects some):

``iteration``
    One fixed-point update at the paper's point (omega = 0.3, alpha = 2, semantic branch,
    default quadrature: Gauss-Hermite 14^4 = 38 416 nodes), cold (every start at every
    node): the generated solver (numba and numpy backends) against the notebook-style
    baseline of :mod:`benchmarks.notebook_baseline` (hand-typed equations, per-node
    ``scipy.optimize.minimize`` from the same starts, Python loops). The baseline is timed
    on an evenly spaced subset of the same nodes and extrapolated per node to all 38 416
    (it would take minutes); both are first checked to give the same map output to 1e-6
    on a small tensor rule (an assertion). A warm-started iteration (what ``Solver.solve``
    runs between its multistart checks) is reported too.
``point``
    One converged point (omega = 0.3, alpha = 2, semantic, default quadrature), cold (from
    the generic initial state) and warm (``x0`` = the fixed point at alpha = 2.1, the
    solver's minimisers from that solve), per backend; and the first solve in a fresh
    process (imports and numba's on-disk cache included).
``phase``
    The phase diagram alpha_c(omega), alpha_l(omega) for 9 omega in [0, 0.425] with
    the attention study's ``phase_diagram`` (continuation along the branches, :mod:`replica.phase`) and
    with the fast thresholds-only path ``thresholds_diagram`` (:mod:`replica.applications.attention.phase`; ratio and agreement
    against the continuation), in one process and with ``--jobs`` processes; the load
    average is noted per row (``--no-continuation``: the fast path only).
``six``
    One point of the untied and rank-2 models (6-dimensional averages): time and peak
    memory (each in a fresh process; ``ru_maxrss``).
``accuracy``
    Issue 14: the command users run, in a fresh process (interpreter start included),
    ``replica solve attention --omega 0.3 --alpha 2 --branch semantic --json`` with its error bars
    and the replicon (target <= 2 s wall on 2 cores) and with ``--accuracy 1e-4`` (target <= 30 s),
    against the warm API solve of the same point measured in the same run (the baseline). After one
    untimed run (the on-disk caches a user's second command finds, Python's bytecode cache included:
    :func:`user_env`), the median wall time of 3 fresh processes, with their CPU time, the kernel
    threads (``REPLICA_THREADS``) and the load.
``glm``
    Issue 13's speed goal: one converged logistic / hinge point (the CLI's path,
    ``Solver(...).solve_best`` with its scout, error bars not included) in a warm process (compiled unit and caches loaded by a first
    solve), target <= 0.5 s, against the hand-written state evolution of ``tests/oracles`` at the
    same point (the field's way: adaptive quadrature in every iteration), with the largest
    relative deviation between the two on ``q, V, theta``; two hard points (logistic and hinge at
    lam = 1e-3, alpha = 5: q ~ 180 and ~ 26); and ``replica solve logistic --alpha 2 --param lam=0.1 --json`` in a fresh
    process (interpreter start and imports included).
``simulator``
    Full-batch GD steps per second of :mod:`numerics` at d = 1000, 2000, 4000, 8000 (n = 2d) on
    CPU (1 thread) and on CUDA when available (with the speed-up per d).
``histogram``
    The histogram task of :mod:`numerics.histogram` as users run it: ``python -m
    numerics.histogram --init positional`` and ``--init semantic`` (default configuration,
    stability check included, one torch thread each), both started at once in fresh processes
    on the 2 cores; wall time of the pair, each run's CPU time and test accuracy (issue 17:
    both >= 95 % within 5 minutes).
``gamp``
    One GAMP iteration of :mod:`numerics.gamp` at d = 4000, n = 8000, L = 2 on CPU (numpy), with
    the default prox schedule and with every prox start at every iteration
    (:mod:`benchmarks.gamp_iteration`; issue 16: under 0.5 s). No CUDA row: measure it with
    ``python -m benchmarks.gamp_iteration --torch`` where a GPU is available.
``sweep``
    ``replica sweep`` on a 3x3 (omega, sigma) grid of phase points with 1, 2 and 4 local
    workers and a Dask LocalCluster of 2, each in a fresh process (:mod:`benchmarks.sweeps`).
``generation``
    ``replica generate MODEL`` for every declared model in a fresh process, against sympy's
    tree-walking rewrites (the generator before issue 38) where ``--generation-baseline`` asks;
    each module checked equal to the committed one (:mod:`benchmarks.generation`).

``defaults``
    Every declared model's default command (``replica solve MODEL`` at a typical point, fresh
    process: seconds, CPU, peak memory) against the bare API solve of the same point, and the first
    command after installation with an empty cache against the same command warm
    (:mod:`benchmarks.defaults`, also ``python -m benchmarks.defaults``).

``--quick`` shortens everything (fewer repeats, baseline on fewer nodes, 3 omega) and says
so in the table. ``--out FILE`` writes the JSON; ``--markdown FILE`` the table.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from replica.applications.attention.paper import PAPER_A
from benchmarks.common import row, user_env  # noqa: F401 -- shared with the sections
from benchmarks.sweeps import bench_sweep  # noqa: E402,F401 -- the sweep section
from benchmarks.generation import bench_generation  # noqa: E402 -- the generation section
from benchmarks.defaults import bench_defaults  # noqa: E402,F401 -- the defaults section

ROOT = Path(__file__).resolve().parent.parent
OMEGA, ALPHA = 0.3, 2.0
#: the semantic fixed point at (omega, alpha) = (0.3, 2), default quadrature, tol 1e-12
X_SEMANTIC = np.array([0.1148165193, 12.66950154, 0.0, 0.1581531493])
SECTIONS = ("iteration", "point", "phase", "six", "accuracy", "glm", "simulator", "histogram", "sweep", "gamp",
            "generation", "defaults")


# --------------------------------------------------------------------------- helpers
def timed(fn, repeat: int = 3):
    """(min wall seconds, min CPU seconds, last result) over ``repeat`` calls."""
    walls, cpus, out = [], [], None
    for _ in range(max(1, repeat)):
        c, t = time.process_time(), time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus), out


def machine() -> dict:
    info = {"python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform()}
    try:
        info["lscpu"] = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout.splitlines()[:10]
    except Exception:  # noqa: BLE001 - informational only
        info["lscpu"] = []
    for mod in ("scipy", "numba", "torch"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            info[mod] = None
    info["cpu_count"] = os.cpu_count()
    info["loadavg_start"] = os.getloadavg()
    return info


def backends() -> list[str]:
    from replica.numeric.compiled import numba_available

    return ["numba", "numpy"] if numba_available() else ["numpy"]


def tied():
    from replica.registry import load_module

    return load_module("attention_tied")


# --------------------------------------------------------------------------- sections
def bench_iteration(quick: bool) -> tuple[list[dict], dict]:
    from benchmarks.notebook_baseline import fixed_point_update
    from replica.numeric.quadrature import default_rule, gauss_hermite
    from replica.numeric.solver import Solver

    mod = tied()
    rows, data = [], {}
    params = dict(omega=OMEGA, sigma=0.5, lam=0.01, A=[list(row) for row in PAPER_A])
    # 1. agreement on a small rule (same nodes for both)
    small = gauss_hermite(4, 4 if quick else 5)
    ref, _ = fixed_point_update(X_SEMANTIC, ALPHA, params, small.nodes, small.weights)
    for b in backends():
        s = Solver(mod, {"omega": OMEGA}, "semantic", rule=small, backend=b)
        out = s.evaluate_map(X_SEMANTIC, ALPHA, use_warm=False).x_new
        rel = np.abs(out - ref) / np.maximum(np.abs(ref), 1e-12)
        rel[ref == 0] = np.abs(out - ref)[ref == 0]
        assert np.all(rel < 1e-6), f"generated ({b}) and notebook maps differ: {out} vs {ref}"
        data[f"agreement_{b}"] = float(rel.max())
    data["agreement_rule"] = small.describe()
    rows.append(row("iteration", "generated vs notebook map output, max relative difference",
                    max(v for k, v in data.items() if k.startswith("agreement_") and isinstance(v, float)), "",
                    note=f"{', '.join(backends())} on {small.describe()}; asserted < 1e-6"))
    # 2. baseline on a subset of the default rule's nodes, extrapolated per node
    rule = default_rule(4)
    n_sub = 40 if quick else 300
    idx = np.linspace(0, rule.size - 1, n_sub).astype(int)
    wb, cb, _ = timed(lambda: fixed_point_update(X_SEMANTIC, ALPHA, params, rule.nodes[:, idx],
                                                 rule.weights[idx]), repeat=1)
    base = wb / n_sub * rule.size
    data.update(baseline_nodes_timed=n_sub, baseline_seconds_per_node=wb / n_sub, baseline_extrapolated=base)
    rows.append(row("iteration", "notebook baseline, one update (extrapolated)", base, "s",
                    note=f"timed on {n_sub} of {rule.size} nodes: {wb / n_sub * 1e3:.1f} ms/node"))
    # 3. generated solver, same state, same rule (folded by the z -> -z symmetry)
    for b in backends():
        s = Solver(mod, {"omega": OMEGA}, "semantic", backend=b)
        s.evaluate_map(X_SEMANTIC, ALPHA, use_warm=False)  # compile / warm caches
        w, c, _ = timed(lambda: s.evaluate_map(X_SEMANTIC, ALPHA, use_warm=False), repeat=2 if quick else 5)
        rows.append(row("iteration", f"generated ({b}), one update, every start", w, "s", baseline=base,
                        note=f"cpu {c:.3f} s; {s.integrator.describe()}"))
        xp = X_SEMANTIC * (1 + 1e-3)

        def warm_iter():
            s.evaluate_map(X_SEMANTIC, ALPHA, multistart=True)  # minimisers at X as the warm state
            t = time.perf_counter()
            s.evaluate_map(xp, ALPHA, multistart=False)
            return time.perf_counter() - t

        ws = min(warm_iter() for _ in range(2 if quick else 5))
        rows.append(row("iteration", f"generated ({b}), one warm-started iteration", ws, "s", baseline=base,
                        note="from the previous minimisers and h = omega"))
        data[f"generated_{b}"] = w
    return rows, data


def bench_point(quick: bool) -> tuple[list[dict], dict]:
    from replica.numeric.solver import Solver

    mod = tied()
    rows, data = [], {}
    for b in backends():
        rep = 1 if (quick or b == "numpy") else 3
        s = Solver(mod, {"omega": OMEGA}, "semantic", backend=b)
        s.solve(ALPHA)  # compile / caches
        w, c, fp = timed(lambda: s.solve(ALPHA), repeat=rep)
        rows.append(row("point", f"converged point, cold ({b})", w, "s",
                        note=f"cpu {c:.2f} s, {fp.iterations} iterations, error estimates on"))
        data[f"cold_{b}"] = dict(seconds=w, cpu=c, iterations=fp.iterations, q=fp.order["q"],
                                 theta=fp.order["theta"], V=fp.order["V"], eps_g=fp.eps_g, phi=fp.phi)
        near = s.solve(2.1)

        def warm():
            s.solve(2.1, x0=near.x)  # leaves the alpha = 2.1 minimisers as warm state
            t, c0 = time.perf_counter(), time.process_time()
            fp = s.solve(ALPHA, x0=near.x)
            return time.perf_counter() - t, time.process_time() - c0, fp

        res = [warm() for _ in range(rep)]
        w, c, fp = min(res, key=lambda r: r[0])
        rows.append(row("point", f"converged point, warm from alpha=2.1 ({b})", w, "s",
                        note=f"cpu {c:.2f} s, {fp.iterations} iterations"))
        data[f"warm_{b}"] = dict(seconds=w, cpu=c, iterations=fp.iterations)
    code = ("import time; t = time.perf_counter()\n"
            "from replica.registry import load_module\n"
            "m = load_module('attention_tied')\n"
            "from replica.numeric.solver import Solver\n"
            "fp = Solver(m, {'omega': 0.3}, 'semantic').solve(2.0)\n"
            "print(time.perf_counter() - t)")
    measured = [("fresh_process", "first solve in a fresh process (imports, numba cache)", code, "")]
    if "numba" in backends():
        # issue 15: import + loading a cached compiled model, in a fresh process (the unit was compiled
        # and cached above); the kernels are called once on one node so that numba loads every function
        measured.append(("fresh_load", "import + load the cached compiled model (fresh process)", _LOAD_CHILD,
                         "; target <= 1 s"))
    for key, name, child, target in measured:
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", child], cwd=ROOT, env=user_env(), capture_output=True, text=True,
                             timeout=900)
        total = time.perf_counter() - t
        if out.returncode != 0:
            rows.append(row("point", name, float("nan"), "s", note="failed: " + out.stderr[-200:]))
            continue
        inner = float(out.stdout.strip().splitlines()[-1])
        rows.append(row("point", name, inner, "s", note=f"interpreter start included: {total:.2f} s{target}"))
        data[key] = dict(inside=inner, total=total)
    return rows, data


_LOAD_CHILD = r"""
import time
t = time.perf_counter()
import numpy as np
from replica.numeric.compiled import compiled
from replica.registry import load_module
m = load_module("attention")
k = compiled(m)
z, x, p = np.zeros((4, 1)), np.array([0.1, 10.0, 0.0, 0.15]), np.array(m.DEFAULTS)
k.node_prox_average(z, np.ones(1), np.zeros((1, 1)), False, m.N_STARTS, x, p, 1e-12, 50, 1e-6, np.empty((1, 1)),
                    np.zeros(1, dtype=np.bool_), np.zeros(4))
k.node_test_average(z, np.ones(1), x, p, np.zeros(m.N_OBSERVABLES))
print(time.perf_counter() - t)
"""


#: issue 14's commands (fresh process) and their targets on 2 cores
ACCURACY_COMMANDS = (("solve with error bars", (), 2.0), ("solve --accuracy 1e-4", ("--accuracy", "1e-4"), 30.0))


def bench_accuracy(quick: bool) -> tuple[list[dict], dict]:
    import resource

    from replica.numeric.energetic import kernel_threads
    from replica.numeric.solver import Solver

    s = Solver(tied(), {"omega": OMEGA}, "semantic")
    fp = s.solve(ALPHA)
    base, _, _ = timed(lambda: s.solve(ALPHA, x0=fp.x), repeat=1 if quick else 3)
    rows = [row("accuracy", "warm API solve (Solver.solve from the fixed point's neighbourhood)", base, "s")]
    data: dict = {"warm_api": base}
    cmd = [sys.executable, "-m", "replica", "solve", "attention", "--omega", str(OMEGA), "--alpha", str(ALPHA),
           "--branch", "semantic", "--json"]
    # one untimed run first: what a user's second command finds (the compiled unit and the folded
    # rules in the user cache); then the median of the timed fresh processes
    subprocess.run(cmd, cwd=ROOT, env=user_env(), capture_output=True, text=True, timeout=900)
    repeat = 1 if quick else 3
    for name, extra, target in ACCURACY_COMMANDS:
        walls, cpus, out = [], [], None
        for _ in range(repeat):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            out = subprocess.run(cmd + list(extra), cwd=ROOT, env=user_env(), capture_output=True, text=True,
                                 timeout=900)
            walls.append(time.perf_counter() - t)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
            if out.returncode != 0:
                break
        if out.returncode != 0:
            rows.append(row("accuracy", name, float("nan"), "s", note="failed: " + out.stderr[-200:]))
            continue
        wall, cpu = float(np.median(walls)), float(np.median(cpus))
        res = json.loads(out.stdout)
        # the replicon's bar is its quadrature error, not held to --accuracy: reported apart
        worst = max((e / abs(res[k]) for k, e in res["errors"].items() if k != "replicon"
                     and isinstance(e, float) and isinstance(res.get(k), float) and res[k]), default=float("nan"))
        rows.append(row("accuracy", f"replica {' '.join(cmd[3:] + list(extra))} (fresh process)", wall, "s",
                        baseline=base, note=f"target <= {target:g} s wall on 2 cores (issue 14), error bars and "
                                            f"replicon included; median of {len(walls)}, CPU {cpu:.2f} s, "
                                            f"{kernel_threads()} kernel threads, load {os.getloadavg()[0]:.1f}; "
                                            f"accuracy_met={res['accuracy_met']}, rs_stable={res.get('rs_stable')}, "
                                            f"largest relative bar {worst:.1e} (replicon "
                                            f"{res.get('replicon', float('nan')):.4g} ± {res.get('replicon_error') or 0:.1e})"))
        data[name] = dict(seconds=wall, cpu_seconds=cpu, runs=walls, accuracy_met=res["accuracy_met"],
                          worst_relative_bar=worst, target=target)
    return rows, data


def bench_phase(quick: bool, jobs: int, continuation: bool = True) -> tuple[list[dict], dict]:
    rows, data = [], {}
    omegas = np.linspace(0.0, 0.425, 3 if quick else 9)
    try:
        from replica.applications.attention.phase import phase_diagram, thresholds_diagram
    except ImportError:
        phase_diagram = thresholds_diagram = None
    mod = tied()
    if phase_diagram is None:  # stand-in: warm-started solves along alpha on both branches
        from replica.numeric.solver import Solver

        def run(_jobs):
            n = 0
            for w in omegas:
                for br, alphas in (("semantic", np.linspace(4, 0.8, 20)), ("positional", np.linspace(0.1, 2, 20))):
                    s = Solver(mod, {"omega": float(w)}, br, error_estimate=False)
                    fp = None
                    for a in alphas:
                        fp = s.solve(float(a), x0=None if fp is None else fp.x)
                        n += 1
            return n

        w, c, n = timed(lambda: run(1), repeat=1)
        rows.append(row("phase", f"stand-in: {n} warm-started solves ({len(omegas)} omega)", w, "s",
                        note="replica.phase not available: no alpha_c/alpha_l"))
        return rows, data
    def agreement(a, b):
        d = [abs(x - y) for x, y in zip(a, b) if x is not None and y is not None]
        return max(d) if d else float("nan")

    for j in sorted({1, jobs}):
        base = None
        if continuation:
            la = os.getloadavg()[0]
            w, c, res = timed(lambda: phase_diagram(mod, omegas, jobs=j), repeat=1)
            solves = sum(r.solves for r in res)
            rows.append(row("phase", f"phase diagram (continuation), {len(omegas)} omega, jobs={j}", w, "s",
                            note=f"{solves} solves ({solves / len(omegas):.0f} per omega), parent cpu {c:.1f} s, "
                                 f"load {la:.1f}"))
            data[f"jobs{j}"] = base = dict(seconds=w, solves=solves, omegas=omegas.tolist(),
                                           alpha_c=[r.alpha_c.value for r in res],
                                           alpha_l=[r.alpha_l.value for r in res])
        la = os.getloadavg()[0]
        w, c, res = timed(lambda: thresholds_diagram(mod, omegas, jobs=j), repeat=1)
        solves = sum(r.solves for r in res)
        fast = dict(seconds=w, solves=solves, omegas=omegas.tolist(), alpha_c=[r.alpha_c.value for r in res],
                    alpha_l=[r.alpha_l.value for r in res], loadavg=la,
                    fallbacks=sum(any("fallback" in t for t in r.alpha_c.retries) for r in res))
        note = (f"{solves} solves ({solves / len(omegas):.0f} per omega), {fast['fallbacks']} continuation "
                f"fallbacks, parent cpu {c:.1f} s, load {la:.1f}")
        if base is not None:
            fast["max_abs_diff_alpha_c"] = agreement(base["alpha_c"], fast["alpha_c"])
            fast["max_abs_diff_alpha_l"] = agreement(base["alpha_l"], fast["alpha_l"])
            note += (f"; vs continuation: |d alpha_c| <= {fast['max_abs_diff_alpha_c']:.1e}, "
                     f"|d alpha_l| <= {fast['max_abs_diff_alpha_l']:.1e}")
        rows.append(row("phase", f"thresholds only (replica.phase.thresholds), {len(omegas)} omega, jobs={j}", w, "s",
                        baseline=base["seconds"] if base else None, note=note))
        data[f"thresholds_jobs{j}"] = fast
    return rows, data


_SIX_CHILD = r"""
import json, resource, sys, time, tracemalloc, importlib
name, backend = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if name.endswith(".py"):
    import importlib.util
    spec = importlib.util.spec_from_file_location("scratch_" + name.split("/")[-1][:-3], name)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
else:
    from replica.registry import load_module
    mod = load_module(name)
from replica.interface.generated_model import as_model
from replica.numeric.solver import Solver
mod = as_model(mod)
from replica.numeric.compiled import compiled
if backend == "numba":
    compiled(mod)
s = Solver(mod, {"omega": 0.3}, "semantic", backend=backend)
s.integrator.average(mod, s.initial_state(), s.p)   # compile (or load numba's cache)
t_setup = time.perf_counter() - t0
tracemalloc.start()
t, c = time.perf_counter(), time.process_time()
fp = s.solve(2.0)
out = dict(seconds=time.perf_counter() - t, cpu=time.process_time() - c, setup=t_setup,
           iterations=fp.iterations, nodes=s.integrator.describe(), eps_g=fp.eps_g, phi=fp.phi,
           peak_traced_mib=tracemalloc.get_traced_memory()[1] / 2**20,
           maxrss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print(json.dumps(out))
"""


def _six_module(name: str) -> str:
    """A declared model's name, or a scratch file for rank 2 if no colleague's model exists."""
    if (ROOT / "derivations" / f"{name}.py").exists():
        return name
    scratch = ROOT / ".replica_cache" / "bench" / f"{name}.py"
    if not scratch.exists():
        from derivations.attention_tied import build
        from replica.codegen import write_module
        from replica.symbolic.derivation import Derivation

        r = 2 if name == "attention_rank2" else 1
        write_module(Derivation(build(L=2, r=r, r_t=1, reduced=False, name=f"{name}_scratch")), scratch)
    return str(scratch)


def bench_six(quick: bool) -> tuple[list[dict], dict]:
    rows, data = [], {}
    for name in ("attention_untied", "attention_rank2"):
        target = _six_module(name)
        for b in backends() if not quick else backends()[:1]:
            out = subprocess.run([sys.executable, "-c", _SIX_CHILD, target, b], cwd=ROOT, env=user_env(),
                                 capture_output=True, text=True, timeout=1800)
            if out.returncode != 0:
                rows.append(row("six", f"{name} ({b})", float("nan"), "s", note="failed: " + out.stderr[-200:]))
                continue
            d = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row("six", f"{name} point ({b})", d["seconds"], "s",
                            note=f"cpu {d['cpu']:.1f} s, {d['iterations']} it, {d['nodes']}, "
                                 f"peak RSS {d['maxrss_mib']:.0f} MiB"))
            data[f"{name}_{b}"] = d
    return rows, data


#: (model, alpha, parameters) of the glm section; the last two are the hard points (near the
#: max-margin limit: logistic q ~ 180, hinge q ~ 26 from the generic cold start)
GLM_POINTS = (("logistic", 2.0, {"lam": 0.1}), ("hinge", 2.0, {"lam": 0.1}), ("logistic", 5.0, {"lam": 1e-3}),
              ("hinge", 5.0, {"lam": 1e-3}))


def bench_glm(quick: bool) -> tuple[list[dict], dict]:
    from replica.registry import load_module
    from replica.numeric.solver import Solver
    from tests.oracles import state_evolution

    rows, data = [], {}
    rep = 1 if quick else 3
    def cli_solve(mod, params, alpha):
        # as replica solve does: the cold starts on a cheaper rule (Solver.scout), the distinct
        # fixed points re-solved on the working rule (error bars not included)
        solver = Solver(mod, params, error_estimate=False)
        return solver.solve_best(alpha, scout=solver.scout())

    for model, alpha, params in GLM_POINTS:
        mod = load_module(model)
        cli_solve(mod, params, alpha)  # compile / load the compiled unit, warm the caches
        w, c, fp = timed(lambda: cli_solve(mod, params, alpha), repeat=rep)
        wb, cb, ref = timed(lambda: state_evolution(model, alpha, **params), repeat=1)
        got = {"q": fp.order["q_1"], "V": fp.order["V_1"], "theta": fp.order["theta_1"]}
        dev = max(abs(got[k] - ref[k]) / abs(ref[k]) for k in got)
        label = ", ".join(f"{k}={v:g}" for k, v in params.items())
        rows.append(row("glm", f"{model} point, warm process (alpha={alpha:g}, {label})", w, "s", baseline=wb,
                        note=f"target <= 0.5 s; baseline: hand-written state evolution (tests/oracles); cpu {c:.2f} s, "
                             f"{fp.iterations} iterations on the working rule after the scout's; max relative deviation q, V, "
                             f"theta {dev:.1e}"))
        data[f"{model}_{alpha:g}_{label}"] = dict(seconds=w, cpu=c, baseline=wb, iterations=fp.iterations,
                                                  deviation=dev)
    cmd = [sys.executable, "-m", "replica", "solve", "logistic", "--alpha", "2", "--param", "lam=0.1", "--json"]
    t = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, env=user_env(), capture_output=True, text=True, timeout=900)
    total = time.perf_counter() - t
    if out.returncode != 0:
        rows.append(row("glm", "replica solve logistic (fresh process)", float("nan"), "s",
                        note="failed: " + out.stderr[-200:]))
    else:
        inner = json.loads(out.stdout)["seconds"]
        rows.append(row("glm", "replica solve logistic --alpha 2 --json (fresh process)", total, "s",
                        note=f"interpreter, imports, compiled-unit load included; the solve itself {inner:.2f} s"))
        data["fresh_process"] = dict(total=total, solve=inner)
    return rows, data


#: dimensions of the simulator benchmark (n = alpha d = 2d sentences); --quick keeps the first two
SIM_DIMS = (1000, 2000, 4000, 8000)


def bench_simulator(quick: bool) -> tuple[list[dict], dict]:
    """Full-batch GD steps/s of the tied student (float64, Gram path) at ``d`` in :data:`SIM_DIMS`,
    ``n = 2d``, on CPU (1 thread) and on CUDA when available. The CPU-vs-CUDA agreement of the
    same seeds is checked in tests/test_cuda.py (it needs the GPU, not the clock)."""
    import warnings

    import torch

    from numerics.simulate import _problem
    from numerics.models import TiedAttention, init_columns
    from numerics.train import L2, TrainConfig, train

    rows, data = [], {}
    dims = SIM_DIMS[:2] if quick else SIM_DIMS
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        for d in dims:
            # similar wall time per point on CPU (cost ~ n d = 2 d^2); the GPU gets more steps
            steps = (30 if quick else 200) if dev == "cuda" else max(5, int((30 if quick else 200) * (1000 / d) ** 2))
            old = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                problem, teacher, streams, n, X, Y = _problem(
                    0, omega=OMEGA, alpha=ALPHA, d=d, L=None, sigma=0.5, variances=None, P=None, A=None, r_t=1,
                    target=None, normalize_teacher=False, device=torch.device(dev), dtype=torch.float64)
                Q0 = init_columns("semantic", d, 1, teacher.Qstar, problem.P, streams.init)
                student = TiedAttention(Q0, problem.P).to(device=dev, dtype=torch.float64)
                cfg = TrainConfig(steps=steps, stop_grad=0.0, check_every=steps, tol_grad=0.0, tol_loss=0.0)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    train(student, X, Y, {"Q": L2(0.01)}, TrainConfig(steps=3, stop_grad=0.0, check_every=3))
                    if dev == "cuda":
                        torch.cuda.synchronize()
                    t = time.perf_counter()
                    train(student, X, Y, {"Q": L2(0.01)}, cfg)
                    if dev == "cuda":
                        torch.cuda.synchronize()
                    dt = time.perf_counter() - t
                del X, Y, student
            finally:
                torch.set_num_threads(old)
            name = f"GD steps/s, d={d}, n={n}, {dev}" + (" (1 thread)" if dev == "cpu" else f" ({torch.cuda.get_device_name()})")
            rows.append(row("simulator", name, steps / dt, "steps/s", note=f"{steps} steps in {dt:.2f} s, float64"))
            data[f"{dev}_{d}"] = dict(steps=steps, seconds=dt, steps_per_s=steps / dt, n=n, d=d)
    if torch.cuda.is_available():
        for d in dims:
            c, g = data[f"cpu_{d}"], data[f"cuda_{d}"]
            rows.append(row("simulator", f"CUDA over CPU speed-up, d={d}", g["steps_per_s"] / c["steps_per_s"], "x"))
    else:
        rows.append(row("simulator", "CUDA", float("nan"), "steps/s",
                        note="not measured: no CUDA device on this machine (torch.cuda.is_available() is False)"))
    return rows, data


#: --quick: a tiny histogram configuration (checks that the section works; the numbers mean little)
HIST_QUICK_ARGS = ("--T", "5", "--alphabet", "4", "--dim", "4", "--hidden", "16", "--n-train", "300",
                   "--n-test", "100", "--epochs", "2", "--sgd-epochs", "1")


def bench_histogram(quick: bool) -> tuple[list[dict], dict]:
    """Both minima of the histogram task through the CLI, concurrently, each in a fresh process."""
    rows, data = [], {}
    extra = list(HIST_QUICK_ARGS) if quick else []
    t = time.perf_counter()
    procs = {init: subprocess.Popen([sys.executable, "-m", "numerics.histogram", "--init", init, "--json", "--quiet",
                                     *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for init in ("positional", "semantic")}
    outs = {init: p.communicate(timeout=3600) for init, p in procs.items()}
    wall = time.perf_counter() - t
    ok = True
    for init, (out, err) in outs.items():
        if procs[init].returncode != 0:
            ok = False
            rows.append(row("histogram", f"{init} minimum", float("nan"), "", note="failed: " + err[-200:]))
            continue
        res = json.loads(out)
        acc, cpu = res["test_accuracy"], res["cpu_seconds"]
        rows.append(row("histogram", f"{init} minimum, test accuracy (per token)", acc, "",
                        note=f"after the stability check {res['unfrozen']['test_accuracy']:.4f}; "
                             f"positional index {res['positional_index']:.3g}; cpu {cpu:.0f} s"))
        data[init] = dict(test_accuracy=acc, cpu_seconds=cpu, positional_index=res["positional_index"],
                          unfrozen_test_accuracy=res["unfrozen"]["test_accuracy"])
    if ok:
        rows.append(row("histogram", "both minima, concurrent fresh processes (wall)", wall, "s",
                        note="stability check included; target <= 300 s with both accuracies >= 0.95"))
    data["wall_seconds"] = wall
    return rows, data


def bench_gamp(quick: bool) -> tuple[list[dict], dict]:
    """Seconds per GAMP iteration (median of the timed iterations after warm-up)."""
    from benchmarks.gamp_iteration import measure

    d = 1000 if quick else 4000
    rows, data = [], {}
    for every in (10, 1):
        r = measure(d, ALPHA, iterations=3 if quick else 10, warmup=1 if quick else 3, multistart_every=every)
        rows.append(row("gamp", f"one iteration, d = {d}, n = {r['n']}, L = {r['L']}, numpy, every prox start "
                        + ("at every iteration" if every == 1 else f"each {every}th iteration"),
                        r["iteration_median_s"], "s",
                        note=f"output channel {r['channel_median_s']:.3g} s; target < 0.5 s at d = 4000"))
        data[f"multistart_every_{every}"] = r
    return rows, data


# --------------------------------------------------------------------------- output
def table(rows: list[dict]) -> str:
    lines = ["| section | measurement | value | baseline | speed-up | notes |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        v = r["value"]
        val = "n/a" if v is None or (isinstance(v, float) and not np.isfinite(v)) else \
            (f"{v:.3g} {r['unit']}".strip() if r["unit"] != "steps/s" else f"{v:.1f} {r['unit']}")
        base = f"{r['baseline']:.3g} s" if r.get("baseline") is not None else ""
        ratio = (f"{r['ratio']:.0f}x" if r['ratio'] >= 10 else f"{r['ratio']:.2g}x") if r.get("ratio") else ""
        lines.append(f"| {r['section']} | {r['name']} | {val} | {base} | {ratio} | {r['note']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", metavar="FILE", help="write all results (and the machine) as JSON")
    ap.add_argument("--markdown", metavar="FILE", help="write the table as Markdown")
    ap.add_argument("--quick", action="store_true", help="a short run (fewer repeats and nodes, 3 omega)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {SECTIONS}")
    ap.add_argument("--jobs", type=int, default=2, help="processes for the parallel phase diagram (default 2)")
    ap.add_argument("--no-continuation", action="store_true",
                    help="phase section: time only the fast thresholds path (the continuation takes minutes)")
    ap.add_argument("--generation-baseline", choices=("quick", "all", "none"), default="quick",
                    help="generation section: time sympy's tree-walking rewrites on a few models (quick, not with "
                         "--quick), on every model (all: minutes for softmax_argmax3) or none")
    args = ap.parse_args(argv)
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = set(wanted) - set(SECTIONS)
    if bad:
        ap.error(f"unknown sections {sorted(bad)}; choose from {SECTIONS}")
    results = {"machine": machine(), "quick": args.quick, "sections": {}}
    rows: list[dict] = []
    for name in SECTIONS:
        if name not in wanted:
            continue
        print(f"[benchmarks] {name} ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        if name == "phase":
            r, d = bench_phase(args.quick, args.jobs, continuation=not args.no_continuation)
        elif name == "generation":
            r, d = bench_generation(args.quick, args.generation_baseline)
        else:
            r, d = globals()[f"bench_{name}"](args.quick)
        rows += r
        results["sections"][name] = dict(rows=r, data=d, seconds=time.perf_counter() - t)
    results["machine"]["loadavg_end"] = os.getloadavg()
    m = results["machine"]
    header = (f"python {m['python']}, numpy {m['numpy']}, numba {m['numba']}, torch {m['torch']}; "
              f"{m['cpu_count']} CPUs; load average {m['loadavg_start'][0]:.1f} -> {m['loadavg_end'][0]:.1f}"
              + ("  [--quick]" if args.quick else ""))
    print(header)
    md = table(rows)
    print(md)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1, default=float))
    if args.markdown:
        Path(args.markdown).write_text(f"# Benchmarks (`python -m benchmarks`)\n\n{header}\n\n{md}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

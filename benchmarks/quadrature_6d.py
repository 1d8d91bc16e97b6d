"""Accuracy of quadrature rules for the 6-dimensional energetic averages (issue 8).

At a fixed state ``x`` (a converged fixed point), the saddle-point map ``x -> x_new`` and
``Psi_y`` are evaluated with every rule and compared with a reference (scrambled Sobol with
many points, with the solver's own integrator, or in chunks in ``--procs`` parallel processes)::

    python -m benchmarks.quadrature_6d attention_untied --branch semantic --alpha 2 \
        --state state.json --rules gh:4,gh:5,gh:6,smolyak:4,smolyak:5,sobol:10,sobol:12 \
        --reference sobol:17 --procs 1

``state.json`` holds ``{"order": {name: value}}`` (e.g. a ``FixedPoint.to_dict()`` with the
order parameters at top level also works). Prints one row per rule: nodes, seconds per map
evaluation, ``|x_new - x_ref| / |x_ref|``, the worst entry, and the ``Psi_y`` error.
"""
from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from replica.numeric.prox import prox
from replica.numeric.quadrature import QuadratureRule, parse_rule
from replica.registry import load_module
from replica.numeric.solver import Solver


def _chunk_average(args):
    name, nodes, weights, x, p = args
    mod = load_module(name)
    with np.errstate(all="ignore"):
        res = prox(mod, nodes, x, p)
        G = mod.bracket_parameter_gradient(res.h, nodes, x, p)
    return G @ weights, float(res.value @ weights)


class ChunkedIntegrator:
    """An :class:`~replica.numeric.integrators.EnergeticIntegrator` over a big rule, in chunks/processes."""

    def __init__(self, name: str, rule: QuadratureRule, chunk: int = 20000, procs: int = 1):
        self.name, self.rule, self.chunk, self.procs = name, rule, chunk, procs
        self.dim = rule.dim

    def average(self, module, x, p, warm=None, multistart=True, prox_tol=1e-12):
        from replica.numeric.integrators import EnergeticAverage

        N = self.rule.size
        jobs = [(self.name, self.rule.nodes[:, i:i + self.chunk], self.rule.weights[i:i + self.chunk], x, p)
                for i in range(0, N, self.chunk)]
        if self.procs > 1:
            with ProcessPoolExecutor(self.procs) as ex:
                out = list(ex.map(_chunk_average, jobs))
        else:
            out = [_chunk_average(j) for j in jobs]
        grad = sum(o[0] for o in out)
        val = sum(o[1] for o in out)
        return EnergeticAverage(-grad, -val, None, 0, 0)

    def companion(self):
        return self

    def describe(self):
        return self.rule.describe()


def evaluate(name: str, branch: str, alpha: float, x: np.ndarray, spec: str, procs: int = 1,
             parameters=None) -> dict:
    mod = load_module(name)
    rule = parse_rule(spec, len(mod.GAUSSIANS))
    solver = Solver(mod, parameters or {}, branch, rule=rule)
    integ = ChunkedIntegrator(name, rule, procs=procs) if procs > 1 else None
    solver.evaluate_map(x, alpha, integrator=integ, use_warm=False)  # compile / warm caches
    t0 = time.perf_counter()
    res = solver.evaluate_map(x, alpha, integrator=integ, use_warm=False)
    return {"rule": spec, "nodes": rule.size, "seconds": time.perf_counter() - t0,
            "x_new": res.x_new.tolist(), "psi_y": res.psi_y}


def solve_with(name, branch, alpha, x, spec, parameters=None, tol=1e-7) -> dict:
    """The fixed point with rule ``spec`` started at ``x`` (order parameters, Phi, eps_g, time)."""
    mod = load_module(name)
    solver = Solver(mod, parameters or {}, branch, rule=parse_rule(spec, len(mod.GAUSSIANS)), tol=tol,
                    max_iter=300)
    t0 = time.perf_counter()
    fp = solver.solve(alpha, x)
    return {"rule": spec, "nodes": solver.integrator.rule.size, "seconds": time.perf_counter() - t0,
            "iterations": fp.iterations, "x": fp.x.tolist(), "phi": fp.phi, "eps_g": fp.eps_g}


def solve_table(a, x, specs, ref_spec, params) -> list[dict]:
    """Fixed points with every rule vs the reference rule's (relative errors per family)."""
    mod = load_module(a.model)
    ref = solve_with(a.model, a.branch, a.alpha, x, ref_spec, params)
    xr = np.array(ref["x"])
    fams = {f: idx for f, idx in mod.FAMILIES.items() if np.abs(xr[idx]).max() > 0}
    print(f"reference {ref_spec}: {ref['nodes']} nodes, {ref['seconds']:.1f} s, phi={ref['phi']:.8g}, "
          f"eps_g={ref['eps_g']:.6g}, " + ", ".join(f"{n}={v:.6g}" for n, v in zip(mod.ORDER_PARAMETERS, xr)))
    print(f"{'rule':<12}{'nodes':>9}{'s/solve':>9}" + "".join(f"{'err ' + f:>10}" for f in fams)
          + f"{'err phi':>10}{'err eps_g':>10}")
    rows = []
    for spec in specs:
        try:
            r = solve_with(a.model, a.branch, a.alpha, x, spec, params)
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"{spec:<12} failed: {type(e).__name__}: {str(e)[:80]}")
            continue
        xn = np.array(r["x"])
        r["family_err"] = {f: float(np.linalg.norm(xn[i] - xr[i]) / np.linalg.norm(xr[i])) for f, i in fams.items()}
        r["phi_err"] = abs(r["phi"] - ref["phi"]) / abs(ref["phi"])
        r["eps_g_err"] = abs(r["eps_g"] - ref["eps_g"]) / abs(ref["eps_g"])
        rows.append(r)
        print(f"{spec:<12}{r['nodes']:>9}{r['seconds']:>9.1f}" + "".join(f"{v:>10.1e}" for v in r["family_err"].values())
              + f"{r['phi_err']:>10.1e}{r['eps_g_err']:>10.1e}", flush=True)
    return [ref] + rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--branch", default=None)
    ap.add_argument("--alpha", type=float, required=True)
    ap.add_argument("--state", required=True, help="JSON with the order parameters")
    ap.add_argument("--rules", required=True, help="comma-separated rule specs")
    ap.add_argument("--reference", default=None, help="reference rule spec (default: last of --rules)")
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--out", default=None, help="write all rows as JSON")
    ap.add_argument("--solve", action="store_true",
                    help="compare fixed points solved with every rule (started at --state) instead of one map")
    a = ap.parse_args(argv)
    mod = load_module(a.model)
    st = json.load(open(a.state))
    st = st.get("order", st)
    x = np.array([float(st[n]) for n in mod.ORDER_PARAMETERS])
    params = {k: float(v) for k, v in (s.split("=") for s in a.param)}
    specs = a.rules.split(",")
    ref_spec = a.reference or specs[-1]
    if a.solve:
        rows = solve_table(a, x, [s for s in specs if s != ref_spec], ref_spec, params)
        if a.out:
            json.dump({"rows": rows, "names": list(mod.ORDER_PARAMETERS)}, open(a.out, "w"), indent=1)
        return 0
    ref = evaluate(a.model, a.branch, a.alpha, x, ref_spec, a.procs, params)
    xr = np.array(ref["x_new"])
    rows = []
    print(f"reference {ref_spec}: {ref['nodes']} nodes, {ref['seconds']:.1f} s, psi_y={ref['psi_y']:.8g}")
    print(f"{'rule':<14}{'nodes':>9}{'s/map':>8}{'rel err x':>11}{'max entry':>11}{'psi_y err':>11}")
    for spec in specs:
        if spec == ref_spec:
            continue
        r = evaluate(a.model, a.branch, a.alpha, x, spec, a.procs if spec.startswith("sobol") else 1, params)
        xn = np.array(r["x_new"])
        rel = float(np.linalg.norm(xn - xr) / np.linalg.norm(xr))
        worst = float(np.max(np.abs(xn - xr) / np.maximum(np.abs(xr), 1e-12 + 1e-3 * np.abs(xr).max())))
        r.update(rel_err=rel, max_entry_err=worst, psi_y_err=abs(r["psi_y"] - ref["psi_y"]))
        rows.append(r)
        print(f"{spec:<14}{r['nodes']:>9}{r['seconds']:>8.2f}{rel:>11.2e}{worst:>11.2e}{r['psi_y_err']:>11.2e}",
              flush=True)
    if a.out:
        json.dump({"reference": ref, "rows": rows, "x": x.tolist(), "names": list(mod.ORDER_PARAMETERS)},
                  open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every declared model's default command: ``python -m benchmarks.defaults`` (also the ``defaults``
section of ``python -m benchmarks``).

Per declared model, at a typical point (:data:`POINTS`: the paper's omega = 0.3, alpha = 2 on the
semantic branch for the attention models, alpha = 2 for the GLMs), in the same run:

* ``replica solve MODEL POINT --json`` in a fresh process (interpreter start, imports, the cold
  starts, the error bars and the replicon: what a user runs), after one untimed run that fills the
  user caches a second command finds (compiled unit, numba's machine code, folded rules, Python's
  bytecode); wall time, the child's CPU time and its peak resident memory (``wait4``);
* the bare API solve of the same point, the baseline: ``Solver(module, params, branch,
  rule=<the command's rule>).solve(alpha)`` from the generic start, timed in a warm process (the
  compiled unit loaded by an untimed solve first) -- what the solve itself costs without the
  command's cold starts, error bars and replicon; the ratio is command / API solve;
* the first command after installation: ``replica solve attention`` at the paper point with an
  empty cache (``REPLICA_CACHE`` and ``NUMBA_CACHE_DIR`` in a new temporary directory: numba
  compiles the kernels the command calls) against the same command again on that cache.

``--models a,b`` restricts the models, ``--out FILE`` writes the JSON (default
``benchmarks/results/defaults.json``), ``--markdown FILE`` the table. The machine is shared: the
load average is recorded per row, and the CPU column is the figure to compare across runs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "defaults.json"
#: the point of each declared model's command (extra flags of ``replica solve``); a model not listed
#: here gets ``--alpha 2`` on its first declared branch
POINTS = {name: ["--omega", "0.3", "--alpha", "2", "--branch", "semantic"]
          for name in ("attention_tied", "attention_elastic_net", "attention_untied", "attention_rank2",
                       "attention_L3", "attention_clusters")}
POINTS.update(linear_attention=["--alpha", "2", "--branch", "semantic"],
              **{g: ["--alpha", "2"] for g in ("ridge", "lasso", "logistic", "hinge", "perceptron_probit",
                                               "softmax_argmax3")})
#: the first-run command (the paper's model at the paper point)
FIRST_RUN = ["attention", "--omega", "0.3", "--alpha", "2", "--branch", "semantic"]

_API_CHILD = r"""
import json, sys, time
from replica.registry import load_module
from replica.numeric.integrators import from_spec
from replica.numeric.solver import Solver

name, args = sys.argv[1], sys.argv[2:]
flags = dict(zip(args[::2], args[1::2]))
module = load_module(name)
branch = flags.pop("--branch", None)
alpha = float(flags.pop("--alpha"))
params = {k[2:]: float(v) for k, v in flags.items()}


def solver():
    return Solver(module, params, branch, rule=from_spec("auto", module, branch), error_estimate=False)


solver().solve(alpha)  # untimed: loads the compiled unit and the folded rule
s = solver()
t = time.perf_counter()
fp = s.solve(alpha)
print(json.dumps({"seconds": time.perf_counter() - t, "iterations": fp.iterations, "rule": s.integrator.describe()}))
"""


def user_env(**extra: str) -> dict[str, str]:
    """A user's environment for a timed fresh process: Python's bytecode cache on (a sandbox's
    ``PYTHONDONTWRITEBYTECODE`` would recompile the package at every start), plus ``extra``."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra)
    return env


def fresh(cmd: list[str], env: dict[str, str], timeout: float = 900) -> dict:
    """One fresh process: ``wall``, ``cpu`` (user + system) and ``maxrss_mib`` of that child alone
    (``os.wait4``), ``rc``, ``stdout`` and the tail of ``stderr``."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
        deadline = t + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss_mib": usage.ru_maxrss / 1024,
                "rc": proc.returncode, "stdout": out.read(), "stderr": err.read()[-2000:]}


def _row(name: str, value: float, unit: str, baseline: float | None = None, note: str = "") -> dict:
    """A row of ``python -m benchmarks``'s table (``ratio`` = baseline / value)."""
    r = {"section": "defaults", "name": name, "value": value, "unit": unit, "note": note}
    if baseline is not None:
        r["baseline"] = baseline
        r["ratio"] = baseline / value if value else None
    return r


def point(name: str) -> list[str]:
    """The flags of ``name``'s typical point (:data:`POINTS`)."""
    if name in POINTS:
        return list(POINTS[name])
    from replica.registry import load_module

    return ["--alpha", "2", "--branch", next(iter(load_module(name).BRANCHES))]


def bench_model(name: str) -> tuple[dict, dict]:
    """The row and the record of one model (see the module docstring)."""
    flags = point(name)
    cmd = [sys.executable, "-m", "replica", "solve", name, *flags, "--json"]
    env = user_env()
    fresh(cmd, env)  # untimed: the caches a user's second command finds
    run = fresh(cmd, env)
    api = fresh([sys.executable, "-c", _API_CHILD, name, *flags], env)
    rec = {k: run[k] for k in ("wall", "cpu", "maxrss_mib", "rc")}
    rec.update(command="replica solve " + " ".join([name, *flags, "--json"]), load=os.getloadavg()[0],
               api_maxrss_mib=api["maxrss_mib"])
    if run["rc"] != 0 or api["rc"] != 0:
        rec["error"] = (run["stderr"] if run["rc"] else api["stderr"])[-300:]
        return _row(rec["command"], float("nan"), "s", note="failed: " + rec["error"]), rec
    res, base = json.loads(run["stdout"]), json.loads(api["stdout"])
    rec.update(api_seconds=base["seconds"], api_iterations=base["iterations"], rule=base["rule"],
               accuracy_met=res.get("accuracy_met"), notes=len(res.get("notes", [])))
    note = (f"CPU {run['cpu']:.1f} s, peak RSS {run['maxrss_mib']:.0f} MiB, load {rec['load']:.1f}; baseline: the bare "
            f"API solve of the point ({base['iterations']} iterations on {base['rule']}), warm process; "
            f"accuracy_met={res.get('accuracy_met')}, rs_stable={res.get('rs_stable')}")
    return _row(rec["command"] + " (fresh process)", run["wall"], "s", baseline=base["seconds"], note=note), rec


def bench_first_run() -> tuple[list[dict], dict]:
    """The paper point's command with an empty cache, then again on that cache."""
    cmd = [sys.executable, "-m", "replica", "solve", *FIRST_RUN, "--json"]
    with tempfile.TemporaryDirectory(prefix="replica-bench-cache-") as tmp:
        env = user_env(REPLICA_CACHE=tmp, NUMBA_CACHE_DIR=str(Path(tmp) / "numba"))
        fresh([sys.executable, "-c", "import replica"], env)  # the bytecode cache, not the point here
        cold = fresh(cmd, env)
        warm = fresh(cmd, env)
    rows, data = [], {"cold": {k: cold[k] for k in ("wall", "cpu", "maxrss_mib", "rc")},
                      "warm": {k: warm[k] for k in ("wall", "cpu", "maxrss_mib", "rc")}}
    name = "replica solve " + " ".join(FIRST_RUN) + " --json"
    rows.append(_row(name + ", empty cache (first command after installation)", cold["wall"], "s",
                     note=f"CPU {cold['cpu']:.1f} s (numba compiles the kernels the command calls), peak RSS "
                          f"{cold['maxrss_mib']:.0f} MiB, load {os.getloadavg()[0]:.1f}"))
    rows.append(_row(name + ", the same cache again", warm["wall"], "s", baseline=cold["wall"],
                     note=f"CPU {warm['cpu']:.1f} s, peak RSS {warm['maxrss_mib']:.0f} MiB; ratio = empty / warm"))
    return rows, data


def bench_defaults(quick: bool = False, models: list[str] | None = None) -> tuple[list[dict], dict]:
    """The ``defaults`` section: every declared model's default command (``quick``: the paper's
    model and one GLM only), then the first-run row."""
    from replica.registry import declared_models

    names = models or (["attention_tied", "ridge"] if quick else declared_models())
    rows, data = [], {"models": {}}
    for name in names:
        print(f"[defaults] {name} ...", file=sys.stderr, flush=True)
        r, rec = bench_model(name)
        rows.append(r)
        data["models"][name] = rec
    print("[defaults] first run, empty cache ...", file=sys.stderr, flush=True)
    r, data["first_run"] = bench_first_run()
    rows += r
    return rows, data


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    out = ["| measurement | value | baseline | ratio | notes |", "|---|---|---|---|---|"]
    for r in rows:
        b = f"{r['baseline']:.3g} {r['unit']}" if r.get("baseline") is not None else ""
        q = f"{r['ratio']:.3g}x" if r.get("ratio") else ""
        out.append(f"| {r['name']} | {r['value']:.3g} {r['unit']} | {b} | {q} | {r['note']} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.defaults", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated models (default: every declared model)")
    ap.add_argument("--quick", action="store_true", help="the paper's model and ridge only")
    ap.add_argument("--out", default=str(OUT), help=f"JSON results (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--markdown", help="write the table here too")
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",")] if args.models else None
    load0 = os.getloadavg()[0]
    rows, data = bench_defaults(args.quick, models)
    data.update(loadavg=[load0, os.getloadavg()[0]], cpu_count=os.cpu_count(), python=sys.version.split()[0])
    md = table(rows)
    print(md)
    Path(args.out).write_text(json.dumps({"rows": rows, "data": data}, indent=1, default=float))
    if args.markdown:
        Path(args.markdown).write_text(md + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

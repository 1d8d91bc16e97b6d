"""The zero-temperature 1RSB point as users run it (``replica solve ... --rsb 1``), against the replica-symmetric
solve of the same point, both in fresh processes of the same run::

    python -m benchmarks.rsb [--paper-alpha 0.8] [--repeat 1] [--json] [--skip-paper]
    python -m benchmarks.rsb paper [--alpha A --branch B]     # the paper's model, m by m (docs/how-to/rsb.md)

* ``glm``: ``replica solve phase_retrieval --alpha 2 --branch uninformative --rsb 1 --json`` (a GLM-sized
  1RSB point with its error bars and the replica-symmetric point it starts from; target <= 30 s on 2
  cores), baseline ``replica solve phase_retrieval --alpha 2 --branch uninformative --json``;
* ``paper``: ``replica solve attention --omega 0.3 --alpha A --branch semantic --rsb 1 --json`` (the
  paper's model, target <= 10 min), baseline the replica-symmetric command.

Each command runs once untimed first (the on-disk caches a user's second command finds: the generated
1RSB module, numba's machine code), then ``--repeat`` times timed: wall and CPU seconds (children
included), the load average. Timings are only meaningful on a quiet machine; benchmarks/RESULTS.md
records a run. Not a timed test.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GLM = ["phase_retrieval", "--alpha", "2", "--branch", "uninformative"]


def paper(alpha: float) -> list[str]:
    """The paper's point on the semantic branch."""
    return ["attention", "--omega", "0.3", "--alpha", f"{alpha:g}", "--branch", "semantic"]


def timed(args: list[str], timeout: float) -> dict:
    """``python -m replica solve ARGS --json`` in a fresh process: wall, CPU (the child's), status, output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "replica", "solve", *args, "--json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row = dict(command="replica solve " + " ".join(args) + " --json", wall_s=round(wall, 2), cpu_s=round(cpu, 2),
               returncode=out.returncode, load=round(os.getloadavg()[0], 2))
    if out.returncode == 0:
        d = json.loads(out.stdout)
        row.update({k: d.get(k) for k in ("train_loss", "rs_train_loss", "parisi_m", "q1", "q0", "theta")})
    else:
        row["error"] = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else ""
    return row


def measure(case: list[str], repeat: int, timeout: float) -> dict:
    """The 1RSB command and its replica-symmetric baseline, warmed once, then ``repeat`` timed runs each."""
    timed(case + ["--rsb", "1"], timeout)
    timed(case, timeout)
    rsb = [timed(case + ["--rsb", "1"], timeout) for _ in range(repeat)]
    rs = [timed(case, timeout) for _ in range(repeat)]
    best = min(rsb, key=lambda r: r["wall_s"])
    base = min(rs, key=lambda r: r["wall_s"])
    return dict(rsb=rsb, rs=rs, ratio=round(best["wall_s"] / max(base["wall_s"], 1e-9), 2))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paper-alpha", type=float, default=0.8, help="alpha of the paper's point (default 0.8)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--skip-paper", action="store_true", help="the GLM point only")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "rsb.json"))
    args = ap.parse_args(argv)
    res = {"cpus": os.cpu_count(), "glm": measure(GLM, args.repeat, 1800)}
    if not args.skip_paper:
        res["paper"] = measure(paper(args.paper_alpha), args.repeat, 3600)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        for name in ("glm", "paper"):
            if name in res:
                r = res[name]
                for row in r["rsb"] + r["rs"]:
                    print(f"{name:6s} {row['wall_s']:9.1f} s wall {row['cpu_s']:9.1f} s cpu  load {row['load']:5.2f}  "
                          f"{row['command']}")
                print(f"{name:6s} 1RSB / RS wall ratio {r['ratio']}")
    return 0




# --------------------------------------------------------------------------- the paper's model, m by m
#: (alpha, branch, Parisi parameters) of the study: the branches the replicon flags at omega = 0.3 (the semantic
#: branch merges into the agnostic one below alpha_b ~ 0.72), the complexity's sign along the parameters
PAPER_POINTS = ((0.8, "semantic", (30.0, 100.0, 300.0, 1000.0)), (1.0, "semantic", (100.0, 300.0, 1000.0)),
                (0.6, "agnostic", (10.0, 30.0, 100.0)))
PAPER_M = (300.0, 1000.0, 3000.0)
#: the nested rules (outer, inner orders of :class:`replica.numeric.rsb.LaplaceRule`)
PAPER_RULES = ((8, 6),)


def paper_study(alpha: float, branch: str, ms=PAPER_M, rules=PAPER_RULES, log=print) -> dict:
    """The paper's model (omega = 0.3) at one point: the replica-symmetric point, then the 1RSB saddle point at
    every Parisi parameter of ``ms`` (warm-started along them) on each nested rule of ``rules``
    (:class:`replica.numeric.rsb.LaplaceRule`): order parameters, complexity, free entropy, eps_g, residual."""
    from replica.numeric import rsb
    from replica.registry import load_module
    from replica.registry.rsb import load_rsb_module
    from replica.numeric.integrators import from_spec
    from replica.numeric.solver import Solver

    rsm = load_module("attention")
    mod = load_rsb_module("attention", quiet=True)
    rs = Solver(rsm, {"omega": 0.3}, branch=branch, rule=from_spec("auto", rsm, branch))
    t0 = time.perf_counter()
    fp = rs.solve_best(alpha)
    out = dict(alpha=alpha, branch=branch, rs=dict(fp.order, train_loss=fp.train_loss, eps_g=fp.eps_g,
                                                   seconds=round(time.perf_counter() - t0, 1)), rows=[])
    log(f"alpha={alpha} {branch}: RS {fp.order} e_t={fp.train_loss:.7g}")
    for outer, inner in rules:
        solver = rsb.RSBSolver(mod, rs, rule=rsb.LaplaceRule(mod, outer, inner, rs.symmetries))
        x = solver.conv.from_rs(fp.x, 0.3, solver.p)
        for m in ms:
            t = time.perf_counter()
            try:
                st, n = solver.solve_fixed_m(alpha, m, x)
            except Exception as exc:  # an inadmissible start: recorded, the ladder goes on
                out["rows"].append(dict(rule=[outer, inner], m=m, error=f"{type(exc).__name__}: {exc}"))
                log(f"  rule {outer}/{inner} m={m:g}: {exc}")
                continue
            pot = solver.potentials(st, alpha)
            obs, _ = rs.test_observables(solver.conv.rs_state(st.x, "q1"), estimate=False)
            row = dict(rule=[outer, inner], m=m, kind=solver.classify(st), residual=st.residual(),
                       order=dict(zip(mod.ORDER_PARAMETERS, map(float, st.x))), complexity=pot["complexity"],
                       train_loss=-pot["phi"], eps_g=obs["eps_g"], uncorrelated=solver.uncorrelated,
                       evaluations=n, seconds=round(time.perf_counter() - t, 1))
            out["rows"].append(row)
            log(f"  rule {outer}/{inner} m={m:g}: {row['kind']} {row['order']} Sigma={row['complexity']:.3g} "
                f"e_t={row['train_loss']:.7g} res={row['residual']:.1e} ({row['seconds']} s)")
            if row["kind"] == "solved":
                x = st.x
    return out


def paper_main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.rsb paper [--alpha A --branch B]``: :func:`paper_study` on :data:`PAPER_POINTS`
    (or one point), appended as JSON lines to ``benchmarks/results/rsb_paper.jsonl``."""
    ap = argparse.ArgumentParser(description=paper_study.__doc__.split("\n\n")[0])
    ap.add_argument("--alpha", type=float, default=None)
    ap.add_argument("--branch", default=None)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "rsb_paper.jsonl"))
    args = ap.parse_args(argv)
    points = [(args.alpha, args.branch, PAPER_M)] if args.alpha is not None else PAPER_POINTS
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    for alpha, branch, ms in points:
        res = paper_study(alpha, branch, ms, log=lambda s: print(s, flush=True))
        with open(args.out, "a") as fh:
            fh.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(paper_main(sys.argv[2:]) if sys.argv[1:2] == ["paper"] else main())

"""``python -m benchmarks.committees``: what a new model's default command costs, against its number of fields.

One row per model, each a new model file written to a scratch folder and solved by the command a user
runs first, ``replica solve FILE.py --alpha A`` (the default branch, rules, error bars and replicon), in
a fresh process:

* **cold**: with an empty cache (``REPLICA_CACHE`` a new folder): generation of the module,
  compilation of its kernels, the solve;
* **warm**: the same command again on that cache (the module and its compiled unit reused).

Wall time (the process from start to exit) and CPU time (the child's ``getrusage``: user + system,
which counts both cores when both work) are reported with the budget of each model:

=========================================  =========================  ======
model                                      fields (student+teacher)   budget
=========================================  =========================  ======
GLM (ridge: one field)                     1 + 1                      10 s
committee, 2 tanh units (2-unit teacher)   2 + 2                      30 s
committee, 3 units                         3 + 3                      90 s
committee, 4 units                         4 + 4                      5 min
two-head attention (rank-one heads, L = 2) 4 + 2                      2 min
=========================================  =========================  ======

The budgets are for a quiet two-core machine; on a shared one wall times stretch with the load,
which the row's ``load`` (the 1-minute load average at the start) records. ``--models`` picks rows,
``--json FILE`` writes the rows.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import row, user_env

ROOT = Path(__file__).resolve().parent.parent

GLM = '''
import sympy as sp
from replica import L2, Domain, Model, TokenStatistics, fields, parameter, symbol, teacher_fields
h, hs = fields(1, 1), teacher_fields(1, 1)
z, delta, lam = symbol("noise", "z"), parameter("Delta"), parameter("lam")
model = Model(name="bench_glm", h=h, hstar=hs, loss=(hs[0] + sp.sqrt(delta) * z - h[0]) ** 2 / 2, noise=[z],
              data=TokenStatistics.isotropic(1, 1), regularizer=L2(lam), parameters={delta: 0.25, lam: 0.1},
              domains={delta: Domain(0, None), lam: Domain(0, None)})
'''

COMMITTEE = '''
import sympy as sp
from replica import L2, Domain, Model, TokenStatistics, fields, parameter, teacher_fields
K = {K}
h, hs = fields(1, K), teacher_fields(1, K)
lam = parameter("lam")
S = sum(sp.tanh(h[0, k]) for k in range(K)) / sp.sqrt(K)
T = sum(sp.tanh(hs[0, k]) for k in range(K)) / sp.sqrt(K)
model = Model(name="bench_committee{K}", h=h, hstar=hs, loss=(T - S) ** 2 / 2, data=TokenStatistics.isotropic(1, 1),
              regularizer=L2(lam), parameters={{lam: 0.1}}, domains={{lam: Domain(0, None)}})
'''

TWO_HEADS = '''
import numpy as np
import sympy as sp
from replica import (L2, Domain, Model, TokenReduction, TokenStatistics, fields, matrix_parameter, parameter,
                     row_stochastic, softmax_rows, teacher_fields)
h, hs = fields(2, 2), teacher_fields(2, 1)          # two tokens; two rank-one heads; a rank-one teacher
omega, sigma, lam = parameter("omega"), parameter("sigma"), parameter("lam")
A = matrix_parameter("A", 2, 2)
heads = [softmax_rows(h[:, k] * h[:, k].T) for k in range(2)]
model = Model(name="bench_two_heads", h=h, hstar=hs, student=(heads[0] + heads[1]) / 2,
              target=(1 - omega) * softmax_rows(hs * hs.T) + omega * A,
              data=TokenStatistics.isotropic(2, sigma ** 2, positional=(1, -1)), regularizer=L2(lam),
              parameters={omega: 0.3, sigma: 0.5, lam: 0.01, A: np.array([[0.6, 0.4], [0.4, 0.6]])},
              domains={omega: Domain(0, 1), sigma: Domain(0, None), lam: Domain(0, None)},
              constraints=row_stochastic(A, "A"),
              reduction=TokenReduction({"q": [1, 1], "V": [1, 1], "theta": [1, 1], "m": [1, -1]}))
'''

#: name -> (file text, student fields, teacher fields, budget in seconds, alpha)
MODELS = {
    "glm": (GLM, 1, 1, 10.0, 2.0),
    "committee2": (COMMITTEE.format(K=2), 2, 2, 30.0, 2.0),
    "committee3": (COMMITTEE.format(K=3), 3, 3, 90.0, 2.0),
    "committee4": (COMMITTEE.format(K=4), 4, 4, 300.0, 2.0),
    "two_heads": (TWO_HEADS, 4, 2, 120.0, 2.0),
}


def timed(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[float, float, int, str]:
    """``(wall, cpu, returncode, last stderr line)`` of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        rc, err = p.returncode, (p.stderr.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired:
        rc, err = 124, f"timed out after {timeout:.0f} s"
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, rc, err


def measure(name: str, timeout: float) -> list[dict]:
    """The cold and the warm run of one model (rows of :func:`benchmarks.common.row`)."""
    text, fs, ft, budget, alpha = MODELS[name]
    with tempfile.TemporaryDirectory(prefix="replica-bench-") as tmp:
        tmp_path = Path(tmp)
        path = tmp_path / f"bench_{name}.py"
        path.write_text(text)
        env = user_env()
        env["REPLICA_CACHE"] = str(tmp_path / "cache")
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, "-m", "replica", "solve", str(path), "--alpha", str(alpha)]
        load = os.getloadavg()[0]
        out = []
        for kind in ("cold", "warm"):
            wall, cpu, rc, err = timed(cmd, env, tmp_path, timeout)
            note = (f"fields {fs}+{ft}; budget {budget:g} s; load {load:.1f}; "
                    + ("ok" if rc == 0 else f"exit {rc}: {err[:160]}"))
            r = row("committees", f"{name} {kind} wall", wall, "s", note=note)
            r.update(fields=fs + ft, student_fields=fs, teacher_fields=ft, budget=budget, kind=kind, cpu=cpu,
                     within_budget=bool(rc == 0 and wall <= budget), returncode=rc)
            out.append(r)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per command (default 1800)")
    ap.add_argument("--json", default=None, metavar="FILE", help="write the rows to FILE")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"benchmarks.committees: error: --models: unknown {unknown[0]!r}; choose from {list(MODELS)}",
              file=sys.stderr)
        return 2
    rows = []
    print(f"{'model':<12} {'fields':>6} {'run':>5} {'wall s':>8} {'cpu s':>8} {'budget':>7}  within  note")
    for n in names:
        for r in measure(n, args.timeout):
            rows.append(r)
            print(f"{n:<12} {r['fields']:>6} {r['kind']:>5} {r['value']:>8.1f} {r['cpu']:>8.1f} {r['budget']:>7.0f}  "
                  f"{'yes' if r['within_budget'] else 'NO':<6}  {r['note']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

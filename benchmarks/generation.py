"""The ``generation`` section of ``python -m benchmarks`` (issue 38): how long deriving a model takes.

Per declared model, ``replica generate MODEL --out FILE`` in a fresh process (the command users
run: interpreter start, imports, the symbolic derivation and code generation), wall and CPU time
(the child's ``getrusage``).

The baseline, in the same run, is the same command on sympy's tree-walking rewrites -- what the
generator did before ``replica/codegen/dag.py``: ``sp.cse(..., optimizations="basic")``,
``Basic.replace``, ``free_symbols`` and a ``hoist`` without a memo (installed in the child
before it generates; the module it writes must be the same, which the row records). The
baseline costs minutes for the largest models (softmax_argmax3), and its module must equal the one
the command wrote byte for byte (stamp lines aside), so by default it runs only on
the models listed in :data:`BASELINE_QUICK`; ``--generation-baseline all`` runs it on every
model (``none`` on none).
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: models whose baseline (tree-walking rewrites) a default run measures: a few seconds to a minute each
BASELINE_QUICK = ("attention_tied", "attention_untied", "attention_rank2")

_BASELINE_CHILD = r"""
import sys
import sympy as sp
import replica.codegen.backends as B
import replica.codegen.printers as P


def hoist(expr, variables, table):
    if expr.is_Atom:
        return expr
    if not (expr.free_symbols & variables):
        if expr not in table:
            table[expr] = sp.Symbol(f"_k{len(table)}")
        return table[expr]
    if expr.is_Add or expr.is_Mul:
        const = [a for a in expr.args if not (a.free_symbols & variables)]
        var = [hoist(a, variables, table) for a in expr.args if a.free_symbols & variables]
        if len(const) > 1 or (const and not const[0].is_Atom):
            const = [hoist(expr.func(*const), variables, table)]
        return expr.func(*const, *var, evaluate=False)
    return expr.func(*[hoist(a, variables, table) for a in expr.args])


B.cse = lambda exprs, symbols: sp.cse(exprs, symbols=symbols, optimizations="basic")
B.free_symbols = lambda exprs: set().union(set(), *[e.free_symbols for e in exprs])
B.hoist = hoist
P.replace = lambda e, query, value: e.replace(query, value)
from replica.cli import entry
sys.argv = ["replica", "generate", sys.argv[1], "--out", sys.argv[2]]
entry()
"""


def _strip(text: str) -> list[str]:
    return [line for line in text.splitlines() if "replica-artifact:" not in line
            and not line.startswith("GENERATOR_HASH")]


def _run(cmd: list[str], env: dict) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit status) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if res.returncode:
        print(res.stderr[-2000:], file=sys.stderr)
    return wall, cpu, res.returncode


def bench_generation(quick: bool, baseline: str = "quick") -> tuple[list[dict], dict]:
    """Rows: per model, the fresh-process generation time (ratio against the tree-walking
    baseline where it was measured)."""
    from benchmarks.common import row, user_env
    from replica.registry import declared_models

    env = user_env()  # as a user's interpreter: bytecode cache on
    rows, data = [], {}
    names = declared_models()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            out = Path(tmp) / f"{name}.py"
            wall, cpu, rc = _run([sys.executable, "-m", "replica", "generate", name, "--out", str(out)], env)
            written = _strip(out.read_text()) if rc == 0 else None
            rec = {"wall_s": wall, "cpu_s": cpu, "ok": rc == 0}
            base = None
            if baseline == "all" or (baseline == "quick" and name in BASELINE_QUICK and not quick):
                bout = Path(tmp) / f"{name}_baseline.py"
                bwall, bcpu, brc = _run([sys.executable, "-c", _BASELINE_CHILD, name, str(bout)], env)
                bsame = brc == 0 and written is not None and _strip(bout.read_text()) == written
                rec.update(baseline_wall_s=bwall, baseline_cpu_s=bcpu, baseline_identical=bsame)
                base = bwall
            data[name] = rec
            note = f"cpu {cpu:.1f} s" + ("" if rc == 0 else "; FAILED")
            if base is not None:
                note += (f"; baseline = sympy's tree-walking rewrites, cpu {rec['baseline_cpu_s']:.1f} s, "
                         f"identical: {rec['baseline_identical']}")
            note += f"; load {os.getloadavg()[0]:.1f}"
            rows.append(row("generation", f"replica generate {name} (fresh process)", wall, "s", base, note))
    return rows, data

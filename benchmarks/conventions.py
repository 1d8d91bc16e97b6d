"""The prox conventions side by side on the paper's model (docs/explanation/conventions.md).

``python -m benchmarks.conventions run`` solves, each in a fresh ``replica`` process (so the
wall times are the commands users run): the semantic branch at ``omega = 0.3`` for several
``alpha``, under the global and the local convention, on the default rules (with their error
bars) and on the degree-7 pair cubature ``d7`` (a low-order rule of the kind the paper's code
used, solved in-process without refinement); and ``alpha_c``, ``alpha_l`` at ``omega = 0.1, 0.3`` the same
four ways. Results are
cached in ``benchmarks/results/conventions.json`` (rerunning skips what is there);
``python -m benchmarks.conventions show`` prints the markdown tables of docs/explanation/conventions.md,
with the gradient-descent judge of :mod:`benchmarks.certify.gd` (runs ``judge_omega0.3`` and
``judge_omega0.1``) beside them.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(__file__).resolve().parent / "results" / "conventions.json"

ALPHAS = (0.6, 0.8, 1.0, 1.25, 2.0)
OMEGAS = (0.1, 0.3)
PROX = ("global", "local")
RULES = ("default", "d7")


def _key(kind: str, **kw) -> str:
    return kind + ":" + ",".join(f"{k}={v}" for k, v in sorted(kw.items()))


def _load() -> dict:
    return json.loads(CACHE.read_text()) if CACHE.exists() else {}


def _save(data: dict) -> None:
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    tmp = CACHE.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, CACHE)


def _replica(args: list[str]) -> tuple[dict | None, float, str]:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "replica", *args], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        return None, wall, (res.stderr.strip().splitlines() or ["?"])[-1]
    return json.loads(res.stdout), wall, ""


def tasks():
    for prox in PROX:
        for a in ALPHAS:
            args = ["solve", "attention", "--omega", "0.3", "--alpha", str(a), "--branch", "semantic",
                    "--prox", prox, "--json", "--no-replicon"]
            yield _key("solve", rule="default", prox=prox, alpha=a), args
    from benchmarks.certify.study import TABLE_POINTS

    for label, omega, A, branch, alpha, _ in TABLE_POINTS:
        if omega == 0.3 and branch == "semantic" and alpha in ALPHAS:
            continue
        for prox in PROX:
            args = ["solve", "attention", "--omega", repr(omega), "--alpha", repr(alpha), "--branch", branch,
                    "--A", ",".join(repr(float(v)) for r in A for v in r), "--prox", prox, "--json", "--no-replicon"]
            yield _key("point", label=label, prox=prox), args
    for rule in RULES:
        for prox in PROX + (("local-stay",) if rule == "d7" else ()):
            for w in OMEGAS:
                args = ["phase", "attention", "--omega", str(w), "--thresholds-only", "--prox", prox[:5], "--json",
                        "--no-cache"]
                if prox == "local-stay":
                    args += ["--prox-saddles", "stay"]
                if rule != "default":
                    args += ["--quadrature", rule]
                yield _key("phase", rule=rule, prox=prox, omega=w), args


#: the d7 computations: the two conventions, and the local one keeping a stationary start where its
#: descent does not move (as a quasi-Newton code from h = 0 does at the nodes where omega = 0)
D7_VARIANTS = ("global", "local", "local-stay")


def _convention(variant: str):
    from replica.numeric.prox import prox_convention

    if variant == "local-stay":
        return prox_convention("local", None, "stay")
    return prox_convention(variant)


def d7_branch(variant: str) -> list[dict]:
    """The semantic branch at omega = 0.3 on the degree-7 pair cubature alone (no refinement, no
    bars: the paper's kind of computation), continued down in alpha from alpha = 2."""
    from replica.numeric.quadrature import degree7_pairs
    from replica.registry import load_module
    from replica.numeric.solver import Solver

    prox = _convention(variant)
    mod = load_module("attention")
    rows, x0 = [], None
    for a in sorted(ALPHAS + (0.79, 0.7, 0.5, 0.4), reverse=True):
        solver = Solver(mod, {"omega": 0.3}, branch="semantic", prox=prox, rule=degree7_pairs(4),
                        error_estimate=False)
        try:
            fp = solver.solve(a, x0=x0)
        except Exception as exc:  # noqa: BLE001 - a branch end is a row too
            rows.append(dict(alpha=a, error=str(exc).splitlines()[0]))
            x0 = None
            continue
        x0 = fp.x
        rows.append(dict(alpha=a, q=fp.order["q"], V=fp.order["V"], theta=fp.order["theta"], eps_g=fp.eps_g,
                         phi=fp.phi, branch_found=fp.branch_found))
    return rows


def run() -> None:
    data = _load()
    for key, args in tasks():
        if key in data:
            continue
        print("running replica " + " ".join(args), file=sys.stderr, flush=True)
        out, wall, err = _replica(args)
        data[key] = dict(args=args, wall=wall, result=out, error=err)
        _save(data)
    for variant in D7_VARIANTS:
        key = _key("d7branch", prox=variant)
        if key not in data:
            print(f"solving the d7 branch ({variant})", file=sys.stderr, flush=True)
            data[key] = dict(rows=d7_branch(variant))
            _save(data)


def _fmt(v, e=None, digits=4) -> str:
    if v is None:
        return "—"
    if e is None or e != e:
        return f"{v:.{digits}g}"
    return f"{v:.{digits}g} ± {e:.1g}"


def show() -> str:
    data = _load()
    d7 = {v: {r["alpha"]: r for r in data.get(_key("d7branch", prox=v), {}).get("rows", [])} for v in D7_VARIANTS}
    lines = ["| α | θ global ± bar | θ local ± bar | q global ± bar | q local ± bar | ε_g global | ε_g local | "
             "θ on d7: global / local / local, stationary start kept |", "|---|---|---|---|---|---|---|---|"]
    for a in ALPHAS:
        row = [f"{a:g}"]
        for name in ("theta", "q", "eps_g"):
            for prox in PROX:
                d = data.get(_key("solve", rule="default", prox=prox, alpha=a), {}).get("result")
                if d is None:
                    row.append("failed")
                    continue
                found = d.get("branch_found", True)
                row.append(_fmt(d[name], (d.get("errors") or {}).get(name)) + ("" if found else " (agnostic)"))
        cells = []
        for v in D7_VARIANTS:
            r = d7[v].get(a)
            cells.append("—" if r is None else (r.get("error", "failed")[:30] if "theta" not in r else
                                                _fmt(r["theta"]) + ("" if r["branch_found"] else " (agnostic)")))
        row.append(" / ".join(cells))
        lines.append("| " + " | ".join(row) + " |")
    extra = [a for a in sorted({a for v in D7_VARIANTS for a in d7[v]}, reverse=True) if a not in ALPHAS]
    if extra:
        lines += ["", "θ on d7 alone at other α (global / local / local, stationary start kept): " + "; ".join(
            f"α = {a:g}: " + " / ".join(_fmt(d7[v][a].get("theta")) if a in d7[v] else "—" for v in D7_VARIANTS)
            for a in extra)]
    lines += ["", "| ω | rule | α_c global | α_c local | α_c local, stationary start kept | α_l global | α_l local | "
                  "α_l local, stationary start kept |", "|---|---|---|---|---|---|---|---|"]
    for w in OMEGAS:
        for rule in RULES:
            row = [f"{w:g}", rule]
            for name in ("alpha_c", "alpha_l"):
                for prox in PROX + ("local-stay",):
                    key = _key("phase", rule=rule, prox=prox, omega=w)
                    d = data.get(key, {}).get("result")
                    row.append(("—" if key not in data else "failed") if d is None else _fmt(d.get(name), digits=4))
            lines.append("| " + " | ".join(row) + " |")
    from benchmarks.certify.study import TABLE_POINTS

    lines += ["", "| point | quantity | global ± bar | local ± bar | local − global | within the bars |",
              "|---|---|---|---|---|---|"]
    for label, omega, A, branch, alpha, _ in TABLE_POINTS:
        if omega == 0.3 and branch == "semantic" and alpha in ALPHAS:
            keys = {prox: _key("solve", rule="default", prox=prox, alpha=alpha) for prox in PROX}
        else:
            keys = {prox: _key("point", label=label, prox=prox) for prox in PROX}
        res = {prox: data.get(keys[prox], {}).get("result") for prox in PROX}
        if any(r is None for r in res.values()):
            continue
        first = True
        for name in ("q", "V", "m" if branch == "positional" else "theta", "eps_g", "phi"):
            if name not in res["global"]:
                continue
            g, loc = res["global"], res["local"]
            eg, el = (g.get("errors") or {}).get(name), (loc.get("errors") or {}).get(name)
            diff = loc[name] - g[name]
            known = eg is not None and el is not None
            within = ("unknown (a bar is null)" if not known else "yes" if abs(diff) <= eg + el else "no")
            lines.append(f"| {label if first else ''} | {name} | {_fmt(g[name], eg, 6)}{'' if eg is not None else ' ± null'} | "
                         f"{_fmt(loc[name], el, 6)}{'' if el is not None else ' ± null'} | {diff:+.2g} | {within} |")
            first = False
    walls = {}
    for key, v in data.items():
        if (key.startswith("solve:") and "rule=default" in key) or key.startswith("point:"):
            walls.setdefault("local" if "prox=local" in key else "global", []).append(v["wall"])
    if walls:
        lines += ["", "`replica solve` wall time (default rules, fresh process), median over the points above: " + ", ".join(
            f"{k} {sorted(v)[len(v) // 2]:.1f} s" for k, v in sorted(walls.items()))]
    return "\n".join(lines)


def judge() -> str:
    """Gradient descent at finite d, extrapolated in 1/d, against both conventions' theory: a verdict
    per point and quantity (a theory is excluded when it lies more than 3 combined standard
    errors -- GD's extrapolation and the theory's bar -- from GD's value)."""
    from benchmarks.certify.gd import extrapolate, load_gd

    data = _load()
    rows = [r for r in load_gd("judge_omega0.3") if r["init"] == "semantic"]
    lines = ["| α | quantity | GD, d = 500 / 1000 / 2000 | GD at d → ∞ (fit c/d) | global ± bar | local ± bar | "
             "verdict |", "|---|---|---|---|---|---|---|"]
    for a in ALPHAS:
        sub = sorted([r for r in rows if r["alpha"] == a], key=lambda r: r["d"])
        if not sub:
            continue
        th = {prox: data.get(_key("solve", rule="default", prox=prox, alpha=a), {}).get("result") for prox in PROX}
        for name, key in (("θ", "theta"), ("q", "q"), ("e_t", "e_t")):
            per_d = " / ".join(f"{r[key]:.4g}" for r in sub)
            if len(sub) >= 2:
                y, se = extrapolate(sub, key)
                gd = f"{y:.4g} ± {se:.2g}"
            else:
                y, se, gd = sub[0][key], sub[0][key + "_se"], f"(one size) {sub[0][key]:.4g}"
            cells, out = [], []
            for prox in PROX:
                d = th[prox]
                tkey = "train_loss" if key == "e_t" else key
                if d is None:
                    cells.append("—")
                    continue
                v, e = d[tkey], (d.get("errors") or {}).get(tkey)
                found = d.get("branch_found", True)
                cells.append(_fmt(v, e) + ("" if e is not None else " ± null") + ("" if found else " (agnostic)"))
                if len(sub) >= 2 and e is not None and abs(v - y) > 3 * (se ** 2 + e ** 2) ** 0.5:
                    out.append(prox)
            verdict = ("GD excludes " + " and ".join(out) if out else "neither excluded") if len(sub) >= 2 else \
                "one size only"
            lines.append(f"| {a:g} | {name} | {per_d} | {gd} | {cells[0]} | {cells[1]} | {verdict} |")
    return "\n".join(lines)


def write_doc(path: Path = ROOT / "docs" / "explanation" / "conventions.md") -> None:
    """Replace the generated tables of ``path`` (between its BEGIN/END markers)."""
    text = path.read_text()
    for name, body in (("CONVENTIONS", show()), ("JUDGE", judge())):
        a, b = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
        i, j = text.index(a) + len(a), text.index(b)
        text = text[:i] + "\n" + body + "\n" + text[j:]
    path.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.conventions", description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["run", "show", "write"],
                    help="run: compute what is not cached; show: print the tables; write: update docs/explanation/conventions.md")
    a = ap.parse_args(argv)
    if a.action == "run":
        run()
    if a.action == "write":
        write_doc()
        return 0
    print(show())
    print()
    print(judge())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The certified study of the paper's model: every number of ``docs/certified.md``.

Each task solves reference fixed points (cached in ``results/points.jsonl`` so that a rerun only
computes what is missing), asks ``replica`` for its value of the same number (``replica solve
... --json`` in a fresh process, what a user gets), and writes CSV tables.

Error bars of the reference (the protocol of ``docs/certified.md``): a point is solved with the
``fine`` rule and with the ``check`` rule (fewer teacher nodes); the bar on every reported number
is ``|fine - check|`` plus the first-order effect of the remaining knobs at the fine solution:
the switch-detection grid doubled and the prox certified at every grid/bisection point
(``variant``), propagated through the coarse Jacobian (``dx = -J^{-1} dG``; ``dPhi = alpha
dPsi_y`` since ``Phi`` is stationary; ``eps_g`` re-evaluated at ``x + dx``).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .energetic import AdaptiveRule, eps_g_average
from .fixedpoint import (NotConverged, free_mask, jacobian, solve, solve_at_theta, solve_refined, state_map)
from .model import PAPER_A, SECOND_A, Params, entropic, conjugates, psi_t, psi_w
from .rules import hermite

RESULTS = Path(__file__).resolve().parent / "results"
STORE = RESULTS / "points.jsonl"

RULES = {
    "coarse": dict(n_teacher=8, rtol=1e-4, K=21, cert=0),     # Jacobians and first guesses only
    "scan": dict(n_teacher=12, rtol=1e-5, K=31, cert=0),
    # the inner adaptive error is ~1e-9 relative at rtol 1e-6 and ~1e-8 at 1e-4, far below the
    # teacher-rule error (~1e-5..1e-4): the wide states use the cheaper inner tolerances
    "scan4": dict(n_teacher=12, rtol=1e-4, K=31, cert=0),
    "mid": dict(n_teacher=16, rtol=1e-5, K=31, cert=0),
    "check": dict(n_teacher=16, rtol=1e-6, K=31, cert=0),
    "fine": dict(n_teacher=24, rtol=1e-6, K=31, cert=0),
}
NAMES = ("q", "V", "m", "theta")


def rule(name: str) -> AdaptiveRule:
    return AdaptiveRule(**RULES[name])


def log(msg: str) -> None:
    print(f"[certify {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- cache
def _key(**kw) -> str:
    return json.dumps({k: (round(v, 12) if isinstance(v, float) else v) for k, v in sorted(kw.items())})


def load_store() -> dict:
    out = {}
    if STORE.exists():
        for line in STORE.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                out[rec["key"]] = rec
    return out


def save_record(rec: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(STORE, "a") as fh:
        fh.write(json.dumps(rec) + "\n")


_STORE: dict | None = None


def cached(kind: str, compute, **kw) -> dict:
    global _STORE
    if _STORE is None:
        _STORE = load_store()
    k = _key(kind=kind, **kw)
    if k in _STORE:
        return _STORE[k]
    rec = compute()
    rec["key"] = k
    save_record(rec)
    _STORE[k] = rec
    return rec


def params(omega: float, A) -> Params:
    return Params(omega=float(omega), A=tuple(tuple(r) for r in A))


def _sol_record(s, p: Params) -> dict:
    d = s.as_dict()
    d["x"] = [float(v) for v in s.x]
    d["xhat"] = [float(v) for v in s.xhat]
    d["omega"] = p.omega
    d["A"] = [list(r) for r in p.A]
    return d


# ----------------------------------------------------------------------------- reference points
def fixed_point(omega: float, A, branch: str, alpha: float, x0, rule_name: str, near: bool = False) -> dict:
    """A reference fixed point (cached): Newton on the coarse rule (skipped if ``near``: ``x0`` is
    a fixed point of a nearby rule), Broyden steps on ``rule_name``."""
    p = params(omega, A)

    def compute():
        log(f"solve {branch} omega={omega} alpha={alpha:.6g} rule={rule_name}")
        s = solve_refined(alpha, x0, branch, p, rule(rule_name), rule("coarse"), coarse_solve=not near)
        return _sol_record(s, p)

    return cached("fixed_point", compute, omega=omega, A=[list(r) for r in A], branch=branch,
                  alpha=float(alpha), rule=rule_name)


def theta_point(omega: float, A, theta: float, u0, rule_name: str) -> dict:
    p = params(omega, A)

    def compute():
        log(f"solve semantic omega={omega} theta={theta:.6g} rule={rule_name}")
        s = solve_at_theta(theta, u0, p, rule(rule_name), rule("coarse"))
        return _sol_record(s, p)

    return cached("theta_point", compute, omega=omega, A=[list(r) for r in A], theta=float(theta), rule=rule_name)


def variant_shift(omega: float, A, branch: str, alpha: float, x, fine_rule: str = "fine") -> dict:
    """First-order effect on the fine solution of the knobs not refined by ``check``/``fine``:
    the same teacher rule with the detection grid doubled, the prox certified at every
    grid/bisection point and the adaptive tolerance divided by 10."""
    p = params(omega, A)
    var_rule = AdaptiveRule(n_teacher=RULES[fine_rule]["n_teacher"], rtol=RULES[fine_rule]["rtol"] / 10,
                            K=2 * RULES[fine_rule]["K"] - 1, cert=1)

    def compute():
        log(f"variant {branch} omega={omega} alpha={alpha:.6g}")
        free = free_mask(branch)
        xx = np.array(x, float)
        J = jacobian(alpha, xx, branch, p, rule("coarse"))
        xn_f, xh_f, py_f, avg_f = state_map(xx, alpha, p, rule(fine_rule))
        xn_v, xh_v, py_v, avg_v = state_map(xx, alpha, p, var_rule)
        dG = (xn_v - xn_f)[free]
        dx = np.zeros(4)
        dx[free] = -np.linalg.solve(J, dG)
        deps = eps_g_average(xx + dx, p) - eps_g_average(xx, p)
        return dict(dx=dx.tolist(), dphi=float(alpha * (py_v - py_f)), deps_g=float(deps),
                    stats=avg_v.prox_stats)

    return cached("variant", compute, omega=omega, A=[list(r) for r in A], branch=branch, alpha=float(alpha),
                  x=[round(float(v), 10) for v in x], rule=fine_rule)


def with_bar(fine: dict, check: dict, var: dict | None) -> dict:
    """Reference values (fine) and absolute error bars per reported number."""
    out = {"value": {}, "bar": {}}
    dx = np.array(var["dx"]) if var else np.zeros(4)
    for i, n in enumerate(NAMES):
        out["value"][n] = fine[n]
        out["bar"][n] = abs(fine[n] - check[n]) + abs(dx[i])
    for n, dv in (("phi", "dphi"), ("eps_g", "deps_g")):
        out["value"][n] = fine[n]
        out["bar"][n] = abs(fine[n] - check[n]) + (abs(var[dv]) if var else 0.0)
    out["value"]["alpha"] = fine["alpha"]
    return out


# ----------------------------------------------------------------------------- replica (the library)
def replica_solve(omega: float, A, branch: str, alpha: float) -> dict:
    """What ``replica solve`` prints (fresh process, default settings), cached."""

    def compute():
        cmd = [sys.executable, "-m", "replica", "solve", "attention", "--omega", repr(omega), "--alpha",
               repr(alpha), "--branch", branch, "--json"]
        if [list(r) for r in A] != [list(r) for r in PAPER_A]:
            cmd += ["--A", ",".join(repr(float(v)) for r in A for v in r)]
        env = dict(os.environ)
        root = Path(__file__).resolve().parents[2]
        env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
        log("replica " + " ".join(cmd[2:]))
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env)
        if r.returncode != 0:
            return dict(error=(r.stderr.strip().splitlines() or ["?"])[-1], returncode=r.returncode)
        d = json.loads(r.stdout)
        return {k: d.get(k) for k in ("q", "V", "m", "theta", "phi", "eps_g", "converged", "notes",
                                      "quadrature", "quadrature_residual")}

    return cached("replica", compute, omega=omega, A=[list(r) for r in A], branch=branch, alpha=float(alpha))


# ----------------------------------------------------------------------------- baseline
def eps_lin(p: Params, n: int = 80) -> float:
    """Linear baseline ``2 sigma^2 (1 - omega)^2 Var s(h*_1 (h*_1 - h*_2))`` (paper Result 5.1,
    THEORY §5 with rows summing to one), Gauss-Hermite 80^2 (converged to round-off)."""
    x, w = hermite(n)
    H1, H2 = np.meshgrid(np.sqrt(p.rho) * x, np.sqrt(p.rho) * x, indexing="ij")
    W = np.outer(w, w)
    s = 0.5 * (1 + np.tanh(0.5 * H1 * (H1 - H2)))
    m = np.sum(W * s)
    return float(2 * p.sig2 * (1 - p.omega) ** 2 * np.sum(W * (s - m) ** 2))


# ----------------------------------------------------------------------------- task: the table
#: (label, omega, A, branch, alpha, paper's value or None, fallback start)
TABLE_POINTS = [
    ("paper point (Fig. 2)", 0.3, PAPER_A, "semantic", 2.0, (0.11, 12.7, 0.0, 0.16)),
    ("semantic, alpha = 1.25", 0.3, PAPER_A, "semantic", 1.25, (0.0816, 18.3, 0.0, 0.118)),
    ("semantic, alpha = 1.0", 0.3, PAPER_A, "semantic", 1.0, (0.068, 21.4, 0.0, 0.096)),
    ("semantic, alpha = 0.9", 0.3, PAPER_A, "semantic", 0.9, (0.062, 23.5, 0.0, 0.081)),
    ("semantic, alpha = 0.8", 0.3, PAPER_A, "semantic", 0.8, (0.0567, 26.4, 0.0, 0.06)),
    ("semantic, alpha = 0.75", 0.3, PAPER_A, "semantic", 0.75, (0.054, 28.6, 0.0, 0.038)),
    ("agnostic, alpha = 2.275", 0.3, PAPER_A, "agnostic", 2.275, (0.111, 22.1, 0.0, 0.0)),
    ("positional, alpha = 0.5", 0.3, PAPER_A, "positional", 0.5, (0.0307, 20.6, 0.22, 0.0)),
    ("agnostic, alpha = 0.5", 0.3, PAPER_A, "agnostic", 0.5, (0.03, 35.0, 0.0, 0.0)),
    ("second A, semantic, alpha = 2", 0.14, SECOND_A, "semantic", 2.0, None),
    ("second A, positional, alpha = 2", 0.14, SECOND_A, "positional", 2.0, None),
    ("positional, omega = 0.5, alpha = 1", 0.5, PAPER_A, "positional", 1.0, None),
    ("positional, omega = 0.5, alpha = 2", 0.5, PAPER_A, "positional", 2.0, None),
]


#: rule pairs (check, fine): the semantic states are cheap (narrow prox-centre Gaussian) and get
#: 16 -> 24 teacher nodes; the wide agnostic/positional ones 12 -> 16 (their n_t-convergence is
#: erratic at the 1e-4 level, which the difference covers: see docs/certified.md) with the looser
#: inner tolerance
RULE_PAIRS = {"semantic": ("check", "fine"), "positional": ("scan4", "mid"), "agnostic": ("scan4", "mid")}
#: points where the remaining knobs (detection grid x2, certified prox at every grid/bisection
#: point, adaptive tolerance / 10) are measured; elsewhere they are reported as measured here
VARIANT_POINTS = ("paper point (Fig. 2)", "agnostic, alpha = 2.275", "positional, alpha = 0.5")


def table_row(label, omega, A, branch, alpha, start) -> dict:
    rep = replica_solve(omega, A, branch, alpha)
    x0 = None
    if rep.get("converged") and rep.get("q") is not None:
        x0 = [rep["q"], rep["V"], rep["m"], rep["theta"]]
    if x0 is None and start is not None:
        x0 = list(start)
    if x0 is None:
        raise RuntimeError(f"{label}: no start (replica failed: {rep.get('error')})")
    r_check, r_fine = RULE_PAIRS[branch]
    check = fixed_point(omega, A, branch, alpha, x0, r_check)
    fine = fixed_point(omega, A, branch, alpha, check["x"], r_fine, near=True)
    var = None
    if label in VARIANT_POINTS:
        var = variant_shift(omega, A, branch, alpha, fine["x"], fine_rule=r_fine)
    ref = with_bar(fine, check, var)
    return dict(label=label, omega=omega, A=[list(r) for r in A], branch=branch, alpha=alpha,
                reference=ref["value"], bar=ref["bar"], replica=rep, fine=fine, check=check, variant=var,
                rules=[r_check, r_fine])


def table(only: list[str] | None = None) -> list[dict]:
    rows = []
    for label, omega, A, branch, alpha, start in TABLE_POINTS:
        if only and not any(o in label for o in only):
            continue
        try:
            rows.append(table_row(label, omega, A, branch, alpha, start))
        except (NotConverged, RuntimeError) as exc:
            log(f"{label}: {exc}")
            rows.append(dict(label=label, omega=omega, A=[list(r) for r in A], branch=branch, alpha=alpha,
                             error=str(exc), replica=replica_solve(omega, A, branch, alpha)))
    return rows


# ----------------------------------------------------------------------------- task: the semantic branch's end
SEMANTIC_THETAS = (0.16, 0.14, 0.12, 0.10, 0.08, 0.06, 0.05, 0.04, 0.03, 0.02, 0.01, 0.005, 0.0025)


def semantic_branch(omega: float = 0.3, A=PAPER_A, rule_name: str = "check",
                    thetas=SEMANTIC_THETAS) -> dict:
    """The semantic branch parametrised by ``theta`` down to ``theta -> 0``; ``alpha_b``, where it
    meets the agnostic branch, from a fit ``alpha = alpha_b + c theta^2 + d theta^4`` through the
    three smallest ``theta`` (an even function: the map is odd in ``theta``)."""
    pts = []
    u = np.array([0.125, 11.5, 2.2])
    for th in thetas:
        if len(pts) >= 2:
            (t1, u1), (t2, u2) = [(r["theta"], np.array([r["q"], r["V"], r["alpha"]])) for r in pts[-2:]]
            u = u2 + (u2 - u1) * (th - t2) / (t2 - t1)
        elif len(pts) == 1:
            u = np.array([pts[0]["q"], pts[0]["V"], pts[0]["alpha"]])
        rec = theta_point(omega, A, th, u.tolist(), rule_name)
        pts.append(rec)
    small = sorted(pts, key=lambda r: r["theta"])[:3]
    T = np.array([r["theta"] for r in small])
    a = np.array([r["alpha"] for r in small])
    coef = np.linalg.solve(np.stack([np.ones(3), T ** 2, T ** 4], axis=1), a)
    alphas = [r["alpha"] for r in pts]
    turning = [i for i in range(1, len(alphas) - 1)
               if (alphas[i] - alphas[i - 1]) * (alphas[i + 1] - alphas[i]) < 0]
    return dict(omega=omega, rule=rule_name, points=pts, alpha_b=float(coef[0]), c2=float(coef[1]),
                c4=float(coef[2]), folds=[dict(theta=pts[i]["theta"], alpha=alphas[i]) for i in turning])


# ----------------------------------------------------------------------------- task: alpha_c, alpha_l
OMEGAS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45)


def _branch_solution(omega, A, branch, alpha, x0, rule_name):
    return fixed_point(omega, A, branch, round(float(alpha), 10), x0, rule_name)


def _positional_best(omega, A, alpha, starts, rule_name):
    """The positional solution with the largest ``Phi`` among those the starts reach."""
    best = None
    for x0 in starts:
        try:
            r = _branch_solution(omega, A, "positional", alpha, x0, rule_name)
        except NotConverged:
            continue
        if r["m"] < 1e-4:
            continue
        if best is None or r["phi"] > best["phi"]:
            best = r
    return best


def alpha_c(omega: float, A=PAPER_A, rule_name: str = "scan4", alpha0: float | None = None,
            tol: float = 1e-7, max_iter: int = 12) -> dict:
    """Newton on ``D(alpha) = Phi_sem - Phi_pos`` with ``D' = Psi_y,sem - Psi_y,pos`` (exact)."""
    alpha = float(alpha0 if alpha0 is not None else 0.62 + 1.3 * omega + 2.5 * omega ** 2)
    rs = replica_solve(omega, A, "semantic", round(alpha, 6))
    xs = [rs["q"], rs["V"], 0.0, rs["theta"]] if rs.get("converged") else [0.06, 24.0, 0.0, 0.08]
    rp = replica_solve(omega, A, "positional", round(alpha, 6))
    starts = [[rp["q"], rp["V"], rp["m"], 0.0]] if rp.get("converged") else []
    starts += [[0.045, 21.0, 0.19, 0.0], [0.055, 27.0, 0.08, 0.0]]
    hist = []
    for it in range(max_iter):
        sem = _branch_solution(omega, A, "semantic", alpha, xs, rule_name)
        pos = _positional_best(omega, A, alpha, starts, rule_name)
        if pos is None:
            raise NotConverged(f"omega={omega}: no positional solution at alpha={alpha}")
        D = sem["phi"] - pos["phi"]
        dD = sem["psi_y"] - pos["psi_y"]
        hist.append(dict(alpha=alpha, D=D, dD=dD, m_pos=pos["m"], theta_sem=sem["theta"]))
        step = -D / dD
        step = max(min(step, 0.3 * alpha), -0.3 * alpha)
        xs = sem["x"]
        starts = [pos["x"]]
        if abs(step) < tol:
            break
        alpha = alpha + step
    else:
        raise NotConverged(f"omega={omega}: alpha_c Newton did not converge: {hist[-3:]}")
    return dict(omega=omega, alpha_c=alpha + step, rule=rule_name, history=hist, semantic=sem, positional=pos)


def alpha_l(omega: float, A=PAPER_A, rule_name: str = "scan4", start: dict | None = None,
            tol: float = 1e-7, max_iter: int = 15) -> dict:
    """Secant on ``eps_g,sem(alpha) - eps_lin`` along the semantic branch, from its solution ``start``."""
    p = params(omega, A)
    el = eps_lin(p)
    a0 = start["alpha"]
    x = start["x"]
    f0 = start["eps_g"] - el
    a1 = a0 * (1.15 if f0 > 0 else 0.95)
    r1 = _branch_solution(omega, A, "semantic", a1, x, rule_name)
    f1 = r1["eps_g"] - el
    hist = [dict(alpha=a0, f=f0), dict(alpha=a1, f=f1)]
    for it in range(max_iter):
        a2 = a1 - f1 * (a1 - a0) / (f1 - f0)
        a2 = min(max(a2, 0.7 * a1), 1.5 * a1)
        if abs(a2 - a1) < tol:
            break
        r2 = _branch_solution(omega, A, "semantic", a2, r1["x"], rule_name)
        a0, f0, a1, f1, r1 = a1, f1, a2, r2["eps_g"] - el, r2
        hist.append(dict(alpha=a1, f=f1))
    else:
        raise NotConverged(f"omega={omega}: alpha_l secant did not converge: {hist[-3:]}")
    return dict(omega=omega, alpha_l=a2, eps_lin=el, rule=rule_name, history=hist, semantic=r1)


def thresholds(omegas=OMEGAS, A=PAPER_A, rule_name: str = "scan4", bar_rule: str = "mid",
               guesses: dict | None = None) -> list[dict]:
    """``alpha_c``, ``alpha_l`` per ``omega`` on ``rule_name``. Bar: one Newton step on the
    ``bar_rule`` from the roots (``dalpha = -D_bar(alpha_c) / D'``, same for ``alpha_l``; the
    bar rule's solutions start from the first rule's), plus the root tolerance."""
    rows = []
    guesses = guesses or {}
    for om in omegas:
        try:
            c = alpha_c(om, A, rule_name, alpha0=guesses.get(om))
            l = alpha_l(om, A, rule_name, c["semantic"])
            ac, al = c["alpha_c"], l["alpha_l"]
            sem = _branch_solution(om, A, "semantic", ac, c["semantic"]["x"], bar_rule)
            pos = _branch_solution(om, A, "positional", ac, c["positional"]["x"], bar_rule)
            dac = -(sem["phi"] - pos["phi"]) / (sem["psi_y"] - pos["psi_y"])
            sl = _branch_solution(om, A, "semantic", al, l["semantic"]["x"], bar_rule)
            h = l["history"]
            slope = (h[-1]["f"] - h[-2]["f"]) / (h[-1]["alpha"] - h[-2]["alpha"])
            dal = -(sl["eps_g"] - l["eps_lin"]) / slope
            rows.append(dict(omega=om, alpha_c=ac, alpha_c_bar=abs(dac) + 1e-7, alpha_l=al,
                             alpha_l_bar=abs(dal) + 1e-7, eps_lin=l["eps_lin"], m_pos=c["positional"]["m"],
                             theta_sem=c["semantic"]["theta"], eps_g_at_alpha_c=c["semantic"]["eps_g"],
                             rules=[rule_name, bar_rule]))
        except NotConverged as exc:
            log(f"omega={om}: {exc}")
            rows.append(dict(omega=om, error=str(exc)))
    return rows

"""The certified study of the paper's model: every number of ``docs/reference/certified.md``.

Each task solves reference fixed points (cached in ``results/points.jsonl`` so that a rerun only
computes what is missing), asks ``replica`` for its value of the same number (``replica solve
... --json`` in a fresh process, what a user gets), and writes CSV tables.

Error bars of the reference (the protocol of ``docs/reference/certified.md``): a point is solved with the
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
from .fixedpoint import NotConverged, free_mask, jacobian, solve_at_theta, solve_refined, state_map
from .model import PAPER_A, SECOND_A, Params
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
#: set by ``--cache-only``: a point missing from the cache is an error instead of a computation
CACHE_ONLY = False


class MissingPoint(RuntimeError):
    pass


def cached(kind: str, compute, **kw) -> dict:
    global _STORE
    if _STORE is None:
        _STORE = load_store()
    k = _key(kind=kind, **kw)
    if k in _STORE:
        return _STORE[k]
    if CACHE_ONLY:
        raise MissingPoint(f"not in {STORE.name}: {k}")
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
        out = {k: d.get(k) for k in ("q", "V", "m", "theta", "phi", "psi_y", "eps_g", "converged", "notes",
                                     "quadrature", "quadrature_residual", "accuracy", "accuracy_met", "rules")}
        out["errors"] = {k: (d.get("errors") or {}).get(k) for k in ("q", "V", "m", "theta", "phi", "psi_y", "eps_g")}
        return out

    return cached("replica", compute, omega=omega, A=[list(r) for r in A], branch=branch, alpha=float(alpha),
                  version=REPLICA_VERSION)


#: what ``replica solve`` the cached "replica" records are from: 2 = with the jump check in its
#: error bars (replica.numeric.accuracy.jump_check) and the bars recorded; records of older versions are
#: ignored (recomputed), the reference points are not affected
REPLICA_VERSION = 2


def replica_or_missing(omega: float, A, branch: str, alpha: float) -> dict:
    try:
        return replica_solve(omega, A, branch, alpha)
    except MissingPoint:
        return dict(error="not run in this cache")


# ----------------------------------------------------------------------------- baseline
def eps_lin(p: Params, n: int = 80) -> float:
    """Linear baseline ``2 sigma^2 (1 - omega)^2 Var s(h*_1 (h*_1 - h*_2))`` (paper Result 5.1,
    docs/explanation/theory.md §6 with rows summing to one), Gauss-Hermite 80^2 (converged to round-off)."""
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
#: erratic at the 1e-4 level, which the difference covers: see docs/reference/certified.md) with the looser
#: inner tolerance
RULE_PAIRS = {"semantic": ("check", "fine"), "positional": ("scan4", "mid"), "agnostic": ("scan4", "mid")}
#: points where the remaining knobs (detection grid x2, certified prox at every grid/bisection
#: point, adaptive tolerance / 10) are measured (2e-9 relative at the paper point); elsewhere
#: they are not part of the bar (the agnostic and positional variants did not fit in the CPU
#: budget of the session that computed the cache: docs/reference/certified.md §8)
VARIANT_POINTS = ("paper point (Fig. 2)",)


def table_row(label, omega, A, branch, alpha, start) -> dict:
    rep = replica_solve(omega, A, branch, alpha)
    x0 = None
    if rep.get("converged") and rep.get("q") is not None:
        x0 = [rep["q"], rep["V"], rep["m"], rep["theta"]]
        # a positional/semantic start on the agnostic subspace stays there (it is invariant):
        # start off it, so that reaching m = 0 (theta = 0) is a finding, not the start
        k = {"positional": 2, "semantic": 3}.get(branch)
        if k is not None and abs(x0[k]) < 1e-3 * math.sqrt(x0[0]):
            x0[k] = 0.3 * math.sqrt(x0[0])
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
        except MissingPoint:
            rows.append(dict(label=label, omega=omega, A=[list(r) for r in A], branch=branch, alpha=alpha,
                             error="not computed in this cache", replica=replica_or_missing(omega, A, branch, alpha)))
        except (NotConverged, RuntimeError) as exc:
            log(f"{label}: {exc}")
            rows.append(dict(label=label, omega=omega, A=[list(r) for r in A], branch=branch, alpha=alpha,
                             error=str(exc), replica=replica_or_missing(omega, A, branch, alpha)))
    return rows


# ----------------------------------------------------------------------------- task: the semantic branch's end
SEMANTIC_THETAS = (0.1179, 0.10, 0.08, 0.06, 0.05, 0.04, 0.03, 0.02, 0.01, 0.005)
#: the theta where the branch is also solved on the fine rule (the rule part of alpha_b's bar)
BAR_THETA = 0.01
#: the branch points (smallest theta first) in the fit alpha = alpha_b + c2 theta^2 + c4 theta^4
FIT_POINTS = 5


def semantic_branch(omega: float = 0.3, A=PAPER_A, rule_name: str = "check",
                    thetas=SEMANTIC_THETAS) -> dict:
    """The semantic branch parametrised by ``theta`` down to ``theta -> 0``; ``alpha_b``, where it
    meets the agnostic branch, from a least-squares fit ``alpha = alpha_b + c theta^2 + d theta^4``
    over the ``FIT_POINTS`` smallest ``theta`` (an even function: the map is odd in ``theta``)."""
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
    small = sorted(pts, key=lambda r: r["theta"])[:FIT_POINTS]
    T = np.array([r["theta"] for r in small])
    a = np.array([r["alpha"] for r in small])
    # least squares over the FIT_POINTS smallest theta: the rule noise of alpha at fixed theta
    # (~1e-4) makes an exact 3-point fit's theta^4 term meaningless
    coef = np.linalg.lstsq(np.stack([np.ones(T.size), T ** 2, T ** 4], axis=1), a, rcond=None)[0]
    # fit error: the fit without the theta^4 term through the three smallest theta
    c2 = np.linalg.lstsq(np.stack([np.ones(3), T[:3] ** 2], axis=1), a[:3], rcond=None)[0]
    ref = next(r for r in pts if r["theta"] == BAR_THETA)
    try:
        fine = theta_point(omega, A, BAR_THETA, [ref["q"], ref["V"], ref["alpha"]], "fine")
        rule_shift = fine["alpha"] - ref["alpha"]
    except MissingPoint:
        fine, rule_shift = None, 0.0
    alphas = [r["alpha"] for r in pts]
    turning = [i for i in range(1, len(alphas) - 1)
               if (alphas[i] - alphas[i - 1]) * (alphas[i + 1] - alphas[i]) < 0]
    return dict(omega=omega, rule=rule_name, points=pts, alpha_b=float(coef[0]), c2=float(coef[1]),
                c4=float(coef[2]), alpha_b_fine=float(coef[0] + rule_shift),
                alpha_b_bar=float(abs(rule_shift) + abs(c2[0] - coef[0])), fine_point=fine,
                folds=[dict(theta=pts[i]["theta"], alpha=alphas[i]) for i in turning])


# ----------------------------------------------------------------------------- task: alpha_c, alpha_l
OMEGAS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45)


def _branch_solution(omega, A, branch, alpha, x0, rule_name, near=False):
    return fixed_point(omega, A, branch, round(float(alpha), 10), x0, rule_name, near=near)


def tangent(omega: float, A, branch: str, alpha: float, x) -> dict:
    """``dx/dalpha`` along a branch at its solution ``x`` (implicit function theorem on the coarse
    rule: ``dx/dalpha = -J^-1 dG/dalpha``; ``alpha`` enters ``G`` only through the conjugates, so
    ``dG/dalpha`` reuses one energetic average), with ``d eps_g/d alpha`` and ``d Psi_y/d alpha``
    along it (``eps_g`` has no prox: spectral rule; ``Psi_y`` by a central difference along the
    tangent). Only derivatives: the coarse rule's ~1e-3 relative error enters the thresholds at
    second order (times the Newton step)."""
    p = params(omega, A)

    def compute():
        log(f"tangent {branch} omega={omega} alpha={alpha:.6g}")
        free = free_mask(branch)
        xx = np.array(x, float)
        co = rule("coarse")
        J = jacobian(alpha, xx, branch, p, co)
        h = 1e-4 * alpha
        gp = state_map(xx, alpha + h, p, co)[0] - xx
        gm = state_map(xx, alpha - h, p, co)[0] - xx
        dx = np.zeros(4)
        dx[free] = -np.linalg.solve(J, ((gp - gm) / (2 * h))[free])
        s = 1e-3 * alpha
        deps = (eps_g_average(xx + s * dx, p) - eps_g_average(xx - s * dx, p)) / (2 * s)
        dpsi = (state_map(xx + s * dx, alpha, p, co)[2] - state_map(xx - s * dx, alpha, p, co)[2]) / (2 * s)
        return dict(dx=dx.tolist(), deps_g=float(deps), dpsi_y=float(dpsi))

    return cached("tangent", compute, omega=omega, A=[list(r) for r in A], branch=branch, alpha=float(alpha),
                  x=[round(float(v), 10) for v in x])


def _pair(omega, A, branch, alpha, start) -> tuple[dict, dict]:
    """The (check, fine) reference solutions of ``branch`` at ``alpha`` (rules of RULE_PAIRS)."""
    r_check, r_fine = RULE_PAIRS[branch]
    check = _branch_solution(omega, A, branch, alpha, start, r_check)
    fine = _branch_solution(omega, A, branch, alpha, check["x"], r_fine, near=True)
    return check, fine


def _replica_start(omega, A, branch, alpha, fallback):
    """A start for the reference: ``replica solve``'s state (any cached version of it: a start
    needs no bars, and the reference's own cache keys do not depend on it)."""
    global _STORE
    alpha = round(float(alpha), 10)
    if _STORE is None:
        _STORE = load_store()
    legacy = _STORE.get(_key(kind="replica", omega=omega, A=[list(r) for r in A], branch=branch, alpha=float(alpha)))
    r = legacy if legacy is not None else replica_solve(omega, A, branch, alpha)
    if r.get("converged") and r.get("q") is not None:
        return [r["q"], r["V"], r["m"], r["theta"]]
    return list(fallback)


def alpha_c_step(omega: float, A, alpha0: float) -> dict:
    """``alpha_c`` by one Newton step on ``D = Phi_sem - Phi_pos`` from ``alpha0`` (a point near
    the root, e.g. the library's value), ``D' = Psi_y,sem - Psi_y,pos`` exact (envelope theorem).
    Bar: the step on the check rules vs the fine rules, plus the Newton truncation
    ``|D''| delta^2 / (2 |D'|)`` with ``D''`` from the branch tangents."""
    xs = _replica_start(omega, A, "semantic", alpha0, (0.06, 24.0, 0.0, 0.08))
    xp = _replica_start(omega, A, "positional", alpha0, (0.045, 21.0, 0.19, 0.0))
    sc, sf = _pair(omega, A, "semantic", alpha0, xs)
    pc, pf = _pair(omega, A, "positional", alpha0, xp)
    roots = []
    for s, q in ((sc, pc), (sf, pf)):
        D, dD = s["phi"] - q["phi"], s["psi_y"] - q["psi_y"]
        roots.append(alpha0 - D / dD)
    dD = sf["psi_y"] - pf["psi_y"]
    d2 = tangent(omega, A, "semantic", alpha0, sf["x"])["dpsi_y"] - tangent(omega, A, "positional", alpha0, pf["x"])["dpsi_y"]
    delta = roots[1] - alpha0
    trunc = abs(d2) * delta ** 2 / (2 * abs(dD))
    return dict(omega=omega, alpha_c=roots[1], alpha_c_check=roots[0], alpha_c_bar=abs(roots[1] - roots[0]) + trunc,
                alpha_c_trunc=trunc, alpha0=alpha0, dD=dD, m_pos=pf["m"], theta_sem=sf["theta"],
                eps_g_at_alpha_c=sf["eps_g"], rules=[list(RULE_PAIRS["semantic"]), list(RULE_PAIRS["positional"])])


def alpha_l_step(omega: float, A, alpha0: float) -> dict:
    """``alpha_l`` by one Newton step on ``eps_g,sem(alpha) - eps_lin`` from ``alpha0``; slope from
    the semantic tangent. Bar: check vs fine step plus the truncation ``|slope error| |delta|``
    bounded by the change of the slope between the check and fine tangents plus 1e-2 relative
    (the coarse-rule Jacobian), times ``|delta|``."""
    p = params(omega, A)
    el = eps_lin(p)
    xs = _replica_start(omega, A, "semantic", alpha0, (0.09, 17.0, 0.0, 0.12))
    sc, sf = _pair(omega, A, "semantic", alpha0, xs)
    slope = tangent(omega, A, "semantic", alpha0, sf["x"])["deps_g"]
    roots = [alpha0 - (s["eps_g"] - el) / slope for s in (sc, sf)]
    delta = roots[1] - alpha0
    return dict(omega=omega, alpha_l=roots[1], alpha_l_check=roots[0],
                alpha_l_bar=abs(roots[1] - roots[0]) + 1e-2 * abs(delta), alpha0_l=alpha0, eps_lin=el,
                slope=slope)


#: anchors per omega: (alpha for alpha_c, alpha for alpha_l), the library's phase diagram
#: (docs/figures/fig3_right_phase_diagram.csv) rounded to 1e-2, except where the reference
#: already holds a solved point closer than that (omega = 0.3: alpha = 1.25; omega = 0.1: the
#: first Newton iterate 0.7546242551 of an earlier full Newton run)
ANCHORS = {0.3: (1.25, 1.49), 0.1: (0.7546242551, 0.89)}


def thresholds(omegas=OMEGAS, A=PAPER_A, replica_rows: dict | None = None) -> list[dict]:
    """``alpha_c``, ``alpha_l`` per ``omega`` by one reference Newton step from an anchor."""
    rows = []
    replica_rows = replica_rows or {}
    for om in omegas:
        anc = ANCHORS.get(om)
        if anc is None:
            rep = replica_rows.get(round(om, 6), {})
            if rep.get("alpha_c") is None or rep.get("alpha_l") is None:
                rows.append(dict(omega=om, error="no anchor"))
                continue
            anc = (round(rep["alpha_c"], 2), round(rep["alpha_l"], 2))
        row = dict(omega=om)
        for name, step, a0 in (("alpha_c", alpha_c_step, anc[0]), ("alpha_l", alpha_l_step, anc[1])):
            try:
                row.update(step(om, A, a0))
            except MissingPoint:
                row[name + "_error"] = "not computed in this cache"
            except NotConverged as exc:
                log(f"omega={om}: {exc}")
                row[name + "_error"] = str(exc)
        rows.append(row)
    return rows

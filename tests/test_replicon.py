"""The replicon (replica/numeric/stability.py, docs/explanation/replicon.md) against hand-derived closed forms.

Ridge (L = R = 1, γ = 1): ``g_out = (y − ω)/(1 + V)``, so ``∂_ω g_out = −1/(1 + V)``; the ℓ2
input channel has ``∂_B prox = 1/(λ + V̂) = V``. Hence ``replicon = α V²/(1 + V)²`` with ``V``
the positive root of ``V = 1/(λ + α/(1 + V))``, i.e. of ``λV² + (λ + α − 1)V − 1 = 0``.
With a negative penalty the risk ``Σ(y − h)²/2 + λ|w|²/2`` keeps a minimum down to the
Marchenko–Pastur edge ``λ = −(√α − 1)²`` and the replicon reaches 1 exactly there:
``√α V = 1 + V`` at ``V = 1/(√α − 1)``.
"""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from replica.errors import ConvergenceError, InvalidStateError
from replica.registry import load_module
from replica.numeric.solver import Solver
from tests.support import run_cli
from replica.numeric.stability import replicon, rs_stable


def ridge_V(lam: float, alpha: float) -> tuple[float, float]:
    """Both roots of λV² + (λ + α − 1)V − 1 = 0 (λ ≠ 0), smaller first."""
    b, disc = lam + alpha - 1, (lam + alpha - 1) ** 2 + 4 * lam
    r = sorted([(-b + s * math.sqrt(disc)) / (2 * lam) for s in (1, -1)])
    return r[0], r[1]


def ridge_replicon(V: float, alpha: float) -> float:
    return alpha * V ** 2 / (1 + V) ** 2


@pytest.mark.parametrize("alpha,lam", [(0.5, 0.1), (1.0, 0.1), (2.0, 0.1), (1.0, 1e-3), (4.0, 0.5)])
def test_ridge_replicon_closed_form(ridge, alpha, lam):
    # at lam = 1e-3, alpha = 1 (V = 31) a residual r moves V by ~500 r: the default tol 1e-8 allows
    # V 4e-6 off (measured), so the solve runs at 1e-10 for the 1e-7 V comparison below
    fp = Solver(ridge, {"lam": lam}, tol=1e-10).solve(alpha)
    V = fp.order["V_1"]
    # V of the solver is the closed form's positive root
    assert abs(V - (1 / (2 * lam)) * (-(lam + alpha - 1) + math.sqrt((lam + alpha - 1) ** 2 + 4 * lam))) < 1e-7 * V
    rep = replicon(ridge, fp, switching_samples=2000)
    # G is constant (square loss): the quadrature is exact, the only error is V's (tol 1e-10)
    assert abs(rep.value - ridge_replicon(V, alpha)) <= 1e-7
    assert rep.value < 1 and rep.rs_stable
    assert not rep.switching.detected and rep.switching.multi_fraction == 0


def test_ridge_replicon_below_one_everywhere(ridge):
    """Convex: < 1 on a grid of (alpha, lambda), approaching 1 only at alpha = 1, lambda -> 0."""
    for alpha in (0.2, 0.9, 1.0, 1.1, 3.0, 10.0):
        for lam in (1e-3, 0.1, 1.0):
            fp = Solver(ridge, {"lam": lam}).solve(alpha)
            assert replicon(ridge, fp, error_estimate=False, switching_samples=0).value < 1


SIGNED = '''
"""Ridge with a penalty of either sign (no domain on lam): non-convex for lam < 0."""
import sympy as sp

from replica import L2, Model, TokenStatistics, fields, parameter, symbol, teacher_fields

h, hs = fields(1, 1), teacher_fields(1, 1)
noise = symbol("noise", "z")
delta = parameter("Delta", r"\\Delta")
lam = parameter("lam", r"\\lambda")
model = Model(name="ridge_signed", description="ridge with a signed penalty", h=h, hstar=hs,
              loss=sp.Rational(1, 2) * (hs[0] + sp.sqrt(delta) * noise - h[0]) ** 2, noise=[noise],
              data=TokenStatistics.isotropic(1, 1), regularizer=L2(lam), parameters={delta: 0.25, lam: 0.1},
              branches={"centered": ("m",)})
'''


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    path = tmp_path_factory.mktemp("signed") / "ridge_signed.py"
    path.write_text(textwrap.dedent(SIGNED))
    return str(path), load_module(str(path))


def test_replicon_crosses_one_at_the_edge_and_gamp_stops_converging(signed):
    """alpha = 4, edge lambda = -(sqrt(4) - 1)^2 = -1. Above the edge the RS fixed point (small
    root) has replicon < 1 and plain GAMP converges to the exact stationary point; the other
    root has replicon > 1 (an unstable RS solution); the replicon -> 1 at the edge; below it
    there is no RS solution and GAMP diverges."""
    torch = pytest.importorskip("torch")  # noqa: F841  (numerics needs torch)
    from numerics.gamp import GAMP, make_problem, model_spec

    path, mod = signed
    alpha = 4.0
    for lam in (-0.5, -0.9, -0.99):
        fp = Solver(mod, {"lam": lam}).solve(alpha)
        v_small, v_large = ridge_V(lam, alpha)
        assert abs(fp.order["V_1"] - v_small) < 1e-6 * v_small
        rep = replicon(mod, fp, switching_samples=0)
        assert abs(rep.value - ridge_replicon(v_small, alpha)) < 1e-6 and rep.value < 1
        # The same state with V at the other root: replicon > 1 (the formula depends on V only).
        x = fp.x.copy()
        x[mod.FAMILIES["V"][0]] = v_large
        other = replicon(mod, x, alpha, {"lam": lam}, error_estimate=False, switching_samples=0)
        assert abs(other.value - ridge_replicon(v_large, alpha)) < 1e-9 and other.value > 1
        assert not rs_stable(mod, x, alpha, {"lam": lam})
    assert 1 - replicon(mod, Solver(mod, {"lam": -0.9999}).solve(alpha), switching_samples=0).value < 0.02
    with pytest.raises((ConvergenceError, InvalidStateError)):
        Solver(mod, {"lam": -1.3}, max_iter=300).solve(alpha)

    spec_ok, spec_bad = model_spec(path, {"lam": -0.5}), model_spec(path, {"lam": -1.3})
    pr = make_problem(spec_ok, alpha, 300, 0, normalize_teacher=False)
    res = GAMP(spec_ok, pr).run("random", max_iter=300, tol=1e-12)
    assert res.converged, res.message
    y = pr.hstar[:, 0, 0] + 0.5 * pr.noise[:, 0]
    W = np.linalg.solve(pr.F.T @ pr.F - 0.5 * np.eye(pr.d), pr.F.T @ y)
    assert np.linalg.norm(res.W[:, 0] - W) <= 1e-8 * np.linalg.norm(W)
    bad = GAMP(spec_bad, make_problem(spec_bad, alpha, 300, 0, normalize_teacher=False)).run("random", max_iter=300)
    assert not bad.converged and "diverged" in bad.message


def test_attention_semantic_point_is_rs_stable(attention):
    """The paper's semantic point: replicon well below 1 (quadrature error estimated), and no
    switching of the prox among 50 000 samples; GAMP converges there (tests/test_gamp.py)."""
    fp = Solver(attention, {"omega": 0.3}, branch="semantic").solve(2.0)
    rep = replicon(attention, fp)
    assert rep.value + 10 * rep.error < 1
    assert rep.rs_stable and rep.switching.multi_fraction == 0
    d = rep.to_dict()
    assert d["rs_stable"] is True and isinstance(d["replicon"], float)


def test_attention_positional_point_switches(attention):
    """The paper's positional point (omega = 0.3, alpha = 0.5): the prox switches between
    minima on a set of positive density, so the RS point is flagged unstable (GAMP with the
    global-minimum prox does not settle there, docs/explanation/replicon.md)."""
    fp = Solver(attention, {"omega": 0.3}, branch="positional").solve(0.5)
    rep = replicon(attention, fp, error_estimate=False)
    assert rep.switching.detected and rep.switching.multi_fraction > 0.01
    assert not rep.rs_stable


# --------------------------------------------------------------------------- l2 classifiers, sign teacher
# Hand-derived closed forms (issue 16's check "ridge and l2 logistic"), in the toolkit's
# conventions (docs/explanation/replicon.md, tests/oracles/common.py): L = R = 1, gamma = rho = 1, the
# l2 input channel's Jacobian J = dprox_in/dB = 1/(lam + Vhat) = V, so
#     replicon = alpha V^2 E_{xi,y}[(d_omega g_out)^2],   g_out = (P - omega)/V,
# with P = argmin_h (h - omega)^2/(2V) + l(y h), omega = sqrt(q) xi, P(y | xi) = Phi(y a xi),
# a = theta / sqrt(q - theta^2). Both losses depend on y h and the teacher is odd, so the y = -1
# term is the y = +1 term at xi -> -xi: E[...] = 2 int Dxi Phi(a xi) (...)^2 at y = +1.
#
# Logistic, l(P) = log(1 + e^-P): P = omega + V s with s = sigma(-P) (no closed form), and by
# implicit differentiation dP/domega = 1/(1 + V l''(P)), l''(P) = s (1 - s), hence
#     d_omega g_out = -l''/(1 + V l'')   and   replicon = alpha E[(V l''/(1 + V l''))^2].
# The integral runs over P instead of xi (xi(P) = (P - V s)/sqrt(q) is increasing), so no root is
# solved inside the quadrature; scipy's quad split at the images of xi = 0, +-1, +-3, +-6, +-10 and
# +-1/a, +-3/a, +-10/a (the label weight's step), on |xi| <= 14 (Gaussian mass beyond < 1e-42).
#
# Hinge, l(P) = max(0, 1 - P): P = omega + V (omega < 1 - V), 1 (1 - V <= omega <= 1), omega
# (omega > 1), so d_omega g_out = -1/V on the middle piece and 0 elsewhere:
#     replicon = 2 alpha int_{(1-V)/sqrt(q)}^{1/sqrt(q)} Dxi Phi(a xi)
# (alpha times the fraction of samples on the margin, i.e. support vectors per dimension < 1).
#
# Errors: quad's own estimates (epsabs 1e-15, epsrel 1e-13), plus ORACLE_STATE for the oracle's
# fixed point (solved to XTOL = 1e-14 on its unknowns; the replicon's relative sensitivity to
# q, V, theta is O(1), its value O(1)).
ORACLE_STATE = 1e-12
_XI_MAX = 14.0


def _npdf(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _ncdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def _sigma_neg(p: float) -> float:
    if p >= 0:
        e = math.exp(-p)
        return e / (1 + e)
    return 1 / (1 + math.exp(p))


def _quad(f, a: float, b: float) -> tuple[float, float]:
    from scipy import integrate

    return integrate.quad(f, a, b, epsabs=1e-15, epsrel=1e-13, limit=400)


def logistic_replicon_oracle(alpha: float, q: float, V: float, theta: float) -> tuple[float, float]:
    """``(replicon, quadrature error)`` of l2 logistic regression on a sign teacher."""
    from scipy import optimize

    sq, a = math.sqrt(q), theta / math.sqrt(q - theta * theta)

    def prox(omega):
        return optimize.brentq(lambda P: P - V * _sigma_neg(P) - omega, omega - 1, omega + V + 1, xtol=1e-15,
                               rtol=1e-15, maxiter=200)

    def integrand(P):
        s = _sigma_neg(P)
        curv = s * (1 - s)
        xi = (P - V * s) / sq
        return _npdf(xi) * _ncdf(a * xi) * (1 + V * curv) / sq * (V * curv / (1 + V * curv)) ** 2

    cuts = [0.0, 1.0, 3.0, 6.0, 10.0] + ([1 / a, 3 / a, 10 / a] if a > 0 else [])
    xis = sorted({s * c for c in cuts for s in (1, -1) if c < _XI_MAX} | {-_XI_MAX, _XI_MAX})
    Ps = [prox(sq * x) for x in xis]
    total = err = 0.0
    for P0, P1 in zip(Ps[:-1], Ps[1:]):
        v, e = _quad(integrand, P0, P1)
        total, err = total + v, err + e
    return 2 * alpha * total, 2 * alpha * err


def hinge_replicon_oracle(alpha: float, q: float, V: float, theta: float) -> tuple[float, float]:
    """``(replicon, quadrature error)`` of the l2 hinge loss (SVM) on a sign teacher."""
    sq, a = math.sqrt(q), theta / math.sqrt(q - theta * theta)
    v, e = _quad(lambda xi: _npdf(xi) * _ncdf(a * xi), max((1 - V) / sq, -_XI_MAX), min(1 / sq, _XI_MAX))
    return 2 * alpha * v, 2 * alpha * e


_CLASSIFIER_ORACLES = {"logistic": logistic_replicon_oracle, "hinge": hinge_replicon_oracle}


def _state(order: dict) -> tuple[float, float, float]:
    return order["q_1"], order["V_1"], order["theta_1"]


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
@pytest.mark.parametrize("alpha,lam", [(0.5, 1e-3), (2.0, 0.1), (5.0, 1.0)])
def test_classifier_replicon_closed_form(loss, alpha, lam):
    """``replica solve <loss> --json``'s replicon against the hand formulas above: at the CLI's
    own state to its quadrature bar ``replicon_error``, and at the oracle's fixed point
    (tests/oracles/classification.py) to its full bar ``errors["replicon"]`` (quadrature plus
    the fixed point's bars propagated). Convex: < 1 and RS-stable."""
    from tests.oracles.classification import classification_state_evolution

    out = _solve_cli(loss, "--alpha", str(alpha), "--param", f"lam={lam}", "--json")
    assert isinstance(out["replicon"], float) and out["rs_stable"] is True and out["replicon_switching"] is False
    assert out["replicon"] < 1
    oracle = _CLASSIFIER_ORACLES[loss]
    at_cli, quad_err = oracle(alpha, *_state(out["order_parameters"]))
    assert abs(out["replicon"] - at_cli) <= out["replicon_error"] + quad_err + ORACLE_STATE
    ref = classification_state_evolution(loss, alpha, lam)
    exact, quad_err = oracle(alpha, ref["q"], ref["V"], ref["theta"])
    assert abs(out["replicon"] - exact) <= out["errors"]["replicon"] + quad_err + ORACLE_STATE


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_classifier_replicon_on_the_agreement_grid(loss):
    """Issue 13's grid (alpha in {0.5, 1, 2, 5} x lam in {1e-3, 0.1, 1}), library path at
    tol 1e-10: the replicon equals the hand formula at the solver's state to its quadrature error
    and is < 1 with rs_stable everywhere (convex loss, l2 penalty)."""
    from tests.oracles import TABLE_ALPHAS, TABLE_LAMS

    mod = load_module(loss)
    for lam in TABLE_LAMS:
        solver = Solver(mod, {"lam": lam}, tol=1e-10)
        x = None
        for alpha in TABLE_ALPHAS:
            fp = solver.solve(alpha, x0=x)
            x = fp.x
            rep = replicon(mod, fp, switching_samples=5000)
            ref, quad_err = _CLASSIFIER_ORACLES[loss](alpha, *_state(fp.order))
            assert abs(rep.value - ref) <= rep.error + quad_err + ORACLE_STATE, (loss, alpha, lam)
            assert rep.value < 1 and rep.rs_stable, (loss, alpha, lam)


# --------------------------------------------------------------------------- replica solve --json
def _solve_cli(*args):
    import json

    res = run_cli("solve", *args)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout) if "--json" in args else res.stdout


def test_solve_json_reports_the_replicon():
    """Contract (issue 16): ``replica solve ... --json`` has ``replicon`` (a number) and
    ``rs_stable`` (a bool); for ridge the number is the hand-derived alpha V^2/(1 + V)^2."""
    alpha, lam = 2.0, 0.1
    out = _solve_cli("ridge", "--alpha", str(alpha), "--lam", str(lam), "--json")
    V = (-(lam + alpha - 1) + math.sqrt((lam + alpha - 1) ** 2 + 4 * lam)) / (2 * lam)
    assert isinstance(out["replicon"], float) and isinstance(out["rs_stable"], bool)
    assert abs(out["replicon"] - ridge_replicon(V, alpha)) <= 1e-6
    assert out["rs_stable"] is True and out["replicon_switching"] is False
    text = _solve_cli("ridge", "--alpha", str(alpha), "--lam", str(lam))
    assert "replicon" in text and "RS stable: yes" in text
    skipped = _solve_cli("ridge", "--alpha", str(alpha), "--lam", str(lam), "--json", "--no-replicon")
    assert "replicon" not in skipped and "rs_stable" not in skipped


def test_replicon_summary_says_why_when_not_implemented(signed):
    """A model the replicon does not cover gives null with a reason, not a failed solve."""
    from replica.numeric.stability import replicon_summary

    _, mod = signed
    fp = Solver(mod, {"lam": 0.1}).solve(2.0)
    ok = replicon_summary(mod, fp, error_estimate=False, switching_samples=0)
    assert ok["rs_stable"] is True and ok["replicon"] < 1
    bad = replicon_summary(mod, fp, alpha=-1.0)  # a parameter the replicon refuses
    assert bad["replicon"] is None and bad["rs_stable"] is None
    assert "alpha" in bad["replicon_reason"] and bad["rs_stable_reason"] == bad["replicon_reason"]


def test_replicon_summary_token_clusters():
    """Token clusters (attention_clusters): not implemented, said so in the JSON keys."""
    from replica.numeric.stability import replicon_summary

    clusters = load_module("attention_clusters")
    out = replicon_summary(clusters, np.zeros(len(clusters.ORDER_PARAMETERS)), alpha=2.0)
    assert out["replicon"] is None and out["rs_stable"] is None and "clusters" in out["replicon_reason"]


# --------------------------------------------------------------------------- along branches, on diagrams
def test_curve_stability_marks_the_unstable_root(signed):
    """curve_stability / unstable_intervals on a small case with a known answer: the signed
    ridge at lambda = -0.5 along alpha, the RS solution taken on the physical (small-V) root
    at alpha = 3, 4 and on the other root (replicon > 1, hand formula) at alpha = 5, 6."""
    from types import SimpleNamespace

    from replica.numeric.stability import curve_stability, unstable_intervals

    _, mod = signed
    lam = -0.5
    pts = []
    for alpha in (3.0, 4.0, 5.0, 6.0):
        x = Solver(mod, {"lam": lam}).solve(alpha).x.copy()
        x[mod.FAMILIES["V"][0]] = ridge_V(lam, alpha)[0 if alpha < 4.5 else 1]
        pts.append(SimpleNamespace(alpha=alpha, x=x))
    curve = SimpleNamespace(points=pts[::-1], parameters={"lam": lam}, branch=None)
    st = curve_stability(mod, curve, points=4, switching_samples=0)
    assert [a for a, _, _ in st] == [3.0, 4.0, 5.0, 6.0]
    for (a, v, ok), p in zip(st, pts):
        assert abs(v - ridge_replicon(p.x[mod.FAMILIES["V"][0]], a)) < 1e-9
    assert [ok for _, _, ok in st] == [True, True, False, False]
    assert unstable_intervals(st) == [(4.5, 6.0)]
    assert [a for a, _, _ in curve_stability(mod, curve, points=2, switching_samples=0)] == [3.0, 6.0]


def test_unstable_intervals():
    from replica.numeric.stability import unstable_intervals

    assert unstable_intervals([]) == []
    assert unstable_intervals([(1.0, True), (2.0, True)]) == []
    assert unstable_intervals([(3.0, False), (1.0, False), (2.0, True), (4.0, False)]) == [(1.0, 1.5), (2.5, 4.0)]


def test_phase_diagram_hatches_rs_unstable_ranges(tmp_path, monkeypatch):
    """The figures draw the hatched ranges: Fig. 2 strips per branch, the phase diagram's
    column for the global minimum (intervals from global_unstable_intervals)."""
    from replica.applications.attention import figures
    from replica.phase.results import Crossing, PhaseResult

    saved = []
    monkeypatch.setattr(figures, "_save", lambda fig, path, dpi: saved.append(fig))

    def result(w):
        return PhaseResult(model="attention", parameters={"omega": w}, alpha_min=0.1, alpha_max=3.0, curves={},
                           alpha_c=Crossing(1.2, "root"), alpha_l=Crossing(1.6, "root"), eps_lin=1e-3,
                           eps_lin_error=0.0, quadrature="gh:8",
                           segments=[(0.1, 1.2, "positional"), (1.2, 3.0, "semantic")])

    results = {0.2: result(0.2), 0.3: result(0.3)}
    stability = {"positional": [(0.2, 0.4, False), (0.6, 0.3, False), (1.0, 0.3, True), (1.4, 0.3, True)],
                 "semantic": [(1.0, 0.4, False), (1.4, 0.3, True), (2.0, 0.2, True)]}
    unstable = figures.global_unstable_intervals(results[0.3], stability)
    # positional global below 1.2 (unstable at 0.2, 0.6), semantic global above (stable at 1.4, 2.0)
    assert unstable == [(0.2, 0.8)]
    figures.plot_phase_diagram(results, tmp_path / "pd", "t", unstable={0.3: unstable})
    hatched = [p for p in saved[-1].axes[0].patches if p.get_hatch()]
    assert len(hatched) == 1
    (x0, y0), (w, h) = hatched[0].get_xy(), (hatched[0].get_width(), hatched[0].get_height())
    assert (x0, y0, h) == pytest.approx((0.25, 0.2, 0.6)) and w == pytest.approx(0.1)
    ax = saved[-1].axes[0]
    assert any("RS unstable" in t.get_text() for t in ax.get_legend().get_texts())
    assert figures._hatch_unstable(ax, stability)
    assert not figures._hatch_unstable(ax, {"semantic": [(1.0, 0.2, True)]})


@pytest.mark.slow
def test_figures_mark_rs_unstable_ranges_end_to_end(tmp_path):
    """compute_figures with the replicon on the quick grid (omega = 0.3 only): the replicon
    along both followed branches, two worker processes; the paper's positional branch is
    flagged (its prox switches, test above) and the semantic branch is stable at alpha >= 2."""
    import csv as _csv

    from replica.applications.attention import figures

    cfg = figures.quick_config(omegas=(0.3,), omegas_loss=(0.3,), omegas_second=(0.3,), replicon_points=3)
    data = figures.compute_figures(cfg, jobs=2)
    st = data.stability[0.3]
    assert set(st) >= {"semantic", "positional"} and all(len(v) >= 2 for v in st.values())
    assert any(not ok for _, _, ok in st["positional"])
    assert all(ok for a, _, ok in st["semantic"] if a >= 2.0)
    figures.write_figures(data, tmp_path)
    with open(tmp_path / "rs_stability.csv", newline="") as fh:
        rows = list(_csv.DictReader(fh))
    assert len(rows) == sum(len(v) for v in st.values())
    assert (tmp_path / "fig3_right_phase_diagram.png").is_file()


def test_figures_replicon_points_bad_input(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    r = subprocess.run([sys.executable, "-m", "replica", "figures", "--replicon-points", "-1", "--out",
                        str(tmp_path / "f")], cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "replicon-points" in r.stderr


ANISOTROPIC = '''
"""Ridge on tokens with two covariance eigenvalues (1 and 3, half the directions each)."""
import numpy as np
import sympy as sp

from replica import L2, Model, TokenStatistics, fields, parameter, symbol, teacher_fields

h, hs = fields(1, 1), teacher_fields(1, 1)
noise = symbol("noise", "z")
lam = parameter("lam", r"\\lambda")
model = Model(name="ridge_anisotropic", description="ridge, two eigenvalues", h=h, hstar=hs,
              loss=sp.Rational(1, 2) * (hs[0] + noise / 2 - h[0]) ** 2, noise=[noise],
              data=TokenStatistics.from_covariances([np.array([1.0, 3.0])]), regularizer=L2(lam),
              parameters={lam: 0.1}, branches={"centered": ("m",)})
'''


def test_replicon_refuses_anisotropic_tokens_without_the_declaration(tmp_path, monkeypatch):
    """The isotropy check reads the generated module (``ISOTROPIC_TOKENS``, ``atom_eigenvalues``),
    not the declaration: a two-eigenvalue law is refused with a reason, and no sympy is needed."""
    from replica.registry import loader as registry
    from replica.numeric.stability import replicon_summary

    path = tmp_path / "ridge_anisotropic.py"
    path.write_text(textwrap.dedent(ANISOTROPIC))
    mod = load_module(str(path))
    assert mod.ISOTROPIC_TOKENS is False
    assert sorted(np.asarray(mod.atom_eigenvalues(np.array(mod.DEFAULTS))).tolist()) == [1.0, 3.0]
    fp = Solver(mod).solve(2.0)
    def no_declaration(*args, **kwargs):
        raise AssertionError("the isotropy check read the declaration")

    monkeypatch.setattr(registry, "load_model", no_declaration)
    out = replicon_summary(mod, fp, switching_samples=0)
    assert out["replicon"] is None and "isotropic" in out["replicon_reason"]
    plain = load_module("ridge")
    assert plain.ISOTROPIC_TOKENS is True and plain.atom_eigenvalues is None

"""The paper's theory figures (Cui et al. 2024, Figs. 2, 3 and 9) from the study's phase analysis.

:func:`compute_figures` runs the phase analysis (few solves: continuation and root
finding, in parallel processes over ``omega``) and :func:`write_figures` draws

* ``fig2_middle_summary_statistics``: ``q, m, theta`` vs ``alpha`` on both branches at
  ``omega = 0.3``, the global minimum highlighted;
* ``fig2_right_test_error``: ``eps_g`` vs ``alpha`` on both branches, global minimum
  highlighted, the linear baseline ``eps_lin`` and ``alpha_c``, ``alpha_l`` marked;
* ``fig3_centre_training_loss``: ``Phi_pos - Phi_sem = e_t,sem - e_t,pos`` vs ``alpha`` for
  several ``omega``;
* ``fig3_right_phase_diagram``: ``alpha_c(omega)``, ``alpha_l(omega)`` for ``omega`` in [0, 0.45];
* ``fig9_phase_diagram``: the same for ``A = [[0.3, 0.7], [0.8, 0.2]]``;

each as PNG plus the CSV of what is plotted, and ``summary.json`` with every result. Where
the branches were followed (``omega_fig2``, ``omegas_loss``), the replicon
(:mod:`replica.numeric.stability`) is evaluated along each branch; the ``alpha`` where the RS fixed
point is unstable are hatched on Fig. 2 (per branch) and, for the global minimum, on the phase
diagram (``rs_stability.csv``).
Simulation points (the CSV of ``python -m numerics.simulate sweep``) can be overlaid.
"""
from __future__ import annotations

import concurrent.futures as cf
import csv
import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...artifacts import jsonio
from ...artifacts.cache import PointCache
from ...errors import ParameterError
from ...artifacts.outputs import check_output_dir, make_output_dir, staged_dir
from ...phase import PhaseResult, SolverSettings, StepControl
from ...runtime.progress import Progress
from . import paper
from .phase import phase_points

#: the paper's positional matrix and the second example of its Appendix E.2 (Fig. 9), row-major
PAPER_A = tuple(v for row in paper.PAPER_A for v in row)
SECOND_A = tuple(v for row in paper.SECOND_A for v in row)

SIM_COLUMNS = ("model", "omega", "alpha", "d", "init", "seeds", "q", "q_se", "m", "m_se", "theta",
               "theta_se", "eps_g", "eps_g_se", "train_loss", "train_loss_se", "converged")


def _A_params(A: Sequence[float]) -> dict[str, float]:
    """``A_11 ... A_22`` of a row-major 2 x 2 matrix."""
    return paper.A_parameters([A[:2], A[2:]])


@dataclass(frozen=True)
class FigureConfig:
    """What to compute. ``omegas``: the phase-diagram grid; ``omegas_loss``: the ``omega``
    whose full curves go into Fig. 3 centre; ``omega_fig2``: Fig. 2's ``omega``."""

    model: str = "attention"
    omega_fig2: float = 0.3
    omegas: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(10))
    omegas_loss: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4)
    omegas_second: tuple[float, ...] | None = None  # default: ``omegas``
    alpha_min: float = 0.1
    alpha_max: float = 4.0
    parameters: Mapping[str, float] = field(default_factory=dict)  # sigma, lam, A (paper defaults)
    second_A: tuple[float, ...] = SECOND_A
    settings: SolverSettings = SolverSettings(rule="gh:12")
    steps: StepControl = StepControl(max=0.4)
    fig2_max_step: float = 0.15  # finer steps for the curves of Fig. 2
    xtol: float = 1e-4
    dpi: int = 150
    #: phase-diagram points without full curves by the fast thresholds path (replica.thresholds);
    #: their semantic spinodal is then not located (the dotted line joins the known ones)
    thresholds_only: bool = True
    #: replicon evaluations per followed branch (RS-unstable ranges hatched); 0: none
    replicon_points: int = 10


def quick_config(**overrides) -> FigureConfig:
    """Coarse grids for tests and CI (a minute or so on one core)."""
    base = FigureConfig(omegas=(0.1, 0.3), omegas_loss=(0.3,), omegas_second=(0.3,), alpha_max=3.0,
                        settings=SolverSettings(rule="gh:8", tol=1e-7), steps=StepControl(max=0.5),
                        fig2_max_step=0.5, xtol=1e-3, dpi=100, replicon_points=0)
    return replace(base, **overrides)


@dataclass
class FigureData:
    """Phase results behind the figures: ``main[omega]`` (paper ``A``), ``second[omega]``."""

    config: FigureConfig
    main: dict[float, PhaseResult]
    second: dict[float, PhaseResult]
    seconds: float = 0.0
    #: ``stability[omega][branch]``: ``(alpha, replicon, rs_stable)`` along the followed branches (main ``A``)
    stability: dict[float, dict[str, list[tuple[float, float, bool]]]] = field(default_factory=dict)

    @property
    def fig2(self) -> PhaseResult:
        """The Fig. 2 curves (both branches at the figure's ``ω``) and their thresholds."""
        return self.main[self.config.omega_fig2]


def compute_figures(config: FigureConfig | None = None, *, jobs: int = 1, cache: PointCache | None = None,
                    progress: Progress | None = None, executor: cf.Executor | None = None) -> FigureData:
    """Every phase point the figures need, in parallel over ``omega`` on ``executor`` (any
    :class:`concurrent.futures.Executor`, e.g. a Dask cluster's) or else ``jobs`` local processes.

    ``omega_fig2`` and ``omegas_loss`` get full curves (both branches over the whole
    range); the other points of the phase diagrams stop the positional continuation
    once it is past ``alpha_c`` (``early_stop``), which is all ``alpha_c``, ``alpha_l`` need.
    """
    cfg = config or FigureConfig()
    t0 = time.perf_counter()
    full = {round(w, 10) for w in (*cfg.omegas_loss, cfg.omega_fig2)}
    main_omegas = sorted({round(w, 10) for w in (*cfg.omegas, *full)})
    second_omegas = sorted({round(w, 10) for w in (cfg.omegas_second if cfg.omegas_second is not None
                                                   else cfg.omegas)})
    common = dict(alpha_min=cfg.alpha_min, alpha_max=cfg.alpha_max, settings=cfg.settings, steps=cfg.steps,
                  xtol=cfg.xtol, branches=("semantic", "positional"))
    base = dict(cfg.parameters)
    tasks, keys = [], []
    for w in main_omegas:
        # omega without full curves only need alpha_c, alpha_l: the fast thresholds path
        task = dict(common, omega=w, parameters=base, early_stop=w not in full,
                    thresholds_only=cfg.thresholds_only and w not in full)
        if abs(w - cfg.omega_fig2) < 1e-12:
            task["steps"] = replace(cfg.steps, max=min(cfg.steps.max, cfg.fig2_max_step),
                                    max_rel=min(cfg.steps.max_rel, 0.25))
        tasks.append(task)
        keys.append(("main", w))
    second_params = dict(base, **_A_params(cfg.second_A))
    for w in second_omegas:
        tasks.append(dict(common, omega=w, parameters=second_params, early_stop=True,
                          thresholds_only=cfg.thresholds_only))
        keys.append(("second", w))
    if progress is not None:
        progress.total = len(tasks)
    results = phase_points(cfg.model, tasks, jobs=jobs, cache=cache, progress=progress, executor=executor)
    data = FigureData(cfg, {}, {}, 0.0)
    for (which, w), r in zip(keys, results):
        getattr(data, which)[w] = r
    if cfg.replicon_points:
        data.stability = branch_stability(cfg.model, {w: data.main[w] for w in sorted(full)}, cfg.replicon_points,
                                          jobs=jobs, executor=executor, progress=progress)
    data.seconds = time.perf_counter() - t0
    return data


def _curve_stability(model: str, curve, points: int) -> list[tuple[float, float, bool]]:
    from ...registry import load_module
    from ...numeric.stability import curve_stability

    return curve_stability(load_module(model), curve, points)


def branch_stability(model: str, results: Mapping[float, PhaseResult], points: int = 10, *, jobs: int = 1,
                     executor: cf.Executor | None = None, progress: Progress | None = None
                     ) -> dict[float, dict[str, list[tuple[float, float, bool]]]]:
    """``(alpha, replicon, rs_stable)`` at ``points`` fixed points of every followed branch of
    each result (:func:`replica.numeric.stability.curve_stability`), one task per curve on ``executor``
    or else ``jobs`` local processes."""
    from ...runtime.executors import open_executor

    tasks = [(w, b, c) for w, r in sorted(results.items()) for b, c in sorted(r.curves.items()) if len(c)]
    if progress is not None:
        progress.note(f"replicon along {len(tasks)} branch curve(s)")

    def run(ex: cf.Executor) -> list:
        return [f.result() for f in [ex.submit(_curve_stability, model, c, points) for _, _, c in tasks]]

    if executor is not None:
        values = run(executor)
    else:
        with open_executor(max(1, min(jobs, len(tasks)))) as ex:
            values = run(ex)
    out: dict[float, dict[str, list[tuple[float, float, bool]]]] = {}
    for (w, b, _), v in zip(tasks, values):
        out.setdefault(w, {})[b] = v
    return out


def global_unstable_intervals(r: PhaseResult, stability: Mapping[str, Sequence[tuple[float, float, bool]]]
                              ) -> list[tuple[float, float]]:
    """``alpha`` intervals where the global minimum's RS fixed point is unstable (samples of
    each branch kept where that branch is the global minimum)."""
    from ...numeric.stability import unstable_intervals

    return unstable_intervals([s for b, ss in stability.items() for s in ss if r.global_branch(s[0]) == b])


# --------------------------------------------------------------------------- simulation
def load_simulation(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a ``numerics.simulate sweep`` CSV (numbers parsed, ``converged`` as bool)."""
    p = Path(path)
    if not p.is_file():
        raise ParameterError("sim", f"no such file {path}")
    try:
        with open(p, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in ("model", "omega", "alpha", "init", "eps_g") if c not in (reader.fieldnames or [])]
            if missing:
                raise ParameterError("sim", f"{path} is not a simulate-sweep CSV (missing columns {missing})")
            rows = []
            for r in reader:
                out: dict[str, Any] = {}
                for k, v in r.items():
                    if k in ("model", "init"):
                        out[k] = v
                    elif k == "converged":
                        out[k] = str(v).strip().lower() in ("true", "1", "yes")
                    else:
                        try:
                            out[k] = float(v)
                        except (TypeError, ValueError):
                            out[k] = float("nan")
                rows.append(out)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ParameterError("sim", f"cannot read {path}: {exc}") from None
    return rows


def _sim_at(rows: Sequence[Mapping[str, Any]], omega: float, model: str = "attention") -> list[Mapping]:
    return [r for r in rows if r.get("model") == model and abs(r.get("omega", math.nan) - omega) < 1e-9]


# --------------------------------------------------------------------------- plotting helpers
def _mpl():
    import sys

    import matplotlib

    # Files only (the CLI): the non-interactive backend. A session that already chose a
    # backend (pyplot imported, Jupyter's inline one) keeps it, so figures also show there.
    if "matplotlib.pyplot" not in sys.modules and "IPython" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.labelsize": 11, "axes.titlesize": 11, "legend.fontsize": 8.5,
                         "figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.25, "lines.linewidth": 1.6})
    return plt


COLORS = {"q": "tab:blue", "m": "tab:red", "theta": "tab:green", "semantic": "tab:green",
          "positional": "tab:red", "lin": "tab:orange", "alpha_c": "0.35", "alpha_l": "tab:purple"}
SYMBOL = {"q": r"$q$", "m": r"$m$", "theta": r"$\theta$"}


def _global_mask(r: PhaseResult, branch: str, alphas: np.ndarray) -> np.ndarray:
    return np.array([r.global_branch(float(a)) == branch for a in alphas], dtype=bool)


def _split_runs(x: np.ndarray, y: np.ndarray, mask: np.ndarray, cut: float | None, branch: str):
    """Pieces ``(x, y, is_global)`` of a branch curve, split at ``alpha_c`` (added as a node)."""
    if cut is not None and x[0] < cut < x[-1]:
        yc = float(np.interp(cut, x, y))
        k = int(np.searchsorted(x, cut))
        lo = (np.r_[x[:k], cut], np.r_[y[:k], yc])
        hi = (np.r_[cut, x[k:]], np.r_[yc, y[k:]])
        glob_lo = branch == "positional"
        return [(lo[0], lo[1], glob_lo), (hi[0], hi[1], not glob_lo)]
    g = bool(mask.mean() > 0.5) if len(mask) else False
    return [(x, y, g)]


def _mark_ends(ax, r: PhaseResult, fams: Mapping[str, Sequence[str]], scale: float = 1.0,
               label: bool = False) -> None:
    """A cross where a branch ends inside the range (its spinodal), on each plotted quantity."""
    first = True
    for branch, names in fams.items():
        c = r.curves.get(branch)
        if c is None or not len(c):
            continue
        for a in r.spinodals.get(branch, []):
            p = c.point(a)
            if p is None:
                continue
            for name in names:
                v = p.eps_g if name == "eps_g" else float(p.x[c.families[name][0]])
                ax.plot([a], [scale * v], "x", color="k", ms=6, mew=1.5, zorder=6,
                        label="branch ends (spinodal)" if (label and first) else None)
                first = False


#: how RS-unstable ranges are drawn (docs/explanation/replicon.md)
RS_HATCH = dict(hatch="////", facecolor="none", lw=0.0)
RS_LABEL = "RS unstable (replicon)"


def _hatch_unstable(ax, stability: Mapping[str, Sequence[tuple[float, float, bool]]] | None) -> bool:
    """Hatched strips along the bottom of the axes over each branch's RS-unstable ``alpha``."""
    from ...numeric.stability import unstable_intervals

    drawn = False
    trans = ax.get_xaxis_transform()
    for k, (branch, samples) in enumerate(sorted((stability or {}).items())):
        for lo, hi in unstable_intervals(samples):
            ax.fill_between([lo, hi], 0.045 * k, 0.045 * (k + 1), transform=trans, edgecolor=COLORS.get(branch, "0.3"),
                            zorder=1, **RS_HATCH)
            drawn = True
    return drawn


def _fmt(v: float | None, digits: int = 4) -> str:
    return "n/a" if v is None else f"{v:.{digits}g}"


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rows:
            w.writerow(["" if v is None else (repr(float(v)) if isinstance(v, (float, np.floating)) else v)
                        for v in r])
    os.replace(tmp, path)


def _save(fig, path: Path, dpi: int) -> None:
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- the figures
def plot_fig2_summary(r: PhaseResult, path: Path, sim: Sequence[Mapping] = (), dpi: int = 150,
                      stability: Mapping[str, Sequence[tuple[float, float, bool]]] | None = None) -> None:
    """Fig. 2 middle: ``q, m, theta`` on both branches; thick solid = global minimum; hatched
    strips: ``alpha`` where a branch's RS fixed point is unstable (``stability``)."""
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(7.0, 3.9))
    ac = r.alpha_c.value
    rows = []
    for branch, fams in (("positional", ("q", "m")), ("semantic", ("q", "theta"))):
        c = r.curves.get(branch)
        if c is None or not len(c):
            continue
        x = c.alphas
        mask = _global_mask(r, branch, x)
        for fam in fams:
            y = c.values(fam)
            for xs, ys, g in _split_runs(x, y, mask, ac, branch):
                ax.plot(xs, ys, color=COLORS[fam], lw=2.4 if g else 1.1, ls="-" if g else "--",
                        alpha=1.0 if g else 0.75)
        for k, a in enumerate(x):
            rows.append([branch, a, c.values("q")[k], c.values("m")[k], c.values("theta")[k],
                         c.values("V")[k], bool(mask[k])])
    # the global minimum's vanishing parameter: theta = 0 below alpha_c, m = 0 above
    lo, hi = r.alpha_min, r.alpha_max
    if ac is not None:
        ax.plot([lo, ac], [0, 0], color=COLORS["theta"], lw=2.4)
        ax.plot([ac, hi], [0, 0], color=COLORS["m"], lw=2.4)
        ax.axvline(ac, color=COLORS["alpha_c"], ls=":", lw=1.2)
    _mark_ends(ax, r, {"positional": ("q", "m"), "semantic": ("q", "theta")})
    handles = [plt.Line2D([], [], color=COLORS[f], lw=2.4, label=SYMBOL[f]) for f in ("q", "m", "theta")]
    handles += [plt.Line2D([], [], color="0.2", lw=2.4, label="global minimum"),
                plt.Line2D([], [], color="0.2", lw=1.1, ls="--", label="other branch (local)")]
    if any(r.spinodals.get(b) for b in ("semantic", "positional")):
        handles.append(plt.Line2D([], [], color="k", marker="x", ls="", ms=6, label="branch ends (spinodal)"))
    if ac is not None:
        handles.append(plt.Line2D([], [], color=COLORS["alpha_c"], ls=":", lw=1.2,
                                  label=rf"$\alpha_c = {ac:.3f}$"))
    if _hatch_unstable(ax, stability):
        from matplotlib.patches import Patch

        handles.append(Patch(edgecolor="0.3", label=RS_LABEL + " (strip colour: branch)", **RS_HATCH))
    if sim:
        for init, marker in (("positional", "s"), ("semantic", "o"), ("random", "^")):
            pts = [s for s in sim if s.get("init") == init]
            if not pts:
                continue
            for fam in ("q", "m", "theta"):
                xs = [s["alpha"] for s in pts]
                ys = [s.get(fam, math.nan) for s in pts]
                es = [s.get(f"{fam}_se", 0.0) for s in pts]
                es = [0.0 if not math.isfinite(e) else e for e in es]
                ax.errorbar(xs, ys, yerr=es, fmt=marker, ms=4, color=COLORS[fam], mfc="white", mew=1.2,
                            capsize=2, lw=0.8, zorder=5)
            handles.append(plt.Line2D([], [], marker=marker, ls="", color="0.2", mfc="white",
                                      label=f"GD, {init} init"))
    ax.set_xlabel(r"sample complexity $\alpha = n/d$")
    ax.set_ylabel(r"summary statistics $q,\ m,\ \theta$")
    ax.set_title(rf"Summary statistics, $\omega = {r.parameters['omega']:g}$")
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom=-0.01)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    _save(fig, path.with_suffix(".png"), dpi)
    plt.close(fig)
    _write_csv(path.with_suffix(".csv"), ["branch", "alpha", "q", "m", "theta", "V", "global_minimum"], rows)


def plot_fig2_error(r: PhaseResult, path: Path, sim: Sequence[Mapping] = (), lin_sim: Sequence[Mapping] = (),
                    dpi: int = 150, stability: Mapping[str, Sequence[tuple[float, float, bool]]] | None = None) -> None:
    """Fig. 2 right: ``eps_g`` on both branches, global minimum thick, ``eps_lin``, ``alpha_c``, ``alpha_l``;
    hatched strips as in :func:`plot_fig2_summary`."""
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(7.0, 3.9))
    ac, al = r.alpha_c.value, r.alpha_l.value
    k3 = 1e3  # plotted in units of 1e-3
    rows = []
    for branch in ("positional", "semantic"):
        c = r.curves.get(branch)
        if c is None or not len(c):
            continue
        x, y = c.alphas, c.values("eps_g")
        mask = _global_mask(r, branch, x)
        for xs, ys, g in _split_runs(x, y, mask, ac, branch):
            ax.plot(xs, k3 * ys, color=COLORS[branch], lw=2.4 if g else 1.1, ls="-" if g else "--",
                    alpha=1.0 if g else 0.75)
        ax.plot([], [], color=COLORS[branch], lw=2.4, label=f"{branch} branch")
        err = c.values("eps_g_error")
        rows += [[branch, a, y[k], err[k], bool(mask[k])] for k, a in enumerate(x)]
    ax.axhline(k3 * r.eps_lin, color=COLORS["lin"], lw=1.8,
               label=r"linear baseline $\varepsilon_g^{\rm lin}$")
    rows += [["linear_baseline", r.alpha_min, r.eps_lin, r.eps_lin_error, ""],
             ["linear_baseline", r.alpha_max, r.eps_lin, r.eps_lin_error, ""]]
    if ac is not None:
        ax.axvline(ac, color=COLORS["alpha_c"], ls=":", lw=1.3, label=rf"$\alpha_c = {ac:.3f}$")
        rows.append(["alpha_c", ac, "", "", ""])
    if al is not None:
        ax.axvline(al, color=COLORS["alpha_l"], ls="-.", lw=1.3, label=rf"$\alpha_l = {al:.3f}$")
        rows.append(["alpha_l", al, r.eps_lin, "", ""])
    for init, marker in (("positional", "s"), ("semantic", "o"), ("random", "^")):
        pts = [s for s in sim if s.get("init") == init]
        if pts:
            ax.errorbar([s["alpha"] for s in pts], [k3 * s["eps_g"] for s in pts],
                        yerr=[k3 * s.get("eps_g_se", 0.0) if math.isfinite(s.get("eps_g_se", 0.0)) else 0.0
                              for s in pts],
                        fmt=marker, ms=4, color=COLORS.get(init, "0.3"), mfc="white", mew=1.2, capsize=2, lw=0.8,
                        zorder=5, label=f"GD, {init} init")
    if lin_sim:
        ax.errorbar([s["alpha"] for s in lin_sim], [k3 * s["eps_g"] for s in lin_sim],
                    yerr=[k3 * s.get("eps_g_se", 0.0) for s in lin_sim], fmt="D", ms=4, color=COLORS["lin"],
                    mfc="white", capsize=2, lw=0.8, zorder=5, label="linear model, GD")
    _mark_ends(ax, r, {"positional": ("eps_g",), "semantic": ("eps_g",)}, scale=k3, label=True)
    if _hatch_unstable(ax, stability):
        ax.fill_between([], [], [], edgecolor="0.3", label=RS_LABEL + " (strip colour: branch)", **RS_HATCH)
    ax.plot([], [], color="0.2", lw=2.4, label="global minimum")
    ax.plot([], [], color="0.2", lw=1.1, ls="--", label="other branch (local)")
    ax.set_xlabel(r"sample complexity $\alpha = n/d$")
    ax.set_ylabel(r"test error $\varepsilon_g$  ($\times 10^{-3}$)")
    ax.set_title(rf"Test error, $\omega = {r.parameters['omega']:g}$")
    ax.set_xlim(r.alpha_min, r.alpha_max)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    _save(fig, path.with_suffix(".png"), dpi)
    plt.close(fig)
    _write_csv(path.with_suffix(".csv"), ["series", "alpha", "eps_g", "eps_g_error", "global_minimum"], rows)


def plot_fig3_loss(results: Mapping[float, PhaseResult], omegas: Sequence[float], path: Path,
                   sim: Sequence[Mapping] = (), dpi: int = 150) -> None:
    """Fig. 3 centre: ``Phi_pos - Phi_sem = e_t,sem - e_t,pos`` vs ``alpha`` for several ``omega``."""
    plt = _mpl()
    import matplotlib.cm as cm

    fig, ax = plt.subplots(figsize=(6.0, 3.9))
    cmap = cm.get_cmap("viridis") if hasattr(cm, "get_cmap") else plt.colormaps["viridis"]
    ws = [w for w in omegas if w in results]
    rows = []
    amax = 0.0
    for k, w in enumerate(ws):
        r = results[w]
        col = cmap(0.1 + 0.8 * k / max(1, len(ws) - 1))
        a, d = r.delta_phi()
        if not len(a):
            continue
        amax = max(amax, float(a[-1]))
        ax.plot(a, 1e3 * d, color=col, label=rf"$\omega = {w:g}$")
        if r.alpha_c.value is not None:
            ax.plot([r.alpha_c.value], [0.0], "o", color=col, ms=5, zorder=5)
        rows += [[w, ai, di, r.alpha_c.value] for ai, di in zip(a, d)]
        pts = {}
        for s in _sim_at(sim, w):
            pts.setdefault(s["alpha"], {})[s["init"]] = s
        xs, ys, es = [], [], []
        for al, by in sorted(pts.items()):
            if "semantic" in by and "positional" in by:
                xs.append(al)
                ys.append(by["semantic"]["train_loss"] - by["positional"]["train_loss"])
                es.append(math.hypot(by["semantic"].get("train_loss_se", 0.0) or 0.0,
                                     by["positional"].get("train_loss_se", 0.0) or 0.0))
        if xs:
            ax.errorbar(xs, 1e3 * np.array(ys), yerr=1e3 * np.array(es), fmt="o", ms=4, color=col, mfc="white",
                        capsize=2, lw=0.8, zorder=6)
    # zoom on the crossings: up to 1.4 x the largest alpha_c
    acs = [results[w].alpha_c.value for w in ws if results[w].alpha_c.value is not None]
    if acs and rows:
        xmax = min(max(r[1] for r in rows), 1.4 * max(acs))
        inside = [1e3 * r[2] for r in rows if r[1] <= xmax]
        ax.set_xlim(min(r[1] for r in rows) - 0.02, xmax)
        if inside:
            lo_y, hi_y = min(inside + [0.0]), max(inside + [0.0])
            pad = 0.08 * (hi_y - lo_y or 1.0)
            ax.set_ylim(lo_y - pad, hi_y + pad)
    ax.axhline(0.0, color="0.3", lw=0.8)
    if sim:
        ax.plot([], [], "o", color="0.3", mfc="white", label="GD (sem. − pos. init)")
    ax.plot([], [], "o", color="0.3", label=r"$\alpha_c$ (zero crossing)")
    ax.set_xlabel(r"sample complexity $\alpha = n/d$")
    ax.set_ylabel(r"$e_{t,\rm sem} - e_{t,\rm pos} = \Phi_{\rm pos} - \Phi_{\rm sem}$  ($\times 10^{-3}$)")
    ax.set_title("Training-loss difference of the two branches")
    ax.legend(loc="lower left", framealpha=0.9)
    _save(fig, path.with_suffix(".png"), dpi)
    plt.close(fig)
    _write_csv(path.with_suffix(".csv"), ["omega", "alpha", "phi_pos_minus_phi_sem", "alpha_c"], rows)


def plot_phase_diagram(results: Mapping[float, PhaseResult], path: Path, title: str, dpi: int = 150,
                       note: str | None = None,
                       unstable: Mapping[float, Sequence[tuple[float, float]]] | None = None) -> None:
    """Fig. 3 right / Fig. 9: ``alpha_c(omega)``, ``alpha_l(omega)`` and the semantic spinodal;
    ``unstable[omega]``: ``alpha`` intervals where the global minimum is RS-unstable, hatched
    over a column of the ``omega`` grid's width (only the ``omega`` given were evaluated)."""
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(7.0, 3.9))
    ws = sorted(results)
    ac = np.array([np.nan if results[w].alpha_c.value is None else results[w].alpha_c.value for w in ws])
    al = np.array([np.nan if results[w].alpha_l.value is None else results[w].alpha_l.value for w in ws])
    sp = np.array([(results[w].spinodals.get("semantic") or [np.nan])[0] for w in ws])
    amax = max(results[w].alpha_max for w in ws)
    top = float(np.nanmax(np.r_[ac, al, 1.0])) * 1.15 if np.isfinite(np.r_[ac, al]).any() else amax
    top = min(top, amax)
    ok = np.isfinite(ac)
    if ok.any():
        x = np.array(ws)[ok]
        ax.fill_between(x, 0, ac[ok], color=COLORS["positional"], alpha=0.10, lw=0)
        ax.fill_between(x, ac[ok], top, color=COLORS["semantic"], alpha=0.10, lw=0)
        xm = float(np.mean(x))
        ax.text(xm, float(np.nanmin(ac[ok])) * 0.45, "positional", ha="center", va="center",
                color=COLORS["positional"], fontsize=10)
        ax.text(float(x[0]) + 0.2 * (float(x[-1]) - float(x[0])), top * 0.93, "semantic", ha="center",
                va="top", color=COLORS["semantic"], fontsize=10)
    ax.plot(ws, ac, "o-", color="0.15", ms=4, label=r"$\alpha_c$: $\Phi_{\rm sem} = \Phi_{\rm pos}$")
    cont = [i for i, w in enumerate(ws) if results[w].alpha_c.value is not None
            and " root of Phi_sem" not in results[w].alpha_c.reason]
    if cont:
        ax.plot([ws[i] for i in cont], ac[cont], "o", color="0.15", mfc="white", ms=6, zorder=5,
                label=r"$\alpha_c$ where the semantic branch appears")
    ax.plot(ws, al, "s-", color=COLORS["alpha_l"], ms=4,
            label=r"$\alpha_l$: $\varepsilon_g = \varepsilon_g^{\rm lin}$")
    if np.isfinite(sp).any():
        known = np.isfinite(sp)  # not located on the fast thresholds path
        ax.plot(np.array(ws)[known], sp[known], ":", marker=".", color=COLORS["semantic"], lw=1.6,
                label="semantic branch ends")
    if unstable:
        from matplotlib.patches import Rectangle

        width = float(np.min(np.diff(ws))) if len(ws) > 1 else 0.05
        for w, spans in sorted(unstable.items()):
            for lo, hi in spans:
                ax.add_patch(Rectangle((w - width / 2, lo), width, min(hi, top) - lo, edgecolor="0.3", zorder=1,
                                       **RS_HATCH))
        ax.fill_between([], [], [], edgecolor="0.3", **RS_HATCH,
                        label=RS_LABEL + r" at $\omega$ = " + ", ".join(f"{w:g}" for w in sorted(unstable)))
    ax.set_xlabel(r"positionality of the target $\omega$")
    ax.set_ylabel(r"sample complexity $\alpha$")
    ax.set_title(title)
    pad = 0.05 if max(ws) == min(ws) else 0.0
    ax.set_xlim(min(ws) - pad, max(ws) + pad)
    ax.set_ylim(0, top)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    missing = [w for w in ws if results[w].alpha_c.value is None]
    text = note or ""
    if missing:
        text += ("\n\n" if text else "") + r"no $\alpha_c$ at $\omega$ = " + \
            ", ".join(f"{w:g}" for w in missing) + "\n(reasons in the CSV)"
    if text:
        ax.text(1.02, 0.0, text, transform=ax.transAxes, fontsize=7.5, va="bottom", ha="left", color="0.25")
    _save(fig, path.with_suffix(".png"), dpi)
    plt.close(fig)
    rows = []
    for w in ws:
        r = results[w]
        rows.append([w, r.alpha_c.value, r.alpha_l.value, r.eps_lin,
                     (r.spinodals.get("semantic") or [None])[0], (r.spinodals.get("positional") or [None])[0],
                     r.alpha_c.reason, r.alpha_l.reason])
    _write_csv(path.with_suffix(".csv"), ["omega", "alpha_c", "alpha_l", "eps_lin", "semantic_spinodal",
                                         "positional_spinodal", "alpha_c_reason", "alpha_l_reason"], rows)


def _A_label(A: Sequence[float]) -> str:
    return rf"$A = [[{A[0]:g}, {A[1]:g}], [{A[2]:g}, {A[3]:g}]]$"


def write_figures(data: FigureData, out: str | os.PathLike, sim_rows: Sequence[Mapping] = ()) -> list[Path]:
    """Draw every figure into ``out`` (PNG + CSV each) and write ``summary.json``; returns the PNGs.

    The files are drawn into a staging directory and replace those of ``out`` together, summary
    last (:func:`replica.artifacts.outputs.staged_dir`): an interrupted run leaves ``out`` as it was, never a
    mix of old and new figures beside a summary of the old run."""
    final = make_output_dir(out, "out")  # the parent must exist: a typo creates no directory tree
    with staged_dir(final, last="summary.json") as stage:
        pngs = _draw_figures(data, stage, sim_rows)
    return [final / p.name for p in pngs]


def _draw_figures(data: FigureData, out: Path, sim_rows: Sequence[Mapping] = ()) -> list[Path]:
    """Every figure, its CSV and ``summary.json``, drawn into the directory ``out``."""
    cfg = data.config
    r2 = data.fig2
    sim2 = [s for s in _sim_at(sim_rows, cfg.omega_fig2) if s.get("converged", True)]
    lin2 = _sim_at(sim_rows, cfg.omega_fig2, model="linear")
    A1 = tuple(cfg.parameters.get(k, v) for k, v in zip(("A_11", "A_12", "A_21", "A_22"), PAPER_A))
    paths = [out / "fig2_middle_summary_statistics", out / "fig2_right_test_error", out / "fig3_centre_training_loss",
             out / "fig3_right_phase_diagram", out / "fig9_phase_diagram"]
    st2 = data.stability.get(cfg.omega_fig2)
    plot_fig2_summary(r2, paths[0], sim2, dpi=cfg.dpi, stability=st2)
    plot_fig2_error(r2, paths[1], sim2, lin2, dpi=cfg.dpi, stability=st2)
    plot_fig3_loss(data.main, cfg.omegas_loss, paths[2], [s for s in sim_rows if s.get("converged", True)],
                   dpi=cfg.dpi)
    unstable = {w: global_unstable_intervals(data.main[w], st) for w, st in data.stability.items()}
    plot_phase_diagram({w: data.main[w] for w in data.main if w in {round(x, 10) for x in cfg.omegas}}
                       or data.main, paths[3], f"Phase diagram, {_A_label(A1)}", dpi=cfg.dpi, unstable=unstable)
    if data.stability:
        _write_csv(out / "rs_stability.csv", ["omega", "branch", "alpha", "replicon", "rs_stable", "global_minimum"],
                   [[w, b, a, v, ok, data.main[w].global_branch(a) == b]
                    for w, st in sorted(data.stability.items()) for b, ss in sorted(st.items()) for a, v, ok in ss])
    plot_phase_diagram(data.second, paths[4], f"Phase diagram, {_A_label(cfg.second_A)}", dpi=cfg.dpi,
                       note="Tied attention cannot express this\nanti-diagonal $A$: the positional branch\n"
                            "is weak or merges into the agnostic one,\nand $\\alpha_c$ sits where the (weak)\n"
                            "semantic branch appears, which moves\nby ~0.1 with the quadrature order.")
    summary = dict(
        seconds=data.seconds, omega_fig2=cfg.omega_fig2, quadrature=r2.quadrature,
        parameters=dict(r2.parameters), second_A=list(cfg.second_A),
        thresholds=[dict(A=list(A1), omega=w, alpha_c=r.alpha_c.value, alpha_l=r.alpha_l.value, eps_lin=r.eps_lin,
                         spinodals=r.spinodals, alpha_c_reason=r.alpha_c.reason, alpha_l_reason=r.alpha_l.reason)
                    for w, r in sorted(data.main.items())]
        + [dict(A=list(cfg.second_A), omega=w, alpha_c=r.alpha_c.value, alpha_l=r.alpha_l.value, eps_lin=r.eps_lin,
                spinodals=r.spinodals, alpha_c_reason=r.alpha_c.reason, alpha_l_reason=r.alpha_l.reason)
           for w, r in sorted(data.second.items())],
        fig2=r2.to_dict(), simulation_rows_used=len(sim2) + len(lin2),
        rs_stability={str(w): {b: [dict(alpha=a, replicon=v, rs_stable=ok) for a, v, ok in ss] for b, ss in st.items()}
                      for w, st in sorted(data.stability.items())},
        rs_unstable_global={str(w): [list(iv) for iv in ivs] for w, ivs in sorted(unstable.items())})
    jsonio.write(out / "summary.json", summary, indent=1)
    return [p.with_suffix(".png") for p in paths]


def make_figures(out: str | os.PathLike = "figures", *, quick: bool = False, jobs: int = 1,
                 sim: str | os.PathLike | None = None, cache: PointCache | None = None,
                 progress: Progress | None = None, config: FigureConfig | None = None,
                 executor: cf.Executor | None = None) -> tuple[FigureData, list[Path]]:
    """Compute and draw everything (the ``replica figures`` command).

    ``out`` is checked before the computation (it must be, or be creatable as, a writable
    directory), so that minutes of work are not lost to a bad path."""
    check_output_dir(out, "out")
    sim_rows = load_simulation(sim) if sim is not None else []
    cfg = config or (quick_config() if quick else FigureConfig())
    data = compute_figures(cfg, jobs=jobs, cache=cache, progress=progress, executor=executor)
    return data, write_figures(data, out, sim_rows)


def figures_command(args, *, jobs: int, cache: PointCache | None, progress: Progress | None,
                    executor: cf.Executor | None) -> tuple[list[Path], str]:
    """``replica figures`` for this study (registered in :data:`replica.applications.attention.APPLICATION`):
    the configuration from the command's flags (``--quick``, ``--quadrature``, ``--dpi``,
    ``--replicon-points``, ``--sim``), then :func:`make_figures`. Returns the files written
    (PNGs, then ``summary.json``) and one line on the work done."""
    from ...numeric.integrators import from_spec
    from ...registry import load_module

    cfg = quick_config() if args.quick else FigureConfig()
    if args.quadrature is not None:
        from_spec(args.quadrature, load_module(cfg.model))  # validate early (names 'quadrature')
        cfg = replace(cfg, settings=replace(cfg.settings, rule=args.quadrature))
    if args.dpi is not None:
        if args.dpi < 20 or args.dpi > 1200:
            raise ParameterError("dpi", f"must be in [20, 1200], got {args.dpi}")
        cfg = replace(cfg, dpi=args.dpi)
    if args.replicon_points is not None:
        if args.replicon_points < 0:
            raise ParameterError("replicon-points", f"must be >= 0, got {args.replicon_points}")
        cfg = replace(cfg, replicon_points=args.replicon_points)
    data, pngs = make_figures(args.out, jobs=jobs, sim=args.sim, cache=cache, progress=progress, config=cfg,
                              executor=executor)
    return [*pngs, Path(args.out) / "summary.json"], f"{len(data.main) + len(data.second)} phase points in " \
                                                      f"{data.seconds:.0f} s"

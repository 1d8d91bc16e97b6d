"""The paper's other experiments, as figures: ``python -m numerics.simulate experiments --out docs/figures``.

* ``histogram`` (paper App. A, Figs. 1, 4–6; :mod:`numerics.applications.attention.histogram`): the positional and
  the semantic minimum of the one-layer transformer on the histogram task, each trained with
  its frozen query/key blocks, then perturbed and trained further with nothing frozen.
  Writes ``histogram_attention_maps.png`` (+ ``.csv``: the plotted weights) — the attention of
  both minima, before and after the stability check, on three test sequences — and
  ``histogram_summary.csv`` (accuracies, attention index, parameter change, CPU seconds).
* ``value`` (paper App. E.3, Fig. 13; :mod:`numerics.applications.attention.value_matrix`): the GD transition
  ``α_c`` (where ``e_t,sem = e_t,pos``) of tied attention with a trainable low-rank value matrix
  and of the tied model on the same seeds, for several ``ω``, next to the tied model's theory
  line (the committed ``docs/figures/fig3_right_phase_diagram.csv``, i.e. ``replica.phase``).
  Writes ``value_matrix_transition.png`` (+ ``.csv``: ``α_c`` per model, ω, seed) and
  ``value_matrix_runs.csv``, every GD run; that file is also the cache: rerunning skips the
  runs already in it (same settings), so an interrupted run resumes.

Progress goes to stderr; bad input stops with a one-line error and exit status 2.
``--quick`` runs tiny configurations (for tests; the numbers mean little).
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["RunCache", "theory_alpha_c", "histogram_experiment", "value_experiment", "main"]

ROOT = Path(__file__).resolve().parents[3]   # the repository (numerics/applications/attention/ below it)
THEORY_CSV = ROOT / "docs" / "figures" / "fig3_right_phase_diagram.csv"
#: α grid around the theory's α_c(ω): the gap e_t,sem − e_t,pos is fitted by a line there
ALPHA_FACTORS = (0.85, 1.0, 1.15)

RUN_COLUMNS = ("model", "omega", "alpha", "d", "seed", "init", "lr", "value_init", "lam", "q", "m", "theta", "eps_g",
               "train_loss", "grad_norm", "converged", "steps", "value_correction_init", "value_correction",
               "cpu_seconds")


# --------------------------------------------------------------------------- cache
class RunCache:
    """GD runs stored as CSV rows (``RUN_COLUMNS``); the key is
    :func:`numerics.applications.attention.value_matrix.run_key`."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.rows: dict[tuple, dict[str, Any]] = {}
        if self.path.exists() and self.path.stat().st_size > 0:
            with open(self.path, newline="") as fh:
                reader = csv.DictReader(fh)
                if tuple(reader.fieldnames or ()) != RUN_COLUMNS:
                    raise ValueError(f"out: {self.path} exists with other columns; move it away")
                for r in reader:
                    run = self._parse(r)
                    self.rows[self._key(run)] = run

    @staticmethod
    def _parse(r: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in r.items():
            if k in ("model", "init"):
                out[k] = v
            elif k in ("d", "seed", "steps"):
                out[k] = int(v)
            elif k == "converged":
                out[k] = v == "True"
            else:
                out[k] = float(v) if v not in ("", "nan") else math.nan
        return out

    @staticmethod
    def _key(run: dict[str, Any]) -> tuple:
        from .value_matrix import run_key

        return run_key(model=run["model"], omega=run["omega"], alpha=run["alpha"], d=run["d"], seed=run["seed"],
                       init=run["init"], lr=run["lr"], value_init=run["value_init"], lam=run["lam"])

    def get(self, key: tuple) -> dict[str, Any] | None:
        return self.rows.get(key)

    def put(self, key: tuple, run: dict[str, Any]) -> None:
        """Store ``run`` and rewrite the file atomically (an interrupted run leaves every finished
        row and never a half-written one)."""
        import io

        from replica.artifacts.outputs import atomic_write_text

        settings = dict(key[6])
        self.rows[key] = dict(run, lr=settings.get("lr"), value_init=settings.get("value_init"), lam=settings.get("lam"))
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(RUN_COLUMNS)
        for row in self.rows.values():
            w.writerow([_cell(row.get(c)) for c in RUN_COLUMNS])
        atomic_write_text(self.path, buf.getvalue())


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return "" if v is None else str(v)


# --------------------------------------------------------------------------- theory
def theory_alpha_c(omegas: Sequence[float], path: str | os.PathLike = THEORY_CSV) -> dict[float, float]:
    """The tied model's ``α_c(ω)`` from the committed phase-diagram CSV (``replica figures``)."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"theory: {p} not found; regenerate it with `replica figures --out docs/figures`")
    table: dict[float, float] = {}
    with open(p, newline="") as fh:
        for r in csv.DictReader(fh):
            if r.get("alpha_c"):
                table[round(float(r["omega"]), 10)] = float(r["alpha_c"])
    out = {}
    for w in omegas:
        k = round(float(w), 10)
        if k not in table:
            raise ValueError(f"omegas: {w} is not on the theory grid of {p.name} ({sorted(table)})")
        out[float(w)] = table[k]
    return out


# --------------------------------------------------------------------------- histogram
def histogram_experiment(out: Path, *, quick: bool = False, seed: int = 0, device: str = "cpu",
                         log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Both minima (one seed), stability check, attention maps; returns the summary rows."""
    from .histogram import HistogramConfig, letters, plot_attention_maps, quick_config, run_seed, sample_sequences
    from numerics.simulate import torch_threads

    cfg = quick_config() if quick else HistogramConfig()
    models: dict[str, Any] = {}
    rows = []
    with torch_threads(1):  # small tensors: one thread is faster on a shared machine
        for init in ("positional", "semantic"):
            log(f"[histogram] {init} minimum (seed {seed}) ...")
            r = run_seed(seed, init, cfg, device=device, log=log, keep_model=True)
            models[f"{init} (frozen)"] = r["model"]
            models[f"{init} (after SGD)"] = r["model_unfrozen"]
            for stage, res in (("frozen", r), ("after_sgd", r["unfrozen"])):
                rows.append({"init": init, "stage": stage, "seed": seed,
                             **{k: res.get(k) for k in ("test_accuracy", "test_sequence_accuracy", "positional_index",
                                                        "r2_position", "r2_token", "same_token_ratio",
                                                        "attention_spread", "relative_parameter_change")},
                             "cpu_seconds": r["cpu_seconds"] if stage == "frozen" else None})
    order = ["positional (frozen)", "positional (after SGD)", "semantic (frozen)", "semantic (after SGD)"]
    seqs, _ = sample_sequences(3, cfg.T, cfg.alphabet, np.random.default_rng(2024))
    plot_attention_maps({k: models[k] for k in order}, seqs, str(out / "histogram_attention_maps.png"),
                        csv_path=str(out / "histogram_attention_maps.csv"))
    cols = list(rows[0])
    with open(out / "histogram_summary.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for r in rows:
            w.writerow([_cell(r[c]) if not isinstance(r[c], float) else f"{r[c]:.6g}" for c in cols])
    log(f"[histogram] sequences drawn: {', '.join(letters(s) for s in seqs)}")
    return {"config": asdict(cfg), "rows": rows}


# --------------------------------------------------------------------------- value matrix
def value_experiment(out: Path, *, omegas: Sequence[float], d: int, seeds: Sequence[int], lr: float = 1.5,
                     value_init: float = 1.0, lam: float = 0.01, n_test: int = 10_000,
                     theory: dict[float, float] | None = None, device: str = "cpu",
                     log: Callable[[str], None] = lambda s: None) -> list[dict[str, Any]]:
    """GD transitions of the tied and the value-matrix student at every ``ω`` (same seeds, one torch
    thread per run)."""
    from .value_matrix import gd_transition

    theory = theory if theory is not None else theory_alpha_c(omegas)
    cache = RunCache(out / "value_matrix_runs.csv")
    results = []
    for w in omegas:
        alphas = [round(f * theory[float(w)], 4) for f in ALPHA_FACTORS]
        for value in (False, True):
            t0 = time.process_time()
            res = gd_transition(w, alphas, seeds, d=d, value=value, log=log, cache=cache, lr=lr,
                                value_init=value_init, lam=lam, n_test=n_test, device=device)
            res["theory_alpha_c"] = theory[float(w)]
            log(f"[value] {res['model']} omega={w:g}: GD alpha_c = {_fmt(res['alpha_c'])} ± "
                f"{_fmt(res['alpha_c_se'])} (theory {theory[float(w)]:.4f}), per seed "
                f"{[_fmt(a) for a in res['alpha_c_per_seed']]}, {time.process_time() - t0:.0f} CPU s")
            results.append(res)
    _write_value_outputs(out, results, d)
    return results


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def _write_value_outputs(out: Path, results: Sequence[dict[str, Any]], d: int) -> None:
    from .histogram import pyplot

    with open(out / "value_matrix_transition.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "omega", "d", "seeds", "alpha_c", "alpha_c_se", "alpha_c_per_seed", "theory_alpha_c",
                     "alphas", "max_value_correction", "n_pairs_off_branch"])
        for r in results:
            w.writerow([r["model"], r["omega"], r["d"], " ".join(map(str, r["seeds"])), _cell(r["alpha_c"]),
                        _cell(r["alpha_c_se"]), " ".join(_cell(a) for a in r["alpha_c_per_seed"]),
                        repr(r["theory_alpha_c"]), " ".join(map(repr, r["alphas"])),
                        repr(max(g["value_correction"] for g in r["gaps"])),
                        sum(not g["branches_ok"] for g in r["gaps"])])
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = {"tied": "tab:blue", "value": "tab:orange"}
    omegas = sorted({r["omega"] for r in results})
    th = sorted({(r["omega"], r["theory_alpha_c"]) for r in results})
    if THEORY_CSV.exists():
        with open(THEORY_CSV, newline="") as fh:
            full = [(float(r["omega"]), float(r["alpha_c"])) for r in csv.DictReader(fh) if r.get("alpha_c")]
        ax1.plot([a for _, a in full], [w for w, _ in full], "-", color="0.3", label=r"theory $\alpha_c$ (tied)")
    else:
        ax1.plot([a for _, a in th], [w for w, _ in th], "-", color="0.3", label=r"theory $\alpha_c$ (tied)")
    names = {"tied": "tied", "value": "value matrix $I + UW^T/\\sqrt{d}$"}
    for k, model in enumerate(("tied", "value")):
        pts = [r for r in results if r["model"] == model and r["alpha_c"] is not None]
        off = (k - 0.5) * 0.006
        ax1.errorbar([r["alpha_c"] for r in pts], [r["omega"] + off for r in pts],
                     xerr=[r["alpha_c_se"] or 0.0 for r in pts], fmt="o" if model == "tied" else "s",
                     color=colors[model], capsize=3,
                     label=f"GD, {names[model]} (d = {d})")
    ax1.set_xlabel(r"$\alpha$")
    ax1.set_ylabel(r"$\omega$")
    ax1.set_title("Transition: positional below, semantic above")
    ax1.legend(loc="lower right")
    ax1.grid(alpha=0.25)
    for model, ls in (("tied", "-"), ("value", "--")):
        for w in omegas:
            r = next(x for x in results if x["model"] == model and x["omega"] == w)
            al = r["alphas"]
            mean_gap = [np.mean([g["gap"] for g in r["gaps"] if g["alpha"] == a and g["branches_ok"]] or [np.nan])
                        for a in al]
            ax2.plot(al, mean_gap, ls, marker="o" if model == "tied" else "s", ms=4,
                     label=f"{model}, ω = {w:g}")
    ax2.axhline(0.0, color="0.5", lw=0.8)
    ax2.set_xlabel(r"$\alpha$")
    ax2.set_ylabel(r"$e_{t,\mathrm{sem}} - e_{t,\mathrm{pos}}$ (GD, seed mean)")
    ax2.set_title("Training-loss gap (zero crossing = GD $\\alpha_c$)")
    ax2.legend(fontsize=7, ncol=2)
    ax2.grid(alpha=0.25)
    fig.tight_layout()
    fig.savefig(out / "value_matrix_transition.png", dpi=150)
    plt.close(fig)


# --------------------------------------------------------------------------- CLI
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _floats(s: str) -> list[float]:
    try:
        return [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {s!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m numerics.simulate experiments", description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="Full run (about 18 CPU-minutes on one core):\n"
                       "  python -m numerics.simulate experiments --out docs/figures\n"
                       "Only the histogram task, quickly:\n"
                       "  python -m numerics.simulate experiments --out quick-figures --only histogram --quick")
    p.add_argument("--out", default="docs/figures", help="output directory (default docs/figures)")
    p.add_argument("--only", default="histogram,value", help="comma-separated: histogram, value")
    p.add_argument("--quick", action="store_true", help="tiny configurations (tests)")
    p.add_argument("--omegas", type=_floats, default=[0.1, 0.2, 0.3, 0.4], help="value matrix: ω values")
    p.add_argument("--d", type=int, default=400, help="value matrix: dimension d")
    p.add_argument("--seeds", type=int, default=3, help="value matrix: seeds 0..K-1")
    p.add_argument("--value-init", type=float, default=1.0, help="std of the entries of U, W at the start")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status (2 for bad input, 130/143 when interrupted)."""
    from numerics.checks import run_cli

    return run_cli(build_parser(), _run, argv)  # SIGTERM ends like Ctrl-C: one line, no traceback


def _run(args: argparse.Namespace, prog: str) -> int:
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    try:
        parts = [x.strip() for x in args.only.split(",") if x.strip()]
        bad = set(parts) - {"histogram", "value"}
        if bad or not parts:
            raise ValueError(f"only must list histogram and/or value (got {args.only!r})")
        if args.d < 2:
            raise ValueError(f"d must be >= 2 (got {args.d})")
        if args.seeds < 2:
            raise ValueError(f"seeds must be >= 2 (a transition's error bar needs two) (got {args.seeds})")
        if not (math.isfinite(args.value_init) and args.value_init >= 0):
            raise ValueError(f"value-init must be >= 0 (got {args.value_init})")
        for w in args.omegas:
            if not 0 <= w <= 1:
                raise ValueError(f"omegas must lie in [0, 1] (got {w})")
        from numerics.simulate import resolve_device

        from replica.artifacts.outputs import check_output_dir

        device = str(resolve_device(args.device))
        out = check_output_dir(args.out, "out")
        if "value" in parts:
            RunCache(out / "value_matrix_runs.csv")  # a foreign file there stops us before any work
        out.mkdir(parents=True, exist_ok=True)
        theory = theory_alpha_c(args.omegas) if "value" in parts else None
        t0, c0 = time.perf_counter(), time.process_time()
        if "histogram" in parts:
            histogram_experiment(out, quick=args.quick, device=device, log=log)
        if "value" in parts:
            d, n_test = (args.d, 10_000) if not args.quick else (min(args.d, 40), 500)
            value_experiment(out, omegas=args.omegas, d=d, seeds=list(range(args.seeds)), value_init=args.value_init,
                             n_test=n_test, theory=theory, device=device, log=log)
    except ValueError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: finished GD runs are in value_matrix_runs.csv
        from replica.runtime.workers import exit_status, interrupt_message

        print(interrupt_message(prog, e, cache_root=Path(args.out) / "value_matrix_runs.csv"), file=sys.stderr)
        return exit_status(e)
    print(f"figures in {out}/ ({time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

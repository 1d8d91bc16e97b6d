"""Issue 19: parameter sweeps -- the spec, the executor layer, chains of warm starts, the cache that
makes sweeps resume, the labelled dataset and its files, the plotting helpers, the command line.

The Dask cluster checks are in tests/test_sweep_dask.py."""
from __future__ import annotations

import concurrent.futures as cf
import json
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

from replica.artifacts.cache import PointCache
from replica.errors import ParameterError
from replica.runtime.executors import InlineExecutor, Ready, open_executor, resolve_scheduler, run_chains
from replica.sweep import load_spec, open_sweep, plan_chains, run_sweep, write_dataset
from replica.sweep.run import prepare
from tests import support
from tests.support import THRESHOLDS_3_OMEGA, interrupt_leaves_no_worker, run_cli

ROOT = support.ROOT

RIDGE = support.ridge_spec("[0.5, 1.0, 2.0, 4.0]", chunk=2)


def spec_file(tmp_path: Path, text: str = RIDGE, name: str = "spec.toml") -> Path:
    return support.spec_file(tmp_path, text, name)


def one_line(res: subprocess.CompletedProcess, name: str) -> str:
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and "Traceback" not in res.stderr and name in lines[0], res.stderr
    return lines[0]


def strict_json(text: str):
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


# --------------------------------------------------------------------------- the spec
def test_spec_ranges_and_points(tmp_path):
    spec = load_spec(spec_file(tmp_path, RIDGE.replace("lam = [0.01, 0.1, 1.0]",
                                                       'lam = {start = 0.01, stop = 1.0, num = 3, spacing = "log"}')))
    assert spec.shape == (4, 3) and spec.size == 12
    assert np.allclose(spec.axis("lam").values, [0.01, 0.1, 1.0], rtol=1e-14)
    assert spec.point((1, 2)) == {"Delta": 0.25, "alpha": 1.0, "lam": spec.axis("lam").values[2]}


@pytest.mark.parametrize("edit,name", [
    (lambda s: s.replace('model = "ridge"', 'model = "ridge"\nbogus = 1'), "bogus"),
    (lambda s: s.replace("alpha = [0.5, 1.0, 2.0, 4.0]", "alpha = []"), "grid.alpha"),
    (lambda s: s.replace("alpha = [0.5, 1.0, 2.0, 4.0]", "alpha = [1.0, 1.0]"), "grid.alpha"),
    (lambda s: s.replace("alpha = [0.5, 1.0, 2.0, 4.0]", 'alpha = {start = 1, stop = 2}'), "grid.alpha"),
    (lambda s: s.replace('kind = "solve"', 'kind = "nonsense"'), "compute.kind"),
    (lambda s: s.replace('quadrature = "gh:8"', 'quadrature = "gh:8"\ntoll = 1e-8'), "compute.toll"),
    (lambda s: s.replace('quadrature = "gh:8"', 'quadrature = "gh:8"\ntol = 1.0'), "compute.tol"),
    (lambda s: s.replace('branches = ["centered"]', 'branches = ["semantic"]'), "compute.branches"),
    (lambda s: s.replace("lam = [0.01, 0.1, 1.0]", "lam = [0.01, -1.0]"), "lam"),
    (lambda s: s.replace("lam = [0.01, 0.1, 1.0]", "omega = [0.1, 0.2]"), "grid.omega"),
    (lambda s: s.replace("alpha = [0.5, 1.0, 2.0, 4.0]", "alpha = [-0.5, 1.0]"), "alpha"),
    (lambda s: s.replace('axis = "alpha"', 'axis = "Delta"'), "warm_start.axis"),
    (lambda s: s.replace("chunk = 2", "chunk = 0"), "warm_start.chunk"),
    (lambda s: s.replace("Delta = 0.25", "Delta = 0.25\nlam = 0.1"), "grid.lam"),
    (lambda s: s + "\n[[x]]\n", "x"),
])
def test_bad_spec_is_one_line_naming_the_key(tmp_path, edit, name):
    res = run_cli("sweep", spec_file(tmp_path, edit(RIDGE)), "--out", tmp_path / "x.nc", "--jobs", "1")
    one_line(res, name)
    assert not (tmp_path / "x.nc").exists()


def test_thresholds_kind_refuses_alpha_axis(tmp_path):
    text = 'model = "attention"\n[grid]\nalpha = [1.0, 2.0]\n[compute]\nkind = "thresholds"\n'
    with pytest.raises(ParameterError, match="grid.alpha"):
        prepare(load_spec(spec_file(tmp_path, text)))


@pytest.mark.parametrize("out,name", [("x.txt", "out"), ("missing/dir/x.nc", "out")])
def test_bad_output_refused_before_work(tmp_path, out, name):
    one_line(run_cli("sweep", spec_file(tmp_path), "--out", tmp_path / out, "--jobs", "1"), name)


def test_jobs_and_scheduler_together_refused(tmp_path):
    one_line(run_cli("sweep", spec_file(tmp_path), "--out", tmp_path / "x.nc", "--jobs", "2", "--scheduler",
                     "local:2"), "jobs")


@pytest.mark.parametrize("value", ["local:0", "local:x", "not an address", "tcp://host:port:9"])
def test_malformed_scheduler_refused(value):
    with pytest.raises(ParameterError, match="scheduler"):
        resolve_scheduler(value)


# --------------------------------------------------------------------------- the executor layer
def _square(x):
    return x * x


def _fail():
    raise ValueError("boom")


def test_inline_executor_is_an_executor():
    ex = InlineExecutor()
    assert isinstance(ex, cf.Executor)
    assert ex.submit(_square, 3).result() == 9
    with pytest.raises(ValueError, match="boom"):
        ex.submit(_fail).result()


def _chain_task(item, done_sum):
    return item + done_sum


@pytest.mark.parametrize("jobs", [1, 2])
def test_run_chains_passes_each_chain_its_own_results(jobs):
    """Item k of a chain sees the results of items 0..k-1 of that chain only; Ready items run no task."""
    chains = [[1, 2, 3], [10, 20], [100]]
    seen = []

    def step(item, done):
        if item == 20:
            return Ready(-1)
        return _chain_task, item, sum(done)

    with open_executor(jobs) as ex:
        out = run_chains(ex, chains, step, on_result=lambda c, k, r, ready: seen.append((c, k, ready)))
    assert out == [[1, 3, 7], [10, -1], [100]]
    assert sorted(seen) == [(0, 0, False), (0, 1, False), (0, 2, False), (1, 0, False), (1, 1, True), (2, 0, False)]


def test_open_executor_checks_jobs():
    with pytest.raises(ParameterError, match="jobs"):
        with open_executor(0):
            pass


def test_chains_follow_the_spec_not_the_executor(tmp_path):
    spec, *_ = prepare(load_spec(spec_file(tmp_path)))
    chains = plan_chains(spec)
    # alpha (4 values) in runs of 2 for each of 3 lam: 6 chains, each walking from the middle outwards
    assert len(chains) == 6 and all(len(c) == 2 for c in chains)
    assert chains[0] == [(1, 0), (0, 0)] and chains[1] == [(2, 0), (3, 0)]
    assert sorted(i for c in chains for i in c) == sorted(spec.indices())


# --------------------------------------------------------------------------- runs and the dataset
@pytest.fixture(scope="module")
def ridge_reference(tmp_path_factory):
    """The ridge sweep in this process, no cache."""
    tmp = tmp_path_factory.mktemp("ridge")
    return run_sweep(load_spec(spec_file(tmp))).dataset()


def test_ridge_dataset_labelled_and_correct(ridge_reference, ridge):
    ds = ridge_reference
    assert dict(ds.sizes) == {"alpha": 4, "lam": 3, "branch": 1}
    assert list(ds.branch.values) == ["centered"]
    assert bool(ds.converged.all()) and not ds.error.values.any()
    for name in ("q_1", "theta_1", "V_1", "eps_g", "eps_g_error", "phi", "train_loss", "iterations"):
        assert name in ds.data_vars
    assert "m_1" not in ds.data_vars  # ridge's data have no mean: no m family
    # the dataset holds what the solver gives at that point (closed-form ridge checks live in test_ridge.py)
    from replica.numeric.solver import Solver

    fp = Solver(ridge, {"Delta": 0.25, "lam": 0.1}, "centered", rule=None, tol=1e-8).solve_best(2.0)
    got = ds.eps_g.sel(alpha=2.0, lam=0.1, branch="centered").item()
    assert abs(got - fp.eps_g) < 1e-6 * fp.eps_g
    assert ds.attrs["model"] == "ridge" and ds.attrs["model_source_hash"] == ridge.SOURCE_HASH
    assert ds.attrs["model_generator_version"] == ridge.stamp.version and ridge.SOURCE_HASH
    assert ds.attrs["model_stamp"].startswith("replica-artifact: version=")
    import replica

    assert ds.attrs["replica_version"] == replica.__version__
    assert 'kind = "solve"' in ds.attrs["spec"]
    assert strict_json(ds.attrs["spec_json"])["grid"]["lam"] == [0.01, 0.1, 1.0]


def test_local_processes_give_the_same_bits(tmp_path, ridge_reference):
    ds = run_sweep(load_spec(spec_file(tmp_path)), jobs=2).dataset()
    assert ds.identical(ridge_reference)


def test_rerun_reads_every_point_from_the_cache(tmp_path, ridge_reference):
    cache = PointCache(tmp_path / "cache")
    spec = load_spec(spec_file(tmp_path))
    first = run_sweep(spec, cache=cache)
    assert (first.computed, first.cached) == (12, 0)
    again = run_sweep(spec, cache=PointCache(tmp_path / "cache"))
    assert (again.computed, again.cached) == (0, 12)
    assert again.dataset().identical(ridge_reference) and first.dataset().identical(ridge_reference)


def test_resumed_chain_gives_the_same_bits(tmp_path, ridge_reference):
    """Half the points cached (as an interrupted run leaves them): the rest is computed from the
    cached neighbours' states, and the dataset equals an uninterrupted run's."""
    cache = PointCache(tmp_path / "cache")
    spec = load_spec(spec_file(tmp_path))
    run_sweep(spec, cache=cache)
    files = sorted((tmp_path / "cache" / "points" / "sweep-ridge").rglob("*.json"))
    assert len(files) == 12
    removed = 0
    for f in files:  # drop the records of the second point of each chain
        rec = json.loads(f.read_text())
        if rec["description"]["after"] is not None:
            f.unlink()
            removed += 1
    assert removed == 6
    r = run_sweep(spec, cache=PointCache(tmp_path / "cache"))
    assert (r.computed, r.cached) == (6, 6)
    assert r.dataset().identical(ridge_reference)


def test_files_round_trip(tmp_path, ridge_reference):
    nc = write_dataset(ridge_reference, tmp_path / "s.nc")
    assert open_sweep(nc).identical(ridge_reference)
    csv = write_dataset(ridge_reference, tmp_path / "s.csv")
    import pandas as pd

    df = pd.read_csv(csv)
    assert len(df) == 12 and {"alpha", "lam", "branch", "eps_g", "converged"} <= set(df.columns)
    row = df[(df.alpha == 2.0) & (df.lam == 0.1)].iloc[0]
    assert row.eps_g == ridge_reference.eps_g.sel(alpha=2.0, lam=0.1, branch="centered").item()


def test_zarr_round_trip_and_overwrite(tmp_path, ridge_reference):
    """Zarr (the sweep extra installs zarr): the store opens identical, attributes included, and a
    second write replaces the first store whole."""
    z = write_dataset(ridge_reference, tmp_path / "s.zarr")
    assert z.is_dir() and open_sweep(z).identical(ridge_reference)
    write_dataset(ridge_reference.isel(alpha=slice(0, 2)), z)
    assert open_sweep(z).identical(ridge_reference.isel(alpha=slice(0, 2)))


def test_failed_point_is_nan_with_its_message(tmp_path):
    """A point that cannot converge (max_iter 1) is NaN in the dataset, its message in ``notes``,
    ``converged`` false; the sweep goes on."""
    text = RIDGE.replace('quadrature = "gh:8"', 'quadrature = "gh:8"\nmax_iter = 1')
    r = run_sweep(load_spec(spec_file(tmp_path, text)))
    ds = r.dataset()
    assert len(r.failed) == 12
    assert np.isnan(ds.eps_g.values).all() and not ds.converged.values.any()
    assert all("iterations" in n for n in ds.notes.values.ravel())


def test_cli_writes_dataset_csv_and_strict_json(tmp_path, ridge_reference):
    res = run_cli("sweep", spec_file(tmp_path), "--out", tmp_path / "r.nc", "--csv", tmp_path / "r.csv", "--jobs",
                  "2", "--cache", tmp_path / "cache", "--json")
    assert res.returncode == 0, res.stderr
    summary = strict_json(res.stdout)
    assert summary["points"] == 12 and summary["computed"] == 12 and summary["failed"] == 0
    assert open_sweep(tmp_path / "r.nc").identical(ridge_reference)
    assert (tmp_path / "r.csv").is_file()
    assert "12 points (12 computed" in res.stderr
    res = run_cli("sweep", spec_file(tmp_path), "--out", tmp_path / "r.nc", "--jobs", "1", "--cache",
                  tmp_path / "cache", "--json")
    assert strict_json(res.stdout)["cached"] == 12


def test_dry_run_prints_the_plan(tmp_path):
    res = run_cli("sweep", spec_file(tmp_path), "--out", tmp_path / "r.nc", "--dry-run", "--json", "--jobs", "1")
    plan = strict_json(res.stdout)
    assert plan["points"] == 12 and plan["chains"] == 6 and plan["warm_axis"] == "alpha"
    assert not (tmp_path / "r.nc").exists()


def _records(cache: Path) -> list[Path]:
    return [p for p in (cache / "points" / "sweep-ridge").rglob("*.json") if not p.name.startswith(".")]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process checks read /proc (Linux)")
@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_interrupted_sweep_resumes(tmp_path, sig, status):
    """Killed mid-sweep: one line, 130/143, no worker left; the rerun computes only what is
    missing, and the dataset equals an uninterrupted run's."""
    text = RIDGE.replace("alpha = [0.5, 1.0, 2.0, 4.0]",
                         'alpha = {start = 0.3, stop = 5.0, num = 40}').replace("chunk = 2", "chunk = 5")
    spec = spec_file(tmp_path, text)
    cache = tmp_path / "cache"
    interrupt_leaves_no_worker(("sweep", spec, "--out", tmp_path / "r.nc", "--jobs", "2", "--cache", cache), sig,
                               status, ready=lambda: len(_records(cache)) >= 3, poll=0.02)
    done = len(_records(cache))
    assert 3 <= done < 120
    res = run_cli("sweep", spec, "--out", tmp_path / "r.nc", "--jobs", "2", "--cache", cache, "--json")
    assert res.returncode == 0, res.stderr
    summary = strict_json(res.stdout)
    assert summary["cached"] == done and summary["computed"] == 120 - done
    reference = run_sweep(load_spec(spec)).dataset()
    assert open_sweep(tmp_path / "r.nc").identical(reference)


# --------------------------------------------------------------------------- other kinds
def test_simulate_kind_runs_the_glm_simulator(tmp_path):
    text = """
model = "ridge"
[parameters]
Delta = 0.25
lam = 0.1
[grid]
alpha = [1.0, 2.0]
[compute]
kind = "simulate"
simulator = "glm"
d = 60
seeds = 3
n_test = 2000
"""
    ds = run_sweep(load_spec(spec_file(tmp_path, text)), jobs=2).dataset()
    assert dict(ds.sizes) == {"alpha": 2}
    assert bool(ds.converged.all())
    for name in ("q", "theta", "test_mse", "q_error", "theta_error"):
        assert np.isfinite(ds[name].values).all(), name
    # the dataset holds the simulator's own numbers
    from numerics.glm import run_glm

    r = run_glm("ridge", 2.0, 60, {"Delta": 0.25, "lam": 0.1}, 3, 0, 2000)
    assert ds.q.sel(alpha=2.0).item() == r["mean"]["q"] and ds.q_error.sel(alpha=2.0).item() == r["se"]["q"]


def test_simulate_kind_checks_points_before_running(tmp_path):
    text = ('model = "ridge"\n[grid]\nalpha = [1.0]\nlam = [0.0]\n[compute]\nkind = "simulate"\n'
            'simulator = "glm"\nd = 50\n')
    with pytest.raises(ParameterError, match="simulate"):
        prepare(load_spec(spec_file(tmp_path, text)))


def test_a_spec_names_only_registered_simulators(tmp_path):
    """``simulator = "os:getcwd"`` was imported and called (a traceback from inside the worker, after
    the sweep had started): a spec now names a registered simulator (replica.simulators) or is
    refused in one line, exit 2, before any point runs."""
    spec = spec_file(tmp_path, 'model = "ridge"\n[grid]\nalpha = [1.0]\n[compute]\nkind = "simulate"\n'
                               'simulator = "os:getcwd"\n')
    res = run_cli("sweep", spec, "--out", tmp_path / "o.csv", "--quiet")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        "replica sweep: error: compute.simulator: 'os:getcwd' is not a registered simulator; "
        "registered: ['attention', 'glm', 'linear']"]
    assert not (tmp_path / "o.csv").exists()


def test_thresholds_kind_equals_thresholds_sweep(tmp_path, attention):
    """The sweep's thresholds kind along omega is the fast path of replica.phase, seeded the same
    way: one chain over three omega gives the numbers of thresholds_sweep with one run."""
    from replica.phase import SolverSettings, thresholds_sweep

    ds = run_sweep(load_spec(spec_file(tmp_path, THRESHOLDS_3_OMEGA))).dataset()
    rs = thresholds_sweep(attention, "omega", [0.2, 0.3, 0.4], settings=SolverSettings(rule="gh:8", tol=1e-7),
                          alpha_max=3.0, xtol=1e-3)
    assert list(ds.alpha_c.values) == [r.alpha_c.value for r in rs]
    assert list(ds.alpha_l.values) == [r.alpha_l.value for r in rs]
    assert list(ds.alpha_c_status.values) == ["root"] * 3
    assert ds.attrs["model_source_hash"] == attention.SOURCE_HASH


# --------------------------------------------------------------------------- plots
def test_heatmap_and_zero_contour(ridge_reference, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from replica.sweep.plots import heatmap, zero_contour

    ax = heatmap(ridge_reference.eps_g, "alpha", "lam", branch="centered")
    mesh = ax.collections[0]
    assert mesh.get_array().size == 12
    zero_contour(ridge_reference.eps_g - 0.3, "alpha", "lam", ax=ax, label="eps_g = 0.3")
    assert len(ax.collections) >= 2
    ax.figure.savefig(tmp_path / "h.png")
    with pytest.raises(ValueError, match="2-D slice"):
        heatmap(ridge_reference.eps_g.isel(lam=0), "alpha", "lam")

"""``python -m numerics.simulate experiments``: the command that regenerates the histogram and value-matrix
figures (issue 17). The quick run is in the slow suite (about a CPU-minute); input errors are fast."""
from __future__ import annotations

import csv
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is not installed (extra 'sim')")

CMD = [sys.executable, "-m", "numerics.simulate", "experiments"]


@pytest.mark.parametrize("args, name", [
    (["--only", "figures"], "only"),
    (["--omegas", "1.5"], "omegas"),
    (["--omegas", "0.33"], "omegas"),  # not on the theory grid of the committed phase diagram
    (["--seeds", "1"], "seeds"),
    (["--d", "0"], "d"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, name):
    out = subprocess.run(CMD + ["--out", str(tmp_path), "--only", "value", *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and name in out.stderr, out.stderr


def test_missing_output_directory_is_refused_before_any_work(tmp_path):
    out = subprocess.run(CMD + ["--out", str(tmp_path / "no" / "such" / "dir"), "--quick"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "out" in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "no").exists()


def test_sigterm_stops_with_one_line_and_status_143(tmp_path):
    import signal
    import time

    proc = subprocess.Popen(CMD + ["--out", str(tmp_path), "--quick", "--only", "value", "--omegas", "0.3", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # imports done, first GD runs under way
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    lines = [ln for ln in err.strip().splitlines() if "Warning" not in ln and not ln.startswith("  ")]
    assert len(lines) == 1 and "interrupted (SIGTERM)" in lines[0], err


@pytest.mark.slow
def test_quick_run_writes_every_figure_and_resumes(tmp_path):
    args = CMD + ["--out", str(tmp_path), "--quick", "--omegas", "0.3", "--seeds", "2", "--quiet"]
    first = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    assert first.returncode == 0, first.stderr
    for f in ("histogram_attention_maps.png", "histogram_attention_maps.csv", "histogram_summary.csv",
              "value_matrix_transition.png", "value_matrix_transition.csv", "value_matrix_runs.csv"):
        assert (tmp_path / f).stat().st_size > 0, f
    rows = list(csv.DictReader(open(tmp_path / "histogram_summary.csv")))
    assert {(r["init"], r["stage"]) for r in rows} == {(i, s) for i in ("positional", "semantic")
                                                      for s in ("frozen", "after_sgd")}
    runs = (tmp_path / "value_matrix_runs.csv").read_text()
    # 2 models x 3 alphas x 2 seeds x 2 inits, one header
    assert len(runs.strip().splitlines()) == 1 + 24
    again = subprocess.run(CMD + ["--out", str(tmp_path), "--quick", "--only", "value", "--omegas", "0.3",
                                  "--seeds", "2"], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "semantic] ..." not in again.stderr  # every run came from the cache
    assert (tmp_path / "value_matrix_runs.csv").read_text() == runs

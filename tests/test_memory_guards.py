"""A simulation whose training set cannot fit is refused before anything is drawn (numerics.simulate.check_memory).

``numerics.glm`` / ``numerics.gamp --d 1000000`` and sweeps of kind ``simulate`` raised MemoryError,
and ``replica check`` compared its need with the machine's physical memory only, ignoring the
process's own limits (``ulimit -v``, a container's cgroup). Every command here runs in a fresh
process and must answer with one line naming ``d``, exit 2.
"""
from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from tests.support import ROOT, spec_file


def _run(*args: str, limit: int | None = None) -> subprocess.CompletedProcess:
    def cap():  # in the child: an address-space limit, as `ulimit -v` sets it
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          preexec_fn=cap if limit else None)


def _one_line(res: subprocess.CompletedProcess, prog: str) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith(prog)]
    assert res.returncode == 2 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    return lines[0]


@pytest.mark.parametrize("module", ["numerics.glm", "numerics.gamp"])
def test_a_million_dimensions_are_refused_before_drawing(module):
    line = _one_line(_run(module, "ridge" if module.endswith("glm") else "logistic", "--alpha", "2", "--d",
                          "1000000"), f"python -m {module}: error:")
    assert "d=1000000 with alpha=2.0 needs at least 43.7 TiB" in line and "use a smaller d" in line


def test_a_simulate_sweep_is_refused_before_its_first_point(tmp_path):
    spec = spec_file(tmp_path, 'model = "attention"\n[parameters]\nomega = 0.3\n[grid]\nalpha = [1.0]\n'
                               '[compute]\nkind = "simulate"\nsimulator = "attention"\nd = 1000000\nseeds = 1\n')
    line = _one_line(_run("replica", "sweep", str(spec), "--no-cache", "--out", str(tmp_path / "s.csv")),
                     "replica sweep: error:")
    assert "needs at least" in line and not (tmp_path / "s.csv").exists()


def test_the_guard_counts_the_process_address_space_limit():
    """d = 12000 at alpha = 2 needs ~6.4 GiB for its training set: over a 4 GiB ``ulimit -v``, which
    the refusal counts (the room it reports is within the limit, whatever the machine's memory)."""
    line = _one_line(_run("replica", "check", "ridge", "--alpha", "2", "--d", "12000", "--seeds", "2",
                          "--no-replicon", "--no-theory-bars", limit=4 << 30), "replica check: error:")
    assert line.startswith("replica check: error: d: d=12000 with alpha=2.0 needs at least")
    room = line.split("this process can take ")[1].split(";")[0]  # e.g. "3.4 GiB": within the limit
    assert room.endswith(("MiB", "GiB")) and (room.endswith("MiB") or float(room.split()[0]) <= 4.0), line

"""The notebooks in ``notebooks/`` (jupytext percent format) parse and run top to bottom.

Each notebook is executed as a script, from the repository root, the way its first cell says to
run it, with ``REPLICA_NOTEBOOK_QUICK=1`` (reduced resolution: coarse quadrature, few ``omega``,
small simulations) and ``MPLBACKEND=Agg`` (no display). Figures go to a temporary directory
(``REPLICA_NOTEBOOK_OUT``). A notebook whose quick run takes more than about 40 s of one core is
``@pytest.mark.slow``; measured quick run times are next to each name.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

#: notebook -> (slow?, a line its stdout must contain, figures it must write into REPLICA_NOTEBOOK_OUT)
EXPECTED = {
    # ~30 s of CPU, 36-51 s on the shared machine: four phase points (two with full curves),
    # a twelve-run simulation sweep
    "01_paper_reproduction.py": (True, "alpha_c = ", ("fig2_middle_summary_statistics.png",
                                                      "fig2_right_test_error.png",
                                                      "fig3_centre_training_loss.png",
                                                      "fig3_right_phase_diagram.png")),
    # ~30 s of CPU, 32-45 s on the shared machine: four derivations (two of them 6-D), branch
    # continuation, a two-seed simulation
    "02_untied_and_rank2.py": (True, "alpha_c: tied", ("untied_vs_tied_transition.png",)),
    # ~17 s of CPU, 25-31 s on the shared machine: derivation, generation, solves, two small
    # sizes of simulation
    "03_your_architecture.py": (False, "global minimum on the semantic branch", ()),
    # 100 s wall on the loaded shared machine (28 s CPU in the notebook's process, the rest in
    # sweep workers): two sweeps through the command line, one of them on a Dask LocalCluster
    "04_sweeps.py": (True, "alpha_c over (omega, sigma):", ("eps_minus_baseline.png", "thresholds_omega_sigma.png")),
}


def test_every_notebook_is_tested():
    """A new notebook must be added to EXPECTED (with its quick run time), not silently skipped."""
    assert sorted(p.name for p in NOTEBOOKS.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_is_valid_jupytext(name):
    """Parses as a percent-format notebook whose first cell is the markdown introduction that
    documents the quick mode, and every code cell compiles."""
    jupytext = pytest.importorskip("jupytext")
    nb = jupytext.read(NOTEBOOKS / name)
    assert nb.metadata["jupytext"]["text_representation"]["format_name"] == "percent"
    assert nb.cells and nb.cells[0].cell_type == "markdown"
    assert "REPLICA_NOTEBOOK_QUICK" in nb.cells[0].source
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    for i, cell in enumerate(code):
        compile(cell.source, f"{name}, code cell {i + 1}", "exec")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if slow else n
                                  for n, (slow, _, _) in sorted(EXPECTED.items())])
def test_notebook_runs_quick(name, tmp_path):
    """``REPLICA_NOTEBOOK_QUICK=1 python notebooks/NAME`` exits 0, prints its result, writes its figures."""
    _, marker, figures = EXPECTED[name]
    env = dict(os.environ, REPLICA_NOTEBOOK_QUICK="1", MPLBACKEND="Agg", REPLICA_NOTEBOOK_OUT=str(tmp_path))
    res = subprocess.run([sys.executable, str(NOTEBOOKS / name)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, f"{name} exited with {res.returncode}; stderr tail:\n{res.stderr[-4000:]}"
    assert marker in res.stdout, f"{name}: {marker!r} not in the output; stdout tail:\n{res.stdout[-2000:]}"
    missing = [f for f in figures if not (tmp_path / f).is_file()]
    assert not missing, f"{name} did not write {missing} into {tmp_path}"

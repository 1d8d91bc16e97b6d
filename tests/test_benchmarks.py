"""The notebook-style baseline of the benchmarks and the generated solver compute the same map.

``benchmarks/notebook_baseline.py`` is typed by hand from docs/explanation/theory.md §4–§6 (per-node scipy
minimisation, Python loops); agreement with the generated module on the same nodes checks
the whole pipeline (derivation, code generation, symmetry folding, prox) independently.
No timing here: timings live in ``python -m benchmarks``.
"""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.notebook_baseline import fixed_point_update
from replica.applications.attention.paper import PAPER_A
from replica.numeric.quadrature import gauss_hermite
from replica.numeric.solver import Solver

PARAMS = dict(omega=0.3, sigma=0.5, lam=0.01, A=[list(row) for row in PAPER_A])


@pytest.mark.parametrize("branch, x, alpha", [
    ("semantic", [0.1148165193, 12.66950154, 0.0, 0.1581531493], 2.0),
    ("positional", [0.030515188, 20.308367, 0.22169809, 0.0], 0.5),
    ("free", [0.2, 3.0, 0.1, 0.12], 1.0),
])
def test_notebook_baseline_matches_generated_map(attention, branch, x, alpha):
    rule = gauss_hermite(4, 3)
    x = np.array(x)
    ref, psi = fixed_point_update(x, alpha, PARAMS, rule.nodes, rule.weights,
                                  branch="free" if branch == "free" else branch)
    s = Solver(attention, {"omega": 0.3}, None if branch == "free" else branch, rule=rule, backend="numpy")
    out = s.evaluate_map(x, alpha, use_warm=False)
    np.testing.assert_allclose(out.x_new, ref, rtol=1e-6, atol=1e-12)
    assert out.psi_y == pytest.approx(psi, rel=1e-9)

"""Work that cannot finish is refused before it starts, in one line, exit 2.

``--entropic-quadrature aligned:100000`` had no node budget (gh, sobol and smolyak have one) and
ran inside LAPACK for minutes, deaf to SIGINT and SIGTERM; the command now runs in a subprocess
under a timeout far above its own time, so a regression fails instead of hanging the suite.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from replica.errors import ParameterError
from replica.numeric.integrators import MAX_ALIGNED_ORDER, AlignedEntropicRule

ROOT = Path(__file__).resolve().parent.parent


def test_an_aligned_rule_over_its_budget_is_refused_at_once():
    res = subprocess.run([sys.executable, "-m", "replica", "solve", "lasso", "--alpha", "1",
                          "--entropic-quadrature", "aligned:100000"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("replica solve:")]
    assert res.returncode == 2 and res.stdout == "", res.stderr
    assert len(lines) == 1 and f"entropic-quadrature: aligned:100000: at most {MAX_ALIGNED_ORDER}" in lines[0]


def test_refining_an_aligned_rule_stays_within_the_budget():
    with pytest.raises(ParameterError, match="entropic_rule"):
        AlignedEntropicRule(1, MAX_ALIGNED_ORDER + 1)
    rule = AlignedEntropicRule(1, MAX_ALIGNED_ORDER - 1)
    assert rule.refined().order == rule.refined().refined().order == MAX_ALIGNED_ORDER


HUGE = '''
from replica import L2, Model, TokenStatistics, fields, parameter, teacher_fields

h, hs = fields(1000, 1000), teacher_fields(1000, 1)
lam = parameter("lam")
model = Model(name="huge", description="a million fields", h=h, hstar=hs, loss=(h[0, 0] - hs[0, 0]) ** 2,
              data=TokenStatistics.isotropic(1000, 1000), regularizer=L2(lam), parameters={lam: 0.1})
'''


def test_absurd_declared_sizes_are_refused_before_deriving(tmp_path):
    """``fields(1000, 1000)`` used to generate silently for minutes; the budget is checked before
    a symbol is made."""
    path = tmp_path / "huge.py"
    path.write_text(HUGE)
    res = subprocess.run([sys.executable, "-m", "replica", "solve", str(path), "--alpha", "1"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("replica solve:")]
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert "fields: L x r = 1000 x 1000 = 1,000,000 fields, over the budget of 16" in lines[0]


def test_the_field_budget_can_be_raised(monkeypatch):
    from replica.errors import DeclarationError
    from replica.symbolic.symbols import MAX_FIELDS, fields

    with pytest.raises(DeclarationError, match="budget"):
        fields(MAX_FIELDS + 1, 1)
    monkeypatch.setenv("REPLICA_MAX_FIELDS", str(MAX_FIELDS + 1))
    assert fields(MAX_FIELDS + 1, 1).shape == (MAX_FIELDS + 1, 1)

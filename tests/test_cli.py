"""The ``replica`` command line: contract of ``solve --json``, help, and one-line errors."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "replica", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_help_lists_subcommands():
    res = run("--help")
    assert res.returncode == 0
    for cmd in ("models", "derive", "solve"):
        assert cmd in res.stdout


def test_models_lists_attention():
    res = run("models")
    assert res.returncode == 0 and "attention_tied" in res.stdout and "alias: attention" in res.stdout


def test_solve_json_contract():
    res = run("solve", "attention", "--omega", "0.3", "--alpha", "2", "--branch", "semantic",
              "--quadrature", "gh:8", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    for key in ("q", "m", "theta", "V", "eps_g", "train_loss", "phi", "converged", "iterations", "residual",
                "qhat", "Vhat", "mhat", "thetahat"):
        assert key in out, key
    assert out["converged"] is True and out["m"] == 0.0 and out["theta"] > 0
    assert out["train_loss"] == pytest.approx(-out["phi"])


def test_solve_table_output():
    res = run("solve", "attention", "--omega", "0.3", "--alpha", "1", "--branch", "positional",
              "--quadrature", "gh:6")
    assert res.returncode == 0, res.stderr
    assert "eps_g" in res.stdout and "converged" in res.stdout


@pytest.mark.parametrize("args,name", [
    (["--alpha", "-1"], "alpha"),
    (["--alpha", "1", "--lam", "-0.5"], "lam"),
    (["--alpha", "1", "--omega", "1.2"], "omega"),
    (["--alpha", "1", "--A", "0.6,0.4,0.4"], "A"),
    (["--alpha", "1", "--A", "0.6,0.6,0.4,0.6"], "A"),
    (["--alpha", "1", "--branch", "sideways"], "branch"),
])
def test_bad_input_one_line_error(args, name):
    res = run("solve", "attention", *args, "--quadrature", "gh:4")
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.strip().splitlines() if ln]
    assert len(lines) == 1, res.stderr
    assert name in lines[0]


def test_unknown_model():
    res = run("solve", "nonexistent", "--alpha", "1")
    assert res.returncode != 0 and "model" in res.stderr

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


# --------------------------------------------------------------------------- a model's own flags, plug-ins
def _help(capsys, *argv) -> str:
    from replica.cli import main

    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_a_models_help_lists_its_own_parameters(capsys):
    """``--help`` after a model lists that model's parameters (a matrix as one flag) with their
    declared defaults, and no other model's: ridge has no --omega or --A."""
    ridge = _help(capsys, "solve", "ridge", "--help")
    assert "--Delta VALUE" in ridge and "--lam VALUE" in ridge and "(default 0.25)" in ridge
    assert "--omega" not in ridge and "--A " not in ridge and "--sigma" not in ridge
    attention = _help(capsys, "phase", "attention", "--help")
    assert "--omega VALUE" in attention and "--A X11,X12,..." in attention and "2x2 = 4" in attention
    assert "positionality of the target" in attention        # the attention application's words
    bare = _help(capsys, "solve", "--help")
    assert "--param NAME=VALUE" in bare and "--lam" not in bare and "--omega" not in bare


def test_parameter_flags_from_metadata():
    """Matrix parameters are read from their entries' names; the model is found before parsing
    (a known option's value and an unknown flag's value are skipped)."""
    import argparse

    from replica.numeric.parameter_flags import matrix_parameters, peek_positional

    assert matrix_parameters(("omega", "A_11", "A_12", "A_21", "A_22", "sigma_1a")) == {
        "A": (2, 2, ["A_11", "A_12", "A_21", "A_22"])}
    assert matrix_parameters(("A_11", "A_22")) == {}          # not a full grid: two scalars
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--alpha", type=float)
    p.add_argument("--json", action="store_true")
    assert peek_positional(p, ["--alpha", "2", "--omega", "0.3", "--json", "ridge"]) == "ridge"
    assert peek_positional(p, ["--alpha=2", "ridge", "--lam", "0.1"]) == "ridge"
    assert peek_positional(p, ["--json"]) is None


def test_applications_are_found_as_plugins():
    """The attention study registers itself; the generic figures command draws what is registered."""
    from replica.applications import applications, parameter_help

    apps = {a.name: a for a in applications()}
    assert "attention" in apps and callable(apps["attention"].figure_function())
    assert parameter_help()["omega"].startswith("positionality")


def test_verbose_prints_the_iterations_of_the_cold_solve(capsys):
    """``--verbose`` printed no iterations: the cold starts run on a cheaper scout solver, which
    was built quiet, and the working rule's re-solve from its answer takes one iteration."""
    from replica.cli import main

    assert main(["solve", "ridge", "--alpha", "1", "--verbose", "--no-replicon"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("  solve at alpha = 1 on gauss-hermite")
    iterations = [ln for ln in err if ln.startswith("  iter ")]
    assert len(iterations) >= 5 and iterations[0].startswith("  iter    1  residual")


def test_an_interrupted_solve_does_not_promise_a_resume():
    """``replica solve`` caches nothing: "rerun to resume" was a false promise."""
    import signal

    p = subprocess.Popen([sys.executable, "-m", "replica", "solve", "attention", "--alpha", "2", "--verbose"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stderr:  # an iteration is running: the solve has started
            if line.startswith("  iter "):
                break
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    last = err.strip().splitlines()[-1]
    assert p.returncode == 143 and last == "replica solve: interrupted (SIGTERM); nothing was cached: a rerun starts again"


@pytest.mark.parametrize("args, why", [
    (["solve", "ridge", "--alpha", "2", "--alpha", "3"], "argument --alpha: given twice (2.0 and 3.0)"),
    (["solve", "ridge", "--alpha", "2", "--lam", "0.1", "--lam", "0.2"], "argument --lam: given twice"),
    (["phase", "ridge", "--no-cache", "--cache", "cache-dir"], "argument --cache: not allowed with argument --no-cache"),
    (["derive", "ridge", "--latex", "same.tex", "--markdown", "same.tex"], "is also given as --latex"),
], ids=["alpha-twice", "model-flag-twice", "cache-and-no-cache", "latex-is-markdown"])
def test_contradictory_flags_are_one_line_errors(tmp_path, monkeypatch, args, why):
    """They were accepted silently: the last --alpha won, --no-cache beat --cache, and the Markdown
    export overwrote the LaTeX one."""
    from tests.test_hardening import cli

    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(*args)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and why in err, err
    assert not list(tmp_path.iterdir())

"""The ``replica`` command line: contract of ``solve --json``, help, and one-line errors."""
from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from tests.support import run_cli as run, spawn

ROOT = Path(__file__).resolve().parent.parent




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

    from replica.cli.flags import matrix_parameters, peek_positional

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


# --------------------------------------------------------------------------- loading the model named on the line
#: the ridge declaration without its ``from __future__`` line, so that a test may put code before it
RIDGE = (ROOT / "derivations" / "ridge.py").read_text().replace("from __future__ import annotations\n", "")


@pytest.mark.parametrize("sig,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_while_the_model_loads_is_one_line(tmp_path, sig, status):
    """Ctrl-C or SIGTERM while a user's model loads (here: while its declaration is imported for the
    first generation) printed a traceback: the parser loaded the model outside the command's signal
    handling. Loading is now a step of the command: one line, exit 130/143, no process left."""
    import os
    import time

    marker = tmp_path / "loading"
    decl = tmp_path / "slow_ridge.py"
    decl.write_text(f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('x')\ntime.sleep(60)\n" + RIDGE)
    env = dict(os.environ, REPLICA_CACHE=str(tmp_path / "cache"))  # its first use: generated, so imported
    p = spawn("solve", decl, "--alpha", "1", "--json", env=env,
              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None and not marker.exists():
            time.sleep(0.1)
        assert marker.exists() and p.poll() is None, "the declaration was never imported"
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    lines = [ln for ln in err.strip().splitlines() if ln.strip() and not ln.startswith("replica: generating")]
    assert p.returncode == status, err
    assert out == "" and "Traceback" not in err
    assert lines == [f"replica solve: interrupted ({signal.Signals(sig).name}) while loading the model"], err
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(p.pid)], capture_output=True, text=True).stdout
    assert children.split() == []


def test_a_model_that_prints_at_import_leaves_json_stdout_alone(tmp_path):
    """A declaration that prints when imported wrote into ``--json`` stdout (no longer JSON): what a
    declaration prints goes to stderr."""
    import os

    decl = tmp_path / "chatty_ridge.py"
    decl.write_text('print("hello from the declaration")\n' + RIDGE)
    env = dict(os.environ, REPLICA_CACHE=str(tmp_path / "cache"), REPLICA_BACKEND="numpy")
    res = run("solve", decl, "--alpha", "1", "--branch", "centered", "--quadrature", "gh:8", "--json", "--no-replicon",
              env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["converged"] is True
    assert "hello from the declaration" in res.stderr


def test_parsing_never_generates_code_before_the_other_flags_are_checked(tmp_path):
    """A bad flag of a command that takes a model's parameters is refused in one line before the
    model loads: no module is generated for a command line that cannot run."""
    import os

    decl = tmp_path / "unused_ridge.py"
    decl.write_text(RIDGE)
    env = dict(os.environ, REPLICA_CACHE=str(tmp_path / "cache"))
    res = run("solve", decl, "--alpha", "-1", env=env, timeout=300)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [res.stderr.strip()] and "alpha" in res.stderr
    assert "generating" not in res.stderr and not (tmp_path / "cache" / "generated").exists()

"""What the tests share: the one command-line harness (:func:`run`, :func:`run_cli`, :func:`cli`,
:func:`spawn`, :func:`run_without` -- every test that runs ``replica`` or a simulator's command
goes through these), spec files and the thresholds spec the sweep tests compare on, and process
checks for the interrupt tests (Linux ``/proc`` and ``ps``) and the one check of how an interrupted run
with workers ends (:func:`interrupt_leaves_no_worker`)."""
from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- the command-line harness
def run(*args, module: str = "replica", cwd: Path = ROOT, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` in a fresh process (default from the repository root), output captured
    as text; ``kw`` goes to :func:`subprocess.run` (``env=...``)."""
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, **kw)


def run_cli(*args, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    """``replica ARGS`` in a fresh process (:func:`run`)."""
    return run(*args, timeout=timeout, **kw)


def cli(*args) -> tuple[int, str, str]:
    """``replica ARGS`` in this process: (exit status, stdout, stderr)."""
    from replica.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as exc:  # argparse's own errors and --help
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def spawn(*args, module: str = "replica", cwd: Path = ROOT, **kw) -> subprocess.Popen:
    """``python -m MODULE ARGS`` started, not waited for (the interrupt tests signal it), pipes as text."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-m", module, *map(str, args)], cwd=cwd, text=True, **kw)


def run_without(package: str, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m <argv>`` with ``package`` made unimportable (as if not installed)."""
    code = (f"import runpy, sys; sys.modules[{package!r}] = None; sys.argv = {list(argv)!r}; "
            f"runpy.run_module(sys.argv[0], run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)

def ridge_spec(alpha: str, chunk: int) -> str:
    """A ridge sweep over alpha (``alpha``: the TOML of the axis) x three lambda on the centered
    branch, neighbours along alpha warm-starting each other in chains of ``chunk``."""
    return f"""
model = "ridge"
[parameters]
Delta = 0.25
[grid]
alpha = {alpha}
lam = [0.01, 0.1, 1.0]
[compute]
kind = "solve"
branches = ["centered"]
quadrature = "gh:8"
[warm_start]
axis = "alpha"
chunk = {chunk}
"""


#: alpha_c and alpha_l of the paper's model at three omega (coarse quadrature: a test, not a result)
THRESHOLDS_3_OMEGA = """
model = "attention"
[grid]
omega = [0.2, 0.3, 0.4]
[compute]
kind = "thresholds"
quadrature = "gh:8"
tol = 1e-7
alpha_max = 3.0
xtol = 1e-3
"""


def spec_file(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def alive(pid: int) -> bool:
    """Running (a zombie -- exited, not yet reaped -- counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def children(pid: int) -> list[int]:
    """The direct children of ``pid``."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, ...)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    below: dict[int, list[int]] = {}
    for line in out.splitlines():
        a, b = (int(v) for v in line.split())
        below.setdefault(b, []).append(a)
    found, todo = [], [pid]
    while todo:
        for c in below.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def interrupt_leaves_no_worker(args, sig: int, status: int, ready: Callable[[], bool], *, poll: float = 0.05,
                               start_timeout: float = 240) -> str:
    """Start ``replica ARGS`` (a run with a pool of two workers or more), wait until its workers are up and
    ``ready()`` holds (some work done), send ``sig``, and check how it ends: exit ``status``, a last line
    saying it was interrupted and that a rerun resumes, no traceback, and no worker left alive. Returns the
    run's standard error."""
    # SIGINT reaches the run as it would from a terminal, not ignored as in a background job
    p = spawn(*args, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        workers: list[int] = []
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline and p.poll() is None:
            workers = children(p.pid)
            if len(workers) >= 2 and ready():
                break
            time.sleep(poll)
        assert p.poll() is None and len(workers) >= 2, "the run ended or never started its workers"
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == status, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert "Traceback" not in err and "interrupted" in lines[-1] and "rerun to resume" in lines[-1], err
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(w) for w in workers):
        time.sleep(0.1)
    assert not any(alive(w) for w in workers), "a worker outlived its parent"
    return err

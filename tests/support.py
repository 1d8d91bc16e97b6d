"""Helpers shared by the sweep tests: the command line in a fresh process, spec files, the
thresholds spec both executors' tests compare on, and process checks for the interrupt tests
(Linux ``/proc`` and ``ps``)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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


def run_cli(*args, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    """``python -m replica ARGS`` from the repository root, output captured."""
    return subprocess.run([sys.executable, "-m", "replica", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, **kw)


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

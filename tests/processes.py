"""Process checks shared by the interrupt tests (Linux ``/proc`` and ``ps``): is a process still
running, and which processes did it start."""
from __future__ import annotations

import os
import subprocess


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

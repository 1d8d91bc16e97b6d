"""What every ``numerics`` command shares: the names of the informed starts and the way a command runs
(no torch import, so that a command can reject bad input before loading torch)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

__all__ = ["INITS", "run_cli"]

#: Initialisations of a student: along the teacher, along the first positional encoding, or random
#: (docs/explanation/theory.md §9; GAMP's starts, the attention study's students).
INITS: tuple[str, ...] = ("semantic", "positional", "random")


def run_cli(parser: Any, run: Callable[[Any, str], int], argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` with ``parser`` and return ``run(args, prog)``, with SIGTERM raising like
    Ctrl-C inside (``replica.runtime.workers.terminate_raises``), so that every ``numerics`` command can
    end an interrupted run with one line and status 130/143. A missing optional package (torch,
    scikit-learn: :data:`numerics.deps.INSTALL`) ends it with one line saying what to install, status 2."""
    from replica.runtime.workers import terminate_raises

    from .deps import missing_line

    args = parser.parse_args(argv)
    with terminate_raises():
        return missing_line(parser.prog, run, args, parser.prog)

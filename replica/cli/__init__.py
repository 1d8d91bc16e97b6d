"""The ``replica`` command line.

Subcommands live in :mod:`replica.cli.commands` (one module each with ``add_parser``);
every error derived from :class:`~replica.errors.ReplicaError` becomes a one-line
message naming the parameter and exit status 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from typing import Sequence

from ..errors import ReplicaError
from ..validation import given_strings
from ..runtime.workers import exit_status, interrupt_message, terminate_raises

#: subcommand modules, in the order ``--help`` lists them
COMMANDS = ("models", "derive", "generate", "solve", "phase", "figures", "sweep", "check")
#: subcommands that start no process and leave no thread working when they return: :func:`entry`
#: ends their process without the interpreter's teardown, whose finalisers of numba's compiled
#: kernels cost ~0.2 s (a tenth of ``replica solve`` at the paper's point)
QUICK_EXIT = ("models", "solve")

_RAN: list[str] = []


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (``replica solve: error: argument --alpha: ...``),
    exit status 2, like every other bad input; ``--help`` still shows the usage."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        """Every (sub)parser refuses its own flags given as empty strings
        (:func:`replica.validation.given_strings`): ``--out ""`` is not the default."""
        ns, extras = super().parse_known_args(args, namespace)
        try:
            given_strings(self._actions, ns)
        except ReplicaError as exc:
            self.error(str(exc))
        return ns, extras


def build_parser() -> argparse.ArgumentParser:
    """The ``replica`` argument parser with one sub-command per module of :mod:`replica.cli.commands`.
    A subcommand that takes a model's parameter flags gets them from :func:`parse`, once the model
    the command line names is loaded."""
    parser = _Parser(
        prog="replica",
        description="Replica-symmetric saddle-point equations from sympy models: derive them, export "
                    "LaTeX, generate numeric solvers, solve branches and phase diagrams.",
        epilog="Examples:\n"
               "  replica models\n"
               "  replica derive attention --latex attention.tex\n"
               "  replica solve attention --omega 0.3 --alpha 2 --branch semantic --json\n"
               "  replica phase attention --omega 0.3 --json\n"
               "  replica figures --out figures/\n"
               "  replica sweep grid.toml --jobs 2",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"replica.cli.commands.{name}")
        except ModuleNotFoundError as exc:  # a subcommand still being written
            if exc.name != f"replica.cli.commands.{name}":
                raise
            continue
        mod.add_parser(sub)
    parser._replica_commands = sub  # read by parse
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """The arguments of ``argv``. A subcommand that takes a model's parameter flags
    (:func:`replica.cli.commands.common.add_parameter_flags`) is parsed in three steps: every flag
    but the model's own is checked first, with the command's own checks that need no model
    (``check_args``; one line, exit 2, before any work); then the model the command line names is
    loaded, exactly once -- generating its module if the cache lacks it --; then its parameter flags
    are added and the whole line parsed. The model is handed to the command as
    ``args.generated_model`` (None where it names none). Parsing itself never generates code."""
    sub = parser._replica_commands
    p = sub.choices.get(argv[0]) if argv else None
    if p is None or not getattr(p, "_replica_model_flags", False):
        return parser.parse_args(argv)
    from .flags import peek_positional
    from .commands.common import add_model_flags

    rest = list(argv[1:])
    options = rest[:rest.index("--")] if "--" in rest else rest
    wants_help = any(a in ("-h", "--help") for a in options)
    if not wants_help:
        early, _ = parser.parse_known_args(argv)
        check = getattr(early, "check_args", None)
        if check is not None:
            check(early)
    name = peek_positional(p, rest)
    module = None
    if name is not None:
        from ..registry import load_module

        try:
            module = load_module(name)
        except ReplicaError:
            if not wants_help:  # the command cannot run without it: say why, in one line
                raise
    add_model_flags(p, module)  # only --param without a model (its --help says to name one)
    args = parser.parse_args(argv)
    args.generated_model = module
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``replica`` command line on ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    prog = f"replica {argv[0]}" if argv and argv[0] in COMMANDS else "replica"
    try:
        # loading (or generating) the model named on the command line is interruptible like the command
        with terminate_raises():
            args = parse(parser, argv)
    except ReplicaError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM while the model loads: nothing to resume
        print(interrupt_message(prog, exc).split(";")[0] + " while loading the model", file=sys.stderr)
        _RAN.append("interrupted")
        return exit_status(exc)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    prog = f"replica {args.command}"
    _RAN.append(args.command)
    try:
        with terminate_raises():  # SIGTERM ends like Ctrl-C: workers stopped, one line, no traceback
            return int(args.func(args) or 0)
    except ReplicaError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (replica.runtime.workers.Interrupted)
        cache = None
        if getattr(args, "no_cache", True) is False:
            from ..artifacts.cache import PointCache

            kept = PointCache(args.cache)
            cache = kept.root if kept.writable() else None
        message = interrupt_message(prog, exc, cache)
        if cache is None and hasattr(args, "no_cache"):  # say so rather than "rerun to resume"
            message = message.replace("rerun to resume", "nothing was cached: a rerun starts again")
        print(message, file=sys.stderr)
        _RAN.append("interrupted")
        return exit_status(exc)
    except OSError as exc:  # writing an output failed after the checks (disk full, removed directory)
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1


def entry() -> None:
    """The console entry point: :func:`main`, then the exit. After a :data:`QUICK_EXIT` command
    the streams are flushed and the ``atexit`` handlers run, then the process ends at once
    (``os._exit``) instead of tearing the interpreter down. An interrupted command (its workers
    stopped, its one line printed) ends at once too, without the teardown: a second signal
    during ``threading._shutdown`` (joining the worker pool's threads) printed a traceback."""
    code = main()
    if _RAN and _RAN[-1] == "interrupted":
        import os
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    if _RAN and _RAN[-1] in QUICK_EXIT:
        import atexit
        import os

        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed pipe: the normal exit reports it
            sys.exit(code)
        getattr(atexit, "_run_exitfuncs", lambda: None)()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()

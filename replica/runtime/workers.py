"""Worker processes that die with their parent, and interrupts that end in one line.

:func:`worker_pool` is the one place that starts worker processes (phase points and
thresholds along a parameter, :mod:`replica.phase`). It

* turns ``SIGTERM`` into :class:`Interrupted` in the parent (``SIGINT`` already raises
  :class:`KeyboardInterrupt`), so that ``kill`` runs the same clean-up as Ctrl-C;
* on any exception in the ``with`` block (an interrupt, an error in a task) terminates the
  workers, then kills those that do not exit within a second, instead of waiting for
  their running tasks (what :class:`~concurrent.futures.ProcessPoolExecutor` does on exit);
* makes every worker ignore ``SIGINT`` (the parent decides) and, on Linux, ask the kernel
  to kill it when its parent dies (``PR_SET_PDEATHSIG``), so that even a ``kill -9`` of
  the parent leaves no worker behind.

Finished points are already in the point cache (:mod:`replica.artifacts.cache` writes each one
atomically as soon as it is solved), so a rerun resumes where the interrupted run stopped.
:func:`interrupt_message` and :func:`exit_status` give the command line its one-line
message and exit status (130 for SIGINT, 143 for SIGTERM).
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import signal
import threading
from typing import Iterator

#: exit status of a process ended by a signal, as shells report it
SIGNAL_EXIT = 128


class Interrupted(KeyboardInterrupt):
    """The process received ``SIGTERM`` (or another terminating signal) while working.

    A :class:`KeyboardInterrupt`, so that ``except Exception`` blocks do not swallow it.
    """

    def __init__(self, signum: int = signal.SIGTERM):
        self.signum = int(signum)
        super().__init__(f"interrupted by {signal.Signals(self.signum).name}")


def exit_status(exc: BaseException) -> int:
    """130 for Ctrl-C (``SIGINT``), ``128 + signum`` for :class:`Interrupted`."""
    return SIGNAL_EXIT + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)


def interrupt_message(prog: str, exc: BaseException, cache_root: object | None = None) -> str:
    """``replica figures: interrupted (SIGTERM); rerun to resume (solved points are cached in DIR)``."""
    name = signal.Signals(exc.signum).name if isinstance(exc, Interrupted) else "SIGINT"
    where = f" (solved points are cached in {cache_root})" if cache_root else ""
    return f"{prog}: interrupted ({name}); rerun to resume{where}"


def _raise_interrupted(signum, frame):  # the SIGTERM handler of the parent
    raise Interrupted(signum)


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """Within the block, ``SIGTERM`` raises :class:`Interrupted` in the main thread.

    No-op outside the main thread or when a handler of this module is already installed
    (nested use); the previous handler is restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is _raise_interrupted:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _die_with_parent() -> None:
    """In a worker: ignore Ctrl-C, default SIGTERM, (Linux) be killed when the parent dies, and run
    the compiled averages on one thread (the pool's processes share the CPUs already)."""
    os.environ.setdefault("REPLICA_THREADS", "1")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's clean-up still applies
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    if hasattr(signal, "pthread_sigmask"):  # born with them blocked (worker_pool): now they act as set above
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)


#: the signals a worker is born with blocked, until :func:`_die_with_parent` has set their actions
_HELD = {signal.SIGINT, signal.SIGTERM}


def _started() -> int:
    return os.getpid()


def _start_masked(pool: cf.ProcessPoolExecutor) -> None:
    """Start the pool's workers now, with ``SIGINT``/``SIGTERM`` blocked while they are forked.

    A forked worker inherits the parent's Python handler of ``SIGTERM`` (it raises
    :class:`Interrupted`) until its initializer resets it; the parent's clean-up terminating a
    worker in that window printed the worker's traceback beside the one-line message. Born with
    both signals blocked, a worker acts on them only once :func:`_die_with_parent` has set them
    (then unblocks them: a pending ``SIGTERM`` ends it at once, silently). A signal to the parent
    meanwhile is delivered when the mask is restored, just after."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        pool.submit(_started)  # the first task launches every (forked) worker, in this thread
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _stop(pool: cf.ProcessPoolExecutor, grace: float = 1.0) -> None:
    """Terminate the workers now (then kill those still alive after ``grace`` seconds)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(grace)
            if p.is_alive():
                p.kill()
                p.join(grace)


@contextlib.contextmanager
def worker_pool(jobs: int) -> Iterator[cf.ProcessPoolExecutor]:
    """``with worker_pool(jobs) as pool: pool.submit(...)``: a process pool that leaves no
    process behind (see the module docstring). Forked workers where the platform allows
    (they inherit the imported generated modules)."""
    ctx = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    with terminate_raises():
        pool = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_die_with_parent)
        try:
            _start_masked(pool)
            yield pool
        except BaseException:
            _stop(pool)
            raise
        pool.shutdown(wait=True)

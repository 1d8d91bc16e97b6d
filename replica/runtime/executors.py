"""Where work runs: any :class:`concurrent.futures.Executor`, and chains of tasks that warm-start
each other (:func:`run_chains`).

Every parallel computation of the toolkit (phase points, thresholds along a parameter, the
branches of a continuation, parameter sweeps) is written against the standard
``concurrent.futures`` interface, so the same code runs

* in this process (:class:`InlineExecutor`: ``jobs = 1``, no process is started);
* on local worker processes that die with their parent (:func:`replica.runtime.workers.worker_pool`:
  ``SIGTERM``/``SIGINT`` stop them, ``PR_SET_PDEATHSIG`` kills them if the parent is killed);
* on a Dask distributed cluster (``dask.distributed.Client.get_executor()``): an existing
  scheduler (``--scheduler tcp://host:8786`` or ``$DASK_SCHEDULER_ADDRESS``) or a
  ``LocalCluster`` on the loopback interface started for the run (``--scheduler local:N``).
  ``dask[distributed]`` is optional (the ``sweep`` extra); without it ``--scheduler`` stops
  with one line saying what to install.

:func:`open_executor` picks one of these from ``jobs`` and ``scheduler`` and cleans up on exit:
on an interrupt or an error the local workers are terminated, the cluster's futures cancelled
and a ``LocalCluster`` closed (its worker processes end with it).

Tasks are module-level functions with picklable arguments (a generated module travels as
:func:`replica.phase.parallel.module_ref`). Results come back to this process, which keeps the
bookkeeping (progress, the point cache of sweeps), so a worker that dies loses at most the task
it was running: Dask reschedules it, and a rerun finds every finished point in the cache.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import os
import re
import signal
import socket
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from ..errors import ParameterError
from .workers import terminate_raises, worker_pool

__all__ = ["InlineExecutor", "Ready", "SCHEDULER_ENV", "available_cpus", "describe", "open_executor",
           "resolve_scheduler", "run_chains", "scheduler_from_env"]

#: the environment variable Dask itself uses for the scheduler's address
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
#: seconds to wait for a remote scheduler before giving up (a typo should fail fast)
CONNECT_TIMEOUT = 5.0
#: what to install for ``--scheduler``
DASK_HINT = "pip install 'dask[distributed]' (or the replica extra: pip install -e '.[sweep]')"


class InlineExecutor(cf.Executor):
    """Runs each task at once, in this process (``jobs = 1``): the same interface as a pool,
    without processes. Exceptions go into the future (as in a pool); interrupts propagate."""

    def __init__(self):
        self._shutdown = False

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:  # type: ignore[override]
        if self._shutdown:
            raise RuntimeError("cannot schedule new futures after shutdown")
        fut: cf.Future = cf.Future()
        fut.set_running_or_notify_cancel()
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 -- delivered through the future, like a pool
            fut.set_exception(exc)
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._shutdown = True


# --------------------------------------------------------------------------- schedulers
def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one): the
    default number of local workers."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_LOCAL = re.compile(r"^local(?::(\d+))?$")


def scheduler_from_env() -> str | None:
    """``$DASK_SCHEDULER_ADDRESS`` if set and non-empty."""
    return os.environ.get(SCHEDULER_ENV) or None


def resolve_scheduler(scheduler: str | None) -> tuple[str, int | str] | None:
    """``None`` (local processes), ``("local", n_workers)`` or ``("address", "tcp://host:port")``.

    Raises a one-line :class:`~replica.errors.ParameterError` naming ``scheduler`` for a
    malformed value (before anything is started)."""
    if scheduler is None:
        return None
    text = str(scheduler).strip()
    m = _LOCAL.match(text)
    if m:
        n = int(m.group(1)) if m.group(1) else available_cpus()
        if not 1 <= n <= 1024:
            raise ParameterError("scheduler", f"local:N needs 1 <= N <= 1024 workers, got {text!r}")
        return "local", n
    address = text if "://" in text else f"tcp://{text}"
    if not re.match(r"^[a-z]+://[^\s/:]+(:\d+)?$", address):
        raise ParameterError("scheduler", f"expected local:N or a scheduler address HOST:PORT "
                                          f"(e.g. tcp://10.0.0.5:8786), got {text!r}")
    return "address", address


def _import_distributed():
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ParameterError("scheduler", f"needs dask.distributed, which is not installed: {DASK_HINT}") from None
    return distributed


def _probe(address: str) -> None:
    """A plain TCP connection to a ``tcp://host:port`` address first: a refused or unroutable
    address fails at once with the system's reason, instead of after the client's retries."""
    scheme, _, rest = address.partition("://")
    if scheme != "tcp":
        return
    host, _, port = rest.rpartition(":")
    if not host:
        host, port = rest, "8786"
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise ParameterError("scheduler", f"cannot reach a Dask scheduler at {address}: {why}") from None


def _handshake(distributed, address: str) -> None:
    """Ask whatever listens at ``address`` for its identity over Dask's own protocol before a
    ``Client`` is made: something that is not a Dask scheduler (another service, a proxy) fails
    here with one line, and no half-made ``Client`` is left to print a traceback at exit."""
    import asyncio

    async def identity():
        comm = await distributed.comm.connect(address, timeout=CONNECT_TIMEOUT)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    try:
        reply = asyncio.run(asyncio.wait_for(identity(), 2 * CONNECT_TIMEOUT))
    except Exception as exc:  # noqa: BLE001 -- any failure means: no usable scheduler there
        why = (str(exc).splitlines() or [""])[0] or type(exc).__name__
        if isinstance(exc, (MemoryError, ValueError, TypeError, KeyError)):  # garbage where a frame should be
            why = f"its reply is not Dask's protocol: {why}"
        raise ParameterError("scheduler", f"no Dask scheduler answered at {address} within "
                                          f"{2 * CONNECT_TIMEOUT:g} s ({why[:160]})") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise ParameterError("scheduler", f"what answered at {address} is not a Dask scheduler "
                                          f"(identity: {str(reply)[:120]})")


#: keyword arguments of the LocalCluster started for ``local:N``: one single-threaded process per
#: worker, everything on the loopback interface, no dashboard (the scheduler's small HTTP server of
#: health routes on a free loopback port, not on 8787, which another cluster may hold), quiet logs
#: (``silence_logs``: the worker processes log nothing below CRITICAL -- a task's error reaches the
#: client with its future, and when an interrupted cluster is torn down a worker whose heartbeat
#: finds the scheduler gone logs an ERROR traceback under the one-line message, seen on a loaded
#: 2-core machine in tests/test_sweep_dask.py)
LOCAL_CLUSTER = dict(threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                     scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                     silence_logs=logging.CRITICAL)


@contextlib.contextmanager
def _logging_off() -> Iterator[None]:
    """No log records while a cluster is torn down after an interrupt or an error: cancelled
    futures whose connections close under them make Dask's event loop log tracebacks that say
    nothing the one-line message does not."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while worker processes are started, which keep it so (an ignored signal stays
    ignored across ``exec``, and Python then installs no KeyboardInterrupt handler). Ctrl-C in a
    terminal signals the whole process group: every worker of a ``local:N`` cluster printed its own
    KeyboardInterrupt traceback (about 70 lines) under the one-line message; this process stops
    them when it handles the signal."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _close(*things: Any) -> None:
    for thing in things:
        if thing is not None:
            with contextlib.suppress(Exception):
                thing.close()


@contextlib.contextmanager
def _dask_executor(kind: str, target: int | str) -> Iterator[cf.Executor]:
    distributed = _import_distributed()
    cluster = None
    client = None
    try:
        if kind == "local":
            with _sigint_ignored():  # the workers inherit it: Ctrl-C is this process's to handle
                cluster = distributed.LocalCluster(n_workers=int(target), **LOCAL_CLUSTER)
            client = distributed.Client(cluster, set_as_default=False)
        else:
            _probe(str(target))
            _handshake(distributed, str(target))
            try:
                client = distributed.Client(str(target), timeout=f"{CONNECT_TIMEOUT}s", set_as_default=False)
            except Exception as exc:  # noqa: BLE001 -- it answered a moment ago: say what failed now
                why = (str(exc).splitlines() or [""])[0] or type(exc).__name__
                raise ParameterError("scheduler", f"cannot connect to the Dask scheduler at {target} ({why[:160]})") \
                    from None
        executor = client.get_executor(pure=False)
        executor._replica_description = (f"Dask LocalCluster, {target} worker processes" if kind == "local"
                                         else f"Dask scheduler {target}")
        try:
            yield executor
        except BaseException:
            with _logging_off():
                with contextlib.suppress(Exception):
                    executor.shutdown(wait=False)  # cancel what is queued or running for us
                _close(client, cluster)
            raise
    finally:
        _close(client, cluster)


@contextlib.contextmanager
def open_executor(jobs: int = 1, scheduler: str | None = None) -> Iterator[cf.Executor]:
    """``with open_executor(jobs, scheduler) as ex: ex.submit(...)``.

    ``scheduler``: ``None`` -- ``jobs`` local worker processes (:func:`replica.runtime.workers.worker_pool`),
    or this process when ``jobs == 1``; ``"local:N"`` -- a Dask ``LocalCluster`` of ``N`` processes on
    127.0.0.1; an address (``tcp://host:8786``, ``host:8786``) -- that Dask scheduler (a one-line
    error naming ``scheduler`` if it cannot be reached within a few seconds). ``SIGTERM`` raises
    :class:`~replica.runtime.workers.Interrupted` inside the block; workers are stopped on the way out.
    """
    target = resolve_scheduler(scheduler)
    if target is None:
        if not isinstance(jobs, int) or jobs < 1:
            raise ParameterError("jobs", f"must be an integer >= 1, got {jobs!r}")
        if jobs == 1:
            with terminate_raises():
                yield InlineExecutor()
            return
        with worker_pool(jobs) as pool:
            pool._replica_description = f"{jobs} local worker processes"
            yield pool
        return
    with terminate_raises(), _dask_executor(*target) as ex:
        yield ex


def describe(executor: cf.Executor) -> str:
    """A few words on where the tasks of ``executor`` run (for progress lines)."""
    if isinstance(executor, InlineExecutor):
        return "this process"
    return getattr(executor, "_replica_description", type(executor).__name__)


# --------------------------------------------------------------------------- chains
@dataclass
class Ready:
    """A chain step whose result is known without running a task (e.g. found in a cache)."""

    value: Any


def run_chains(executor: cf.Executor, chains: Sequence[Sequence[Any]],
               step: Callable[[Any, list], "Ready | tuple"], *,
               on_result: Callable[[int, int, Any, bool], None] | None = None) -> list[list[Any]]:
    """Run chains of tasks in which each item may start from the results of the items before it.

    ``step(item, done)`` is called in this process with the results ``done`` of the earlier
    items of the item's chain; it returns :class:`Ready` (no task needed) or ``(fn, *args)``,
    which is submitted to ``executor``. The chains run concurrently (one task in flight per
    chain, submitted in the order of ``chains``), their items in order. ``on_result(chain,
    index, result, ready)`` is called here as each item finishes. Returns the results, chain by
    chain. A task's exception propagates (after which the caller's executor context stops the
    workers).
    """
    results: list[list[Any]] = [[] for _ in chains]
    inflight: dict[cf.Future, int] = {}

    def finish(c: int, value: Any, ready: bool) -> None:
        results[c].append(value)
        if on_result is not None:
            on_result(c, len(results[c]) - 1, value, ready)

    def advance(c: int) -> None:
        # submit the next item of chain c, consuming ready ones (and tasks that finished at
        # once: the inline executor) on the way
        while len(results[c]) < len(chains[c]):
            nxt = step(chains[c][len(results[c])], list(results[c]))
            if isinstance(nxt, Ready):
                finish(c, nxt.value, True)
                continue
            fn, *args = nxt
            fut = executor.submit(fn, *args)
            if not fut.done():
                inflight[fut] = c
                return
            finish(c, fut.result(), False)

    for c in range(len(chains)):
        advance(c)
    while inflight:
        finished, _ = cf.wait(list(inflight), return_when=cf.FIRST_COMPLETED)
        for fut in finished:
            c = inflight.pop(fut)
            finish(c, fut.result(), False)
            advance(c)
    return results

"""The simulator: one command for every protocol, and what every protocol shares.

``python -m numerics.simulate PROTOCOL ...`` runs a protocol that an application registers
(:mod:`numerics.applications`; the attention study registers the paper's gradient-descent protocol
``attention``, its linear baseline ``linear`` and their resumable ``sweep``, and its other studies).
Any declared model is simulated at finite size from its declaration alone by
:class:`numerics.problem.Problem` (``replica check MODEL``); a protocol adds what is not in a
declaration (a trainable value matrix, a histogram task, the paper's initialisations and optimiser).

Shared here: the memory check before a training set is drawn, the output-file check, the torch
device and dtype, torch's thread count, seed lists, progress lines and the one-line argument errors.
torch is imported lazily, so that argument checking (and ``--help``) is fast and errors about bad
input do not depend on torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["check_memory", "check_output_csv", "resolve_device", "torch_dtype", "torch_threads", "seed_list",
           "stderr_log", "replicates", "CommandParser", "floats", "strings", "standard_error_reasons", "build_parser", "main"]


# --------------------------------------------------------------------------- checks before any work
def _read_int(path: str) -> int | None:
    """The integer in a one-line file (``max`` and absurd values: None, no limit)."""
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value < 2 ** 60 else None


def _cgroup_room() -> list[int]:
    """Memory this process's cgroups still allow (v2 ``memory.max - memory.current``, v1
    ``memory.limit_in_bytes - memory.usage_in_bytes``), at the namespace root and at the process's
    own cgroup path, where mounted."""
    paths = {""}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers in ("", "memory") or "memory" in controllers.split(","):
                    paths.add(path.rstrip("/"))
    except (OSError, ValueError):
        pass
    out = []
    for path in paths:
        for limit, usage in ((f"/sys/fs/cgroup{path}/memory.max", f"/sys/fs/cgroup{path}/memory.current"),
                             (f"/sys/fs/cgroup/unified{path}/memory.max", f"/sys/fs/cgroup/unified{path}/memory.current"),
                             (f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes",
                              f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes")):
            cap = _read_int(limit)
            if cap is not None:
                out.append(max(0, cap - (_read_int(usage) or 0)))
    return out


def _address_space_room() -> int | None:
    """What ``RLIMIT_AS`` (``ulimit -v``) leaves beyond this process's current address space."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    if soft in (resource.RLIM_INFINITY, -1) or soft <= 0:
        return None
    used = 0
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return max(0, soft - used)


def _memory_bytes() -> int | None:
    """The memory this process can still take: physical memory, capped by the process limits
    (``RLIMIT_AS`` beyond the address space in use, the cgroups' limits beyond their usage);
    None where the platform says nothing."""
    room = _cgroup_room()
    aspace = _address_space_room()
    if aspace is not None:
        room.append(aspace)
    try:
        room.append(int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES")))
    except (AttributeError, ValueError, OSError):
        pass
    return min(room) if room else None


def check_memory(*, d: int, alpha: float, L: int = 2, itemsize: int = 8, device: Any = "cpu",
                 available: int | None = None) -> int:
    """Refuse a run whose training set cannot fit in memory, before allocating it.

    The training set ``X`` and its labels ``Y`` are ``(n, L, d)`` arrays each with
    ``n = round(alpha d)`` (:func:`numerics.tokens.sample_dataset`): ``X`` is drawn in float64
    by numpy in host memory, then ``X`` and ``Y`` are held as tensors of ``itemsize`` bytes
    per entry on ``device``. The lower bounds ``n L d (8 + 2 itemsize)`` bytes of host memory
    (``8`` on a CUDA device) and ``2 n L d itemsize`` of GPU memory must fit in physical
    memory (training adds activations of the same size), within the process's limits
    (:func:`_memory_bytes`: ``ulimit -v``, a container's cgroup). Raises ``ValueError`` naming ``d``
    otherwise; ``available`` overrides the host's memory. Returns the host bytes needed.
    """
    n = int(round(float(alpha) * int(d)))
    entries = n * int(L) * int(d)
    cuda = str(getattr(device, "type", device)).startswith("cuda")
    need = entries * (8 + (0 if cuda else 2 * int(itemsize)))
    have = _memory_bytes() if available is None else available
    from replica.validation import format_bytes

    where = f"d={d} with alpha={alpha} needs at least"
    what = f"(n*L*d = {n}*{L}*{d} entries in X and Y)"
    if have is not None and need > have:
        raise ValueError(f"{where} {format_bytes(need)} of memory for the training set {what} but this process "
                         f"can take {format_bytes(have)}; use a smaller d")
    if cuda and available is None:
        import torch

        gpu = torch.cuda.get_device_properties(torch.device(device)).total_memory
        if 2 * entries * int(itemsize) > gpu:
            raise ValueError(f"{where} {format_bytes(2 * entries * int(itemsize))} of GPU memory for the training "
                             f"set {what} but {device} has {format_bytes(gpu)}; use a smaller d")
    return need


def check_output_csv(path: str | os.PathLike) -> None:
    """``path`` can be written (its directory exists and is writable; it is not a directory),
    checked before any training so that a typo does not cost the run its result. Raises
    ``ValueError`` (a :class:`replica.errors.ParameterError`) naming ``out``."""
    from replica.artifacts.outputs import check_output_file

    check_output_file(path, "out")


def resolve_device(device: "str | torch.device" = "cpu") -> "torch.device":
    """``torch.device`` for ``device`` (``cpu``, ``cuda``, ``cuda:k``, or ``auto``).

    Raises ``ValueError`` naming ``device`` when CUDA is asked for but unavailable.
    """
    import torch

    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device must be cpu, cuda, cuda:K or auto (got {device!r})") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but torch.cuda.is_available() is False")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda (got {device!r})")
    return dev


def replicates(seeds: Sequence[int], run_seed: Callable[[int], dict], *, label: str | None = None,
               log: Callable[[str], None] = lambda s: None, cache: Any = None,
               describe: Callable[[int], Mapping[str, Any] | None] | None = None,
               report: Callable[[dict], str] | None = None, out: list | None = None) -> list[dict]:
    """The replicate loop every simulator shares: ``run_seed(seed)`` for each seed in order.

    ``label``: the progress line before each seed (``[label] seed s (k/K) ...``; None: none);
    ``report``: the line after it. With a ``cache`` (:class:`replica.artifacts.cache.PointCache`) and
    ``describe(seed)`` (what the seed's result depends on, None where it has no stable description),
    a seed finished by an earlier run is read back instead of run again, and every finished seed is
    kept at once (so an interrupted run resumes). Each finished run is appended to ``out`` at once (a
    new list by default), which is returned."""
    runs = [] if out is None else out
    for k, seed in enumerate(seeds):
        if label is not None:
            log(f"[{label}] seed {seed} ({k + 1}/{len(seeds)}) ...")
        desc = describe(seed) if cache is not None and describe is not None else None
        run = cache.get("simulate", desc) if desc is not None else None
        if run is not None:
            log("    finished in an earlier run: read from the cache")
        else:
            run = run_seed(seed)
            if desc is not None:
                cache.put("simulate", desc, run)
        runs.append(run)  # before the report: it counts the runs finished, this one included
        if report is not None:
            log(report(run))
    return runs


def seed_list(seeds: int | Sequence[int], seed_start: int = 0) -> list[int]:
    """The seeds of a run: ``seed_start, ..., seed_start + K - 1`` for a count ``K``, or the list given."""
    if isinstance(seeds, (int, np.integer)):
        return list(range(int(seed_start), int(seed_start) + int(seeds)))
    return [int(s) for s in seeds]


def torch_dtype(dtype: "str | torch.dtype") -> "torch.dtype":
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    table = {"float64": torch.float64, "double": torch.float64, "float32": torch.float32, "float": torch.float32}
    if dtype not in table:
        raise ValueError(f"dtype must be float64 or float32 (got {dtype!r})")
    return table[dtype]


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Temporarily set torch's intra-op CPU threads to ``n`` (``None``: leave as is).

    The per-step tensors are small ((n, L, L) attention matrices, one (n·L, d) matvec), so
    OpenMP fork/join overhead dominates and 1 thread is ~4x faster than 2 on a shared
    2-core machine (5.8 vs 22 ms per GD step at d = 1000, α = 2). Parallelise over seeds
    or sweep points (separate processes) instead.
    """
    import torch

    if n is None:
        yield
        return
    if n < 1:
        raise ValueError(f"threads must be >= 1 (got {n})")
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def stderr_log(verbose: bool) -> Callable[[str], None]:
    """A progress printer on stderr (flushed at once), or one that prints nothing."""
    if verbose:
        return lambda s: print(s, file=sys.stderr, flush=True)
    return lambda s: None


class CommandParser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit code 2; a flag given as an empty
    string is refused (:func:`replica.validation.given_strings`), never taken for its default."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        from replica.errors import ParameterError
        from replica.validation import given_strings

        ns, extras = super().parse_known_args(args, namespace)
        try:
            given_strings(self._actions, ns)
        except ParameterError as exc:
            self.error(str(exc))
        return ns, extras


def floats(s: str) -> list[float]:
    """argparse type: comma-separated numbers."""
    try:
        return [float(x) for x in s.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {s!r}") from None


def strings(s: str) -> list[str]:
    """argparse type: comma-separated words."""
    return [x for x in s.replace(" ", "").split(",") if x]


def standard_error_reasons(obj: Any) -> dict[str, str]:
    """Why a standard error (``*_se``) can be null in JSON output: one seed has none."""
    keys: set[str] = set()

    def walk(x: Any) -> None:
        if isinstance(x, Mapping):
            keys.update(k for k in x if isinstance(k, str) and k.endswith("_se"))
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(obj)
    return {k: "a standard error needs at least two seeds" for k in keys}


# --------------------------------------------------------------------------- the command line
def build_parser() -> argparse.ArgumentParser:
    """The simulator's parser: one subcommand per registered protocol (:mod:`numerics.applications`);
    what follows a protocol's name is its own command line."""
    from .applications import protocols

    parser = CommandParser(prog="python -m numerics.simulate", description=__doc__.split("\n\n")[0],
                           epilog="Any declared model at finite size from its declaration: replica check MODEL "
                                  "(numerics.check). 'python -m numerics.simulate PROTOCOL --help' "
                                  "lists a protocol's options.")
    sub = parser.add_subparsers(dest="protocol", metavar="PROTOCOL", required=True)
    for p in protocols().values():
        sub.add_parser(p.name, help=p.summary, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the protocol named by the first argument; returns the exit code (2 for bad input)."""
    from .applications import protocols

    args = list(sys.argv[1:] if argv is None else argv)
    found = protocols()
    if not args or args[0].startswith("-"):
        parser = build_parser()
        if args and args[0] in ("-h", "--help"):
            parser.print_help()
            return 0
        parser.error("give a protocol: " + ", ".join(found))
    if args[0] not in found:
        print(f"python -m numerics.simulate: error: unknown protocol {args[0]!r}; choose from {', '.join(found)} "
              "(any declared model is simulated from its declaration by 'replica check MODEL')", file=sys.stderr)
        return 2
    return found[args[0]].main(args[1:])


if __name__ == "__main__":
    sys.exit(main())

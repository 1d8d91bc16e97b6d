"""A small progress line on stderr for long runs (phase diagrams, figures).

On a terminal the line is redrawn in place (``\\r``); elsewhere (CI logs, pipes) a
new line is printed at most every ``interval`` seconds, so logs stay short.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO


def _fmt_time(s: float) -> str:
    s = int(round(s))
    return f"{s // 60}:{s % 60:02d}"


class Progress:
    """``Progress(total, label)``; ``advance(note)`` after each unit of work, ``close()`` at the end.

    ``note(text)`` shows what is being done without advancing. ``enabled=False`` makes
    every call a no-op.
    """

    def __init__(self, total: int | None = None, label: str = "", enabled: bool = True,
                 stream: TextIO | None = None, interval: float = 5.0, width: int = 24):
        self.total, self.label, self.enabled = total, label, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval, self.width = interval, width
        self.done = 0
        self.skipped = 0  # units done without work (e.g. read from a cache): not in the ETA's rate
        self.t0 = time.perf_counter()
        self._last_print = -1e9
        self._last_len = 0
        self._text = ""
        self._shown = False

    def _line(self) -> str:
        el = time.perf_counter() - self.t0
        parts = [self.label] if self.label else []
        if self.total:
            frac = min(1.0, self.done / self.total)
            fill = int(round(frac * self.width))
            parts.append(f"[{'#' * fill}{'.' * (self.width - fill)}] {self.done}/{self.total}")
            worked = self.done - self.skipped
            if worked > 0 and self.done < self.total:
                parts.append(f"eta {_fmt_time(el / worked * (self.total - self.done))}")
        elif self.done:
            parts.append(f"{self.done} done")
        parts.append(f"elapsed {_fmt_time(el)}")
        if self._text:
            parts.append(self._text)
        return "  ".join(parts)

    def _show(self, force: bool = False) -> None:
        if not self.enabled:
            return
        self._shown = True
        now = time.perf_counter()
        line = self._line()
        if self.tty:
            pad = max(0, self._last_len - len(line))
            self.stream.write("\r" + line + " " * pad)
            self._last_len = len(line)
            self.stream.flush()
        elif force or now - self._last_print >= self.interval:
            self.stream.write(line + "\n")
            self.stream.flush()
            self._last_print = now

    def note(self, text: str) -> None:
        """Show a short status text after the bar (e.g. the current branch and ``α``)."""
        self._text = text
        self._show()

    def advance(self, text: str = "", n: int = 1, cached: bool = False) -> None:
        """Count ``n`` finished units of work and redraw the line; ``cached``: they took no
        work (read from a cache), so they do not speed up the estimated time left."""
        self.done += n
        if cached:
            self.skipped += n
        self._text = text
        self._show(force=self.total is not None and self.done >= self.total)

    def close(self, text: str | None = None) -> None:
        """Finish the line (prints only if something was shown before)."""
        if not self.enabled or not self._shown:
            self.enabled = False
            return
        if text is not None:
            self._text = text
        if self.tty:
            self._show()
            self.stream.write("\n")
            self.stream.flush()
        else:
            self._show(force=True)
        self.enabled = False


class Stages:
    """The stage a command is in, one line on stderr per stage -- once the command has run for
    ``after`` seconds: a command that ends sooner prints nothing, one that takes longer says what
    it is doing (the stage current at ``after`` seconds, then every later one as it starts).

    ``stage(text)`` names the stage now starting; ``close()`` ends the reporting (also as a
    context manager). Lines read ``<label>: <text> (<elapsed> s)``. ``enabled=False`` makes every
    call a no-op.
    """

    def __init__(self, label: str, after: float = 3.0, enabled: bool = True, stream: TextIO | None = None):
        import threading

        self.label, self.after, self.enabled = label, float(after), enabled
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = time.perf_counter()
        self._current: str | None = None
        self._said = False  # the current stage is printed already (the timer and stage() may both try)
        self._lock = threading.Lock()
        self._timer = threading.Timer(self.after, self._late) if enabled else None
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def _say(self) -> None:
        if self._current is not None and not self._said:
            self._said = True
            self.stream.write(f"{self.label}: {self._current} ({time.perf_counter() - self.t0:.0f} s)\n")
            self.stream.flush()

    def _late(self) -> None:
        with self._lock:
            if self.enabled:
                self._say()

    def stage(self, text: str) -> None:
        """Name the stage now starting (printed at once when the command has run ``after`` seconds)."""
        with self._lock:
            self._current, self._said = text, False
            if self.enabled and time.perf_counter() - self.t0 >= self.after:
                self._say()

    def close(self) -> None:
        """Stop reporting (a stage still pending is not printed)."""
        with self._lock:
            self.enabled = False
        if self._timer is not None:
            self._timer.cancel()

    def __enter__(self) -> "Stages":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

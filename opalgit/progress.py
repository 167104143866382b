"""Progress of long operations: what the lower layers report, and the line a terminal shows.

The layers that do the long work (reading a session file, storing or reading records,
a push, a check) report through :func:`task` and :func:`iterate` without knowing
whether anyone looks: with no display, a task is a shared do-nothing object and a
report costs one method call. The CLI turns a :class:`Display` on (:func:`shown`)
only when standard error is a terminal that can erase a line (not ``TERM=dumb``), and
not for ``--json``; then, once an operation has run for :data:`DELAY` seconds, one
line on stderr says what is being done (``opal commit: reading session 12.0/40.0 MB
(30%) |``), is redrawn a few times a second, and is erased when the operation ends
or anything else is printed. It never uses colour. Nothing else is written: output
that is not a terminal is exactly what it would be without this module.

Nothing here reads the environment or decides about the terminal: the CLI does.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import IO, Iterable, Iterator, TypeVar

T = TypeVar("T")

#: Seconds an operation runs before its progress appears (a quick command shows none).
DELAY = 1.0
#: Seconds between redraws.
INTERVAL = 0.1
_SPIN = "|/-\\"
_ERASE = "\r\x1b[K"


class Task:
    """One step of work: a label, how much is done, of how much (None: unknown)."""

    __slots__ = ("label", "total", "done", "unit", "_display")

    def __init__(self, label: str, total: int | None = None, unit: str = "", display: "Display | None" = None) -> None:
        self.label, self.total, self.done, self.unit = label, total, 0, unit
        self._display = display

    def advance(self, n: int = 1) -> None:
        self.done += n
        d = self._display
        if d is not None and d.due():
            d.draw()

    def text(self) -> str:
        if self.unit == "bytes":
            done = _mb(self.done)
            count = f"{done}/{_mb(self.total)} MB" if self.total else f"{done} MB"
        elif self.total:
            count = f"{self.done:,}/{self.total:,}{' ' + self.unit if self.unit else ''}"
        else:
            count = f"{self.done:,}{' ' + self.unit if self.unit else ''}" if self.done else ""
        pct = f" ({min(100, self.done * 100 // self.total)}%)" if self.total else ""
        return f"{self.label} {count}{pct}".rstrip()


class _Null(Task):
    """The task everyone gets when nothing is displayed."""

    __slots__ = ()

    def advance(self, n: int = 1) -> None:
        pass


_NULL = _Null("")


def _mb(n: int | None) -> str:
    return f"{(n or 0) / (1 << 20):.1f}"


class Display:
    """The progress line on a terminal (see the module docstring)."""

    def __init__(self, stream: IO[str], *, title: str = "opal", delay: float = DELAY, interval: float = INTERVAL) -> None:
        self.stream, self.title, self.delay, self.interval = stream, title, delay, interval
        self.tasks: list[Task] = []
        self.started = time.monotonic()
        self._next = self.started + delay
        self._shown = False
        self._spin = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # A process forked meanwhile (the redaction worker) inherits this object but
        # not the terminal line: only the process that made it draws.
        self._pid = os.getpid()

    def due(self) -> bool:
        return time.monotonic() >= self._next and os.getpid() == self._pid

    def line(self) -> str | None:
        """What the line says: the innermost task; None while no task runs (a command
        that pages, prompts or hands the terminal to an agent meanwhile is not drawn over)."""
        inner = next((t for t in reversed(list(self.tasks)) if t.label), None)
        if inner is None:
            return None
        return f"{self.title}: {inner.text()} {_SPIN[self._spin % len(_SPIN)]}"

    def draw(self) -> None:
        with self._lock:
            now = time.monotonic()
            if now < self.started + self.delay or self._stop.is_set() or os.getpid() != self._pid:
                return
            self._next = now + self.interval
            self._spin += 1
            text = self.line()
            if text is None:
                if self._shown:
                    self._write(_ERASE)
                    self._shown = False
                return
            width = _width(self.stream)
            if width and len(text) >= width:
                text = text[: width - 1]
            self._write(_ERASE + text)
            self._shown = True

    def erase(self) -> None:
        """Take the line away (before other output, and at the end)."""
        if os.getpid() != self._pid:
            return
        with self._lock:
            if self._shown:
                self._write(_ERASE)
                self._shown = False
            self._next = max(self._next, time.monotonic() + self.interval)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal: progress is not worth an error
            self._stop.set()

    def _run(self) -> None:
        # Redraws while the work blocks (a git push reports nothing meanwhile).
        while not self._stop.wait(self.interval):
            if self.due():
                self.draw()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="opal-progress", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.erase()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _width(stream: IO[str]) -> int | None:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return None


_display: Display | None = None


@contextlib.contextmanager
def shown(stream: IO[str], *, title: str = "opal", delay: float = DELAY) -> Iterator[Display]:
    """Show progress on ``stream`` (a terminal: the caller decides) while the block runs."""
    global _display
    d = Display(stream, title=title, delay=delay)
    previous, _display = _display, d
    d.start()
    try:
        yield d
    finally:
        _display = previous
        d.close()


def erase() -> None:
    """Take the progress line away before printing something else (no-op without one)."""
    if _display is not None:
        _display.erase()


@contextlib.contextmanager
def task(label: str, total: int | None = None, unit: str = "") -> Iterator[Task]:
    """A step of work, shown while it runs (when a display is on)."""
    d = _display
    if d is None:
        yield _NULL
        return
    t = Task(label, total, unit, d)
    d.tasks.append(t)
    # A new task is drawn at once (once past the delay), whatever the redraw interval:
    # a task that starts and ends between two redraws is still seen.
    d.draw()
    try:
        yield t
    finally:
        d.tasks.remove(t)
        if not d.tasks:
            d.erase()


def iterate(items: Iterable[T], label: str, total: int | None = None, unit: str = "") -> Iterator[T]:
    """``items``, counted as a task while they are consumed."""
    if _display is None:
        yield from items
        return
    with task(label, total, unit) as t:
        for item in items:
            t.advance()  # counts the item being worked on: "1/2" while the first is
            yield item


__all__ = ["DELAY", "Display", "Task", "erase", "iterate", "shown", "task"]

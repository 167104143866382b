"""Redaction verdicts from a second process, so that a large import uses both cores.

Redacting is about 40 % of importing a large session (every string of every record
goes through the rules), and it is the part that parallelises without changing what
is stored: whether a record holds a secret depends on that record alone. So for an
import of many megabytes the commit forks a worker that reads the same file from the
same offset, parses each line as the importer does (:func:`opalgit.jsonl.parse`) and
runs the very :class:`~opalgit.secrets.redact.Redactor` the commit uses (inherited by the
fork: same rules, allow-list and key) on it. For every line it sends back the line's
number, the CRC-32 of its bytes and the verdict: nothing found, or the redacted
value with its findings (msgpack; the pipe does not leave the machine, and the
findings go to the vault as the commit's own would).

The commit uses a verdict for a record only when the record is that line's parsed
value (``turn.has_record``, built from the line by ``jsonl.parse``) and the verdict
is about that line number *with the same CRC-32* the adapter saw: then redacting it
again would give exactly the verdict (same function, same input, same key).
Everything else is redacted in the commit's own process, as without a worker: the
worker still behind, crashed or killed, never started (no ``fork`` on this
platform, other threads already running, a small read), a line rewritten in
between, a record kept as bytes, a value msgpack cannot carry. The worker can save
time; it cannot let a secret through.

The two processes do not judge the same line twice. The commit publishes the last
line it has asked about in a page of shared memory (mapped before the fork); the
worker skips the lines the commit has passed, and when it finds itself behind it
jumps :data:`LEAP` lines past the commit, so that its next verdicts arrive before
they are asked for. Without that, a commit that caught up with the worker redacted
a third of a large session's records itself while the worker judged them again,
for nothing. The page only steers the worker: a verdict still counts only for its
line and CRC-32, so a stale or torn read of it costs time, never a secret.

The worker writes nothing but its pipe: it closes every inherited descriptor (the
repository lock among them), points its standard streams at ``/dev/null``, and ends
with ``os._exit`` so that no ``finally`` or ``atexit`` of the command runs twice. It
also ends as soon as the commit is gone (killed): without that it judged on for a
second or more, for no one, taking a core from the next command.
:meth:`Screen.close` ends it by its PID if it is still running and reaps it.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import zlib
from collections import deque
from typing import TYPE_CHECKING, Any

from opalgit import codec, jsonl
from opalgit.fileio import write_all

if TYPE_CHECKING:  # the commit imports the redaction modules only when it has turns to store
    from opalgit.secrets.redact import Finding, Redactor

# Below this many bytes to read, forking (a few ms) and the worker's own start would
# not pay for themselves: incremental commits read a few KB.
MIN_BYTES = 8 << 20
# Verdicts held in the commit, waiting to be used: the worker is paused past this.
HOLD_BYTES = 4 << 20

# A verdict: line number, CRC-32 of the line without its b"\n", and the length of
# what follows (0: nothing to redact; else msgpack [redacted value, [[kind,
# placeholder, secret], ...]]).
_FRAME = struct.Struct("<QII")
# Verdicts are written when this many bytes of them wait, or once they cover this
# many bytes of lines: most verdicts are 16 bytes ("nothing to redact"), and a batch
# of a thousand of them would reach the commit after it had redacted those lines itself.
_BATCH = 1 << 14
_SEND_AFTER = 256 << 10
# The commit's place, in the shared page: the last line number it asked about.
_PLACE = struct.Struct("<Q")
#: Lines a worker that finds itself behind the commit jumps past it (see the module
#: docstring): about what the commit stores while the worker judges as many.
LEAP = 16
# Within this many lines of the commit, every verdict is written at once: the commit
# will ask for it within milliseconds.
_NEAR = 4 * LEAP
#: Lines judged together (see _judge), up to this many or this many bytes of them.
_JUDGE_LINES = 32
_JUDGE_BYTES = 256 << 10
# Lines longer than this are left to the commit. A verdict on a line of megabytes
# that holds a secret is the whole redacted record: it was held, as bytes and then as
# a value, in the commit beside the commit's own parse of the line (a 250 MB import
# with a few 20 MB outputs peaked at 0.6x its size instead of 0.4x).
_LINE_MAX = 1 << 20
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class Screen:
    """The verdicts of a running worker (or of none: :meth:`verdict` then always says
    None, and the commit redacts every record itself)."""

    def __init__(self, pid: int | None = None, rfd: int | None = None, place: mmap.mmap | None = None) -> None:
        self._pid = pid
        self._rfd = rfd
        self._place = place  # shared with the worker: where the commit is
        self._asked = 0
        # (line number, CRC-32, b"" for nothing to redact, else the packed redaction),
        # in the order the worker sent them: ascending lines, as the commit asks.
        self._queue: deque[tuple[int, int, bytes]] = deque()
        self._held = 0  # bytes of verdicts received and not yet used or dropped
        self._room = threading.Condition()
        self._closing = False
        self.used = 0  # records the commit did not have to redact itself
        self._thread: threading.Thread | None = None
        if rfd is not None:
            # A thread drains the pipe (blocked in os.read, it holds no GIL), so the
            # commit only ever looks a verdict up and never waits for one.
            self._thread = threading.Thread(target=self._drain, name="opal-redact-verdicts", daemon=True)
            self._thread.start()

    @property
    def running(self) -> bool:
        return self._pid is not None

    def _drain(self) -> None:
        assert self._rfd is not None
        head = _FRAME.size
        unpack = _FRAME.unpack_from
        buf = bytearray()
        try:
            while True:
                # The worker may run far ahead (it neither encodes nor stores): past
                # HOLD_BYTES of verdicts waiting, stop reading until the commit has
                # used some. The pipe fills and the worker waits; memory stays flat.
                with self._room:
                    while self._held > HOLD_BYTES and not self._closing:
                        self._room.wait()
                    if self._closing:
                        return
                chunk = os.read(self._rfd, 1 << 16)
                if not chunk:
                    return
                buf += chunk
                pos = 0
                got = []
                while len(buf) - pos >= head:
                    line, crc, size = unpack(buf, pos)
                    if len(buf) - pos - head < size:
                        break
                    got.append((line, crc, bytes(buf[pos + head : pos + head + size])))
                    pos += head + size
                del buf[:pos]
                with self._room:
                    self._queue.extend(got)
                    self._held += pos
        except OSError:
            return

    def verdict(self, line: int, crc: int | None) -> tuple[Any, list[Finding]] | None:
        """The worker's redaction of line ``line`` if it judged these very bytes:
        ``(None, [])`` when there was nothing to redact, else the redacted value and
        its findings. None: no verdict, the caller redacts.

        Verdicts for lines before ``line`` are dropped: the commit asks in file order,
        and a later pass over earlier lines (a fork's records) redacts them itself.
        """
        if self._place is not None and line > self._asked:
            self._asked = line
            _PLACE.pack_into(self._place, 0, line)
        if crc is None or self._rfd is None:
            return None
        head = _FRAME.size
        queue = self._queue
        found = None
        with self._room:
            freed = 0
            while queue and queue[0][0] < line:
                freed += head + len(queue.popleft()[2])
            if queue and queue[0][0] == line:
                found = queue.popleft()
                freed += head + len(found[2])
            if freed:
                self._held -= freed
                self._room.notify()
        if found is None or found[1] != crc:
            return None
        self.used += 1
        if not found[2]:
            return None, []
        from opalgit.secrets.redact import Finding

        value, findings = codec.unpack_native(found[2])
        return value, [Finding(kind, placeholder, secret) for kind, placeholder, secret in findings]

    def close(self) -> None:
        """End the worker if it still runs (by its PID: it is our child, not yet reaped,
        so the PID cannot belong to anyone else), reap it, and stop the reader."""
        with self._room:
            self._closing = True
            self._room.notify_all()
        pid, self._pid = self._pid, None
        if pid is not None:
            import signal  # here: its enums cost every command a millisecond at start-up

            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            while True:
                try:
                    os.waitpid(pid, 0)
                    break
                except ChildProcessError:
                    break
                except InterruptedError:  # pragma: no cover - retried by Python itself since 3.5
                    continue
        if self._thread is not None:
            self._thread.join()  # the worker is gone (EOF) or the reader saw _closing
            self._thread = None
        if self._rfd is not None:
            os.close(self._rfd)
            self._rfd = None
        if self._place is not None:
            self._place.close()
            self._place = None
        self._queue.clear()
        self._held = 0

    def __enter__(self) -> "Screen":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def worth_it(path: str, offset: int) -> bool:
    """Whether reading ``path`` from ``offset`` is large enough for a worker (and the
    file is lines as they will be read: not a compressed Codex rollout)."""
    if not hasattr(os, "fork"):
        return False
    try:
        if os.path.getsize(path) - offset < MIN_BYTES:
            return False
        with open(path, "rb") as fh:
            return fh.read(4) != _ZSTD_MAGIC
    except OSError:
        return False


def start(path: str, offset: int, first_line: int, redactor: "Redactor | None") -> Screen:
    """A worker judging the lines of ``path`` from byte ``offset`` (line ``first_line``),
    or an idle :class:`Screen` when one would not help or cannot be had safely."""
    if redactor is None or not hasattr(os, "fork"):
        return Screen()
    # Forking while another thread runs could copy a lock that thread holds; the
    # commit starts its threads (pack compression, the window cache) after this.
    if threading.active_count() > 1:
        return Screen()
    try:
        rfd, wfd = os.pipe()
    except OSError:
        return Screen()
    try:
        place: mmap.mmap | None = mmap.mmap(-1, mmap.PAGESIZE)  # anonymous, shared with the child
    except OSError:
        place = None
    try:
        pid = os.fork()
    except OSError:
        os.close(rfd)
        os.close(wfd)
        if place is not None:
            place.close()
        return Screen()
    if pid == 0:  # pragma: no cover - runs in the worker; the tests observe its verdicts
        code = 1
        try:
            os.close(rfd)
            wfd = _isolate(wfd)
            _judge(path, offset, first_line, redactor, wfd, place)
            code = 0
        except BaseException:  # noqa: BLE001 - whatever happens, the worker only exits
            pass
        finally:
            os._exit(code)
    os.close(wfd)
    return Screen(pid, rfd, place)


def _isolate(wfd: int) -> int:
    """In the worker: keep the pipe (as fd 3) and nothing else of the command's."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if wfd != 3:
        os.dup2(wfd, 3)
        wfd = 3
    os.closerange(4, _max_fd())  # everything else, /dev/null's own descriptor included
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends the worker with the command
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return wfd


def _max_fd() -> int:
    try:
        return min(os.sysconf("SC_OPEN_MAX"), 1 << 20)
    except (ValueError, OSError):  # pragma: no cover
        return 1 << 16


def _judge(path: str, offset: int, first_line: int, redactor: "Redactor", wfd: int,
           place: mmap.mmap | None = None) -> None:
    """In the worker: the verdicts on the lines from ``offset``, written in batches,
    skipping the lines the commit has passed (``place``, see the module docstring).

    Lines are judged a few at a time (:data:`_JUDGE_LINES` or :data:`_JUDGE_BYTES`,
    one at a time near the commit): :meth:`Redactor.redact_values` runs the
    prefilter once over a batch, whose fixed cost per call otherwise dominates
    sessions of many small records.
    """
    frame = _FRAME.pack
    where = _PLACE.unpack_from
    parent = os.getppid()  # a killed commit leaves no worker judging for no one
    out = bytearray()
    read = 0  # bytes of lines judged since the last write
    skip_to = 0  # lines before this one are the commit's own
    batch: list[tuple[int, bytes, Any]] = []  # (line number, bytes, parsed value) to judge
    batch_bytes = 0

    def judge() -> None:
        if os.getppid() != parent:  # the commit is gone (killed): stop, and free the core
            os._exit(0)
        for (number, raw, _), packed in zip(batch, _verdicts(redactor, [v for _, _, v in batch])):
            if packed is not None:
                out.extend(frame(number, zlib.crc32(raw), len(packed)))
                out.extend(packed)
        batch.clear()

    with open(path, "rb", buffering=1 << 20) as fh:
        for line in jsonl.iter_lines(fh, start=offset, first_number=first_line):
            if not line.terminated:  # a last line still being written is not read
                break
            if line.number < skip_to:
                continue
            asked = where(place, 0)[0] if place is not None else 0
            if asked >= line.number:  # behind: what is judged but not sent is too late
                skip_to = asked + LEAP
                out.clear()
                batch.clear()
                read = batch_bytes = 0
                continue
            if len(line.raw) > _LINE_MAX:
                continue
            try:
                value = jsonl.parse(line.raw)
            except jsonl.ParseFailure:  # the adapter keeps the line as bytes: no verdict to give
                continue
            batch.append((line.number, line.raw, value))
            batch_bytes += len(line.raw)
            near = place is not None and line.number - asked <= _NEAR
            if near or len(batch) >= _JUDGE_LINES or batch_bytes >= _JUDGE_BYTES:
                judge()
                read += batch_bytes
                batch_bytes = 0
                if len(out) >= _BATCH or read >= _SEND_AFTER or near:
                    write_all(wfd, out)
                    out.clear()
                    read = 0
    judge()
    if out:
        write_all(wfd, out)


def _verdicts(redactor: "Redactor", values: list[Any]) -> list[bytes | None]:
    """Per parsed line: b"" when redacting it finds nothing, else the packed
    redaction; None when its redaction is a value msgpack cannot carry (no verdict)."""
    out: list[bytes | None] = []
    for new, found in redactor.redact_values(values):
        if not found:
            out.append(b"")
            continue
        try:
            out.append(codec.pack_native([new, [[f.kind, f.placeholder, f.secret] for f in found]]))
        except (TypeError, ValueError, OverflowError):
            out.append(None)
    return out

"""The order of the hooks' work, and what happens to work that outlives its git command.

A shim waits for opal's part of a hook at most ``hooks.timeout`` seconds (post-commit's
and post-rewrite's not at all, by default); past that the work goes on in the
background while git carries on (see docs/hooks.md). So the work of one hook can still
be running, or not even started, when the next git command's hooks start: a commit
amended at once, another commit right after, a push. Each must happen in the order git
ran them (a post-rewrite moves the link that the post-commit before it writes; a push
sends the states recorded before it), and each must record what was true when git ran
it (a post-commit links the code commit of that moment, not whatever HEAD is later).

So the shim, before it starts opal, appends one line to the **journal**
(``<git-common-dir>/opal/hooks/journal``: its pid, the hook, the code commit, the
worktree; the hook's input goes to ``input.<pid>``). Appends land in git's order. The
first opal process that looks turns the journal's lines into numbered job files; each
hook run then locks its own job (its **ticket**), waits for every job numbered before
it, does its work and removes the job. A job that no process holds (its process died,
kill -9 or a reboot; or has not started yet) is done by the next one that waits for it,
from what the job says, so no state is lost. A pre-push job is only ever done by its
own process while its shim waits: a push that was stopped must not happen later,
behind the user's back; one whose shim is gone is dropped, and said so.

Work that fails in the background, after the shim stopped waiting (or never waited, as
post-commit's and post-rewrite's shims by default), goes to ``hooks/failures`` (one JSON
object a line), which ``opal hooks status`` shows, and its line to ``hooks/unsaid``,
which the next hook's shim prints, once, before it starts opal.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from typing import Callable, Iterator

from opalgit.errors import ConflictError
from opalgit.structs import dataclass

QUEUE_DIR = "hooks"
JOURNAL = "journal"
FAILURES = "failures"
#: Failures nobody has been told of: one line each, said by the next hook run.
UNSAID = "unsaid"
#: How long the work of one hook waits, at most, for the hook runs before it and for the
#: repository lock, before it gives up (and is said to have failed). The git command is
#: not waiting by then: this only bounds how long a background process lives.
PATIENCE = 600.0
_POLL = 0.05


def queue_dir(opal_dir: str) -> str:
    return os.path.join(opal_dir, QUEUE_DIR)


@dataclass
class Job:
    """What one hook run saw: its hook name, and the data its work needs."""

    seq: int
    hook: str
    data: dict
    pid: int
    path: str


@contextlib.contextmanager
def _flocked(path: str) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def _job_name(seq: int, hook: str) -> str:
    return f"{seq:012d}.{hook}.json"


def _jobs(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.endswith(".json") and n[:12].isdigit())


class Ticket:
    """This process's place in the queue: its locked job, and the jobs before it."""

    def __init__(self, job: Job, fd: int, before: list[str]) -> None:
        self.job, self._fd, self.before = job, fd, before

    def release(self) -> None:
        """Let the ticket go undone: the next hook run does its work."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def done(self) -> None:
        """The work is over (done, or failed and reported): the ticket goes."""
        if self._fd < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.job.path)  # before the lock goes, so a waiter sees it done
        os.close(self._fd)
        self._fd = -1


#: The journal is read from where the last reader stopped; once it is all read and
#: this big, it is moved aside to ``journal.taking`` and a new one starts.
_COMPACT_AT = 64 * 1024
#: ``journal.taking`` is removed once all read and this long unchanged: a shim that
#: had opened the journal just before it was moved aside writes within microseconds.
_QUIET = 2.0


@dataclass
class _Counters:
    """What the ``seq`` file holds: the last job's number, and how far each journal is read."""

    seq: int = 0
    journal: int = 0
    taking: int = 0

    @classmethod
    def parse(cls, raw: bytes) -> "_Counters":
        parts = raw.split()
        nums = [int(p) for p in parts[:3] if p.isdigit()] + [0, 0, 0]
        return cls(nums[0], nums[1], nums[2])

    def dump(self) -> bytes:
        return f"{self.seq} {self.journal} {self.taking}".encode()


def _read_lines(path: str, offset: int) -> tuple[list[str], int]:
    """The whole lines after ``offset`` (a line still being written stays for next time)."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size < offset:
                offset = 0  # not the file that was read before (removed and begun again)
            fh.seek(offset)
            raw = fh.read()
    except FileNotFoundError:
        return [], 0
    end = raw.rfind(b"\n") + 1
    return raw[:end].decode("utf-8", "replace").splitlines(), offset + end


def _from_journal(directory: str, n: _Counters) -> None:
    """Turn the journal's new lines (one per hook git ran, appended by the shims in git's
    order: ``shim-pid hook code kind git-dir``) into numbered job files.

    The journal is never emptied under a shim's feet (one that opened it an instant
    before would lose its line): it is read from where the last reader stopped, and
    only moved aside once all read."""
    path = os.path.join(directory, JOURNAL)
    taking = path + ".taking"
    if os.path.exists(taking):
        lines, n.taking = _read_lines(taking, n.taking)
        for line in lines:
            n.seq = _job_from_line(directory, line, n.seq)
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(taking)
            if st.st_size == n.taking and time.time() - st.st_mtime > _QUIET:
                os.unlink(taking)
                n.taking = 0
    lines, n.journal = _read_lines(path, n.journal)
    for line in lines:
        n.seq = _job_from_line(directory, line, n.seq)
    with contextlib.suppress(FileNotFoundError):
        if not os.path.exists(taking) and os.path.getsize(path) == n.journal >= _COMPACT_AT:
            os.rename(path, taking)
            n.taking, n.journal = n.journal, 0


def _job_from_line(directory: str, line: str, seq: int) -> int:
    parts = line.split(" ", 4)
    if len(parts) != 5 or not parts[0].isdigit():
        return seq
    shim, hook, code, kind, git_dir = parts
    data: dict = {"shim": int(shim), "git_dir": git_dir}
    if code != "-":
        data["code"] = code
    if kind != "-":
        data["kind"] = kind
    given = os.path.join(directory, f"input.{shim}")
    if hook != "post-commit" and os.path.exists(given):
        with open(given, encoding="utf-8", errors="replace") as fh:
            data["lines"] = fh.read().splitlines()
        os.unlink(given)
    os.close(_write_job(directory, seq + 1, hook, data, pid=0)[1])
    return seq + 1


def _write_job(directory: str, seq: int, hook: str, data: dict, pid: int) -> tuple[str, int]:
    path = os.path.join(directory, _job_name(seq, hook))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, json.dumps({"hook": hook, "pid": pid, "time": time.time(), "data": data}).encode())
    return path, fd


def take(opal_dir: str, hook: str, data: dict, shim: int | None = None, patience: float = PATIENCE) -> Ticket | None:
    """This hook run's ticket: the job its shim put in the journal (``shim``: the shim's
    pid), or, for a hook run by hand, a new job with ``data`` after every one taken.
    None: another process did this job already."""
    directory = queue_dir(opal_dir)
    os.makedirs(directory, exist_ok=True)
    with _flocked(os.path.join(directory, "seq")) as sfd:
        counters = _Counters.parse(os.pread(sfd, 128, 0))
        _from_journal(directory, counters)
        seq = counters.seq
        own = None
        if shim is not None:
            for name in reversed(_jobs(directory)):
                job = _peek(os.path.join(directory, name))
                if job is not None and job.hook == hook and job.data.get("shim") == shim:
                    own = job
                    break
        if own is None:
            if shim is not None:  # the shim could not write the journal: its input is ours
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, f"input.{shim}"))
            seq += 1
            path, fd = _write_job(directory, seq, hook, data, pid=os.getpid())
            fcntl.flock(fd, fcntl.LOCK_EX)
            own = Job(seq, hook, data, os.getpid(), path)
        else:
            fd = -1
        counters.seq = seq
        os.ftruncate(sfd, 0)
        os.pwrite(sfd, counters.dump(), 0)
        before = [os.path.join(directory, n) for n in _jobs(directory) if int(n[:12]) < own.seq]
    if fd < 0:
        # Our job came from the journal: lock it (another process may be doing it).
        try:
            fd = os.open(own.path, os.O_RDWR)
        except FileNotFoundError:
            return None
        if not _lock_or_wait(fd, time.monotonic() + patience) or os.fstat(fd).st_nlink == 0:
            os.close(fd)
            return None
        own = Job(own.seq, own.hook, {**data, **own.data}, os.getpid(), own.path)
    return Ticket(own, fd, before)


def _peek(path: str) -> Job | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return _read_job(path, fd)
    finally:
        os.close(fd)


def _lock_or_wait(fd: int, deadline: float) -> bool:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL)


def _read_job(path: str, fd: int) -> Job | None:
    try:
        raw = json.loads(os.pread(fd, 1 << 24, 0) or b"null")
        seq, hook = int(os.path.basename(path)[:12]), str(raw["hook"])
        return Job(seq, hook, dict(raw["data"]), int(raw.get("pid", 0)), path)
    except (ValueError, KeyError, TypeError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_turn(ticket: Ticket, redo: Callable[[Job], None], patience: float = PATIENCE) -> None:
    """Wait until every job before ``ticket`` is done, doing those that no process is on
    (``redo(job)``), oldest first: their process died, or has not started yet. A push
    is only ever made by its own process, while its shim waits for it."""
    deadline = time.monotonic() + patience
    for path in ticket.before:
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue  # done already
        try:
            while True:
                if not _lock_or_wait(fd, deadline):
                    raise ConflictError(
                        f"the hook run before this one ({os.path.basename(path)}) has been working for {patience:.0f} s",
                        hint="this hook's work is kept and the next hook run does it; see 'opal hooks status'",
                    )
                if os.fstat(fd).st_nlink == 0:
                    break  # its process finished it
                job = _read_job(path, fd)
                shim = int(job.data.get("shim") or 0) if job else 0
                if job is not None and job.hook == "pre-push" and shim and _alive(shim) and time.monotonic() < deadline:
                    fcntl.flock(fd, fcntl.LOCK_UN)  # its own process is about to start
                    time.sleep(_POLL)
                    continue
                if job is not None:
                    redo(job)  # raises if it could not be done: the job stays for next time
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                break
        finally:
            os.close(fd)


def pending(opal_dir: str) -> list[Job]:
    """Work not done yet: running, waiting for its turn or for the next hook run, or
    still in the journal (its process has not started yet)."""
    directory = queue_dir(opal_dir)
    out = []
    try:
        with open(os.path.join(directory, "seq"), "rb") as fh:
            counters = _Counters.parse(fh.read())
    except FileNotFoundError:
        counters = _Counters()
    for journal, offset in ((JOURNAL + ".taking", counters.taking), (JOURNAL, counters.journal)):
        lines, _ = _read_lines(os.path.join(directory, journal), offset)
        for line in lines:
            parts = line.split(" ", 4)
            if len(parts) == 5 and parts[0].isdigit():
                data = {"shim": int(parts[0]), "git_dir": parts[4], **({"code": parts[2]} if parts[2] != "-" else {})}
                out.append(Job(0, parts[1], data, 0, os.path.join(directory, journal)))
    for name in _jobs(directory):
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            job = _read_job(path, fd)
        finally:
            os.close(fd)
        if job is not None:
            out.append(job)
    return out


def patiently(fn: Callable[[], object], patience: float = PATIENCE):
    """``fn()``, tried again while another opal process holds the repository's lock:
    work in the background may wait longer for it than a command typed at a prompt."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return fn()
        except ConflictError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


# ------------------------------------------------------------------ failures in the background


#: The failures kept for ``opal hooks status``: the newest, this many.
_KEEP_FAILURES = 50


def unsaid_line(hook: str, message: str) -> str:
    """How a failure nobody saw is said at the next hook run."""
    return " ".join(f"opal: an earlier {hook} hook failed in the background: {message}".split())


def record_failure(opal_dir: str, hook: str, message: str, *, said: bool) -> None:
    """Keep a failed hook's one line; ``said``: it already reached the git command's stderr.

    One not said goes to ``hooks/unsaid`` too, a plain line that the next hook's shim
    prints and removes before it starts opal (:data:`UNSAID`): a hook whose work runs in
    the background, as post-commit's does by default, has no stderr anyone reads."""
    directory = queue_dir(opal_dir)
    os.makedirs(directory, exist_ok=True)
    entry = {"time": time.time(), "hook": hook, "message": message, "said": said}
    with _flocked(os.path.join(directory, FAILURES)) as fd:
        kept = failures(opal_dir)[-(_KEEP_FAILURES - 1):]
        text = "".join(json.dumps(e) + "\n" for e in [*kept, entry])
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)
    if not said:
        # O_APPEND of one short line: a shim that takes the file at the same moment gets
        # it whole or leaves it for the next one.
        fd = os.open(os.path.join(directory, UNSAID), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, (unsaid_line(hook, message) + "\n").encode("utf-8", "replace"))
        finally:
            os.close(fd)


def failures(opal_dir: str) -> list[dict]:
    path = os.path.join(queue_dir(opal_dir), FAILURES)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(dict(json.loads(line)))
        except (ValueError, TypeError):
            continue
    return out


def unsaid_failures(opal_dir: str) -> list[str]:
    """The lines of failures no one was told of yet (the shims say them as well); from
    now on they count as told. Taken as the shim takes them: the file moved aside, read,
    removed."""
    path = os.path.join(queue_dir(opal_dir), UNSAID)
    taken = f"{path}.{os.getpid()}"
    try:
        os.rename(path, taken)
    except FileNotFoundError:
        return []
    try:
        with open(taken, encoding="utf-8", errors="replace") as fh:
            return [line for line in fh.read().splitlines() if line.strip()]
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(taken)


def clear_failures(opal_dir: str) -> int:
    path = os.path.join(queue_dir(opal_dir), FAILURES)
    n = len(failures(opal_dir))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return n


def shim_waiting(env_output: str | None) -> bool:
    """Whether the shim that started this hook still waits for its output (it removes
    the output file when it stops waiting)."""
    return bool(env_output) and os.path.exists(env_output)


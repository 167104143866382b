"""The order of the hooks' work, and what happens to work that outlives its git command.

A shim waits for opal's part of a hook at most ``hooks.timeout`` seconds; past that the
work goes on in the background while git carries on (see docs/hooks.md). So the work of
one hook can still be running when the next git command's hooks start: a commit
amended at once, another commit right after, a push. Each must happen in the order git
ran them (a post-rewrite moves the link that the post-commit before it writes; a push
sends the states recorded before it), and each must record what was true when git ran
it (a post-commit links the code commit of that moment, not whatever HEAD is later).

So every hook run takes a **ticket**: a numbered job file under
``<git-common-dir>/opal/hooks/`` holding what the hook saw (the code commit, its input
lines), locked by its process for as long as that process lives. It then waits for
every ticket numbered before it, and only then does its work and removes its ticket.
A ticket whose process died before it was done (kill -9, a reboot) is still there and
unlocked: the next hook run does that work first, from what the ticket says, so no
state is lost. A pre-push ticket is not redone (a push that was stopped must not
happen later, behind the user's back): it is dropped and said so.

Work that fails in the background, after the shim stopped waiting, goes to
``hooks/failures`` (one JSON object a line); ``opal hooks status`` shows it and the next
hook run says so once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from typing import Callable, Iterator

from .errors import ConflictError
from .structs import dataclass

QUEUE_DIR = "hooks"
FAILURES = "failures"
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
    """This process's place in the queue: a locked job file, and the jobs before it."""

    def __init__(self, job: Job, fd: int, before: list[str]) -> None:
        self.job, self._fd, self.before = job, fd, before

    def release(self) -> None:
        """Let the ticket go undone: the next hook run does its work."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def done(self) -> None:
        """The work is over (done or failed and reported): the ticket goes."""
        if self._fd < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.job.path)  # before the lock goes, so a waiter sees it done
        os.close(self._fd)
        self._fd = -1


def take(opal_dir: str, hook: str, data: dict) -> Ticket:
    """A ticket for this hook run, after every ticket already taken."""
    directory = queue_dir(opal_dir)
    os.makedirs(directory, exist_ok=True)
    # The counter and the job file are made under one short lock, and the job file is
    # locked before that lock goes: no one can see it unlocked while we live.
    with _flocked(os.path.join(directory, "seq")) as sfd:
        raw = os.pread(sfd, 32, 0).strip()
        seq = int(raw) + 1 if raw.isdigit() else 1
        before = [os.path.join(directory, n) for n in _jobs(directory)]
        path = os.path.join(directory, _job_name(seq, hook))
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        job = Job(seq, hook, data, os.getpid(), path)
        os.write(fd, json.dumps({"hook": hook, "pid": job.pid, "time": time.time(), "data": data}).encode())
        os.ftruncate(sfd, 0)
        os.pwrite(sfd, str(seq).encode(), 0)
    return Ticket(job, fd, before)


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
        raw = json.loads(os.pread(fd, 1 << 20, 0) or b"null")
        seq, hook = int(os.path.basename(path)[:12]), str(raw["hook"])
        return Job(seq, hook, dict(raw["data"]), int(raw.get("pid", 0)), path)
    except (ValueError, KeyError, TypeError):
        return None


def wait_turn(ticket: Ticket, redo: Callable[[Job], None], patience: float = PATIENCE) -> None:
    """Wait until every ticket before ``ticket`` is done; redo the work of those whose
    process died first (``redo(job)``), oldest first."""
    deadline = time.monotonic() + patience
    for path in ticket.before:
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue  # done already
        try:
            if not _lock_or_wait(fd, deadline):
                raise ConflictError(
                    f"the hook run before this one ({os.path.basename(path)}) has been working for {patience:.0f} s",
                    hint="this hook's work is kept and the next hook run does it; see 'opal hooks status'",
                )
            if os.fstat(fd).st_nlink == 0:
                continue  # its process finished it
            job = _read_job(path, fd)
            if job is not None:
                redo(job)  # raises if it could not be done: the ticket stays for next time
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        finally:
            os.close(fd)


def pending(opal_dir: str) -> list[Job]:
    """Tickets not done yet (their work is running, or waits for the next hook run)."""
    directory = queue_dir(opal_dir)
    out = []
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


def record_failure(opal_dir: str, hook: str, message: str, *, said: bool) -> None:
    """Keep a failed hook's one line; ``said``: it already reached the git command's stderr."""
    directory = queue_dir(opal_dir)
    os.makedirs(directory, exist_ok=True)
    entry = {"time": time.time(), "hook": hook, "message": message, "said": said}
    with _flocked(os.path.join(directory, FAILURES)) as fd:
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, (json.dumps(entry) + "\n").encode())


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


def unsaid_failures(opal_dir: str) -> list[dict]:
    """Failures no one was told of yet; they count as told from now on."""
    path = os.path.join(queue_dir(opal_dir), FAILURES)
    if not os.path.exists(path):
        return []
    with _flocked(path) as fd:
        entries = failures(opal_dir)
        new = [e for e in entries if not e.get("said")]
        if new:
            for e in entries:
                e["said"] = True
            text = "".join(json.dumps(e) + "\n" for e in entries[-50:])  # keep the newest 50
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode(), 0)
    return new


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


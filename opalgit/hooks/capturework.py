"""The capture worker: commit the turns the agents' hooks queued, each session on its branch.

``capturehook.sh`` (what an agent's hook runs) puts one file per event in
``<git common dir>/opal/capture/queue/`` (the agent and the folder on two lines, then
the event's JSON as the agent gave it) and starts this in the background
(``drain OPAL_DIR``), or, in a repository without opal, only this (``skip AGENT CWD``),
which notes the skip in the user's ``$XDG_STATE_HOME/opal/capture-skipped.log`` and
creates nothing in the repository. One worker
at a time drains the queue (``capture/worker.lock``, an OS file lock: a killed worker
releases it at once); a worker that finds it taken exits, and the one holding it looks
at the queue again after letting go, so an event queued at any moment is committed by
someone. Events of one session that queued up are committed once (a commit reads every
new turn of the file). Each is committed as ``opal commit --file TRANSCRIPT`` would,
on the branch that tracks the session (:func:`branch_for`), waiting patiently for the
repository lock (a typed ``opal`` command may hold it).

What happens is kept in ``capture/log`` (one JSON object a line; the errors are shown
by ``opal capture status``) and the last capture of each session in
``capture/sessions.json``. An event whose commit fails is logged and dropped, never
retried forever: the next event of the session commits everything new anyway.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from typing import Iterator, Mapping

from opalgit import fileio
from opalgit.errors import NothingToDoError, OpalError
from opalgit.hooks import queue as hookqueue
from opalgit.store.repo import Repository

CAPTURE_DIR = "capture"
QUEUE = "queue"
LOG = "log"
SESSIONS = "sessions.json"
CRASH = "crash"


#: An event is a few hundred bytes; a queue file longer than this is junk.
MAX_EVENT = 1 << 20
#: The capture log (a line per captured turn) and the skipped-repository log are cut
#: to their newer half past these sizes.
LOG_LIMIT = 1024 * 1024
SKIPPED_LIMIT = 256 * 1024
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "capturehook.sh")


def capture_dir(opal_dir: str) -> str:
    return os.path.join(opal_dir, CAPTURE_DIR)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _append(path: str, record: dict, limit: int) -> None:
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with contextlib.suppress(OSError):
        if os.path.getsize(path) > limit:
            with open(path, "rb") as fh:
                fh.seek(-limit // 2, os.SEEK_END)
                tail = fh.read()
            fileio.replace_atomically(path, tail[tail.find(b"\n") + 1:], sync=False)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def log(opal_dir: str, level: str, message: str, **fields) -> None:
    _append(os.path.join(capture_dir(opal_dir), LOG), {"time": _now(), "level": level, "message": message, **fields},
            LOG_LIMIT)


def skipped_log(env: Mapping[str, str]) -> str:
    base = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or "/", ".local", "state")
    return os.path.join(base, "opal", "capture-skipped.log")


def skip(agent: str, cwd: str, common: str, env: Mapping[str, str]) -> None:
    """Note that a turn of a repository without opal was not captured (``opal capture
    status`` there says so); nothing is created in the repository."""
    why = (f"opal is not set up in the git repository at {os.path.dirname(common.rstrip(os.sep))}: "
           "run 'opal init' there" if common else f"{cwd} is not inside a git repository")
    _append(skipped_log(env), {"time": _now(), "agent": agent, "cwd": cwd, "message": "capture skipped: " + why},
            SKIPPED_LIMIT)


def queued(opal_dir: str) -> list[str]:
    """The queue's files, oldest first (by the time they were written)."""
    folder = os.path.join(capture_dir(opal_dir), QUEUE)
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith(".")]
    except FileNotFoundError:
        return []
    def when(name: str) -> tuple[int, str]:
        try:
            return os.stat(os.path.join(folder, name)).st_mtime_ns, name
        except FileNotFoundError:
            return 0, name
    return [os.path.join(folder, n) for n in sorted(names, key=when)]


def read_entry(path: str) -> dict | None:
    """A queue file as ``{agent, cwd, time, event, session, transcript}`` (None: gone);
    ``error`` says what is wrong with an event that is not one."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_EVENT + 1)
            when = os.fstat(fh.fileno()).st_mtime
    except OSError:
        return None
    agent, _, rest = raw.partition(b"\n")
    cwd, _, body = rest.partition(b"\n")
    entry = {"agent": agent.decode("utf-8", "replace"), "cwd": cwd.decode("utf-8", "replace"),
             "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))}
    try:
        payload = json.loads(body.decode("utf-8")) if len(body) <= MAX_EVENT else None
    except (ValueError, UnicodeDecodeError):
        payload = None
    if not isinstance(payload, dict):
        entry["error"] = (f"{entry['agent']} hook gave no JSON object on stdin ({len(body)} bytes: {body[:60]!r}); "
                          "nothing captured")
        return entry
    sid, transcript, event = (payload.get(k) for k in ("session_id", "transcript_path", "hook_event_name"))
    entry["event"] = event if isinstance(event, str) else None
    if isinstance(payload.get("cwd"), str):
        entry["cwd"] = payload["cwd"]
    if not (isinstance(sid, str) and sid and isinstance(transcript, str) and transcript):
        entry["error"] = f"{entry['agent']} {event} hook gave no session_id and transcript_path; nothing captured"
        return entry
    entry.update(session=sid, transcript=transcript)
    return entry


@contextlib.contextmanager
def _worker_lock(opal_dir: str) -> Iterator[bool]:
    """Whether this process is the worker (the lock was free)."""
    path = os.path.join(capture_dir(opal_dir), "worker.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            yield False
            return
        yield True
    finally:
        os.close(fd)


def drain(opal_dir: str, env: Mapping[str, str]) -> int:
    """Commit everything queued, if no other worker is on it; how many events were done."""
    done = 0
    while True:
        with _worker_lock(opal_dir) as mine:
            if not mine:
                return done  # the worker holding the lock looks again after letting go
            while batch := queued(opal_dir):
                done += _process(opal_dir, batch, env)
        if not queued(opal_dir):
            return done


def _process(opal_dir: str, batch: list[str], env: Mapping[str, str]) -> int:
    """Commit each session of ``batch`` once, in the order its first event came."""
    sessions: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for path in batch:
        entry = read_entry(path)
        if entry is None or "error" in entry:
            if entry is not None:
                log(opal_dir, "error", entry["error"], agent=entry["agent"], event=entry.get("event"))
            _remove(path)
            continue
        sessions.setdefault((str(entry.get("agent")), str(entry.get("transcript"))), []).append((path, entry))
    for entries in sessions.values():
        try:
            capture(opal_dir, entries[-1][1], [e.get("event") for _, e in entries], env)
        finally:
            for path, _ in entries:
                _remove(path)
    return len(batch)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _repository(opal_dir: str, cwd: str | None) -> Repository:
    """The repository of the session's folder (a linked worktree has a current branch of
    its own), else the one whose opal folder this is."""
    if cwd and os.path.isdir(cwd):
        try:
            repo = Repository.discover(cwd)
            if os.path.normpath(repo.opal_dir) == os.path.normpath(opal_dir):
                return repo
        except OpalError:
            pass
    return Repository(os.path.dirname(opal_dir))


def branch_for(repo: Repository, agent: str, sid: str, transcript: str | None = None) -> str:
    """Where session ``sid`` of ``agent`` is recorded: the branch that tracks it (or whose
    head was recorded from ``transcript``: the id a hook gives need not be the one in the
    file); else the current branch while it has no state yet; else a new branch
    ``AGENT-SID8`` (two agents at work in one repository never take turns replacing one
    branch's session)."""
    from opalgit.history.states import branch_head, current_branch, load_state
    from opalgit.porcelain.sessions import tracked_session

    branches = repo.refs.branches()
    names = sorted(branches)
    for name in names:
        if tracked_session(repo, name) == (agent, sid):
            return name
    if transcript:
        real = os.path.realpath(transcript)
        for name in names:
            with contextlib.suppress(OpalError, OSError):
                header = load_state(repo, branches[name]).header
                src, s = header.source, header.session
                if src is not None and s is not None and s.agent == agent and os.path.realpath(src.path) == real:
                    return name
    current = current_branch(repo)
    if branch_head(repo, current) is None:
        return current
    base = f"{agent}-{sid[:8]}"
    name, n = base, 2
    while name in names:
        name, n = f"{base}-{n}", n + 1
    return name


def capture(opal_dir: str, entry: dict, events: list, env: Mapping[str, str]) -> None:
    """Commit the session of ``entry``; what happened goes to the log and ``sessions.json``."""
    agent, sid, transcript = str(entry.get("agent")), str(entry.get("session")), str(entry.get("transcript"))
    what = "/".join(dict.fromkeys(str(e) for e in events))
    fields = {"agent": agent, "session": sid, "event": what, "events": len(events)}
    try:
        repo = _repository(opal_dir, entry.get("cwd"))
        res = hookqueue.patiently(lambda: _commit(repo, env, agent, sid, transcript, entry.get("cwd")))
    except Exception as exc:  # noqa: BLE001 -- kept in the log; the agent must never see it
        message = exc.message if isinstance(exc, OpalError) else f"{type(exc).__name__}: {exc}"
        hint = getattr(exc, "hint", None)
        log(opal_dir, "error", f"capture of {agent} session {sid[:8]} ({what}) failed: {message}"
                               + (f" (hint: {hint})" if hint else ""), **fields)
        _remember(opal_dir, agent, sid, {"time": _now(), "event": what, "error": message, "transcript": transcript})
        return
    if res is None:
        message, record = "nothing new", {}
    else:
        branch, oid, n = res
        message = f"{n} new turn{'s' if n != 1 else ''} as state {oid[:7]} on {branch}"
        record = {"branch": branch, "state": oid, "new_turns": n}
    log(opal_dir, "info", f"captured {agent} session {sid[:8]} ({what}): {message}", **fields)
    _remember(opal_dir, agent, sid, {"time": _now(), "event": what, "transcript": transcript, **record})


def _commit(repo: Repository, env: Mapping[str, str], agent: str, sid: str, transcript: str,
            cwd: str | None) -> tuple[str, str, int] | None:
    from opalgit.porcelain.commit import commit

    # Chosen outside the commit's lock: only this worker (one per repository) picks
    # branches for sessions, and a typed 'opal commit' meanwhile only moves its own.
    branch = branch_for(repo, agent, sid, transcript)
    try:
        res = commit(repo, env, cwd or repo.workdir or os.getcwd(), agent=agent, file=transcript, branch=branch)
    except NothingToDoError:
        return None
    assert res.oid is not None
    return res.branch, res.oid.hex(), res.new_turns


def last_captures(opal_dir: str) -> dict[str, dict]:
    """The last capture of each session, by ``AGENT:SESSION``."""
    try:
        with open(os.path.join(capture_dir(opal_dir), SESSIONS), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remember(opal_dir: str, agent: str, sid: str, record: dict) -> None:
    data = last_captures(opal_dir)  # only the worker writes it, under the worker lock
    data[f"{agent}:{sid}"] = record
    fileio.replace_atomically(os.path.join(capture_dir(opal_dir), SESSIONS),
                              json.dumps(data, indent=1, sort_keys=True).encode("utf-8"), sync=False)


def log_entries(opal_dir: str, limit: int = 200) -> list[dict]:
    """The newest ``limit`` lines of the capture log, oldest first."""
    try:
        with open(os.path.join(capture_dir(opal_dir), LOG), encoding="utf-8", errors="replace") as fh:
            lines = fh.readlines()[-limit:]
    except OSError:
        return []
    out = []
    for line in lines:
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                out.append(item)
    return out


def main(argv: list[str]) -> int:
    """``drain OPAL_DIR`` or ``skip AGENT CWD COMMON``: what the hook starts in the background."""
    with contextlib.suppress(OSError):
        os.setsid()  # the agent's Ctrl-C and exit do not reach the work from now on
    env = dict(os.environ)
    if argv[:1] == ["skip"] and len(argv) >= 4:
        skip(argv[1], argv[2], argv[3], env)
        return 0
    opal_dir = argv[1] if argv[:1] == ["drain"] and len(argv) >= 2 else ""
    if not opal_dir:
        return 0
    try:
        drain(opal_dir, env)
    except Exception as exc:  # noqa: BLE001 -- nobody waits for this process: the log is where it is said
        log(opal_dir, "error", f"capture worker failed: {type(exc).__name__}: {exc}")
    return 0

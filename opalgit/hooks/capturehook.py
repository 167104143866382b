"""The command an agent's hook runs for ``opal capture``: queue the turn, start the worker, return.

An agent waits for its hooks (Claude Code and Codex before the next turn, Gemini CLI
for ``AfterAgent``), so this runs as a script of its own, ``python -I -S
.../capturehook.py AGENT``: it imports nothing but the standard library (no site
packages, no opal, no click), reads the event the agent gives on stdin, appends one
file to the repository's capture queue (``<git common dir>/opal/capture/queue/``) and
starts the worker (:mod:`opalgit.hooks.capturework`) in a session of its own, with its
standard streams away from the agent's pipes (an agent waits until the hook's stdout
and stderr close, so a worker that kept them would hold the agent up as long as it
runs). It prints nothing: stdout is the agent's protocol (Gemini parses it as JSON,
Claude and Codex read decisions from it).

Before a compaction (``PreCompact``, ``PreCompress``) the agent is about to drop turns
from its context, so this waits, at most :data:`COMPACTION_WAIT` seconds, until the
worker has committed them (its queue file is gone); past that it returns and the worker
goes on. It never fails: exit status 0 whatever happens, and what went wrong goes to the
capture log (``opal capture status`` shows it). In a folder whose git repository has no
opal (``opal init`` was not run) nothing is created there: one line goes to the user's
``$XDG_STATE_HOME/opal/capture-skipped.log`` instead (see docs/capture.md).
"""

import json
import os
import sys
import time

#: Bytes of stdin read at most: an event is a few hundred bytes; one this long is junk.
MAX_INPUT = 1 << 20
#: The events before which an agent compacts its context, by agent.
COMPACTION = {"claude": ("PreCompact",), "codex": ("PreCompact",), "gemini": ("PreCompress",)}
#: Seconds a compaction's hook waits for its turns to be committed (the agents' limit
#: for opal's hook is 30 s, set by ``opal capture install``).
COMPACTION_WAIT = 20.0
#: The skipped-repository log is cut to its newer half past this size.
SKIPPED_LIMIT = 256 * 1024
WORKER = "import sys; del sys.path[0]; from opalgit.hooks.capturework import main; sys.exit(main(sys.argv[1:]))"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _read_text(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except (OSError, ValueError):
        return None


def common_dir(start):
    """The git common dir of the repository around ``start`` (None: not in one), found the
    way git does for the usual layouts: a ``.git`` folder, or a ``.git`` file naming the
    git dir of a linked worktree or submodule (whose ``commondir`` names the common one)."""
    path = os.path.abspath(start)
    while True:
        dot = os.path.join(path, ".git")
        if os.path.isdir(dot):
            return dot
        if os.path.isfile(dot):
            text = _read_text(dot) or ""
            if not text.startswith("gitdir:"):
                return None
            git_dir = os.path.normpath(os.path.join(path, text[len("gitdir:"):].strip()))
            common = _read_text(os.path.join(git_dir, "commondir"))
            return os.path.normpath(os.path.join(git_dir, common)) if common else git_dir
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _append(path, record, limit=None):
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if limit is not None:
        try:
            if os.path.getsize(path) > limit:
                with open(path, "rb") as fh:
                    fh.seek(-limit // 2, os.SEEK_END)
                    tail = fh.read()
                tail = tail[tail.find(b"\n") + 1:]
                with open(path, "wb") as fh:
                    fh.write(tail)
        except OSError:
            pass
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def skipped_log(env):
    base = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or "/", ".local", "state")
    return os.path.join(base, "opal", "capture-skipped.log")


#: The capture log (a line per captured turn) is cut to its newer half past this size.
LOG_LIMIT = 1024 * 1024


def log(opal_dir, level, message, **fields):
    _append(os.path.join(opal_dir, "capture", "log"), {"time": _now(), "level": level, "message": message, **fields},
            limit=LOG_LIMIT)


def _spawn_worker(opal_dir):
    """The worker, in a session of its own (the agent's Ctrl-C and exit do not reach it),
    its stdin and stdout on /dev/null and its stderr appended to ``capture/crash``
    (only an opal that cannot start writes there: the worker logs its own errors)."""
    crash = os.path.join(opal_dir, "capture", "crash")
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, crash, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
    ]
    # -c, not -m: either puts the current folder (the agent's project) first on sys.path,
    # and a project with an ``opalgit`` folder of its own must not be imported as opal.
    argv = [sys.executable, "-c", WORKER, opal_dir]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONNOUSERSITE", "PYTHONSAFEPATH")}
    return os.posix_spawn(sys.executable, argv, env, file_actions=actions, setsid=True)


def run(agent, stdin, cwd, env):
    """Queue the event read from ``stdin`` (bytes) and start the worker; the queue file's
    path, or None when nothing was queued (said in a log)."""
    try:
        payload = json.loads(stdin.decode("utf-8")) if stdin.strip() else None
    except (ValueError, UnicodeDecodeError):
        payload = None
    where = payload.get("cwd") if isinstance(payload, dict) and isinstance(payload.get("cwd"), str) else cwd
    common = common_dir(where) if where and os.path.isdir(where) else None
    opal_dir = os.path.join(common, "opal") if common else None
    if opal_dir is None or not os.path.exists(os.path.join(opal_dir, "config")):
        why = (f"opal is not set up in the git repository at {os.path.dirname(common)}: run 'opal init' there"
               if common else f"{where} is not inside a git repository")
        _append(skipped_log(env), {"time": _now(), "agent": agent, "cwd": where, "message": "capture skipped: " + why},
                limit=SKIPPED_LIMIT)
        return None
    if not isinstance(payload, dict):
        log(opal_dir, "error", f"{agent} hook gave no JSON object on stdin ({len(stdin)} bytes: "
                               f"{stdin[:80]!r}); nothing captured", agent=agent)
        return None
    sid, transcript, event = (payload.get(k) for k in ("session_id", "transcript_path", "hook_event_name"))
    if not (isinstance(sid, str) and sid and isinstance(transcript, str) and transcript):
        log(opal_dir, "error", f"{agent} {event} hook gave no session_id and transcript_path; nothing captured",
            agent=agent, event=event)
        return None
    entry = {"agent": agent, "event": event, "session": sid, "transcript": transcript, "cwd": where,
             "time": _now(), "pid": os.getpid()}
    queue = os.path.join(opal_dir, "capture", "queue")
    os.makedirs(queue, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}.json"
    tmp = os.path.join(queue, "." + name)
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(entry, fh)
    path = os.path.join(queue, name)
    os.replace(tmp, path)  # whole or absent: the worker never reads half an entry
    _spawn_worker(opal_dir)
    if event in COMPACTION.get(agent, ()):
        deadline = time.monotonic() + COMPACTION_WAIT
        while os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
    return path


def main(argv):
    agent = argv[1] if len(argv) > 1 else "unknown"
    try:
        stdin = sys.stdin.buffer.read(MAX_INPUT)
    except (OSError, ValueError, AttributeError):
        stdin = b""
    try:
        run(agent, stdin, os.getcwd(), os.environ)
    except Exception as exc:  # noqa: BLE001 -- a hook never fails the agent; said where it can be
        try:
            _append(skipped_log(os.environ), {"time": _now(), "agent": agent, "message": f"capture hook failed: {exc!r}"},
                    limit=SKIPPED_LIMIT)
        except Exception:  # noqa: BLE001
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

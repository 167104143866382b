"""Where GitHub Copilot CLI keeps its sessions: ``<home>/session-state/<uuid>/events.jsonl``.

*home* is ``$COPILOT_HOME`` when set, else ``~/.copilot``. A session is a folder named
by its id holding ``events.jsonl`` (the event log opal reads), ``workspace.yaml`` (id,
cwd, git root, branch, name, times), ``checkpoints/`` (``index.md`` and the compaction
checkpoints), ``rewind-file-snapshots/`` (``index.json``, ``tracking.json`` and
``backups/<sha256>``: the file contents ``/rewind`` restores) and empty ``files/`` and
``research/``. ``<home>/session-store.db`` is an SQLite index of every session, which
``--resume <id>`` does not need (a session folder alone resumes). Finding a session by
id, listing a folder's sessions (by the ``cwd`` of ``workspace.yaml``, else of the
``session.start`` event) and reading a session's side files live here.
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any, Mapping

from opalgit.agents import sessionfiles
from opalgit.agents.base import SessionFile, folder_forms, home_folder

__all__ = ["AGENT", "EVENTS", "SIDE_FILE_LIMIT", "copilot_home", "find_session", "find_sessions", "side_folder",
           "workspace_value", "yaml_scalar"]

AGENT = "copilot"
#: The event log's name inside a session's folder.
EVENTS = "events.jsonl"
#: Side files bigger than this are not stored (said in one line).
SIDE_FILE_LIMIT = sessionfiles.SIDE_FILE_LIMIT
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_HEAD_LIMIT = 1 << 20


def copilot_home(env: Mapping[str, str]) -> str | None:
    """``$COPILOT_HOME`` when set and not empty, else ``$HOME/.copilot``; None without either."""
    return home_folder(env, "COPILOT_HOME", ".copilot")


def workspace_value(text: str, key: str) -> str | None:
    """The scalar ``key`` of a ``workspace.yaml`` (flat ``key: value`` lines, as Copilot
    writes it: plain, 'single-quoted' or "double-quoted"); None when absent."""
    m = re.search(rf"(?m)^{re.escape(key)}:[ \t]*(.*?)[ \t]*$", text)
    if not m:
        return None
    raw = m.group(1)
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1].replace("''", "'")
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        try:
            value = json.loads(raw)
        except ValueError:
            return raw[1:-1]
        return value if isinstance(value, str) else raw
    return raw or None


def yaml_scalar(value: str) -> str:
    """``value`` as a YAML scalar that reads back as that string: plain when it is
    safe so, else double-quoted (JSON's escapes are YAML's)."""
    if value and re.fullmatch(r"[A-Za-z0-9/_.@+-][A-Za-z0-9/_.@+ :-]*", value) and ": " not in value \
            and not value.endswith((" ", ":")) and value.lower() not in ("true", "false", "null", "yes", "no", "~"):
        return value
    return json.dumps(value, ensure_ascii=False)


def _read_small(path: str, limit: int = _HEAD_LIMIT) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def _start_cwd(events: str) -> str | None:
    """The ``cwd`` of the ``session.start`` on the first line of an event log."""
    head = _read_small(events)
    if not head:
        return None
    try:
        first = json.loads(head.split(b"\n", 1)[0])
    except ValueError:
        return None
    data = first.get("data") if isinstance(first, dict) and first.get("type") == "session.start" else None
    ctx = data.get("context") if isinstance(data, dict) else None
    cwd = ctx.get("cwd") if isinstance(ctx, dict) else None
    return cwd if isinstance(cwd, str) and cwd else None


def _session_cwd(folder: str) -> str | None:
    text = _read_small(os.path.join(folder, "workspace.yaml"), 64 * 1024)
    if text:
        cwd = workspace_value(text.decode("utf-8", "replace"), "cwd")
        if cwd:
            return cwd
    return _start_cwd(os.path.join(folder, EVENTS))


def _session_file(folder: str, sid: str) -> SessionFile | None:
    path = os.path.join(folder, EVENTS)
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return SessionFile(AGENT, sid, path, st.st_mtime, st.st_size)


def _folders(home: str) -> list[tuple[str, str]]:
    root = os.path.join(home, "session-state")
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [(n, os.path.join(root, n)) for n in names if _ID_RE.match(n) and os.path.isdir(os.path.join(root, n))]


def find_sessions(cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
    """The sessions whose working folder is ``cwd`` (or its real path), newest first."""
    home = copilot_home(env)
    if home is None:
        return []
    wanted = {f.rstrip("/") or "/" for f in folder_forms(cwd)}
    found = []
    for sid, folder in _folders(home):
        at = _session_cwd(folder)
        if at is None or (at.rstrip("/") or "/") not in wanted:
            continue
        sf = _session_file(folder, sid)
        if sf is not None and sf.size > 0:
            found.append(sf)
    return sorted(found, key=lambda s: (-s.mtime, s.path))


def find_session(session_id: str, env: Mapping[str, str]) -> SessionFile | None:
    """The event log of the session ``session_id``, or of the one session whose id starts
    with it (8 characters or more, as ``copilot --resume`` takes a prefix)."""
    home = copilot_home(env)
    if home is None or not session_id or not _ID_RE.match(session_id):
        return None
    exact = _session_file(os.path.join(home, "session-state", session_id), session_id)
    if exact is not None or len(session_id) < 8:
        return exact
    hits = [(sid, folder) for sid, folder in _folders(home) if sid.startswith(session_id)]
    return _session_file(hits[0][1], hits[0][0]) if len(hits) == 1 else None


def side_folder(path: str, warnings: list[str]) -> dict[str, bytes]:
    """The files of the session's folder beside ``events.jsonl`` (``workspace.yaml``,
    ``checkpoints/``, ``rewind-file-snapshots/``, whatever else Copilot keeps per session),
    by "/"-separated relative path. Lock files (``*.lock``: held by a running Copilot,
    empty) are not stored; symbolic links are not followed."""
    folder = os.path.dirname(os.path.abspath(path))
    # Only a session's own folder: an events.jsonl copied anywhere else takes no neighbours along.
    if os.path.basename(path) != EVENTS or not (
            os.path.isfile(os.path.join(folder, "workspace.yaml"))
            or os.path.basename(os.path.dirname(folder)) == "session-state"):
        return {}
    return sessionfiles.read_side_folder(folder, warnings,
                                         skip=lambda rel, name: rel == EVENTS or name.endswith(".lock"))


def is_str(v: Any) -> bool:
    return isinstance(v, str) and v != ""

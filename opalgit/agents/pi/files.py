"""Where Pi keeps its sessions: ``<agent dir>/sessions/--<cwd>--/<time>_<id>.jsonl``.

The agent dir is ``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``. A project's folder is
named after its working directory: ``--`` + the path without its leading ``/``, with every
``/``, ``\\`` and ``:`` as ``-``, + ``--`` (``getDefaultSessionDirPath`` in Pi's
``session-manager.js``). ``$PI_CODING_AGENT_SESSION_DIR`` replaces that layout with one flat
folder for every project, told apart by the header's ``cwd``. A file's first line is its
header ``{"type": "session", "version": 3, "id", "timestamp", "cwd"}``; Pi finds a session by
the header's id, never by the file name.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from opalgit import fileio, jsonl
from opalgit.agents.base import SessionFile, folder_forms
from opalgit.errors import InputError

__all__ = ["AGENT", "agent_dir", "file_name", "find_session", "find_sessions", "header_of", "project_folder",
           "project_key", "sessions_dir"]

AGENT = "pi"
#: Pi reads at most this much of a file looking for its header (MAX_SESSION_HEADER_SCAN_BYTES).
HEADER_LIMIT = 1024 * 1024


def agent_dir(env: Mapping[str, str]) -> str | None:
    """``$PI_CODING_AGENT_DIR``, else ``$HOME/.pi/agent``; None without either."""
    if env.get("PI_CODING_AGENT_DIR"):
        return env["PI_CODING_AGENT_DIR"]
    home = env.get("HOME") or env.get("USERPROFILE")
    return os.path.join(home, ".pi", "agent") if home else None


def flat_dir(env: Mapping[str, str]) -> str | None:
    """``$PI_CODING_AGENT_SESSION_DIR``: one folder for the sessions of every project."""
    return env.get("PI_CODING_AGENT_SESSION_DIR") or None


def sessions_dir(env: Mapping[str, str]) -> str | None:
    base = agent_dir(env)
    return os.path.join(base, "sessions") if base else None


def project_key(cwd: str) -> str:
    """The name of a working directory's session folder, as Pi makes it."""
    return "--" + re.sub(r"[/\\:]", "-", re.sub(r"^[/\\]", "", cwd)) + "--"


def project_folder(cwd: str, env: Mapping[str, str]) -> str | None:
    """The folder Pi writes ``cwd``'s new sessions to (and looks in first for an id)."""
    flat = flat_dir(env)
    if flat:
        return flat
    base = sessions_dir(env)
    return os.path.join(base, project_key(cwd)) if base else None


def file_name(session_id: str, stamp: str) -> str:
    """``<ISO time with ':' and '.' as '-'>_<id>.jsonl``, as Pi names a new session's file."""
    return re.sub(r"[:.]", "-", stamp) + "_" + session_id + ".jsonl"


def header_of(path: str) -> dict | None:
    """The header of a session file: its first JSON line when that is ``type: session``
    with a string id, as Pi's discovery reads it (blank and malformed lines before it skipped)."""
    try:
        with fileio.open_input(path, what="session file") as fh:
            head = fh.read(HEADER_LIMIT)
    except (OSError, InputError):
        return None
    for raw in head.split(b"\n"):
        if not raw.strip():
            continue
        try:
            value: Any = jsonl.parse(raw)
        except jsonl.ParseFailure:
            continue
        if isinstance(value, dict) and value.get("type") == "session" and isinstance(value.get("id"), str):
            return value
        return None
    return None


def _scan(folder: str, cwds: list[str] | None = None) -> list[SessionFile]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    out = []
    for entry in entries:
        if not entry.name.endswith(".jsonl"):
            continue
        try:
            if not entry.is_file():
                continue
            st = entry.stat()
        except OSError:
            continue
        head = header_of(entry.path)
        if head is None or (cwds is not None and head.get("cwd") not in cwds):
            continue
        out.append(SessionFile(AGENT, head["id"], entry.path, st.st_mtime, st.st_size))
    return out


def find_sessions(cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
    """The sessions of the project folder ``cwd`` (those ``pi --resume`` lists), newest first."""
    forms = folder_forms(cwd)
    flat = flat_dir(env)
    if flat:
        found = _scan(flat, forms)
    else:
        base = sessions_dir(env)
        found = [sf for form in forms for sf in _scan(os.path.join(base, project_key(form)))] if base else []
    unique = {sf.path: sf for sf in found}
    return sorted(unique.values(), key=lambda s: (-s.mtime, s.path))


def find_session(session_id: str, env: Mapping[str, str]) -> SessionFile | None:
    """The file of the session ``session_id``, in any project's folder (the largest, when
    copies of a file carry the same id)."""
    if not session_id:
        return None
    flat = flat_dir(env)
    folders = [flat] if flat else []
    base = sessions_dir(env)
    if not flat and base:
        try:
            folders = sorted(e.path for e in os.scandir(base) if e.is_dir())
        except OSError:
            folders = []
    hits = [sf for folder in folders for sf in _scan(folder) if sf.id == session_id]
    return max(hits, key=lambda s: (s.size, s.mtime), default=None)

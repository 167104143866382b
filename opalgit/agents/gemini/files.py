"""Where Gemini CLI keeps its sessions: ``<base>/tmp/<project>/chats/session-<time>-<id8>.jsonl``.

The base is ``<home>/.gemini``, *home* being ``$GEMINI_CLI_HOME`` when set, else
``$HOME`` (formats.md §3.1). A project's folder is ``<base>/tmp/<slug>``, the slug
from ``<base>/projects.json``, or, for a project never registered,
``<base>/tmp/<sha256 of the project path>``; its ``.project_root`` names the project.
Finding a session by id, listing a folder's sessions (those the CLI would offer to
resume) and finding a session's project folder live here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Mapping

from opalgit import fileio, jsonl
from opalgit.agents.base import SessionFile, folder_forms
from opalgit.agents.gemini.log import AGENT, IGNORED_PREFIXES, _content_string, _is_id, _replay, document
from opalgit.errors import InputError

__all__ = ["cwd_for", "find_session", "find_sessions", "gemini_dir", "load_registry", "marker_owner", "project_dirs",
           "project_hash", "read_text", "slugify"]

#: Sessions larger than this are listed without replaying them to prove they hold a prompt.
RESUMABLE_CHECK_LIMIT = 256 * 1024
#: Registries and documents larger than this are refused rather than loaded whole.
DOCUMENT_LIMIT = 64 * 1024 * 1024


def gemini_dir(env: Mapping[str, str]) -> str | None:
    """``$GEMINI_CLI_HOME/.gemini``, else ``$HOME/.gemini``; None without either."""
    home = env.get("GEMINI_CLI_HOME") or env.get("HOME") or env.get("USERPROFILE")
    return os.path.join(home, ".gemini") if home else None


def project_hash(root: str) -> str:
    """The ``projectHash`` of a project folder: SHA-256 hex of its absolute path."""
    return hashlib.sha256(root.encode("utf-8", "surrogatepass")).hexdigest()


def slugify(name: str) -> str:
    """The CLI's project slug of a folder name (lower-case, ``[a-z0-9-]``)."""
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", name.lower())).strip("-")
    return slug or "project"


def read_text(path: str, limit: int = 64 * 1024) -> str | None:
    try:
        with fileio.open_input(path, what="marker file") as fh:  # never a FIFO: it would block
            return fh.read(limit).decode("utf-8", "replace")
    except (OSError, InputError):
        return None


def cwd_for(path: str, phash: str) -> str | None:
    """The project folder of a session file, proven by its ``projectHash``."""
    project = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    marker = read_text(os.path.join(project, ".project_root"))
    if marker is not None and project_hash(marker.strip()) == phash:
        return marker.strip()
    registry = load_registry(os.path.join(os.path.dirname(os.path.dirname(project)), "projects.json"))[0]
    for root in registry["projects"]:
        if project_hash(root) == phash:
            return root
    return None


def load_registry(path: str) -> tuple[dict, str | None]:
    """``projects.json`` as ``{"projects": {...}}`` and, if it is unusable, why."""
    try:
        data = json.loads(fileio.read_input(path, what="project registry", limit=DOCUMENT_LIMIT).decode("utf-8"))
    except FileNotFoundError:
        return {"projects": {}}, None
    except InputError as exc:
        return {"projects": {}}, f"unreadable ({exc.message})"
    except (OSError, ValueError, RecursionError) as exc:
        return {"projects": {}}, f"unreadable ({exc.__class__.__name__})"
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict) or not all(
        isinstance(v, str) and re.fullmatch(r"[a-z0-9-]+", v) for v in projects.values()
    ):
        return {"projects": {}}, "not in the registry's schema"
    return data, None


def marker_owner(base: str, slug: str) -> list[str]:
    owners = []
    for sub in ("tmp", "history"):
        text = read_text(os.path.join(base, sub, slug, ".project_root"))
        if text is not None:
            owners.append(text.strip())
    return owners


def project_dirs(base: str, cwd: str) -> list[str]:
    """Folders under ``<base>/tmp`` that may hold ``cwd``'s chats: slug first, then hash."""
    roots = folder_forms(cwd)
    projects = load_registry(os.path.join(base, "projects.json"))[0]["projects"]
    out: list[str] = []
    for root in roots:
        for name in (projects.get(root), project_hash(root)):
            if name and os.path.join(base, "tmp", name) not in out:
                out.append(os.path.join(base, "tmp", name))
    return out


def _head(path: str) -> dict | None:
    """The header of a session file from its first bytes: ``{sessionId, kind}`` or None."""
    text = read_text(path, 16 * 1024)
    if not text:
        return None
    first = text.split("\n", 1)[0]
    try:
        value = json.loads(first)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value if _is_id(value.get("sessionId")) else None
    # A legacy document: its top-level keys come before the messages.
    m = re.search(r'"sessionId"\s*:\s*("(?:[^"\\]|\\.)*")', text)
    if not m:
        return None
    k = re.search(r'"kind"\s*:\s*"(\w+)"', text[: m.start()] + text[m.end():])
    try:
        return {"sessionId": json.loads(m.group(1)), "kind": k.group(1) if k else None}
    except ValueError:
        return None


def _resumable_message(msg: Any) -> bool:
    if not isinstance(msg, dict):
        return False
    text = _content_string(msg.get("content")).strip()
    if msg.get("type") == "user":
        return bool(text) and not text.startswith(IGNORED_PREFIXES)
    if msg.get("type") == "gemini":
        return bool(text) or bool(msg.get("toolCalls")) or bool(msg.get("thoughts"))
    return False


def _has_resumable_content(path: str, size: int) -> bool:
    if size > RESUMABLE_CHECK_LIMIT:
        return True  # replaying every big file to list it is too slow; assume it holds a chat
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return False
    doc = document(data) if path.endswith(".json") else None
    if doc is not None:
        return any(_resumable_message(m) for m in doc[1])
    values = []
    for raw in data.split(b"\n"):
        try:
            values.append(jsonl.parse(raw))
        except jsonl.ParseFailure:
            continue
    return any(_resumable_message(e.msg) for e in _replay(values).entries)


def _scan(folder: str) -> list[tuple[SessionFile, dict]]:
    chats = os.path.join(folder, "chats")
    try:
        entries = list(os.scandir(chats))
    except OSError:
        return []
    out = []
    for entry in entries:
        name = entry.name
        if not name.startswith("session-") or not name.endswith((".json", ".jsonl")):
            continue
        try:
            if not entry.is_file():
                continue
            st = entry.stat()
        except OSError:
            continue
        head = _head(entry.path) if st.st_size else None
        if head is None or head.get("kind") == "subagent":
            continue
        sf = SessionFile(AGENT, str(head["sessionId"]), entry.path, st.st_mtime, st.st_size)
        out.append((sf, head))
    return out


def find_sessions(cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
    """The sessions of the project folder ``cwd`` the CLI would offer to resume, newest first."""
    base = gemini_dir(env)
    if base is None or not os.path.isdir(base):
        return []
    best: dict[str, SessionFile] = {}
    for folder in project_dirs(base, cwd):
        for sf, _ in _scan(folder):
            if not _has_resumable_content(sf.path, sf.size):
                continue
            old = best.get(sf.id)  # the CLI lists each sessionId once: the newest file
            if old is None or sf.mtime > old.mtime:
                best[sf.id] = sf
    return sorted(best.values(), key=lambda s: (-s.mtime, s.path))


def find_session(session_id: str, env: Mapping[str, str]) -> SessionFile | None:
    """The file of the session ``session_id``, in any project (the one with content first)."""
    base = gemini_dir(env)
    if not session_id or base is None:
        return None
    try:
        folders = sorted(e.path for e in os.scandir(os.path.join(base, "tmp")) if e.is_dir())
    except OSError:
        return None
    hits = [sf for folder in folders for sf, _ in _scan(folder) if sf.id == session_id]
    # Resuming leaves a stub file with the same id and nothing in it: prefer content.
    return max(hits, key=lambda s: (_has_resumable_content(s.path, s.size), s.mtime, s.size), default=None)

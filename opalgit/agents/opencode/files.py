"""Where opencode keeps its sessions: the SQLite database ``<data>/opencode/opencode.db``.

``<data>`` is ``$XDG_DATA_HOME``, else ``$HOME/.local/share``; ``$OPENCODE_DB`` names the
database itself when set. Tables ``session`` (columns), ``message`` and ``part`` (JSON in
``data``) hold the history (formats.md, clients.md "opencode 1.18.33").

opal reads the database directly, **read-only** (an SQLite ``mode=ro`` URI), rather than
through ``opencode export``: listing a folder's sessions then needs no opencode binary, costs
no process start (opencode takes seconds to boot), and can never change the live database.
opal's commit reads a session *file* by path and proves a later read continues it by the
hash of its bytes, so each session found in the database is mirrored as the JSON
``opencode export`` prints (built from the same rows, the same shape) into
``<cache>/opalgit/opencode/<id>.json``, rewritten only when the session changed; that file is
what :mod:`.read` reads, exactly like an export a user made by hand. Exports opal writes
for ``opencode import`` go to ``<data>/opencode/opal-export/<id>.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import urllib.parse
from typing import Any, Mapping

from opalgit.agents.base import SessionFile, folder_forms
from opalgit.errors import InputError

__all__ = ["AGENT", "cache_dir", "connect", "data_dir", "db_path", "export_dir", "export_doc", "find_session",
           "find_sessions", "message_counts", "session_rows"]

AGENT = "opencode"


def data_dir(env: Mapping[str, str]) -> str | None:
    """``$XDG_DATA_HOME/opencode``, else ``$HOME/.local/share/opencode``; None without either."""
    if env.get("XDG_DATA_HOME"):
        return os.path.join(env["XDG_DATA_HOME"], "opencode")
    home = env.get("HOME") or env.get("USERPROFILE")
    return os.path.join(home, ".local", "share", "opencode") if home else None


def db_path(env: Mapping[str, str]) -> str | None:
    if env.get("OPENCODE_DB"):
        return env["OPENCODE_DB"]
    base = data_dir(env)
    return os.path.join(base, "opencode.db") if base else None


def export_dir(env: Mapping[str, str]) -> str | None:
    """Where opal writes the JSON it hands ``opencode import`` (kept: a failed import is redone from it)."""
    base = data_dir(env)
    return os.path.join(base, "opal-export") if base else None


def cache_dir(env: Mapping[str, str]) -> str | None:
    """Where sessions found in the database are mirrored as export JSON (see the module)."""
    if env.get("XDG_CACHE_HOME"):
        return os.path.join(env["XDG_CACHE_HOME"], "opalgit", "opencode")
    home = env.get("HOME") or env.get("USERPROFILE")
    return os.path.join(home, ".cache", "opalgit", "opencode") if home else None


def connect(db: str) -> sqlite3.Connection:
    """The database opened read-only: opal never writes opencode's live database."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(db)) + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=5)
    conn.execute("PRAGMA query_only = 1")
    return conn


def _db_error(db: str, exc: Exception) -> InputError:
    return InputError(f"cannot read the opencode database ({exc})", path=db,
                      hint="close opencode if it is migrating the database, then run the command again")


def session_rows(db: str, *, folders: list[str] | None = None, session_id: str | None = None) -> list[tuple]:
    """``(id, directory, time_updated)`` of the sessions of ``folders`` (or the one ``session_id``)."""
    try:
        with contextlib.closing(connect(db)) as conn:
            if session_id is not None:
                return conn.execute("SELECT id, directory, time_updated FROM session WHERE id = ?",
                                    (session_id,)).fetchall()
            marks = ",".join("?" * len(folders or []))
            return conn.execute(f"SELECT id, directory, time_updated FROM session WHERE directory IN ({marks}) "
                                "AND parent_id IS NULL AND time_archived IS NULL ORDER BY time_updated DESC",
                                list(folders or [])).fetchall()
    except sqlite3.Error as exc:
        raise _db_error(db, exc) from None



def _json(text: Any) -> Any:
    return json.loads(text) if isinstance(text, str) and text else None


def _session_info(row: sqlite3.Row) -> dict:
    """A ``session`` row as opencode's ``Session.Info`` (what ``opencode export`` prints as ``info``)."""
    r = dict(row)
    info: dict[str, Any] = {"id": r["id"], "slug": r["slug"], "projectID": r["project_id"]}
    if r.get("workspace_id"):
        info["workspaceID"] = r["workspace_id"]
    info["directory"] = r["directory"]
    if r.get("path") is not None:
        info["path"] = r["path"]
    if r.get("parent_id"):
        info["parentID"] = r["parent_id"]
    info["title"] = r["title"]
    for key in ("agent",):
        if r.get(key) is not None:
            info[key] = r[key]
    if r.get("model"):
        info["model"] = _json(r["model"])
    info["version"] = r["version"]
    if r.get("summary_additions") is not None or r.get("summary_deletions") is not None:
        summary = {"additions": r["summary_additions"], "deletions": r["summary_deletions"], "files": r["summary_files"]}
        if r.get("summary_diffs"):
            summary["diffs"] = _json(r["summary_diffs"])
        info["summary"] = summary
    if r.get("share_url"):
        info["share"] = {"url": r["share_url"]}
    if r.get("metadata"):
        info["metadata"] = _json(r["metadata"])
    cost = r["cost"]
    # REAL 0.0 is JavaScript's 0: printed as export prints it.
    info["cost"] = int(cost) if isinstance(cost, float) and cost.is_integer() else cost
    info["tokens"] = {"input": r["tokens_input"], "output": r["tokens_output"], "reasoning": r["tokens_reasoning"],
                      "cache": {"read": r["tokens_cache_read"], "write": r["tokens_cache_write"]}}
    if r.get("revert"):
        info["revert"] = _json(r["revert"])
    if r.get("permission"):
        info["permission"] = _json(r["permission"])
    t = {"created": r["time_created"], "updated": r["time_updated"]}
    for key in ("compacting", "archived"):
        if r.get(f"time_{key}") is not None:
            t[key] = r[f"time_{key}"]
    info["time"] = t
    return info


def export_doc(db: str, session_id: str) -> dict | None:
    """The session as ``opencode export`` prints it, from the database read-only; None if absent."""
    try:
        with contextlib.closing(connect(db)) as conn:
            conn.row_factory = sqlite3.Row
            row = conn.execute("SELECT * FROM session WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                return None
            messages = []
            parts: dict[str, list] = {}
            for pid, mid, data in conn.execute("SELECT id, message_id, data FROM part WHERE session_id = ? "
                                               "ORDER BY id", (session_id,)):
                parts.setdefault(mid, []).append({**_json(data), "id": pid, "sessionID": session_id, "messageID": mid})
            for mid, data in conn.execute("SELECT id, data FROM message WHERE session_id = ? ORDER BY id",
                                          (session_id,)):
                messages.append({"info": {**_json(data), "id": mid, "sessionID": session_id},
                                 "parts": parts.get(mid, [])})
            return {"info": _session_info(row), "messages": messages}
    except (sqlite3.Error, ValueError, TypeError) as exc:
        raise _db_error(db, exc) from None


def message_counts(db: str, session_id: str) -> tuple[int, int] | None:
    """How many messages and parts the database holds for a session (None: no such session)."""
    try:
        with contextlib.closing(connect(db)) as conn:
            if conn.execute("SELECT 1 FROM session WHERE id = ?", (session_id,)).fetchone() is None:
                return None
            m = conn.execute("SELECT count(*) FROM message WHERE session_id = ?", (session_id,)).fetchone()[0]
            p = conn.execute("SELECT count(*) FROM part WHERE session_id = ?", (session_id,)).fetchone()[0]
            return m, p
    except sqlite3.Error as exc:
        raise _db_error(db, exc) from None


def dump(doc: dict) -> bytes:
    """A document as ``opencode export`` prints it (two-space indent, UTF-8, a final newline)."""
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")


def _mirror(env: Mapping[str, str], db: str, session_id: str, updated: Any) -> SessionFile | None:
    """The session's export JSON in the cache folder, written when it changed (see the module)."""
    folder = cache_dir(env)
    doc = export_doc(db, session_id)
    if folder is None or doc is None:
        return None
    path = os.path.join(folder, f"{session_id}.json")
    data = dump(doc)
    try:
        with open(path, "rb") as fh:
            same = fh.read() == data
    except OSError:
        same = False
    if not same:
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)  # a reader never sees half a file
        if isinstance(updated, (int, float)):
            os.utime(path, (updated / 1000, updated / 1000))
    st = os.stat(path)
    return SessionFile(AGENT, session_id, path, st.st_mtime, st.st_size)


def find_sessions(cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
    """The sessions opencode lists for the folder ``cwd`` (top-level, not archived), newest first."""
    db = db_path(env)
    if db is None or not os.path.isfile(db):
        return []
    out = []
    for sid, _, updated in session_rows(db, folders=folder_forms(os.path.abspath(cwd))):
        sf = _mirror(env, db, sid, updated)
        if sf is not None:
            out.append(sf)
    return out


def find_session(session_id: str, env: Mapping[str, str]) -> SessionFile | None:
    """The session ``session_id``: from the database, else an export opal wrote and opencode has not imported."""
    if not session_id or "/" in session_id or session_id.startswith("."):
        return None
    db = db_path(env)
    if db is not None and os.path.isfile(db):
        for sid, _, updated in session_rows(db, session_id=session_id):
            sf = _mirror(env, db, sid, updated)
            if sf is not None:
                return sf
    folder = export_dir(env)
    path = os.path.join(folder, f"{session_id}.json") if folder else None
    if path and os.path.isfile(path):
        st = os.stat(path)
        return SessionFile(AGENT, session_id, path, st.st_mtime, st.st_size)
    return None

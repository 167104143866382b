"""Registering an exported rollout in Codex's state database, the way codex itself does.

Codex 0.169 keeps an index of its threads in ``$CODEX_HOME/state_<N>.sqlite`` (table
``threads``). ``codex resume --last`` and the picker list threads from that index first:
a rollout written beside it without a row is found by id, but ``--last`` resumes the
newest *registered* thread instead (issue 18, 5). :func:`register` adds the row codex
would add for the file, derived from its records the way codex-rs does it
(``codex-rs/state/src/extract.rs``, ``apply_rollout_item``): the header gives the
source, provider, folder, version and git facts; ``turn_context`` the sandbox and
approval policies and the model; ``token_count`` events the tokens used; the first
``user_message`` event the title and preview.

Only a ``threads`` table whose columns are exactly those opal knows is written; any
other schema is left alone and said (a newer codex may need columns opal cannot fill).
Without a database there is nothing to do: codex builds it on its first start by
scanning the sessions folder, which finds the export.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sqlite3
from typing import Any, Mapping

__all__ = ["register", "KNOWN_COLUMNS", "thread_row"]

#: The columns of ``threads`` in codex 0.169 (state_5.sqlite, migration 62).
KNOWN_COLUMNS = frozenset(
    """id rollout_path created_at updated_at source model_provider cwd title sandbox_policy approval_mode
    tokens_used has_user_event archived archived_at git_sha git_branch git_origin_url cli_version
    first_user_message agent_nickname agent_role memory_mode model reasoning_effort agent_path created_at_ms
    updated_at_ms thread_source preview recency_at recency_at_ms history_mode name is_pinned thread_section_id
    section_position section_entered_at_ms project_id originator daybreak_enabled creator_user_id
    creator_account_id attached_thread_parent_id""".split()
)
_USER_MESSAGE_BEGIN = "## My request for Codex:"
_DB_RE = re.compile(r"state_(\d+)\.sqlite$")


def _enum(value: Any) -> str:
    """serde's view of an enum: a string as itself, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _strip_prefix(text: str) -> str:
    at = text.find(_USER_MESSAGE_BEGIN)
    return (text[at + len(_USER_MESSAGE_BEGIN):] if at >= 0 else text).strip()


def _default_provider(home: str) -> str:
    """The provider codex uses when a header names none: ``model_provider`` in config.toml."""
    try:
        import tomllib

        with open(os.path.join(home, "config.toml"), "rb") as fh:
            value = tomllib.load(fh).get("model_provider")
        return value if isinstance(value, str) and value else "openai"
    except (OSError, ValueError, ImportError):
        return "openai"


def thread_row(thread_id: str, path: str, body: bytes, now_ms: int, default_provider: str) -> dict[str, Any]:
    """The ``threads`` row codex derives from this rollout's records."""
    row: dict[str, Any] = {
        "id": thread_id, "rollout_path": path, "created_at": now_ms // 1000, "updated_at": now_ms // 1000,
        "created_at_ms": now_ms, "updated_at_ms": now_ms, "recency_at": now_ms // 1000, "recency_at_ms": now_ms,
        "source": "vscode", "model_provider": "", "cwd": "", "title": "", "sandbox_policy": "", "approval_mode": "",
        "tokens_used": 0, "has_user_event": 0, "archived": 0, "archived_at": None, "git_sha": None,
        "git_branch": None, "git_origin_url": None, "cli_version": "", "first_user_message": "",
        "agent_nickname": None, "agent_role": None, "agent_path": None, "memory_mode": "enabled", "model": None,
        "reasoning_effort": None, "thread_source": None, "preview": "", "history_mode": "legacy", "name": None,
        "is_pinned": 0, "originator": None,
    }
    first_user: str | None = None
    for raw in body.split(b"\n"):
        try:
            rec = json.loads(raw) if raw.strip() else None
        except ValueError:
            continue
        p = rec.get("payload") if isinstance(rec, dict) else None
        if not isinstance(p, dict):
            continue
        kind = rec.get("type")
        if kind == "session_meta" and p.get("id") == thread_id:
            _apply_meta(row, p)
        elif kind == "turn_context":
            if not row["cwd"] and isinstance(p.get("cwd"), str):
                row["cwd"] = p["cwd"]
            if "sandbox_policy" in p:
                row["sandbox_policy"] = _enum(p["sandbox_policy"])
            if "approval_policy" in p:
                row["approval_mode"] = _enum(p["approval_policy"])
            if isinstance(p.get("model"), str):
                row["model"] = p["model"]
            if isinstance(p.get("effort"), str):
                row["reasoning_effort"] = p["effort"]
        elif kind == "event_msg" and p.get("type") == "token_count":
            info = p.get("info") if isinstance(p.get("info"), dict) else {}
            total = (info.get("total_token_usage") or {}).get("total_tokens") if isinstance(info, dict) else None
            if isinstance(total, int) and not isinstance(total, bool):
                row["tokens_used"] = max(total, 0)
        elif kind == "event_msg" and p.get("type") == "user_message":
            row["has_user_event"] = 1
            text = _strip_prefix(p["message"]) if isinstance(p.get("message"), str) else ""
            if first_user is None:
                images = p.get("images") or p.get("local_images")
                first_user = text or ("[Image]" if images else None)
            if not row["title"] and text:
                row["title"] = text
    if not row["model_provider"]:
        row["model_provider"] = default_provider
    row["first_user_message"] = first_user or ""
    row["preview"] = first_user or ""
    return row


def _apply_meta(row: dict[str, Any], p: Mapping[str, Any]) -> None:
    row["source"] = _enum(p.get("source", "vscode"))
    for key in ("agent_nickname", "agent_role", "agent_path", "thread_source", "originator"):
        if isinstance(p.get(key), str):
            row[key] = p[key]
    if isinstance(p.get("memory_mode"), str):
        row["memory_mode"] = p["memory_mode"]
    if isinstance(p.get("model_provider"), str):
        row["model_provider"] = p["model_provider"]
    if isinstance(p.get("cli_version"), str) and p["cli_version"]:
        row["cli_version"] = p["cli_version"]
    if isinstance(p.get("cwd"), str) and p["cwd"]:
        row["cwd"] = p["cwd"]
    git = p.get("git")
    if isinstance(git, dict):
        row["git_sha"], row["git_branch"], row["git_origin_url"] = (
            git.get("commit_hash"), git.get("branch"), git.get("repository_url"))


def state_db(home: str) -> str | None:
    """The newest ``state_<N>.sqlite`` in ``home``, or None."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(home), "state_*.sqlite")):
        m = _DB_RE.search(os.path.basename(path))
        if m:
            found.append((int(m.group(1)), path))
    return max(found)[1] if found else None


def register(home: str, thread_id: str, path: str, body: bytes, now_ms: int) -> str | None:
    """Add the thread's row to codex's state database; a line for the report, or None."""
    db = state_db(home)
    if db is None:
        return None  # codex builds its index on first start, scanning the sessions folder
    name = os.path.basename(db)
    try:
        con = sqlite3.connect(db, timeout=5.0, isolation_level=None)
    except sqlite3.Error as exc:
        return f"codex's state database {name} did not open ({exc}); the export is not registered there: " \
               f"`codex resume {thread_id}` finds it, `codex resume --last` may not"
    try:
        columns = {r[1] for r in con.execute("PRAGMA table_info(threads)")}
        if columns != KNOWN_COLUMNS:
            extra, missing = sorted(columns - KNOWN_COLUMNS), sorted(KNOWN_COLUMNS - columns)
            what = "; ".join(x for x in (f"new columns {', '.join(extra[:5])}" if extra else "",
                                         f"missing {', '.join(missing[:5])}" if missing else "") if x)
            return (f"codex's state database {name} has a threads table opal does not know ({what or 'no such table'}): "
                    f"left alone, so the export is not registered there; `codex resume {thread_id}` finds it, "
                    "`codex resume --last` and the picker may not")
        row = thread_row(thread_id, path, body, now_ms, _default_provider(home))
        keys = list(row)
        con.execute("BEGIN IMMEDIATE")
        con.execute(
            f"INSERT INTO threads ({', '.join(keys)}) VALUES ({', '.join('?' for _ in keys)}) "
            f"ON CONFLICT(id) DO UPDATE SET {', '.join(f'{k} = excluded.{k}' for k in keys if k != 'id')}",
            [row[k] for k in keys],
        )
        con.execute("COMMIT")
    except sqlite3.Error as exc:
        try:
            con.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        return f"registering the export in codex's state database {name} failed ({exc}); " \
               f"`codex resume {thread_id}` finds it, `codex resume --last` may not"
    finally:
        con.close()
    return f"registered in codex's state database ({name}, table threads), so `codex resume --last` and the picker find it"

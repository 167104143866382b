"""The Gemini CLI adapter: finds, reads, normalizes and writes ``~/.gemini`` chat sessions.

Where sessions live (formats.md §3.1, checked against the 0.61.0 bundle): the base is
``<home>/.gemini`` where *home* is ``$GEMINI_CLI_HOME`` when set, else ``$HOME`` (the CLI
swaps its home folder, not the ``.gemini`` folder). A project's folder is
``<base>/tmp/<slug>`` with the slug from ``<base>/projects.json``, or, for projects
that were never registered, ``<base>/tmp/<sha256 of the project path>``. Chats are
``chats/session-<YYYY-MM-DDThh-mm>-<id[:8]>.jsonl`` (or a legacy single ``.json``).

A JSON-lines session is a *mutation log* (formats.md §3.2): a header (``sessionId`` +
``projectHash``), message records keyed by ``id`` (a later line with the same id
replaces the earlier one, in place), ``{"$set": {...}}`` metadata updates
(``$set.messages`` replaces the whole list: a checkpoint) and ``{"$rewindTo": id}``
(drops that message and all after it; an unknown id drops everything). Every line
is kept as one record, in file order, so writing the records back reproduces the
file byte for byte; the log is replayed in :meth:`GeminiAdapter.read` so that each
message is counted once:

* a message line that a later line, a rewind or a checkpoint removed is ``meta``
  with label ``gemini:superseded``;
* a checkpoint that restates a message id keeps crediting that message's own line
  (the CLI builds checkpoints from its in-memory history, which drops the
  ``toolCalls``/``thoughts`` it had recorded); messages that only a checkpoint holds
  are credited to the checkpoint record;
* a ``user`` record made only of ``functionResponse`` parts whose calls were already
  answered (the CLI records every result twice: in ``toolCalls[].result`` and as such
  a record) is ``meta`` with label ``gemini:duplicate-result``.

:meth:`GeminiAdapter.normalize` sees one stored turn without that context and treats
every message as live; :meth:`GeminiAdapter.normalize_many` gives the replayed view
of a whole list of turns.

Legacy single-JSON sessions (``session-….json``, one document ``{..., "messages":
[...]}``) are read as one header record (the document without ``messages``) plus
one record per message; every record's line number is 1. Rendering those records
gives the modern JSON-lines form of the same session (the CLI itself migrates a
legacy file that way when it resumes it), so their round trip is semantic, not
byte-exact. Documents of the older ``{"history": [Content, ...]}`` shape are read
the same way, one record per ``{role, parts}`` entry.

Normalized blocks (the shared vocabulary, see :mod:`opalgit.adapters.claude`):
``text``; ``image`` (``media_type`` + base64 ``data``, or ``url``); ``reasoning`` (from
``thoughts[]`` and ``thought`` parts; ``signed`` when a part has a
``thoughtSignature``); ``tool_call`` ``{id, name, input}``; ``tool_result`` ``{call_id,
name, output, is_error}``; ``other`` ``{kind}``. A ``gemini`` message is ``assistant``
and carries its calls *and* their results (``toolCalls[].result``) in the same
normal, results after the calls (so its summary kind is ``tool_call``).

Export writes a fresh JSON-lines session with the *final* state only: one line per
live message, no superseded lines, results only in ``toolCalls[].result``, every
call paired. Loss-report kinds (shared names as in :mod:`.claude_export`):
``record:superseded``, ``record:folded`` (header, ``$set`` and ``$rewindTo`` lines
applied into the new file), ``record:unparseable``, ``record:meta:<agent>``,
``record:system``, ``system:as_user``, ``message:retyped``, ``tool_result:duplicate``,
``tool_result:synthesized``, ``tool_result:orphan``, ``tool_call:mapped``,
``tool_call:kept``, ``reasoning:as_text``, ``reasoning:foreign``, ``reasoning:signed``,
``user_text:prefixed``, ``image:unreadable``, ``content:other``.

Pure: no store, no environment reads (the mapping is passed in), no printing.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from .. import jsonl
from ..errors import InputError
from ..model import Normal, SessionInfo, Turn
from . import tools
from .base import (
    Adapter,
    ExportRequest,
    ExportResult,
    LossReport,
    ReadResult,
    Record,
    SessionFile,
    View,
    iter_jsonl,
    record_turn,
)

__all__ = ["GeminiAdapter", "gemini_dir", "parse_time", "project_hash", "slugify"]

AGENT = "gemini"
STATE_VERSION = 1
#: Sessions larger than this are listed without replaying them to prove they hold a prompt.
RESUMABLE_CHECK_LIMIT = 256 * 1024
#: Documents (legacy ``.json``) larger than this are refused rather than loaded whole.
DOCUMENT_LIMIT = 64 * 1024 * 1024
#: Call ids answered near the end of the conversation, kept for incremental reads.
ANSWERED_TAIL = 64
#: Bloom filter over every message id seen (bits, hashes): a false hit only costs a re-read.
BLOOM_BITS, BLOOM_HASHES = 8192, 4
_SHAPE_LINES = 64
#: The CLI drops user text starting with these on resume (isIgnoredUserContent).
IGNORED_PREFIXES = ("/", "?", "<session_context>", "<hook_context>")
_CONTEXT_PREFIXES = ("<session_context>", "<hook_context>")
NO_RESULT = "[opal: this tool call has no recorded result]"
#: Prefix that keeps an exported user text from being dropped: JavaScript's trim()
#: keeps U+200B, so the text no longer starts with "/" or "?".
KEEP_PREFIX = "\u200b"
_ID_NAMESPACE = uuid.UUID("6f70616c-6765-4d69-8e69-6578706f7274")
_CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning", "model"})


# ----------------------------------------------------------------------- small helpers


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


def parse_time(value: Any) -> int | None:
    """An ISO-8601 timestamp (or epoch seconds / milliseconds) as integer ms, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            return None
        return int(value * 1000) if abs(value) < 10**11 else int(value)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        dt = datetime.fromisoformat(value.strip().replace("z", "Z"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return int(dt.timestamp() * 1000)
    except (OverflowError, OSError, ValueError):
        return None


def iso(ms: int) -> str:
    """Milliseconds as JavaScript's ``toISOString()`` writes them."""
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _is_id(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _kind(rec: Any) -> str:
    """How the CLI's loader treats a parsed line (same order of tests as the CLI)."""
    if not isinstance(rec, dict):
        return "other"
    if isinstance(rec.get("$rewindTo"), str):
        return "rewind"
    if isinstance(rec.get("id"), str):
        return "message"
    if isinstance(rec.get("$set"), (dict, list)):
        return "set"
    if isinstance(rec.get("sessionId"), str) and isinstance(rec.get("projectHash"), str):
        return "header"
    if isinstance(rec.get("role"), str) and isinstance(rec.get("parts"), list):
        return "content"  # an entry of a legacy {"history": [...]} document
    return "other"


def _entries(rec: Mapping[str, Any], kind: str) -> list | None:
    """The message list a checkpoint (``$set.messages``) or a legacy header line carries."""
    src = rec.get("$set") if kind == "set" else rec
    msgs = src.get("messages") if isinstance(src, dict) else None
    return msgs if isinstance(msgs, list) else None


# -------------------------------------------------------------------------- normalizing


def _response_text(resp: Any) -> tuple[str, bool]:
    if isinstance(resp, dict):
        if isinstance(resp.get("output"), str):
            return resp["output"], False
        if "error" in resp:
            err = resp["error"]
            return (err if isinstance(err, str) else jsonl.dumps(err).decode("utf-8", "surrogatepass")), True
    if isinstance(resp, str):
        return resp, False
    return ("" if resp is None else jsonl.dumps(resp).decode("utf-8", "surrogatepass")), False


def _part_block(part: Any) -> dict:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, dict):
        return {"type": "other", "kind": type(part).__name__}
    if isinstance(part.get("text"), str):
        if part.get("thought") is True:
            out: dict[str, Any] = {"type": "reasoning", "text": part["text"]}
            if _is_id(part.get("thoughtSignature")):
                out["signed"] = True
            return out
        return {"type": "text", "text": part["text"]}
    if isinstance(part.get("inlineData"), dict):
        d = part["inlineData"]
        return {"type": "image", "media_type": d.get("mimeType"), "data": d.get("data")}
    if isinstance(part.get("fileData"), dict) and str(part["fileData"].get("mimeType", "")).startswith("image/"):
        return {"type": "image", "url": part["fileData"].get("fileUri")}
    if isinstance(part.get("functionCall"), dict):
        fc = part["functionCall"]
        return {"type": "tool_call", "id": fc.get("id"), "name": fc.get("name"), "input": fc.get("args")}
    if isinstance(part.get("functionResponse"), dict):
        fr = part["functionResponse"]
        text, err = _response_text(fr.get("response"))
        return {"type": "tool_result", "call_id": fr.get("id"), "name": fr.get("name"), "output": text, "is_error": err}
    kind = next((k for k in part if k not in ("thoughtSignature", "thought")), "unknown")
    return {"type": "other", "kind": kind}


def _content_blocks(content: Any) -> list[dict]:
    if content is None:
        return []
    if isinstance(content, list):
        return [_part_block(p) for p in content]
    return [_part_block(content)]


def _content_string(content: Any) -> str:
    """Roughly the CLI's partListUnionToString: text as is, other parts as a bracket."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_content_string(p) for p in content)
    if isinstance(content, dict):
        return content["text"] if isinstance(content.get("text"), str) and content.get("thought") is not True else "[part]"
    return ""


def _result_output(result: Any) -> tuple[str | list, bool]:
    """A ``toolCalls[].result`` (PartListUnion) as a normalized output and an error flag."""
    if isinstance(result, str):
        return result, False
    parts = result if isinstance(result, list) else [result]
    blocks = [_part_block(p) for p in parts]
    err = any(b["type"] == "tool_result" and b["is_error"] for b in blocks)
    flat = [{"type": "text", "text": b["output"]} if b["type"] == "tool_result" else b for b in blocks]
    if len(flat) == 1 and flat[0]["type"] == "text":
        return flat[0]["text"], err
    return flat, err


def _tool_blocks(calls: Any, seen: set) -> tuple[list[dict], list[dict]]:
    if not isinstance(calls, list):
        return [], []
    out_calls, out_results = [], []
    for tc in calls:
        if not isinstance(tc, dict):
            continue
        cid, name = tc.get("id"), tc.get("name")
        if not (_is_id(cid) and cid in seen):
            out_calls.append({"type": "tool_call", "id": cid, "name": name, "input": tc.get("args")})
        if tc.get("result") is not None:
            output, err = _result_output(tc["result"])
            status = tc.get("status")
            out_results.append({"type": "tool_result", "call_id": cid, "name": name, "output": output,
                                "is_error": err or (isinstance(status, str) and status not in ("success", "Success"))})
    return out_calls, out_results


def _fr_ids(msg: Mapping[str, Any]) -> list | None:
    """Call ids of a user message made only of functionResponse parts, else None."""
    content = msg.get("content")
    parts = content if isinstance(content, list) else [content]
    ids = []
    for p in parts:
        if not (isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)):
            return None
        ids.append(p["functionResponse"].get("id"))
    return ids or None


def message_normal(msg: Any) -> Normal:
    """The normalized view of one message (a line, a checkpoint entry or a Content)."""
    if not isinstance(msg, dict):
        return Normal(role="meta", label="gemini:record")
    kind = msg.get("type")
    if kind is None:
        kind = {"user": "user", "model": "gemini"}.get(msg.get("role"), msg.get("role"))
    when = parse_time(msg.get("timestamp", msg.get("ts")))
    content = msg["content"] if "content" in msg else msg.get("parts")
    if kind == "user":
        blocks = _content_blocks(content)
        if blocks and all(b["type"] == "tool_result" for b in blocks):
            return Normal(role="tool", blocks=blocks, time=when)
        text = _content_string(content).strip()
        if text.startswith(_CONTEXT_PREFIXES):
            return Normal(role="meta", blocks=blocks, time=when, label="gemini:context")
        if text.startswith(("/", "?")):
            return Normal(role="meta", blocks=blocks, time=when, label="gemini:command")
        if not blocks:
            return Normal(role="meta", time=when, label="gemini:empty")
        return Normal(role="user", blocks=blocks, time=when)
    if kind in ("gemini", "model"):
        blocks = []
        for th in msg.get("thoughts") or []:
            if isinstance(th, dict):
                subj, desc = th.get("subject"), th.get("description")
                desc = desc if isinstance(desc, str) else ""
                blocks.append({"type": "reasoning", "text": f"**{subj}** {desc}" if _is_id(subj) else desc})
        content_blocks = _content_blocks(content)
        if content_blocks == [{"type": "text", "text": ""}]:
            content_blocks = []  # the CLI writes content "" for a turn that only calls tools
        blocks.extend(content_blocks)
        seen = {b.get("id") for b in content_blocks if b["type"] == "tool_call"}
        calls, results = _tool_blocks(msg.get("toolCalls"), seen)
        return Normal(role="assistant", blocks=blocks + calls + results, time=when)
    label = f"gemini:{kind}" if isinstance(kind, str) and kind else "gemini:unknown"
    return Normal(role="meta", time=when, label=label)


def _combined(entries: list[Normal], label: str, when: int | None) -> Normal:
    live = [n for n in entries if n.role != "meta"]
    if not live:
        return Normal(role="meta", time=when, label=label)
    if len(live) == 1:
        return Normal(role=live[0].role, blocks=live[0].blocks, time=live[0].time, label=label)
    blocks = [b for n in live for b in n.blocks]
    return Normal(role="system", blocks=blocks, time=live[0].time, label=label)


def _bookkeeping_normal(rec: Any, kind: str) -> Normal:
    when = None
    if isinstance(rec, dict):
        when = parse_time(rec.get("lastUpdated") or rec.get("startTime"))
        if kind == "set" and isinstance(rec["$set"], dict):
            when = parse_time(rec["$set"].get("lastUpdated"))
    label = {"set": "gemini:set", "rewind": "gemini:rewind", "header": "gemini:header"}.get(kind, "gemini:record")
    if kind == "set" and _entries(rec, kind) is not None:
        label = "gemini:checkpoint"
    return Normal(role="meta", time=when, label=label)


def normalize_record(rec: Any) -> Normal:
    """The standalone view of one parsed line: every message it holds counts as live."""
    kind = _kind(rec)
    if kind in ("message", "content"):
        return message_normal(rec)
    base = _bookkeeping_normal(rec, kind)
    entries = _entries(rec, kind) if kind in ("set", "header") else None
    if entries:
        return _combined([message_normal(m) for m in entries if _kind(m) == "message"], base.label, base.time)
    return base


def _normal_of_line(raw: bytes) -> Normal:
    if not raw.strip():
        return Normal(role="meta", label="blank")
    try:
        return normalize_record(jsonl.parse(raw))
    except jsonl.ParseFailure:
        return Normal(role="meta", label="unparseable")


# ----------------------------------------------------------------------- replaying the log


@dataclass
class _Entry:
    """One message of the final state: who is credited with it, and its content."""

    key: str
    src: int  # index (in the replayed values) of the credited record
    msg: dict
    dup: bool = False  # only already-answered functionResponses


@dataclass
class _Replay:
    entries: list[_Entry]
    meta: dict  # merged metadata (header lines and $set)
    ids: list[str]  # every message id seen (lines and checkpoint entries), file order
    answered: list[str]  # call ids answered by live messages, final order


_SKIP = object()  # a value that is not JSON (kept opaque)


def _replay(values: list[Any], answered: Iterable[str] = ()) -> _Replay:
    state: dict[str, tuple[int, dict]] = {}  # insertion order is the message order
    last_line: dict[str, int] = {}
    meta: dict = {}
    ids: list[str] = []

    def load(i: int, msgs: list) -> None:
        for m in msgs:
            if _kind(m) == "message":
                state[m["id"]] = (i, m)
                ids.append(m["id"])

    for i, rec in enumerate(values):
        kind = _kind(rec)
        if kind == "rewind":
            target = rec["$rewindTo"]
            if target in state:
                keys = list(state)
                for k in keys[keys.index(target):]:
                    del state[k]
            else:
                state.clear()  # the CLI drops everything for an unknown id
        elif kind == "message":
            state[rec["id"]] = (i, rec)
            last_line[rec["id"]] = i
            ids.append(rec["id"])
        elif kind == "content":
            state[f"#{i}"] = (i, rec)
        elif kind == "set":
            msgs = _entries(rec, kind)
            if msgs is not None:
                state.clear()
                load(i, msgs)
            if isinstance(rec["$set"], dict):
                meta.update((k, v) for k, v in rec["$set"].items() if k != "messages")
        elif kind == "header":
            meta.update((k, v) for k, v in rec.items() if k != "messages")
            msgs = _entries(rec, kind)
            if msgs is not None:
                load(i, msgs)

    done = list(answered)
    seen = set(done)
    entries: list[_Entry] = []
    for key, (src, msg) in state.items():
        line = last_line.get(key)
        if line is not None and line != src:
            src, msg = line, values[line]  # a checkpoint restating a message keeps its line
        entry = _Entry(key, src, msg)
        if msg.get("type") == "user":
            frs = _fr_ids(msg)
            if frs is not None:
                entry.dup = all(_is_id(c) and c in seen for c in frs)
                new = [c for c in frs if _is_id(c) and c not in seen]
                seen.update(new)
                done.extend(new)
        elif msg.get("type") in ("gemini", "model") and isinstance(msg.get("toolCalls"), list):
            for tc in msg["toolCalls"]:
                if isinstance(tc, dict) and tc.get("result") is not None and _is_id(tc.get("id")) and tc["id"] not in seen:
                    seen.add(tc["id"])
                    done.append(tc["id"])
        entries.append(entry)
    return _Replay(entries, meta, ids, done[-ANSWERED_TAIL:])


def _normals(values: list[Any], replay: _Replay) -> list[Normal]:
    """Each value's normal, knowing which messages are live (see the module docstring)."""
    credited: dict[int, list[_Entry]] = {}
    for e in replay.entries:
        credited.setdefault(e.src, []).append(e)
    out: list[Normal] = []
    for i, rec in enumerate(values):
        if rec is _SKIP:
            out.append(Normal(role="meta", label="unparseable"))
            continue
        kind = _kind(rec)
        mine = credited.get(i, [])
        if kind in ("message", "content"):
            if not mine:
                out.append(Normal(role="meta", time=parse_time(rec.get("timestamp")), label="gemini:superseded"))
            elif mine[0].dup:
                out.append(Normal(role="meta", time=parse_time(rec.get("timestamp")), label="gemini:duplicate-result"))
            else:
                out.append(message_normal(rec))
            continue
        base = _bookkeeping_normal(rec, kind)
        if mine:
            out.append(_combined([message_normal(e.msg) for e in mine if not e.dup], base.label, base.time))
        else:
            out.append(base)
    return out


# ---------------------------------------------------------------------- incremental state


def _bloom_add(bits: bytearray, key: str) -> None:
    h = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=2 * BLOOM_HASHES).digest()
    for j in range(BLOOM_HASHES):
        n = int.from_bytes(h[2 * j:2 * j + 2], "big") % BLOOM_BITS
        bits[n // 8] |= 1 << (n % 8)


def _bloom_has(bits: bytes, key: str) -> bool:
    h = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=2 * BLOOM_HASHES).digest()
    for j in range(BLOOM_HASHES):
        n = int.from_bytes(h[2 * j:2 * j + 2], "big") % BLOOM_BITS
        if not bits[n // 8] & (1 << (n % 8)):
            return False
    return True


def _extends(values: list[Any], bloom: bytes) -> bool:
    """True when new lines only append messages (no replacement, rewind or checkpoint)."""
    fresh: set[str] = set()
    for rec in values:
        kind = _kind(rec)
        if kind == "rewind" or (kind in ("set", "header") and _entries(rec, kind) is not None):
            return False
        if kind == "message":
            mid = rec["id"]
            if mid in fresh or _bloom_has(bloom, mid):
                return False
            fresh.add(mid)
    return True


class _Info:
    """Accumulates :class:`SessionInfo` over records; serializable into the state."""

    def __init__(self, saved: Mapping[str, Any] | None = None) -> None:
        s = dict(saved or {})
        self.id: str | None = s.get("id")
        self.hash: str | None = s.get("hash")
        self.cwd: str | None = s.get("cwd")
        self.model: str | None = s.get("model")
        self.title: str | None = s.get("title")

    def feed(self, rec: Any) -> None:
        kind = _kind(rec)
        if kind == "header" or (kind == "other" and isinstance(rec, dict)):
            if self.id is None and _is_id(rec.get("sessionId")):
                self.id = rec["sessionId"]
            if self.hash is None and _is_id(rec.get("projectHash")):
                self.hash = rec["projectHash"]
            if _is_id(rec.get("summary")):
                self.title = rec["summary"]
        elif kind == "set" and isinstance(rec["$set"], dict):
            if _is_id(rec["$set"].get("summary")):
                self.title = rec["$set"]["summary"]
        elif kind == "message" and rec.get("type") == "gemini" and _is_id(rec.get("model")):
            self.model = rec["model"]

    def resolve(self, path: str) -> None:
        if self.id is None:
            stem = os.path.basename(path)
            self.id = re.sub(r"\.jsonl?$", "", stem)
        if self.cwd is None and self.hash is not None:
            self.cwd = _cwd_for(path, self.hash)

    def session(self) -> SessionInfo:
        return SessionInfo(agent=AGENT, id=self.id or "", cwd=self.cwd, model=self.model, title=self.title)

    def saved(self) -> dict:
        out = {"id": self.id, "hash": self.hash, "cwd": self.cwd, "model": self.model, "title": self.title}
        return {k: v for k, v in out.items() if v is not None}


def _read_text(path: str, limit: int = 64 * 1024) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _cwd_for(path: str, phash: str) -> str | None:
    """The project folder of a session file, proven by its ``projectHash``."""
    project = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    marker = _read_text(os.path.join(project, ".project_root"))
    if marker is not None and project_hash(marker.strip()) == phash:
        return marker.strip()
    registry = _load_registry(os.path.join(os.path.dirname(os.path.dirname(project)), "projects.json"))[0]
    for root in registry["projects"]:
        if project_hash(root) == phash:
            return root
    return None


# ------------------------------------------------------------------------- the registry


def _load_registry(path: str) -> tuple[dict, str | None]:
    """``projects.json`` as ``{"projects": {...}}`` and, if it is unusable, why."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read().decode("utf-8"))
    except FileNotFoundError:
        return {"projects": {}}, None
    except (OSError, ValueError) as exc:
        return {"projects": {}}, f"unreadable ({exc.__class__.__name__})"
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict) or not all(
        isinstance(v, str) and re.fullmatch(r"[a-z0-9-]+", v) for v in projects.values()
    ):
        return {"projects": {}}, "not in the registry's schema"
    return data, None


def _marker_owner(base: str, slug: str) -> list[str]:
    owners = []
    for sub in ("tmp", "history"):
        text = _read_text(os.path.join(base, sub, slug, ".project_root"))
        if text is not None:
            owners.append(text.strip())
    return owners


def _project_dirs(base: str, cwd: str) -> list[str]:
    """Folders under ``<base>/tmp`` that may hold ``cwd``'s chats: slug first, then hash."""
    roots = [cwd]
    try:
        real = os.path.realpath(cwd)
    except (OSError, ValueError):
        real = cwd
    if real != cwd:
        roots.append(real)
    projects = _load_registry(os.path.join(base, "projects.json"))[0]["projects"]
    out: list[str] = []
    for root in roots:
        for name in (projects.get(root), project_hash(root)):
            if name and os.path.join(base, "tmp", name) not in out:
                out.append(os.path.join(base, "tmp", name))
    return out


# -------------------------------------------------------------------------- file heads


def _head(path: str) -> dict | None:
    """The header of a session file from its first bytes: ``{sessionId, kind}`` or None."""
    text = _read_text(path, 16 * 1024)
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
    doc = _document(data) if path.endswith(".json") else None
    if doc is not None:
        return any(_resumable_message(m) for m in doc[1])
    values = []
    for raw in data.split(b"\n"):
        try:
            values.append(jsonl.parse(raw))
        except jsonl.ParseFailure:
            continue
    return any(_resumable_message(e.msg) for e in _replay(values).entries)


def _document(data: bytes) -> tuple[dict, list, str] | None:
    """A legacy single-JSON session: (header, messages, list key), or None."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    key = next((k for k in ("messages", "history") if isinstance(doc.get(k), list)), None)
    if key is None:
        return None
    return {k: v for k, v in doc.items() if k != key}, doc[key], key


def _other_agent(rec: Any) -> str | None:
    if not isinstance(rec, dict) or "projectHash" in rec or "$set" in rec:
        return None
    kind = rec.get("type")
    if kind in _CODEX_TYPES and "payload" in rec:
        return "codex"
    if isinstance(kind, str) and any(k in rec for k in ("uuid", "parentUuid", "leafUuid")):
        return "claude"
    if isinstance(kind, str) and "sessionId" in rec and "id" not in rec:
        return "claude"
    return None


def _is_gemini(rec: Any) -> bool:
    kind = _kind(rec)
    if kind in ("rewind", "set", "header"):
        return True
    return kind == "message" and rec.get("type") in _MESSAGE_TYPES


_OTHER = {"claude": ("a Claude Code transcript", "claude"), "codex": ("a Codex CLI rollout", "codex")}


def _foreign(path: str, agent: str, line: int | None) -> InputError:
    what, name = _OTHER[agent]
    return InputError(f"this looks like {what}, not a Gemini CLI session", path=path, line=line,
                      hint=f"import it with --agent {name}")


def _reason(problem: str) -> str:
    if problem.startswith("not JSON (") and problem.endswith(")"):
        return problem[len("not JSON ("):-1]
    return problem


# ---------------------------------------------------------------------------- exporting


def _value_of(turn: Turn) -> Any:
    if turn.has_record:
        return turn.record
    if isinstance(turn.line, bytes):
        try:
            return jsonl.parse(turn.line)
        except jsonl.ParseFailure:
            return _SKIP
    return _SKIP


class _Converter:
    """Turns a run of foreign normalized turns into Gemini message records."""

    def __init__(self, req: ExportRequest, report: LossReport, counter: list[int]) -> None:
        self.req, self.report, self.counter = req, report, counter
        self.out: list[dict] = []
        self.cur: dict | None = None  # the gemini message being filled
        self.pending: dict[str, dict] = {}  # call id -> toolCalls entry without a result

    def _new_id(self) -> str:
        self.counter[0] += 1
        return str(uuid.uuid5(_ID_NAMESPACE, f"{self.req.session_id}/{self.counter[0]}"))

    def _stamp(self, normal: Normal) -> str:
        return iso(normal.time if normal.time is not None else self.req.now_ms)

    def _model(self, normal: Normal, for_text: bool) -> dict:
        if self.cur is None or (for_text and self.cur["toolCalls"]):
            self.cur = {"id": self._new_id(), "timestamp": self._stamp(normal), "type": "gemini",
                        "content": [], "thoughts": [], "toolCalls": []}
            self.out.append(self.cur)
        return self.cur

    def _image(self, block: dict) -> dict | None:
        if block.get("data"):
            return {"inlineData": {"mimeType": block.get("media_type") or "image/png", "data": block["data"]}}
        self.report.drop("image:unreadable")
        return None

    def _user(self, normal: Normal, blocks: list[dict], close: bool = True) -> None:
        parts: list[dict] = []
        for b in blocks:
            if b["type"] == "text":
                parts.append({"text": b.get("text") or ""})
            elif b["type"] == "image":
                part = self._image(b)
                if part:
                    parts.append(part)
            elif b["type"] != "tool_result":
                self.report.drop("content:other")
        if not parts:
            return
        if "text" in parts[0] and _content_string(parts).strip().startswith(IGNORED_PREFIXES):
            parts[0] = {"text": KEEP_PREFIX + parts[0]["text"]}
            self.report.convert("user_text:prefixed")
            self.report.note("user text that began with '/', '?' or a context tag was prefixed with U+200B "
                             "so that Gemini CLI does not drop it on resume")
        if close:
            self.close()
        self.cur = None
        self.out.append({"id": self._new_id(), "timestamp": self._stamp(normal), "type": "user", "content": parts})

    def _result(self, block: dict) -> None:
        cid = block.get("call_id")
        entry = self.pending.pop(cid, None) if _is_id(cid) else None
        if entry is None:
            self.report.drop("tool_result:orphan")
            return
        out = block.get("output")
        texts, extra = [], []
        if isinstance(out, list):
            for b in out:
                if isinstance(b, dict) and b.get("type") == "text":
                    texts.append(b.get("text") or "")
                elif isinstance(b, dict) and b.get("type") == "image":
                    part = self._image(b)
                    if part:
                        extra.append(part)
                else:
                    self.report.drop("content:other")
            text = "\n".join(texts)
        else:
            text = "" if out is None else str(out)
        self._fill(entry, text, block.get("is_error") is True, extra)

    @staticmethod
    def _fill(entry: dict, text: str, error: bool, extra: list | None = None) -> None:
        response = {"error": text} if error else {"output": text}
        entry["result"] = [{"functionResponse": {"id": entry["id"], "name": entry["name"], "response": response}},
                           *(extra or [])]
        entry["status"] = "error" if error else "success"

    def close(self) -> None:
        """A user turn (or the end) closes the model turn: unanswered calls get an error result."""
        for entry in self.pending.values():
            self._fill(entry, NO_RESULT, True)
            self.report.convert("tool_result:synthesized")
        self.pending.clear()
        self.cur = None

    def feed(self, agent: str, normal: Normal) -> None:
        role = normal.role
        if role == "meta":
            self.report.drop(f"record:meta:{agent}")
            return
        if role == "user":
            for b in normal.blocks:
                if b["type"] == "tool_result":
                    self._result(b)
            self._user(normal, normal.blocks)
            return
        if role in ("tool", "system"):
            rest = []
            for b in normal.blocks:
                if b["type"] == "tool_result":
                    self._result(b)
                else:
                    rest.append(b)
            if role == "system":
                if any(b["type"] == "text" for b in rest):
                    self.report.convert("system:as_user")
                    self._user(normal, rest)
                else:
                    self.report.drop("record:system")
            elif rest:
                # Text riding along with tool output (an interruption note): a user line
                # after the model turn, which leaves other calls of that turn open.
                self._user(normal, rest, close=False)
            return
        for b in normal.blocks:  # assistant
            kind = b["type"]
            if kind == "reasoning":
                if b.get("signed"):
                    self.report.drop("reasoning:signed")
                elif self.req.reasoning == "text" and b.get("text"):
                    self._model(normal, True)["thoughts"].append(
                        {"subject": "", "description": b["text"], "timestamp": self._stamp(normal)})
                    self.report.convert("reasoning:as_text")
                else:
                    self.report.drop("reasoning:foreign")
            elif kind == "text":
                self._model(normal, True)["content"].append({"text": b.get("text") or ""})
            elif kind == "image":
                part = self._image(b)
                if part:
                    self._model(normal, True)["content"].append(part)
            elif kind == "tool_call":
                name, args, mapped = tools.convert_call(agent, AGENT, str(b.get("name") or "unknown"),
                                                        b.get("input"), self.req.cwd)
                self.report.convert("tool_call:mapped" if mapped else "tool_call:kept")
                if not isinstance(args, dict):
                    args = {"input": args}
                cid = b.get("id") if _is_id(b.get("id")) else f"opal_call_{self._new_id()[:8]}"
                entry = {"id": cid, "name": name, "args": args, "result": None, "status": "error",
                         "timestamp": self._stamp(normal)}
                self._model(normal, False)["toolCalls"].append(entry)
                self.pending[cid] = entry
            elif kind == "tool_result":
                self._result(b)
            else:
                self.report.drop("content:other")

    def finish(self) -> list[dict]:
        self.close()
        for msg in self.out:
            if msg["type"] != "gemini":
                continue
            parts = msg["content"]
            msg["content"] = "\n\n".join(p["text"] for p in parts) if all("text" in p for p in parts) else parts
            for key in ("thoughts", "toolCalls"):
                if not msg[key]:
                    del msg[key]
        return self.out


def _as_message(msg: dict, report: LossReport, new_id, now: str) -> dict:
    """A message record the CLI replays: legacy ``model``/``{role, parts}`` shapes retyped."""
    if msg.get("type") in ("user", "gemini", "info", "error", "warning") and _is_id(msg.get("id")):
        return msg
    out = dict(msg)
    kind = out.get("type") or out.pop("role", None)
    out["type"] = "user" if kind == "user" else "gemini"
    if "content" not in out:
        out["content"] = out.pop("parts", "")
    if not _is_id(out.get("id")):
        out = {"id": new_id(), **out}
    if "timestamp" not in out:
        ts = parse_time(out.get("ts"))
        out["timestamp"] = iso(ts) if ts is not None else now
    report.convert("message:retyped")
    return out


def _pair_calls(messages: list[dict], report: LossReport) -> list[dict]:
    """Give every call a result: empty ``toolCalls[].result`` filled, lone functionCalls answered."""
    answered = set()
    for m in messages:
        if m.get("type") == "user":
            for cid in _fr_ids(m) or []:
                answered.add(cid)
    out: list[dict] = []
    for m in messages:
        out.append(m)
        if m.get("type") != "gemini":
            continue
        calls = m.get("toolCalls")
        if isinstance(calls, list) and any(isinstance(tc, dict) and tc.get("result") is None
                                           and tc.get("id") not in answered for tc in calls):
            m = out[-1] = copy.deepcopy(m)
            for tc in m["toolCalls"]:
                if isinstance(tc, dict) and tc.get("result") is None and tc.get("id") not in answered:
                    tc.setdefault("name", "unknown")
                    _Converter._fill(tc, NO_RESULT, True)
                    report.convert("tool_result:synthesized")
        with_result = {tc.get("id") for tc in m.get("toolCalls") or [] if isinstance(tc, dict) and tc.get("result") is not None}
        content = m.get("content")
        lone = [p["functionCall"] for p in content if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)
                and p["functionCall"].get("id") not in answered | with_result] if isinstance(content, list) else []
        if lone:
            report.convert("tool_result:synthesized", len(lone))
            out.append({"id": f"{m.get('id')}_opal_response", "timestamp": m.get("timestamp"), "type": "user",
                        "content": [{"functionResponse": {"id": fc.get("id"), "name": fc.get("name"),
                                                          "response": {"error": NO_RESULT}}} for fc in lone]})
    return out


# ---------------------------------------------------------------------------- adapter


class GeminiAdapter(Adapter):
    """Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl``."""

    name = "gemini"
    title = "Gemini CLI"

    # -- discovery ----------------------------------------------------------------

    def _scan(self, folder: str) -> list[tuple[SessionFile, dict]]:
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

    def find_sessions(self, cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
        base = gemini_dir(env)
        if base is None or not os.path.isdir(base):
            return []
        best: dict[str, SessionFile] = {}
        for folder in _project_dirs(base, cwd):
            for sf, _ in self._scan(folder):
                if not _has_resumable_content(sf.path, sf.size):
                    continue
                old = best.get(sf.id)  # the CLI lists each sessionId once: the newest file
                if old is None or sf.mtime > old.mtime:
                    best[sf.id] = sf
        return sorted(best.values(), key=lambda s: (-s.mtime, s.path))

    def find_session(self, session_id: str, env: Mapping[str, str]) -> SessionFile | None:
        base = gemini_dir(env)
        if not session_id or base is None:
            return None
        try:
            folders = sorted(e.path for e in os.scandir(os.path.join(base, "tmp")) if e.is_dir())
        except OSError:
            return None
        hits = [sf for folder in folders for sf, _ in self._scan(folder) if sf.id == session_id]
        # Resuming leaves a stub file with the same id and nothing in it: prefer content.
        return max(hits, key=lambda s: (_has_resumable_content(s.path, s.size), s.mtime, s.size), default=None)

    def sniff(self, path: str, head: bytes) -> bool:
        if not head or b"\x00" in head[:4096]:
            return False
        first = head.split(b"\n", 1)[0]
        try:
            value = jsonl.parse(first)
        except jsonl.ParseFailure:
            value = None
        if isinstance(value, dict):
            return _kind(value) == "header" or (
                isinstance(value.get("sessionId"), str) and isinstance(value.get("messages"), list))
        doc = _document(head)
        if doc is not None:
            return doc[2] == "history" or _is_id(doc[0].get("sessionId"))
        text = head.decode("utf-8", "replace")
        return text.lstrip().startswith("{") and '"sessionId"' in text and ('"messages"' in text or '"projectHash"' in text)

    # -- reading ------------------------------------------------------------------

    def read(self, path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
        full = start == 0
        try:
            fh = open(path, "rb")
        except IsADirectoryError:
            raise InputError("this is a folder, not a session file", path=path,
                             hint="give the path of a session-*.jsonl file under ~/.gemini/tmp/<project>/chats") from None
        except OSError as exc:
            raise InputError(f"cannot open the session file ({exc.strerror or exc})", path=path,
                             hint="check the path and its permissions") from None
        with fh:
            size = os.fstat(fh.fileno()).st_size
            old = dict(state or {})
            if not full and (start > size or old.get("doc")):
                info = _Info(old.get("info"))
                info.resolve(path)
                why = ("the file is shorter than what was already imported" if start > size
                       else "a single-JSON session changes as a whole")
                return ReadResult(session=info.session(), records=[], views=[], state=old, end=start,
                                  lines=first_line - 1, extends=False, warnings=[f"{path}: {why}; it will be read again"])
            if full:
                head = fh.read(4096)
                if size == 0 or (size <= len(head) and not head.strip()):
                    raise InputError("the session file is empty", path=path,
                                     hint="the agent has not written anything yet; try again after its first reply")
                jsonl.sniff_binary(path, head)
                doc = self._maybe_document(path, fh, size)
                if doc is not None:
                    return self._read_document(path, *doc)
            records, values, warnings, end, lines = self._read_lines(fh, path, start, first_line, full)
            fh.seek(0, os.SEEK_END)
            if fh.tell() > end:
                warnings.append(f"{path}:{lines + 1}: incomplete last line (the agent may still be writing); "
                                "it will be committed next time")
        if full:
            self._check_shape(path, values, records)
        info = _Info(None if full else old.get("info"))
        for v in values:
            info.feed(v)
        info.resolve(path)
        if full and values and info.hash is None:
            warnings.append(f"{path}: no session header (sessionId and projectHash); Gemini CLI cannot resume it as is")

        prior = [] if full else [a for a in old.get("answered") or [] if _is_id(a)]
        replay = _replay(values, prior)
        normals = _normals(values, replay)
        for rec, value, normal in zip(records, values, normals):
            if value is not _SKIP:  # opaque lines keep their "blank" / "unparseable" label
                rec.normal = normal
        known = old.get("bloom") if not full and old.get("v") == STATE_VERSION else None
        usable = isinstance(known, bytes) and len(known) == BLOOM_BITS // 8
        bloom = bytearray(known if usable else bytes(BLOOM_BITS // 8))
        extends = usable and _extends(values, bytes(bloom))
        for mid in replay.ids:
            _bloom_add(bloom, mid)
        live = [e.key for e in replay.entries if not e.key.startswith("#")]
        leaf = live[-1] if live else (old.get("leaf") if not full else None)
        views = [View(indices=list(range(len(records))), leaf=leaf)] if full or extends else []
        new_state = {"v": STATE_VERSION, "bloom": bytes(bloom), "answered": replay.answered, "info": info.saved()}
        if leaf is not None:
            new_state["leaf"] = leaf
        if not full and not extends:
            new_state = old  # the caller reads the whole file again
        return ReadResult(session=info.session(), records=records, views=views, state=new_state, end=end,
                          lines=lines, warnings=warnings, extends=extends)

    def _maybe_document(self, path: str, fh, size: int) -> tuple[tuple[dict, list, str], bytes] | None:
        """A legacy single-JSON document and the file's bytes, when the file is one.

        A ``.jsonl`` file whose first line is JSON is always read line by line (even a
        whole legacy record on one line), so that its round trip stays byte-exact.
        """
        fh.seek(0)
        try:
            jsonl.parse(fh.readline().rstrip(b"\n"))
            first_ok = True
        except jsonl.ParseFailure:
            first_ok = False
        if first_ok and (path.endswith(".jsonl") or size > DOCUMENT_LIMIT):
            return None
        if size > DOCUMENT_LIMIT:
            raise InputError("this single-JSON session is too large to load", path=path,
                             hint=f"files over {DOCUMENT_LIMIT // (1024 * 1024)} MiB are not read")
        fh.seek(0)
        data = fh.read()
        doc = _document(data)
        if doc is not None:
            return doc, data
        if first_ok:
            return None
        try:
            value = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            if not path.endswith(".json"):
                return None  # reported line by line: "the first line is not JSON"
            line = exc.lineno if isinstance(exc, json.JSONDecodeError) else None
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 JSON"
            raise InputError(f"not JSON ({why}); this is not a Gemini CLI session", path=path, line=line,
                             hint="give the path of a session-*.jsonl or session-*.json file") from None
        other = _other_agent(value)
        if other:
            raise _foreign(path, other, None)
        raise InputError("this JSON document has no Gemini CLI messages (no messages or history list)", path=path,
                         hint="give the path of a session-*.jsonl or session-*.json file")

    def _read_document(self, path: str, doc: tuple[dict, list, str], data: bytes) -> ReadResult:
        header, messages, key = doc
        values: list[Any] = [header, *messages]
        replay = _replay(values)
        normals = _normals(values, replay)
        records = [Record(Turn.from_record(AGENT, v), n, 1) for v, n in zip(values, normals)]
        info = _Info()
        for v in values:
            info.feed(v)
        info.resolve(path)
        live = [e.key for e in replay.entries if not e.key.startswith("#")]
        warnings = [] if key == "messages" else [
            f"{path}: an old {{history: [...]}} session; it is read, but Gemini CLI cannot resume it"]
        return ReadResult(
            session=info.session(), records=records,
            views=[View(indices=list(range(len(records))), leaf=live[-1] if live else None)],
            state={"v": STATE_VERSION, "doc": True, "info": info.saved()},
            end=len(data), lines=data.count(b"\n"), warnings=warnings, extends=False)

    def _read_lines(self, fh, path: str, start: int, first_line: int, full: bool):
        records: list[Record] = []
        values: list[Any] = []
        warnings: list[str] = []
        end, lines = start, first_line - 1
        seen_json = not full
        for raw in iter_jsonl(fh, path, start=start, first_line=first_line):
            end, lines = raw.line.end, raw.line.number
            if raw.problem is None:
                seen_json = True
                records.append(Record(record_turn(AGENT, raw), Normal(role="meta"), raw.line.number))
                values.append(raw.value)
                continue
            if raw.problem == "blank":
                normal = Normal(role="meta", label="blank")
            else:
                if not seen_json:
                    raise InputError(f"the first line is not JSON ({_reason(raw.problem)}); this is not a Gemini CLI "
                                     "session", path=path, line=raw.line.number,
                                     hint="give the path of a session-*.jsonl file under ~/.gemini/tmp/<project>/chats")
                warnings.append(f"{path}:{raw.line.number}: not JSON ({_reason(raw.problem)}); kept as an opaque record")
                normal = Normal(role="meta", label="unparseable")
            records.append(Record(Turn.from_line(AGENT, raw.line.raw), normal, raw.line.number))
            values.append(_SKIP)
        return records, values, warnings, end, lines

    def _check_shape(self, path: str, values: list[Any], records: list[Record]) -> None:
        checked = 0
        for rec, value in zip(records, values):
            if value is _SKIP:
                continue
            if _is_gemini(value):
                return
            other = _other_agent(value)
            if other and checked == 0:
                raise _foreign(path, other, rec.line)
            checked += 1
            if checked >= _SHAPE_LINES:
                break
        if checked == 0:
            return
        first = next(r.line for r, v in zip(records, values) if v is not _SKIP)
        raise InputError("this JSON-lines file has no Gemini CLI records (no sessionId/projectHash header, "
                         "message ids, $set or $rewindTo)", path=path, line=first,
                         hint="give the path of a session-*.jsonl file under ~/.gemini/tmp/<project>/chats, "
                              "or pick the right --agent")

    def normalize(self, turn: Turn) -> Normal:
        """A stored turn's standalone view: every message counts as live (see the module docstring)."""
        if turn.has_record:
            return normalize_record(turn.record)
        if isinstance(turn.line, bytes):
            return _normal_of_line(turn.line)
        if turn.blocks is not None:
            return Normal(role=turn.role or "meta", blocks=list(turn.blocks))
        return Normal(role="meta", label="unresolved")

    def normalize_many(self, turns: list[Turn]) -> list[Normal]:
        """The views of a whole sequence of stored turns, the log replayed as :meth:`read` does."""
        values = [_value_of(t) if t.agent == AGENT else _SKIP for t in turns]
        normals = _normals(values, _replay(values))
        return [n if t.agent == AGENT else self.normalize(t) for t, n in zip(turns, normals)]

    # -- writing ------------------------------------------------------------------

    def export(self, req: ExportRequest) -> ExportResult:
        report = LossReport()
        base = gemini_dir(req.env)
        if base is None:
            raise InputError("cannot tell where Gemini CLI keeps its sessions (neither GEMINI_CLI_HOME nor HOME is set)",
                             hint="set HOME")
        cwd = os.path.realpath(req.cwd)  # the CLI keys projects by process.cwd(), a physical path
        counter = [0]
        values: list[Any] = []
        native: set[int] = set()
        conv: _Converter | None = None
        for et in req.turns:
            if et.turn.agent != AGENT:
                conv = conv or _Converter(req, report, counter)
                conv.feed(et.turn.agent, et.normal)
                continue
            if conv is not None:
                values.extend(conv.finish())
                conv = None
            value = _value_of(et.turn)
            if value is _SKIP:
                report.drop("record:unparseable")
                continue
            native.add(len(values))
            values.append(value)
        if conv is not None:
            values.extend(conv.finish())

        replay = _replay(values)
        credited = {e.src for e in replay.entries}
        for i in native:
            kind = _kind(values[i])
            if kind in ("message", "content") and i not in credited:
                report.drop("record:superseded")
            elif kind not in ("message", "content"):
                report.convert("record:folded")

        def new_id() -> str:
            counter[0] += 1
            return str(uuid.uuid5(_ID_NAMESPACE, f"{req.session_id}/{counter[0]}"))

        messages = []
        for e in replay.entries:
            if e.dup:
                report.drop("tool_result:duplicate")
                continue
            messages.append(_as_message(e.msg, report, new_id, iso(req.now_ms)) if e.src in native else e.msg)
        messages = _pair_calls(messages, report)

        now = iso(req.now_ms)
        header: dict[str, Any] = {"sessionId": req.session_id, "projectHash": project_hash(cwd),
                                  "startTime": now, "lastUpdated": now, "kind": "main"}
        if _is_id(replay.meta.get("summary")):
            header["summary"] = replay.meta["summary"]
        body = b"".join(jsonl.dumps(m) + b"\n" for m in [header, *messages])

        folder, aux = self._project_folder(base, cwd, report)
        stamp = datetime.fromtimestamp(req.now_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H-%M")
        path = os.path.join(folder, "chats", f"session-{stamp}-{req.session_id[:8]}.jsonl")
        return ExportResult(files=[(path, body)], session_id=req.session_id,
                            resume=["gemini", "--resume", req.session_id], report=report, aux=aux)

    def _project_folder(self, base: str, cwd: str, report: LossReport) -> tuple[str, list[tuple[str, bytes]]]:
        """The project's folder under ``<base>/tmp`` and the registry files to write for it."""
        tmp = os.path.join(base, "tmp")
        registry_path = os.path.join(base, "projects.json")
        data, problem = _load_registry(registry_path)
        projects = data["projects"]
        slug = projects.get(cwd)
        if slug and all(owner == cwd for owner in _marker_owner(base, slug)):
            return os.path.join(tmp, slug), []
        legacy = os.path.join(tmp, project_hash(cwd))
        if not slug and os.path.isdir(legacy):
            # The CLI copies a legacy hash folder into a *fresh* slug folder on its next
            # start; writing into a new slug folder now would stop that migration.
            report.note(f"the project is not registered in projects.json; the session goes into its legacy folder "
                        f"{legacy}, which Gemini CLI migrates on its next start")
            return legacy, []
        if problem:
            report.note(f"{registry_path} is {problem}; it is replaced, as Gemini CLI itself would do")
        slug = self._existing_slug(base, cwd) or self._claim_slug(base, cwd, projects)
        projects[cwd] = slug
        aux = [(registry_path, json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8"))]
        for sub in ("tmp", "history"):
            marker = os.path.join(base, sub, slug, ".project_root")
            if not os.path.exists(marker):
                aux.append((marker, cwd.encode("utf-8", "surrogatepass")))
        report.note(f"registered the project {cwd} as {slug!r} in {registry_path}")
        return os.path.join(tmp, slug), aux

    @staticmethod
    def _existing_slug(base: str, cwd: str) -> str | None:
        for sub in ("tmp", "history"):
            try:
                names = sorted(os.listdir(os.path.join(base, sub)))
            except OSError:
                continue
            for name in names:
                text = _read_text(os.path.join(base, sub, name, ".project_root"))
                if text is not None and text.strip() == cwd and re.fullmatch(r"[a-z0-9-]+", name):
                    return name
        return None

    @staticmethod
    def _claim_slug(base: str, cwd: str, projects: Mapping[str, str]) -> str:
        stem = slugify(os.path.basename(cwd.rstrip("/")) or "project")
        taken = set(projects.values())
        n = 0
        while True:
            candidate = stem if n == 0 else f"{stem}-{n}"
            n += 1
            if candidate in taken or any(owner != cwd for owner in _marker_owner(base, candidate)):
                continue
            return candidate

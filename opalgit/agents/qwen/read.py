"""Reading Qwen Code sessions: parsing, the uuid tree of views, normalizing.

A Qwen Code session is one JSON-lines file (Qwen Code 0.24.4,
``packages/core/src/services/chatRecordingService.ts``). Each line is a record like
Claude Code's (``uuid``, ``parentUuid``, ``sessionId``, ``timestamp``, ``type``, ``cwd``,
``version``, ``gitBranch``) whose ``message`` is a Gemini ``Content``:
``{"role": "user" | "model", "parts": [...]}``. Types are ``user``, ``assistant``,
``tool_result`` (one record per tool response, ``functionResponse`` parts) and
``system`` (subtypes ``ui_telemetry``, ``attribution_snapshot``, ``chat_compression``,
``custom_title``, ``rewind`` ...). Every line is kept as one record, in file order, so
that writing the records back reproduces the file byte for byte.

The records form a tree through ``uuid``/``parentUuid``. Qwen Code resumes the chain
that ends at the last conversation record of the file (``selectTranscriptLeaf``),
walked back by ``parentUuid``; a rewind re-roots the chain, which leaves the abandoned
records in the file. That chain is the first view; each other leaf of the tree whose
branch holds a user or assistant record is one more view (one opal branch), as Claude
Code forks are. Records outside the tree (lines that are not JSON, records without a
uuid, the artifact records Qwen Code keeps beside the conversation) go with every view.

Where the files are is :mod:`.files`; writing them, :mod:`.write`.
"""

from __future__ import annotations

import os
from typing import Any, Iterator, Mapping, Sequence

from opalgit import jsonl
from opalgit.agents import parts
from opalgit.agents.base import (
    CERTAIN,
    LineIndex,
    ReadResult,
    Record,
    SessionFacts,
    View,
    check_shape,
    not_json_at_first,
    open_session,
    parse_time,
    sniff_lines,
)
from opalgit.agents.qwen.files import AGENT
from opalgit.agents.qwen.format import TYPES, is_conversation
from opalgit.history.model import Normal

__all__ = ["claim", "normalize_record", "part_block", "read", "sniff"]

STATE_VERSION = 1
OWN = "a Qwen Code session"
_HINT = "give the path of a .jsonl session under ~/.qwen/projects/<project>/chats"
_SHAPE_LINES = 64
def _is_id(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def claim(obj: Any) -> float:
    """How surely a parsed line is a Qwen Code record: one of its types with a
    ``uuid``/``parentUuid`` and a Gemini-style message (``parts``, role ``model``) is
    certain; a Qwen-only system subtype (``ui_telemetry``, ``attribution_snapshot``,
    ``chat_compression``) with ``systemPayload`` too. Claude Code's records have the same
    identity keys but ``message.content``, so they are never claimed."""
    if not isinstance(obj, dict) or obj.get("type") not in TYPES or "uuid" not in obj or "parentUuid" not in obj:
        return 0.0
    msg = obj.get("message")
    if isinstance(msg, dict):
        if isinstance(msg.get("parts"), list) and "content" not in msg and msg.get("role") in ("user", "model"):
            return CERTAIN
        return 0.0
    if obj.get("type") == "system" and "systemPayload" in obj and isinstance(obj.get("subtype"), str):
        return CERTAIN
    return 0.0


def sniff(path: str, head: bytes) -> float:
    """How surely a file whose first bytes are ``head`` is a Qwen Code session."""
    return sniff_lines(head, claim)


# -------------------------------------------------------------------------- normalizing


def part_block(part: Any) -> dict:
    """The normalized block of one Gemini ``Part`` (a response with an error is the error)."""
    return parts.part_block(part, error_wins=True)


def _blocks(msg: Any) -> list[dict]:
    parts = msg.get("parts") if isinstance(msg, dict) else None
    return [part_block(p) for p in parts] if isinstance(parts, list) else []


def normalize_record(rec: Any) -> Normal:
    """The normalized view of one parsed Qwen Code line."""
    if not isinstance(rec, dict):
        return Normal(role="meta", label="non-object")
    time = parse_time(rec.get("timestamp"))
    kind = rec.get("type")
    sub = rec.get("subtype") if _is_id(rec.get("subtype")) else None
    blocks = _blocks(rec.get("message"))
    if rec.get("isSidechain") is True:
        return Normal(role="meta", blocks=blocks, time=time, label=f"sidechain:{kind if isinstance(kind, str) else 'unknown'}")
    if kind == "assistant":
        return Normal(role="assistant", blocks=blocks, time=time)
    if kind == "tool_result":
        return Normal(role="tool", blocks=blocks, time=time)
    if kind == "user":
        if any(b["type"] == "tool_result" for b in blocks):
            return Normal(role="tool", blocks=blocks, time=time)
        if sub in ("notification", "cron", "background_task_completed"):
            return Normal(role="meta", blocks=blocks, time=time, label=f"user:{sub}")
        return Normal(role="user", blocks=blocks, time=time)
    if kind == "system" and sub == "chat_compression":
        payload = rec.get("systemPayload")
        history = payload.get("compressedHistory") if isinstance(payload, dict) else None
        summary = [b for c in history if isinstance(c, dict) for b in _blocks(c)] if isinstance(history, list) else []
        # What Qwen Code sends after it: the compressed history replaces everything before.
        return Normal(role="system", blocks=summary, time=time, label="compact-boundary")
    label = kind if isinstance(kind, str) and kind else "unknown"
    return Normal(role="meta", blocks=blocks, time=time, label=f"{label}:{sub}" if sub else label)


# ------------------------------------------------------------------------ session info


class _Info(SessionFacts):
    AGENT = AGENT

    def feed(self, rec: Mapping[str, Any]) -> None:
        if self.id is None and _is_id(rec.get("sessionId")):
            self.id = rec["sessionId"]
        if self.cwd is None and _is_id(rec.get("cwd")):
            self.cwd = rec["cwd"]
        if _is_id(rec.get("gitBranch")):
            self.git_branch = rec["gitBranch"]
        if _is_id(rec.get("version")):
            self.version = rec["version"]
        if rec.get("type") == "assistant" and _is_id(rec.get("model")):
            self.model = rec["model"]
        if rec.get("type") == "system" and rec.get("subtype") == "custom_title":
            payload = rec.get("systemPayload")
            title = payload.get("customTitle", payload.get("title")) if isinstance(payload, dict) else None
            if _is_id(title):
                self.title = title

    def resolve_id(self, path: str) -> None:
        if self.id is None:
            stem = os.path.basename(path)
            self.id = stem[: -len(".jsonl")] if stem.endswith(".jsonl") else stem


# ------------------------------------------------------------------------------ views


def _fact(rec: Any, names: dict[str, str]) -> tuple[str, str | None, bool] | None:
    """What the tree needs of a line: (uuid, parentUuid, whether it is a user or
    assistant record), for a conversation record; None otherwise."""
    if not isinstance(rec, dict) or not is_conversation(rec):
        return None
    u = names.setdefault(rec["uuid"], rec["uuid"])
    p = rec.get("parentUuid")
    p = names.setdefault(p, p) if _is_id(p) else None
    return u, p, rec.get("type") in ("user", "assistant") and rec.get("isSidechain") is not True


def _chain(leaf: str, first: Mapping[str, tuple[int, str | None]]) -> list[str]:
    """The uuids from the root to ``leaf``, as Qwen Code walks them (stopping at a
    missing parent or a cycle)."""
    out, seen, u = [], set(), leaf
    while u is not None and u in first and u not in seen:
        seen.add(u)
        out.append(u)
        u = first[u][1]
    out.reverse()
    return out


def _views(facts: list[tuple[str, str | None, bool] | None]) -> tuple[list[View], str | None]:
    """The views of a whole file, the active one first, and its leaf."""
    first: dict[str, tuple[int, str | None]] = {}
    lines: dict[str, list[int]] = {}  # a uuid's lines (Qwen Code aggregates repeated uuids)
    talk: dict[str, bool] = {}
    children: set[str] = set()
    for i, f in enumerate(facts):
        if f is None:
            continue
        u, p, is_talk = f
        first.setdefault(u, (i, p))
        lines.setdefault(u, []).append(i)
        talk[u] = talk.get(u, False) or is_talk
        if p is not None:
            children.add(p)
    outside = [i for i, f in enumerate(facts) if f is None]
    leaf = next((f[0] for f in reversed(facts) if f is not None), None)
    if leaf is None:
        return [View(indices=list(range(len(facts))), leaf=None, name_hint=None)], None
    active = _chain(leaf, first)
    on = set(active)
    views = [View(indices=sorted(outside + [i for u in active for i in lines[u]]), leaf=leaf, name_hint=None)]
    leaves = [u for u in first if u not in children and u not in on]
    for n, other in enumerate(sorted(leaves, key=lambda u: first[u][0]), 1):
        chain = _chain(other, first)
        if not any(talk[u] for u in chain if u not in on):
            continue  # only bookkeeping off the active line: not a conversation of its own
        end = max(lines[chain[-1]])
        mine = [i for u in chain for i in lines[u]] + [i for i in outside if i < end]
        views.append(View(indices=sorted(mine), leaf=other, name_hint=f"fork-{n}"))
    return views, leaf


# ------------------------------------------------------------------------------ reading


def read(path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
    """Read in two passes, so that memory does not grow with the file: the first keeps
    each line's offset, CRC-32 and tree facts; the records are produced lazily."""
    full = start == 0
    old = {} if full else dict(state or {})
    info = _Info(old.get("info"))
    with _open(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if full:
            jsonl.sniff_binary(path, fh.read(4096))
        elif start > size:
            info.resolve_id(path)
            note = f"{path}: the file is shorter than what was already imported; it will be read again"
            return ReadResult(info.session(), [], [], old, start, first_line - 1, [note], extends=False)
        index = LineIndex(start, first_line - 1)
        facts: list[Any] = []
        judged: list[tuple[int, bool]] = []
        names: dict[str, str] = {}
        for line, value in index.scan(fh, path, start, first_line, full,
                                      lambda n, why: not_json_at_first(path, n, why, OWN, _HINT)):
            if isinstance(value, dict):
                info.feed(value)
            facts.append(_fact(value, names))
            if full and len(judged) < _SHAPE_LINES:
                judged.append((line.number, claim(value) > 0))
        facts = index.per_line(facts, None)
        index.end_of_pass(fh, path, full,
                          "Qwen Code has not written anything yet; try again after its first reply")
    warnings = index.warnings
    if full:
        check_shape(path, judged, "this JSON-lines file has no Qwen Code records (uuid/parentUuid with a "
                    "Gemini-style message.parts)", _HINT + ", or pick the right --agent", OWN)
    info.resolve_id(path)
    if full:
        views, leaf = _views(facts)
        extends = False
    else:
        leaf, extends = _extend(facts, old.get("leaf"), set(old.get("tail") or ()))
        views = [View(indices=list(range(len(facts))), leaf=leaf, name_hint=None)] if extends else []
    seen = (list(old.get("tail") or ()) if not full else []) + [f[0] for f in facts if f is not None]
    new_state = {"v": STATE_VERSION, "leaf": leaf if (full or extends) else old.get("leaf"),
                 "tail": seen[-8:] if (full or extends) else list(old.get("tail") or ()), "info": info.saved()}

    def produce(indices: Sequence[int] | None) -> Iterator[Record]:
        return index.records(lambda: _open(path), path, AGENT, first_line, indices,
                             lambda i, value: normalize_record(value))

    return ReadResult(info.session(), None, views, new_state, index.end, index.lines, warnings, extends,
                      produce=produce, count=len(index))


def _extend(facts: list[Any], leaf: str | None, tail: set[str]) -> tuple[str | None, bool]:
    """Whether the new lines of an incremental read simply continue the old active
    chain (each new record's parent the record before it on the chain), and the new leaf.
    Anything else (a rewind, a repeated uuid) makes the caller read the whole file."""
    for f in facts:
        if f is None:
            continue
        u, p, _ = f
        if u in tail or p != leaf:
            return leaf, False
        tail.add(u)
        leaf = u
    return leaf, True


def _open(path: str):
    return open_session(path, _HINT, buffering=1 << 20)

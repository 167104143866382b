"""Gemini CLI's mutation log: what each line is, what its messages mean, what the log replays to.

A JSON-lines session is a *mutation log* (formats.md §3.2): a header (``sessionId`` +
``projectHash``), message records keyed by ``id`` (a later line with the same id
replaces the earlier one, in place), ``{"$set": {...}}`` metadata updates
(``$set.messages`` replaces the whole list: a checkpoint) and ``{"$rewindTo": id}``
(drops that message and all after it; an unknown id drops everything). :func:`_replay`
applies the log as the CLI does and :func:`_normals` gives each line its view, so
that each message is counted once:

* a message line that a later line, a rewind or a checkpoint removed is ``meta``
  with label ``gemini:superseded``;
* a checkpoint that restates a message id keeps crediting that message's own line
  (the CLI builds checkpoints from its in-memory history, which drops the
  ``toolCalls``/``thoughts`` it had recorded); messages that only a checkpoint holds
  are credited to the checkpoint record;
* a ``user`` record made only of ``functionResponse`` parts whose calls were already
  answered (the CLI records every result twice: in ``toolCalls[].result`` and as such
  a record) is ``meta`` with label ``gemini:duplicate-result``.

:func:`normalize_record` sees one line without that context and treats every message
as live (what :meth:`.adapter.GeminiAdapter.normalize` returns);
:meth:`.adapter.GeminiAdapter.normalize_many` gives the replayed view of a whole list
of turns.

Normalized blocks (the shared vocabulary, see :mod:`opalgit.agents.claude.read`):
``text``; ``image`` (``media_type`` + base64 ``data``, or ``url``); ``reasoning`` (from
``thoughts[]`` and ``thought`` parts; ``signed`` when a part has a
``thoughtSignature``); ``tool_call`` ``{id, name, input}``; ``tool_result`` ``{call_id,
name, output, is_error}``; ``other`` ``{kind}``. A ``gemini`` message is ``assistant``
and carries its calls *and* their results (``toolCalls[].result``) in the same
normal, results after the calls (so its summary kind is ``tool_call``).

Used by :mod:`.read`, :mod:`.write` and :mod:`.files`. Pure: parsed
values in, normals out; no files, no environment, no printing.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from opalgit import jsonl
from opalgit.agents.base import parse_time
from opalgit.agents.parts import part_block as _part_block
from opalgit.history.model import Normal, Turn
from opalgit.structs import dataclass

__all__ = ["AGENT", "document", "message_normal", "normalize_record", "parse_time"]

AGENT = "gemini"
#: The CLI drops user text starting with these on resume (isIgnoredUserContent).
IGNORED_PREFIXES = ("/", "?", "<session_context>", "<hook_context>")
NO_RESULT = "[opal: this tool call has no recorded result]"
#: Prefix that keeps an exported user text from being dropped: JavaScript's trim()
#: keeps U+200B, so the text no longer starts with "/" or "?".
KEEP_PREFIX = "\u200b"

#: Call ids answered near the end of the conversation, kept for incremental reads.
ANSWERED_TAIL = 64
_CONTEXT_PREFIXES = ("<session_context>", "<hook_context>")


# ----------------------------------------------------------------------- small helpers


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


def document(data: bytes) -> tuple[dict, list, str] | None:
    """A legacy single-JSON session: (header, messages, list key), or None."""
    try:
        doc = jsonl.loads(data.decode("utf-8"))  # an integer of any length too
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    key = next((k for k in ("messages", "history") if isinstance(doc.get(k), list)), None)
    if key is None:
        return None
    return {k: v for k, v in doc.items() if k != key}, doc[key], key


# -------------------------------------------------------------------------- normalizing


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


# ----------------------------------------------------------------------- replaying the log


@dataclass
class _Entry:
    """One message of the final state: who is credited with it, and its content."""

    key: str
    src: int  # index (in the replayed values) of the credited record
    msg: dict
    dup: bool = False  # only already-answered functionResponses
    answers: int = 0  # call ids it answered first (what it added to the replay's answered)


@dataclass
class _Replay:
    entries: list[_Entry]
    meta: dict  # merged metadata (header lines and $set)
    ids: list[str]  # every message id seen (lines and checkpoint entries), file order
    answered: list[str]  # call ids answered by live messages, final order


_SKIP = object()  # a value that is not JSON (kept opaque)


def _value_of(turn: Turn) -> Any:
    if turn.has_record:
        return turn.record
    if isinstance(turn.line, bytes):
        try:
            return jsonl.parse_kept(turn.line)
        except jsonl.ParseFailure:
            return _SKIP
    return _SKIP


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
        before = len(done)
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
        entry.answers = len(done) - before
        entries.append(entry)
    return _Replay(entries, meta, ids, done[-ANSWERED_TAIL:])


def _normals(values: list[Any], replay: _Replay) -> list[Normal]:
    """Each value's normal, knowing which messages are live (see the module docstring)."""
    credited = credits(replay)
    return [normal_at(i, rec, credited) for i, rec in enumerate(values)]


def credits(replay: _Replay) -> dict[int, list[_Entry]]:
    """The live messages of a replay, by the index of the line credited with each."""
    credited: dict[int, list[_Entry]] = {}
    for e in replay.entries:
        credited.setdefault(e.src, []).append(e)
    return credited


def normal_at(i: int, rec: Any, credited: Mapping[int, list[_Entry]]) -> Normal:
    """The normal of line ``i`` (parsed: ``rec``) in a replayed log (:func:`credits`).

    Only ``rec`` is read for content: the replay may have run on :func:`light`
    values, whose messages hold no content.
    """
    if rec is _SKIP:
        return Normal(role="meta", label="unparseable")
    kind = _kind(rec)
    mine = credited.get(i, [])
    if kind in ("message", "content"):
        if not mine:
            return Normal(role="meta", time=parse_time(rec.get("timestamp")), label="gemini:superseded")
        if mine[0].dup:
            return Normal(role="meta", time=parse_time(rec.get("timestamp")), label="gemini:duplicate-result")
        return message_normal(rec)
    base = _bookkeeping_normal(rec, kind)
    if not mine:
        return base
    # The messages credited to a checkpoint or header line are its own entries (the
    # last one of an id, as the replay loads them).
    own = {m["id"]: m for m in _entries(rec, kind) or () if _kind(m) == "message"} if kind in ("set", "header") else {}
    return _combined([message_normal(own.get(e.key, e.msg)) for e in mine if not e.dup], base.label, base.time)


def light(rec: Any) -> Any:
    """What :func:`_replay` and :func:`.gemini._extends` read of a parsed line, without
    the content: a streaming read keeps this of every line, not the line.

    Replaying light values gives the same entries (keys, credited lines, duplicate
    flags) and the same answered calls as replaying the lines; only the entries'
    messages are light too (:func:`normal_at` reads the line itself).
    """
    kind = _kind(rec)
    if kind == "message":
        return _light_message(rec)
    if kind == "rewind":
        return {"$rewindTo": rec["$rewindTo"]}
    if kind == "content":
        return {"role": rec["role"], "parts": []}
    if kind == "set":
        if not isinstance(rec["$set"], dict):
            return {"$set": []}
        return {"$set": _light_body(rec["$set"], _entries(rec, kind))}
    if kind == "header":
        return _light_body(rec, _entries(rec, kind))
    return None  # another record: the replay skips it


def _light_body(body: Mapping[str, Any], msgs: list | None) -> dict:
    """A checkpoint's ``$set`` or a header as :func:`light` keeps it: every field but
    the messages as it is, the messages (``msgs``, when it has them) light."""
    out = {k: v for k, v in body.items() if k != "messages"}
    if msgs is not None:
        out["messages"] = [_light_message(m) if _kind(m) == "message" else None for m in msgs]
    return out


def _light_message(msg: Mapping[str, Any]) -> dict:
    out: dict[str, Any] = {"id": msg["id"], "type": msg.get("type"), "timestamp": msg.get("timestamp")}
    frs = _fr_ids(msg)
    # Content that _fr_ids reads back as the same ids (or as None: not only responses).
    out["content"] = [{"functionResponse": {"id": c}} for c in frs] if frs is not None else None
    calls = msg.get("toolCalls")
    if isinstance(calls, list):
        out["toolCalls"] = [
            {"id": tc.get("id"), "result": True if tc.get("result") is not None else None} if isinstance(tc, dict)
            else None
            for tc in calls
        ]
    return out

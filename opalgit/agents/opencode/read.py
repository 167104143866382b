"""Reading opencode sessions: the JSON ``opencode export`` prints, into records.

A session is ``{"info": Session, "messages": [{"info": Message, "parts": [Part, ...]}]}``
(the export a user makes, or the mirror :mod:`.files` makes from the database). Records:
the session itself (``{"info": Session}`` with every top-level key but ``messages``), then
one record per message, ``{"info", "parts"}`` exactly as exported, unknown part types and
fields included. Rendered, the records are JSON lines of the same shape (the session first,
then a message a line), which this reader also takes, so a round trip keeps every message
and part. Every record of a document has line 1 (the document is one value).

The view of a message is what opencode sends the model from it (its ``toModelMessages``):
text parts (not ``ignored`` ones), reasoning, and each ``tool`` part as a call and, once it
has run, its result (the output, or the error); of one assistant message (one model step)
the calls come first, then the results, as they reach the model. ``step-start``,
``step-finish``, ``snapshot``, ``patch`` and the other bookkeeping parts are not sent: they
make no block. A ``file`` part and any part type opal does not know are an ``other`` block.

Pure: no store, no environment reads, no printing.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from opalgit import jsonl
from opalgit.agents.base import CERTAIN, NotThisAgent, ReadResult, Record, View, open_session, record_turn
from opalgit.agents.base import RawRecord as _RawRecord
from opalgit.agents.opencode.files import AGENT
from opalgit.errors import InputError
from opalgit.history.model import Normal, SessionInfo, Turn

__all__ = ["normalize_record", "read", "sniff"]

OWN = "an opencode session export"
HINT = "give the JSON `opencode export <session id>` prints (or run opal commit in the session's folder)"
#: Exports larger than this are refused rather than loaded whole.
DOCUMENT_LIMIT = 512 * 1024 * 1024
#: Parts opencode keeps for itself and never sends the model.
_BOOKKEEPING = frozenset({"step-start", "step-finish", "snapshot", "patch", "agent", "retry", "compaction", "subtask"})


def _is_id(value: Any, prefix: str) -> bool:
    return isinstance(value, str) and value.startswith(prefix)


def is_session(value: Any) -> bool:
    """A record that is the session: ``{"info": Session, ...}`` without ``parts``."""
    return (isinstance(value, dict) and "parts" not in value and isinstance(value.get("info"), dict)
            and _is_id(value["info"].get("id"), "ses"))


def is_message(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("info"), dict) and isinstance(value.get("parts"), list)
            and value["info"].get("role") in ("user", "assistant"))


def sniff(path: str, head: bytes) -> float:
    """Certain for an export document (pretty-printed as opencode prints it, or compact) or
    the JSON-lines form opal renders; a document the head cuts short is nearly so when its
    first key is ``info`` holding a ``ses_`` id."""
    if not head or b"\x00" in head[:4096]:
        return 0.0
    text = head.decode("utf-8", "replace").lstrip()
    if not text.startswith("{"):
        return 0.0
    first = head.split(b"\n", 1)[0]
    try:
        value = jsonl.parse(first)
    except jsonl.ParseFailure:
        value = None
    if isinstance(value, dict):
        return CERTAIN if is_session(value) else 0.0
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return CERTAIN if is_session(value) and isinstance(value.get("messages"), list) else 0.0
    return 0.9 if re.match(r'\{\s*"info"\s*:\s*\{\s*"id"\s*:\s*"ses', text) else 0.0


def _where(exc: json.JSONDecodeError) -> str:
    return f"line {exc.lineno}, column {exc.colno}: {exc.msg}"


def _load(path: str) -> tuple[bytes, Any, list[Any] | None]:
    """The file's bytes and either its one document, or (JSON lines) its values."""
    with open_session(path, HINT) as fh:
        data = fh.read(DOCUMENT_LIMIT + 1)
    if len(data) > DOCUMENT_LIMIT:
        raise InputError(f"the export is larger than {DOCUMENT_LIMIT >> 20} MiB", path=path, hint=HINT)
    if not data.strip():
        raise NotThisAgent("the file is empty; this is not " + OWN, path=path, hint=HINT, own=OWN)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise NotThisAgent(f"not UTF-8 text; this is not {OWN}", path=path, line=line, hint=HINT, own=OWN) from None
    try:
        return data, json.loads(text), None
    except json.JSONDecodeError as exc:
        whole = exc
    except RecursionError:
        raise InputError("the JSON nests too deep", path=path, hint=HINT) from None
    # Not one document: the JSON-lines form, when its first line is the session.
    rows = text.split("\n")
    try:
        first = json.loads(rows[0])
    except ValueError:
        first = None
    if not is_session(first):
        if first is not None and not (isinstance(first, dict) and "info" in first):
            kind = "an object" if isinstance(first, dict) else type(first).__name__
            raise NotThisAgent(f"the first line is {kind} without an opencode session's info; this is not {OWN}",
                               path=path, line=1, hint=HINT, own=OWN, named_line=1)
        if whole.lineno == 1 and not text.lstrip().startswith("{"):
            raise NotThisAgent(f"the first line is not JSON ({whole.msg}); this is not {OWN}", path=path, line=1,
                               hint=HINT, own=OWN)
        raise InputError(f"not valid JSON ({_where(whole)}); the export is truncated or damaged", path=path,
                         line=whole.lineno, hint="export the session again: opencode export <session id> > file.json")
    values = []
    for n, raw in enumerate(rows, 1):
        if not raw.strip():
            continue
        try:
            values.append((n, json.loads(raw)))
        except ValueError as exc:
            raise InputError(f"line {n} is not JSON ({exc}); the file is truncated or damaged", path=path, line=n,
                             hint="export the session again: opencode export <session id> > file.json") from None
    return data, None, values


def _check(path: str, value: Any, line: int | None, where: str) -> None:
    if not is_message(value):
        raise InputError(f"{where} is not an opencode message ({{info: {{role: user|assistant}}, parts: [...]}})",
                         path=path, line=line, hint="export the session again: opencode export <session id> > file.json")


def read(path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
    """Read an export whole. A read from an offset is never an extension: opencode's export
    is one document, so the caller reads it again whole (an export is rewritten, not appended)."""
    if start > 0:
        return ReadResult(SessionInfo(AGENT, str((state or {}).get("id") or "")), records=[], state=dict(state or {}),
                          end=start, lines=first_line - 1, extends=False)
    data, doc, values = _load(path)
    records: list[Record] = []
    if doc is not None:
        if not isinstance(doc, dict) or not is_session({k: v for k, v in doc.items() if k != "parts"}) \
                or not isinstance(doc.get("messages"), list):
            kind = type(doc).__name__ if not isinstance(doc, dict) else "an object without info.id ses_... and messages"
            raise NotThisAgent(f"the JSON is {kind}; this is not {OWN}", path=path, line=1, hint=HINT, own=OWN)
        head = {k: v for k, v in doc.items() if k != "messages"}
        records.append(Record(Turn.from_record(AGENT, head), normalize_record(head), 1))
        for i, msg in enumerate(doc["messages"]):
            _check(path, msg, None, f"messages[{i}]")
            records.append(Record(Turn.from_record(AGENT, msg), normalize_record(msg), 1))
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    else:
        assert values is not None
        offset = 0
        for n, value in values:
            if n > 1:
                _check(path, value, n, f"line {n}")
            raw = data.split(b"\n")[n - 1]
            line = jsonl.Line(n, offset, offset, raw, True)
            records.append(Record(record_turn(AGENT, _RawRecord(line, value, None)), normalize_record(value), n))
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    info = records[0].turn.record["info"] if records[0].turn.has_record else json.loads(records[0].turn.line)["info"]
    session = _session(info, records)
    return ReadResult(session, records=records, views=[View(list(range(len(records))))],
                      state={"id": session.id}, end=len(data), lines=lines)


def _session(info: dict, records: list[Record]) -> SessionInfo:
    model = info.get("model") if isinstance(info.get("model"), dict) else {}
    name = model.get("id")
    if not isinstance(name, str):
        for rec in records[1:]:
            value = rec.turn.record if rec.turn.has_record else None
            mi = value.get("info") if isinstance(value, dict) else None
            if isinstance(mi, dict) and isinstance(mi.get("modelID"), str):
                name = mi["modelID"]
    title = info.get("title") if isinstance(info.get("title"), str) else None
    version = info.get("version") if isinstance(info.get("version"), str) else None
    cwd = info.get("directory") if isinstance(info.get("directory"), str) and os.path.isabs(info["directory"]) else None
    return SessionInfo(AGENT, str(info.get("id")), cwd, None, name if isinstance(name, str) else None, title, version)


def _time(info: dict) -> int | None:
    t = info.get("time")
    created = t.get("created") if isinstance(t, dict) else None
    return created if isinstance(created, int) and not isinstance(created, bool) else None


def _output(state: dict) -> tuple[Any, bool] | None:
    """A tool part's result as the model sees it: ``(output, is_error)``; None while it runs."""
    status = state.get("status")
    if status == "completed":
        out = state.get("output")
        if state.get("time", {}).get("compacted") if isinstance(state.get("time"), dict) else False:
            out = "[Old tool result content cleared]"
        return (out if isinstance(out, str) else json.dumps(out)), False
    if status == "error":
        err = state.get("error")
        return (err if isinstance(err, str) else json.dumps(err)), True
    return None


def normalize_record(record: Any) -> Normal:
    """The view of one record (see the module)."""
    if is_session(record):
        return Normal(role="meta", time=_time(record["info"]), label="opencode:session")
    if not is_message(record):
        return Normal(role="meta", label="opencode:other")
    info, parts = record["info"], record["parts"]
    role = info["role"]
    texts: list[dict] = []
    calls: list[dict] = []
    results: list[dict] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not part.get("ignored") and isinstance(part.get("text"), str):
                texts.append({"type": "text", "text": part["text"]})
        elif kind == "reasoning":
            if isinstance(part.get("text"), str):
                texts.append({"type": "reasoning", "text": part["text"],
                              "signed": bool(part.get("metadata"))})  # provider metadata: a signature
        elif kind == "tool" and isinstance(part.get("state"), dict):
            state = part["state"]
            cid = part.get("callID")
            calls.append({"type": "tool_call", "id": cid, "name": part.get("tool"), "input": state.get("input")})
            got = _output(state)
            if got is not None:
                out, err = got
                results.append({"type": "tool_result", "call_id": cid, "name": part.get("tool"), "output": out,
                                "is_error": err})
        elif kind in _BOOKKEEPING:
            continue
        else:
            texts.append({"type": "other", "part": kind})
    return Normal(role=role, blocks=texts + calls + results, time=_time(info))

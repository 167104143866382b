"""Reading GitHub Copilot CLI event logs: parsing and normalizing their lines.

A Copilot session's ``events.jsonl`` is one event a line, ``{type, data, id, timestamp,
parentId}`` (``parentId``: the event before it, null for the first), starting with
``session.start``. Every line is kept as one record, in file order, whatever its type,
so writing the records back reproduces the file byte for byte (non-JSON and blank
lines are kept as their exact bytes). The log is linear: Copilot's own ``/rewind``
removes the rewound events from the file (``session.snapshot_rewind`` is an ephemeral
event, never written), so a file is one :class:`~.base.View`.

What the model sees, and what Copilot sends again on ``--resume``: ``user.message``
(``transformedContent``: ``content`` behind a ``<current_datetime>`` tag),
``assistant.message`` (``content``, ``toolRequests``, ``reasoningText``) and
``tool.execution_complete`` (``result.content``, or ``error.message`` when
``success`` is false); those are ``user``, ``assistant`` and ``tool`` here. The system
prompt (``system.message``), turn and usage bookkeeping, ``tool.execution_start``, the
events of a sub-agent (``agentId``, or ``data.parentToolCallId``) and every event type
opal does not know are ``meta``. Normalized blocks use the shared vocabulary (see
:mod:`opalgit.agents.claude.read`).

The read takes two passes so that memory does not grow with the log (as the Codex
adapter's does). Where logs are is :mod:`.files`; writing them, :mod:`.write`.

Pure: no store, no environment reads, no printing.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterator, Mapping, Sequence

from opalgit import jsonl
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
    reopen,
    sniff_lines,
)
from opalgit.agents.copilot.files import AGENT, side_folder
from opalgit.errors import InputError
from opalgit.history.model import Normal

__all__ = ["KNOWN", "claim", "claim_cut", "normalize_record", "read", "sniff"]

STATE_VERSION = 1
_SHAPE_LINES = 64
OWN = "a GitHub Copilot CLI session"
_HINT = "give the path of an events.jsonl file under ~/.copilot/session-state/<id>/"
#: Event types Copilot 1.0.102 writes to events.jsonl (its SDK's session-events.d.ts has
#: many more; any ``x.y`` type with ``data``, ``id`` and ``parentId`` is claimed, less surely).
KNOWN = frozenset({
    "session.start", "session.resume", "session.shutdown", "session.usage_record", "session.permissions_changed",
    "session.model_change", "session.title_changed", "session.info", "session.warning", "session.error",
    "session.truncation", "session.compaction_start", "session.compaction_complete", "session.mode_changed",
    "session.plan_changed", "session.todos_changed", "session.task_complete", "session.context_changed",
    "user.message", "system.message", "system.notification", "assistant.message", "assistant.turn_start",
    "assistant.turn_end", "assistant.reasoning", "assistant.usage", "tool.execution_start",
    "tool.execution_complete", "tool.user_requested", "subagent.started", "subagent.completed",
    "subagent.failed", "hook.start", "hook.end", "abort",
})
_CUT_LINE_RE = re.compile(rb'^\{"type":"([A-Za-z_.]+)","data":')


def _is_str(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def claim(obj: Any) -> float:
    """How surely a parsed line is a Copilot event (see :func:`~.base.sniff_lines`):
    certain for a known type in the ``{type, data, id, parentId}`` envelope, less for an
    unknown dotted type in it."""
    if not isinstance(obj, dict):
        return 0.0
    kind = obj.get("type")
    if not (isinstance(kind, str) and "." in kind and isinstance(obj.get("data"), dict)
            and "id" in obj and "parentId" in obj):
        return 0.0
    return CERTAIN if kind in KNOWN else 0.75


def claim_cut(raw: bytes) -> float:
    """An event line the head cut short: its start names a known type, ``data`` next."""
    m = _CUT_LINE_RE.match(raw.lstrip())
    return CERTAIN if m and m.group(1).decode() in KNOWN else 0.0


def sniff(path: str, head: bytes) -> float:
    return sniff_lines(head, claim, claim_cut)


# -------------------------------------------------------------------------- normalizing


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _user(data: Mapping[str, Any], t: int | None) -> Normal:
    blocks: list[dict] = [{"type": "text", "text": _text(data.get("content"))}]
    attachments = data.get("attachments")
    for att in attachments if isinstance(attachments, list) else []:
        kind = att.get("type") if isinstance(att, dict) else None
        blocks.append({"type": "other", "kind": f"attachment:{kind}" if _is_str(kind) else "attachment"})
    return Normal("user", blocks, t)


def _assistant(data: Mapping[str, Any], t: int | None) -> Normal:
    blocks: list[dict] = []
    reasoning = data.get("reasoningText")
    if _is_str(reasoning) or _is_str(data.get("reasoningOpaque")) or _is_str(data.get("encryptedContent")):
        block: dict[str, Any] = {"type": "reasoning", "text": _text(reasoning)}
        if _is_str(data.get("reasoningOpaque")) or _is_str(data.get("encryptedContent")):
            block["signed"] = True
        blocks.append(block)
    content = data.get("content")
    if _is_str(content):
        blocks.append({"type": "text", "text": content})
    requests = data.get("toolRequests")
    for req in requests if isinstance(requests, list) else []:
        if not isinstance(req, dict):
            blocks.append({"type": "other", "kind": "tool_request"})
            continue
        blocks.append({"type": "tool_call", "id": req.get("toolCallId"), "name": req.get("name"),
                       "input": req.get("arguments")})
    return Normal("assistant", blocks, t)


def _result(data: Mapping[str, Any], t: int | None) -> Normal:
    result = data.get("result") if isinstance(data.get("result"), dict) else {}
    error = data.get("error") if isinstance(data.get("error"), dict) else {}
    failed = data.get("success") is False
    output = _text(result.get("content"))
    if failed and not output:
        output = _text(error.get("message"))
    return Normal("tool", [{"type": "tool_result", "call_id": data.get("toolCallId"), "output": output,
                            "is_error": failed}], t)


def normalize_record(rec: Any) -> Normal:
    """The normalized view of one parsed event line."""
    if not isinstance(rec, dict):
        return Normal(role="meta", label="non-object")
    t = parse_time(rec.get("timestamp"))
    kind = rec.get("type")
    if not _is_str(kind):
        return Normal(role="meta", time=t, label="unknown")
    data = rec.get("data") if isinstance(rec.get("data"), dict) else {}
    if _is_str(rec.get("agentId")) or _is_str(data.get("parentToolCallId")):
        # A sub-agent's own conversation, inside the parent's log: its result reaches the
        # parent as the task call's result.
        return Normal(role="meta", time=t, label=f"copilot:subagent:{kind}")
    if kind == "user.message":
        return _user(data, t)
    if kind == "assistant.message":
        return _assistant(data, t)
    if kind == "tool.execution_complete":
        return _result(data, t)
    if kind == "system.message":
        return Normal(role="meta", blocks=[{"type": "text", "text": _text(data.get("content"))}], time=t,
                      label="system.message")
    return Normal(role="meta", time=t, label=kind)


# ------------------------------------------------------------------------ session info


class _Facts(SessionFacts):
    AGENT = AGENT

    def feed(self, rec: Mapping[str, Any]) -> None:
        kind = rec.get("type")
        data = rec.get("data") if isinstance(rec.get("data"), dict) else {}
        if kind in ("session.start", "session.resume"):
            if kind == "session.start" and self.id is None and _is_str(data.get("sessionId")):
                self.id = data["sessionId"]
                if _is_str(data.get("copilotVersion")):
                    self.version = data["copilotVersion"]
            ctx = data.get("context") if isinstance(data.get("context"), dict) else {}
            if self.cwd is None and _is_str(ctx.get("cwd")):
                self.cwd = ctx["cwd"]
            if self.git_branch is None and _is_str(ctx.get("branch")):
                self.git_branch = ctx["branch"]
            if _is_str(data.get("selectedModel")):
                self.model = data["selectedModel"]
        elif kind == "session.model_change" and _is_str(data.get("newModel")):
            self.model = data["newModel"]
        elif kind == "session.title_changed" and _is_str(data.get("title")):
            self.title = data["title"]


# ------------------------------------------------------------------------------ reading


def read(path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
    """Read in two passes (the first keeps each line's offset, CRC-32 and kind and feeds
    the session's details; the records are produced by reading the lines again). A file
    that is not a Copilot event log raises :class:`~.base.NotThisAgent`."""
    full = start == 0
    saved = (state or {}).get("info")
    with open_session(path, _HINT) as fh:
        size = fh.seek(0, os.SEEK_END)
        if full:
            if size == 0:
                raise InputError("the session file is empty", path=path,
                                 hint="Copilot has not written anything yet; try again after its first reply")
            fh.seek(0)
            jsonl.sniff_binary(path, fh.read(4096))
        elif start > size:
            # Copilot's /rewind rewrites the log shorter: read it whole again.
            return ReadResult(session=_Facts(saved).session(), records=[], views=[], state=dict(state or {}),
                              end=start, lines=first_line - 1, extends=False,
                              warnings=[f"{path}: the file is shorter than what was already imported; "
                                        "it will be read again"])
        facts = _Facts(None if full else saved)
        index = LineIndex(start, first_line - 1)
        judged: list[tuple[int, bool]] = []
        for line, value in index.scan(fh, path, start, first_line, full,
                                      lambda n, why: not_json_at_first(path, n, why, OWN, _HINT)):
            if isinstance(value, dict):
                facts.feed(value)
            if full and len(judged) < _SHAPE_LINES:
                judged.append((line.number, claim(value) > 0))
        if size > index.end:
            index.warnings.append(f"{path}:{index.lines + 1}: incomplete last line (Copilot may still be "
                                  "writing); it will be committed next time")
    if full:
        check_shape(path, judged, "this JSON-lines file has no GitHub Copilot CLI events (no dotted type with "
                    "data, id and parentId)", _HINT + ", or pick the right --agent", OWN)
    session = facts.session()
    if not session.id:
        folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
        session = type(session)(**{**session.to_map(), "id": folder})

    def produce(indices: Sequence[int] | None) -> Iterator[Record]:
        return index.records(lambda: reopen(path), path, AGENT, first_line, indices,
                             lambda i, value: normalize_record(value))

    count = len(index)
    out = ReadResult(
        session=session,
        views=[View(indices=list(range(count)))],
        state={"v": STATE_VERSION, "info": facts.saved()},
        end=index.end,
        lines=index.lines,
        warnings=index.warnings,
        # Copilot only appends (a rewind shortens the file, which the caller's prefix check sees).
        extends=not full,
        produce=produce,
        count=count,
    )
    # On every read, as Claude's side folder: a state's side files are the folder as it is now.
    out.side = side_folder(path, out.warnings)
    return out

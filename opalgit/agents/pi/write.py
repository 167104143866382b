"""Writing Pi sessions: the export half of the Pi adapter.

:func:`export` writes one ``<agent dir>/sessions/--<cwd>--/<time>_<id>.jsonl`` file that
``pi --session <id>`` resumes: the folder is the one of the directory the user resumes from
(a file under another project's folder makes Pi ask whether to fork it, and with no terminal
exit without running), and the header's ``cwd`` is that directory, which must exist (Pi
refuses a header whose ``cwd`` does not: "Stored session working directory does not exist").

Pi's own records are written back as they are: the header with the new id and ``cwd``, every
entry with its fields, unknown ones included. The entries are chained into one line of the
tree (each ``parentId`` the entry before), since the records exported are one line of
conversation (a view: one opal branch) and Pi resumes the line that ends in the file's last
entry; an entry whose parent is not the record before it (a record dropped or rewound in
between) is relinked, and counted. Foreign turns are converted from their normalized view
into Pi ``message`` entries: a user message, one assistant message per model reply (text and
``toolCall`` blocks, the calls mapped to Pi's tools through :mod:`opalgit.agents.tools`), and
a ``toolResult`` message per result, right after its call's message; a call left without a
result gets one that says so.

Loss-report kinds: ``record:meta:<agent>``, ``record:system``, ``system:as_user``,
``record:unparseable``, ``record:blank``, ``record:session_header`` (a second header),
``entry:relinked``, ``entry:renumbered`` (a repeated id), ``entry:id_added``,
``tool_call:mapped``, ``tool_call:kept``, ``tool_call:input_wrapped`` (a non-object input put
under ``input``), ``tool_result:orphan``, ``tool_result:synthesized``, ``reasoning:as_text``,
``reasoning:foreign``, ``reasoning:signed``, ``image:unreadable``, ``content:other``.

Pure: no store, no environment reads beyond ``req.env``, no printing.
"""

from __future__ import annotations

import hashlib
import os

from opalgit import jsonl
from opalgit.agents import tools
from opalgit.agents.base import (
    ExportRequest,
    ExportResult,
    ExportTurn,
    LossReport,
    iso,
    reasoning_as_text,
    record_of,
    reply_id,
)
from opalgit.agents.pi.files import AGENT, file_name, project_folder
from opalgit.agents.pi.read import is_header
from opalgit.errors import InputError
from opalgit.history.model import Normal, Turn

__all__ = ["NO_RESULT", "export", "replace_tool_outputs"]

#: The result written for a call that has none in the exported history.
NO_RESULT = "(no result was recorded for this call when the session was moved to Pi)"
#: What an assistant message converted from another agent says it came from: not the model
#: Pi resumes with, so Pi sends it as plain text and tool calls (``transformMessages``).
API, PROVIDER = "opal-import", "opal"
_USAGE = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
          "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def export(req: ExportRequest) -> ExportResult:
    """The session file that makes ``req.turns`` a Pi session resumed from ``req.cwd``."""
    folder = project_folder(os.path.realpath(req.cwd), req.env)
    if folder is None:
        raise InputError("cannot tell where Pi keeps its sessions (neither PI_CODING_AGENT_DIR nor HOME is set)",
                         hint="set HOME")
    report = LossReport()
    w = _Writer(req, report)
    for et in req.turns:
        w.feed(et)
    lines, prefix = w.finish()
    body = b"".join(jsonl.dumps(v) + b"\n" for v in lines)
    path = os.path.join(folder, file_name(req.session_id, iso(req.now_ms)))
    if not os.path.isdir(req.cwd):
        report.note(f"{req.cwd} does not exist: Pi refuses to resume a session whose folder is missing; create it first")
    return ExportResult(files=[(path, body)], session_id=req.session_id, resume=["pi", "--session", req.session_id],
                        report=report, prefix=prefix)


class _Writer:
    """The file's lines, in order: the header, then one entry per record or converted message."""

    def __init__(self, req: ExportRequest, report: LossReport) -> None:
        self.req, self.report = req, report
        self.cwd = os.path.realpath(req.cwd)
        self.lines: list[dict] = []
        self.used: set[str] = set()
        self.last: str | None = None  # the id of the entry written last: the next one's parent
        self.prefix = 0  # leading lines that are the request's first records (see ExportResult.prefix)
        self.verbatim = True
        self.conv: _Converter | None = None
        self.meta_notes: dict[str, int] = {}  # label -> count of the foreign bookkeeping left out
        self.counter = 0

    def new_id(self) -> str:
        while True:
            self.counter += 1
            cand = hashlib.sha256(f"{self.req.session_id}/{self.counter}".encode()).hexdigest()[:8]
            if cand not in self.used:
                return cand

    def _header(self, rec: dict | None) -> None:
        if rec is None:
            self.lines.append({"type": "session", "version": 3, "id": self.req.session_id,
                               "timestamp": iso(self.req.now_ms), "cwd": self.cwd})
            self.verbatim = False
            return
        out = dict(rec)
        out["id"], out["cwd"] = self.req.session_id, self.cwd
        self.lines.append(out)

    def feed(self, et: ExportTurn) -> None:
        if et.turn.agent != AGENT:
            if not self.lines:
                self._header(None)
            if self.conv is None:
                self.conv = _Converter(self.req, self.report, self)
            self.conv.feed(et.turn.agent, et.normal, reply_id(et.turn))
            self.verbatim = False
            return
        if self.conv is not None:
            self._retire()
        rec = record_of(et.turn)
        if not self.lines:
            self._header(rec if is_header(rec) else None)
            if is_header(rec):
                self._count()
                return
        if not isinstance(rec, dict):
            self.report.drop("record:blank" if et.normal.label == "blank" else "record:unparseable")
            self.verbatim = False
            return
        if is_header(rec):
            self.report.drop("record:session_header")
            self.verbatim = False
            return
        self.entry(rec)
        self._count()

    def _count(self) -> None:
        if self.verbatim:
            self.prefix += 1

    def entry(self, rec: dict) -> None:
        """Append a Pi entry as the child of the one before, its fields otherwise as they are."""
        out = rec
        eid = rec.get("id")
        if not isinstance(eid, str) or not eid:
            out = {**out, "id": self.new_id()}
            self.report.convert("entry:id_added")
        elif eid in self.used:
            out = {**out, "id": self.new_id()}
            self.report.convert("entry:renumbered")
        if out.get("parentId", None) != self.last or "parentId" not in out:
            if "parentId" in rec:
                self.report.convert("entry:relinked")
            out = {**out, "parentId": self.last}
        self.used.add(out["id"])
        self.last = out["id"]
        self.lines.append(out)

    def message(self, msg: dict, ms: int | None) -> None:
        """Append a converted message as a new entry."""
        eid = self.new_id()
        self.used.add(eid)
        stamp = iso(ms if ms is not None else self.req.now_ms)
        self.lines.append({"type": "message", "id": eid, "parentId": self.last, "timestamp": stamp, "message": msg})
        self.last = eid

    def _retire(self) -> None:
        assert self.conv is not None
        self.conv.close()
        self.meta_notes.update({k: self.meta_notes.get(k, 0) + v for k, v in self.conv.meta.items()})
        self.conv = None

    def finish(self) -> tuple[list[dict], int]:
        if self.conv is not None:
            self._retire()
        if self.meta_notes:
            families = ", ".join(f"{k} x{v}" for k, v in sorted(self.meta_notes.items()))
            self.report.note(f"bookkeeping records with no Pi counterpart were left out: {families}")
        if not self.lines:
            self._header(None)
        return self.lines, self.prefix


class _Converter:
    """A run of foreign normalized turns as Pi messages."""

    def __init__(self, req: ExportRequest, report: LossReport, out: _Writer) -> None:
        self.req, self.report, self.out = req, report, out
        self.cur: dict | None = None  # the assistant message being filled (not yet written)
        self.cur_time: int | None = None
        self.reply: str | None = None
        self.pending: dict[str, str] = {}  # call id -> tool name, for calls without a result yet
        self.later: list[tuple[Normal, list[dict]]] = []  # text that waits for the pending results
        self.model = (req.session.model if req.session is not None else None) or "unknown"
        self.meta: dict[str, int] = {}  # label -> count of the bookkeeping records left out

    def _ms(self, normal: Normal) -> int:
        return normal.time if normal.time is not None else self.req.now_ms

    def _flush(self) -> None:
        """Write the assistant message being filled: its calls are then waiting for results."""
        if self.cur is None:
            return
        calls = [b for b in self.cur["content"] if b["type"] == "toolCall"]
        self.cur["stopReason"] = "toolUse" if calls else "stop"
        self.out.message(self.cur, self.cur_time)
        self.cur = None

    def close(self) -> None:
        """A user message (or the end) closes the model's turn: unanswered calls get a result."""
        self._flush()
        for cid, name in list(self.pending.items()):
            self.out.message({"role": "toolResult", "toolCallId": cid, "toolName": name,
                              "content": [{"type": "text", "text": NO_RESULT}], "isError": True,
                              "timestamp": self.req.now_ms}, None)
            self.report.convert("tool_result:synthesized")
        self.pending.clear()
        self._release()

    def _release(self) -> None:
        """Write the text that waited for results, once no call is waiting."""
        if self.pending:
            return
        self._flush()
        for normal, blocks in self.later:
            parts = self._content(blocks)
            if parts:
                self.out.message({"role": "user", "content": parts, "timestamp": self._ms(normal)}, normal.time)
        self.later.clear()

    def _assistant(self, normal: Normal, reply: str | None) -> dict:
        if self.cur is not None and reply is not None and self.reply is not None and reply != self.reply:
            self._flush()  # another model reply: a message of its own
        if self.cur is None:
            if self.pending:
                self.close()  # a new reply after unanswered calls: they never got results
            self.cur = {"role": "assistant", "content": [], "api": API, "provider": PROVIDER, "model": self.model,
                        "usage": dict(_USAGE), "stopReason": "stop", "timestamp": self._ms(normal)}
            self.cur_time = normal.time
        self.reply = reply
        return self.cur

    def _content(self, blocks: list[dict]) -> list[dict]:
        parts: list[dict] = []
        for b in blocks:
            if b["type"] == "text":
                parts.append({"type": "text", "text": b.get("text") or ""})
            elif b["type"] == "image":
                img = self._image(b)
                if img:
                    parts.append(img)
            elif b["type"] != "tool_result":
                self.report.drop("content:other")
        return parts

    def _image(self, b: dict) -> dict | None:
        if b.get("data"):
            return {"type": "image", "data": b["data"], "mimeType": b.get("media_type") or "image/png"}
        self.report.drop("image:unreadable")
        return None

    def _user(self, normal: Normal, blocks: list[dict]) -> None:
        parts = self._content(blocks)
        if not parts:
            return
        self.close()
        self.out.message({"role": "user", "content": parts, "timestamp": self._ms(normal)}, normal.time)

    def _result(self, normal: Normal, b: dict) -> None:
        cid = b.get("call_id")
        if not isinstance(cid, str) or cid not in self.pending:
            self.report.drop("tool_result:orphan")
            return
        self._flush()
        name = self.pending.pop(cid)
        out = b.get("output")
        content = self._content(out) if isinstance(out, list) else [{"type": "text", "text": "" if out is None else str(out)}]
        self.out.message({"role": "toolResult", "toolCallId": cid, "toolName": name, "content": content,
                          "isError": b.get("is_error") is True, "timestamp": self._ms(normal)}, normal.time)
        if self.later:
            self._release()

    def feed(self, agent: str, normal: Normal, reply: str | None) -> None:
        role = normal.role
        if role == "meta":
            self.report.drop(f"record:meta:{agent}")
            label = normal.label or "unlabelled"
            self.meta[label] = self.meta.get(label, 0) + 1
            return
        results = [b for b in normal.blocks if b.get("type") == "tool_result"]
        rest = [b for b in normal.blocks if b.get("type") != "tool_result"]
        if role != "assistant":
            for b in results:
                self._result(normal, b)
        if role == "user":
            self._user(normal, rest)
        elif role == "system":
            if any(b.get("type") == "text" for b in rest):
                self.report.convert("system:as_user")
                self._user(normal, rest)
            elif not results:
                self.report.drop("record:system")
        elif role == "tool" and rest:
            # Text riding along with tool output (an interruption note): a user message now
            # would close the reply's other calls, so it waits until they are answered.
            self.later.append((normal, rest))
            self._release()
        elif role == "assistant":
            for b in normal.blocks:
                self._assistant_block(agent, normal, reply, b)

    def _assistant_block(self, agent: str, normal: Normal, reply: str | None, b: dict) -> None:
        kind = b.get("type")
        if kind == "reasoning":
            text = reasoning_as_text(self.req, b, self.report)
            if text is not None:
                # As text: Pi sends a thinking block of another model to no one.
                self._assistant(normal, reply)["content"].append({"type": "text", "text": text})
        elif kind == "text":
            self._assistant(normal, reply)["content"].append({"type": "text", "text": b.get("text") or ""})
        elif kind == "image":
            self.report.drop("content:other")
        elif kind == "tool_call":
            self._call(agent, normal, reply, b)
        elif kind == "tool_result":
            self._result(normal, b)
        else:
            self.report.drop("content:other")

    def _call(self, agent: str, normal: Normal, reply: str | None, b: dict) -> None:
        name, args, mapped = tools.convert_call(agent, AGENT, str(b.get("name") or "unknown"), b.get("input"),
                                                self.req.cwd)
        self.report.convert("tool_call:mapped" if mapped else "tool_call:kept")
        if not isinstance(args, dict):
            args = {"input": args}
            self.report.convert("tool_call:input_wrapped")
        cid = b.get("id") if isinstance(b.get("id"), str) and b.get("id") else f"opal_call_{self.out.new_id()}"
        msg = self._assistant(normal, reply)
        msg["content"].append({"type": "toolCall", "id": cid, "name": name, "arguments": args})
        self.pending[cid] = name


def replace_tool_outputs(turn: Turn, replace: Callable[[str, str], str | None]) -> Turn | None:
    """A copy of a Pi ``toolResult`` entry with its text blocks rewritten by
    ``replace(toolCallId, text)`` (``opal trim``), or None when nothing changes; its other
    blocks (images) and fields are kept."""
    rec = record_of(turn) if turn.agent == AGENT else None
    msg = rec.get("message") if isinstance(rec, dict) and rec.get("type") == "message" else None
    if not isinstance(msg, dict) or msg.get("role") != "toolResult" or not isinstance(msg.get("content"), list):
        return None
    cid = msg.get("toolCallId") if isinstance(msg.get("toolCallId"), str) else ""
    changed = False
    content: list[Any] = []
    for blk in msg["content"]:
        if isinstance(blk, dict) and blk.get("type") == "text" and isinstance(blk.get("text"), str):
            new = replace(cid, blk["text"])
            if isinstance(new, str) and new != blk["text"]:
                blk, changed = {**blk, "text": new}, True
        content.append(blk)
    return Turn.from_record(AGENT, {**rec, "message": {**msg, "content": content}}) if changed else None

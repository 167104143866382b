"""Writing GitHub Copilot CLI sessions: the export half of the Copilot adapter.

:func:`export` turns an :class:`~.base.ExportRequest` into a session folder
``<home>/session-state/<new id>/`` that ``copilot --resume <id>`` takes: ``events.jsonl``,
whose first event is ``session.start`` (naming the new id and folder) and every event
of which has a ``parentId`` (the event before it; null for the first), and
``workspace.yaml``. Copilot's SQLite index ``<home>/session-store.db`` is not written:
``--resume <id>`` and ``--continue`` find a session folder without it, and Copilot adds
the session to it when it resumes (so the db is never touched while Copilot may hold it).

Copilot's own events go back as they were, but for: the new id in ``session.start``;
the folder in the ``context`` of ``session.start`` / ``session.resume`` (the session's
folder and anything under it move to ``cwd``; a git root other than the folder is left
out, Copilot works it out again); a ``parentId`` relinked where the state dropped events
or opal put some in. The session's side files (``workspace.yaml``, ``checkpoints/``,
``rewind-file-snapshots/``) are written under the new folder, the old id in them
replaced, ``workspace.yaml``'s ``cwd`` moved like the events'.

Foreign turns become what Copilot writes for them: ``user.message``; one
``assistant.message`` per reply (its text, and its calls as ``toolRequests``, mapped to
Copilot's tools where :mod:`opalgit.agents.tools` has a counterpart); for each result a
``tool.execution_start`` and ``tool.execution_complete``. Loss-report kinds:
``session.start:added``, ``session.start:rewritten``, ``context:cwd:rewritten``,
``event:relinked``, ``event:parent_added``, ``record:unparseable``,
``record:meta:<agent>``, ``system:as_user``, ``tool_text:as_user``, ``tool_call:mapped``,
``tool_call:kept``, ``tool_call:input_wrapped``, ``tool_result:synthesized``,
``tool_result:orphan``, ``image:dropped``, ``content:other``, ``reasoning:as_text``,
``reasoning:foreign``, ``reasoning:signed``, ``side_file:unsafe_path``.

Pure: no store, no environment reads beyond ``req.env``, no printing.
"""

from __future__ import annotations

import copy
import os
import re
import uuid
from typing import Any, Callable

from opalgit import jsonl
from opalgit.agents import tools
from opalgit.agents.base import ExportRequest, ExportResult, LossReport, iso, reasoning_as_text, record_of, reply_id
from opalgit.agents.copilot.files import AGENT, EVENTS, copilot_home, yaml_scalar
from opalgit.errors import UsageError
from opalgit.history.model import Normal, Turn
from opalgit.plural import count

__all__ = ["export", "replace_tool_outputs"]

_ID_NAMESPACE = uuid.UUID("6f70616c-636f-4d70-8e69-6c6f74657870")
#: The version written into a ``session.start`` opal makes (the pinned client's).
COPILOT_VERSION = "1.0.102"
#: The result a call without one gets (Copilot would otherwise make one up on resume).
NO_RESULT = "(no result was recorded for this tool call)"
_NAME_LIMIT = 80


def export(req: ExportRequest) -> ExportResult:
    """The session folder that makes ``req.turns`` a resumable GitHub Copilot CLI session."""
    home = copilot_home(req.env)
    if home is None:
        raise UsageError("cannot tell where GitHub Copilot CLI keeps its sessions", hint="set COPILOT_HOME or HOME")
    sid = req.session_id
    if not sid or sid in (".", "..") or any(c in sid for c in "/\\\x00"):
        raise UsageError(f"{sid!r} cannot be a GitHub Copilot CLI session id", hint="use a UUID")
    folder = os.path.join(home, "session-state", sid)
    writer = _Writer(req)
    body = writer.run()
    side = _side_files(req, folder, writer)
    files = [(os.path.join(folder, EVENTS), body)] + side
    kept = [rel for rel in req.side if rel != "workspace.yaml"] if writer.native_source else []
    done = (f"{count(len(kept), 'side file')} written back under {sid}/ "
            f"({', '.join(sorted({r.split('/')[0] for r in kept}))})") if kept else None
    return ExportResult(files=files, session_id=sid, resume=["copilot", "--resume", sid], report=writer.report,
                        prefix=writer.aligned, post=[lambda: done] if done else [])


# ------------------------------------------------------------------------- side files


def _moved(path: Any, old: str | None, new: str) -> Any:
    """``path`` moved from the folder ``old`` to ``new`` when it is ``old`` or under it."""
    if not isinstance(path, str) or not old:
        return path
    if path == old:
        return new
    if path.startswith(old.rstrip("/") + "/"):
        return new.rstrip("/") + path[len(old.rstrip("/")):]
    return path


def _workspace(req: ExportRequest, writer: "_Writer", old: bytes | None) -> bytes:
    """``workspace.yaml``: the source's with the new id and folder, else one made as Copilot makes it."""
    now = iso(req.now_ms)
    if old is not None:
        text = old.decode("utf-8", "replace")

        def line(key: str, value: str, text: str) -> str:
            new = f"{key}: {yaml_scalar(value)}"
            pattern = re.compile(rf"(?m)^{key}:.*$")
            return pattern.sub(lambda _: new, text, count=1) if pattern.search(text) else f"{new}\n{text}"

        text = line("id", req.session_id, text)
        text = line("cwd", req.cwd, text)
        if writer.old_cwd and re.search(rf"(?m)^git_root:[ \t]*{re.escape(yaml_scalar(writer.old_cwd))}[ \t]*$", text):
            text = line("git_root", req.cwd, text)
        return text.encode("utf-8")
    name = (writer.first_prompt or "opal export").strip().splitlines()[0][:_NAME_LIMIT] or "opal export"
    rows = [("id", req.session_id), ("cwd", req.cwd), ("name", name)]
    body = "".join(f"{k}: {yaml_scalar(v)}\n" for k, v in rows)
    return (body + f"user_named: false\nsummary_count: 0\nfork_count: 0\ncreated_at: {now}\nupdated_at: {now}\n"
            ).encode("utf-8")


def _side_files(req: ExportRequest, folder: str, writer: "_Writer") -> list[tuple[str, bytes]]:
    """The source session's side files under the new folder (the old id replaced), and
    its ``workspace.yaml`` with the new id and folder (or a new one)."""
    old_id = writer.old_id.encode() if writer.native_source and writer.old_id else None
    out: list[tuple[str, bytes]] = []
    workspace = None
    for rel, data in (req.side.items() if writer.native_source else ()):
        parts = rel.split("/")
        if any(p in ("", ".", "..") for p in parts) or rel == EVENTS:
            writer.report.drop("side_file:unsafe_path")  # never written outside the session's folder
            continue
        if old_id is not None and old_id != req.session_id.encode():
            data = data.replace(old_id, req.session_id.encode())
        if rel == "workspace.yaml":
            workspace = data
            continue
        out.append((os.path.join(folder, *parts), data))
    return [(os.path.join(folder, "workspace.yaml"), _workspace(req, writer, workspace))] + out


# ------------------------------------------------------------------------------ events


class _Writer:
    """Builds one ``events.jsonl`` from an :class:`ExportRequest`."""

    def __init__(self, req: ExportRequest) -> None:
        self.req = req
        self.report = LossReport()
        src = req.session
        self.native_source = src is not None and src.agent == AGENT
        self.old_id = src.id if self.native_source else None
        self.old_cwd = src.cwd if self.native_source else None
        self.lines: list[bytes] = []
        self.written: set[str] = set()
        self.last: str | None = None  # the id of the last event written
        self.made = 0
        self.aligned = 0  # leading lines that are the request's first records, one each
        self.in_prefix = True
        self.first_prompt: str | None = None
        self.conv: _Converter | None = None
        self.left_out: dict[str, int] = {}  # the labels of the foreign meta records left out

    # -- ids and lines

    def new_id(self) -> str:
        self.made += 1
        return str(uuid.uuid5(_ID_NAMESPACE, f"{self.req.session_id}/{self.made}"))

    def emit(self, kind: str, data: dict, time: int | None = None) -> None:
        """An event opal makes, in Copilot's key order, chained to the last one."""
        eid = self.new_id()
        self._line({"type": kind, "data": data, "id": eid, "timestamp": iso(time if time is not None else self.req.now_ms),
                    "parentId": self.last})
        self.in_prefix = False

    def _line(self, event: dict, raw: bytes | None = None) -> None:
        self.lines.append(raw if raw is not None else jsonl.dumps(event))
        eid = event.get("id")
        if isinstance(eid, str):
            self.written.add(eid)
            self.last = eid

    # -- the run

    def run(self) -> bytes:
        turns = self.req.turns
        first = record_of(turns[0].turn) if turns and turns[0].turn.agent == AGENT else None
        if not (isinstance(first, dict) and first.get("type") == "session.start"):
            self._start()
        for et in turns:
            if et.turn.agent == AGENT:
                if self.conv is not None:
                    self.conv.finish()
                    self.conv = None
                self._native(et.turn, et.normal)
            else:
                if self.conv is None:
                    self.conv = _Converter(self)
                self.in_prefix = False
                self.conv.feed(et.turn.agent, et.normal, reply_id(et.turn))
        if self.conv is not None:
            self.conv.finish()
        if self.left_out:
            self.report.note("bookkeeping records with no Copilot counterpart were left out: "
                             + ", ".join(f"{k} x{n}" for k, n in sorted(self.left_out.items())))
        return b"".join(line + b"\n" for line in self.lines)

    def _start(self) -> None:
        data: dict[str, Any] = {"sessionId": self.req.session_id, "version": 1, "producer": "copilot-agent",
                                "copilotVersion": COPILOT_VERSION, "startTime": iso(self.req.now_ms),
                                "context": {"cwd": self.req.cwd}, "alreadyInUse": False}
        self.report.convert("session.start:added")
        self.emit("session.start", data)

    def _context(self, data: dict) -> bool:
        """Move a ``context``'s folders to ``cwd``; True when anything changed."""
        ctx = data.get("context")
        if not isinstance(ctx, dict) or self.old_cwd == self.req.cwd:
            return False  # exported to the session's own folder: its context still holds
        changed = False
        cwd = _moved(ctx.get("cwd"), self.old_cwd, self.req.cwd)
        if cwd != ctx.get("cwd"):
            ctx["cwd"], changed = cwd, True
        root = ctx.get("gitRoot")
        if isinstance(root, str) and root != self.req.cwd:
            moved = _moved(root, self.old_cwd, self.req.cwd)
            if moved == root:
                # A git root above the old folder says nothing of the new one: Copilot looks again.
                for key in ("gitRoot", "branch", "headCommit", "repository", "hostType", "baseCommit"):
                    ctx.pop(key, None)
            else:
                ctx["gitRoot"] = moved
            changed = True
        if changed:
            self.report.convert("context:cwd:rewritten")
        return changed

    def _native(self, turn: Turn, normal: Normal) -> None:
        value = record_of(turn)
        if not isinstance(value, dict):
            self.report.drop("record:unparseable")
            self.in_prefix = False
            return
        if normal.role == "user" and self.first_prompt is None:
            self.first_prompt = next((b.get("text") for b in normal.blocks if b.get("type") == "text"), None)
        event = copy.deepcopy(value)
        changed = False
        data = event.get("data")
        kind = event.get("type")
        if kind == "session.start" and isinstance(data, dict):
            if data.get("sessionId") != self.req.session_id:
                data["sessionId"] = self.req.session_id
                changed = True
            changed = self._context(data) or changed
        elif kind == "session.resume" and isinstance(data, dict):
            changed = self._context(data) or changed
        if not isinstance(event.get("id"), str) or event["id"] in self.written:
            event["id"] = self.new_id()
            changed = True
        parent = event.get("parentId", ...)
        if parent is ... or (parent != self.last and parent not in self.written):
            # Copilot refuses a log with an event lacking the key; a parent the state
            # dropped (a rewind) or one before opal's own events is the event before it now.
            self.report.convert("event:parent_added" if parent is ... else "event:relinked")
            event = _with_parent(event, self.last)
            changed = True
        if changed and kind == "session.start":
            self.report.convert("session.start:rewritten")
        self._line(event, None if changed else _exact(turn))
        if self.in_prefix:
            self.aligned += 1


def _with_parent(event: dict, parent: str | None) -> dict:
    """``event`` with ``parentId`` set, in its place or, when it had none, last (where Copilot writes it)."""
    if "parentId" in event:
        event["parentId"] = parent
        return event
    return {**event, "parentId": parent}


def _exact(turn: Turn) -> bytes | None:
    """The source line's bytes when the record stands for them exactly."""
    if turn.has_record:
        return jsonl.dumps(turn.record)
    return turn.line if isinstance(turn.line, bytes) else None


# ------------------------------------------------------------------------ foreign turns


def _result_text(out: Any, report: LossReport) -> str:
    if isinstance(out, str):
        return out
    if isinstance(out, list):
        texts = []
        for b in out:
            if isinstance(b, dict) and b.get("type") == "text":
                texts.append(str(b.get("text") or ""))
            elif isinstance(b, dict) and b.get("type") == "image":
                report.drop("image:dropped")
            else:
                report.drop("content:other")
        return "\n".join(texts)
    return "" if out is None else jsonl.dumps(out).decode("utf-8", "surrogatepass")


class _Converter:
    """Turns a run of foreign normalized turns into Copilot events."""

    def __init__(self, w: _Writer) -> None:
        self.w = w
        self.report = w.report
        self.cur: dict | None = None  # the assistant.message being filled (its data)
        self.cur_time: int | None = None
        self.reply: str | None = None
        self.open: dict[str, tuple[str, Any]] = {}  # call id -> (name, arguments), results still to come

    def feed(self, agent: str, normal: Normal, reply: str | None) -> None:
        role = normal.role
        if role == "assistant" and reply is not None and reply != self.reply and self.cur and self.cur["toolRequests"]:
            self.flush()  # another reply: its calls are a message of their own
        if role == "assistant":
            self.reply = reply
        if role == "meta":
            self.report.drop(f"record:meta:{agent}")
            label = normal.label or "unlabelled"
            self.w.left_out[label] = self.w.left_out.get(label, 0) + 1
            if normal.label == "codex:context":
                self.flush()
            return
        if role == "assistant":
            for b in normal.blocks:
                self._assistant_block(agent, normal, b)
            return
        texts: list[str] = []
        for b in normal.blocks:
            kind = b.get("type")
            if kind == "tool_result":
                self._result(b, normal.time)
            elif kind == "text":
                if str(b.get("text") or "").strip():
                    texts.append(str(b["text"]))
            elif kind == "image":
                self.report.drop("image:dropped")
            else:
                self.report.drop("content:other")
        if not texts:
            return
        if role == "system":
            self.report.convert("system:as_user")
        elif role == "tool":
            self.report.convert("tool_text:as_user")
        self.close()
        text = "\n\n".join(texts)
        if self.w.first_prompt is None:
            self.w.first_prompt = text
        self.w.emit("user.message", {"content": text, "messageId": self.w.new_id()}, normal.time)

    def _assistant_block(self, agent: str, normal: Normal, b: dict) -> None:
        kind = b.get("type")
        if kind == "text":
            text = str(b.get("text") or "")
            if not text.strip():
                return
            if self.cur is not None and self.cur["toolRequests"]:
                self.flush()
            self._message(normal)["content"] += ("\n\n" if self.cur["content"] else "") + text
        elif kind == "reasoning":
            text = reasoning_as_text(self.w.req, b, self.report)
            if text:
                if self.cur is not None and self.cur["toolRequests"]:
                    self.flush()
                self._message(normal)["content"] += ("\n\n" if self.cur["content"] else "") + text
        elif kind == "tool_call":
            self._call(agent, normal, b)
        elif kind == "tool_result":
            self._result(b, normal.time)
        elif kind == "image":
            self.report.drop("image:dropped")
        else:
            self.report.drop("content:other")

    def _message(self, normal: Normal) -> dict:
        if self.cur is None:
            self.cur = {"messageId": self.w.new_id(), "content": "", "toolRequests": []}
            self.cur_time = normal.time
        return self.cur

    def _call(self, agent: str, normal: Normal, b: dict) -> None:
        name, args, mapped = tools.convert_call(agent, AGENT, str(b.get("name") or ""), b.get("input"), self.w.req.cwd)
        self.report.convert("tool_call:mapped" if mapped else "tool_call:kept")
        if not isinstance(args, dict):
            # Copilot's toolRequests carry an arguments object (a Codex freeform input is text).
            args = {"input": args}
            self.report.convert("tool_call:input_wrapped")
        cid = b.get("id") if isinstance(b.get("id"), str) and b.get("id") else f"call_{self.w.new_id().replace('-', '')[:24]}"
        self._message(normal)["toolRequests"].append({"toolCallId": cid, "name": name, "arguments": args,
                                                     "type": "function"})
        self.open[cid] = (name, args)

    def _result(self, b: dict, time: int | None) -> None:
        cid = b.get("call_id")
        if not isinstance(cid, str) or cid not in self.open:
            # A result without a call id answers the oldest open call (older Codex rollouts
            # pair by order); one whose call is not in the state has nothing to answer.
            cid = next(iter(self.open), None) if not isinstance(cid, str) or not cid else None
            if cid is None:
                self.report.drop("tool_result:orphan")
                return
        if self.cur is not None and any(r["toolCallId"] == cid for r in self.cur["toolRequests"]):
            self.flush()
        self._complete(cid, _result_text(b.get("output"), self.report), b.get("is_error") is True, time)

    def _complete(self, cid: str, text: str, error: bool, time: int | None) -> None:
        name, args = self.open.pop(cid)
        self.w.emit("tool.execution_start", {"toolCallId": cid, "toolName": name, "arguments": args}, time)
        data: dict[str, Any] = {"toolCallId": cid, "success": not error, "result": {"content": text}}
        if error:
            data["error"] = {"message": text}
        self.w.emit("tool.execution_complete", data, time)

    def flush(self) -> None:
        if self.cur is not None:
            self.w.emit("assistant.message", self.cur, self.cur_time)
        self.cur = None

    def close(self) -> None:
        """A user turn (or the end) closes the reply: calls still open get a result saying so."""
        self.flush()
        for cid in list(self.open):
            self._complete(cid, NO_RESULT, True, None)
            self.report.convert("tool_result:synthesized")

    def finish(self) -> None:
        self.close()


# ------------------------------------------------------------------------------- trim


def replace_tool_outputs(turn: Turn, replace: Callable[[str, str], str | None]) -> Turn | None:
    """A ``tool.execution_complete`` with its result text rewritten (``opal trim``), or None."""
    rec = record_of(turn)
    if not isinstance(rec, dict) or rec.get("type") != "tool.execution_complete":
        return None
    data = rec.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, dict) or not isinstance(result.get("content"), str):
        return None
    new = replace(str(data.get("toolCallId") or ""), result["content"])
    if new is None:
        return None
    out = copy.deepcopy(rec)
    out["data"]["result"]["content"] = new
    if isinstance(out["data"]["result"].get("detailedContent"), str):
        out["data"]["result"]["detailedContent"] = new
    return Turn.from_record(AGENT, out)

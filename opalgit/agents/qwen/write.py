"""Writing Qwen Code sessions: the export half of the Qwen Code adapter.

:func:`export` turns an :class:`~.base.ExportRequest` into one
``<runtime>/projects/<key of the target folder>/chats/<session id>.jsonl`` file that
``qwen --resume <id>`` accepts. Qwen Code 0.24.4 (``sessionService.loadSession``) resumes
a file only when it is in the *current* project's ``chats`` folder and its **first
record's** ``cwd`` is that project (else "No saved session found"); every record must
carry the one ``sessionId`` (a file with several is refused: "multiple session ids"),
and the history is the ``uuid``/``parentUuid`` chain walked back from the last
conversation record. So:

* Qwen Code records go back as they were, with the new ``sessionId``, the target folder
  in ``cwd`` (the first record always gets one) and a linear chain: a record whose
  ``parentUuid`` is not the record written before it (the state was rewound, or is a
  branch, or follows records opal inserted) is relinked to it (``parent:relinked``).
* Records of other agents are written from their normalized view as new records,
  chained after the previous one: a ``user`` record per prompt, one ``assistant``
  record per model reply (its text, then its ``functionCall`` parts; mapped to Qwen's
  own tools where :func:`.tools.convert_call` knows a counterpart) and one
  ``tool_result`` record per result, directly after its reply, as Qwen Code writes them.
* Every call gets exactly one result (a synthesized error result when none was
  recorded) and results whose call is not written are left out, as the OpenAI chat
  API that Qwen Code speaks requires.

Loss-report kinds: ``parent:relinked``, ``cwd:rewritten``, ``record:unparseable``,
``record:meta:<agent>``, ``record:system``, ``system:as_user``, ``tool_call:mapped``,
``tool_call:kept``, ``tool_result:orphan``, ``tool_result:synthesized``,
``reasoning:as_text``, ``reasoning:foreign``, ``reasoning:signed``, ``image``,
``image:unreadable``, ``content:other``.

Pure: no store, no environment reads beyond ``req.env``, no printing.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from opalgit import jsonl
from opalgit.agents import parts, tools
from opalgit.agents.base import ExportRequest, ExportResult, LossReport, iso, reasoning_as_text, record_of, reply_id
from opalgit.agents.qwen.files import AGENT, chats_dir
from opalgit.agents.qwen.format import is_conversation
from opalgit.errors import InputError
from opalgit.history.model import Normal

__all__ = ["DANGLING_OUTPUT", "QWEN_VERSION", "export"]

#: The Qwen Code version written into new records (the one the tests drive).
QWEN_VERSION = "0.24.4"
#: The result given to a tool call that has none in the exported history.
DANGLING_OUTPUT = "[opal: this tool call has no recorded result]"
_ID_NAMESPACE = uuid.UUID("6f70616c-7177-4e6e-8e69-6578706f7274")


def export(req: ExportRequest) -> ExportResult:
    """The session file that makes ``req.turns`` a resumable Qwen Code session."""
    cwd = os.path.realpath(req.cwd)  # Qwen keys projects by process.cwd(), a physical path
    folder = chats_dir(req.env, cwd)
    if folder is None:
        raise InputError("cannot tell where Qwen Code keeps its sessions (neither QWEN_RUNTIME_DIR, QWEN_HOME "
                         "nor HOME is set)", hint="set HOME")
    w = _Writer(req, cwd)
    prefix, leading = 0, True
    for n, et in enumerate(req.turns, 1):
        if et.turn.agent == AGENT:
            w.native(record_of(et.turn))
        else:
            w.foreign(et.turn.agent, et.normal, reply_id(et.turn))
        # The file's first lines are the request's first records, one each, while no
        # record was dropped, converted or added.
        leading = leading and et.turn.agent == AGENT and len(w.out) == n
        prefix += leading
    w.close()
    body = b"".join(jsonl.dumps(r) + b"\n" for r in w.out)
    w.finish_report()
    path = os.path.join(folder, f"{req.session_id}.jsonl")
    return ExportResult(files=[(path, body)], session_id=req.session_id, resume=["qwen", "--resume", req.session_id],
                        report=w.report, prefix=prefix)


class _Writer:
    """The records of the new file, in order, and what converting them cost."""

    def __init__(self, req: ExportRequest, cwd: str) -> None:
        self.req, self.cwd = req, cwd
        self.report = LossReport()
        self.out: list[Any] = []
        self.last: str | None = None  # uuid of the last conversation record written
        self.counter = 0
        self.relinked = 0
        self.old_cwds: dict[str, None] = {}
        src = req.session
        self.model = src.model if src is not None and src.agent == AGENT and src.model else None
        self.version = src.version if src is not None and src.agent == AGENT and src.version else QWEN_VERSION
        self.open_native: list[str] = []  # calls of the last native reply
        self.cur: dict | None = None  # the assistant record being filled (a foreign reply)
        self.reply: str | None = None
        self.pending: dict[str, str] = {}  # call id -> tool name, of the current reply's calls
        self.anon: list[str] = []

    # ---------------------------------------------------------------- native records

    def native(self, rec: Any) -> bool:
        """Write a Qwen Code record back; whether it went out as one line."""
        if not isinstance(rec, dict):
            self.report.drop("record:unparseable")
            return False
        if rec.get("type") in ("user", "assistant"):
            self.close()  # a prompt or a new reply: the calls before it are over
        new = dict(rec)
        if "sessionId" in new:
            new["sessionId"] = self.req.session_id
        if isinstance(new.get("cwd"), str) and new["cwd"] != self.cwd:
            self.old_cwds[new["cwd"]] = None
            new["cwd"] = self.cwd
        if not self.out:
            # Qwen Code checks the file's first line, whatever it is, against the project.
            new["cwd"] = self.cwd
        if is_conversation(new):
            if new.get("parentUuid") != self.last:
                new["parentUuid"] = self.last
                self.relinked += 1
            self.last = new["uuid"]
            self._track(new)
        self.out.append(new)
        return True

    def _track(self, rec: dict) -> None:
        """Note a native record's calls (open until answered) and results."""
        msg = rec.get("message")
        for part in msg.get("parts") or () if isinstance(msg, dict) else ():
            if not isinstance(part, dict):
                continue
            fc, fr = part.get("functionCall"), part.get("functionResponse")
            if rec.get("type") == "assistant" and isinstance(fc, dict) and isinstance(fc.get("id"), str) and fc["id"]:
                self.pending[fc["id"]] = str(fc.get("name") or "unknown")
                self.open_native.append(fc["id"])
            elif isinstance(fr, dict) and isinstance(fr.get("id"), str) and fr["id"] in self.pending:
                self.pending[fr["id"]] = None

    # --------------------------------------------------------------- foreign records

    def _new_uuid(self) -> str:
        self.counter += 1
        return str(uuid.uuid5(_ID_NAMESPACE, f"{self.req.session_id}/{self.counter}"))

    def _record(self, kind: str, normal: Normal, message: dict, **extra: Any) -> dict:
        rec = {"uuid": self._new_uuid(), "parentUuid": self.last, "sessionId": self.req.session_id,
               "timestamp": iso(normal.time if normal.time is not None else self.req.now_ms), "type": kind,
               "cwd": self.cwd, "version": self.version, **extra, "message": message}
        self.last = rec["uuid"]
        self.out.append(rec)
        return rec

    def _image(self, block: dict) -> dict | None:
        if block.get("data"):
            self.report.convert("image")
            return {"inlineData": {"mimeType": block.get("media_type") or "image/png", "data": block["data"]}}
        self.report.drop("image:unreadable")
        return None

    def foreign(self, agent: str, normal: Normal, reply: str | None) -> None:
        role = normal.role
        if role == "meta":
            self.report.drop(f"record:meta:{agent}")
            return
        if role == "assistant":
            if reply is not None and self.reply is not None and reply != self.reply:
                self.close()
            self.reply = reply
            for b in normal.blocks:
                self._assistant_block(agent, normal, b)
            return
        rest = []
        for b in normal.blocks:
            if b["type"] == "tool_result":
                self._result(normal, b)
            else:
                rest.append(b)
        if role == "system":
            if any(b["type"] == "text" for b in rest):
                self.report.convert("system:as_user")
                self._user(normal, rest)
            else:
                self.report.drop("record:system")
        elif rest:
            # Text riding along with tool output (an interruption note) is a user line;
            # a prompt ends the reply before it.
            self._user(normal, rest, close=role == "user")

    def _user(self, normal: Normal, blocks: list[dict], close: bool = True) -> None:
        parts: list[dict] = []
        for b in blocks:
            if b["type"] == "text":
                parts.append({"text": b.get("text") or ""})
            elif b["type"] == "image":
                part = self._image(b)
                if part:
                    parts.append(part)
            else:
                self.report.drop("content:other")
        if close:
            self.close()
        if parts:
            self._record("user", normal, {"role": "user", "parts": parts})

    def _assistant(self, normal: Normal, text: bool) -> dict:
        """The open assistant record; text after calls (a later reply) opens a new one."""
        if self.cur is not None and text and any("functionCall" in p for p in self.cur["message"]["parts"]):
            self.close()
        if self.cur is None:
            extra = {"model": self.model} if self.model else {}
            self.cur = self._record("assistant", normal, {"role": "model", "parts": []}, **extra)
        return self.cur

    def _assistant_block(self, agent: str, normal: Normal, b: dict) -> None:
        kind = b["type"]
        if kind == "text":
            self._assistant(normal, True)["message"]["parts"].append({"text": b.get("text") or ""})
        elif kind == "reasoning":
            text = reasoning_as_text(self.req, b, self.report)
            if text is not None:
                self._assistant(normal, True)["message"]["parts"].append({"text": text, "thought": True})
        elif kind == "tool_call":
            self._call(agent, normal, b)
        elif kind == "tool_result":
            self._result(normal, b)
        elif kind == "image":
            self.report.drop("image:assistant")
        else:
            self.report.drop("content:other")

    def _call(self, agent: str, normal: Normal, b: dict) -> None:
        name, args, mapped = tools.convert_call(agent, AGENT, str(b.get("name") or "unknown"), b.get("input"), self.cwd)
        self.report.convert("tool_call:mapped" if mapped else "tool_call:kept")
        if not isinstance(args, dict):
            args = {"input": args}
        if self.cur is not None and any(self.pending.get(c) is None for c in self._calls_of(self.cur)):
            self.close()  # the calls of this record were answered: this call is a later reply's
        cid = b.get("id") if isinstance(b.get("id"), str) and b.get("id") else None
        if cid is None:
            cid = f"call_opal_{self.counter + 1}"
            self.anon.append(cid)
        self._assistant(normal, False)["message"]["parts"].append({"functionCall": {"id": cid, "name": name, "args": args}})
        self.pending[cid] = name

    @staticmethod
    def _calls_of(rec: dict) -> list[str]:
        return [p["functionCall"]["id"] for p in rec["message"]["parts"] if "functionCall" in p]

    def _result(self, normal: Normal, block: dict) -> None:
        cid = block.get("call_id")
        if not (isinstance(cid, str) and cid in self.pending and self.pending[cid] is not None):
            open_ = [a for a in self.anon if self.pending.get(a) is not None]
            if cid is None and open_:
                cid = open_[0]
                self.anon.remove(cid)
            else:
                self.report.drop("tool_result:orphan")
                return
        text, extra = parts.result_parts(block.get("output"), self._image, self.report.drop)
        self._answer(normal, cid, text, block.get("is_error") is True, extra)

    def _answer(self, normal: Normal, cid: str, text: str, error: bool, extra: list | None = None) -> None:
        name = self.pending[cid]
        self.pending[cid] = None  # answered; kept so that a second result is an orphan
        response = {"error": text} if error else {"output": text}
        status = "error" if error else "success"
        self._record("tool_result", normal,
                     {"role": "user", "parts": [{"functionResponse": {"id": cid, "name": name, "response": response}},
                                                *(extra or [])]},
                     toolCallResult={"callId": cid, "status": status, "resultDisplay": text})

    def close(self) -> None:
        """The end of a foreign reply: its unanswered calls get an error result."""
        calls = (self._calls_of(self.cur) if self.cur is not None else []) + self.open_native
        for cid in calls:
            if self.pending.get(cid) is not None:
                self._answer(Normal(role="tool", time=self.req.now_ms), cid, DANGLING_OUTPUT, True)
                self.report.convert("tool_result:synthesized")
        self.open_native = []
        self.cur = None
        self.reply = None
        self.pending = {k: v for k, v in self.pending.items() if v is None}
        self.anon.clear()

    def finish_report(self) -> None:
        if self.relinked:
            self.report.convert("parent:relinked", self.relinked)
        if self.old_cwds:
            self.report.convert("cwd:rewritten")
            self.report.note(f"the folder changed from {', '.join(self.old_cwds)} to {self.cwd}: records now name "
                             "the new folder, as Qwen Code needs to resume the session there")

"""Writing opencode sessions: an export JSON, then ``opencode import`` in the target folder.

opal never writes opencode's database. The export is the document ``opencode export``
prints, written to ``<data>/opencode/opal-export/<ses id>.json``; the step after it runs
``opencode import <file>`` from the folder the user resumes in (import rewrites the
session's ``directory``/``projectID`` to that folder, which is where ``opencode run
--session`` looks), then reads the database back (read-only) to check that every message
and part arrived. opencode validates every field of the session, each message and each
part (``Missing key at [...]``) and does not roll a failed import back, so a partial
import is an error naming the session and how to remove it, never a silent half session.
Without an ``opencode`` on PATH the file is left for the user to import, said in one line.

Every id is new (``ses_``, ``msg_``, ``prt_`` in opencode's own form, messages and parts in
ascending order as opencode sorts them): import skips an id the database already holds, so
exporting a session back to the machine it came from must not reuse one. Records of an
opencode session are written back as they were but for those ids (a parent message named
by its new id), the folder, and the session's ``revert``/``share``/``parentID``, which name
things of the old session. Foreign turns are converted from their normalized view: one
assistant message per model step (a reply's parallel calls in one message, each call a
``tool`` part holding its result), tool calls mapped through the shared actions.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
from typing import Any, Mapping

from opalgit.agents import tools
from opalgit.agents.base import (
    ExportRequest,
    ExportResult,
    LossReport,
    reasoning_as_text,
    record_of,
    reply_id,
)
from opalgit.agents.opencode.files import AGENT, db_path, dump, export_dir, message_counts
from opalgit.agents.opencode.read import is_message, is_session
from opalgit.errors import InputError
from opalgit.history.model import Normal

__all__ = ["export"]

#: The release whose import validation this writer follows (a foreign session's ``version``).
VERSION = "1.18.33"
NO_RESULT = "[no result was recorded for this tool call]"
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_MASK = (1 << 48) - 1
IMPORT_TIMEOUT = 300


class _Ids:
    """opencode's identifiers (its ``Identifier.create``): prefix, 12 hex digits of
    ``time * 0x1000 + counter`` (inverted for sessions, which sort newest first), 14 base-62
    characters, here derived from the export's session id so that an export is reproducible."""

    def __init__(self, req: ExportRequest) -> None:
        self.seed = req.session_id
        self.base = req.now_ms * 0x1000
        self.n = 0

    def _tail(self) -> str:
        h = int.from_bytes(hashlib.sha256(f"{self.seed}/{self.n}".encode()).digest(), "big")
        out = ""
        for _ in range(14):
            h, r = divmod(h, 62)
            out += _B62[r]
        return out

    def new(self, prefix: str, descending: bool = False) -> str:
        self.n += 1
        value = (self.base + self.n) & _MASK
        if descending:
            value = ~value & _MASK
        return f"{prefix}_{value:012x}{self._tail()}"


def _config_model(env: Mapping[str, str]) -> tuple[str, str] | None:
    """The ``provider/model`` of the user's opencode config (``model``), which a resume uses
    for messages that name no model opencode knows."""
    base = env.get("XDG_CONFIG_HOME") or (os.path.join(env["HOME"], ".config") if env.get("HOME") else None)
    if not base:
        return None
    for name in ("opencode.json", "opencode.jsonc", "config.json"):
        try:
            with open(os.path.join(base, "opencode", name), "rb") as fh:
                data = json.loads(fh.read(1 << 20))
        except (OSError, ValueError):
            continue
        model = data.get("model") if isinstance(data, dict) else None
        if isinstance(model, str) and "/" in model:
            provider, _, name_ = model.partition("/")
            return provider, name_
    return None


def _text_of(output: Any, report: LossReport) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = []
        for b in output:
            if isinstance(b, dict) and b.get("type") == "text":
                texts.append(str(b.get("text") or ""))
            else:
                report.drop("tool_result:image" if isinstance(b, dict) and b.get("type") == "image" else "content:other")
        return "\n".join(texts)
    return "" if output is None else json.dumps(output, ensure_ascii=False)


class _Writer:
    """The messages of the new session, in order."""

    def __init__(self, req: ExportRequest, report: LossReport, ids: _Ids, sid: str) -> None:
        self.req, self.report, self.ids, self.sid = req, report, ids, sid
        self.out: list[dict] = []
        self.user: str | None = None  # the id of the last user message (an assistant's parentID)
        self.cur: dict | None = None  # the assistant message being filled
        self.reply: str | None = None
        self.pending: dict[Any, dict] = {}  # call id -> its tool part, waiting for a result
        self.renamed: dict[str, str] = {}  # old message id -> new (same-agent records)
        self.model = _config_model(req.env)
        self.noted_model = False

    # ---------------------------------------------------------------- same agent

    def native(self, rec: dict) -> None:
        """An opencode message written back: new ids, the folder, nothing else changed."""
        self.close()
        msg = copy.deepcopy(rec)
        info = msg["info"]
        new = self.ids.new("msg")
        if isinstance(info.get("id"), str):
            self.renamed[info["id"]] = new
        info["id"], info["sessionID"] = new, self.sid
        if info.get("role") == "assistant":
            parent = self.renamed.get(info.get("parentID")) or self.user
            if parent is not None:
                info["parentID"] = parent
            if isinstance(info.get("path"), dict):
                info["path"] = {**info["path"], "cwd": self.req.cwd, "root": self.req.cwd}
        else:
            self.user = new
        for part in msg["parts"]:
            if isinstance(part, dict):
                part["id"], part["sessionID"], part["messageID"] = self.ids.new("prt"), self.sid, new
        self.out.append(msg)

    # ---------------------------------------------------------------- foreign turns

    def _model(self) -> tuple[str, str]:
        if self.model is not None:
            return self.model
        if not self.noted_model:
            self.noted_model = True
            self.report.note("opencode's config names no default model: the converted messages name "
                             "opencode/unknown; resume with --model provider/model")
        return "opencode", "unknown"

    def _t(self, normal: Normal) -> int:
        return normal.time if isinstance(normal.time, int) else self.req.now_ms

    def _part(self, msg: dict, body: dict) -> dict:
        part = {**body, "id": self.ids.new("prt"), "sessionID": self.sid, "messageID": msg["info"]["id"]}
        msg["parts"].append(part)
        return part

    def _user(self, t: int, texts: list[str]) -> None:
        self.close()
        provider, model = self._model()
        mid = self.ids.new("msg")
        msg = {"info": {"id": mid, "sessionID": self.sid, "role": "user", "time": {"created": t}, "agent": "build",
                        "model": {"providerID": provider, "modelID": model}}, "parts": []}
        for text in texts:
            self._part(msg, {"type": "text", "text": text})
        self.out.append(msg)
        self.user = mid

    def _assistant(self, t: int, reply: str | None) -> dict:
        step_done = self.cur is not None and any(
            p["type"] == "tool" and p["state"]["status"] != "pending" for p in self.cur["parts"])
        other = reply is not None and self.reply is not None and reply != self.reply
        if self.cur is None or step_done or other:
            self.close_calls()
            if self.user is None:
                # opencode needs an assistant's parentID: a session that begins with a reply gets a user message.
                self._user(t, ["(the conversation begins with the assistant)"])
                self.report.convert("user:inserted")
            provider, model = self._model()
            self.cur = {"info": {"id": self.ids.new("msg"), "sessionID": self.sid, "role": "assistant",
                                 "time": {"created": t, "completed": t}, "parentID": self.user, "modelID": model,
                                 "providerID": provider, "mode": "build", "agent": "build",
                                 "path": {"cwd": self.req.cwd, "root": self.req.cwd}, "cost": 0,
                                 "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
                                 "finish": "stop"}, "parts": []}
            self.out.append(self.cur)
        self.reply = reply if reply is not None else self.reply
        return self.cur

    def _call(self, agent: str, t: int, blk: dict, reply: str | None) -> None:
        name, args, mapped = tools.convert_call(agent, AGENT, str(blk.get("name") or "unknown"), blk.get("input"),
                                                self.req.cwd)
        self.report.convert("tool_call:mapped" if mapped else "tool_call:kept")
        if not isinstance(args, dict):
            args = {"input": args}
        msg = self._assistant(t, reply)
        cid = blk.get("id") if isinstance(blk.get("id"), str) and blk.get("id") else f"opal_call_{self.ids.n + 1}"
        part = self._part(msg, {"type": "tool", "callID": cid, "tool": name,
                                "state": {"status": "pending", "input": args, "raw": ""}})
        msg["info"]["finish"] = "tool-calls"
        self.pending[cid] = part

    def _result(self, blk: dict, t: int) -> None:
        cid = blk.get("call_id")
        part = self.pending.pop(cid, None)
        if part is None and not cid:
            # A result naming no call (older Codex rollouts pair them by order): the oldest open call.
            cid = next(iter(self.pending), None)
            part = self.pending.pop(cid, None) if cid is not None else None
        if part is None:
            self.report.drop("tool_result:orphan")
            return
        self._fill(part, _text_of(blk.get("output"), self.report), blk.get("is_error") is True, t)

    @staticmethod
    def _fill(part: dict, text: str, error: bool, t: int) -> None:
        inp = part["state"]["input"]
        when = {"start": t, "end": t}
        if error:
            part["state"] = {"status": "error", "input": inp, "error": text, "time": when}
        else:
            part["state"] = {"status": "completed", "input": inp, "output": text, "title": part["tool"],
                             "metadata": {}, "time": when}

    def close_calls(self) -> None:
        for part in self.pending.values():
            self._fill(part, NO_RESULT, True, self.req.now_ms)
            self.report.convert("tool_result:synthesized")
        self.pending.clear()

    def close(self) -> None:
        self.close_calls()
        self.cur = None
        self.reply = None

    def feed(self, agent: str, normal: Normal, reply: str | None) -> None:
        role, t = normal.role, self._t(normal)
        if role == "meta":
            self.report.drop(f"record:meta:{agent}")
            return
        if role in ("user", "tool", "system"):
            texts = []
            for b in normal.blocks:
                kind = b.get("type")
                if kind == "tool_result":
                    self._result(b, t)
                elif kind == "text" and str(b.get("text") or "").strip():
                    texts.append(str(b["text"]))
                elif kind == "image":
                    self.report.drop("image:user")
                elif kind != "text":
                    self.report.drop("content:other")
            if texts:
                if role == "system":
                    self.report.convert("system:as_user")
                elif role == "tool":
                    self.report.convert("tool_text:as_user")
                self._user(t, texts)
            elif role == "system":
                self.report.drop("record:system")
            return
        for b in normal.blocks:  # assistant
            kind = b.get("type")
            if kind == "text":
                if str(b.get("text") or "").strip():
                    self._part(self._assistant(t, reply), {"type": "text", "text": str(b["text"]),
                                                           "time": {"start": t, "end": t}})
            elif kind == "reasoning":
                text = reasoning_as_text(self.req, b, self.report)
                if text is not None:
                    self._part(self._assistant(t, reply), {"type": "reasoning", "text": text,
                                                           "time": {"start": t, "end": t}})
            elif kind == "tool_call":
                self._call(agent, t, b, reply)
            elif kind == "tool_result":
                self._result(b, t)
            elif kind == "image":
                self.report.drop("image:assistant")
            else:
                self.report.drop("content:other")


def _info(header: dict | None, req: ExportRequest, sid: str, first: int | None) -> dict:
    """The new session's ``info``: the source's when it was an opencode session, else made up
    of the fields import requires (id, slug, title, version, time) and those opencode lists."""
    if header is not None:
        info = copy.deepcopy(header["info"])
        for key in ("revert", "share", "parentID"):
            info.pop(key, None)
    else:
        s = req.session
        title = s.title if s is not None and s.title else f"Imported from {s.agent if s else 'another agent'} by opal"
        info = {"slug": "opal-import", "title": title, "version": VERSION, "summary": {"additions": 0, "deletions": 0,
                "files": 0}, "cost": 0,
                "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}}
    created = info.get("time", {}).get("created") if isinstance(info.get("time"), dict) else None
    info.update(id=sid, directory=req.cwd)
    info.setdefault("projectID", "global")  # import sets the target folder's project
    info["time"] = {**(info.get("time") if isinstance(info.get("time"), dict) else {}),
                    "created": created if isinstance(created, int) else (first or req.now_ms), "updated": req.now_ms}
    return info


def export(req: ExportRequest) -> ExportResult:
    report = LossReport()
    ids = _Ids(req)
    sid = ids.new("ses", descending=True)
    w = _Writer(req, report, ids, sid)
    header: dict | None = None
    extra: dict = {}
    first: int | None = None
    for et in req.turns:
        rec = record_of(et.turn) if et.turn.agent == AGENT else None
        if first is None and isinstance(et.normal.time, int):
            first = et.normal.time
        if rec is not None and is_session(rec):
            header = rec
            extra = {k: v for k, v in rec.items() if k != "info"}  # unknown top-level keys of the export
        elif rec is not None and is_message(rec):
            w.native(rec)
        else:
            w.feed(et.turn.agent, et.normal, reply_id(et.turn))
    w.close()
    doc = {"info": _info(header, req, sid, first), **extra, "messages": w.out}
    folder = export_dir(req.env)
    if folder is None:
        raise InputError("cannot tell where opencode keeps its data: neither XDG_DATA_HOME nor HOME is set",
                         hint="set HOME (or XDG_DATA_HOME) and export again")
    path = os.path.join(folder, f"{sid}.json")
    parts = sum(len(m["parts"]) for m in w.out)
    post = [lambda: _import(req, path, sid, len(w.out), parts)]
    return ExportResult(files=[(path, dump(doc))], session_id=sid, resume=["opencode", "--session", sid],
                        report=report, post=post)


def _import(req: ExportRequest, path: str, sid: str, messages: int, parts: int) -> str:
    """``opencode import`` in the target folder, then the database read back (see the module)."""
    exe = shutil.which("opencode", path=req.env.get("PATH") or os.defpath)
    if exe is None:
        return (f"opencode is not on PATH: the session is written to {path}; "
                f"import it with `opencode import {path}` from {req.cwd}")
    # Fixed arguments but the file, an absolute path opal chose (never an option); no shell.
    proc = subprocess.run([exe, "import", path], cwd=req.cwd, env=dict(req.env), stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=IMPORT_TIMEOUT)
    db = db_path(req.env)
    got = message_counts(db, sid) if db and os.path.isfile(db) else None
    cleanup = (f"remove what arrived with `opencode session delete {sid}`, then import {path} again "
               f"from {req.cwd} (`opencode import {path}`)")
    if proc.returncode != 0:
        said = proc.stderr.decode("utf-8", "replace").strip() or proc.stdout.decode("utf-8", "replace").strip()
        last = said.splitlines()[-1] if said else f"exit status {proc.returncode}"
        held = "nothing arrived" if got is None else f"{got[0]} of {messages} messages are in its database"
        raise InputError(f"opencode import failed ({last[:300]}); opencode does not undo a failed import: {held}",
                         path=path, hint=cleanup if got is not None else f"fix the file, then `opencode import {path}`")
    if got != (messages, parts):
        held = "no session" if got is None else f"{got[0]} of {messages} messages and {got[1]} of {parts} parts"
        raise InputError(f"opencode import reported success but its database holds {held} of session {sid}",
                         path=path, hint=cleanup)
    return f"imported into opencode from {req.cwd}: {messages} messages, {parts} parts (checked in its database)"



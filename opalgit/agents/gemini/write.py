"""Writing Gemini CLI sessions: the export half of the Gemini CLI adapter.

:func:`export` turns an :class:`~.base.ExportRequest` into one
``<base>/tmp/<slug>/chats/session-<YYYY-MM-DDThh-mm>-<id[:8]>.jsonl`` file that
``gemini --resume`` accepts, plus, when the project has to be registered, the
``projects.json`` entry and ``.project_root`` markers Gemini CLI itself would write
(formats.md §3.1). Foreign turns are converted from their normalized view into
Gemini message records; native records are replayed (:mod:`.log`) and
written as the messages of the final state.

Export writes a fresh JSON-lines session with the *final* state only: one line per
live message, no superseded lines, results only in ``toolCalls[].result``, every
call paired. Loss-report kinds (shared names as in :mod:`opalgit.agents.claude.write`):
``record:superseded``, ``record:folded`` (header, ``$set`` and ``$rewindTo`` lines
applied into the new file), ``record:unparseable``, ``record:meta:<agent>``,
``record:system``, ``system:as_user``, ``message:retyped``, ``tool_result:duplicate``,
``tool_result:synthesized``, ``tool_result:orphan``, ``tool_call:mapped``,
``tool_call:kept``, ``reasoning:as_text``, ``reasoning:foreign``, ``reasoning:signed``,
``user_text:prefixed``, ``image:unreadable``, ``content:other``.

Pure: no store, no environment reads beyond ``req.env``, no printing.
"""

from __future__ import annotations

import copy
import json
import os
import re
import uuid
from datetime import datetime, timezone
from typing import Any, Mapping

from opalgit import jsonl
from opalgit.agents import parts, tools
from opalgit.agents.base import ExportRequest, ExportResult, LossReport, iso, reply_id
from opalgit.agents.gemini.files import gemini_dir, load_registry, marker_owner, project_hash, read_text, slugify
from opalgit.agents.gemini.log import (
    _SKIP,
    AGENT,
    IGNORED_PREFIXES,
    KEEP_PREFIX,
    NO_RESULT,
    _content_string,
    _fr_ids,
    _is_id,
    _kind,
    _replay,
    _value_of,
    parse_time,
)
from opalgit.errors import InputError
from opalgit.history.model import Normal

__all__ = ["export"]

_ID_NAMESPACE = uuid.UUID("6f70616c-6765-4d69-8e69-6578706f7274")


# ---------------------------------------------------------------------------- exporting


def export(req: ExportRequest) -> ExportResult:
    """The session file (and registry entries) that make ``req.turns`` a resumable Gemini CLI session."""
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
            conv.feed(et.turn.agent, et.normal, reply_id(et.turn))
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

    post: list = []
    folder, aux = _project_folder(base, cwd, report, post)
    stamp = datetime.fromtimestamp(req.now_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H-%M")
    path = os.path.join(folder, "chats", f"session-{stamp}-{req.session_id[:8]}.jsonl")
    return ExportResult(files=[(path, body)], session_id=req.session_id,
                        resume=["gemini", "--resume", req.session_id], report=report, aux=aux, post=post)


def _project_folder(base: str, cwd: str, report: LossReport, post: list) -> tuple[str, list[tuple[str, bytes]]]:
    """The project's folder under ``<base>/tmp`` and the registry files to write for it.

    What is done to the registry is said by a step of ``post``, run once the files are
    written: a dry run writes nothing and must not say it registered anything.
    """
    tmp = os.path.join(base, "tmp")
    registry_path = os.path.join(base, "projects.json")
    data, problem = load_registry(registry_path)
    projects = data["projects"]
    slug = projects.get(cwd)
    if slug and all(owner == cwd for owner in marker_owner(base, slug)):
        return os.path.join(tmp, slug), []
    legacy = os.path.join(tmp, project_hash(cwd))
    if not slug and os.path.isdir(legacy):
        # The CLI copies a legacy hash folder into a *fresh* slug folder on its next
        # start; writing into a new slug folder now would stop that migration.
        report.note(f"the project is not registered in projects.json; the session goes into its legacy folder "
                    f"{legacy}, which Gemini CLI migrates on its next start")
        return legacy, []
    if problem:
        report.note(f"{registry_path} is {problem}; it is replaced when the export is written, as Gemini CLI itself would do")
    slug = _existing_slug(base, cwd) or _claim_slug(base, cwd, projects)
    projects[cwd] = slug
    aux = [(registry_path, json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8"))]
    for sub in ("tmp", "history"):
        marker = os.path.join(base, sub, slug, ".project_root")
        if not os.path.exists(marker):
            aux.append((marker, cwd.encode("utf-8", "surrogatepass")))
    done = f"registered the project {cwd} as {slug!r} in {registry_path}"
    post.append(lambda: done)
    return os.path.join(tmp, slug), aux


def _existing_slug(base: str, cwd: str) -> str | None:
    for sub in ("tmp", "history"):
        try:
            names = sorted(os.listdir(os.path.join(base, sub)))
        except OSError:
            continue
        for name in names:
            text = read_text(os.path.join(base, sub, name, ".project_root"))
            if text is not None and text.strip() == cwd and re.fullmatch(r"[a-z0-9-]+", name):
                return name
    return None


def _claim_slug(base: str, cwd: str, projects: Mapping[str, str]) -> str:
    stem = slugify(os.path.basename(cwd.rstrip("/")) or "project")
    taken = set(projects.values())
    n = 0
    while True:
        candidate = stem if n == 0 else f"{stem}-{n}"
        n += 1
        if candidate in taken or any(owner != cwd for owner in marker_owner(base, candidate)):
            continue
        return candidate


# ----------------------------------------------------------------------------- messages


class _Converter:
    """Turns a run of foreign normalized turns into Gemini message records."""

    def __init__(self, req: ExportRequest, report: LossReport, counter: list[int]) -> None:
        self.req, self.report, self.counter = req, report, counter
        self.out: list[dict] = []
        self.cur: dict | None = None  # the gemini message being filled
        self.pending: dict[str, dict] = {}  # call id -> toolCalls entry without a result
        # Ids minted for calls that had none, oldest first: a result without a call id
        # answers the oldest of them (older Codex rollouts pair calls and results by order).
        self.anon: list[str] = []
        self.reply: str | None = None  # reply_id of the assistant turn last fed
        self.fresh = True  # the next call belongs to a reply other than the message's calls
        self.other_reply = False  # ... and that reply is known to differ (both have ids)

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
            # Nothing the model saw, yet a user turn came between: the next call is
            # another reply's, never one more parallel call of the last message.
            self.cur = None
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
        if not _is_id(cid):
            open_ = [a for a in self.anon if a in self.pending]
            named = [a for a in open_ if self.pending[a].get("name") == block.get("name")]
            cid = (named or open_ or [None])[0]
            if cid is not None:
                self.anon.remove(cid)
        entry = self.pending.pop(cid, None) if _is_id(cid) else None
        if entry is None:
            self.report.drop("tool_result:orphan")
            return
        text, extra = parts.result_parts(block.get("output"), self._image, self.report.drop)
        self._fill(entry, text, block.get("is_error") is True, extra)

    @staticmethod
    def _fill(entry: dict, text: str, error: bool, extra: list | None = None) -> None:
        response = {"error": text} if error else {"output": text}
        # A call of a hand-written or older file may lack an id: its response names none either.
        entry["result"] = [{"functionResponse": {"id": entry.get("id"), "name": entry["name"], "response": response}},
                           *(extra or [])]
        entry["status"] = "error" if error else "success"

    def close(self) -> None:
        """A user turn (or the end) closes the model turn: unanswered calls get an error result."""
        for entry in self.pending.values():
            self._fill(entry, NO_RESULT, True)
            self.report.convert("tool_result:synthesized")
        self.pending.clear()
        self.cur = None

    def feed(self, agent: str, normal: Normal, reply: str | None = None) -> None:
        role = normal.role
        if role == "assistant" and (reply is None or reply != self.reply):
            self.fresh = True  # another reply: its first call opens a message of its own
            # Known to be another reply (both have ids, and they differ): its calls never
            # join the last message's, even when those are still unanswered.
            self.other_reply = reply is not None and self.reply is not None
        self.reply = reply if role == "assistant" else self.reply
        if role == "meta":
            self.report.drop(f"record:meta:{agent}")
            if normal.label == "codex:context":
                # A message the model saw between two calls: they are two replies.
                self.cur = None
            return
        if role == "user":
            for b in normal.blocks:
                if b["type"] == "tool_result":
                    self._result(b)
            self._user(normal, normal.blocks)
            return
        if role in ("tool", "system"):
            self._tool_or_system(normal)
            return
        for b in normal.blocks:  # assistant
            self._assistant_block(agent, normal, b)

    def _tool_or_system(self, normal: Normal) -> None:
        """Tool results fill their calls; a system turn's text is a user line, and so is
        text riding along with tool output."""
        rest = []
        for b in normal.blocks:
            if b["type"] == "tool_result":
                self._result(b)
            else:
                rest.append(b)
        if normal.role == "system":
            if any(b["type"] == "text" for b in rest):
                self.report.convert("system:as_user")
                self._user(normal, rest)
            else:
                self.report.drop("record:system")
        elif rest:
            # Text riding along with tool output (an interruption note): a user line
            # after the model turn, which leaves other calls of that turn open.
            self._user(normal, rest, close=False)

    def _assistant_block(self, agent: str, normal: Normal, b: dict) -> None:
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
            self._call(agent, normal, b)
        elif kind == "tool_result":
            self._result(b)
        else:
            self.report.drop("content:other")

    def _call(self, agent: str, normal: Normal, b: dict) -> None:
        name, args, mapped = tools.convert_call(agent, AGENT, str(b.get("name") or "unknown"),
                                                b.get("input"), self.req.cwd)
        self.report.convert("tool_call:mapped" if mapped else "tool_call:kept")
        if not isinstance(args, dict):
            args = {"input": args}
        cid = b.get("id") if _is_id(b.get("id")) else f"opal_call_{self._new_id()[:8]}"
        if not _is_id(b.get("id")):
            self.anon.append(cid)
        entry = {"id": cid, "name": name, "args": args, "result": None, "status": "error",
                 "timestamp": self._stamp(normal)}
        msg = self._model(normal, False)
        if self.fresh and msg["toolCalls"] and (
                self.other_reply or any(tc.get("result") is not None for tc in msg["toolCalls"])):
            # A call made after the calls of this message were answered is a new
            # reply (it waited for those results), not one more parallel call; so is
            # a call of a reply with another id (after a call left unanswered).
            self.cur = None
            msg = self._model(normal, False)
        self.fresh = self.other_reply = False
        msg["toolCalls"].append(entry)
        self.pending[cid] = entry

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

"""Writing Codex CLI rollouts: the export half of the Codex CLI adapter.

:func:`export` turns an :class:`~.base.ExportRequest` into one new legacy-mode rollout,
``<home>/sessions/YYYY/MM/DD/rollout-<local time>-<session id>.jsonl``, that
``codex resume`` accepts (formats.md §1.10-1.11):

* Codex records go back as they were, with three repairs: a new ``session_meta``
  (the new session id and the target folder) replaces the source's, ``turn_context``
  records name the target folder, and paginated ``ordinal`` fields are removed.
* Records of other agents and opal-authored turns are converted from their
  normalized view: user prompts open a task (``task_started`` / ``user_message``
  events around the message), answers, tool calls (mapped to Codex's own tools where
  :func:`.tools.convert_call` knows a counterpart) and their outputs.
* Every tool call gets an output: one that has none in the exported history gets
  :data:`~.codex.DANGLING_OUTPUT` right after it.

Every conversion or omission is counted in the result's :class:`~.base.LossReport`.
:func:`replace_tool_outputs` rewrites the tool outputs of one Codex record in place
(``opal trim``).

Pure: no store, no environment reads beyond ``req.env``, no printing.
"""

from __future__ import annotations

import json
import os
import time as _time
import uuid
from collections import deque
from functools import partial
from typing import Any, Mapping

from opalgit import jsonl
from opalgit.agents import tools
from opalgit.agents.base import (
    ExportRequest,
    ExportResult,
    LossReport,
    iso,
    parse_time,
    reasoning_as_text,
    record_of,
    reply_id,
)
from opalgit.agents.codex import statedb as codex_state
from opalgit.agents.codex import threads as codex_threads
from opalgit.agents.codex.files import codex_home
from opalgit.agents.codex.format import (
    AGENT,
    CONTEXT_PREFIXES,
    DANGLING_OUTPUT,
    DEFAULT_CLI_VERSION,
    ORIGINATOR,
    OUTPUTS,
    REQUEST_MARKER,
    is_str,
)
from opalgit.errors import InputError, UsageError
from opalgit.history.model import Normal, Turn
from opalgit.plural import count, noun

__all__ = ["export", "replace_tool_outputs"]

_ABSENT = object()


# ---------------------------------------------------------------------------- export


def export(req: ExportRequest) -> ExportResult:
    """The rollout file that makes ``req.turns`` a resumable Codex CLI session."""
    home = codex_home(req.env)
    if home is None:
        raise UsageError("cannot tell where Codex keeps its sessions", hint="set CODEX_HOME or HOME")
    lt = _time.localtime(req.now_ms / 1000)
    name = f"rollout-{_time.strftime('%Y-%m-%dT%H-%M-%S', lt)}-{req.session_id}.jsonl"
    path = os.path.join(home, "sessions", _time.strftime("%Y", lt), _time.strftime("%m", lt),
                        _time.strftime("%d", lt), name)
    writer = _Writer(req)
    body = writer.run()
    sid, now = req.session_id, req.now_ms
    src = req.session
    old = src.id if src is not None and src.agent == AGENT else None
    children = codex_threads.written_back(req.side, old, sid, path, writer.report) if old else []
    post = [lambda: codex_state.register(home, sid, path, body, now)]
    # Each child registered like the parent (its row names the new parent in ``source``).
    post += [partial(codex_state.register, home, child, cpath, cbody, now) for cpath, cbody, child in children]
    return ExportResult(files=[(path, body)] + [(c[0], c[1]) for c in children], session_id=sid,
                        resume=["codex", "resume", sid], report=writer.report, prefix=writer.aligned, post=post)


class _Writer:
    """Builds one legacy-mode rollout from an :class:`ExportRequest`."""

    def __init__(self, req: ExportRequest) -> None:
        self.req = req
        self.report = LossReport()
        self.lines: list[dict | bytes] = []
        self.calls: dict[str, str] = {}  # call_id -> item type of the (latest) call
        self.call_pos: dict[str, int] = {}  # call_id -> index in self.lines
        self.answered: set[str] = set()
        self.id_map: dict[str, str] = {}  # foreign call id -> call_id written
        self.anon: deque[str] = deque()  # ids minted for foreign calls that had none
        self.open_turn: str | None = None
        self.last_answer: str | None = None
        self.turns = 0
        self.meta_labels: dict[str, int] = {}
        self.source_notes: dict[str, int] = {}
        self.ordinals = 0
        self.reply: str | None = None  # reply_id of the foreign reply being written
        self.reply_end: int | None = None  # where that reply's next call goes (after its last one)
        self.native_calls: set[str] = set()  # call_ids of Codex's own calls written back
        self.at = 0  # index in req.turns of the turn being written
        self.meta_index: int | None = None

    # -- the whole file ---------------------------------------------------------------

    def run(self) -> bytes:
        req = self.req
        src = req.session
        self.lines.append(self._session_meta())
        # The first ``aligned`` lines stand for the first records one for one: the new
        # session_meta for the stored one it replaces, then one line per record.
        self.aligned = 0
        for i, et in enumerate(req.turns):
            turn = et.turn
            self.at = i
            if turn.agent == AGENT and (turn.has_record or isinstance(turn.line, bytes)):
                self._native(turn)
            elif turn.agent == AGENT and turn.line is not None:
                raise InputError("a codex turn has unresolved payloads; resolve it before exporting")
            else:
                self._foreign(turn, et.normal)
            if self.aligned == i and len(self.lines) == i + 1 and turn.agent == AGENT:
                self.aligned = i + 1
        self._close_task(None)
        self._synthesize_dangling()
        self._ui_events()
        self._notes()
        return b"".join((ln if isinstance(ln, bytes) else jsonl.dumps(ln)) + b"\n" for ln in self.lines)

    # -- session_meta ----------------------------------------------------------------

    def _source_meta(self) -> tuple[int, dict] | None:
        """(index in req.turns, parsed line) of the source's own first ``session_meta``."""
        for i, et in enumerate(self.req.turns):
            turn = et.turn
            if turn.agent != AGENT:
                return None  # a foreign session: its first record is not Codex's header
            rec: Any = record_of(turn)
            if isinstance(rec, dict) and rec.get("type") == "session_meta" and isinstance(rec.get("payload"), dict):
                return i, rec
            if et.normal.role != "meta":
                return None  # conversation before any header: none to keep
        return None

    def _session_meta(self) -> dict:
        """The new rollout's first line: the source's own session_meta with only what the
        new id and folder force to change (each change reported), or a fresh one."""
        req = self.req
        found = self._source_meta()
        self.meta_index = found[0] if found else None
        if found is None:
            src = req.session
            version = src.version if src is not None and src.agent == AGENT and src.version else DEFAULT_CLI_VERSION
            meta = {"id": req.session_id, "timestamp": iso(req.now_ms), "cwd": req.cwd, "originator": ORIGINATOR,
                    "cli_version": version, "source": "cli"}
            return {"timestamp": iso(req.now_ms), "type": "session_meta", "payload": meta}
        line = {k: v for k, v in found[1].items() if k != "ordinal"}
        old = line["payload"]
        p = dict(old)
        p["id"] = req.session_id
        if "session_id" in p:
            p["session_id"] = req.session_id  # the thread's own id, not a parent's
        if p.get("cwd") != req.cwd:
            was = p.get("cwd")
            p["cwd"] = req.cwd
            for key in ("runtime_workspace_roots", "workspace_roots"):
                if isinstance(p.get(key), list):
                    p[key] = [req.cwd if r == was else r for r in p[key]]
        if p.get("history_mode") == "paginated":
            p["history_mode"] = "legacy"  # the export drops ordinals: a paginated header would be refused
        # Codex refuses a header without these (formats.md §1.4, E-C5).
        for key, value in (("timestamp", line.get("timestamp") or iso(req.now_ms)), ("originator", ORIGINATOR),
                           ("cli_version", (req.session.version if req.session and req.session.version else None)
                            or DEFAULT_CLI_VERSION)):
            if not is_str(p.get(key)):
                p[key] = value
        for key in sorted(set(p) | set(old)):
            if p.get(key, _ABSENT) != old.get(key, _ABSENT):
                self.report.convert(f"session_meta:{key}:" + ("added" if key not in old else "rewritten"))
        line["payload"] = p
        if not is_str(line.get("timestamp")):
            line["timestamp"] = p["timestamp"]
        return line

    def _notes(self) -> None:
        rep, src = self.report, self.req.session
        if self.meta_labels:
            families = ", ".join(f"{k} x{v}" for k, v in sorted(self.meta_labels.items()))
            rep.note(f"bookkeeping records with no Codex counterpart were left out: {families}")
        if self.ordinals:
            rep.note(f"the source used Codex's paginated history; written in legacy mode ({self.ordinals} "
                     "ordinal fields removed), with user_message / agent_message events added so codex shows the transcript")
        if self.source_notes.get("thread_rolled_back"):
            rep.note(f"the source holds {count(self.source_notes['thread_rolled_back'], 'thread_rolled_back event')}: "
                     "written back, so Codex drops the rolled-back turns on resume as before (opal's view still shows them)")
        if self.source_notes.get("compacted"):
            rep.note(f"the source holds {count(self.source_notes['compacted'], 'compacted item')}: written back, so Codex "
                     "resumes from the compacted history as before")
        if src is not None and src.agent == AGENT and src.cwd and src.cwd != self.req.cwd:
            rep.note(f"the folder changed from {src.cwd} to {self.req.cwd}: turn_context records now name the new "
                     "folder; earlier messages and tool calls still mention the old one")
        if not any(isinstance(ln, dict) and ln.get("type") == "response_item" for ln in self.lines):
            rep.note("the exported session holds no conversation items; codex may refuse to resume it")

    def _ui_events(self) -> None:
        """Give a copy of a paginated session the UI events a legacy rollout shows.

        Codex 0.169 keeps a paginated session's UI turns in ``item_completed`` events;
        a legacy-mode rollout rebuilds its visible transcript from ``event_msg``s only
        (formats.md §1.9), so without these a resumed copy shows an empty-looking
        history, and the listing heuristics look for a ``user_message`` near the head.
        One ``user_message`` per prompt and one ``agent_message`` per answer are added
        beside the items; the model-visible history is unchanged.
        """
        if not self.ordinals or any(
            isinstance(ln, dict) and ln.get("type") == "event_msg" and (ln.get("payload") or {}).get("type") == "user_message"
            for ln in self.lines
        ):
            return
        out: list[dict | bytes] = []
        added = 0
        first_added = len(self.lines)
        for ln in self.lines:
            out.append(ln)
            if not (isinstance(ln, dict) and ln.get("type") == "response_item"):
                continue
            p = ln.get("payload") or {}
            if p.get("type") != "message" or p.get("role") not in ("user", "assistant"):
                continue
            texts = [c.get("text") for c in p.get("content") or [] if isinstance(c, dict) and isinstance(c.get("text"), str)]
            text = "\n".join(texts)
            if not text:
                continue
            if p["role"] == "user":
                if text.lstrip().startswith(CONTEXT_PREFIXES) or REQUEST_MARKER in text:
                    continue
                event = {"type": "user_message", "message": text, "images": None, "local_images": []}
            else:
                event = {"type": "agent_message", "message": text}
            out.append({"timestamp": ln.get("timestamp") or iso(self.req.now_ms), "type": "event_msg", "payload": event})
            first_added = min(first_added, len(out) - 1)
            added += 1
        if added:
            self.lines = out
            self.aligned = min(self.aligned, first_added)  # the lines before the first event are as they were
            self.report.convert("ui_event:added", added)

    def _line(self, kind: str, payload: dict, t: int | None = None) -> None:
        self.lines.append({"timestamp": iso(t if t is not None else self.req.now_ms), "type": kind, "payload": payload})

    # -- Codex records -------------------------------------------------------------

    def _native(self, turn: Turn) -> None:
        rec: Any = turn.record
        if not turn.has_record:
            raw = turn.line
            assert isinstance(raw, bytes)
            try:
                rec = jsonl.parse_kept(raw) if raw.strip() else None
            except jsonl.ParseFailure:
                rec = None
            if not isinstance(rec, dict) or not self._needs_change(rec):
                self.lines.append(raw)
                self._track(rec)
                return
        if not isinstance(rec, dict):
            self.lines.append(jsonl.dumps(rec))
            return
        if rec.get("type") == "session_meta" and self.at == self.meta_index:
            return  # the header the new session_meta line stands for
        if "ordinal" in rec:
            rec = {k: v for k, v in rec.items() if k != "ordinal"}
            self.ordinals += 1
        p = rec.get("payload")
        moved = self._moved(rec)
        if moved is not None:
            assert isinstance(p, dict)
            p = dict(p, cwd=moved)
            if isinstance(p.get("workspace_roots"), list):
                p["workspace_roots"] = [self._relocate(r) or r for r in p["workspace_roots"]]
            rec = dict(rec, payload=p)
            self.report.convert("turn_context:cwd")
        self.lines.append(rec)
        self._track(rec)

    def _relocate(self, path: Any) -> str | None:
        """``path`` moved with the session: the source folder, or a folder under it, with
        its prefix mapped to the target (a subfolder stays a subfolder); None when the path
        is elsewhere, or does not move."""
        src = self.req.session
        old = src.cwd if src is not None and src.agent == AGENT else None
        if not is_str(path) or not old or old == self.req.cwd:
            return None
        base = old.rstrip("/")
        if path == old or path == base:
            return self.req.cwd
        if path.startswith(base + "/"):
            return self.req.cwd.rstrip("/") + path[len(base):]
        return None

    def _moved(self, rec: dict) -> str | None:
        """The new ``cwd`` of a ``turn_context`` that moves with the session, or None."""
        p = rec.get("payload")
        if rec.get("type") != "turn_context" or not isinstance(p, dict):
            return None
        return self._relocate(p.get("cwd"))

    def _needs_change(self, rec: dict) -> bool:
        return (rec.get("type") == "session_meta" and self.at == self.meta_index) or "ordinal" in rec \
            or self._moved(rec) is not None

    def _track(self, rec: Any) -> None:
        """Follow calls, outputs and task boundaries of a written-back record."""
        if not isinstance(rec, dict) or not isinstance(rec.get("payload"), dict):
            return
        kind, p = rec.get("type"), rec["payload"]
        sub = p.get("type")
        if kind == "response_item" and isinstance(p.get("call_id"), str):
            if sub in ("function_call", "custom_tool_call", "local_shell_call"):
                self._add_call(p["call_id"], sub)
                self.native_calls.add(p["call_id"])
            elif sub in OUTPUTS:
                self.answered.add(p["call_id"])
        elif kind == "event_msg":
            if sub in ("task_started", "turn_started"):
                # Codex's own task: left as the source left it (an unfinished one stays
                # unfinished; opal closes only the tasks it opens for foreign prompts).
                self._close_task(None)
                self.open_turn = "native"
            elif sub in ("task_complete", "turn_complete", "turn_aborted"):
                self.open_turn = None
            elif sub == "thread_rolled_back":
                self.source_notes["thread_rolled_back"] = self.source_notes.get("thread_rolled_back", 0) + 1
        elif kind == "compacted":
            self.source_notes["compacted"] = self.source_notes.get("compacted", 0) + 1

    def _add_call(self, call_id: str, kind: str) -> None:
        self.calls[call_id] = kind
        self.call_pos[call_id] = len(self.lines) - 1
        self.answered.discard(call_id)

    # -- foreign records ---------------------------------------------------------------

    def _foreign(self, turn: Turn, normal: Normal) -> None:
        role, t = normal.role, normal.time
        if role == "meta":
            family = (normal.label or "unlabelled").split(":")[0]
            self.meta_labels[family] = self.meta_labels.get(family, 0) + 1
            self.report.drop(f"record:meta:{turn.agent}")
            return
        if role == "system" and not any(b.get("type") == "text" for b in normal.blocks):
            self.report.drop("record:system")
            return
        rid = reply_id(turn)
        results_only = all(b.get("type") == "tool_result" for b in normal.blocks)
        if rid != self.reply and not (rid is None and results_only):
            # Another reply: its calls start a new run. The results of the reply being
            # written (they may come between its calls) leave the run open.
            self.reply, self.reply_end = rid, None
        pending: list[dict] = []
        for blk in normal.blocks:
            kind = blk.get("type")
            if kind in ("text", "image"):
                pending.append(blk)
                continue
            self._flush(role, pending, t)
            pending = []
            if kind == "reasoning":
                self._reasoning(blk, t)
            elif kind == "tool_call":
                self._call(turn.agent, blk, t)
            elif kind == "tool_result":
                self._result(blk, t)
            else:
                self.report.drop("content:other")
        self._flush(role, pending, t)

    def _flush(self, role: str, blocks: list[dict], t: int | None) -> None:
        if not blocks:
            return
        self.reply_end = None  # text between calls: the calls after it are not moved above it
        if role == "assistant":
            texts = [b.get("text") or "" for b in blocks if b.get("type") == "text"]
            if any(b.get("type") == "image" for b in blocks):
                self.report.drop("image:assistant")
            if not any(texts):
                return
            content = [{"type": "output_text", "text": x} for x in texts if x]
            self._line("response_item", {"type": "message", "role": "assistant", "content": content}, t)
            text = "\n".join(x for x in texts if x)
            self._line("event_msg", {"type": "agent_message", "message": text}, t)
            self.last_answer = text
            return
        content, images = [], []
        for b in blocks:
            if b.get("type") == "text":
                if b.get("text"):
                    content.append({"type": "input_text", "text": b["text"]})
            else:
                url = _data_url(b)
                if url is None:
                    self.report.drop("image:unreadable")
                    continue
                content.append({"type": "input_image", "image_url": url})
                images.append(url)
                self.report.convert("image")
        if not content:
            return
        if role != "user":
            # Text beside tool results, or a summary: the model sees it, but it opens no turn.
            if role == "system":
                self.report.convert("system:as_user")
            self._line("response_item", {"type": "message", "role": "user", "content": content}, t)
            return
        self._close_task(t)
        self.turns += 1
        self.open_turn = str(uuid.uuid5(uuid.NAMESPACE_URL, f"opal:{self.req.session_id}:turn:{self.turns}"))
        self.last_answer = None
        self._line("event_msg", {"type": "task_started", "turn_id": self.open_turn, "model_context_window": None}, t)
        self._line("response_item", {"type": "message", "role": "user", "content": content}, t)
        message = "\n".join(c["text"] for c in content if c["type"] == "input_text")
        self._line("event_msg", {"type": "user_message", "message": message, "images": images,
                                 "local_images": [], "text_elements": []}, t)

    def _close_task(self, t: int | None) -> None:
        if self.open_turn is None:
            return
        if self.open_turn != "native":
            self._line("event_msg", {"type": "task_complete", "turn_id": self.open_turn,
                                     "last_agent_message": self.last_answer}, t)
        self.open_turn = None

    def _reasoning(self, blk: dict, t: int | None) -> None:
        text = reasoning_as_text(self.req, blk, self.report)
        if text is not None:
            # UI only: a reasoning item would be sent to the API, which cannot verify foreign reasoning.
            self._line("event_msg", {"type": "agent_reasoning", "text": text}, t)

    def _call(self, agent: str, blk: dict, t: int | None) -> None:
        orig = blk.get("id")
        name, inp, mapped = tools.convert_call(agent, AGENT, str(blk.get("name") or "tool"), blk.get("input"),
                                               self.req.cwd)
        self.report.convert("tool_call:mapped" if mapped else "tool_call:kept")
        call_id = orig if is_str(orig) else f"call_opal_{len(self.calls) + 1}"
        if call_id in self.calls:
            call_id = f"{call_id}_{len(self.calls) + 1}"
        if is_str(orig):
            self.id_map[orig] = call_id
        else:
            self.anon.append(call_id)
        if name == "apply_patch" and isinstance(inp, str):
            payload = {"type": "custom_tool_call", "status": "completed", "call_id": call_id, "name": name, "input": inp}
        else:
            payload = {"type": "function_call", "name": name, "arguments": _args_string(inp), "call_id": call_id}
        line = {"timestamp": iso(t if t is not None else self.req.now_ms), "type": "response_item", "payload": payload}
        at = self.reply_end
        if at is None or at > len(self.lines):
            at = len(self.lines)
        # A reply's next call goes after its earlier calls, before the outputs written
        # since: Codex writes a turn's parallel calls as consecutive items, then outputs.
        self.lines.insert(at, line)
        for cid, pos in self.call_pos.items():
            if pos >= at:
                self.call_pos[cid] = pos + 1
        self.calls[call_id] = payload["type"]
        self.call_pos[call_id] = at
        self.answered.discard(call_id)
        self.reply_end = at + 1 if self.reply is not None else None

    def _result(self, blk: dict, t: int | None) -> None:
        orig = blk.get("call_id")
        if is_str(orig):
            call_id = self.id_map.get(orig, orig)
        else:
            call_id = self.anon.popleft() if self.anon else None
        if call_id is None or call_id not in self.calls:
            self.report.drop("tool_result:orphan")
            return
        out = blk.get("output")
        if isinstance(out, list):
            items, has_image = [], False
            for b in out:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "text":
                    items.append({"type": "input_text", "text": b.get("text") or ""})
                elif b.get("type") == "image" and _data_url(b) is not None:
                    items.append({"type": "input_image", "image_url": _data_url(b)})
                    has_image = True
                    self.report.convert("image")
                else:
                    self.report.drop("content:other")
            value: Any = items if has_image else "\n".join(i["text"] for i in items)
        else:
            value = out if isinstance(out, str) else ("" if out is None else jsonl.dumps(out).decode("utf-8", "surrogatepass"))
        self._write_output(call_id, value, t)

    def _write_output(self, call_id: str, value: Any, t: int | None, at: int | None = None) -> None:
        kind = "custom_tool_call_output" if self.calls.get(call_id) == "custom_tool_call" else "function_call_output"
        line = {"timestamp": iso(t if t is not None else self.req.now_ms), "type": "response_item",
                "payload": {"type": kind, "call_id": call_id, "output": value}}
        if at is None:
            self.lines.append(line)
        else:
            self.lines.insert(at, line)
        self.answered.add(call_id)

    def _synthesize_dangling(self) -> None:
        # Right after each unanswered call, latest first so earlier positions stay valid.
        # Codex's own unanswered calls stay as it wrote them: on resume it answers them
        # itself ("aborted"), so an output written here would be a record it never wrote.
        left = sorted(cid for cid in self.call_pos if cid not in self.answered and cid in self.native_calls)
        if left:
            self.report.note(f"{count(len(left), 'Codex tool call')} without an output {noun(len(left), 'is', 'are')} written back as the source has "
                             "them; codex answers them as aborted when it resumes")
        dangling = sorted((pos, cid) for cid, pos in self.call_pos.items()
                          if cid not in self.answered and cid not in self.native_calls)
        if dangling:
            self.aligned = min(self.aligned, dangling[0][0] + 1)  # lines after it move down
        for pos, cid in reversed(dangling):
            line = self.lines[pos]
            ts = line.get("timestamp") if isinstance(line, dict) else None
            self._write_output(cid, DANGLING_OUTPUT, parse_time(ts), at=pos + 1)
            self.report.convert("tool_result:synthesized")


def _args_string(inp: Any) -> str:
    """Function-call arguments: always a string holding a JSON object."""
    if isinstance(inp, str):
        try:
            if isinstance(json.loads(inp), dict):
                return inp
        except (ValueError, RecursionError):
            pass
        return jsonl.dumps({"input": inp}).decode("utf-8", "surrogatepass")
    if inp is None:
        return "{}"
    value = inp if isinstance(inp, dict) else {"input": inp}
    return jsonl.dumps(value).decode("utf-8", "surrogatepass")


def _data_url(blk: Mapping[str, Any]) -> str | None:
    if is_str(blk.get("data")):
        return f"data:{blk.get('media_type') or 'image/png'};base64,{blk['data']}"
    url = blk.get("url")
    return url if is_str(url) else None


# ----------------------------------------------------------------------- tool outputs


def replace_tool_outputs(turn: Turn, replace) -> Turn | None:
    """A tool-output record with its output texts rewritten (``opal trim``), or None."""
    rec = turn.record if turn.has_record else None
    p = rec.get("payload") if isinstance(rec, dict) and rec.get("type") == "response_item" else None
    if not isinstance(p, dict) or p.get("type") not in ("function_call_output", "custom_tool_call_output") \
            or not isinstance(p.get("call_id"), str):
        return None
    cid, out = p["call_id"], p.get("output")

    def text_of(item: Any) -> Any:
        if isinstance(item, dict) and item.get("type") in ("input_text", "output_text") and isinstance(item.get("text"), str):
            new = replace(cid, item["text"])
            return item if new is None else dict(item, text=new)
        return item

    if isinstance(out, str):
        new_out: Any = replace(cid, out)
        new_out = out if new_out is None else new_out
    elif isinstance(out, list):
        new_out = [text_of(x) for x in out]
    elif isinstance(out, dict) and "type" in out:
        new_out = text_of(out)
    elif isinstance(out, dict) and isinstance(out.get("content"), str):
        new = replace(cid, out["content"])
        new_out = out if new is None else dict(out, content=new)
    else:
        return None
    if new_out == out:
        return None
    return Turn.from_record(AGENT, dict(rec, payload=dict(p, output=new_out)))

"""Writing Claude Code sessions: the export half of the Claude Code adapter.

:func:`export` turns an :class:`~.base.ExportRequest` into one
``<config>/projects/<project-key>/<session-id>.jsonl`` file that ``claude --resume``
accepts (formats.md §2.7, §2.8):

* Claude Code records go back as they were, with three repairs: the new session id,
  the target folder in ``cwd``, and a valid ``parentUuid`` chain. A record whose
  parent was not written (the state was rewound, or a range was dropped or
  squashed), or that follows records opal inserted, is relinked to the nearest
  written record of the main chain. ``last-prompt`` records that name a record not
  written are left out, and a final one names the last conversational record, so
  Claude resumes the right leaf.
* Records of other agents and opal-authored turns are written from their
  normalized view as new records with full envelopes, chained after the previous
  record: prompts, answers, ``tool_use`` blocks (mapped to Claude's own tools where
  :func:`.tools.convert_call` knows a counterpart) and their ``tool_result`` lines
  directly after them.
* Across both, every tool call gets exactly one result in the user line after it
  (a synthesized error result when none was recorded) and results whose call is
  not written are left out, as the Anthropic API requires.

Everything converted or left out is counted in the result's
:class:`~.base.LossReport`. :func:`replace_tool_outputs` rewrites the tool outputs
of one Claude record in place (``opal trim``).

Pure: no store, no environment reads beyond ``req.env``, no printing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections import deque
from typing import Any, Callable, Mapping

from opalgit import jsonl
from opalgit.agents import tools
from opalgit.agents.base import ExportRequest, ExportResult, LossReport, iso, reasoning_as_text
from opalgit.agents.claude.files import AGENT, config_dir, project_key
from opalgit.errors import UsageError
from opalgit.history.model import Normal, Turn
from opalgit.plural import count, noun

__all__ = ["CLAUDE_VERSION", "DANGLING_OUTPUT", "DEFAULT_MODEL", "export", "replace_tool_outputs"]

#: The Claude Code version written into new records (the one the tests drive).
CLAUDE_VERSION = "2.1.328"
#: The model named in new assistant records when the source session has no Claude model.
DEFAULT_MODEL = "claude-opus-4-5"
#: The result given to a tool call that has none in the exported history.
DANGLING_OUTPUT = "[opal: this tool call has no recorded result]"

_TOOL_ID = re.compile(r"^[A-Za-z0-9_-]+$")  # what the Anthropic API accepts as a tool_use id
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
#: Record types that make up the main chain (progress records hang off it).
_CHAIN_TYPES = frozenset({"user", "assistant", "attachment", "system"})
_NUMBERED = re.compile(r"^ *\d+\t")  # a line of Claude's Read output ("    12\tcode")


def _is_id(v: Any) -> bool:
    return isinstance(v, str) and v != ""


# ------------------------------------------------------------------------------ export


def export(req: ExportRequest) -> ExportResult:
    """The session file that makes ``req.turns`` a resumable Claude Code session."""
    conf = config_dir(req.env)
    if conf is None:
        raise UsageError("cannot tell where Claude Code keeps its sessions", hint="set CLAUDE_CONFIG_DIR or HOME")
    sid = req.session_id
    if not sid or sid in (".", "..") or any(c in sid for c in "/\\\x00"):
        raise UsageError(f"{sid!r} cannot be a Claude Code session id", hint="use a UUID")
    path = os.path.join(conf, "projects", project_key(req.cwd), sid + ".jsonl")
    writer = _Writer(req)
    body = writer.run()
    # The session file first: files[0] is what a checkpoint of the export remembers.
    side = _side_files(req, path[: -len(".jsonl")], writer.report)
    files = [(path, body)] + side
    # Said once they are written (a dry run writes nothing and lists them as it would).
    done = (f"{count(len(side), 'side-folder file')} written back under {os.path.basename(path[: -len('.jsonl')])}/ "
            f"({', '.join(sorted({r.split('/')[0] for r in req.side}))})") if side else None
    return ExportResult(files=files, session_id=sid, resume=["claude", "--resume", sid], report=writer.report,
                        prefix=writer.aligned, post=[lambda: done] if done else [])


def _side_files(req: ExportRequest, folder: str, report: LossReport) -> list[tuple[str, bytes]]:
    """The source session's side folders (subagents, tool results ...) under the new
    session's folder, the old session id in them replaced by the new one, as the
    session file's records are."""
    src = req.session
    old = src.id.encode() if src is not None and src.agent == AGENT and src.id else None
    out = []
    for rel, data in req.side.items():
        parts = rel.split("/")
        if any(p in ("", ".", "..") for p in parts):
            report.drop("side_file:unsafe_path")  # never written outside the session's folder
            continue
        if old is not None and old != req.session_id.encode():
            data = data.replace(old, req.session_id.encode())
        out.append((os.path.join(folder, *parts), data))
    return out


class _Writer:
    """Builds one Claude Code transcript from an :class:`ExportRequest`."""

    def __init__(self, req: ExportRequest) -> None:
        self.req = req
        self.report = LossReport()
        src = req.session
        model = src.model if src is not None and src.agent == AGENT else None
        self.model = model if _is_id(model) and model != "<synthetic>" else DEFAULT_MODEL
        self.lines: list[bytes | dict] = []
        self.made = 0  # records opal created, for their uuids

        # The chain.
        self.written: set[str] = set()  # uuids of every record written
        self.tip: str | None = None  # the last written record of the main chain
        self.inserted = False  # opal wrote records since the last Claude record of the main chain
        self.leaf: str | None = None  # the last written user/assistant record of the main chain
        self.prompts: list[tuple[int, Any]] = []  # Claude's last-prompt records: (line index, leafUuid)
        self.prompt_text: str | None = None

        # Tool calls and results.
        self.calls: set[str] = set()  # every tool_use id written
        self.pending: dict[str, None] = {}  # calls of the open assistant message without a result yet
        self.open_msg: str | None = None  # message.id of the open assistant message
        self.results: list[dict] = []  # tool_result blocks waiting for their user line
        self.extras: list[dict] = []  # text or images that ride in that line, after the results
        self.results_time: int | None = None
        self.id_map: dict[str, str] = {}  # foreign call id -> tool_use id written
        self.anon: deque[str] = deque()  # ids minted for foreign calls that had none
        self.pos = 0  # index in req.turns of the turn being written
        self.pulled: set[tuple[int, int]] = set()  # (turn, block) of results written ahead of their place

        # The assistant message being assembled from foreign blocks.
        self.reply: list[dict] = []
        self.reply_time: int | None = None

        # For the report.
        self.sid_changed = False
        self.old_sids: dict[str, None] = {}  # session ids the records carried (as a set, in order)
        self.old_cwds: dict[str, None] = {}
        self.relinked = 0
        self.copies = 0  # lines repeating a written uuid (1.0.x continuation copies)
        self.roots = 0  # later lines the agent wrote with parentUuid null, written so
        self.entrypoints: dict[str, None] = {}
        src_cwd = src.cwd if src is not None and src.agent == AGENT else None
        self.src_cwd = src_cwd if _is_id(src_cwd) else None

    # -- the whole file -----------------------------------------------------------------

    def run(self) -> bytes:
        self.aligned = 0  # the first ``aligned`` lines are the first records, one for one
        for i, et in enumerate(self.req.turns):
            self.pos = i
            turn = et.turn
            if turn.agent == AGENT and (turn.has_record or isinstance(turn.line, bytes)):
                self._native(turn)
            else:
                self._foreign(turn.agent, et.normal)
            if self.aligned == i and len(self.lines) == i + 1 and turn.agent == AGENT:
                self.aligned = i + 1
        self._close()
        self._final_prompt()
        self._notes()
        return b"".join((ln if isinstance(ln, bytes) else jsonl.dumps(ln)) + b"\n" for ln in self.lines)

    def _final_prompt(self) -> None:
        """Leave out last-prompts naming records not written; make the newest name the leaf."""
        stale = {i for i, leaf in self.prompts if _is_id(leaf) and leaf not in self.written}
        if stale:
            self.report.drop("last-prompt:stale", len(stale))
            self.lines = [ln for i, ln in enumerate(self.lines) if i not in stale]
            self.aligned = min(self.aligned, min(stale))
        kept = [leaf for i, leaf in self.prompts if i not in stale and _is_id(leaf)]
        if self.leaf is None or (kept and kept[-1] == self.leaf):
            return
        self.lines.append({"type": "last-prompt", "lastPrompt": self.prompt_text or "", "leafUuid": self.leaf,
                           "sessionId": self.req.session_id})
        self.report.convert("last-prompt:added")

    def _notes(self) -> None:
        rep = self.report
        if self.sid_changed:
            rep.convert("session_id:rewritten")
        if len(self.old_sids) > 1:
            # Lines of several sessions (1.0.x continuation copies, a file put together by
            # hand) become lines of one: what told them apart is gone.
            rep.convert("session_id:merged", len(self.old_sids) - 1)
            rep.note(f"the records carried {len(self.old_sids)} session ids; the export gives them all the new one")
        if self.relinked:
            rep.convert("parent:relinked", self.relinked)
        if self.roots:
            rep.note(f"{count(self.roots, 'line')} after the first begin a chain of their own (parentUuid null, as the agent "
                     "wrote them): claude --resume follows the chain of the last one only")
        if self.copies:
            rep.note(f"{count(self.copies, 'line')} {noun(self.copies, 'repeats', 'repeat')} the uuid of an earlier one (Claude Code 1.0.x copies the "
                     "earlier session into a continuation): written back as the agent wrote them")
        if self.entrypoints:
            rep.convert("entrypoint:cli", sum(1 for _ in self.entrypoints))
            rep.note(f"entrypoint {', '.join(self.entrypoints)} written as cli: Claude Code's /resume picker hides "
                     "sessions an SDK started")
        if self.old_cwds:
            rep.convert("cwd:rewritten")
            old = ", ".join(self.old_cwds)
            rep.note(f"the folder changed from {old} to {self.req.cwd}: records now name the new folder; "
                     "earlier messages and tool calls still mention the old one")
        if self.leaf is None:
            rep.note("the exported session holds no conversation; claude will not find anything to resume")

    # -- Claude Code records -------------------------------------------------------------

    def _native(self, turn: Turn) -> None:
        raw: bytes | None = None
        if turn.has_record:
            rec = turn.record
        else:
            raw = turn.line  # type: ignore[assignment]
            try:
                rec = jsonl.parse_kept(raw) if raw.strip() else None  # type: ignore[union-attr]
            except jsonl.ParseFailure:
                rec = None
        if not isinstance(rec, dict):
            # Not a record Claude reads (a blank or broken line): it skips it, so write it back as it was.
            self._flush_reply()
            self.lines.append(raw if raw is not None else jsonl.dumps(rec))
            return

        kind = rec.get("type")
        if kind == "last-prompt":
            # Claude may write it before the record it names: judged once everything is written.
            self._flush_reply()
            self.prompts.append((len(self.lines), rec.get("leafUuid")))
            self._put(self._envelope_fix(rec), raw, rec)
            return

        new = self._envelope_fix(rec)
        u = rec.get("uuid")
        main = _is_id(u) and rec.get("isSidechain") is not True
        if main and u in self.written:
            # A later line under a uuid already written: Claude Code 1.0.x copies the earlier
            # session's lines into a continuation, and its map keeps the later copy. It is the
            # agent's own line, so it goes back as it was, outside the pairing of calls.
            self._flush_reply()
            self._flush_results()
            self._put(new, raw, rec)
            self.copies += 1
            return
        if not main:
            self._flush_reply()
            self._flush_results()
            self._put(new, raw, rec)
            if _is_id(u):
                self.written.add(u)
            return

        # Pairing first: closing an exchange may write a synthesized result, which moves the tip.
        msg = rec.get("message") if isinstance(rec.get("message"), dict) else {}
        content = msg.get("content")
        if not self._pair(kind, msg, content, new):
            return  # nothing left that answers a call: leave the record out, relink its children
        self._link(new, kind)
        self._put(new, raw, rec)
        self._written(u, kind, rec, msg, content)

    def _pair(self, kind: Any, msg: dict, content: Any, new: dict) -> bool:
        """Close or continue the open exchange before a main-chain record; a user record of
        tool results loses the results whose call was not written. False: nothing of
        it answers a call any more, and it is left out."""
        if kind == "assistant":
            mid = msg.get("id")
            if not (_is_id(mid) and mid == self.open_msg and not self.results):
                self._close()
            else:
                self._flush_reply()
        elif kind == "user":
            blocks = content if isinstance(content, list) else []
            if not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
                self._close()
                return True
            self._flush_reply()
            self._flush_results()
            kept, orphans = [], 0
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    cid = b.get("tool_use_id")
                    if _is_id(cid):  # a result without an id cannot be judged: leave it to Claude
                        if cid not in self.pending:
                            orphans += 1
                            continue
                        del self.pending[cid]
                kept.append(b)
            if orphans:
                self.report.drop("tool_result:orphan", orphans)
                if not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in kept):
                    return False
                new["message"] = dict(msg, content=kept)
        else:
            # Attachments and the like: Claude may send them as user content, which must not
            # come between a tool_use and its results.
            self._flush_reply()
            self._flush_results()
        return True

    def _written(self, u: str, kind: Any, rec: dict, msg: dict, content: Any) -> None:
        """What a written main-chain record changes: the chain's tip and leaf, the calls
        now open, the prompt being answered."""
        self.written.add(u)
        if kind in _CHAIN_TYPES:
            self.tip = u
            self.inserted = False
        if kind in ("user", "assistant"):
            self.leaf = u
        if kind == "assistant":
            self.open_msg = msg.get("id") if _is_id(msg.get("id")) else None
            for b in content if isinstance(content, list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_use" and _is_id(b.get("id")):
                    self.calls.add(b["id"])
                    self.pending[b["id"]] = None
        elif kind == "user" and rec.get("isMeta") is not True and rec.get("isCompactSummary") is not True \
                and not any(isinstance(b, dict) and b.get("type") == "tool_result"
                            for b in (content if isinstance(content, list) else [])):
            self.prompt_text = _prompt_text(content) or self.prompt_text

    def _envelope_fix(self, rec: dict) -> dict:
        """A copy with the new session id and the target folder."""
        new = dict(rec)
        if "sessionId" in new and new["sessionId"] != self.req.session_id:
            self.old_sids[new["sessionId"]] = None
            new["sessionId"] = self.req.session_id
            self.sid_changed = True
        cwd = new.get("cwd")
        if isinstance(cwd, str) and cwd != self.req.cwd:
            self.old_cwds[cwd] = None
            new["cwd"] = self._relocated(cwd)
        entry = new.get("entrypoint")
        if isinstance(entry, str) and entry.startswith("sdk-"):
            self.entrypoints[entry] = None
            new["entrypoint"] = "cli"
        return new

    def _relocated(self, cwd: str) -> str:
        """The target folder for a record's ``cwd``: a subfolder of the session's folder
        (the agent ran ``cd``) stays that subfolder of the target."""
        base = self.src_cwd
        if base is not None and base != "/" and cwd.startswith(base.rstrip("/") + "/"):
            return self.req.cwd.rstrip("/") + "/" + cwd[len(base.rstrip("/")) + 1:]
        return self.req.cwd

    def _put(self, new: dict, raw: bytes | None, rec: dict) -> None:
        # A line kept as bytes (JSON that does not re-render exactly) stays bytes when nothing changed.
        self.lines.append(raw if raw is not None and new == rec else new)

    def _link(self, new: dict, kind: Any) -> None:
        """Keep the record on a chain that reaches every earlier written record."""
        if "parentUuid" not in new:
            return  # an old record: its parent is the record before it in the file
        parent = new["parentUuid"]
        if parent is None:
            if kind == "system" and new.get("subtype") == "compact_boundary":
                # The boundary cuts the chain on purpose; its logical parent must still exist.
                lp = new.get("logicalParentUuid")
                if _is_id(lp) and lp not in self.written:
                    new["logicalParentUuid"] = self.tip
                    self.relinked += 1
            elif kind in ("user", "assistant") and self.leaf is not None and self.inserted:
                # A root after records opal wrote would hide them from Claude's walk; a root
                # the agent itself wrote (a 1.0.x continuation) stays as it wrote it.
                new["parentUuid"] = self.tip
                self.relinked += 1
            elif kind in ("user", "assistant") and self.leaf is not None:
                self.roots += 1
            return
        if (parent not in self.written or self.inserted) and parent != self.tip:
            new["parentUuid"] = self.tip
            self.relinked += 1

    # -- records of other agents ---------------------------------------------------------

    def _foreign(self, agent: str, normal: Normal) -> None:
        role, t = normal.role, normal.time
        if role == "meta":
            self.report.drop(f"record:meta:{agent}")
            return
        if role == "system":
            texts = [b.get("text") for b in normal.blocks if b.get("type") == "text" and _is_id(b.get("text"))]
            if not texts:
                self.report.drop("record:system")
                return
            self._close()
            marker = f"[opal: summary of the earlier conversation, from {agent}]\n\n"
            self._user_line([{"type": "text", "text": marker + "\n\n".join(texts)}], t)
            self.report.convert("system:as_user")
            return
        if role == "tool":
            # Text beside tool results rides in their user line, after them.
            extra = [b for b in normal.blocks if b.get("type") in ("text", "image")]
            for bi, blk in enumerate(normal.blocks):
                if blk.get("type") not in ("text", "image") and (self.pos, bi) not in self.pulled:
                    self._block(agent, blk, t)
            if extra:
                content = self._user_content(extra)
                if self.results:
                    self.extras += content
                else:
                    self._close()
                    self._user_line(content, t)
            return
        run: list[dict] = []  # user content waiting for its line
        for bi, blk in enumerate(normal.blocks):
            if (self.pos, bi) in self.pulled:
                continue  # a result already written with the reply it answers
            if blk.get("type") in ("text", "image") and role == "user":
                run.append(blk)
                continue
            if run:
                self._close()
                self._user_line(self._user_content(run), t)
                run = []
            self._block(agent, blk, t)
        if run:
            self._close()
            self._user_line(self._user_content(run), t)

    def _block(self, agent: str, blk: dict, t: int | None) -> None:
        """One block of an assistant's response (or a result), whatever the turn's role."""
        kind = blk.get("type")
        if kind == "text":
            if _is_id(blk.get("text")):
                self._reply_block({"type": "text", "text": blk["text"]}, t)
        elif kind == "image":
            self.report.drop("image:assistant")
        elif kind == "reasoning":
            self._reasoning(agent, blk, t)
        elif kind == "tool_call":
            self._call(agent, blk, t)
        elif kind == "tool_result":
            self._result(blk, t)
        else:
            self.report.drop("content:other")

    def _user_content(self, blocks: list[dict]) -> list[dict]:
        out: list[dict] = []
        for b in blocks:
            if b.get("type") == "text":
                if _is_id(b.get("text")):
                    out.append({"type": "text", "text": b["text"]})
            else:
                img = self._image(b)
                if img is not None:
                    out.append(img)
        return out

    def _image(self, b: Mapping[str, Any]) -> dict | None:
        if _is_id(b.get("data")):
            self.report.convert("image")
            return {"type": "image", "source": {"type": "base64", "media_type": b.get("media_type") or "image/png",
                                                "data": b["data"]}}
        if _is_id(b.get("url")):
            self.report.convert("image")
            return {"type": "image", "source": {"type": "url", "url": b["url"]}}
        self.report.drop("image:unreadable")
        return None

    def _reasoning(self, agent: str, blk: dict, t: int | None) -> None:
        text = reasoning_as_text(self.req, blk, self.report)
        if text is not None:
            # Never a thinking block: its signature would have to be Anthropic's.
            self._reply_block({"type": "text", "text": f"[reasoning from {agent}] {text}"}, t)

    def _call(self, agent: str, blk: dict, t: int | None) -> None:
        orig = blk.get("id")
        name, inp, mapped = tools.convert_call(agent, AGENT, str(blk.get("name") or "tool"), blk.get("input"),
                                               self.req.cwd)
        self.report.convert("tool_call:mapped" if mapped else "tool_call:kept")
        name = str(name)
        if not _TOOL_NAME.match(name):
            name = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:128] or "tool"
            self.report.convert("tool_call:renamed")
        if _is_id(orig) and _TOOL_ID.match(orig):
            call_id = orig
        else:
            seed = orig if _is_id(orig) else f"{self.req.session_id}:{len(self.calls)}"
            call_id = "toolu_opal_" + hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        base, n = call_id, 2
        while call_id in self.calls:
            call_id = f"{base}_{n}"
            n += 1
        self.calls.add(call_id)
        if _is_id(orig):
            self.id_map[orig] = call_id
        else:
            self.anon.append(call_id)
        self._reply_block({"type": "tool_use", "id": call_id, "name": name, "input": _input_object(inp)}, t)

    def _result(self, blk: dict, t: int | None) -> None:
        self._flush_reply()
        orig = blk.get("call_id")
        if _is_id(orig):
            call_id: str | None = self.id_map.get(orig, orig)
        else:
            call_id = self.anon.popleft() if self.anon else None
        if call_id is None or call_id not in self.pending:
            self.report.drop("tool_result:orphan")
            return
        del self.pending[call_id]
        if not self.results:
            self.results_time = t
        self.results.append({"type": "tool_result", "tool_use_id": call_id, "content": self._result_content(blk.get("output")),
                             "is_error": blk.get("is_error") is True})

    def _result_content(self, out: Any) -> str | list:
        if isinstance(out, str):
            return out
        if out is None:
            return ""
        if not isinstance(out, list):
            return json.dumps(out, ensure_ascii=False)
        parts: list[dict] = []
        for b in out:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                if _is_id(b.get("text")):
                    parts.append({"type": "text", "text": b["text"]})
            elif b.get("type") == "image":
                img = self._image(b)
                if img is not None:
                    parts.append(img)
            else:
                self.report.drop("content:other")
        if all(p["type"] == "text" for p in parts):
            return "\n".join(p["text"] for p in parts)
        return parts

    # -- assembling lines ----------------------------------------------------------------

    def _reply_block(self, block: dict, t: int | None) -> None:
        if self.reply and block["type"] == "text" and self.reply[-1]["type"] == "tool_use":
            self._close()  # text after a call belongs to the next response, as Claude writes it
        if not self.reply:
            if self.pending:
                self._pull_results()
            if self.pending or self.results:
                self._close()  # a new response: the previous one's calls are answered first
            self.reply_time = t
        self.reply.append(block)

    def _pull_results(self) -> None:
        """Bring forward the results of the open reply's calls that the source records
        later, after other calls (Codex runs calls side by side and records each output
        when it ends): Claude needs every result of a reply in the user line right after
        it, and the real result is better than a synthesized one."""
        turns = self.req.turns
        for j in range(self.pos + 1, len(turns)):
            if not self.pending:
                return
            et = turns[j]
            if et.turn.agent == AGENT and (et.turn.has_record or isinstance(et.turn.line, bytes)):
                continue  # Claude's own records keep their place
            for bi, blk in enumerate(et.normal.blocks):
                orig = blk.get("call_id")
                if blk.get("type") != "tool_result" or not _is_id(orig) or (j, bi) in self.pulled:
                    continue
                if self.id_map.get(orig, orig) in self.pending:
                    self._result(blk, et.normal.time)
                    self.pulled.add((j, bi))
                    self.report.convert("tool_result:moved")

    def _flush_reply(self) -> None:
        if not self.reply:
            return
        blocks, self.reply = self.reply, []
        mid = "msg_opal_" + uuid.uuid5(uuid.NAMESPACE_URL, f"opal:{self.req.session_id}:msg:{self.made}").hex
        calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
        message = {"id": mid, "type": "message", "role": "assistant", "model": self.model, "content": blocks,
                   "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
                   "usage": {"input_tokens": 0, "output_tokens": 0}}
        self._emit("assistant", message, self.reply_time)
        self.open_msg = mid
        for c in calls:
            self.pending[c] = None

    def _flush_results(self) -> None:
        if not self.results:
            return
        content = self.results + self.extras
        self.results, self.extras = [], []
        self._emit("user", {"role": "user", "content": content}, self.results_time)

    def _close(self) -> None:
        """End the open exchange: every call of the open message gets its result line."""
        self._flush_reply()
        if self.pending:
            if not self.results:
                self.results_time = None
            self.results += [{"type": "tool_result", "tool_use_id": c, "content": DANGLING_OUTPUT, "is_error": True}
                             for c in self.pending]
            self.report.convert("tool_result:synthesized", len(self.pending))
            self.pending.clear()
        self._flush_results()
        self.open_msg = None

    def _user_line(self, content: list[dict], t: int | None) -> None:
        if not content:
            return
        value: Any = content[0]["text"] if len(content) == 1 and content[0]["type"] == "text" else content
        self._emit("user", {"role": "user", "content": value}, t)
        text = _prompt_text(value)
        if text:
            self.prompt_text = text

    def _emit(self, kind: str, message: dict, t: int | None) -> None:
        u = str(uuid.uuid5(uuid.NAMESPACE_URL, f"opal:{self.req.session_id}:record:{self.made}"))
        self.made += 1
        self.lines.append({
            "parentUuid": self.tip, "isSidechain": False, "type": kind, "message": message, "uuid": u,
            "timestamp": iso(t if t is not None else self.req.now_ms), "userType": "external",
            "cwd": self.req.cwd, "sessionId": self.req.session_id, "version": CLAUDE_VERSION,
        })
        self.written.add(u)
        self.tip = self.leaf = u
        self.inserted = True


def _input_object(inp: Any) -> dict:
    """A tool_use input, which Anthropic requires to be a JSON object."""
    if isinstance(inp, dict):
        return inp
    if isinstance(inp, str):
        try:
            value = json.loads(inp)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
    return {} if inp is None else {"input": inp}


def _prompt_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
                         and isinstance(b.get("text"), str))
    return ""


# ----------------------------------------------------------------------- tool outputs


def replace_tool_outputs(turn: Turn, replace: Callable[[str, str], str | None]) -> Turn | None:
    """A copy of a Claude tool-result record with outputs rewritten, or None.

    Text of every ``tool_result`` (a string, or its text blocks) goes through
    ``replace(tool_use_id, text)``; the record's ``toolUseResult`` (what Claude's UI
    shows) is shrunk the same way where it holds the old text.
    """
    if turn.agent != AGENT:
        return None
    rec: Any = turn.record if turn.has_record else None
    if rec is None and isinstance(turn.line, bytes):
        try:
            rec = jsonl.parse_kept(turn.line)
        except jsonl.ParseFailure:
            return None
    if not isinstance(rec, dict) or rec.get("type") != "user" or not isinstance(rec.get("message"), dict):
        return None
    msg = rec["message"]
    content = msg.get("content")
    if not isinstance(content, list):
        return None
    swaps: list[tuple[str, str]] = []
    changed = False
    out: list[Any] = []
    for b in content:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            cid = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else ""
            c = b.get("content")
            if isinstance(c, str):
                new = replace(cid, c)
                if isinstance(new, str) and new != c:
                    b = dict(b, content=new)
                    swaps.append((c, new))
                    changed = True
            elif isinstance(c, list):
                parts, touched = [], False
                for p in c:
                    if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
                        new = replace(cid, p["text"])
                        if isinstance(new, str) and new != p["text"]:
                            swaps.append((p["text"], new))
                            p = dict(p, text=new)
                            touched = True
                    parts.append(p)
                if touched:
                    b = dict(b, content=parts)
                    changed = True
        out.append(b)
    if not changed:
        return None
    new_rec = dict(rec)
    new_rec["message"] = dict(msg, content=out)
    if "toolUseResult" in new_rec:
        new_rec["toolUseResult"] = _shrink(new_rec["toolUseResult"], swaps)
    return Turn.from_record(AGENT, new_rec)


def _swap(text: str, swaps: list[tuple[str, str]]) -> str:
    for old, new in swaps:
        if text == old:
            return new
        if old and old in text:
            return text.replace(old, new, 1)
    return text


def _unnumbered(text: str) -> str | None:
    """Read output without its line-number prefixes, or None when it is not Read output."""
    lines = text.split("\n")
    if not lines or not all(_NUMBERED.match(ln) for ln in lines if ln):
        return None
    return "\n".join(_NUMBERED.sub("", ln, count=1) for ln in lines)


def _shrink(value: Any, swaps: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return _swap(value, swaps)
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for key in ("stdout", "content"):
        if isinstance(out.get(key), str):
            out[key] = _swap(out[key], swaps)
    f = out.get("file")
    if isinstance(f, dict) and isinstance(f.get("content"), str):
        body = f["content"]
        new = _swap(body, swaps)
        if new == body:
            # Read: the model saw numbered lines, the UI keeps the file's own text.
            for old, rep in swaps:
                plain = _unnumbered(old)
                if plain is not None and plain and (plain == body or plain.rstrip("\n") == body.rstrip("\n")):
                    new = "\n".join(_NUMBERED.sub("", ln, count=1) for ln in rep.split("\n"))
                    break
        if new != body:
            out["file"] = dict(f, content=new)
    return out

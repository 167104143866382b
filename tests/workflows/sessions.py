"""Real agent session files for the workflow tests, and an agent that keeps writing them.

Each session starts as a file a real, pinned client wrote (tests/fixtures/*/generated/
structures: parallel tool calls, a compaction), moved to the test's project folder as a
user moving a session would (the folder path inside is replaced). It then grows the way
the client grows it: every new turn is made of the client's own records of the same
kind (a prompt, a reply with several tool calls at once, their results in another
order, a final reply), copied with fresh ids, so the shapes stay the client's.

What a file stands for, turn by turn, is read back through the adapter that ``opal
commit`` uses (:func:`read_views`): the turn ids a commit of the file should store.
"""

from __future__ import annotations

import copy
import json
import os
import uuid
from dataclasses import dataclass, field

from opalgit import agents as adapters
from opalgit.agents.claude.files import project_key
from opalgit.history.states import _items
from tests.conftest import FIXTURES

CLAUDE_SOURCES = {
    "parallel": os.path.join(FIXTURES, "claude", "generated", "structures", "parallel",
                             "9c1a0cf1-b5ef-4382-8774-15ac3cd697de.jsonl"),
    "compact": os.path.join(FIXTURES, "claude", "generated", "structures", "compact",
                            "e83e679c-35b4-4162-a563-c3e1f3b400f6.jsonl"),
}
CODEX_SOURCE = os.path.join(FIXTURES, "codex", "generated", "structures", "parallel",
                            "rollout-2026-12-01T21-54-34-01a2339a-35ac-71e0-ae3f-91615f2ed736.jsonl")


def _lines(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _generated_folder(records: list[dict]) -> str:
    for rec in records:
        cwd = rec.get("cwd") or (rec.get("payload") or {}).get("cwd")
        if isinstance(cwd, str) and cwd.startswith("/tmp/opal-gen-"):
            return cwd
    raise AssertionError("the generated session names no /tmp/opal-gen- folder")


def _moved(path: str, folder: str) -> list[str]:
    """The file's lines with the folder it was made in replaced by ``folder``."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    old = _generated_folder([json.loads(x) for x in text.splitlines() if x.strip()])
    return [line + "\n" for line in text.replace(old, folder).splitlines() if line.strip()]


@dataclass
class Session:
    """One session file the test's agent writes."""

    agent: str
    id: str
    path: str
    last_uuid: str | None = None  # Claude: the record the next one hangs under
    ordinal: int = 0  # Codex: the rollout's line counter
    writes: int = 0
    exported_from: bytes | None = None  # the state an ``opal export`` wrote it from
    export_records: int = 0  # how many records that export wrote
    export_size: int = 0  # how many bytes that export wrote
    history: list[str] = field(default_factory=list)  # Claude: the uuid of each final reply, in order


class Agent:
    """Writes sessions as Claude Code and Codex CLI write them, with a clock of its own
    (each write sets the file's mtime one second later than the last, so which file
    is the newest never depends on the machine's clock)."""

    def __init__(self, home: str, project: str) -> None:
        self.home, self.project = home, project
        self.clock = 1_800_000_000
        self.serial = 0
        par = _lines(CLAUDE_SOURCES["parallel"])
        self._claude = {
            "prompt": par[39],
            "text": par[42],
            "call": par[43],
            "result": par[45],
            "reply": par[48],
        }
        cx = _lines(CODEX_SOURCE)
        self._codex = {"turn": cx[28:47]}

    # ------------------------------------------------------------------ files

    def claude_folder(self) -> str:
        return os.path.join(self.home, ".claude", "projects", project_key(self.project))

    def _touch(self, s: Session) -> None:
        self.clock += 1
        s.writes += 1
        os.utime(s.path, (self.clock, self.clock))

    def _append(self, s: Session, lines: list[str]) -> None:
        with open(s.path, "a", encoding="utf-8") as fh:
            fh.writelines(lines)
        self._touch(s)

    def new_claude(self, which: str = "parallel", lines: int | None = None) -> Session:
        """A Claude Code session of the project: the generated file (its first
        ``lines`` lines), under a fresh session id."""
        sid = str(uuid.UUID(int=0x5E55 << 96 | self._next()))
        old = os.path.basename(CLAUDE_SOURCES[which])[: -len(".jsonl")]
        text = [line.replace(old, sid) for line in _moved(CLAUDE_SOURCES[which], self.project)]
        if lines is not None:
            text = text[:lines]
        os.makedirs(self.claude_folder(), exist_ok=True)
        path = os.path.join(self.claude_folder(), sid + ".jsonl")
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(text)
        s = Session("claude", sid, path)
        self.adopt_claude(s)
        self._touch(s)
        return s

    def adopt_claude(self, s: Session) -> None:
        """Learn where a Claude file's conversation ends (its newest record with a uuid)."""
        s.history = []
        for rec in _lines(s.path):
            if rec.get("uuid") and rec.get("type") in ("user", "assistant", "system"):
                s.last_uuid = rec["uuid"]
                if (rec.get("message") or {}).get("stop_reason") == "end_turn":
                    s.history.append(rec["uuid"])

    def new_codex(self) -> Session:
        """A Codex CLI rollout of the project, where Codex keeps it."""
        records = _lines(CODEX_SOURCE)
        old = records[0]["payload"]["id"]
        sid = f"01a2339a-35ac-71e0-ae3f-{self._next():012x}"
        text = [line.replace(old, sid) for line in _moved(CODEX_SOURCE, self.project)]
        folder = os.path.join(self.home, ".codex", "sessions", "2026", "12", "01")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"rollout-2026-12-01T21-54-34-{sid}.jsonl")
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(text)
        s = Session("codex", sid, path, ordinal=len(text))
        self._touch(s)
        return s

    def _next(self) -> int:
        self.serial += 1
        return self.serial

    def _uuid(self) -> str:
        return str(uuid.UUID(int=0xA6E7 << 112 | self._next()))

    def _stamp(self) -> str:
        self.clock += 1
        import datetime

        return datetime.datetime.fromtimestamp(self.clock, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    # ------------------------------------------------------------------ growth

    def grow(self, s: Session, calls: int = 2) -> None:
        """One more turn of the conversation: a prompt, a reply that makes ``calls``
        tool calls at once, their results (in reverse order, as clients deliver
        them), and a final reply."""
        if s.agent == "claude":
            self._append(s, self._claude_turn(s, calls, parent=s.last_uuid))
        else:
            self._append(s, self._codex_turn(s, calls))

    def fork(self, s: Session, back: int) -> None:
        """What rewinding inside Claude Code does: the next prompt hangs under the
        final reply of an earlier turn, so the file holds two lines of conversation."""
        assert s.agent == "claude" and len(s.history) > back
        parent = s.history[-1 - back]
        self._append(s, self._claude_turn(s, 1, parent=parent))

    def _claude_record(self, kind: str, s: Session, parent: str | None, **change) -> dict:
        rec = copy.deepcopy(self._claude[kind])
        rec["uuid"], rec["parentUuid"], rec["sessionId"] = self._uuid(), parent, s.id
        rec["timestamp"] = self._stamp()
        rec["cwd"] = self.project
        for k, v in change.items():
            rec[k] = v
        s.last_uuid = rec["uuid"]
        return rec

    def _claude_turn(self, s: Session, calls: int, parent: str | None) -> list[str]:
        n = self._next()
        out: list[dict] = []
        prompt = self._claude_record("prompt", s, parent)
        prompt["message"] = {"role": "user", "content": f"WF{n}: check the files again and report"}
        prompt["promptId"] = self._uuid()
        out.append(prompt)
        msg_id = f"msg_wf{n:020d}"
        text = self._claude_record("text", s, prompt["uuid"])
        text["message"] = dict(text["message"], id=msg_id, content=[{"type": "text", "text": f"Checking ({n})."}])
        out.append(text)
        call_records = []
        for k in range(calls):
            call = self._claude_record("call", s, out[-1]["uuid"])
            tool_id = f"toolu_wf{n:010d}{k:02d}"
            call["message"] = dict(call["message"], id=msg_id, content=[
                {"type": "tool_use", "id": tool_id, "name": "Bash",
                 "input": {"command": f"wc -l notes{k}.txt", "description": f"count lines {n}.{k}"}}])
            out.append(call)
            call_records.append((call, tool_id))
        for call, tool_id in reversed(call_records):
            result = self._claude_record("result", s, call["uuid"])
            output = f"{3 + len(tool_id) % 5} notes.txt ({n})\n" + "line of output\n" * (n % 7) * 40
            result["message"] = {"role": "user", "content": [{"tool_use_id": tool_id, "type": "tool_result", "content": output}]}
            result["toolUseResult"] = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
            result["sourceToolAssistantUUID"] = call["uuid"]
            out.append(result)
        reply = self._claude_record("reply", s, out[-1]["uuid"])
        reply["message"] = dict(reply["message"], id=f"msg_wfr{n:018d}",
                                content=[{"type": "text", "text": f"Done: both counts reported. [wf{n}]"}])
        out.append(reply)
        s.history.append(reply["uuid"])
        # Claude Code notes the line it will resume after each turn.
        out.append({"type": "last-prompt", "lastPrompt": prompt["message"]["content"], "leafUuid": reply["uuid"], "sessionId": s.id})
        return [json.dumps(r, separators=(",", ":")) + "\n" for r in out]

    def _codex_turn(self, s: Session, calls: int) -> list[str]:
        n = self._next()
        template = self._codex["turn"]
        call_ids = [f"call_wf{n:08d}{k:02d}" for k in range(calls)]
        out: list[dict] = []
        seen_calls = 0
        for rec in template:
            rec = copy.deepcopy(rec)
            pl = rec.get("payload") or {}
            kind = pl.get("type")
            if rec.get("type") == "response_item" and kind == "function_call":
                if seen_calls >= calls:
                    continue
                pl["call_id"] = call_ids[seen_calls]
                pl["arguments"] = json.dumps({"cmd": f"wc -l notes{seen_calls}.txt"})
                seen_calls += 1
            elif rec.get("type") == "response_item" and kind == "function_call_output":
                if not call_ids:
                    continue
                pl["call_id"] = call_ids.pop()  # the results in reverse order
                pl["output"] = f"Exit code: 0\nOutput:\n{n} notes.txt\n"
            elif rec.get("type") == "response_item" and kind == "message":
                for part in pl.get("content") or ():
                    if isinstance(part, dict) and "text" in part:
                        part["text"] = f"WF{n}: {pl.get('role')} says {part['text'][:40]}"
            rec["timestamp"] = self._stamp()
            if "ordinal" in rec:
                rec["ordinal"] = s.ordinal
            s.ordinal += 1
            out.append(rec)
        return [json.dumps(r, separators=(",", ":")) + "\n" for r in out]


# ------------------------------------------------------------------ what a file stands for


@dataclass
class View:
    """One line of conversation a session file holds, as ``opal commit`` stores it."""

    name_hint: str | None
    items: list  # every record's Item: id, is_turn, summary

    @property
    def turns(self) -> tuple[bytes, ...]:
        return tuple(it.id for it in self.items if it.is_turn)


def read_views(agent: str, path: str) -> list[View]:
    """The lines of conversation of the file, read with the adapter ``opal commit`` uses."""
    res = adapters.get(agent).read(path)
    views = res.views or [None]
    out = []
    for v in views:
        items = list(_items(res.iter_records(v.indices if v is not None else None)))
        out.append(View(v.name_hint if v is not None else None, items))
    return out

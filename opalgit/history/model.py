"""The object model: turns, their normalized view, and the state a commit records.

Pure: no pygit2, no environment, no printing.

A *turn* is one record of an agent's session (one line of a Claude Code ``.jsonl``,
one rollout item of Codex, one message of Gemini CLI), stored so that it can be
written back exactly, plus a small normalized *summary* (role, kind, tool, size) that
read commands use without parsing the record. The full normalized view
(:class:`Normal`: user text, assistant text, tool calls and results, reasoning,
images) is a pure function of the record, computed by the agent's adapter on demand;
turns that opal itself writes (a merge marker, a summary) store their normalized
blocks directly.

Identity: a turn's id is the SHA-256 of its canonical bytes (see :mod:`codec`); the
summary is kept beside the turn, not inside it, so a better summary in a later opal
version never changes an id.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from opalgit import codec
from opalgit.codec import PayloadRef
from opalgit.errors import CorruptObjectError
from opalgit.history.tokens import text_units
from opalgit.structs import dataclass, field

#: Roles of the normalized model. ``meta`` records (bookkeeping, attachments,
#: progress, sidechains) are kept and written back, but are not counted as turns
#: of the conversation and are not shown by default.
ROLES = ("user", "assistant", "tool", "system", "meta")

#: Block types of the normalized model.
BLOCK_TYPES = ("text", "reasoning", "tool_call", "tool_result", "image", "other")


@dataclass
class Normal:
    """The agent-neutral view of one turn."""

    role: str
    blocks: list[dict] = field(default_factory=list)
    time: int | None = None  # milliseconds since the epoch
    label: str = ""  # short description of a meta record, e.g. "attachment:environment"

    def check(self) -> None:
        if self.role not in ROLES:
            raise CorruptObjectError(f"unknown role {self.role!r}")
        for block in self.blocks:
            if not isinstance(block, dict) or block.get("type") not in BLOCK_TYPES:
                raise CorruptObjectError(f"malformed block {block!r:.80}")


def block_chars(block: Mapping[str, Any]) -> int:
    """Units of model-visible content in a normalized block (:func:`opalgit.history.tokens.text_units`:
    what a token estimate divides by four)."""
    kind = block.get("type")
    if kind in ("text", "reasoning"):
        return text_units(block.get("text") or "")
    if kind == "tool_call":
        inp = block.get("input")
        return text_units(str(block.get("name") or "")) + text_units(inp if isinstance(inp, str) else _json_text(inp))
    if kind == "tool_result":
        out = block.get("output")
        if isinstance(out, str):
            return text_units(out)
        if isinstance(out, list):
            return sum(block_chars(b) for b in out if isinstance(b, dict))
        return 0
    if kind == "image":
        return 1600 * 4  # an image costs roughly 1,600 tokens whatever its bytes
    return 0


def _json_text(value: Any) -> str:
    """A tool call's input as the model sees it: JSON (repr() wrote True, None and
    single quotes, and missed the escapes)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def summarize(normal: Normal) -> dict:
    """The summary kept beside a turn: what ``opal log --turns`` shows."""
    kinds = [b.get("type") for b in normal.blocks]
    tools = [b.get("name") for b in normal.blocks if b.get("type") == "tool_call"]
    if "tool_call" in kinds:
        kind = "tool_call"
    elif "tool_result" in kinds:
        kind = "tool_result"
    elif kinds and all(k == "reasoning" for k in kinds):
        kind = "reasoning"
    elif normal.role == "meta":
        kind = "meta"
    else:
        kind = "message"
    summary: dict[str, Any] = {
        "role": normal.role,
        "kind": kind,
        "chars": sum(block_chars(b) for b in normal.blocks),
    }
    if tools:
        summary["tool"] = ",".join(str(t) for t in tools)
    # Call ids let pairing checks (drop, squash, merge) run on summaries alone.
    calls = [str(b.get("id")) for b in normal.blocks if b.get("type") == "tool_call" and b.get("id") is not None]
    results = [str(b.get("call_id")) for b in normal.blocks if b.get("type") == "tool_result" and b.get("call_id") is not None]
    if calls:
        summary["calls"] = calls
    if results:
        summary["results"] = results
    if normal.time is not None:
        summary["time"] = int(normal.time)
    if normal.label:
        summary["label"] = normal.label
    return summary


@dataclass(frozen=True)
class Turn:
    """One stored record.

    Exactly one of ``record`` / ``line`` / ``blocks`` carries the content:

    * ``record``: the parsed JSON record (key order kept); writing it back with
      :func:`opalgit.jsonl.dumps` reproduces the source line exactly.
    * ``line``: the exact source bytes, for a line that the canonical rendering does
      not reproduce, or that is not JSON at all (kept so nothing is lost).
    * ``blocks``: an opal-authored turn (``agent == "opal"``), stored normalized.

    Long strings may be :class:`~opalgit.codec.PayloadRef` until resolved.
    """

    agent: str
    record: Any = None
    line: bytes | PayloadRef | None = None
    role: str | None = None  # opal-authored turns only
    blocks: tuple | None = None  # opal-authored turns only
    has_record: bool = False

    @staticmethod
    def from_record(agent: str, record: Any) -> "Turn":
        return Turn(agent=agent, record=record, has_record=True)

    @staticmethod
    def from_line(agent: str, line: bytes) -> "Turn":
        return Turn(agent=agent, line=line)

    @staticmethod
    def authored(role: str, blocks: list[dict]) -> "Turn":
        return Turn(agent="opal", role=role, blocks=tuple(blocks))

    # -- encoding ---------------------------------------------------------------

    def encode(self, payloads: dict[bytes, bytes]) -> bytes:
        """Canonical bytes; long strings go to ``payloads`` (digest -> bytes)."""
        body: dict[str, Any] = {"agent": self.agent}
        if self.has_record:
            packed = codec.pack_ordered(self.record)
            # No string in a record packed this small can reach the payload threshold.
            if len(packed) < codec.PAYLOAD_THRESHOLD:
                body["rec"] = packed
            else:
                del packed  # (not held while a large record's strings are moved out)
                body["rec"] = codec.pack_ordered(codec.externalize(self.record, payloads))
        elif self.line is not None:
            line = self.line
            if isinstance(line, bytes) and len(line) >= codec.PAYLOAD_THRESHOLD:
                d = codec.digest(line)
                payloads.setdefault(d, line)
                line = PayloadRef(d)
            body["line"] = line
        elif self.blocks is not None:
            body["role"] = self.role
            body["blocks"] = codec.pack_ordered(codec.externalize(list(self.blocks), payloads))
        else:
            raise CorruptObjectError("a turn holds no content")
        return codec.pack_canonical("turn", body)

    @staticmethod
    def decode(data: bytes) -> "Turn":
        body = codec.unpack_canonical(data, "turn")
        agent = body.get("agent")
        if not isinstance(agent, str):
            raise CorruptObjectError("a turn has no agent")
        if "rec" in body:
            return Turn(agent=agent, record=codec.unpack_ordered(body["rec"]), has_record=True)
        if "line" in body:
            line = body["line"]
            if not isinstance(line, (bytes, PayloadRef)):
                raise CorruptObjectError("a turn's line is not bytes")
            return Turn(agent=agent, line=line)
        if "blocks" in body:
            role = body.get("role")
            blocks = codec.unpack_ordered(body["blocks"])
            if role not in ROLES or not isinstance(blocks, list):
                raise CorruptObjectError("an authored turn has no valid role or blocks")
            return Turn(agent=agent, role=role, blocks=tuple(blocks))
        raise CorruptObjectError("a turn holds no content")

    def resolve(self, load: Callable[[bytes], bytes]) -> "Turn":
        """A copy with every payload reference replaced by its content."""
        if self.has_record:
            return Turn(agent=self.agent, record=codec.internalize(self.record, load), has_record=True)
        if isinstance(self.line, PayloadRef):
            return Turn(agent=self.agent, line=load(self.line.digest))
        if self.blocks is not None:
            return Turn(
                agent=self.agent,
                role=self.role,
                blocks=tuple(codec.internalize(list(self.blocks), load)),
            )
        return self


@dataclass
class SessionInfo:
    """What a commit records about the session its turns come from."""

    agent: str
    id: str
    cwd: str | None = None
    git_branch: str | None = None
    model: str | None = None
    title: str | None = None
    version: str | None = None  # the agent's version that wrote the file

    def to_map(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @staticmethod
    def from_map(m: Mapping[str, Any]) -> "SessionInfo":
        if not isinstance(m.get("agent"), str) or not isinstance(m.get("id"), str):
            raise CorruptObjectError("session info lacks agent or id")
        known = {k: m.get(k) for k in ("agent", "id", "cwd", "git_branch", "model", "title", "version")}
        return SessionInfo(**known)


@dataclass
class Source:
    """Where a commit's turns were read from, so the next commit reads only what is new."""

    path: str
    size: int  # bytes of the file consumed (up to the end of the last whole line)
    lines: int  # lines consumed
    tail: bytes  # SHA-256 of the last (up to) 64 KiB before ``size``: proves the prefix is unchanged
    state: dict = field(default_factory=dict)  # adapter's resume state (e.g. Claude's leaf uuid)

    def to_map(self) -> dict:
        return {"path": self.path, "size": self.size, "lines": self.lines, "tail": self.tail, "state": self.state}

    @staticmethod
    def from_map(m: Mapping[str, Any]) -> "Source":
        try:
            return Source(
                path=str(m["path"]),
                size=int(m["size"]),
                lines=int(m["lines"]),
                tail=bytes(m["tail"]),
                state=dict(m.get("state") or {}),
            )
        except (KeyError, TypeError, ValueError):
            raise CorruptObjectError("malformed source record in a state header") from None


@dataclass
class StateHeader:
    """The ``opal`` blob at the root of every state commit's tree."""

    session: SessionInfo | None
    items: int  # stored records, meta included
    turns: int  # conversational turns (role != meta)
    source: Source | None = None
    new_items: tuple[int, int] = (0, 0)  # [start, end) of the records this commit added
    chars: int = 0  # model-visible characters, for token estimates
    extra: dict = field(default_factory=dict)  # e.g. {"op": "rewind", "dropped": 3}

    def encode(self) -> bytes:
        body: dict[str, Any] = {
            "items": self.items,
            "turns": self.turns,
            "new": list(self.new_items),
            "chars": self.chars,
        }
        if self.session is not None:
            body["session"] = self.session.to_map()
        if self.source is not None:
            body["source"] = self.source.to_map()
        if self.extra:
            body["extra"] = self.extra
        return codec.pack_canonical("state", body)

    @staticmethod
    def decode(data: bytes) -> "StateHeader":
        body = codec.unpack_canonical(data, "state")
        try:
            header = StateHeader(
                session=SessionInfo.from_map(body["session"]) if "session" in body else None,
                items=int(body["items"]),
                turns=int(body["turns"]),
                source=Source.from_map(body["source"]) if "source" in body else None,
                new_items=tuple(body.get("new") or (0, 0)),  # type: ignore[arg-type]
                chars=int(body.get("chars") or 0),
                extra=dict(body.get("extra") or {}),
            )
        except (KeyError, TypeError, ValueError):
            raise CorruptObjectError("malformed state header") from None
        header.check()
        return header

    def check(self) -> None:
        if self.items < 0 or self.turns < 0 or self.turns > self.items:
            raise CorruptObjectError("state header counts are inconsistent")

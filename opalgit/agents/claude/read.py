"""Reading Claude Code transcripts: parsing, the uuid tree of views, normalizing.

A Claude Code session is one JSON-lines file. Every line is kept as one record, in
file order, whatever its type, so that writing the records back reproduces the file
byte for byte (lines that are not JSON, and blank lines, are kept as their exact
bytes). Conversation lines form a tree through ``uuid``/``parentUuid``: rewinds and
edits fork it, and each leaf of the tree becomes one :class:`~.base.View` (one opal
branch). The view the agent itself would resume comes first.

Normalized blocks produced here (the shared model's block vocabulary):

* ``{"type": "text", "text"}``
* ``{"type": "image", "media_type", "data"}`` (base64) or ``{"type": "image", "url"}``
* ``{"type": "reasoning", "text", "signed": True?}`` (``signed`` only when Anthropic's
  signature is present; ``redacted: True`` for ``redacted_thinking``)
* ``{"type": "tool_call", "id", "name", "input"}``
* ``{"type": "tool_result", "call_id", "output", "is_error"}`` where ``output`` is a
  string or a list of normalized text/image/other blocks
* ``{"type": "other", "kind"}`` for anything else (documents, tool references ...)

Where the files are is :mod:`.files`; writing them, :mod:`.write`. Pure: no store, no
environment reads, no printing.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable, Iterator, Mapping, Sequence

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
    record_of,
    sniff_lines,
)
from opalgit.agents.claude.files import AGENT, side_folder
from opalgit.errors import InputError
from opalgit.history.model import Normal, Turn

__all__ = ["claim", "normalize_many", "normalize_record", "parse_time", "read", "sniff", "subagent_parent"]

#: How many uuids of the active view's end the incremental state remembers.
TAIL_SIZE = 8
STATE_VERSION = 1
#: How many JSON lines at the top of a file decide whether it is a Claude transcript.
_SHAPE_LINES = 64
#: What a refusal calls the file it expected.
OWN = "a Claude Code session"

#: Entry types only Claude Code writes (formats.md §2.3); some carry no uuid or sessionId.
_CLAUDE_TYPES = frozenset(
    """last-prompt file-history-snapshot queue-operation custom-title ai-title permission-mode
    atis-latch api-request-shape api-request-blob tools-used cost-state""".split()
)
#: The keys that link a line into the uuid tree.
_LINK_KEYS = ("uuid", "parentUuid", "leafUuid", "logicalParentUuid")
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_TITLE_RANK = {"custom-title": ("customTitle", 3), "ai-title": ("aiTitle", 2), "summary": ("summary", 1)}


# ------------------------------------------------------------------------ small helpers


def _is_id(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def claim(obj: Any) -> float:
    """How surely a parsed line is a Claude Code transcript line (see :func:`~.base.sniff_lines`):
    certain for a type only Claude Code writes, or a typed line linked into the uuid tree;
    less for a typed line that only names its ``sessionId`` (other formats name sessions too)."""
    if not isinstance(obj, dict) or _foreign_shape(obj):
        return 0.0
    kind = obj.get("type")
    if kind in _CLAUDE_TYPES or (isinstance(kind, str) and any(k in obj for k in _LINK_KEYS)):
        return CERTAIN
    return 0.75 if isinstance(kind, str) and "sessionId" in obj else 0.0


def _foreign_shape(obj: dict) -> bool:
    """A line with Claude Code's identity keys that Claude Code never writes: a Gemini-style
    ``message`` (``parts``, no ``content``) or a ``systemPayload``, as Qwen Code's records have."""
    msg = obj.get("message")
    return "systemPayload" in obj or (isinstance(msg, dict) and isinstance(msg.get("parts"), list)
                                      and "content" not in msg)


def sniff(path: str, head: bytes) -> float:
    """How surely a file whose first bytes are ``head`` is a Claude Code transcript."""
    return sniff_lines(head, claim)


def _parent_of(rec: Mapping[str, Any], prev: str | None) -> str | None:
    """The tree parent of a record: ``parentUuid``, else ``logicalParentUuid``.

    Records from before the tree existed carry no ``parentUuid`` key at all; they
    follow the previous record that has a uuid, i.e. file order.
    """
    p = rec.get("parentUuid")
    if _is_id(p):
        return p
    lp = rec.get("logicalParentUuid")
    if _is_id(lp):
        return lp
    if "parentUuid" not in rec:
        return prev
    return None


def _is_candidate(rec: Mapping[str, Any]) -> bool:
    """A record that can end a conversation (be a leaf): main-chain user or assistant."""
    return rec.get("type") in ("user", "assistant") and rec.get("isSidechain") is not True


#: The keys of a line that the uuid tree (views, incremental extension) looks at.
_TREE_KEYS = ("uuid", "parentUuid", "logicalParentUuid", "type", "isSidechain", "leafUuid")


def _facts(rec: Any, names: dict[str, str]) -> dict | None:
    """What the uuid tree needs of a parsed line (None when it needs nothing).

    The first pass of :func:`read` keeps this instead of the record, so
    a file's views cost a small dict per uuid line, whatever the size of its records.
    Ids are shared through ``names`` (a ``parentUuid`` is usually the previous line's
    ``uuid``) so each is held once.
    """
    if not isinstance(rec, dict):
        return None
    kind = rec.get("type")
    if not _is_id(rec.get("uuid")) and not (kind == "last-prompt" and _is_id(rec.get("leafUuid"))):
        return None
    out: dict[str, Any] = {}
    for k in _TREE_KEYS:
        if k in rec:
            v = rec[k]
            if k == "isSidechain":
                v = v is True
            elif isinstance(v, str):
                v = names.setdefault(v, v)
            else:
                v = None  # only an id matters here, and whether the key is there at all
            out[k] = v
    # What rebuilding a reply needs (Claude Code writes each content block of one
    # response as its own line, and a parallel call's result as a sibling line).
    msg = rec.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if kind == "assistant" and isinstance(msg, dict) and _is_id(msg.get("id")):
        out["mid"] = names.setdefault(msg["id"], msg["id"])
        calls = tuple(b["id"] for b in content or () if isinstance(b, dict) and b.get("type") == "tool_use"
                      and _is_id(b.get("id"))) if isinstance(content, list) else ()
        if calls:
            out["calls"] = calls
    elif kind == "user" and isinstance(content, list):
        answers = tuple(b["tool_use_id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
                        and _is_id(b.get("tool_use_id")))
        if answers:
            out["answers"] = answers
            if _is_id(rec.get("sourceToolAssistantUUID")):
                out["source"] = names.setdefault(rec["sourceToolAssistantUUID"], rec["sourceToolAssistantUUID"])
    elif kind == "system" and rec.get("subtype") == "compact_boundary":
        out["boundary"] = True
    return out


# -------------------------------------------------------------------------- normalizing


def _norm_block(blk: Any) -> dict:
    if isinstance(blk, str):
        return {"type": "text", "text": blk}
    if not isinstance(blk, dict):
        return {"type": "other", "kind": type(blk).__name__}
    kind = blk.get("type")
    if kind == "text":
        text = blk.get("text")
        return {"type": "text", "text": text if isinstance(text, str) else ""}
    if kind == "image":
        src = blk.get("source")
        src = src if isinstance(src, dict) else {}
        if src.get("type") == "url" or "url" in src:
            return {"type": "image", "url": src.get("url")}
        return {"type": "image", "media_type": src.get("media_type"), "data": src.get("data")}
    if kind == "thinking":
        text = blk.get("thinking")
        out: dict[str, Any] = {"type": "reasoning", "text": text if isinstance(text, str) else ""}
        if _is_id(blk.get("signature")):
            out["signed"] = True
        return out
    if kind == "redacted_thinking":
        return {"type": "reasoning", "text": "", "signed": True, "redacted": True}
    if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
        out = {"type": "tool_call", "id": blk.get("id"), "name": blk.get("name"), "input": blk.get("input")}
        if kind != "tool_use":
            out["server"] = True
        return out
    if kind == "tool_result" or (isinstance(kind, str) and kind.endswith("_tool_result") and "tool_use_id" in blk):
        content = blk.get("content")
        if content is None and isinstance(blk.get("text"), str):
            content = blk["text"]
        return {"type": "tool_result", "call_id": blk.get("tool_use_id"), "output": _result_output(content),
                "is_error": blk.get("is_error") is True}
    return {"type": "other", "kind": kind if isinstance(kind, str) else "unknown"}


def _result_output(content: Any) -> str | list:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [_norm_block(item) for item in content]
    return json.dumps(content, ensure_ascii=False)


def _content_blocks(content: Any) -> list[dict]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [_norm_block(x) for x in content] if isinstance(content, list) else [_norm_block(content)]


def _meta_label(rec: Mapping[str, Any]) -> str:
    kind = rec.get("type")
    label = kind if isinstance(kind, str) and kind else "unknown"
    sub: Any = None
    if kind == "system":
        sub = rec.get("subtype")
    elif kind == "attachment":
        att = rec.get("attachment")
        sub = att.get("type") if isinstance(att, dict) else None
    elif kind == "progress":
        data = rec.get("data")
        sub = data.get("type") if isinstance(data, dict) else None
    elif kind == "queue-operation":
        sub = rec.get("operation")
    return f"{label}:{sub}" if isinstance(sub, str) and sub else label


def normalize_record(rec: Any) -> Normal:
    """The normalized view of one parsed Claude Code line."""
    if not isinstance(rec, dict):
        return Normal(role="meta", label="non-object")
    time = parse_time(rec.get("timestamp"))
    kind = rec.get("type")
    msg = rec.get("message")
    msg = msg if isinstance(msg, dict) else {}

    if kind in ("user", "assistant"):
        blocks = _content_blocks(msg.get("content"))
        if rec.get("isSidechain") is True:
            return Normal(role="meta", blocks=blocks, time=time, label=f"sidechain:{kind}")
        if kind == "assistant":
            return Normal(role="assistant", blocks=blocks, time=time)
        if rec.get("isCompactSummary") is True:
            return Normal(role="system", blocks=blocks, time=time, label="compact-summary")
        # Anthropic puts tool results first in a user message; text that follows
        # them (interruption notes, reminders) rides along with the tool output.
        if any(b.get("type") == "tool_result" for b in blocks):
            return Normal(role="tool", blocks=blocks, time=time)
        if rec.get("isMeta") is True:
            return Normal(role="meta", blocks=blocks, time=time, label="user:meta")
        return Normal(role="user", blocks=blocks, time=time)

    if kind in ("tool_use", "tool_result"):
        # Very old transcripts wrote tool calls and results as top-level entries.
        call_id = next((rec[k] for k in ("tool_use_id", "toolUseId", "id") if _is_id(rec.get(k))), None)
        if kind == "tool_use":
            block: dict[str, Any] = {"type": "tool_call", "id": call_id, "name": rec.get("name"),
                                     "input": rec.get("input")}
            role = "assistant"
        else:
            out = rec.get("output", rec.get("content"))
            block = {"type": "tool_result", "call_id": call_id, "output": _result_output(out),
                     "is_error": rec.get("is_error") is True or rec.get("isError") is True}
            if isinstance(rec.get("name"), str):
                block["name"] = rec["name"]
            role = "tool"
        if rec.get("isSidechain") is True:
            return Normal(role="meta", blocks=[block], time=time, label=f"sidechain:{kind}")
        return Normal(role=role, blocks=[block], time=time)

    if rec.get("isSidechain") is True:
        return Normal(role="meta", time=time, label=f"sidechain:{kind if isinstance(kind, str) else 'unknown'}")
    if kind == "system" and rec.get("subtype") == "compact_boundary":
        return Normal(role="system", time=time, label="compact-boundary")
    return Normal(role="meta", time=time, label=_meta_label(rec))


# ------------------------------------------------------------------------ session info


class _Info(SessionFacts):
    """The session's facts (:class:`~.base.SessionFacts`), with the rank of its title."""

    AGENT = AGENT

    def __init__(self, saved: Mapping[str, Any] | None = None) -> None:
        super().__init__(saved)
        self.rank: int = int(dict(saved or {}).get("rank") or 0)
        self.ids: list[str] = []

    def feed(self, rec: Mapping[str, Any]) -> None:
        sid = rec.get("sessionId")
        if _is_id(sid) and sid not in self.ids and len(self.ids) < 16:
            self.ids.append(sid)
        if self.cwd is None and _is_id(rec.get("cwd")):
            self.cwd = rec["cwd"]
        if _is_id(rec.get("gitBranch")):
            self.git_branch = rec["gitBranch"]
        if _is_id(rec.get("version")):
            self.version = rec["version"]
        kind = rec.get("type")
        if kind == "assistant" and rec.get("isSidechain") is not True:
            msg = rec.get("message")
            model = msg.get("model") if isinstance(msg, dict) else None
            if _is_id(model) and model != "<synthetic>":
                self.model = model
        elif kind in _TITLE_RANK:
            key, rank = _TITLE_RANK[kind]
            title = rec.get(key)
            # A title the user set outranks a generated one, whatever the order.
            if _is_id(title) and rank >= self.rank:
                self.title, self.rank = title, rank

    def resolve_id(self, path: str) -> None:
        if self.id is not None:
            return
        stem = os.path.basename(path)
        if stem.endswith(".jsonl"):
            stem = stem[: -len(".jsonl")]
        # The file stem is what `claude --resume` looks up; prefer it when it is the id.
        if stem in self.ids or _UUID_RE.match(stem) or stem.startswith("agent-") or not self.ids:
            self.id = stem
        else:
            self.id = self.ids[0]

    def saved(self) -> dict:
        """The state form: :meth:`SessionInfo.to_map` plus the title's rank."""
        out = self.session().to_map()
        del out["agent"]
        if self.rank:
            out["rank"] = self.rank
        return out


# ------------------------------------------------------------------------------ views


def _ancestry(parent: Mapping[str, str | None], node: str) -> list[str]:
    """``node`` and its ancestors, nearest first (cycle-safe)."""
    out = [node]
    seen = {node}
    p = parent.get(node)
    while p is not None and p not in seen:
        out.append(p)
        seen.add(p)
        p = parent.get(p)
    return out


def _leaves(parent: Mapping[str, str | None], cands: Mapping[str, int]) -> list[str]:
    """Candidates that are no other candidate's ancestor, in file order of ``cands``."""
    inner: set[str] = set()
    for c in cands:
        p = parent.get(c)
        # A node already marked has had its own ancestors marked: stop there.
        while p is not None and p != c and p not in inner:
            inner.add(p)
            p = parent.get(p)
    return sorted((c for c in cands if c not in inner), key=lambda c: cands[c])


def _name_hint(leaf: str, used: set[str]) -> str:
    clean = re.sub(r"[^A-Za-z0-9]+", "-", leaf).strip("-") or "leaf"
    hint = ""
    for n in (8, 12, 16, len(clean)):
        hint = "fork-" + clean[:n].rstrip("-")
        if hint not in used:
            return hint
    k = 2
    while f"{hint}-{k}" in used:
        k += 1
    return f"{hint}-{k}"


class _Tree:
    """The uuid tree of a whole file and the views it implies, rebuilt the way Claude
    Code rebuilds a conversation when it resumes.

    Built from each line's :func:`_facts`. Claude Code walks ``parentUuid`` up from the
    leaf, then puts back what that walk misses (its transcript loader): the other lines
    of every reply on the chain (one line per content block, all sharing
    ``message.id``), the ``tool_result`` lines of their calls (a parallel call's result
    is a sibling, its ``parentUuid`` being its own ``tool_use`` line, or named by
    ``sourceToolAssistantUUID``), and the progress and attachment lines hanging from
    them. So a leaf that this reattaches to another leaf's chain is not a line of
    conversation of its own: only a genuine fork (a rewound or edited prompt, a
    regenerated reply) makes a second view.
    """

    def __init__(self, values: list[Any]) -> None:
        self.uuids: list[str | None] = []
        self.parent: dict[str, str | None] = {}
        self.cands: dict[str, int] = {}
        self.side: set[str] = set()
        self.last_uuid: str | None = None
        self.prompt_leaf: str | None = None
        facts: dict[str, dict] = {}
        last_main: str | None = None  # the last main-chain user/assistant line so far
        known = {v["uuid"] for v in values if isinstance(v, dict) and _is_id(v.get("uuid"))}
        for i, rec in enumerate(values):
            u = rec.get("uuid") if isinstance(rec, dict) else None
            if isinstance(rec, dict) and rec.get("type") == "last-prompt" and _is_id(rec.get("leafUuid")):
                self.prompt_leaf = rec["leafUuid"]
            if not _is_id(u):
                self.uuids.append(None)
                continue
            self.uuids.append(u)
            # Claude Code keeps its messages in a map by uuid: a later line with the same uuid wins.
            facts[u] = rec
            parent = _parent_of(rec, self.last_uuid)
            if (parent is None or parent not in known) and u in self.parent:
                parent = self.parent[u]  # a later copy of a line that says less of its place
            elif (parent is None or parent not in known) and last_main is not None and _is_candidate(rec):
                # A second root (``parentUuid: null`` after the conversation began: a 1.0.x
                # continuation's first line, a hand-made file that links nothing), or a parent
                # the file does not hold (Claude Code falls back to the line written before
                # it), continues the conversation before it in file order: no fork of it.
                parent = last_main
            if rec.get("boundary") and (parent is None or parent not in self.parent):
                # A compaction whose pre-compaction leaf is not in the file (a copy, a trimmed
                # file): the history before it is still this conversation's, so the boundary
                # follows the last line of conversation before it, not a root of its own.
                parent = last_main
            self.parent[u] = parent
            self.last_uuid = u
            if _is_candidate(rec):
                self.cands[u] = i
                last_main = u
            if rec.get("isSidechain") is True:
                self.side.add(u)
            else:
                self.side.discard(u)
        self._index(facts)
        leaves = _leaves(self.parent, self.cands)
        # Chains are worked out only when needed: every sibling tool result is a leaf, and
        # a chain per leaf made a full read quadratic (64 s for a 43 MB session of parallel
        # calls, 1.3 s once each absorbed leaf is only looked up in the kept chains).
        self.ext: dict[str, set[str]] = {}
        self.active = self._active(leaves)
        # A leaf another kept leaf's chain takes in (a sibling tool result, a content-block
        # line of a parallel reply) is part of that line of conversation.
        order = ([self.active] if self.active else []) + [leaf for leaf in leaves if leaf != self.active]
        self.leaves: list[str] = []
        for leaf in order:
            if any(leaf in self._ext(k) for k in self.leaves):
                continue
            # Taken in by a line whose own leaf comes later in the file (a parallel
            # call's result that no reply follows, written before the reply): that
            # line's too, not a fork, once the conversation has forked before it.
            if leaf != self.active and any(
                k != leaf and leaf in self._ext(k) and k not in self._ext(leaf) for k in leaves
            ):
                continue
            self.leaves.append(leaf)
        self.anc = {leaf: self._ext(leaf) for leaf in self.leaves}

    def _ext(self, leaf: str) -> set[str]:
        chain = self.ext.get(leaf)
        if chain is None:
            chain = self.ext[leaf] = self._chain(leaf)
        return chain

    def _index(self, facts: Mapping[str, dict]) -> None:
        """The maps the reattachment needs: reply lines by message id, results by the line
        they answer, a call's line by call id, and the children of every line."""
        self.replies: dict[str, list[str]] = {}
        self.mid: dict[str, str] = {}
        self.answers: dict[str, list[str]] = {}
        self.children: dict[str, list[str]] = {}
        self.chatty: set[str] = set()  # user and assistant lines (everything else hangs off them)
        self.answered: set[str] = set()  # tool-result lines
        by_call: dict[str, str | None] = {}
        for u, f in facts.items():
            p = self.parent.get(u)
            if p is not None:
                self.children.setdefault(p, []).append(u)
            if f.get("type") in ("user", "assistant"):
                self.chatty.add(u)
            if f.get("isSidechain") is True:
                continue
            mid = f.get("mid")
            if mid is not None:
                self.mid[u] = mid
                self.replies.setdefault(mid, []).append(u)
                for c in f.get("calls") or ():
                    by_call[c] = u if by_call.get(c, u) == u else None  # ambiguous: no recovery by id
        for u, f in facts.items():
            if not f.get("answers") or f.get("isSidechain") is True:
                continue
            self.answered.add(u)
            targets = {self.parent.get(u), f.get("source")} | {by_call.get(c) for c in f["answers"]}
            for t in targets:
                if t is not None and t in facts:
                    self.answers.setdefault(t, []).append(u)

    def _chain(self, leaf: str) -> set[str]:
        """The leaf's ancestry plus what Claude Code reattaches to it (see the class)."""
        chain = set(_ancestry(self.parent, leaf))
        # Lines whose progress, attachment and system children belong to the chain: the
        # leaf, reply and result lines, and those children themselves.
        hangs = {u for u in chain if u == leaf or u in self.mid or u in self.answered}
        todo = list(chain)
        while todo:
            u = todo.pop()
            more: list[str] = []
            mid = self.mid.get(u)
            if mid is not None:
                more += self.replies.get(mid, ())
            more += self.answers.get(u, ())
            if u in hangs:
                kids = [c for c in self.children.get(u, ()) if c not in self.chatty]
                hangs.update(kids)
                more += kids
            for m in more:
                if m in chain:
                    continue
                hangs.add(m)
                # With the lines between it and the chain (progress records a block hangs under).
                for a in _ancestry(self.parent, m):
                    if a in chain:
                        break
                    chain.add(a)
                    todo.append(a)
        return chain

    def _active(self, leaves: list[str]) -> str | None:
        if not leaves:
            return None
        target = self.prompt_leaf if self.prompt_leaf in self.parent else leaves[-1]
        # The last leaf whose line of conversation holds the target (from the end: that is
        # almost always the last leaf, one chain to work out).
        return next((leaf for leaf in reversed(leaves) if target in self._ext(leaf)), leaves[-1])

    def views(self) -> list[View]:
        if not self.leaves:
            return [View(indices=list(range(len(self.uuids))), leaf=None, name_hint=None)]
        union: set[str] = set().union(*self.anc.values())
        views: list[View] = []
        used: set[str] = set()
        for leaf in self.leaves:
            anc = self.anc[leaf]
            end = len(self.uuids) if leaf == self.active else self._left(anc, union)
            idx = [i for i, u in enumerate(self.uuids) if (i < end if u is None else u in anc or u not in union)]
            hint = None
            if leaf != self.active:
                hint = _name_hint(leaf, used)
                used.add(hint)
            views.append(View(indices=idx, leaf=leaf, name_hint=hint))
        return views

    def _left(self, anc: set[str], union: set[str]) -> int:
        """Where the agent left a line that is not the one it resumes: the first record of
        another line after the line's last. The lines without a uuid after it (the other
        line's last-prompts, its bookkeeping) are not this line's: a fork's view must not
        take them in, or it changes with every turn on the other line while its own
        turns stay as they are."""
        last = max((i for i, u in enumerate(self.uuids) if u in anc), default=-1)
        return next((i for i in range(last + 1, len(self.uuids))
                     if self.uuids[i] is not None and self.uuids[i] in union and self.uuids[i] not in anc),
                    len(self.uuids))

    def state_tail(self, active_view: View) -> tuple[list[str], list[str]]:
        tail: list[str] = []
        for i in reversed(active_view.indices):
            u = self.uuids[i]
            if u is None or u in self.side or u in tail:
                continue
            tail.append(u)
            if len(tail) == TAIL_SIZE:
                break
        tail.reverse()
        leaf = self.active
        desc = [u for u in tail if leaf is not None and leaf in _ancestry(self.parent, u)]
        return tail, desc

    def groups(self, active_view: View, tail: list[str]) -> dict[str, str]:
        """The reply (``message.id``) of every line of the active view that belongs to the
        reply of a tail line (see :func:`_group`): all of it, however many calls it made,
        as the next lines may hang from its first call's line."""
        def group(u: str) -> str | None:
            return _group(u, self.mid.get(u), u in self.answered, self.parent.get(u), self.mid)

        wanted = {g for g in map(group, tail) if g is not None}
        out = {}
        for i in active_view.indices:
            u = self.uuids[i]
            if u is not None and u not in self.side and (g := group(u)) in wanted:
                out[u] = g
        return out


def _group(u: str, mid: str | None, answers: bool, parent: str | None, mids: Mapping[str, str]) -> str | None:
    """The reply a line belongs to, for the incremental read: its own ``message.id``
    (a content-block line of a reply), or the one of the line it hangs from when it is
    a tool result directly under its call. Claude Code's loader reattaches every line of
    a reply and its results to the chain of any line of it (:class:`_Tree`), so two
    lines of one group are one line of conversation."""
    if mid is not None:
        return mid
    if answers and parent is not None:
        return mids.get(parent)
    return None


def _extension(values: list[Any], old: Mapping[str, Any]) -> tuple[bool, dict]:
    """Whether new records (an incremental read) only extend the old active view.

    ``values`` are the new lines' :func:`_facts` (or their parsed values).

    Returns (extends, the tree part of the new state).
    """
    old_leaf, tail, desc, prev, groups = _old_tree(old)
    # The lines of the tail's replies are on the active view too, however far back.
    known = set(tail) | ({old_leaf} if old_leaf else set()) | set(groups)
    new = _Grown.of(values, old_leaf, known, prev)
    if new is None or not new.rooted(old_leaf, known):
        return False, {}
    # ``parent`` holds only new nodes, so these walks stop at the first old one.
    leaves = _leaves(new.parent, new.cands)
    new_leaf = leaves[-1] if leaves else None
    replies = new.regroup(groups, old.get("replies"))
    chain = _new_chain(new_leaf, new.parent, new.facts, known, groups) if new_leaf else set()
    if any(leaf not in chain for leaf in leaves[:-1]):
        return False, {}  # a genuine fork among the new lines (or one this cannot tell): read it all
    if new_leaf is not None and old_leaf is not None and new.root_of(new_leaf) not in desc:
        # Not below the old leaf: still the same conversation when the old leaf is a line
        # of the reply (or a result of the reply) that the new lines hang from, the way
        # Claude Code writes parallel calls: results and the next turn under the first
        # call's line, after the later calls' lines.
        root = new.root_of(new_leaf)
        if root not in known or groups.get(root) is None or groups.get(root) != groups.get(old_leaf):
            return False, {}
    allowed = chain | desc  # (desc: the old leaf and the old lines below it)
    if old_leaf is not None and groups.get(old_leaf) is not None:
        # Claude Code points last-prompt at a line of the reply being answered (the last
        # result it wrote), which may be any line of the old leaf's reply.
        allowed |= {u for u, g in groups.items() if g == groups[old_leaf]}
    if any(p not in allowed for p in new.prompts):
        return False, {}
    return True, new.state(new_leaf or old_leaf, new_leaf, tail, desc, groups, replies)


def _old_tree(old: Mapping[str, Any]) -> tuple[str | None, list[str], set[str], str | None, dict[str, str]]:
    """The tree part of an incremental read's old state, checked: the old leaf, the
    tail, the old lines below the leaf (with it), the last uuid and the reply groups."""
    old_leaf = old.get("leaf") if _is_id(old.get("leaf")) else None
    tail = [u for u in old.get("tail") or [] if _is_id(u)]
    desc = {u for u in old.get("desc") or [] if _is_id(u)}
    if old_leaf is not None:
        desc.add(old_leaf)
    prev = old.get("last") if _is_id(old.get("last")) else None
    groups = {u: g for u, g in (old.get("groups") or {}).items() if _is_id(u) and _is_id(g)} \
        if isinstance(old.get("groups"), dict) else {}
    return old_leaf, tail, desc, prev, groups


class _Grown:
    """The new lines of an incremental read as the uuid tree sees them (:func:`_extension`)."""

    def __init__(self, prev: str | None) -> None:
        self.parent: dict[str, str | None] = {}  # new uuid -> its parent (old, new or None)
        self.facts: dict[str, dict] = {}  # each new uuid line's facts
        self.order: list[str] = []
        self.cands: dict[str, int] = {}
        self.main: list[str] = []
        self.prompts: list[str] = []
        self.prev = prev  # the last uuid so far

    @classmethod
    def of(cls, values: list[Any], old_leaf: str | None, known: set[str], prev: str | None) -> "_Grown | None":
        """The new lines' nodes, or None when they rewrite the tree (read it all again)."""
        new = cls(prev)
        for i, rec in enumerate(values):
            if not isinstance(rec, dict):
                continue
            if rec.get("type") == "last-prompt" and _is_id(rec.get("leafUuid")):
                new.prompts.append(rec["leafUuid"])
            u = rec.get("uuid")
            if not _is_id(u):
                continue
            if u in new.parent or u in known:
                return None  # a repeated uuid rewrites the tree: read it all again
            p0 = _parent_of(rec, new.prev)
            if (
                (p0 is None or (p0 not in new.parent and p0 not in known))
                and (rec.get("boundary") or _is_candidate(rec))
                and (old_leaf is not None or new.cands)
            ):
                # A second root, or a compaction whose leaf is not in the file: the whole
                # file's tree hangs it under the conversation before it (_Tree), which these
                # new lines alone cannot tell: read it all again.
                return None
            new.parent[u] = p0
            new.facts[u] = rec
            new.prev = u
            new.order.append(u)
            if rec.get("isSidechain") is not True:
                new.main.append(u)
                if _is_candidate(rec):
                    new.cands[u] = i
        return new

    def root_of(self, u: str) -> str | None:
        """The first old (or missing) node above the new node ``u``."""
        seen = set()
        p = self.parent.get(u)
        while p is not None and p in self.parent and p not in seen:
            seen.add(p)
            p = self.parent.get(p)
        return p

    def rooted(self, old_leaf: str | None, known: set[str]) -> bool:
        """Whether every new main-chain line hangs from a known old line (through new
        sidechain lines too), or, in a file with no old leaf, from nothing."""
        for u in self.main:
            p = self.root_of(u)
            if p is None:
                if old_leaf is not None:
                    return False
            elif p not in self.parent and p not in known:
                return False
        return True

    def regroup(self, groups: dict[str, str], old_replies: Any) -> dict[str, str]:
        """Put the new lines in ``groups`` (their reply, :func:`_group`); the reply lines
        (line -> its ``message.id``) of the old tail and the new lines."""
        # The old tail's reply lines are those whose group is their own message id's: their
        # uuids are not message ids, so a result line's group names another line's reply.
        replies = {u: g for u, g in groups.items() if u in set(old_replies or ())}
        for u in self.order:
            f = self.facts[u]
            if f.get("mid") is not None and f.get("isSidechain") is not True:
                replies[u] = f["mid"]
            g = _group(u, f.get("mid"), bool(f.get("answers")), self.parent.get(u), replies)
            if g is not None and f.get("isSidechain") is not True:
                groups[u] = g
        return replies

    def state(self, leaf: str | None, new_leaf: str | None, tail: list[str], desc: set[str],
              groups: Mapping[str, str], replies: Mapping[str, str]) -> dict:
        """The tree part of the new state once the new lines extend the old view."""
        new_tail = list(dict.fromkeys(tail + self.main))[-TAIL_SIZE:]
        if new_leaf is not None:
            below = {u for u in self.order if new_leaf in _ancestry(self.parent, u)}
        else:
            below = desc | {u for u in self.order if self.root_of(u) in desc}
        wanted = {groups.get(t) for t in new_tail} - {None}
        kept = {u: g for u, g in groups.items() if g in wanted}
        return {"leaf": leaf, "tail": new_tail, "desc": [u for u in new_tail if u in below], "last": self.prev,
                "groups": kept, "replies": [u for u in kept if u in replies]}


def _new_chain(leaf: str, parent: Mapping[str, str | None], facts: Mapping[str, dict], known: set[str],
               groups: Mapping[str, str]) -> set[str]:
    """The new lines on ``leaf``'s line of conversation, with what Claude Code reattaches
    to it (:meth:`_Tree._chain`, over the new lines only): the other lines of a reply on
    it, and the results of its calls, with the lines between them and the chain. The
    old lines of the active view (``known``) are on it already."""
    chain = set(_ancestry(parent, leaf)) & set(parent)
    on = chain | known
    mids = {groups[u] for u in on if u in groups}
    by_call: dict[str, str] = {}
    for u, f in facts.items():
        for c in f.get("calls") or ():
            by_call[c] = u
    grown = True
    while grown:
        grown = False
        for u, f in facts.items():
            if u in chain or f.get("isSidechain") is True:
                continue
            targets = {parent.get(u), f.get("source")} | {by_call.get(c) for c in f.get("answers") or ()}
            if not ((f.get("mid") is not None and f["mid"] in mids) or (f.get("answers") and targets & on)):
                continue
            for a in _ancestry(parent, u):
                if a in on or a not in parent:
                    break
                chain.add(a)
                on.add(a)
                if a in groups:
                    mids.add(groups[a])
            grown = True
    return chain


# ------------------------------------------------------------------------------ reading


def read(path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
    """Read in two passes, so that memory does not grow with the file.

    The first pass parses every line but keeps only what the views, the session
    info and the checks need (:func:`_facts`, each line's offset and CRC-32); the
    returned result produces the records themselves lazily, by reading the lines
    again (:meth:`ReadResult.iter_records`), one at a time. A file that is not a
    Claude Code transcript raises :class:`~.base.NotThisAgent`.
    """
    full = start == 0
    old = {} if full else dict(state or {})
    info = _Info(old.get("info"))
    with _open(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if full:
            jsonl.sniff_binary(path, fh.read(4096))
        elif start > size:
            info.resolve_id(path)
            note = f"{path}: the file is shorter than what was already imported; it will be read again"
            return ReadResult(info.session(), [], [], old, start, first_line - 1, [note], extends=False)
        index = LineIndex(start, first_line - 1)
        facts: list[dict | None] = []  # per JSON line, then per line (see _facts; None: not JSON)
        judged: list[tuple[int, bool]] = []  # (line, Claude's) of the first JSON lines
        names: dict[str, str] = {}
        for line, value in index.scan(fh, path, start, first_line, full, lambda n, why: _first_line_error(path, n, why)):
            if isinstance(value, dict):
                info.feed(value)
            facts.append(_facts(value, names))
            if full and len(judged) < _SHAPE_LINES:
                judged.append((line.number, claim(value) > 0))
        facts = index.per_line(facts, None)
        index.end_of_pass(fh, path, full,
                          "the agent has not written anything yet; try again after its first reply")
    warnings = index.warnings
    if full:
        _check_shape(path, judged)
    info.resolve_id(path)
    views, extends, tree_state = _views(facts, old) if full else _extended(facts, old)
    del facts
    new_state = {"v": STATE_VERSION, **{k: v for k, v in tree_state.items() if v is not None}, "info": info.saved()}

    def produce(indices: Sequence[int] | None) -> Iterator[Record]:
        return index.records(lambda: _open(path), path, AGENT, first_line, indices,
                             lambda i, value: normalize_record(value))

    out = ReadResult(info.session(), None, views, new_state, index.end, index.lines, warnings, extends,
                     produce=produce, count=len(index))
    out.side = side_folder(path, warnings)
    return out


def _views(facts: list[dict | None], old: Mapping[str, Any]) -> tuple[list[View], bool, dict]:
    """A whole file's views and the tree part of its state."""
    tree = _Tree(facts)
    views = tree.views()
    tail, desc = tree.state_tail(views[0])
    groups = tree.groups(views[0], tail)
    state = {"leaf": tree.active, "tail": tail, "desc": desc, "last": tree.last_uuid, "groups": groups,
             "replies": [u for u in groups if u in tree.mid]}
    return views, False, state


def _extended(facts: list[dict | None], old: Mapping[str, Any]) -> tuple[list[View], bool, dict]:
    """An incremental read's views: the new lines extend the old active view, or there
    are none (the caller reads the whole file again, which computes views and state)."""
    extends, tree_state = _extension(facts, old)
    if extends:
        return [View(indices=list(range(len(facts))), leaf=tree_state["leaf"], name_hint=None)], True, tree_state
    return [], False, {k: old[k] for k in ("leaf", "tail", "desc", "last", "groups", "replies") if k in old}


def _open(path: str):
    # Records average several KB: a 1 MiB buffer reads them in a quarter of
    # the time the default 8 KiB one takes (0.075 -> 0.02 s for 50 MB).
    return open_session(path, "give the path of a .jsonl file under ~/.claude/projects", buffering=1 << 20)


def _first_line_error(path: str, line: int, problem: str) -> InputError:
    return not_json_at_first(path, line, problem, OWN, "give the path of a .jsonl transcript under ~/.claude/projects")


def _check_shape(path: str, judged: list[tuple[int, bool]]) -> None:
    """Refuse files that hold no Claude Code entry near the top (:func:`~.base.check_shape`)."""
    check_shape(path, judged, "this JSON-lines file has no Claude Code entries (no type with uuid or sessionId)",
                "give the path of a .jsonl transcript under ~/.claude/projects, or pick the right --agent", OWN)


def subagent_parent(head: bytes) -> str | None:
    """The parent session's id when the file whose first bytes are ``head`` is a
    subagent's transcript: every conversation record is on the sidechain and names
    the parent's ``sessionId``. None for a session of its own."""
    parent = None
    for raw in head.split(b"\n"):
        try:
            rec = jsonl.parse(raw) if raw.strip() else None
        except jsonl.ParseFailure:
            continue
        if not isinstance(rec, dict) or rec.get("type") not in ("user", "assistant"):
            continue
        if rec.get("isSidechain") is not True:
            return None
        parent = parent or rec.get("sessionId")
    return parent if isinstance(parent, str) and parent else None


def normalize_many(turns: list[Turn], normalize: Callable[[Turn], Normal]) -> list[Normal]:
    """As ``normalize`` (:meth:`~.base.Adapter.normalize`), except that a line repeating
    the uuid of an earlier conversation line (a Claude Code 1.0.x continuation copies
    the earlier session's lines under the same uuids) is bookkeeping: the conversation
    holds it once."""
    out: list[Normal] = []
    seen: set[str] = set()
    for t in turns:
        value: Any = record_of(t)
        normal = normalize_record(value) if value is not None or t.has_record else normalize(t)
        u = value.get("uuid") if isinstance(value, dict) else None
        if _is_id(u) and normal.role != "meta":
            if u in seen:
                normal = Normal(role="meta", blocks=normal.blocks, time=normal.time, label="continuation-copy")
            seen.add(u)
        out.append(normal)
    return out

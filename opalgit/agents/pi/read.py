"""Reading Pi sessions: parsing, the entry tree and its branches, normalizing.

A Pi session is one JSON-lines file (version 3): a header line ``{"type": "session", "id",
"timestamp", "cwd"}``, then entries ``{type, id, parentId, timestamp, ...}``. Every line is kept
as one record, in file order, whatever its type, so writing the records back gives the file
byte for byte (lines that are not JSON, and blank lines, are kept as their bytes).

The entries form a tree through ``id``/``parentId``. Pi appends each entry as a child of its
*leaf*, and on loading a file the leaf is the file's last entry (``_buildIndex`` in
``session-manager.js``); ``/tree`` (``navigateTree``) moves the leaf to an earlier entry, and
what is appended then is a second child: a branch. Every child-less entry ends one line of
conversation and becomes one :class:`~.base.View` (one opal branch); the line ending in the
last entry, the one Pi resumes, comes first.

What the model sees of each entry (``sessionEntryToContextMessages`` and ``convertToLlm``)
is its normalized view: ``message`` entries by role (``user``, ``assistant`` with ``text``,
``thinking`` and ``toolCall`` blocks, ``toolResult``, ``bashExecution``, ``custom``), and the
summaries of ``compaction`` and ``branch_summary`` entries and the content of ``custom_message``
entries as the user text Pi sends. The system prompt Pi stores (a ``system`` message),
``model_change``, ``thinking_level_change``, ``label``, ``session_info``, ``custom``, ``usage``,
``context_edit`` and any type this does not know are bookkeeping (``meta``), kept as they are.

Pure: no store, no environment, no printing.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterator, Mapping, Sequence

from opalgit import jsonl
from opalgit.agents.base import (
    CERTAIN,
    LineIndex,
    NotThisAgent,
    ReadResult,
    Record,
    SessionFacts,
    View,
    not_json_at_first,
    open_session,
    parse_time,
    sniff_lines,
)
from opalgit.agents.pi.files import AGENT
from opalgit.history.model import Normal

__all__ = ["BRANCH_SUMMARY_PREFIX", "COMPACTION_SUMMARY_PREFIX", "claim", "normalize_record", "read", "sniff"]

STATE_VERSION = 1
OWN = "a Pi session"
HINT = "give the path of a .jsonl file under ~/.pi/agent/sessions"

#: The entry types Pi 1.6 writes after the header (``SessionEntry`` in session-manager.d.ts).
ENTRY_TYPES = frozenset(
    """message thinking_level_change model_change usage compaction branch_summary custom custom_message
    context_edit label session_info""".split()
)
#: What Pi puts around a summary when it sends it to the model (core/messages.js).
COMPACTION_SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUMMARY_SUFFIX = "</summary>"

_ENTRY_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{3,63}$")


def is_header(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "session" and isinstance(value.get("id"), str)


def claim(obj: Any) -> float:
    """How surely one parsed line is Pi's: a header, or an entry of a type Pi writes with
    an ``id`` and a ``parentId`` key."""
    if not isinstance(obj, dict):
        return 0.0
    if is_header(obj) and isinstance(obj.get("cwd"), str) and isinstance(obj.get("timestamp"), str):
        return 0.95 * CERTAIN
    if obj.get("type") in ENTRY_TYPES and isinstance(obj.get("id"), str) and _ENTRY_ID.match(obj["id"]) \
            and "parentId" in obj and isinstance(obj.get("timestamp"), str):
        return 0.8
    return 0.0


def sniff(path: str, head: bytes) -> float:
    return sniff_lines(head, claim)


# --------------------------------------------------------------------------- normalizing


def _image(blk: Mapping[str, Any]) -> dict:
    return {"type": "image", "media_type": blk.get("mimeType") or "image/png", "data": blk.get("data") or ""}


def _content_blocks(content: Any) -> list[dict]:
    """User-side content (a string, or text and image blocks) as normalized blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    out: list[dict] = []
    for blk in content if isinstance(content, list) else ():
        if not isinstance(blk, dict):
            continue
        if blk.get("type") == "text":
            out.append({"type": "text", "text": str(blk.get("text") or "")})
        elif blk.get("type") == "image":
            out.append(_image(blk))
        else:
            out.append({"type": "other", "kind": str(blk.get("type"))})
    return out


def _assistant_blocks(content: Any) -> list[dict]:
    out: list[dict] = []
    for blk in content if isinstance(content, list) else _content_blocks(content):
        if not isinstance(blk, dict):
            continue
        kind = blk.get("type")
        if kind == "text":
            out.append({"type": "text", "text": str(blk.get("text") or "")})
        elif kind == "thinking":
            r: dict[str, Any] = {"type": "reasoning", "text": str(blk.get("thinking") or "")}
            if blk.get("thinkingSignature"):
                r["signed"] = True
            if blk.get("redacted"):
                r["redacted"] = True
            out.append(r)
        elif kind == "toolCall":
            out.append({"type": "tool_call", "id": blk.get("id"), "name": blk.get("name"),
                        "input": blk.get("arguments")})
        elif kind == "image":
            out.append(_image(blk))
        else:
            out.append({"type": "other", "kind": str(kind)})
    return out


def _result_output(content: Any) -> str | list:
    blocks = _content_blocks(content)
    if all(b["type"] == "text" for b in blocks):
        return "\n".join(b["text"] for b in blocks)
    return blocks


def bash_text(msg: Mapping[str, Any]) -> str:
    """A ``bashExecution`` message (the user ran ``!cmd``) as the text Pi sends the model."""
    text = f"Ran `{msg.get('command')}`\n"
    text += f"```\n{msg['output']}\n```" if msg.get("output") else "(no output)"
    if msg.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif msg.get("exitCode") not in (None, 0):
        text += f"\n\nCommand exited with code {msg.get('exitCode')}"
    if msg.get("truncated") and msg.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {msg.get('fullOutputPath')}]"
    return text


def _message(msg: Any, time: int | None) -> Normal:
    if not isinstance(msg, dict):
        return Normal(role="meta", time=time, label="message:malformed")
    role = msg.get("role")
    if role == "user":
        return Normal(role="user", blocks=_content_blocks(msg.get("content")), time=time)
    if role == "assistant":
        return Normal(role="assistant", blocks=_assistant_blocks(msg.get("content")), time=time)
    if role == "toolResult":
        block = {"type": "tool_result", "call_id": msg.get("toolCallId"), "output": _result_output(msg.get("content")),
                 "is_error": msg.get("isError") is True}
        if isinstance(msg.get("toolName"), str):
            block["name"] = msg["toolName"]
        return Normal(role="tool", blocks=[block], time=time)
    if role == "bashExecution":
        if msg.get("excludeFromContext"):
            return Normal(role="meta", time=time, label="bash:excluded")
        return Normal(role="user", blocks=[{"type": "text", "text": bash_text(msg)}], time=time)
    if role == "custom":
        return Normal(role="user", blocks=_content_blocks(msg.get("content")), time=time)
    if role == "system":
        return Normal(role="meta", time=time, label="system-prompt")
    return Normal(role="meta", time=time, label=f"message:{role}")


def normalize_record(rec: Any) -> Normal:
    """The normalized view of one line of a Pi session."""
    if not isinstance(rec, dict):
        return Normal(role="meta", label="unknown")
    kind = rec.get("type")
    time = parse_time(rec.get("timestamp"))
    if kind == "message":
        return _message(rec.get("message"), time)
    if kind == "compaction" and isinstance(rec.get("summary"), str):
        text = COMPACTION_SUMMARY_PREFIX + rec["summary"] + COMPACTION_SUMMARY_SUFFIX
        return Normal(role="user", blocks=[{"type": "text", "text": text}], time=time)
    if kind == "branch_summary" and isinstance(rec.get("summary"), str) and rec["summary"]:
        text = BRANCH_SUMMARY_PREFIX + rec["summary"] + BRANCH_SUMMARY_SUFFIX
        return Normal(role="user", blocks=[{"type": "text", "text": text}], time=time)
    if kind == "custom_message":
        return Normal(role="user", blocks=_content_blocks(rec.get("content")), time=time)
    if kind == "custom" and isinstance(rec.get("customType"), str):
        return Normal(role="meta", time=time, label=f"custom:{rec['customType']}")
    return Normal(role="meta", time=time, label=str(kind) if isinstance(kind, str) else "unknown")


class _Facts(SessionFacts):
    """The session as its lines tell it: the header's id and cwd, the last model, the name."""

    AGENT = AGENT

    def feed(self, rec: Mapping[str, Any]) -> None:
        kind = rec.get("type")
        if kind == "session":
            if self.id is None and isinstance(rec.get("id"), str):
                self.id = rec["id"]
                self.cwd = rec.get("cwd") if isinstance(rec.get("cwd"), str) else None
        elif kind == "model_change" and isinstance(rec.get("modelId"), str):
            self.model = rec["modelId"]
        elif kind == "message" and isinstance(rec.get("message"), dict):
            msg = rec["message"]
            if msg.get("role") == "assistant" and isinstance(msg.get("model"), str):
                self.model = msg["model"]
        elif kind == "session_info" and isinstance(rec.get("name"), str):
            self.title = rec["name"] or None


# -------------------------------------------------------------------------------- the tree


def _link(value: Any) -> tuple[str, str | None] | None:
    """``(id, parentId)`` of an entry line; None for the header and anything without an id."""
    if not isinstance(value, dict) or value.get("type") == "session" or not isinstance(value.get("id"), str):
        return None
    parent = value.get("parentId")
    return value["id"], parent if isinstance(parent, str) else None


def _ancestry(parent: Mapping[str, str | None], node: str) -> set[str]:
    out = {node}
    p = parent.get(node)
    while p is not None and p not in out:
        out.add(p)
        p = parent.get(p)
    return out


def _hint(leaf: str, used: set[str]) -> str:
    hint = "fork-" + (re.sub(r"[^A-Za-z0-9]+", "-", leaf).strip("-")[:16] or "leaf")
    k, out = 2, hint
    while out in used:
        out, k = f"{hint}-{k}", k + 1
    return out


def views_of(links: Sequence[tuple[str, str | None] | None]) -> tuple[list[View], str | None]:
    """The views of a whole file (one link per line, None for lines that are no entry) and
    the leaf Pi resumes: the last entry's line first, then the other child-less entries'
    lines in file order. A view holds its entries and the lines that are no entry before
    its last one (the header, blank and unparseable lines)."""
    parent: dict[str, str | None] = {}
    for link in links:
        if link is not None:
            parent[link[0]] = link[1]
    if not parent:
        return [View(indices=list(range(len(links))), leaf=None, name_hint=None)], None
    active = next(link[0] for link in reversed(links) if link is not None)
    parents = {p for p in parent.values() if p is not None}
    leaves: list[str] = []
    for link in links:
        if link is not None and link[0] not in parents and link[0] != active and link[0] not in leaves:
            leaves.append(link[0])
    views = [View(indices=_indices(links, _ancestry(parent, active), whole=True), leaf=active, name_hint=None)]
    used: set[str] = set()
    for leaf in leaves:
        hint = _hint(leaf, used)
        used.add(hint)
        views.append(View(indices=_indices(links, _ancestry(parent, leaf), whole=False), leaf=leaf, name_hint=hint))
    return views, active


def _indices(links: Sequence[tuple[str, str | None] | None], anc: set[str], whole: bool) -> list[int]:
    mine = [i for i, link in enumerate(links) if link is not None and link[0] in anc]
    last = len(links) if whole else (mine[-1] if mine else -1)
    return sorted(set(mine) | {i for i, link in enumerate(links) if link is None and i < last})


def _extends(links: Sequence[tuple[str, str | None] | None], values_header: bool, leaf: str | None) -> str | None | bool:
    """The new leaf when the new lines only go on from ``leaf`` (each entry the child of the
    one before), else False: the caller reads the whole file again."""
    if values_header:
        return False
    for link in links:
        if link is None:
            continue
        if link[1] != leaf:
            return False
        leaf = link[0]
    return leaf


# ------------------------------------------------------------------------------- reading


def _open(path: str):
    return open_session(path, HINT, buffering=1 << 20)


def read(path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
    """Read in two passes (the records are produced lazily, so memory stays flat); a file
    whose first JSON line is not a Pi header raises :class:`~.base.NotThisAgent`."""
    full = start == 0
    old = {} if full else dict(state or {})
    facts = _Facts(old.get("info"))
    with _open(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if full:
            jsonl.sniff_binary(path, fh.read(4096))
        elif start > size:
            note = f"{path}: the file is shorter than what was already imported; it will be read again"
            return ReadResult(facts.session(), [], [], old, start, first_line - 1, [note], extends=False)
        index = LineIndex(start, first_line - 1)
        links: list[tuple[str, str | None] | None] = []
        header_seen = False
        for line, value in index.scan(fh, path, start, first_line, full,
                                      lambda n, why: not_json_at_first(path, n, why, OWN, HINT)):
            if full and not links and not header_seen and not is_header(value):
                raise NotThisAgent("the first line is not a Pi session header ({\"type\": \"session\", \"id\", ...})",
                                   path=path, line=line.number, hint=HINT, own=OWN, named_line=line.number)
            if is_header(value):
                header_seen = True
            if isinstance(value, dict):
                facts.feed(value)
            links.append(_link(value))
        links = index.per_line(links, None)
        index.end_of_pass(fh, path, full,
                          "Pi writes the file after the first message; try again after it")
    warnings = index.warnings
    if full:
        views, leaf = views_of(links)
        extends = False
    else:
        grown = _extends(links, header_seen, old.get("leaf"))
        extends = grown is not False
        leaf = grown if extends else old.get("leaf")  # type: ignore[assignment]
        views = [View(indices=list(range(len(links))), leaf=leaf, name_hint=None)] if extends else []
    new_state = {"v": STATE_VERSION, "info": facts.saved(), **({"leaf": leaf} if leaf is not None else {})}

    def produce(indices: Sequence[int] | None) -> Iterator[Record]:
        return index.records(lambda: _open(path), path, AGENT, first_line, indices,
                             lambda i, value: normalize_record(value))

    return ReadResult(facts.session(), None, views, new_state, index.end, index.lines, warnings, extends,
                      produce=produce, count=len(index))

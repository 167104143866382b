"""Reading Codex CLI rollouts: parsing and normalizing their lines.

A Codex session ("thread") is one JSON-lines rollout file under
``<home>/sessions/YYYY/MM/DD/`` (or ``archived_sessions/``), plain or ``.jsonl.zst``.
Every line is kept as one record, in file order, whatever its type, so writing the
records back reproduces the file byte for byte (non-JSON and blank lines are kept as
their exact bytes). A rollout is linear: it is one :class:`~.base.View`. Codex's own
rewinds are ``thread_rolled_back`` events that Codex applies when it resumes; opal
keeps them as records and does not apply them, so the view still shows the turns
they roll back. Paginated (``ordinal``) and legacy lines may be mixed in one file.

The model sees ``response_item`` lines; ``event_msg`` lines repeat the conversation
for the UI and are ``meta`` here, so nothing is counted twice. Normalized blocks use
the shared vocabulary (see :mod:`opalgit.agents.claude.read`): ``text``, ``image``, ``reasoning``
(``signed`` when OpenAI's ``encrypted_content`` is present), ``tool_call`` (``input``
is the parsed arguments object, or the raw string for freeform tools),
``tool_result`` and ``other``.

Reading takes two passes so that memory does not grow with the rollout (see
:func:`read`). Where rollouts are is :mod:`.files`; writing them (export, and
rewriting tool outputs for ``opal trim``), :mod:`.write`.

Pure: no store, no environment reads (the mapping is passed in), no printing.
"""

from __future__ import annotations

import io
import json
import os
import re
from typing import Any, Iterator, Mapping, Sequence

from opalgit import jsonl
from opalgit.agents.base import (
    CERTAIN,
    LineIndex,
    ReadResult,
    Record,
    View,
    check_shape,
    not_json_at_first,
    parse_time,
    reopen,
    sniff_lines,
)
from opalgit.agents.codex.files import decompressed_head, is_zst, open_rollout, rollout_name
from opalgit.agents.codex.format import (
    AGENT,
    CALLS,
    CONTEXT_PREFIXES,
    ITEM_KINDS,
    OUTPUTS,
    REQUEST_MARKER,
    ROLLOUT_KINDS,
    is_str,
)
from opalgit.agents.codex.threads import child_threads
from opalgit.errors import InputError
from opalgit.history.model import Normal, SessionInfo

__all__ = ["claim", "claim_cut", "normalize_record", "parse_time", "read", "sniff"]

STATE_VERSION = 1
_SHAPE_LINES = 64
#: What a refusal calls the file it expected.
OWN = "a Codex CLI rollout"
_CUT_LINE_RE = re.compile(rb'^\{"timestamp":"[^"]*",(?:"ordinal":\d+,)?"type":"([a-z_]+)","payload":')


# ------------------------------------------------------------------------ small helpers


def claim(obj: Any) -> float:
    """How surely a parsed line is a rollout line (see :func:`~.base.sniff_lines`): certain
    for a RolloutItem envelope (a kind and its payload) or the header line of 2025
    rollouts; less for an envelope of a kind this opal does not know, and for the bare
    items and state records older rollouts wrote."""
    if not isinstance(obj, dict):
        return 0.0
    kind = obj.get("type")
    if isinstance(kind, str) and "payload" in obj and ("timestamp" in obj or kind in ROLLOUT_KINDS):
        return CERTAIN if kind in ROLLOUT_KINDS else 0.75
    if "id" in obj and "timestamp" in obj and "instructions" in obj:
        return CERTAIN
    if "record_type" in obj or (kind in ITEM_KINDS and ("role" in obj or "call_id" in obj or "summary" in obj)):
        return 0.75
    return 0.0


def claim_cut(raw: bytes) -> float:
    """A rollout line the head cut short: its envelope's start names a RolloutItem kind."""
    m = _CUT_LINE_RE.match(raw.lstrip())
    return CERTAIN if m and m.group(1).decode() in ROLLOUT_KINDS else 0.0


def sniff(path: str, head: bytes) -> float:
    """How surely a file whose first bytes are ``head`` is a rollout (a ``.zst`` one's text)."""
    if is_zst(path, head):
        head = decompressed_head(path, head)
        if head is None:
            return 0.0
    return sniff_lines(head, claim, claim_cut)


# -------------------------------------------------------------------------- normalizing


def _image(url: Any) -> dict:
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        head, _, data = url.partition(";base64,")
        return {"type": "image", "media_type": head[len("data:") :] or None, "data": data}
    return {"type": "image", "url": url}


def _block(item: Any) -> dict:
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if not isinstance(item, dict):
        return {"type": "other", "kind": type(item).__name__}
    kind = item.get("type")
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        text = item.get("text")
        return {"type": "text", "text": text if isinstance(text, str) else ""}
    if kind == "input_image":
        return _image(item.get("image_url"))
    return {"type": "other", "kind": kind if isinstance(kind, str) else "unknown"}


def _blocks(content: Any) -> list[dict]:
    if content is None:
        return []
    if isinstance(content, (str, dict)):
        return [_block(content)]
    if isinstance(content, list):
        return [_block(x) for x in content]
    return [{"type": "other", "kind": type(content).__name__}]


def _output(out: Any) -> str | list:
    """A tool output as a string or a list of blocks (string / content items / ``{content, success}``)."""
    if out is None:
        return ""
    if isinstance(out, str):
        return out
    if isinstance(out, dict) and "type" not in out and ("content" in out or "output" in out):
        return _output(out.get("content", out.get("output")))
    if isinstance(out, (list, dict)) and (isinstance(out, list) or "type" in out):
        return _blocks(out)
    return jsonl.dumps(out).decode("utf-8", "surrogatepass")


def _is_error(out: Any) -> bool:
    """True only when the output says so in a structured way."""
    if isinstance(out, dict):
        return out.get("success") is False
    if isinstance(out, str) and out.startswith("{") and '"exit_code"' in out:
        try:
            meta = json.loads(out).get("metadata")
        except (ValueError, AttributeError, RecursionError):
            return False
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        return isinstance(code, int) and not isinstance(code, bool) and code != 0
    return False


def _arguments(args: Any) -> Any:
    if isinstance(args, str):
        try:
            value = json.loads(args)
        except (ValueError, RecursionError):
            return args
        return value if isinstance(value, dict) else args
    return args


def _is_context(blocks: list[dict]) -> bool:
    texts = [b["text"] for b in blocks if b.get("type") == "text"]
    if not texts:
        return False
    return texts[0].lstrip().startswith(CONTEXT_PREFIXES) or any(REQUEST_MARKER in t for t in texts)


def _item_normal(p: Mapping[str, Any], t: int | None, prefix: str) -> Normal:
    """The normalized view of one ResponseItem (or an older top-level item)."""
    kind = p.get("type")
    if kind == "message" or (kind is None and p.get("role") in ("user", "assistant", "developer", "system")):
        role = p.get("role")
        blocks = _blocks(p.get("content", p.get("message")))
        if role == "assistant":
            return Normal("assistant", blocks, t)
        if role == "user" and not _is_context(blocks):
            return Normal("user", blocks, t)
        if role in ("user", "developer", "system"):
            return Normal("meta", blocks, t, "codex:context")
        return Normal("meta", blocks, t, f"message:{role if isinstance(role, str) else 'unknown'}")
    if kind == "reasoning":
        parts = []
        for key in ("summary", "content"):
            seq = p.get(key)
            for item in seq if isinstance(seq, list) else []:
                text = item.get("text") if isinstance(item, dict) else None
                if isinstance(text, str):
                    parts.append(text)
        block: dict[str, Any] = {"type": "reasoning", "text": "\n".join(parts)}
        if is_str(p.get("encrypted_content")):
            block["signed"] = True
        return Normal("assistant", [block], t)
    if kind in CALLS:
        fn = p.get("function")
        name = p.get("name") if "name" in p else (fn.get("name") if isinstance(fn, dict) else None)
        if kind == "custom_tool_call":
            inp = p.get("input")
        elif kind == "local_shell_call":
            name, inp = "local_shell", p.get("action")
        elif kind == "tool_search_call":
            name, inp = "tool_search", p.get("arguments")
        else:
            inp = _arguments(p.get("arguments"))
        call_id = p.get("call_id") if "call_id" in p else p.get("id")
        return Normal("assistant", [{"type": "tool_call", "id": call_id, "name": name, "input": inp}], t)
    if kind in OUTPUTS:
        raw = p.get("tools") if kind == "tool_search_output" else p.get("output", p.get("result"))
        if kind == "tool_search_output":
            out: str | list = jsonl.dumps(raw).decode("utf-8", "surrogatepass") if raw is not None else ""
        else:
            out = _output(raw)
        block = {"type": "tool_result", "call_id": p.get("call_id"), "output": out, "is_error": _is_error(raw)}
        if kind in ("tool_result", "function_result") and isinstance(p.get("name"), str):
            block["name"] = p["name"]
        return Normal("tool", [block], t)
    if kind == "web_search_call":
        # A built-in tool run by the API: the item is both the call and its outcome (the
        # results reach the model inside the API, and only the UI event lists them).
        ident = p.get("call_id") or p.get("id")
        action = p.get("action") if isinstance(p.get("action"), dict) else {}
        status = p.get("status") if isinstance(p.get("status"), str) else "completed"
        outcome = jsonl.dumps({"status": status, **action}).decode("utf-8", "surrogatepass")
        return Normal("assistant", [{"type": "tool_call", "id": ident, "name": "web_search", "input": action},
                                    {"type": "tool_result", "call_id": ident, "output": outcome,
                                     "is_error": status not in ("completed", "in_progress", "searching")}], t)
    if kind == "image_generation_call":
        return Normal("assistant", [{"type": "other", "kind": kind}], t)
    return Normal("meta", time=t, label=f"{prefix}:{kind}" if isinstance(kind, str) else prefix)


def normalize_record(rec: Any) -> Normal:
    """The normalized view of one parsed rollout line."""
    if not isinstance(rec, dict):
        return Normal(role="meta", label="non-object")
    t = parse_time(rec.get("timestamp", rec.get("created_at")))
    kind = rec.get("type")
    payload = rec.get("payload")
    if isinstance(kind, str) and "payload" in rec:
        if kind == "response_item" and isinstance(payload, dict):
            return _item_normal(payload, t, "response_item")
        sub = payload.get("type") if isinstance(payload, dict) else None
        return Normal(role="meta", time=t, label=f"{kind}:{sub}" if is_str(sub) else kind)
    if "id" in rec and "instructions" in rec and "payload" not in rec:
        return Normal(role="meta", time=t, label="session_meta:legacy")
    if "record_type" in rec:
        return Normal(role="meta", time=t, label=f"state:{rec['record_type']}")
    if kind in ITEM_KINDS or kind in CALLS or kind in OUTPUTS or (kind is None and "role" in rec):
        return _item_normal(rec, t, "item")
    return Normal(role="meta", time=t, label=kind if is_str(kind) else "unknown")


# ------------------------------------------------------------------------ session info


class _Info:
    """Accumulates :class:`SessionInfo` over records; serializable into the state."""

    FIELDS = ("id", "cwd", "git_branch", "model", "title", "version")

    def __init__(self, saved: Mapping[str, Any] | None = None) -> None:
        s = dict(saved or {})
        self.values: dict[str, str] = {k: s[k] for k in self.FIELDS if is_str(s.get(k))}

    def feed(self, rec: Mapping[str, Any]) -> None:
        v = self.values
        kind = rec.get("type")
        p = rec.get("payload")
        p = p if isinstance(p, dict) else {}
        if kind == "session_meta":
            # The first session_meta is the thread's; later ones are copied from forks' parents.
            if "id" not in v and is_str(p.get("id")):
                v["id"] = p["id"]
                for key, src in (("cwd", p.get("cwd")), ("version", p.get("cli_version"))):
                    if is_str(src):
                        v[key] = src
                git = p.get("git")
                if isinstance(git, dict) and is_str(git.get("branch")):
                    v["git_branch"] = git["branch"]
        elif kind == "turn_context":
            if is_str(p.get("model")):
                v["model"] = p["model"]
            if "cwd" not in v and is_str(p.get("cwd")):
                v["cwd"] = p["cwd"]
        elif kind == "event_msg" and p.get("type") == "thread_name_updated" and is_str(p.get("thread_name")):
            v["title"] = p["thread_name"]
        elif "payload" not in rec and "instructions" in rec and is_str(rec.get("id")):
            v.setdefault("id", rec["id"])

    def session(self, path: str) -> SessionInfo:
        sid = self.values.get("id")
        if sid is None:
            named = rollout_name(path)
            sid = named[0] if named else os.path.basename(path).split(".", 1)[0]
        return SessionInfo(agent=AGENT, id=sid, cwd=self.values.get("cwd"), git_branch=self.values.get("git_branch"),
                           model=self.values.get("model"), title=self.values.get("title"),
                           version=self.values.get("version"))


# ------------------------------------------------------------------------------ reading


def read(path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
    """Read in two passes, so that memory does not grow with the rollout (as the
    Claude adapter does): the first parses every line but keeps only its offset,
    CRC-32 and kind, and feeds the session info; the result produces the records
    by reading the lines again, one at a time (:meth:`ReadResult.iter_records`).
    A file that is not a rollout raises :class:`~.base.NotThisAgent`."""
    full = start == 0
    fh = open_rollout(path)
    with fh:
        size = fh.seek(0, os.SEEK_END)
        if full:
            if size == 0:
                raise InputError("the session file is empty", path=path,
                                 hint="Codex has not written anything yet; try again after its first reply")
            fh.seek(0)
            jsonl.sniff_binary(path, fh.read(4096))
        elif start > size:
            return ReadResult(
                session=_Info((state or {}).get("info")).session(path), records=[], views=[],
                state=dict(state or {}), end=start, lines=first_line - 1, extends=False,
                warnings=[f"{path}: the file is shorter than what was already imported; it will be read again"],
            )
        info = _Info(None if full else (state or {}).get("info"))
        index = LineIndex(start, first_line - 1)
        judged: list[tuple[int, bool]] = []  # (line, Codex's) of the first JSON lines
        for line, value in index.scan(fh, path, start, first_line, full,
                                      lambda n, why: _first_line_error(path, n, why)):
            if isinstance(value, dict):
                info.feed(value)
            if full and len(judged) < _SHAPE_LINES:
                judged.append((line.number, claim(value) > 0))
        if size > index.end:
            index.warnings.append(f"{path}:{index.lines + 1}: incomplete last line (Codex may still be "
                                  "writing); it will be committed next time")
        # A .zst rollout was decompressed into memory: the records are read from
        # that copy again (a plain file is opened again instead).
        data = fh.getvalue() if isinstance(fh, io.BytesIO) else None
    if full:
        _check_shape(path, judged)
    session = info.session(path)

    def produce(indices: Sequence[int] | None) -> Iterator[Record]:
        again = (lambda: io.BytesIO(data)) if data is not None else (lambda: reopen(path))
        return index.records(again, path, AGENT, first_line, indices, lambda i, value: normalize_record(value))

    count = len(index)
    out = ReadResult(
        session=session,
        views=[View(indices=list(range(count)))],
        state={"v": STATE_VERSION, "info": {k: v for k, v in session.to_map().items() if k != "agent"}},
        end=index.end,
        lines=index.lines,
        warnings=index.warnings,
        # Codex only appends: once the caller has verified the prefix, new lines extend it.
        extends=not full,
        produce=produce,
        count=count,
    )
    # The rollouts of the sub-agents it spawned are part of the session (.threads).
    out.side = child_threads(path, session.id, out.warnings)
    return out


def _first_line_error(path: str, line: int, problem: str) -> InputError:
    return not_json_at_first(path, line, problem, OWN, "give the path of a rollout-*.jsonl file under ~/.codex/sessions")


def _check_shape(path: str, judged: list[tuple[int, bool]]) -> None:
    """Refuse files that hold no Codex line near the top (:func:`~.base.check_shape`)."""
    check_shape(path, judged, "this JSON-lines file has no Codex CLI rollout lines (no type with a payload)",
                "give the path of a rollout-*.jsonl file under ~/.codex/sessions, or pick the right --agent", OWN)

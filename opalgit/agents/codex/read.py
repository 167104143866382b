"""The Codex CLI adapter: finds, reads and normalizes ``~/.codex`` rollouts.

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
the shared vocabulary (see :mod:`.claude`): ``text``, ``image``, ``reasoning``
(``signed`` when OpenAI's ``encrypted_content`` is present), ``tool_call`` (``input``
is the parsed arguments object, or the raw string for freeform tools),
``tool_result`` and ``other``.

Reading takes two passes so that memory does not grow with the rollout (see
:meth:`CodexAdapter.read`). Writing rollouts (export, and rewriting tool outputs for
``opal trim``) lives in :mod:`.codex_export`; :class:`CodexAdapter` delegates to it.

Pure: no store, no environment reads (the mapping is passed in), no printing.
"""

from __future__ import annotations

import io
import json
import os
import re
from typing import IO, Any, Iterator, Mapping, Sequence

from opalgit import codec, jsonl
from opalgit.agents.base import (
    FILE_KINDS,
    Adapter,
    ExportRequest,
    ExportResult,
    LineIndex,
    ReadResult,
    Record,
    SessionFile,
    View,
    bare_reason,
    foreign_file,
    open_session,
    parse_time,
    reopen,
)
from opalgit.errors import CorruptObjectError, InputError
from opalgit.history.model import Normal, SessionInfo, Turn

__all__ = ["CodexAdapter", "codex_home", "normalize_record", "parse_time", "rollout_name", "DEFAULT_CLI_VERSION", "DANGLING_OUTPUT"]

AGENT = "codex"
STATE_VERSION = 1
#: ``cli_version`` written when the source is not a Codex session (the pinned CLI).
DEFAULT_CLI_VERSION = "0.169.0"
ORIGINATOR = "codex_cli_rs"
DANGLING_OUTPUT = "[opal: this tool call has no recorded result]"

#: RolloutItem kinds (formats.md §1.3); a line of another ``type`` with a payload is still Codex's.
ROLLOUT_KINDS = frozenset(
    """session_meta response_item event_msg turn_context compacted world_state security_risk_score
    inter_agent_communication inter_agent_communication_metadata token_usage_record retained_context
    realtime_item""".split()
)
#: Item types older rollouts wrote at the top level, without the envelope.
_ITEM_KINDS = frozenset(
    """message reasoning function_call function_call_output custom_tool_call custom_tool_call_output
    local_shell_call local_shell_call_output tool_search_call tool_search_output web_search_call
    image_generation_call""".split()
)
_CALLS = ("function_call", "custom_tool_call", "local_shell_call", "tool_search_call", "tool_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output", "tool_search_output",
            "tool_result", "function_result")
#: User-role text Codex injects itself (formats.md §1.11); such messages are ``meta``.
CONTEXT_PREFIXES = (
    "<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<permissions instructions>",
    "<skills_instructions>", "<collaboration_mode>", "<personality_spec>", "<turn_aborted>",
    "<subagent_notification>", "<realtime_conversation>", "<apps_instructions>", "<plugins_instructions>",
)
REQUEST_MARKER = "## My request for Codex:"

_SHAPE_LINES = 64
_HEAD_LIMITS = (256 * 1024, 16 * 1024 * 1024)
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_MAX_ZST = 1 << 31
_ID_KEYS = ("uuid", "parentUuid", "sessionId", "leafUuid", "logicalParentUuid")
_CUT_LINE_RE = re.compile(rb'^\{"timestamp":"[^"]*",(?:"ordinal":\d+,)?"type":"([a-z_]+)","payload":')
_NAME_RE = re.compile(r"^rollout-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2})-(.+?)\.jsonl(\.zst)?$")


# ------------------------------------------------------------------------ small helpers


def _is_str(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _classify(obj: Any) -> str | None:
    """Which agent wrote this JSON line: "codex", "claude", "gemini", or None."""
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if isinstance(kind, str) and any(k in obj for k in _ID_KEYS):
        return "claude"
    if "projectHash" in obj or "$set" in obj or any(isinstance(obj.get(k), list) for k in ("messages", "history")):
        return "gemini"
    if isinstance(kind, str) and "payload" in obj and ("timestamp" in obj or kind in ROLLOUT_KINDS):
        return "codex"
    if "id" in obj and "timestamp" in obj and "instructions" in obj:
        return "codex"  # the header line of 2025 rollouts
    if "record_type" in obj or (kind in _ITEM_KINDS and ("role" in obj or "call_id" in obj or "summary" in obj)):
        return "codex"
    return None


def rollout_name(path: str) -> tuple[str, str | None] | None:
    """``(thread id, rollout id or None)`` from a ``rollout-<ts>-<thread>[_<rollout>].jsonl[.zst]`` name."""
    m = _NAME_RE.match(os.path.basename(path))
    if not m:
        return None
    thread, _, rollout = m.group(2).partition("_")
    return thread, rollout or None


def codex_home(env: Mapping[str, str]) -> str | None:
    """``$CODEX_HOME`` when set and non-empty, else ``$HOME/.codex``; None without either."""
    home = env.get("CODEX_HOME")
    if home:
        return home
    user = env.get("HOME") or env.get("USERPROFILE")
    return os.path.join(user, ".codex") if user else None


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
        if _is_str(p.get("encrypted_content")):
            block["signed"] = True
        return Normal("assistant", [block], t)
    if kind in _CALLS:
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
    if kind in _OUTPUTS:
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
        return Normal(role="meta", time=t, label=f"{kind}:{sub}" if _is_str(sub) else kind)
    if "id" in rec and "instructions" in rec and "payload" not in rec:
        return Normal(role="meta", time=t, label="session_meta:legacy")
    if "record_type" in rec:
        return Normal(role="meta", time=t, label=f"state:{rec['record_type']}")
    if kind in _ITEM_KINDS or kind in _CALLS or kind in _OUTPUTS or (kind is None and "role" in rec):
        return _item_normal(rec, t, "item")
    return Normal(role="meta", time=t, label=kind if _is_str(kind) else "unknown")


# ------------------------------------------------------------------------ session info


class _Info:
    """Accumulates :class:`SessionInfo` over records; serializable into the state."""

    FIELDS = ("id", "cwd", "git_branch", "model", "title", "version")

    def __init__(self, saved: Mapping[str, Any] | None = None) -> None:
        s = dict(saved or {})
        self.values: dict[str, str] = {k: s[k] for k in self.FIELDS if _is_str(s.get(k))}

    def feed(self, rec: Mapping[str, Any]) -> None:
        v = self.values
        kind = rec.get("type")
        p = rec.get("payload")
        p = p if isinstance(p, dict) else {}
        if kind == "session_meta":
            # The first session_meta is the thread's; later ones are copied from forks' parents.
            if "id" not in v and _is_str(p.get("id")):
                v["id"] = p["id"]
                for key, src in (("cwd", p.get("cwd")), ("version", p.get("cli_version"))):
                    if _is_str(src):
                        v[key] = src
                git = p.get("git")
                if isinstance(git, dict) and _is_str(git.get("branch")):
                    v["git_branch"] = git["branch"]
        elif kind == "turn_context":
            if _is_str(p.get("model")):
                v["model"] = p["model"]
            if "cwd" not in v and _is_str(p.get("cwd")):
                v["cwd"] = p["cwd"]
        elif kind == "event_msg" and p.get("type") == "thread_name_updated" and _is_str(p.get("thread_name")):
            v["title"] = p["thread_name"]
        elif "payload" not in rec and "instructions" in rec and _is_str(rec.get("id")):
            v.setdefault("id", rec["id"])

    def session(self, path: str) -> SessionInfo:
        sid = self.values.get("id")
        if sid is None:
            named = rollout_name(path)
            sid = named[0] if named else os.path.basename(path).split(".", 1)[0]
        return SessionInfo(agent=AGENT, id=sid, cwd=self.values.get("cwd"), git_branch=self.values.get("git_branch"),
                           model=self.values.get("model"), title=self.values.get("title"),
                           version=self.values.get("version"))


# ----------------------------------------------------------------------------- files


def _is_zst(path: str, head: bytes = b"") -> bool:
    return path.endswith(".zst") or head.startswith(_ZSTD_MAGIC)


def _first_line(path: str) -> Any:
    """The parsed first non-empty line of a rollout (plain or zst), or None."""
    try:
        with open(path, "rb") as fh:
            if path.endswith(".zst"):
                data = fh.read(4 << 20)
                for limit in _HEAD_LIMITS:
                    text = codec.zstd_decompress(data, limit=limit)
                    lines = [ln for ln in text.split(b"\n")[:-1] if ln.strip()]
                    if lines or len(text) < limit:
                        return jsonl.parse(lines[0]) if lines else None
                return None
            while True:
                raw = fh.readline(_HEAD_LIMITS[-1])
                if not raw or not raw.endswith(b"\n"):
                    return None
                if raw.strip():
                    return jsonl.parse(raw[:-1])
    except (OSError, jsonl.ParseFailure, CorruptObjectError):
        return None


def _rollouts(home: str) -> Iterator[str]:
    """Rollout files under ``sessions/`` and ``archived_sessions/``; plain wins over ``.zst``."""
    for sub in ("sessions", "archived_sessions"):
        for folder, dirs, files in os.walk(os.path.join(home, sub)):
            dirs.sort()
            names = set(files)
            for name in sorted(files):
                if not name.startswith("rollout-"):
                    continue
                if name.endswith(".jsonl") or (name.endswith(".jsonl.zst") and name[:-4] not in names):
                    yield os.path.join(folder, name)


def _session_file(sid: str, path: str) -> SessionFile | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return SessionFile(AGENT, sid, path, st.st_mtime, st.st_size)


# ---------------------------------------------------------------------------- adapter


class CodexAdapter(Adapter):
    """Codex CLI: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl``."""

    name = "codex"
    title = "Codex CLI"

    # -- discovery ----------------------------------------------------------------

    def find_sessions(self, cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
        home = codex_home(env)
        if home is None or not os.path.isdir(home):
            return []
        wanted = {cwd.rstrip("/") or "/"}
        try:
            wanted.add(os.path.realpath(cwd))
        except (OSError, ValueError):
            pass
        found = []
        for path in _rollouts(home):
            head = _first_line(path)
            if not isinstance(head, dict) or head.get("type") != "session_meta":
                continue
            p = head.get("payload")
            if not isinstance(p, dict) or not _is_str(p.get("cwd")) or (p["cwd"].rstrip("/") or "/") not in wanted:
                continue
            named = rollout_name(path)
            sid = p["id"] if _is_str(p.get("id")) else (named[0] if named else os.path.basename(path))
            sf = _session_file(sid, path)
            if sf is not None:
                found.append(sf)
        return sorted(found, key=lambda s: (-s.mtime, s.path))

    def find_session(self, session_id: str, env: Mapping[str, str]) -> SessionFile | None:
        sid = session_id
        for suffix in (".zst", ".jsonl"):
            sid = sid.removesuffix(suffix)
        named = rollout_name(sid + ".jsonl")
        if named is not None:
            sid = named[0] if named[1] is None else f"{named[0]}_{named[1]}"
        if not sid or sid in (".", "..") or any(c in sid for c in "/\\\x00"):
            return None
        home = codex_home(env)
        if home is None:
            return None
        best: tuple[tuple[int, float], SessionFile] | None = None
        for path in _rollouts(home):
            named = rollout_name(path)
            if named is None:
                continue
            thread, rollout = named
            whole = thread if rollout is None else f"{thread}_{rollout}"
            score = 3 if sid in (thread, whole) else 2 if sid == rollout else 1 if len(sid) >= 8 and sid in whole else 0
            if not score:
                continue
            sf = _session_file(thread, path)
            if sf is not None and (best is None or (score, sf.mtime) > best[0]):
                best = ((score, sf.mtime), sf)
        return best[1] if best else None

    def sniff(self, path: str, head: bytes) -> bool:
        if _is_zst(path, head):
            # zstd emits whole blocks (up to 128 KiB of text): a short head may decompress
            # to nothing, so read more of the file itself.
            try:
                with open(path, "rb") as fh:
                    data = fh.read(4 << 20)
            except OSError:
                data = head
            try:
                head = codec.zstd_decompress(data if len(data) > len(head) else head, limit=1 << 20)
            except CorruptObjectError:
                return False
        if b"\x00" in head[:4096]:
            return False
        lines = head.split(b"\n")
        seen = 0
        for n, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                value = jsonl.parse(raw)
            except jsonl.ParseFailure:
                if n == len(lines) - 1:  # the head cut this line short
                    m = _CUT_LINE_RE.match(raw.lstrip())
                    return bool(m) and m.group(1).decode() in ROLLOUT_KINDS
                return False
            kind = _classify(value)
            if kind is not None:
                return kind == AGENT
            seen += 1
            if seen >= 20:
                break
        return False

    # -- reading ------------------------------------------------------------------

    def read(self, path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
        """Read in two passes, so that memory does not grow with the rollout (as the
        Claude adapter does): the first parses every line but keeps only its offset,
        CRC-32 and kind, and feeds the session info; the result produces the records
        by reading the lines again, one at a time (:meth:`ReadResult.iter_records`)."""
        full = start == 0
        fh = self._open(path)
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
            judged: list[tuple[int, str | None]] = []  # (line, agent) of the first JSON lines
            for line, value in index.scan(fh, path, start, first_line, full,
                                          lambda n, problem: self._first_line_error(path, n, problem, fh)):
                if isinstance(value, dict):
                    info.feed(value)
                if full and len(judged) < _SHAPE_LINES:
                    judged.append((line.number, _classify(value)))
            if size > index.end:
                index.warnings.append(f"{path}:{index.lines + 1}: incomplete last line (Codex may still be "
                                      "writing); it will be committed next time")
            # A .zst rollout was decompressed into memory: the records are read from
            # that copy again (a plain file is opened again instead).
            data = fh.getvalue() if isinstance(fh, io.BytesIO) else None
        if full:
            self._check_shape(path, judged)
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
        # The rollouts of the sub-agents it spawned are part of the session (codex_threads).
        from opalgit.agents.codex.threads import child_threads  # only when a session is read: 'get' stays one import

        out.side = child_threads(path, session.id, out.warnings)
        return out

    def _open(self, path: str) -> IO[bytes]:
        fh = open_session(path, "give the path of a rollout-*.jsonl file under ~/.codex/sessions")
        if not _is_zst(path, fh.read(4)):
            fh.seek(0)
            return fh
        with fh:
            fh.seek(0)
            data = fh.read(_MAX_ZST)
        try:
            # Offsets of a .zst rollout are offsets in its decompressed text.
            return io.BytesIO(codec.zstd_decompress(data))
        except CorruptObjectError as exc:
            raise InputError(f"this .zst file does not decompress ({exc})", path=path,
                             hint="Codex compresses old rollouts with zstd; the file may be damaged") from None

    def _first_line_error(self, path: str, line: int, problem: str, fh: IO[bytes]) -> InputError:
        # A Gemini CLI session of the single-JSON era is one pretty-printed document.
        try:
            if fh.seek(0, os.SEEK_END) <= 64 * 1024 * 1024:
                fh.seek(0)
                kind = _classify(jsonl.parse(fh.read().strip()))
                if kind in FILE_KINDS and kind != AGENT:
                    return foreign_file(path, None, kind, "a Codex CLI rollout")
        except (jsonl.ParseFailure, OSError, MemoryError):
            pass
        return InputError(f"the first line is not JSON ({bare_reason(problem)}); this is not a Codex CLI rollout",
                          path=path, line=line, hint="give the path of a rollout-*.jsonl file under ~/.codex/sessions")

    def _check_shape(self, path: str, judged: list[tuple[int, str | None]]) -> None:
        """Refuse files that hold no Codex line near the top; name the agent if known.

        ``judged`` is (line, agent) of the first :data:`_SHAPE_LINES` JSON lines.
        """
        if not judged:
            return  # nothing but a line still being written: no verdict yet
        for line, kind in judged:
            if kind == AGENT:
                return
            if kind in FILE_KINDS and kind != AGENT:
                raise foreign_file(path, line, kind, "a Codex CLI rollout")
        raise InputError("this JSON-lines file has no Codex CLI rollout lines (no type with a payload)",
                         path=path, line=judged[0][0],
                         hint="give the path of a rollout-*.jsonl file under ~/.codex/sessions, or pick the right --agent")

    normalize_record = staticmethod(normalize_record)

    # -- writing ------------------------------------------------------------------
    # The writer lives in codex_export (it imports this module, hence the late imports).

    def export(self, req: ExportRequest) -> ExportResult:
        from opalgit.agents.codex.write import export

        return export(req)

    def replace_tool_outputs(self, turn: Turn, replace) -> Turn | None:
        from opalgit.agents.codex.write import replace_tool_outputs

        return replace_tool_outputs(turn, replace)

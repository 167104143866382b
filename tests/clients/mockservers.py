"""Scripted mock model servers for driving the real agent CLIs offline.

Three small HTTP servers, standard library only, each bound to 127.0.0.1 on an
ephemeral port:

* :class:`AnthropicMock` -- Anthropic Messages API (``POST /v1/messages``),
  used by Claude Code.
* :class:`OpenAIResponsesMock` -- OpenAI Responses API (``POST /v1/responses``),
  used by Codex CLI.
* :class:`GeminiMock` -- Gemini API (``:streamGenerateContent`` /
  ``:generateContent`` / ``:countTokens``), used by Gemini CLI.

Each server follows a *script*: a list of :class:`Reply` objects consumed one
per model request (utility requests such as Gemini's router classifier, Claude's
token counting or a title request without tools do not consume). When the
script runs out the server answers with :data:`EXHAUSTED_TEXT` and counts it in
``server.exhausted`` so a test can assert the script fitted exactly.

Every request is recorded (:class:`Recorded`: method, path, query, headers,
parsed JSON body, kind, and the reply it consumed) in ``server.requests``;
``server.model_requests`` holds only the script-consuming ones.

Bounds, so that nothing here ever runs forever: each server stops by itself
after ``lifetime`` seconds or ``max_requests`` requests, whichever comes first
(later requests get 503), each connection has a socket timeout, and leaving the
``with`` block shuts the server down.

Usage::

    with AnthropicMock([Reply(calls=[ToolCall("Bash", {"command": "ls"})]),
                        Reply("done")]) as srv:
        ... run the client against srv.base_url / srv.port ...
        srv.model_requests[-1].body["messages"]
"""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "ToolCall",
    "Reply",
    "Recorded",
    "MockServer",
    "AnthropicMock",
    "OpenAIResponsesMock",
    "GeminiMock",
    "ChatCompletionsMock",
    "adapt_call",
    "EXHAUSTED_TEXT",
]

EXHAUSTED_TEXT = "(mock: script exhausted)"

DEFAULT_LIFETIME = 300.0  # seconds
DEFAULT_MAX_REQUESTS = 400
SOCKET_TIMEOUT = 30.0  # per connection, so a stalled client cannot pin a thread
MAX_BODY = 64 * 1024 * 1024


# ---------------------------------------------------------------------------
# script model


@dataclass
class ToolCall:
    """One scripted tool call.

    ``args`` is a dict for JSON tools. For a Codex *custom* (freeform) tool such
    as ``apply_patch`` pass ``custom=True`` and the raw input text as ``args``.
    ``call_id`` is generated when not given.
    """

    name: str
    args: Any = field(default_factory=dict)
    custom: bool = False
    call_id: str | None = None


@dataclass
class Reply:
    """One scripted model turn: optional text, then zero or more tool calls."""

    text: str | None = None
    calls: list[ToolCall] = field(default_factory=list)
    #: input tokens the reply's usage reports (OpenAI mock); a large value
    #: makes Codex compact its history against a small
    #: ``model_auto_compact_token_limit``.
    input_tokens: int = 100

    def __post_init__(self) -> None:
        if isinstance(self.calls, ToolCall):
            self.calls = [self.calls]
        else:
            self.calls = list(self.calls)


@dataclass
class Recorded:
    """One request as the mock saw it."""

    method: str
    path: str  # without query string
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw: bytes
    body: Any  # parsed JSON, or None
    kind: str  # "model", "classifier", "utility", "probe", "rejected"
    reply: Reply | None = None  # the script entry it consumed (kind == "model")
    time: float = 0.0


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


# ---------------------------------------------------------------------------
# generic server


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT
    server: "_HTTPServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if self.server.mock.verbose:
            super().log_message(format, *args)

    def _read_body(self) -> bytes:
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks = []
            total = 0
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    break
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    # trailers until blank line
                    for _ in range(100):
                        t = self.rfile.readline(1024)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    break
                total += size
                if total > MAX_BODY:
                    raise ValueError("body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(16)
            data = b"".join(chunks)
        else:
            n = int(self.headers.get("Content-Length") or 0)
            if n > MAX_BODY:
                raise ValueError("body too large")
            data = self.rfile.read(n) if n else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if enc == "gzip":
            data = gzip.decompress(data)
        elif enc == "deflate":
            data = zlib.decompress(data)
        elif enc == "zstd":
            try:
                import zstandard  # optional; not stdlib

                data = zstandard.ZstdDecompressor().decompress(data, max_output_size=MAX_BODY)
            except Exception:  # pragma: no cover - recorded raw instead
                pass
        return data

    def _handle(self) -> None:
        mock = self.server.mock
        try:
            raw = self._read_body()
        except Exception as exc:  # malformed request
            self._send(400, "application/json", json.dumps({"error": str(exc)}).encode())
            return
        parts = urlsplit(self.path)
        try:
            body = json.loads(raw) if raw else None
        except (ValueError, UnicodeDecodeError):
            body = None
        rec = Recorded(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            raw=raw,
            body=body,
            kind="probe",
            time=time.time(),
        )
        if not mock._count_request():
            rec.kind = "rejected"
            mock._record(rec)
            self._send(503, "application/json", b'{"error":"mock request budget exhausted"}', close=True)
            return
        try:
            status, ctype, payload = mock.respond(rec)
        except Exception as exc:  # bug in a mock: answer 500, keep the record
            rec.kind = "error"
            mock.errors.append(repr(exc))
            status, ctype, payload = 500, "application/json", json.dumps({"error": repr(exc)}).encode()
        mock._record(rec)
        self._send(status, ctype, payload)

    def _send(self, status: int, ctype: str, payload: bytes, close: bool = False) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            if ctype.startswith("text/event-stream"):
                self.send_header("Cache-Control", "no-cache")
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _handle

    def do_HEAD(self) -> None:
        self._handle()


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    mock: "MockServer"


class MockServer:
    """Base class: lifecycle, bounds, recording, script consumption."""

    name = "mock"

    def __init__(
        self,
        script: Iterable[Reply | str] = (),
        *,
        lifetime: float = DEFAULT_LIFETIME,
        max_requests: int = DEFAULT_MAX_REQUESTS,
        model: str | None = None,
        verbose: bool = False,
    ) -> None:
        self.script: list[Reply] = [r if isinstance(r, Reply) else Reply(str(r)) for r in script]
        self.lifetime = float(lifetime)
        self.max_requests = int(max_requests)
        self.model = model
        self.verbose = verbose
        self.requests: list[Recorded] = []
        self.errors: list[str] = []
        self.exhausted = 0
        self._next = 0
        self._count = 0
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._stopped = threading.Event()

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> "MockServer":
        if self._httpd is not None:
            return self
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.mock = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, name=f"{self.name}-mock", daemon=True
        )
        self._thread.start()
        # Hard lifetime bound: shut down by itself even if the test forgets.
        self._timer = threading.Timer(self.lifetime, self._expire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def _expire(self) -> None:
        self.errors.append(f"lifetime of {self.lifetime}s reached; server stopped")
        self._shutdown_async()

    def _shutdown_async(self) -> None:
        # shutdown() blocks until serve_forever returns; never call it from a
        # handler thread synchronously.
        if self._httpd is not None and not self._stopped.is_set():
            self._stopped.set()
            threading.Thread(target=self._httpd.shutdown, daemon=True).start()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        httpd = self._httpd
        if httpd is None:
            return
        if not self._stopped.is_set():
            self._stopped.set()
            httpd.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)
        httpd.server_close()

    def __enter__(self) -> "MockServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- bookkeeping -------------------------------------------------------

    def _count_request(self) -> bool:
        with self._lock:
            self._count += 1
            over = self._count > self.max_requests
        if over:
            self.errors.append(f"max_requests={self.max_requests} exceeded")
            self._shutdown_async()
        return not over

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def next_reply(self) -> Reply:
        with self._lock:
            if self._next < len(self.script):
                r = self.script[self._next]
                self._next += 1
                return r
            self.exhausted += 1
            return Reply(EXHAUSTED_TEXT)

    def add(self, *replies: Reply | str) -> None:
        """Append replies to the script (e.g. before the next turn)."""
        with self._lock:
            self.script.extend(r if isinstance(r, Reply) else Reply(str(r)) for r in replies)

    @property
    def consumed(self) -> int:
        return self._next

    @property
    def remaining(self) -> int:
        return len(self.script) - self._next

    @property
    def model_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.kind == "model"]

    def mark(self) -> int:
        """Index into ``requests``; use with :meth:`since` to split per run."""
        with self._lock:
            return len(self.requests)

    def since(self, mark: int, kind: str | None = "model") -> list[Recorded]:
        with self._lock:
            reqs = self.requests[mark:]
        return [r for r in reqs if kind is None or r.kind == kind]

    # -- to override -------------------------------------------------------

    def respond(self, rec: Recorded) -> tuple[int, str, bytes]:  # pragma: no cover
        raise NotImplementedError


def _sse(events: Sequence[tuple[str | None, dict]]) -> bytes:
    out = []
    for name, data in events:
        if name:
            out.append(f"event: {name}\n")
        out.append(f"data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


def _json(status: int, obj: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(obj).encode()


# ---------------------------------------------------------------------------
# Anthropic Messages API


class AnthropicMock(MockServer):
    """``POST /v1/messages[?beta=true]`` (streaming SSE or plain JSON).

    A request consumes the script when it declares tools (Claude Code's main
    loop always does). Tool-less requests (title / topic / quota probes) get a
    short text and do not consume. ``/v1/messages/count_tokens`` answers a
    fixed count.
    """

    name = "anthropic"

    def respond(self, rec: Recorded) -> tuple[int, str, bytes]:
        path = rec.path.rstrip("/")
        if rec.method in ("HEAD", "GET", "OPTIONS") or not path.startswith("/v1/messages"):
            rec.kind = "probe"
            if path.endswith("/v1/models"):
                return _json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None})
            return _json(200, {"ok": True})
        body = rec.body if isinstance(rec.body, dict) else {}
        if path.endswith("/count_tokens"):
            rec.kind = "utility"
            return _json(200, {"input_tokens": 100})
        model = body.get("model") or self.model or "claude-mock"
        if body.get("tools"):
            rec.kind = "model"
            reply = self.next_reply()
            rec.reply = reply
        else:
            rec.kind = "utility"
            reply = Reply("mock")
        blocks: list[dict] = []
        if reply.text is not None:
            blocks.append({"type": "text", "text": reply.text})
        for call in reply.calls:
            call.call_id = call.call_id or _new_id("toolu_")
            blocks.append({"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.args})
        if not blocks:
            blocks.append({"type": "text", "text": ""})
        stop = "tool_use" if reply.calls else "end_turn"
        msg_id = _new_id("msg_")
        usage = {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not body.get("stream"):
            return _json(
                200,
                {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
        events: list[tuple[str | None, dict]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {**usage, "output_tokens": 1},
                    },
                },
            )
        ]
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": b["text"]}
            else:
                start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 20},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return 200, "text/event-stream; charset=utf-8", _sse(events)


# ---------------------------------------------------------------------------
# OpenAI Responses API


class OpenAIResponsesMock(MockServer):
    """``POST /v1/responses`` (streaming SSE, or plain JSON without ``stream``).

    Tool calls become ``function_call`` items (arguments as a JSON string) or,
    with ``ToolCall(custom=True)``, ``custom_tool_call`` items (raw ``input``).
    ``GET /v1/models`` answers an empty list.
    """

    name = "openai"

    def respond(self, rec: Recorded) -> tuple[int, str, bytes]:
        path = rec.path.rstrip("/")
        if rec.method != "POST" or not path.endswith("/responses"):
            rec.kind = "probe"
            if path.endswith("/models"):
                return _json(200, {"object": "list", "data": [], "models": []})
            return _json(200 if rec.method in ("GET", "HEAD", "OPTIONS") else 404, {"ok": rec.method != "POST"})
        body = rec.body if isinstance(rec.body, dict) else {}
        model = body.get("model") or self.model or "gpt-mock"
        rec.kind = "model"
        reply = self.next_reply()
        rec.reply = reply
        resp_id = _new_id("resp_")
        created = int(time.time())
        items: list[dict] = []
        events: list[tuple[str | None, dict]] = []
        seq = 0

        def ev(name: str, data: dict) -> None:
            nonlocal seq
            events.append((name, {"type": name, "sequence_number": seq, **data}))
            seq += 1

        base = {"id": resp_id, "object": "response", "created_at": created, "model": model}
        ev("response.created", {"response": {**base, "status": "in_progress", "output": []}})
        ev("response.in_progress", {"response": {**base, "status": "in_progress", "output": []}})
        idx = 0
        if reply.text is not None:
            mid = _new_id("msg_")
            ev(
                "response.output_item.added",
                {"output_index": idx, "item": {"type": "message", "id": mid, "status": "in_progress", "role": "assistant", "content": []}},
            )
            ev(
                "response.content_part.added",
                {"item_id": mid, "output_index": idx, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}},
            )
            ev("response.output_text.delta", {"item_id": mid, "output_index": idx, "content_index": 0, "delta": reply.text})
            ev("response.output_text.done", {"item_id": mid, "output_index": idx, "content_index": 0, "text": reply.text})
            part = {"type": "output_text", "text": reply.text, "annotations": []}
            ev("response.content_part.done", {"item_id": mid, "output_index": idx, "content_index": 0, "part": part})
            item = {"type": "message", "id": mid, "status": "completed", "role": "assistant", "content": [part]}
            ev("response.output_item.done", {"output_index": idx, "item": item})
            items.append(item)
            idx += 1
        for call in reply.calls:
            call.call_id = call.call_id or _new_id("call_")
            if call.custom:
                iid = _new_id("ctc_")
                text = call.args if isinstance(call.args, str) else json.dumps(call.args)
                added = {"type": "custom_tool_call", "id": iid, "status": "in_progress", "call_id": call.call_id, "name": call.name, "input": ""}
                item = {**added, "status": "completed", "input": text}
                ev("response.output_item.added", {"output_index": idx, "item": added})
                ev("response.custom_tool_call_input.delta", {"item_id": iid, "output_index": idx, "delta": text})
                ev("response.custom_tool_call_input.done", {"item_id": iid, "output_index": idx, "input": text})
            else:
                iid = _new_id("fc_")
                args = call.args if isinstance(call.args, str) else json.dumps(call.args)
                added = {"type": "function_call", "id": iid, "status": "in_progress", "call_id": call.call_id, "name": call.name, "arguments": ""}
                item = {**added, "status": "completed", "arguments": args}
                ev("response.output_item.added", {"output_index": idx, "item": added})
                ev("response.function_call_arguments.delta", {"item_id": iid, "output_index": idx, "delta": args})
                ev("response.function_call_arguments.done", {"item_id": iid, "output_index": idx, "arguments": args})
            ev("response.output_item.done", {"output_index": idx, "item": item})
            items.append(item)
            idx += 1
        usage = {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + 20,
        }
        final = {**base, "status": "completed", "output": items, "usage": usage}
        if not body.get("stream", False):
            return _json(200, final)
        ev("response.completed", {"response": final})
        return 200, "text/event-stream; charset=utf-8", _sse(events)


# ---------------------------------------------------------------------------
# Gemini API


def _schema_default(schema: Any, depth: int = 0) -> Any:
    """A plausible value for a JSON schema (for utility JSON requests)."""
    if not isinstance(schema, dict) or depth > 6:
        return None
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), t[0] if t else None)
    t = (t or "").lower() if isinstance(t, str) else t
    if schema.get("enum"):
        return schema["enum"][0]
    if t == "object" or "properties" in schema:
        return {k: _schema_default(v, depth + 1) for k, v in (schema.get("properties") or {}).items()}
    if t == "array":
        return []
    if t in ("integer", "number"):
        return 0
    if t == "boolean":
        return False
    return "mock"


class GeminiMock(MockServer):
    """Gemini ``v1beta`` models API.

    * ``:streamGenerateContent?alt=sse`` -- the chat loop; consumes the script.
    * ``:generateContent`` -- consumes the script too, unless it is a utility
      request asking for JSON (``responseMimeType: application/json``): the
      router classifier gets ``{"complexity_reasoning": ..., "complexity_score":
      classifier_score}`` and other JSON requests (e.g. next-speaker checks) a
      value derived from their schema.
    * ``:countTokens`` -- ``{"totalTokens": 100}``; ``:embedContent`` a dummy.
    """

    name = "gemini"

    def __init__(self, *args: Any, classifier_score: int = 10, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.classifier_score = classifier_score

    @staticmethod
    def _is_json_request(body: dict) -> bool:
        gc = body.get("generationConfig") or body.get("generation_config") or {}
        mt = gc.get("responseMimeType") or gc.get("response_mime_type") or ""
        return mt == "application/json" or bool(gc.get("responseJsonSchema") or gc.get("responseSchema"))

    @staticmethod
    def _is_classifier(body: dict) -> bool:
        gc = body.get("generationConfig") or {}
        schema = json.dumps(gc.get("responseJsonSchema") or gc.get("responseSchema") or {})
        sysi = json.dumps(body.get("systemInstruction") or body.get("system_instruction") or "")
        return "complexity_score" in schema or "complexity_score" in sysi

    def _candidate(self, parts: list[dict], model: str, finish: str | None = "STOP") -> dict:
        cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            cand["finishReason"] = finish
        return {
            "candidates": [cand],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120},
            "modelVersion": model,
            "responseId": _new_id("r"),
        }

    def respond(self, rec: Recorded) -> tuple[int, str, bytes]:
        path = rec.path
        if rec.method != "POST" or ":" not in path.rsplit("/", 1)[-1]:
            rec.kind = "probe"
            if path.rstrip("/").endswith("/models"):
                return _json(200, {"models": []})
            return _json(200, {})
        model_part, _, method = path.rsplit("/", 1)[-1].partition(":")
        model = model_part or self.model or "gemini-mock"
        body = rec.body if isinstance(rec.body, dict) else {}
        if method == "countTokens":
            rec.kind = "utility"
            return _json(200, {"totalTokens": 100})
        if method in ("embedContent", "batchEmbedContents"):
            rec.kind = "utility"
            return _json(200, {"embedding": {"values": [0.0] * 8}})
        if method not in ("generateContent", "streamGenerateContent"):
            rec.kind = "probe"
            return _json(404, {"error": {"code": 404, "message": f"mock: unknown method {method}"}})
        if method == "generateContent" and self._is_classifier(body):
            rec.kind = "classifier"
            text = json.dumps(
                {"complexity_reasoning": "mock router: simple task", "complexity_score": self.classifier_score}
            )
            return _json(200, self._candidate([{"text": text}], model))
        if method == "generateContent" and self._is_json_request(body):
            rec.kind = "utility"
            gc = body.get("generationConfig") or {}
            schema = gc.get("responseJsonSchema") or gc.get("responseSchema") or {}
            value = _schema_default(schema)
            if isinstance(value, dict) and "next_speaker" in value:
                value["next_speaker"] = "user"
            return _json(200, self._candidate([{"text": json.dumps(value)}], model))
        rec.kind = "model"
        reply = self.next_reply()
        rec.reply = reply
        parts: list[dict] = []
        if reply.text is not None:
            parts.append({"text": reply.text})
        for call in reply.calls:
            fc: dict[str, Any] = {"name": call.name, "args": call.args}
            if call.call_id:
                fc["id"] = call.call_id
            parts.append({"functionCall": fc})
        if not parts:
            parts.append({"text": ""})
        if method == "generateContent":
            return _json(200, self._candidate(parts, model))
        # stream: one chunk per part, finishReason on the last one
        chunks = [(None, self._candidate([p], model, "STOP" if i == len(parts) - 1 else None)) for i, p in enumerate(parts)]
        return 200, "text/event-stream", _sse(chunks).replace(b"\n\n", b"\r\n\r\n")


# ---------------------------------------------------------------------------
# OpenAI chat completions (opencode, Qwen Code, Pi, GitHub Copilot CLI)

# Argument names that mean the same thing in different clients' tool schemas
# (clients.md, "More agents"): a script names a tool's arguments once and the
# mock renames each to the spelling the request's declared schema uses.
_ARG_ALIASES = (
    ("file_path", "filePath", "path", "absolute_path", "filename"),
    ("old_string", "oldString", "old_str", "oldText"),
    ("new_string", "newString", "new_str", "newText"),
    ("content", "contents", "text"),
    ("command", "cmd"),
    ("pattern", "glob"),
)


def _declared_tools(body: dict) -> dict[str, dict]:
    """``{tool name: its JSON-schema properties}`` of a chat-completions request."""
    out: dict[str, dict] = {}
    for t in body.get("tools") or []:
        fn = (t or {}).get("function") or {}
        name = fn.get("name")
        if name:
            out[name] = ((fn.get("parameters") or {}).get("properties")) or {}
    return out


def adapt_call(call: "ToolCall", declared: dict[str, dict]) -> tuple[str, Any]:
    """The tool name and arguments to send for ``call``, fitted to what the request declares.

    The name: as scripted when declared, else the declared name that equals it ignoring case.
    Each argument: kept when the schema has it, else renamed to the alias the schema has.
    Arguments the schema lacks and has no alias for are kept (the client will say so).
    """
    name = call.name
    if declared and name not in declared:
        name = next((d for d in declared if d.lower() == name.lower()), name)
    if not isinstance(call.args, dict):
        return name, call.args
    props = declared.get(name) or {}
    if not props:
        return name, call.args
    args: dict[str, Any] = {}
    for key, value in call.args.items():
        if key in props:
            args[key] = value
            continue
        group = next((g for g in _ARG_ALIASES if key in g), ())
        args[next((a for a in group if a in props), key)] = value
    return name, args


class ChatCompletionsMock(MockServer):
    """``POST /v1/chat/completions`` (streamed SSE chunks, or plain JSON without ``stream``).

    A request that declares tools consumes the script; a tool-less one (a title or summary
    request from a small model) gets a short text and does not. Tool calls stream as
    ``delta.tool_calls`` in pieces (id, name and empty arguments first, then the arguments
    in two halves), with ``finish_reason`` ``tool_calls`` or ``stop``; ``usage`` comes on a
    last chunk with no choices, then ``data: [DONE]``. Names and argument spellings are
    fitted to the request's declared tools (:func:`adapt_call`). ``GET /v1/models`` lists
    the one model.
    """

    name = "chat"

    def respond(self, rec: Recorded) -> tuple[int, str, bytes]:
        path = rec.path.rstrip("/")
        model = self.model or "mock-model"
        if rec.method != "POST" or not path.endswith("/chat/completions"):
            rec.kind = "probe"
            if path.endswith("/models"):
                return _json(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "mock"}]})
            return _json(200 if rec.method in ("GET", "HEAD", "OPTIONS") else 404, {"ok": rec.method != "POST"})
        body = rec.body if isinstance(rec.body, dict) else {}
        model = body.get("model") or model
        declared = _declared_tools(body)
        if declared:
            rec.kind = "model"
            reply = self.next_reply()
            rec.reply = reply
        else:
            rec.kind = "utility"
            reply = Reply("Mock title")
        calls = []
        for call in reply.calls:
            call.call_id = call.call_id or _new_id("call_")
            # Kept on the script entry, so a test compares with what was really sent.
            call.name, call.args = name, args = adapt_call(call, declared)
            text = args if isinstance(args, str) else json.dumps(args)
            calls.append((call.call_id, name, text))
        finish = "tool_calls" if calls else "stop"
        cid, created = _new_id("chatcmpl-"), int(time.time())
        usage = {"prompt_tokens": reply.input_tokens, "completion_tokens": 20, "total_tokens": reply.input_tokens + 20}
        if not body.get("stream"):
            msg: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if calls:
                msg["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                     for i, n, a in calls]
            return _json(200, {"id": cid, "object": "chat.completion", "created": created, "model": model,
                               "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage})
        base = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}

        def chunk(delta: dict, finish_reason: str | None = None) -> tuple[None, dict]:
            return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

        events = [chunk({"role": "assistant", "content": ""})]
        if reply.text:
            events.append(chunk({"content": reply.text}))
        for idx, (call_id, name, text) in enumerate(calls):
            events.append(chunk({"tool_calls": [{"index": idx, "id": call_id, "type": "function",
                                                 "function": {"name": name, "arguments": ""}}]}))
            half = len(text) // 2
            for piece in (text[:half], text[half:]):
                events.append(chunk({"tool_calls": [{"index": idx, "function": {"arguments": piece}}]}))
        events.append(chunk({}, finish))
        events.append((None, {**base, "choices": [], "usage": usage}))
        return 200, "text/event-stream; charset=utf-8", _sse(events) + b"data: [DONE]\n\n"

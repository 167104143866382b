"""Self-checks of the client test support.

* The mock servers speak their APIs, record requests, and stop by themselves.
* history_of normalises the three request shapes.
* For each real CLI (skipped when not installed): a genuine two-turn session
  with tool calls is generated, and the request sent on the turn-2 resume
  holds turn 1's prompt, tool calls, tool results and answer, in order.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

import pytest

from . import harness
from .history import Item, canonical_args, history_of, kinds
from .mockservers import (
    EXHAUSTED_TEXT,
    AnthropicMock,
    ChatCompletionsMock,
    GeminiMock,
    OpenAIResponsesMock,
    Reply,
    ToolCall,
)

pytestmark = pytest.mark.clients

# never route 127.0.0.1 through an http_proxy from the environment
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _post(url: str, body: dict | None, method: str = "POST") -> tuple[int, dict, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with _OPENER.open(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _sse_events(raw: bytes) -> list[tuple[str | None, dict]]:
    out = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: ") and line != "data: [DONE]":
                data = json.loads(line[6:])
        if data is not None:
            out.append((name, data))
    return out


# ---------------------------------------------------------------------------
# mock servers (no client needed)


def test_anthropic_mock_streams_script_and_records():
    script = [Reply("Looking.", [ToolCall("Bash", {"command": "ls"}, call_id="toolu_1")]), Reply("done")]
    with AnthropicMock(script) as srv:
        assert srv.base_url.startswith("http://127.0.0.1:")
        tools = [{"name": "Bash", "input_schema": {"type": "object"}}]
        st, hdr, raw = _post(srv.base_url + "/v1/messages?beta=true",
                             {"model": "m", "stream": True, "tools": tools, "messages": [{"role": "user", "content": "hi"}]})
        assert st == 200 and hdr["Content-Type"].startswith("text/event-stream")
        ev = _sse_events(raw)
        names = [n for n, _ in ev]
        assert names == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                         "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
        assert ev[4][1]["content_block"] == {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
        assert json.loads(ev[5][1]["delta"]["partial_json"]) == {"command": "ls"}
        assert ev[7][1]["delta"]["stop_reason"] == "tool_use"
        # tool-less utility request: answered, does not consume
        st, _, raw = _post(srv.base_url + "/v1/messages", {"model": "m", "messages": []})
        assert st == 200 and json.loads(raw)["content"][0]["text"] == "mock"
        # non-streaming model request consumes the next reply
        st, _, raw = _post(srv.base_url + "/v1/messages", {"model": "m", "tools": tools, "messages": []})
        msg = json.loads(raw)
        assert msg["content"] == [{"type": "text", "text": "done"}] and msg["stop_reason"] == "end_turn"
        assert _post(srv.base_url + "/", None, method="HEAD")[0] == 200
        assert _post(srv.base_url + "/v1/messages/count_tokens", {"messages": []})[0] == 200
        # exhausted script: a marker text, counted
        _, _, raw = _post(srv.base_url + "/v1/messages", {"model": "m", "tools": tools, "messages": []})
        assert json.loads(raw)["content"][0]["text"] == EXHAUSTED_TEXT and srv.exhausted == 1
    assert [r.kind for r in srv.requests] == ["model", "utility", "model", "probe", "utility", "model"]
    assert srv.model_requests[0].body["messages"] == [{"role": "user", "content": "hi"}]
    assert srv.model_requests[0].query == {"beta": ["true"]}


def test_openai_mock_function_and_custom_tool_calls():
    script = [Reply("ok", [ToolCall("exec_command", {"cmd": "ls", "workdir": "/w"}, call_id="c1"),
                           ToolCall("apply_patch", "*** Begin Patch\n*** End Patch\n", custom=True, call_id="c2")])]
    with OpenAIResponsesMock(script) as srv:
        st, hdr, raw = _post(srv.base_url + "/v1/responses", {"model": "gpt-5.5", "stream": True, "input": []})
        assert st == 200 and hdr["Content-Type"].startswith("text/event-stream")
        ev = _sse_events(raw)
        names = [n for n, _ in ev]
        assert names[0] == "response.created" and names[-1] == "response.completed"
        assert "response.output_text.delta" in names
        done = [d["item"] for n, d in ev if n == "response.output_item.done"]
        assert [i["type"] for i in done] == ["message", "function_call", "custom_tool_call"]
        assert json.loads(done[1]["arguments"]) == {"cmd": "ls", "workdir": "/w"} and done[1]["call_id"] == "c1"
        assert done[2]["input"].startswith("*** Begin Patch") and done[2]["name"] == "apply_patch"
        assert ev[-1][1]["response"]["usage"]["total_tokens"] == 120
        assert _post(srv.base_url + "/v1/models", None, method="GET")[0] == 200
    assert srv.consumed == 1 and srv.exhausted == 0


def test_openai_mock_reports_a_replys_token_count():
    """A reply can claim a big context, which is what makes Codex auto-compact."""
    with OpenAIResponsesMock([Reply("big", input_tokens=50000)]) as srv:
        _, _, raw = _post(srv.base_url + "/v1/responses", {"model": "gpt-5.5", "input": []})
    usage = json.loads(raw)["usage"]
    assert usage["input_tokens"] == 50000 and usage["total_tokens"] == 50020


def _chat_tools(**props: list[str]) -> list[dict]:
    return [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {k: {} for k in ks}}}}
            for n, ks in props.items()]


def test_chat_mock_streams_parallel_tool_calls_in_pieces_fitted_to_the_declared_schema():
    """The chat-completions mock: text, then two calls whose names and argument spellings follow
    what the request declares (opencode's ``filePath``, a capitalised ``Read``); usage last; [DONE]."""
    script = [Reply("Two at once.", [ToolCall("read", {"file_path": "/w/a", "offset": 1}), ToolCall("bash", {"cmd": "ls"})])]
    with ChatCompletionsMock(script) as srv:
        body = {"model": "mock-model", "stream": True, "messages": [{"role": "user", "content": "hi"}],
                "tools": _chat_tools(Read=["filePath", "offset"], bash=["command"])}
        status, headers, raw = _post(srv.base_url + "/v1/chat/completions", body)
        assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
        assert raw.rstrip().endswith(b"data: [DONE]")
        chunks = [d for _, d in _sse_events(raw)]
        deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
        assert "".join(d.get("content") or "" for d in deltas) == "Two at once."
        calls: dict[int, dict] = {}
        for d in deltas:
            for tc in d.get("tool_calls") or []:
                c = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
                c["id"] = tc.get("id") or c["id"]
                c["name"] = (tc.get("function") or {}).get("name") or c["name"]
                c["arguments"] += (tc.get("function") or {}).get("arguments") or ""
        assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
            ("Read", {"filePath": "/w/a", "offset": 1}), ("bash", {"command": "ls"})]
        assert sum(1 for d in deltas for tc in d.get("tool_calls") or [] if tc["index"] == 0) == 3  # sent in pieces
        assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 120
        # the script entry now says what was sent, so a test compares with it
        assert [(c.name, c.args) for c in script[0].calls] == [("Read", {"filePath": "/w/a", "offset": 1}),
                                                               ("bash", {"command": "ls"})]
        # a tool-less request (a title) does not consume; the models list names the model
        status, _, raw = _post(srv.base_url + "/v1/chat/completions", {"model": "m", "messages": []})
        assert status == 200 and json.loads(raw)["choices"][0]["message"]["content"] == "Mock title"
        assert json.loads(_post(srv.base_url + "/v1/models", None, method="GET")[2])["data"][0]["id"] == "mock-model"
    assert srv.consumed == 1 and [r.kind for r in srv.requests] == ["model", "utility", "probe"]


def test_chat_history_reads_messages_with_parallel_calls_and_results():
    body = {"messages": [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": [{"type": "text", "text": "look"}]},
        {"role": "assistant", "content": "Two at once.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"filePath":"/w/a"}'}},
            {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": '{"command":"ls"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "a b"}]},
        {"role": "assistant", "content": "done"}]}
    items = history_of(body, "qwen")
    assert items == [("user", "look"), ("assistant", "Two at once."), ("tool_call", "read", '{"filePath":"/w/a"}'),
                     ("tool_call", "bash", '{"command":"ls"}'), ("tool_result", "c1", "A"),
                     ("tool_result", "c2", "a b"), ("assistant", "done")]
    assert [i.call_id for i in items if i.kind.startswith("tool")] == ["c1", "c2", "c1", "c2"]


def test_scenarios_script_parallel_calls_and_structures():
    """The structured scripts: 3 then 2 calls in one reply; Claude also a subagent and a compaction."""
    from pathlib import Path

    for client in harness.CLIENTS:
        by_name = {s.name: s for s in harness.scenarios(client, Path("/p"))}
        # The clients driven by tests/clients/drivers/ have the parallel-calls scenario only.
        want = {"claude": {"parallel", "subagent", "compact"}, "codex": {"parallel", "compact"},
                "gemini": {"parallel", "compact"}}.get(client, {"parallel"})
        assert set(by_name) == want, client
        calls = [len(r.calls) for t in by_name["parallel"].turns for r in t.replies]
        assert calls == [3, 0, 2, 0]
    sub = harness.scenarios("claude", Path("/p"))[1].turns[0].replies[0].calls[0]
    assert sub.name == "Agent" and sub.args["run_in_background"] is False


def test_gemini_mock_classifier_does_not_consume():
    with GeminiMock([Reply(None, [ToolCall("read_file", {"file_path": "/w/a"})]), Reply("bye")]) as srv:
        u = srv.base_url + "/v1beta/models/"
        st, _, raw = _post(u + "flash-lite:generateContent",
                           {"contents": [], "systemInstruction": {"parts": [{"text": "... complexity_score ..."}]}})
        text = json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"]
        assert json.loads(text) == {"complexity_reasoning": "mock router: simple task", "complexity_score": 10}
        st, _, raw = _post(u + "flash:countTokens", {"contents": []})
        assert json.loads(raw) == {"totalTokens": 100}
        st, hdr, raw = _post(u + "flash:streamGenerateContent?alt=sse", {"contents": []})
        ev = _sse_events(raw)
        assert ev[-1][1]["candidates"][0]["content"]["parts"] == [{"functionCall": {"name": "read_file", "args": {"file_path": "/w/a"}}}]
        assert ev[-1][1]["candidates"][0]["finishReason"] == "STOP"
        st, _, raw = _post(u + "flash:generateContent", {"contents": []})
        assert json.loads(raw)["candidates"][0]["content"]["parts"] == [{"text": "bye"}]
    assert [r.kind for r in srv.requests] == ["classifier", "utility", "model", "model"]
    assert srv.consumed == 2


def test_mock_bounds_stop_the_server():
    with AnthropicMock([], max_requests=2) as srv:
        for _ in range(2):
            assert _post(srv.base_url + "/", None, method="GET")[0] == 200
        assert _post(srv.base_url + "/", None, method="GET")[0] == 503
        deadline = time.monotonic() + 5
        while srv._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not srv._thread.is_alive()
    with OpenAIResponsesMock([], lifetime=0.3) as srv:
        time.sleep(0.8)
        assert not srv._thread.is_alive()
        assert any("lifetime" in e for e in srv.errors)


# ---------------------------------------------------------------------------
# history_of on hand-written bodies


def test_history_of_claude_shape():
    body = {
        "system": [{"type": "text", "text": "sys"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>\nctx\n</system-reminder>"},
                                         {"type": "text", "text": "P1"}]},
            {"role": "system", "content": "# Environment ..."},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                              {"type": "text", "text": "A"},
                                              {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"b": 1, "a": 2}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": [{"type": "text", "text": "out"}]}]},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
            {"role": "user", "content": "P2"},
        ],
    }
    h = history_of(body, "claude")
    assert h == [("user", "P1"), ("assistant", "A"), ("tool_call", "Bash", '{"a":2,"b":1}'),
                 ("tool_result", "t1", "out"), ("assistant", "done"), ("user", "P2")]
    assert h[2].call_id == h[3].call_id == "t1"


def test_history_of_codex_shape():
    body = {"instructions": "sys", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "# AGENTS.md instructions for /w\n..."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "P1"}]},
        {"type": "reasoning", "summary": [], "encrypted_content": "x"},
        {"type": "function_call", "name": "exec_command", "arguments": '{"workdir":"/w","cmd":"ls"}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "a\nb"},
        {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c2"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "ok"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]}
    assert history_of(body, "codex") == [
        ("user", "P1"), ("tool_call", "exec_command", canonical_args({"cmd": "ls", "workdir": "/w"})),
        ("tool_result", "c1", "a\nb"), ("tool_call", "apply_patch", "*** Begin Patch"), ("tool_result", "c2", "ok"),
        ("assistant", "done")]


def test_history_of_gemini_shape_and_duplicate_results():
    fr = {"functionResponse": {"id": "r1", "name": "read_file", "response": {"output": "x"}}}
    body = {"contents": [
        {"role": "user", "parts": [{"text": "<session_context>\n...</session_context>"}]},
        {"role": "user", "parts": [{"text": "P1"}]},
        {"role": "model", "parts": [{"text": "think", "thought": True}, {"text": "A"},
                                    {"functionCall": {"id": "r1", "name": "read_file", "args": {"file_path": "/w/a"}}}]},
        {"role": "user", "parts": [fr, fr]},
        {"role": "model", "parts": [{"text": "done"}]},
    ]}
    expect = [("user", "P1"), ("assistant", "A"), ("tool_call", "read_file", '{"file_path":"/w/a"}'),
              ("tool_result", "r1", "x"), ("assistant", "done")]
    assert history_of(body, "gemini") == expect
    assert kinds(history_of(body, "gemini", collapse_duplicates=False)).count("tool_result") == 2
    assert isinstance(history_of(body, "gemini")[0], Item)


def test_history_of_gemini_collapses_a_replayed_group_of_parallel_results():
    """Gemini 0.61 replays a reply's whole group of results (r1 r2 r1 r2), not
    each result twice in a row; two different results are never merged."""
    def fr(i, out):
        return {"functionResponse": {"id": i, "name": "read_file", "response": {"output": out}}}
    calls = [{"functionCall": {"id": i, "name": "read_file", "args": {}}} for i in ("r1", "r2")]
    body = {"contents": [{"role": "user", "parts": [{"text": "P1"}]}, {"role": "model", "parts": calls},
                         {"role": "user", "parts": [fr("r1", "a"), fr("r2", "b"), fr("r1", "a"), fr("r2", "b")]}]}
    assert [i[1] for i in history_of(body, "gemini") if i[0] == "tool_result"] == ["r1", "r2"]
    body["contents"][2]["parts"] = [fr("r1", "a"), fr("r2", "b"), fr("r1", "a"), fr("r2", "c")]
    assert len(history_of(body, "gemini")) == 7


# ---------------------------------------------------------------------------
# the real clients


@pytest.mark.parametrize("client", harness.CLIENTS)
def test_client_env_is_minimal(client, tmp_path):
    root = harness.make_root(tmp_path)
    env = harness.client_env(client, root, 1234)
    assert env["HOME"] == str(root.home)
    assert all("127.0.0.1" in v for k, v in env.items() if k.endswith(("BASE_URL", "BASEURL")))
    if client not in ("claude", "codex", "gemini"):
        # A driver's own variables are its module's business (tests/clients/drivers/); what
        # holds for all: nothing inherited, so no variable of this machine's environment.
        assert not set(env) & (set(os.environ) - {"HOME", "PATH"}), set(env) & set(os.environ)
        return
    allowed = {
        "claude": {"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "IS_SANDBOX", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                   "DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING"},
        "codex": {"CODEX_HOME", "MOCK_API_KEY"},
        "gemini": {"GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_NO_RELAUNCH", "GEMINI_CLI_TRUST_WORKSPACE",
                   "GEMINI_CLI_SYSTEM_SETTINGS_PATH"},
    }[client] | {"HOME", "PATH"}
    assert set(env) == allowed
    assert env["HOME"] == str(root.home)
    assert all("127.0.0.1" in v for k, v in env.items() if k.endswith("BASE_URL"))


@pytest.mark.parametrize("client", harness.CLIENTS)
def test_generated_session_resumes_with_full_history(client, tmp_path):
    harness.require_client(client)
    g = harness.generate_session(client, base=tmp_path)
    info = g.describe()
    assert g.turn1.returncode == 0 and not g.turn1.timed_out, info
    assert g.turn2.returncode == 0 and not g.turn2.timed_out, info
    assert g.session_id, info
    assert g.path is not None and g.path.is_file(), info
    srv = g.server
    assert srv.errors == [], srv.errors
    assert srv.exhausted == 0 and srv.remaining == 0, (srv.exhausted, srv.remaining, info)
    assert len(g.turn1.requests) == len(g.script1) and len(g.turn2.requests) == len(g.script2)

    # the file the client wrote holds both turns
    text = g.path.read_text()
    for s in g.prompts + g.answers:
        assert json.dumps(s)[1:-1] in text, s

    # the project changed as the turn-2 script said
    assert (g.root.project / "notes.txt").read_text() == harness.NOTES
    assert "def farewell" in (g.root.project / "hello.py").read_text()

    # the first request of the resumed turn 2 carries turn 1 in order ...
    resumed = history_of(g.turn2.requests[0].body, client)
    assert kinds(resumed) == ["user", "assistant", "tool_call", "tool_result", "assistant", "tool_call",
                              "tool_result", "assistant", "user"], resumed
    assert resumed[0] == ("user", harness.PROMPT1)
    assert resumed[-2] == ("assistant", harness.ANSWER1)
    assert resumed[-1] == ("user", harness.PROMPT2)
    calls = [i for i in resumed if i[0] == "tool_call"]
    results = [i for i in resumed if i[0] == "tool_result"]
    scripted = [c for r in g.script1 for c in r.calls]
    assert [(c[1], c[2]) for c in calls] == [(s.name, canonical_args(s.args)) for s in scripted]
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert "README.md" in results[0][2] and "hello.py" in results[0][2]
    assert "tiny demo project" in results[1][2]
    assert [i[1] for i in resumed if i[0] == "assistant"] == [r.text for r in g.script1]

    # ... exactly as the live turn-1 conversation had it
    live = history_of(g.turn1.requests[-1].body, client)
    assert resumed == live + [("assistant", harness.ANSWER1), ("user", harness.PROMPT2)]

    # and turn 2 ran its own tool calls on top
    last = history_of(g.turn2.requests[-1].body, client)
    assert last[: len(resumed)] == resumed
    assert [i[1] for i in last[len(resumed):] if i[0] == "tool_call"] == [c.name for r in g.script2 for c in r.calls]

"""The Claude Code exporter: same-agent write-back, chain repair after rewinds and
drops, cross-agent conversion, tool-output trimming, and (marked ``clients``) the real
``claude`` CLI resuming what opal wrote against a mock Anthropic API."""

from __future__ import annotations

import itertools
import json
import os
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opalgit import jsonl
from opalgit.agents.base import ExportRequest, ExportResult, ExportTurn
from opalgit.agents.claude.adapter import ClaudeAdapter
from opalgit.agents.claude.files import project_key
from opalgit.agents.claude.write import CLAUDE_VERSION, DANGLING_OUTPUT, DEFAULT_MODEL
from opalgit.errors import UsageError
from opalgit.history.model import Normal, SessionInfo, Turn
from tests.clients import harness as clients
from tests.clients.history import canonical_args, history_of
from tests.clients.mockservers import AnthropicMock, Reply

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "claude"
VIEWER_BIG = FIX / "claude-code-viewer" / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
DEMO = ROOT / "opalgit" / "demo_data" / "claude-session.jsonl"
GENERATED = FIX / "generated" / "7c83c109-bd8e-4995-ab21-c69c5256ec0d.jsonl"
# Main sessions only: subagent transcripts (agent-*.jsonl, subagents/) are not resumable on their own.
# The issue-18 corpus (real/) included, but for edge_cases.jsonl, a parser's hand-made torture
# file (repeated uuids, a call left open): tests/agents/test_real_corpus.py covers it.
MAIN_FILES = [p for p in sorted(FIX.rglob("*.jsonl"))
              if not p.name.startswith("agent-") and p.name != "edge_cases.jsonl"] + [DEMO]

A = ClaudeAdapter()
SID = "7e57e57e-0000-4000-8000-000000000001"
NOW = 1_800_000_000_000


# --------------------------------------------------------------------------- helpers


def user(uid, parent, text="hi", **extra):
    return {"parentUuid": parent, "isSidechain": False, "type": "user", "message": {"role": "user", "content": text},
            "uuid": uid, "timestamp": "2026-01-02T03:04:05.678Z", "sessionId": "old", "cwd": "/w", **extra}


def assistant(uid, parent, blocks=None, **extra):
    blocks = blocks if blocks is not None else [{"type": "text", "text": f"reply {uid}"}]
    return {"parentUuid": parent, "isSidechain": False, "type": "assistant",
            "message": {"id": f"msg_{uid}", "type": "message", "role": "assistant", "model": "claude-test",
                        "content": blocks, "stop_reason": "end_turn", "stop_sequence": None},
            "uuid": uid, "timestamp": "2026-01-02T03:04:06.000Z", "sessionId": "old", **extra}


def request(turns, tmp_path, *, session=None, cwd="/work/proj", reasoning="drop", sid=SID) -> ExportRequest:
    return ExportRequest(turns=turns, session=session, cwd=cwd, session_id=sid,
                         env={"HOME": str(tmp_path / "home")}, now_ms=NOW, reasoning=reasoning)


def view_turns(path: Path, view: int = 0):
    result = A.read(str(path))
    return result, [ExportTurn(result.records[i].turn, result.records[i].normal) for i in result.views[view].indices]


def write(res: ExportResult) -> Path:
    [(path, data)] = res.files
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def records_of(res: ExportResult) -> list:
    out = []
    for raw in res.files[0][1].split(b"\n")[:-1]:
        try:
            out.append(jsonl.parse(raw))
        except jsonl.ParseFailure:
            out.append(raw)
    return out


def conversational(rec) -> bool:
    return isinstance(rec, dict) and rec.get("type") in ("user", "assistant") and rec.get("isSidechain") is not True \
        and isinstance(rec.get("uuid"), str)


def final_leaf(recs) -> str | None:
    prompts = [r for r in recs if isinstance(r, dict) and r.get("type") == "last-prompt"]
    return prompts[-1]["leafUuid"] if prompts else None


def chain(recs, leaf, *, logical=True) -> list[dict]:
    """Records from the root to ``leaf`` (later duplicates win, as in Claude's map), with
    what Claude Code's loader puts back: the other lines of each reply on the chain (same
    ``message.id``) and the tool_result lines hanging from them, in file order."""
    by: dict[str, dict] = {}
    parent: dict[str, str | None] = {}
    order: dict[str, int] = {}
    prev = None
    for i, r in enumerate(recs):
        if isinstance(r, dict) and isinstance(r.get("uuid"), str):
            by[r["uuid"]] = r
            order.setdefault(r["uuid"], i)
            # Records from before the tree existed follow the record before them.
            parent[r["uuid"]] = r.get("parentUuid", prev)
            if parent[r["uuid"]] is None and logical:
                parent[r["uuid"]] = r.get("logicalParentUuid")
            prev = r["uuid"]
    out, seen, u = [], set(), leaf
    while u is not None and u not in seen and u in by:
        seen.add(u)
        out.append(by[u])
        u = parent[u]
    mids = {r["message"].get("id") for r in out if r.get("type") == "assistant" and isinstance(r.get("message"), dict)}
    group = {u for u, r in by.items() if r.get("type") == "assistant" and isinstance(r.get("message"), dict)
             and r["message"].get("id") in mids - {None} and r.get("isSidechain") is not True}
    results = {u for u, r in by.items() if r.get("type") == "user" and parent.get(u) in group
               and isinstance(r.get("message"), dict) and isinstance(r["message"].get("content"), list)
               and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in r["message"]["content"])}
    keep = seen | group | results
    return sorted((by[u] for u in keep), key=lambda r: order[r["uuid"]])


def api_messages(recs) -> list[dict]:
    """What Claude sends on resume: the chain from the leaf (stopping at a compaction),
    consecutive same-role messages merged."""
    msgs: list[dict] = []
    for r in chain(recs, final_leaf(recs), logical=False):
        if r.get("type") not in ("user", "assistant") or r.get("isSidechain") is True:
            continue
        c = r["message"]["content"]
        blocks = [{"type": "text", "text": c}] if isinstance(c, str) else list(c)
        if msgs and msgs[-1]["role"] == r["type"]:
            msgs[-1]["content"] += blocks
        else:
            msgs.append({"role": r["type"], "content": blocks})
    return msgs


def check_pairing(msgs) -> None:
    """Anthropic's rule: the results of an assistant's tool calls, all of them and nothing
    else, in the user message right after it."""
    def ids(m, kind, key):  # malformed fixture blocks without ids are Claude's problem, not ours
        return [b[key] for b in m["content"] if isinstance(b, dict) and b.get("type") == kind and b.get(key)]

    for i, m in enumerate(msgs):
        calls = ids(m, "tool_use", "id")
        if m["role"] == "assistant" and calls:
            assert i + 1 < len(msgs) and msgs[i + 1]["role"] == "user", f"no user message after calls {calls}"
            got = ids(msgs[i + 1], "tool_result", "tool_use_id")
            assert sorted(got) == sorted(calls), (calls, got)
        if m["role"] == "user":
            prev = ids(msgs[i - 1], "tool_use", "id") if i else []
            assert set(ids(m, "tool_result", "tool_use_id")) <= set(prev), (m, prev)


def check_file(res: ExportResult) -> list:
    """The invariants of every exported file; returns its records."""
    data = res.files[0][1]
    assert data == b"" or data.endswith(b"\n")
    recs = records_of(res)
    leaf = final_leaf(recs)
    conv = [r for r in recs if conversational(r)]
    if conv:
        assert leaf == conv[-1]["uuid"], "the final last-prompt names the last conversational record"
        on_chain = {r["uuid"] for r in chain(recs, leaf)}
        # A root the agent itself wrote (a hand-made or 1.0.x file) is written as it was.
        missing = [r["uuid"] for r in conv if r["uuid"] not in on_chain and r.get("parentUuid", "") is not None]
        assert not missing, f"records off the chain from the final leaf: {missing}"
        written = {r["uuid"] for r in recs if isinstance(r, dict) and isinstance(r.get("uuid"), str)}
        for r in recs:
            if isinstance(r, dict) and r.get("type") == "last-prompt":
                assert r["leafUuid"] in written
        check_pairing(api_messages(recs))
    for r in recs:
        if isinstance(r, dict) and "sessionId" in r:
            assert r["sessionId"] == res.session_id
    return recs


def value_of(turn):
    """The record a stored turn holds (parsed from its bytes when it was kept as a line)."""
    if turn.has_record:
        return turn.record
    try:
        return jsonl.parse(turn.line)
    except jsonl.ParseFailure:
        return None


def strip_ids(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in ("sessionId", "cwd")}


# ------------------------------------------------------------------ same-agent export


def test_target_file_and_resume_command(tmp_path):
    _, turns = view_turns(GENERATED)
    res = A.export(request(turns, tmp_path, cwd="/work/my.proj"))
    assert res.files[0][0] == str(tmp_path / "home" / ".claude" / "projects" / "-work-my-proj" / f"{SID}.jsonl")
    assert res.resume == ["claude", "--resume", SID] and res.session_id == SID and res.aux == []
    req = request(turns, tmp_path)
    req.env = {"HOME": "/nowhere", "CLAUDE_CONFIG_DIR": str(tmp_path / "conf")}
    assert A.export(req).files[0][0] == str(tmp_path / "conf" / "projects" / project_key("/work/proj") / f"{SID}.jsonl")
    req.env = {}
    with pytest.raises(UsageError):
        A.export(req)
    with pytest.raises(UsageError):
        A.export(request(turns, tmp_path, sid="../evil"))


def test_generated_session_round_trips_byte_for_byte(tmp_path):
    result, turns = view_turns(GENERATED)
    res = A.export(request(turns, tmp_path, session=result.session, cwd=result.session.cwd))
    old = GENERATED.read_bytes()
    # Only the session id changes, and the entrypoint of a session `claude -p` started
    # (the /resume picker hides sdk-* ones): the file already ends in a last-prompt naming its leaf.
    want = old.replace(result.session.id.encode(), SID.encode()).replace(b'"entrypoint":"sdk-cli"', b'"entrypoint":"cli"')
    assert res.files[0][1] == want
    rep = res.report.to_json()
    assert rep["converted"] == {"session_id:rewritten": 1, "entrypoint:cli": 1} and rep["dropped"] == {}
    assert len(rep["notes"]) == 1 and "sdk-cli written as cli" in rep["notes"][0]


@pytest.mark.parametrize("path", MAIN_FILES, ids=lambda p: p.name[:28])
def test_same_agent_export_reimports_the_same_records(path, tmp_path):
    result, turns = view_turns(path)
    cwd = result.session.cwd if (result.session.cwd or "").startswith("/") else "/work/proj"
    res = A.export(request(turns, tmp_path, session=result.session, cwd=cwd))
    check_file(res)
    back = A.read(str(write(res)))
    assert back.warnings == [] and back.session.id == SID
    before = [v for v in (value_of(t.turn) for t in turns) if conversational(v)]
    after = [v for v in (value_of(r.turn) for r in back.records) if conversational(v)]
    # Exports write entrypoint cli (the /resume picker hides sdk-* sessions).
    before = [dict(r, entrypoint="cli") if str(r.get("entrypoint", "")).startswith("sdk-") else r for r in before]
    assert [strip_ids(r) for r in after] == [strip_ids(r) for r in before]
    # A record whose cwd was a subfolder of the session's keeps that subfolder of the target.
    assert all(r.get("cwd", cwd) == cwd or r["cwd"].startswith(cwd + "/") for r in after)
    assert back.views[0].leaf == result.views[0].leaf
    # Nothing else is lost but stale last-prompts; at most one last-prompt is added.
    kinds_before = [t.turn.record.get("type") if t.turn.has_record else "line" for t in turns]
    kinds_after = [r.turn.record.get("type") if r.turn.has_record else "line" for r in back.records]
    stale = res.report.dropped.get("last-prompt:stale", 0)
    added = res.report.converted.get("last-prompt:added", 0)
    assert len(kinds_after) == len(kinds_before) - stale + added
    assert set(res.report.dropped) <= {"last-prompt:stale"}


def test_last_prompt_written_before_its_leaf(tmp_path):
    # Claude 2.1.x sometimes writes the last-prompt just before the record it names.
    lp = {"type": "last-prompt", "lastPrompt": "hello", "leafUuid": "a1", "sessionId": "old"}
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(jsonl.dumps(r) + b"\n" for r in [user("u1", None, "hello"), lp, assistant("a1", "u1")]))
    _, turns = view_turns(path)
    res = A.export(request(turns, tmp_path))
    assert res.report.to_json()["dropped"] == {} and "last-prompt:added" not in res.report.converted
    assert [r["type"] for r in check_file(res)] == ["user", "last-prompt", "assistant"]
    res = A.export(request(turns[:2], tmp_path))  # rewound to before a1: that last-prompt names nothing
    recs = check_file(res)
    assert res.report.dropped == {"last-prompt:stale": 1} and res.report.converted["last-prompt:added"] == 1
    assert recs[-1] == {"type": "last-prompt", "lastPrompt": "hello", "leafUuid": "u1", "sessionId": SID}


def test_opaque_lines_are_written_back(tmp_path):
    recs = [user("u1", None, "hello"), b"{not json", b"", assistant("a1", "u1")]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join((r if isinstance(r, bytes) else jsonl.dumps(r)) + b"\n" for r in recs))
    _, turns = view_turns(path)
    res = A.export(request(turns, tmp_path))
    lines = res.files[0][1].split(b"\n")
    assert lines[1] == b"{not json" and lines[2] == b""
    check_file(res)


def test_anthropic_thinking_is_kept_for_claude(tmp_path):
    _, turns = view_turns(DEMO)
    res = A.export(request(turns, tmp_path))
    text = res.files[0][1]
    assert b'"type":"thinking"' in text and b'"signature"' in text
    assert "reasoning:signed" not in res.report.dropped


# ----------------------------------------------------------------- rewinds and drops


@pytest.mark.parametrize("path", [GENERATED, DEMO], ids=lambda p: p.name[:20])
def test_every_truncated_state_exports_a_valid_chain(path, tmp_path):
    result, turns = view_turns(path)
    for n in [i + 1 for i, t in enumerate(turns) if t.normal.role != "meta"]:
        res = A.export(request(turns[:n], tmp_path, session=result.session))
        recs = check_file(res)
        leaf = final_leaf(recs)
        last = [t for t in turns[:n] if t.normal.role != "meta"][-1].turn.record
        if last["type"] == "assistant" and any(b.get("type") == "tool_use" for b in last["message"]["content"]):
            # Cut right after a call: it gets a synthesized error result, which becomes the leaf.
            assert res.report.converted.get("tool_result:synthesized") == 1
            assert recs[-2]["message"]["content"][0]["content"] == DANGLING_OUTPUT
            assert recs[-2]["uuid"] == leaf
        else:
            assert leaf == last["uuid"]
            assert "tool_result:synthesized" not in res.report.converted


def _at(turns, prefix: str) -> int:
    """Index of the record whose uuid starts with ``prefix``."""
    return next(i for i, t in enumerate(turns) if t.turn.has_record and t.turn.record.get("uuid", "").startswith(prefix))


def test_middle_range_removed_is_relinked(tmp_path):
    result, turns = view_turns(GENERATED)
    # Drop turn 2's first exchange (text, Read call, its result): the rest must still chain.
    start, end = _at(turns, "4d4accdb"), _at(turns, "f5d90073")
    state = turns[:start] + turns[end + 1:]
    res = A.export(request(state, tmp_path, session=result.session))
    recs = check_file(res)
    assert res.report.converted["parent:relinked"] == 1
    assert res.report.dropped.get("last-prompt:stale") is None
    msgs = api_messages(recs)
    texts = [b.get("text") for m in msgs for b in m["content"] if b.get("type") == "text"]
    assert "Reading hello.py." not in texts and texts[-1].endswith("[turn2-done]")


def test_dropped_result_and_dropped_call(tmp_path):
    _, turns = view_turns(GENERATED)
    res_i, call_i = _at(turns, "13ff7dec"), _at(turns, "02b31d3d")
    # Without the first result: the Bash call gets a synthesized one.
    res = A.export(request(turns[:res_i] + turns[res_i + 1:], tmp_path))
    check_file(res)
    # Claude's attachment after the result and the next assistant line are relinked.
    assert res.report.converted["tool_result:synthesized"] == 1 and res.report.converted["parent:relinked"] == 2
    # Without the Read call: its result is left out and the record after it relinked.
    res = A.export(request(turns[:call_i] + turns[call_i + 1:], tmp_path))
    check_file(res)
    assert res.report.dropped["tool_result:orphan"] == 1 and res.report.converted["parent:relinked"] == 1


def test_authored_turns_inserted_into_a_claude_state(tmp_path):
    result, turns = view_turns(GENERATED)
    marker = Normal(role="user", blocks=[{"type": "text", "text": "[opal: 3 earlier turns were left out]"}])
    merge = Normal(role="user", blocks=[{"type": "text", "text": "[opal: the branch x was merged here]"}])
    p2 = next(i for i, t in enumerate(turns) if t.normal.role == "user" and i > 5)
    state = ([ExportTurn(Turn.authored("user", marker.blocks), marker)] + turns[:p2]
             + [ExportTurn(Turn.authored("user", merge.blocks), merge)] + turns[p2:])
    res = A.export(request(state, tmp_path, session=result.session))
    recs = check_file(res)
    assert res.report.converted["parent:relinked"] == 2  # the first root and the prompt after the merge note
    texts = [b["text"] for m in api_messages(recs) if m["role"] == "user" for b in m["content"] if b.get("type") == "text"]
    assert texts[0].startswith("[opal: 3 earlier") and any(t.startswith("[opal: the branch") for t in texts)
    # A budget-stubbed result (authored, role tool) answers the Claude call it belongs to.
    i = next(i for i, t in enumerate(turns) if t.normal.role == "tool")
    stub = Normal(role="tool", blocks=[dict(turns[i].normal.blocks[0], output="[opal: left out]")])
    state = turns[:i] + [ExportTurn(Turn.authored("tool", stub.blocks), stub)] + turns[i + 1:]
    res = A.export(request(state, tmp_path, session=result.session))
    recs = check_file(res)
    assert not res.report.dropped and "tool_result:synthesized" not in res.report.converted
    assert any(b.get("content") == "[opal: left out]" for m in api_messages(recs) for b in m["content"])


def test_compaction_boundary_is_kept(tmp_path):
    recs = [user("u1", None), assistant("a1", "u1"), user("u2", "a1"), assistant("a2", "u2"),
            {"parentUuid": None, "logicalParentUuid": "a2", "isSidechain": False, "type": "system",
             "subtype": "compact_boundary", "content": "Conversation compacted", "uuid": "cb", "sessionId": "old"},
            user("sum", "cb", "Summary", isCompactSummary=True), user("u3", "sum"), assistant("a3", "u3")]
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"".join(jsonl.dumps(r) + b"\n" for r in recs))
    _, turns = view_turns(path)
    # Drop the pre-compaction tail that the boundary names: its logical parent moves up.
    res = A.export(request(turns[:2] + turns[4:], tmp_path))
    out = check_file(res)
    cb = next(r for r in out if r.get("uuid") == "cb")
    assert cb["parentUuid"] is None and cb["logicalParentUuid"] == "a1"
    assert api_messages(out)[0]["content"][0]["text"] == "Summary"


# -------------------------------------------------------------------- cross-agent export


def foreign(agent: str, role: str, *blocks: dict, time: int | None = None, label: str = "") -> ExportTurn:
    normal = Normal(role=role, blocks=list(blocks), time=time, label=label)
    turn = Turn.authored(role, list(blocks)) if agent == "opal" else Turn.from_record(agent, {"stand-in": role})
    return ExportTurn(turn, normal)


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def call(cid, name, inp) -> dict:
    return {"type": "tool_call", "id": cid, "name": name, "input": inp}


def result(cid, out, is_error=False) -> dict:
    return {"type": "tool_result", "call_id": cid, "output": out, "is_error": is_error}


PATCH_ADD = "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n"
PATCH_EDIT = ("*** Begin Patch\n*** Update File: hello.py\n@@\n-def greet(name):\n+def greet(name, loud=False):\n"
              "*** End Patch\n")
PATCH_TWO = PATCH_ADD.replace("*** End Patch\n", "*** Add File: b.txt\n+b\n*** End Patch\n")
PNG = {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="}


def codex_turns(proj: str) -> list[ExportTurn]:
    return [
        foreign("codex", "meta", label="session_meta"),
        foreign("codex", "user", text("P1: fix greet"), PNG, time=1_700_000_000_000),
        foreign("codex", "assistant", {"type": "reasoning", "text": "plan", "signed": True}),
        foreign("codex", "assistant", {"type": "reasoning", "text": "more plan"}),
        foreign("codex", "assistant", text("Looking first.")),
        foreign("codex", "assistant", call("call_A", "exec_command", {"cmd": "cat hello.py", "workdir": proj})),
        foreign("codex", "tool", result("call_A", "def greet(name):\n")),
        foreign("codex", "assistant", call("call_B", "apply_patch", PATCH_EDIT)),
        foreign("codex", "tool", result("call_B", "Success. Updated hello.py")),
        foreign("codex", "assistant", call("call_C", "apply_patch", PATCH_ADD)),
        foreign("codex", "tool", result("call_C", [text("Success."), PNG])),
        foreign("codex", "assistant", call("call_D", "apply_patch", PATCH_TWO)),  # two files: no counterpart
        foreign("codex", "tool", result("call_D", "Success.")),
        foreign("codex", "assistant", call("call_E", "web_search", {"q": "x"})),  # never answered
        foreign("codex", "meta", label="event_msg:token_count"),
        foreign("codex", "assistant", text("Done: greet is fixed.")),
        foreign("codex", "tool", result("call_Z", "orphan output")),
    ]


def test_cross_agent_codex(tmp_path):
    proj = "/work/proj"
    session = SessionInfo("codex", "019a-codex", cwd=proj, model="gpt-5.5")
    res = A.export(request(codex_turns(proj), tmp_path, session=session, cwd=proj))
    recs = check_file(res)
    assert res.report.to_json() == {
        "converted": {"image": 2, "last-prompt:added": 1, "tool_call:kept": 2, "tool_call:mapped": 3,
                      "tool_result:synthesized": 1},
        "dropped": {"reasoning:foreign": 1, "reasoning:signed": 1, "record:meta:codex": 2, "tool_result:orphan": 1},
        "notes": [],
    }
    lines = [r for r in recs if r.get("type") in ("user", "assistant")]
    assert [r["type"] for r in lines] == ["user", "assistant", "user", "assistant", "user", "assistant", "user",
                                          "assistant", "user", "assistant", "user", "assistant"]
    for r in lines:
        assert set(r) >= {"type", "uuid", "parentUuid", "isSidechain", "userType", "sessionId", "timestamp", "cwd",
                          "version", "message"}
        assert r["version"] == CLAUDE_VERSION and r["cwd"] == proj and r["isSidechain"] is False
        uuid.UUID(r["uuid"])
    for prev, r in itertools.pairwise(lines):
        assert r["parentUuid"] == prev["uuid"]
    assert lines[0]["parentUuid"] is None and lines[0]["timestamp"] == "2023-11-14T22:13:20.000Z"
    assert lines[0]["message"]["content"] == [
        {"type": "text", "text": "P1: fix greet"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]
    first = lines[1]["message"]
    assert first["model"] == DEFAULT_MODEL and first["id"].startswith("msg_opal_") and first["type"] == "message"
    assert first["stop_reason"] == "tool_use" and first["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert first["content"] == [text("Looking first."), {"type": "tool_use", "id": "call_A", "name": "Bash",
                                                         "input": {"command": "cat hello.py"}}]
    assert lines[2]["message"]["content"] == [{"type": "tool_result", "tool_use_id": "call_A",
                                               "content": "def greet(name):\n", "is_error": False}]
    edit = lines[3]["message"]["content"][0]
    assert (edit["name"], edit["input"]) == ("Edit", {"file_path": "/work/proj/hello.py",
                                                      "old_string": "def greet(name):\n",
                                                      "new_string": "def greet(name, loud=False):\n",
                                                      "replace_all": False})
    write_ = lines[5]["message"]["content"][0]
    assert (write_["name"], write_["input"]) == ("Write", {"file_path": "/work/proj/notes.txt", "content": "hello\n"})
    assert lines[6]["message"]["content"][0]["content"][1]["type"] == "image"
    kept = lines[7]["message"]["content"][0]
    assert (kept["name"], kept["input"]) == ("apply_patch", {"input": PATCH_TWO})
    assert lines[9]["message"]["content"][0]["name"] == "web_search"
    assert lines[10]["message"]["content"] == [{"type": "tool_result", "tool_use_id": "call_E",
                                                "content": DANGLING_OUTPUT, "is_error": True}]
    assert lines[11]["message"]["content"] == [text("Done: greet is fixed.")]
    assert lines[11]["message"]["stop_reason"] == "end_turn"
    assert recs[-1] == {"type": "last-prompt", "lastPrompt": "P1: fix greet", "leafUuid": lines[11]["uuid"],
                        "sessionId": SID}
    # The file reads back as a Claude session with the same conversation.
    back = A.read(str(write(res)))
    roles = [r.normal.role for r in back.records if r.normal.role != "meta"]
    assert roles == ["user"] + ["assistant", "tool"] * 5 + ["assistant"]


def test_cross_agent_gemini_and_reasoning_as_text(tmp_path):
    turns = [
        foreign("gemini", "user", text("P1")),
        # Gemini keeps a call and its result in one message.
        foreign("gemini", "assistant", {"type": "reasoning", "text": "thinking hard", "signed": True},
                text("Listing."), call("run_shell_command-1", "run_shell_command", {"command": "ls", "directory": "/w"}),
                result("run_shell_command-1", "a\nb"),
                call("read/file:2", "read_file", {"file_path": "README.md"}), result("read/file:2", "# hi")),
        foreign("gemini", "assistant", call(None, "mystery_tool", "raw text input"), result(None, "mystery out")),
        foreign("gemini", "assistant", {"type": "reasoning", "text": ""}, text("All done."), PNG,
                {"type": "other", "kind": "executableCode"}),
        foreign("gemini", "system", text("The user asked for a listing."), label="checkpoint"),
        foreign("gemini", "user", text("P2")),
    ]
    res = A.export(request(turns, tmp_path, cwd="/w", reasoning="text"))
    recs = check_file(res)
    assert res.report.to_json() == {
        "converted": {"last-prompt:added": 1, "reasoning:as_text": 1, "system:as_user": 1, "tool_call:kept": 1,
                      "tool_call:mapped": 2},
        "dropped": {"content:other": 1, "image:assistant": 1, "reasoning:foreign": 1},
        "notes": [],
    }
    msgs = api_messages(recs)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user", "assistant", "user",
                                         "assistant", "user"]
    a1 = msgs[1]["content"]
    assert a1 == [text("[reasoning from gemini] thinking hard"), text("Listing."),
                  {"type": "tool_use", "id": "run_shell_command-1", "name": "Bash", "input": {"command": "ls"}}]
    assert msgs[2]["content"] == [{"type": "tool_result", "tool_use_id": "run_shell_command-1", "content": "a\nb",
                                   "is_error": False}]
    derived = msgs[3]["content"][0]["id"]  # "read/file:2" is not a valid Anthropic id
    assert derived.startswith("toolu_opal_") and msgs[3]["content"][0]["name"] == "Read"
    assert msgs[3]["content"][0]["input"] == {"file_path": "/w/README.md"}
    assert msgs[4]["content"][0]["tool_use_id"] == derived
    anon = msgs[5]["content"][0]
    assert anon["name"] == "mystery_tool" and anon["input"] == {"input": "raw text input"}
    assert msgs[6]["content"][0]["tool_use_id"] == anon["id"] and msgs[6]["content"][0]["content"] == "mystery out"
    assert msgs[7]["content"] == [text("All done.")]
    assert msgs[8]["content"][0]["text"].startswith("[opal: summary of the earlier conversation, from gemini]")
    assert msgs[8]["content"][1] == text("P2")
    assert all(b.get("type") != "thinking" for m in msgs for b in m["content"])


def test_foreign_reasoning_never_becomes_thinking(tmp_path):
    turns = [foreign("opal", "user", text("P")),
             foreign("opal", "assistant", {"type": "reasoning", "text": "secret", "signed": True}, text("A"))]
    res = A.export(request(turns, tmp_path))
    assert b"thinking" not in res.files[0][1] and b"secret" not in res.files[0][1]
    assert res.report.dropped == {"reasoning:signed": 1}
    res = A.export(request(turns, tmp_path, reasoning="text"))
    assert b'"[reasoning from opal] secret"' in res.files[0][1] and b"thinking" not in res.files[0][1]


def test_session_model_is_used_when_claude(tmp_path):
    turns = [foreign("opal", "user", text("P")), foreign("opal", "assistant", text("A"))]
    res = A.export(request(turns, tmp_path, session=SessionInfo("claude", "x", model="claude-sonnet-9")))
    assert records_of(res)[1]["message"]["model"] == "claude-sonnet-9"


def test_tool_call_right_before_a_prompt_is_closed(tmp_path):
    turns = [foreign("codex", "user", text("P1")),
             foreign("codex", "assistant", call("c1", "exec_command", {"cmd": "sleep 100"}),
                     call("c2", "exec_command", {"cmd": "ls"})),
             foreign("codex", "tool", result("c2", "x")),
             foreign("codex", "user", text("stop that")),
             foreign("codex", "tool", result("c1", "too late"))]
    res = A.export(request(turns, tmp_path))
    recs = check_file(res)
    msgs = api_messages(recs)
    assert msgs[2]["content"][:2] == [
        {"type": "tool_result", "tool_use_id": "c2", "content": "x", "is_error": False},
        {"type": "tool_result", "tool_use_id": "c1", "content": DANGLING_OUTPUT, "is_error": True}]
    assert res.report.converted["tool_result:synthesized"] == 1 and res.report.dropped == {"tool_result:orphan": 1}


# Any mix of foreign turns gives a file that satisfies the invariants.
_ids = st.sampled_from(["c1", "c2", "c3", "bad id!", None])
_blocks = st.one_of(
    st.builds(lambda t: text(t), st.sampled_from(["x", "", "long text"])),
    st.builds(lambda i: call(i, "exec_command", {"cmd": "ls"}), _ids),
    st.builds(lambda i: call(i, "read_file", {"file_path": "a"}), _ids),
    st.builds(lambda i, e: result(i, "out", e), _ids, st.booleans()),
    st.just({"type": "reasoning", "text": "r"}),
    st.just(PNG),
)
_turns = st.lists(st.tuples(st.sampled_from(["codex", "gemini", "opal"]),
                            st.sampled_from(["user", "assistant", "tool", "system", "meta"]),
                            st.lists(_blocks, max_size=4)), max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=_turns, reasoning=st.sampled_from(["drop", "text"]), native=st.integers(0, 8))
def test_property_foreign_mixes_are_valid(spec, reasoning, native, tmp_path):
    turns = [foreign(agent, role, *blocks) for agent, role, blocks in spec]
    # Splice the start of a real Claude session in at some point.
    _, claude = view_turns(DEMO)
    turns = turns[:native] + claude[: native * 3] + turns[native:]
    res = A.export(request(turns, tmp_path, reasoning=reasoning))
    check_file(res)


# ------------------------------------------------------------------ replace_tool_outputs


def _short(call_id: str, text: str) -> str | None:
    return f"[{call_id}: {len(text)} chars]" if len(text) > 10 else None


def test_replace_tool_outputs_bash_and_read():
    bash = {"type": "user", "uuid": "r1", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_1", "type": "tool_result", "content": "line1\nline2\nline3", "is_error": False}]},
        "toolUseResult": {"stdout": "line1\nline2\nline3", "stderr": "", "interrupted": False}}
    new = A.replace_tool_outputs(Turn.from_record("claude", bash), _short)
    assert new is not None and new.agent == "claude" and new.has_record
    assert new.record["message"]["content"][0]["content"] == "[toolu_1: 17 chars]"
    assert new.record["toolUseResult"]["stdout"] == "[toolu_1: 17 chars]"
    assert new.record["uuid"] == "r1" and bash["toolUseResult"]["stdout"] == "line1\nline2\nline3"  # no mutation
    assert A.normalize(new).role == "tool"

    numbered = "     1\t# demo\n     2\t\n     3\tA tiny demo project."
    read = {"type": "user", "uuid": "r2", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_2", "type": "tool_result", "content": numbered}]},
        "toolUseResult": {"type": "text", "file": {"filePath": "/p/README.md", "content": "# demo\n\nA tiny demo project.",
                                                   "numLines": 3}}}

    def excerpt(call_id, text):
        return text.split("\n")[0] + "\n[opal: 2 lines left out]"

    new = A.replace_tool_outputs(Turn.from_record("claude", read), excerpt)
    assert new.record["message"]["content"][0]["content"] == "     1\t# demo\n[opal: 2 lines left out]"
    assert new.record["toolUseResult"]["file"]["content"] == "# demo\n[opal: 2 lines left out]"
    assert new.record["toolUseResult"]["file"]["numLines"] == 3


def test_replace_tool_outputs_blocks_and_nothing_to_do():
    img = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    rec = {"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "t", "type": "tool_result", "content": [{"type": "text", "text": "a long output here"}, img]},
        {"type": "text", "text": "a long trailing note"}]}, "toolUseResult": "a long output here"}
    new = A.replace_tool_outputs(Turn.from_record("claude", rec), _short)
    assert new.record["message"]["content"][0]["content"] == [{"type": "text", "text": "[t: 18 chars]"}, img]
    assert new.record["message"]["content"][1] == {"type": "text", "text": "a long trailing note"}
    assert new.record["toolUseResult"] == "[t: 18 chars]"
    # Inexact source lines are handled too.
    line = jsonl.dumps(rec).replace(b'"user",', b'"user" ,', 1)
    assert A.replace_tool_outputs(Turn.from_line("claude", line), _short).record["toolUseResult"] == "[t: 18 chars]"
    assert A.replace_tool_outputs(Turn.from_record("claude", rec), lambda c, t: None) is None
    assert A.replace_tool_outputs(Turn.from_record("claude", user("u", None, "prompt")), _short) is None
    assert A.replace_tool_outputs(Turn.from_record("claude", assistant("a", None)), _short) is None
    assert A.replace_tool_outputs(Turn.from_record("codex", rec), _short) is None
    assert A.replace_tool_outputs(Turn.from_line("claude", b"{oops"), _short) is None
    assert A.replace_tool_outputs(Turn.authored("tool", []), _short) is None


# ------------------------------------------------------------------------ real client


NEW_PROMPT = "TURN3: what did we do so far?"
NEW_ANSWER = "Summarized. [turn3-done]"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    clients.require_client("claude")
    g = clients.generate_claude_session(base=tmp_path_factory.mktemp("gen"))
    assert g.turn1.ok and g.turn2.ok and g.path is not None, g.describe()
    return g


def _resume(turns, session, tmp_path):
    """Export ``turns`` (or ``turns(project)``) into a fresh root's project and resume it
    with a new prompt; returns the export, the history of the first model request, the root."""
    root = clients.make_root(tmp_path)
    sid = str(uuid.uuid4())
    if callable(turns):
        turns = turns(str(root.project))
    req = ExportRequest(turns=turns, session=session, cwd=str(root.project), session_id=sid,
                        env={"HOME": str(root.home)}, now_ms=NOW)
    res = A.export(req)
    path = write(res)
    assert path == clients.claude_session_file(root, sid)
    with AnthropicMock([Reply(NEW_ANSWER)]) as srv:
        run = clients.run_claude(root, srv.port, NEW_PROMPT, resume=sid, server=srv, timeout=60)
    assert run.ok, run.describe()
    assert srv.errors == [] and srv.exhausted == 0
    assert NEW_ANSWER in path.read_text()  # claude appended to the file opal wrote
    return res, history_of(run.requests[0].body, "claude"), root


@pytest.mark.clients
def test_real_claude_resumes_a_same_agent_export(generated, tmp_path):
    result, turns = view_turns(generated.path)
    _, hist, _ = _resume(turns, result.session, tmp_path)
    # The genuine client's own rebuild of the session at its last request, then the last answer.
    reference = history_of(generated.turn2.requests[-1].body, "claude")
    assert hist == reference + [("assistant", clients.ANSWER2), ("user", NEW_PROMPT)]
    calls = [i for i in hist if i[0] == "tool_call"]
    scripted = [c for r in generated.script1 + generated.script2 for c in r.calls]
    assert [(c[1], c.call_id) for c in calls] == [(s.name, s.call_id) for s in scripted]
    results = [i for i in hist if i[0] == "tool_result"]
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    users = [i[1] for i in hist if i[0] == "user"]
    assert users == [clients.PROMPT1, clients.PROMPT2, NEW_PROMPT]


@pytest.mark.clients
def test_real_claude_resumes_a_rewound_export(generated, tmp_path):
    result, turns = view_turns(generated.path)
    cut = next(i for i, t in enumerate(turns) if t.normal.role == "assistant"
               and t.normal.blocks == [text(clients.ANSWER1)]) + 1
    _, hist, _ = _resume(turns[:cut], result.session, tmp_path)
    reference = history_of(generated.turn2.requests[0].body, "claude")  # turn 1, then PROMPT2
    assert reference[-1] == ("user", clients.PROMPT2)
    assert hist == reference[:-1] + [("user", NEW_PROMPT)]
    assert [i[0] for i in hist] == ["user", "assistant", "tool_call", "tool_result", "assistant", "tool_call",
                                    "tool_result", "assistant", "user"]


@pytest.mark.clients
def test_real_claude_resumes_a_codex_conversation(tmp_path):
    clients.require_client("claude")

    def turns_for(p: str) -> list[ExportTurn]:
        return [
            foreign("codex", "user", text("P1: fix greet and add notes")),
            foreign("codex", "assistant", text("Looking first.")),
            foreign("codex", "assistant", call("call_A", "exec_command", {"cmd": "cat hello.py", "workdir": p})),
            foreign("codex", "tool", result("call_A", "def greet(name):\n    return f\"Hello, {name}!\"\n")),
            foreign("codex", "assistant", call("call_B", "apply_patch", PATCH_EDIT)),
            foreign("codex", "tool", result("call_B", "Success. Updated the following files:\nM hello.py")),
            foreign("codex", "assistant", call("call_C", "apply_patch", PATCH_ADD)),
            foreign("codex", "tool", result("call_C", "Success. Updated the following files:\nA notes.txt")),
            foreign("codex", "assistant", text("Fixed greet and added notes.txt.")),
        ]

    res, hist, root = _resume(turns_for, SessionInfo("codex", "c", model="gpt-5.5"), tmp_path)
    assert res.report.converted["tool_call:mapped"] == 3
    p = str(root.project)
    assert hist == [
        ("user", "P1: fix greet and add notes"),
        ("assistant", "Looking first."),
        ("tool_call", "Bash", canonical_args({"command": "cat hello.py"})),
        ("tool_result", "call_A", "def greet(name):\n    return f\"Hello, {name}!\"\n"),
        ("tool_call", "Edit", canonical_args({"file_path": f"{p}/hello.py", "old_string": "def greet(name):\n",
                                              "new_string": "def greet(name, loud=False):\n", "replace_all": False})),
        ("tool_result", "call_B", "Success. Updated the following files:\nM hello.py"),
        ("tool_call", "Write", canonical_args({"file_path": f"{p}/notes.txt", "content": "hello\n"})),
        ("tool_result", "call_C", "Success. Updated the following files:\nA notes.txt"),
        ("assistant", "Fixed greet and added notes.txt."),
        ("user", NEW_PROMPT),
    ]
    assert [i.call_id for i in hist if i[0] == "tool_call"] == ["call_A", "call_B", "call_C"]


# ------------------------------------------------ issue 18: side folders, continuation copies, folders

SUBAGENT = FIX / "agent-sessions" / "subagent" / "0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl"
SHOWCASE = FIX / "real" / "claude-code-log" / "minimal_showcase" / "55550000-0000-4000-8000-000000000001.jsonl"


def test_side_folders_are_read_and_written_back(tmp_path):
    result, turns = view_turns(SHOWCASE)
    folder = SHOWCASE.with_suffix("")
    want = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert sorted(result.side) == want and len(want) == 4
    req = request(turns, tmp_path, session=result.session)
    req.side = result.side
    res = A.export(req)
    main = Path(res.files[0][0])
    assert res.aux == []
    got = {str(Path(p).relative_to(main.with_suffix(""))): data for p, data in res.files[1:]}
    assert sorted(got) == want
    for rel, data in got.items():
        # Byte for byte once the fresh session id is mapped back.
        assert data.replace(SID.encode(), result.session.id.encode()) == (folder / rel).read_bytes()
    # Said by a step run once the files are written, so a dry run does not claim it.
    assert not any("side-folder" in n for n in res.report.notes)
    assert any("written back under" in (step() or "") for step in res.post)


def _corpus():
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    import real_corpus

    return real_corpus


def test_side_folders_stored_with_the_state_and_named_in_other_exports():
    rc = _corpus()
    box = rc.Sandbox()
    try:
        placed = box.place(rc.Entry("claude/agent-sessions/subagent/" + SUBAGENT.name, "claude"))
        assert box.opal("init").rc == 0
        assert box.opal("commit", "--file", placed, "--agent", "claude", "--json").rc == 0
        os.remove(placed)  # the state holds the session: its side folder too
        import shutil

        shutil.rmtree(placed[: -len(".jsonl")])
        same = box.opal("export", "HEAD", "--to", "claude", "--json")
        out = json.loads(same.out)
        folder = out["files"][0][: -len(".jsonl")]
        meta = Path(folder) / "subagents" / "agent-a0ad4f44468bdf20d.meta.json"
        src = SUBAGENT.with_suffix("") / "subagents" / "agent-a0ad4f44468bdf20d.meta.json"
        assert meta.read_bytes() == src.read_bytes() and str(meta) in out["files"][1:]
        for other in ("codex", "gemini"):
            run = json.loads(box.opal("export", "HEAD", "--to", other, "--json").out)
            assert run["report"]["dropped"].get("side_folder:subagents") == 2, run["report"]
    finally:
        box.close()


def test_continuation_copy_is_written_back_and_once_elsewhere(tmp_path):
    path = FIX / "real" / "vibecodingtracker" / "claude_code.jsonl"
    result, turns = view_turns(path)
    res = A.export(request(turns, tmp_path, session=result.session, cwd=result.session.cwd))
    assert "tool_result:orphan" not in res.report.dropped
    back = records_of(res)
    src = [json.loads(x) for x in path.read_bytes().split(b"\n") if x.strip()]
    dup = "562d6805-363d-4bf4-aba6-7c6ec68a291d"
    assert [r for r in back if isinstance(r, dict) and r.get("uuid") == dup].__len__() == 2
    assert sum(1 for r in src if r.get("uuid") == dup) == 2
    assert any("repeats the uuid" in n or "repeat the uuid" in n for n in res.report.notes)
    normals = A.normalize_many([t.turn for t in turns])
    assert [n.label for n in normals].count("continuation-copy") == 1


def test_subfolder_cwd_keeps_its_subfolder(tmp_path):
    # claude-code-viewer's 1.0.98 session ran `cd` into subfolders of the project.
    result, turns = view_turns(VIEWER_BIG)
    base = result.session.cwd
    subs = {value_of(t.turn).get("cwd") for t in turns if isinstance(value_of(t.turn), dict)} - {base, None}
    assert subs and all(s.startswith(base + "/") for s in subs)
    res = A.export(request(turns, tmp_path, session=result.session, cwd="/elsewhere/proj"))
    cwds = {r.get("cwd") for r in records_of(res) if isinstance(r, dict)} - {None}
    assert cwds == {"/elsewhere/proj"} | {"/elsewhere/proj" + s[len(base):] for s in subs}


def test_compacted_session_to_another_agent_gets_the_compacted_context_or_all():
    # claude-code-log's compaction after a rewind: HEAD keeps the turns before it; Codex
    # gets the summary and what follows, or everything with --pre-compaction.
    rc = _corpus()
    box = rc.Sandbox()
    try:
        placed = box.place(rc.Entry("claude/real/claude-code-log/dag_compact_after_rewind.jsonl", "claude"))
        assert box.opal("init").rc == 0
        assert box.opal("commit", "--file", placed, "--agent", "claude", "--json").rc == 0
        same = json.loads(box.opal("export", "HEAD", "--to", "claude", "--json").out)
        assert "turn:before_compaction" not in same["report"]["dropped"]
        short = json.loads(box.opal("export", "HEAD", "--to", "codex", "--json").out)
        assert short["report"]["dropped"]["turn:before_compaction"] > 0
        full = json.loads(box.opal("export", "HEAD", "--to", "codex", "--pre-compaction", "--json").out)
        assert "turn:before_compaction" not in full["report"]["dropped"]
        assert full["turns"] > short["turns"]
        tight = json.loads(box.opal("export", "HEAD", "--to", "codex", "--pre-compaction", "--budget", "5",
                                    "--json").out)
        assert any("does not fit --budget" in n for n in tight["report"]["notes"])
    finally:
        box.close()


def test_line_separators_in_file_content_survive_a_patch():
    # U+2028/U+2029 (and form feeds) inside a file are not line breaks: Claude's Write
    # and Edit become Codex apply_patch bodies, and back, with the content unchanged.
    from opalgit.agents import tools

    body = "a\u2028b\u2029c\x0cd\n"
    name, patch, mapped = tools.convert_call("claude", "codex", "Write", {"file_path": "/w/f.txt", "content": body},
                                             "/w")
    assert mapped and name == "apply_patch"
    text = patch if isinstance(patch, str) else json.dumps(patch)
    assert "+a\u2028b\u2029c\x0cd\n" in text
    [op] = tools.parse_patch(text)
    assert op["content"].rstrip("\n") == body.rstrip("\n")


def test_codex_output_recorded_after_other_calls_answers_its_call():
    # agent-sessions' Codex fixture: call-1 and call-2 in one reply, call-2's output,
    # a tool search, and only then call-1's output. Claude needs both results right
    # after the reply: call-1's real output is brought forward, not synthesized.
    from opalgit import agents as adapters
    from opalgit.porcelain.states import normals_of

    path = ROOT / "tests" / "fixtures" / "codex" / "agent-sessions" / "small.jsonl"
    read = adapters.get("codex").read(str(path))
    turns = [r.turn for r in read.iter_records(read.views[0].indices)]
    req = request([ExportTurn(t, n) for t, n in zip(turns, normals_of(turns))], Path("/tmp/unused"))
    res = A.export(req)
    recs = check_file(res)
    msgs = api_messages(recs)
    i = next(i for i, m in enumerate(msgs) if any(b.get("id") == "call-1" for b in m["content"]))
    assert sorted(b["id"] for b in msgs[i]["content"] if b["type"] == "tool_use") == ["call-1", "call-2"]
    answered = {b["tool_use_id"]: b for b in msgs[i + 1]["content"] if b["type"] == "tool_result"}
    assert set(answered) == {"call-1", "call-2"}
    assert DANGLING_OUTPUT not in json.dumps(answered["call-1"]) and "a.txt" in json.dumps(answered["call-1"])
    assert res.report.converted.get("tool_result:moved") == 1


def test_side_folder_secrets_are_redacted_in_the_state():
    # A subagent transcript holds tool output too: its secrets go to the vault like the
    # records', the state holds placeholders, and the owner's export puts them back.
    import shutil

    from opalgit.history.states import load_state, resolve, side_files
    from opalgit.store.repo import Repository

    rc = _corpus()
    box = rc.Sandbox()
    try:
        placed = box.place(rc.Entry("claude/agent-sessions/subagent/" + SUBAGENT.name, "claude"))
        side = Path(placed[: -len(".jsonl")]) / "subagents" / "agent-a0ad4f44468bdf20d.jsonl"
        token = "ghp_" + "aB3d" * 9
        side.write_bytes(side.read_bytes() + jsonl.dumps({"type": "user", "uuid": "s-1", "isSidechain": True,
                                                          "message": {"role": "user",
                                                                      "content": f"export GITHUB_TOKEN={token}"}})
                         + b"\n")
        assert box.opal("init").rc == 0
        assert box.opal("commit", "--file", placed, "--agent", "claude", "--json").rc == 0
        old = dict(os.environ)
        os.environ.update({k: box.env[k] for k in ("HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")})
        try:
            repo = Repository.discover(box.repo)
            stored = side_files(repo, load_state(repo, resolve(repo, "HEAD").oid))
        finally:
            os.environ.clear()
            os.environ.update(old)
        assert token.encode() not in stored["subagents/agent-a0ad4f44468bdf20d.jsonl"]
        os.remove(placed)
        shutil.rmtree(placed[: -len(".jsonl")])
        for flag, present in (("--with-secrets", True), ("--no-secrets", False)):
            out = json.loads(box.opal("export", "HEAD", "--to", "claude", flag, "--json").out)
            written = [p for p in out["files"] if p.endswith("agent-a0ad4f44468bdf20d.jsonl")]
            assert (token.encode() in Path(written[0]).read_bytes()) is present
    finally:
        box.close()


def test_roots_the_agent_wrote_are_kept_and_said(tmp_path):
    # claude-code-log's representative file links nothing (every parentUuid null): HEAD
    # holds it all, the same-agent export writes it as it was, and says what Claude resumes.
    path = FIX / "real" / "claude-code-log" / "representative_messages.jsonl"
    result, turns = view_turns(path)
    res = A.export(request(turns, tmp_path, session=result.session, cwd="/work/proj"))
    conv = [r for r in records_of(res) if conversational(r)]
    assert len(conv) == 11 and all(r["parentUuid"] is None for r in conv)
    assert "parent:relinked" not in res.report.converted
    assert any("10 lines after the first begin a chain" in n for n in res.report.notes)

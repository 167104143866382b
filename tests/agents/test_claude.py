"""The Claude Code adapter: lossless reading, normalization, views, incremental reads,
bad input and discovery. Fixtures live in tests/fixtures/claude (public sets keep their
LICENSE files beside them); synthetic sessions are written here."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opalgit import agents, jsonl
from opalgit.agents.base import ReadResult, parse_time
from opalgit.agents.claude.adapter import ClaudeAdapter
from opalgit.agents.claude.files import base36, java_string_hash, legacy_project_key, project_key
from opalgit.errors import InputError
from opalgit.history.model import Turn, summarize

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "claude"
DEMO = ROOT / "opalgit" / "demo_data" / "claude-session.jsonl"
GENERATED = FIX / "generated" / "7c83c109-bd8e-4995-ab21-c69c5256ec0d.jsonl"
VIEWER_BIG = FIX / "claude-code-viewer" / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
SMALL = FIX / "agent-sessions" / "small.jsonl"
DRIFT = FIX / "agent-sessions" / "schema_drift.jsonl"

# The issue-18 corpus (real/) included: every file of it reads losslessly now (what else
# it proves is in tests/agents/test_real_corpus.py).
ALL_FILES = sorted(FIX.rglob("*.jsonl")) + [DEMO]

# From the registry, as opal gets it: a refusal names the agent whose file it is.
A = agents.get("claude")
assert isinstance(A, ClaudeAdapter)
SID = "0f0e0d0c-0b0a-4909-8807-060504030201"


def rendered(result: ReadResult) -> bytes:
    return b"".join(A.render(r.turn) + b"\n" for r in result.records)


def dump(records) -> bytes:
    return b"".join((r if isinstance(r, bytes) else jsonl.dumps(r)) + b"\n" for r in records)


def write(path: Path, records) -> Path:
    path.write_bytes(dump(records))
    return path


def user(uid, parent, text="hi", **extra):
    return {"parentUuid": parent, "isSidechain": False, "type": "user", "message": {"role": "user", "content": text},
            "uuid": uid, "timestamp": "2026-01-02T03:04:05.678Z", "sessionId": SID, "cwd": "/w", **extra}


def assistant(uid, parent, blocks=None, **extra):
    blocks = blocks if blocks is not None else [{"type": "text", "text": f"reply {uid}"}]
    return {"parentUuid": parent, "isSidechain": False, "type": "assistant",
            "message": {"id": f"msg_{uid}", "type": "message", "role": "assistant", "model": "claude-test",
                        "content": blocks, "stop_reason": "end_turn", "stop_sequence": None},
            "uuid": uid, "timestamp": "2026-01-02T03:04:06.000Z", "sessionId": SID, **extra}


def tool_result(uid, parent, call_id, output="ok", is_error=False):
    return {"parentUuid": parent, "isSidechain": False, "type": "user", "uuid": uid, "sessionId": SID,
            "message": {"role": "user", "content": [{"tool_use_id": call_id, "type": "tool_result",
                                                     "content": output, "is_error": is_error}]},
            "toolUseResult": {"stdout": output, "stderr": "", "interrupted": False}}


def last_prompt(leaf):
    return {"type": "last-prompt", "lastPrompt": "p", "leafUuid": leaf, "sessionId": SID}


# ------------------------------------------------------------------ lossless round trip


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name[:28])
def test_round_trip_every_fixture(path):
    result = A.read(str(path))
    data = path.read_bytes()
    # A complete last line without its newline is a record all the same (issue 18).
    whole = data if data.endswith(b"\n") else data + b"\n"
    assert rendered(result) == whole
    assert result.warnings == []
    assert result.end == path.stat().st_size
    assert result.lines == len(result.records) == whole.count(b"\n")
    assert [r.line for r in result.records] == list(range(1, len(result.records) + 1))
    covered = set()
    for view in result.views:
        assert view.indices == sorted(view.indices)
        covered.update(view.indices)
    assert covered == set(range(len(result.records)))
    assert result.views[0].name_hint is None
    assert all(v.name_hint for v in result.views[1:])
    for r in result.records:
        r.normal.check()
        summarize(r.normal)
        # Normalizing the stored turn gives what read() gave.
        assert A.normalize(r.turn) == r.normal
    # The state must be storable (msgpack-able, no floats).
    from opalgit import codec

    codec.pack_canonical("state", {"s": result.state})


def test_linear_fixtures_have_one_view():
    for path in (GENERATED, VIEWER_BIG, DEMO, FIX / "agent-sessions" / "large.jsonl", DRIFT):
        result = A.read(str(path))
        assert len(result.views) == 1, path.name
        assert result.views[0].indices == list(range(len(result.records)))


def test_forked_fixture_views_cover_everything():
    result = A.read(str(SMALL))
    assert len(result.views) == 2
    assert result.views[0].leaf == "u-nested-1"  # the last-prompt names u1, an ancestor
    assert result.views[1].name_hint == "fork-trimmed"  # sanitized for a branch name


# ------------------------------------------------------------------------ normalization


def _pairs(result):
    calls, results, names = {}, [], set()
    for r in result.records:
        for b in r.normal.blocks:
            if b["type"] == "tool_call":
                calls[b["id"]] = b["name"]
                names.add(b["name"])
            elif b["type"] == "tool_result":
                results.append(b["call_id"])
    return calls, results, names


def _roles(result):
    out: dict[str, int] = {}
    for r in result.records:
        out[r.normal.role] = out.get(r.normal.role, 0) + 1
    return out


def test_normalize_generated_session():
    result = A.read(str(GENERATED))
    assert _roles(result) == {"meta": 39, "user": 2, "assistant": 14, "tool": 6}
    calls, results, names = _pairs(result)
    assert names == {"Bash", "Read", "Edit", "Write"}
    assert sorted(results) == sorted(calls)
    prompts = [r.normal for r in result.records if r.normal.role == "user"]
    assert prompts[0].blocks == [{"type": "text", "text": "TURN1: list the files in this project and show me README.md"}]
    assert prompts[0].time == parse_time("2026-11-30T12:25:19.488Z") == 1796041519488
    labels = {r.normal.label for r in result.records if r.normal.role == "meta"}
    assert {"attachment:environment", "last-prompt", "queue-operation:enqueue", "api-request", "cost-state"} <= labels
    info = result.session
    assert (info.agent, info.id, info.cwd, info.git_branch, info.model, info.version) == (
        "claude", "7c83c109-bd8e-4995-ab21-c69c5256ec0d", "/tmp/harness-claude-hkuw57px/proj", "main",
        "claude-opus-5-5", "2.1.328")


def test_normalize_viewer_session_with_sidechains():
    result = A.read(str(VIEWER_BIG))
    roles = _roles(result)
    assert roles["assistant"] == 18 and roles["tool"] == 11 and roles["user"] == 2
    calls, results, names = _pairs(result)
    assert {"Bash", "Read", "Write", "Edit", "Task"} <= names
    assert set(results) == set(calls)
    side = [r.normal for r in result.records if r.turn.record.get("isSidechain")]
    assert side and all(n.role == "meta" and n.label.startswith("sidechain:") for n in side)
    assert result.session.title == "Empty Repo Setup: CLAUDE.md Foundation Created"


def test_normalize_schema_drift_old_shapes():
    result = A.read(str(DRIFT))
    by_uuid = {r.turn.record.get("uuid"): r.normal for r in result.records}
    assert by_uuid["t1"].role == "assistant"
    assert by_uuid["t1"].blocks[0]["type"] == "tool_call" and by_uuid["t1"].blocks[0]["name"] == "bash"
    assert by_uuid["r1"].role == "tool"
    assert by_uuid["r1"].blocks[0]["output"] == "# Title\n\nBody\n"
    assert by_uuid["a1"].blocks == [{"type": "text", "text": "Read README and extracted the title."}]
    assert by_uuid["s3"].label == "system:stop_hook_summary"
    assert by_uuid["att1"].label == "attachment:deferred_tools_delta"
    # Records without a parentUuid key follow file order, so the old prefix stays in the chain.
    assert len(result.views) == 1


def test_normalize_small_fixture_kinds():
    result = A.read(str(SMALL))
    labels = [r.normal.label for r in result.records]
    assert "compact-boundary" in labels
    assert "sidechain:assistant" in labels
    assert "attachment:date_change" in labels and "custom-title" in labels
    assert result.session.title == "Stage0 small fixture"  # the custom title beats the ai-title
    nested = next(r.normal for r in result.records if r.turn.record.get("uuid") == "a-nested-1")
    assert nested.role == "assistant"
    assert [b["type"] for b in nested.blocks] == ["reasoning", "text", "tool_call"]
    assert nested.blocks[0]["signed"] is True


def test_normalize_demo_session():
    result = A.read(str(DEMO))
    assert len(result.records) >= 40 and DEMO.stat().st_size < 100_000
    calls, results, names = _pairs(result)
    assert names == {"Read", "Bash", "Edit", "Write"}
    assert sorted(results) == sorted(calls)
    blocks = [b for r in result.records for b in r.normal.blocks]
    assert any(b["type"] == "reasoning" and b.get("signed") for b in blocks)
    assert sum(1 for b in blocks if b["type"] == "tool_result" and b["is_error"]) == 1
    assert _roles(result)["user"] == 2
    s = result.session
    assert s.cwd == "/home/demo/weatherctl" and s.title and s.model
    times = [r.normal.time for r in result.records if r.normal.time is not None]
    assert times == sorted(times)
    # A single linear chain: each uuid record's parent is the previous uuid record.
    prev = None
    for r in result.records:
        rec = r.turn.record
        if "uuid" in rec:
            assert rec["parentUuid"] == prev
            prev = rec["uuid"]
    final = [r.turn.record for r in result.records if r.turn.record.get("type") == "last-prompt"][-1]
    assert result.views[0].leaf == final["leafUuid"] == [r.turn.record["uuid"] for r in result.records
                                                         if r.normal.role == "assistant"][-1]


def test_normalize_blocks():
    rec = assistant("a", None, [
        {"type": "thinking", "thinking": "hmm", "signature": ""},
        {"type": "thinking", "thinking": "signed", "signature": "sig"},
        {"type": "redacted_thinking", "data": "xyz"},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
        {"type": "mystery", "x": 1},
    ])
    n = A.normalize(Turn.from_record("claude", rec))
    assert n.role == "assistant"
    assert n.blocks == [
        {"type": "reasoning", "text": "hmm"},
        {"type": "reasoning", "text": "signed", "signed": True},
        {"type": "reasoning", "text": "", "signed": True, "redacted": True},
        {"type": "tool_call", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
        {"type": "other", "kind": "mystery"},
    ]
    img = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    n = A.normalize(Turn.from_record("claude", user("u", None, [{"type": "text", "text": "look"}, img])))
    assert n.role == "user" and n.blocks[1] == {"type": "image", "media_type": "image/png", "data": "AAAA"}
    res = tool_result("r", "a", "toolu_1", [{"type": "text", "text": "out"}, img], is_error=True)
    n = A.normalize(Turn.from_record("claude", res))
    assert n.role == "tool"
    assert n.blocks == [{"type": "tool_result", "call_id": "toolu_1", "is_error": True, "output": [
        {"type": "text", "text": "out"}, {"type": "image", "media_type": "image/png", "data": "AAAA"}]}]
    assert A.normalize(Turn.from_record("claude", user("m", None, "caveat", isMeta=True))).role == "meta"
    summ = A.normalize(Turn.from_record("claude", user("s", None, "summary", isCompactSummary=True)))
    assert (summ.role, summ.label) == ("system", "compact-summary")
    side = A.normalize(Turn.from_record("claude", assistant("x", None, isSidechain=True)))
    assert (side.role, side.label) == ("meta", "sidechain:assistant")
    assert A.normalize(Turn.from_record("claude", {"type": "brand-new", "v": 1})).label == "brand-new"
    assert A.normalize(Turn.from_line("claude", b"{oops")).label == "unparseable"
    assert A.normalize(Turn.from_line("claude", b"")).label == "blank"
    # An inexact line (a float written as 1.0) is still understood.
    assert A.normalize(Turn.from_line("claude", b'{"type":"user","uuid":"u","x":1.0,"message":{"content":"yo"}}')).role == "user"


def test_parse_time():
    assert parse_time("1970-01-01T00:00:01.5Z") == 1500
    assert parse_time("1970-01-01T01:00:00+01:00") == 0
    assert parse_time("1970-01-01T00:00:00") == 0
    assert parse_time("[trimmed for fixture]") is None
    assert parse_time(None) is None and parse_time(True) is None
    assert parse_time(1_700_000_000) == 1_700_000_000_000
    assert parse_time(1_700_000_000_123) == 1_700_000_000_123


# -------------------------------------------------------------------------------- views


def _fork_records():
    return [
        {"type": "queue-operation", "operation": "enqueue", "sessionId": SID},
        user("u1", None),
        assistant("a1", "u1"),
        user("u2aaaaaaaa-x", "a1", "first try"),
        assistant("a2aaaaaaaa-x", "u2aaaaaaaa-x"),
        {"type": "progress", "uuid": "p1", "parentUuid": "a1", "data": {"type": "bash_progress"}},
        user("u2bbbbbbbb-y", "a1", "second try"),
        assistant("a2bbbbbbbb-y", "u2bbbbbbbb-y"),
    ]


def test_fork_two_views_file_order(tmp_path):
    recs = _fork_records()
    result = A.read(str(write(tmp_path / "f.jsonl", recs)))
    assert [v.leaf for v in result.views] == ["a2bbbbbbbb-y", "a2aaaaaaaa-x"]
    assert result.views[0].name_hint is None
    assert result.views[1].name_hint == "fork-a2aaaaaa"
    assert result.views[0].indices == [0, 1, 2, 5, 6, 7]  # the shared prefix, the side node, its branch
    assert result.views[1].indices == [0, 1, 2, 3, 4, 5]
    assert result.state["leaf"] == "a2bbbbbbbb-y"


def test_fork_active_view_from_last_prompt(tmp_path):
    recs = _fork_records() + [last_prompt("a2aaaaaaaa-x"), {"type": "mode", "mode": "normal", "sessionId": SID}]
    result = A.read(str(write(tmp_path / "f.jsonl", recs)))
    assert [v.leaf for v in result.views] == ["a2aaaaaaaa-x", "a2bbbbbbbb-y"]
    assert result.views[1].name_hint == "fork-a2bbbbbb"
    assert 8 in result.views[0].indices and 8 in result.views[1].indices
    # An interior node picks the leaf below it; an unknown one falls back to file order.
    recs[-2] = last_prompt("u2aaaaaaaa-x")
    assert A.read(str(write(tmp_path / "g.jsonl", recs))).views[0].leaf == "a2aaaaaaaa-x"
    recs[-2] = last_prompt("nope")
    assert A.read(str(write(tmp_path / "h.jsonl", recs))).views[0].leaf == "a2bbbbbbbb-y"


def test_compaction_keeps_pre_compaction_chain(tmp_path):
    recs = [
        user("u1", None), assistant("a1", "u1"), user("u2", "a1"), assistant("a2", "u2"),
        {"parentUuid": None, "logicalParentUuid": "a2", "isSidechain": False, "type": "system",
         "subtype": "compact_boundary", "content": "Conversation compacted", "uuid": "cb",
         "compactMetadata": {"trigger": "manual", "preTokens": 1234}, "sessionId": SID},
        user("sum", "cb", "Summary of the earlier conversation", isCompactSummary=True),
        user("u3", "sum"), assistant("a3", "u3"),
    ]
    result = A.read(str(write(tmp_path / "c.jsonl", recs)))
    assert len(result.views) == 1
    assert result.views[0].indices == list(range(len(recs)))
    labels = [r.normal.label for r in result.records]
    assert labels[4] == "compact-boundary" and result.records[4].normal.role == "system"
    assert labels[5] == "compact-summary"


def test_sidechains_do_not_fork(tmp_path):
    recs = [
        user("u1", None), assistant("a1", "u1"),
        user("s1", None, "subtask", isSidechain=True), assistant("s2", "s1", isSidechain=True),
        tool_result("u2", "a1", "toolu_x"), assistant("a2", "u2"),
    ]
    result = A.read(str(write(tmp_path / "s.jsonl", recs)))
    assert len(result.views) == 1 and result.views[0].leaf == "a2"
    assert result.views[0].indices == list(range(len(recs)))


def test_duplicate_uuids_and_cycles_do_not_hang(tmp_path):
    recs = [user("x", "x"), assistant("y", "z"), assistant("z", "y"), user("x", "y")]
    result = A.read(str(write(tmp_path / "d.jsonl", recs)))
    assert set().union(*(v.indices for v in result.views)) == {0, 1, 2, 3}


# ------------------------------------------------------------------------ incremental


def _split_read(path: Path, cut: int, tmp_path: Path):
    """Read the first ``cut`` lines of ``path``, then the rest incrementally."""
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    part = tmp_path / path.name
    part.write_bytes(b"".join(lines[:cut]))
    first = A.read(str(part))
    with open(part, "ab") as fh:
        fh.write(b"".join(lines[cut:]))
    second = A.read(str(part), start=first.end, first_line=first.lines + 1, state=first.state)
    return first, second


@pytest.mark.parametrize("path", [DEMO, GENERATED], ids=["demo", "generated"])
def test_incremental_extends_at_every_cut(path, tmp_path):
    full = A.read(str(path))
    n = len(full.records)
    for cut in range(1, n):
        first, second = _split_read(path, cut, tmp_path)
        assert second.extends, cut
        assert [r.line for r in second.records] == list(range(cut + 1, n + 1))
        assert [r.turn for r in second.records] == [r.turn for r in full.records[cut:]]
        assert second.views[0].indices == list(range(n - cut))
        assert second.end == full.end and second.lines == full.lines
        assert second.state == full.state, cut
        assert second.session == full.session


def test_incremental_fork_does_not_extend(tmp_path):
    p = write(tmp_path / "f.jsonl", [user("u1", None), assistant("a1", "u1"), user("u2", "a1"), assistant("a2", "u2")])
    first = A.read(str(p))
    with open(p, "ab") as fh:
        fh.write(dump([user("u2b", "a1", "edited"), assistant("a2b", "u2b")]))
    second = A.read(str(p), start=first.end, first_line=first.lines + 1, state=first.state)
    assert not second.extends
    assert [r.line for r in second.records] == [5, 6]
    assert len(A.read(str(p)).views) == 2


def test_incremental_other_breaks(tmp_path):
    base = [user("u1", None), assistant("a1", "u1"), user("u2", "a1"), assistant("a2", "u2")]
    cases = {
        "unknown parent": [user("u3", "ghost")],
        "new root": [user("u3", None)],
        "two new leaves": [user("u3", "a2"), assistant("a3", "u3"), assistant("a3b", "u3")],
        "last-prompt to the past": [last_prompt("a1")],
        "repeated uuid": [assistant("a2", "u2")],
    }
    for name, extra in cases.items():
        p = write(tmp_path / "i.jsonl", base)
        first = A.read(str(p))
        with open(p, "ab") as fh:
            fh.write(dump(extra))
        second = A.read(str(p), start=first.end, first_line=5, state=first.state)
        assert not second.extends, name
    # What does extend: a continuation, side nodes, bookkeeping, a last-prompt to the new leaf.
    p = write(tmp_path / "ok.jsonl", base)
    first = A.read(str(p))
    with open(p, "ab") as fh:
        fh.write(dump([
            {"type": "system", "subtype": "turn_duration", "uuid": "t1", "parentUuid": "a2", "isSidechain": False},
            {"type": "attachment", "uuid": "at", "parentUuid": "u2", "attachment": {"type": "todo_reminder"}},
            user("u3", "t1"), assistant("a3", "u3"), last_prompt("a3"), b"",
        ]))
    second = A.read(str(p), start=first.end, first_line=5, state=first.state)
    assert second.extends and second.state["leaf"] == "a3" and second.views[0].leaf == "a3"
    assert second.state == A.read(str(p)).state


def test_incremental_no_new_lines_and_truncated_file(tmp_path):
    p = write(tmp_path / "n.jsonl", [user("u1", None), assistant("a1", "u1")])
    first = A.read(str(p))
    again = A.read(str(p), start=first.end, first_line=first.lines + 1, state=first.state)
    assert again.extends and again.records == [] and again.end == first.end and again.lines == 2
    p.write_bytes(dump([user("u1", None)]))
    shrunk = A.read(str(p), start=first.end, first_line=3, state=first.state)
    assert not shrunk.extends and shrunk.warnings


# -------------------------------------------------------------------------- bad input


def test_empty_file(tmp_path):
    p = tmp_path / "e.jsonl"
    p.write_bytes(b"")
    with pytest.raises(InputError) as exc:
        A.read(str(p))
    assert exc.value.path == str(p) and exc.value.line is None
    assert "not written anything" in exc.value.hint


def test_whitespace_only_file_is_empty(tmp_path):
    p = tmp_path / "w.jsonl"
    p.write_bytes(b"\n  \n")
    with pytest.raises(InputError, match="empty"):
        A.read(str(p))


def test_first_line_still_being_written(tmp_path):
    p = tmp_path / "f.jsonl"
    p.write_bytes(jsonl.dumps(user("u1", None))[:30])
    result = A.read(str(p))
    assert result.records == [] and result.end == 0 and result.lines == 0
    assert "incomplete last line" in result.warnings[0]


def test_registry_finds_the_adapter():
    from opalgit import agents as adapters

    adapter = adapters.get("claude")
    assert isinstance(adapter, ClaudeAdapter) and adapter.title == "Claude Code"


def test_binary_junk(tmp_path):
    p = tmp_path / "b.jsonl"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(InputError, match="binary"):
        A.read(str(p))
    assert not A.sniff(str(p), p.read_bytes())


def test_first_line_not_json(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"hello world\n" + dump([user("u1", None)]))
    with pytest.raises(InputError) as exc:
        A.read(str(p))
    assert exc.value.line == 1 and exc.value.hint


def test_truncated_last_line(tmp_path):
    recs = [user("u1", None), assistant("a1", "u1")]
    body = dump(recs)
    tail = jsonl.dumps(user("u2", "a1"))
    p = tmp_path / "t.jsonl"
    p.write_bytes(body + tail[:25])
    result = A.read(str(p))
    assert len(result.records) == 2 and result.end == len(body) and result.lines == 2
    assert result.warnings == [f"{p}:3: incomplete last line (the agent may still be writing); it will be committed next time"]
    p.write_bytes(body + tail + b"\n")
    more = A.read(str(p), start=result.end, first_line=3, state=result.state)
    assert more.extends and [r.turn.record["uuid"] for r in more.records] == ["u2"] and not more.warnings


def test_garbage_and_blank_middle_lines(tmp_path):
    p = tmp_path / "g.jsonl"
    p.write_bytes(dump([user("u1", None)]) + b"{not json at all\n\n  \r\n" + dump([assistant("a1", "u1")]))
    result = A.read(str(p))
    assert rendered(result) == p.read_bytes()
    assert [r.normal.label for r in result.records] == ["", "unparseable", "blank", "blank", ""]
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith(f"{p}:2: not JSON (")
    assert result.warnings[0].endswith("); kept as an opaque record")
    assert result.views[0].indices == [0, 1, 2, 3, 4]


def test_inexact_lines_round_trip(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"type":"user","uuid":"u1","parentUuid":null,"n":1.0,"message":{"content":"caf\\u00e9"}}\r\n'
                  b'{"type": "assistant", "uuid": "a1", "parentUuid": "u1"}\n')
    result = A.read(str(p))
    assert rendered(result) == p.read_bytes()
    assert [r.normal.role for r in result.records] == ["user", "assistant"]
    assert result.views[0].leaf == "a1"


def test_codex_rollout_is_refused(tmp_path):
    p = write(tmp_path / "rollout-2026-01-01T00-00-00-abc.jsonl", [
        {"timestamp": "2026-01-01T00:00:00.000Z", "type": "session_meta",
         "payload": {"id": "abc", "cwd": "/w", "originator": "codex_cli_rs", "cli_version": "0.169.0"}},
        {"timestamp": "2026-01-01T00:00:01.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}},
    ])
    with pytest.raises(InputError, match="Codex") as exc:
        A.read(str(p))
    assert "--agent codex" in exc.value.hint
    assert not A.sniff(str(p), p.read_bytes())


def test_gemini_files_are_refused(tmp_path):
    p = write(tmp_path / "session.jsonl", [
        {"sessionId": "s", "projectHash": "ab" * 32, "startTime": "2026-01-01T00:00:00Z", "kind": "main"},
        {"id": "m1", "timestamp": "2026-01-01T00:00:01Z", "type": "user", "content": [{"text": "hi"}]},
    ])
    with pytest.raises(InputError, match="Gemini"):
        A.read(str(p))
    assert not A.sniff(str(p), p.read_bytes())
    q = tmp_path / "session.json"
    q.write_text(json.dumps({"sessionId": "s", "projectHash": "x", "messages": []}, indent=2))
    with pytest.raises(InputError, match="Gemini"):
        A.read(str(q))
    assert not A.sniff(str(q), q.read_bytes())


def test_json_without_claude_entries_is_refused(tmp_path):
    p = write(tmp_path / "n.jsonl", [{"hello": "world"}, [1, 2, 3]])
    with pytest.raises(InputError, match="no Claude Code entries"):
        A.read(str(p))


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        A.read(str(tmp_path / "nope.jsonl"))
    with pytest.raises(InputError, match="folder"):
        A.read(str(tmp_path))


def test_huge_line(tmp_path):
    big = "x" * (5 * 1024 * 1024)
    p = write(tmp_path / "h.jsonl", [user("u1", None, big), assistant("a1", "u1")])
    result = A.read(str(p))
    assert rendered(result) == p.read_bytes()
    assert result.records[0].normal.blocks[0]["text"] == big


def test_sniff():
    for path in ALL_FILES:
        assert A.sniff(str(path), path.read_bytes()[:4096]), path.name
    assert not A.sniff("x", b"")
    assert not A.sniff("x", b"not json\n")
    assert not A.sniff("x", b'{"a":1}\n')


# -------------------------------------------------------------------------- discovery


def test_java_hash_and_base36():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert base36(abs(java_string_hash("polygenelubricants"))) == "zik0zk"
    assert base36(0) == "0" and base36(35) == "z" and base36(36) == "10"


def _reference_hash(s: str) -> int:
    units = s.encode("utf-16-le", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i:i + 2], "little")) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_project_keys():
    assert project_key("/tmp/ccexp/proj.dir_x") == "-tmp-ccexp-proj-dir-x"
    assert legacy_project_key("/tmp/ccexp/proj.dir_x") == "-tmp-ccexp-proj.dir_x"
    assert project_key("/home/é/😀") == "-home-----"  # one dash per UTF-16 code unit: 😀 gives two
    cwd = "/tmp/" + "/".join(["segment-with.dots_" + str(i) for i in range(12)])
    cwd = (cwd + "/" + "z" * 300)[:252]
    assert len(cwd) == 252
    key = project_key(cwd)
    suffix = base36(abs(_reference_hash(cwd)))
    assert java_string_hash(cwd) == _reference_hash(cwd)
    assert len(key) == 200 + 1 + len(suffix)
    assert key == project_key(cwd)[:200] + "-" + suffix
    assert key[:200] == "".join(c if c.isascii() and c.isalnum() else "-" for c in cwd)[:200]


def _session_file(folder: Path, name: str, mtime: float, body: bytes | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_bytes(dump([user("u1", None)]) if body is None else body)
    os.utime(p, (mtime, mtime))
    return p


def test_find_sessions_with_home(tmp_path):
    home = tmp_path / "home"
    cwd = str(tmp_path / "work" / "my.proj")
    proj = home / ".claude" / "projects" / project_key(cwd)
    old = _session_file(proj, "11111111-1111-4111-8111-111111111111.jsonl", 1_000)
    new = _session_file(proj, "22222222-2222-4222-8222-222222222222.jsonl", 2_000)
    _session_file(proj, "33333333-3333-4333-8333-333333333333.jsonl", 3_000, b"")  # empty: skipped
    _session_file(proj, "agent-abc.jsonl", 4_000)  # old-layout subagent: skipped
    _session_file(proj / "22222222-2222-4222-8222-222222222222" / "subagents", "agent-def.jsonl", 5_000)
    _session_file(proj, "notes.txt", 6_000)
    legacy = _session_file(home / ".claude" / "projects" / legacy_project_key(cwd),
                           "44444444-4444-4444-8444-444444444444.jsonl", 1_500)
    _session_file(home / ".claude" / "projects" / "-elsewhere", "55555555-5555-4555-8555-555555555555.jsonl", 9_000)

    found = A.find_sessions(cwd, {"HOME": str(home)})
    assert [f.path for f in found] == [str(new), str(legacy), str(old)]
    assert found[0].agent == "claude" and found[0].id == "22222222-2222-4222-8222-222222222222"
    assert found[0].size == new.stat().st_size and found[0].mtime == 2_000

    # CLAUDE_CONFIG_DIR wins over HOME; an empty one is ignored.
    conf = tmp_path / "conf"
    moved = _session_file(conf / "projects" / project_key(cwd), "66666666-6666-4666-8666-666666666666.jsonl", 10)
    assert [f.path for f in A.find_sessions(cwd, {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(conf)})] == [str(moved)]
    assert len(A.find_sessions(cwd, {"HOME": str(home), "CLAUDE_CONFIG_DIR": ""})) == 3
    assert A.find_sessions(cwd, {}) == []
    assert A.find_sessions(str(tmp_path / "other"), {"HOME": str(home)}) == []


def test_find_sessions_long_path(tmp_path):
    home = tmp_path / "home"
    cwd = "/srv/" + "deep-folder/" * 25
    assert len(project_key(cwd)) > 200
    p = _session_file(home / ".claude" / "projects" / project_key(cwd), "77777777-7777-4777-8777-777777777777.jsonl", 5)
    assert [f.path for f in A.find_sessions(cwd, {"HOME": str(home)})] == [str(p)]
    # A key cut by another runtime's hash is still found by its 200-character prefix.
    other = home / ".claude" / "projects" / (project_key(cwd)[:200] + "-otherhash")
    q = _session_file(other, "88888888-8888-4888-8888-888888888888.jsonl", 6)
    assert [f.path for f in A.find_sessions(cwd, {"HOME": str(home)})] == [str(q), str(p)]


def test_find_session_by_id(tmp_path):
    home = tmp_path / "home"
    sid = "99999999-9999-4999-8999-999999999999"
    p = _session_file(home / ".claude" / "projects" / "-some-project", sid + ".jsonl", 7)
    env = {"HOME": str(home)}
    found = A.find_session(sid, env)
    assert found is not None and found.path == str(p) and found.id == sid
    assert A.find_session(sid + ".jsonl", env).path == str(p)
    assert A.find_session("00000000-0000-4000-8000-000000000000", env) is None
    assert A.find_session("../-some-project/" + sid, env) is None
    assert A.find_session(sid, {}) is None
    assert A.find_session(sid, {"CLAUDE_CONFIG_DIR": str(tmp_path / "missing")}) is None


# ------------------------------------------------------------------- property tests

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30) | st.sampled_from(
    ["😀 emoji", "naïve café", "日本語のテキスト", "line\nbreak\ttab", "quote \" and \\ backslash", "\u2028sep", ""])
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_extra = st.dictionaries(st.text("abcdefghij", min_size=1, max_size=6).map(lambda k: "x_" + k), _json, max_size=3)
_step = st.sampled_from(["prompt", "reply", "think", "tool", "unknown", "attachment"])


@st.composite
def sessions(draw):
    steps = ["prompt"] + draw(st.lists(_step, max_size=14))
    records, last, leaf, n = [], None, None, 0
    for step in steps:
        n += 1
        uid = f"{n:08d}-0000-4000-8000-{draw(st.integers(0, 10**6)):012d}"
        extra = draw(_extra)
        if step == "prompt":
            content = draw(_text | st.lists(st.builds(lambda t: {"type": "text", "text": t}, _text), max_size=2))
            rec = user(uid, last, content, **extra)
        elif step in ("reply", "think"):
            block = ({"type": "text", "text": draw(_text)} if step == "reply"
                     else {"type": "thinking", "thinking": draw(_text), "signature": draw(_text)})
            rec = assistant(uid, last, [block], **extra)
        elif step == "tool":
            call = f"toolu_{n:04d}"
            records.append(assistant(uid, last, [{"type": "tool_use", "id": call, "name": "Bash",
                                                  "input": {"command": draw(_text)}}]))
            last = uid
            uid = uid[:-1] + "x"
            rec = tool_result(uid, last, call, draw(_text), draw(st.booleans()))
            rec.update(extra)
        elif step == "unknown":
            records.append({"type": "x-" + draw(st.text("abcxyz", min_size=1, max_size=5)),
                            "sessionId": SID, "data": draw(_json), **extra})
            continue
        else:
            rec = {"parentUuid": last, "isSidechain": False, "type": "attachment", "uuid": uid,
                   "attachment": {"type": "x-att", "value": draw(_json)}, **extra}
        records.append(rec)
        last = uid
        if rec["type"] in ("user", "assistant"):
            leaf = uid
    return records, leaf


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.data())
def test_property_round_trip(session, data):
    records, leaf = session
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{SID}.jsonl"
        body = dump(records)
        path.write_bytes(body)
        result = A.read(str(path))
        assert rendered(result) == body
        assert result.warnings == []
        assert len(result.views) == 1
        assert result.views[0].indices == list(range(len(records)))
        assert result.views[0].leaf == result.state["leaf"] == leaf
        # Any split into two reads gives the same records and the same state.
        cut = data.draw(st.integers(1, len(records)))
        split = Path(tmp) / "split"
        split.mkdir()
        first, second = _split_read(path, cut, split)
        assert second.extends
        assert [r.turn for r in first.records + second.records] == [r.turn for r in result.records]
        assert second.state == result.state


@settings(max_examples=80, deadline=None)
@given(st.lists(st.binary(max_size=40) | st.sampled_from([b"", b"{}", b'{"type":"user","uuid":"u"}', b"\x00", b"[1]"]),
                min_size=1, max_size=6),
       st.booleans())
def test_property_any_bytes_read_or_input_error(chunks, trailing_newline):
    body = b"\n".join(chunks) + (b"\n" if trailing_newline else b"")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "junk.jsonl"
        path.write_bytes(body)
        try:
            result = A.read(str(path))
        except InputError as exc:
            assert str(exc).startswith(str(path))
            return
        # A complete last line without its newline is a record; it renders with one.
        whole = body[: result.end]
        assert rendered(result) == (whole if whole.endswith(b"\n") or not whole else whole + b"\n")
        for r in result.records:
            r.normal.check()


@st.composite
def trees(draw):
    """Random uuid trees: forks, sidechains, compaction, last-prompts, legacy lines."""
    records, uuids, last = [], [], None
    for n in range(draw(st.integers(1, 18))):
        kind = draw(st.sampled_from(["user", "assistant", "assistant", "attachment", "system", "side",
                                     "bookkeeping", "last-prompt", "compact", "legacy"]))
        pick = draw(st.integers(0, 9))
        parent = last if pick < 7 or not uuids else (draw(st.sampled_from(uuids)) if pick < 9 else None)
        uid = f"n{n}"
        if kind == "bookkeeping":
            records.append({"type": "queue-operation", "operation": "enqueue", "sessionId": SID})
            continue
        if kind == "last-prompt":
            if uuids:
                records.append(last_prompt(draw(st.sampled_from(uuids))))
            continue
        if kind in ("user", "assistant"):
            rec = (user if kind == "user" else assistant)(uid, parent)
        elif kind == "side":
            rec = user(uid, parent, "sub", isSidechain=True)
        elif kind == "compact":
            rec = {"parentUuid": None, "logicalParentUuid": parent, "type": "system",
                   "subtype": "compact_boundary", "uuid": uid, "sessionId": SID}
        elif kind == "legacy":
            rec = {"type": "assistant", "uuid": uid, "sessionId": SID, "message": {"content": "old"}}
        else:
            rec = {"parentUuid": parent, "type": kind, "uuid": uid, "sessionId": SID, "isSidechain": False}
        records.append(rec)
        uuids.append(uid)
        last = uid
    return records or [user("root", None)]


@settings(max_examples=150, deadline=None)
@given(trees(), st.data())
def test_property_extends_is_sound(records, data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        path.write_bytes(dump(records))
        full = A.read(str(path))
        assert set().union(*(v.indices for v in full.views)) == set(range(len(records)))
        cut = data.draw(st.integers(1, len(records)))
        split = Path(tmp) / "split"
        split.mkdir()
        first, second = _split_read(path, cut, split)
        if second.extends:
            assert second.state == full.state
            assert full.views[0].indices == first.views[0].indices + [cut + i for i in second.views[0].indices]
            assert full.views[0].leaf == second.views[0].leaf


# ------------------------------------------------- issue 18: real files, read as Claude Code resumes them

REAL = FIX / "real"
#: A genuine Claude Code 2.1.328 session (tests/clients harness, scripted mock): one reply
#: with two parallel calls, then after a resume one with three.
PARALLEL = FIX / "generated" / "9e462f2f-8b1a-4e4e-aa12-5fada1611a67.jsonl"


def _calls_and_results(records):
    calls, results = set(), set()
    for r in records:
        for b in r.normal.blocks:
            if b.get("type") == "tool_call":
                calls.add(b["id"])
            elif b.get("type") == "tool_result":
                results.add(b["call_id"])
    return calls, results


def test_parallel_calls_are_one_line_of_conversation():
    # Each tool_use is its own line; the first call's result is a sibling of the second
    # call's line. Claude Code reattaches it on resume: no fork, every result on the view.
    result = A.read(str(PARALLEL))
    assert len(result.views) == 1
    calls, results = _calls_and_results(result.iter_records(result.views[0].indices))
    assert len(calls) == 5 and calls == results
    assert result.views[0].indices == list(range(result.count))


def test_parallel_sibling_result_written_last_is_still_one_view(tmp_path):
    # The session ended with a sibling result as the file's last line: the leaf Claude
    # picks is that result, and its chain still takes in the other calls and results.
    lines = PARALLEL.read_bytes().split(b"\n")[:-1]
    values = [json.loads(x) for x in lines]
    cut = max(i for i, v in enumerate(values) if v.get("type") == "user" and isinstance(v["message"]["content"], list)
              and v["message"]["content"][0].get("type") == "tool_result")
    # Move the last result before its sibling: the file then ends with the first call's result.
    body = lines[:cut + 1]
    body[cut - 1], body[cut] = body[cut], body[cut - 1]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(body) + b"\n")
    result = A.read(str(path))
    assert len(result.views) == 1
    calls, results = _calls_and_results(result.iter_records(result.views[0].indices))
    assert calls == results and len(calls) == 5


def test_compaction_whose_logical_parent_is_not_in_the_file(tmp_path):
    # A real session with a compaction spliced in after its first turn; the boundary names
    # a pre-compaction leaf the file does not hold (a copied or trimmed transcript).
    values = [json.loads(x) for x in GENERATED.read_bytes().split(b"\n")[:-1]]
    i = next(i for i, v in enumerate(values) if v.get("type") == "user" and isinstance(v["message"]["content"], str)
             and i > 3)
    sid = values[i]["sessionId"]
    boundary = {"parentUuid": None, "logicalParentUuid": "not-in-this-file", "isSidechain": False, "type": "system",
                "subtype": "compact_boundary", "content": "Conversation compacted", "uuid": "cb-1", "sessionId": sid,
                "timestamp": values[i]["timestamp"], "compactMetadata": {"trigger": "manual", "preTokens": 1}}
    summary = {"parentUuid": "cb-1", "isSidechain": False, "type": "user", "isCompactSummary": True, "uuid": "sum-1",
               "message": {"role": "user", "content": "Summary of turn 1"}, "sessionId": sid,
               "timestamp": values[i]["timestamp"]}
    values[i] = dict(values[i], parentUuid="sum-1")
    path = write(tmp_path / f"{sid}.jsonl", values[:i] + [boundary, summary] + values[i:])
    result = A.read(str(path))
    assert len(result.views) == 1, "the turns before the compaction are not a fork"
    assert result.views[0].indices == list(range(result.count))


def test_unchained_and_unterminated_real_files_are_whole():
    # claude-code-log's fixtures: every parentUuid null, and no newline after the last line.
    for name in ("representative_messages.jsonl", "todowrite_examples.jsonl"):
        path = REAL / "claude-code-log" / name
        data = path.read_bytes()
        assert not data.endswith(b"\n")
        result = A.read(str(path))
        assert result.warnings == [] and result.end == len(data)
        assert result.count == data.count(b"\n") + 1 and len(result.views) == 1
        calls, results = _calls_and_results(result.records)
        assert calls and calls <= results


def test_line_committed_without_its_newline_then_continued(tmp_path):
    # The incremental read after the agent writes the missing newline and a new line:
    # that newline is the end of the line already read, not a blank line of its own.
    src = (REAL / "claude-code-log" / "todowrite_examples.jsonl").read_bytes()
    path = tmp_path / "s.jsonl"
    path.write_bytes(src)
    first = A.read(str(path))
    extra = jsonl.dumps(last_prompt("assistant_006"))
    with open(path, "ab") as fh:
        fh.write(b"\n" + extra + b"\n")
    more = A.read(str(path), start=first.end, first_line=first.lines + 1, state=first.state)
    assert [r.turn.record for r in more.records] == [json.loads(extra)]
    assert more.warnings == [] and more.end == path.stat().st_size


def test_truncated_last_line_is_left_and_said():
    path = REAL / "claude-code-log" / "todowrite_examples.jsonl"
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.jsonl"
        p.write_bytes(path.read_bytes()[:-20])
        result = A.read(str(p))
        assert result.count == path.read_bytes().count(b"\n")
        assert len(result.warnings) == 1 and "incomplete last line" in result.warnings[0]


def test_continuation_copy_is_bookkeeping_for_other_agents():
    # Claude Code 1.0.95 started a continuation by copying a line under the same uuid.
    path = REAL / "vibecodingtracker" / "claude_code.jsonl"
    result = A.read(str(path))
    assert len(result.views) == 1
    turns = [r.turn for r in result.records]
    normals = A.normalize_many(turns)
    labels = [n.label for n in normals]
    assert labels.count("continuation-copy") == 1
    i = labels.index("continuation-copy")
    uid = turns[i].record["uuid"] if turns[i].has_record else json.loads(turns[i].line)["uuid"]
    assert sum(1 for t in turns if (t.record if t.has_record else json.loads(t.line)).get("uuid") == uid) == 2

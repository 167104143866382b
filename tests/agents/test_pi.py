"""The Pi adapter on genuine sessions the real Pi 1.6.0 wrote (tests/fixtures/pi/generated/):
the adapter contract, the entry tree as branches, same-agent and foreign exports, its tools."""

from __future__ import annotations

import glob
import json
import os

import pytest

from opalgit import agents, jsonl
from opalgit.agents import tools
from opalgit.agents.base import ExportRequest, ExportTurn
from opalgit.agents.pi import files
from opalgit.agents.pi import read as reader
from opalgit.agents.pi.write import NO_RESULT
from opalgit.errors import InputError
from opalgit.history.model import Normal, SessionInfo, Turn
from opalgit.testing.adapters import AdapterContract, conversation
from tests.fixtures import real_corpus

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(os.path.dirname(HERE), "fixtures", "pi", "generated")
TWO_TURN = os.path.join(GEN, "two-turn.jsonl")
BRANCH = os.path.join(GEN, "branch.jsonl")
COMPACT = os.path.join(GEN, "compact.jsonl")
PARALLEL = glob.glob(os.path.join(GEN, "structures", "parallel", "*.jsonl"))[0]
SAMPLES = [TWO_TURN, BRANCH, COMPACT, PARALLEL]
FOREIGN = [p for a in real_corpus.AGENTS for p in [e.abspath for e in real_corpus.CORPUS if e.agent == a][:15]]

adapter = agents.get("pi")


class TestPiContract(AdapterContract):
    adapter = agents.get("pi")
    samples = SAMPLES
    foreign = FOREIGN


def _lines(path: str) -> list[dict]:
    with open(path, "rb") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _export(path: str, tmp_path, view: int = 0, **kw) -> tuple[list[dict], object]:
    src = adapter.read(path)
    turns = [ExportTurn(r.turn, r.normal) for r in src.iter_records(src.views[view].indices)]
    cwd = tmp_path / "proj"
    cwd.mkdir(exist_ok=True)
    req = ExportRequest(turns=turns, session=src.session, cwd=str(cwd), session_id="0c0ffee0-0000-4000-8000-000000000001",
                        env={"HOME": str(tmp_path / "home")}, now_ms=1_767_225_600_000, **kw)
    res = adapter.export(req)
    return [json.loads(x) for x in res.files[0][1].splitlines()], res


def test_the_tree_of_a_genuine_branch_is_two_views_the_resumed_one_first():
    result = adapter.read(BRANCH)
    assert len(result.views) == 2
    entries = _lines(BRANCH)
    active, fork = result.views
    # Pi resumes the line that ends in the file's last entry: the branch made last.
    assert active.leaf == entries[-1]["id"] and active.name_hint is None
    assert fork.name_hint == "fork-" + fork.leaf
    texts = [t for _, t in conversation(result, 0)]
    assert "BTURN: instead, just count the lines of hello.py" in texts and not any(t.startswith("TURN2") for t in texts)
    other = [t for _, t in conversation(result, 1)]
    assert any(t.startswith("TURN2") for t in other) and not any(t.startswith("BTURN") for t in other)
    # Both hold the header and turn 1, which they share.
    shared = [i for i in active.indices if i in fork.indices]
    assert shared == list(range(len(shared))) and len(shared) == 10


def test_a_linear_session_is_one_view_of_every_line():
    result = adapter.read(TWO_TURN)
    assert [v.indices for v in result.views] == [list(range(result.count))]
    assert result.session.id == _lines(TWO_TURN)[0]["id"] and result.session.model == "mock-model"
    roles = [r.normal.role for r in result.records]
    assert roles[:4] == ["meta", "meta", "meta", "meta"]  # header, model, thinking level, system prompt
    calls = [b for r in result.records for b in r.normal.blocks if b["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["bash", "read", "edit", "write"]
    assert calls[2]["input"]["edits"][0]["oldText"].startswith("def greet")


def test_parallel_calls_are_one_assistant_message_and_results_in_order():
    result = adapter.read(PARALLEL)
    normals = [r.normal for r in result.records]
    first = next(n for n in normals if sum(b["type"] == "tool_call" for b in n.blocks) == 3)
    ids = [b["id"] for b in first.blocks if b["type"] == "tool_call"]
    at = normals.index(first)
    assert [n.blocks[0]["call_id"] for n in normals[at + 1 : at + 4]] == ids


def test_unknown_entry_types_and_fields_are_kept_and_are_bookkeeping(tmp_path):
    lines = open(TWO_TURN, "rb").read().split(b"\n")
    extra = [
        b'{"type":"label","id":"aaaa0001","parentId":"X","timestamp":"2026-01-01T00:00:00.000Z","targetId":"x","label":"l"}',
        b'{"type":"brand_new_kind","id":"aaaa0002","parentId":"aaaa0001","timestamp":"2026-01-01T00:00:00.000Z","v":[1]}',
        b'{"type":"compaction","id":"aaaa0003","parentId":"aaaa0002","timestamp":"2026-01-01T00:00:00.000Z",'
        b'"summary":"S","firstKeptEntryId":"aaaa0001","tokensBefore":5}',
    ]
    last = json.loads(lines[-2])["id"]
    extra[0] = extra[0].replace(b'"X"', json.dumps(last).encode())
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n".join(lines[:-1] + extra) + b"\n")
    result = adapter.read(str(path))
    assert b"".join(adapter.render(r.turn) + b"\n" for r in result.records) == path.read_bytes()
    tail = [r.normal for r in result.records[-3:]]
    assert [n.role for n in tail] == ["meta", "meta", "user"]
    assert tail[1].label == "brand_new_kind"
    assert tail[2].blocks[0]["text"] == reader.COMPACTION_SUMMARY_PREFIX + "S" + reader.COMPACTION_SUMMARY_SUFFIX
    rows, res = _export(str(path), tmp_path)
    assert rows[-2]["type"] == "brand_new_kind" and rows[-2]["v"] == [1]
    assert res.report.dropped == {} and res.report.converted == {}


def test_same_agent_export_keeps_every_entry_and_only_renames_the_session(tmp_path):
    src = _lines(TWO_TURN)
    rows, res = _export(TWO_TURN, tmp_path)
    assert rows[0] == {**src[0], "id": res.session_id, "cwd": os.path.realpath(str(tmp_path / "proj"))}
    assert rows[1:] == src[1:]
    assert res.prefix == len(src)
    assert res.report.to_json() == {"converted": {}, "dropped": {}, "notes": []}
    assert res.resume == ["pi", "--session", res.session_id]
    assert res.files[0][0].startswith(os.path.join(str(tmp_path / "home"), ".pi", "agent", "sessions",
                                                   files.project_key(os.path.realpath(str(tmp_path / "proj")))))


def test_a_fork_exports_as_one_chain_pi_resumes_whole(tmp_path):
    rows, res = _export(BRANCH, tmp_path, view=1)
    entries = rows[1:]
    assert entries[0]["parentId"] is None
    assert all(b["parentId"] == a["id"] for a, b in zip(entries, entries[1:]))
    assert not res.report.dropped and not res.report.converted
    texts = [c.get("text") for e in entries for c in (e.get("message") or {}).get("content") or [] if isinstance(c, dict)]
    assert "TURN2: add a farewell() function to hello.py and write notes.txt" in texts


def test_a_record_dropped_from_the_middle_is_relinked_and_reported(tmp_path):
    src = adapter.read(TWO_TURN)
    records = src.records
    turns = [ExportTurn(r.turn, r.normal) for i, r in enumerate(records) if i != 2]
    cwd = tmp_path / "p"
    cwd.mkdir()
    res = adapter.export(ExportRequest(turns=turns, session=src.session, cwd=str(cwd), session_id="s1",
                                       env={"HOME": str(tmp_path)}, now_ms=0))
    rows = [json.loads(x) for x in res.files[0][1].splitlines()]
    assert all(b["parentId"] == a["id"] for a, b in zip(rows[1:], rows[2:]))
    assert res.report.converted == {"entry:relinked": 1}


def _claude_turns() -> list[ExportTurn]:
    def t(role, blocks, rid=None):
        rec = {"type": role if role != "tool" else "user", "message": {"id": rid, "content": []}}
        label = "attachment:environment" if role == "meta" else ""
        return ExportTurn(Turn.from_record("claude", rec), Normal(role=role, blocks=blocks, time=1_700_000_000_000,
                                                                   label=label))
    return [
        t("meta", []),
        t("user", [{"type": "text", "text": "hi"}]),
        t("assistant", [{"type": "reasoning", "text": "hmm", "signed": True}], "m1"),
        t("assistant", [{"type": "text", "text": "Looking."}], "m1"),
        t("assistant", [{"type": "tool_call", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}], "m1"),
        t("assistant", [{"type": "tool_call", "id": "toolu_2", "name": "Edit", "input": {
            "file_path": "/p/a.py", "old_string": "a", "new_string": "b", "replace_all": False}}], "m1"),
        t("assistant", [{"type": "tool_call", "id": "toolu_3", "name": "WebFetch", "input": {"url": "x"}}], "m1"),
        t("tool", [{"type": "tool_result", "call_id": "toolu_1", "output": "a.py", "is_error": False}]),
        t("tool", [{"type": "tool_result", "call_id": "toolu_2", "output": "ok", "is_error": False}]),
        t("tool", [{"type": "tool_result", "call_id": "nope", "output": "?", "is_error": False}]),
        t("assistant", [{"type": "text", "text": "Done."}], "m2"),
    ]


def test_a_foreign_session_becomes_pi_messages_with_a_true_report(tmp_path):
    cwd = tmp_path / "proj"
    cwd.mkdir()
    req = ExportRequest(turns=_claude_turns(), session=SessionInfo("claude", "c1", "/p", model="claude-x"),
                        cwd=str(cwd), session_id="s2", env={"HOME": str(tmp_path)}, now_ms=1_767_225_600_000)
    res = adapter.export(req)
    rows = [json.loads(x) for x in res.files[0][1].splitlines()]
    assert rows[0]["type"] == "session" and rows[0]["id"] == "s2" and rows[0]["cwd"] == os.path.realpath(str(cwd))
    msgs = [r["message"] for r in rows[1:]]
    assert [m["role"] for m in msgs] == ["user", "assistant", "toolResult", "toolResult", "toolResult", "assistant"]
    call_msg = msgs[1]
    assert [c["type"] for c in call_msg["content"]] == ["text", "toolCall", "toolCall", "toolCall"]
    assert call_msg["content"][1] == {"type": "toolCall", "id": "toolu_1", "name": "bash", "arguments": {"command": "ls"}}
    assert call_msg["content"][2]["arguments"] == {"path": "/p/a.py", "edits": [{"oldText": "a", "newText": "b"}]}
    assert call_msg["content"][3]["name"] == "WebFetch" and call_msg["stopReason"] == "toolUse"
    assert msgs[4]["toolCallId"] == "toolu_3" and msgs[4]["content"][0]["text"] == NO_RESULT and msgs[4]["isError"]
    assert res.report.to_json() == {
        "converted": {"tool_call:kept": 1, "tool_call:mapped": 2, "tool_result:synthesized": 1},
        "dropped": {"reasoning:signed": 1, "record:meta:claude": 1, "tool_result:orphan": 1},
        "notes": ["bookkeeping records with no Pi counterpart were left out: attachment:environment x1"],
    }
    assert res.prefix == 0


def test_a_missing_folder_is_said(tmp_path):
    src = adapter.read(TWO_TURN)
    req = ExportRequest(turns=[ExportTurn(r.turn, r.normal) for r in src.records], session=src.session,
                        cwd=str(tmp_path / "gone"), session_id="s3", env={"HOME": str(tmp_path)}, now_ms=0)
    assert any("does not exist" in n for n in adapter.export(req).report.notes)


@pytest.mark.parametrize("body, line, what", [
    (b'{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"t","message":{}}\n', 1, "header"),
    (b'{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/"}\nnot json\n{"a":1}\n', None, None),
])
def test_malformed_input(tmp_path, body, line, what):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(body)
    if what is None:
        result = adapter.read(str(path))  # a bad line in the middle is kept opaque, and said
        assert result.warnings and ":2: not JSON" in result.warnings[0]
        assert adapter.render(result.records[1].turn) == b"not json"
        return
    with pytest.raises(InputError) as exc:
        adapter.read(str(path))
    assert exc.value.path == str(path) and exc.value.line == line and what in exc.value.message


def test_a_claude_file_handed_to_pi_names_claude():
    claude = next(e.abspath for e in real_corpus.CORPUS if e.agent == "claude")
    with pytest.raises(InputError) as exc:
        adapter.read(claude)
    assert "Claude Code" in exc.value.message and "--agent claude" in (exc.value.hint or "")


def test_finding_sessions_by_folder_and_id(tmp_path):
    home = tmp_path / "home"
    proj = tmp_path / "proj"
    proj.mkdir()
    rows, res = _export(TWO_TURN, tmp_path)
    target, body = res.files[0]
    os.makedirs(os.path.dirname(target))
    with open(target, "wb") as fh:
        fh.write(body)
    env = {"HOME": str(home)}
    assert [s.id for s in adapter.find_sessions(str(proj), env)] == [res.session_id]
    assert adapter.find_session(res.session_id, env).path == target
    assert adapter.find_sessions(str(tmp_path), env) == []
    flat = tmp_path / "flat"
    flat.mkdir()
    os.rename(target, flat / os.path.basename(target))
    fenv = {"HOME": str(home), "PI_CODING_AGENT_SESSION_DIR": str(flat)}
    assert [s.id for s in adapter.find_sessions(str(proj), fenv)] == [res.session_id]
    assert adapter.find_sessions(str(tmp_path), fenv) == []


def test_project_key_is_pis():
    assert files.project_key("/tmp/a/b") == "--tmp-a-b--"
    assert files.project_key("C:\\x\\y") == "--C--x-y--"
    assert files.file_name("u", "2026-12-02T06:01:18.066Z") == "2026-12-02T06-01-18-066Z_u.jsonl"


@pytest.mark.parametrize("source, name, args, kind", [
    ("pi", "bash", {"command": "ls"}, "shell"),
    ("pi", "read", {"path": "/p/x", "offset": 2, "limit": 3}, "read"),
    ("pi", "write", {"path": "/p/x", "content": "c"}, "write"),
    ("pi", "edit", {"path": "/p/x", "edits": [{"oldText": "a", "newText": "b"}]}, "edit"),
    ("pi", "edit", {"path": "/p/x", "oldText": "a", "newText": "b"}, "edit"),
    ("pi", "grep", {"pattern": "x", "path": "/p"}, "search"),
    ("pi", "find", {"pattern": "*.py"}, "glob"),
    ("pi", "ls", {"path": "/p"}, "list"),
])
def test_pi_tools_parse_to_shared_actions(source, name, args, kind):
    assert tools.parse_call(source, name, args).kind == kind


def test_pi_tools_round_trip_through_other_agents():
    edit = {"path": "/p/x", "edits": [{"oldText": "a", "newText": "b"}]}
    assert tools.convert_call("pi", "claude", "edit", edit, "/p") == (
        "Edit", {"file_path": "/p/x", "old_string": "a", "new_string": "b", "replace_all": False}, True)
    assert tools.convert_call("claude", "pi", "Edit", {"file_path": "/p/x", "old_string": "a", "new_string": "b"}, "/p") == (
        "edit", edit, True)
    assert tools.convert_call("gemini", "pi", "read_file", {"file_path": "/p/x", "start_line": 2, "end_line": 4}, "/p") == (
        "read", {"path": "/p/x", "offset": 2, "limit": 3}, True)
    assert tools.convert_call("codex", "pi", "exec_command", {"cmd": "ls", "workdir": "/p"}, "/p") == (
        "bash", {"command": "ls"}, True)
    two = {"path": "/p/x", "edits": [{"oldText": "a", "newText": "b"}, {"oldText": "c", "newText": "d"}]}
    assert tools.convert_call("pi", "claude", "edit", two, "/p") == ("edit", two, False)
    assert tools.convert_call("claude", "pi", "Edit", {"file_path": "/p/x", "old_string": "a", "new_string": "b",
                                                        "replace_all": True}, "/p")[2] is False


def test_sniff_claims_a_header_and_pi_entries_only():
    head = open(TWO_TURN, "rb").read(65536)
    assert adapter.sniff(TWO_TURN, head) >= 0.9
    entry = jsonl.dumps(_lines(TWO_TURN)[4]) + b"\n"
    assert 0 < adapter.sniff("x", entry) < 0.9
    assert adapter.sniff("x", b'{"type":"session","id":"x"}\n') == 0  # no cwd nor timestamp: not Pi's


def test_the_other_adapters_refuse_pi_files():
    for name in ("claude", "codex", "gemini"):
        other = agents.get(name)
        for path in SAMPLES:
            with open(path, "rb") as fh:
                assert not other.sniff(path, fh.read(65536)), (name, path)


def _halves(path: str, tmp_path, upto: int):
    data = open(path, "rb").read()
    lines = data.split(b"\n")
    grown = tmp_path / "grown.jsonl"
    grown.write_bytes(b"\n".join(lines[:upto]) + b"\n")
    first = adapter.read(str(grown))
    grown.write_bytes(data)
    return first, adapter.read(str(grown), start=first.end, first_line=first.lines + 1, state=first.state)


def test_an_incremental_read_extends_the_line_pi_resumes(tmp_path):
    first, more = _halves(TWO_TURN, tmp_path, 9)
    assert more.extends and more.views[0].leaf == _lines(TWO_TURN)[-1]["id"]
    assert more.state["leaf"] == more.views[0].leaf and first.count + more.count == adapter.read(TWO_TURN).count


def test_a_branch_made_after_an_import_reads_the_whole_file_again(tmp_path):
    # branch.jsonl's first 16 lines are the two turns; the rest goes on from turn 1's answer.
    first, more = _halves(BRANCH, tmp_path, 16)
    assert len(first.views) == 1 and not more.extends and more.views == []


def test_a_genuine_compaction_is_the_summary_pi_sends_as_a_user_turn():
    result = adapter.read(COMPACT)
    rows = _lines(COMPACT)
    at = next(i for i, e in enumerate(rows) if e["type"] == "compaction")
    normal = result.records[at].normal
    assert normal.role == "user"
    assert normal.blocks == [{"type": "text", "text": reader.COMPACTION_SUMMARY_PREFIX + rows[at]["summary"]
                              + reader.COMPACTION_SUMMARY_SUFFIX}]
    assert len(result.views) == 1 and result.views[0].indices == list(range(len(rows)))


def test_trim_rewrites_a_tool_result_in_place():
    records = adapter.read(TWO_TURN).records
    result = next(r for r in records if r.normal.role == "tool")
    cid = result.normal.blocks[0]["call_id"]
    seen = []
    trimmed = adapter.replace_tool_outputs(result.turn, lambda c, text: seen.append((c, text)) or "[trimmed]")
    assert seen == [(cid, result.normal.blocks[0]["output"])]
    assert adapter.normalize(trimmed).blocks[0]["output"] == "[trimmed]"
    assert trimmed.record["id"] == result.turn.record["id"] and trimmed.record["message"]["toolCallId"] == cid
    assert adapter.replace_tool_outputs(result.turn, lambda c, text: None) is None
    assert adapter.replace_tool_outputs(records[4].turn, lambda c, text: "x") is None  # not a result

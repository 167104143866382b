"""The Qwen Code adapter on genuine sessions written by the real client (Qwen Code 0.24.4,
tests/fixtures/qwen/generated/) and on the public agent-sessions fixtures (MIT, licence
beside them): the adapter contract, the uuid tree's branches, the sniff against Claude
Code's look-alike records, and what an export writes for ``qwen --resume``."""

from __future__ import annotations

import glob
import json
import os

import pytest

from opalgit import agents
from opalgit.agents.base import ExportRequest, ExportTurn
from opalgit.agents.qwen.files import project_key
from opalgit.agents.qwen.format import is_conversation
from opalgit.errors import InputError
from opalgit.testing.adapters import AdapterContract, rendered
from tests.fixtures import real_corpus

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(os.path.dirname(HERE), "fixtures", "qwen")
TWO_TURN = sorted(glob.glob(os.path.join(FIX, "generated", "*.jsonl")))
PARALLEL = sorted(glob.glob(os.path.join(FIX, "generated", "structures", "parallel", "*.jsonl")))
FORKED = os.path.join(FIX, "agent-sessions", "019f0000-0000-7000-8000-000000000004.jsonl")
TELEMETRY = os.path.join(FIX, "agent-sessions", "system_telemetry.jsonl")
SAMPLES = TWO_TURN + PARALLEL + [FORKED, TELEMETRY]
FOREIGN = [e.abspath for e in real_corpus.CORPUS]

qwen = agents.get("qwen")


class TestQwenContract(AdapterContract):
    adapter = qwen
    samples = SAMPLES
    foreign = FOREIGN


def test_the_fixtures_are_there():
    assert len(TWO_TURN) == 1 and len(PARALLEL) == 1


def test_claude_does_not_claim_qwen_files_nor_qwen_claudes():
    """Both write uuid/parentUuid/sessionId records; Qwen's message is a Gemini Content."""
    for path in SAMPLES:
        with open(path, "rb") as fh:
            head = fh.read(65536)
        assert agents.get("claude").sniff(path, head) == 0, path
        assert agents.detect(path, head).name == "qwen"
    claude = [e.abspath for e in real_corpus.CORPUS if e.agent == "claude"]
    assert claude and all(agents.detect(p).name == "claude" for p in claude)


def test_reading_a_qwen_file_as_claude_names_qwen(tmp_path):
    with pytest.raises(InputError) as exc:
        agents.get("claude").read(TWO_TURN[0])
    assert "Qwen Code" in str(exc.value) and exc.value.hint == "import it with --agent qwen"


def test_views_follow_the_chain_and_branches_become_views():
    r = qwen.read(FORKED)
    assert [v.name_hint for v in r.views] == [None, "fork-1"]
    texts = [[b.get("text") for rec in r.iter_records(v.indices) for b in rec.normal.blocks if b["type"] == "text"]
             for v in r.views]
    assert "Discarded branch answer." in texts[1] and "Discarded branch answer." not in texts[0]
    assert texts[0][0] == texts[1][0] == "Begin the active-chain fixture."
    # the artifact record (outside the chain) goes with the active view
    assert 8 in r.views[0].indices


def test_parallel_calls_read_as_one_reply_and_one_result_record_each():
    r = qwen.read(PARALLEL[0])
    calls = [len([b for b in rec.normal.blocks if b["type"] == "tool_call"]) for rec in r.records
             if rec.normal.role == "assistant"]
    assert [c for c in calls if c] == [3, 2]
    results = [rec for rec in r.records if rec.normal.role == "tool"]
    assert len(results) == 5 and all(len(rec.normal.blocks) == 1 for rec in results)
    assert r.session.model == "mock-model" and r.session.version == "0.24.4"


def _export(path, tmp_path, agent_turns=None, **kw):
    src = agents.get(agents.detect(path).name)
    r = src.read(path)
    turns = agent_turns or [ExportTurn(x.turn, x.normal) for x in r.iter_records(r.views[0].indices)]
    home, cwd = tmp_path / "home", tmp_path / "proj"
    cwd.mkdir(exist_ok=True)
    req = ExportRequest(turns=turns, session=r.session, cwd=str(cwd), session_id="0c0ffee0-0000-4000-8000-000000000001",
                        env={"HOME": str(home)}, now_ms=1_767_225_600_000, **kw)
    return req, qwen.export(req)


def _chain_ok(lines, sid, cwd):
    recs = [json.loads(x) for x in lines]
    assert recs[0]["cwd"] == cwd
    assert {r["sessionId"] for r in recs if "sessionId" in r} == {sid}
    prev = None
    for rec in recs:
        if is_conversation(rec):
            assert rec["parentUuid"] == prev
            prev = rec["uuid"]
    return recs


def test_same_agent_export_keeps_every_record_and_only_changes_ids_and_folder(tmp_path):
    req, res = _export(TWO_TURN[0], tmp_path)
    (path, body), = res.files
    key = project_key(os.path.realpath(req.cwd))
    assert path == str(tmp_path / "home" / ".qwen" / "projects" / key / "chats" / f"{req.session_id}.jsonl")
    assert "/" not in key and "_" not in key and key.startswith("-tmp-")
    lines = body.splitlines()
    orig = open(TWO_TURN[0], "rb").read().splitlines()
    assert len(lines) == len(orig) == res.prefix
    recs = _chain_ok(lines, req.session_id, os.path.realpath(req.cwd))
    for a, b in zip(recs, (json.loads(x) for x in orig)):
        assert {k: v for k, v in a.items() if k not in ("sessionId", "cwd")} == \
               {k: v for k, v in b.items() if k not in ("sessionId", "cwd")}
    assert res.report.converted == {"cwd:rewritten": 1} and res.report.dropped == {}
    assert res.resume == ["qwen", "--resume", req.session_id]


def test_a_branch_exports_as_a_valid_chain(tmp_path):
    r = qwen.read(FORKED)
    turns = [ExportTurn(x.turn, x.normal) for x in r.iter_records(r.views[0].indices)]
    req, res = _export(FORKED, tmp_path, turns)
    recs = _chain_ok(res.files[0][1].splitlines(), req.session_id, os.path.realpath(req.cwd))
    assert res.report.converted["parent:relinked"] == 1  # the rewind record hung from the first prompt
    # the dangling call of the fixture gets an error result right after its reply
    assert recs[-1]["type"] != "tool_result" or "opal" in json.dumps(recs[-1])
    assert res.report.converted.get("tool_result:synthesized") == 1


def test_claude_session_into_qwen_maps_tools_and_pairs_results(tmp_path):
    path = os.path.join(os.path.dirname(FIX), "claude", "generated", "structures", "parallel")
    path = next(p for p in glob.glob(path + "/*.jsonl"))
    req, res = _export(path, tmp_path)
    recs = _chain_ok(res.files[0][1].splitlines(), req.session_id, os.path.realpath(req.cwd))
    kinds = [r["type"] for r in recs]
    assert kinds.count("user") == 2
    calls = [p["functionCall"] for r in recs if r["type"] == "assistant" for p in r["message"]["parts"]
             if "functionCall" in p]
    assert [c["name"] for c in calls] == ["run_shell_command", "read_file", "read_file", "write_file",
                                          "run_shell_command"]
    parallel = [r for r in recs if r["type"] == "assistant" and
                sum("functionCall" in p for p in r["message"]["parts"]) > 1]
    assert [sum("functionCall" in p for p in r["message"]["parts"]) for r in parallel] == [3, 2]
    answered = [p["functionResponse"]["id"] for r in recs if r["type"] == "tool_result" for p in r["message"]["parts"]]
    assert sorted(answered) == sorted(c["id"] for c in calls)  # Claude wrote them in the order they finished
    # each reply's results come straight after it, before the next reply or prompt
    talk = [r for r in recs if r["type"] in ("user", "assistant", "tool_result")]
    for i, r in enumerate(talk):
        if r["type"] == "assistant":
            ids = {p["functionCall"]["id"] for p in r["message"]["parts"] if "functionCall" in p}
            after = [p["functionResponse"]["id"] for t in talk[i + 1: i + 1 + len(ids)] for p in t["message"]["parts"]]
            assert set(after) == ids
    assert res.report.converted["tool_call:mapped"] == 5 and "tool_result:synthesized" not in res.report.converted


def test_a_bad_line_in_the_middle_is_kept_and_reported(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(open(TWO_TURN[0], "rb").read() + b"{oops\n")
    r = qwen.read(str(p))
    assert any(":" + str(sum(1 for _ in open(TWO_TURN[0], "rb")) + 1) + ":" in w for w in r.warnings)
    assert rendered(qwen, r) == p.read_bytes()


def test_a_file_of_other_json_is_one_input_error_naming_file_and_line(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(b'{"hello": 1}\n{"world": 2}\n')
    with pytest.raises(InputError) as exc:
        qwen.read(str(p))
    assert exc.value.path == str(p) and exc.value.line == 1 and exc.value.hint


def test_incremental_read_extends_the_chain(tmp_path):
    data = open(TWO_TURN[0], "rb").read()
    cut = data.index(b"TURN2")
    cut = data.rfind(b"\n", 0, cut) + 1
    p = tmp_path / "s.jsonl"
    p.write_bytes(data[:cut])
    first = qwen.read(str(p))
    p.write_bytes(data)
    more = qwen.read(str(p), start=first.end, first_line=first.lines + 1, state=first.state)
    assert more.extends and first.count + more.count == qwen.read(str(p)).count


def _opal(*args, cwd):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "opalgit", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "HOME": str(cwd)}, timeout=120)


@pytest.mark.parametrize("agent", [["--agent", "qwen"], []])
def test_opal_commit_of_a_malformed_qwen_file_is_one_error_naming_file_and_line(tmp_path, agent):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert _opal("init", cwd=tmp_path).returncode == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"this is not JSON\n" + open(TWO_TURN[0], "rb").read())
    out = _opal("commit", "--file", str(bad), *agent, cwd=tmp_path)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    lines = [x for x in out.stderr.splitlines() if x.startswith("opal: error:")]
    assert len(lines) == 1 and "bad.jsonl" in lines[0] and "hint:" in out.stderr
    if agent:
        assert f"{bad}:1:" in lines[0] and "Qwen Code" in lines[0]
    assert _opal("log", "--json", cwd=tmp_path).returncode != 0  # nothing was committed


def test_opal_commit_imports_the_genuine_session(tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert _opal("init", cwd=tmp_path).returncode == 0
    out = _opal("commit", "--file", TWO_TURN[0], "-m", "qwen", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["records"] == sum(1 for _ in open(TWO_TURN[0], "rb")) and got["session"]["agent"] == "qwen"
    assert got["warnings"] == [] and got["fork_branches"] == []


def test_opal_commit_makes_a_branch_of_a_qwen_fork(tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert _opal("init", cwd=tmp_path).returncode == 0
    out = _opal("commit", "--file", FORKED, "--agent", "qwen", "-m", "forked", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["fork_branches"]) == 1


def test_the_first_line_names_the_folder_even_when_it_is_no_conversation_record(tmp_path):
    """Qwen Code checks the cwd of the file's first line, whatever record it is."""
    from opalgit.history.model import Turn

    recs = [{"type": "system", "subtype": "session_artifact_snapshot", "sessionId": "old", "uuid": "a0",
             "parentUuid": None, "systemPayload": {}},
            {"uuid": "u1", "parentUuid": "", "sessionId": "old", "type": "user", "timestamp": "2026-01-01T00:00:00.000Z",
             "message": {"role": "user", "parts": [{"text": "hi"}]}},
            {"uuid": "m1", "parentUuid": "u1", "sessionId": "old", "type": "assistant",
             "message": {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "read_file", "args": {}}}]}}]
    turns = [ExportTurn(Turn.from_record("qwen", r), qwen.normalize_record(r)) for r in recs]
    req = ExportRequest(turns=turns, session=None, cwd=str(tmp_path), session_id="s-1", env={"HOME": str(tmp_path)},
                        now_ms=1_767_225_600_000)
    res = qwen.export(req)
    out = [json.loads(x) for x in res.files[0][1].splitlines()]
    assert out[0]["cwd"] == os.path.realpath(str(tmp_path)) and {r["sessionId"] for r in out} == {"s-1"}
    assert out[1]["parentUuid"] is None and res.report.converted["parent:relinked"] == 1  # "" -> null
    # the call cut off from its result is answered right after its reply
    assert out[-1]["type"] == "tool_result" and out[-1]["parentUuid"] == "m1"
    assert out[-1]["message"]["parts"][0]["functionResponse"]["response"] == {
        "error": "[opal: this tool call has no recorded result]"}
    assert res.report.converted["tool_result:synthesized"] == 1 and res.prefix == 3

"""The opencode adapter: the adapter contract on genuine exports the real client made, each
other agent's real files refused; the reading details the contract does not name (the database
read read-only and mirrored as export JSON, the views of tool parts, malformed exports); the
exporter's ids, required fields and loss report."""

from __future__ import annotations

import glob
import json
import os
import sqlite3

import pytest

from opalgit import agents
from opalgit.agents.base import ExportRequest, ExportTurn
from opalgit.agents.opencode import files
from opalgit.errors import InputError
from opalgit.testing.adapters import AdapterContract
from tests.fixtures import real_corpus

HERE = os.path.join(real_corpus.HERE, "opencode")
SAMPLES = sorted(glob.glob(os.path.join(HERE, "generated", "**", "*.json"), recursive=True))
SAMPLES = [p for p in SAMPLES if os.path.basename(p) != "expected.json"]
SAMPLES += sorted(glob.glob(os.path.join(HERE, "public", "**", "*.json"), recursive=True))
FOREIGN = [e.abspath for e in real_corpus.CORPUS]
TWO_TURN = os.path.join(HERE, "generated", "two-turn.json")


class TestOpencodeContract(AdapterContract):
    adapter = agents.get("opencode")
    samples = SAMPLES
    foreign = FOREIGN


def test_the_other_adapters_refuse_opencode_exports():
    for path in SAMPLES:
        with open(path, "rb") as fh:
            head = fh.read(64 * 1024)
        for name in ("claude", "codex", "gemini"):
            assert not agents.get(name).sniff(path, head), (name, path)


def test_views_follow_what_opencode_sends_the_model():
    res = agents.get("opencode").read(TWO_TURN)
    roles = [r.normal.role for r in res.records]
    assert roles == ["meta", "user", "assistant", "assistant", "assistant", "user", "assistant", "assistant",
                     "assistant", "assistant"]
    step = res.records[2].normal.blocks
    assert [b["type"] for b in step] == ["text", "tool_call", "tool_result"]
    assert step[1]["name"] == "bash" and step[1]["input"]["command"] == "ls"
    assert step[2]["call_id"] == step[1]["id"] and "README.md" in step[2]["output"]
    assert res.session.id.startswith("ses_") and res.session.model == "mock-model"


def test_parallel_calls_of_one_step_come_before_their_results():
    par = [p for p in SAMPLES if "parallel" in p]
    assert par, "the parallel fixture is missing"
    res = agents.get("opencode").read(par[0])
    blocks = next(r.normal.blocks for r in res.records if sum(b["type"] == "tool_call" for b in r.normal.blocks) == 3)
    kinds = [b["type"] for b in blocks if b["type"] != "text"]
    assert kinds == ["tool_call"] * 3 + ["tool_result"] * 3


def _db_from(path: str, db: str) -> str:
    """A database with the rows opencode would hold for an export (the columns of 1.18.33)."""
    doc = json.load(open(path))
    i = doc["info"]
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE session (id text PRIMARY KEY, project_id text, workspace_id text, parent_id text, slug text,"
        " directory text, path text, title text, version text, share_url text, summary_additions integer,"
        " summary_deletions integer, summary_files integer, summary_diffs text, metadata text, cost real,"
        " tokens_input integer, tokens_output integer, tokens_reasoning integer, tokens_cache_read integer,"
        " tokens_cache_write integer, revert text, permission text, agent text, model text, time_created integer,"
        " time_updated integer, time_compacting integer, time_archived integer);"
        "CREATE TABLE message (id text PRIMARY KEY, session_id text, time_created integer, time_updated integer,"
        " data text);"
        "CREATE TABLE part (id text PRIMARY KEY, message_id text, session_id text, time_created integer,"
        " time_updated integer, data text);")
    t = i["tokens"]
    conn.execute("INSERT INTO session VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                 (i["id"], i["projectID"], None, None, i["slug"], i["directory"], i.get("path"), i["title"],
                  i["version"], None, i["summary"]["additions"], i["summary"]["deletions"], i["summary"]["files"],
                  None, None, float(i["cost"]), t["input"], t["output"], t["reasoning"], t["cache"]["read"],
                  t["cache"]["write"], None, json.dumps(i["permission"], separators=(",", ":")), i["agent"],
                  json.dumps(i["model"], separators=(",", ":")), i["time"]["created"], i["time"]["updated"], None,
                  None))
    for m in doc["messages"]:
        info = {k: v for k, v in m["info"].items() if k not in ("id", "sessionID")}
        conn.execute("INSERT INTO message VALUES (?,?,?,?,?)", (m["info"]["id"], i["id"], 0, 0, json.dumps(info)))
        for p in m["parts"]:
            data = {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}
            conn.execute("INSERT INTO part VALUES (?,?,?,?,?,?)", (p["id"], m["info"]["id"], i["id"], 0, 0,
                                                                   json.dumps(data)))
    conn.commit()
    conn.close()
    return doc


def test_sessions_of_a_folder_come_from_the_database_read_only(tmp_path):
    data = tmp_path / "data" / "opencode"
    data.mkdir(parents=True)
    db = str(data / "opencode.db")
    doc = _db_from(TWO_TURN, db)
    os.chmod(db, 0o444)  # read-only: a write would fail loudly
    before = open(db, "rb").read()
    env = {"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data")}
    found = files.find_sessions(doc["info"]["directory"], env)
    assert [f.id for f in found] == [doc["info"]["id"]]
    assert json.load(open(found[0].path)) == doc  # the mirror is what `opencode export` printed,
    with open(TWO_TURN, "rb") as fh:  # byte for byte (a REAL cost of 0.0 printed as JavaScript's 0)
        assert open(found[0].path, "rb").read() == fh.read()
    assert open(db, "rb").read() == before
    again = files.find_session(doc["info"]["id"], env)
    assert again is not None and again.path == found[0].path and again.mtime == found[0].mtime
    assert files.find_sessions(str(tmp_path), env) == []


@pytest.mark.parametrize("body, says", [
    (b'{"info": {"id": "ses_1", "slug": "x"', "truncated or damaged"),
    (b'{"info": {"id": "ses_1"}, "messages": [{"info": {"role": "user"}, "parts": {}}]}', "messages[0]"),
    (b'{"info": {"id": "ses_1"}, "messages": [{"info": {"role": "robot"}, "parts": []}]}', "messages[0]"),
    (b'[1, 2]', "list"),
    (b'{"info": {"id": "ses_1"}}\n{"info": {"role": "user"}, "parts": []}\n{"info"\n', "line 3"),
])
def test_malformed_exports_are_one_input_error_naming_the_place(tmp_path, body, says):
    path = tmp_path / "bad.json"
    path.write_bytes(body)
    with pytest.raises(InputError) as info:
        agents.get("opencode").read(str(path))
    assert info.value.path == str(path) and says in str(info.value) + f" line {info.value.line}", str(info.value)
    assert info.value.hint


def _export(path, tmp_path, **kw):
    src = agents.get(kw.pop("agent", "opencode")).read(path)
    env = {"HOME": str(tmp_path / "home"), "PATH": str(tmp_path / "nobin")}
    req = ExportRequest(turns=[ExportTurn(r.turn, r.normal) for r in src.iter_records(src.views[0].indices)],
                        session=src.session, cwd=str(tmp_path / "proj"), session_id="0c0ffee0-0000-4000-8000-00000000abcd",
                        env=env, now_ms=1_800_000_000_000, **kw)
    return src, agents.get("opencode").export(req)


def test_a_same_agent_export_keeps_every_message_and_part_with_new_ids(tmp_path):
    src, res = _export(TWO_TURN, tmp_path)
    doc = json.loads(res.files[0][1])
    orig = json.load(open(TWO_TURN))
    assert res.session_id.startswith("ses_") and doc["info"]["id"] == res.session_id
    assert res.report.converted == {} and res.report.dropped == {}
    assert len(doc["messages"]) == len(orig["messages"])
    ids = [m["info"]["id"] for m in doc["messages"]]
    assert ids == sorted(ids) and not set(ids) & {m["info"]["id"] for m in orig["messages"]}
    for new, old in zip(doc["messages"], orig["messages"]):
        assert [p["type"] for p in new["parts"]] == [p["type"] for p in old["parts"]]
        strip = lambda p: {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}  # noqa: E731
        assert [strip(p) for p in new["parts"]] == [strip(p) for p in old["parts"]]
        if new["info"]["role"] == "assistant":
            assert new["info"]["parentID"] in ids[: ids.index(new["info"]["id"])]
    # no opencode on PATH: the file is left for the user, in one line that says how
    notes = [n for n in (step() for step in res.post) if n]
    assert len(notes) == 1 and "not on PATH" in notes[0] and "opencode import" in notes[0]


def test_a_foreign_export_has_every_field_import_validates(tmp_path):
    claude = sorted(glob.glob(os.path.join(real_corpus.HERE, "claude", "generated", "structures", "parallel",
                                           "*.jsonl")))[0]
    _, res = _export(claude, tmp_path, agent="claude")
    doc = json.loads(res.files[0][1])
    assert {"id", "slug", "title", "version", "time"} <= set(doc["info"])
    for m in doc["messages"]:
        info = m["info"]
        need = {"id", "sessionID", "role", "time", "agent", "model"} if info["role"] == "user" else {
            "id", "sessionID", "role", "time", "parentID", "modelID", "providerID", "mode", "agent", "path", "cost",
            "tokens"}
        assert need <= set(info), (need - set(info), info)
        for p in m["parts"]:
            assert {"id", "sessionID", "messageID", "type"} <= set(p)
            if p["type"] == "tool":
                assert p["state"]["status"] in ("completed", "error") and isinstance(p["state"]["input"], dict)
                assert {"start", "end"} <= set(p["state"]["time"])
    assert res.report.converted.get("tool_call:mapped", 0) == 5 and not res.report.dropped.get("tool_result:orphan")
    calls = [m for m in doc["messages"] if sum(p["type"] == "tool" for p in m["parts"]) == 3]
    assert len(calls) == 1, "a reply's three parallel calls are one opencode step"


def test_the_opencode_tools_round_trip_through_shared_actions():
    from opalgit.agents import tools
    for name, args in [("bash", {"command": "ls", "description": "d"}), ("read", {"filePath": "/p/a", "offset": 3}),
                       ("write", {"filePath": "/p/a", "content": "x"}),
                       ("edit", {"filePath": "/p/a", "oldString": "a", "newString": "b"}),
                       ("grep", {"pattern": "x", "path": "/p"}), ("glob", {"pattern": "*.py"})]:
        claude = tools.convert_call("opencode", "claude", name, args, "/p")
        assert claude[2], name
        back = tools.convert_call("claude", "opencode", claude[0], claude[1], "/p")
        assert back[2] and back[0] == name, (name, back)
        assert {k: v for k, v in back[1].items() if k != "description"} == \
            {k: v for k, v in args.items() if k != "description"}, (name, back)


def test_the_command_line_refuses_a_malformed_export_in_one_line_and_records_nothing(tmp_path, home):
    """`opal commit --file` on a truncated export, the wrong type, a bad message: exit 5, one
    error naming the file (and line), a hint, no traceback, no ref changed; a good export then commits."""
    from tests.conftest import git, opal

    project = tmp_path / "proj"
    project.mkdir()
    git("init", "-q", str(project))
    assert opal("init", cwd=project).returncode == 0
    data = open(TWO_TURN, "rb").read()
    cases = {"truncated.json": data[: len(data) // 2], "list.json": b"[1, 2, 3]\n",
             "bad-message.json": data.replace(b'"role": "assistant"', b'"role": "robot"', 1)}
    before = git("for-each-ref", "refs/opal", cwd=str(project)).stdout
    for name, body in cases.items():
        path = tmp_path / name
        path.write_bytes(body)
        for extra in ([], ["--agent", "opencode"]):
            r = opal("commit", "--file", str(path), *extra, cwd=project)
            assert r.returncode == 5, (name, extra, r.stdout, r.stderr)
            first = r.stderr.splitlines()[0]
            assert first.startswith(f"opal: error: {path}"), (name, first)
            assert "hint:" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert git("for-each-ref", "refs/opal", cwd=str(project)).stdout == before
    r = opal("commit", "--file", TWO_TURN, cwd=project)
    assert r.returncode == 0 and "from opencode session ses_dcaa" in r.stdout, r.stderr

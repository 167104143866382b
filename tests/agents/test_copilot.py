"""The GitHub Copilot CLI adapter on the genuine sessions the pinned client wrote
(tests/fixtures/copilot/generated/): the adapter contract, the side files, the export's
events (session.start first, a parentId on every event, calls paired), the tool table
and where sessions are found."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import pytest

from opalgit import agents
from opalgit.agents import tools
from opalgit.agents.base import ExportRequest, ExportTurn
from opalgit.agents.tools import Action
from opalgit.errors import InputError
from opalgit.history.model import Normal, Turn
from opalgit.testing.adapters import AdapterContract
from tests.agents.test_contract import SAMPLES
from tests.conftest import FIXTURES

GENERATED = os.path.join(FIXTURES, "copilot", "generated")
TWO_TURN = glob.glob(os.path.join(GENERATED, "two-turn", "*", "events.jsonl"))[0]
PARALLEL = glob.glob(os.path.join(GENERATED, "parallel", "*", "events.jsonl"))[0]
COPILOT = agents.get("copilot")
NEW_ID = "0c0ffee0-0000-4000-8000-000000000001"


class TestCopilotContract(AdapterContract):
    adapter = COPILOT
    samples = [TWO_TURN, PARALLEL]
    foreign = [p for a in SAMPLES for p in SAMPLES[a]]


@pytest.mark.parametrize("other", ["claude", "codex", "gemini"])
def test_no_other_adapter_claims_a_copilot_log(other):
    with open(TWO_TURN, "rb") as fh:
        head = fh.read(65536)
    assert not agents.get(other).sniff(TWO_TURN, head)


def _events(path):
    with open(path, "rb") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _export(path, tmp_path, *, drop=lambda i, rec: False, agent=COPILOT, cwd=None):
    source = agent.read(path)
    records = list(source.iter_records(source.views[0].indices))
    turns = [ExportTurn(r.turn, r.normal) for i, r in enumerate(records) if not drop(i, r)]
    if cwd is None:
        cwd = tmp_path / "project"
        os.makedirs(cwd, exist_ok=True)
    req = ExportRequest(turns=turns, session=source.session, cwd=str(cwd), session_id=NEW_ID,
                        env={"HOME": str(tmp_path / "home"), "COPILOT_HOME": str(tmp_path / "cp")},
                        now_ms=1_767_225_600_000, side=dict(source.side))
    result = COPILOT.export(req)
    for target, body in result.files:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(body)
    return source, result


def test_the_session_and_its_side_files_are_read():
    r = COPILOT.read(TWO_TURN)
    folder = os.path.basename(os.path.dirname(TWO_TURN))
    assert (r.session.id, r.session.version, r.session.model) == (folder, "1.0.102", "mock-model")
    assert {"workspace.yaml", "checkpoints/index.md", "rewind-file-snapshots/index.json",
            "rewind-file-snapshots/tracking.json"} <= set(r.side)
    assert any(rel.startswith("rewind-file-snapshots/backups/") for rel in r.side)
    roles = [rec.normal.role for rec in r.records]
    assert roles.count("user") == 2 and roles.count("tool") == 4
    calls = [b for rec in r.records for b in rec.normal.blocks if b.get("type") == "tool_call"]
    assert [c["name"] for c in calls] == ["bash", "view", "edit", "create"]


def test_a_copied_log_takes_no_neighbours(tmp_path):
    """An events.jsonl outside a session folder is read without the files beside it."""
    copy = tmp_path / "events.jsonl"
    shutil.copy(TWO_TURN, copy)
    (tmp_path / "unrelated.txt").write_text("not the session's\n")
    assert COPILOT.read(str(copy)).side == {}


def test_a_same_agent_export_writes_every_event_back(tmp_path):
    source, result = _export(TWO_TURN, tmp_path)
    path = result.files[0][0]
    assert path == str(tmp_path / "cp" / "session-state" / NEW_ID / "events.jsonl")
    old, new = _events(TWO_TURN), _events(path)
    assert len(new) == len(old) and result.prefix == len(old)
    assert new[0]["type"] == "session.start" and new[0]["data"]["sessionId"] == NEW_ID
    assert new[0]["data"]["context"]["cwd"] == str(tmp_path / "project")
    # Only the id and the folders move; every other event is as Copilot wrote it.
    assert [e for e in new if e["type"] not in ("session.start", "session.resume")] == \
        [e for e in old if e["type"] not in ("session.start", "session.resume")]
    written = {os.path.relpath(p, os.path.dirname(path)) for p, _ in result.files[1:]}
    assert written == set(source.side)
    workspace = dict(result.files)[os.path.join(os.path.dirname(path), "workspace.yaml")].decode()
    assert f"id: {NEW_ID}\n" in workspace and f"cwd: {tmp_path / 'project'}\n" in workspace
    assert result.resume == ["copilot", "--resume", NEW_ID]
    assert set(result.report.converted) == {"session.start:rewritten", "context:cwd:rewritten"}


def test_dropped_events_are_relinked(tmp_path):
    """A rewound state leaves events out: every later event's parentId names the one before it."""
    _, result = _export(TWO_TURN, tmp_path, drop=lambda i, rec: rec.normal.label == "session.usage_record")
    new = _events(result.files[0][0])
    assert new[0]["parentId"] is None
    assert all(e["parentId"] == prev["id"] for prev, e in zip(new, new[1:]))
    assert result.report.converted["event:relinked"] > 0


def test_parallel_calls_go_to_another_agent_paired(tmp_path):
    """Copilot's one message with three calls, whose results finish out of order, becomes
    Claude's one reply with three calls and their results."""
    r = COPILOT.read(PARALLEL)
    msg = next(rec for rec in r.records if sum(b.get("type") == "tool_call" for b in rec.normal.blocks) == 3)
    ids = [b["id"] for b in msg.normal.blocks if b.get("type") == "tool_call"]
    results = [b["call_id"] for rec in r.records for b in rec.normal.blocks if b.get("type") == "tool_result"]
    assert set(ids) <= set(results) and results[:3] != ids  # finished out of order
    turns = [ExportTurn(rec.turn, rec.normal) for rec in r.records]
    req = ExportRequest(turns=turns, session=r.session, cwd=str(tmp_path), session_id=NEW_ID,
                        env={"HOME": str(tmp_path)}, now_ms=1_767_225_600_000)
    out = agents.get("claude").export(req)
    assert "tool_result:synthesized" not in out.report.converted
    assert out.report.converted["tool_call:mapped"] == 5


def test_a_foreign_reply_with_calls_is_one_message_and_open_calls_get_a_result(tmp_path):
    normals = [
        Normal("user", [{"type": "text", "text": "look"}], 1000),
        Normal("assistant", [{"type": "text", "text": "Two at once."},
                             {"type": "tool_call", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                             {"type": "tool_call", "id": "t2", "name": "Read", "input": {"file_path": "a.txt"}}], 2000),
        Normal("tool", [{"type": "tool_result", "call_id": "t1", "output": "a.txt", "is_error": False}], 3000),
        Normal("user", [{"type": "text", "text": "next"}], 4000),
    ]
    turns = [ExportTurn(Turn.from_record("claude", {"type": "x"}), n) for n in normals]
    req = ExportRequest(turns=turns, session=None, cwd=str(tmp_path), session_id=NEW_ID,
                        env={"HOME": str(tmp_path)}, now_ms=1_767_225_600_000)
    result = COPILOT.export(req)
    events = [json.loads(line) for line in result.files[0][1].splitlines()]
    assert [e["type"] for e in events] == ["session.start", "user.message", "assistant.message",
                                           "tool.execution_start", "tool.execution_complete",
                                           "tool.execution_start", "tool.execution_complete", "user.message"]
    assert all("parentId" in e for e in events) and events[0]["parentId"] is None
    assert all(e["parentId"] == prev["id"] for prev, e in zip(events, events[1:]))
    msg = events[2]["data"]
    assert msg["content"] == "Two at once."
    assert [(t["name"], t["arguments"]) for t in msg["toolRequests"]] == [
        ("bash", {"command": "ls", "description": "ls"}), ("view", {"path": str(tmp_path / "a.txt")})]
    assert events[4]["data"] == {"toolCallId": "t1", "success": True, "result": {"content": "a.txt"}}
    assert events[6]["data"]["toolCallId"] == "t2" and events[6]["data"]["success"] is False
    assert result.report.converted["tool_result:synthesized"] == 1
    assert result.report.converted["session.start:added"] == 1
    workspace = dict(result.files)[os.path.join(os.path.dirname(result.files[0][0]), "workspace.yaml")].decode()
    assert f"id: {NEW_ID}\n" in workspace and "name: look\n" in workspace


def test_a_bad_line_inside_is_kept_and_said(tmp_path):
    lines = open(TWO_TURN, "rb").read().split(b"\n")
    lines.insert(3, b"{not json")
    bad = tmp_path / "events.jsonl"
    bad.write_bytes(b"\n".join(lines))
    r = COPILOT.read(str(bad))
    assert any(":4: not JSON" in w for w in r.warnings), r.warnings
    assert r.records[3].normal.label == "unparseable"


def test_another_agents_file_is_refused_by_name():
    claude_file = SAMPLES["claude"][0]
    with pytest.raises(InputError) as exc:
        COPILOT.read(claude_file)
    assert "Claude Code" in exc.value.message and exc.value.hint == "import it with --agent claude"


@pytest.mark.parametrize("name, args, action", [
    ("bash", {"command": "ls", "description": "List"}, Action("shell", {"command": "ls"})),
    ("view", {"path": "/p/a", "view_range": [3, 7]}, Action("read", {"path": "/p/a", "offset": 3, "limit": 5})),
    ("view", {"path": "/p/a", "view_range": [3, -1]}, Action("read", {"path": "/p/a", "offset": 3})),
    ("create", {"path": "/p/n", "file_text": "x\n"}, Action("write", {"path": "/p/n", "content": "x\n"})),
    ("edit", {"path": "/p/a", "old_str": "a", "new_str": "b"}, Action("edit", {"path": "/p/a", "old": "a", "new": "b"})),
    ("grep", {"pattern": "x", "paths": "/p"}, Action("search", {"pattern": "x", "path": "/p"})),
    ("glob", {"pattern": "*.py"}, Action("glob", {"pattern": "*.py"})),
    ("str_replace_editor", {"command": "view", "path": "/p/a"}, Action("read", {"path": "/p/a"})),
])
def test_copilot_tools_are_shared_actions(name, args, action):
    assert tools.parse_call("copilot", name, args) == action
    back = tools.render_call("copilot", action, "/p")
    if name != "str_replace_editor":
        assert back is not None and back[0] == name
        assert tools.parse_call("copilot", *back) == action


def test_an_edit_of_every_occurrence_is_kept_as_it_was():
    assert tools.convert_call("claude", "copilot", "Edit", {"file_path": "/p/a", "old_string": "a", "new_string": "b",
                                                            "replace_all": True}, "/p")[2] is False


def test_sessions_are_found_by_folder_and_id_under_copilot_home(tmp_path):
    home = tmp_path / "cp"
    folder = os.path.dirname(TWO_TURN)
    sid = os.path.basename(folder)
    shutil.copytree(folder, home / "session-state" / sid)
    cwd = json.loads(open(TWO_TURN).readline())["data"]["context"]["cwd"]
    env = {"COPILOT_HOME": str(home), "HOME": str(tmp_path / "elsewhere")}
    assert [s.id for s in COPILOT.find_sessions(cwd, env)] == [sid]
    assert COPILOT.find_sessions(str(tmp_path), env) == []
    assert COPILOT.find_session(sid, env).path == str(home / "session-state" / sid / "events.jsonl")
    assert COPILOT.find_session(sid[:8], env).id == sid
    assert COPILOT.find_session("../x", env) is None
    assert COPILOT.find_sessions(cwd, {"HOME": str(tmp_path / "elsewhere")}) == []


def test_a_malformed_log_is_one_input_error_and_no_commit(tmp_path, project):
    """Through the command line: a log whose first line is not JSON is refused with the file,
    the line and what to do, no traceback, and nothing is recorded; a bad line inside is kept."""
    from tests.conftest import opal

    folder = tmp_path / "session-state" / "bad"
    folder.mkdir(parents=True)
    bad = folder / "events.jsonl"
    bad.write_bytes(b"{truncated\n" + open(TWO_TURN, "rb").read())
    assert opal("init", cwd=project).returncode == 0
    proc = opal("commit", "--file", str(bad), "--agent", "copilot", "-m", "bad", cwd=project)
    assert proc.returncode == InputError.exit_code, proc.stderr
    assert f"{bad}:1" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "events.jsonl" in proc.stderr and "hint" in proc.stderr.lower(), proc.stderr
    assert "copilot session" not in opal("log", cwd=project).stdout

    lines = open(TWO_TURN, "rb").read().split(b"\n")
    lines.insert(5, b"{not json")
    bad.write_bytes(b"\n".join(lines))
    proc = opal("commit", "--file", str(bad), "--agent", "copilot", "-m", "copilot session", cwd=project)
    assert proc.returncode == 0 and f"{bad}:6: not JSON" in proc.stderr, proc.stderr


def test_opal_commit_finds_the_folders_session_under_copilot_home(tmp_path, project):
    """``opal commit --agent copilot`` in the project folder takes the Copilot session whose
    workspace.yaml names that folder, with its side files."""
    from tests.conftest import opal

    folder = os.path.dirname(TWO_TURN)
    sid = os.path.basename(folder)
    home = tmp_path / "copilot-home"
    target = home / "session-state" / sid
    shutil.copytree(folder, target)
    workspace = target / "workspace.yaml"
    old = json.loads(open(TWO_TURN).readline())["data"]["context"]["cwd"]
    workspace.write_text(workspace.read_text().replace(f"cwd: {old}\n", f"cwd: {project}\n"))
    env = {"COPILOT_HOME": str(home)}
    assert opal("init", cwd=project, env=env).returncode == 0
    proc = opal("commit", "--agent", "copilot", "-m", "found", "--json", cwd=project, env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["committed"] and out["turns"] == 12, out  # 2 prompts, 6 replies, 4 results
    tree = subprocess.run(["git", "ls-tree", "-r", "--name-only", "refs/opal/heads/main"], cwd=project,
                          capture_output=True, text=True, check=True).stdout
    assert "side/workspace.yaml" in tree and "side/rewind-file-snapshots/index.json" in tree, tree


def test_trim_rewrites_a_result_as_a_native_event():
    r = COPILOT.read(TWO_TURN)
    rec = next(x for x in r.records if x.normal.role == "tool")
    cid = rec.normal.blocks[0]["call_id"]
    new = COPILOT.replace_tool_outputs(rec.turn, lambda call, text: "[trimmed]" if call == cid else None)
    assert new is not None and new.record["data"]["result"]["content"] == "[trimmed]"
    assert COPILOT.normalize(new).blocks[0]["output"] == "[trimmed]"
    assert new.record["data"]["toolCallId"] == cid and new.record["id"] == rec.turn.record["id"]
    user = next(x for x in r.records if x.normal.role == "user")
    assert COPILOT.replace_tool_outputs(user.turn, lambda call, text: "x") is None


def test_an_export_to_the_sessions_own_folder_keeps_its_context(tmp_path):
    cwd = json.loads(open(TWO_TURN).readline())["data"]["context"]["cwd"]
    _, result = _export(TWO_TURN, tmp_path, cwd=cwd)
    new, old = _events(result.files[0][0]), _events(TWO_TURN)
    assert new[0]["data"]["context"] == old[0]["data"]["context"]
    assert "context:cwd:rewritten" not in result.report.converted

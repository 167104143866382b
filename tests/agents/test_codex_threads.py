"""Codex child threads (sub-agents) are part of their parent's session (issue 18, 4).

The parent is a genuine codex 0.169 rollout (tests/fixtures/codex/generated/structures/
parallel); its child and grandchild are built the way codex-rs writes a spawned thread
(``SessionSource::SubAgent(ThreadSpawn)``: the child's ``session_meta`` names its parent,
then the parent's history it was forked with, then its own turn). No genuine sub-agent
rollout could be made: the pinned codex's mock-server runs do not spawn agents.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

from opalgit.agents.codex import statedb as codex_state
from opalgit.agents.codex.threads import parent_of
from tests.conftest import FIXTURES, opal

PARENT = next((Path(FIXTURES) / "codex" / "generated" / "structures" / "parallel").glob("rollout-*.jsonl"))
PARENT_ID = "01a2339a-35ac-71e0-ae3f-91615f2ed736"
CHILD_ID = "01a2339a-4000-7000-8000-00000000c001"
GRANDCHILD_ID = "01a2339a-4000-7000-8000-00000000c002"
UNRELATED_ID = "01a2339a-4000-7000-8000-00000000ffff"


def _line(kind: str, payload: dict, ts: str = "2026-12-01T21:54:40.000Z") -> str:
    return json.dumps({"timestamp": ts, "type": kind, "payload": payload}, separators=(",", ":"))


def _child(child: str, parent: str, nickname: str) -> str:
    parent_lines = PARENT.read_text().splitlines()
    meta = {"id": child, "forked_from_id": parent, "timestamp": "2026-12-01T21:54:40.000Z", "cwd": "/tmp/proj",
            "originator": "codex_exec", "cli_version": "0.169.0", "model_provider": "mock",
            "source": {"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": 1,
                                                      "agent_nickname": nickname, "agent_role": "explorer"}}},
            "agent_nickname": nickname, "agent_role": "explorer", "thread_source": "subagent"}
    own = [_line("session_meta", meta), *parent_lines[:3],
           _line("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": f"{nickname}: list the files"}]}),
           _line("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": "README.md"}]})]
    return "\n".join(own) + "\n"


def _home(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "codex"
    day = home / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    parent = day / PARENT.name
    parent.write_bytes(PARENT.read_bytes())
    (day / f"rollout-2026-12-01T21-54-40-{CHILD_ID}.jsonl").write_text(_child(CHILD_ID, PARENT_ID, "Hypatia"))
    (day / f"rollout-2026-12-01T21-54-41-{GRANDCHILD_ID}.jsonl").write_text(_child(GRANDCHILD_ID, CHILD_ID, "Boole"))
    (day / f"rollout-2026-12-01T21-54-42-{UNRELATED_ID}.jsonl").write_text(_child(UNRELATED_ID, "someone-else", "X"))
    return home, parent


def _state_db(home: Path) -> Path:
    db = home / "state_5.sqlite"
    con = sqlite3.connect(db)
    cols = ", ".join(f"{c} TEXT" if c != "id" else "id TEXT PRIMARY KEY" for c in sorted(codex_state.KNOWN_COLUMNS))
    con.execute(f"CREATE TABLE threads ({cols})")
    con.commit()
    con.close()
    return db


def _committed(tmp_path: Path, project: Path) -> tuple[Path, Path, dict]:
    home, parent = _home(tmp_path)
    env = {"CODEX_HOME": str(home), "HOME": str(tmp_path / "h")}
    assert opal("init", cwd=project).returncode == 0
    proc = opal("commit", "--file", str(parent), "--agent", "codex", "-m", "s", cwd=project, env=env)
    assert proc.returncode == 0, proc.stderr
    return home, parent, env


def test_parent_of_reads_what_codex_writes():
    assert parent_of({"source": {"subagent": {"thread_spawn": {"parent_thread_id": "p", "depth": 1}}}}) == "p"
    assert parent_of({"source": {"sub_agent": {"thread_spawn": {"parent_thread_id": "p"}}}}) == "p"
    assert parent_of({"parent_thread_id": "p", "source": "exec"}) == "p"
    assert parent_of({"source": "cli", "forked_from_id": "f"}) is None  # a fork is a session of its own
    assert parent_of({"source": {"subagent": "review"}}) is None


def test_child_threads_are_stored_with_the_parent(tmp_path, project):
    _committed(tmp_path, project)
    tree = subprocess.run(["git", "ls-tree", "-r", "--name-only", "refs/opal/heads/main"], cwd=project,
                          capture_output=True, text=True, check=True).stdout.split()
    side = sorted(p for p in tree if p.startswith("side/"))
    assert side == [f"side/threads/2026/12/01/rollout-2026-12-01T21-54-40-{CHILD_ID}.jsonl",
                    f"side/threads/2026/12/01/rollout-2026-12-01T21-54-41-{GRANDCHILD_ID}.jsonl"]


def test_same_agent_export_writes_children_back_and_registers_them(tmp_path, project):
    home, _parent, env = _committed(tmp_path, project)
    target = tmp_path / "target"
    target.mkdir()
    db = _state_db(target)
    env2 = dict(env, CODEX_HOME=str(target))
    proc = opal("export", "--to", "codex", "--cwd", str(project), "--json", cwd=project, env=env2)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    sid = out["session_id"]
    files = out["files"]
    assert len(files) == 3 and all(os.path.dirname(f) == os.path.dirname(files[0]) for f in files)
    heads = {json.loads(Path(f).read_text().split("\n", 1)[0])["payload"]["id"]: f for f in files[1:]}
    assert set(heads) == {CHILD_ID, GRANDCHILD_ID}
    child = json.loads(Path(heads[CHILD_ID]).read_text().split("\n", 1)[0])["payload"]
    grand = json.loads(Path(heads[GRANDCHILD_ID]).read_text().split("\n", 1)[0])["payload"]
    assert parent_of(child) == sid and child["forked_from_id"] == sid
    assert parent_of(grand) == CHILD_ID  # its parent kept its id
    assert PARENT_ID not in Path(heads[CHILD_ID]).read_text()
    # Everything else as the agent wrote it.
    want = _child(CHILD_ID, PARENT_ID, "Hypatia").replace(PARENT_ID, sid)
    assert Path(heads[CHILD_ID]).read_text() == want
    assert out["report"]["converted"].get("child_thread:parent_renamed") == 2
    con = sqlite3.connect(db)
    rows = dict(con.execute("SELECT id, source FROM threads").fetchall())
    con.close()
    assert set(rows) == {sid, CHILD_ID, GRANDCHILD_ID}
    assert json.loads(rows[CHILD_ID])["subagent"]["thread_spawn"]["parent_thread_id"] == sid


def test_another_agent_names_the_child_threads_it_cannot_take(tmp_path, project):
    _home_, _parent, env = _committed(tmp_path, project)
    for agent in ("claude", "gemini"):
        proc = opal("export", "--to", agent, "--cwd", str(project), "--json", cwd=project, env=env)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["report"]["dropped"].get("side_folder:threads") == 2, out["report"]
        assert len(out["files"]) == 1 or agent == "gemini"

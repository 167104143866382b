"""An export into a Codex home that codex already indexes: registered in its state
database the way codex registers a thread, so ``codex exec resume --last`` resumes the
export, not the older thread it was made from (issue 18, 5)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from opalgit.agents.codex import statedb as codex_state

from . import harness
from .harness import ANSWER1, PROMPT1, PROMPT2
from .history import history_of

pytestmark = pytest.mark.clients


def _opal(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return harness.opal(*args, cwd=cwd, env=env)


def test_export_of_a_rewound_state_is_what_resume_last_picks(tmp_path):
    harness.require_client("codex")
    gs = harness.generate_session("codex", base=tmp_path)
    assert gs.turn1.ok and gs.turn2.ok and gs.path, gs.describe()
    root = gs.root
    db = codex_state.state_db(str(root.codex_home))
    assert db is not None, "codex 0.169 keeps a state database"
    env = dict(os.environ, HOME=str(root.home), CODEX_HOME=str(root.codex_home))
    env.pop("CLAUDE_CONFIG_DIR", None)
    project = tmp_path / "opal-project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _opal("init", cwd=project, env=env)
    _opal("commit", "--file", str(gs.path), "--agent", "codex", "-m", "codex session", cwd=project, env=env)
    turns = json.loads(_opal("log", "--turns", "--json", cwd=project, env=env).stdout)["turns"]
    cut = next(t["turn"] for t in turns
               if ANSWER1 in _opal("show", f"HEAD:{t['turn']}", "--json", cwd=project, env=env).stdout)
    _opal("rewind", "--to", f"HEAD:{cut}", cwd=project, env=env)
    out = json.loads(_opal("export", "--to", "codex", "--cwd", str(root.project), "--json", cwd=project,
                           env=env).stdout)
    sid = out["session_id"]
    assert any("registered in codex's state database" in n for n in out["report"]["notes"]), out["report"]
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT rollout_path, cwd, source, has_user_event, archived FROM threads WHERE id = ?",
                          (sid,)).fetchone()
        original = con.execute("SELECT source, model_provider, cli_version FROM threads WHERE id = ?",
                               (gs.session_id,)).fetchone()
        mine = con.execute("SELECT source, model_provider, cli_version FROM threads WHERE id = ?", (sid,)).fetchone()
    finally:
        con.close()
    assert row is not None and row[0] == out["files"][0] and row[1] == str(root.project) and row[4] == 0
    assert mine == original  # the header kept its source, provider and version
    with harness.mock_for("codex", [harness.Reply("ok [after-export]")]) as srv:
        harness.write_codex_config(root, srv.port)
        proc = subprocess.run(
            [str(harness.client_bin("codex")), "exec", "--skip-git-repo-check", "--json", "resume", "--last",
             "continue"],
            cwd=root.project, env=harness.client_env("codex", root, srv.port), capture_output=True, text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f'"thread_id":"{sid}"' in proc.stdout, proc.stdout[:400]
        model = [r for r in srv.requests if r.kind == "model"]
        items = history_of(model[0].body, "codex")
    texts = json.dumps(items)
    assert PROMPT1 in texts and PROMPT2 not in texts, "the resumed history is the rewound state's"


def test_unknown_schema_is_left_alone(tmp_path):
    """A threads table with a column opal does not know: the database is not touched, and
    the report says so."""
    db = tmp_path / "state_9.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE threads (id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL, future_column TEXT NOT NULL)")
    con.commit()
    con.close()
    before = db.read_bytes()
    note = codex_state.register(str(tmp_path), "t1", str(tmp_path / "r.jsonl"), b"", 1_700_000_000_000)
    assert note is not None and "does not know" in note and "left alone" in note and "future_column" in note
    assert db.read_bytes() == before

"""Issue 5's story end to end, with the real codex: a teammate resumes a colleague's session.

User A installs the hooks and commits code twice while a genuine Claude Code session
grows (turn 1, then turn 2), and pushes. User B clones, fetches the state, finds A's
state for each code commit, exports it to Codex and the real ``codex`` resumes it
with the full history of that point.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from opalgit.agents.claude.files import project_key
from tests.compat.test_remote import env_of, make_remote
from tests.conftest import git, opal

from . import harness
from .harness import ANSWER1, ANSWER2, PROMPT1, PROMPT2
from .history import history_of

pytestmark = pytest.mark.clients


def test_teammate_resumes_a_colleagues_session_in_codex(tmp_path, home):
    harness.require_client("claude")
    harness.require_client("codex")
    gs = harness.generate_session("claude", base=tmp_path)
    assert gs.turn1.ok and gs.turn2.ok and gs.path, gs.describe()
    lines = open(gs.path, "rb").read().splitlines(keepends=True)
    # Where turn 1 ends in the genuine file: the line holding its answer, and what follows it
    # before the turn-2 prompt.
    end1 = next(i for i, l in enumerate(lines) if ANSWER1.encode() in l and b'"assistant"' in l) + 1

    bare = make_remote(tmp_path)
    url = "file://" + bare
    a = tmp_path / "a"
    git("clone", "-q", url, str(a))
    assert opal("init", cwd=a).returncode == 0
    assert opal("hooks", "install", cwd=a).returncode == 0
    session_dir = home / ".claude" / "projects" / project_key(str(a))
    session_dir.mkdir(parents=True)
    live = session_dir / os.path.basename(gs.path)
    live.write_bytes(b"".join(lines[:end1]))

    def code_commit(msg: str) -> str:
        (a / "app.py").open("a").write(f"# {msg}\n")
        git("add", "app.py", cwd=str(a))
        r = subprocess.run(["git", "commit", "-q", "-m", msg], cwd=str(a), capture_output=True, text=True, env=env_of(home))
        assert r.returncode == 0 and "opal: recorded" in r.stderr, r.stderr
        return git("rev-parse", "HEAD", cwd=str(a)).stdout.strip()

    c1 = code_commit("listing and README")
    with open(live, "ab") as fh:
        fh.writelines(lines[end1:])
    c2 = code_commit("farewell and notes")
    r = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=str(a), capture_output=True, text=True, env=env_of(home))
    assert r.returncode == 0, r.stderr
    r = opal("push", cwd=a, env={"HOME": str(home)})
    assert r.returncode == 0, r.stderr

    # User B: a fresh checkout, a HOME of their own, Codex as their agent.
    b = tmp_path / "b"
    git("clone", "-q", url, str(b))
    root = harness.make_root(tmp_path, prefix="user-b-")
    env_b = {"HOME": str(root.home), "CODEX_HOME": str(root.codex_home)}
    assert opal("clone-state", url, cwd=b, env=env_b).returncode == 0
    expected_full = [PROMPT1, ANSWER1, PROMPT2, ANSWER2]
    for code, wanted in ((c1, expected_full[:2]), (c2, expected_full)):
        r = opal("export", "--at", code, "--to", "codex", "--cwd", str(root.project), "--json", cwd=b, env=env_b)
        assert r.returncode == 0, r.stderr
        sid = json.loads(r.stdout)["session_id"]
        with harness.mock_for("codex", [harness.Reply("Picking up where A left off. [teammate]")]) as srv:
            run = harness.run_client("codex", root, srv.port, "TEAMMATE: continue please", resume=sid, server=srv)
        assert run.ok, run.describe()
        items = history_of(run.requests[0].body, "codex")
        texts = [it[1] for it in items if it[0] in ("user", "assistant") and it[1] in expected_full]
        assert texts == wanted, items
        calls = [it for it in items if it[0] == "tool_call"]
        results = [it for it in items if it[0] == "tool_result"]
        assert len(calls) == len(results) == (2 if code == c1 else 5), items
        assert items[-1][:2] == ("user", "TEAMMATE: continue please")
    shutil.rmtree(root.path, ignore_errors=True)

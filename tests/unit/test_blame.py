"""``opal blame`` on the recorded genuine sessions (tests/fixtures/blame/, written by
``python -m tests.clients.test_blame``): the session files the real claude, codex and
gemini wrote at each step of tests/clients/test_blame.py's story are committed as the
hooks committed them, the code commits made again with their recorded times and linked,
and blame must say what it said on the real run. Also: -L, a code revision, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from opalgit import porcelain
from opalgit.errors import NothingToDoError, RevisionError, UsageError
from opalgit.porcelain.blame import at_line, blame
from opalgit.store.repo import Repository
from opalgit.sync import links
from tests.conftest import git

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "blame"


def replay(client: str, tmp_path: Path, home: Path) -> tuple[Repository, Path, dict, dict]:
    story = json.loads((FIXTURES / f"{client}.json").read_text())
    proj = tmp_path / "proj"
    proj.mkdir()
    git("init", "-q", "-b", "main", str(proj))
    (proj / "README.md").write_text("# demo\n")
    git("add", "-A", cwd=str(proj))
    _git_commit(proj, "init", "opal tests", min(s["time"] for s in story["steps"] if s["time"]) - 60)
    porcelain.init(str(proj))
    repo = Repository.discover(str(proj))
    session = tmp_path / "sessions" / story["steps"][0]["session_name"]
    session.parent.mkdir()
    env = {"HOME": str(home)}
    shas: dict[str, str] = {}
    state = None
    last = story["steps"][-1]["session"]
    for step in story["steps"]:
        text = step["session"] if step["session"] is not None else last[:step["session_chars"]]
        session.write_text(text.replace(story["project"], str(proj)))
        try:
            state = porcelain.commit(repo, env, str(proj), file=str(session)).oid
        except NothingToDoError:
            pass  # nothing new: the hook links the code commit to the current state
        if step["message"] is None:
            continue
        (proj / "calc.py").write_text(step["calc"])
        git("add", "-A", cwd=str(proj))
        sha = _git_commit(proj, step["message"], step["author"], step["time"])
        links.set_links(repo, [(bytes.fromhex(sha), state)], command="link", description="as the hook links")
        shas[story[step["name"]]] = sha
    (proj / "calc.py").write_text(story["steps"][-1]["calc"] + "# scratch\n")
    return repo, proj, story, shas


def _git_commit(proj: Path, msg: str, author: str, when: int) -> str:
    import subprocess

    stamp = f"@{when} +0000"
    env = {**os.environ, "GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": "tests@opal.invalid",
           "GIT_COMMITTER_NAME": author, "GIT_COMMITTER_EMAIL": "tests@opal.invalid",
           "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    subprocess.run(["git", "commit", "-q", "-m", msg], cwd=proj, env=env, check=True, capture_output=True)
    return git("rev-parse", "HEAD", cwd=str(proj)).stdout.strip()


def _rows(lines: list[dict], shas: dict[str, str] | None = None) -> list[tuple]:
    out = []
    for ln in lines:
        o = ln["owner"]
        commit = ln["code_commit"]
        out.append((ln["text"], o["kind"], o.get("prompt"), o.get("tool"), o.get("turn"), o.get("agent"),
                    shas.get(commit, commit) if shas else commit))
    return out


@pytest.mark.parametrize("client", ["claude", "codex", "gemini"])
def test_the_recorded_story_blames_as_the_real_run_did(client, tmp_path, home):
    repo, proj, story, shas = replay(client, tmp_path, home)
    got = blame(repo, "calc.py", str(proj)).to_json()
    assert _rows(got["lines"]) == _rows(story["blame"], shas)
    kinds = [ln["owner"]["kind"] for ln in got["lines"]]
    assert kinds.count("human") == 1 and kinds[-1] == "uncommitted" and set(kinds) == {"agent", "human", "uncommitted"}
    old = blame(repo, "calc.py", str(proj), shas[story["c2"]]).to_json()
    assert _rows(old["lines"]) == _rows(story["blame_c2"], shas)
    part = blame(repo, "calc.py", str(proj), lines=(9, 10))
    assert [ln.number for ln in part.lines] == [9, 10] and part.total == len(got["lines"])


@pytest.mark.parametrize("client", ["claude"])
def test_at_line_and_its_errors(client, tmp_path, home):
    repo, proj, story, shas = replay(client, tmp_path, home)
    rev, line = at_line(repo, "calc.py:9", str(proj))
    state, _, turn = rev.partition(":")
    assert line.owner.kind == "agent" and int(turn) == line.owner.turn + 1  # the call's result
    with pytest.raises(RevisionError, match="a person changed it"):
        at_line(repo, "calc.py:5", str(proj))
    with pytest.raises(RevisionError, match="uncommitted"):
        at_line(repo, f"calc.py:{len(story['blame'])}", str(proj))
    with pytest.raises(UsageError, match="FILE:LINE"):
        at_line(repo, "calc.py", str(proj))
    with pytest.raises(UsageError, match="the file has"):
        blame(repo, "calc.py", str(proj), lines=(500, 501))
    with pytest.raises(UsageError, match="no such file"):
        blame(repo, "nothere.py", str(proj))
    with pytest.raises(RevisionError):
        blame(repo, "calc.py", str(proj), "no-such-rev")
    with pytest.raises(UsageError):
        blame(repo, "calc.py", str(proj), "--output=x")


# ------------------------------------------------------------------ tool calls to changes


def _turn(agent: str, cwd: str):
    from opalgit.history.model import Normal, SessionInfo
    from opalgit.porcelain.blame import _Turn

    return _Turn(b"\x01" * 20, 3, Normal(role="assistant"), SessionInfo(agent=agent, id="s", cwd=cwd), 5_000, "p")


def test_tool_calls_become_changes_of_the_file_they_name(tmp_path, home, project):
    from opalgit.history.attribution import Owner
    from opalgit.porcelain.blame import _changes

    porcelain.init(str(project))
    repo = Repository.discover(str(project))
    cwd = repo.workdir
    o = Owner("agent", agent="x", turn=3)
    multi = _changes(repo, _turn("claude", cwd), "MultiEdit", {"file_path": f"{cwd}/a.py", "edits": [
        {"old_string": "x", "new_string": "y"}, {"old_string": "p", "new_string": "q", "replace_all": True}]}, o)
    assert [(r, c.op, c.old, c.new, c.all) for r, c in multi] == [("a.py", "edit", "x", "y", False),
                                                                  ("a.py", "edit", "p", "q", True)]
    here = _changes(repo, _turn("codex", cwd), "exec_command", {"cmd": "cat > notes.txt <<'EOF'\nhello\nEOF"}, o)
    assert [(r, c.op, c.content) for r, c in here] == [("notes.txt", "write", "hello\n")]
    sed = _changes(repo, _turn("codex", cwd), "exec_command", {"cmd": "sed -i 's/a/b/' src/a.py"}, o)
    # Every word that could be a path counts (only the blamed file's names are ever looked up).
    assert ("src/a.py", "opaque") in [(r, c.op) for r, c in sed] and all("shell command" in c.why for _, c in sed)
    assert _changes(repo, _turn("codex", cwd), "exec_command", {"cmd": "cat src/a.py"}, o) == []
    outside = _changes(repo, _turn("claude", cwd), "Write", {"file_path": "/elsewhere/a.py", "content": "x"}, o)
    assert outside == []
    patch = "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n-x\n+y\n*** End Patch\n"
    moved = _changes(repo, _turn("codex", cwd), "apply_patch", patch, o)
    assert sorted((r, c.op) for r, c in moved) == [("a.py", "opaque"), ("b.py", "opaque")]
    gem = _changes(repo, _turn("gemini", cwd), "replace", {"file_path": f"{cwd}/a.py", "old_string": "1",
                                                           "new_string": "2", "allow_multiple": True}, o)
    assert [(r, c.op, c.all) for r, c in gem] == [("a.py", "edit", True)]


def test_a_renamed_file_keeps_its_owners(tmp_path, home):
    repo, proj, story, shas = replay("claude", tmp_path, home)
    before = _rows(blame(repo, "calc.py", str(proj)).to_json()["lines"])
    git("mv", "calc.py", "arith.py", cwd=str(proj))  # the working tree's changes go along, uncommitted
    _git_commit(proj, "rename", "A Person", max(s["time"] or 0 for s in story["steps"]) + 5)
    after = blame(repo, "arith.py", str(proj)).to_json()
    assert after["path"] == "arith.py" and _rows(after["lines"]) == before


def test_with_no_session_recorded_nothing_is_guessed(project, home):
    porcelain.init(str(project))
    repo = Repository.discover(str(project))
    res = blame(repo, "README.md", str(project))
    assert [ln.owner.kind for ln in res.lines] == ["unattributed"] and "opal hooks install" in res.notes[0]
    (project / "new.txt").write_text("typed\n")  # not known to git at all: the working tree's
    assert [ln.owner.kind for ln in blame(repo, "new.txt", str(project)).lines] == ["uncommitted"]
    with pytest.raises(UsageError, match="outside the repository"):
        blame(repo, "/etc/hostname", str(project))


def test_a_record_that_cannot_be_read_is_left_out_and_said(tmp_path, home, monkeypatch):
    import opalgit.porcelain.blame as blaming

    repo, proj, story, shas = replay("claude", tmp_path, home)
    real = blaming._normal
    calls = []

    def broken(repo, item, agent):
        if item.summary.get("kind") == "tool_call" and not calls:
            calls.append(item.id)
            raise KeyError("message")
        return real(repo, item, agent)

    monkeypatch.setattr(blaming, "_normal", broken)
    res = blame(repo, "calc.py", str(proj))
    assert calls and any("1 stored record could not be read" in n for n in res.notes)

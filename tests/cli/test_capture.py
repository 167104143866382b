"""``opal capture`` end to end with real git: the CLI, and the hook run as an agent runs it.

The hook is run the way the agents run it, ``sh -c COMMAND`` with the event on stdin,
COMMAND read from the settings file ``opal capture install`` wrote; the sessions are
genuine files written by the real clients (tests/fixtures/*/generated). The real
clients themselves: tests/clients/test_capture.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, opal

CLAUDE = Path(FIXTURES) / "claude" / "generated" / "structures" / "parallel" / "9c1a0cf1-b5ef-4382-8774-15ac3cd697de.jsonl"
GEMINI = Path(FIXTURES) / "gemini" / "generated" / "structures" / "parallel" / "session-2026-12-01T21-54-aec503dd.jsonl"


def _ok(*args, cwd, **kw) -> subprocess.CompletedProcess:
    res = opal(*args, cwd=cwd, **kw)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def _command(project: Path, agent: str, event: str | None = None) -> str:
    """The command opal's hook for ``event`` (the turn's end by default) runs, as installed."""
    path = {"claude": ".claude/settings.json", "codex": ".codex/hooks.json", "gemini": ".gemini/settings.json"}[agent]
    data = json.loads((project / path).read_text())
    groups = data["hooks"][event or ("Stop" if agent != "gemini" else "AfterAgent")]
    return groups[-1]["hooks"][0]["command"]


def _hook(command: str, stdin: bytes, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", command], input=stdin, cwd=str(cwd), capture_output=True, timeout=60)


def _event(session: str, transcript: Path, cwd: Path, event: str = "Stop") -> bytes:
    return json.dumps({"session_id": session, "transcript_path": str(transcript), "cwd": str(cwd),
                       "hook_event_name": event}).encode()


def _wait(project: Path, timeout: float = 60.0) -> None:
    """Until the capture queue is empty and no worker holds its lock (bounded)."""
    cap = project / ".git" / "opal" / "capture"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not list((cap / "queue").glob("*.json")):
            with open(cap / "worker.lock", "a") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return
                except OSError:
                    pass
        time.sleep(0.05)
    raise AssertionError("the capture worker did not finish")


def _until(what, timeout: float = 60.0) -> None:
    """Until ``what()`` is true (the work in the background is done), bounded."""
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "the work in the background was not done"
        time.sleep(0.05)


def _log(project: Path) -> list[dict]:
    path = project / ".git" / "opal" / "capture" / "log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_install_twice_and_uninstall_keep_the_users_hooks_byte_for_byte(project):
    (project / ".claude").mkdir()
    mine = b'{\n  "hooks": {\n    "Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}]\n  }\n}\n'
    (project / ".claude" / "settings.json").write_bytes(mine)
    out = _ok("capture", "install", cwd=project).stdout
    assert "Initialized opal" in out and out.count("installed") >= 3
    first = {p: (project / p).read_bytes() for p in (".claude/settings.json", ".codex/hooks.json", ".gemini/settings.json")}
    again = _ok("capture", "install", cwd=project)
    assert again.stdout.count("unchanged") == 3
    assert {p: (project / p).read_bytes() for p in first} == first
    stop = json.loads(first[".claude/settings.json"])["hooks"]["Stop"]
    assert stop[0]["hooks"][0]["command"] == "echo mine" and "capturehook.sh" in stop[1]["hooks"][0]["command"]
    status = _ok("capture", "status", cwd=project).stdout
    assert status.count("installed") >= 3
    _ok("capture", "uninstall", cwd=project)
    assert (project / ".claude" / "settings.json").read_bytes() == mine
    assert not (project / ".codex").exists() and not (project / ".gemini").exists()


def test_codex_install_says_what_the_user_must_do(project):
    res = _ok("capture", "install", "--agent", "codex", cwd=project)
    said = res.stdout + res.stderr
    assert "/hooks" in said and "trust" in said and "--dangerously-bypass-hook-trust" in said
    assert "codex_hooks" in said  # the older releases' feature flag


def test_a_broken_settings_file_is_refused_by_name(project):
    (project / ".gemini").mkdir()
    broken = b'{"hooks": {"AfterAgent": [\n'
    (project / ".gemini" / "settings.json").write_bytes(broken)
    res = opal("capture", "install", "--agent", "gemini", cwd=project)
    assert res.returncode == 5, res.stdout + res.stderr
    assert ".gemini/settings.json" in res.stderr and "not valid JSON" in res.stderr and "Traceback" not in res.stderr
    assert (project / ".gemini" / "settings.json").read_bytes() == broken


def test_user_scope_install(project, home):
    _ok("capture", "install", "--agent", "claude", "--user", cwd=project)
    assert "capturehook.sh" in (home / ".claude" / "settings.json").read_text()
    _ok("capture", "uninstall", "--agent", "claude", "--user", cwd=project)
    assert not (home / ".claude" / "settings.json").exists()


def test_every_event_commits_the_new_turns_to_the_sessions_branch(project, tmp_path):
    _ok("capture", "install", "--agent", "claude", cwd=project)
    cmd = _command(project, "claude")
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    session = tmp_path / f"{CLAUDE.stem}.jsonl"
    session.write_bytes(b"".join(lines[: len(lines) // 2]))
    res = _hook(cmd, _event(CLAUDE.stem, session, project), project)
    assert (res.returncode, res.stdout) == (0, b""), res
    _wait(project)
    session.write_bytes(b"".join(lines))  # the agent goes on: more turns
    assert _hook(cmd, _event(CLAUDE.stem, session, project, "SessionEnd"), project).returncode == 0
    _wait(project)
    log = _log(project)
    assert [e["level"] for e in log] == ["info", "info"], log
    assert len(_ok("log", "--format", "%H", "main", cwd=project).stdout.split()) == 2
    nothing = opal("commit", "--file", str(session), cwd=project)
    assert "nothing to commit" in nothing.stdout + nothing.stderr
    status = _ok("capture", "status", cwd=project).stdout
    assert CLAUDE.stem[:8] in status and "on main" in status


def test_a_second_session_gets_a_branch_of_its_own(project, tmp_path):
    _ok("capture", "install", cwd=project)
    claude = tmp_path / CLAUDE.name
    shutil.copy(CLAUDE, claude)
    gemini = tmp_path / GEMINI.name
    shutil.copy(GEMINI, gemini)
    _hook(_command(project, "claude"), _event(CLAUDE.stem, claude, project), project)
    _wait(project)
    _hook(_command(project, "gemini"), _event("aec503dd-gemini", gemini, project, "AfterAgent"), project)
    _wait(project)
    branches = _ok("branch", cwd=project).stdout
    assert "main" in branches and "gemini-aec503dd" in branches, branches
    assert not [e for e in _log(project) if e["level"] == "error"]


def test_a_compaction_waits_until_its_turns_are_committed(project, tmp_path):
    _ok("capture", "install", "--agent", "claude", cwd=project)
    session = tmp_path / CLAUDE.name
    shutil.copy(CLAUDE, session)
    res = _hook(_command(project, "claude", "PreCompact"), _event(CLAUDE.stem, session, project, "PreCompact"), project)
    assert res.returncode == 0
    # no wait here: the hook returned only once the worker had committed
    assert [e["event"] for e in _log(project) if e["level"] == "info"] == ["PreCompact"]
    assert _ok("log", "--format", "%H", "main", cwd=project).stdout.split()


@pytest.mark.parametrize("junk", [b"", b"not json", b"[1,2]", b'{"hook_event_name": "Stop"}', b"\xff" * 10,
                                  b"{" * 100_000])
def test_junk_on_stdin_is_logged_and_the_agent_sees_nothing(project, junk):
    _ok("capture", "install", "--agent", "codex", cwd=project)
    res = _hook(_command(project, "codex"), junk, project)
    assert (res.returncode, res.stdout, res.stderr) == (0, b"", b"")
    _wait(project)
    errors = [e for e in _log(project) if e["level"] == "error"]
    assert len(errors) == 1 and "nothing captured" in errors[0]["message"]
    assert "nothing captured" in _ok("capture", "status", cwd=project).stdout


def test_a_repository_without_opal_is_skipped_and_left_alone(project, home, tmp_path):
    # installed for the user; this project never ran 'opal init'
    _ok("capture", "install", "--agent", "claude", "--user", cwd=tmp_path)
    cmd = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]["Stop"][-1]["hooks"][0]["command"]
    before = sorted(os.listdir(project / ".git"))
    skipped = Path(os.environ["XDG_STATE_HOME"]) / "opal" / "capture-skipped.log"
    res = _hook(cmd, _event(CLAUDE.stem, CLAUDE, project), project)
    assert (res.returncode, res.stdout, res.stderr) == (0, b"", b"")
    _until(lambda: skipped.exists() and str(project) in skipped.read_text())
    assert "run 'opal init' there" in skipped.read_text()
    assert sorted(os.listdir(project / ".git")) == before  # nothing created in the repository
    status = _ok("capture", "status", cwd=project).stdout
    assert "not set up" in status and "1 turn(s) skipped here" in status
    # outside any git repository too
    outside = tmp_path / "plain"
    outside.mkdir()
    assert _hook(cmd, _event("x", CLAUDE, outside), outside).returncode == 0
    _until(lambda: "is not inside a git repository" in skipped.read_text())


def test_the_opal_command_runs_the_same_hook(project, tmp_path):
    _ok("init", cwd=project)
    session = tmp_path / CLAUDE.name
    shutil.copy(CLAUDE, session)
    res = opal("capture", "hook", "--agent", "claude", "--event", "PreCompact", cwd=project,
               input=_event(CLAUDE.stem, session, project, "PreCompact").decode())
    assert (res.returncode, res.stdout) == (0, "")
    assert [e["level"] for e in _log(project)] == ["info"]  # it waited: a compaction's hook


def test_hooks_at_once_lose_no_event(project, tmp_path):
    """Several agents' hooks firing together: each queues its event, one worker at a
    time drains the queue, and every turn ends up committed."""
    _ok("capture", "install", cwd=project)
    claude = tmp_path / CLAUDE.name
    shutil.copy(CLAUDE, claude)
    gemini = tmp_path / GEMINI.name
    shutil.copy(GEMINI, gemini)
    procs = []
    for i in range(6):
        agent, path, sid, ev = (("claude", claude, CLAUDE.stem, "Stop") if i % 2 else
                                ("gemini", gemini, "aec503dd-gemini", "AfterAgent"))
        procs.append(subprocess.Popen(["sh", "-c", _command(project, agent)], stdin=subprocess.PIPE, cwd=str(project)))
        procs[-1].stdin.write(_event(sid, path, project, ev))
        procs[-1].stdin.close()
    assert [p.wait(timeout=60) for p in procs] == [0] * 6
    _wait(project)
    log = _log(project)
    assert not [e for e in log if e["level"] == "error"], log
    assert sum(e["events"] for e in log) == 6  # every event, some committed together
    # once more each, one after the other: nothing new (the gemini event's id is not the
    # one in its file, and its branch is still found: by the file its head was read from)
    for agent, path, sid, ev in (("claude", claude, CLAUDE.stem, "Stop"), ("gemini", gemini, "aec503dd-gemini", "AfterAgent")):
        _hook(_command(project, agent), _event(sid, path, project, ev), project)
        _wait(project)
        assert _log(project)[-1]["message"].endswith("nothing new"), _log(project)[-1]
    assert len(_ok("branch", cwd=project).stdout.split("\n")) <= 3, _ok("branch", cwd=project).stdout


def test_a_project_with_an_opalgit_folder_of_its_own(project, tmp_path):
    """The worker runs in the session's folder: a folder named opalgit there is not opal."""
    _ok("capture", "install", "--agent", "claude", cwd=project)
    (project / "opalgit").mkdir()
    (project / "opalgit" / "__init__.py").write_text("raise SystemExit('not opal')\n")
    session = tmp_path / CLAUDE.name
    shutil.copy(CLAUDE, session)
    _hook(_command(project, "claude"), _event(CLAUDE.stem, session, project), project)
    _wait(project)
    assert [e["level"] for e in _log(project)] == ["info"]


def test_a_linked_worktree_queues_in_the_common_folder(project, tmp_path):
    from tests.conftest import git

    _ok("capture", "install", "--agent", "claude", cwd=project)
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", str(wt), "-b", "side", cwd=str(project))
    session = tmp_path / CLAUDE.name
    shutil.copy(CLAUDE, session)
    res = _hook(_command(project, "claude"), _event(CLAUDE.stem, session, wt), wt)
    assert res.returncode == 0
    _wait(project)
    log = _log(project)
    assert [e["level"] for e in log] == ["info"], log
    assert not (wt / ".git").is_dir()  # nothing made in the worktree's own .git file


def test_the_worker_outlives_the_agent_ending_the_hooks_process_group(project, tmp_path):
    """Gemini CLI ends its hooks' process group when it exits: the last turn's worker,
    started a moment before, must still commit it (regression: its events stayed queued)."""
    import signal

    _ok("capture", "install", "--agent", "gemini", cwd=project)
    session = tmp_path / GEMINI.name
    shutil.copy(GEMINI, session)
    p = subprocess.Popen(["sh", "-c", _command(project, "gemini", "SessionEnd")], stdin=subprocess.PIPE,
                         cwd=str(project), start_new_session=True)
    p.communicate(_event("aec503dd-b66b-4332-8071-46f831712fa0", session, project, "SessionEnd"), timeout=60)
    for sig in (signal.SIGHUP, signal.SIGTERM):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
    _wait(project)
    assert [e["level"] for e in _log(project)] == ["info"]

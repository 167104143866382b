"""``opal capture`` with the real clients: every turn committed by the agents' own hooks.

Each pinned client runs its "compact" scenario (tests/clients/harness.py: turns with
parallel tool calls, then a compaction) against the mock model, with opal's hooks
installed by ``opal capture install`` and no opal command typed meanwhile. After a
bounded wait for the worker in the background:

* the branch that tracks the session holds every turn: ``opal commit --file`` of the
  session file finds nothing new to commit;
* the turns before the compaction are on the branch (a state's turns hold the first
  prompt and its answer);
* the capture log has no error, and ``opal capture status`` names the session;
* the user's own hook, in the settings before opal's, still ran; uninstall gives the
  settings file back byte for byte.

Claude and Gemini read the project's settings (``--project``); Codex the user's
``$CODEX_HOME/hooks.json`` (``--user``), run with ``--dangerously-bypass-hook-trust``
since trusting a hook is an interactive step of Codex's TUI (docs/capture.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import harness

pytestmark = pytest.mark.clients

AGENTS = ["claude", "codex", "gemini"]


def _opal(*args: str, cwd: Path, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    if check:
        return harness.opal(*args, cwd=cwd, env=env)
    return subprocess.run([sys.executable, "-m", "opalgit", *args], cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)


def _env(root: harness.Root) -> dict:
    env = harness.base_env(root)
    env.update(CODEX_HOME=str(root.codex_home), GIT_CONFIG_NOSYSTEM="1")
    return env


def _wait_for_worker(opal_dir: Path, timeout: float = 90.0) -> None:
    """Until the capture queue is empty and no worker holds its lock (bounded)."""
    import fcntl

    queue = opal_dir / "capture" / "queue"
    lock = opal_dir / "capture" / "worker.lock"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = [p for p in queue.glob("*.json")] if queue.exists() else []
        if not pending and lock.exists():
            with open(lock, "a") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    pass
                else:
                    fcntl.flock(fh, fcntl.LOCK_UN)
                    return
        time.sleep(0.1)
    raise AssertionError(f"the capture worker had not finished after {timeout:.0f} s: {sorted(os.listdir(queue))}")


def _run(client: str, root: harness.Root, bypass: bool) -> harness.ScenarioRun:
    sc = next(s for s in harness.scenarios(client, root.project) if s.name == "compact")
    if bypass:
        runner = harness._RUNNERS[client]

        def with_flag(*a, **kw):
            kw["extra_args"] = [*kw.get("extra_args", ()), "--dangerously-bypass-hook-trust"]
            return runner(*a, **kw)

        harness._RUNNERS[client] = with_flag
        try:
            return harness.run_scenario(sc, root)
        finally:
            harness._RUNNERS[client] = runner
    return harness.run_scenario(sc, root)


def _states(cwd: Path, env: dict, branch: str) -> list[str]:
    return _opal("log", "--format", "%H", branch, cwd=cwd, env=env).stdout.split()


@pytest.mark.parametrize("client", AGENTS)
def test_every_turn_is_captured(client: str, tmp_path: Path) -> None:
    harness.require_client(client)
    root = harness.make_root(tmp_path)
    env = _env(root)
    proj = root.project
    _opal("init", cwd=proj, env=env)
    scope = "--user" if client == "codex" else "--project"
    # the user's own hook on the turn's end, there before opal's, keeps running
    marker = root.path / "user-hook-ran"
    settings = {"claude": proj / ".claude" / "settings.json", "codex": root.codex_home / "hooks.json",
                "gemini": proj / ".gemini" / "settings.json"}[client]
    event = "AfterAgent" if client == "gemini" else "Stop"
    settings.parent.mkdir(parents=True, exist_ok=True)
    mine = json.dumps({"hooks": {event: [{"hooks": [{"type": "command", "command": f"echo ran >> {marker}"}]}]}},
                      indent=2).encode()
    settings.write_bytes(mine)
    out = _opal("capture", "install", "--agent", client, scope, cwd=proj, env=env).stdout
    assert "installed" in out, out

    run = _run(client, root, bypass=client == "codex")
    assert run.ok, run.describe()
    assert run.path is not None
    opal_dir = proj / ".git" / "opal"
    _wait_for_worker(opal_dir)

    log = [json.loads(line) for line in (opal_dir / "capture" / "log").read_text().splitlines()]
    assert not [e for e in log if e["level"] == "error"], log
    assert any(e.get("session") == run.session_id for e in log), log
    # Every turn is on the branch: committing the file by hand finds nothing new.
    again = _opal("commit", "--file", str(run.path), "--agent", client, cwd=proj, env=env, check=False)
    assert again.returncode == 0 and "nothing to commit" in (again.stdout + again.stderr), again
    # ... and the turns from before the compaction are held by the branch's states.
    shown = ""
    states = _states(proj, env, "main")
    assert len(states) >= 2, states  # a state per turn at least
    for oid in states:
        shown += _opal("log", "--turns", oid, cwd=proj, env=env).stdout
    assert harness.P_PROMPT1.split(":")[0] in shown, shown
    status = _opal("capture", "status", cwd=proj, env=env).stdout
    assert run.session_id[:8] in status and "installed" in status, status
    assert marker.exists() and marker.read_text().count("ran") >= 1
    _opal("capture", "uninstall", "--agent", client, scope, cwd=proj, env=env)
    assert settings.read_bytes() == mine

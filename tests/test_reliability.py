"""Crashes, concurrent writers and hostile environments: the repository stays valid."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from opalgit import fsck, porcelain
from opalgit.repo import Repository
from tests.conftest import FIXTURES, git
from tests.core.test_porcelain import place

BIG = os.path.join(FIXTURES, "claude", "claude-code-viewer", "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")


def spawn(args, cwd, env):
    return subprocess.Popen(
        [sys.executable, "-m", "opalgit", *args], cwd=str(cwd), env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def branch_history(project, ref="refs/opal/heads/main") -> set[str]:
    r = git("rev-list", ref, cwd=str(project), check=False)
    return set(r.stdout.split())


def assert_valid(project):
    r = git("fsck", "--full", "--strict", "--no-dangling", cwd=str(project), check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    report = fsck.fsck(Repository.discover(str(project)))
    assert report.ok, report.problems


def test_kill_minus_9_at_random_moments_never_breaks_the_repository(project, home):
    rng = random.Random(20261130)
    env = dict(os.environ, HOME=str(home))
    porcelain.init(str(project))
    data = open(BIG, "rb").read().splitlines(keepends=True)
    path = place(home, project, source=BIG, lines=1)
    cursor = 1
    committed: set[str] = set()
    kills = 0
    # How long a command takes when it is not killed, measured as the test goes: the
    # kill moments are spread over that, so that they land inside the command however
    # fast the machine is (fixed delays killed fewer commands the faster it ran).
    took = [0.4]
    # OPAL_KILL_ROUNDS raises the count for a long stress run (the default keeps CI quick).
    rounds = int(os.environ.get("OPAL_KILL_ROUNDS", "24"))
    for attempt in range(rounds):
        grow_by = rng.randint(5, 60)
        with open(path, "ab") as fh:
            fh.writelines(data[cursor : cursor + grow_by])
        cursor = min(len(data), cursor + grow_by)
        command = rng.choice([["commit"], ["commit"], ["commit"], ["rewind", "1"], ["undo"]])
        started = time.monotonic()
        proc = spawn(command, project, env)
        # Kill moments spread from start-up (reading) to the end (objects and refs
        # being written), and a few past it.
        time.sleep(rng.uniform(0.0, 1.2) * sorted(took)[len(took) // 2])
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        out, err = proc.communicate(timeout=60)
        if proc.returncode != -signal.SIGKILL:
            took.append(time.monotonic() - started)
        assert "Traceback" not in err
        if proc.returncode == 0 and command == ["commit"] and "nothing to commit" not in out:
            head = git("rev-parse", "refs/opal/heads/main", cwd=str(project)).stdout.strip()
            committed.add(head)
        assert_valid(project)
        # Every commit that reported success is still there (rewinds and undos keep
        # old states reachable through parents and the operation log).
        reachable = set(git("rev-list", "--all", cwd=str(project)).stdout.split())
        assert committed <= reachable
        if "rewound" in err or "was rewound" in err:
            # A rewound branch refuses to re-record the live session; undo it.
            spawn(["undo"], project, env).communicate(timeout=60)
    assert kills >= rounds // 5, "the test should actually have killed processes"
    print(f"kill test: {rounds} rounds, {kills} killed mid-run, {len(committed)} commits survived, 0 invalid repositories")


def test_two_writers_at_once_lose_nothing(project, home):
    env = dict(os.environ, HOME=str(home))
    porcelain.init(str(project))
    data = open(BIG, "rb").read().splitlines(keepends=True)
    path = place(home, project, source=BIG, lines=50)
    cursor = 50
    previous_head = None
    for round_ in range(5):
        with open(path, "ab") as fh:
            fh.writelines(data[cursor : cursor + 40])
        cursor += 40
        procs = [spawn(["commit"], project, env) for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0, err
        head = git("rev-parse", "refs/opal/heads/main", cwd=str(project)).stdout.strip()
        if previous_head:
            # The ref only moves forward: the old head is an ancestor of the new one.
            assert git("merge-base", "--is-ancestor", previous_head, head, cwd=str(project), check=False).returncode == 0
        previous_head = head
        repo = Repository.discover(str(project))
        st = porcelain.load_state(repo, porcelain.resolve(repo, "HEAD").oid)
        assert st.header.items == cursor, "every record of the session is committed exactly once"
    assert_valid(project)


def test_disk_full_while_writing_objects_changes_nothing(project, home, monkeypatch):
    porcelain.init(str(project))
    repo = Repository.discover(str(project))
    place(home, project, source=BIG)
    import errno

    from opalgit.store import GitObjectStore

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", os.path.join(repo.common_dir, "objects"))

    # Both ways objects are written (loose and packed) go through this method.
    monkeypatch.setattr(GitObjectStore, "_write", full)
    with pytest.raises(OSError):
        porcelain.commit(repo, {"HOME": str(home)}, str(project))
    assert repo.refs.branches() == {}
    monkeypatch.undo()
    res = porcelain.commit(repo, {"HOME": str(home)}, str(project))  # a retry works
    assert res.items == 438
    assert_valid(project)


def test_cli_reports_disk_full_in_one_line(project, home, tmp_path):
    """The CLI turns OS errors into one line with a hint, never a traceback."""
    porcelain.init(str(project))
    place(home, project, source=BIG)
    hook = tmp_path / "sitecustomize.py"
    hook.write_text(
        "import errno, opalgit.store as s\n"
        "def full(*a, **k):\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device', 'objects')\n"
        "s.GitObjectStore._write = full\n"
    )
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = spawn(["commit"], project, env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "No space left on device" in err and "Traceback" not in err
    assert len([l for l in err.splitlines() if l.startswith("opal: error")]) == 1

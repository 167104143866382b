"""Git hooks against the real git binary: install/chain/uninstall, post-commit links,
post-rewrite moves, a failing or slow opal that never blocks nor holds up a code
commit, work in the background that loses nothing, and shared hooks folders."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import time

import pytest

from opalgit import porcelain
from opalgit.errors import RevisionError, UsageError
from opalgit.hooks import install as hooks
from opalgit.hooks import queue as hookqueue
from opalgit.store.repo import Repository
from opalgit.sync import links
from tests.conftest import ROOT, git
from tests.unit.test_porcelain import grow, place

PY = sys.executable


@pytest.fixture
def repo(project, home):
    porcelain.init(str(project))
    return Repository.discover(str(project))


def commit_code(project, message, *extra, path="code.txt"):
    """A real `git commit`, hooks and all; returns (sha, stderr)."""
    with open(os.path.join(str(project), path), "a") as fh:
        fh.write(message + "\n")
    git("add", path, cwd=str(project))
    r = git("commit", "-q", *extra, "-m", message, cwd=str(project), check=False)
    assert r.returncode == 0, r.stderr
    return git("rev-parse", "HEAD", cwd=str(project)).stdout.strip(), r.stderr


def snapshot(directory):
    """Every file of a folder: name -> (bytes or link target, mode)."""
    out = {}
    for name in sorted(os.listdir(directory)):
        p = os.path.join(directory, name)
        if os.path.islink(p):
            out[name] = ("link", os.readlink(p))
        elif os.path.isfile(p):
            out[name] = (open(p, "rb").read(), stat.S_IMODE(os.lstat(p).st_mode))
    return out


def fresh(repo):
    return Repository.discover(repo.workdir)


def test_shims_in_the_hooks_folder_are_the_ones_install_writes():
    for name in hooks.HOOKS:
        path = os.path.join(ROOT, "hooks", name)
        with open(path, encoding="utf-8") as fh:
            assert fh.read() == hooks.render_shim(name), f"hooks/{name} is stale: regenerate it from opalgit.hooks.install.render_shim"
        assert os.access(path, os.X_OK)


def test_install_chains_an_existing_hook_and_uninstall_restores_it_byte_for_byte(repo, project, home, tmp_path):
    hooks_dir = os.path.join(str(project), ".git", "hooks")
    seen = tmp_path / "user-hook-ran"
    user_hook = f"#!/bin/sh\necho \"user post-commit $(git rev-parse HEAD)\" >> {seen}\n"
    with open(os.path.join(hooks_dir, "post-commit"), "w") as fh:
        fh.write(user_hook)
    os.chmod(os.path.join(hooks_dir, "post-commit"), 0o750)
    os.symlink("post-commit", os.path.join(hooks_dir, "post-rewrite"))  # a symlinked hook, as some managers make
    before = snapshot(hooks_dir)

    changes = {c.name: c.action for c in hooks.install(repo, os.environ, PY)}
    assert changes == {"post-commit": "chained", "post-rewrite": "chained", "pre-push": "installed"}
    assert [s.state for s in hooks.status(repo, os.environ, PY)] == ["installed"] * 3
    # Installing again changes nothing.
    assert {c.action for c in hooks.install(repo, os.environ, PY)} == {"unchanged"}

    place(home, project, lines=20)
    sha, err = commit_code(project, "parser")
    # The user's hook still ran, and saw the new commit.
    assert open(seen).read().split() == ["user", "post-commit", sha]
    # ... and opal recorded the session, linked both ways, in one line on stderr.
    assert err.count("\n") == 1 and err.startswith("opal: recorded ") and sha[:7] in err
    r = fresh(repo)
    state = links.state_at(r, "HEAD")
    assert r.refs.get(f"refs/opal/links/{sha}") == state
    msg = porcelain.load_state(r, state).commit.message
    assert links.trailer_code(msg) == bytes.fromhex(sha) and msg.startswith(f"code commit {sha[:7]}: parser")
    assert links.codes_of_state(r, state) == [bytes.fromhex(sha)]
    assert git("fsck", "--strict", cwd=str(project)).returncode == 0

    hooks.uninstall(r, os.environ)
    assert snapshot(hooks_dir) == before


def test_core_hooks_path_is_respected(repo, project, home, tmp_path):
    git("config", "core.hooksPath", ".githooks", cwd=str(project))
    custom = os.path.join(str(project), ".githooks")
    os.makedirs(custom)
    with open(os.path.join(custom, "post-commit"), "w") as fh:
        fh.write(f"#!/bin/sh\ntouch {tmp_path / 'custom-ran'}\nexit 3\n")
    os.chmod(os.path.join(custom, "post-commit"), 0o755)
    before = snapshot(custom)
    assert hooks.hooks_dir(repo, os.environ) == custom
    hooks.install(repo, os.environ, PY)
    assert not os.path.exists(os.path.join(str(project), ".git", "hooks", "post-commit"))
    place(home, project, lines=15)
    sha, err = commit_code(project, "with hooksPath")
    assert (tmp_path / "custom-ran").exists()
    assert links.get_link(fresh(repo), bytes.fromhex(sha)) is not None
    hooks.uninstall(repo, os.environ)
    assert snapshot(custom) == before


def test_install_refuses_rather_than_clobber(repo, project):
    hooks_dir = os.path.join(str(project), ".git", "hooks")
    for name in ("pre-push", "pre-push.opal-chained"):
        with open(os.path.join(hooks_dir, name), "w") as fh:
            fh.write(f"#!/bin/sh\n# {name}\nexit 0\n")
    before = snapshot(hooks_dir)
    with pytest.raises(UsageError, match="opal-chained"):
        hooks.install(repo, os.environ, PY)
    assert snapshot(hooks_dir) == before


def test_no_session_is_quiet(repo, project):
    hooks.install(repo, os.environ, PY)
    ops = len(porcelain.op_log(repo))
    t0 = time.monotonic()
    _, err = commit_code(project, "no agent here")
    elapsed = time.monotonic() - t0
    assert err == ""
    assert len(porcelain.op_log(fresh(repo))) == ops
    print(f"git commit with opal's hooks and no session: {elapsed * 1000:.0f} ms")


def one_warning(err):
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("opal: ") and "Traceback" not in err
    return lines[0]


def test_a_failing_opal_never_blocks_a_commit(repo, project, home, tmp_path):
    hooks.install(repo, os.environ, PY)
    place(home, project, lines=10)
    config = os.path.join(str(project), ".git", "opal", "config")
    good = open(config, "rb").read()

    # A corrupt opal config.
    with open(config, "w") as fh:
        fh.write("[core\n\tformat = = =\n[[[\n")
    sha, err = commit_code(project, "corrupt config")
    one_warning(err)
    assert git("rev-parse", "HEAD", cwd=str(project)).stdout.strip() == sha

    # opal not set up at all any more.
    with open(config, "wb") as fh:
        fh.write(good)
    os.rename(config, config + ".away")
    _, err = commit_code(project, "no opal init")
    assert "opal init" in one_warning(err)
    os.rename(config + ".away", config)

    # A broken opal installation (an interpreter that dies with a traceback).
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho '  File x' >&2\necho 'ImportError: no pygit2' >&2\nexit 1\n")
    broken.chmod(0o755)
    hooks.install(repo, os.environ, str(broken))
    _, err = commit_code(project, "broken opal")
    assert one_warning(err).endswith("ImportError: no pygit2")

    # Nothing was half-written: the repository is valid and the next commit records again,
    # doing first the work the broken installation could not.
    hooks.install(repo, os.environ, PY)
    sha, err = commit_code(project, "fixed")
    assert err.startswith("opal: recorded ") and "left by an earlier post-commit hook run" in err, err
    assert links.get_link(fresh(repo), bytes.fromhex(sha)) is not None
    assert git("fsck", "--strict", cwd=str(project)).returncode == 0


def test_amend_and_rebase_carry_the_links(repo, project, home):
    hooks.install(repo, os.environ, PY)
    path = place(home, project, lines=10)
    first, _ = commit_code(project, "one")
    grow(path, start=10, end=20)
    second, _ = commit_code(project, "two")
    r = fresh(repo)
    s1, s2 = links.state_at(r, first), links.state_at(r, second)
    assert s1 != s2 and porcelain.load_state(r, s2).commit.parents == (s1,)

    # Amend with no new turns: the amended commit is linked to the same state.
    amended, _ = commit_code(project, "two, amended", "--amend")
    assert links.state_at(fresh(repo), amended) == s2

    # Amend while the agent is away (no session): post-rewrite carries the link over.
    os.rename(path, path + ".away")
    again, err = commit_code(project, "two, amended again", "--amend")
    assert err == "opal: 1 link to agent state followed the rewritten commit\n"
    r = fresh(repo)
    assert r.refs.get(f"refs/opal/links/{again}") == s2
    # The old commit keeps its link (as git notes do), so nothing is lost.
    assert r.refs.get(f"refs/opal/links/{amended}") == s2
    os.rename(path + ".away", path)

    # Rebase both commits onto a new base: every rewritten commit keeps its state.
    git("checkout", "-q", "-b", "side", "HEAD~2", cwd=str(project))
    commit_code(project, "side work", path="side.txt")
    ops_before = len(porcelain.op_log(fresh(repo)))
    git("checkout", "-q", "main", cwd=str(project))
    r_ = git("rebase", "-q", "side", cwd=str(project), check=False)
    assert r_.returncode == 0, r_.stderr
    new_first = git("rev-parse", "HEAD~1", cwd=str(project)).stdout.strip()
    new_second = git("rev-parse", "HEAD", cwd=str(project)).stdout.strip()
    assert new_first != first and new_second != again
    r = fresh(repo)
    assert links.state_at(r, "HEAD~1") == s1
    assert links.state_at(r, "HEAD") == s2
    assert r.refs.get(f"refs/opal/links/{new_first}") == s1
    # One operation for the whole rebase (post-commit stays out of it).
    assert len(porcelain.op_log(r)) == ops_before + 1

    # A commit made without the agent: 'opal at' falls back to the nearest linked ancestor.
    os.rename(path, path + ".away")
    commit_code(project, "by hand")
    found = links.link_at(fresh(repo), "HEAD")
    assert found.distance == 1 and found.state == s2 and found.code.oid.hex() == new_second
    with pytest.raises(RevisionError):
        links.state_at(fresh(repo), "no-such-rev")
    # `opal undo` takes a link back like any other operation.
    porcelain.undo(fresh(repo))
    assert fresh(repo).refs.get(f"refs/opal/links/{new_first}") is None


def test_linked_worktree_keeps_its_own_state(repo, project, home, tmp_path):
    hooks.install(repo, os.environ, PY)
    place(home, project, lines=10)
    main_sha, _ = commit_code(project, "main work")
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", "-b", "feature", str(wt), cwd=str(project))
    place(home, wt, lines=20)
    wt_sha, err = commit_code(wt, "feature work")
    assert "on wt," in err
    r = Repository.discover(str(wt))
    assert porcelain.current_branch(r) == "wt"
    assert porcelain.load_state(r, links.state_at(r, "HEAD")).header.items == 20
    r = fresh(repo)
    assert porcelain.current_branch(r) == "main"
    assert porcelain.load_state(r, links.state_at(r, main_sha)).header.items == 10
    assert links.state_at(r, wt_sha) == r.refs.get("refs/opal/heads/wt")


def test_cli_hooks_at_and_config(project, home):
    from tests.conftest import opal

    r = opal("hooks", "install", cwd=project)
    assert r.returncode == 0 and "Initialized opal" in r.stdout, r.stderr
    r = opal("hooks", "status", cwd=project)
    assert r.stdout.count("installed") == 3 and "push.withCode: off" in r.stdout
    place(home, project, lines=10)
    sha, _ = commit_code(project, "cli")
    r = opal("at", "HEAD", cwd=project)
    assert r.returncode == 0 and f"Code commit {sha[:7]}" in r.stdout and "claude session" in r.stdout
    import json

    data = json.loads(opal("at", "--json", cwd=project).stdout)
    assert data["code_commit"] == sha and data["distance"] == 0 and data["commit"]["turns"] > 0
    r = opal("at", "HEAD~1", cwd=project)
    assert r.returncode == 4 and r.stderr.startswith("opal: error: no agent state is linked")

    assert opal("config", "push.withCode", cwd=project).returncode == 1
    assert opal("config", "push.withCode", "yes", cwd=project).returncode == 0
    assert opal("config", "push.withCode", cwd=project).stdout.strip() == "true"
    assert opal("config", "push.withCode", "maybe", cwd=project).returncode == 2
    assert "push.withcode=true" in opal("config", "--list", cwd=project).stdout.lower()
    assert opal("config", "--unset", "push.withCode", cwd=project).returncode == 0
    assert opal("hooks", "uninstall", cwd=project).returncode == 0
    assert not os.path.exists(os.path.join(str(project), ".git", "hooks", "post-commit"))


# ------------------------------------------------------------------ git is never held up (bounded hooks)

class HeldLock:
    """Another opal process holding the repository's lock until told to let go."""

    def __init__(self, repo):
        code = (
            "import fcntl, os, sys\n"
            f"fd = os.open({os.path.join(repo.opal_dir, 'lock')!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()\n"
        )
        self.proc = subprocess.Popen([PY, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def release(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def drained(repo, rounds=1200):
    """Wait (bounded: at most 1200 polls of 50 ms) until no hook work is left to do and
    every hook's process has ended (its output file goes when it does)."""
    for _ in range(rounds):
        if not hookqueue.pending(repo.opal_dir) and not [
                n for n in os.listdir(repo.opal_dir) if n.startswith("hook-output.")]:
            return True
        time.sleep(0.05)
    return False


def commit_env(project, message, *extra, env=None):
    with open(os.path.join(str(project), "code.txt"), "a") as fh:
        fh.write(message + "\n")
    git("add", "code.txt", cwd=str(project))
    r = subprocess.run(["git", "commit", "-q", *extra, "-m", message], cwd=str(project), capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, timeout=120)
    assert r.returncode == 0, r.stderr
    return git("rev-parse", "HEAD", cwd=str(project)).stdout.strip(), r.stderr


BACKGROUND = re.compile(r"^opal: post-commit hook still working after 1 s, so it goes on in the background \(pid (\d+)\)")


def test_a_held_lock_does_not_hold_git_commit(repo, project, home):
    """The lock held elsewhere: git commit goes on after hooks.timeout, and the work is
    done in the background as soon as the lock is free."""
    hooks.install(repo, os.environ, PY)
    place(home, project, lines=12)
    held = HeldLock(repo)
    try:
        sha, err = commit_env(project, "while locked", env={"OPAL_HOOK_TIMEOUT": "1"})
        assert BACKGROUND.match(err), err
        assert err.count("\n") == 1
        assert links.get_link(fresh(repo), bytes.fromhex(sha)) is None  # not yet: the lock is held
        assert [j.hook for j in hookqueue.pending(repo.opal_dir)] == ["post-commit"]
    finally:
        held.release()
    assert drained(repo)
    r = fresh(repo)
    assert links.get_link(r, bytes.fromhex(sha)) is not None
    assert hookqueue.failures(repo.opal_dir) == []
    assert not [n for n in os.listdir(repo.opal_dir) if n.startswith("hook-output.")]  # the shim left nothing


#: No OPAL_HOOK_TIMEOUT: the shims' own default (git does not wait for post-commit and
#: post-rewrite), as a user has it. conftest sets a long one for every other test.
DEFAULT = {"OPAL_HOOK_TIMEOUT": ""}


def test_by_default_git_commit_returns_before_the_hooks_work(repo, project, home):
    """The default: git commit does not wait for opal at all (nothing said, no pipe of
    git's held open: capture_output returns while the work waits for the lock), and
    the work is done in the background once the lock is free."""
    hooks.install(repo, os.environ, PY)
    place(home, project, lines=12)
    held = HeldLock(repo)
    try:
        sha, err = commit_env(project, "while locked", env=DEFAULT)
        assert err == ""
        assert [j.hook for j in hookqueue.pending(repo.opal_dir)] == ["post-commit"]
        assert links.get_link(fresh(repo), bytes.fromhex(sha)) is None  # not yet: the lock is held
    finally:
        held.release()
    assert drained(repo)
    assert links.get_link(fresh(repo), bytes.fromhex(sha)) is not None
    assert hookqueue.failures(repo.opal_dir) == []
    assert not [n for n in os.listdir(repo.opal_dir) if n.startswith("hook-output.")]  # nothing left behind


def test_detached_work_then_amend_and_another_commit_at_once(repo, project, home):
    """No state is lost when the hooks' work is detached and git goes on at once (the
    default), the lock contended: each code commit is linked to the state of its
    moment, in order."""
    hooks.install(repo, os.environ, PY)
    path = place(home, project, lines=10)
    held = HeldLock(repo)
    try:
        a, err = commit_env(project, "one", env=DEFAULT)
        assert err == ""
        grow(path, start=10, end=20)
        b, _ = commit_env(project, "two", env=DEFAULT)
        b2, err = commit_env(project, "two, amended", "--amend", env=DEFAULT)
        c, _ = commit_env(project, "three", env=DEFAULT)
        assert len(hookqueue.pending(repo.opal_dir)) == 5  # 3 post-commits, the amend's post-commit and post-rewrite
    finally:
        held.release()
    assert drained(repo)
    _all_linked_in_order(repo, project, a, b, b2, c, items=20)


def _all_linked_in_order(repo, project, a, b, b2, c, items):
    r = fresh(repo)
    assert hookqueue.failures(repo.opal_dir) == []
    for code in (a, b, b2, c):
        assert links.get_link(r, bytes.fromhex(code)) is not None, code
    # The work ran after the session had grown: every turn is in the state, and each
    # state names the code commit it was recorded for, not whatever HEAD was later.
    head = porcelain.branch_head(r, "main")
    assert porcelain.load_state(r, head).header.items == items
    assert links.trailer_code(porcelain.load_state(r, links.state_at(r, a)).commit.message) == bytes.fromhex(a)
    assert links.state_at(r, b2) == links.state_at(r, b)
    assert links.state_at(r, c) == head
    assert git("fsck", "--strict", cwd=str(project)).returncode == 0


def gated_python(tmp_path):
    """An opal whose every start waits for a gate file (bounded: 60 s): a busy machine
    that starts the hooks' processes late, after the next git commands, then all at once."""
    gate = tmp_path / "gate"
    fake = tmp_path / "gated-python"
    fake.write_text(f"#!/bin/sh\nn=0\nwhile [ ! -e '{gate}' ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done\n"
                    f"exec '{PY}' \"$@\"\n")
    fake.chmod(0o755)
    return str(fake), gate


def test_background_work_that_starts_late_and_all_at_once_loses_nothing(repo, project, home, tmp_path):
    """The machine is busy: no hook's process starts before the commits, the amend and
    the commit after it are all made; then they start together, in any order."""
    python, gate = gated_python(tmp_path)
    hooks.install(repo, os.environ, python)
    path = place(home, project, lines=10)
    a, _ = commit_env(project, "one", env=DEFAULT)
    grow(path, start=10, end=20)
    b, _ = commit_env(project, "two", env=DEFAULT)
    b2, _ = commit_env(project, "two, amended", "--amend", env=DEFAULT)
    c, err = commit_env(project, "three", env=DEFAULT)
    assert err == ""
    assert links.get_link(fresh(repo), bytes.fromhex(a)) is None  # nothing ran yet
    gate.write_text("")
    assert drained(repo)
    _all_linked_in_order(repo, project, a, b, b2, c, items=20)


def test_a_rebase_right_after_commits_whose_work_waits(repo, project, home):
    """Commits, then at once a rebase of them, all while the lock is held: the
    post-rewrite runs after the post-commits it follows, so the links move."""
    hooks.install(repo, os.environ, PY)
    path = place(home, project, lines=10)
    held = HeldLock(repo)
    try:
        git("checkout", "-q", "-b", "side", cwd=str(project))
        with open(os.path.join(str(project), "side.txt"), "w") as fh:
            fh.write("side work\n")
        git("add", "side.txt", cwd=str(project))
        subprocess.run(["git", "commit", "-q", "-m", "side work"], cwd=str(project), check=True,
                       env={**os.environ, **DEFAULT}, timeout=120)
        git("checkout", "-q", "main", cwd=str(project))
        first, _ = commit_env(project, "one", env=DEFAULT)
        grow(path, start=10, end=20)
        second, _ = commit_env(project, "two", env=DEFAULT)
        r_ = subprocess.run(["git", "rebase", "-q", "side"], cwd=str(project), capture_output=True, text=True,
                            env={**os.environ, **DEFAULT}, timeout=120)
        assert r_.returncode == 0 and r_.stderr == "", r_.stderr
    finally:
        held.release()
    assert drained(repo)
    r = fresh(repo)
    assert hookqueue.failures(repo.opal_dir) == []
    # Each post-commit recorded the session as it was when its work ran (both after the
    # session grew); the rebased commits have the links of the ones they replace.
    s1, s2 = links.state_at(r, first), links.state_at(r, second)
    new_first, new_second = (git("rev-parse", rev, cwd=str(project)).stdout.strip() for rev in ("HEAD~1", "HEAD"))
    assert {new_first, new_second}.isdisjoint({first, second})
    assert r.refs.get(f"refs/opal/links/{new_first}") == s1 and r.refs.get(f"refs/opal/links/{new_second}") == s2
    assert porcelain.load_state(r, s2).header.items == 20


def test_a_failure_in_the_background_is_said_by_the_next_commit_by_default(repo, project, home, tmp_path):
    """Nobody reads the stderr of work that git did not wait for: its failure is said by
    the next hook's shim, once; so is the last line of an opal that died before it
    could keep it (a broken installation)."""
    hooks.install(repo, os.environ, PY)
    place(home, project, lines=10)
    config = os.path.join(repo.opal_dir, "config")
    good = open(config, "rb").read()
    with open(config, "w") as fh:
        fh.write("[core\n\tformat = = =\n[[[\n")
    _, err = commit_env(project, "one", env=DEFAULT)
    assert err == ""
    assert _wait_for(lambda: hookqueue.failures(repo.opal_dir))
    with open(config, "wb") as fh:
        fh.write(good)
    _, err = commit_env(project, "two", env=DEFAULT)
    line = one_warning(err)
    assert line.startswith("opal: an earlier post-commit hook failed in the background: opal: post-commit hook "), err
    assert "config" in line
    assert drained(repo)
    _, err = commit_env(project, "three", env=DEFAULT)
    assert err == ""  # said once

    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho 'ImportError: no pygit2' >&2\nexit 1\n")
    broken.chmod(0o755)
    hooks.install(repo, os.environ, str(broken))
    assert drained(repo)
    _, err = commit_env(project, "broken", env=DEFAULT)
    assert err == ""
    unsaid = os.path.join(hookqueue.queue_dir(repo.opal_dir), hookqueue.UNSAID)
    assert _wait_for(lambda: os.path.exists(unsaid))
    hooks.install(repo, os.environ, PY)
    _, err = commit_env(project, "fixed", env=DEFAULT)
    assert one_warning(err) == "opal: an earlier post-commit hook failed in the background: ImportError: no pygit2"
    assert drained(repo)  # and the broken run's work was done by the next one
    assert links.get_link(fresh(repo), bytes.fromhex(git("rev-parse", "HEAD~1", cwd=str(project)).stdout.strip()))


def _wait_for(predicate, rounds=1200):
    for _ in range(rounds):  # bounded: at most 1200 polls of 50 ms
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_work_of_a_killed_background_hook_is_done_by_the_next_one(repo, project, home):
    hooks.install(repo, os.environ, PY)
    path = place(home, project, lines=10)
    held = HeldLock(repo)
    try:
        a, err = commit_env(project, "one", env={"OPAL_HOOK_TIMEOUT": "1"})
        pid = int(BACKGROUND.match(err).group(1))
        os.kill(pid, signal.SIGKILL)
        for _ in range(200):  # bounded: until the process is gone
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
    finally:
        held.release()
    assert [j.data["code"] for j in hookqueue.pending(repo.opal_dir)] == [a]  # its ticket is still there
    grow(path, start=10, end=15)
    b, err = commit_env(project, "two")
    assert err.startswith("opal: recorded "), err
    r = fresh(repo)
    assert links.get_link(r, bytes.fromhex(a)) is not None and links.get_link(r, bytes.fromhex(b)) is not None
    assert hookqueue.pending(repo.opal_dir) == []


def slow_python(tmp_path):
    """An 'opal' that never answers (a hung interpreter)."""
    fake = tmp_path / "slow-python"
    fake.write_text("#!/bin/sh\nexec sleep 300\n")
    fake.chmod(0o755)
    return str(fake)


def gone(pid, rounds=200):
    for _ in range(rounds):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_slow_opal_holds_neither_commit_nor_push(repo, project, home, tmp_path):
    hooks.install(repo, os.environ, slow_python(tmp_path))
    sha, err = commit_env(project, "slow", env={"OPAL_HOOK_TIMEOUT": "1"})
    pid = int(BACKGROUND.match(err).group(1))
    os.kill(pid, signal.SIGTERM)  # the test's own: a hung opal would be the user's to end

    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare))
    git("remote", "add", "origin", str(bare), cwd=str(project))
    r = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=str(project), capture_output=True, text=True,
                       env={**os.environ, "OPAL_HOOK_TIMEOUT": "1"}, timeout=120)
    # The pre-push hook is stopped, says so, and the push goes on.
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("opal: pre-push hook stopped after 1 s: the state branch was not pushed"), r.stderr
    assert sha in git("ls-remote", str(bare), cwd=str(project)).stdout
    # ... and nothing of it is left running (the shim stopped it).
    left = subprocess.run(["pgrep", "-f", f"{tmp_path}/slow-python"], capture_output=True, text=True).stdout.split()
    assert all(gone(int(p)) for p in left)


def test_the_push_gate_still_refuses_synchronously(repo, project, home, tmp_path):
    """pre-push decides before git goes on: a state with a secret in clear is not pushed,
    and git push says so."""
    from tests.unit.test_secrets import SESSION as SECRET_SESSION

    hooks.install(repo, os.environ, PY)
    repo.config["secrets.redact"] = "false"  # as before a rule existed
    repo.config["push.withCode"] = "true"
    place(home, project, source=SECRET_SESSION)
    commit_code(project, "with secrets")
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare))
    git("remote", "add", "origin", str(bare), cwd=str(project))
    r = git("push", "-q", "origin", "main", cwd=str(project), check=False)
    assert r.returncode == 0, r.stderr
    assert "refusing to push" in one_warning(r.stderr) and "in clear" in r.stderr
    assert git("--git-dir", str(bare), "for-each-ref", "refs/opal/", cwd=str(project)).stdout == ""


# ------------------------------------------------------------------ a hooks folder other repositories share


def test_a_shared_hooks_folder_is_refused_and_silent_elsewhere(project, home, tmp_path, monkeypatch):
    from tests.conftest import opal

    shared = tmp_path / "shared-hooks"
    shared.mkdir()
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(open(os.environ["GIT_CONFIG_GLOBAL"]).read() + f"[core]\n\thooksPath = {shared}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))

    r = opal("hooks", "install", cwd=project)
    assert r.returncode == 2 and "global git config" in r.stderr and "--shared" in r.stderr, r.stderr
    assert os.listdir(shared) == [] and not os.path.exists(project / ".git" / "opal")  # nothing changed

    r = opal("hooks", "install", "--shared", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "do nothing in repositories without opal" in r.stderr
    place(home, project, lines=10)
    sha, err = commit_code(project, "with opal")
    assert err.startswith("opal: recorded ")

    # Another repository, without opal, runs the same hooks: not a word, exit 0.
    other = tmp_path / "other"
    git("init", "-q", str(other))
    sha, err = commit_code(other, "no opal here")
    assert err == ""
    r = git("push", "-q", str(tmp_path / "nowhere.git"), "main", cwd=str(other), check=False)
    assert "opal" not in r.stderr

    # A local core.hooksPath outside the repository may be shared too.
    third = tmp_path / "third"
    git("init", "-q", str(third))
    git("config", "core.hooksPath", str(shared), cwd=str(third))
    r = opal("hooks", "install", cwd=third)
    assert r.returncode == 2 and "outside this repository" in r.stderr


def test_a_failure_in_the_background_is_said_at_the_next_hook(repo, project, home):
    from tests.conftest import opal

    hooks.install(repo, os.environ, PY)
    place(home, project, lines=10)
    config = os.path.join(repo.opal_dir, "config")
    good = open(config, "rb").read()
    held = HeldLock(repo)
    try:
        commit_env(project, "one", env={"OPAL_HOOK_TIMEOUT": "1"})
        assert "Still to do: post-commit" in opal("hooks", "status", cwd=project).stdout
        with open(config, "w") as fh:  # the work will fail, after git has gone on (wherever it has got to)
            fh.write("[core\n\tformat = = =\n[[[\n")
    finally:
        held.release()
    assert drained(repo)
    with open(config, "wb") as fh:
        fh.write(good)
    failed = hookqueue.failures(repo.opal_dir)
    assert len(failed) == 1 and not failed[0]["said"]
    assert "Failed " in opal("hooks", "status", cwd=project).stdout
    _, err = commit_env(project, "two")
    lines = err.splitlines()
    assert lines[0].startswith("opal: an earlier post-commit hook failed in the background: "), err
    assert lines[-1].startswith("opal: recorded ")
    _, err = commit_env(project, "three")
    assert "an earlier" not in err  # said once


def test_a_hook_manager_that_writes_its_hook_again(repo, project):
    """husky writes .husky/_ again on every 'npm install', over opal's shims."""
    hooks_dir = os.path.join(str(project), ".git", "hooks")
    theirs = "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"\n"
    with open(os.path.join(hooks_dir, "pre-push"), "w") as fh:
        fh.write(theirs)
    os.chmod(os.path.join(hooks_dir, "pre-push"), 0o755)
    before = snapshot(hooks_dir)
    hooks.install(repo, os.environ, PY)
    with open(os.path.join(hooks_dir, "pre-push"), "w") as fh:  # written again
        fh.write(theirs)
    assert hooks.status(repo, os.environ, PY)[2].state == "foreign"
    changes = {c.name: c.action for c in hooks.install(repo, os.environ, PY)}
    assert changes["pre-push"] == "updated"
    assert hooks.status(repo, os.environ, PY)[2].state == "installed"
    with open(os.path.join(hooks_dir, "pre-push"), "w") as fh:  # and again, then uninstall
        fh.write(theirs)
    hooks.uninstall(repo, os.environ)
    assert snapshot(hooks_dir) == before and not os.path.exists(os.path.join(hooks_dir, ".opal-chained"))


@pytest.mark.parametrize("compact", [False, True])
def test_the_journal_loses_no_line_while_it_is_taken(tmp_path, monkeypatch, compact):
    """Shims append to the journal while opal processes turn it into jobs: every line
    becomes a job (300 lines from a shell, against takes in a loop; bounded), also
    while the journal is moved aside and begun again."""
    if compact:
        monkeypatch.setattr(hookqueue, "_COMPACT_AT", 2000)
        monkeypatch.setattr(hookqueue, "_QUIET", 0.2)
    opal_dir = str(tmp_path / "opal")
    queue = os.path.join(opal_dir, "hooks")
    os.makedirs(queue)
    writer = subprocess.Popen(
        ["sh", "-c", f'i=1; while [ $i -le 300 ]; do printf "%s post-commit - - /x\\n" $i >>"{queue}/journal"; [ $((i % 20)) -eq 0 ] && sleep 0.01; i=$((i+1)); done'],
    )
    takes, moved = 0, False
    while writer.poll() is None and takes < 3000:
        hookqueue.take(opal_dir, "post-rewrite", {}).done()
        takes += 1
        moved = moved or os.path.exists(os.path.join(queue, "journal.taking"))
    writer.wait(timeout=60)
    time.sleep(0.3)  # past _QUIET: the journal moved aside may go
    for _ in range(2):
        hookqueue.take(opal_dir, "post-rewrite", {}).done()  # what came after the last take
        moved = moved or os.path.exists(os.path.join(queue, "journal.taking"))
    shims = [j.data["shim"] for j in hookqueue.pending(opal_dir) if j.hook == "post-commit"]
    assert sorted(shims) == list(range(1, 301))  # each line once: none lost, none twice
    assert moved == compact

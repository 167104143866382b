"""Git hooks against the real git binary: install/chain/uninstall, post-commit links,
post-rewrite moves, and a failing opal that never blocks a code commit."""

from __future__ import annotations

import os
import stat
import sys
import time

import pytest

from opalgit import hooks, links, porcelain
from opalgit.errors import RevisionError, UsageError
from opalgit.repo import Repository
from tests.conftest import ROOT, git
from tests.core.test_porcelain import grow, place

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
            assert fh.read() == hooks.render_shim(name), f"hooks/{name} is stale: regenerate it from opalgit.hooks.render_shim"
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

    # Nothing was half-written: the repository is valid and the next commit records again.
    hooks.install(repo, os.environ, PY)
    sha, err = commit_code(project, "fixed")
    assert err.startswith("opal: recorded ")
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

"""Refs and repository layout read without libgit2, checked against libgit2 and the
real git binary: loose and packed refs, deletions, worktrees, and the layouts that
are left to libgit2."""

from __future__ import annotations

import os
import subprocess
import sys

import pygit2
import pytest

from opalgit import porcelain
from opalgit.store.refs import RefStore
from opalgit.store.repo import Repository, _layout
from tests.conftest import git


def ids(project: str, n: int) -> list[str]:
    """``n`` distinct object ids that exist in the repository (blobs)."""
    return [
        subprocess.run(["git", "hash-object", "-w", "--stdin"], input=f"blob {i}\n", text=True, cwd=project,
                       capture_output=True, check=True).stdout.strip()
        for i in range(n)
    ]


def both(project: str) -> tuple[RefStore, RefStore]:
    git_dir = os.path.join(project, ".git")
    files = RefStore(lambda: pytest.fail("libgit2 was opened"), git_dir, git_dir)
    lib = RefStore(pygit2.Repository(git_dir), git_dir)
    return files, lib


def test_loose_packed_and_deleted_refs_read_as_libgit2_reads_them(project):
    project = str(project)
    a, b, c, d = ids(project, 4)
    git("update-ref", "refs/opal/heads/main", a, cwd=project)
    git("update-ref", "refs/opal/heads/team/x", b, cwd=project)
    git("update-ref", "refs/opal/links/" + "1" * 40, c, cwd=project)
    git("update-ref", "refs/other/not-ours", d, cwd=project)
    files, lib = both(project)
    assert files.all() == lib.all() and len(files.all()) == 3
    git("pack-refs", "--all", cwd=project)
    assert not os.path.exists(os.path.join(project, ".git", "refs", "opal", "heads", "main"))
    files, lib = both(project)
    assert files.all() == lib.all() and len(files.all()) == 3
    # A packed ref updated again (loose wins), one deleted from packed-refs.
    git("update-ref", "refs/opal/heads/main", d, cwd=project)
    git("update-ref", "-d", "refs/opal/heads/team/x", cwd=project)
    files, lib = both(project)
    assert files.all() == lib.all()
    assert files.get("refs/opal/heads/main") == bytes.fromhex(d)
    assert files.get("refs/opal/heads/team/x") is None
    assert files.get("refs/opal/heads/team") is None
    assert files.branches() == {"main": bytes.fromhex(d)}


def test_a_symbolic_ref_or_a_strange_file_goes_to_libgit2(project):
    project = str(project)
    (a,) = ids(project, 1)
    git("update-ref", "refs/opal/heads/main", a, cwd=project)
    git("symbolic-ref", "refs/opal/heads/alias", "refs/opal/heads/main", cwd=project)
    git_dir = os.path.join(project, ".git")
    opened = []

    def open_libgit2():
        opened.append(1)
        return pygit2.Repository(git_dir)

    refs = RefStore(open_libgit2, git_dir, git_dir)
    assert refs.get("refs/opal/heads/main") == bytes.fromhex(a) and not opened
    assert refs.get("refs/opal/heads/alias") == bytes.fromhex(a) and opened
    assert refs.all()["refs/opal/heads/alias"] == bytes.fromhex(a)


def test_a_held_lock_file_is_not_a_ref(project):
    project = str(project)
    (a,) = ids(project, 1)
    git("update-ref", "refs/opal/heads/main", a, cwd=project)
    with open(os.path.join(project, ".git", "refs", "opal", "heads", "other.lock"), "w") as fh:
        fh.write(a + "\n")
    files, lib = both(project)
    assert files.all() == lib.all() == {"refs/opal/heads/main": bytes.fromhex(a)}


def test_worktrees_find_the_same_refs_and_their_own_work_tree(project, tmp_path):
    project = str(project)
    porcelain.init(project)
    (a,) = ids(project, 1)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x", cwd=project)
    git("update-ref", "refs/opal/heads/main", a, cwd=project)
    wt = str(tmp_path / "wt")
    git("worktree", "add", "-q", wt, cwd=project)
    repo = Repository.discover(os.path.join(wt))
    assert repo._git is None, "a plain worktree is read without libgit2"
    assert repo.workdir == wt
    assert repo.common_dir == os.path.join(project, ".git")
    assert repo.refs.get("refs/opal/heads/main") == bytes.fromhex(a)
    lib = pygit2.Repository(wt)
    assert repo.git_dir == os.path.abspath(lib.path) and repo.workdir == lib.workdir.rstrip("/")
    main = Repository.discover(os.path.join(project))
    assert main.workdir == project and main.git_dir == os.path.join(project, ".git")


@pytest.mark.parametrize(
    "config, simple",
    [
        ("[core]\n\tbare = false\n\trepositoryformatversion = 0\n", True),
        ("[core]\n\tbare = true\n", False),
        ("[core]\n\tworktree = /elsewhere\n", False),
        ('[include]\n\tpath = other\n', False),
        ('[includeIf "gitdir:/x/"]\n\tpath = other\n', False),
        ("[extensions]\n\tobjectformat = sha256\n", False),
        ('[remote "origin"]\n\tworktree = not core\n', True),
        ("# [extensions]\n[core]\n\tbare = false ; comment\n", True),
    ],
)
def test_layouts_left_to_libgit2(tmp_path, config, simple):
    git_dir = tmp_path / ".git"
    git_dir.mkdir()
    (git_dir / "config").write_text(config)
    assert _layout(str(git_dir), str(git_dir), bare=False)[0] is simple


def test_a_repository_owned_by_someone_else_is_left_to_libgit2(tmp_path, monkeypatch):
    git_dir = tmp_path / ".git"
    git_dir.mkdir()
    (git_dir / "config").write_text("[core]\n\tbare = false\n")
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(git_dir).st_uid + 1)
    assert not _layout(str(git_dir), str(git_dir), bare=False)[0]


def test_read_commands_do_not_load_libgit2(project, home):
    """What the start-up budget of log, show and diff rests on."""
    from tests.unit.test_porcelain import place

    project_s = str(project)
    porcelain.init(project_s)
    place(home, project)
    env = dict(os.environ, HOME=str(home))
    subprocess.run([sys.executable, "-m", "opalgit", "commit"], cwd=project_s, env=env, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "opalgit", "branch", "side", "main:3"], cwd=project_s, env=env, check=True,
                   capture_output=True)
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['opal'] + sys.argv[1:]\n"
        "try:\n    runpy.run_module('opalgit', run_name='__main__')\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "sys.stderr.write('LIBGIT2=%s' % ('pygit2' in sys.modules))\n"
    )
    for args in (["log", "-n", "5"], ["show", "main:2"], ["diff", "main", "side"]):
        p = subprocess.run([sys.executable, "-c", probe, *args], cwd=project_s, env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert "LIBGIT2=False" in p.stderr, (args, p.stderr[-500:])


@pytest.mark.parametrize("through", ["git", "libgit2"])
def test_updates_are_compare_and_swap_and_all_or_nothing(project, through):
    from opalgit.errors import ConflictError

    project = str(project)
    a, b, c = (bytes.fromhex(x) for x in ids(project, 3))
    git_dir = os.path.join(project, ".git")
    refs = RefStore(lambda: pygit2.Repository(git_dir), git_dir, git_dir)
    refs._files = through == "git"
    main, side = "refs/opal/heads/main", "refs/opal/heads/side"
    ran: list[dict] = []  # what the refs were when the work given as `meanwhile` ran
    refs.update({main: (None, a), side: (None, b)}, "create", meanwhile=lambda: ran.append(refs.all()))
    assert refs.all() == {main: a, side: b}
    assert len(ran) == 1
    refs.update({main: (a, c), side: (b, None)}, "move and delete")
    assert refs.all() == {main: c}
    # A stale old value: nothing is applied, not even the change that would fit.
    with pytest.raises(ConflictError) as err:
        refs.update({main: (a, b), side: (None, a)}, "stale", meanwhile=lambda: ran.append(refs.all()))
    assert "changed while this command ran" in str(err.value)
    assert len(ran) == 2  # called once either way

    def fails() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError):  # its error comes through, after git has finished
        refs.update({main: (c, b)}, "with failing work", meanwhile=fails)
    assert refs.all() == {main: b}
    refs.update({main: (b, c)}, "back")
    assert refs.all() == {main: c}
    with pytest.raises(ConflictError):
        refs.update({main: (None, a)}, "exists already")
    # Another writer holding the lock.
    lock = os.path.join(git_dir, "refs", "opal", "heads", "main.lock")
    open(lock, "w").close()
    with pytest.raises(ConflictError) as err:
        refs.update({main: (c, a)}, "locked")
    assert "lock" in str(err.value) + str(err.value.hint)
    os.unlink(lock)
    refs.update({main: (c, a)}, "unlocked")
    assert refs.get(main) == a
    assert git("fsck", "--full", "--strict", cwd=project).returncode == 0


def test_the_committer_is_the_users_git_identity_with_or_without_git(project, home, monkeypatch):
    project = str(project)
    porcelain.init(project)
    git("config", "user.name", "Ada Lovelace", cwd=project)
    git("config", "user.email", "ada@example.com", cwd=project)
    repo = Repository.discover(project)
    sig = repo.signature()
    assert (sig.name, sig.email) == ("Ada Lovelace", "ada@example.com")
    asked = Repository.discover(project)
    asked.ask_identity()  # asked ahead, as a commit does: the same answer
    sig = asked.signature()
    assert (sig.name, sig.email) == ("Ada Lovelace", "ada@example.com")
    monkeypatch.setenv("PATH", "/nonexistent")  # no git binary: libgit2 answers the same
    no_git = Repository.discover(project)
    no_git.ask_identity()
    sig = no_git.signature()
    assert (sig.name, sig.email) == ("Ada Lovelace", "ada@example.com")
    monkeypatch.undo()
    git("config", "--unset", "user.name", cwd=project)
    git("config", "--unset", "user.email", cwd=project)
    sig = Repository.discover(project).signature()
    assert (sig.name, sig.email) == ("Test User", "test@example.com")  # the global config (conftest)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    sig = Repository.discover(project).signature()
    assert (sig.name, sig.email) == ("opal", "opal@localhost")


@pytest.mark.parametrize("setting, folder_mode", [("group", 0o2775), ("all", 0o2775), ("0660", 0o2770)])
def test_a_shared_repository_gets_the_folder_permissions_git_gives(project, home, setting, folder_mode):
    """core.sharedRepository: git makes new object folders writable by the group;
    opal writes its loose objects as git does (libgit2 does not)."""
    from tests.unit.test_porcelain import place

    project = str(project)
    objects = os.path.join(project, ".git", "objects")
    git("config", "core.sharedRepository", setting, cwd=project)
    before = set(os.listdir(objects))  # made by git before the setting
    old_umask = os.umask(0o022)
    try:
        porcelain.init(project)
        place(home, project, lines=20)
        res = porcelain.commit(Repository.discover(project), {"HOME": str(home)}, project)
        probe = subprocess.run(["git", "hash-object", "-w", "--stdin"], input="a shared probe\n", text=True,
                               cwd=project, capture_output=True, check=True).stdout.strip()
    finally:
        os.umask(old_umask)
    assert res.new_items > 0
    made = [d for d in os.listdir(objects) if len(d) == 2 and d not in before]
    modes = {os.stat(os.path.join(objects, d)).st_mode & 0o7777 for d in made}
    assert modes == {folder_mode}, (setting, sorted(oct(m) for m in modes))
    if probe[:2] not in before:  # git's own, for comparison
        assert os.stat(os.path.join(objects, probe[:2])).st_mode & 0o7777 == folder_mode
    assert git("fsck", "--full", "--strict", cwd=project).returncode == 0


def test_the_code_head_is_read_as_git_reads_it(project, tmp_path):
    """HEAD on a branch (loose, then packed), detached, in a worktree, and unborn."""
    from opalgit.sync import links

    project = str(project)
    porcelain.init(project)

    def commit(msg: str, cwd: str = project) -> str:
        git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", msg, cwd=cwd)
        return git("rev-parse", "HEAD", cwd=cwd).stdout.strip()

    def head(cwd: str = project):
        repo = Repository.discover(cwd)
        got = links.head_commit(repo)
        assert repo._git is None, "read without libgit2"
        return got

    first = commit("first code commit")
    h = head()
    assert h.oid.hex() == first and h.subject == "first code commit"
    git("pack-refs", "--all", cwd=project)
    assert head().oid.hex() == first
    second = commit("second")
    assert head().parents == (bytes.fromhex(first),) and head().oid.hex() == second
    git("checkout", "-q", "--detach", first, cwd=project)
    assert head().oid.hex() == first
    git("checkout", "-q", "-", cwd=project)
    wt = str(tmp_path / "wt")
    git("worktree", "add", "-q", "-b", "other", wt, first, cwd=project)
    assert head(wt).oid.hex() == first and head().oid.hex() == second
    git("checkout", "-q", "--orphan", "fresh", cwd=project)
    assert head() is None


def test_a_ref_beside_its_own_folder_is_a_clear_usage_error(project):
    from opalgit.errors import UsageError

    project = str(project)
    (a,) = (bytes.fromhex(x) for x in ids(project, 1))
    git_dir = os.path.join(project, ".git")
    refs = RefStore(lambda: pygit2.Repository(git_dir), git_dir, git_dir)
    refs.update({"refs/opal/heads/a": (None, a), "refs/opal/heads/x/y": (None, a)}, "create")
    for name, beside in (("refs/opal/heads/a/b", "branch a"), ("refs/opal/heads/x", "branch x/y")):
        with pytest.raises(UsageError) as err:
            refs.update({name: (None, a)}, "clash")
        assert beside in str(err.value) and "choose another name" in err.value.hint
    assert set(refs.all()) == {"refs/opal/heads/a", "refs/opal/heads/x/y"}


@pytest.mark.parametrize("through", ["git", "libgit2"])
def test_a_held_or_stale_ref_lock_is_named_with_its_path(project, through):
    """A .lock another git holds, or a killed one left: the error names it, its age
    and what to do, and nothing is changed."""
    from opalgit.errors import ConflictError

    project = str(project)
    a, b = (bytes.fromhex(x) for x in ids(project, 2))
    git_dir = os.path.join(project, ".git")
    refs = RefStore(lambda: pygit2.Repository(git_dir), git_dir, git_dir)
    refs._files = through == "git"
    main = "refs/opal/heads/main"
    refs.update({main: (None, a)}, "create")
    lock = os.path.join(git_dir, "refs", "opal", "heads", "main.lock")
    open(lock, "w").close()
    with pytest.raises(ConflictError) as err:
        refs.update({main: (a, b)}, "move")
    assert f"{lock} exists" in str(err.value) and " s old" in str(err.value)
    assert f"delete {lock}" in err.value.hint
    assert refs.get(main) == a
    os.unlink(lock)
    refs.update({main: (a, b)}, "move")  # the retry the hint says works
    assert refs.get(main) == b


def test_a_killed_writer_changes_no_ref_with_part_of_its_transaction(project):
    """git update-ref commits whatever lines reached it unless told 'start': opal's
    transaction is explicit, so a writer cut off after its first line changes nothing."""
    project = str(project)
    (a,) = ids(project, 1)
    # What opal sends, cut off after the first update (the writer was killed).
    partial = f"start\nupdate refs/opal/heads/main {a} {'0' * 40}\n"
    subprocess.run(["git", "update-ref", "--stdin"], input=partial, text=True, cwd=project, capture_output=True)
    assert git("rev-parse", "-q", "--verify", "refs/opal/heads/main", cwd=project, check=False).returncode != 0
    # Without "start" the same cut-off input would have been applied.
    subprocess.run(["git", "update-ref", "--stdin"], input=partial.split("\n", 1)[1], text=True, cwd=project,
                   capture_output=True)
    assert git("rev-parse", "refs/opal/heads/main", cwd=project).stdout.strip() == a


def test_a_full_disk_at_the_ref_lock_says_disk_full_with_the_path(tmp_path):
    """git says only "couldn't write '...lock'": opal says the disk is full, and
    which file, not that another process holds the lock."""
    import errno

    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                                           capture_output=True).returncode:
        pytest.skip("needs to mount a small tmpfs (root)")
    try:
        project = str(mount / "p")
        git("init", "-q", project)
        (a,) = (bytes.fromhex(x) for x in ids(project, 1))
        git_dir = os.path.join(project, ".git")
        refs = RefStore(lambda: pygit2.Repository(git_dir), git_dir, git_dir)
        with open(str(mount / "fill"), "wb") as fh:  # the rest of the disk
            try:
                while True:
                    fh.write(b"\0" * 65536)
                    fh.flush()
            except OSError:
                pass
        with pytest.raises(OSError) as err:
            refs.update({"refs/opal/heads/main": (None, a)}, "create")
        assert err.value.errno == errno.ENOSPC
        assert err.value.filename == os.path.join(git_dir, "refs", "opal", "heads", "main.lock")
        assert refs.get("refs/opal/heads/main") is None
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)

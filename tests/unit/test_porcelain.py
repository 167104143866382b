"""The porcelain API end to end, on real git repositories read by the real git binary."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from opalgit import porcelain
from opalgit.agents.claude.files import project_key
from opalgit.errors import (
    InputError,
    NotARepositoryError,
    NothingToDoError,
    RevisionError,
    SessionNotFoundError,
    UsageError,
)
from opalgit.history import sequence
from opalgit.history.states import _items
from opalgit.store.repo import Repository
from tests.conftest import FIXTURES, git

SESSION = os.path.join(FIXTURES, "claude", "claude-code-viewer", "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl")


def place(home, cwd, source=SESSION, lines=None, name=None) -> str:
    """Put a Claude Code session file where Claude keeps it for ``cwd``."""
    folder = home / ".claude" / "projects" / project_key(str(cwd))
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (name or os.path.basename(source))
    data = open(source, "rb").read().splitlines(keepends=True)
    with open(target, "wb") as fh:
        fh.writelines(data if lines is None else data[:lines])
    return str(target)


def grow(path, source=SESSION, start=0, end=None):
    data = open(source, "rb").read().splitlines(keepends=True)
    with open(path, "ab") as fh:
        fh.writelines(data[start:end])


@pytest.fixture
def env(home):
    return {"HOME": str(home)}


@pytest.fixture
def repo(project):
    porcelain.init(str(project))
    return Repository.discover(str(project))


def user_state(project):
    """What opal must never touch: the user's HEAD, branches, index and working tree."""
    return (
        git("rev-parse", "HEAD", cwd=str(project)).stdout,
        git("for-each-ref", "refs/heads", "refs/tags", cwd=str(project)).stdout,
        git("status", "--porcelain", "--ignored", cwd=str(project)).stdout,
        open(os.path.join(str(project), ".git", "index"), "rb").read(),
    )


def test_init_then_commit_records_the_session(project, home, env):
    before = user_state(project)
    porcelain.init(str(project))
    repo = Repository.discover(str(project))
    place(home, project)
    res = porcelain.commit(repo, env, str(project), message="plan agreed")
    assert res.turns > 0 and res.new_turns == res.turns and not res.incremental
    assert res.session.id == "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
    assert user_state(project) == before
    refs = git("for-each-ref", "--format=%(refname)", "refs/opal", cwd=str(project)).stdout.split()
    assert refs == ["refs/opal/heads/main", "refs/opal/oplog"]
    assert git("fsck", "--full", "--strict", cwd=str(project)).returncode == 0
    assert git("log", "-1", "--format=%s", "refs/opal/heads/main", cwd=str(project)).stdout.strip() == "plan agreed"


def test_commit_is_incremental_and_a_no_op_when_nothing_is_new(repo, project, home, env):
    path = place(home, project, lines=30)
    first = porcelain.commit(repo, env, str(project))
    with pytest.raises(NothingToDoError):
        porcelain.commit(repo, env, str(project))
    grow(path, start=30)
    second = porcelain.commit(repo, env, str(project))
    assert second.incremental
    assert second.parent == first.oid
    assert second.new_items == 53 - 30
    # Same result as importing the whole file at once.
    whole = porcelain.load_state(repo, second.oid)
    records = __import__("opalgit.agents.claude.adapter", fromlist=["x"]).ClaudeAdapter().read(path).records
    fresh = list(_items(records))
    stored = [si.item for si in sequence.iter_items(repo.store, whole.root)]
    assert [it.id for it in stored] == [it.id for it in fresh]
    # Built again knowing where the state keeps its payloads, the leaves come out
    # the same objects (what lets a re-import or a fork share storage), except the
    # one the append extended: stored as a delta of its old self, it is rebuilt whole.
    seq = sequence
    known = seq.payload_locations(repo.store, whole.root)
    packer = __import__("opalgit.history.payloads", fromlist=["x"]).Packer(repo.store, known=known)
    other = seq.build(repo.store, fresh, packer)
    assert packer.packs_written == 0
    old_leaves = seq.leaves(repo.store, whole.root)
    new_leaves = seq.leaves(repo.store, other)
    deltas = [a for a in old_leaves if seq.leaf_base(repo.store, a.oid) is not None]
    assert deltas, "the append stored its reopened leaf as a delta"
    assert len(old_leaves) == len(new_leaves)
    for a, b in zip(old_leaves, new_leaves):
        assert a.oid == b.oid or a in deltas
        assert [it.id for it in seq.read_leaf(repo.store, a.oid)] == [it.id for it in seq.read_leaf(repo.store, b.oid)]
    # An append rewrites a handful of objects, not the history.
    assert second.objects_written - first.objects_written < 20


def test_fsck_checks_that_a_delta_leaf_starts_with_its_base(repo, project, home, env):
    from opalgit import codec
    from opalgit.history import sequence
    from opalgit.porcelain import fsck

    path = place(home, project, lines=30)
    porcelain.commit(repo, env, str(project))
    grow(path, start=30)
    second = porcelain.commit(repo, env, str(project))
    assert fsck.fsck(repo).ok
    st = porcelain.load_state(repo, second.oid)
    leaves = sequence.leaves(repo.store, st.root)
    delta = next(leaf for leaf in leaves if sequence.leaf_base(repo.store, leaf.oid) is not None)
    # Forge a delta leaf whose base is a leaf it does not start with: it decodes, but
    # its base link would keep records alive that the state does not hold.
    stranger = sequence.build(repo.store, [sequence.Item(b"\x01" * 32, b"\x90", {"role": "meta"})])
    body = sequence._leaf_parts(repo.store, delta.oid)[0]
    zc = codec.zstandard.ZstdCompressor(dict_data=codec.raw_dict(sequence._leaf_parts(repo.store, stranger.oid)[0]))
    blob = repo.store.write_blob(sequence.MAGIC_DELTA + b"\x01" + zc.compress(body))
    entries = [e for e in repo.store.read_tree(delta.oid) if e[0] not in ("leaf", "base")]
    forged = repo.store.write_tree(entries + [("leaf", False, blob), ("base", True, stranger.oid)])
    assert [it.id for it in sequence.read_leaf(repo.store, forged)] == [
        it.id for it in sequence.read_leaf(repo.store, delta.oid)
    ]
    report = fsck.FsckReport()
    fsck._Checker(repo, report).leaf(forged, "test")
    assert any("does not start with" in p for p in report.problems), report.problems


def test_truncated_last_line_is_left_for_the_next_commit(repo, project, home, env):
    path = place(home, project, lines=10)
    line11 = open(SESSION, "rb").read().splitlines(keepends=True)[10]
    with open(path, "ab") as fh:
        fh.write(line11[:40])  # the agent is still writing this line
    res = porcelain.commit(repo, env, str(project))
    assert any("incomplete last line" in w for w in res.warnings)
    assert res.items == 10
    with open(path, "ab") as fh:
        fh.write(line11[40:])
    res2 = porcelain.commit(repo, env, str(project))
    assert res2.items == 11 and res2.incremental


def test_bad_input_is_one_clear_error_and_no_commit(repo, project, tmp_path, env):
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    with pytest.raises(InputError) as err:
        porcelain.commit(repo, env, str(project), file=str(junk), agent="claude")
    assert str(junk) in str(err.value)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(InputError):
        porcelain.commit(repo, env, str(project), file=str(empty), agent="claude")
    with pytest.raises(InputError):
        porcelain.commit(repo, env, str(project), file=str(junk))
    assert repo.refs.branches() == {}


def test_no_session_is_a_clear_error(repo, project, env):
    with pytest.raises(SessionNotFoundError) as err:
        porcelain.commit(repo, env, str(project))
    assert "opal" not in (err.value.hint or "") or "--file" in (err.value.hint or "")


def test_several_sessions_newest_wins_and_is_said(repo, project, home, env):
    a = place(home, project, name="aaaaaaaa-0000-0000-0000-000000000000.jsonl")
    place(home, project, source=os.path.join(FIXTURES, "claude", "claude-code-viewer", "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"))
    os.utime(a, (1_000_000, 1_000_000))
    res = porcelain.commit(repo, env, str(project))
    assert res.session.id == "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
    assert res.notes and "2 sessions found" in res.notes[0]
    # --session picks another one; the branch then tracks it.
    res2 = porcelain.commit(repo, env, str(project), session="aaaaaaaa-0000-0000-0000-000000000000")
    assert res2.session.id != res.session.id
    assert porcelain.tracked_session(repo, "main") == ("claude", res2.session.id)


def test_revisions_and_log(repo, project, home, env):
    path = place(home, project, lines=10)
    c1 = porcelain.commit(repo, env, str(project), message="one").oid
    grow(path, start=10, end=20)
    c2 = porcelain.commit(repo, env, str(project), message="two").oid
    grow(path, start=20)
    c3 = porcelain.commit(repo, env, str(project), message="three").oid
    assert porcelain.resolve(repo, "HEAD").oid == c3
    assert porcelain.resolve(repo, "@").oid == c3
    assert porcelain.resolve(repo, "main~2").oid == c1
    assert porcelain.resolve(repo, "HEAD^").oid == c2
    assert porcelain.resolve(repo, "HEAD^^").oid == c1
    assert porcelain.resolve(repo, c2.hex()[:7]).oid == c2
    assert porcelain.resolve(repo, "HEAD:3").turn == 3
    for bad in ("nope", "HEAD~9", "HEAD:0", "HEAD:x", "zzzz", "HEAD^2"):
        with pytest.raises(RevisionError):
            porcelain.resolve(repo, bad)
    assert [i.oid for i in porcelain.log(repo)] == [c3, c2, c1]
    assert [i.oid for i in porcelain.log(repo, limit=2)] == [c3, c2]
    info = porcelain.commit_info(repo, c2)
    assert info.to_json()["new_records"] == [10, 20]
    turns = porcelain.turns(repo)
    assert [t.number for t in turns] == list(range(1, len(turns) + 1))
    shown = porcelain.show_turn(repo, c3, -1)
    assert shown.number == len(turns)
    assert shown.normal.role in ("user", "assistant", "tool", "system")
    json.dumps(shown.to_json())


def test_branch_switch_rewind_undo(repo, project, home, env):
    path = place(home, project, lines=25)
    porcelain.commit(repo, env, str(project), message="first")
    grow(path, start=25)
    head = porcelain.commit(repo, env, str(project), message="second").oid
    total = porcelain.load_state(repo, head).header.turns

    porcelain.branch_create(repo, "try-sqlite", "HEAD~1")
    at_turn = porcelain.branch_create(repo, "retry", "HEAD:5")
    assert at_turn.turns == 5
    with pytest.raises(UsageError):
        porcelain.branch_create(repo, "retry")
    with pytest.raises(UsageError):
        porcelain.branch_create(repo, "bad name")
    porcelain.switch(repo, "try-sqlite")
    assert porcelain.current_branch(repo) == "try-sqlite"
    with pytest.raises(NothingToDoError):
        porcelain.switch(repo, "try-sqlite")
    porcelain.switch(repo, "main")

    res = porcelain.rewind(repo, 3)
    assert res.turns == total - 3 and res.dropped_turns == 3
    rewound = porcelain.resolve(repo, "HEAD").oid
    assert porcelain.load_state(repo, rewound).commit.parents == (head,)
    res = porcelain.rewind(repo, to="HEAD:4")
    assert res.turns == 4
    with pytest.raises(UsageError):
        porcelain.rewind(repo, 99)

    porcelain.undo(repo)  # the rewind --to
    assert porcelain.resolve(repo, "HEAD").oid == rewound
    porcelain.undo(repo)  # the rewind 3
    assert porcelain.resolve(repo, "HEAD").oid == head
    porcelain.undo(repo)  # the switch back to main
    assert porcelain.current_branch(repo) == "try-sqlite"
    ops = porcelain.op_log(repo)
    assert [o.command for o in ops[:3]] == ["undo", "undo", "undo"]
    # Undo an undo: redo.
    porcelain.undo(repo, ops[1].oid.hex()[:10])
    assert porcelain.resolve(repo, "main").oid == rewound

    porcelain.switch(repo, "main")
    deleted = porcelain.branch_delete(repo, "retry")
    assert "retry" not in repo.refs.branches()
    porcelain.undo(repo)
    assert repo.refs.branches()["retry"] == deleted
    assert git("fsck", "--full", "--strict", cwd=str(project)).returncode == 0


def test_rewound_branch_does_not_silently_reimport_the_live_session(repo, project, home, env):
    place(home, project)
    porcelain.commit(repo, env, str(project))
    porcelain.rewind(repo, 2)
    with pytest.raises(UsageError) as err:
        porcelain.commit(repo, env, str(project))
    assert "--session" in err.value.hint


def test_gc_keeps_everything_and_undo_still_works(repo, project, home, env):
    path = place(home, project, lines=30)
    porcelain.commit(repo, env, str(project))
    grow(path, start=30)
    porcelain.commit(repo, env, str(project))
    porcelain.rewind(repo, 5)
    git("gc", "--prune=now", "--aggressive", "-q", cwd=str(project))
    assert git("fsck", "--full", "--strict", "--no-dangling", cwd=str(project)).stdout == ""
    repo = Repository.discover(str(project))
    porcelain.undo(repo)  # the rewound-away state survived gc through the op log
    st = porcelain.load_state(repo, porcelain.resolve(repo, "HEAD").oid)
    for n in range(1, st.header.turns + 1):
        porcelain.show_turn(repo, st.oid, n)


def test_linked_worktrees_share_branches_but_not_the_current_branch(repo, project, home, env, tmp_path):
    place(home, project)
    porcelain.commit(repo, env, str(project))
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", str(wt), cwd=str(project))
    other = Repository.discover(str(wt))
    assert other.common_dir == repo.common_dir
    assert set(other.refs.branches()) == {"main"}
    porcelain.branch_create(other, "wt-branch")
    porcelain.switch(other, "wt-branch")
    assert porcelain.current_branch(other) == "wt-branch"
    assert porcelain.current_branch(repo) == "main"
    assert git("fsck", "--full", cwd=str(project)).returncode == 0


def test_outside_git_init_makes_its_own_store(tmp_path, home, env):
    folder = tmp_path / "plain"
    folder.mkdir()
    with pytest.raises(NotARepositoryError):
        Repository.discover(str(folder))
    res = porcelain.init(str(folder))
    assert res.own_store and os.path.isdir(folder / ".opal")
    repo = Repository.discover(str(folder))
    place(home, folder)
    porcelain.commit(repo, env, str(folder))
    assert git("--git-dir", str(folder / ".opal"), "fsck", "--full").returncode == 0


def test_a_git_repo_without_opal_init_says_what_to_run(project):
    with pytest.raises(NotARepositoryError) as err:
        Repository.discover(str(project))
    assert "opal init" in err.value.hint


def test_the_770kb_fixture_imports_and_survives_a_clone(repo, project, home, env, tmp_path):
    big = os.path.join(FIXTURES, "claude", "claude-code-viewer", "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
    place(home, project, source=big)
    res = porcelain.commit(repo, env, str(project))
    assert res.items == 438
    clone = tmp_path / "clone"
    git("clone", "-q", "--bare", str(project), str(clone))
    git("fetch", "-q", str(project), "refs/opal/*:refs/opal/*", cwd=str(clone))
    assert git("fsck", "--full", "--strict", cwd=str(clone)).returncode == 0
    shutil.rmtree(clone)


def test_file_commits_are_incremental_whatever_the_file_is_called(repo, project, tmp_path, env):
    rollout = os.path.join(FIXTURES, "codex", "generated")
    src = os.path.join(rollout, sorted(os.listdir(rollout))[0])
    lines = open(src, "rb").read().splitlines(keepends=True)
    f = tmp_path / "renamed-session.jsonl"
    f.write_bytes(b"".join(lines[:20]))
    porcelain.commit(repo, env, str(project), file=str(f), agent="codex")
    with open(f, "ab") as fh:
        fh.writelines(lines[20:])
    res = porcelain.commit(repo, env, str(project), file=str(f), agent="codex")
    assert res.incremental and res.new_items == len(lines) - 20


def test_log_never_shows_a_parent_before_its_children(repo, project, home, env):
    """Commits made within one second sort by id; the log must still be topological."""
    path = place(home, project, lines=10)
    porcelain.commit(repo, env, str(project))
    for i, end in enumerate((20, 30, 40)):
        porcelain.branch_create(repo, f"b{i}")
        grow(path, start=10 + 10 * i, end=end)
        porcelain.commit(repo, env, str(project))
    infos = porcelain.log(repo, ["main", "b0", "b1", "b2"])
    position = {info.oid: n for n, info in enumerate(infos)}
    for info in infos:
        for p in info.parents:
            assert position[p] > position[info.oid]
    assert len(infos) == len(set(position)) == 4


def test_show_of_a_claude_turn_reads_one_record_and_says_what_a_replay_says(repo, project, home, env, monkeypatch):
    # A real 1.0.95 session with a continuation copy (a repeated uuid, bookkeeping on
    # replay): showing a turn alone must give what the whole replay gives, without
    # decoding every record of the state (that made 'opal show main:N' 37 s at 100k turns).
    from opalgit.history import states
    from opalgit.porcelain.states import normals_of

    place(home, project, source=os.path.join(FIXTURES, "claude", "real", "vibecodingtracker", "claude_code.jsonl"))
    oid = porcelain.commit(repo, env, str(project), message="real").oid
    st = states.load_state(repo, oid)
    replayed = normals_of([states.turn_of(repo, si.item)
                           for si in states.sequence.iter_items(repo.store, st.root)])
    calls = []
    real_turn_of = porcelain.turn_of
    # Patched where show_turn looks it up (the module that defines show_turn).
    monkeypatch.setitem(porcelain.show_turn.__globals__, "turn_of", lambda r, item: calls.append(1) or real_turn_of(r, item))
    copies = 0
    for n in range(1, st.header.turns + 1):
        calls.clear()
        shown = porcelain.show_turn(repo, oid, n)
        assert len(calls) == 1, f"turn {n} decoded {len(calls)} records"
        want = replayed[shown.index]
        if want.label == "continuation-copy":
            # Numbered as a turn by its stored summary (as 'opal log --turns' lists it),
            # so shown as the record it is, not as the bookkeeping a replay calls it.
            assert (shown.normal.role, shown.normal.blocks) == ("tool", want.blocks), n
            copies += 1
        else:
            assert shown.normal == want, n
    assert copies == 1

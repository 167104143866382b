"""diff, merge, drop, squash, trim and stats on real repositories."""

from __future__ import annotations

import os

import pytest

from opalgit import porcelain
from opalgit.errors import NothingToDoError, OpalError, UsageError
from opalgit.history import sequence
from opalgit.porcelain import diff as compare
from opalgit.porcelain import drop as cleanup
from opalgit.porcelain import merge as merging
from opalgit.porcelain.squash import squash
from opalgit.porcelain.trim import trim
from opalgit.store.repo import Repository
from tests.conftest import FIXTURES, git
from tests.unit.test_porcelain import grow, place

DEMO = os.path.join(os.path.dirname(FIXTURES), "..", "opalgit", "demo_data", "claude-session.jsonl")
BIG = os.path.join(FIXTURES, "claude", "claude-code-viewer", "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")


@pytest.fixture
def repo(project, home):
    porcelain.init(str(project))
    r = Repository.discover(str(project))
    r.env = {"HOME": str(home)}
    return r


def commit_demo(repo, project, home, lines=None):
    place(home, project, source=DEMO, lines=lines)
    return porcelain.commit(repo, repo.env, str(project))


def pairs_ok(repo, rev="HEAD"):
    """Every tool call in the state has a result and every result has its call."""
    st = porcelain.load_state(repo, porcelain.resolve(repo, rev).oid)
    calls, results = [], []
    for si in sequence.iter_items(repo.store, st.root):
        calls += si.item.summary.get("calls", [])
        results += si.item.summary.get("results", [])
    return set(results) <= set(calls)


def test_drop_keeps_pairs_saves_tokens_and_undoes(repo, project, home):
    commit_demo(repo, project, home)
    turns = porcelain.turns(repo)
    call = next(t for t in turns if t.summary.get("kind") == "tool_call")
    res = cleanup.drop(repo, f"HEAD:{call.number}..HEAD:{call.number}")
    assert res.notes and "widened" in res.notes[0]  # the result went with its call
    assert res.turns_after == len(turns) - 2 and res.saved > 0
    assert pairs_ok(repo)
    before = porcelain.resolve(repo, "HEAD~1").oid
    porcelain.undo(repo)
    assert porcelain.resolve(repo, "HEAD").oid == before
    with pytest.raises(UsageError):
        cleanup.drop(repo, "HEAD:9..HEAD:3")
    with pytest.raises(OpalError):
        cleanup.drop(repo, "HEAD~1:2..HEAD~1:3")  # not the current state


def test_squash_replaces_a_stretch_with_one_summary_turn(repo, project, home):
    commit_demo(repo, project, home)
    n = len(porcelain.turns(repo))
    res = squash(repo, "HEAD:5..HEAD:12", "read the code and ran the tests; two failed")
    assert res.turns_after < n - 6
    st = porcelain.load_state(repo, res.oid)
    shown = porcelain.show_turn(repo, res.oid, res.range[0])
    assert "squashed" in shown.normal.blocks[0]["text"] and shown.agent == "opal"
    assert "read the code" in shown.normal.blocks[0]["text"]
    assert st.header.turns == res.turns_after and pairs_ok(repo)


def test_trim_shrinks_huge_outputs_to_a_marked_excerpt(repo, project, home):
    place(home, project, source=BIG)
    porcelain.commit(repo, repo.env, str(project))
    before = compare.stats(repo)
    res = trim(repo, 1000)
    assert res.changed > 0 and res.saved > 0
    after = compare.stats(repo)
    assert after.turns == before.turns and after.tokens < before.tokens
    big = max(porcelain.turns(repo), key=lambda t: t.summary.get("chars", 0) if t.summary.get("kind") == "tool_result" else 0)
    shown = porcelain.show_turn(repo, porcelain.resolve(repo, "HEAD").oid, big.number)
    text = str(shown.normal.blocks)
    assert "characters of this tool output were trimmed" in text
    with pytest.raises(NothingToDoError):
        trim(repo, 10_000_000)


def test_stats_by_kind_and_biggest(repo, project, home):
    commit_demo(repo, project, home)
    s = compare.stats(repo, top=3)
    assert s.turns == len(porcelain.turns(repo)) and s.tool_calls > 0
    assert len(s.biggest) == 3 and s.biggest[0]["tokens"] >= s.biggest[1]["tokens"]
    assert "Bash" in s.by_tool


def test_diff_of_branches_and_working_state(repo, project, home):
    path = place(home, project, source=DEMO, lines=30)
    porcelain.commit(repo, repo.env, str(project))
    porcelain.branch_create(repo, "side")
    grow(path, source=DEMO, start=30)
    porcelain.commit(repo, repo.env, str(project))
    d = compare.diff(repo, "side", "main")
    assert d.stat["turns_added"] > 0 and d.stat["turns_removed"] == 0
    assert all(e.side == "+" for e in d.entries)
    assert d.shared_turns == porcelain.load_state(repo, porcelain.resolve(repo, "side").oid).header.turns
    # A trimmed or squashed turn shows as removed/changed with a text diff.
    cleanup.drop(repo, "HEAD:3..HEAD:3")
    d2 = compare.diff(repo, "HEAD~1", "HEAD")
    assert d2.stat["turns_removed"] == 1 and d2.stat["turns_added"] == 0
    # One argument: against the working state, which includes uncommitted turns.
    d3 = compare.diff(repo, "side", env=repo.env)
    assert d3.b.endswith("(working state)")
    assert compare.diff(repo, "main", "main").entries == []


def test_merge_fast_forward_appends_and_conflicts(repo, project, home):
    path = place(home, project, source=DEMO, lines=20)
    porcelain.commit(repo, repo.env, str(project))
    porcelain.branch_create(repo, "side")
    grow(path, source=DEMO, start=20, end=35)
    porcelain.commit(repo, repo.env, str(project))
    # side is an ancestor of main: merging main into side fast-forwards.
    porcelain.switch(repo, "side")
    ff = merging.merge(repo, "main")
    assert ff.kind == "fast-forward"
    with pytest.raises(NothingToDoError):
        merging.merge(repo, "main")
    # Diverge: side drops a turn, main squashes another region -> a merge commit.
    porcelain.switch(repo, "main")
    porcelain.branch_create(repo, "other", "HEAD~1")
    cleanup.drop(repo, "HEAD:2..HEAD:2")
    porcelain.switch(repo, "other")
    squash(repo, "HEAD:4..HEAD:5", "summary on other")
    # main's drop would take a turn of other's away: said, and only with force.
    with pytest.raises(UsageError, match="would leave out 1 of other's turns"):
        merging.merge(repo, "main")
    res = merging.merge(repo, "main", force=True)
    assert res.kind == "merged" and res.removed == 1, res
    commit = porcelain.load_state(repo, res.oid)
    assert len(commit.commit.parents) == 2 and pairs_ok(repo)
    # Conflicting edits of the same turn stop the merge; status lists it; --continue finishes.
    porcelain.branch_create(repo, "c1")
    porcelain.branch_create(repo, "c2")
    porcelain.switch(repo, "c1")
    squash(repo, "HEAD:1..HEAD:1", "version one")
    porcelain.switch(repo, "c2")
    squash(repo, "HEAD:1..HEAD:1", "version two")
    stopped = merging.merge(repo, "c1")
    assert stopped.kind == "conflicts" and stopped.conflicts
    assert merging.in_progress(repo)["name"] == "c1"
    with pytest.raises(UsageError):
        merging.merge(repo, "c1")
    done = merging.merge(repo, continuing=True, choices={c.index: "theirs" for c in stopped.conflicts})
    assert done.kind == "merged" and merging.in_progress(repo) is None
    shown = porcelain.show_turn(repo, done.oid, 1)
    assert "version one" in shown.normal.blocks[0]["text"]
    # --abort forgets a stopped merge.
    porcelain.undo(repo)
    stopped = merging.merge(repo, "c1")
    assert merging.abort(repo) == "c1" and merging.in_progress(repo) is None
    assert git("fsck", "--full", "--strict", cwd=str(project)).returncode == 0


def test_merge_of_parallel_appends_has_a_marker_and_both_parents(repo, project, home, tmp_path):
    path = place(home, project, source=DEMO, lines=20)
    porcelain.commit(repo, repo.env, str(project))
    porcelain.branch_create(repo, "side")
    grow(path, source=DEMO, start=20, end=30)
    porcelain.commit(repo, repo.env, str(project))
    # On side, record a different continuation (the rest of the demo session).
    # A different continuation of the same first 20 records: the records after line 35,
    # re-parented onto the last record of line 20 (as if the agent had gone another way).
    import json

    other = tmp_path / "other.jsonl"
    data = open(DEMO, "rb").read().splitlines(keepends=True)
    last_uuid = next(json.loads(l)["uuid"] for l in reversed(data[:20]) if b'"uuid"' in l)
    rest = [json.loads(l) for l in data[35:]]
    first = next(r for r in rest if "parentUuid" in r)
    first["parentUuid"] = last_uuid
    other.write_bytes(b"".join(data[:20]) + b"".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for r in rest))
    porcelain.switch(repo, "side")
    porcelain.commit(repo, repo.env, str(project), file=str(other))
    porcelain.switch(repo, "main")
    main_turns = porcelain.load_state(repo, porcelain.resolve(repo, "main").oid).header.turns
    res = merging.merge(repo, "side")
    assert res.kind == "merged" and res.added_from_theirs > 0
    st = porcelain.load_state(repo, res.oid)
    marker = porcelain.show_turn(repo, res.oid, main_turns + 1)
    assert marker.agent == "opal" and "was merged into main" in marker.normal.blocks[0]["text"]
    assert st.header.turns == main_turns + 1 + res.added_from_theirs
    assert pairs_ok(repo)


def test_merge_with_unrelated_history_says_what_to_do(repo, project, home, tmp_path):
    commit_demo(repo, project, home)
    lone = porcelain.commit  # noqa: F841
    porcelain.switch(repo, "fresh", create=True)
    # Make an unrelated branch by rewinding to nothing and committing another file.
    res = porcelain.rewind(repo, porcelain.load_state(repo, porcelain.resolve(repo, "HEAD").oid).header.turns)
    assert res.turns == 0
    with pytest.raises(NothingToDoError):
        merging.merge(repo, "main")  # main is the base of fresh: already contains it

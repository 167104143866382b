"""Bugs the workflow machine (tests/workflows/machine.py) found, each replayed as the
plain sequence hypothesis shrank it to, on real session files and real repositories."""

from __future__ import annotations

import pytest

from opalgit import porcelain
from opalgit.errors import NothingToDoError
from opalgit.porcelain import export as exporting
from opalgit.porcelain.drop import drop
from opalgit.porcelain.trim import trim
from opalgit.store.repo import Repository
from tests.conftest import git
from tests.workflows.sessions import CLAUDE_SOURCES, Agent, read_views


@pytest.fixture
def setup(tmp_path, monkeypatch):
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    git("init", "-q", str(project))
    porcelain.init(str(project))
    agent = Agent(str(home), str(project))
    return agent, Repository.discover(str(project)), {"HOME": str(home)}, str(project)


def test_a_second_trim_at_the_same_size_writes_no_commit(setup):
    # Found as: trim(over=100), trim(over=400), trim(over=400), trim(over=100). The
    # last trim cut the excerpt the first one left again (its marker made it longer
    # than the size), counted it as trimmed and wrote a commit: at first one that
    # changed no turn; once an excerpt kept less, one that cut the excerpt again and
    # lost what its marker said. An excerpt's own marker does not count now.
    agent, repo, env, project = setup
    live = agent.new_claude("parallel")
    porcelain.commit(repo, env, project, file=live.path)
    first = trim(repo, 100)
    assert first.changed
    for over in (400, 100):
        with pytest.raises(NothingToDoError):
            trim(repo, over)
    assert porcelain.branch_head(repo, "main") == first.oid


def test_a_rewind_inside_claude_makes_one_fork_not_one_per_parallel_result(setup):
    # Found as: agent_rewinds_inside_claude(back=1), commit. The turn after the fork
    # point ends with parallel tool calls, each result hanging under its own call;
    # the result that is no reply's ancestor (a dead end in the uuid tree, which
    # Claude Code reattaches to its line) became a fork branch of its own, holding
    # the line without its final reply.
    agent, repo, env, project = setup
    live = agent.new_claude("parallel")  # the client's own file: turn 2 has two calls at once
    agent.fork(live, 1)  # a new prompt under turn 1's reply, as Claude's rewind writes it
    views = read_views("claude", live.path)
    assert [v.name_hint is None for v in views] == [True, False]
    res = porcelain.commit(repo, env, project, file=live.path)
    assert res.forks == [f"main-{views[1].name_hint}"]
    old_line = porcelain.turns(repo, res.forks[0])
    assert old_line[-1].summary["kind"] == "message"  # the reply that ends turn 2
    assert len(old_line) == len(read_views("claude", CLAUDE_SOURCES["parallel"])[0].turns)


def test_committing_an_untouched_codex_export_is_nothing_to_do(setup):
    # Found as: commit_a_session(codex), export(), commit_what_opal_picks(cli). The
    # commit of the export nobody continued recorded "16 new turns (16 in all)": the
    # same 16 turns under new ids, in place of the branch's own.
    agent, repo, env, project = setup
    rollout = agent.new_codex()
    first = porcelain.commit(repo, env, project, file=rollout.path)
    out = exporting.export(repo, env, to="codex")
    with pytest.raises(NothingToDoError):
        porcelain.commit(repo, env, project, file=out.files[0])
    assert porcelain.branch_head(repo, "main") == first.oid


def test_undo_after_a_redo_undoes_the_redone_operation(setup):
    # Found as: commit, undo, redo (undo of the undo), undo. The last undo skipped the
    # redone commit and went for the one before it, whose branch had moved since:
    # "main has changed since operation ...", and nothing undone.
    agent, repo, env, project = setup
    live = agent.new_claude("parallel")
    first = porcelain.commit(repo, env, project, file=live.path).oid
    agent.grow(live)
    second = porcelain.commit(repo, env, project, file=live.path).oid
    undo = porcelain.undo(repo)
    assert porcelain.branch_head(repo, "main") == first
    porcelain.undo(repo, undo.oid.hex())  # the redo
    assert porcelain.branch_head(repo, "main") == second
    porcelain.undo(repo)
    assert porcelain.branch_head(repo, "main") == first


def test_a_deleted_fork_branch_stays_deleted_while_the_session_only_grows(setup):
    # Found as: agent_rewinds_inside_claude, commit_a_session(claude) (the whole file
    # read: a fork branch), delete_a_branch(main-fork-...), commit_a_session(claude)
    # (shrunk by hand from a sequence with trims, a Codex session, push, pull and
    # fetch, none of which mattered). The model expected the last commit to write the
    # fork branch again, with an empty commit on main; opal rightly said "nothing to
    # commit": a commit of an unchanged session is a no-op, and a commit that only
    # reads what the agent appended (to the line Claude resumes) leaves the other
    # lines' branches as they are, deleted ones too. The model was wrong, not opal.
    agent, repo, env, project = setup
    live = agent.new_claude("parallel")
    porcelain.commit(repo, env, project, file=live.path)
    agent.grow(live, 2)
    agent.fork(live, 1)
    res = porcelain.commit(repo, env, project, file=live.path)
    [fork] = res.forks
    porcelain.branch_delete(repo, fork)
    with pytest.raises(NothingToDoError):
        porcelain.commit(repo, env, project, file=live.path)
    assert porcelain.branch_head(repo, "main") == res.oid
    agent.grow(live, 1)
    grown = porcelain.commit(repo, env, project, file=live.path)
    assert grown.forks == [] and porcelain.branch_head(repo, fork) is None
    assert len(porcelain.turns(repo, grown.oid.hex())) == len(read_views("claude", live.path)[0].turns)


def test_the_model_expects_nothing_of_an_unchanged_session_whose_fork_branch_was_deleted():
    # The same sequence through the machine's own rules and properties: its model
    # expected a commit (the fork branch back, an empty commit on main) where opal
    # has nothing to do.
    from tests.workflows.machine import Workflows

    m = Workflows()
    try:
        def check():
            m.branches_are_what_the_model_says()
            m.each_branch_tracks_the_session_the_model_says()
            m.no_turn_is_lost()

        m.agent.grow(m.live, 2)
        m.agent.fork(m.live, 1)
        m._commit(m.live, explicit=True, how="api")
        check()
        fork = next(k for k in m.m.branches if k != "main")
        code, out, err = m.opal("branch", "-d", fork)
        assert code == 0, err
        del m.m.branches[fork]
        m.m.tracked.pop(fork, None)
        m._record("branch", m.m.copy())
        check()
        m._commit(m.live, explicit=True, how="api")
        check()
        m.agent.grow(m.live, 1)
        m._commit(m.live, explicit=True, how="api")
        check()
    finally:
        m.teardown()


def test_a_whole_file_read_leaves_an_unchanged_fork_branch_where_it_is(setup):
    # Found while shrinking the sequence above: after the fork branch is made, the
    # agent goes on on the line Claude resumes, each turn ending in a last-prompt line;
    # a commit that reads the whole file again (the branch rewound first) wrote the fork
    # branch anew, no turn changed: its line had taken in every last-prompt of the
    # file, those written on the other line after it was left too.
    agent, repo, env, project = setup
    live = agent.new_claude("parallel")
    porcelain.commit(repo, env, project, file=live.path)
    agent.grow(live, 2)
    agent.fork(live, 1)
    [fork] = porcelain.commit(repo, env, project, file=live.path).forks
    at = porcelain.branch_head(repo, fork)
    before = read_views("claude", live.path)[1]
    agent.grow(live, 1)
    after = read_views("claude", live.path)[1]
    assert [it.id for it in after.items] == [it.id for it in before.items]
    porcelain.rewind(repo, 1)
    res = porcelain.commit(repo, env, project, file=live.path)  # detached: the whole file again
    assert res.forks == [] and porcelain.branch_head(repo, fork) == at


def test_an_untouched_export_that_closes_a_dangling_call_is_nothing_to_commit(setup):
    # Found as: export, export, rewind(13), drop(HEAD:1..HEAD:1), export ×4,
    # commit_what_opal_picks(cli). The rewind ends the branch on a tool call without
    # its result; the drop leaves a state whose records are the file's lines one for
    # one, so its export's checkpoint counts them. The export writes those records,
    # then an error result it makes up for the open call (Claude Code needs every call
    # answered) and a last-prompt. The model took that result for a turn the agent
    # added and expected a commit; opal rightly said "nothing to commit: ... no new
    # turns since the export": the file is still exactly what the export wrote. The
    # model was wrong, not opal. Once the agent adds a turn, the made-up result is
    # recorded with it, after the state's own records.
    import json

    import opalgit.porcelain.checkpoints as checkpoints
    from tests.workflows.sessions import Session

    agent, repo, env, project = setup
    live = agent.new_claude("parallel")
    porcelain.commit(repo, env, project, file=live.path)
    porcelain.rewind(repo, len(porcelain.turns(repo, "HEAD")) - 3)
    drop(repo, "HEAD:1..HEAD:1")
    state = porcelain.turns(repo, "HEAD")
    assert [t.summary["kind"] for t in state] == ["message", "tool_call"]
    head = porcelain.branch_head(repo, "main")
    out = exporting.export(repo, env, to="claude")
    path = out.files[0]
    cp = checkpoints.load(repo.opal_dir, "claude", path)
    assert cp.records  # one for one: the file begins with the state's records
    with open(path, encoding="utf-8") as fh:
        after = [json.loads(line) for line in fh][cp.records:]
    assert [rec["type"] for rec in after] == ["user", "last-prompt"]
    assert after[0]["message"]["content"][0]["is_error"] is True
    [view] = read_views("claude", path)
    assert len(view.turns) == len(state) + 1  # the made-up result reads as a turn
    with pytest.raises(NothingToDoError, match="no new turns since the export"):
        porcelain.commit(repo, env, project, file=path)
    assert porcelain.branch_head(repo, "main") == head

    exported = Session("claude", out.session_id, path)
    agent.adopt_claude(exported)
    agent.grow(exported, 1)
    [view] = read_views("claude", path)
    res = porcelain.commit(repo, env, project, file=path)
    got = [t.id for t in porcelain.turns(repo, res.oid.hex())]
    assert got == [t.id for t in state] + [it.id for it in view.items[cp.records:] if it.is_turn]


def test_the_model_expects_nothing_of_an_untouched_export_that_closes_a_dangling_call():
    # The same sequence through the machine's own rules and properties (the draws
    # hypothesis made, given in order): its model expected the commit to record the
    # error result the export made up, where opal has nothing to do.
    from tests.workflows.machine import Workflows

    class Draws:
        def __init__(self, *values):
            self.values = list(values)

        def draw(self, strategy, label=None):
            return self.values.pop(0)

    m = Workflows()
    try:
        def check():
            m.branches_are_what_the_model_says()
            m.each_branch_tracks_the_session_the_model_says()
            m.no_turn_is_lost()

        m.export()
        m.rewind(Draws(len(m.cur.turns) - 3))
        m.drop(Draws(1, 1))
        assert len(m.cur.turns) == 2
        check()
        m.export()
        check()
        before = m.cur.oid
        m.commit_what_opal_picks("cli")
        check()
        assert m.cur.oid == before
        exported = m.sessions[-1]
        m.agent.grow(exported, 1)
        m.commit_what_opal_picks("cli")
        check()
        assert m.cur.oid != before
    finally:
        m.teardown()

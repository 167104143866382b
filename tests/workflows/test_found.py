"""Bugs the workflow machine (tests/workflows/machine.py) found, each replayed as the
plain sequence hypothesis shrank it to, on real session files and real repositories."""

from __future__ import annotations

import pytest

from opalgit import cleanup, porcelain
from opalgit.errors import NothingToDoError
from opalgit.repo import Repository
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
    first = cleanup.trim(repo, 100)
    assert first.changed
    for over in (400, 100):
        with pytest.raises(NothingToDoError):
            cleanup.trim(repo, over)
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

"""``opal log --graph`` draws what ``git log --graph`` draws on the same refs.

Two tiers: a history built with opal itself (forks, merges, several branches) read
through the CLI, and a property over random DAGs (octopus merges, clock skew, equal
dates, many tips) built as real git commits and drawn by :mod:`opalgit.history.graph`, against
the real git binary each time. State refs live under refs/opal/, so git is given them
explicitly.
"""

from __future__ import annotations

import re

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opalgit import porcelain
from opalgit.cli.render import when
from opalgit.history import graph
from opalgit.porcelain import drop as cleanup
from opalgit.porcelain import merge as merging
from opalgit.store.repo import Repository
from tests.conftest import git, opal
from tests.unit.test_editing import DEMO
from tests.unit.test_porcelain import place

_HEX = re.compile(r"\b([0-9a-f]{40})\b")


def git_graph(cwd: str, refs: list[str], *extra: str) -> list[str]:
    """git's graph column with each commit's 7-character id after it."""
    out = git("log", "--graph", "--format=%H", *extra, *refs, cwd=cwd).stdout
    return [_HEX.sub(lambda m: m.group(1)[:7], line) for line in out.splitlines()]


def opal_graph(cwd, revs: list[str], *extra: str) -> list[str]:
    """opal's graph column with each commit's id: the subject and branch labels cut."""
    r = opal("log", "--graph", "--oneline", *extra, *revs, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return [re.sub(r"^([^0-9a-f]*[0-9a-f]{7}).*$", r"\1", line) for line in r.stdout.splitlines()]


@pytest.fixture
def history(project, home):
    """main, a and b forked from one commit, merged both ways, with more work after."""
    porcelain.init(str(project))
    repo = Repository.discover(str(project))
    place(home, project, source=DEMO)
    env = {"HOME": str(home)}
    porcelain.commit(repo, env, str(project), message="start")

    def drop(turn: int) -> None:
        cleanup.drop(repo, f"HEAD:{turn}..HEAD:{turn}")

    porcelain.branch_create(repo, "a")
    porcelain.branch_create(repo, "b")
    drop(2)
    porcelain.switch(repo, "a")
    drop(8)
    drop(9)
    porcelain.switch(repo, "b")
    drop(14)
    porcelain.switch(repo, "main")
    assert merging.merge(repo, "a", force=True).kind == "merged"
    drop(3)
    porcelain.switch(repo, "b")
    drop(15)
    assert merging.merge(repo, "main", force=True).kind == "merged"
    porcelain.switch(repo, "a")
    drop(10)
    porcelain.switch(repo, "main")
    return repo, str(project)


def test_a_history_built_with_opal_draws_as_git_draws_it(history):
    repo, cwd = history
    refs = ["refs/opal/heads/main", "refs/opal/heads/a", "refs/opal/heads/b"]
    merges = [i for i in porcelain.log(repo, ["main", "a", "b"]) if len(i.parents) > 1]
    assert len(merges) == 2
    got = opal_graph(cwd, ["main", "a", "b"])
    assert got == git_graph(cwd, refs)
    assert any(line.rstrip() == "|/" for line in got)  # git's fork, not "| /"
    assert opal_graph(cwd, ["main", "a", "b"], "--date-order") == git_graph(cwd, refs, "--date-order")
    assert opal_graph(cwd, ["b"]) == git_graph(cwd, ["refs/opal/heads/b"])
    # -n cuts the list, not the lanes: those to parents not shown go on, as in git.
    assert opal_graph(cwd, ["main", "a", "b"], "-n", "3") == git_graph(cwd, refs, "-n", "3")
    assert opal_graph(cwd, []) == git_graph(cwd, ["refs/opal/heads/main"])


def test_the_long_format_keeps_the_lanes_between_lines_as_git_does(history):
    repo, cwd = history
    r = opal("log", "--graph", "main", "a", "b", cwd=cwd)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    want = git("log", "--graph", "--format=medium", "refs/opal/heads/main", "refs/opal/heads/a", "refs/opal/heads/b", cwd=cwd).stdout.splitlines()
    # opal's long format has a Session line and branch labels git has not (git decorates
    # only on a terminal); the rest is git's, line for line, lanes and all.
    mine = [re.sub(r"^(.*commit [0-9a-f]{40}) \(.*\)$", r"\1", line) for line in lines if "Session: " not in line]
    assert mine == want
    assert lines[-1].strip() == "start"  # nothing after the last commit, as in git


# ------------------------------------------------------------------------------ random DAGs


@st.composite
def dags(draw):
    """Commits in creation order: each has up to 4 parents among the earlier ones and a
    date that is mostly increasing, sometimes equal and sometimes skewed; some tips."""
    n = draw(st.integers(min_value=1, max_value=24))
    commits = []
    for i in range(n):
        k = 0 if i == 0 else draw(st.sampled_from([0, 1, 1, 1, 1, 2, 2, 3, 4]))
        parents = draw(st.lists(st.integers(0, i - 1), min_size=min(k, i), max_size=min(k, i), unique=True)) if i else []
        date = draw(st.one_of(st.just(i), st.just(i // 3), st.integers(0, n)))
        commits.append((parents, date))
    tips = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5))
    return commits, tips


@given(dags(), st.sampled_from(["topo", "date"]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_dags_draw_as_git_draws_them(tmp_path_factory, dag, mode):
    commits, tips = dag
    path = tmp_path_factory.mktemp("dag")
    repo = pygit2.init_repository(str(path), bare=True)
    tree = repo.TreeBuilder().write()
    oids: list[bytes] = []
    parents: dict[bytes, tuple[bytes, ...]] = {}
    dates: dict[bytes, int] = {}
    for n, (ps, date) in enumerate(commits):
        sig = pygit2.Signature("t", "t@example.com", 1_700_000_000 + date, 0)
        pp = tuple(oids[p] for p in ps)
        oid = repo.create_commit(None, sig, sig, f"c{n}", tree, [pygit2.Oid(raw=p) for p in pp]).raw
        oids.append(oid)
        parents[oid] = pp
        dates[oid] = 1_700_000_000 + date
    refs = []
    for n, t in enumerate(tips):
        repo.references.create(f"refs/opal/heads/t{n}", pygit2.Oid(raw=oids[t]))
        refs.append(f"refs/opal/heads/t{n}")
    extra = ["--date-order"] if mode == "date" else []
    ordered = graph.order([oids[t] for t in tips], parents, dates, mode)
    short = graph.draw([(o, parents[o], [o.hex()[:7]]) for o in ordered])
    assert short == git_graph(str(path), refs, *extra)
    # The long format: a lane-carrying line between commits, lanes on every text line.
    def medium(o: bytes) -> list[str]:
        merge = ["Merge: " + " ".join(p.hex()[:7] for p in parents[o])] if len(parents[o]) > 1 else []
        return [f"commit {o.hex()}", *merge, "Author: t <t@example.com>", f"Date:   {when(dates[o])}", "", f"    c{oids.index(o)}"]

    long = graph.draw([(o, parents[o], medium(o)) for o in ordered], separated=True)
    assert long == git("log", "--graph", "--format=medium", *extra, *refs, cwd=str(path)).stdout.splitlines()

"""The graph and budget pages' data (opalgit/web/graph.py, budget.py): the lane layout's
properties over random DAGs, the graph of a real repository with a fork, a merge, a
rewind and a remote branch, and budget cuts that save what running them saves."""

from __future__ import annotations

import json
import os
import shutil

from hypothesis import given, settings
from hypothesis import strategies as st

from opalgit.store.repo import Repository
from opalgit.web.budget import BARS, _bars, budget, cuts
from opalgit.web.graph import graph, lay_out
from tests.conftest import ROOT, git, opal

DEMO = os.path.join(ROOT, "opalgit", "demo_data", "claude-session.jsonl")


@st.composite
def dags(draw):
    """Commits 0..n-1, each with 0-3 parents among the earlier ones; rows newest first."""
    n = draw(st.integers(1, 40))
    parents: dict[bytes, list[bytes]] = {}
    for i in range(n):
        oid = i.to_bytes(2, "big")
        k = draw(st.integers(0, min(3, i)))
        ps = draw(st.lists(st.integers(0, i - 1), min_size=k, max_size=k, unique=True)) if i else []
        parents[oid] = [p.to_bytes(2, "big") for p in ps]
    rows = sorted(parents, reverse=True)  # a child always after... its parents are older: children first
    return rows, parents


@settings(max_examples=300)
@given(dags())
def test_every_link_is_one_edge_from_child_to_parent_through_no_other_node(dag):
    rows, parents = dag
    col_of, edges, columns = lay_out(rows, parents)
    row_of = {o: r for r, o in enumerate(rows)}
    cells = {(col_of[o], row_of[o]): o for o in rows}
    assert len(cells) == len(rows)  # no two commits share a cell
    assert all(0 <= c < columns for c in col_of.values())
    want = sorted((c.hex(), p.hex()) for c, ps in parents.items() for p in ps)
    assert sorted((e["from"], e["to"]) for e in edges) == want
    for e in edges:
        child, parent = bytes.fromhex(e["from"]), bytes.fromhex(e["to"])
        pts = e["points"]
        assert pts[0] == [col_of[child], row_of[child]]
        assert pts[-1] == [col_of[parent], row_of[parent]]
        assert [r for _, r in pts] == sorted(r for _, r in pts)  # always downwards
        # Every row the edge passes (between its ends) is in one lane, and no commit sits there.
        for (c0, r0), (c1, r1) in zip(pts, pts[1:]):
            if c0 == c1:
                for r in range(r0 + 1, r1):
                    assert (c0, r) not in cells, (e, cells[(c0, r)])
        for c, r in pts[1:-1]:
            assert (c, r) not in cells
        assert e["merge"] == (parents[child].index(parent) > 0)


def test_a_line_of_history_stays_in_one_lane():
    rows = [bytes([i]) for i in (3, 2, 1, 0)]
    parents = {bytes([3]): [bytes([2])], bytes([2]): [bytes([1])], bytes([1]): [bytes([0])], bytes([0]): []}
    col_of, edges, columns = lay_out(rows, parents)
    assert set(col_of.values()) == {0} and columns == 1
    assert all(len(e["points"]) == 2 for e in edges)


def _demo_repo(project):
    """The conftest ``project`` (a real git repository with a code commit), with opal
    set up and the bundled demo session committed on main."""
    for args in (("init",), ("commit", "--file", DEMO, "-m", "whole session")):
        r = opal(*args, cwd=project)
        assert r.returncode == 0, r.stderr
    return project


def _run(p, *args):
    r = opal(*args, cwd=p)
    assert r.returncode == 0, (args, r.stderr)
    return r


def test_graph_of_a_fork_a_merge_a_rewind_and_a_remote_branch(tmp_path, project, home):
    p = _demo_repo(project)
    _run(p, "switch", "-c", "fork", "HEAD:20")          # a fork at turn 20
    _run(p, "commit", "--file", DEMO, "-m", "again")     # nothing new, or a commit: either is drawn
    _run(p, "switch", "main")
    _run(p, "rewind", "3")                               # a rewind is a commit of 38 turns...
    _run(p, "undo")                                      # ...that the undo leaves to the op log alone
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(remote))
    git("remote", "add", "origin", str(remote), cwd=str(p))
    _run(p, "push", "origin", "main")
    _run(p, "fetch", "origin")
    repo = Repository.discover(str(p))
    g = graph(repo)
    ids = {c["id"] for c in g["commits"]}
    heads = {b: c["id"] for c in g["commits"] for b in c["branches"]}
    assert set(heads) == {"main", "fork"}
    assert any("origin/main" in c["remotes"] for c in g["commits"])
    abandoned = [c for c in g["commits"] if c["abandoned"]]
    assert len(abandoned) == 1 and abandoned[0]["turns"] == 38
    # One edge per parent link, every commit's parents drawn.
    assert len(g["edges"]) == sum(len(c["parents"]) for c in g["commits"])
    assert all(set(c["parents"]) <= ids for c in g["commits"])
    # The same commits, in the same order, as opal log --topo-order draws for the live ones.
    live = [c["id"] for c in g["commits"] if not c["abandoned"]]
    out = _run(p, "log", "--format=%H", "--topo-order", "main", "fork", "origin/main").stdout.split()
    assert live == out


def test_graph_counts_a_merge_as_two_edges(project, home):
    p = _demo_repo(project)
    _run(p, "switch", "-c", "side")
    _run(p, "drop", "HEAD:2..HEAD:3")   # a change of its own on each line, far apart
    _run(p, "switch", "main")
    _run(p, "rewind", "2")
    r = opal("merge", "side", "--strategy", "both", "--force", "-m", "merge side", cwd=p)
    assert r.returncode == 0, r.stderr
    g = graph(Repository.discover(str(p)))
    merges = [c for c in g["commits"] if len(c["parents"]) == 2]
    assert len(merges) == 1
    assert sum(1 for e in g["edges"] if e["merge"]) == 1


def test_bars_group_a_long_state_into_at_most_the_limit():
    rows = [(i % 7, "user" if i % 2 else "assistant", None) for i in range(100_003)]
    bars = _bars(rows)
    assert len(bars) <= BARS
    assert bars[0]["first"] == 1 and bars[-1]["last"] == len(rows)
    assert sum(b["tokens"] for b in bars) == sum(t for t, _, _ in rows)
    assert all(a["last"] + 1 == b["first"] for a, b in zip(bars, bars[1:]))


def test_budget_agrees_with_opal_stats_and_its_cuts_save_what_the_commands_save(tmp_path, project, home):
    p = _demo_repo(project)
    b = budget(Repository.discover(str(p)), "HEAD")
    s = json.loads(_run(p, "stats", "--json").stdout)
    assert b["tokens"] == s["tokens_estimate"] and b["turns"] == s["turns"]
    assert {t["tool"]: t["tokens"] for t in b["by_tool"]} == {k: v["tokens"] for k, v in s["by_tool"].items()}
    assert [x["turn"] for x in b["biggest"]] == [x["turn"] for x in s["biggest"]]
    assert sum(x["tokens"] for x in b["bars"]) == b["tokens"]
    c = cuts(Repository.discover(str(p)), "HEAD")
    assert c["tokens"] == b["tokens"] and c["id"] == b["id"]
    assert c["cuts"], "the demo state has exchanges to drop"
    for cut in c["cuts"]:
        copy = tmp_path / f"copy-{abs(hash(cut['command']))}"
        shutil.copytree(p, copy)
        args = cut["command"].split()[1:]
        r = opal(*args, "--json", cwd=copy)
        assert r.returncode == 0, (cut, r.stderr)
        res = json.loads(r.stdout)
        if args[0] == "export":
            assert res["dry_run"] is False
            te = res["tokens_estimate"]
            assert te["before"] - te["after"] == cut["saves"]
        else:
            saved = res["tokens_estimate"]["before"] - res["tokens_estimate"]["after"] \
                if "tokens_estimate" in res else res["tokens_saved"]
            assert saved == cut["saves"], (cut, res)

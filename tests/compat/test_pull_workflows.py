"""`opal pull` between two real clones of a real bare remote (file://), on a real
Claude Code session, through the real command line: a pull moves a branch the way
`opal merge` fast-forwards one (issue 19, part A). It never leaves out turns of the
branch without saying how many and asking for --force; the branch then tracks the
session the pulled state was recorded from, so the next `opal commit` cannot record
the old local session over the pulled turns; and `opal undo` restores both."""

from __future__ import annotations

import json
import os

import pytest

from opalgit.store.repo import Repository
from tests.compat.test_remote import clone, make_remote
from tests.conftest import FIXTURES, git, opal
from tests.unit.test_export import continue_export
from tests.unit.test_porcelain import place

# A real Claude Code session (vibecodingtracker's fixture): 84 turns, 87 records.
REAL = os.path.join(FIXTURES, "claude", "real", "vibecodingtracker", "claude_code.jsonl")
REAL_ID = "e9f146fa-3b20-48d0-9be4-d99ca901cae4"


@pytest.fixture
def team(tmp_path, home):
    """Two teammates, ``a`` and ``b``, each with a clone of one bare remote over file://
    and a HOME of their own (their agents' sessions are on their own machines), and
    ``run(who, *args)``."""
    bare = make_remote(tmp_path)
    paths = {who: clone(tmp_path, bare, who, "file://" + bare) for who in ("a", "b")}
    homes = {who: tmp_path / f"home-{who}" for who in paths}
    for h in homes.values():
        h.mkdir()

    def run(who: str, *args: str, ok: bool = True):
        r = opal(*args, cwd=paths[who], env={"HOME": str(homes[who]), "GIT_TERMINAL_PROMPT": "0"})
        if ok:
            assert r.returncode == 0, (who, args, r.stdout, r.stderr)
        return r

    run.paths = paths  # type: ignore[attr-defined]
    run.homes = homes  # type: ignore[attr-defined]
    run.bare = bare  # type: ignore[attr-defined]
    return run


def turns(run, who: str, rev: str = "HEAD") -> int:
    return len(json.loads(run(who, "log", "--turns", "--json", rev).stdout)["turns"])


def head(run, who: str) -> str:
    return git("rev-parse", "refs/opal/heads/main", cwd=str(run.paths[who])).stdout.strip()


def tracked(run, who: str, branch: str = "main") -> str | None:
    return Repository.discover(str(run.paths[who])).config_get(f"branch.{branch}.session") or None


def extend_by_export(run, home, who: str, added: int = 3) -> str:
    """``who`` continues its main on this machine: export, the agent appends, commit.
    Returns the exported session's id."""
    out = json.loads(run(who, "export", "--to", "claude", "--json").stdout)
    continue_export(out["files"][0], out["session_id"], turns=added)
    run(who, "commit")
    return out["session_id"]


# ------------------------------------------------------------------ 1. a rewound remote


def test_pulling_a_rewound_branch_is_refused_saying_how_many_turns(team, home):
    place(team.homes["a"], team.paths["a"], source=REAL, name=f"{REAL_ID}.jsonl")
    team("a", "commit")
    team("a", "push")
    team("b", "pull")
    assert turns(team, "b") == 84 and tracked(team, "b") == f"claude:{REAL_ID}"
    before = head(team, "b")

    # The teammate rewinds 5 turns and pushes: a child commit, a fast-forward by commits.
    team("a", "rewind", "5")
    team("a", "push")
    r = team("b", "pull", ok=False)
    assert r.returncode != 0, r.stdout
    assert "would leave out 5 of main's 84 turns" in r.stderr and "origin/main has 79" in r.stderr, r.stderr
    assert "opal pull --force origin main" in r.stderr and "nothing was changed" in r.stderr
    assert "Traceback" not in r.stderr
    assert head(team, "b") == before and turns(team, "b") == 84

    # Asked for, it is done, said, and undoable.
    r = team("b", "pull", "--force")
    assert "left out 5 turns of main" in r.stderr, r.stderr
    assert turns(team, "b") == 79 and head(team, "b") == head(team, "a")
    out = team("b", "undo")
    assert "pull" in out.stdout + out.stderr
    assert head(team, "b") == before and turns(team, "b") == 84
    assert git("fsck", "--strict", cwd=str(team.paths["b"])).returncode == 0


def test_pull_json_says_what_was_left_out_and_the_session_tracked(team, home):
    place(team.homes["a"], team.paths["a"], source=REAL, name=f"{REAL_ID}.jsonl")
    team("a", "commit")
    team("a", "push")
    res = json.loads(team("b", "pull", "--json").stdout)
    assert res["status"] == "created" and res["turns_left_out"] == 0
    assert res["session"] == f"claude:{REAL_ID}" and res["session_changed"] is True
    team("a", "rewind", "2")
    team("a", "push")
    res = json.loads(team("b", "pull", "--force", "--json").stdout)
    assert (res["status"], res["turns_left_out"], res["session_changed"]) == ("fast-forward", 2, False)


# ------------------------------------------------------------------ 2. the tracked session follows


@pytest.fixture
def pulled(team, home):
    """B records its session and pushes; A pulls it, continues it through an export
    (a new session, 3 turns more) and pushes; B pulls that. Returns (B's head before
    the last pull, the id of A's export)."""
    place(team.homes["b"], team.paths["b"], source=REAL, name=f"{REAL_ID}.jsonl")
    team("b", "commit")
    team("b", "push")
    team("a", "pull")
    exported = extend_by_export(team, home, "a")
    assert tracked(team, "a") == f"claude:{exported}"
    grown = turns(team, "a")
    assert grown > 84
    team("a", "push")
    before = head(team, "b")
    r = team("b", "pull")
    assert "Fast-forward main" in r.stdout
    assert head(team, "b") == head(team, "a") and turns(team, "b") == grown
    team.pull_said = r.stderr  # type: ignore[attr-defined]
    return before, exported


def test_commit_after_a_pull_does_not_record_the_old_session_over_the_pulled_turns(team, home, pulled):
    _before, exported = pulled
    grown = turns(team, "b")
    # The branch follows the pulled state's session, not B's own (unchanged) one, and says so.
    assert tracked(team, "b") == f"claude:{exported}"
    assert f"now tracks claude session {exported}" in team.pull_said, team.pull_said
    pulled_head = head(team, "b")
    r = team("b", "commit", ok=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert f"tracks claude session {exported}" in r.stderr and "not among this folder's sessions" in r.stderr, r.stderr
    assert "opal export --to claude" in r.stderr and f"opal commit --session {REAL_ID}" in r.stderr
    assert head(team, "b") == pulled_head and turns(team, "b") == grown
    assert git("fsck", "--strict", cwd=str(team.paths["b"])).returncode == 0


# ------------------------------------------------------------------ 3. undo restores both


def test_undo_of_a_pull_restores_head_and_tracked_session(team, home, pulled):
    before, exported = pulled
    after = head(team, "b")
    team("b", "undo")
    assert head(team, "b") == before and tracked(team, "b") == f"claude:{REAL_ID}"
    assert turns(team, "b") == 84
    # B's own session is tracked again: committing it has nothing new.
    r = team("b", "commit", ok=False)
    assert "nothing to commit" in (r.stdout + r.stderr), (r.stdout, r.stderr)
    assert head(team, "b") == before
    # And the undo of the undo takes the pull again, both of its moves.
    undo_op = Repository.discover(str(team.paths["b"])).refs.get("refs/opal/oplog")
    team("b", "undo", undo_op.hex())
    assert head(team, "b") == after and tracked(team, "b") == f"claude:{exported}"

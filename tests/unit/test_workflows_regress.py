"""Workflows that chained commands used to get wrong (issue 19, part A), each driven
through the real ``opal`` command line on a real Claude Code session, and the rule
behind them: every operation records what it changes of a branch (its head, the
session it tracks; a state's header says whether it is detached), and ``opal undo``
(and the undo of that undo) restores it exactly."""

from __future__ import annotations

import json
import os

import pytest

import opalgit.porcelain.checkpoints as checkpoints
from opalgit import porcelain
from opalgit.agents.claude.files import project_key
from opalgit.history import oplog
from opalgit.store.repo import Repository
from tests.conftest import FIXTURES, git, opal
from tests.unit.test_export import continue_export
from tests.unit.test_porcelain import grow, place

# A real Claude Code session (vibecodingtracker's fixture): 84 turns, 87 records.
REAL = os.path.join(FIXTURES, "claude", "real", "vibecodingtracker", "claude_code.jsonl")
REAL_ID = "e9f146fa-3b20-48d0-9be4-d99ca901cae4"
# A second session of the same folder (a generated one, with a session id of its own).
OTHER = os.path.join(FIXTURES, "claude", "generated", "7c83c109-bd8e-4995-ab21-c69c5256ec0d.jsonl")
OTHER_ID = "7c83c109-bd8e-4995-ab21-c69c5256ec0d"


@pytest.fixture
def run(project, home):
    """``opal ARGS`` in the project, with this test's HOME; checks the exit code."""

    def go(*args: str, ok: bool = True):
        r = opal(*args, cwd=project, env={"HOME": str(home)})
        if ok:
            assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    go("init")
    # Named as Claude Code names it: by its session id.
    place(home, project, source=REAL, name=f"{REAL_ID}.jsonl")
    return go


def turns(run, rev: str = "HEAD") -> int:
    return len(json.loads(run("log", "--turns", "--json", rev).stdout)["turns"])


def branch_of(run, name: str) -> dict | None:
    for b in json.loads(run("branch", "--json").stdout)["branches"]:
        if b["name"] == name:
            return b
    return None


def tracked(project, branch: str = "main") -> str | None:
    return Repository.discover(str(project)).config_get(f"branch.{branch}.session") or None


def newest_session_file(home) -> str:
    files = [os.path.join(d, n) for d, _, ns in os.walk(home / ".claude" / "projects") for n in ns if n.endswith(".jsonl")]
    return max(files, key=os.path.getmtime)


# ------------------------------------------------------------------ 1. rewound turns stay out


def test_export_rewind_commit_does_not_bring_the_rewound_turns_back(run, project, home):
    run("commit")
    assert turns(run) == 84
    run("export", "--to", "claude")
    exported = newest_session_file(home)
    run("rewind", "5")
    # The branch tracks the exported session, which still holds all 84 turns.
    r = run("commit", ok=False)
    assert r.returncode != 0 and "rewound away from session" in r.stderr, r.stderr
    assert "opal commit --session" in r.stderr and "opal export --to claude" in r.stderr
    assert turns(run) == 79
    # The way on: export the rewound state, let the agent continue it, commit that.
    out = json.loads(run("export", "--to", "claude", "--json").stdout)
    continue_export(out["files"][0], out["session_id"], turns=3)
    res = json.loads(run("commit", "--json").stdout)
    assert res["session"]["id"] == out["session_id"] and 79 < turns(run) <= 79 + 4
    # Named explicitly, the old export is recorded as it is: the user asked.
    run("commit", "--file", exported)
    assert turns(run) == 84
    assert exported != out["files"][0]


def test_a_branch_at_a_turn_refuses_the_session_opal_exported_from_another_state(run, project, home):
    run("commit")
    run("export", "--to", "claude")  # newest file of the folder: the export of the 84 turns
    run("branch", "retry", "HEAD:12")
    run("switch", "retry")
    # retry tracks no session: the commit would pick the newest, the 84-turn export.
    r = run("commit", ok=False)
    assert r.returncode != 0 and "written by 'opal export'" in r.stderr, r.stderr
    assert turns(run) == 12


def test_a_hooked_git_commit_after_a_rewind_leaves_the_rewound_turns_out(run, project, home):
    run("commit")
    run("hooks", "install")
    run("export", "--to", "claude")
    run("rewind", "5")
    (project / "code.py").write_text("print('hi')\n")
    git("add", "code.py", cwd=str(project))
    p = git("commit", "-q", "-m", "code after the rewind", cwd=str(project))
    assert "rewound away from session" in p.stderr and "git is not affected" in p.stderr, p.stderr
    assert git("log", "-1", "--format=%s", cwd=str(project)).stdout.strip() == "code after the rewind"
    assert turns(run) == 79


# ------------------------------------------------------------------ 2. merge never moves back


def test_merging_a_branch_at_an_earlier_turn_never_moves_the_branch_back(run, project, home):
    run("commit")
    run("branch", "retry", "HEAD:12")
    r = run("merge", "retry")
    assert "already up to date" in r.stdout and "12 turns of retry and 72 more" in r.stdout, r.stdout
    assert turns(run) == 84
    # Asked for, it moves back (and says so), and undo takes it back.
    forced = json.loads(run("merge", "--force", "retry", "--json").stdout)
    assert forced["result"] == "fast-forward" and forced["turns_left_out"] == 72
    assert turns(run) == 12
    run("undo")
    assert turns(run) == 84
    # The retry grows from turn 12: merging it keeps main's 84 turns and adds its own.
    run("switch", "retry")
    out = json.loads(run("export", "--to", "claude", "--json").stdout)
    continue_export(out["files"][0], out["session_id"], turns=3)
    run("commit")
    retry_turns = turns(run)
    assert 12 < retry_turns <= 16
    run("switch", "main")
    merged = json.loads(run("merge", "retry", "--json").stdout)
    assert merged["result"] == "merged" and merged["turns_left_out"] == 0
    assert turns(run) >= 84 + (retry_turns - 12), merged  # main's turns, a marker, retry's new ones


def test_a_fast_forward_that_would_leave_turns_out_needs_force(run, project, home):
    run("commit")
    run("switch", "-c", "shorter")
    run("rewind", "5")
    out = json.loads(run("export", "--to", "claude", "--json").stdout)
    continue_export(out["files"][0], out["session_id"], turns=3)
    run("commit")
    run("switch", "main")
    # shorter descends from main by commits, and lacks 5 of its turns.
    r = run("merge", "shorter", ok=False)
    assert r.returncode != 0 and "would leave out 5 of main's 84 turns" in r.stderr, r.stderr
    assert "opal merge --force shorter" in r.stderr
    assert turns(run) == 84
    res = json.loads(run("merge", "--force", "shorter", "--json").stdout)
    assert res["result"] == "fast-forward" and res["turns_left_out"] == 5
    # main now continues the session shorter continues.
    assert tracked(project) == f"claude:{out['session_id']}"


# ------------------------------------------------------------------ 3. undo restores the tracked session


def test_undo_of_a_commit_that_switched_sessions_tracks_the_first_again(run, project, home):
    run("commit")
    second = place(home, project, source=OTHER)
    run("commit", "--session", OTHER_ID)
    assert tracked(project) == f"claude:{OTHER_ID}"
    run("undo")
    assert tracked(project) == f"claude:{REAL_ID}"
    # The next commit records the first session again: nothing new in it.
    os.utime(second)  # the second session is the newest of the folder
    r = run("commit")
    assert r.stdout.startswith("nothing to commit") and REAL_ID in r.stdout, r.stdout


def test_undo_of_a_branch_delete_gives_the_branch_its_session_back(run, project, home):
    run("commit")
    run("switch", "-c", "side")
    place(home, project, source=OTHER)
    run("commit", "--session", OTHER_ID)
    run("switch", "main")
    run("branch", "-d", "side")
    assert tracked(project, "side") is None
    run("undo")
    assert tracked(project, "side") == f"claude:{OTHER_ID}"
    run("switch", "side")
    r = run("commit")
    assert r.stdout.startswith("nothing to commit") and OTHER_ID in r.stdout, r.stdout


def test_undo_of_an_export_gives_the_branch_its_session_back(run, project, home):
    run("commit")
    run("export", "--to", "claude")
    assert tracked(project) != f"claude:{REAL_ID}"
    ops = json.loads(run("op", "log", "--json", "-n", "1").stdout)["operations"]
    assert ops[0]["command"] == "export" and ops[0]["sessions"]["main"][0] == f"claude:{REAL_ID}"
    run("undo")
    assert tracked(project) == f"claude:{REAL_ID}"


# ------------------------------------------------------------------ 5. an export nobody continued


def test_commit_right_after_an_export_makes_no_empty_commit(run, project, home):
    run("commit")
    before = run("log", "--oneline").stdout
    run("export", "--to", "claude")
    for _ in range(2):
        r = run("commit")
        assert r.stdout.startswith("nothing to commit") and "no new turns since the export" in r.stdout, r.stdout
        assert len(r.stdout.strip().splitlines()) == 1
    assert run("log", "--oneline").stdout == before
    # Once the agent adds a turn, it is a commit of that turn alone.
    continue_export(newest_session_file(home), tracked(project).split(":", 1)[1], turns=2)
    res = json.loads(run("commit", "--json").stdout)
    assert res["new_turns"] == 2 and res["turns"] == 86


# ------------------------------------------------------------------ the rule: undo restores a branch exactly


def snapshot(project) -> dict:
    """Everything that says what each branch is: head, tracked session, detached."""
    repo = Repository.discover(str(project))
    out = {"current": repo.refs.head_branch()}
    names = set(repo.refs.branches())
    cfg = open(os.path.join(repo.opal_dir, "config")).read()
    names.update(line.split('"')[1] for line in cfg.splitlines() if line.startswith("[branch "))
    for name in sorted(names):
        head = repo.refs.branches().get(name)
        st = porcelain.load_state(repo, head) if head else None
        out[name] = (
            head,
            repo.config_get(f"branch.{name}.session") or None,
            st.header.extra.get("detached") if st else None,
        )
    return out


SPLIT = 60  # lines of REAL committed first: main then grows, so that merges have two sides


def _setup_two_branches(run, home, project):
    """main with REAL (84 turns, committed in two steps), side recording OTHER."""
    place(home, project, source=REAL, name=f"{REAL_ID}.jsonl", lines=SPLIT)
    run("commit")
    run("switch", "-c", "side")
    place(home, project, source=OTHER)
    run("commit", "--session", OTHER_ID)
    run("switch", "main")
    grow(os.path.join(home, ".claude", "projects", project_key(str(project)), f"{REAL_ID}.jsonl"),
         source=REAL, start=SPLIT)
    run("commit")


def _retry_grown(run, home):
    """A branch at turn 12 of main, which the agent continued for three turns."""
    run("branch", "retry", "HEAD:12")
    run("switch", "retry")
    out = json.loads(run("export", "--to", "claude", "--json").stdout)
    continue_export(out["files"][0], out["session_id"], turns=3)
    run("commit")
    run("switch", "main")


# name: (what comes first, the one operation undone and redone)
OPERATIONS = {
    "commit switching session": (None, lambda run: run("commit", "--session", OTHER_ID)),
    "export": (None, lambda run: run("export", "--to", "claude")),
    "export of another branch": (None, lambda run: run("export", "side", "--to", "claude")),
    "rewind": (None, lambda run: run("rewind", "3")),
    "branch at a turn": (None, lambda run: run("branch", "retry", "HEAD:12")),
    "branch -f over a tracking branch": (None, lambda run: run("branch", "-f", "side", "HEAD:10")),
    "branch -d": (None, lambda run: run("branch", "-d", "side")),
    "switch": (None, lambda run: run("switch", "side")),
    "merge of a branch at a turn": (_retry_grown, lambda run: run("merge", "retry")),
    "merge with a conflict": (None, lambda run: run("merge", "side", "--strategy", "both")),
    # early is where side started (main's first commit), and side holds none of its turns.
    "fast-forward merge, forced": (lambda run, home: (run("branch", "early", "HEAD~1"), run("switch", "early")),
                                   lambda run: run("merge", "side", "--force")),
}


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_undo_and_redo_restore_every_branch_exactly(run, project, home, name):
    _setup_two_branches(run, home, project)
    prepare, operation = OPERATIONS[name]
    if prepare is not None:
        prepare(run, home)
    before = snapshot(project)
    operation(run)
    after = snapshot(project)
    assert after != before, name
    run("undo")
    assert snapshot(project) == before, name
    undo_id = json.loads(run("op", "log", "--json", "-n", "1").stdout)["operations"][0]["id"]
    run("undo", undo_id)  # the undo of the undo: redo
    assert snapshot(project) == after, name


def test_an_undone_export_keeps_its_checkpoint_and_still_guards_a_rewind(run, project, home):
    """A checkpoint describes a file opal wrote, not a branch: undo leaves the file, and
    the checkpoint with it, so the file cannot bring rewound turns back later."""
    run("commit")
    run("export", "--to", "claude")
    exported = newest_session_file(home)
    run("undo")
    repo = Repository.discover(str(project))
    cp = checkpoints.load(repo.opal_dir, "claude", exported)
    assert cp is not None and cp.records == 87
    run("branch", "retry", "HEAD:12")
    run("switch", "retry")
    r = run("commit", ok=False)  # retry tracks nothing: the newest file is the export
    assert r.returncode != 0 and "written by 'opal export'" in r.stderr, r.stderr


def test_operations_without_tracked_sessions_decode_as_before(project):
    """An op log written before operations recorded sessions reads the same, and an
    operation that changes none encodes exactly as it did."""
    op = oplog.Operation(oid=None, command="commit", description="d", time=1, user="u",
                         changes={"refs/opal/heads/main": (None, b"\x01" * 20)}, head=("main", "main"))
    data = op.encode()
    assert b"sessions" not in data
    back = oplog.Operation.decode(b"\x02" * 20, None, data)
    assert back.sessions == {} and back.changes == op.changes
    op.sessions = {"main": (None, "claude:abc"), "old": ("codex:x", None)}
    again = oplog.Operation.decode(b"\x02" * 20, None, op.encode())
    assert again.sessions == op.sessions


def test_a_whole_file_read_after_a_squash_leaves_the_unchanged_fork_branch(project, home):
    # Found by tests/workflows (seed 1): rewind 1, the agent goes on and rewinds
    # inside Claude, `opal commit` (detached: the whole file, a fork branch), the
    # agent goes on, `opal squash`, `opal commit` again. The fork's records were the
    # same, but one of its leaves was written again with its payloads in another pack
    # (another leaf oid), and states.common_prefix stopped at the first leaf whose oid
    # differed: the unchanged fork got a new commit.
    from tests.workflows.sessions import Agent

    env = {"HOME": str(home)}

    def run(*args: str):
        r = opal(*args, cwd=project, env=env)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    run("init")
    agent = Agent(str(home), str(project))
    live = agent.new_claude("parallel")
    run("commit", "--file", live.path)
    run("rewind", "1")
    agent.grow(live, 2)
    agent.fork(live, 1)
    run("commit", "--file", live.path)
    repo = Repository.discover(str(project))
    [fork] = [b for b in repo.refs.branches() if b != "main"]
    at = porcelain.branch_head(repo, fork)
    agent.grow(live, 1)
    n = turns(run)
    run("squash", f"HEAD:{n - 2}..HEAD:{n}", "-m", "tried it, it did not help")
    out = run("commit", "--file", live.path).stdout
    assert fork not in out
    assert porcelain.branch_head(Repository.discover(str(project)), fork) == at

"""The smaller repros of issue 19 (item 6), one regression test each, on real session files.

Each was found by using opal as a new user would: a count that comes out negative or
wrong, a message that claims what was not done, a commit that records nothing without a
word, a secret that a later ``git add -A`` could stage.
"""

from __future__ import annotations

import os

import pytest

from opalgit import porcelain
from opalgit.porcelain import diff as compare
from opalgit.store.repo import Repository
from tests.conftest import FIXTURES, opal
from tests.unit.test_porcelain import grow, place

# A session the real Claude Code CLI wrote (against a mock model server): 61 records, the
# last three of them bookkeeping (last-prompt, mode, ...), not turns.
CLAUDE = os.path.join(FIXTURES, "claude", "generated", "7c83c109-bd8e-4995-ab21-c69c5256ec0d.jsonl")


@pytest.fixture
def repo(project, home):
    porcelain.init(str(project))
    r = Repository.discover(str(project))
    r.env = {"HOME": str(home)}
    return r


def lines_of(path: str) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


# ------------------------------------------------------------------------------ (a) diff


def test_diff_of_states_whose_turns_are_all_equal_says_so(repo, project, home):
    """Only bookkeeping records differ: the common prefix is every turn, not the turns
    before the first differing leaf (it said "32 turns in common (23 before the first
    difference)")."""
    path = place(home, project, source=CLAUDE, lines=58)
    first = porcelain.commit(repo, repo.env, str(project))
    grow(path, source=CLAUDE, start=58)
    second = porcelain.commit(repo, repo.env, str(project))
    assert second.turns == first.turns and second.items > first.items
    res = compare.diff(repo, "HEAD~1", "HEAD")
    assert not res.entries
    assert res.common_prefix_turns == res.shared_turns == first.turns
    assert res.hidden_records == second.items - first.items
    r = opal("diff", "HEAD~1", "HEAD", cwd=project)
    assert r.returncode == 0, r.stderr
    assert f"{first.turns} turns in common; no turn differs" in r.stdout
    assert "before the first difference" not in r.stdout
    assert f"{second.items - first.items} bookkeeping records of the agent differ (--all lists them)" in r.stdout
    listed = compare.diff(repo, "HEAD~1", "HEAD", include_meta=True)
    assert len(listed.entries) == second.items - first.items and listed.common_prefix_turns == first.turns


def test_diff_prefix_counts_the_turns_before_the_first_listed_difference(repo, project, home):
    path = place(home, project, source=CLAUDE, lines=40)
    porcelain.commit(repo, repo.env, str(project))
    grow(path, source=CLAUDE, start=40)
    porcelain.commit(repo, repo.env, str(project))
    res = compare.diff(repo, "HEAD~1", "HEAD")
    first = res.entries[0]
    assert first.side == "+" and res.common_prefix_turns == first.number_b - 1 == res.shared_turns


# ------------------------------------------------------------------------------ (b) trim


def _tool_outputs(repo) -> list[str]:
    out = []
    for t in porcelain.turns(repo):
        if t.summary.get("kind") == "tool_result":
            shown = porcelain.show_turn(repo, porcelain.resolve(repo, "HEAD").oid, t.number)
            out += [b.get("output") for b in shown.normal.blocks if b.get("type") == "tool_result"]
    return [o if isinstance(o, str) else repr(o) for o in out]


def test_trim_never_grows_the_context_nor_counts_an_output_it_left(repo, project, home):
    """It said 'trim 4 tool outputs ... (saved ~-6)': a 242-character output became an
    excerpt of 200 plus its marker, and three outputs under 200 were 'trimmed' unchanged."""
    from opalgit.errors import NothingToDoError, UsageError
    from opalgit.porcelain.trim import trim

    porcelain.commit(repo, repo.env, str(project), file=CLAUDE, agent="claude")
    before = _tool_outputs(repo)
    res = trim(repo, 100)
    after = _tool_outputs(repo)
    shrunk = [(a, b) for a, b in zip(before, after) if a != b]
    assert res.changed == len(shrunk) > 0 and res.saved > 0
    assert all(len(b) < len(a) for a, b in shrunk)
    porcelain.undo(repo)
    # Keeping 90 of each: only the outputs whose excerpt and marker are shorter change.
    res = trim(repo, 100, keep=90)
    shrunk = [(a, b) for a, b in zip(before, _tool_outputs(repo)) if a != b]
    assert res.changed == len(shrunk) >= 1 and res.saved >= 0
    assert all(len(b) < len(a) for a, b in shrunk)
    porcelain.undo(repo)
    with pytest.raises(UsageError, match="not below"):
        trim(repo, 100, keep=200)
    longest = max(len(o) for o in before)
    with pytest.raises(NothingToDoError, match="would get shorter"):
        trim(repo, longest - 1, keep=longest - 2)
    r = opal("trim", "--tool-output-over", "100", "--keep", "90", cwd=project)
    assert r.returncode == 0 and "saved ~-" not in r.stdout
    assert ("trim 1 tool output:" in r.stdout) == (res.changed == 1)


# ------------------------------------------------------------------------------ (c) rewind --to

CODEX = os.path.join(FIXTURES, "codex", "generated", "rollout-2026-11-30T12-28-19-01a22c6d-7181-79e0-a047-a4ffeeaf6f75.jsonl")


def test_rewind_to_another_agents_commit_says_what_it_dropped_and_took(repo, project):
    """It printed "dropped -... turns (-20 records)": the counts were head minus result."""
    main = porcelain.commit(repo, repo.env, str(project), file=CLAUDE, agent="claude")
    porcelain.switch(repo, "cx", create=True)
    porcelain.commit(repo, repo.env, str(project), file=CODEX, agent="codex")
    porcelain.switch(repo, "main")
    res = porcelain.rewind(repo, to="cx:5")
    assert (res.dropped_turns, res.dropped_items) == (main.turns, main.items)
    assert res.taken_turns == res.turns == 5 and res.taken_items > 0
    assert res.taken_from == "codex session 01a22c6d"
    porcelain.undo(repo)
    r = opal("rewind", "--to", "cx:5", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "-" not in r.stdout.split("]", 1)[1].split("'opal undo'")[0].replace("cx:5", "")
    assert f"dropped {main.turns} turns ({main.items} records), took 5 turns" in r.stdout and "codex session 01a22c6d" in r.stdout
    # Within the branch's own line nothing is taken and the counts are the plain drop.
    porcelain.undo(repo)
    res = porcelain.rewind(repo, to="HEAD:20")
    assert (res.dropped_turns, res.taken_items, res.turns) == (main.turns - 20, 0, 20)
    r = opal("rewind", "--to", "main~1:21", cwd=project)
    assert r.returncode == 0 and "took 1 turn (1 record) from main~1:21; 21 turns remain" in r.stdout


# ------------------------------------------------------------------------------ (d) switch -c


def test_switch_c_before_the_first_commit_works_as_in_git(repo, project):
    """It failed with "branch main has no commits yet"; git's switch -c on an unborn
    branch makes the new branch current, unborn too, and the next commit starts it."""
    r = opal("switch", "-c", "feature", cwd=project)
    assert r.returncode == 0 and "Switched to a new branch feature" in r.stdout, r.stderr
    assert porcelain.current_branch(repo) == "feature" and porcelain.branch_head(repo, "feature") is None
    res = porcelain.commit(repo, repo.env, str(project), file=CLAUDE, agent="claude")
    assert res.branch == "feature"
    assert [b.name for b in porcelain.branches(repo)] == ["feature"]  # main was never born
    porcelain.undo(repo)  # the commit
    porcelain.undo(repo)  # the switch
    assert porcelain.current_branch(repo) == "main"
    # A start point other than HEAD still has to exist, as in git.
    r = opal("switch", "-c", "other", "nosuch", cwd=project)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert porcelain.current_branch(repo) == "main"


# ------------------------------------------------------------------------------ (e) a subagent's transcript

SUBAGENT_PARENT = os.path.join(FIXTURES, "claude", "generated", "structures", "subagent", "3b183628-1e17-4287-82c0-41cab87f4e3d.jsonl")
SUBAGENT = os.path.join(SUBAGENT_PARENT[: -len(".jsonl")], "subagents", "agent-a1c89676dbd6cdd5a.jsonl")
SHOWCASE = os.path.join(FIXTURES, "claude", "real", "claude-code-log", "minimal_showcase", "55550000-0000-4000-8000-000000000001")
OLD_LAYOUT = os.path.join(FIXTURES, "claude", "claude-code-viewer", "agent-test-hash-123.jsonl")


@pytest.mark.parametrize("path", [SUBAGENT, os.path.join(SHOWCASE, "subagents", "agent-showcol1.jsonl")])
def test_a_subagent_transcript_kept_by_its_parent_is_refused_naming_the_parent(repo, project, path):
    """It made "0 new turns (0 in all)" commits without a word: every record of a
    subagent's transcript is the parent session's sidechain."""
    from opalgit.errors import InputError

    with pytest.raises(InputError, match="subagent's transcript") as err:
        porcelain.commit(repo, repo.env, str(project), file=path, agent="claude")
    parent = os.path.dirname(os.path.dirname(path)) + ".jsonl"
    assert err.value.hint == f"record the parent session: opal commit --file {parent}"
    assert porcelain.branch_head(repo, "main") is None  # nothing was committed
    r = opal("commit", "--file", path, cwd=project)
    assert r.returncode == 5 and parent in r.stderr and "Traceback" not in r.stderr
    # The parent's commit stores the transcript with its side folder.
    from opalgit.history.states import side_files

    res = porcelain.commit(repo, repo.env, str(project), file=parent, agent="claude")
    assert res.turns > 0
    stored = side_files(repo, porcelain.load_state(repo, res.oid))
    assert stored["subagents/" + os.path.basename(path)] == open(path, "rb").read()


def test_a_subagent_transcript_no_session_keeps_is_recorded_and_said_to_be_one(repo, project):
    """The older layout (agent-*.jsonl beside the session) is in no side folder: it is
    recorded as it is, and the commit says what it is and why it has no turns."""
    r = opal("commit", "--file", OLD_LAYOUT, cwd=project)
    assert r.returncode == 0, r.stderr
    assert "is a subagent's transcript of Claude Code session 5c0375b4-57a5-4f26-b12d-d022ee4e51b7" in r.stderr
    assert "opal commit --file " + os.path.join(os.path.dirname(OLD_LAYOUT), "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl") in r.stderr
    # A main session is not mistaken for one.
    r = opal("commit", "--file", SUBAGENT_PARENT, cwd=project)
    assert r.returncode == 0 and "subagent's transcript" not in r.stderr


# ------------------------------------------------------------------------------ (f) resume without the agent


def _files_under(path) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)


def test_resume_checks_the_agent_is_on_path_before_writing_anything(repo, project, home, tmp_path):
    """It wrote the Codex session (and moved the branch to track it) before finding that
    codex was not on PATH."""
    import shutil

    porcelain.commit(repo, repo.env, str(project), file=CLAUDE, agent="claude")
    tracked = porcelain.tracked_session(repo, "main")
    bare = tmp_path / "bin"
    bare.mkdir()
    os.symlink(shutil.which("git"), bare / "git")  # git only: no agent on this PATH
    before = _files_under(home), _files_under(os.path.join(str(project), ".opal"))
    for agent in ("codex", "claude", "gemini"):
        r = opal("resume", "--agent", agent, cwd=project, env={"PATH": str(bare)})
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert f"{agent} is not on PATH, so it cannot be started; nothing was exported" in r.stderr
        assert "Exported" not in r.stdout
    assert (_files_under(home), _files_under(os.path.join(str(project), ".opal"))) == before
    assert porcelain.tracked_session(repo, "main") == tracked


# ------------------------------------------------------------------------------ (g) --dry-run claims


def test_a_dry_run_claims_no_registration_nor_file_it_did_not_write(repo, project, home):
    """--dry-run to Gemini said "registered the project ... in projects.json" and wrote nothing."""
    porcelain.commit(repo, repo.env, str(project), file=SUBAGENT_PARENT, agent="claude")
    registry = home / ".gemini" / "projects.json"
    r = opal("export", "--to", "gemini", "--dry-run", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "registered" not in r.stdout + r.stderr and not registry.exists()
    assert f"would update {registry}" in r.stdout
    r = opal("export", "--to", "claude", "--dry-run", cwd=project)
    assert r.returncode == 0 and "written back" not in r.stdout + r.stderr and "would write" in r.stdout
    # Written for real, each says what it did.
    r = opal("export", "--to", "gemini", cwd=project)
    assert r.returncode == 0 and f"registered the project {project}" in r.stderr and registry.exists()
    r = opal("export", "--to", "claude", cwd=project)
    assert r.returncode == 0 and "written back under" in r.stderr


# ------------------------------------------------------------------------------ (h) the vault and git

SECRETS = os.path.join(FIXTURES, "secrets", "session.jsonl")  # a session that holds 72 real-shaped secrets


def test_a_store_outside_git_is_never_staged_by_a_later_git_add(tmp_path):
    """`opal init` outside git made .opal/ (the vault with the secrets in clear, the states)
    with no .gitignore: a later `git init && git add -A` staged all of it."""
    from tests.conftest import git

    folder = tmp_path / "notes"
    folder.mkdir()
    session = tmp_path / "session.jsonl"
    lines = open(SECRETS, "rb").read().splitlines(keepends=True)
    session.write_bytes(b"".join(lines[:40]))
    assert opal("init", cwd=folder).returncode == 0
    r = opal("commit", "--file", str(session), "--agent", "claude", cwd=folder)
    assert r.returncode == 0 and "replaced by placeholders" in r.stderr, r.stderr
    vault = folder / ".opal" / "opal" / "vault" / "secrets.jsonl"
    assert vault.exists()
    (folder / "notes.md").write_text("# notes\n")
    git("init", "-q", str(folder))
    git("add", "-A", cwd=str(folder))
    assert git("diff", "--cached", "--name-only", cwd=str(folder)).stdout.split() == ["notes.md"]
    assert git("check-ignore", "-q", str(vault), cwd=str(folder), check=False).returncode == 0
    # opal goes on with its own store in the folder that is now a git repository.
    assert "new turn" in opal("log", "--oneline", cwd=folder).stdout
    # A store made before the guard: 'opal init' again adds it.
    git("rm", "-q", "--cached", "notes.md", cwd=str(folder))
    os.remove(folder / ".opal" / ".gitignore")
    os.remove(vault.parent / ".gitignore")
    assert opal("init", cwd=folder).returncode == 0
    assert (folder / ".opal" / ".gitignore").read_text().splitlines()[-1] == "*"
    # And the vault guards itself the next time a secret goes in, the store's file gone.
    os.remove(folder / ".opal" / ".gitignore")
    session.write_bytes(b"".join(lines))
    r = opal("commit", "--file", str(session), "--agent", "claude", cwd=folder)
    assert r.returncode == 0 and "replaced by placeholders" in r.stderr, r.stderr
    git("add", "-A", cwd=str(folder))
    staged = git("diff", "--cached", "--name-only", cwd=str(folder)).stdout.split()
    assert staged and not any("vault" in p for p in staged)


def test_a_squash_longer_than_its_turns_says_it_costs_tokens(repo, project):
    """The same class as trim's 'saved ~-6': a summary longer than what it replaces."""
    porcelain.commit(repo, repo.env, str(project), file=CLAUDE, agent="claude")
    r = opal("squash", "HEAD:1..HEAD:1", "-m", "a long summary " * 60, cwd=project)
    assert r.returncode == 0, r.stderr
    assert "saved ~-" not in r.stdout and "tokens more)" in r.stdout


def test_a_commit_of_only_bookkeeping_records_says_so(tmp_path):
    # A file of a Claude session before its first prompt (a summary and a snapshot)
    # is recorded as it is; the commit line names what it holds, not "0 new turns".
    import subprocess
    import sys

    project = tmp_path / "p"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    session = project / "s.jsonl"
    session.write_text(
        '{"type":"summary","summary":"A chat","leafUuid":"aaaaaaaa-1111-2222-3333-444444444444"}\n'
        '{"type":"file-history-snapshot","messageId":"m1","snapshot":{"trackedFileBackups":{}},'
        '"isSnapshotUpdate":false}\n'
    )
    opal = [sys.executable, "-m", "opalgit"]
    subprocess.run(opal + ["init"], cwd=project, env=env, check=True, capture_output=True)
    p = subprocess.run(opal + ["commit", "--agent", "claude", "--file", str(session)], cwd=project, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "0 new turns and 2 bookkeeping records (0 in all)" in p.stdout
    assert "holds no turn of conversation yet" in p.stderr

"""The habits of a git user (issue 19, part B): revisions, options, branch and switch
spellings, help, hints, the pager, colour and counted nouns.

Real ``opal`` runs on a real Claude Code session from tests/fixtures; where the
semantics are git's, the answer is checked against the real ``git`` on the same
commits (opal's states are git commits under refs/opal/heads/).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time

import pytest

from opalgit.cli import gitdate
from opalgit.cli.context import pager_command
from opalgit.cli.hints import GIT_VERBS, close_names
from opalgit.cli.main import cli
from opalgit.cli.render import blocks
from opalgit.history.model import Normal
from tests.conftest import git, opal
from tests.unit.test_porcelain import grow, place

SID = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"


def dated(n: int) -> dict:
    """Commits one day apart (2026-03-01 + n days), so that every order and date filter is exact."""
    stamp = f"@{1772323200 + n * 86400} +0000"
    return {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}


def ok(*args, cwd, env=None):
    r = opal(*args, cwd=cwd, env=env)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


@pytest.fixture
def history(project, home):
    """main: c1 (20 lines), c2 (+15), c3 (the rest); side: c2 then a rewind (r1)."""
    ok("init", cwd=project)
    path = place(home, project, lines=20)
    ok("commit", "-m", "first", cwd=project, env=dated(0))
    grow(path, start=20, end=35)
    ok("commit", "-m", "second", cwd=project, env=dated(1))
    grow(path, start=35)
    ok("commit", "-m", "third\n\nwith a body line", cwd=project, env=dated(2))
    ok("branch", "side", "HEAD~1", cwd=project, env=dated(3))
    ok("switch", "side", cwd=project)
    ok("rewind", "2", cwd=project, env=dated(4))
    ok("switch", "main", cwd=project)
    return project, path


def git_log(project, *args):
    """``git log`` of the same revisions: opal's HEAD (main) and branches spelled as git's refs."""
    args = tuple("main" + a if a.startswith("..") else a + "main" if a.endswith("..") else a for a in args)
    refs = [a.replace("main", "refs/opal/heads/main").replace("side", "refs/opal/heads/side") for a in args]
    return git("log", "--date-order", *refs, cwd=str(project)).stdout


# ------------------------------------------------------------------------------ revisions


def test_ranges_and_counts_list_what_git_lists(history):
    project, _ = history
    fmt = "--format=%H %P %s"
    for revs in (["main..side"], ["side..main"], ["main...side"], ["side...main"], ["^main", "side"],
                 ["main", "side"], ["..side"], ["side.."], ["-n", "2", "main", "side"], ["-2", "main", "side"],
                 ["--skip", "1", "main"], ["--skip=1", "-1", "main", "side"], ["^main"]):
        ours = ok("log", fmt, *revs, cwd=project).stdout
        assert ours == git_log(project, fmt, *revs) and (ours.strip() or revs == ["^main"]), revs


def test_a_range_has_what_it_should(history):
    project, _ = history
    subjects = lambda *revs: ok("log", "--format=%s", *revs, cwd=project).stdout.split("\n")[:-1]  # noqa: E731
    assert subjects("main..side") == ["rewind 2 turns"]
    assert subjects("side..main") == ["third"]
    assert sorted(subjects("main...side")) == ["rewind 2 turns", "third"]
    assert subjects("--all")[:2] == ["rewind 2 turns", "third"]
    assert subjects("main") == ["third", "second", "first"]


def test_format_placeholders_are_gits(history):
    project, _ = history
    fmt = "--format=%H|%h|%s|%an|%ae|%ad|%ai|%aI|%at|%cn|%ce|%cd|%ci|%cI|%ct|%P|%p|%T|%t|%b|%n%B|%%|%x41"
    assert ok("log", fmt, "main", "side", cwd=project).stdout == git_log(project, fmt, "main", "side")
    # %ar against git at the same moment: the commits are months old, far from a rounding edge.
    assert ok("log", "--format=%ar", "main", cwd=project).stdout == git_log(project, "--format=%ar", "main")


def test_named_pretty_formats_and_opals_own_placeholders(history):
    project, _ = history
    oneline = ok("log", "--pretty=oneline", "-1", cwd=project).stdout
    head = json.loads(ok("log", "--json", "-1", cwd=project).stdout)["commits"][0]
    assert oneline == f"{head['id']} (main) third\n"  # git's: the whole id
    assert ok("log", "--oneline", "-1", cwd=project).stdout == f"{head['id'][:7]} (main) third\n"
    out = ok("log", "-1", "--format=%(turns) %(records) %(tokens) %(agent) %(session) %(sid) %d|%D", cwd=project).stdout
    assert out == f"{head['turns']} {head['records']} {head['tokens_estimate']} claude {SID} {SID[:8]}  (HEAD -> main)|HEAD -> main\n"
    fuller = ok("log", "-1", "--pretty=fuller", cwd=project).stdout
    assert "AuthorDate: Tue Mar 3 00:00:00 2026 +0000" in fuller and "CommitDate:" in fuller
    medium = ok("log", "-1", cwd=project).stdout
    assert "Date:   Tue Mar 3 00:00:00 2026 +0000" in medium  # git's day, not zero-padded
    assert opal("log", "--pretty=nonsense", cwd=project).returncode == 2


def test_since_and_until_pick_by_commit_date_like_git(history):
    project, _ = history
    for args in (["--since", "2026-03-02"], ["--until", "2026-03-02 12:00"], ["--after", "2026-03-01T12:00:00Z",
                 "--before", "@1772496000"], ["--since", "3 weeks ago"]):
        fmt = "--format=%s"
        ours = ok("log", fmt, *args, "main", cwd=project).stdout
        assert ours == git_log(project, fmt, *args, "main"), args
    r = opal("log", "--since", "garbage", cwd=project)
    assert r.returncode == 2 and "'garbage'" in r.stderr  # git would read it as "now", silently


DATE_FORMS = ["2026-01-02", "2026-01-02 10:00", "2026-01-02T10:00:00Z", "2026-01-02 10:00:00 +0200",
              "2026-01-02T10:00:00.5+01:00", "Jan 2 2026", "2 Jan 2026", "2026/01/02", "2026.01.02",
              "@1700000000", "1700000000", "now", "today", "yesterday", "2 weeks ago", "3.days.ago",
              "1 hour ago", "10 minutes ago", "last week", "2 days", "2 weeks 3 days ago", "1 month ago",
              "3 months ago", "1 year ago", "noon yesterday", "yesterday 10:00", "midnight",
              "Thu, 1 Jan 2026 11:00:00 +1100"]


@pytest.mark.parametrize("tz", ["UTC", "Australia/Sydney", "America/New_York"])
def test_dates_are_read_as_git_reads_them(tz, project, monkeypatch):
    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        for form in DATE_FORMS:
            now = time.time()
            proc = subprocess.run(["git", "rev-parse", f"--since={form}"], cwd=str(project), capture_output=True,
                                  text=True, env={**os.environ, "TZ": tz})
            theirs = int(proc.stdout.strip().split("=", 1)[1])
            # The same instant, give or take the moment between the two reads.
            assert abs(gitdate.approx(form, now) - theirs) <= 2, (tz, form)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_relative_dates_are_gits_words():
    # The cases of git's own t0006-date.sh (show_date_relative).
    now = 1_000_000_000
    cases = {5: "5 seconds ago", 300: "5 minutes ago", 18000: "5 hours ago", 432000: "5 days ago",
             1728000: "3 weeks ago", 13000000: "5 months ago", 37500000: "1 year, 2 months ago",
             55188000: "1 year, 9 months ago", 630000000: "20 years ago", 31449600: "12 months ago",
             62985600: "2 years ago", 1: "1 second ago", 60: "60 seconds ago", 90: "2 minutes ago"}
    for ago, words in cases.items():
        assert gitdate.relative(now - ago, now) == words
    assert gitdate.relative(now + 10, now) == "in the future"


def test_diff_takes_gits_ranges(history):
    project, _ = history
    base = git("merge-base", "refs/opal/heads/main", "refs/opal/heads/side", cwd=str(project)).stdout.strip()
    three = json.loads(ok("diff", "--json", "main...side", cwd=project).stdout)
    plain = json.loads(ok("diff", "--json", base, "side", cwd=project).stdout)
    assert {k: v for k, v in three.items() if k != "a"} == {k: v for k, v in plain.items() if k != "a"}
    assert base[:12] in json.dumps(three["a"])
    two = json.loads(ok("diff", "--json", "main..side", cwd=project).stdout)
    assert two == json.loads(ok("diff", "--json", "main", "side", cwd=project).stdout)
    assert opal("diff", "main..side", "main", cwd=project).returncode == 2
    assert opal("log", "HEAD:3..side", cwd=project).returncode != 0


def test_log_all_means_every_branch_and_turns_meta_keeps_the_records(history):
    project, _ = history
    everything = ok("log", "--all", "--format=%s", cwd=project).stdout.split("\n")[:-1]
    assert len(everything) == 4 and "rewind 2 turns" in everything
    plain = json.loads(ok("log", "--turns", "--json", cwd=project).stdout)["turns"]
    meta = json.loads(ok("log", "--turns", "--meta", "--json", cwd=project).stdout)["turns"]
    assert len(meta) > len(plain) and any(t["turn"] is None for t in meta)
    old = opal("log", "--turns", "--all", "--json", cwd=project)
    assert old.returncode == 0 and json.loads(old.stdout)["turns"] == meta and "--meta" in old.stderr


# ------------------------------------------------------------------------------ turns


def test_log_turns_previews_each_turn(history):
    project, _ = history
    lines = ok("log", "--turns", cwd=project).stdout.splitlines()
    assert lines[0].split() == ["#", "role", "kind", "tool", "size", "time", "preview"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert "orchestrator is running" in rows["1"]  # the prompt's first words
    assert "Glob ~/.claude/commands" in rows["5"]  # the tool and what it acts on, not its JSON
    assert "Read /path/to/Demo/CLAUDE.md" in rows["24"]
    assert rows["8"].split()[:4] == ["8", "tool", "tool_result", "Glob"] and "No files found" in rows["8"]
    assert '{"' not in rows["24"] and "None" not in "".join(lines)


def test_show_of_a_result_names_its_call(history):
    project, _ = history
    out = ok("show", "HEAD:8", cwd=project).stdout
    assert "<- result of Glob (call toolu_01SpA34ZjSpRT7kiHgsgMTfP, turn 5)" in out
    assert "None" not in out
    # A result whose agent recorded no call id says so, not "(call None)".
    n = Normal(role="tool", blocks=[{"type": "tool_result", "call_id": None, "output": "done"},
                                    {"type": "tool_call", "id": None, "name": "Bash", "input": {"command": "ls"}}])
    text = blocks(n)
    assert "None" not in text and "a call that has no id" in text and "-> Bash" in text


# ------------------------------------------------------------------------------ branches


def test_branch_rename_carries_the_session_and_undo_takes_it_back(history):
    project, path = history
    config = os.path.join(str(project), ".git", "opal", "config")
    assert f"claude:{SID}" in open(config).read()
    r = ok("branch", "-m", "primary", cwd=project)
    assert "Renamed branch main to primary" in r.stdout
    st = json.loads(ok("status", "--json", cwd=project).stdout)
    assert st["branch"] == "primary"
    got = git("config", "--file", config, "branch.primary.session", cwd=str(project)).stdout.strip()
    assert got == f"claude:{SID}"
    assert git("config", "--file", config, "branch.main.session", cwd=str(project), check=False).returncode == 1
    assert git("rev-parse", "--verify", "-q", "refs/opal/heads/main", cwd=str(project), check=False).returncode == 1
    ops = json.loads(ok("op", "log", "-1", "--json", cwd=project).stdout)["operations"]
    assert ops[0]["description"] == "rename branch main to primary"

    ok("undo", cwd=project)
    assert json.loads(ok("status", "--json", cwd=project).stdout)["branch"] == "main"
    assert git("config", "--file", config, "branch.main.session", cwd=str(project)).stdout.strip() == f"claude:{SID}"
    assert git("config", "--file", config, "branch.primary.session", cwd=str(project), check=False).returncode == 1
    # Redo (undo the undo), then a commit on the renamed branch continues its session.
    undo_id = json.loads(ok("op", "log", "-1", "--json", cwd=project).stdout)["operations"][0]["id"]
    ok("undo", undo_id, cwd=project)
    assert json.loads(ok("status", "--json", cwd=project).stdout)["branch"] == "primary"

    # -m OLD NEW for another branch; -M replaces; -m onto an existing name is refused.
    r = opal("branch", "-m", "side", "primary", cwd=project)
    assert r.returncode == 2 and "-M" in r.stderr
    ok("branch", "-m", "side", "other", cwd=project)
    assert {b["name"] for b in json.loads(ok("branch", "--json", cwd=project).stdout)["branches"]} == {"primary", "other"}
    assert opal("branch", "-M", "other", "primary", cwd=project).returncode == 2  # the current branch
    ok("branch", "-D", "other", cwd=project)
    assert [b["name"] for b in json.loads(ok("branch", "--json", cwd=project).stdout)["branches"]] == ["primary"]


def test_branch_lists_remote_tracking_branches_with_r_and_a(history, tmp_path):
    project, _ = history
    bare = tmp_path / "shared.git"
    git("init", "-q", "--bare", str(bare))
    git("remote", "add", "origin", "file://" + str(bare), cwd=str(project))
    assert ok("branch", "-r", cwd=project).stdout.startswith("no remote-tracking branches")
    ok("push", cwd=project)
    remote = ok("branch", "-r", cwd=project).stdout
    assert remote.split()[:2] == ["origin/main", ok("log", "-1", "--format=%h", cwd=project).stdout.strip()]
    both = ok("branch", "-a", cwd=project).stdout
    assert "* main" in both and "side" in both and "remotes/origin/main" in both
    listed = json.loads(ok("branch", "-a", "--json", cwd=project).stdout)
    assert [b["name"] for b in listed["branches"]] == ["main", "side"]
    assert [(b["name"], b["remote"]) for b in listed["remote_branches"]] == [("origin/main", True)]


def test_switch_dash_goes_back_to_the_previous_branch(history):
    project, _ = history
    assert "no previous branch" not in opal("switch", "-", cwd=project).stderr  # history switched main -> side -> main
    branch = lambda: json.loads(ok("status", "--json", cwd=project).stdout)["branch"]  # noqa: E731
    assert branch() == "side"
    ok("switch", "-", cwd=project)
    assert branch() == "main"
    ok("switch", "-", cwd=project)
    assert branch() == "side"
    ok("switch", "main", cwd=project)
    ok("branch", "-D", "side", cwd=project)
    r = opal("switch", "-", cwd=project)
    assert r.returncode != 0 and "side" in r.stderr and "no longer exists" in r.stderr


def test_switch_dash_without_history_says_so(project, home):
    ok("init", cwd=project)
    place(home, project, lines=20)
    ok("commit", cwd=project)
    r = opal("switch", "-", cwd=project)
    assert r.returncode == 4 and "no previous branch" in r.stderr


# ------------------------------------------------------------------------------ help and hints


def test_help_command(history):
    project, _ = history
    assert ok("help", "log", cwd=project).stdout == ok("log", "--help", cwd=project).stdout
    assert ok("help", "op", "log", cwd=project).stdout == ok("op", "log", "--help", cwd=project).stdout
    assert ok("help", cwd=project).stdout == ok("--help", cwd=project).stdout
    r = opal("help", "lgo", cwd=project)
    assert r.returncode == 2 and "'opal log'" in r.stderr


def test_unknown_commands_get_close_names_or_the_opal_way_of_a_git_verb(history):
    project, _ = history
    r = opal("reset", "--hard", cwd=project)
    assert r.returncode == 2 and "resume" not in r.stderr and "opal rewind" in r.stderr and "opal undo" in r.stderr
    assert "did you mean 'opal log'?" in opal("lgo", cwd=project).stderr
    assert "'opal stats' or 'opal status'" in opal("stat", cwd=project).stderr
    assert "did you mean" not in opal("frobnicate", cwd=project).stderr
    assert close_names("reset", ["resume", "rewind", "rebase"]) == [] and close_names("sttaus", ["status"]) == ["status"]
    commands = set(cli.list_commands(None))
    for verb, hint in GIT_VERBS.items():
        assert verb not in commands
        r = opal(verb, cwd=project)
        assert r.returncode == 2 and hint in r.stderr
        named = [w for w in hint.replace("'", " ").split() if w in commands]
        assert named, (verb, hint)  # every hint names an opal command that exists


# ------------------------------------------------------------------------------ session ids


def test_session_takes_the_short_id_opal_prints(project, home):
    ok("init", cwd=project)
    place(home, project, lines=20)
    r = ok("commit", "--session", SID[:8], cwd=project)
    assert f"session {SID[:8]}" in r.stdout
    assert json.loads(ok("log", "-1", "--json", cwd=project).stdout)["commits"][0]["session"]["id"] == SID
    place(home, project, lines=25, name=SID[:4] + "ffff-0000-4000-8000-000000000000.jsonl")
    r = opal("commit", "--session", SID[:4], cwd=project)
    assert r.returncode == 2 and "ambiguous" in r.stderr and SID in r.stderr


# ------------------------------------------------------------------------------ pager, colour, plurals


def test_pager_order_is_gits():
    def pick(env, core=None):
        return pager_command(env, lambda: core)

    assert pick({}) == "less"
    assert pick({"PAGER": "more"}) == "more"
    assert pick({"PAGER": "more"}, core="most") == "most"
    assert pick({"PAGER": "more", "GIT_PAGER": "pg"}, core="most") == "pg"
    assert pick({"GIT_PAGER": "pg", "OPAL_PAGER": "op"}, core="most") == "op"
    assert pick({"GIT_PAGER": ""}, core="most") is None and pick({"OPAL_PAGER": "cat"}) is None


def _on_a_terminal(args, cwd, env):
    leader, follower = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "opalgit", *args], cwd=str(cwd), env=env, stdin=follower,
                           stdout=follower, stderr=subprocess.PIPE, timeout=120)
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: everything was read
                break
            if not chunk:
                break
            out += chunk
        return r.returncode, out.decode(errors="replace"), r.stderr.decode()
    finally:
        os.close(leader)


def test_the_pager_runs_is_the_one_git_would(history, tmp_path):
    project, _ = history
    pagers = {}
    for name in ("core", "gitpager", "opalpager", "plain"):
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\ncat > {tmp_path / (name + '.out')}\n")
        script.chmod(0o755)
        pagers[name] = str(script)
    base = {k: v for k, v in os.environ.items() if k not in ("OPAL_NO_PAGER", "PAGER", "GIT_PAGER", "OPAL_PAGER")}
    git("config", "core.pager", pagers["core"], cwd=str(project))

    def paged(**env):
        for name in pagers:
            (tmp_path / (name + ".out")).unlink(missing_ok=True)
        code, _, err = _on_a_terminal(["log", "--oneline"], project, {**base, **env})
        assert code == 0, err
        return [n for n in pagers if (tmp_path / (n + ".out")).exists()]

    assert paged(PAGER=pagers["plain"]) == ["core"]
    assert paged(PAGER=pagers["plain"], GIT_PAGER=pagers["gitpager"]) == ["gitpager"]
    assert paged(GIT_PAGER=pagers["gitpager"], OPAL_PAGER=pagers["opalpager"]) == ["opalpager"]
    assert "third" in (tmp_path / "opalpager.out").read_text()
    git("config", "--unset", "core.pager", cwd=str(project))
    assert paged(PAGER=pagers["plain"]) == ["plain"]
    assert paged(PAGER=pagers["plain"], OPAL_PAGER="") == []
    code, _, err = _on_a_terminal(["log"], project, {**base, "OPAL_PAGER": "no-such-pager-here"})
    assert code == 0 and "not on PATH" in err


def test_an_empty_no_color_does_not_count(history):
    project, _ = history
    base = {**os.environ, "OPAL_NO_PAGER": "1"}
    base.pop("NO_COLOR", None)
    assert "\x1b[" in _on_a_terminal(["log", "--oneline"], project, {**base, "NO_COLOR": ""})[1]
    assert "\x1b[" not in _on_a_terminal(["log", "--oneline"], project, {**base, "NO_COLOR": "1"})[1]


def test_one_turn_is_one_turn(history):
    project, _ = history
    r = ok("rewind", "--to", "HEAD:2", cwd=project)
    assert "1 turns" not in r.stdout
    r = ok("rewind", "1", cwd=project)
    assert "dropped 1 turn (" in r.stdout and "1 turn remains" in r.stdout
    assert "1 turn " in ok("branch", cwd=project).stdout
    assert "1 turn," in ok("log", "-1", cwd=project).stdout
    assert "1 turn," in ok("stats", cwd=project).stdout
    ok("branch", "one", "HEAD", cwd=project)
    assert "(1 turn)" in ok("branch", "two", "HEAD", cwd=project).stdout


def test_subcommand_groups_give_the_same_hints(project):
    r = opal("op", "lgo", cwd=project)
    assert r.returncode == 2 and "did you mean 'opal op log'?" in r.stderr
    r = opal("hooks", "instal", cwd=project)
    assert r.returncode == 2 and "did you mean 'opal hooks install'?" in r.stderr


def test_previews_of_codex_and_gemini_sessions(project):
    from tests.conftest import FIXTURES

    ok("init", cwd=project)
    codex = os.path.join(FIXTURES, "codex", "generated", "rollout-2026-11-30T12-28-19-01a22c6d-7181-79e0-a047-a4ffeeaf6f75.jsonl")
    gemini = os.path.join(FIXTURES, "gemini", "generated", "session-2026-11-30T12-25-aaf40a27.jsonl")
    ok("commit", "--file", codex, "--agent", "codex", cwd=project)
    rows = {line.split()[0]: line for line in ok("log", "--turns", cwd=project).stdout.splitlines()[1:]}
    assert rows["2"].endswith("exec_command ls -la")
    assert rows["3"].split()[3] == "exec_command" and "total 20" in rows["3"] and "Chunk ID" not in rows["3"]
    ok("switch", "-c", "g", cwd=project)
    ok("commit", "--file", gemini, "--agent", "gemini", cwd=project)
    rows = {line.split()[0]: line for line in ok("log", "--turns", cwd=project).stdout.splitlines()[1:]}
    assert rows["2"].endswith("run_shell_command ls -la")  # the call, not the words around it
    assert rows["3"].rstrip().endswith("README.md") and "read_file /" in rows["3"]


def test_a_failed_command_keeps_its_exit_code_in_the_preview():
    from opalgit.history import preview

    out = "Chunk ID: ab12\nWall time: 0.1 seconds\nProcess exited with code 2\nOriginal token count: 9\nOutput:\nno such file\n"
    n = Normal(role="tool", blocks=[{"type": "tool_result", "call_id": "c", "output": out}])
    assert preview.text(n) == "[exit 2] no such file"
    calls = Normal(role="assistant", blocks=[{"type": "text", "text": "Let me look."},
                                             {"type": "tool_call", "id": "a", "name": "Bash", "input": {"command": "ls"}},
                                             {"type": "tool_call", "id": "b", "name": "Read", "input": {"file_path": "x.py"}}])
    assert preview.text(calls) == "Bash ls (+1 more)"


def test_counted_nouns():
    from opalgit.plural import count, noun

    assert [count(n, "turn") for n in (0, 1, 2)] == ["0 turns", "1 turn", "2 turns"]
    assert count(1, "tool call") == "1 tool call" and count(3, "tool call") == "3 tool calls"
    assert count(2, "branch") == "2 branches" and count(2, "leaf") == "2 leaves"
    assert noun(1, "remains", "remain") == "remains" and noun(4, "remains", "remain") == "remain"

"""``opal grep`` on genuine sessions of the three agents (issue 22, part 3).

The sessions are the real clients' own (tests/fixtures/<agent>/generated/structures/, parallel
tool calls) and a public real Claude Code session. The oracle is independent of grep's code:
every turn as ``opal show REV:N --json`` prints it, every string in its blocks searched with
Python's ``re``. A workflow (branch, rewind, commit, undo) checks that each state's matches
are that state's, and that shared records are searched once.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opalgit import porcelain
from opalgit.store.repo import Repository
from tests.conftest import opal

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SESSIONS = {
    "claude": FIX / "claude/generated/structures/parallel/9c1a0cf1-b5ef-4382-8774-15ac3cd697de.jsonl",
    "codex": FIX / "codex/generated/structures/parallel/rollout-2026-12-01T21-54-34-01a2339a-35ac-71e0-ae3f-91615f2ed736.jsonl",
    "gemini": FIX / "gemini/generated/structures/parallel/session-2026-12-01T21-54-aec503dd.jsonl",
}
REAL_CLAUDE = FIX / "claude/real/vibecodingtracker/claude_code.jsonl"


def _ok(*args, cwd, ok=(0,)):
    r = opal(*args, cwd=cwd)
    assert r.returncode in ok, f"opal {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def _grep_json(cwd, *args, ok=(0,)) -> dict:
    return json.loads(_ok("grep", *args, "--json", cwd=cwd, ok=ok).stdout)


def _imported(project, path, agent: str) -> Path:
    _ok("init", cwd=project)
    _ok("commit", "--file", str(path), "--agent", agent, "-m", f"{agent} session", cwd=project)
    return project


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif value is not None and not isinstance(value, bool):
        yield str(value)  # a number in a tool's input is searched as it reads: tokens 15000


def _block_texts(block: dict):
    """What a user means by "the text of" a normalized block, straight from show's JSON."""
    kind = block.get("type")
    if kind in ("text", "reasoning"):
        yield block.get("text") or ""
    elif kind == "tool_call":
        yield str(block.get("name") or "")
        yield from _strings(block.get("input"))
    elif kind == "tool_result":
        out = block.get("output")
        if isinstance(out, list) and all(isinstance(b, dict) for b in out):
            yield "\n".join(b.get("text") or "" for b in out if isinstance(b, dict) and b.get("type") == "text")
        elif out is not None:
            yield from _strings(out)


def _oracle(repo_dir: Path, rev: str, rx: re.Pattern) -> dict[int, int]:
    """turn -> matching lines, from every turn of ``rev`` as ``opal show`` gives it."""
    repo = Repository.discover(str(repo_dir))
    target = porcelain.resolve(repo, rev)
    out: dict[int, int] = {}
    for info in porcelain.turns(repo, rev):
        shown = porcelain.show_turn(repo, target.oid, info.number)
        n = 0
        for b in shown.normal.blocks:
            for text in _block_texts(b):
                n += sum(1 for line in text.split("\n") if rx.search(line))
        if n:
            out[info.number] = n
    return out


@pytest.mark.parametrize("agent", sorted(SESSIONS))
def test_grep_finds_prompts_replies_calls_and_results_of_each_agent(agent, project, home):
    _imported(project, SESSIONS[agent], agent)
    got = _grep_json(project, "PTURN1")
    prompt = [t for t in got["matches"] if any(x["block"] == "prompt" for x in t["lines"])]
    assert len(prompt) == 1 and prompt[0]["rev"] == "main" and prompt[0]["role"] == "user"
    shown = json.loads(_ok("show", f"HEAD:{prompt[0]['turn']}", "--json", cwd=project).stdout)
    assert any("PTURN1" in (b.get("text") or "") for b in shown["blocks"])

    reply = _grep_json(project, r"\[pturn2-done\]")["matches"]
    assert [x["block"] for t in reply for x in t["lines"]] == ["reply"]
    # tool inputs: the parallel turn's calls read README.md / hello.py (or cat them), and their results
    calls = _grep_json(project, "hello.py")["matches"]
    assert any(x["block"] == "call" for t in calls for x in t["lines"]), calls
    results = _grep_json(project, "def greet")["matches"]
    assert any(x["block"] == "result" and x["tool"] for t in results for x in t["lines"]), results
    # every result line names its tool, a Claude result (which names only its call's id) too
    assert all(x["tool"] for t in results for x in t["lines"] if x["block"] == "result")


@pytest.mark.parametrize("agent", sorted(SESSIONS))
def test_grep_agrees_with_show_turn_by_turn(agent, project, home):
    _imported(project, SESSIONS[agent], agent)
    for pattern in ("README", "(?i)hello", r"\bls\b", "notes", "turn[12]-done|pturn", "e"):
        rx = re.compile(pattern)
        want = _oracle(project, "HEAD", rx)
        got = _grep_json(project, pattern, ok=(0, 1))
        assert {t["turn"]: len(t["lines"]) for t in got["matches"]} == want, pattern


_WORDS = st.sampled_from(["README", "hello", "greet", "notes", "ls", "TURN", "done", "the", "\\.py", "x{2,}",
                          "[A-Z][a-z]+", "farewell", "\\d+", "wc", "lines", "^The", "!$"])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(_WORDS, min_size=1, max_size=3), ignore_case=st.booleans())
def test_any_pattern_matches_what_the_oracle_matches(claude_repo, words, ignore_case):
    pattern = "|".join(words)
    rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    args = [pattern] + (["-i"] if ignore_case else [])
    from opalgit.porcelain.grep import grep

    repo = Repository.discover(str(claude_repo))
    res = grep(repo, pattern, ignore_case=ignore_case)
    assert {t.turn: len(t.lines) for t in res.turns} == _oracle(claude_repo, "HEAD", rx), args
    for t in res.turns:
        for x in t.lines:  # every span is where the pattern matches in its line, and only there
            for a, b in x.spans:
                m = re.compile(rx.pattern, rx.flags | re.MULTILINE).match(x.text, a)
                assert m is not None and m.end() == b, (x.text, a, b)


@pytest.fixture(scope="module")
def claude_repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("grep-real")
    project = root / "project"
    project.mkdir()
    os.system(f"git init -q {project}")
    _imported(project, REAL_CLAUDE, "claude")
    return project


def test_a_shared_history_is_searched_once_and_each_state_reports_its_own(project, home):
    _imported(project, SESSIONS["claude"], "claude")
    one = _grep_json(project, "PTURN2")
    turn = one["matches"][0]["turn"]
    _ok("branch", "before", f"HEAD:{turn - 1}", cwd=project)
    _ok("branch", "copy", "HEAD", cwd=project)
    alone = _grep_json(project, "PTURN")["searched"]
    every = _grep_json(project, "PTURN", "--all")
    by_rev: dict[str, list[int]] = {}
    for t in every["matches"]:
        by_rev.setdefault(t["rev"], []).append(t["turn"])
    assert set(by_rev) == {"main", "before", "copy"}
    assert by_rev["main"] == by_rev["copy"] and turn in by_rev["main"] and turn not in by_rev["before"]
    s = every["searched"]
    assert s["states"] == 3
    # main and copy are one state; before shares its leaves but the last: each read once
    assert s["leaves_searched"] < s["leaves"]
    assert (s["records_searched"], s["records_skipped"]) == (alone["records_searched"], alone["records_skipped"])
    assert s["records"] > s["records_searched"] + s["records_skipped"]

    # a rewind drops the turn from main's matches; undo brings it back
    _ok("rewind", "--to", f"HEAD:{turn - 1}", cwd=project)
    after = _grep_json(project, "PTURN2", ok=(1,))
    assert after["matches"] == []
    _ok("undo", cwd=project)
    assert [t["turn"] for t in _grep_json(project, "PTURN2")["matches"]] == [turn]


def test_the_text_output_and_its_options(project, home):
    _imported(project, SESSIONS["claude"], "claude")
    text = _ok("grep", "PTURN1", cwd=project).stdout.splitlines()
    assert len(text) == 1 and re.match(r"^main:\d+:prompt: PTURN1: look at every file", text[0]), text
    listed = _ok("grep", "-l", "hello", cwd=project).stdout.split()
    assert listed and all(re.fullmatch(r"main:\d+", x) for x in listed) and len(listed) == len(set(listed))
    counted = _ok("grep", "-c", "hello", cwd=project).stdout.split()
    assert [c.rsplit(":", 1)[0] for c in counted] == listed and all(int(c.rsplit(":", 1)[1]) > 0 for c in counted)
    assert _ok("grep", "-F", "[pturn1-done]", cwd=project).stdout.count("\n") >= 1
    assert opal("grep", "pturn1:", cwd=project).returncode == 1  # case matters by default
    assert _ok("grep", "-i", "pturn1:", cwd=project).stdout.count("PTURN1:") == 1
    users = _grep_json(project, "--role", "user", "hello", ok=(0, 1))["matches"]
    assert all(t["role"] == "user" for t in users)
    bash = _grep_json(project, "--tool", "Bash", ".")["matches"]
    assert bash and all(x["tool"] == "Bash" for t in bash for x in t["lines"])
    coloured = _ok("--color", "always", "grep", "PTURN1", cwd=project).stdout
    assert "\x1b[31m\x1b[1mPTURN1\x1b[0m" in coloured  # the match in bold red, as git grep


def test_errors_say_what_to_do(project, home):
    _imported(project, SESSIONS["gemini"], "gemini")
    bad = opal("grep", "(unclosed", cwd=project)
    assert bad.returncode == 2 and "not a regular expression" in bad.stderr and "-F" in bad.stderr
    turn = opal("grep", "x", "HEAD:2", cwd=project)
    assert turn.returncode == 2 and "names a turn" in turn.stderr and "opal grep PATTERN HEAD" in turn.stderr
    both = opal("grep", "x", "main", "--all", cwd=project)
    assert both.returncode == 2 and "not both" in both.stderr
    nope = opal("grep", "x", "no-such-branch", cwd=project)
    assert nope.returncode != 0 and "Traceback" not in nope.stderr
    empty = opal("grep", "", cwd=project)
    assert empty.returncode == 2 and "empty pattern" in empty.stderr


def test_long_lines_are_cut_around_the_match(project, home):
    from opalgit.cli.commands.grep import _window

    text = "a" * 500 + "NEEDLE" + "b" * 500
    cut, spans = _window(text, [(500, 506)], 100)
    assert cut.startswith("…") and cut.endswith("…") and len(cut) == 102
    assert cut[spans[0][0]:spans[0][1]] == "NEEDLE"
    assert _window("short NEEDLE", [(6, 12)], 100) == ("short NEEDLE", [(6, 12)])

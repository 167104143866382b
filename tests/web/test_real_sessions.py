"""Real session files from public repositories (tests/fixtures, licences beside them) in
the browser: each state page lists the turns ``opal log --turns`` lists, and every tool
call opened on it comes with its result exactly when the raw file holds one, parallel
calls, subagent calls and calls split over several lines included. The oracle for the
results is the session file itself, read here without opal.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.cli.test_web import Web
from tests.conftest import FIXTURES, git, opal

SESSIONS = {
    # recorded by Claude Code 1.0.95: 31 tool calls, a reply split over lines
    "claude-vibecodingtracker": ("claude", "claude/real/vibecodingtracker/claude_code.jsonl"),
    # recorded by Claude Code 1.0.x (d-kimuson/claude-code-viewer)
    "claude-viewer": ("claude", "claude/claude-code-viewer/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"),
    # Claude Code 2.1.x, trimmed: compaction, sidechains, an image
    "claude-agent-sessions": ("claude", "claude/agent-sessions/small.jsonl"),
    # two parallel Agent calls in one reply, their results chained
    "claude-parallel-agents": ("claude", "claude/real/claude-code-log/minimal_showcase/"
                                         "55550000-0000-4000-8000-000000000001.jsonl"),
    # Codex rollouts (jazzyalex/agent-sessions)
    "codex-agent-sessions": ("codex", "codex/agent-sessions/small.jsonl"),
    "codex-large": ("codex", "codex/agent-sessions/large.jsonl"),
}
PAGE = 200
OPENED = 60  # tool-call turns opened per session, at most


def _results_in(agent: str, path: str) -> set[str]:
    """The call ids that have a result in the raw session file."""
    out: set[str] = set()
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict):
                continue
            if agent == "claude":
                content = (rec.get("message") or {}).get("content") if isinstance(rec.get("message"), dict) else None
                for b in content if isinstance(content, list) else []:
                    if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id"):
                        out.add(b["tool_use_id"])
            else:
                p = rec.get("payload") if isinstance(rec.get("payload"), dict) else rec
                # function_call_output, custom_tool_call_output, tool_search_output, ...
                if str(p.get("type", "")).endswith("_output") and p.get("call_id"):
                    out.add(p["call_id"])
                # A web search runs on the server: its record carries its own outcome.
                if p.get("type") == "web_search_call" and p.get("status") and p.get("id"):
                    out.add(p["id"])
    return out


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    made = {}
    for name, (agent, rel) in SESSIONS.items():
        project = tmp_path_factory.mktemp(name) / "project"
        git("init", "-q", str(project))
        git("commit", "-q", "--allow-empty", "-m", "initial code", cwd=str(project))
        for args in (("init",), ("commit", "--file", os.path.join(FIXTURES, rel), "-m", name)):
            r = opal(*args, cwd=project)
            assert r.returncode == 0, (name, r.stderr)
        made[name] = (project, agent, os.path.join(FIXTURES, rel))
    return made


@pytest.mark.parametrize("name", list(SESSIONS))
def test_a_real_sessions_turns_and_every_calls_result_show_in_the_browser(name, repos, browser):
    project, agent, path = repos[name]
    r = opal("log", "--turns", "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    log = json.loads(r.stdout)["turns"]
    answered = _results_in(agent, path)
    w = Web(project)
    try:
        browser.open(w.url)
        browser.go("#/state/HEAD")
        assert not browser.error()
        shown = browser.attr(".turn", "data-turn")
        assert [int(n) for n in shown] == [t["turn"] for t in log[:PAGE]]
        tools = browser.texts(".turn .tool")
        assert tools == [t["tool"] or "" for t in log[:PAGE]]
        calls_seen = results_seen = most = 0
        for t in [t for t in log[:PAGE] if t["kind"] == "tool_call"][:OPENED]:
            turn = browser.one(f'.turn[data-turn="{t["turn"]}"]')
            turn.find_element("css selector", ".expand").click()
            browser.wait_for(f'.turn[data-turn="{t["turn"]}"] .full > *')
            calls = browser.attr(f'.turn[data-turn="{t["turn"]}"] .full .call', "data-call")
            results = browser.attr(f'.turn[data-turn="{t["turn"]}"] .full .result', "data-call")
            assert calls, (name, t)
            # Every call that the file answers shows its result, and only those.
            assert sorted(set(results)) == sorted(c for c in set(calls) if c in answered), (name, t["turn"])
            notes = " ".join(browser.texts(f'.turn[data-turn="{t["turn"]}"] .full .note'))
            unanswered = sorted(c for c in calls if c and c not in answered)
            assert all(c in notes for c in unanswered), (name, t["turn"], notes)
            if "" in calls:  # a call the session gave no id: said, not guessed
                assert "without an id" in notes, (name, t["turn"], notes)
            calls_seen += len(calls)
            results_seen += len(results)
            most = max(most, len(calls))
        assert calls_seen, f"{name}: no tool call on the first page"
        if name == "claude-parallel-agents":  # both parallel calls in one turn, each with its result
            assert most >= 2 and results_seen >= 2, (most, results_seen)
        assert not [e for e in browser.console_errors() if "403" not in e]
    finally:
        code, err = w.stop()
    assert code == 0, err

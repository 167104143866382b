"""Genuine sessions with the structures real ones are full of, resumed by the real clients.

The fixtures under ``tests/fixtures/<agent>/generated/structures/`` were written
by the real, pinned clients against the scripted mocks
(``python -m tests.clients.regenerate``): replies with several tool calls at
once, a Claude subagent call, and a compaction. Each ``expected.json`` holds
the history the client itself sent the model in its last request.

* The fixtures hold those structures (no client needed).
* The 9-pair matrix: each client's parallel-call session is committed by opal,
  exported to every agent and resumed by that agent's real client; the request
  it sends holds the whole history, in order, with every tool call paired with
  its real result (never opal's "no recorded result" stand-in), a reply's
  calls kept together; a same-agent resume sends exactly what the original
  client sent, plus the final answer and the new prompt.
* The subagent and compacted sessions, exported to their own agent and
  resumed, send what the original client sent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from . import harness
from .history import Item, history_of
from .history import results_by_call as _results_by_call
from .history import shape as _shape

pytestmark = pytest.mark.clients

AGENTS = ["claude", "codex", "gemini"]
STRUCTURES = harness.REPO / "tests" / "fixtures"
NEW_PROMPT = "NEXT: what happened so far? [after-opal]"
NO_RESULT = "[opal: this tool call has no recorded result]"


def _dir(client: str, scenario: str) -> Path:
    return STRUCTURES / client / "generated" / "structures" / scenario


def _expected(client: str, scenario: str) -> dict:
    d = _dir(client, scenario)
    exp = json.loads((d / "expected.json").read_text())
    exp["path"] = d / exp["file"]
    return exp


SCENARIOS = [(c, s.name) for c in AGENTS for s in harness.scenarios(c, Path("/p"))]


def _opal(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return harness.opal(*args, cwd=cwd, env=env)


def _runs_of_calls(items) -> list[int]:
    """Lengths of the runs of consecutive tool calls (a reply's parallel calls)."""
    runs, n = [], 0
    for it in items:
        if it[0] == "tool_call":
            n += 1
        elif n:
            runs.append(n)
            n = 0
    return runs + ([n] if n else [])


# ---------------------------------------------------------------------------
# the fixtures hold their structures


@pytest.mark.parametrize("client,scenario", SCENARIOS, ids=[f"{c}-{s}" for c, s in SCENARIOS])
def test_fixture_holds_its_structure(client, scenario):
    exp = _expected(client, scenario)
    text = exp["path"].read_text()
    # The CI pins, not harness.PINNED: the drift run points that at the newest releases, and the
    # fixtures stay the ones the CI-pinned clients wrote.
    assert exp["client"] == client and exp["version"] == harness._read_pins(harness.CI_PINS_FILE)[client][1]
    hist = _want(exp)[:-2]
    if scenario == "parallel":
        assert _runs_of_calls(hist) == [3, 2], hist
    if scenario == "subagent":
        side = exp["path"].with_suffix("") / "subagents"
        agents = sorted(side.glob("agent-*.jsonl"))
        assert len(agents) == 1 and agents[0].with_suffix(".meta.json").exists(), list(side.iterdir())
        sub = agents[0].read_text()
        assert harness.SUB_TASK in sub and harness.SUB_REPORT in sub
        assert [h[1] for h in hist if h[0] == "tool_call"] == ["Agent", "Bash"], hist
    if scenario == "compact":
        marker = {"claude": '"compact_boundary"', "codex": '"type":"compacted"', "gemini": harness.C_SUMMARY}[client]
        assert marker in text
        assert any(harness.C_SUMMARY in str(h) for h in hist), hist
    # every call the original client sent was paired with its real result
    _assert_paired(hist)


def _assert_paired(items) -> None:
    calls = [i for i in items if i[0] == "tool_call"]
    results = [i for i in items if i[0] == "tool_result"]
    assert not [r for r in results if NO_RESULT in str(r[2])], "a synthesized result reached the model"
    ids = [getattr(c, "call_id", None) for c in calls]
    rids = [r[1] for r in results]
    assert len(calls) == len(results), (calls, results)
    if all(ids):
        assert sorted(ids) == sorted(rids), (ids, rids)


# ---------------------------------------------------------------------------
# export and resume


def _import(path: Path, client: str, tmp: Path, env: dict) -> Path:
    src = tmp / "src"
    src.mkdir()
    shutil.copy2(path, src / path.name)
    side = path.with_suffix("")
    if side.is_dir():
        shutil.copytree(side, src / side.name)
    project = tmp / "opal-project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _opal("init", cwd=project, env=env)
    _opal("commit", "--file", str(src / path.name), "--agent", client, "-m", "structured", cwd=project, env=env)
    return project


def _export_and_resume(target: str, project: Path, tmp: Path, env_base: dict):
    root = harness.make_root(tmp, prefix=f"to-{target}-")
    env = dict(env_base, HOME=str(root.home), CODEX_HOME=str(root.codex_home))
    env.pop("CLAUDE_CONFIG_DIR", None)
    res = json.loads(_opal("export", "HEAD", "--to", target, "--cwd", str(root.project), "--json",
                           cwd=project, env=env).stdout)
    with harness.mock_for(target, [harness.Reply("Noted. [resumed-done]")]) as srv:
        run = harness.run_client(target, root, srv.port, NEW_PROMPT, resume=res["session_id"], server=srv)
    assert run.ok, run.describe()
    model = [r for r in run.requests if r.kind == "model"]
    assert model, f"{target} sent no model request on resume"
    return res, root, history_of(model[0].body, target)


def _norm(items, paths) -> list[tuple]:
    """Items as comparable tuples: call ids dropped, project folders named alike."""
    out = []
    for it in items:
        t = tuple(it) if it[0] != "tool_result" else (it[0], it[2])
        text = json.dumps(t, ensure_ascii=False)
        for p in paths:
            text = text.replace(p, "<project>")
        out.append(tuple(json.loads(text)))
    return out


def _want(exp: dict) -> list[Item]:
    ids = iter(exp["call_ids"])
    items = [Item(*h, call_id=next(ids) if h[0] == "tool_call" else (h[1] if h[0] == "tool_result" else None))
             for h in exp["history"]]
    return items + [Item("assistant", exp["final_answer"]), Item("user", NEW_PROMPT)]


def _check_resume(exp: dict, target: str, report: dict, root, got) -> None:
    assert NO_RESULT not in json.dumps(got, ensure_ascii=False), "a synthesized result reached the model"
    assert "tool_result:synthesized" not in json.dumps(report["report"]), report["report"]
    _assert_paired(got)
    want = _want(exp)
    if target == exp["client"]:
        paths = [exp["project"], str(root.project)]
        assert _norm(got, paths) == _norm(want, paths), (report["report"], got)
    else:
        assert _shape(got) == _shape(want), (report["report"], got)
        assert _results_by_call(got) == _results_by_call(want), "a call got another call's result"
    assert _runs_of_calls(got) == _runs_of_calls(want), "a reply's calls were split up"


# Cases that fail because of a known adapter bug, as strict xfails naming the issue, so
# that each one fails loudly once its fix lands. None today: the Claude ones (parallel
# results, the subagent's folder) were fixed with issue 18.
XFAIL: dict[tuple[str, str], str] = {}


def _matrix_params():
    out = []
    for s in AGENTS:
        for t in AGENTS:
            reason = XFAIL.get((s, t))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(s, t, marks=marks, id=f"{s}-to-{t}"))
    return out


@pytest.mark.parametrize("source,target", _matrix_params())
def test_parallel_calls_resume_in_every_agent(source, target, tmp_path):
    harness.require_client(target)
    exp = _expected(source, "parallel")
    env = dict(os.environ)
    project = _import(exp["path"], source, tmp_path, env)
    report, root, got = _export_and_resume(target, project, tmp_path, env)
    print(f"\nloss report {source} -> {target}: {json.dumps(report['report'], sort_keys=True)}")
    _check_resume(exp, target, report, root, got)


SAME_AGENT = [(c, s) for c, s in SCENARIOS if s != "parallel"]
SAME_XFAIL: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("client,scenario", [
    pytest.param(c, s, id=f"{c}-{s}",
                 marks=[pytest.mark.xfail(strict=True, reason=SAME_XFAIL[(c, s)])] if (c, s) in SAME_XFAIL else [])
    for c, s in SAME_AGENT])
def test_structured_session_resumes_in_its_own_agent(client, scenario, tmp_path):
    harness.require_client(client)
    exp = _expected(client, scenario)
    env = dict(os.environ)
    project = _import(exp["path"], client, tmp_path, env)
    report, root, got = _export_and_resume(client, project, tmp_path, env)
    print(f"\nloss report {client} {scenario}: {json.dumps(report['report'], sort_keys=True)}")
    _check_resume(exp, client, report, root, got)
    if scenario == "subagent":
        out = Path(report["files"][0]).with_suffix("")
        got_agents = sorted(p.name for p in (out / "subagents").glob("agent-*"))
        want_agents = sorted(p.name for p in (exp["path"].with_suffix("") / "subagents").glob("agent-*"))
        assert got_agents == want_agents, (report["files"], got_agents)

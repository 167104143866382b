"""The heart of opal, proven with the real clients: every (source, target) agent pair.

The agents are every client the harness drives (:data:`harness.CLIENTS`, which takes in each
module of ``tests/clients/drivers/``) that opal has an adapter for, so a new agent joins the
matrix by landing its driver and its adapter.

For each source agent, one genuine session is made by the real client against its mock, once
per test session: turn 1 a shell call and a read, turn 2 an edit and a write, and, where the
client makes parallel tool calls, turn 3 a reply with three calls at once. opal imports it
(``opal commit --file``), once per source too. Each pair then exports a copy of that
project to the target (``opal export --to``) and the target's real client resumes it against
its own mock. The request the target sends must hold, in order, every earlier prompt, every
tool call paired with its own result text, every answer, then the new prompt: the counts and
texts of what the source client itself sent in its last request. The same holds after ``opal
rewind`` to turn 1 and on a branch made there: the resumed history is exactly turn 1's.

What runs where (measured figures in docs/compatibility.md): all of it, every pair three
times, in CI (it fits: see there). ``OPAL_MATRIX=once`` is the quicker run for when it no
longer does: each source into each target once (the whole session), the rewind and branch
resumes for the same-agent pairs only; the others are skipped, marked ``matrix_rest``.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from opalgit.agents import all_adapters

from . import drivers, harness
from .harness import ANSWER1, PROMPT2
from .history import Item, history_of
from .history import results_by_call as _results_by_call
from .history import shape as _shape

pytestmark = pytest.mark.clients

#: The matrix's agents: driven by the harness and read/written by an opal adapter.
AGENTS = [c for c in harness.CLIENTS if c in all_adapters()]
NEW_PROMPT = "TURN3: what did we change so far? [after-opal]"
NO_RESULT = "[opal: this tool call has no recorded result]"
#: The quicker run: the rewind and branch resumes for the same-agent pairs only.
ONCE = os.environ.get("OPAL_MATRIX") == "once"


def _opal(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return harness.opal(*args, cwd=cwd, env=env)


def matrix_scenario(client: str, proj: Path) -> harness.Scenario:
    """The source session: the two-turn script, then the parallel-calls turn where there is one."""
    t1, t2 = harness._scripts(client, proj)
    turns = [harness.Turn(harness.PROMPT1, t1), harness.Turn(harness.PROMPT2, t2)]
    try:
        parallel = harness._parallel_turns(client, proj)
    except ValueError:  # a driver without parallel_turns: its client makes one call a reply
        parallel = []
    turns += parallel[:1]
    return harness.Scenario("matrix", client, turns, note="shell+read; edit+write; three calls at once")


@dataclass
class Source:
    """One source agent's genuine session, imported by opal, with turn 1's end found."""

    client: str
    run: harness.ScenarioRun
    project: Path  #: the opal project holding the imported session (copied by each test)
    turn1: int  #: the turn number of turn 1's answer in the imported session
    expected: list[Item]  #: what the source client itself sent last, plus its final answer

    def copy(self, tmp: Path) -> Path:
        dst = tmp / "opal-project"
        shutil.copytree(self.project, dst, symlinks=True)
        return dst


def _env() -> dict:
    return dict(os.environ)


def _turn_of_answer1(project: Path, env: dict) -> int:
    turns = json.loads(_opal("log", "--turns", "--json", cwd=project, env=env).stdout)["turns"]
    for t in turns:
        if t["role"] != "assistant" or t["tool"]:
            continue
        shown = json.loads(_opal("show", f"HEAD:{t['turn']}", "--json", cwd=project, env=env).stdout)
        if any(b.get("type") == "text" and ANSWER1 in (b.get("text") or "") for b in shown["blocks"]):
            return t["turn"]
    raise AssertionError("turn 1's answer is not among the imported turns")


def _expected(gs) -> list[tuple]:
    """For a :class:`harness.GeneratedSession` (the two-turn session; test_opencode_resume and
    test_copilot_resume use it): what the source client itself replays, plus the final answer."""
    last = gs.turn2.requests[-1].body if gs.turn2.requests else None
    assert last is not None, "the source client sent no request in turn 2"
    return [tuple(i) for i in history_of(last, gs.client)] + [("assistant", harness.ANSWER2)]


def _import(gs, tmp: Path, env: dict) -> Path:
    """A new opal project holding ``gs``'s session (for the modules that import this one)."""
    project = tmp / "opal-project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _opal("init", cwd=project, env=env)
    _opal("commit", "--file", str(gs.path), "--agent", gs.client, "-m", f"{gs.client} session", cwd=project, env=env)
    return project


def _make_source(client: str, base: Path) -> Source:
    root = harness.make_root(base, prefix=f"src-{client}-")
    sc = matrix_scenario(client, root.project)
    run = harness.run_scenario(sc, root)
    assert run.ok and not run.server.remaining, run.describe()
    if len(sc.turns) == 3:  # the parallel turn: its three calls reached the model as one reply's
        assert 3 in _runs_of_calls(history_of(run.runs[-1].requests[-1].body, client)), run.describe()
    last = run.runs[-1].requests[-1].body if run.runs[-1].requests else None
    assert last is not None, f"{client} sent no request in its last turn"
    expected = history_of(last, client) + [Item("assistant", sc.turns[-1].replies[-1].text)]
    env = _env()
    project = base / f"opal-{client}"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _opal("init", cwd=project, env=env)
    _opal("commit", "--file", str(run.path), "--agent", client, "-m", f"{client} session", cwd=project, env=env)
    n = _turn_of_answer1(project, env)
    _opal("branch", "turn1", f"HEAD:{n}", cwd=project, env=env)
    return Source(client, run, project, n, expected)


class _Sources:
    """Each source made on first use, once per test session (a -k run makes only what it needs)."""

    def __init__(self, base: Path):
        self.base = base
        self.made: dict[str, Source] = {}
        self.failed: dict[str, str] = {}

    def __getitem__(self, client: str) -> Source:
        if client in self.failed:  # made once only: a failing client is not rerun by each of its pairs
            pytest.fail(f"the {client} source session could not be made (see its first pair):\n{self.failed[client]}")
        if client not in self.made:
            try:
                self.made[client] = _make_source(client, self.base)
            except AssertionError as exc:
                self.failed[client] = str(exc)[-2000:]
                raise
        return self.made[client]


@pytest.fixture(scope="session")
def sources(tmp_path_factory) -> _Sources:
    return _Sources(tmp_path_factory.mktemp("matrix-sources"))


# ---------------------------------------------------------------------------
# comparing histories


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


#: The project's files the scripts' calls name: which ones a call's arguments mention tells the
#: calls apart across agents, whose tools and argument names differ.
_FILES = (*harness.PROJECT_FILES, "notes.txt")


def _files_by_call(items) -> list[list[str]]:
    """For each call in order, the project files its arguments name (a call that lost or swapped
    its arguments, or calls reordered with their results, show here)."""
    return [sorted(f for f in _FILES if f in str(i[2])) for i in items if i[0] == "tool_call"]


def _check(got, want: list[tuple], report: dict) -> None:
    """The resumed history is ``want`` then the new prompt: counts, texts, pairing, grouping."""
    want = list(want) + [("user", NEW_PROMPT)]
    assert NO_RESULT not in json.dumps(got, ensure_ascii=False), "a synthesized result reached the model"
    assert report["report"]["dropped"].get("tool_result:orphan", 0) == 0, report["report"]
    assert _shape(got) == _shape(want), (report["report"], got)
    calls = [i for i in got if i[0] == "tool_call"]
    assert len(calls) == len([i for i in got if i[0] == "tool_result"]) == len([i for i in want if i[0] == "tool_call"])
    assert _runs_of_calls(got) == _runs_of_calls(want), "a reply's calls were split up or merged"
    assert _results_by_call(got) == _results_by_call(want), "a call got another call's result"
    assert _files_by_call(got) == _files_by_call(want), "a call's arguments name other files"


def _export_env(target: str, root, env_base: dict) -> dict:
    """opal's environment for an export that ``target`` resumes under ``root``: the client's own
    variables and folders (opencode's import, which opal runs, must write the database its resume
    reads, so XDG_* are where a client whose environment holds only HOME looks), the client on
    PATH, and the client's config written first where its driver module has ``write_config``
    (the export reads opencode's default model there)."""
    home = root.home
    env = dict(env_base, HOME=str(home), CODEX_HOME=str(root.codex_home), XDG_DATA_HOME=str(home / ".local" / "share"),
               XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"))
    env.pop("CLAUDE_CONFIG_DIR", None)
    env.update({k: v for k, v in harness.client_env(target, root, 9).items() if k != "PATH"})
    env["PATH"] = str(harness.client_bin(target).parent) + os.pathsep + env.get("PATH", "")
    if target in drivers.load():
        write_config = getattr(importlib.import_module(f"{drivers.__name__}.{target}"), "write_config", None)
        if write_config is not None:
            write_config(root, 9)  # the port is the run's: the driver rewrites it when the client starts
    return env


def _resume(target: str, root, rev: str, project: Path, env_base: dict):
    env = _export_env(target, root, env_base)
    res = json.loads(_opal("export", rev, "--to", target, "--cwd", str(root.project), "--json", cwd=project, env=env).stdout)
    with harness.mock_for(target, [harness.Reply("Noted. [turn3-done]")]) as srv:
        run = harness.run_client(target, root, srv.port, NEW_PROMPT, resume=res["session_id"], server=srv)
    assert run.ok, run.describe()
    model = [r for r in run.requests if r.kind == "model"] or run.requests
    assert model, f"{target} sent no model request on resume"
    return res, history_of(model[0].body, target)


def _pairs(rest: bool):
    """Every (source, target); with ``rest``, the pairs beyond the same-agent ones are ``matrix_rest``."""
    out = []
    for s in AGENTS:
        for t in AGENTS:
            marks = [pytest.mark.matrix_rest] if rest and s != t else []
            out.append(pytest.param(s, t, marks=marks, id=f"{s}-to-{t}"))
    return out


def _require(source: str, target: str, rest: bool = False) -> None:
    harness.require_client(source)
    harness.require_client(target)
    if rest and source != target and ONCE:
        pytest.skip("OPAL_MATRIX=once: rewound and on a branch for the same-agent pairs only (unset it for all)")


# ---------------------------------------------------------------------------
# the matrix


@pytest.mark.parametrize("source,target", _pairs(rest=False))
def test_resume_in_every_agent(source, target, sources, tmp_path):
    _require(source, target)
    src = sources[source]
    env = _env()
    project = src.copy(tmp_path)
    root = harness.make_root(tmp_path, prefix=f"to-{target}-")
    report, got = _resume(target, root, "HEAD", project, env)
    print(f"\nloss report {source} -> {target}: {json.dumps(report['report'], sort_keys=True)}")
    _check(got, src.expected, report)
    if source == target:
        # Same agent: exactly what the source client sent, project folders named alike.
        paths = [str(src.run.root.project), str(root.project)]
        assert _norm(got, paths) == _norm(src.expected + [("user", NEW_PROMPT)], paths), got
    if source == target == "claude":
        # The session the real client resumed, committed back: the records opal
        # exported are the stored ones, kept; only what the client added is new.
        before = json.loads(_opal("log", "-n", "1", "--json", cwd=project, env=env).stdout)["commits"][0]
        out = json.loads(_opal("commit", "--file", report["files"][0], "--agent", "claude", "--json",
                               cwd=project, env=env).stdout)
        assert any("continues the export" in n for n in out["notes"]), out
        assert 2 <= out["new_turns"] <= 4 and out["turns"] == before["turns"] + out["new_turns"], (before, out)
        tail = [json.loads(_opal("show", f"HEAD:{n}", "--json", cwd=project, env=env).stdout)
                for n in range(out["turns"] - out["new_turns"] + 1, out["turns"] + 1)]
        assert "[turn3-done]" in json.dumps(tail) and NEW_PROMPT in json.dumps(tail), tail


def _turn1(src: Source) -> list[Item]:
    """The expected history up to and with turn 1's answer."""
    cut = next(i for i, it in enumerate(src.expected) if it[0] == "assistant" and ANSWER1 in str(it[1])) + 1
    return src.expected[:cut]


@pytest.mark.parametrize("source,target", _pairs(rest=True))
def test_resume_after_rewind(source, target, sources, tmp_path):
    """After ``opal rewind`` to turn 1's answer: exactly turn 1, then the new prompt."""
    _require(source, target, rest=True)
    src = sources[source]
    env = _env()
    project = src.copy(tmp_path)
    _opal("rewind", "--to", f"HEAD:{src.turn1}", cwd=project, env=env)
    root = harness.make_root(tmp_path, prefix=f"rw-{target}-")
    report, got = _resume(target, root, "HEAD", project, env)
    _check(got, _turn1(src), report)
    assert not any(PROMPT2 in str(item) for item in got), "a rewound turn came back"


@pytest.mark.parametrize("source,target", _pairs(rest=True))
def test_resume_on_branch(source, target, sources, tmp_path):
    """On a branch made at turn 1's answer: the same history as after the rewind."""
    _require(source, target, rest=True)
    src = sources[source]
    env = _env()
    project = src.copy(tmp_path)
    root = harness.make_root(tmp_path, prefix=f"br-{target}-")
    report, got = _resume(target, root, "turn1", project, env)
    _check(got, _turn1(src), report)
    assert not any(PROMPT2 in str(item) for item in got), "a turn after the branch point came back"


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

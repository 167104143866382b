"""opencode with the real client: a genuine session into opal, out to opencode (``opencode
import``), resumed by opencode with its whole history; after a rewind and on a branch; Claude
into opencode and opencode into Claude; a broken import reported, not silent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opalgit import agents
from opalgit.agents.base import ExportRequest, ExportTurn
from opalgit.agents.opencode import write
from opalgit.errors import InputError

from . import harness
from .drivers import opencode as oc
from .harness import ANSWER1, PROMPT2
from .history import history_of
from .test_resume_matrix import NEW_PROMPT, _expected, _shape, _turn_of_answer1

pytestmark = pytest.mark.clients


def _opal(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return harness.opal(*args, cwd=cwd, env=env)


def _env_for(target: str, root) -> dict:
    """opal's environment for an export to ``target`` resumed under ``root``: the client's own
    (opencode's import must see the same data folder and config its resume will)."""
    env = dict(os.environ, HOME=str(root.home), CODEX_HOME=str(root.codex_home))
    env.pop("CLAUDE_CONFIG_DIR", None)
    if target == "opencode":
        oc.write_config(root, 9)
        own = oc.env(root, 9)
        env.update({k: v for k, v in own.items() if k != "PATH"})
        # Where opencode looks with only HOME set: opal must look there too, whatever this machine's XDG_* say.
        env.update(XDG_DATA_HOME=str(root.home / ".local" / "share"), XDG_CONFIG_HOME=str(root.home / ".config"),
                   XDG_CACHE_HOME=str(root.home / ".cache"))
        env["PATH"] = str(harness.client_bin("opencode").parent) + os.pathsep + env.get("PATH", "")
    return env


def _resume(target: str, root, rev: str, project: Path):
    env = _env_for(target, root)
    res = json.loads(_opal("export", rev, "--to", target, "--cwd", str(root.project), "--json",
                           cwd=project, env=env).stdout)
    sid = res["session_id"]
    with harness.mock_for(target, [harness.Reply("Noted. [turn3-done]")]) as srv:
        run = harness.run_client(target, root, srv.port, NEW_PROMPT, resume=sid, server=srv)
    assert run.ok, run.describe()
    model = [r for r in run.requests if r.kind == "model"]
    assert model, f"{target} sent no model request on resume"
    return res, [tuple(i) for i in history_of(model[0].body, target)]


def _import(gs, tmp: Path) -> tuple[Path, dict]:
    env = dict(os.environ)
    project = tmp / "opal-project"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    harness.opal("init", cwd=project, env=env)
    harness.opal("commit", "--file", str(gs.path), "--agent", gs.client, "-m", f"{gs.client} session",
                 cwd=project, env=env)
    return project, env


@pytest.fixture(scope="module")
def opencode_session(tmp_path_factory):
    harness.require_client("opencode")
    gs = harness.generate_session("opencode", base=tmp_path_factory.mktemp("oc"))
    assert gs.turn1.ok and gs.turn2.ok and gs.path, gs.describe()
    return gs


def _check_pair(gs, target: str, tmp_path: Path) -> None:
    harness.require_client(target)
    project, env = _import(gs, tmp_path)
    expected = _shape(_expected(gs))
    root = harness.make_root(tmp_path, prefix=f"to-{target}-")
    report, got = _resume(target, root, "HEAD", project)
    print(f"\nloss report {gs.client} -> {target}: {json.dumps(report['report'], sort_keys=True)}")
    assert _shape(got) == expected + [("user", NEW_PROMPT)], (report["report"], got)
    assert report["report"]["dropped"].get("tool_result:orphan", 0) == 0

    n = _turn_of_answer1(project, env)
    harness.opal("branch", "turn1", f"HEAD:{n}", cwd=project, env=env)
    harness.opal("rewind", "--to", f"HEAD:{n}", cwd=project, env=env)
    cut = expected.index(("assistant", " ".join(ANSWER1.split()))) + 1
    _, got = _resume(target, harness.make_root(tmp_path, prefix=f"rw-{target}-"), "HEAD", project)
    assert _shape(got) == expected[:cut] + [("user", NEW_PROMPT)], got
    assert not any(PROMPT2 in str(item) for item in got), "a rewound turn came back"
    _, got = _resume(target, harness.make_root(tmp_path, prefix=f"br-{target}-"), "turn1", project)
    assert _shape(got) == expected[:cut] + [("user", NEW_PROMPT)], got


def test_opencode_into_opencode_resumes_with_the_whole_history(opencode_session, tmp_path):
    """Same agent: the records go back as they were (new ids), and the resumed request is the
    one opencode itself sent at the end of turn 2, exactly, then the new prompt."""
    gs = opencode_session
    project, env = _import(gs, tmp_path)
    root = harness.make_root(tmp_path, prefix="same-")
    report, got = _resume("opencode", root, "HEAD", project)
    live = [tuple(i) for i in history_of(gs.turn2.requests[-1].body, "opencode")]
    want = [i for i in live] + [("assistant", harness.ANSWER2), ("user", NEW_PROMPT)]
    assert [i[:2] if i[0] != "tool_result" else (i[0], i[2]) for i in got] == \
        [i[:2] if i[0] != "tool_result" else (i[0], i[2]) for i in want], got
    assert report["report"]["converted"] == {} and report["report"]["dropped"] == {}, report["report"]
    assert any("imported into opencode" in n and "checked in its database" in n for n in report["report"]["notes"])
    _check_pair(gs, "opencode", tmp_path / "pair")


def test_claude_into_opencode(tmp_path):
    harness.require_client("claude")
    harness.require_client("opencode")
    _check_pair(harness.cached_session("claude"), "opencode", tmp_path)


def test_opencode_into_claude(opencode_session, tmp_path):
    _check_pair(opencode_session, "claude", tmp_path)


def test_a_broken_import_is_reported_with_how_to_clean_up(opencode_session, tmp_path):
    """A part missing a field opencode validates: import fails part way, opencode keeps what it
    wrote; opal's check says so (an error naming the session and the cleanup), never silence."""
    gs = opencode_session
    root = harness.make_root(tmp_path, prefix="broken-")
    env = _env_for("opencode", root)
    doc = json.loads(Path(gs.path).read_text())
    del doc["messages"][3]["parts"][1]["type"]  # a late message's part: the earlier ones get in
    bad = root.path / "bad.json"
    bad.write_text(json.dumps(doc))
    ad = agents.get("opencode")
    src = ad.read(str(gs.path))
    # The real exporter's import step, on the damaged file (the export itself never writes one).
    req = ExportRequest(turns=[ExportTurn(r.turn, r.normal) for r in src.records], session=src.session,
                        cwd=str(root.project), session_id="0c0ffee0-0000-4000-8000-000000000001", env=env,
                        now_ms=1_800_000_000_000)
    with pytest.raises(InputError) as info:
        write._import(req, str(bad), doc["info"]["id"], len(doc["messages"]),
                      sum(len(m["parts"]) for m in doc["messages"]))
    msg = str(info.value) + " " + str(getattr(info.value, "hint", ""))
    assert "opencode import failed" in msg and "does not undo" in msg, msg
    assert "opencode session delete" in msg or "nothing arrived" in msg, msg


PARALLEL = harness.REPO / "tests" / "fixtures" / "opencode" / "generated" / "structures" / "parallel"


@pytest.mark.parametrize("target", ["opencode", "claude"])
def test_the_parallel_calls_fixture_resumes_with_its_history(target, tmp_path):
    """The genuine parallel-calls session (three, then two calls in one step): committed from the
    fixture, exported, resumed; the history is the one opencode itself sent last, then the answer
    and the new prompt (calls as calls with their results; the ids and paths are the target's)."""
    harness.require_client("opencode")
    harness.require_client(target)
    exp = json.loads((PARALLEL / "expected.json").read_text())
    gs = type("G", (), {"path": PARALLEL / exp["file"], "client": "opencode"})()
    project, _ = _import(gs, tmp_path)
    root = harness.make_root(tmp_path, prefix=f"par-{target}-")
    report, got = _resume(target, root, "HEAD", project)
    want = [tuple(i) for i in exp["history"]] + [("assistant", exp["final_answer"]), ("user", NEW_PROMPT)]
    assert _shape(got) == _shape(want), (report["report"], got)
    assert report["report"]["dropped"].get("tool_result:orphan", 0) == 0


def test_the_resumed_session_commits_from_the_database_and_exports_again(opencode_session, tmp_path):
    """The workflow a user runs: commit, export, resume in opencode, commit the resumed session
    (found in opencode's database, read read-only), export that state and resume it again: the
    second resume sees the first resume's turn too, and a commit with nothing new says so."""
    project, env = _import(opencode_session, tmp_path)
    root = harness.make_root(tmp_path, prefix="flow-")
    report, _ = _resume("opencode", root, "HEAD", project)
    oenv = _env_for("opencode", root)
    db = root.home / ".local" / "share" / "opencode" / "opencode.db"
    before = db.stat().st_mtime_ns
    out = json.loads(_opal("commit", "--agent", "opencode", "--session", report["session_id"], "--json",
                           cwd=project, env=oenv).stdout)
    assert out["new_turns"] >= 2, out
    shown = json.dumps([json.loads(_opal("show", f"HEAD:{n}", "--json", cwd=project, env=oenv).stdout)
                        for n in range(out["turns"] - out["new_turns"] + 1, out["turns"] + 1)])
    assert NEW_PROMPT in shown and "[turn3-done]" in shown
    assert db.stat().st_mtime_ns == before, "opal wrote opencode's database"
    again = subprocess.run([sys.executable, "-m", "opalgit", "commit", "--agent", "opencode", "--session",
                            report["session_id"]], cwd=project, env=oenv, capture_output=True, text=True)
    assert "nothing to commit" in again.stdout + again.stderr, again
    root2 = harness.make_root(tmp_path, prefix="flow2-")
    _, got = _resume("opencode", root2, "HEAD", project)
    assert ("user", NEW_PROMPT) in got and ("assistant", "Noted. [turn3-done]") in got, got

"""Pi, proven with the real client: genuine Pi sessions through opal and back into Pi, the
other agents' sessions into Pi, and Pi's into them.

A genuine two-turn session (a shell call and a read; an edit with ``edits[]`` and a write) is
made by the real Pi 1.6.0 against the chat-completions mock, imported with ``opal commit
--file``, exported with ``opal export --to``, and resumed by the target's real client: the
first request it sends must hold the whole history in order, then the new prompt; the same
after ``opal rewind`` and on a branch. A session whose tree the real Pi branched (the
``/opal-branch`` extension command, what ``/tree`` does) is imported as two opal branches,
and each resumes in Pi with exactly its own line of conversation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from opalgit.agents.pi.files import project_key

from . import harness
from . import test_structured_sessions as structures
from .drivers import pi
from .harness import ANSWER1, ANSWER2, PROMPT1, PROMPT2
from .history import history_of

pytestmark = pytest.mark.clients

NEW_PROMPT = "TURN3: what did we change so far? [after-opal]"


def _opal(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return harness.opal(*args, cwd=cwd, env=env)


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def _shape(items) -> list[tuple]:
    """Comparable across agents: prompts, answers and result texts in order; a call as a call."""
    out = []
    for it in items:
        if it[0] in ("user", "assistant"):
            out.append((it[0], _norm(it[1])))
        elif it[0] == "tool_call":
            out.append(("tool_call",))
        elif it[0] == "tool_result":
            out.append(("tool_result", _norm(it[2])[:60]))
    return out


def _expected(gs) -> list[tuple]:
    """What the source client itself sent for its session in its last request, plus the answer."""
    return _shape(history_of(gs.turn2.requests[-1].body, gs.client)) + [("assistant", _norm(ANSWER2))]


@pytest.fixture(scope="module")
def pi_session(tmp_path_factory):
    harness.require_client("pi")
    gs = harness.generate_session("pi", base=tmp_path_factory.mktemp("pi-source"))
    assert gs.turn1.ok and gs.turn2.ok and gs.path, gs.describe()
    return gs


def _import(path: Path, agent: str, tmp: Path, env: dict) -> tuple[Path, dict]:
    project = tmp / "opal-project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _opal("init", cwd=project, env=env)
    out = _opal("commit", "--file", str(path), "--agent", agent, "-m", f"{agent} session", "--json", cwd=project, env=env)
    return project, json.loads(out.stdout)


def _resume(target: str, root, rev: str, project: Path, env: dict) -> tuple[dict, list[tuple]]:
    """``opal export REV --to TARGET`` into ``root``, then the target's real client resumes it."""
    env = dict(env, HOME=str(root.home), CODEX_HOME=str(root.codex_home))
    env.pop("CLAUDE_CONFIG_DIR", None)
    res = json.loads(_opal("export", rev, "--to", target, "--cwd", str(root.project), "--json",
                           cwd=project, env=env).stdout)
    with harness.mock_for(target, [harness.Reply("Noted. [turn3-done]")]) as srv:
        run = harness.run_client(target, root, srv.port, NEW_PROMPT, resume=res["session_id"], server=srv)
    assert run.ok, run.describe()
    assert run.requests, f"{target} sent no model request on resume:\n{run.describe()}"
    return res, [tuple(i) for i in history_of(run.requests[0].body, target)]


def _turn_of(project: Path, env: dict, text: str) -> int:
    for t in json.loads(_opal("log", "--turns", "--json", cwd=project, env=env).stdout)["turns"]:
        shown = json.loads(_opal("show", f"HEAD:{t['turn']}", "--json", cwd=project, env=env).stdout)
        if any(b.get("type") == "text" and text in (b.get("text") or "") for b in shown["blocks"]):
            return t["turn"]
    raise AssertionError(f"no imported turn says {text!r}")


def test_a_pi_session_resumes_in_pi_whole_after_a_rewind_and_on_a_branch(pi_session, tmp_path):
    env = dict(os.environ)
    project, _ = _import(pi_session.path, "pi", tmp_path, env)
    expected = _expected(pi_session)

    root = harness.make_root(tmp_path, prefix="to-pi-")
    res, got = _resume("pi", root, "HEAD", project, env)
    assert _shape(got) == expected + [("user", NEW_PROMPT)], got
    assert res["report"] == {"converted": {}, "dropped": {}, "notes": []}, res["report"]
    # The exported file is where Pi looks for the folder it is resumed from, header cwd = that folder.
    path = Path(res["files"][0])
    assert path.parent == root.home / ".pi" / "agent" / "sessions" / project_key(str(root.project))
    assert json.loads(path.read_text().splitlines()[0])["cwd"] == str(root.project)

    # The session the real client resumed, committed back: only what Pi added is new.
    before = json.loads(_opal("log", "-n", "1", "--json", cwd=project, env=env).stdout)["commits"][0]
    out = json.loads(_opal("commit", "--file", str(path), "--agent", "pi", "--json", cwd=project, env=env).stdout)
    assert out["turns"] == before["turns"] + out["new_turns"] and 1 <= out["new_turns"] <= 3, (before, out)
    _opal("undo", cwd=project, env=env)

    n = _turn_of(project, env, ANSWER1)
    _opal("branch", "turn1", f"HEAD:{n}", cwd=project, env=env)
    _opal("rewind", "--to", f"HEAD:{n}", cwd=project, env=env)
    cut = expected.index(("assistant", _norm(ANSWER1))) + 1
    for rev, prefix in (("HEAD", "rw-pi-"), ("turn1", "br-pi-")):
        _, got = _resume("pi", harness.make_root(tmp_path, prefix=prefix), rev, project, env)
        assert _shape(got) == expected[:cut] + [("user", NEW_PROMPT)], (rev, got)
        assert not any(PROMPT2 in str(item) for item in got), f"{rev}: a rewound turn came back"


def _entry_saying(path: Path, text: str) -> str:
    for line in path.read_text().splitlines():
        e = json.loads(line)
        msg = e.get("message") or {}
        if msg.get("role") == "assistant" and any(c.get("text") == text for c in msg.get("content") or []):
            return e["id"]
    raise AssertionError(text)


def test_a_tree_the_real_pi_branched_is_two_branches_each_resuming_its_own_line(tmp_path):
    harness.require_client("pi")
    root = harness.make_root(tmp_path, prefix="pi-branch-")
    t1, t2 = pi.scripts(root.project)
    with harness.mock_for("pi", t1) as srv:
        sid = str(uuid.uuid4())
        runs = [pi.run_pi(root, srv.port, PROMPT1, session_id=sid, server=srv)]
        srv.add(*t2)
        runs.append(pi.run_pi(root, srv.port, PROMPT2, resume=sid, server=srv))
        path = pi.pi_session_file(root, sid)
        runs.append(pi.make_branch(root, srv, sid, _entry_saying(path, ANSWER1)))
        assert all(r.ok for r in runs) and not srv.remaining, "\n".join(r.describe() for r in runs)
        branched = _shape(history_of(srv.model_requests[-1].body, "pi")) + [("assistant", _norm(pi.B_ANSWER))]
        linear = _shape(history_of(srv.model_requests[len(t1) + len(t2) - 1].body, "pi")) + [("assistant", _norm(ANSWER2))]
    env = dict(os.environ)
    project, out = _import(path, "pi", tmp_path, env)
    assert len(out["fork_branches"]) == 1, out
    fork = out["fork_branches"][0]
    # HEAD is the line Pi itself resumes (the branch made last); the fork branch is turn 2's line.
    for rev, want, never in (("HEAD", branched, PROMPT2), (fork, linear, pi.B_PROMPT)):
        _, got = _resume("pi", harness.make_root(tmp_path, prefix="tree-"), rev, project, env)
        assert _shape(got) == want + [("user", NEW_PROMPT)], (rev, got)
        assert not any(never in str(item) for item in got), (rev, got)


@pytest.mark.parametrize("source", ["claude", "codex", "gemini"])
def test_another_agents_session_resumes_in_pi(source, tmp_path):
    harness.require_client(source)
    harness.require_client("pi")
    gs = harness.cached_session(source)
    assert gs.turn1.ok and gs.turn2.ok and gs.path, gs.describe()
    env = dict(os.environ)
    project, _ = _import(gs.path, source, tmp_path, env)
    res, got = _resume("pi", harness.make_root(tmp_path, prefix=f"{source}-to-pi-"), "HEAD", project, env)
    print(f"\nloss report {source} -> pi: {json.dumps(res['report'], sort_keys=True)}")
    assert _shape(got) == _expected(gs) + [("user", NEW_PROMPT)], (res["report"], got)
    assert res["report"]["dropped"].get("tool_result:orphan", 0) == 0
    assert res["report"]["converted"].get("tool_result:synthesized", 0) == 0


@pytest.mark.parametrize("target", ["claude", "codex", "gemini"])
def test_a_pi_session_resumes_in_another_agent(target, pi_session, tmp_path):
    harness.require_client(target)
    env = dict(os.environ)
    project, _ = _import(pi_session.path, "pi", tmp_path, env)
    res, got = _resume(target, harness.make_root(tmp_path, prefix=f"pi-to-{target}-"), "HEAD", project, env)
    print(f"\nloss report pi -> {target}: {json.dumps(res['report'], sort_keys=True)}")
    assert _shape(got) == _expected(pi_session) + [("user", NEW_PROMPT)], (res["report"], got)
    assert res["report"]["dropped"].get("tool_result:orphan", 0) == 0


def test_a_malformed_pi_session_is_one_error_naming_file_and_line(pi_session, tmp_path):
    lines = pi_session.path.read_bytes().split(b"\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join([lines[1], *lines[:1], *lines[2:]]))  # an entry before the header
    project = tmp_path / "p"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    env = dict(os.environ)
    _opal("init", cwd=project, env=env)
    before = subprocess.run(["git", "for-each-ref"], cwd=project, capture_output=True, text=True).stdout
    proc = subprocess.run([sys.executable, "-m", "opalgit", "commit", "--file", str(bad), "--agent", "pi"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert f"{bad}:1" in proc.stderr and "Pi session header" in proc.stderr, proc.stderr
    assert subprocess.run(["git", "for-each-ref"], cwd=project, capture_output=True, text=True).stdout == before


PARALLEL_PAIRS = [("pi", t) for t in ("pi", "claude", "codex", "gemini")] + [(s, "pi") for s in ("claude", "codex", "gemini")]


@pytest.mark.parametrize("source,target", PARALLEL_PAIRS, ids=[f"{s}-to-{t}" for s, t in PARALLEL_PAIRS])
def test_parallel_calls_resume_with_pi(source, target, tmp_path):
    """The genuine parallel-calls sessions (tests/fixtures/<agent>/generated/structures/parallel):
    a reply's calls stay one reply, each with its own result, Pi as source or as target."""
    harness.require_client(target)
    exp = structures._expected(source, "parallel")
    env = dict(os.environ)
    project = structures._import(exp["path"], source, tmp_path, env)
    report, root, got = structures._export_and_resume(target, project, tmp_path, env)
    print(f"\nloss report {source} -> {target} (parallel): {json.dumps(report['report'], sort_keys=True)}")
    structures._check_resume(exp, target, report, root, got)


def test_a_session_the_real_pi_compacted_resumes_as_pi_sent_it(tmp_path):
    """Into Pi, the compaction stays Pi's: the resumed request is what Pi itself sent after it
    (the summary and the entries it kept); into Claude, the summary is a user turn of the history."""
    harness.require_client("pi")
    root = harness.make_root(tmp_path, prefix="pi-compact-")
    t1, _ = pi.scripts(root.project)
    with harness.mock_for("pi", t1) as srv:
        sid = str(uuid.uuid4())
        runs = [pi.run_pi(root, srv.port, PROMPT1, session_id=sid, server=srv)]
        runs.append(pi.make_compaction(root, srv, sid))
        assert all(r.ok for r in runs) and not srv.remaining, "\n".join(r.describe() for r in runs)
        live = [tuple(i) for i in history_of(srv.model_requests[-1].body, "pi")]
    path = pi.pi_session_file(root, sid)
    summary = next(json.loads(x)["summary"] for x in path.read_text().splitlines() if '"type":"compaction"' in x)
    assert any(summary in str(i[1]) for i in live if i[0] == "user"), live
    env = dict(os.environ)
    project, _ = _import(path, "pi", tmp_path, env)
    _, got = _resume("pi", harness.make_root(tmp_path, prefix="c-to-pi-"), "HEAD", project, env)
    assert _shape(got) == _shape(live) + [("assistant", _norm(pi.C_ANSWER)), ("user", NEW_PROMPT)], got
    if harness.have_client("claude"):
        res, got = _resume("claude", harness.make_root(tmp_path, prefix="c-to-claude-"), "HEAD", project, env)
        print(f"\nloss report pi (compacted) -> claude: {json.dumps(res['report'], sort_keys=True)}")
        assert any(summary in str(i[1]) for i in got if i[0] == "user"), got
        assert ("user", _norm(PROMPT1)) in _shape(got) and _shape(got)[-1] == ("user", NEW_PROMPT)

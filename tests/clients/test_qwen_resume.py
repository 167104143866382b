"""Qwen Code with the real client (0.24.4, offline against the chat-completions mock):
a genuine Qwen session and the other agents' genuine sessions, committed by opal,
exported into Qwen Code (and Qwen's into the others) and resumed by the target's real
client. The parallel-calls sessions of every pair with Qwen Code on one side (the checks of
:mod:`.test_structured_sessions`), where the export is, and a resumed session committed
back; the two-turn sessions of those pairs, whole, rewound and on a branch, are the resume
matrix's (:mod:`.test_resume_matrix`).
"""

from __future__ import annotations

import json
import os

import pytest

from . import harness
from . import test_resume_matrix as matrix
from . import test_structured_sessions as structured

pytestmark = pytest.mark.clients

OTHERS = ["claude", "codex", "gemini"]
PAIRS = [("qwen", "qwen")] + [(o, "qwen") for o in OTHERS] + [("qwen", o) for o in OTHERS]


@pytest.fixture(scope="module")
def sources():
    """One genuine two-turn session per source client (the Claude one is the shared cached
    session of harness.cached_session)."""
    return {n: harness.cached_session(n) for n in ["qwen", *OTHERS] if harness.have_client(n)}


# The two-turn session of every pair with Qwen (whole, after a rewind, on a branch) is the
# resume matrix's (tests/clients/test_resume_matrix.py, every pair of the seven agents).


@pytest.mark.parametrize("source,target", PAIRS, ids=[f"{s}-to-{t}" for s, t in PAIRS])
def test_parallel_calls_resume(source, target, tmp_path):
    """The genuine parallel-calls sessions (3 then 2 calls in one reply): a reply's calls
    stay together and each gets its own real result."""
    harness.require_client(source)
    structured.test_parallel_calls_resume_in_every_agent(source, target, tmp_path)


def test_the_export_is_where_qwen_looks_and_its_first_record_names_the_folder(sources, tmp_path):
    """What ``qwen --resume`` checks: the file in the current project's chats folder, the
    first record's cwd that project, one sessionId, a parentUuid chain."""
    harness.require_client("qwen")
    gs = sources["qwen"]
    env = dict(os.environ)
    project = matrix._import(gs, tmp_path, env)
    root = harness.make_root(tmp_path, prefix="where-")
    env = dict(env, HOME=str(root.home))
    res = json.loads(harness.opal("export", "HEAD", "--to", "qwen", "--cwd", str(root.project), "--json",
                                  cwd=project, env=env).stdout)
    path = res["files"][0]
    from tests.clients.drivers.qwen import project_key

    assert path == str(root.home / ".qwen" / "projects" / project_key(root.project) / "chats" /
                       f"{res['session_id']}.jsonl")
    recs = [json.loads(line) for line in open(path)]
    assert recs[0]["cwd"] == str(root.project)
    assert {r["sessionId"] for r in recs} == {res["session_id"]}
    assert [r["parentUuid"] for r in recs] == [None] + [r["uuid"] for r in recs[:-1]]
    # from another folder Qwen Code does not find it (what the first record's cwd is for)
    other = root.path / "elsewhere"
    other.mkdir()
    with harness.mock_for("qwen", [harness.Reply("never")]) as srv:
        run = harness.run_client("qwen", root, srv.port, "hello", resume=res["session_id"], cwd=other, server=srv)
    assert run.returncode != 0 and not [r for r in run.requests if r.kind == "model"], run.describe()


def test_the_resumed_session_committed_back_continues_the_export(sources, tmp_path):
    """The session Qwen Code resumed, committed back: the exported records are the stored
    ones (ExportResult.prefix), only what the client added is new."""
    harness.require_client("qwen")
    gs = sources["qwen"]
    env = dict(os.environ)
    project = matrix._import(gs, tmp_path, env)
    root = harness.make_root(tmp_path, prefix="again-")
    env = dict(env, HOME=str(root.home))
    before = json.loads(harness.opal("log", "-n", "1", "--json", cwd=project, env=env).stdout)["commits"][0]
    res = json.loads(harness.opal("export", "HEAD", "--to", "qwen", "--cwd", str(root.project), "--json",
                                  cwd=project, env=env).stdout)
    with harness.mock_for("qwen", [harness.Reply("Noted. [turn3-done]")]) as srv:
        run = harness.run_client("qwen", root, srv.port, matrix.NEW_PROMPT, resume=res["session_id"], server=srv)
    assert run.ok, run.describe()
    out = json.loads(harness.opal("commit", "--file", res["files"][0], "--agent", "qwen", "--json",
                                  cwd=project, env=env).stdout)
    assert any("continues the export" in n for n in out["notes"]), out
    assert out["turns"] == before["turns"] + out["new_turns"] and 2 <= out["new_turns"] <= 4, (before, out)
    tail = [json.loads(harness.opal("show", f"HEAD:{n}", "--json", cwd=project, env=env).stdout)
            for n in range(out["turns"] - out["new_turns"] + 1, out["turns"] + 1)]
    assert "[turn3-done]" in json.dumps(tail) and matrix.NEW_PROMPT in json.dumps(tail), tail

"""GitHub Copilot CLI sessions through opal, proven with the real clients.

A genuine two-turn Copilot session (made by the pinned ``copilot`` against the chat-completions
mock) is committed (``opal commit --file``), exported (``opal export --to``) and resumed by the
target's real client; the request it sends holds the whole history, compared by texts (Copilot
resumes a log whose results were lost too, inventing "interrupted" results, so counts alone prove
nothing). Both ways: Copilot into itself and into Claude Code, Codex and Gemini, and each of
those agents' genuine sessions into Copilot; after ``opal rewind`` and on a branch too; the
genuine parallel-call sessions (replies with three, then two, calls) the same ways. Then a
secret in a tool's output: what Copilot masks itself and what opal redacts, end to end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from . import harness
from . import test_structured_sessions as structured
from .harness import ANSWER1, PROMPT2
from .history import history_of
from .mockservers import Reply, ToolCall
from .test_resume_matrix import NEW_PROMPT, _expected, _import, _shape, _turn_of_answer1

pytestmark = pytest.mark.clients

OTHERS = ["claude", "codex", "gemini"]
PAIRS = [("copilot", "copilot")] + [(a, "copilot") for a in OTHERS] + [("copilot", a) for a in OTHERS]


def _opal(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return harness.opal(*args, cwd=cwd, env=env)


def _env() -> dict:
    env = dict(os.environ)
    for key in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME", "GEMINI_CLI_HOME"):
        env.pop(key, None)
    return env


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    out = {}
    base = tmp_path_factory.mktemp("copilot-sources")
    for name in ["copilot", *OTHERS]:
        if not harness.have_client(name):
            continue
        gs = harness.generate_session(name, base=base)
        assert gs.turn1.ok and gs.turn2.ok and gs.path, gs.describe()
        out[name] = gs
    return out


def _resume(target: str, root, rev: str, project: Path, env_base: dict, prompt: str = NEW_PROMPT):
    """Export ``rev`` to ``target`` under ``root`` and resume it with the real client: the
    export's JSON and the history of the first model request of the resumed run."""
    env = dict(env_base, HOME=str(root.home), CODEX_HOME=str(root.codex_home))
    res = json.loads(_opal("export", rev, "--to", target, "--cwd", str(root.project), "--json",
                           cwd=project, env=env).stdout)
    with harness.mock_for(target, [Reply("Noted. [turn3-done]")]) as srv:
        run = harness.run_client(target, root, srv.port, prompt, resume=res["session_id"], server=srv)
    assert run.ok, run.describe()
    model = [r for r in run.requests if r.kind == "model"]
    assert model, f"{target} sent no model request on resume\n{run.describe()}"
    return res, [tuple(i) for i in history_of(model[0].body, target)], run


@pytest.mark.parametrize("source,target", PAIRS, ids=[f"{s}-to-{t}" for s, t in PAIRS])
def test_a_session_resumes_with_its_whole_history(source, target, sources, tmp_path):
    harness.require_client(source)
    harness.require_client(target)
    gs = sources[source]
    env = _env()
    project = _import(gs, tmp_path, env)
    expected = _shape(_expected(gs))

    root = harness.make_root(tmp_path, prefix=f"to-{target}-")
    report, got, _ = _resume(target, root, "HEAD", project, env)
    print(f"\nloss report {source} -> {target}: {json.dumps(report['report'], sort_keys=True)}")
    assert _shape(got) == expected + [("user", NEW_PROMPT)], (report["report"], got)
    assert report["report"]["dropped"].get("tool_result:orphan", 0) == 0
    assert "tool_result:synthesized" not in report["report"]["converted"], report["report"]
    if source == target == "copilot":
        # Exactly what Copilot itself sent (call ids, arguments, result texts), then the new prompt.
        assert got == [tuple(i) for i in _expected(gs)] + [("user", NEW_PROMPT)]
        # The resumed session, committed back, continues the export: only Copilot's new events are stored.
        before = json.loads(_opal("log", "-n", "1", "--json", cwd=project, env=env).stdout)["commits"][0]
        out = json.loads(_opal("commit", "--file", report["files"][0], "--agent", "copilot", "--json",
                               cwd=project, env=env).stdout)
        assert any("continues the export" in n for n in out["notes"]), out
        assert out["turns"] == before["turns"] + out["new_turns"] and out["new_turns"] >= 2, (before, out)
        tail = [json.loads(_opal("show", f"HEAD:{n}", "--json", cwd=project, env=env).stdout)
                for n in range(out["turns"] - out["new_turns"] + 1, out["turns"] + 1)]
        assert "[turn3-done]" in json.dumps(tail) and NEW_PROMPT in json.dumps(tail), tail
        _opal("undo", cwd=project, env=env)

    # After a rewind to turn 1's answer: exactly turn 1, then the new prompt.
    n = _turn_of_answer1(project, env)
    _opal("branch", "turn1", f"HEAD:{n}", cwd=project, env=env)
    _opal("rewind", "--to", f"HEAD:{n}", cwd=project, env=env)
    cut = expected.index(("assistant", " ".join(ANSWER1.split()))) + 1
    _, got, _ = _resume(target, harness.make_root(tmp_path, prefix=f"rw-{target}-"), "HEAD", project, env)
    assert _shape(got) == expected[:cut] + [("user", NEW_PROMPT)], got
    assert not any(PROMPT2 in str(item) for item in got), "a rewound turn came back"

    # On a branch made at the same turn: the same history.
    _, got, _ = _resume(target, harness.make_root(tmp_path, prefix=f"br-{target}-"), "turn1", project, env)
    assert _shape(got) == expected[:cut] + [("user", NEW_PROMPT)], got


# ---------------------------------------------------------------------------
# a secret in a tool's output

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SECRET_FILES = {"config.env": f"github_token={TOKEN}\nother=1\n", "README.md": "# demo\n"}


def _secret_session(client: str, tmp_path: Path, shell: str) -> Path:
    root = harness.make_root(tmp_path, prefix=f"secret-{client}-", files=SECRET_FILES)
    call = ToolCall(shell, {"command": "cat config.env", "description": "Show the config"})
    sc = harness.Scenario("secret", client, [harness.Turn("show me config.env", [Reply("Reading it.", [call]),
                                                                                Reply("It sets a token.")])])
    run = harness.run_scenario(sc, root)
    assert run.ok, run.describe()
    return run.path


def _tool_results(items) -> list[str]:
    return [it[2] for it in items if it[0] == "tool_result"]


def test_copilot_masks_a_token_itself_and_opal_has_nothing_to_redact(tmp_path):
    """Copilot writes ``github_token=******`` where its shell printed the token, so the log it
    stores never holds it: opal's commit redacts nothing, and the masked text is what comes back."""
    harness.require_client("copilot")
    path = _secret_session("copilot", tmp_path, "bash")
    text = path.read_text()
    assert TOKEN not in text and "github_token=******" in text
    env = _env()
    project = tmp_path / "opal-project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _opal("init", cwd=project, env=env)
    done = _opal("commit", "--file", str(path), "--agent", "copilot", "-m", "masked", cwd=project, env=env)
    assert "secret" not in done.stderr, done.stderr
    _, got, _ = _resume("copilot", harness.make_root(tmp_path, prefix="masked-"), "HEAD", project, env)
    assert _tool_results(got) == ["github_token=******\nother=1\n<shellId: 0 completed with exit code 0>"]


def test_a_redacted_token_from_another_agent_is_not_masked_again(tmp_path):
    """A Claude session's tool output holds the token: opal's commit puts a placeholder in its
    place. Exported without secrets, Copilot sends the placeholder exactly (its masking touches only
    what its own tools print, never a stored history); exported with them, the token is back in the
    log and Copilot sends it as stored, as Claude would; importing that resumed log redacts it again."""
    harness.require_client("claude")
    harness.require_client("copilot")
    path = _secret_session("claude", tmp_path, "Bash")
    assert TOKEN in path.read_text()
    env = _env()
    project = tmp_path / "opal-project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _opal("init", cwd=project, env=env)
    done = _opal("commit", "--file", str(path), "--agent", "claude", "-m", "with a token", cwd=project, env=env)
    assert "1 secret replaced by placeholders" in done.stderr, done.stderr

    root = harness.make_root(tmp_path, prefix="no-secrets-")
    e = dict(env, HOME=str(root.home))
    res = json.loads(_opal("export", "--to", "copilot", "--cwd", str(root.project), "--no-secrets", "--json",
                           cwd=project, env=e).stdout)
    body = Path(res["files"][0]).read_text()
    assert TOKEN not in body and "opal-secret:github-token:" in body
    with harness.mock_for("copilot", [Reply("Noted.")]) as srv:
        run = harness.run_client("copilot", root, srv.port, NEW_PROMPT, resume=res["session_id"], server=srv)
    assert run.ok, run.describe()
    sent = _tool_results(history_of(srv.model_requests[0].body, "copilot"))
    assert len(sent) == 1 and sent[0].startswith("github_token=opal-secret:github-token:"), sent
    assert TOKEN not in json.dumps(srv.model_requests[0].body)

    root = harness.make_root(tmp_path, prefix="with-secrets-")
    res, got, _ = _resume("copilot", root, "HEAD", project, env)
    assert _tool_results(got) == [f"github_token={TOKEN}\nother=1"]
    other = tmp_path / "another-project"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    _opal("init", cwd=other, env=env)
    again = _opal("commit", "--file", res["files"][0], "--agent", "copilot", "-m", "resumed", cwd=other, env=env)
    assert "1 secret replaced by placeholders" in again.stderr, again.stderr


# ---------------------------------------------------------------------------
# replies with several calls at once (the genuine parallel-call sessions)

PARALLEL_PAIRS = [(a, "copilot") for a in OTHERS] + [("copilot", t) for t in ["copilot", *OTHERS]]


def _parallel_expected(client: str) -> dict:
    if client != "copilot":
        return structured._expected(client, "parallel")
    folder = harness.REPO / "tests" / "fixtures" / "copilot" / "generated" / "parallel"
    exp = json.loads((folder / "expected.json").read_text())
    exp["path"] = folder / exp["file"]
    return exp


def _import_parallel(exp: dict, client: str, tmp: Path, env: dict) -> Path:
    if client != "copilot":
        return structured._import(exp["path"], client, tmp, env)
    # The whole session folder, where Copilot keeps it, so its side files are committed too.
    folder = exp["path"].parent
    copy = tmp / "src" / "session-state" / folder.name
    shutil.copytree(folder, copy)
    project = tmp / "opal-project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    _opal("init", cwd=project, env=env)
    _opal("commit", "--file", str(copy / "events.jsonl"), "--agent", "copilot", "-m", "parallel", cwd=project, env=env)
    return project


@pytest.mark.parametrize("source,target", PARALLEL_PAIRS, ids=[f"{s}-to-{t}" for s, t in PARALLEL_PAIRS])
def test_parallel_calls_resume_together_with_their_results(source, target, tmp_path):
    """Each reply's calls stay one reply, each paired with its own real result (Copilot finishes
    them out of order and sends them in call order; Claude sends them as they finished)."""
    harness.require_client(target)
    exp = _parallel_expected(source)
    env = _env()
    project = _import_parallel(exp, source, tmp_path, env)
    report, root, got = structured._export_and_resume(target, project, tmp_path, env)
    print(f"\nloss report (parallel) {source} -> {target}: {json.dumps(report['report'], sort_keys=True)}")
    structured._check_resume(exp, target, report, root, got)

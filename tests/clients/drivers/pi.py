"""Pi 1.6.0 (npm ``@earendil-works/pi-coding-agent``), driven offline against the chat-completions mock.

Needs node >= 22.19 (``.agents/node22`` first on PATH). The provider is a custom one in
``~/.pi/agent/models.json`` (``api: openai-completions``) pointing at the mock; ``PI_OFFLINE``
keeps it from fetching anything at start. A new session is ``--session-id <uuid>``, a resume
``--session <uuid>`` (looked up by the header's id under every project folder; a file under
another project's folder makes Pi ask whether to fork it, so resumes run from the folder the
session belongs to). The session file is
``~/.pi/agent/sessions/--<cwd, '/' as '-'>--/<ISO time>_<uuid>.jsonl``.

Pi's tools (the request schemas): ``bash{command, timeout?}``, ``read{path, offset?, limit?}``,
``edit{path, edits: [{oldText, newText}]}``, ``write{path, content}``. The model's calls of one
reply run in parallel.

:data:`BRANCH_EXTENSION` is a Pi extension that adds a ``/opal-branch <entry id>`` command, which
moves Pi's leaf the way its ``/tree`` command does (``ctx.navigateTree``): run in ``-p`` mode
before another prompt, it makes the real client write a branch into the session's tree.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from ..harness import (
    ANSWER1,
    ANSWER2,
    DEFAULT_TIMEOUT,
    FAREWELL,
    NOTES,
    P_ANSWER1,
    P_ANSWER2,
    P_PROMPT1,
    P_PROMPT2,
    PROJECT_FILES,
    Root,
    RunResult,
    Turn,
    _parse_jsonl,
    _requests_since,
    _run,
    base_env,
    client_bin,
)
from ..mockservers import ChatCompletionsMock, MockServer, Reply, ToolCall
from . import Driver

#: A Pi extension (plain ES module) whose ``/opal-branch ID`` command moves the session's leaf
#: to entry ID, as the interactive ``/tree`` does: the next prompt of the same run is then a
#: child of that entry, a second branch of the tree.
BRANCH_EXTENSION = """\
export default function (pi) {
  pi.registerCommand("opal-branch", {
    description: "Move the session leaf to an entry (as /tree does)",
    handler: async (args, ctx) => {
      const result = await ctx.navigateTree(args.trim(), {});
      if (result.cancelled) throw new Error("navigation cancelled");
    },
  });
}
"""

#: A Pi extension whose ``/opal-compact`` command compacts the session now (``ctx.compact``, what
#: ``/compact`` does), waiting for the summary: the real client then writes a ``compaction`` entry.
COMPACT_EXTENSION = """\
export default function (pi) {
  pi.registerCommand("opal-compact", {
    description: "Compact the session now (as /compact does)",
    handler: async (args, ctx) => {
      await new Promise((resolve, reject) => ctx.compact({ onComplete: resolve, onError: reject }));
    },
  });
}
"""


def pi_env(root: Root, port: int) -> dict[str, str]:
    env = base_env(root, node22=True)
    env.update(PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1", PI_TELEMETRY="0")
    return env


def write_models(root: Root, port: int) -> Path:
    """``~/.pi/agent/models.json``: the mock as provider ``mock``, model ``mock-model``."""
    agent = root.home / ".pi" / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    path = agent / "models.json"
    path.write_text(json.dumps({"providers": {"mock": {
        "baseUrl": f"http://127.0.0.1:{port}/v1", "api": "openai-completions", "apiKey": "dummy",
        "models": [{"id": "mock-model"}]}}}, indent=2))
    return path


def run_pi(root: Root, port: int, prompt: str | list[str], session_id: str | None = None, resume: str | None = None,
           *, cwd: Path | None = None, timeout: float = DEFAULT_TIMEOUT, extra_args: tuple[str, ...] | list[str] = (),
           server: MockServer | None = None) -> RunResult:
    """``pi -p --mode json``: a new session with ``--session-id`` (made up when not given), or
    ``--session <uuid>``. ``prompt`` may be several messages, sent one after another."""
    write_models(root, port)
    if resume is None and session_id is None:
        session_id = str(uuid.uuid4())
    argv = [str(client_bin("pi")), "-p", "--mode", "json", "--provider", "mock", "--model", "mock-model"]
    argv += ["--session", resume] if resume else ["--session-id", session_id]
    prompts = [prompt] if isinstance(prompt, str) else list(prompt)
    argv += [*extra_args, "--", *prompts]
    mark = server.mark() if server else 0
    rc, out, err, secs, to = _run(argv, pi_env(root, port), cwd or root.project, timeout)
    events = _parse_jsonl(out)
    sid = next((e.get("id") for e in events if isinstance(e, dict) and e.get("type") == "session"), None)
    return RunResult("pi", rc, out, err, events, sid or resume or session_id, secs, argv, to,
                     _requests_since(server, mark))


def _header_id(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            head = json.loads(fh.readline() or b"{}")
    except (OSError, ValueError):
        return None
    return head.get("id") if isinstance(head, dict) and head.get("type") == "session" else None


def pi_session_file(root: Root, session_id: str) -> Path | None:
    """The file whose header's id is ``session_id`` (Pi looks sessions up by it)."""
    base = root.home / ".pi" / "agent" / "sessions"
    hits = [p for p in base.glob("*/*.jsonl") if _header_id(p) == session_id]
    return max(hits, key=lambda p: p.stat().st_size) if hits else None


def scripts(proj: Path) -> tuple[list[Reply], list[Reply]]:
    readme, hello, notes = (str(proj / n) for n in ("README.md", "hello.py", "notes.txt"))
    old = PROJECT_FILES["hello.py"]
    new = old + "\n\n" + FAREWELL
    t1 = [
        Reply("Listing the files.", [ToolCall("bash", {"command": "ls"})]),
        Reply("Reading README.md.", [ToolCall("read", {"path": readme})]),
        Reply(ANSWER1),
    ]
    t2 = [
        Reply("Adding farewell().", [ToolCall("edit", {"path": hello, "edits": [{"oldText": old, "newText": new}]})]),
        Reply("Writing notes.txt.", [ToolCall("write", {"path": notes, "content": NOTES})]),
        Reply(ANSWER2),
    ]
    return t1, t2


def parallel_turns(proj: Path) -> list[Turn]:
    """Pi runs the calls of one reply in parallel: three, then two, at once."""
    readme, hello, notes = (str(proj / n) for n in ("README.md", "hello.py", "notes.txt"))
    c1 = [ToolCall("bash", {"command": "ls"}), ToolCall("read", {"path": readme}), ToolCall("read", {"path": hello})]
    c2 = [ToolCall("write", {"path": notes, "content": NOTES}), ToolCall("bash", {"command": "wc -l < hello.py"})]
    return [Turn(P_PROMPT1, [Reply("Looking at everything at once.", c1), Reply(P_ANSWER1)]),
            Turn(P_PROMPT2, [Reply("Two things at once.", c2), Reply(P_ANSWER2)])]


DRIVER = Driver(
    name="pi",
    mock=ChatCompletionsMock,
    env=pi_env,
    run=run_pi,
    session_file=pi_session_file,
    scripts=scripts,
    parallel_turns=parallel_turns,
    node22=True,
    extra={"branch_extension": BRANCH_EXTENSION, "compact_extension": COMPACT_EXTENSION},
)


B_PROMPT = "BTURN: instead, just count the lines of hello.py"
B_ANSWER = "hello.py has 2 lines. [bturn-done]"


def branch_script() -> list[Reply]:
    return [Reply("Counting.", [ToolCall("bash", {"command": "wc -l < hello.py"})]), Reply(B_ANSWER)]


def make_branch(root: Root, server: MockServer, session_id: str, at: str, *,
                timeout: float = DEFAULT_TIMEOUT) -> RunResult:
    """One more run of the real Pi on ``session_id``: ``/opal-branch <at>`` (the extension above
    moves the leaf to entry ``at``) then :data:`B_PROMPT`, which Pi appends as a child of ``at``:
    the session's tree then has two branches, and the new one is where Pi's leaf is."""
    ext = root.path / "opal-branch.js"
    ext.write_text(BRANCH_EXTENSION)
    server.add(*branch_script())
    return run_pi(root, server.port, [f"/opal-branch {at}", B_PROMPT], resume=session_id, timeout=timeout,
                  extra_args=["-e", str(ext)], server=server)


C_PROMPT = "CTURN: after the compaction, go on"
C_ANSWER = "Going on after the compaction. [cturn-done]"


def make_compaction(root: Root, server: MockServer, session_id: str, *, timeout: float = DEFAULT_TIMEOUT) -> RunResult:
    """One more run of the real Pi on ``session_id``: ``/opal-compact`` (the extension above; Pi's
    summary request declares no tools, so the mock answers it without using the script), then
    :data:`C_PROMPT`. ``compaction.keepRecentTokens`` is set tiny so that a two-turn session
    has something to compact (Pi's default keeps the last 20,000 tokens)."""
    settings = root.home / ".pi" / "agent" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"compaction": {"keepRecentTokens": 10}}))
    ext = root.path / "opal-compact.js"
    ext.write_text(COMPACT_EXTENSION)
    server.add(Reply(C_ANSWER))
    try:
        return run_pi(root, server.port, ["/opal-compact", C_PROMPT], resume=session_id, timeout=timeout,
                      extra_args=["-e", str(ext)], server=server)
    finally:
        settings.unlink()

"""GitHub Copilot CLI 1.0.102 (npm ``@github/copilot``, a native binary), driven offline (clients.md).

No GitHub login: the bring-your-own-key offline mode points it at the chat-completions mock
(:class:`~tests.clients.mockservers.ChatCompletionsMock`) through ``COPILOT_PROVIDER_*``. A
session is ``$COPILOT_HOME/session-state/<uuid>/events.jsonl`` beside its ``workspace.yaml``,
``checkpoints/`` and ``rewind-file-snapshots/``; ``COPILOT_HOME`` is ``<home>/.copilot`` here.
Its tools (from the request's declared schemas): ``bash {command, description}``, ``view
{path, view_range}``, ``create {path, file_text}``, ``edit {path, old_str, new_str}``,
``grep {pattern, paths}``, ``glob {pattern, paths}``.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import Sequence

from .. import harness
from ..mockservers import ChatCompletionsMock, Reply, ToolCall
from . import Driver


def copilot_home(root: "harness.Root") -> Path:
    return root.home / ".copilot"


def pkg_cache() -> Path:
    """Where the native binary unpacks its 235 MB JavaScript package (``COPILOT_PKG_CACHE_HOME``;
    by default ``~/.cache/copilot/pkg``, 6 to 10 s again in every fresh HOME). Shared by the runs
    of this machine's user: it holds only the client's own code, under its version's name."""
    return Path(tempfile.gettempdir()) / f"opal-copilot-pkg-{os.getuid()}"


def env(root: "harness.Root", port: int) -> dict[str, str]:
    out = harness.base_env(root)
    out.update(
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=f"http://127.0.0.1:{port}/v1",
        COPILOT_PROVIDER_TYPE="openai",
        COPILOT_PROVIDER_WIRE_API="completions",
        COPILOT_PROVIDER_API_KEY="dummy",
        COPILOT_MODEL="mock-model",
        COPILOT_PROVIDER_MAX_PROMPT_TOKENS="200000",
        COPILOT_PROVIDER_MAX_OUTPUT_TOKENS="8192",
        COPILOT_AUTO_UPDATE="false",
        COPILOT_HOME=str(copilot_home(root)),
        COPILOT_PKG_CACHE_HOME=str(pkg_cache()),
    )
    return out


def run(root: "harness.Root", port: int, prompt: str, session_id: str | None = None, resume: str | None = None,
        *, cwd: Path | None = None, timeout: float = harness.DEFAULT_TIMEOUT, extra_args: Sequence[str] = (),
        server=None) -> "harness.RunResult":
    """``copilot --session-id <uuid> --allow-all --no-auto-update --no-ask-user --output-format json
    -p PROMPT`` (new), the same with ``--resume <uuid>`` (resume)."""
    if resume is None and session_id is None:
        session_id = str(uuid.uuid4())
    argv = [str(harness.agents_dir() / "node_modules" / ".bin" / "copilot")]
    argv += ["--resume", resume] if resume else ["--session-id", session_id]
    argv += ["--allow-all", "--no-auto-update", "--no-ask-user", "--output-format", "json", *extra_args, "-p", prompt]
    mark = server.mark() if server else 0
    rc, out, err, secs, to = harness._run(argv, env(root, port), cwd or root.project, timeout)
    events = harness._parse_jsonl(out)
    sid = _session_of(events)
    return harness.RunResult("copilot", rc, out, err, events, sid or resume or session_id, secs, argv, to,
                             harness._requests_since(server, mark))


def _session_of(events: list) -> str | None:
    """The ``sessionId`` of the JSON output's ``session.start`` / ``session.resume`` event, if printed."""
    for ev in events:
        data = ev.get("data") if isinstance(ev, dict) else None
        if isinstance(data, dict) and ev.get("type") in ("session.start", "session.resume") \
                and isinstance(data.get("sessionId"), str):
            return data["sessionId"]
    return None


def session_file(root: "harness.Root", session_id: str) -> Path | None:
    p = copilot_home(root) / "session-state" / session_id / "events.jsonl"
    return p if p.is_file() else None


def scripts(proj: Path) -> tuple[list[Reply], list[Reply]]:
    """Turn 1: a shell call, a read, an answer; turn 2: an edit, a write, an answer."""
    readme, hello, notes = (str(proj / n) for n in ("README.md", "hello.py", "notes.txt"))
    old = harness.PROJECT_FILES["hello.py"]
    new = old + "\n\n" + harness.FAREWELL
    t1 = [
        Reply("Listing the files.", [ToolCall("bash", {"command": "ls", "description": "List project files"})]),
        Reply("Reading README.md.", [ToolCall("view", {"path": readme})]),
        Reply(harness.ANSWER1),
    ]
    t2 = [
        Reply("Adding farewell().", [ToolCall("edit", {"path": hello, "old_str": old, "new_str": new})]),
        Reply("Writing notes.txt.", [ToolCall("create", {"path": notes, "file_text": harness.NOTES})]),
        Reply(harness.ANSWER2),
    ]
    return t1, t2


def parallel_turns(proj: Path) -> list["harness.Turn"]:
    """Two turns whose first reply carries three, then two, tool calls (Copilot runs them all)."""
    readme, hello, notes = (str(proj / n) for n in ("README.md", "hello.py", "notes.txt"))
    c1 = [ToolCall("bash", {"command": "ls", "description": "List project files"}),
          ToolCall("view", {"path": readme}), ToolCall("view", {"path": hello})]
    c2 = [ToolCall("create", {"path": notes, "file_text": harness.NOTES}),
          ToolCall("bash", {"command": "wc -l < hello.py", "description": "Count lines"})]
    return [harness.Turn(harness.P_PROMPT1, [Reply("Looking at everything at once.", c1), Reply(harness.P_ANSWER1)]),
            harness.Turn(harness.P_PROMPT2, [Reply("Two things at once.", c2), Reply(harness.P_ANSWER2)])]


DRIVER = Driver(name="copilot", mock=ChatCompletionsMock, env=env, run=run, session_file=session_file,
                scripts=scripts, parallel_turns=parallel_turns)

"""Qwen Code 0.24.4 (npm ``@qwen-code/qwen-code``, node >= 22), driven offline (clients.md).

It speaks OpenAI chat completions (:class:`~tests.clients.mockservers.ChatCompletionsMock`).
``~/.qwen/settings.json`` selects the ``openai`` auth type and turns off folder trust, usage
statistics, telemetry, auto-update and the managed memory agent (which otherwise sends a
request of its own after each turn). A session is
``~/.qwen/projects/<cwd, every non-alphanumeric character '-'>/chats/<uuid>.jsonl``.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Sequence

from .. import harness
from ..mockservers import ChatCompletionsMock, Reply, ToolCall
from . import Driver

SETTINGS = {
    "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False},
    "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
    "model": {"name": "mock-model"},
}


def project_key(cwd: str | Path) -> str:
    """Qwen Code's folder name under ``~/.qwen/projects/`` for ``cwd``."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def env(root: "harness.Root", port: int) -> dict[str, str]:
    out = harness.base_env(root, node22=True)
    out.update(
        OPENAI_API_KEY="dummy",
        OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
        OPENAI_MODEL="mock-model",
        QWEN_CODE_NO_RELAUNCH="true",
        # A file that does not exist: no system settings of this machine apply.
        QWEN_CODE_SYSTEM_SETTINGS_PATH=str(root.path / "no-system-settings.json"),
        QWEN_CODE_SUPPRESS_YOLO_WARNING="1",
    )
    return out


def write_settings(root: "harness.Root") -> Path:
    folder = root.home / ".qwen"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "settings.json"
    path.write_text(json.dumps(SETTINGS, indent=2))
    return path


def run(root: "harness.Root", port: int, prompt: str, session_id: str | None = None, resume: str | None = None,
        *, cwd: Path | None = None, timeout: float = harness.DEFAULT_TIMEOUT, extra_args: Sequence[str] = (),
        server=None) -> "harness.RunResult":
    """``qwen --session-id <uuid> --yolo --output-format json PROMPT`` (new), ``--resume <uuid>``."""
    write_settings(root)
    if resume is None and session_id is None:
        session_id = str(uuid.uuid4())
    argv = [str(harness.agents_dir() / "node_modules" / ".bin" / "qwen")]
    argv += ["--resume", resume] if resume else ["--session-id", session_id]
    argv += ["--yolo", "--output-format", "json", *extra_args, prompt]
    mark = server.mark() if server else 0
    rc, out, err, secs, to = harness._run(argv, env(root, port), cwd or root.project, timeout)
    events = harness._parse_json_blob(out)
    sid = _session_of(events)
    return harness.RunResult("qwen", rc, out, err, events, sid or resume or session_id, secs, argv, to,
                             harness._requests_since(server, mark))


def _session_of(events: list) -> str | None:
    """The ``session_id`` of the JSON output (a list of events, or one result object)."""
    for blob in events:
        for ev in blob if isinstance(blob, list) else [blob]:
            if isinstance(ev, dict) and isinstance(ev.get("session_id"), str):
                return ev["session_id"]
    return None


def session_file(root: "harness.Root", session_id: str) -> Path | None:
    base = root.home / ".qwen" / "projects"
    p = base / project_key(root.project) / "chats" / f"{session_id}.jsonl"
    if p.exists():
        return p
    hits = sorted(base.glob(f"*/chats/{session_id}.jsonl"))
    return hits[0] if hits else None


def scripts(proj: Path) -> tuple[list[Reply], list[Reply]]:
    """Turn 1: a shell call, a read, an answer; turn 2: a read, an edit, a write, an answer.

    Qwen Code's ``edit`` refuses a file not read in the same session ("has not been read in
    this session"), which a resumed session's history does not count: turn 2 reads it first,
    as Claude Code's script does."""
    readme, hello, notes = (str(proj / n) for n in ("README.md", "hello.py", "notes.txt"))
    old = harness.PROJECT_FILES["hello.py"]
    new = old + "\n\n" + harness.FAREWELL
    t1 = [
        Reply("Listing the files.", [ToolCall("run_shell_command", {"command": "ls", "description": "List project files"})]),
        Reply("Reading README.md.", [ToolCall("read_file", {"file_path": readme})]),
        Reply(harness.ANSWER1),
    ]
    t2 = [
        Reply("Reading hello.py.", [ToolCall("read_file", {"file_path": hello})]),
        Reply("Adding farewell().", [ToolCall("edit", {"file_path": hello, "old_string": old, "new_string": new})]),
        Reply("Writing notes.txt.", [ToolCall("write_file", {"file_path": notes, "content": harness.NOTES})]),
        Reply(harness.ANSWER2),
    ]
    return t1, t2


def parallel_turns(proj: Path) -> list["harness.Turn"]:
    """Two turns whose first reply carries three, then two, tool calls (Qwen runs them all)."""
    readme, hello, notes = (str(proj / n) for n in ("README.md", "hello.py", "notes.txt"))
    c1 = [ToolCall("run_shell_command", {"command": "ls", "description": "List project files"}),
          ToolCall("read_file", {"file_path": readme}), ToolCall("read_file", {"file_path": hello})]
    c2 = [ToolCall("write_file", {"file_path": notes, "content": harness.NOTES}),
          ToolCall("run_shell_command", {"command": "wc -l < hello.py", "description": "Count lines"})]
    return [harness.Turn(harness.P_PROMPT1, [Reply("Looking at everything at once.", c1), Reply(harness.P_ANSWER1)]),
            harness.Turn(harness.P_PROMPT2, [Reply("Two things at once.", c2), Reply(harness.P_ANSWER2)])]


DRIVER = Driver(name="qwen", mock=ChatCompletionsMock, env=env, run=run, session_file=session_file,
                scripts=scripts, parallel_turns=parallel_turns, node22=True)

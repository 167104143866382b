"""opencode 1.18.33 (npm ``opencode-ai``), driven offline against the chat-completions mock.

What it needs is in ``../shared/docs/clients.md`` ("opencode 1.18.33"): a provider ``mock`` in
``~/.config/opencode/opencode.json`` (the openai-compatible SDK is bundled in the binary), the
plugin-install skip (``node_modules/``, ``package.json`` and a ``package-lock.json`` listing
``@opencode-ai/plugin``, else every start runs ``npm install`` in the config folder), the prompt on
stdin (an argument with spaces reaches the model quoted), and a resume from the folder the session
belongs to (from another it sends the history and never exits). Sessions live in SQLite, so the
"session file" is what ``opencode export <id>`` prints, written under the root.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Sequence

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
    _kill_group,
    _parse_jsonl,
    _requests_since,
    base_env,
    client_bin,
)
from ..mockservers import ChatCompletionsMock, MockServer, Reply, ToolCall
from . import Driver

_PLUGIN = "@opencode-ai/plugin"


def env(root: Root, port: int) -> dict[str, str]:
    e = base_env(root)
    e.update(
        OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1", OPENCODE_DISABLE_LSP_DOWNLOAD="1",
        OPENCODE_DISABLE_SHARE="1", OPENCODE_DISABLE_DEFAULT_PLUGINS="1", OPENCODE_DISABLE_CLAUDE_CODE="1",
        OPENCODE_DISABLE_EXTERNAL_SKILLS="1",
    )  # no XDG_* variable: opencode's data and config are then under HOME (.local/share, .config)
    return e


def write_config(root: Root, port: int) -> Path:
    """``opencode.json`` with the mock provider, and the three files that skip the plugin install."""
    conf = root.home / ".config" / "opencode"
    (conf / "node_modules").mkdir(parents=True, exist_ok=True)
    (conf / "opencode.json").write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                              "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "dummy"},
                              "models": {"mock-model": {"name": "Mock model"}}}},
        "model": "mock/mock-model", "small_model": "mock/mock-model",
        "autoupdate": False, "share": "disabled",
    }, indent=2))
    deps = {_PLUGIN: "1.18.33"}
    (conf / "package.json").write_text(json.dumps({"dependencies": deps}))
    (conf / "package-lock.json").write_text(json.dumps({
        "name": "opencode", "lockfileVersion": 3, "requires": True, "packages": {"": {"dependencies": deps}}}))
    return conf / "opencode.json"


def _run(argv: list[str], environ: dict[str, str], cwd: Path, stdin: str, timeout: float):
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=str(cwd), env=environ, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(stdin.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, err = proc.communicate(timeout=10)
    else:
        _kill_group(proc)  # a shell tool's children, if any are left
    return (proc.returncode if not timed_out else -9, out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"), time.monotonic() - t0, timed_out)


def run(root: Root, port: int, prompt: str, session_id: str | None = None, resume: str | None = None, *,
        cwd: Path | None = None, timeout: float = DEFAULT_TIMEOUT, extra_args: Sequence[str] = (),
        server: MockServer | None = None) -> RunResult:
    """``opencode run --format json --auto`` with the prompt on stdin; ``--session <id>`` resumes
    (``session_id`` cannot be chosen: opencode mints ``ses_...``)."""
    write_config(root, port)
    argv = [str(client_bin("opencode")), "run", "--format", "json", "--auto"]
    if resume:
        argv += ["--session", resume]
    argv += list(extra_args)
    mark = server.mark() if server else 0
    rc, out, err, secs, to = _run(argv, env(root, port), cwd or root.project, prompt, timeout)
    events = _parse_jsonl(out)
    sid = next((e.get("sessionID") for e in events if isinstance(e, dict) and e.get("sessionID")), None)
    return RunResult("opencode", rc, out, err, events, sid or resume, secs, argv, to, _requests_since(server, mark))


def export_session(root: Root, session_id: str, dest: Path, *, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``opencode export <id>`` into ``dest`` (its own config is enough: export makes no request)."""
    write_config(root, 9)
    return subprocess.run([str(client_bin("opencode")), "export", session_id], cwd=str(cwd or root.project),
                          env=env(root, 9), stdin=subprocess.DEVNULL, stdout=dest.open("wb"), stderr=subprocess.PIPE,
                          timeout=120)


def session_file(root: Root, session_id: str) -> Path | None:
    """The session as ``opencode export`` prints it, in ``<root>/opencode-export/<id>.json``."""
    dest = root.path / "opencode-export" / f"{session_id}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    proc = export_session(root, session_id, dest)
    if proc.returncode != 0 or not dest.stat().st_size:
        return None
    try:
        data = json.loads(dest.read_text())
    except ValueError:
        return None
    return dest if isinstance(data, dict) and data.get("info", {}).get("id") == session_id else None


def scripts(proj: Path) -> tuple[list[Reply], list[Reply]]:
    """Turn 1: ``bash`` (ls), ``read`` README.md, the answer; turn 2: ``edit`` hello.py, ``write``
    notes.txt, the answer. opencode's edit needs the file read first in the session; turn 1 did not
    read hello.py, so turn 2's edit is preceded by a read, as Claude's script is."""
    readme, hello, notes = (str(proj / n) for n in ("README.md", "hello.py", "notes.txt"))
    old = PROJECT_FILES["hello.py"]
    new = old + "\n\n" + FAREWELL
    t1 = [Reply("Listing the files.", [ToolCall("bash", {"command": "ls", "description": "List project files"})]),
          Reply("Reading README.md.", [ToolCall("read", {"filePath": readme})]),
          Reply(ANSWER1)]
    t2 = [Reply("Reading hello.py.", [ToolCall("read", {"filePath": hello})]),
          Reply("Adding farewell().", [ToolCall("edit", {"filePath": hello, "oldString": old, "newString": new})]),
          Reply("Writing notes.txt.", [ToolCall("write", {"filePath": notes, "content": NOTES})]),
          Reply(ANSWER2)]
    return t1, t2


def parallel_turns(proj: Path) -> list[Turn]:
    readme, hello, notes = (str(proj / n) for n in ("README.md", "hello.py", "notes.txt"))
    c1 = [ToolCall("bash", {"command": "ls", "description": "List project files"}),
          ToolCall("read", {"filePath": readme}), ToolCall("read", {"filePath": hello})]
    c2 = [ToolCall("write", {"filePath": notes, "content": NOTES}),
          ToolCall("bash", {"command": "wc -l < hello.py", "description": "Count lines"})]
    return [Turn(P_PROMPT1, [Reply("Looking at everything at once.", c1), Reply(P_ANSWER1)]),
            Turn(P_PROMPT2, [Reply("Two things at once.", c2), Reply(P_ANSWER2)])]


DRIVER = Driver(name="opencode", mock=ChatCompletionsMock, env=env, run=run, session_file=session_file,
                scripts=scripts, parallel_turns=parallel_turns, mints_id=True)

"""Run the real agent CLIs hermetically and offline.

Claude Code, Codex CLI and Gemini CLI are driven by this module's own functions; the clients
added since (opencode, Qwen Code, Pi, GitHub Copilot CLI) each by a module of
:mod:`tests.clients.drivers`, registered at the end of this module into the same tables.

Every run gets:

* a fresh temp *root* (:func:`make_root`) holding ``home/`` (HOME),
  ``codex_home/`` (CODEX_HOME), the client config files, and a ``git init``-ed
  project folder ``proj/`` with two small files;
* an environment built from nothing: only the variables the client needs to
  run offline against the mock (:func:`client_env`), plus a PATH made of the
  agents' ``node_modules/.bin``, node's folder and the system bin folders (the
  clients' shell tools need ``bash``, ``ls``, ``cat``, ``git``);
* a mock model server on 127.0.0.1 (see :mod:`mockservers`);
* a timeout (default 120 s) after which the client's whole process group --
  the group of the process this module started, by its PID -- is killed.

Binaries are looked up in ``$OPAL_AGENTS_DIR`` or ``<repo>/.agents`` (installed
by ``scripts/install-agents.sh``); :func:`have_client` / :func:`require_client`
skip cleanly when they are missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from .mockservers import (
    AnthropicMock,
    GeminiMock,
    MockServer,
    OpenAIResponsesMock,
    Recorded,
    Reply,
    ToolCall,
)

__all__ = [
    "PINNED",
    "CLIENTS",
    "RunResult",
    "Root",
    "GeneratedSession",
    "agents_dir",
    "client_bin",
    "have_client",
    "require_client",
    "make_root",
    "client_env",
    "base_env",
    "node22_dir",
    "run_client",
    "run_claude",
    "run_codex",
    "run_gemini",
    "claude_project_key",
    "claude_session_file",
    "codex_session_file",
    "gemini_session_file",
    "session_file",
    "generate_claude_session",
    "generate_codex_session",
    "generate_gemini_session",
    "generate_session",
    "cached_session",
    "missing_reason",
    "write_codex_config",
    "mock_for",
    "Turn",
    "Scenario",
    "ScenarioRun",
    "run_scenario",
    "scenarios",
    "gemini_settings",
]

REPO = Path(__file__).resolve().parents[2]

def _read_pins(path: Path) -> dict[str, tuple[str, str]]:
    """``{name: (npm package, version)}`` from scripts/agent-pins.txt (install-agents.sh reads it too)."""
    pins = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            pins[fields[0]] = (fields[1], fields[2])
    return pins


#: Where the pins are: one line an agent, so a version bump is one line. The drift run
#: (scripts/test-latest-clients.sh) points OPAL_AGENT_PINS at a copy naming the newest releases.
CI_PINS_FILE = REPO / "scripts" / "agent-pins.txt"
PINS_FILE = Path(os.environ.get("OPAL_AGENT_PINS") or CI_PINS_FILE)
_PINS = _read_pins(PINS_FILE)
#: The node that runs the clients that need node >= 22 (installed in .agents/node22).
NODE22 = _PINS.pop("node22")
#: ``{client: (npm package, version)}``; a pinned client with no driver yet is not listed.
PINNED = {name: _PINS[name] for name in ("claude", "codex", "gemini")}
CLIENTS = tuple(PINNED)  # the drivers' names are added at the end of this module

DEFAULT_TIMEOUT = 120.0

PROJECT_FILES = {
    "README.md": "# demo\n\nA tiny demo project. `hello.py` has greet().\n",
    "hello.py": 'def greet(name):\n    return f"Hello, {name}!"\n',
}


# ---------------------------------------------------------------------------
# locating the binaries


def agents_dir() -> Path:
    """Where scripts/install-agents.sh put the CLIs."""
    env = os.environ.get("OPAL_AGENTS_DIR")
    return Path(env).resolve() if env else REPO / ".agents"


def client_bin(name: str) -> Path:
    if name not in PINNED:
        raise ValueError(f"unknown client {name!r}; expected one of {CLIENTS}")
    return agents_dir() / "node_modules" / ".bin" / name


def node22_dir() -> Path:
    """The ``bin/`` folder of the pinned node >= 22 (put first on PATH for the clients that need it)."""
    return agents_dir() / "node22" / "node_modules" / NODE22[0] / "bin"


def _installed_version(name: str) -> str | None:
    pkg, _ = PINNED[name]
    pj = agents_dir() / "node_modules" / pkg / "package.json"
    try:
        return json.loads(pj.read_text()).get("version")
    except (OSError, ValueError):
        return None


def _node() -> str | None:
    return shutil.which("node")


def missing_reason(name: str) -> str | None:
    """Why ``name`` cannot run here, or None when it can."""
    if _node() is None:
        return f"{name} CLI needs node, which is not on PATH"
    b = client_bin(name)
    if not (b.exists() and os.access(b, os.X_OK)):
        return f"{name} CLI not installed: run scripts/install-agents.sh"
    driver = _DRIVERS.get(name)
    if driver is not None and driver.node22 and not os.access(node22_dir() / "node", os.X_OK):
        return f"{name} CLI needs node >= 22 ({NODE22[0]}@{NODE22[1]}): run scripts/install-agents.sh"
    want = PINNED[name][1]
    have = _installed_version(name)
    if have != want:
        return f"{name} CLI is version {have}, tests are pinned to {want}: run scripts/install-agents.sh"
    if shutil.which("git") is None:
        return "git is not on PATH"
    return None


def have_client(name: str) -> bool:
    return missing_reason(name) is None


def require_client(name: str) -> None:
    """``pytest.skip`` with a clear reason when the client cannot run."""
    reason = missing_reason(name)
    if reason:
        import pytest

        pytest.skip(reason)


# ---------------------------------------------------------------------------
# hermetic roots


@dataclass
class Root:
    path: Path

    @property
    def home(self) -> Path:
        return self.path / "home"

    @property
    def codex_home(self) -> Path:
        return self.path / "codex_home"

    @property
    def project(self) -> Path:
        return self.path / "proj"

    @property
    def none_json(self) -> Path:
        return self.path / "none.json"

    def cleanup(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _git(args: Sequence[str], cwd: Path, home: Path) -> None:
    env = {
        "PATH": _system_path(),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "opal tests",
        "GIT_AUTHOR_EMAIL": "tests@opal.invalid",
        "GIT_COMMITTER_NAME": "opal tests",
        "GIT_COMMITTER_EMAIL": "tests@opal.invalid",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=60)


def make_root(base: str | os.PathLike | None = None, *, prefix: str = "opal-clients-",
              files: dict[str, str] | None = None, commit: bool = True) -> Root:
    """Fresh temp root with HOME, CODEX_HOME, config files and a git project.

    The config files do not depend on the mock port: Claude and Gemini take
    the URL from the environment; Codex's ``config.toml`` gets it per run
    (:func:`write_codex_config`).
    """
    root = Root(Path(tempfile.mkdtemp(prefix=prefix, dir=base)).resolve())
    root.home.mkdir()
    root.codex_home.mkdir()
    root.project.mkdir()
    # Gemini: user settings + empty system settings
    gdir = root.home / ".gemini"
    gdir.mkdir()
    (gdir / "settings.json").write_text(
        json.dumps(
            {
                "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            },
            indent=2,
        )
    )
    root.none_json.write_text("{}\n")
    write_codex_config(root, 9)  # placeholder port; rewritten on every run
    for name, text in (PROJECT_FILES if files is None else files).items():
        p = root.project / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    _git(["init", "-q", "-b", "main"], root.project, root.home)
    if commit:
        _git(["add", "-A"], root.project, root.home)
        _git(["commit", "-q", "-m", "init", "--allow-empty"], root.project, root.home)
    return root


def write_codex_config(root: Root, port: int) -> Path:
    """config.toml for one run; top-level keys a scenario needs (for example
    ``model_auto_compact_token_limit``) come from ``<root>/codex-extra.toml``."""
    cfg = root.codex_home / "config.toml"
    extra_file = root.path / "codex-extra.toml"
    extra = extra_file.read_text() if extra_file.exists() else ""
    cfg.write_text(
        f"""model = "gpt-5.5"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
{extra}
[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
plugin_sharing = false
apps = false
in_app_updates = false

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:{port}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"""
    )
    return cfg


# ---------------------------------------------------------------------------
# environment and process control


def _system_path() -> str:
    return "/usr/local/bin:/usr/bin:/bin"


def _client_path(node22: bool = False) -> str:
    parts = [str(node22_dir())] if node22 else []
    parts.append(str(agents_dir() / "node_modules" / ".bin"))
    node = _node()
    if node:
        parts.append(str(Path(node).resolve().parent))
        parts.append(str(Path(node).parent))
    parts.append(_system_path())
    out: list[str] = []
    for p in ":".join(parts).split(":"):
        if p and p not in out:
            out.append(p)
    return ":".join(out)


def base_env(root: Root, *, node22: bool = False) -> dict[str, str]:
    """What every client's environment starts from: PATH (node >= 22 first when asked) and HOME."""
    return {"PATH": _client_path(node22), "HOME": str(root.home)}


def client_env(name: str, root: Root, port: int) -> dict[str, str]:
    """The complete environment for one client run (nothing inherited)."""
    if name in _DRIVERS:
        return _DRIVERS[name].env(root, port)
    env = base_env(root)
    if name == "claude":
        env.update(
            ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
            ANTHROPIC_API_KEY="dummy",
            IS_SANDBOX="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
        )
    elif name == "codex":
        env.update(CODEX_HOME=str(root.codex_home), MOCK_API_KEY="dummy")
    elif name == "gemini":
        env.update(
            GEMINI_API_KEY="dummy",
            GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{port}",
            GEMINI_CLI_NO_RELAUNCH="true",
            GEMINI_CLI_TRUST_WORKSPACE="true",
            GEMINI_CLI_SYSTEM_SETTINGS_PATH=str(root.none_json),
        )
    else:
        raise ValueError(name)
    return env


@dataclass
class RunResult:
    """Outcome of one client run.

    Unpacks as ``(returncode, stdout, stderr, events, session_id)``.
    ``events`` is the parsed JSON output: Claude and Gemini print one JSON
    object (a one-element list here), Codex one event per line.
    """

    client: str
    returncode: int
    stdout: str
    stderr: str
    events: list[Any]
    session_id: str | None
    seconds: float
    argv: list[str] = field(default_factory=list)
    timed_out: bool = False
    requests: list[Recorded] = field(default_factory=list)  # model requests of this run

    def __iter__(self):
        return iter((self.returncode, self.stdout, self.stderr, self.events, self.session_id))

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        return (
            f"{self.client} exit={self.returncode} timed_out={self.timed_out} {self.seconds:.1f}s\n"
            f"argv={self.argv}\n--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
        )


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the process group led by ``proc`` (we started it, by its PID)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:  # pragma: no cover
        proc.kill()


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[int, str, str, float, bool]:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=str(cwd),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # own process group, pgid == proc.pid
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            out, err = b"", b""
    else:
        # Reap stragglers the client left in its group (e.g. a shell tool child).
        _kill_group(proc)
    return (
        proc.returncode if not timed_out else -9,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        time.monotonic() - t0,
        timed_out,
    )


def opal(*args: str, cwd: Path, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``opal ARGS`` (this checkout's), asserting it succeeds.

    Under ``-X faulthandler``, so that a command still running at ``timeout`` is sent
    SIGABRT first: the assertion then carries every thread's Python stack (where it
    waited), not just "timed out" (a ``show`` once hung in CI and left nothing to go on).
    """
    import sys

    argv = [sys.executable, "-X", "faulthandler", "-m", "opalgit", *args]
    proc = subprocess.Popen(argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError(f"opal {' '.join(args)} still ran after {timeout:.0f} s; its stacks:\n{err}\n{out}")
    done = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    assert done.returncode == 0, f"opal {' '.join(args)} failed:\n{out}\n{err}"
    return done


def _parse_json_blob(text: str) -> list[Any]:
    text = text.strip()
    if not text:
        return []
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    # fall back: the last line or the outermost {...}
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            return [json.loads(text[start : end + 1])]
        except ValueError:
            pass
    return []


def _parse_jsonl(text: str) -> list[Any]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def _requests_since(server: MockServer | None, mark: int) -> list[Recorded]:
    return server.since(mark) if server is not None else []


def run_claude(root: Root, port: int, prompt: str, session_id: str | None = None, resume: str | None = None,
               *, cwd: Path | None = None, timeout: float = DEFAULT_TIMEOUT, extra_args: Sequence[str] = (),
               server: MockServer | None = None) -> RunResult:
    """``claude -p`` in ``cwd`` (default: the root's project).

    New session: pass ``session_id`` (generated when both it and ``resume``
    are None). Resume: pass ``resume=<uuid>``.
    """
    if resume is None and session_id is None:
        session_id = str(uuid.uuid4())
    argv = [str(client_bin("claude")), "-p", "--dangerously-skip-permissions", "--output-format", "json"]
    argv += ["--resume", resume] if resume else ["--session-id", session_id]
    argv += [*extra_args, "--", prompt]
    mark = server.mark() if server else 0
    rc, out, err, secs, to = _run(argv, client_env("claude", root, port), cwd or root.project, timeout)
    events = _parse_json_blob(out)
    sid = None
    if events and isinstance(events[-1], dict):
        sid = events[-1].get("session_id")
    return RunResult("claude", rc, out, err, events, sid or resume or session_id, secs, argv, to,
                     _requests_since(server, mark))


def run_codex(root: Root, port: int, prompt: str, session_id: str | None = None, resume: str | None = None,
              *, cwd: Path | None = None, timeout: float = DEFAULT_TIMEOUT, extra_args: Sequence[str] = (),
              server: MockServer | None = None) -> RunResult:
    """``codex exec --json``; ``session_id`` is ignored for new sessions (Codex
    mints the thread id, returned as ``RunResult.session_id``)."""
    write_codex_config(root, port)
    cwd = cwd or root.project
    argv = [str(client_bin("codex")), "exec", "--skip-git-repo-check", "--json"]
    if resume:
        argv += [*extra_args, "resume", resume, "--", prompt]
    else:
        argv += ["-C", str(cwd), *extra_args, "--", prompt]
    mark = server.mark() if server else 0
    rc, out, err, secs, to = _run(argv, client_env("codex", root, port), cwd, timeout)
    events = _parse_jsonl(out)
    sid = next((e.get("thread_id") for e in events if isinstance(e, dict) and e.get("type") == "thread.started"), None)
    return RunResult("codex", rc, out, err, events, sid or resume, secs, argv, to, _requests_since(server, mark))


def run_gemini(root: Root, port: int, prompt: str, session_id: str | None = None, resume: str | None = None,
               *, cwd: Path | None = None, timeout: float = DEFAULT_TIMEOUT, extra_args: Sequence[str] = (),
               server: MockServer | None = None) -> RunResult:
    """``gemini -p --yolo --output-format json``; new session with
    ``--session-id`` (generated when not given), or ``--resume <uuid>``."""
    if resume is None and session_id is None:
        session_id = str(uuid.uuid4())
    argv = [str(client_bin("gemini"))]
    argv += ["--resume", resume] if resume else ["--session-id", session_id]
    argv += ["--yolo", "--output-format", "json", *extra_args, "-p", prompt]
    mark = server.mark() if server else 0
    rc, out, err, secs, to = _run(argv, client_env("gemini", root, port), cwd or root.project, timeout)
    events = _parse_json_blob(out)
    sid = None
    if events and isinstance(events[-1], dict):
        sid = events[-1].get("session_id") or events[-1].get("sessionId")
    return RunResult("gemini", rc, out, err, events, sid or resume or session_id, secs, argv, to,
                     _requests_since(server, mark))


_RUNNERS = {"claude": run_claude, "codex": run_codex, "gemini": run_gemini}
_MOCKS = {"claude": AnthropicMock, "codex": OpenAIResponsesMock, "gemini": GeminiMock}


def run_client(name: str, root: Root, port: int, prompt: str, **kw: Any) -> RunResult:
    return _RUNNERS[name](root, port, prompt, **kw)


def mock_for(name: str, script: Iterable[Reply | str] = (), **kw: Any) -> MockServer:
    """A (not yet started) mock server of the right API for ``name``."""
    return _MOCKS[name](script, **kw)


# ---------------------------------------------------------------------------
# locating session files


def claude_project_key(cwd: str | os.PathLike) -> str:
    """Claude Code's project folder name for ``cwd`` (formats.md section 2.1)."""
    s = os.path.abspath(os.fspath(cwd))
    key = re.sub(r"[^A-Za-z0-9]", "-", s)
    if len(key) <= 200:
        return key
    data = s.encode("utf-16-le")  # Java String.hashCode over UTF-16 code units
    h = 0
    for i in range(0, len(data), 2):
        h = (h * 31 + int.from_bytes(data[i : i + 2], "little")) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    n = abs(h)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    b36 = ""
    while True:
        n, r = divmod(n, 36)
        b36 = digits[r] + b36
        if n == 0:
            break
    return key[:200] + "-" + b36


def claude_session_file(root: Root, session_id: str, cwd: str | os.PathLike | None = None) -> Path | None:
    base = root.home / ".claude" / "projects"
    p = base / claude_project_key(cwd or root.project) / f"{session_id}.jsonl"
    if p.exists():
        return p
    hits = sorted(base.glob(f"*/{session_id}.jsonl"))
    return hits[0] if hits else None


def codex_session_file(root: Root, thread_id: str) -> Path | None:
    hits = sorted((root.codex_home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    if not hits:
        hits = sorted((root.codex_home / "sessions").rglob(f"rollout-*{thread_id}*.jsonl"))
    return hits[0] if hits else None


def _gemini_header_id(p: Path) -> str | None:
    try:
        with p.open() as f:
            first = f.readline()
        return json.loads(first).get("sessionId")
    except (OSError, ValueError, AttributeError):
        return None


def gemini_session_file(root: Root, session_id: str) -> Path | None:
    """The session file holding ``session_id`` (resume also leaves an empty
    stub file for the same id; the one with content wins)."""
    chats = list((root.home / ".gemini" / "tmp").glob("*/chats/session-*.json*"))
    hits = [p for p in chats if _gemini_header_id(p) == session_id]
    if not hits:
        hits = [p for p in chats if p.stem.endswith(session_id[:8])]
    if not hits:
        return None
    return max(hits, key=lambda p: p.stat().st_size)


def session_file(name: str, root: Root, session_id: str) -> Path | None:
    if name == "claude":
        return claude_session_file(root, session_id)
    if name == "codex":
        return codex_session_file(root, session_id)
    if name == "gemini":
        return gemini_session_file(root, session_id)
    if name in _DRIVERS:
        return _DRIVERS[name].session_file(root, session_id)
    raise ValueError(name)


# ---------------------------------------------------------------------------
# generating genuine two-turn sessions

PROMPT1 = "TURN1: list the files in this project and show me README.md"
PROMPT2 = "TURN2: add a farewell() function to hello.py and write notes.txt"
ANSWER1 = "The project has README.md and hello.py; README.md describes a tiny demo with greet(). [turn1-done]"
ANSWER2 = "Added farewell() to hello.py and wrote notes.txt. [turn2-done]"
NOTES = "farewell() added by the scripted mock.\n"
FAREWELL = 'def farewell(name):\n    return f"Goodbye, {name}!"\n'


def _scripts(name: str, proj: Path) -> tuple[list[Reply], list[Reply]]:
    readme = str(proj / "README.md")
    hello = str(proj / "hello.py")
    notes = str(proj / "notes.txt")
    old = PROJECT_FILES["hello.py"]
    new = old + "\n\n" + FAREWELL
    if name == "claude":
        t1 = [
            Reply("Listing the files.", [ToolCall("Bash", {"command": "ls", "description": "List project files"})]),
            Reply("Reading README.md.", [ToolCall("Read", {"file_path": readme})]),
            Reply(ANSWER1),
        ]
        t2 = [
            Reply("Reading hello.py.", [ToolCall("Read", {"file_path": hello})]),
            Reply("Adding farewell().", [ToolCall("Edit", {"file_path": hello, "old_string": old, "new_string": new})]),
            Reply("Writing notes.txt.", [ToolCall("Write", {"file_path": notes, "content": NOTES})]),
            Reply(ANSWER2),
        ]
    elif name == "codex":
        patch = (
            "*** Begin Patch\n"
            "*** Update File: hello.py\n"
            "@@\n"
            ' def greet(name):\n     return f"Hello, {name}!"\n'
            "+\n+\n"
            + "".join("+" + line + "\n" for line in FAREWELL.splitlines())
            + "*** Add File: notes.txt\n"
            + "".join("+" + line + "\n" for line in NOTES.splitlines())
            + "*** End Patch\n"
        )
        t1 = [
            Reply("Listing the files.", [ToolCall("exec_command", {"cmd": "ls", "workdir": str(proj)})]),
            Reply("Reading README.md.", [ToolCall("exec_command", {"cmd": "cat README.md", "workdir": str(proj)})]),
            Reply(ANSWER1),
        ]
        t2 = [
            Reply("Patching hello.py and adding notes.txt.", [ToolCall("apply_patch", patch, custom=True)]),
            Reply(ANSWER2),
        ]
    elif name == "gemini":
        t1 = [
            Reply("Listing the files.", [ToolCall("run_shell_command", {"command": "ls", "description": "List project files"})]),
            Reply("Reading README.md.", [ToolCall("read_file", {"file_path": readme})]),
            Reply(ANSWER1),
        ]
        t2 = [
            Reply(
                "Adding farewell().",
                [ToolCall("replace", {"file_path": hello, "old_string": old, "new_string": new,
                                      "instruction": "Add a farewell() function after greet()."})],
            ),
            Reply("Writing notes.txt.", [ToolCall("write_file", {"file_path": notes, "content": NOTES})]),
            Reply(ANSWER2),
        ]
    elif name in _DRIVERS:
        t1, t2 = _DRIVERS[name].scripts(proj)
    else:
        raise ValueError(name)
    return t1, t2


@dataclass
class GeneratedSession:
    """A genuine two-turn session the real client wrote."""

    client: str
    root: Root
    session_id: str
    path: Path | None
    prompts: list[str]
    answers: list[str]
    turn1: RunResult
    turn2: RunResult
    script1: list[Reply]
    script2: list[Reply]
    server: MockServer

    @property
    def runs(self) -> list[RunResult]:
        return [self.turn1, self.turn2]

    def describe(self) -> str:
        return "\n\n".join(r.describe() for r in self.runs)


def generate_session(name: str, root: Root | None = None, *, base: str | os.PathLike | None = None,
                     timeout: float = DEFAULT_TIMEOUT, lifetime: float = 600.0) -> GeneratedSession:
    """Drive ``name`` through two turns against a scripted mock.

    Turn 1 (new session): a shell tool call (list files), a read-file tool
    call, then a text answer. Turn 2 (resume): edit/write tool calls, then a
    text answer. Check ``turn1.ok`` / ``turn2.ok`` / ``path`` yourself -- this
    function does not assert, so callers can report the client's output.
    The root is left in place (``session.root.cleanup()`` removes it); pass
    ``base`` (e.g. pytest's ``tmp_path``) to create it there.
    """
    require_ok = missing_reason(name)
    if require_ok:
        raise RuntimeError(require_ok)
    root = root or make_root(base, prefix=f"opal-{name}-")
    t1, t2 = _scripts(name, root.project)
    runner = _RUNNERS[name]
    with mock_for(name, t1, lifetime=lifetime) as srv:
        sid = None if _mints_id(name) else str(uuid.uuid4())
        r1 = runner(root, srv.port, PROMPT1, session_id=sid, timeout=timeout, server=srv)
        sid = r1.session_id or sid
        srv.add(*t2)
        if r1.ok and sid:
            r2 = runner(root, srv.port, PROMPT2, resume=sid, timeout=timeout, server=srv)
        else:
            r2 = RunResult(name, -1, "", "turn 1 failed; turn 2 not run", [], sid, 0.0)
    path = session_file(name, root, sid) if sid else None
    return GeneratedSession(name, root, sid or "", path, [PROMPT1, PROMPT2], [ANSWER1, ANSWER2],
                            r1, r2, t1, t2, srv)


def generate_claude_session(root: Root | None = None, **kw: Any) -> GeneratedSession:
    return generate_session("claude", root, **kw)


def generate_codex_session(root: Root | None = None, **kw: Any) -> GeneratedSession:
    return generate_session("codex", root, **kw)


def generate_gemini_session(root: Root | None = None, **kw: Any) -> GeneratedSession:
    return generate_session("gemini", root, **kw)


_CACHE: dict[str, GeneratedSession] = {}


def cached_session(name: str) -> GeneratedSession:
    """One generated session per client per process (treat it as read-only:
    copy the file before changing it). Its root is removed at exit."""
    g = _CACHE.get(name)
    if g is None:
        g = generate_session(name)
        _CACHE[name] = g
        if len(_CACHE) == 1:
            import atexit

            atexit.register(lambda: [s.root.cleanup() for s in _CACHE.values()])
    return g


# ---------------------------------------------------------------------------
# scenarios: sessions with parallel calls, a subagent, a compaction
#
# issue 18: the two-turn sessions above answer with one tool call per reply,
# so none of the structures real sessions are full of was ever exercised.
# A scenario is a list of turns (prompt + the replies the mock gives); each
# turn after the first resumes the session. The scripts are consumed in
# request order, which is deterministic here: the clients run a reply's
# calls before they ask again, and Claude's subagent asks the mock (its own
# requests declare tools too) before the parent gets the Task result back.


@dataclass
class Turn:
    """One client run: ``setup(root)`` (e.g. a settings change) runs first."""

    prompt: str
    replies: list[Reply]
    setup: Any = None


@dataclass
class Scenario:
    """A named script for one client; ``codex_config`` is appended to config.toml."""

    name: str
    client: str
    turns: list[Turn]
    codex_config: str = ""
    note: str = ""


@dataclass
class ScenarioRun:
    scenario: Scenario
    root: Root
    session_id: str
    path: Path | None
    runs: list[RunResult]
    server: MockServer

    @property
    def ok(self) -> bool:
        return bool(self.path) and all(r.ok for r in self.runs) and len(self.runs) == len(self.scenario.turns)

    def describe(self) -> str:
        return "\n\n".join(r.describe() for r in self.runs) + f"\nmock errors: {self.server.errors}"


def run_scenario(sc: Scenario, root: Root | None = None, *, base: str | os.PathLike | None = None,
                 timeout: float = DEFAULT_TIMEOUT, lifetime: float = 600.0) -> ScenarioRun:
    """Drive ``sc.client`` through the scenario's turns against one mock.

    Does not assert (check ``.ok`` and ``server.remaining``), so a caller can
    show what the client printed.
    """
    reason = missing_reason(sc.client)
    if reason:
        raise RuntimeError(reason)
    root = root or make_root(base, prefix=f"opal-{sc.client}-{sc.name}-")
    if sc.codex_config:
        (root.path / "codex-extra.toml").write_text(sc.codex_config)
    runner = _RUNNERS[sc.client]
    runs: list[RunResult] = []
    sid = None if _mints_id(sc.client) else str(uuid.uuid4())
    with mock_for(sc.client, [], lifetime=lifetime) as srv:
        for i, turn in enumerate(sc.turns):
            srv.add(*turn.replies)
            if turn.setup is not None:
                turn.setup(root)
            if i == 0:
                r = runner(root, srv.port, turn.prompt, session_id=sid, timeout=timeout, server=srv)
                sid = r.session_id or sid
            else:
                r = runner(root, srv.port, turn.prompt, resume=sid, timeout=timeout, server=srv)
            runs.append(r)
            if not r.ok or not sid:
                break
    path = session_file(sc.client, root, sid) if sid else None
    return ScenarioRun(sc, root, sid or "", path, runs, srv)


P_PROMPT1 = "PTURN1: look at every file in this project at once"
P_PROMPT2 = "PTURN2: write notes.txt and count the lines of hello.py"
P_ANSWER1 = "README.md describes a tiny demo; hello.py has greet(). [pturn1-done]"
P_ANSWER2 = "Wrote notes.txt; hello.py has 2 lines. [pturn2-done]"
SUB_PROMPT = "STURN1: ask a subagent what README.md says"
SUB_TASK = "Read README.md in the project and report in one sentence what it says."
SUB_REPORT = "README.md says this is a tiny demo project with greet() in hello.py. [subagent-done]"
SUB_ANSWER = "The subagent says README.md describes a tiny demo with greet(). [sturn1-done]"
SUB_PROMPT2 = "STURN2: thanks, list the files too"
SUB_ANSWER2 = "The files are README.md and hello.py. [sturn2-done]"
C_SUMMARY = "Summary so far: the user asked to look at the project; README.md and hello.py were read. [compact-summary]"
C_PROMPT3 = "CTURN3: after the compaction, show hello.py again"
C_ANSWER3 = "hello.py still has greet() only. [cturn3-done]"


def _parallel_turns(client: str, proj: Path) -> list[Turn]:
    """Two turns whose first reply carries three, then two, tool calls."""
    readme, hello, notes = (str(proj / n) for n in ("README.md", "hello.py", "notes.txt"))
    if client == "claude":
        c1 = [ToolCall("Bash", {"command": "ls", "description": "List project files"}),
              ToolCall("Read", {"file_path": readme}), ToolCall("Read", {"file_path": hello})]
        c2 = [ToolCall("Write", {"file_path": notes, "content": NOTES}),
              ToolCall("Bash", {"command": "wc -l < hello.py", "description": "Count lines"})]
    elif client == "codex":
        c1 = [ToolCall("exec_command", {"cmd": "ls", "workdir": str(proj)}),
              ToolCall("exec_command", {"cmd": "cat README.md", "workdir": str(proj)}),
              ToolCall("exec_command", {"cmd": "cat hello.py", "workdir": str(proj)})]
        c2 = [ToolCall("exec_command", {"cmd": f"printf '{NOTES.strip()}\\n' > notes.txt", "workdir": str(proj)}),
              ToolCall("exec_command", {"cmd": "wc -l < hello.py", "workdir": str(proj)})]
    elif client == "gemini":
        c1 = [ToolCall("run_shell_command", {"command": "ls", "description": "List project files"}),
              ToolCall("read_file", {"file_path": readme}), ToolCall("read_file", {"file_path": hello})]
        c2 = [ToolCall("write_file", {"file_path": notes, "content": NOTES}),
              ToolCall("run_shell_command", {"command": "wc -l < hello.py", "description": "Count lines"})]
    elif client in _DRIVERS and _DRIVERS[client].parallel_turns is not None:
        return _DRIVERS[client].parallel_turns(proj)
    else:
        raise ValueError(client)
    return [Turn(P_PROMPT1, [Reply("Looking at everything at once.", c1), Reply(P_ANSWER1)]),
            Turn(P_PROMPT2, [Reply("Two things at once.", c2), Reply(P_ANSWER2)])]


def _subagent_turns(proj: Path) -> list[Turn]:
    """Claude: the model delegates to a subagent (the ``Agent`` tool of 2.1.x),
    whose own two requests reach the mock between the parent's."""
    readme = str(proj / "README.md")
    # run_in_background: false keeps the request order fixed: parent, subagent, parent.
    task = ToolCall("Agent", {"description": "Summarise README", "prompt": SUB_TASK, "subagent_type": "general-purpose",
                                   "run_in_background": False})
    return [
        Turn(SUB_PROMPT, [Reply("Asking a subagent.", [task]),
                          Reply("Reading it.", [ToolCall("Read", {"file_path": readme})]),  # the subagent
                          Reply(SUB_REPORT),  # the subagent's report
                          Reply(SUB_ANSWER)]),
        Turn(SUB_PROMPT2, [Reply("Listing.", [ToolCall("Bash", {"command": "ls", "description": "List files"})]),
                           Reply(SUB_ANSWER2)]),
    ]


def gemini_settings(root: Root, **model: Any) -> None:
    """Merge ``model`` into ``~/.gemini/settings.json``'s ``model`` section."""
    p = root.home / ".gemini" / "settings.json"
    data = json.loads(p.read_text())
    data.setdefault("model", {}).update(model)
    p.write_text(json.dumps(data, indent=2))


def _compact_turn(client: str) -> Turn:
    """A turn that compacts the history, where the client can in ``-p`` mode.

    Claude: the ``/compact`` command as the prompt. Codex: the previous reply
    reports more input tokens than ``model_auto_compact_token_limit``, so the
    next turn starts with a compaction request. Gemini: a tiny
    ``model.compressionThreshold``. Each client's compaction may send two
    requests (Claude and Gemini retry/verify the summary), hence two replies.
    """
    summary = [Reply(C_SUMMARY), Reply(C_SUMMARY)]
    if client == "claude":
        return Turn("/compact", summary)
    if client == "gemini":
        return Turn(C_PROMPT3, [summary[0], summary[1], Reply(C_ANSWER3)],
                    setup=lambda r: gemini_settings(r, compressionThreshold=0.00001))
    if client == "codex":
        return Turn(C_PROMPT3, [summary[0], Reply(C_ANSWER3)])
    raise ValueError(client)


def scenarios(client: str, proj: Path) -> list[Scenario]:
    """The structured sessions made for ``client`` (fixtures: scripts/regenerate-client-sessions)."""
    out = [Scenario("parallel", client, _parallel_turns(client, proj),
                    note="two turns; replies with three, then two, tool calls at once")]
    if client == "claude":
        out.append(Scenario("subagent", client, _subagent_turns(proj),
                            note="an Agent (subagent) call whose own requests reach the mock; then a turn"))
        turns = _parallel_turns(client, proj)
        out.append(Scenario("compact", client, [turns[0], _compact_turn(client), turns[1]],
                            note="parallel calls, /compact, then more parallel calls"))
    elif client == "codex":
        turns = _parallel_turns(client, proj)
        turns[0].replies[-1].input_tokens = 50000
        out.append(Scenario("compact", client, [turns[0], _compact_turn(client)],
                            codex_config="model_auto_compact_token_limit = 20000\n",
                            note="parallel calls; the next turn auto-compacts (model_auto_compact_token_limit)"))
    elif client == "gemini":
        turns = _parallel_turns(client, proj)
        out.append(Scenario("compact", client, [turns[0], _compact_turn(client)],
                            note="parallel calls; the next turn compresses (model.compressionThreshold)"))
    return out


# ---------------------------------------------------------------------------
# the clients driven by tests/clients/drivers/<name>.py


def _mints_id(name: str) -> bool:
    """Whether the client chooses the session id itself (we cannot pass one in)."""
    return name == "codex" or (name in _DRIVERS and _DRIVERS[name].mints_id)


from .drivers import load as _load_drivers  # noqa: E402  (the drivers use the names above)

_DRIVERS = _load_drivers()
for _d in _DRIVERS.values():
    PINNED[_d.name] = _PINS[_d.name]
    _RUNNERS[_d.name] = _d.run
    _MOCKS[_d.name] = _d.mock
CLIENTS = tuple(PINNED)

"""Hermetic test environment: HOME, XDG dirs and git's global config live in a temp dir.

No test reads the real ~/.claude, ~/.codex or ~/.gitconfig.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

_HOME = tempfile.mkdtemp(prefix="opal-test-home-")
atexit.register(shutil.rmtree, _HOME, True)


def _hermetic_env() -> None:
    os.environ["HOME"] = _HOME
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        os.environ[var] = os.path.join(_HOME, "." + var.lower())
    os.environ["GIT_CONFIG_GLOBAL"] = os.path.join(_HOME, ".gitconfig")
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME", "GEMINI_CLI_HOME", "GIT_DIR", "GIT_WORK_TREE", "NO_COLOR"):
        os.environ.pop(var, None)
    os.environ["OPAL_NO_PAGER"] = "1"
    # No server setting, as a user has it: commands run in their own process and start
    # no command server (opt-in). tests/cli/test_server.py starts one explicitly, in a
    # runtime folder of its own, and stops it.
    os.environ.pop("OPAL_SERVER", None)
    # git does not wait for opal's post-commit and post-rewrite hooks by default; the
    # tests that read what a hook said make it wait (for as long as the work takes, on a
    # busy machine). Tests of the default and of the bound set OPAL_HOOK_TIMEOUT themselves.
    os.environ["OPAL_HOOK_TIMEOUT"] = "300"
    with open(os.environ["GIT_CONFIG_GLOBAL"], "w") as fh:
        fh.write("[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n")
    import pygit2

    # libgit2 caches its config search path at import; point it into the temp home.
    for level in (pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.XDG, pygit2.enums.ConfigLevel.SYSTEM):
        pygit2.settings.search_path[level] = _HOME


_hermetic_env()


def _no_hypothesis_deadline() -> None:
    # Hypothesis fails an example that takes longer than 200 ms by default: a test of
    # the clock, which a loaded machine fails (tests/unit/test_codec.py and
    # test_merge.py had no deadline=None). Tests that want a bound set their own.
    from hypothesis import settings

    settings.register_profile("opal", deadline=None)
    settings.load_profile("opal")


_no_hypothesis_deadline()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def fixture_lines():
    """Every line of the real session files under tests/fixtures that parses as JSON:
    ``(raw bytes, value)``, files in a stable order."""
    import json

    for root, _dirs, files in sorted(os.walk(FIXTURES)):
        for name in sorted(files):
            if name.endswith(".jsonl"):
                with open(os.path.join(root, name), "rb") as fh:
                    for raw in fh:
                        try:
                            yield raw, json.loads(raw)
                        except ValueError:
                            pass


def git(*args: str, cwd: str | None = None, check: bool = True, env: dict | None = None,
        timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run the real git binary (``env``: variables set on top of this process's)."""
    return subprocess.run(["git", *args], cwd=cwd, check=check, capture_output=True, text=True,
                          env={**os.environ, **env} if env else None, timeout=timeout)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh HOME for one test (agents' session folders live under it)."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


@pytest.fixture
def project(tmp_path):
    """A real git repository with one code commit, as a user's project would be."""
    p = tmp_path / "project"
    p.mkdir()
    git("init", "-q", str(p))
    (p / "README.md").write_text("# demo project\n")
    git("add", "README.md", cwd=str(p))
    git("commit", "-q", "-m", "initial code", cwd=str(p))
    return p


def opal(*args: str, cwd=None, env: dict | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    """Run the real `opal` command line in a subprocess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "opalgit", *args],
        cwd=str(cwd) if cwd else None,
        env=full_env,
        capture_output=True,
        text=True,
        input=input,
        timeout=120,
    )

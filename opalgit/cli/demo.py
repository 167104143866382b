"""``opal demo``: a guided run on a bundled Claude Code session, no agent account needed.

Part of the CLI layer: it runs real ``opal`` commands in-process against a throw-away
project, with ``CLAUDE_CONFIG_DIR`` pointed inside it so the user's own ``~/.claude``
is never read or written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from importlib import resources
from typing import Callable, Iterator

SESSION_ID = "3f6d2a1e-8c4b-4e0a-9b7d-5a2c1e9f0b64"
PROJECT = "weatherctl"


def _project_key(path: str) -> str:
    from opalgit.agents.claude.files import project_key

    return project_key(path)


@contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_demo(keep: str | None, echo: Callable[[str], None], style: Callable[..., str]) -> None:
    from opalgit.cli.main import main

    base = os.path.abspath(keep) if keep else tempfile.mkdtemp(prefix="opal-demo-")
    from opalgit.errors import UsageError
    from opalgit.fileio import folder_problem

    problem = folder_problem(base) if os.path.lexists(base) else None
    if problem is not None:
        raise UsageError(f"--keep {keep}: {problem}", hint="name a new folder, or an existing one")
    os.makedirs(base, exist_ok=True)
    project = os.path.join(base, PROJECT)
    claude_dir = os.path.join(base, "claude-config")
    try:
        os.makedirs(project, exist_ok=True)
        subprocess.run(["git", "init", "-q", project], check=True)
        lines = resources.files("opalgit").joinpath("demo_data/claude-session.jsonl").read_bytes().splitlines(keepends=True)
        session_dir = os.path.join(claude_dir, "projects", _project_key(project))
        os.makedirs(session_dir, exist_ok=True)
        session = os.path.join(session_dir, SESSION_ID + ".jsonl")
        half = len(lines) // 2

        def step(title: str, *args: str) -> None:
            echo("")
            echo(style(f"# {title}", fg="cyan"))
            echo(style("$ opal " + " ".join(args), bold=True))
            main(["-C", project, "--no-pager", *args])

        with _env(CLAUDE_CONFIG_DIR=claude_dir, OPAL_NO_PAGER="1", GIT_AUTHOR_NAME="Demo", GIT_COMMITTER_NAME="Demo"):
            echo(style(f"opal demo: a project in {project}, with a Claude Code session of {len(lines)} records", bold=True))
            with open(session, "wb") as fh:
                fh.writelines(lines[:half])
            step("Set opal up in the project's git repository", "init")
            step("Record the agent's session so far", "commit", "-m", "plan agreed")
            with open(session, "ab") as fh:
                fh.writelines(lines[half:])
            echo(style("\n(the agent keeps working: the session file grows)", dim=True))
            step("Record again: only the new turns are read and stored", "commit", "-m", "tests green")
            step("History", "log", "--oneline", "--graph")
            step("One commit in detail", "show", "HEAD~1")
            step("The turns of the current state", "log", "--turns", "-n", "8")
            step("One turn, readable", "show", "HEAD:3")
            step("Fork the context at the first commit", "branch", "try-sqlite", "HEAD~1")
            step("Work on the fork", "switch", "try-sqlite")
            step("Drop the last 3 turns (non-destructive)", "rewind", "3")
            step("Every change is in the operation log", "op", "log")
            step("Undo the rewind", "undo")
            step("Where we are", "status")
            step("All branches", "log", "--oneline", "--graph", "main", "try-sqlite")
        echo("")
        if keep:
            echo(f"The demo project is kept in {project}; try 'cd {project} && opal log --turns'.")
        else:
            echo("Done. (Run 'opal demo --keep DIR' to keep the project and explore it.)")
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)

"""One real session, every ``--json`` output of opal (for tests/cli/test_json_schema.py).

A real Claude Code session file (tests/fixtures), a real git project with a bare
remote over file://, and the real ``opal`` command line in a subprocess: each step
runs one command with ``--json`` and keeps what it printed, under the name of the
schema it must follow (opalgit/schemas.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from tests.conftest import git, opal
from tests.unit.test_porcelain import SESSION, grow, place


class Scenario:
    def __init__(self, root, home) -> None:
        self.root, self.home = root, home
        self.project = root / "project"
        self.env = {"HOME": str(home)}
        self.outputs: dict[str, list] = {}  # schema name -> every output that must follow it
        self.failures: list[str] = []

    def switch(self, name: str) -> None:
        r = opal("switch", name, cwd=self.project, env=self.env)
        if r.returncode != 0:
            self.failures.append(f"opal switch {name}: {r.stderr.strip()}")

    def run(self, schema: str, *args: str, cwd=None, ok=(0,)) -> dict | list | None:
        r = opal(*args, "--json", cwd=cwd or self.project, env=self.env)
        if r.returncode not in ok:
            self.failures.append(f"opal {' '.join(args)} --json: exit {r.returncode}: {r.stderr.strip()}")
            return None
        try:
            value = json.loads(r.stdout)
        except ValueError as exc:
            self.failures.append(f"opal {' '.join(args)} --json: not JSON ({exc}): {r.stdout[:200]!r}")
            return None
        self.outputs.setdefault(schema, []).append(value)
        return value


def build(root, home) -> Scenario:
    s = Scenario(root, home)
    p = s.project
    p.mkdir()
    git("init", "-q", "-b", "main", cwd=str(p))
    git("config", "user.name", "Test User", cwd=str(p))
    git("config", "user.email", "test@example.com", cwd=str(p))
    (p / "README").write_text("hello\n")
    git("add", "README", cwd=str(p))
    git("commit", "-q", "-m", "first", cwd=str(p))
    bare = root / "remote.git"
    git("init", "-q", "--bare", str(bare))
    git("remote", "add", "origin", "file://" + str(bare), cwd=str(p))

    assert opal("init", cwd=p, env=s.env).returncode == 0
    path = place(home, p, lines=30)
    s.run("commit", "commit", "-m", "first turns")
    s.run("commit", "commit")  # nothing new: committed false
    s.run("status", "status")
    grow(path, SESSION, start=30)
    s.run("commit", "commit", "-m", "all of it")
    s.run("branch-list", "branch")
    s.run("branch-create", "branch", "try", "HEAD~1")
    s.run("log", "log")
    s.run("log-turns", "log", "--turns")
    s.run("log-turns", "log", "--turns", "--all")
    s.run("show-commit", "show")
    s.run("show-turn", "show", "HEAD:1")
    s.run("show-turn", "show", "HEAD:-1")
    s.run("diff", "diff", "try", "main")
    s.run("grep", "grep", "-i", "e", "--all")
    s.run("grep", "grep", "no such text anywhere", ok=(1,))
    s.run("stats", "stats")
    s.run("fsck", "fsck")
    s.run("edit", "drop", "HEAD:2..HEAD:2")
    s.run("edit", "squash", "HEAD:3..HEAD:4", "-m", "two turns in one")
    s.run("edit", "trim", "--tool-output-over", "200")
    s.run("merge", "merge", "try")  # main contains it: up to date
    # Two lines that both changed the shared turns: a merge that stops, then resolves.
    s.switch("try")
    s.run("edit", "drop", "HEAD:5..HEAD:5")
    s.switch("main")
    s.run("merge", "merge", "try", ok=(0, 1))
    if _merging(s):
        s.run("merge", "merge", "--continue", "--strategy", "ours")
    s.run("branch-create", "branch", "ahead", "HEAD")
    s.switch("ahead")
    s.run("edit", "drop", "HEAD:1..HEAD:1")
    s.switch("main")
    # A fast-forward to a line that left a turn out needs --force (and says so).
    s.run("merge", "merge", "--force", "ahead", ok=(0, 1))
    s.run("op-log", "op", "log")
    s.run("export", "export", "--to", "codex")
    s.run("handoff", "handoff", "--to", "gemini")  # set up already, nothing new: the head is exported
    s.run("secrets-scan", "secrets", "scan")
    s.run("secrets-purge", "secrets", "purge", "--dry-run")
    s.run("hooks-install", "hooks", "install")
    s.run("hooks-status", "hooks", "status")
    (p / "code.txt").write_text("code\n")
    git("add", "code.txt", cwd=str(p))
    # The hook's opal finds the session under this HOME, as it would the user's.
    subprocess.run(["git", "commit", "-q", "-m", "code"], cwd=str(p), check=True, capture_output=True,
                   env=dict(os.environ, **s.env))
    s.run("at", "at", "HEAD")
    with open(p / "code.txt", "a") as fh:
        fh.write("not committed yet\n")
    s.run("blame", "blame", "code.txt")
    s.run("blame", "blame", "-L", "1,1", "README", "HEAD")
    git("checkout", "--", "code.txt", cwd=str(p))
    s.run("push", "push")
    s.run("fetch", "fetch")
    s.run("pull", "pull")
    s.run("hooks-uninstall", "hooks", "uninstall")
    other = root / "other"
    other.mkdir()
    git("init", "-q", "-b", "main", cwd=str(other))
    s.run("clone-state", "clone-state", "file://" + str(bare), cwd=other)
    s.run("server", "server", "status")
    s.run("gc", "gc", "--dry-run")
    s.run("gc", "gc", "--expire-oplog", "1.day.ago")
    return s


def _merging(s: Scenario) -> bool:
    st = opal("status", "--json", cwd=s.project, env=s.env)
    try:
        return json.loads(st.stdout).get("merge") is not None
    except ValueError:
        return False


if __name__ == "__main__":  # python -m tests.cli.json_scenario DIR: print every output (to write schemas)
    import pathlib
    import sys

    root = pathlib.Path(sys.argv[1])
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    home = root / "home"
    home.mkdir()
    os.environ["HOME"] = str(home)
    os.environ["OPAL_SERVER"] = "off"
    sc = build(root, home)
    json.dump({"outputs": sc.outputs, "failures": sc.failures}, sys.stdout, indent=1, default=repr)

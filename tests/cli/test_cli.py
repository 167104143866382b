"""The `opal` command line, run as a real subprocess the way a user runs it."""

from __future__ import annotations

import json
import os

import click
import pytest

from opalgit.cli import clidoc
from opalgit.cli.main import cli
from tests.conftest import ROOT, git, opal
from tests.unit.test_porcelain import grow, place


@pytest.fixture
def ready(project, home):
    assert opal("init", cwd=project).returncode == 0
    path = place(home, project, lines=30)
    return project, path


def test_a_whole_session_through_the_cli(ready):
    project, path = ready
    r = opal("commit", "-m", "plan agreed", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "[main " in r.stdout and "plan agreed" not in r.stderr
    grow(path, start=30)
    r = opal("commit", "-m", "tests green", "--json", cwd=project)
    data = json.loads(r.stdout)
    assert data["committed"] and data["incremental"] and data["new_records"] == 23
    r = opal("commit", cwd=project)
    assert r.returncode == 0 and "nothing to commit" in r.stdout

    r = opal("log", "--oneline", "--graph", cwd=project)
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("* ") and "(main)" in lines[0] and "tests green" in lines[0]
    r = opal("log", "--json", cwd=project)
    log = json.loads(r.stdout)["commits"]
    assert [c["message"] for c in log] == ["tests green", "plan agreed"]
    assert log[0]["session"]["id"] == "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"

    r = opal("log", "--turns", cwd=project)
    assert r.stdout.splitlines()[0].split()[:3] == ["#", "role", "kind"]
    turns = json.loads(opal("log", "--turns", "--json", cwd=project).stdout)["turns"]
    assert turns[0]["turn"] == 1 and {"role", "kind", "tool", "chars"} <= set(turns[0])

    r = opal("show", "HEAD~1", cwd=project)
    assert "plan agreed" in r.stdout and "Session:" in r.stdout and "Tokens:" in r.stdout
    tool_turn = next(t for t in turns if t["kind"] == "tool_call")
    r = opal("show", f"HEAD:{tool_turn['turn']}", cwd=project)
    assert r.returncode == 0 and "->" in r.stdout and tool_turn["tool"] in r.stdout
    shown = json.loads(opal("show", "HEAD:-1", "--json", cwd=project).stdout)
    assert shown["turn"] == len(turns) and shown["source"] is not None

    assert opal("branch", "try-sqlite", "HEAD~1", cwd=project).returncode == 0
    assert opal("switch", "try-sqlite", cwd=project).returncode == 0
    r = opal("rewind", "3", cwd=project)
    assert r.returncode == 0 and "dropped 3 turns" in r.stdout
    branches = json.loads(opal("branch", "--json", cwd=project).stdout)["branches"]
    assert {b["name"]: b["current"] for b in branches} == {"main": False, "try-sqlite": True}
    r = opal("undo", cwd=project)
    assert r.returncode == 0 and "rewind" in r.stdout
    ops = json.loads(opal("op", "log", "--json", cwd=project).stdout)["operations"]
    assert [o["command"] for o in ops[:4]] == ["undo", "rewind", "switch", "branch"]
    st = json.loads(opal("status", "--json", cwd=project).stdout)
    assert st["branch"] == "try-sqlite" and st["sessions"][0]["id"].startswith("5c0375b4")
    r = opal("log", "--oneline", "--graph", "main", "try-sqlite", cwd=project)
    assert "(main)" in r.stdout and "try-sqlite" in r.stdout
    assert git("fsck", "--full", "--strict", cwd=str(project)).returncode == 0


def test_errors_are_one_line_with_a_hint_and_an_exit_code(ready, tmp_path):
    project, _ = ready
    r = opal("show", "nope", cwd=project)
    assert r.returncode == 4
    assert r.stderr.startswith("opal: error: ") and "Traceback" not in r.stderr
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(os.urandom(2000) + b"\x00")
    r = opal("commit", "--file", str(junk), "--agent", "claude", cwd=project)
    assert r.returncode == 5 and str(junk) in r.stderr and "Traceback" not in r.stderr
    r = opal("log", cwd=tmp_path)
    assert r.returncode == 3 and "opal init" in r.stderr
    r = opal("rewind", cwd=project)
    assert r.returncode == 2
    r = opal("export", "--to", "nosuchagent", cwd=project)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_colour_only_on_request(ready):
    project, _ = ready
    opal("commit", cwd=project)
    assert "\x1b[" not in opal("log", cwd=project).stdout
    assert "\x1b[" in opal("--color", "always", "log", cwd=project).stdout


def test_every_command_has_help_with_examples():
    def walk(cmd, path):
        yield path, cmd
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])

    for path, cmd in walk(cli, []):
        if isinstance(cmd, click.Group):
            continue
        assert "Examples:" in (cmd.help or ""), f"opal {' '.join(path)} --help has no examples"


def test_cli_reference_is_in_sync_with_help():
    with open(os.path.join(ROOT, "docs", "cli.md"), encoding="utf-8") as fh:
        assert fh.read() == clidoc.render(), "docs/cli.md is stale: run python -m opalgit.cli.clidoc > docs/cli.md"


def test_version():
    r = opal("--version")
    assert r.returncode == 0 and r.stdout.startswith("opal ")

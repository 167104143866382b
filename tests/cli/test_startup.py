"""Process start-up: what each command imports (docs/performance.md, "A ten-turn
commit's own work"). `opal --version` needs neither pygit2 nor the porcelain, a command
imports only the CLI module that defines it (opalgit/cli/commands/<name>.py), and
adapter discovery reads no package metadata through importlib.metadata unless a
third-party adapter may be installed.

What a process imports is checked in a fresh interpreter: this test process has
imported everything already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import click
import pytest

from opalgit import agents as adapters
from opalgit.cli.main import COMMAND_MODULES, LAZY_COMMANDS, cli
from opalgit.errors import UsageError
from tests.conftest import ROOT, opal
from tests.unit.test_porcelain import grow, place

HEAVY = ("pygit2", "ssl", "importlib.metadata", "opalgit.porcelain", "opalgit.agents", "opalgit.store.objects")


def loaded_after(args: list[str], cwd, env: dict | None = None, prefixes=("opalgit", "pygit2", "ssl", "importlib.metadata"),
                 bare: bool = False) -> tuple[int, list[str]]:
    """Run ``opal ARGS`` in a fresh interpreter; its exit code and the modules it imported
    (those the interpreter had not imported at start-up already). ``bare``: the
    interpreter skips ``site`` (site-packages come in as plain paths), as one in a venv
    of its own starts, so that what a machine's ``.pth`` files import at start-up does
    not hide what opal imports."""
    code = textwrap.dedent(
        f"""
        import sys
        before = set(sys.modules)
        import contextlib, io, json
        from opalgit.cli.main import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rc = main({args!r})
        print(json.dumps([rc, sorted(m for m in set(sys.modules) - before if m.startswith({prefixes!r}))]))
        """
    )
    full_env = dict(os.environ)
    paths = [ROOT, full_env.get("PYTHONPATH", "")]
    if bare:
        import site

        paths += [*site.getsitepackages(), site.getusersitepackages()]
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    full_env.update(env or {})
    argv = [sys.executable, *(["-S"] if bare else []), "-c", code]
    r = subprocess.run(argv, cwd=str(cwd), env=full_env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rc, mods = json.loads(r.stdout.splitlines()[-1])
    return rc, mods


def run_python(code: str, env: dict | None = None) -> str:
    full_env = dict(os.environ)
    full_env.update(env or {})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=full_env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture
def recorded(project, home):
    """A repository whose session is committed: the next 'opal commit' has nothing to do."""
    assert opal("init", cwd=project).returncode == 0
    place(home, project, lines=30)
    r = opal("commit", "-m", "first", cwd=project)
    assert r.returncode == 0, r.stderr
    return project, {"HOME": str(home)}


# ------------------------------------------------------------------------------ what each command imports


def test_import_opalgit_does_not_import_pygit2():
    out = run_python("import sys, opalgit; print(sorted(m for m in ('pygit2', 'opalgit.store.objects') if m in sys.modules))")
    assert out.strip() == "[]"


def test_version_imports_neither_pygit2_nor_the_porcelain(tmp_path):
    rc, mods = loaded_after(["--version"], tmp_path)
    assert rc == 0
    assert not [m for m in mods if m.startswith(HEAVY)], mods
    assert not [m for m in mods if m in COMMAND_MODULES], mods


def test_a_noop_commit_imports_no_other_command_module_nor_package_metadata(recorded):
    project, env = recorded
    rc, mods = loaded_after(["commit"], project, env)
    assert rc == 0
    assert "opalgit.porcelain" in mods  # it did run
    for m in ("importlib.metadata", "opalgit.sync.remotes", "opalgit.sync.push", "opalgit.sync.fetch", "opalgit.hooks.install", "opalgit.sync.links"):
        assert m not in mods, m
    assert [m for m in mods if m in COMMAND_MODULES] == ["opalgit.cli.commands.commit"]


def test_a_small_commit_imports_no_stdlib_module_it_does_not_need(recorded, home):
    # Each of these costs a few milliseconds of every commit's start-up (tempfile
    # brings shutil, random, bz2 and lzma), a few per cent of a ten-turn commit.
    project, env = recorded
    grow(place(home, project, lines=30), start=30, end=60)
    rc, mods = loaded_after(["commit"], project, env, prefixes=("opalgit", "tempfile", "shutil", "secrets", "random",
                                                                "calendar", "bz2", "lzma"), bare=True)
    assert rc == 0
    assert "opalgit.porcelain" in mods and "opalgit.secrets.redact" in mods  # it redacted and stored the new turns
    assert [m for m in mods if not m.startswith("opalgit")] == []


def test_the_post_commit_hook_does_not_import_remotes(recorded):
    project, env = recorded
    rc, mods = loaded_after(["hook", "post-commit"], project, env)
    assert rc == 0
    assert "opalgit.hooks.install" in mods
    for m in ("importlib.metadata", "opalgit.sync.remotes", "opalgit.store.transport"):
        assert m not in mods, m
    assert [m for m in mods if m in COMMAND_MODULES] == ["opalgit.cli.commands.hook"]


def test_log_imports_only_its_own_command_module_and_no_adapter(recorded):
    project, env = recorded
    rc, mods = loaded_after(["log", "-n", "20"], project, env)
    assert rc == 0
    assert [m for m in mods if m in COMMAND_MODULES] == ["opalgit.cli.commands.log"]
    assert not [m for m in mods if m.startswith("opalgit.agents.") and m != "opalgit.agents.base"], mods


def test_read_commands_do_not_import_pygit2(recorded):
    """log, status, show and branch read opal's own files: pygit2 (and the ssl it
    brings) would be a third of 'opal status', over 3x 'opal --version' on the bench's
    100,000-turn history (docs/performance.md, the read.status row)."""
    project, env = recorded
    for args in (["log", "-n", "20"], ["status"], ["show", "main:1"], ["branch"]):
        rc, mods = loaded_after(args, project, env)
        assert rc == 0, args
        assert not [m for m in mods if m.startswith(("pygit2", "ssl"))], (args, mods)


def test_help_lists_every_command_as_before(tmp_path):
    r = opal("--help", cwd=tmp_path)
    assert r.returncode == 0
    listed = r.stdout.split("Commands:", 1)[1].split()
    for name, cmd in cli.commands.items():
        if not cmd.hidden:
            assert name in listed, name


# ------------------------------------------------------------------------------ the lazy command table


def test_lazy_table_names_the_module_of_every_command():
    commands = cli.commands  # reading it from outside imports every command module
    assert not cli._lazy
    for name, cmd in commands.items():
        assert cmd.callback is not None
        assert cmd.callback.__module__ == LAZY_COMMANDS[name] == "opalgit.cli.commands." + name.replace("-", "_"), name
    assert set(LAZY_COMMANDS) <= set(commands)
    assert set(LAZY_COMMANDS.values()) == set(COMMAND_MODULES)
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(commands)
    for name in commands:
        assert cli.get_command(ctx, name) is commands[name]


def test_an_unknown_command_still_suggests_the_lazy_ones(tmp_path):
    r = opal("lgo", cwd=tmp_path)
    assert r.returncode == 2 and "no command 'lgo'" in r.stderr
    assert "did you mean 'opal log'?" in r.stderr  # log is one of the lazily imported commands


# ------------------------------------------------------------------------------ adapters


def test_builtin_adapters_without_package_metadata():
    assert adapters._only_builtins()
    assert sorted(adapters.all_adapters()) == sorted(adapters.BUILTIN) == adapters.names()
    for name in adapters.BUILTIN:
        assert adapters.get(name) is adapters.all_adapters()[name]
        assert adapters.get(name).name == name
    with pytest.raises(UsageError) as exc:
        adapters.get("nosuch")
    assert exc.value.hint == "known agents: " + ", ".join(sorted(adapters.BUILTIN))


def test_get_imports_only_the_adapter_asked_for():
    out = run_python(
        """
        import sys
        from opalgit import agents as adapters
        before = set(sys.modules)
        adapters.get("codex")
        print(sorted(m for m in set(sys.modules) - before if m.startswith(("opalgit.agents.", "importlib.metadata"))))
        """
    )
    assert out.strip() == ("['opalgit.agents.codex', 'opalgit.agents.codex.adapter', 'opalgit.agents.codex.files', 'opalgit.agents.codex.format', "
                           "'opalgit.agents.codex.read', 'opalgit.agents.codex.threads']")


def _third_party(tmp_path, entries: str) -> dict:
    """A distribution on PYTHONPATH that declares ``entries`` in the adapters group."""
    site = tmp_path / "site"
    info = site / "opal_myagent-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: opal-myagent\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[console_scripts]\nmyagent = x:y\n\n[opalgit.adapters]\n{entries}\n")
    (site / "opal_myagent.py").write_text(
        "from opalgit.agents.base import Adapter\n\n"
        "class MyAgentAdapter(Adapter):\n    name = 'myagent'\n    title = 'My Agent'\n"
    )
    return {"PYTHONPATH": os.pathsep.join([str(site), ROOT])}


def test_a_third_party_adapter_is_found_through_its_entry_point(tmp_path):
    env = _third_party(tmp_path, "myagent = opal_myagent:MyAgentAdapter\nbroken = opal_myagent:Missing")
    out = run_python(
        """
        import json
        from opalgit import agents as adapters
        print(json.dumps([adapters._only_builtins(), adapters.names(), type(adapters.get("myagent")).__name__,
                          sorted(adapters.all_adapters())]))
        """,
        env,
    )
    only, names, cls, every = json.loads(out)
    assert only is False  # so importlib.metadata was asked
    assert names == every == sorted([*adapters.BUILTIN, "myagent"])  # the broken one is skipped
    assert cls == "MyAgentAdapter"


def test_an_entry_point_overrides_a_builtin_name_as_before(tmp_path):
    env = _third_party(tmp_path, "claude = opal_myagent:MyAgentAdapter")
    out = run_python(
        """
        from opalgit import agents as adapters
        print(type(adapters.get("claude")).__name__, type(adapters.all_adapters()["claude"]).__name__)
        """,
        env,
    )
    assert out.split() == ["MyAgentAdapter", "MyAgentAdapter"]


def test_entry_points_that_repeat_the_builtins_need_no_metadata(tmp_path):
    entries = "\n".join(f"{name} = {spec}" for name, spec in adapters.BUILTIN.items())
    env = _third_party(tmp_path, "# the built-ins, as opal's own metadata declares them\n" + entries)
    out = run_python(
        """
        import sys
        before = "importlib.metadata" in sys.modules
        from opalgit import agents as adapters
        print(adapters._only_builtins(), adapters.names(), not before and "importlib.metadata" in sys.modules)
        """,
        env,
    )
    assert out.split() == ["True", *str(sorted(adapters.BUILTIN)).split(), "False"]


def test_the_program_exits_with_the_command_code_and_all_its_output(recorded, tmp_path):
    """`python -m opalgit` and the `opal` script go through cli.run, which freezes the
    garbage collector before the interpreter shuts down: the exit code and every
    line of output must come through as before, and threads still finish."""
    project, env = recorded
    full_env = {**os.environ, **env, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    ok = subprocess.run([sys.executable, "-m", "opalgit", "log", "--json"], cwd=str(project), env=full_env,
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["commits"][0]["message"].startswith("first")
    nothing = subprocess.run([sys.executable, "-m", "opalgit", "commit"], cwd=str(project), env=full_env,
                             capture_output=True, text=True)
    assert nothing.returncode == 0 and nothing.stdout.startswith("nothing to commit")
    missing = subprocess.run([sys.executable, "-m", "opalgit", "show", "no-such-branch:1"], cwd=str(project),
                             env=full_env, capture_output=True, text=True)
    assert missing.returncode not in (0, 70) and missing.stderr.startswith("opal: error:")
    usage = subprocess.run([sys.executable, "-m", "opalgit", "no-such-command"], cwd=str(project), env=full_env,
                           capture_output=True, text=True)
    assert usage.returncode == 2 and "no command 'no-such-command'" in usage.stderr
    # A thread that is still writing when the command returns is waited for.
    marker = tmp_path / "written"
    code = f"""
        import sys, threading, time
        sys.argv = ["opal", "--version"]
        def late():
            time.sleep(0.2)
            open({str(marker)!r}, "w").write("done")
        threading.Thread(target=late).start()
        from opalgit.cli.main import run
        run()
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("opal")
    assert marker.read_text() == "done"


def test_the_default_path_looks_for_no_command_server(tmp_path):
    """With no server setting and none ever started (no socket folder), the `opal`
    program runs the command in its own process without working out a server's key or
    socket (no zlib for its checksum, no /proc reads for its process context), and
    makes no folder for one: the command server is opt-in (docs/server.md)."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("OPAL_SERVER", "CI")}
    env.update(XDG_RUNTIME_DIR=str(runtime), PYTHONPATH=ROOT)
    code = """
        import sys
        sys.argv = ["opal", "--version"]
        from opalgit.server import client
        from opalgit.server import key as serverkey
        try:
            client.main()
        except SystemExit:
            pass
        print(client.mode(), "zlib" in sys.modules, sorted(serverkey._PROC))
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"opal {__import__('opalgit').__version__}", "use False ['status']"]
    assert os.listdir(runtime) == []

"""Shell completion (opalgit/cli/completion.py), driven through the real shells.

bash: the completion function is called the way bash calls it (COMP_LINE, COMP_POINT,
COMP_WORDS, COMP_CWORD set as bash sets them, with its default COMP_WORDBREAKS), as
bash-completion's own tests do. fish: ``complete -C LINE``, fish's own machinery.
zsh: the function is called with ``words`` and ``CURRENT`` set and zsh's ``compadd``
and ``_describe`` recording what they are given. Each shell runs the ``opal`` of this
checkout, with and without a command server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import click
import pytest

from opalgit.cli import completion
from opalgit.cli.main import cli
from tests.conftest import git, opal
from tests.unit.test_porcelain import grow, place


@pytest.fixture
def shell_env(tmp_path):
    """PATH with an ``opal`` that runs this checkout, as the shell scripts call it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "opal"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m opalgit "$@"\n')
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """Branches main (2 commits), try-sqlite and fix/x, a remote origin with a tracking branch."""
    root = tmp_path_factory.mktemp("completion")
    home, project = root / "home", root / "project"
    home.mkdir()
    git("init", "-q", str(project))
    env = {"HOME": str(home)}
    assert opal("init", cwd=project).returncode == 0
    path = place(home, project, lines=30)
    assert opal("commit", "-m", "plan agreed", cwd=project, env=env).returncode == 0
    grow(path, start=30)
    assert opal("commit", "-m", "tests green", cwd=project, env=env).returncode == 0
    assert opal("branch", "try-sqlite", cwd=project).returncode == 0
    assert opal("branch", "fix/x", "HEAD~1", cwd=project).returncode == 0
    git("remote", "add", "origin", "file:///nowhere", cwd=str(project))
    head = git("rev-parse", "refs/opal/heads/main", cwd=str(project)).stdout.strip()
    git("update-ref", "refs/opal/remotes/origin/main", head, cwd=str(project))
    return project


def _bash_words(line: str) -> tuple[list[str], int]:
    """COMP_WORDS and COMP_CWORD as bash makes them with its default COMP_WORDBREAKS:
    words split at blanks, and ':' and '=' words of their own."""
    words = re.findall(r"[:=]+|[^\s:=]+", line)
    if not line or line[-1].isspace():
        words.append("")
    return words, len(words) - 1


def bash(line: str, cwd, env) -> tuple[list[str], str]:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    words, cword = _bash_words(line)
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    script = (
        'source <(opal completion bash) || exit 9\n'
        "COMP_LINE=\"$1\"; COMP_POINT=${#COMP_LINE}\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD={cword}\n"
        "_opal_completion opal \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD-1]}\"\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash", line], cwd=str(cwd), env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.splitlines() if w], r.stderr


def fish(line: str, cwd, env) -> tuple[list[str], str]:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed (scripts/install-system-packages.sh installs it)")
    script = f"opal completion fish | source; complete -C {_fish_quote(line)}"
    r = subprocess.run(["fish", "--no-config", "-c", script], cwd=str(cwd), env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # fish sorts the candidates itself; bash and zsh keep opal's order.
    return sorted(w.split("\t")[0] for w in r.stdout.splitlines() if w), r.stderr


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


ZSH_DRIVER = r"""
autoload -U compinit && compinit -u -d "$HOME/.zcompdump-test"
source <(opal completion zsh) || exit 9
compadd() { print -rl -- ${(P)${@[-1]}} }
_describe() { local name=$3; local item; for item in ${(P)name}; do print -r -- ${item%%%%:*}; done }
words=(${(z)1}); [[ $1 == *' ' ]] && words+=('')
CURRENT=${#words}
_opal_completion
"""


def zsh(line: str, cwd, env) -> tuple[list[str], str]:
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed (scripts/install-system-packages.sh installs it)")
    r = subprocess.run(["zsh", "-f", "-c", ZSH_DRIVER.replace("%%", "%"), "zsh", line], cwd=str(cwd), env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [w.replace("\\:", ":") for w in r.stdout.splitlines() if w], r.stderr


SHELLS = {"bash": bash, "zsh": zsh, "fish": fish}


# ------------------------------------------------------------------------------ what completes


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_commands_options_and_branches_complete(shell, repo, shell_env):
    run = SHELLS[shell]
    assert run("opal sw", repo, shell_env) == (["switch"], "")
    got, err = run("opal op ", repo, shell_env)
    assert got == ["log"] and err == ""
    got, _ = run("opal server st", repo, shell_env)
    assert got == ["start", "status", "stop"]
    got, _ = run("opal log --on", repo, shell_env)
    assert got == ["--oneline"]
    got, _ = run("opal switch ", repo, shell_env)
    assert got == ["fix/x", "main", "try-sqlite"]
    got, _ = run("opal merge --strategy th", repo, shell_env)
    assert got == ["theirs"]
    got, _ = run("opal push ", repo, shell_env)
    assert got == ["origin"]
    got, _ = run("opal export --to c", repo, shell_env)
    assert got == ["claude", "codex", "copilot"]
    got, _ = run("opal commit --session 5c", repo, {**shell_env, "HOME": str(repo.parent / "home")})
    assert got == ["5c0375b4-57a5-4f26-b12d-d022ee4e51b7"]


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_revisions_complete(shell, repo, shell_env):
    run = SHELLS[shell]
    got, _ = run("opal show ", repo, shell_env)
    expected = ["HEAD", "fix/x", "main", "try-sqlite", "origin/main"]
    assert got == (sorted(expected) if shell == "fish" else expected)
    got, _ = run("opal show HEAD~", repo, shell_env)
    assert got == ["HEAD~1"]
    got, _ = run("opal diff main..t", repo, shell_env)
    assert got == ["main..try-sqlite"]
    got, _ = run("opal drop m", repo, shell_env)  # a range of turns: REV: first, then its number
    assert got == ["main:"]
    got, _ = run("opal show fix/x:1", repo, shell_env)
    turns = json.loads(opal("log", "--turns", "--json", "fix/x", cwd=repo).stdout)["turns"]
    expected = [f"fix/x:{n}" for n in range(1, len(turns) + 1) if str(n).startswith("1")]
    assert len(expected) > 1
    # bash replaces only the part of the word after its last ':' (COMP_WORDBREAKS).
    if shell == "fish":
        expected.sort()
    assert got == ([e.split(":")[1] for e in expected] if shell == "bash" else expected)


def test_bash_completes_option_values_after_equals_and_colons(repo, shell_env):
    got, _ = bash("opal rewind --to=HEAD:1", repo, shell_env)
    assert got and all(g.startswith("1") and g.isdigit() for g in got)
    got, _ = bash("opal merge --strategy=th", repo, shell_env)
    assert got == ["theirs"]
    got, _ = bash("opal drop HEAD:1..HEAD:2", repo, shell_env)
    assert got and all(g.isdigit() and g.startswith("2") for g in got)


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_outside_a_repository_and_on_bad_input_a_tab_says_nothing(shell, tmp_path, shell_env):
    run = SHELLS[shell]
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    assert run("opal switch ", lonely, shell_env) == ([], "")
    assert run("opal show nosuch:", lonely, shell_env) == ([], "")
    assert run("opal -C /does/not/exist switch ", lonely, shell_env) == ([], "")
    assert run("opal sw", lonely, shell_env) == (["switch"], "")


def test_bad_revisions_in_a_repository_say_nothing(repo, shell_env):
    for line in ("opal show nosuch:", "opal show HEAD:x", "opal show main~x", "opal show HEAD:1:"):
        assert bash(line, repo, shell_env) == ([], ""), line


def test_the_script_is_the_same_through_click_protocol(shell_env, tmp_path):
    for shell in completion.SHELLS:
        a = subprocess.run(["opal", "completion", shell], env=shell_env, capture_output=True, text=True, cwd=tmp_path)
        b = subprocess.run(["opal"], env={**shell_env, "_OPAL_COMPLETE": f"{shell}_source"}, capture_output=True,
                           text=True, cwd=tmp_path)
        assert a.returncode == b.returncode == 0 and a.stdout == b.stdout and "_opal_completion" in a.stdout
        assert a.stderr == b.stderr == ""


# ------------------------------------------------------------------------------ with a command server


def test_completion_never_goes_through_a_running_server(repo, shell_env, tmp_path):
    """A TAB once printed a traceback when a server ran: the server's command process
    met click's SystemExit. Completion now always runs in the shell's own process."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**shell_env, "OPAL_SERVER": "on", "XDG_RUNTIME_DIR": str(runtime), "OPAL_SERVER_IDLE": "120"}
    env.pop("CI", None)
    r = subprocess.run(["opal", "server", "start", "--json"], env=env, cwd=repo, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    pid = info["pid"]
    try:
        assert info["running"]
        direct = subprocess.run(["opal"], env={**env, "_OPAL_COMPLETE": "bash_complete", "COMP_LINE": "opal switch "},
                                cwd=repo, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        assert (direct.returncode, direct.stderr) == (0, "")
        assert direct.stdout.split() == ["plain,fix/x", "plain,main", "plain,try-sqlite"]
        for shell, run in SHELLS.items():
            assert run("opal switch ", repo, env) == (["fix/x", "main", "try-sqlite"], ""), shell
        status = subprocess.run(["opal", "server", "status", "--json"], env=env, cwd=repo, capture_output=True,
                                text=True, stdin=subprocess.DEVNULL, timeout=120)
        assert json.loads(status.stdout)["pid"] == pid  # the same server still runs
    finally:
        _stop(pid)


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


# ------------------------------------------------------------------------------ declared values


def test_every_parameter_that_takes_a_value_is_declared():
    """A new argument or option is either completed (VALUES) or declared free text (FREE)."""
    seen = set()
    for path, cmd in completion.walk(cli):
        for param in cmd.params:
            if isinstance(param, click.Option) and (param.is_flag or param.count):
                continue
            if isinstance(param.type, (click.Choice, click.Path, click.File)) or param.name in ("directory",):
                continue  # click completes these itself
            seen.add((path, param.name))
            assert (path, param.name) in completion.VALUES or (path, param.name) in completion.FREE, (
                f"opal {path}: parameter {param.name!r} takes a value: add it to completion.VALUES (with what "
                "completes it) or to completion.FREE (the user's own words)")
    stale = (set(completion.VALUES) | set(completion.FREE)) - seen
    assert not stale, f"declared but no longer a parameter: {sorted(stale)}"


def test_click_still_has_what_completion_builds_on():
    from click import shell_completion

    assert hasattr(shell_completion, "_resolve_context") and hasattr(shell_completion, "_resolve_incomplete")
    assert click.Argument(["x"])._custom_shell_complete is None
    assert click.Argument(["x"], shell_complete=len)._custom_shell_complete is len


# ------------------------------------------------------------------------------ installed for good


def _installed(tmp_path, shell_env) -> dict:
    """A HOME with the scripts where docs/guide.md says to put them."""
    home = tmp_path / "inst-home"
    data, config, zfuncs = home / ".local" / "share", home / ".config", home / "zfuncs"
    for folder in (data / "bash-completion" / "completions", config / "fish" / "completions", zfuncs):
        folder.mkdir(parents=True)
    env = {**shell_env, "HOME": str(home), "XDG_DATA_HOME": str(data), "XDG_CONFIG_HOME": str(config)}
    for shell, target in (("bash", data / "bash-completion" / "completions" / "opal"),
                          ("zsh", zfuncs / "_opal"), ("fish", config / "fish" / "completions" / "opal.fish")):
        r = subprocess.run(["opal", "completion", shell], env=env, capture_output=True, text=True, check=True)
        target.write_text(r.stdout)
    return env


BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"


@pytest.mark.skipif(not os.path.exists(BASH_COMPLETION), reason="the bash-completion package is not installed (scripts/install-system-packages.sh installs it)")
def test_bash_loads_the_installed_script_on_first_tab(repo, shell_env, tmp_path):
    env = _installed(tmp_path, shell_env)
    script = (f"source {BASH_COMPLETION}\n"
              "__load_completion opal || exit 9\n"
              "complete -p opal\n"
              'COMP_LINE="opal sw"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=(opal sw); COMP_CWORD=1\n'
              '_opal_completion opal sw opal; printf "%s\\n" "${COMPREPLY[@]}"\n')
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], cwd=str(repo), env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["complete -o nosort -F _opal_completion opal", "switch"]


def test_zsh_autoloads_the_installed_script_from_fpath(repo, shell_env, tmp_path):
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed (scripts/install-system-packages.sh installs it)")
    env = _installed(tmp_path, shell_env)
    script = ('fpath=("$HOME/zfuncs" $fpath); autoload -U compinit && compinit -u -d "$HOME/.zcompdump"\n'
              "print -r -- ${_comps[opal]}\n"
              "compadd() { print -rl -- ${(P)${@[-1]}} }\n"
              "_describe() { local n=$3 i; for i in ${(P)n}; do print -r -- ${i%%:*}; done }\n"
              "words=(opal switch ''); CURRENT=3; _opal\n")
    r = subprocess.run(["zsh", "-f", "-c", script], cwd=str(repo), env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["_opal", "fix/x", "main", "try-sqlite"]


def test_fish_finds_the_installed_script_by_itself(repo, shell_env, tmp_path):
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed (scripts/install-system-packages.sh installs it)")
    env = _installed(tmp_path, shell_env)
    # Not --no-config: that skips the set-up that makes fish look in ~/.config/fish/completions.
    r = subprocess.run(["fish", "-c", "complete -C 'opal sw'"], cwd=str(repo), env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [w.split("\t")[0] for w in r.stdout.splitlines()] == ["switch"]

"""Nothing from outside opal becomes an option or a command of git (issue 17, item 1).

Every value that reaches git from opal's config, a remote, a session file or the user
is an operand after ``--``, or is refused first when git would still read it as an
option or a command. These tests run the real ``git`` against real bare repositories
and look for the file the planted command would have created.
"""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from opalgit import porcelain
from opalgit.errors import UsageError
from opalgit.porcelain.secrets import gate
from opalgit.store.argv import check_url, command
from opalgit.store.repo import Repository
from opalgit.sync import fetch, push
from opalgit.sync.remotes import Remote, RemoteError, git_message
from tests.compat.test_remote import clone, env_of, make_remote, open_repo
from tests.conftest import git, opal
from tests.unit.test_porcelain import place

ISSUE_URL = "--upload-pack=touch PWNED"  # the exact value of the issue's report


def planted(root) -> list[str]:
    """Every file named PWNED under ``root``: what a command that ran would have left."""
    return [os.path.join(d, f) for d, _, files in os.walk(str(root)) for f in files if f.startswith("PWNED")]


def old_config(repo_path, name: str, url: str) -> None:
    """A remote written into opal's config by hand, or by an opal that did not check."""
    with open(os.path.join(str(repo_path), ".git", "opal", "config"), "a") as fh:
        fh.write(f'[remote "{name}"]\n\turl = {url}\n')


@pytest.fixture
def checkout(tmp_path, home):
    """A clone of a shared bare remote, opal set up, one state committed."""
    bare = make_remote(tmp_path)
    a = clone(tmp_path, bare, "a")
    place(home, a, lines=12)
    porcelain.commit(open_repo(a), env_of(home), str(a))
    return a


# ------------------------------------------------------------------ the issue's report


def test_issue_repro_config_refuses_an_option_as_url(checkout, tmp_path):
    r = opal("config", "remote.evil.url", "--", ISSUE_URL, cwd=checkout)
    assert r.returncode == 2, r.stderr
    assert "refusing URL '--upload-pack=touch PWNED'" in r.stderr and "starts with '-'" in r.stderr
    assert "Traceback" not in r.stderr
    assert opal("config", "remote.evil.url", cwd=checkout).returncode == 1  # nothing was written


@pytest.mark.parametrize(
    "args",
    [["fetch", "evil"], ["pull", "evil"], ["push", "evil"], ["push", "evil", "main"], ["pull", "evil", "main"]],
)
def test_issue_repro_an_old_config_runs_nothing(checkout, tmp_path, args):
    old_config(checkout, "evil", ISSUE_URL)
    r = opal(*args, cwd=checkout)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "refusing URL '--upload-pack=touch PWNED' (remote.evil.url in " in r.stderr
    assert "ls-remote --upload-pack" not in r.stderr  # the hint names no command with the option
    assert planted(tmp_path) == []


@pytest.mark.parametrize(
    "args",
    [
        ["clone-state", "--", ISSUE_URL],
        ["fetch", "--", "--upload-pack=touch PWNED:x"],
        ["pull", "--", "--upload-pack=touch PWNED:x"],
        ["push", "--", "--receive-pack=touch PWNED:x"],
        ["push", "--", "--receive-pack=touch:PWNED", "main"],
        ["push", "--", "--exec=touch PWNED"],
    ],
)
def test_an_option_given_as_the_remote_is_refused(checkout, tmp_path, args):
    r = opal(*args, cwd=checkout)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "refusing URL" in r.stderr and "starts with '-'" in r.stderr
    assert planted(tmp_path) == []


def test_clone_state_refuses_before_setting_anything_up(tmp_path):
    fresh = tmp_path / "fresh"
    git("init", "-q", str(fresh))
    r = opal("clone-state", "--", ISSUE_URL, cwd=fresh)
    assert r.returncode == 2 and "refusing URL" in r.stderr
    assert not os.path.exists(fresh / ".git" / "opal")  # not even 'opal init'
    assert planted(tmp_path) == []


def test_branch_names_that_read_as_options_are_refused(checkout, tmp_path):
    for args in (["push", "origin", "--", "--receive-pack=x"], ["push", "origin", "--", "main:-x"], ["pull", "origin", "--", "-x"]):
        r = opal(*args, cwd=checkout)
        assert r.returncode == 2 and "is not a valid branch name" in r.stderr, (args, r.stderr)


def test_a_git_remote_whose_name_reads_as_an_option_is_refused(checkout, tmp_path):
    git("remote", "add", "--", "-evil", str(tmp_path / "srv" / "shared.git"), cwd=str(checkout))
    r = opal("fetch", "--", "-evil", cwd=checkout)
    assert r.returncode == 2 and "'-evil' cannot be used as a remote name" in r.stderr and "git remote rename" in r.stderr


def test_the_pre_push_hook_refuses_a_remote_that_reads_as_an_option(checkout, tmp_path, home):
    # With push.withCode, the hook pushes state to what git names: an option is refused there too.
    repo = open_repo(checkout)
    with pytest.raises(UsageError) as err:
        push.push(repo, env_of(home), "--receive-pack=touch PWNED", gate=gate)
    assert "refusing URL" in err.value.message
    assert planted(tmp_path) == []


# ------------------------------------------------------------------ '--' behind the checks


def test_the_remote_reaches_git_after_double_dash(checkout, tmp_path, home):
    """Even a value that got past the checks is an operand: git refuses it as a path."""
    repo = open_repo(checkout)
    evil = Remote("evil", ISSUE_URL, ISSUE_URL)
    with pytest.raises(RemoteError) as err:
        fetch.fetch_remote(repo, env_of(home), evil)
    assert "strange pathname" in err.value.message
    head = repo.refs.get("refs/opal/heads/main")
    push_evil = Remote("evil", "--receive-pack=touch PWNED", "--receive-pack=touch PWNED")
    with pytest.raises(RemoteError) as err:
        push._push_once(repo, env_of(home), push_evil, [f"{head.hex()}:refs/opal/heads/main"], [], rb="main", local="main")
    assert "strange pathname" in err.value.message
    assert planted(tmp_path) == []
    assert not [n for n in repo.refs.all() if n.startswith(fetch.STAGING_PREFIX)]


# ------------------------------------------------------------------ transports that run commands


@pytest.mark.parametrize("url", ["ext::sh -c touch% PWNED", "EXT::sh -c touch% PWNED", "fd::7"])
def test_command_transports_are_never_handed_to_git(checkout, tmp_path, url):
    # Even where the user's git allows every protocol, opal does not pass one itself.
    git("config", "protocol.allow", "always", cwd=str(checkout))
    r = opal("config", "remote.x.url", url, cwd=checkout)
    assert r.returncode == 2 and "transport runs a command" in r.stderr and "git remote add" in r.stderr
    old_config(checkout, "x", url)
    for args in (["fetch", "x"], ["push", "x"], ["pull", "x"], ["push", url], ["clone-state", url, "--name", "y"]):
        r = opal(*args, cwd=checkout)
        assert r.returncode == 2 and "transport runs a command" in r.stderr, (args, r.stderr)
    assert planted(tmp_path) == []


def test_a_git_remote_with_ext_is_left_to_gits_own_rules(checkout, tmp_path):
    # opal gives git the remote's name; git's default protocol.ext.allow (never) refuses it.
    git("remote", "add", "ext", "ext::sh -c touch% PWNED", cwd=str(checkout))
    r = opal("fetch", "ext", cwd=checkout)
    assert r.returncode == 1 and "transport 'ext' not allowed" in r.stderr, r.stderr
    assert planted(tmp_path) == []


def test_an_ssh_host_that_reads_as_an_option_is_blocked(checkout, tmp_path):
    marker = tmp_path / "PWNED-ssh"
    r = opal("config", "remote.s.url", f"ssh://-oProxyCommand=touch%20{marker}/x", cwd=checkout)
    assert r.returncode == 0  # a URL that starts like one: git itself refuses the host
    r = opal("fetch", "s", cwd=checkout)
    assert r.returncode == 1 and "strange hostname" in r.stderr, r.stderr
    assert planted(tmp_path) == []


def test_check_url_accepts_ordinary_urls():
    for url in ("git@example.com:team/app.git", "https://example.com/a.git", "file:///srv/a.git", "../a.git", "./-odd",
                "/srv/-odd.git", "ssh://host/x", "origin-mirror:x"):
        assert check_url(url, source="test") == url
    for url in ("", " ", "-x", "a\nb", "ext::x", "fd::3"):
        with pytest.raises(UsageError):
            check_url(url, source="test")


# ------------------------------------------------------------------ hints that can be pasted


def test_hints_quote_what_a_remote_or_a_config_named(checkout, tmp_path, home):
    """A command in a hint is safe to paste: a name with '$(...)' stays a name."""
    name = "$(touch${IFS}PWNED-hint)"
    bare = str(tmp_path / "srv" / "shared.git")
    push.push(open_repo(checkout), env_of(home), gate=gate)
    head = git("rev-parse", "refs/opal/heads/main", cwd=str(checkout)).stdout.strip()
    git("update-ref", f"refs/opal/heads/{name}", head, cwd=bare)  # a hostile remote's branch name
    b = tmp_path / "b"
    git("clone", "-q", bare, str(b))
    r = opal("clone-state", bare, cwd=b)
    assert r.returncode == 0, r.stderr
    assert command("opal", "log", f"origin/{name}") in r.stderr or command("opal", "log", f"origin/{name}") in r.stdout
    # A path from the config: the ls-remote hint of a failed fetch quotes it.
    old_config(checkout, "gone", f"/nowhere/{name}")
    r = opal("fetch", "gone", cwd=checkout)
    assert r.returncode == 1
    hint = next(line for line in r.stderr.splitlines() if line.startswith("hint:"))
    pasted = hint.split("('", 1)[1].split("')", 1)[0]
    assert pasted == command("git", "ls-remote", f"/nowhere/{name}")
    subprocess.run(["sh", "-c", pasted], cwd=str(tmp_path), capture_output=True)  # what a user pasting it runs
    subprocess.run(["sh", "-c", "echo " + command(f"origin/{name}")], cwd=str(tmp_path), capture_output=True)
    assert planted(tmp_path) == []


def test_command_quotes_for_the_shell():
    for words in (["opal", "log", "origin/$(x)"], ["git", "ls-remote", "a b;c"], ["opal", "x", "it's"]):
        assert shlex.split(command(*words)) == words
    assert command("opal", "fetch", "origin") == "opal fetch origin"


# ------------------------------------------------------------------ a store that came with the code


def _shipping_repo(tmp_path, marker) -> str:
    """A repository whose tree holds a ``.opal`` store with a config that runs a command."""
    src = tmp_path / "hostile"
    git("init", "-q", str(src))
    store = src / ".opal"
    git("init", "-q", "--bare", str(store))
    (store / "opal").mkdir()
    (store / "opal" / "config").write_text("[core]\n\tformat = 1\n")
    (store / "opal" / "HEAD").write_text("ref: refs/opal/heads/main\n")
    for empty in ("objects/pack", "refs"):  # git keeps no empty folder: a file makes the clone a store
        (store / empty / ".keep").write_text("")
    target = tmp_path / "target.git"
    git("init", "-q", "--bare", str(target))
    with open(store / "config", "a") as fh:
        fh.write(f'[remote "origin"]\n\turl = {target}\n\tuploadpack = touch {marker}\n\treceivepack = touch {marker}\n')
        fh.write(f"[core]\n\tsshCommand = touch {marker}\n")
    (src / "README.md").write_text("hello\n")
    git("add", "-f", "README.md", ".opal", cwd=str(src))
    git("commit", "-q", "-m", "ships a store", cwd=str(src))
    return str(src)


def test_an_opal_store_tracked_by_the_repository_is_not_used(tmp_path):
    marker = tmp_path / "PWNED-store"
    src = _shipping_repo(tmp_path, marker)
    victim = tmp_path / "victim"
    git("clone", "-q", src, str(victim))
    assert (victim / ".opal" / "HEAD").is_file()
    for args in (["fetch"], ["fetch", "origin"], ["log"], ["init"], ["clone-state", src]):
        r = opal(*args, cwd=victim)
        assert r.returncode == 3, (args, r.stdout, r.stderr)
        assert "is an opal store that the git repository at" in r.stderr and "git rm -r -q --cached" in r.stderr
    assert planted(tmp_path) == []
    # The hint's way out works: untracked, the folder is removed and opal runs with git's store.
    git("rm", "-r", "-q", "--cached", "--", str(victim / ".opal"), cwd=str(victim))
    subprocess.run(["rm", "-rf", str(victim / ".opal")], check=True)
    assert opal("init", cwd=victim).returncode == 0
    assert os.path.isdir(victim / ".git" / "opal")


def test_an_untracked_opal_store_inside_a_git_tree_is_still_used(tmp_path):
    # 'opal init' in a plain folder, that later ends up inside a git repository (a dotfiles HOME).
    outer = tmp_path / "home"
    git("init", "-q", str(outer))
    folder = outer / "scratch"
    folder.mkdir()
    Repository.init(str(tmp_path / "elsewhere"))  # a store of its own, outside git
    os.rename(tmp_path / "elsewhere" / ".opal", folder / ".opal")
    r = opal("status", cwd=folder)
    assert r.returncode == 0, r.stderr
    assert Repository.discover(str(folder)).own


# ------------------------------------------------------------------ the audit, kept true


#: Every place the code starts a program, and why no outside value becomes an option or
#: a command there (docs/remotes.md, "What opal hands to git"). A new call site fails
#: test_every_subprocess_call_site_is_audited until it is added here, with its reason.
AUDITED = {
    ("opalgit/store/gitcmd.py", "run", "subprocess.run"): "the one runner of git: argv list, no shell; callers below",
    ("opalgit/store/gitcmd.py", "start", "subprocess.Popen"): "the same, in the background",
    ("opalgit/store/transport.py", "run_git", "gitcmd.run"): "the runner of git for remotes: callers below",
    ("opalgit/sync/push.py", "_push_once", "transport.run_git"): "remote and refspecs after '--'; URL checked by argv.check_url",
    ("opalgit/sync/fetch.py", "fetch_remote", "transport.run_git"): "remote and refspecs after '--'; URL checked by argv.check_url",
    ("opalgit/hooks/install.py", "hooks_dir", "transport.run_git"): "fixed arguments (rev-parse --git-path hooks)",
    ("opalgit/hooks/install.py", "shared_hooks_path", "transport.run_git"): "fixed arguments (config --show-scope --get core.hooksPath)",
    ("opalgit/cli/commands/capture.py", "capture_hook", "os.execv"): "argv list: /bin/sh, opal's own capturehook.sh, this interpreter, and --agent/--event values the option checked or passes as one argument each (the script only compares the event, and quotes every use)",
    ("opalgit/store/refs.py", "RefStore._run_update_ref", "gitcmd.start"): "-m MSG is one argument git takes verbatim; refs on stdin",
    ("opalgit/porcelain/fsck.py", "_unreachable", "gitcmd.run"): "fixed arguments (fsck --unreachable --no-reflogs --no-progress)",
    ("opalgit/porcelain/gc.py", "_run_git_gc", "gitcmd.run"): "gc --quiet --prune=DATE and reflog expire --expire=DATE -- REFS: the date is opal's own spelling (now, never or an ISO date it formatted), the refs are reflog files found under logs/refs/opal/, after '--'",
    ("opalgit/store/repo.py", "Repository.config_set", "gitcmd.run"): "key built by opal (checked); git stops options at the key",
    ("opalgit/store/repo.py", "Repository.ask_identity", "gitcmd.start"): "fixed arguments (config --get-regexp user)",
    ("opalgit/store/repo.py", "Repository._read_identity", "gitcmd.run"): "fixed arguments (config --get-regexp user)",
    ("opalgit/store/repo.py", "Repository._git_date", "gitcmd.run"): "fixed arguments (var GIT_AUTHOR_IDENT / GIT_COMMITTER_IDENT); the date goes to git in the environment, never in argv",
    ("opalgit/porcelain/blame.py", "git_output", "gitcmd.run"): "log, rev-list and diff-tree with opal's own options; every revision is a full commit id opal resolved first (a name starting with '-' is refused), the file's path after '--'",
    ("opalgit/cli/demo.py", "run_demo", "subprocess.run"): "git init of an absolute path opal made",
    ("opalgit/cli/commands/resume.py", "resume", "subprocess.call"): "the agent by its PATH name; the session id is a fresh UUID",
    ("opalgit/agents/opencode/write.py", "_import", "subprocess.run"): "opencode (found on PATH) import FILE: the absolute path of the export opal wrote, no shell",
    ("opalgit/server/client.py", "spawn", "subprocess.Popen"): "this interpreter on opal's own code, socket path and idle time",
    ("bench/util.py", "run", "subprocess.Popen"): "the bench's own commands on paths it generated",
    ("bench/web.py", "_Web.__init__", "subprocess.Popen"): "the bench's opal web with fixed arguments, in a repo it made",
    ("bench/util.py", "isolated_python", "subprocess.run"): "fixed -c programs",
    ("bench/util.py", "_first_line", "subprocess.run"): "fixed version queries",
    ("bench/util.py", "machine", "subprocess.run"): "git -C ROOT with fixed arguments, paths after '--'",
}

_STARTERS = {("subprocess", n) for n in ("run", "call", "Popen", "check_output", "check_call", "getoutput", "getstatusoutput")}
_STARTERS |= {("os", n) for n in ("system", "popen", "execv", "execvp", "execve", "execl", "execlp", "execvpe", "spawnv",
                                  "spawnvp", "spawnl", "spawnlp", "posix_spawn", "posix_spawnp")}
_STARTERS |= {("gitcmd", "run"), ("gitcmd", "start"), ("transport", "run_git")}


def _call_sites(root: str) -> set[tuple[str, str, str]]:
    import ast

    found = set()
    for folder in ("opalgit", "bench"):
        for d, dirs, files in os.walk(os.path.join(root, folder)):
            dirs[:] = [x for x in dirs if not x.startswith(".") and x != "__pycache__"]  # not a venv the bench made
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(d, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")

                def visit(node, where: str) -> None:
                    for child in ast.iter_child_nodes(node):
                        inner = where
                        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                            inner = f"{where}.{child.name}" if where else child.name
                        if isinstance(child, ast.Call):
                            f = child.func
                            key = (f.value.id, f.attr) if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
                            key = ("transport", "run_git") if isinstance(f, ast.Name) and f.id == "run_git" else key
                            if key in _STARTERS:
                                found.add((rel, where, ".".join(key)))
                        visit(child, inner)

                with open(path, encoding="utf-8") as fh:
                    visit(ast.parse(fh.read()), "")
    return found


def test_every_subprocess_call_site_is_audited():
    from tests.conftest import ROOT

    found = _call_sites(ROOT)
    new = sorted(found - set(AUDITED))
    assert not new, f"unaudited call sites (add each to AUDITED with how its arguments are made safe): {new}"
    gone = sorted(set(AUDITED) - found)
    assert not gone, f"AUDITED names call sites that no longer exist: {gone}"


def test_what_a_remote_says_reaches_the_terminal_masked():
    # git masks its sideband ("remote: ...") itself; a rejection's reason and the
    # message opal quotes are masked by opal as well, whatever git version runs.
    updates = push.parse_push_porcelain("!\trefs/x:refs/opal/heads/main\t[remote rejected] (\x1b]0;owned\x07 no)\n")
    assert updates[0].reason == "?]0;owned? no" and "\x1b" not in updates[0].summary
    proc = subprocess.CompletedProcess([], 1, "", "remote: error: \x1b[2J\x1b[31mgone\n")
    assert git_message(proc) == "remote: error: ?[2J?[31mgone"
    proc = subprocess.CompletedProcess([], 1, "", "remote: x\nfatal: the end\x1b[0m\x00\n")
    assert git_message(proc) == "the end?[0m?"

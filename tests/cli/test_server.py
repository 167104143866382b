"""The command server (opalgit/server/daemon.py) and the ``opal`` program's client (opalgit/server/client.py).

Real processes throughout: ``python -m opalgit`` as a user runs it, a real server on a
real Unix socket in a runtime folder of each test's own. Every server a test starts is
stopped at its end, by the PID it wrote.
"""

from __future__ import annotations

import glob
import json
import os
import pty
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from opalgit.agents.claude.files import project_key
from opalgit.server import client
from tests.conftest import ROOT
from tests.unit.test_porcelain import SESSION

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")


class Served:
    """``opal`` as a user has it (no OPAL_SERVER setting: a running server is used, none
    is started), in a runtime folder of its own; a test starts the server explicitly
    (:meth:`start`), or sets ``OPAL_SERVER=auto`` (:data:`AUTO`)."""

    def __init__(self, tmp_path) -> None:
        self.runtime = tmp_path / "run"
        self.runtime.mkdir(mode=0o700)
        self.env = dict(os.environ, XDG_RUNTIME_DIR=str(self.runtime), OPAL_SERVER_IDLE="120")
        for var in ("OPAL_SERVER", "CI"):
            self.env.pop(var, None)

    @property
    def folder(self) -> str:
        return os.path.join(self.runtime, "opal")

    def opal(self, *args: str, cwd=None, env: dict | None = None, input: str | None = None,
             stdin=None, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "opalgit", *args], cwd=str(cwd) if cwd else None,
            env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout,
            input=input, stdin=subprocess.DEVNULL if input is None and stdin is None else stdin,
        )

    def popen(self, *args: str, cwd=None, env: dict | None = None, own_group: bool = False) -> subprocess.Popen:
        """``own_group``: in a process group of its own in this session, as a shell puts
        a job. Ctrl-Z needs it: the kernel discards a stop signal's default action in an
        orphaned process group, which a test run started in the background by a
        non-interactive shell is, and a shell's job never is."""
        return subprocess.Popen(
            [sys.executable, "-m", "opalgit", *args], cwd=str(cwd) if cwd else None,
            env={**self.env, **(env or {})}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, process_group=0 if own_group else None,
        )

    def info(self, env: dict | None = None, package: str | None = None) -> dict | None:
        """What the server says of itself (counts as one request). ``package``: the
        folder of the opalgit the commands import, if not this test's own."""
        e = {**self.env, **(env or {})}
        key = client.server_key(e, package)
        return client.server_info(client.socket_path(e, key), key)

    def start(self) -> dict:
        r = self.opal("server", "start", "--json")
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        assert info["running"], info
        return info

    def served(self) -> int:
        info = self.info()
        assert info is not None
        return info["served"]

    def pids(self) -> list[int]:
        out = []
        for name in glob.glob(os.path.join(self.folder, "*.pid")):
            try:
                out.append(int(open(name).read().strip()))
            except (OSError, ValueError):
                pass
        return out

    def stop_all(self) -> None:
        for pid in self.pids():
            _end(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie counts as ended (a server is reparented; this test process is not its parent).
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _end(pid: int, within: float = 10.0) -> None:
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)
        os.kill(pid, signal.SIGCONT)  # a server a test stopped acts on it once continued
    _wait_gone(pid, within)


def _wait_gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _wait(predicate, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


@pytest.fixture
def project(tmp_path, served):
    """A git repository with opal set up and a Claude Code session in a config folder
    that only the commands' environment names (CLAUDE_CONFIG_DIR)."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    config = tmp_path / "claude-config"
    folder = config / "projects" / project_key(str(work))
    folder.mkdir(parents=True)
    shutil.copyfile(SESSION, folder / os.path.basename(SESSION))
    served.env["CLAUDE_CONFIG_DIR"] = str(config)
    return work


#: The setting with which a command starts a server when none runs.
AUTO = {"OPAL_SERVER": "auto"}


def _off(served: Served, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return served.opal(*args, cwd=cwd, env={"OPAL_SERVER": "off"})


# ----------------------------------------------------------------------------- same


def test_commands_run_in_the_server_and_say_the_same(served, project):
    started = served.start()
    pid = started["pid"]
    before = served.served()
    r = served.opal("init", cwd=project)
    assert r.returncode == 0, r.stderr
    # The session is found through the command's own environment (CLAUDE_CONFIG_DIR).
    r = served.opal("commit", "-m", "through the server", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "turns" in r.stdout
    for args in (["--version"], ["log", "--oneline"], ["show", "HEAD:1"], ["status"], ["log", "--turns", "-n", "3"]):
        mine, theirs = served.opal(*args, cwd=project), _off(served, *args, cwd=project)
        assert (mine.returncode, mine.stdout, mine.stderr) == (theirs.returncode, theirs.stdout, theirs.stderr), args
    # A subfolder: the command runs where the client was started.
    sub = project / "src" / "deep"
    sub.mkdir(parents=True)
    mine, theirs = served.opal("log", "-n", "1", cwd=sub), _off(served, "log", "-n", "1", cwd=sub)
    assert mine.returncode == 0 and mine.stdout == theirs.stdout
    info = served.info()
    assert info["pid"] == pid  # the same server all along
    # init, commit, five commands, the subfolder's log: 8 commands, plus one request for info.
    assert info["served"] - before == 8 + 1


def test_repository_written_through_the_server_passes_git_fsck(served, project):
    served.start()
    assert served.opal("init", cwd=project).returncode == 0
    assert served.opal("commit", cwd=project).returncode == 0
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=project, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr
    heads = subprocess.run(["git", "for-each-ref", "refs/opal/heads"], cwd=project, capture_output=True, text=True)
    assert "refs/opal/heads/main" in heads.stdout


def test_exit_codes_and_errors_come_back(served, project):
    served.start()
    before = served.served()
    for args in (["no-such-command"], ["log"], ["show", "nope:3"], ["rewind", "-5"]):
        mine, theirs = served.opal(*args, cwd=project), _off(served, *args, cwd=project)
        assert mine.returncode == theirs.returncode != 0, args
        assert mine.stderr == theirs.stderr and mine.stdout == theirs.stdout, args
    assert served.served() - before == 4 + 1


def test_umask_is_the_clients(served, project, tmp_path):
    served.start()
    for name, mode in (("served", ""), ("own", "off")):
        work = tmp_path / name
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        r = subprocess.run([sys.executable, "-m", "opalgit", "init"], cwd=work, env={**served.env, "OPAL_SERVER": mode},
                           capture_output=True, text=True, preexec_fn=lambda: os.umask(0o077),
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
    def modes(root):
        return {os.path.relpath(p, root): os.stat(p).st_mode & 0o777
                for p in glob.glob(os.path.join(root, ".git", "**", "*"), recursive=True)
                if "opal" in os.path.relpath(p, root)}
    served_modes, own = modes(tmp_path / "served"), modes(tmp_path / "own")
    assert served_modes and served_modes == own
    assert all(m & 0o077 == 0 for m in served_modes.values())


# ------------------------------------------------------------------- streams, signals


def _reading(served: Served, project, server_pid: int, own_group: bool = False) -> tuple[subprocess.Popen, int]:
    """``opal hook post-rewrite``, which reads its standard input to the end: it waits on
    a pipe this test holds, in the server's command process (found by its working
    folder)."""
    proc = served.popen("hook", "post-rewrite", "amend", cwd=project, own_group=own_group)
    found: list[int] = []

    def reading() -> bool:
        assert proc.poll() is None, proc.communicate()
        found[:] = [p for p in _command_processes(server_pid) if _cwd(p) == str(project) and _reading_stdin(p)]
        return bool(found)

    assert _wait(reading)
    return proc, found[0]


#: The read system call's number, as /proc/PID/syscall shows it.
_READ = {"x86_64": "0", "aarch64": "63"}.get(os.uname().machine)


def _reading_stdin(pid: int) -> bool:
    """Whether ``pid`` waits in read(0, ...): past the server's hand-over, in the command."""
    if _READ is None:  # another architecture: the hand-over takes microseconds
        time.sleep(0.5)
        return True
    try:
        fields = open(f"/proc/{pid}/syscall").read().split()
    except OSError:
        return False
    return fields[:2] == [_READ, "0x0"]


def _cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def _command_processes(server_pid: int) -> list[int]:
    out = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == server_pid and fields[0] != "Z":
            out.append(int(stat.split("/")[2]))
    return out


def test_standard_input_is_the_clients(served, project):
    info = served.start()
    assert served.opal("init", cwd=project).returncode == 0
    proc, child = _reading(served, project, info["pid"])
    time.sleep(0.2)
    assert proc.poll() is None  # still reading the pipe this test holds
    out, err = proc.communicate("", timeout=60)
    assert proc.returncode == 0, err
    assert _wait_gone(child, 10)


def test_ctrl_c_reaches_the_command(served, project):
    info = served.start()
    assert served.opal("init", cwd=project).returncode == 0
    proc, child = _reading(served, project, info["pid"])
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)  # with its input still open: only the signal can end it
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Aborted." in err  # as click says it in a process of its own
    assert _wait_gone(child, 10)


def test_a_killed_command_is_reported_not_retried(served, project):
    info = served.start()
    assert served.opal("init", cwd=project).returncode == 0
    proc, child = _reading(served, project, info["pid"])
    os.kill(child, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "ended without an exit status" in err
    assert served.info()["pid"] == info["pid"]  # the server goes on


def test_an_interactive_terminal_runs_the_command_here(served, project):
    served.start()
    before = served.served()
    leader, follower = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "opalgit", "--version"], env=served.env, stdin=follower,
                           stdout=follower, stderr=subprocess.PIPE, timeout=60)
        assert r.returncode == 0
        assert b"opal " in os.read(leader, 1024)
    finally:
        os.close(leader)
        os.close(follower)
    assert served.served() - before == 1  # only the info request


def test_commands_that_start_an_agent_or_manage_the_server_run_here(served, project):
    served.start()
    assert served.opal("init", cwd=project).returncode == 0
    before = served.served()
    for args in (["resume", "--agent", "codex"], ["-C", str(project), "resume", "--agent", "claude"],
                 ["--color", "never", "server", "status"], ["push"], ["fetch"], ["pull"],
                 ["clone-state", str(project / "nowhere")]):
        served.opal(*args, cwd=project)
    served.opal("hook", "pre-push", "origin", "file:///nowhere", cwd=project, input="")
    assert served.served() - before == 2  # the info requests of 'server status' and of this test
    # ... while the other hooks are served.
    served.opal("hook", "post-commit", cwd=project)
    served.opal("hook", "post-rewrite", "amend", cwd=project, input="")
    assert served.served() - before == 2 + 2 + 1


def test_runs_here():
    assert client.runs_here(["-v", "push", "origin"])
    assert client.runs_here(["hook", "pre-push", "origin", "url"])
    assert not client.runs_here(["hook", "post-commit"])
    assert not client.runs_here(["commit", "-m", "push"])
    assert not client.runs_here(["log", "push"])
    assert not client.runs_here([])
    assert not client.runs_here(["-C", "hook", "hook", "post-commit"])
    assert client.runs_here(["-C", "push", "push"])


def test_command_name_skips_the_global_options():
    assert client.command_name(["-C", "server", "log"]) == "log"
    assert client.command_name(["--color", "never", "-v", "resume", "--agent", "x"]) == "resume"
    assert client.command_name(["--color=never", "--no-pager", "server"]) == "server"
    assert client.command_name(["--", "log"]) == "log"
    assert client.command_name(["--version"]) is None
    assert client.command_name([]) is None


def test_many_commands_at_once(served, project):
    served.start()
    assert served.opal("init", cwd=project).returncode == 0
    assert served.opal("commit", cwd=project).returncode == 0
    want = _off(served, "log", "--oneline", cwd=project).stdout
    before = served.served()
    procs = [served.popen("log", "--oneline", cwd=project) for _ in range(6)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(out == want for out, _ in outs)
    assert served.served() - before == 6 + 1


# --------------------------------------------------------------------------- lifecycle


def test_with_auto_the_first_command_starts_a_server_in_the_background(served, project):
    assert served.info() is None
    r = served.opal("--version", env=AUTO)
    assert r.returncode == 0 and r.stdout.startswith("opal ")
    assert _wait(lambda: served.info() is not None), open(glob.glob(os.path.join(served.folder, "*.log"))[0]).read()
    st = os.stat(served.folder)
    assert st.st_mode & 0o777 == 0o700 and st.st_uid == os.getuid()


def _servers_at(path: str) -> list[int]:
    out = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            args = open(cmdline, "rb").read().split(b"\0")
        except OSError:
            continue
        if b"from opalgit.server.daemon import main" in b" ".join(args) and path.encode() in args:
            pid = int(cmdline.split("/")[2])
            if _alive(pid):
                out.append(pid)
    return out


def test_a_burst_of_first_commands_starts_one_server(served, project):
    procs = [served.popen("--version", env=AUTO) for _ in range(5)]
    assert all(p.communicate(timeout=60)[0].startswith("opal ") for p in procs)
    assert _wait(lambda: served.info() is not None)
    time.sleep(0.5)
    path = client.socket_path(served.env, client.server_key(served.env))
    assert _servers_at(path) == [served.info()["pid"]]
    assert not os.path.exists(path + ".starting")


def test_default_off_and_ci(served, project):
    for env in ({}, {"OPAL_SERVER": "off"}, {"CI": "true"}, {"CI": "true", **AUTO}):
        for args in (["--version"], ["init"], ["status"]):
            r = served.opal(*args, cwd=project, env=env)
            assert r.returncode == 0, (env, args, r.stderr)
    time.sleep(0.3)
    assert not os.path.exists(served.folder)  # nothing started, nothing made
    served.start()
    before = served.served()
    for env in ({}, {"CI": "true"}, {"CI": "true", **AUTO}):
        assert served.opal("--version", env=env).returncode == 0
    assert served.served() - before == 3 + 1  # a running server is used, by default too...
    assert served.opal("--version", env={"OPAL_SERVER": "off"}).returncode == 0
    assert served.served() - before == 3 + 2  # ... but not with OPAL_SERVER=off


def test_with_a_clean_home_and_no_setting_a_command_leaves_no_server_behind(tmp_path):
    """As a user who never asked for a server has opal: commands that read and write,
    a hook, and nothing left running, no socket, no runtime folder."""
    home, runtime, work = tmp_path / "home", tmp_path / "run", tmp_path / "work"
    home.mkdir()
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("OPAL_SERVER", "CI", "OPAL_HOOK_TIMEOUT")}
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(runtime))
    env.pop("XDG_CONFIG_HOME", None)
    subprocess.run(["git", "init", "-q", str(work)], check=True, env=env)
    folder = home / ".claude" / "projects" / project_key(str(work))
    folder.mkdir(parents=True)
    shutil.copyfile(SESSION, folder / os.path.basename(SESSION))

    def run(*args, **kw):
        return subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, **kw)

    for args in (["--version"], ["init"], ["commit", "-m", "one"], ["log"], ["status"], ["show", "HEAD"],
                 ["branch"], ["hooks", "install"], ["server", "status"]):
        r = run(sys.executable, "-m", "opalgit", *args)
        assert r.returncode == 0, (args, r.stderr)
    (work / "a.txt").write_text("a\n")
    run("git", "add", "a.txt", check=True)
    assert run("git", "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "code").returncode == 0
    assert _wait(lambda: not glob.glob(str(work / ".git" / "opal" / "hooks" / "*.json"))
                 and not glob.glob(str(work / ".git" / "opal" / "hook-output.*")), 60)
    assert os.listdir(runtime) == []  # no socket, not even the folder for one
    assert not [p for p in _opal_processes() if str(runtime).encode() in p[1]]


def _opal_processes() -> list[tuple[int, bytes]]:
    """Every live process running opal's server, with its environment."""
    out = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        pid = int(cmdline.split("/")[2])
        try:
            args = open(cmdline, "rb").read()
            environ = open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        if b"opalgit.server" in args and _alive(pid):
            out.append((pid, environ))
    return out


def test_shell_completion_runs_in_its_own_process_even_with_a_server(served, project):
    served.start()
    before = served.served()
    r = served.opal(env={"_OPAL_COMPLETE": "bash_complete", "COMP_WORDS": "opal lo", "COMP_CWORD": "1"})
    assert r.returncode == 0, r.stderr
    assert "plain,log" in r.stdout.replace("\n", ",")
    assert served.served() - before == 1  # only the info request: completion never reached it


def test_a_stopped_server_is_passed_over_and_none_started_without_auto(served, project):
    old = _stopped_server(served)
    try:
        r = served.opal("init", cwd=project, env={"OPAL_SERVER_WAIT": "600"}, timeout=60)
        assert r.returncode == 0 and r.stderr.endswith("this command runs in its own process\n"), r.stderr
        time.sleep(0.5)
        path = client.socket_path(served.env, client.server_key(served.env))
        assert _servers_at(path) == [old]  # no new one
    finally:
        _resume_and_end(old)


def test_a_folder_others_can_enter_is_not_used(served, project):
    os.makedirs(served.folder, mode=0o755)
    os.chmod(served.folder, 0o755)
    r = served.opal("--version")
    assert r.returncode == 0 and r.stdout.startswith("opal ")
    time.sleep(0.3)
    assert not _sockets(served)
    r = served.opal("server", "start")
    assert r.returncode == 1
    assert "only you can enter" in r.stderr


def test_stop_and_status(served, project):
    r = served.opal("server", "status")
    assert r.returncode == 0 and "No command server runs" in r.stdout
    info = served.start()
    r = served.opal("server", "status")
    assert f"Command server {info['pid']}" in r.stdout
    r = served.opal("server", "stop")
    assert r.returncode == 0 and f"Stopped command server {info['pid']}" in r.stdout
    assert _wait_gone(info["pid"], 10)
    assert not _sockets(served)  # the socket went with it
    assert not os.listdir(served.folder)  # and its pid file and its log, which said nothing


def _sockets(served: Served) -> list[str]:
    import stat

    return [p for p in glob.glob(os.path.join(served.folder, "*")) if stat.S_ISSOCK(os.lstat(p).st_mode)]


def test_idle_server_stops_by_itself(served, project):
    info = served.opal("server", "start", "--json", env={"OPAL_SERVER_IDLE": "1"})
    pid = json.loads(info.stdout)["pid"]
    assert _wait_gone(pid, 15)
    assert served.info() is None
    assert not glob.glob(os.path.join(served.folder, "*.pid"))


def test_changed_code_is_never_run_by_an_old_server(served, project, tmp_path):
    # A copy of the package, so that its files can change under a running server.
    copy = tmp_path / "pkg"
    shutil.copytree(os.path.join(ROOT, "opalgit"), copy / "opalgit", ignore=shutil.ignore_patterns("__pycache__"))
    env, package = {"PYTHONPATH": str(copy)}, str(copy / "opalgit")
    r = served.opal("server", "start", "--json", env=env, cwd=tmp_path)
    old = json.loads(r.stdout)["pid"]
    assert served.info(env, package)["pid"] == old
    version = copy / "opalgit" / "__init__.py"
    text = version.read_text()
    version.write_text(text.replace('__version__ = "0.1.0"', '__version__ = "0.1.0+changed"'))
    r = served.opal("--version", env=env, cwd=tmp_path)
    assert r.stdout.strip() == "opal 0.1.0+changed"  # run by the client, not the old server
    assert _wait_gone(old, 10)  # which refused it and stopped
    # No setting: the next commands run in their own process, the new code, and start none.
    assert served.opal("--version", env=env, cwd=tmp_path).stdout.strip() == "opal 0.1.0+changed"
    time.sleep(0.3)
    assert served.info(env, package) is None
    # With OPAL_SERVER=auto a command starts a fresh server, which runs the new code.
    assert served.opal("--version", env={**env, **AUTO}, cwd=tmp_path).returncode == 0
    assert _wait(lambda: served.info(env, package) is not None)
    assert served.info(env, package)["pid"] != old
    assert served.opal("--version", env=env, cwd=tmp_path).stdout.strip() == "opal 0.1.0+changed"


def test_a_module_that_fails_to_load_does_not_stop_the_server(served, project, tmp_path):
    copy = tmp_path / "pkg"
    shutil.copytree(os.path.join(ROOT, "opalgit"), copy / "opalgit", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "opalgit" / "zz_broken.py").write_text("raise ImportError('a plugin with a missing dependency')\n")
    env, package = {"PYTHONPATH": str(copy)}, str(copy / "opalgit")
    r = served.opal("server", "start", "--json", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    before = served.info(env, package)["served"]
    assert served.opal("--version", env=env, cwd=tmp_path).stdout.startswith("opal ")
    assert served.info(env, package)["served"] - before == 2
    full = {**served.env, **env}
    log = open(client.socket_path(full, client.server_key(full, package)) + ".log").read()
    assert "not preloaded: opalgit.zz_broken: ImportError: a plugin with a missing dependency" in log


def test_a_later_server_takes_the_socket_and_the_first_stops(served, project):
    first = served.start()["pid"]
    key = client.server_key(served.env)
    path = client.socket_path(served.env, key)
    proc = client.spawn(path, key, idle=60)
    try:
        assert _wait(lambda: (served.info() or {}).get("pid") == proc.pid)
        assert _wait_gone(first, 15)  # it looks at its socket every few seconds
    finally:
        _end(proc.pid)
        proc.wait(10)


def test_junk_on_the_socket_does_not_stop_the_server(served, project):
    info = served.start()
    path = client.socket_path(served.env, client.server_key(served.env))
    for junk in (b"", b"\x00\x00\x00\x10garbage", b"\xff" * 64, b"\x05\x00\x00\x00\x00\x00\x00\x00\x00"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(15)
            s.recv(64)
    assert served.info()["pid"] == info["pid"]
    assert served.opal("--version").stdout.startswith("opal ")


# ------------------------------------------------------------------------------ client


def test_the_client_imports_nothing_heavy():
    code = ("import sys; before = set(sys.modules); import opalgit.server.client; "
            "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
            "('click', 'pygit2', 'typing', 'msgpack', 'zstandard', 'orjson', 'subprocess', 'socket')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_the_server_keeps_nothing_a_command_works_out_from_its_environment():
    # What the server loads is shared by every command; what a command derives from its
    # environment or the installed packages (the temporary folder, the adapters found
    # through package metadata) must be worked out in the command's own process.
    code = ("from opalgit.server import daemon as server; server._preload(); import tempfile; from opalgit import agents as adapters; "
            "print(tempfile.tempdir, adapters._cache)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["None", "None"]


def test_the_opal_program_is_the_client():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        scripts = tomllib.load(fh)["project"]["scripts"]
    assert scripts["opal"] == "opalgit.server.client:main"


def test_key_follows_what_the_server_process_depends_on():
    base = {"HOME": "/h", "PATH": "/bin", "LANG": "C.UTF-8", "GIT_DIR": "/x/.git"}
    key = client.server_key(base)
    assert client.server_key({**base, "PATH": "/usr/bin", "GIT_DIR": "/y/.git", "PWD": "/y"}) == key
    for change in ({"HOME": "/other"}, {"LANG": "C"}, {"PYTHONPATH": "/p"}, {"GIT_CONFIG_GLOBAL": "/g"},
                   {"XDG_CONFIG_HOME": "/c"}, {"LC_ALL": "C"}):
        assert client.server_key({**base, **change}) != key, change


def test_key_follows_the_interpreters_options():
    code = "from opalgit.server import client; print(client.server_key({'HOME': '/h'}))"
    keys = [subprocess.run([sys.executable, *opts, "-c", code], capture_output=True, text=True, cwd=ROOT,
                           check=True).stdout for opts in ([], ["-O"], ["-X", "dev"])]
    assert len(set(keys)) == 3


def test_a_server_runs_with_the_clients_options(served, project):
    r = subprocess.run([sys.executable, "-O", "-m", "opalgit", "--version"], env={**served.env, **AUTO}, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 0
    code = ("import sys, time; from opalgit.server import client; k = client.server_key(dict(__import__('os').environ)); "
            "p = client.socket_path(__import__('os').environ, k); t = time.monotonic() + 15\n"
            "while client.server_info(p, k) is None and time.monotonic() < t: time.sleep(0.05)\n"
            "print(client.server_info(p, k)['pid'])")
    pid = int(subprocess.run([sys.executable, "-O", "-c", code], env=served.env, capture_output=True, text=True,
                             cwd=ROOT, check=True).stdout)
    assert b"-O" in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")


def test_idle_timeout_is_bounded():
    assert client.idle_timeout({}) == client.IDLE_DEFAULT
    assert client.idle_timeout({"OPAL_SERVER_IDLE": "0"}) == 1.0
    assert client.idle_timeout({"OPAL_SERVER_IDLE": "1e12"}) == client.IDLE_MAX
    assert client.idle_timeout({"OPAL_SERVER_IDLE": "soon"}) == client.IDLE_DEFAULT
    assert client.idle_timeout({"OPAL_SERVER_IDLE": "nan"}) == client.IDLE_DEFAULT


# ------------------------------------------------------- a server that does not answer


class Silent:
    """A listener at the server's socket that takes connections and never answers: a
    server wedged past its accept. ``accepting=False``: one that takes none at all."""

    def __init__(self, served: Served, accepting: bool = True, backlog: int = 8) -> None:
        import threading

        self.path = client.socket_path(served.env, client.server_key(served.env))
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(backlog)
        self.requests: list[bytes] = []  # what each connection sent before it closed
        self.conns: list[socket.socket] = []
        if accepting:
            threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import threading

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    def _drain(self, conn: socket.socket) -> None:
        data = b""
        try:
            while chunk := conn.recv(65536):
                data += chunk
        except OSError:
            pass
        self.requests.append(data)  # the client closed its end

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


@pytest.fixture
def silent(served):
    s = Silent(served)
    try:
        yield s
    finally:
        s.close()


def _stopped_server(served: Served) -> int:
    pid = served.start()["pid"]
    os.kill(pid, signal.SIGSTOP)
    assert _wait(lambda: client.process_state(pid) == "T")
    return pid


def _resume_and_end(pid: int) -> None:
    """A stopped server the test started: continued, it sees its socket taken and
    exits by itself; ended here if not."""
    if _alive(pid):
        os.kill(pid, signal.SIGCONT)
        if not _wait_gone(pid, 15):
            _end(pid)


def test_a_stopped_server_is_passed_over_and_replaced(served, project):
    old = _stopped_server(served)
    try:
        # However long the client would wait, a stopped server is seen as such.
        r = served.opal("init", cwd=project, env={"OPAL_SERVER_WAIT": "600", **AUTO}, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stderr.splitlines() == [f"opal: the command server {old} is stopped (kill -CONT {old} resumes it); "
                                         "this command runs in its own process"]
        assert os.path.isdir(project / ".git" / "opal")  # the command did run, here
        # The command started a new server, which takes the socket; the commands after
        # it are served again, the stopped one never woken.
        assert _wait(lambda: (served.info() or {}).get("pid") not in (None, old), 30)
        assert client.process_state(old) == "T"
        before = served.served()
        r = served.opal("status", cwd=project, env={"OPAL_SERVER_WAIT": "600"}, timeout=60)
        assert r.returncode == 0 and "its own process" not in r.stderr, r.stderr
        assert served.served() - before == 2
        assert not os.path.exists(client.socket_path(served.env, client.server_key(served.env)) + ".silent")
    finally:
        _resume_and_end(old)
    assert not _alive(old)  # continued, it saw its socket taken and stopped by itself


def test_a_server_that_does_not_answer_is_passed_over_then_remembered(served, project, silent):
    # CI=true: use a server, start none, so that nothing replaces the silent one here.
    env = {"CI": "true", "OPAL_SERVER_WAIT": "0.5"}
    r = served.opal("init", cwd=project, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    # (The listening process is this test's: the kernel names it.)
    assert r.stderr == (f"opal: the command server {os.getpid()} did not answer within 0.5 s; "
                        "this command runs in its own process\n")
    assert os.path.isdir(project / ".git" / "opal")
    # The client sent its request, then closed the connection: a server that woke up
    # now would find no go-ahead and run nothing.
    assert _wait(lambda: len(silent.requests) == 1)
    assert b'"init' in silent.requests[0] or b"init" in silent.requests[0]
    # The next command does not wait for it again (a wait of 600 s would outlast this
    # test's bound): it is passed over at once, and says so.
    r = served.opal("status", cwd=project, env={**env, "OPAL_SERVER_WAIT": "600"}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.endswith("this command runs in its own process\n") and len(r.stderr.splitlines()) == 1
    assert len(silent.conns) == 1  # not even connected


def test_a_server_whose_queue_is_full_is_passed_over(served, project):
    silent = Silent(served, accepting=False, backlog=1)
    fillers = []
    try:
        while True:  # fill its queue: the next connection would block
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            fillers.append(s)
            try:
                s.connect(silent.path)
            except BlockingIOError:
                break
            assert len(fillers) < 100
        r = served.opal("--version", env={"CI": "true", "OPAL_SERVER_WAIT": "600"}, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith("opal ")
        assert "takes no connection; this command runs in its own process" in r.stderr
    finally:
        for s in fillers:
            s.close()
        silent.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_server_does_not_answer_ends_the_command(served, project, silent, signum):
    proc = served.popen("init", cwd=project, env={"CI": "true", "OPAL_SERVER_WAIT": "600"})
    assert _wait(lambda: len(silent.conns) == 1, 30)  # the client waits for the server's answer
    assert _wait(lambda: _in_recv(proc.pid), 30)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == (130 if signum == signal.SIGINT else -signum)
    assert err == ""
    assert not os.path.exists(project / ".git" / "opal")  # nothing ran, and nothing will
    assert _wait(lambda: len(silent.requests) == 1)  # the connection is closed


#: The system calls a client waits for its server's answer in, as /proc/PID/syscall numbers them.
_RECV = {"x86_64": {"45", "47", "7", "232", "281"}, "aarch64": {"207", "212", "73", "22"}}.get(os.uname().machine)


def _in_recv(pid: int) -> bool:
    if _RECV is None:
        time.sleep(0.5)
        return True
    try:
        return open(f"/proc/{pid}/syscall").read().split()[0] in _RECV
    except (OSError, IndexError):
        return False


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signals_reach_a_command_that_runs_here_past_a_stopped_server(served, project, signum):
    assert _off(served, "init", cwd=project).returncode == 0
    old = _stopped_server(served)
    try:
        # CI=true: no new server takes over while this runs.
        proc = served.popen("hook", "post-rewrite", "amend", cwd=project, env={"CI": "true"})
        assert _wait(lambda: proc.poll() is None and _reading_stdin(proc.pid), 30), proc.poll()
        proc.send_signal(signum)
        proc.wait(timeout=60)  # with its input still open: only the signal can end it
        out, err = proc.communicate(timeout=60)
        assert f"the command server {old} is stopped" in err
        if signum == signal.SIGINT:
            assert proc.returncode == 130 and "Aborted." in err
        else:
            assert proc.returncode == -signum
    finally:
        _resume_and_end(old)


def test_ctrl_c_while_the_server_is_stopped_after_the_go_ahead_reaches_the_command(served, project):
    # The server stopped while its command runs: the command is a process of its own,
    # and the client's signals reach it directly.
    info = served.start()
    assert served.opal("init", cwd=project).returncode == 0
    proc, child = _reading(served, project, info["pid"])
    os.kill(info["pid"], signal.SIGSTOP)
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)  # with its input still open: only the signal can end it
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "Aborted." in err
        assert _wait_gone(child, 10)
    finally:
        os.kill(info["pid"], signal.SIGCONT)


def test_ctrl_z_stops_the_command_with_its_client_and_fg_continues_both(served, project):
    info = served.start()
    assert served.opal("init", cwd=project).returncode == 0
    proc, child = _reading(served, project, info["pid"], own_group=True)
    proc.send_signal(signal.SIGTSTP)
    assert _wait(lambda: client.process_state(child) == "T" and client.process_state(proc.pid) == "T")
    proc.send_signal(signal.SIGCONT)
    assert _wait(lambda: client.process_state(child) != "T" and client.process_state(proc.pid) != "T")
    out, err = proc.communicate("", timeout=60)
    assert proc.returncode == 0, err


def test_server_status_and_stop_of_a_stopped_server(served, project):
    old = _stopped_server(served)
    try:
        r = served.opal("server", "status", timeout=60)
        assert r.returncode == 0
        assert r.stdout.startswith(f"Command server {old} is stopped (SIGSTOP).")
        r = served.opal("server", "status", "--json", timeout=60)
        assert json.loads(r.stdout)["state"] == "stopped"
        r = served.opal("server", "stop", timeout=60)
        assert r.returncode == 0, r.stderr
        assert f"Stopped command server {old}" in r.stdout
        assert _wait_gone(old, 15)
    finally:
        _resume_and_end(old)


def test_stop_signals_no_process_it_cannot_identify(served, project, silent):
    # The listener is this test process: not a command server, so never sent a signal.
    r = served.opal("server", "stop", env={"OPAL_SERVER_WAIT": "0.2"}, timeout=60)
    assert r.returncode == 1
    assert "cannot be identified as your command server" in r.stderr
    assert not client.our_server(os.getpid(), silent.path)


def test_a_server_that_wakes_up_late_runs_nothing(served, project):
    """The race the go-ahead closes: the client gave up, the server then takes the request."""
    pid = _stopped_server(served)
    path = client.socket_path(served.env, client.server_key(served.env))
    # A request in the stopped server's queue, from a client that then goes away
    # (as one that gave up waiting does).
    code = ("import os, sys; from opalgit.server import client; p, k = sys.argv[1], client.server_key(os.environ); "
            "s, _ = client.connect(p); client.send_message(s, client._request(k, ['init'])); s.close()")
    try:
        subprocess.run([sys.executable, "-c", code, path], env=served.env, cwd=project, check=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert _wait(lambda: served.info() is not None, 30)
    time.sleep(0.5)  # room for a command's process, were one to run it
    assert not os.path.exists(project / ".git" / "opal")


# ------------------------------------------------------------------- the client dies


def test_sigkill_of_the_client_ends_the_served_command(served, project):
    info = served.start()
    assert served.opal("init", cwd=project).returncode == 0
    proc, child = _reading(served, project, info["pid"])
    proc.kill()
    proc.wait(timeout=60)
    assert _wait_gone(child, 10)  # the command ends with its client, as in a process of its own
    assert served.info()["pid"] == info["pid"]  # the server goes on


def _holds_lock(pid: int, lock: str) -> bool:
    try:
        ino = os.stat(lock).st_ino
        lines = open("/proc/locks").read().splitlines()
    except OSError:
        return False
    return any(f.split()[4] == str(pid) and f.split()[5].endswith(f":{ino}") for f in lines if "FLOCK" in f)


def _processes_with_open(path: str) -> list[int]:
    out = []
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            if os.readlink(fd) == path:
                out.append(int(fd.split("/")[2]))
        except OSError:
            continue
    return sorted(set(out))


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def test_sigkill_of_the_client_mid_commit_leaves_no_lock(served, tmp_path):
    import fcntl

    from tests.unit.test_reliability import BIG

    work = tmp_path / "big"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    config = tmp_path / "big-config"
    folder = config / "projects" / project_key(str(work))
    folder.mkdir(parents=True)
    session = folder / os.path.basename(BIG)
    data = open(BIG, "rb").read().splitlines(keepends=True)
    env = {"CLAUDE_CONFIG_DIR": str(config)}
    info = served.start()
    assert served.opal("init", cwd=work, env=env).returncode == 0
    lock = str(work / ".git" / "opal" / "lock")
    open(lock, "a").close()
    caught = 0
    try:
        for attempt in range(10):  # bounded: a commit is caught holding the lock within a few
            with open(session, "ab") as fh:
                fh.writelines(data[attempt * len(data) // 10:(attempt + 1) * len(data) // 10])
            proc = served.popen("commit", cwd=work, env=env)
            children: list[int] = []

            def holding() -> bool:
                children[:] = [p for p in _command_processes(info["pid"]) if _holds_lock(p, lock)]
                return bool(children) or proc.poll() is not None

            _wait(holding, 30)
            if children:
                # Held where it holds the lock (a process of its own killed there leaves
                # none), so that only its client's end can end it.
                os.kill(children[0], signal.SIGSTOP)
                if _holds_lock(children[0], lock) and proc.poll() is None:
                    caught = children[0]
                    proc.kill()
                    proc.wait(timeout=60)
                    assert _wait_gone(caught, 10)  # ended with its client, though stopped
                    break
                os.kill(children[0], signal.SIGCONT)
            proc.communicate(timeout=60)
    finally:
        if caught and _alive(caught):  # a command the test's server ran, left holding the lock
            os.kill(caught, signal.SIGKILL)
    assert caught, "no commit was caught holding the lock"
    # Free once the command is gone, but for a ref transaction it handed to git: git
    # update-ref inherits the lock so that it finishes what it began, and no other opal
    # reads the refs meanwhile (docs/reliability.md). Only such a git may still hold it.
    deadline = time.monotonic() + 30
    with open(lock) as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holders = _processes_with_open(lock)
                assert all(b"update-ref" in _cmdline(p) for p in holders), [_cmdline(p) for p in holders]
                assert time.monotonic() < deadline, "the lock is still held 30 s after its command ended"
                time.sleep(0.05)
    r = served.opal("commit", cwd=work, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=work, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


# ------------------------------------------------- what a command takes from its client


def _committer_offset(repo) -> str:
    lines = subprocess.run(["git", "cat-file", "-p", "refs/opal/heads/main"], cwd=repo, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    return next(line for line in lines if line.startswith("committer ")).split()[-1]


def test_the_time_zone_is_the_clients(served, project, tmp_path):
    served.opal("server", "start", env={"TZ": "UTC"})  # TZ is not part of the key
    before = served.served()
    assert served.opal("init", cwd=project).returncode == 0
    sydney = {"TZ": "Australia/Sydney"}
    r = served.opal("commit", "-m", "served", cwd=project, env=sydney)
    assert r.returncode == 0, r.stderr
    assert served.served() - before == 2 + 1  # both served by the UTC server
    # The same offset as a commit by a process of its own in Sydney (+1000 or +1100,
    # never the server's +0000).
    own = tmp_path / "own"
    subprocess.run(["git", "init", "-q", str(own)], check=True)
    assert _off(served, "init", cwd=own).returncode == 0
    r = served.opal("commit", "--file", SESSION, "-m", "own", cwd=own, env={**sydney, "OPAL_SERVER": "off"})
    assert r.returncode == 0, r.stderr
    assert _committer_offset(own) in ("+1000", "+1100")
    assert _committer_offset(project) == _committer_offset(own)
    # The Codex export's date folder is Sydney's date, as for a process of its own.
    import datetime
    import zoneinfo

    def day() -> str:
        return datetime.datetime.now(zoneinfo.ZoneInfo("Australia/Sydney")).strftime("%Y/%m/%d")

    first = day()
    mine = served.opal("export", "--to", "codex", "--dry-run", cwd=project, env=sydney)
    theirs = served.opal("export", "--to", "codex", "--dry-run", cwd=project, env={**sydney, "OPAL_SERVER": "off"})
    assert mine.returncode == 0, mine.stderr
    assert any(f"/sessions/{d}/rollout-" in mine.stdout for d in (first, day())), mine.stdout
    import re

    folder = re.compile(r"/sessions/\d{4}/\d\d/\d\d/")
    assert folder.findall(mine.stdout) == folder.findall(theirs.stdout), (mine.stdout, theirs.stdout)


def test_ignored_signals_stay_ignored(served, project):
    # nohup: SIGHUP is ignored by the command, as in a process of its own, and not
    # passed on by the client (which would end the command).
    info = served.start()
    assert served.opal("init", cwd=project).returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "opalgit", "hook", "post-rewrite", "amend"], cwd=project,
                            env=served.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    found: list[int] = []

    def reading() -> bool:
        found[:] = [p for p in _command_processes(info["pid"]) if _cwd(p) == str(project) and _reading_stdin(p)]
        return bool(found)

    assert _wait(reading, 30)
    ignored = int(next(line for line in open(f"/proc/{found[0]}/status") if line.startswith("SigIgn:")).split()[1], 16)
    assert ignored & (1 << (signal.SIGHUP - 1))
    proc.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    assert proc.poll() is None and _alive(found[0])
    out, err = proc.communicate("", timeout=60)
    assert proc.returncode == 0, err


def test_a_commands_process_takes_the_clients_path_argv_signals_and_time_zone(tmp_path):
    # What the server's child takes from the request (opalgit.server.daemon._become), in a
    # process of the server's making (TZ=UTC, its own "" on the path, nothing ignored).
    code = """if 1:
        import json, os, signal, sys, time
        from opalgit.server import daemon as server
        req = {"cwd": sys.argv[1], "umask": 0o027, "env": {"TZ": "Australia/Sydney", "PATH": os.environ["PATH"]},
               "streams": [["utf-8", "strict"]] * 3, "argv0": "opal", "args": ["status"],
               "orig_argv": ["python3", "-m", "opalgit", "status"], "path": ["/client/first", *sys.path[1:]],
               "ignored": [int(signal.SIGHUP)], "mask": [int(signal.SIGUSR1)]}
        server._become(req)
        server._take_streams(req, [os.dup(0), os.dup(1), os.dup(2)])
        print(json.dumps({"path0": sys.path[0], "orig": sys.orig_argv, "tz": list(time.tzname), "cwd": os.getcwd(),
                          "hup": signal.getsignal(signal.SIGHUP) == signal.SIG_IGN, "env": os.environ.get("TZ"),
                          "mask": sorted(int(n) for n in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
                          "local": time.strftime("%z"), "umask": os.umask(0)}))
    """
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env={**os.environ, "TZ": "UTC"},
                       capture_output=True, text=True, cwd=ROOT, check=True)
    got = json.loads(r.stdout)
    assert got["path0"] == "/client/first"
    assert got["orig"] == ["python3", "-m", "opalgit", "status"]
    assert got["tz"] == ["AEST", "AEDT"] and got["local"] in ("+1000", "+1100")
    assert got["cwd"] == str(tmp_path) and got["umask"] == 0o027 and got["env"] == "Australia/Sydney"
    assert got["hup"] and got["mask"] == [int(signal.SIGUSR1)]


def test_the_key_follows_what_a_forked_process_inherits():
    code = "from opalgit.server import client; print(repr(client.server_key({'HOME': '/h'})))"

    def key(*prefix: str, preexec=None) -> str:
        return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                              check=True, preexec_fn=preexec).stdout

    plain = key()
    assert key() == plain
    assert key("nice", "-n", "5") != plain
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert key(preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 64), hard))) != plain
    if len(os.sched_getaffinity(0)) > 1:
        assert key("taskset", "-c", "0") != plain
    warned = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, cwd=ROOT,
                            check=True).stdout
    assert warned != plain  # -W is not in sys.flags, and the server runs with it


def test_a_sandboxed_client_never_uses_a_server(served, project):
    # no_new_privs, as the agents' sandboxes set it: a server outside would run the
    # command outside the sandbox.
    served.start()
    before = served.served()
    code = ("import ctypes, sys; ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0); "
            "sys.argv[0] = 'opal'; from opalgit.server.client import main; main()")
    r = subprocess.run([sys.executable, "-c", code, "--version"], env=served.env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.startswith("opal ")
    assert served.served() - before == 1  # only this test's own info request


def test_the_server_keeps_nothing_a_command_works_out_from_its_time_zone_or_folders():
    # Every module's simple values after the server's preload are the same whatever
    # the environment variables outside the key: nothing is worked out at import from
    # TZ, the temporary folder, the agents' folders, PATH or opal's own settings.
    code = ("import json, re, sys; from opalgit.server import daemon as server; server._preload(); out = {}\n"
            "for name, mod in sorted(sys.modules.items()):\n"
            "    if not name.startswith('opalgit'): continue\n"
            "    for k, v in vars(mod).items():\n"
            "        if isinstance(v, (str, int, float, tuple, frozenset, bytes, type(None))):\n"
            "            out[name + '.' + k] = re.sub(' at 0x[0-9a-f]+', '', repr(v))\n"
            "print(json.dumps(out, sort_keys=True))")
    one = {"TZ": "UTC", "TMPDIR": "/tmp", "PATH": os.environ["PATH"]}
    two = {"TZ": "Australia/Sydney", "TMPDIR": "/var/tmp", "PATH": "/usr/bin:/bin", "CLAUDE_CONFIG_DIR": "/c",
           "CODEX_HOME": "/x", "GEMINI_CLI_HOME": "/g", "OPAL_NO_PAGER": "", "NO_COLOR": "1", "COLUMNS": "33",
           "USER": "someone", "LOGNAME": "someone", "EDITOR": "ed", "PAGER": "more", "TERM": "dumb"}
    outs = []
    for extra in (one, two):
        env = {k: v for k, v in os.environ.items() if k not in two}
        # One hash seed: sets print in one order.
        r = subprocess.run([sys.executable, "-c", code], env={**env, **extra, "PYTHONHASHSEED": "0"},
                           capture_output=True, text=True, cwd=ROOT, check=True)
        outs.append(json.loads(r.stdout))
    differ = sorted(k for k in outs[0] if outs[0][k] != outs[1].get(k))
    assert differ == []

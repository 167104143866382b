"""The command server (opalgit/server.py) and the ``opal`` program's client (opalgit/client.py).

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

from opalgit import client
from opalgit.adapters.claude import project_key
from tests.conftest import ROOT
from tests.core.test_porcelain import SESSION

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")


class Served:
    """``opal`` with the command server on, in a runtime folder of its own."""

    def __init__(self, tmp_path) -> None:
        self.runtime = tmp_path / "run"
        self.runtime.mkdir(mode=0o700)
        self.env = dict(os.environ, OPAL_SERVER="auto", XDG_RUNTIME_DIR=str(self.runtime), OPAL_SERVER_IDLE="120")
        self.env.pop("CI", None)

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

    def popen(self, *args: str, cwd=None, env: dict | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "opalgit", *args], cwd=str(cwd) if cwd else None,
            env={**self.env, **(env or {})}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
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
    for name, mode in (("served", "auto"), ("own", "off")):
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


def _reading(served: Served, project, server_pid: int) -> tuple[subprocess.Popen, int]:
    """``opal hook post-rewrite``, which reads its standard input to the end: it waits on
    a pipe this test holds, in the server's command process (found by its working
    folder)."""
    proc = served.popen("hook", "post-rewrite", "amend", cwd=project)
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


def test_first_command_starts_a_server_in_the_background(served, project):
    assert served.info() is None
    r = served.opal("--version")
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
        if b"from opalgit.server import main" in b" ".join(args) and path.encode() in args:
            pid = int(cmdline.split("/")[2])
            if _alive(pid):
                out.append(pid)
    return out


def test_a_burst_of_first_commands_starts_one_server(served, project):
    procs = [served.popen("--version") for _ in range(5)]
    assert all(p.communicate(timeout=60)[0].startswith("opal ") for p in procs)
    assert _wait(lambda: served.info() is not None)
    time.sleep(0.5)
    path = client.socket_path(served.env, client.server_key(served.env))
    assert _servers_at(path) == [served.info()["pid"]]
    assert not os.path.exists(path + ".starting")


def test_off_and_ci(served, project):
    r = served.opal("--version", env={"OPAL_SERVER": "off"})
    assert r.returncode == 0
    assert not os.path.exists(served.folder)  # nothing started, nothing made
    r = served.opal("--version", env={"CI": "true"})
    assert r.returncode == 0
    time.sleep(0.3)
    assert served.info() is None  # on CI a command starts no server...
    served.start()
    before = served.served()
    assert served.opal("--version", env={"CI": "true"}).returncode == 0
    assert served.served() - before == 2  # ... but uses one that runs


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
    # ... and the command started a fresh server, which runs the new code.
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
    code = ("import sys; before = set(sys.modules); import opalgit.client; "
            "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
            "('click', 'pygit2', 'typing', 'msgpack', 'zstandard', 'orjson', 'subprocess', 'socket')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_the_server_keeps_nothing_a_command_works_out_from_its_environment():
    # What the server loads is shared by every command; what a command derives from its
    # environment or the installed packages (the temporary folder, the adapters found
    # through package metadata) must be worked out in the command's own process.
    code = ("from opalgit import server; server._preload(); import tempfile; from opalgit import adapters; "
            "print(tempfile.tempdir, adapters._cache)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["None", "None"]


def test_the_opal_program_is_the_client():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        scripts = tomllib.load(fh)["project"]["scripts"]
    assert scripts["opal"] == "opalgit.client:main"


def test_key_follows_what_the_server_process_depends_on():
    base = {"HOME": "/h", "PATH": "/bin", "LANG": "C.UTF-8", "GIT_DIR": "/x/.git"}
    key = client.server_key(base)
    assert client.server_key({**base, "PATH": "/usr/bin", "GIT_DIR": "/y/.git", "PWD": "/y"}) == key
    for change in ({"HOME": "/other"}, {"LANG": "C"}, {"PYTHONPATH": "/p"}, {"GIT_CONFIG_GLOBAL": "/g"},
                   {"XDG_CONFIG_HOME": "/c"}, {"LC_ALL": "C"}):
        assert client.server_key({**base, **change}) != key, change


def test_key_follows_the_interpreters_options():
    code = "from opalgit import client; print(client.server_key({'HOME': '/h'}))"
    keys = [subprocess.run([sys.executable, *opts, "-c", code], capture_output=True, text=True, cwd=ROOT,
                           check=True).stdout for opts in ([], ["-O"], ["-X", "dev"])]
    assert len(set(keys)) == 3


def test_a_server_runs_with_the_clients_options(served, project):
    r = subprocess.run([sys.executable, "-O", "-m", "opalgit", "--version"], env=served.env, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 0
    code = ("import sys, time; from opalgit import client; k = client.server_key(dict(__import__('os').environ)); "
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

"""Pushing and pulling state through real remotes started by the tests themselves:
a bare repository over file://, `git daemon` (git://) and smart HTTP (`git http-backend`
behind a small server on 127.0.0.1 that requires basic auth)."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from opalgit import porcelain
from opalgit.errors import ConflictError
from opalgit.hooks import install as hooks
from opalgit.porcelain.pull import pull
from opalgit.porcelain.secrets import gate
from opalgit.store.repo import Repository
from opalgit.sync import links
from opalgit.sync import push as sync_push
from opalgit.sync.fetch import fetch
from opalgit.sync.push import PushRejectedError
from opalgit.sync.remotes import RemoteError, remote_branches, resolve_remote_branch
from tests.conftest import git, opal
from tests.unit.test_porcelain import grow, place

USER, PASSWORD = "alice", "s3cret"


def push(*args, **kw) -> sync_push.PushResult:
    """A push as opal's commands run it: through the porcelain's secret gate."""
    return sync_push.push(*args, gate=gate, **kw)


# ------------------------------------------------------------------ servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def reserved_port():
    """A port of 127.0.0.1 that refuses connections until a server listens on it.

    A socket bound (never listening) with SO_REUSEADDR holds the port: connecting is
    refused, nobody else gets it from the kernel or can bind it without SO_REUSEADDR,
    and `git daemon --reuseaddr` can still listen on it. A port merely found free and
    closed may be taken by any other process (another test run, or a server that
    outlived its test) before it is used: that is what made "the remote is down"
    pass a push now and then under load.
    """
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", 0))
    try:
        yield holder.getsockname()[1]
    finally:
        holder.close()


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until something listens on ``port``; fails at once if ``proc`` (the server) exits.

    The timeout only bounds a server that hangs: a loaded machine is slow, not wrong.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}) before it listened on 127.0.0.1:{port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def git_daemon_binary() -> str:
    # `git daemon` is a wrapper that runs git-daemon as its child: stopping the wrapper
    # with SIGKILL (after a terminate that timed out under load) left the daemon
    # listening, so a "stopped" remote still answered. The daemon itself is started.
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True).stdout.strip()
    return os.path.join(exec_path, "git-daemon")


@contextlib.contextmanager
def git_daemon(base: str, port: int | None = None):
    """`git daemon` serving every repository under ``base``; stopped, with the children
    it forked for connections, by its process group (its own session, so its id)."""
    with contextlib.ExitStack() as stack:
        if port is None:
            port = stack.enter_context(reserved_port())
        proc = subprocess.Popen(
            [git_daemon_binary(), "--export-all", "--enable=receive-pack", "--reuseaddr", "--informative-errors",
             "--listen=127.0.0.1", f"--port={port}", f"--base-path={base}", base],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_for_port(port, proc)
            yield port
        finally:
            stop_group(proc)


def stop_group(proc: subprocess.Popen) -> None:
    """Terminate ``proc``'s process group and wait until ``proc`` is gone (no time limit
    decides the outcome: SIGKILL follows SIGTERM, and the wait is for the exit)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _read_body(handler: http.server.BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(handler.rfile.readline().strip().split(b";")[0], 16)
            if size == 0:
                handler.rfile.readline()
                return body
            body += handler.rfile.read(size)
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


def _handler(root: str):
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    class GitHTTP(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def do_GET(self):
            self._cgi()

        def do_POST(self):
            self._cgi()

        def _cgi(self):
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="opal-test"')
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            body = _read_body(self)
            env = {
                "PATH": os.environ["PATH"],
                "GIT_PROJECT_ROOT": root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": USER,
                "REMOTE_ADDR": "127.0.0.1",
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            }
            proc = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60)
            out = proc.stdout
            sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
            head, _, payload = out.partition(sep)
            code, headers = 200, []
            for line in head.decode("latin-1").splitlines():
                key, _, value = line.partition(":")
                if key.lower() == "status":
                    code = int(value.strip().split()[0])
                elif key:
                    headers.append((key, value.strip()))
            self.send_response(code)
            for key, value in headers:
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)

    return GitHTTP


@contextlib.contextmanager
def http_server(root: str):
    """Smart HTTP on 127.0.0.1 with basic auth, shut down on exit.

    No lifetime timer: one used to shut the server down after 120 s, which a slow
    test on a loaded machine can outlast; the thread is a daemon thread, so a test
    process that dies does not keep it.
    """
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(root))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------ repositories


def make_remote(tmp_path, name="shared.git") -> str:
    """A bare repository holding one code commit."""
    seed = tmp_path / "seed"
    git("init", "-q", str(seed))
    (seed / "README.md").write_text("# team project\n")
    git("add", "README.md", cwd=str(seed))
    git("commit", "-q", "-m", "initial code", cwd=str(seed))
    bare = tmp_path / "srv" / name
    git("clone", "-q", "--bare", str(seed), str(bare))
    return str(bare)


def clone(tmp_path, bare: str, who: str, url: str | None = None):
    path = tmp_path / who
    git("clone", "-q", bare, str(path))
    if url:
        git("remote", "set-url", "origin", url, cwd=str(path))
    porcelain.init(str(path))
    return path


def env_of(home) -> dict:
    return {**os.environ, "HOME": str(home), "GIT_TERMINAL_PROMPT": "0"}


def refs_of(path) -> str:
    return git("for-each-ref", "--format=%(objectname) %(refname)", cwd=str(path)).stdout


def open_repo(path) -> Repository:
    return Repository.discover(str(path))


@pytest.fixture
def transport(request, tmp_path):
    """(url of the shared remote, bare path, setup(repo_path)) for each kind of remote."""
    bare = make_remote(tmp_path)
    kind = request.param
    if kind == "file":
        yield "file://" + bare, bare, lambda path: None
    elif kind == "git":
        with git_daemon(os.path.dirname(bare)) as port:
            yield f"git://127.0.0.1:{port}/shared.git", bare, lambda path: None
    else:
        with http_server(os.path.dirname(bare)) as port:
            creds = tmp_path / "credentials"
            creds.write_text(f"http://{USER}:{PASSWORD}@127.0.0.1:{port}\n")

            def setup(path):
                git("config", "credential.helper", f"store --file={creds}", cwd=str(path))

            yield f"http://127.0.0.1:{port}/shared.git", bare, setup


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("transport", ["file", "git", "http"], indirect=True)
def test_push_fetch_pull_and_a_refused_push(transport, tmp_path, home):
    url, bare, setup = transport
    env = env_of(home)
    a, b = clone(tmp_path, bare, "a", url), clone(tmp_path, bare, "b", url)
    setup(a)
    setup(b)
    ra, rb = open_repo(a), open_repo(b)
    path = place(home, a, lines=20)
    s1 = porcelain.commit(ra, env, str(a)).oid

    res = push(ra, env)
    assert (res.remote, res.branch, res.remote_branch, res.status) == ("origin", "main", "main", "new")
    assert git("rev-parse", "refs/opal/heads/main", cwd=bare).stdout.strip() == s1.hex()
    assert ra.refs.get("refs/opal/remotes/origin/main") == s1
    assert push(ra, env).status == "up-to-date"
    assert "refs/opal/oplog" not in refs_of(bare)  # the operation log stays local

    # B: pull into a branch with no commits creates it; then a fast-forward.
    pulled = pull(rb, env)
    assert pulled.status == "created" and porcelain.branch_head(rb, "main") == s1
    assert resolve_remote_branch(rb, "origin/main") == s1
    grow(path, start=20, end=35)
    s2 = porcelain.commit(ra, env, str(a)).oid
    assert push(ra, env).status == "fast-forward"
    pulled = pull(rb, env)
    assert (pulled.status, pulled.old, pulled.new) == ("fast-forward", s1, s2)
    assert pull(rb, env).status == "up-to-date"

    # Both extend main: B's push is refused with the reason, and nothing moves anywhere.
    grow(path, start=35)
    s3 = porcelain.commit(ra, env, str(a)).oid
    push(ra, env)
    b_head = porcelain.rewind(rb, 1).oid
    remote_before, b_before = refs_of(bare), refs_of(b)
    with pytest.raises(PushRejectedError) as err:
        push(rb, env)
    assert "not a fast-forward" in err.value.message and "opal pull" in err.value.hint
    assert refs_of(bare) == remote_before and refs_of(b) == b_before

    # Pull refuses to overwrite diverged work, naming both heads and the merge to run.
    with pytest.raises(ConflictError) as err:
        pull(rb, env)
    assert b_head.hex()[:7] in err.value.message and s3.hex()[:7] in err.value.message
    assert "opal merge origin/main" in err.value.hint
    assert porcelain.branch_head(rb, "main") == b_head
    assert git("fsck", "--strict", cwd=bare).returncode == 0


def test_remote_down_is_a_clear_error_and_a_retry_works(tmp_path, home):
    env = env_of(home)
    bare = make_remote(tmp_path)
    a = clone(tmp_path, bare, "a")
    ra = open_repo(a)
    place(home, a, lines=15)
    s1 = porcelain.commit(ra, env, str(a)).oid

    # A path that does not exist (yet).
    missing = tmp_path / "srv" / "later.git"
    git("remote", "add", "later", "file://" + str(missing), cwd=str(a))
    before = refs_of(a)
    with pytest.raises(RemoteError) as err:
        push(ra, env, "later")
    assert "cannot push to later" in err.value.message and "nothing was changed" in err.value.hint
    with pytest.raises(RemoteError):
        fetch(ra, env, "later")
    assert refs_of(a) == before
    git("init", "-q", "--bare", str(missing))
    assert push(ra, env, "later").status == "new"

    # git daemon stopped: connection refused; started again on the same port: works.
    # The port stays reserved throughout, so "stopped" cannot be another server that
    # took the port meanwhile.
    with reserved_port() as port:
        git("remote", "add", "daemon", f"git://127.0.0.1:{port}/shared.git", cwd=str(a))
        with git_daemon(os.path.dirname(bare), port):
            pass
        before = refs_of(a)
        with pytest.raises(RemoteError) as err:
            push(ra, env, "daemon")
        assert "daemon" in err.value.message
        assert refs_of(a) == before
        with git_daemon(os.path.dirname(bare), port):
            assert push(ra, env, "daemon").status == "new"
            assert fetch(ra, env, "daemon").branches == {}  # the push already set daemon/main
    assert ra.refs.get("refs/opal/remotes/daemon/main") == s1
    # No staging refs are left behind by the failures.
    assert "refs/opal/fetching/" not in refs_of(a)


def test_http_needs_the_users_credentials(tmp_path, home):
    env = env_of(home)
    bare = make_remote(tmp_path)
    with http_server(os.path.dirname(bare)) as port:
        a = clone(tmp_path, bare, "a", f"http://127.0.0.1:{port}/shared.git")
        ra = open_repo(a)
        place(home, a, lines=15)
        porcelain.commit(ra, env, str(a))
        with pytest.raises(RemoteError) as err:
            push(ra, env)
        assert "Username" in err.value.message or "Authentication" in err.value.message
        creds = tmp_path / "creds"
        creds.write_text(f"http://{USER}:{PASSWORD}@127.0.0.1:{port}\n")
        git("config", "credential.helper", f"store --file={creds}", cwd=str(a))
        assert push(ra, env).status == "new"


def test_namespace_undo_force_and_deleted_branches(tmp_path, home):
    env = env_of(home)
    bare = make_remote(tmp_path)
    a = clone(tmp_path, bare, "a")
    ra = open_repo(a)
    place(home, a, lines=15)
    s1 = porcelain.commit(ra, env, str(a)).oid
    ra.config["push.namespace"] = "user"  # from the git e-mail: test@example.com -> test
    res = push(ra, env)
    assert res.remote_branch == "test/main"
    assert git("rev-parse", "refs/opal/heads/test/main", cwd=bare).stdout.strip() == s1.hex()
    porcelain.branch_create(ra, "try-sqlite")
    push(ra, env, "origin", "try-sqlite:shared/try")
    assert remote_branches(ra, "origin") == {"origin/shared/try": s1, "origin/test/main": s1}

    # Local main moves back behind the remote: a push is refused, --force overwrites
    # only what the last fetch saw (a lease).
    r1 = porcelain.rewind(ra, 2).oid
    assert push(ra, env).status == "fast-forward"
    rewind_op = next(o for o in porcelain.op_log(ra) if o.command == "rewind")
    porcelain.undo(ra, rewind_op.oid.hex())
    assert porcelain.branch_head(ra, "main") == s1
    with pytest.raises(PushRejectedError) as err:
        push(ra, env)
    assert "non-fast-forward" in err.value.message
    assert push(ra, env, force=True).status == "forced"
    assert git("rev-parse", "refs/opal/heads/test/main", cwd=bare).stdout.strip() == s1.hex()
    porcelain.undo(ra)  # undoes the push's remote-tracking update only: opal now believes r1 is there
    assert ra.refs.get("refs/opal/remotes/origin/test/main") == r1
    porcelain.rewind(ra, 1)
    with pytest.raises(PushRejectedError) as err:
        push(ra, env, force=True)
    assert "stale info" in err.value.message
    fetch(ra, env)
    assert ra.refs.get("refs/opal/remotes/origin/test/main") == s1
    git("update-ref", "-d", "refs/opal/heads/shared/try", cwd=bare)
    res = fetch(ra, env)
    assert res.branches == {"shared/try": (s1, None)}
    assert "origin/shared/try" not in remote_branches(ra)
    porcelain.undo(ra)  # a fetch is undoable too
    assert remote_branches(ra)["origin/shared/try"] == s1


def test_undo_a_pull(tmp_path, home):
    env = env_of(home)
    bare = make_remote(tmp_path)
    a, b = clone(tmp_path, bare, "a"), clone(tmp_path, bare, "b")
    ra, rb = open_repo(a), open_repo(b)
    path = place(home, a, lines=15)
    s1 = porcelain.commit(ra, env, str(a)).oid
    push(ra, env)
    pull(rb, env)
    grow(path, start=15)
    s2 = porcelain.commit(ra, env, str(a)).oid
    push(ra, env)
    assert pull(rb, env).new == s2
    op = porcelain.undo(rb)
    assert "pull" in op.description and porcelain.branch_head(rb, "main") == s1
    # B is now behind; pulling again fast-forwards; A being ahead is nothing to pull.
    assert pull(rb, env).status == "fast-forward"
    assert pull(ra, env).status == "up-to-date"


def test_two_users_share_state_linked_to_code(tmp_path, home):
    """User A commits code twice with the hooks while a Claude Code session grows, and
    pushes (state along with code, push.withCode); user B clones, gets the state and
    finds A's state for each of A's code commits."""
    bare = make_remote(tmp_path)
    url = "file://" + bare
    a = tmp_path / "a"
    git("clone", "-q", url, str(a))
    r = opal("hooks", "install", cwd=a)
    assert r.returncode == 0, r.stderr
    assert opal("config", "push.withCode", "true", cwd=a).returncode == 0
    path = place(home, a, lines=20)

    def code_commit(msg):
        (a / "app.py").open("a").write(f"# {msg}\n")
        git("add", "app.py", cwd=str(a))
        r = git("commit", "-q", "-m", msg, cwd=str(a))
        assert r.stderr.startswith("opal: recorded "), r.stderr
        return git("rev-parse", "HEAD", cwd=str(a)).stdout.strip()

    c1 = code_commit("parser")
    grow(path, start=20, end=40)
    c2 = code_commit("parser tests")
    r = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=str(a), capture_output=True, text=True, env=env_of(home))
    assert r.returncode == 0, r.stderr
    assert "opal: pushed state branch main to origin/main (new)" in r.stderr
    ra = open_repo(a)
    s1, s2 = links.state_at(ra, c1), links.state_at(ra, c2)
    assert git("rev-parse", "refs/opal/heads/main", cwd=bare).stdout.strip() == s2.hex()
    assert git("rev-parse", f"refs/opal/links/{c1}", cwd=bare).stdout.strip() == s1.hex()

    # User B, on a fresh checkout with a HOME of their own.
    home_b = tmp_path / "home-b"
    home_b.mkdir()
    b = tmp_path / "b"
    git("clone", "-q", url, str(b))
    env_b = {"HOME": str(home_b)}
    r = opal("clone-state", url, cwd=b, env=env_b)
    assert r.returncode == 0, r.stderr
    assert "Branch main starts at origin/main" in r.stdout
    at = json.loads(opal("at", "HEAD", "--json", cwd=b, env=env_b).stdout)
    assert (at["code_commit"], at["state"], at["distance"]) == (c2, s2.hex(), 0)
    at = json.loads(opal("at", "HEAD~1", "--json", cwd=b, env=env_b).stdout)
    assert (at["state"], at["remote"]) == (s1.hex(), "origin")
    assert at["commit"]["message"].startswith(f"code commit {c1[:7]}: parser")
    rb = open_repo(b)
    assert resolve_remote_branch(rb, "origin/main") == s2
    # B continues from A's context at the first code commit, in their own agent folder.
    r = opal("export", s1.hex(), "--to", "claude", "--json", cwd=b, env=env_b)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["turns"] == porcelain.load_state(rb, s1).header.turns

    # A goes on; B pulls with the CLI and sees the new link too.
    grow(path, start=40)
    c3 = code_commit("parser docs")
    r = opal("push", cwd=a)
    assert r.returncode == 0 and "Pushed main to origin/main (fast-forward, 1 code link)" in r.stdout, r.stdout + r.stderr
    r = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=str(a), capture_output=True, text=True, env=env_of(home))
    assert r.returncode == 0 and r.stderr == "", r.stderr  # the state was already there: nothing to say
    git("pull", "-q", "--ff-only", "origin", "main", cwd=str(b))
    r = opal("pull", cwd=b, env=env_b)
    assert r.returncode == 0 and "Fast-forward main" in r.stdout, r.stderr
    at = json.loads(opal("at", "--json", cwd=b, env=env_b).stdout)
    assert at["code_commit"] == c3 and at["state"] == porcelain.branch_head(open_repo(b), "main").hex()


def test_pre_push_keeps_the_earlier_hooks_verdict(tmp_path, home):
    bare = make_remote(tmp_path)
    a = clone(tmp_path, bare, "a")
    ra = open_repo(a)
    hook = a / ".git" / "hooks" / "pre-push"
    hook.write_text("#!/bin/sh\nwhile read l; do echo \"saw $l\" >&2; done\nexit 7\n")
    hook.chmod(0o755)
    hooks.install(ra, os.environ, sys.executable)
    ra.config["push.withCode"] = "true"
    place(home, a, lines=10)
    porcelain.commit(ra, env_of(home), str(a))
    (a / "x").write_text("x")
    git("add", "x", cwd=str(a))
    git("commit", "-q", "-m", "x", cwd=str(a))
    r = subprocess.run(["git", "push", "origin", "main"], cwd=str(a), capture_output=True, text=True, env=env_of(home))
    assert r.returncode != 0 and "saw refs/heads/main" in r.stderr  # the earlier hook got the same input
    assert "refs/opal" not in refs_of(bare)  # and refusing the push, no state went either


def test_cli_push_fetch_errors(tmp_path, home):
    bare = make_remote(tmp_path)
    a = clone(tmp_path, bare, "a")
    r = opal("push", cwd=a)
    assert r.returncode == 4 and "no commits yet" in r.stderr
    r = opal("push", "nowhere", cwd=a)
    assert r.returncode == 2 and "no remote named 'nowhere'" in r.stderr
    r = opal("fetch", cwd=a)
    assert r.returncode == 0 and "origin: up to date" in r.stdout


# ------------------------------------------------------------------ issue 17, item 11


def test_a_failed_clone_state_records_no_remote(tmp_path, home):
    bare = make_remote(tmp_path)
    b = tmp_path / "b"
    git("clone", "-q", bare, str(b))
    git("remote", "remove", "origin", cwd=str(b))  # state only: clone-state records the remote itself
    wrong = str(tmp_path / "srv" / "typo.git")
    r = opal("clone-state", wrong, cwd=b)
    assert r.returncode == 1, r.stderr
    assert "cannot fetch from origin" in r.stderr
    assert "no remote was recorded and nothing was fetched" in r.stderr and f"opal clone-state {wrong}' again" in r.stderr
    assert "nothing was changed" not in r.stderr
    assert opal("config", "remote.origin.url", cwd=b).returncode == 1  # not recorded
    assert not [ln for ln in refs_of(b).splitlines() if "refs/opal/remotes/" in ln or "refs/opal/fetching/" in ln]
    # So the right URL just works, under the name the wrong one would have taken.
    r = opal("clone-state", bare, cwd=b)
    assert r.returncode == 0, r.stderr
    assert f"Remote origin -> {bare}" in r.stdout
    assert opal("config", "remote.origin.url", cwd=b).stdout.strip() == bare


def test_a_failed_clone_state_with_a_name_says_how_to_retry(tmp_path, home):
    bare = make_remote(tmp_path)
    b = clone(tmp_path, bare, "b")
    r = opal("clone-state", str(tmp_path / "nowhere"), "--name", "state", cwd=b)
    assert r.returncode == 1 and "--name state' again" in r.stderr
    assert opal("config", "remote.state.url", cwd=b).returncode == 1


@pytest.mark.parametrize("where", [".", "refs", "objects/info"])
def test_a_bare_repository_is_called_one(tmp_path, where):
    bare = make_remote(tmp_path)
    cwd = os.path.join(bare, where)
    for args in (["init"], ["log"], ["status"], ["hooks", "install"], ["fetch"], ["clone-state", bare]):
        r = opal(*args, cwd=cwd)
        assert r.returncode == 3, (args, r.stderr)
        assert f"{bare} is a bare git repository: it has no working tree" in r.stderr, (args, r.stderr)
        assert "not inside a git repository" not in r.stderr and "no opal repository" not in r.stderr
        assert f"git clone {bare} DIR" in r.stderr
    assert not os.path.exists(os.path.join(bare, ".opal"))  # 'opal init' no longer nests a store in it
    assert not os.path.exists(os.path.join(bare, "opal"))


def test_a_worktree_of_a_bare_repository_works(tmp_path, home):
    bare = make_remote(tmp_path)
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", str(wt), cwd=bare)
    r = opal("init", cwd=wt)
    assert r.returncode == 0, r.stderr
    place(home, wt, lines=10)
    r = opal("commit", "-m", "in a worktree of a bare repository", cwd=wt, env={"HOME": str(home)})
    assert r.returncode == 0, r.stderr
    # And inside a plain repository's .git folder, opal still finds its repository.
    project = clone(tmp_path, bare, "p")
    assert opal("status", cwd=project / ".git" / "refs").returncode == 0


def test_a_local_branch_named_like_a_remote_one_hides_nothing(tmp_path, home):
    from opalgit.errors import RevisionError
    from opalgit.history import states

    bare = make_remote(tmp_path)
    a = clone(tmp_path, bare, "a")
    ra, env = open_repo(a), env_of(home)
    path = place(home, a, lines=12)
    s1 = porcelain.commit(ra, env, str(a)).oid
    push(ra, env)
    grow(path, start=12, end=20)
    s2 = porcelain.commit(ra, env, str(a)).oid
    porcelain.branch_create(ra, "origin/main", "HEAD")  # yours, at s2; the remote's origin/main is s1

    with pytest.raises(RevisionError) as err:
        states.resolve(ra, "origin/main")
    assert "'origin/main' is ambiguous" in err.value.message
    assert s1.hex()[:7] in err.value.message and s2.hex()[:7] in err.value.message
    assert "heads/origin/main" in err.value.hint and "remotes/origin/main" in err.value.hint
    assert states.resolve(ra, "remotes/origin/main").oid == s1
    mine = states.resolve(ra, "heads/origin/main")
    assert (mine.oid, mine.branch) == (s2, "origin/main")
    assert states.resolve(ra, "heads/origin/main~1").oid == s1
    r = opal("log", "origin/main", cwd=a)
    assert r.returncode == 4 and "ambiguous" in r.stderr
    r = opal("log", "--oneline", "remotes/origin/main", cwd=a)
    assert r.returncode == 0 and s1.hex()[:7] in r.stdout and s2.hex()[:7] not in r.stdout
    # Without a local branch of that name, origin/main is the remote's, as before.
    porcelain.branch_delete(ra, "origin/main", force=True)
    assert states.resolve(ra, "origin/main").oid == s1

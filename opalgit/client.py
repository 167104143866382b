"""The ``opal`` program's entry point: hand the command to a warm command server, or run it here.

Half of a small command's time is process start-up: the interpreter, click, pygit2
and the commit's modules (docs/performance.md). A post-commit hook pays it on every
``git commit``, and an agent that records its state after every turn pays it on every
turn. So, as Mercurial's ``chg`` does, ``opal`` can hand its command to a server that
has those modules loaded (:mod:`opalgit.server`): the server forks a fresh process per
command, which takes this process's arguments, working folder, environment, umask and
its three standard streams (passed as file descriptors, so a terminal stays a
terminal), runs the command and sends back its exit code. What the command does and
prints is the same either way; only the start-up is saved.

This module runs before anything else is imported, so it imports only what the
interpreter has loaded already (os, sys, marshal and the socket's C module). Whenever
the server cannot take the command (none running, a different interpreter or
environment, code changed on disk, a socket not this user's own), the command runs in
this process as it always did, and a server is started in the background for the next
one. Nothing is ever run twice: a command the server accepted is never retried here.

``OPAL_SERVER=off`` turns all of this off; with the environment variable ``CI`` set a
server is used if one runs but never started. Commands at an interactive terminal
(standard input and output both a terminal) run here too: they may page, and a pager
needs the terminal that only this process has; so do the few in
:data:`LOCAL_COMMANDS`. ``opal server status|start|stop`` is in
:mod:`opalgit.cli_server`. See docs/server.md.
"""

from __future__ import annotations

import marshal
import os
import sys

#: Bumped whenever the request or the reply changes shape.
PROTOCOL = 1

#: Values of OPAL_SERVER that turn the server off.
OFF = ("0", "off", "no", "false", "never")

#: Environment variables the server's own process depends on, beyond what each command
#: is given: the interpreter's settings and locale, and where libgit2 looks for git's
#: configuration (it reads HOME and XDG_CONFIG_HOME once, when pygit2 is imported). A
#: server serves only clients whose values match its own; each command still gets the
#: client's whole environment.
KEY_VARS = ("HOME", "XDG_CONFIG_HOME", "LANG")
KEY_PREFIXES = ("PYTHON", "LC_", "GIT_CONFIG")

# Replies, one byte each, then a 4-byte little-endian integer.
ACCEPTED, REFUSED, EXITED = b"A", b"R", b"X"


def package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def server_key(env: "os._Environ[str] | dict[str, str]", package: str | None = None) -> str:
    """What a server must share with a client to run its commands: the interpreter and
    its options (``-O``, ``-X dev``...), this package's location (or ``package``), and
    the environment variables in :data:`KEY_VARS`."""
    parts = [f"protocol={PROTOCOL}", sys.executable, sys.version, repr(sys.flags), package or package_dir()]
    parts += sorted(f"{k}={v}" for k, v in env.items() if k in KEY_VARS or k.startswith(KEY_PREFIXES))
    return "\n".join(parts)


def runtime_dir(env: "os._Environ[str] | dict[str, str]") -> str:
    """The folder of this user's server sockets: ``$XDG_RUNTIME_DIR/opal`` (a folder only
    this user can enter, cleared at logout), else ``/tmp/opal-UID``."""
    base = env.get("XDG_RUNTIME_DIR")
    if base and os.path.isabs(base):
        return os.path.join(base, "opal")
    return f"/tmp/opal-{os.getuid()}"


def socket_path(env: "os._Environ[str] | dict[str, str]", key: str | None = None) -> str:
    """Where the server for ``key`` listens: one per interpreter, package and key
    environment. The name is a checksum of the key; the server compares the key itself."""
    import zlib  # a C module: no start-up cost worth counting

    key = server_key(env) if key is None else key
    return os.path.join(runtime_dir(env), f"s-{zlib.crc32(key.encode('utf-8', 'surrogateescape')):08x}")


def private_dir(path: str, create: bool) -> bool:
    """Whether ``path`` is a folder owned by this user that nobody else can enter
    (made so when ``create``): a socket anyone could reach, or replace, is not used."""
    if create:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    import stat

    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def mode() -> str:
    """``off``, ``use`` (use a running server, start none) or ``auto`` (the default)."""
    value = os.environ.get("OPAL_SERVER", "").strip().lower()
    if value in OFF or not hasattr(os, "fork"):  # the server forks a process per command
        return "off"
    if value in ("", "auto") and os.environ.get("CI"):
        return "use"
    return "auto"


#: Commands that always run in the client's own process (a command, or a command and
#: its subcommand): ``server`` manages the server itself; ``resume`` starts an agent, an
#: interactive program that belongs in the terminal's foreground process group (where
#: Ctrl-C and job control reach it), which a server's process is not; and the commands
#: that talk to a remote run git, which (or ssh) may open the terminal to ask for a
#: password, and a server's process has no terminal. Their time is the network's anyway.
LOCAL_COMMANDS = frozenset({
    ("server",), ("resume",), ("push",), ("fetch",), ("pull",), ("clone-state",), ("hook", "pre-push"),
})

#: The global options that take a value (see opalgit.cli.cli).
_VALUED = frozenset({"-C", "--color"})


def _command_at(args: list[str]) -> int | None:
    """Where in ``args`` the command is: the first word after the global options."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _VALUED:
            i += 2
            continue
        if arg == "--":
            return i + 1 if i + 1 < len(args) else None
        if not arg.startswith("-"):
            return i
        i += 1
    return None


def command_name(args: list[str]) -> str | None:
    """The command ``args`` run, if any."""
    at = _command_at(args)
    return None if at is None else args[at]


def runs_here(args: list[str]) -> bool:
    """Whether ``args`` name a command of :data:`LOCAL_COMMANDS`."""
    at = _command_at(args)
    if at is None:
        return False
    if (args[at],) in LOCAL_COMMANDS:
        return True
    sub = next((a for a in args[at + 1:] if not a.startswith("-")), None)
    return (args[at], sub) in LOCAL_COMMANDS


def _run_here() -> None:
    from .cli import run

    run()


def _wants_terminal() -> bool:
    # click pages only when both are a terminal; a pager needs this process's terminal.
    try:
        return os.isatty(0) and os.isatty(1)
    except OSError:
        return False


def _streams_ok() -> bool:
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


def main() -> None:
    """The ``opal`` program."""
    how = mode()
    args = sys.argv[1:]
    if how == "off" or runs_here(args) or _wants_terminal() or not _streams_ok():
        _run_here()
        return
    env = os.environ
    key = server_key(env)
    path = socket_path(env, key)
    code = _try_server(path, key, args)
    if code is not None:
        sys.exit(code)
    if how == "auto":
        spawn(path, key)
    _run_here()


def _request(key: str, args: list[str]) -> bytes | None:
    try:
        cwd = os.getcwd()
    except OSError:  # the folder is gone: let the command say so, here
        return None
    umask = os.umask(0o022)
    os.umask(umask)
    streams = []
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        streams.append((getattr(stream, "encoding", None) or "utf-8", getattr(stream, "errors", None) or "strict"))
    return marshal.dumps({
        "protocol": PROTOCOL, "op": "run", "key": key, "argv0": sys.argv[0], "args": args, "cwd": cwd,
        "env": dict(os.environ), "umask": umask, "streams": streams,
    })


def connect(path: str):  # -> _socket.socket | None
    """A connection to the server at ``path``, or None (no server, or not a safe one)."""
    import _socket

    if not private_dir(os.path.dirname(path), create=False):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


# The wire, both ways: a message is its length (4 bytes, little-endian) and its bytes
# (a request, or the server's description of itself); a reply is one kind byte and a
# signed 4-byte number. The file descriptors of a request travel with its first bytes.


def send_message(sock, payload: bytes, fds: tuple[int, ...] = ()) -> None:
    import _socket
    import struct

    head = struct.pack("<I", len(payload))
    rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))] if fds else []
    sock.sendmsg([head], rights)
    view = memoryview(payload)
    while view:
        view = view[sock.send(view):]


def recv_exactly(sock, n: int) -> bytes | None:
    """``n`` bytes from ``sock``, or None if the other side hung up first."""
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def recv_message(sock, head: bytes = b"") -> bytes | None:
    """A message's bytes (``head``: its first bytes, already received), or None if
    the other side hung up first."""
    if len(head) < 4:
        rest = recv_exactly(sock, 4 - len(head))
        if rest is None:
            return None
        head += rest
    return recv_exactly(sock, int.from_bytes(head[:4], "little"))


def read_reply(sock) -> tuple[bytes, int] | None:
    """One reply: its kind and number, or None if the server hung up first."""
    buf = recv_exactly(sock, 5)
    if buf is None:
        return None
    return buf[:1], int.from_bytes(buf[1:], "little", signed=True)


#: The signals a command's process is sent when this process gets them: Ctrl-C and
#: friends reach this process (the terminal's foreground), not the server's.
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")


def _try_server(path: str, key: str, args: list[str]) -> int | None:
    """The command's exit code if the server ran it; None if it did not take it."""
    sock = connect(path)
    if sock is None:
        return None
    import signal

    # From the request on, a signal is held, then sent to the command's process once
    # the server names it: a Ctrl-C between the two is not lost, nor does it kill this
    # process while the command runs on without it.
    pid = 0
    held: list[int] = []

    def relay(signum: int, _frame: object) -> None:
        if pid:
            try:
                os.kill(pid, signum)
            except OSError:
                pass
        else:
            held.append(signum)

    before = {name: signal.signal(getattr(signal, name), relay) for name in FORWARDED}
    try:
        payload = _request(key, args)
        if payload is None:
            return None
        try:
            send_message(sock, payload, (0, 1, 2))
            reply = read_reply(sock)
        except OSError:
            reply = None
        if reply is None or reply[0] != ACCEPTED:
            if held:  # interrupted before the server took it: nothing ran, and nothing will
                return 128 + held[0]
            return None
        pid = reply[1]
        for signum in held:
            relay(signum, None)
        try:
            reply = read_reply(sock)
        except OSError:
            reply = None
        if reply is None or reply[0] != EXITED:
            os.write(2, b"opal: error: the command's process ended without an exit status (it was killed)\n"
                        b"hint: run it again; OPAL_SERVER=off runs commands without the command server\n")
            return 1
        return reply[1]
    finally:
        sock.close()
        for name, handler in before.items():
            signal.signal(getattr(signal, name), handler)


def spawn(path: str, key: str, idle: float | None = None):  # -> subprocess.Popen | None
    """Start a server for ``key`` at ``path`` in the background, detached from this
    process (its own session, no terminal, standard streams on /dev/null and a log)."""
    folder = os.path.dirname(path)
    if not private_dir(folder, create=True) or not _claim_start(path):
        return None
    import subprocess

    if idle is None:
        idle = idle_timeout(os.environ)
    # -c with this package's parent first on sys.path: the server imports this very
    # copy of opalgit, whether it is installed or run from a source tree.
    code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
            "from opalgit.server import main; main(sys.argv[1:])")
    # The key goes in the environment, which only this user can read, not in the
    # arguments that every user's `ps` shows (it may hold a GIT_CONFIG_VALUE_n).
    env = dict(os.environ, OPAL_SERVER_KEY=key)
    try:
        with open(path + ".log", "wb") as log:
            # The server runs with this interpreter's options, as the key says.
            flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
            return subprocess.Popen(
                [sys.executable, *flags, "-c", code, os.path.dirname(package_dir()), path, str(idle)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/", start_new_session=True, close_fds=True,
                env=env,
            )
    except OSError:
        return None


#: How long a start in progress keeps others from starting the same server, in seconds.
STARTING_FOR = 10.0


def _claim_start(path: str) -> bool:
    """Whether this process may start the server for ``path``: not while another one
    is starting it (a burst of first commands would otherwise start one each). The
    claim is a file the server removes once it listens; a stale one (a server that
    failed to start) is taken over."""
    import time

    claim = path + ".starting"
    for _ in range(2):
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return True
        except FileExistsError:
            try:
                if time.time() - os.stat(claim).st_mtime < STARTING_FOR:
                    return False
                os.unlink(claim)
            except OSError:
                pass
        except OSError:
            return False
    return False


def starting(path: str) -> bool:
    """Whether a server for ``path`` is being started now."""
    import time

    try:
        return time.time() - os.stat(path + ".starting").st_mtime < STARTING_FOR
    except OSError:
        return False


#: How long a server waits for a command before it exits, in seconds (OPAL_SERVER_IDLE).
IDLE_DEFAULT = 600.0
IDLE_MAX = 86_400.0


def idle_timeout(env: "os._Environ[str] | dict[str, str]") -> float:
    try:
        value = float(env.get("OPAL_SERVER_IDLE", IDLE_DEFAULT))
    except ValueError:
        value = IDLE_DEFAULT
    return min(max(value, 1.0), IDLE_MAX) if value == value else IDLE_DEFAULT


def server_info(path: str, key: str) -> dict | None:
    """What the server at ``path`` says of itself (pid, started, idle, served, key,
    path), or None if no server for ``key`` answers there."""
    sock = connect(path)
    if sock is None:
        return None
    try:
        sock.settimeout(10.0)
        send_message(sock, marshal.dumps({"protocol": PROTOCOL, "op": "info", "key": key}))
        reply = read_reply(sock)
        if reply is None or reply[0] != ACCEPTED:
            return None
        data = recv_message(sock)
        if data is None:
            return None
        info = marshal.loads(data)
        return info if isinstance(info, dict) else None
    except (OSError, ValueError, EOFError):
        return None
    finally:
        sock.close()

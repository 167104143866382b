"""The ``opal`` program's entry point: run the command here, or hand it to a command server
that was started on purpose.

By default every command runs in this process, as any program does: its limits,
priority, terminal and job control are the shell's. A command server is opt-in: ``opal
server start`` starts one, or ``OPAL_SERVER=auto`` lets a command start one in the
background when none runs. No command ever starts a server otherwise, so a user who
never asked for one never has one (docs/server.md).

While a server runs (started either way), ``opal`` hands it the command, as Mercurial's
``chg`` does: the server (:mod:`opalgit.server`) has the interpreter, click, pygit2 and
the commit's modules loaded, and forks a fresh process per command, which takes this
process's arguments, working folder, environment, umask and its three standard streams
(passed as file descriptors, so a terminal stays a terminal), runs the command and
sends back its exit code. What the command does and prints is the same either way;
only the start-up is saved.

This module runs before anything else is imported, so it imports only what the
interpreter has loaded already (os, sys, marshal and the socket's C module). Whenever
the server cannot take the command (none running, a different interpreter or
environment, code changed on disk, a socket not this user's own), the command runs in
this process as it always did (and with ``OPAL_SERVER=auto`` a server is started in
the background for the next one). Nothing is ever run twice: the server's process for
a command waits for this process's go-ahead (:data:`GO`) before it runs anything, so a
command this process gave up waiting for can run here, and one it let go is never
retried here.

Every wait for the server has a deadline (:func:`wait_for`): a server that does not
answer (stopped, wedged) is said in one line on stderr and passed over for a while,
and the command runs here. Signals reach the command at every moment: before the
go-ahead a signal ends this process as it would have ended the command, which has not
started anywhere; after it, the command's process is sent them. The command's process
ends with this one (see :mod:`opalgit.server`), even if this one is killed.

``OPAL_SERVER=off`` uses no server at all, even a running one. Shell completion
(``_OPAL_COMPLETE``), commands at an interactive terminal (standard input and output
both a terminal: they may page, and a pager needs the terminal that only this process
has) and the few in :data:`LOCAL_COMMANDS` always run here. ``opal server
status|start|stop`` is in :mod:`opalgit.cli.commands.server`.
"""

from __future__ import annotations

import marshal
import os
import sys

from opalgit.server.key import PROTOCOL, confined, package_dir, process_context, server_key  # noqa: F401

#: Values of OPAL_SERVER that turn the server off.
OFF = ("0", "off", "no", "false", "never")

# Replies, one byte each, then a 4-byte little-endian integer.
ACCEPTED, REFUSED, EXITED = b"A", b"R", b"X"
#: The client's one byte after ACCEPTED: the command's process runs the command only
#: once it has it. A client that gave up waiting closes the connection instead, and
#: the command's process, which gets end-of-file, exits without running anything.
GO = b"G"

#: How long a client waits for a server to take its command, in seconds (OPAL_SERVER_WAIT).
WAIT_DEFAULT = 2.0
WAIT_MAX = 600.0
#: How long a server that did not answer is passed over without being tried, in seconds
#: (unless a new server has taken its socket by then, which the next command uses).
PASSED_OVER_FOR = 60.0


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
    """``off`` (use no server), ``use`` (use a running server, start none: the default) or
    ``auto`` (start one in the background when none runs: ``OPAL_SERVER=auto``)."""
    value = os.environ.get("OPAL_SERVER", "").strip().lower()
    if value in OFF or not hasattr(os, "fork"):  # the server forks a process per command
        return "off"
    if value != "on" and confined():
        return "off"
    if value == "on" or (value == "auto" and not os.environ.get("CI")):
        return "auto"
    return "use"


#: Commands that always run in the client's own process (a command, or a command and
#: its subcommand): ``server`` manages the server itself; ``resume`` starts an agent, an
#: interactive program that belongs in the terminal's foreground process group (where
#: Ctrl-C and job control reach it), which a server's process is not; and the commands
#: that talk to a remote run git, which (or ssh) may open the terminal to ask for a
#: password, and a server's process has no terminal. Their time is the network's anyway.
#: ``web`` serves until Ctrl-C: it would hold one of the server's children for hours.
LOCAL_COMMANDS = frozenset({
    ("server",), ("resume",), ("web",), ("push",), ("fetch",), ("pull",), ("clone-state",), ("hook", "pre-push"),
})

#: The global options that take a value (see opalgit.cli.main.cli).
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
    from opalgit.cli.main import run

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


#: The environment variable click's shell completion sets (the program's name, upper
#: case): completion runs in this process, whose terminal and shell it answers, and is
#: never handed to a server.
COMPLETE_VAR = "_OPAL_COMPLETE"


def main() -> None:
    """The ``opal`` program."""
    if COMPLETE_VAR in os.environ:  # a shell's TAB: answered here, never by a server
        from opalgit.cli.completion import main as complete

        sys.exit(complete())
    how = mode()
    args = sys.argv[1:]
    if how == "off" or runs_here(args) or _wants_terminal() or not _streams_ok():
        _run_here()
        return
    env = os.environ
    if how == "use" and not os.path.isdir(runtime_dir(env)):
        _run_here()  # no server was ever started here: not even the key is worked out
        return
    key = server_key(env)
    path = socket_path(env, key)
    try:
        outcome = _try_server(path, key, args)
        if isinstance(outcome, int):
            sys.exit(outcome)
        if outcome is not None:  # a server that does not answer: nothing silent
            os.write(2, f"opal: {outcome}; this command runs in its own process\n".encode("utf-8", "replace"))
        if how == "auto":
            spawn(path, key)  # a new server takes the socket of one that did not answer
    except KeyboardInterrupt:  # Ctrl-C before the command began anywhere: nothing ran
        sys.exit(130)
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
    import _signal

    # What a process of its own would have inherited from this one's parent: the signals
    # it ignores (nohup's SIGHUP, a background job's SIGINT) and those it blocks. Taken
    # before this process sets its own handlers.
    ignored = sorted(n for n in _signal.valid_signals() if _signal.getsignal(n) == _signal.SIG_IGN)
    mask = sorted(_signal.pthread_sigmask(_signal.SIG_BLOCK, []))
    return marshal.dumps({
        "protocol": PROTOCOL, "op": "run", "key": key, "argv0": sys.argv[0], "args": args, "cwd": cwd,
        "env": dict(os.environ), "umask": umask, "streams": streams, "ignored": ignored, "mask": mask,
        "path": list(sys.path), "orig_argv": list(getattr(sys, "orig_argv", sys.argv)),
    })


def wait_for(env: "os._Environ[str] | dict[str, str]") -> float:
    """How long a client waits for the server to take its command (OPAL_SERVER_WAIT, in
    seconds, 0.05 to 600): past it the command runs in the client's own process."""
    try:
        value = float(env.get("OPAL_SERVER_WAIT", WAIT_DEFAULT))
    except ValueError:
        value = WAIT_DEFAULT
    return min(max(value, 0.05), WAIT_MAX) if value == value else WAIT_DEFAULT


class NotAnswering(Exception):
    """A server is there but does not take connections in time (its queue is full)."""


def connect(path: str, timeout: float | None = None):  # -> tuple[_socket.socket, int] | None
    """A connection to the server at ``path`` and the server's process id (0 where the
    system does not say), or None (no server, or not a safe one). Raises
    :class:`NotAnswering` when the server does not take the connection in time."""
    import _socket

    if not private_dir(os.path.dirname(path), create=False):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(wait_for(os.environ) if timeout is None else timeout)
    try:
        sock.connect(path)
    except (BlockingIOError, TimeoutError):  # a listener whose queue is full: it takes none
        sock.close()
        raise NotAnswering from None
    except OSError:
        sock.close()
        return None
    pid = 0
    peercred = getattr(_socket, "SO_PEERCRED", None)
    if peercred is not None:  # Linux: the process that listens, as the kernel knows it
        creds = sock.getsockopt(_socket.SOL_SOCKET, peercred, 12)
        pid, uid = int.from_bytes(creds[:4], "little"), int.from_bytes(creds[4:8], "little")
        if uid != os.getuid():
            sock.close()
            return None
    return sock, pid


def process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (``T``: stopped, ``t``: stopped by a debugger,
    ``R``/``S``/``D``: running or waiting), or None where it cannot be told."""
    if pid <= 0:
        return None
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        return data.rsplit(b")", 1)[1].split()[0].decode("ascii")
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def _stopped(pid: int) -> bool:
    return process_state(pid) in ("T", "t")


def await_reply(sock, deadline: float, server: int) -> tuple[bytes, int] | str | None:
    """The server's reply, read before ``deadline`` (a ``time.monotonic()``); a sentence
    saying why not if the server does not answer by then or is stopped (looked at every
    quarter of a second, first after 50 ms); None if it hung up."""
    import _socket
    import time

    step = 0.05
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return f"the command server{f' {server}' if server else ''} did not answer within " \
                   f"{wait_for(os.environ):g} s"
        sock.settimeout(min(left, step))
        step = 0.25
        try:
            if not sock.recv(1, _socket.MSG_PEEK):  # the reply comes whole: peek, then read it
                return None
        except TimeoutError:
            if _stopped(server):
                return f"the command server {server} is stopped (kill -CONT {server} resumes it)"
            continue
        sock.settimeout(max(deadline - time.monotonic(), 0.05))
        return read_reply(sock)



# The wire, both ways: a message is its length (4 bytes, little-endian) and its bytes
# (a request, or the server's description of itself); a reply is one kind byte and a
# signed 4-byte number. The client's three standard streams travel with its go-ahead.


def send_message(sock, payload: bytes, fds: tuple[int, ...] = (), head: bytes | None = None) -> None:
    """``payload`` after its length, or after ``head`` (the go-ahead) when given."""
    import _socket
    import struct

    if head is None:
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
#: friends reach this process (the terminal's foreground), not the server's. A signal
#: this process was started ignoring is ignored by the command too, and not passed on.
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")


class _Interrupted(Exception):
    """A signal came before the command's process had the go-ahead: nothing ran, and
    the signal is this process's own (see :func:`_try_server`)."""


class _Relay:
    """Where this process's signals go while the server has its command.

    ``waiting``: no go-ahead yet; the first signal ends the wait (:class:`_Interrupted`)
    and the command, which started nowhere, ends as it would have, of that signal.
    ``served``: the command's process is sent each signal (Ctrl-Z stops it with this
    process, and ``fg`` continues both). ``done``: this process decided; a signal is held
    for it, and ends it before the command runs here.
    """

    def __init__(self, ignored: list[int]) -> None:
        import _signal

        self.state = "waiting"
        self.pid = 0
        self.pidfd = -1
        self.sent: list[int] = []
        self.held: list[int] = []
        self.signals = [getattr(_signal, n) for n in FORWARDED if hasattr(_signal, n)]
        self.signals = [n for n in self.signals if n not in ignored]
        self.suspends = hasattr(_signal, "SIGTSTP") and _signal.SIGTSTP not in ignored
        self.before: dict[int, object] = {}

    def done(self, value):
        self.state = "done"
        return value

    def __call__(self, signum: int, _frame: object) -> None:
        if self.state == "served":
            self.send(signum)
            return
        self.held.append(signum)
        if self.state == "waiting":
            self.state = "done"
            raise _Interrupted

    def send(self, signum: int) -> None:
        import _signal

        if signum not in (_signal.SIGSTOP, _signal.SIGCONT):
            self.sent.append(signum)
        try:
            if self.pidfd >= 0:  # the very process, even if its number were reused
                _signal.pidfd_send_signal(self.pidfd, signum)
            else:
                os.kill(self.pid, signum)
        except OSError:
            pass

    def suspend(self, signum: int, _frame: object) -> None:
        """Ctrl-Z: stop the command's process, then this one; continue both on ``fg``."""
        import _signal

        served = self.state == "served"
        if served:
            self.send(_signal.SIGSTOP)
        _signal.signal(signum, _signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # this process stops here until it is continued
        _signal.signal(signum, self.suspend)
        if served:
            self.send(_signal.SIGCONT)

    def install(self) -> None:
        import _signal

        for signum in self.signals:
            self.before[signum] = _signal.signal(signum, self)
        if self.suspends:
            self.before[_signal.SIGTSTP] = _signal.signal(_signal.SIGTSTP, self.suspend)

    def restore(self) -> None:
        import _signal

        for signum, handler in self.before.items():
            _signal.signal(signum, handler)
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


def _interrupted(signum: int) -> int:
    """How the client of a served command that ended of a signal passed on to it ends:
    Ctrl-C's status 130, as opal's own handling of it gives; the others by the signal
    itself, which by default ends the process, as the command's own process ended."""
    import _signal

    if signum != _signal.SIGINT:
        _signal.signal(signum, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
    return 128 + signum


def _try_server(path: str, key: str, args: list[str]) -> int | str | None:
    """The command's exit code if the server ran it; a sentence if the server did not
    answer (the caller says it, and runs the command here); None if it did not take it."""
    why = passed_over(path)
    if why is not None:
        return why
    import time

    deadline = time.monotonic() + wait_for(os.environ)
    try:
        found = connect(path)
    except NotAnswering:
        return _not_answering(path, 0, f"the command server at {path} takes no connection")
    if found is None:
        return None
    sock, server = found
    payload = _request(key, args)
    if payload is None:
        sock.close()
        return None
    ignored = marshal.loads(payload)["ignored"]
    relay = _Relay(ignored)
    relay.install()
    try:
        try:
            outcome = _hand_over(sock, relay, payload, deadline, server)
        except _Interrupted:
            outcome = None
        if relay.state == "served":
            return _wait_exit(sock, relay)
        if isinstance(outcome, str) and not relay.held:
            return _not_answering(path, server, outcome)
        return None
    finally:
        sock.close()
        relay.restore()
        if relay.state != "served" and relay.held:
            # It came before the go-ahead, or as this process decided where the command
            # runs: the command has started nowhere, and the signal now does to this
            # process, with its own handlers back, what it would have done to it
            # (Ctrl-C: KeyboardInterrupt, see main; SIGTERM and the others end it).
            os.kill(os.getpid(), relay.held[0])


def _hand_over(sock, relay: _Relay, payload: bytes, deadline: float, server: int) -> str | None:
    """Send the request and, once a command's process is ready, the go-ahead. Every way
    out sets ``relay.state``; a signal before that raises :class:`_Interrupted`."""
    import _signal

    try:
        # The streams go with the go-ahead, not with the request: a request left in the
        # queue of a server that does not answer must not hold this process's output
        # open (a reader of it would wait for its end as long as that server waits).
        send_message(sock, payload)
        reply = await_reply(sock, deadline, server)
    except TimeoutError:
        return relay.done(f"the command server{f' {server}' if server else ''} did not take the command")
    except OSError:
        return relay.done(None)
    if not isinstance(reply, tuple) or reply[0] != ACCEPTED:
        return relay.done(reply if isinstance(reply, str) else None)
    pid = reply[1]
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = -1
    # No signal between the go-ahead and the state that passes signals on: pending ones
    # are handled when this returns, by then as the command's. Ctrl-Z too: one that came
    # in between stopped this process alone while the command, already running, went on
    # (a test saw it in CI under load).
    blocked = [*relay.signals, *([_signal.SIGTSTP] if relay.suspends else [])]
    mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, blocked)
    try:
        try:
            send_message(sock, b"", (0, 1, 2), GO)
        except OSError:  # the command's process is gone before the go-ahead: nothing ran
            if pidfd >= 0:
                os.close(pidfd)
            return relay.done(None)
        relay.pid, relay.pidfd, relay.state = pid, pidfd, "served"
    finally:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
    return None


def _wait_exit(sock, relay: _Relay) -> int:
    """The served command's exit code, however long it runs."""
    sock.settimeout(None)
    try:
        reply = read_reply(sock)
    except OSError:
        reply = None
    if reply is not None and reply[0] == EXITED:
        return reply[1]
    if relay.sent:  # ended of the signal passed on to it, most likely: end as it did
        return _interrupted(relay.sent[-1])
    os.write(2, b"opal: error: the command's process ended without an exit status (it was killed)\n"
                b"hint: run it again; OPAL_SERVER=off runs commands without the command server\n")
    return 1


def passed_over(path: str) -> str | None:
    """Why the server at ``path`` is not tried now: it did not answer a command a
    moment ago (:func:`_not_answering`) and still has the socket; else None."""
    try:
        fd = os.open(path + ".silent", os.O_RDONLY)
    except OSError:
        return None
    import time

    try:
        st = os.fstat(fd)
        ino, _, why = os.read(fd, 4096).decode("utf-8", "replace").partition(" ")
        if time.time() - st.st_mtime < PASSED_OVER_FOR and int(ino) == os.stat(path).st_ino:
            return why.strip()
    except (OSError, ValueError):
        pass
    finally:
        os.close(fd)
    return None


def _not_answering(path: str, server: int, why: str) -> str:
    """Remember for :data:`PASSED_OVER_FOR` seconds that the server at ``path`` did not
    answer, so the next commands do not wait for it; the server that takes the socket
    next removes the note. Returns ``why``."""
    try:
        ino = os.stat(path).st_ino
        tmp = f"{path}.silent.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, f"{ino} {why}".encode("utf-8", "replace"))
        finally:
            os.close(fd)
        os.rename(tmp, path + ".silent")
    except OSError:
        pass
    return why


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
            "from opalgit.server.daemon import main; main(sys.argv[1:])")
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


def probe(path: str, key: str, wait: float | None = None) -> tuple[str, object]:
    """The server at ``path`` for ``key``: ``("up", info)`` with what it says of itself
    (pid, started, idle, served, key, path); ``("stopped", pid)`` or ``("silent", pid)``
    when one is there but does not answer within ``wait`` seconds (default
    :func:`wait_for`); ``("none", None)`` when none for ``key`` answers there.
    ``pid`` is 0 where the system does not tell who listens."""
    import time

    wait = wait_for(os.environ) if wait is None else wait
    try:
        found = connect(path, wait)
    except NotAnswering:
        return "silent", 0
    if found is None:
        return "none", None
    sock, server = found
    try:
        send_message(sock, marshal.dumps({"protocol": PROTOCOL, "op": "info", "key": key}))
        reply = await_reply(sock, time.monotonic() + wait, server)
        if isinstance(reply, str):
            return ("stopped" if _stopped(server) else "silent"), server
        if reply is None or reply[0] != ACCEPTED:
            return "none", None
        data = recv_message(sock)
        info = marshal.loads(data) if data is not None else None
        return ("up", info) if isinstance(info, dict) else ("none", None)
    except TimeoutError:
        return ("stopped" if _stopped(server) else "silent"), server
    except (OSError, ValueError, EOFError):
        return "none", None
    finally:
        sock.close()


def server_info(path: str, key: str) -> dict | None:
    """What the server at ``path`` says of itself (see :func:`probe`), or None if no
    server for ``key`` answers there."""
    state, info = probe(path, key)
    return info if state == "up" else None  # type: ignore[return-value]


def our_server(pid: int, path: str) -> bool:
    """Whether process ``pid`` is verifiably this user's command server for ``path``:
    this user's, running this package's server module with ``path`` as its socket. No
    other process is ever sent a signal by opal on a server's account."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            uids = next(line for line in fh if line.startswith(b"Uid:")).split()[1:]
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            args = fh.read().split(b"\0")
    except (OSError, StopIteration):
        return False
    if any(int(u) != os.getuid() for u in uids):
        return False
    return any(b"from opalgit.server.daemon import main" in a for a in args) and os.fsencode(path) in args

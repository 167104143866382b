"""The command server: a process with opal's modules loaded that runs commands for :mod:`opalgit.server.client`.

One server per user, interpreter, package and key environment (see
:func:`opalgit.server.client.server_key`) listens on a Unix socket in a folder only its user
can enter. For each connection it forks: the child takes the client's request (its
arguments, working folder, environment, umask and standard streams, passed as file
descriptors), becomes that command's process, says it is ready and waits for the
client's go-ahead; only then does it run :func:`opalgit.cli.main` exactly as ``opal``
would, and send back the exit code. A client that stopped waiting (a server too slow
to answer) closes the connection instead, and the process exits having run nothing.
The server itself runs no command and keeps no state between them; every command
starts from the same loaded modules, copied on write.

A command's process takes over what a process of its own would have had from the
client: environment (and with it the time zone, re-read by ``time.tzset``), folder,
umask, streams, the signals the client ignores or blocks, ``sys.path`` and
``sys.orig_argv``. What it cannot take (ids, limits, priority, cgroup, namespaces,
sandbox) is part of the server's key instead (:func:`opalgit.server.client.process_context`).
It ends when its client does, even one killed with SIGKILL (:func:`_watch_client`).

It stops by itself: after ``idle`` seconds without a command, when another server
has taken its socket, when the socket is removed, and before serving a command with
code that changed on disk since it loaded it (it refuses that command, which then runs
in the client's own process, and exits; with ``OPAL_SERVER=auto`` that client starts a
fresh server, otherwise commands run in their own process until one is started).
"""

from __future__ import annotations

import gc
import io
import marshal
import os
import signal
import socket
import struct
import sys
import time
from typing import Any

from opalgit.server import client

#: The longest wait in the accept loop before the server looks at its socket again.
TICK = 5.0


#: Modules that do something when imported.
_NOT_PRELOADED = frozenset({"opalgit.__main__"})


def _preload() -> None:
    """Import what commands use, and build now what every command would build alike."""
    import importlib
    import pkgutil

    from opalgit import __path__ as package_path

    # Every module of the package (a command imports several lazily: the vault, the
    # git runner, the pack windows...), and subprocess, which the git runner uses.
    importlib.import_module("subprocess")
    for found in pkgutil.walk_packages(package_path, "opalgit."):
        if found.name in _NOT_PRELOADED:
            continue
        try:
            importlib.import_module(found.name)
        except Exception as exc:  # noqa: BLE001 - a command that needs it says why, as in its own process
            print(f"opal server: not preloaded: {found.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
    from opalgit.secrets import rules as secretrules
    from opalgit.secrets.redact import Rules

    # The built-in rules' regexes and the prefilter's searches are compiled on first
    # use (a few ms of every commit). Compiled here, they are in the re module's cache
    # too, so a rule set extended by a user's secrets.toml finds them there.
    for value in vars(secretrules).values():
        if isinstance(value, secretrules.LazyPattern):
            value.compiled()
    for rule in secretrules.BUILTIN_RULES:
        if isinstance(rule.regex, secretrules.LazyPattern):
            rule.regex.compiled()
    _ = Rules.default()._gate.passes


def _module_files() -> dict[str, tuple[int, int]]:
    stamps = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        stamps[path] = (st.st_mtime_ns, st.st_size)
    return stamps


def _stale(stamps: dict[str, tuple[int, int]]) -> bool:
    """Whether any module the server loaded has changed on disk since (an upgrade, an edit)."""
    for path, stamp in stamps.items():
        try:
            st = os.stat(path)
        except OSError:
            return True
        if (st.st_mtime_ns, st.st_size) != stamp:
            return True
    return False


def _reply(conn: socket.socket, kind: bytes, number: int) -> None:
    conn.sendall(kind + number.to_bytes(4, "little", signed=True))


class _Stop(Exception):
    pass


def serve(path: str, key: str, idle: float) -> None:
    """Listen at ``path`` until idle for ``idle`` seconds or displaced; see the module doc."""
    _preload()
    stamps = _module_files()
    started = time.time()
    me = os.getpid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bind beside the final name, then rename over it: a client never meets a half-made
    # socket, and of two servers started at once the later one simply takes the name.
    tmp = f"{path}.{os.getpid()}"
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    listener.bind(tmp)
    listener.listen(64)
    os.rename(tmp, path)
    ident = os.stat(path).st_ino
    with open(path + ".pid", "w") as fh:
        fh.write(f"{os.getpid()}\n")
    # See client._claim_start, and client.passed_over: the server that did not answer
    # no longer has the socket; when it runs again it sees that and exits.
    for name in (path + ".starting", path + ".silent"):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass

    def stop(_signum: int, _frame: Any) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # commands' processes are reaped by the kernel
    # What is loaded now stays: no collection walks it again, in the server or in a
    # command's process (and its pages stay shared between them).
    gc.collect()
    gc.freeze()
    served = 0
    deadline = time.monotonic() + idle
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not _ours(path, ident):
                return
            listener.settimeout(min(left, TICK))
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            try:
                if not _same_user(conn):
                    continue
                if _stale(stamps):
                    _reply(conn, client.REFUSED, 1)
                    return
                served += 1
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    _child(conn, key, {"pid": os.getppid(), "started": started, "idle": idle, "served": served,
                                       "key": key, "path": path})
                deadline = time.monotonic() + idle
            finally:
                conn.close()
    except _Stop:
        return
    finally:
        listener.close()
        # Not in a command's process (a signal between its fork and its own handlers
        # lands here), nor when displaced: the newer server's files have these names.
        if os.getpid() == me and _ours(path, ident):
            names = [path, path + ".pid"]
            try:
                if os.path.getsize(path + ".log") == 0:  # nothing to say: no file left behind
                    names.append(path + ".log")
            except OSError:
                pass
            for name in names:
                try:
                    os.unlink(name)
                except OSError:
                    pass


def _ours(path: str, ident: int) -> bool:
    try:
        return os.stat(path).st_ino == ident
    except OSError:
        return False


def _same_user(conn: socket.socket) -> bool:
    if not hasattr(socket, "SO_PEERCRED"):  # not Linux: the private folder is the guard
        return True
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _read_request(conn: socket.socket) -> dict:
    conn.settimeout(10.0)  # a client sends its request at once; one that does not is gone
    data = client.recv_message(conn)
    if data is None:
        raise EOFError
    conn.settimeout(None)
    return marshal.loads(data)


def _go_ahead(conn: socket.socket) -> list[int] | None:
    """The client's three standard streams, which come with its go-ahead; None when
    the client closed the connection instead (it runs the command itself, or is gone)."""
    try:
        data, fds, _flags, _addr = socket.recv_fds(conn, 1, 3)
    except OSError:
        return None
    if data != client.GO or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    return fds


def _child(conn: socket.socket, key: str, info: dict) -> None:
    """A command's process: never returns."""
    log = os.dup(2)  # the server's log: the client's stderr replaces fd 2 below
    accepted = False
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the command waits for its own children
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        try:
            request = _read_request(conn)
        except (OSError, EOFError, ValueError, TypeError):
            os._exit(1)
        if not isinstance(request, dict):
            os._exit(1)
        if request.get("protocol") != client.PROTOCOL or request.get("key") != key:
            _reply(conn, client.REFUSED, 2)
            os._exit(0)
        if request.get("op") == "info":
            _reply(conn, client.ACCEPTED, os.getpid())
            client.send_message(conn, marshal.dumps(info))
            os._exit(0)
        if request.get("op") != "run":
            _reply(conn, client.REFUSED, 3)
            os._exit(0)
        if client.COMPLETE_VAR in (request.get("env") or {}):
            # Shell completion answers the client's own shell: the client runs it (a
            # client of this version never sends it; an older one might).
            _reply(conn, client.REFUSED, 4)
            os._exit(0)
        _become(request)
        try:
            _reply(conn, client.ACCEPTED, os.getpid())
        except OSError:
            os._exit(0)
        fds = _go_ahead(conn)
        if fds is None:  # the client runs it itself, or is gone: run nothing
            os._exit(0)
        _take_streams(request, fds)
        _watch_client(conn)
        accepted = True
        code = _run(request["args"])
    except BaseException:  # noqa: BLE001 - the process must report and end, whatever happened
        import traceback

        text = traceback.format_exc()
        try:
            if accepted:  # the command's own failure, past main()'s handlers: the user sees it
                sys.stderr.write(text)
                sys.stderr.flush()
            else:  # the server's: the command runs in the client instead
                os.write(log, text.encode("utf-8", "replace"))
        except BaseException:  # noqa: BLE001
            pass
        code = 70
    try:
        if accepted:
            _watch_client(conn, False)
        _reply(conn, client.EXITED if accepted else client.REFUSED, code)
    except OSError:
        pass
    os._exit(code)


def _become(request: dict) -> None:
    """Take the client's place: what a process of its own would have had from it
    (but its streams, :func:`_take_streams`)."""
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])  # os.environ sets the C library's environment too
    if hasattr(time, "tzset"):
        # The C library and the time module read TZ once, in the server; a process of
        # its own reads the client's (TZ is not part of the server's key).
        time.tzset()
    sys.argv = [request["argv0"], *request["args"]]
    sys.orig_argv = list(request["orig_argv"])
    # Where a module imported later is found: the client's path, whose first entry is
    # its own (the script's folder, or its working folder for `python -m`), not the
    # server's "" (a folder that would now mean the client's working folder).
    sys.path[:] = request["path"]
    # A process inherits the signals its parent ignores (nohup's SIGHUP, a background
    # job's SIGINT) and its blocked signals across exec; the client passes them on.
    for signum in request["ignored"]:
        try:
            signal.signal(signum, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, request["mask"])


def _take_streams(request: dict, fds: list[int]) -> None:
    """The client's standard streams as this process's own."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    (ie, ierr), (oe, oerr), (ee, eerr) = request["streams"]
    # As the interpreter sets them up: stdout line-buffered on a terminal, stderr always.
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding=ie, errors=ierr)
    sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), encoding=oe, errors=oerr, line_buffering=os.isatty(1))
    sys.stderr = io.TextIOWrapper(open(2, "wb", closefd=False), encoding=ee, errors=eerr, line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr


def _watch_client(conn: socket.socket, on: bool = True) -> None:
    """End this process when the client goes, as a process of its own ends with a
    ``kill -9`` of ``opal``: when the client's end of the connection closes (the
    kernel closes it however the client ends), the kernel sends this process SIGKILL
    (O_ASYNC with F_SETSIG on Linux; elsewhere SIGIO, whose handler kills it).

    The kernel, not a thread: it acts however busy the command is (a thread would wait
    for the interpreter's lock, and would keep the redaction worker from forking); it
    does not depend on the server (which may be stopped or gone); and the connection
    ends exactly when the client does, which neither a parent-death signal (the parent
    is the server) nor a process id (reused) can say. The client sends nothing after
    the go-ahead, so the socket turns readable only when the client is gone; it may have
    gone before this was set up, hence the look right after. ``on=False``, once the
    command is done: the client's close after the exit code ends nothing."""
    import fcntl

    fd = conn.fileno()
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    if not on:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_ASYNC)
        return
    fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
    if hasattr(fcntl, "F_SETSIG"):
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGKILL)
    else:
        signal.signal(signal.SIGIO, lambda *_: os.kill(os.getpid(), signal.SIGKILL))
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_ASYNC)
    try:
        gone = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        gone = False
    if gone:
        os._exit(1)


def _run(args: list[str]) -> int:
    """Run the command as ``opal`` would (:func:`opalgit.cli.main.run`), exit handlers and
    all, and return its code."""
    import atexit
    import threading

    from opalgit.cli.main import main

    code = main(args)
    # What the interpreter does at exit, before the code goes back: wait for the
    # command's threads and run its exit handlers.
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def main(argv: list[str]) -> None:
    """``python -c ... PATH IDLE`` with the key in ``OPAL_SERVER_KEY``: what
    :func:`opalgit.server.client.spawn` runs."""
    path, idle = argv[0], float(argv[1])
    key = os.environ.pop("OPAL_SERVER_KEY")
    serve(path, key, min(max(idle, 1.0), client.IDLE_MAX))

"""``opal server``: see, start and stop the command server (:mod:`opalgit.server`).

The server is opt-in: no command starts one unless ``opal server start`` is run, or
``OPAL_SERVER=auto`` is set. A running server is used by every command of its key and
stops by itself when idle. These commands always run in the calling process, never in
the server.

Importing this module attaches the commands to :data:`opalgit.cli.main.cli`.
"""

from __future__ import annotations

import os
import signal
import time

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.errors import OpalError
from opalgit.plural import count
from opalgit.server import client
from opalgit.times import iso_seconds

#: How long ``start`` and ``stop`` wait for the server, in seconds.
WAIT = 15.0


def _where() -> tuple[str, str]:
    key = client.server_key(os.environ)
    return client.socket_path(os.environ, key), key


def _describe(info: dict) -> list[str]:
    age = max(time.time() - info["started"], 0.0)
    return [
        f"Command server {info['pid']}, up {_span(age)}, {count(info['served'], 'request')} served",
        f"  socket:  {info['path']}",
        f"  stops after {_span(info['idle'])} without a command (OPAL_SERVER_IDLE)",
    ]


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _json(info: dict | None, path: str, state: str = "up", pid: int = 0) -> dict:
    out = {"running": info is not None, "socket": path, "mode": client.mode(),
           **({k: info[k] for k in ("pid", "started", "idle", "served")} if info else {})}
    if isinstance(out.get("started"), (int, float)):
        out["started"] = iso_seconds(out["started"])
    if state in ("stopped", "silent"):
        out.update(answering=False, state=state, pid=pid)
    return out


def _silent(state: str, pid: int, path: str) -> list[str]:
    who = f"Command server {pid}" if pid else f"The command server at {path}"
    how = "is stopped (SIGSTOP)" if state == "stopped" else f"does not answer within {client.wait_for(os.environ):g} s"
    return [f"{who} {how}.",
            "  Commands run in their own process; 'opal server start' starts one that takes its socket.",
            "  'opal server stop' ends it."]


@cli.group("server", context_settings=CONTEXT)
def server_group() -> None:
    """An opt-in command server that spares each command the interpreter's start-up.

    By default every command runs in its own process and no server is ever started.
    'opal server start' starts one (or set OPAL_SERVER=auto, and a command starts one in
    the background when none runs); while it runs, 'opal' hands it each command and it
    forks a fresh process for it, with this command's arguments, folder, environment and
    terminal: the same command, the same output, without the start-up. It stops after
    10 minutes without a command (OPAL_SERVER_IDLE, in seconds), when opal's code
    changes, or with 'opal server stop'. OPAL_SERVER=off uses none, even a running one.
    There is one per user, Python and environment, on a socket only that user can
    reach. See docs/server.md.
    """


@server_group.command("status", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def server_status(c: Ctx, as_json: bool) -> None:
    """Say whether a command server runs for this Python and environment.

    \b
    Examples:
      opal server status
      opal server status --json
    """
    path, key = _where()
    state, found = client.probe(path, key)
    info = found if state == "up" else None
    if as_json:
        c.json(_json(info, path, state, found if isinstance(found, int) else 0))
        return
    if state in ("stopped", "silent"):
        c.out(_silent(state, found, path))
        return
    if info is None:
        c.out("No command server runs for this Python and environment.")
        c.out({"off": "OPAL_SERVER is off: commands run in their own process.",
               "use": "Commands run in their own process; 'opal server start' starts one.",
               "auto": "OPAL_SERVER=auto: the next command starts one in the background."}[client.mode()])
        return
    c.out(_describe(info))
    if client.mode() == "off":
        c.out("OPAL_SERVER is off: commands do not use it.")


@server_group.command("start", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def server_start(c: Ctx, as_json: bool) -> None:
    """Start the command server now and wait until it answers.

    The commands after it, and the git hooks, use it until it stops (after
    OPAL_SERVER_IDLE seconds without a command, 600 unless set when it starts).

    \b
    Examples:
      opal server start
    """
    path, key = _where()
    info = client.server_info(path, key)
    if info is None:
        folder = os.path.dirname(path)
        if not client.private_dir(folder, create=True):
            raise OpalError(f"cannot start a command server: {folder} is not a folder only you can enter",
                            hint="remove it or set XDG_RUNTIME_DIR to a private folder")
        # None: another process is starting it right now; wait for that one.
        proc = client.spawn(path, key)
        deadline = time.monotonic() + WAIT
        while info is None:
            if proc is not None and proc.poll() is not None:
                raise OpalError(f"the command server exited at start (code {proc.returncode}); see {path}.log")
            if time.monotonic() > deadline:
                raise OpalError(f"the command server did not answer within {WAIT:.0f} s; see {path}.log")
            time.sleep(0.02)
            info = client.server_info(path, key)
    if as_json:
        c.json(_json(info, path))
        return
    c.out(_describe(info))
    if client.mode() == "off":
        c.warn("OPAL_SERVER is off: commands will not use it")


@server_group.command("stop", context_settings=CONTEXT)
@pass_ctx
def server_stop(c: Ctx) -> None:
    """Stop the command server of this Python and environment, if one runs.

    A command it is running goes on to its end; the next commands run in their own
    process (with OPAL_SERVER=auto, the next one starts a new server).

    \b
    Examples:
      opal server stop
    """
    path, key = _where()
    state, found = client.probe(path, key)
    if state == "none":
        c.out("No command server runs for this Python and environment.")
        return
    pid = found["pid"] if state == "up" else found  # type: ignore[index]
    # Where /proc can tell, even a server that answered is checked (the number it gives
    # is its command process's parent, which is another process if the server just died).
    checkable = os.path.isdir("/proc/self")
    if (state != "up" or checkable) and not (pid and client.our_server(pid, path)):
        # Only a process that is verifiably this user's server for this socket is sent
        # a signal; the one listening here cannot be told apart from any other.
        how = "answers" if state == "up" else "does not answer"
        raise OpalError(f"the process listening at {path} {how} but cannot be identified as "
                        f"your command server{f' (pid {pid})' if pid else ''}",
                        hint=f"remove {path}; 'opal server start' then starts a new server")
    try:
        os.kill(pid, signal.SIGTERM)
        if state != "up":  # a stopped server acts on SIGTERM once it is continued
            os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + WAIT
    while os.path.exists(path) and client.probe(path, key, 1.0)[0] != "none":
        if time.monotonic() > deadline:
            raise OpalError(f"the command server {pid} did not stop within {WAIT:.0f} s",
                            hint=f"see {path}.log")
        time.sleep(0.02)
    c.out(f"Stopped command server {pid}.")

"""The command server's key: what a server must share with a client to run its commands.

A command's process is forked from the server, so it has everything of the server's
own process. What a process of its own would have had from the client instead either
travels with the request (:mod:`opalgit.server.client`, taken over by :mod:`opalgit.server`)
or is part of this key, so that a client with other values gets a server of its own,
started by it and therefore with its values. See docs/server.md.

Imported by the ``opal`` client before anything else: only ``os`` and ``sys``.
"""

from __future__ import annotations

import os
import sys

#: Bumped whenever the request or the reply changes shape.
PROTOCOL = 2

#: Environment variables the server's own process depends on, beyond what each command
#: is given: the interpreter's settings and locale, and where libgit2 looks for git's
#: configuration (it reads HOME and XDG_CONFIG_HOME once, when pygit2 is imported). A
#: server serves only clients whose values match its own; each command still gets the
#: client's whole environment.
KEY_VARS = ("HOME", "XDG_CONFIG_HOME", "LANG")
KEY_PREFIXES = ("PYTHON", "LC_", "GIT_CONFIG")


def package_dir() -> str:
    """The opalgit package's folder (this module is in its server/ subpackage)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def server_key(env: "os._Environ[str] | dict[str, str]", package: str | None = None) -> str:
    """What a server must share with a client to run its commands: the interpreter and
    its options (``-O``, ``-X dev``, ``-W``...), this package's location (or
    ``package``), the environment variables in :data:`KEY_VARS` and what the process
    inherits that no request can hand over (:func:`process_context`)."""
    parts = [f"protocol={PROTOCOL}", sys.executable, sys.version, repr(sys.flags), repr(sys.warnoptions),
             repr(sorted(sys._xoptions.items())), package or package_dir()]  # -W and -X are not in sys.flags
    parts += sorted(f"{k}={v}" for k, v in env.items() if k in KEY_VARS or k.startswith(KEY_PREFIXES))
    parts += process_context()
    return "\n".join(parts)


#: The lines of /proc/self/status a forked process inherits and no request can change:
#: its capabilities and its sandbox (no_new_privs, seccomp).
_STATUS_FIELDS = (b"Cap", b"NoNewPrivs:", b"Seccomp")
#: The namespaces that change what a command sees and reaches: files, network,
#: processes, ids (each costs a /proc look-up on every command; the others rarely differ).
_NAMESPACES = ("mnt", "net", "pid", "user")
_PROC: dict[str, bytes | None] = {}


def _proc_self(name: str) -> bytes | None:
    """/proc/self/``name`` (read once per process), or None where there is none."""
    if name not in _PROC:
        try:
            fd = os.open(f"/proc/self/{name}", os.O_RDONLY)
            try:
                _PROC[name] = os.read(fd, 1 << 16)
            finally:
                os.close(fd)
        except OSError:
            _PROC[name] = None
    return _PROC[name]


def process_context() -> list[str]:
    """What a process forked by the server inherits from the server, not from the
    client, and no request can hand over: user and group ids, scheduling priority, CPUs,
    resource limits, cgroup, namespaces, capabilities, sandbox and security label. A
    client whose values differ gets a server of its own, which it starts with its own
    values (a process takes them from its parent), so a served command has the limits a
    process of its own would have. Linux's /proc has most; elsewhere what ``os`` tells."""
    parts = [f"ids={os.getuid()},{os.geteuid()},{os.getgid()},{os.getegid()},{sorted(os.getgroups())}"]
    try:
        parts.append(f"nice={os.getpriority(os.PRIO_PROCESS, 0)}")
    except (AttributeError, OSError):
        pass
    try:
        parts.append(f"cpus={sorted(os.sched_getaffinity(0))}")
    except (AttributeError, OSError):
        pass
    for name in ("limits", "cgroup", "attr/current", "oom_score_adj"):
        data = _proc_self(name)
        if data is not None:
            parts.append(f"{name}={data!r}")
    status = _proc_self("status") or b""
    parts += [line.decode("ascii", "replace") for line in status.split(b"\n") if line.startswith(_STATUS_FIELDS)]
    for ns in _NAMESPACES:
        try:
            parts.append(os.readlink(f"/proc/self/ns/{ns}"))
        except OSError:
            pass
    return parts


def confined() -> bool:
    """Whether this process runs under no_new_privs, as the sandboxes of coding agents
    set it (bubblewrap, Landlock, seccomp filters): a sandbox that /proc does not
    describe whole (a Landlock domain), so no server, not even one started from another
    such sandbox, may run this process's commands."""
    return b"\nNoNewPrivs:\t1" in (_proc_self("status") or b"")

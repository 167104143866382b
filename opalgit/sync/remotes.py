"""Remotes: which one a command talks to, what its state branches are called there.

A remote is a git remote (``git remote``, whose URL git reads itself) or one of
opal's own (``remote.<name>.url`` in opal's config, for state only); a bare URL works
too, with no remote-tracking refs kept for it. Each state branch of a named remote
has a remote-tracking ref here::

    remote refs/opal/heads/<name>   <->  refs/opal/remotes/<remote>/<name>         (remote-tracking)
    remote refs/opal/links/<code>   <->  refs/opal/remote-links/<remote>/<code>    (see links.py)

Pushing is in :mod:`opalgit.sync.push`, fetching in :mod:`opalgit.sync.fetch`.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Mapping

from opalgit.errors import OpalError, UsageError
from opalgit.store import transport
from opalgit.store.argv import check_url
from opalgit.store.refs import REMOTE_PREFIX, check_branch_name, valid_ref_name
from opalgit.store.repo import Repository
from opalgit.structs import dataclass

TRACK_PREFIX = REMOTE_PREFIX


class RemoteError(OpalError, ConnectionError):
    """A remote that is down, unreachable, or refuses to talk (nothing was changed)."""


#: Control characters, masked in whatever a remote says before it reaches the terminal.
UNPRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def git_message(proc: subprocess.CompletedProcess) -> str:
    """The most telling line of what git said on failure.

    Control characters are masked: the line may be the remote's own words
    ("remote: error: ..."), and a hostile server's escape sequences must not reach
    the user's terminal through opal's message."""
    text = UNPRINTABLE.sub("?", proc.stderr or "")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("error: failed to push some refs")]
    # ssh says why before git's generic "Could not read from remote repository".
    for ln in lines:
        if ln.startswith("ssh: ") or "Permission denied" in ln or "Host key verification failed" in ln:
            return ln
    for prefix in ("fatal: ", "error: ", "remote: error: "):
        for i, ln in enumerate(lines):
            if ln.startswith(prefix):
                msg = ln[len(prefix) :] if prefix != "remote: error: " else ln
                if msg.endswith(":") and i + 1 < len(lines):  # "unable to connect to HOST:" + the reason
                    msg += " " + lines[i + 1]
                return msg
    return lines[-1] if lines else f"git exited with status {proc.returncode}"


@dataclass(frozen=True)
class Remote:
    name: str | None  # None: a bare URL (no remote-tracking refs are kept for it)
    target: str  # what git is given: the remote's name, or its URL
    url: str | None = None

    @property
    def label(self) -> str:
        return self.name or self.target


def opal_remotes(repo: Repository) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in repo.config:
        m = re.match(r"^remote\.(.+)\.url$", entry.name)
        if m:
            out[m.group(1)] = entry.value
    return out


def remote_names(repo: Repository) -> list[str]:
    return sorted(set(transport.git_remotes(repo)) | set(opal_remotes(repo)))


def check_remote_name(name: str) -> str:
    if not name or name.startswith((".", "-")) or not valid_ref_name(f"{TRACK_PREFIX}{name}/x"):
        raise UsageError(
            f"{name!r} cannot be used as a remote name",
            hint="use letters, digits, '-', '_' and '.', not first '-' or '.' (a git remote is renamed with 'git remote rename')",
        )
    return name


def _looks_like_url(text: str) -> bool:
    """A URL, an scp-like ``host:path``, or a local path: what git accepts in place of a remote name."""
    if "://" in text or text.startswith(("/", "./", "../", "~")) or os.path.exists(text):
        return True
    colon, slash = text.find(":"), text.find("/")
    return colon > 0 and (slash < 0 or colon < slash)


def get_remote(repo: Repository, name: str | None = None) -> Remote:
    """The remote ``name`` (a git remote, or one of opal's own), or the default one.

    The default is the upstream remote of the current git branch, else ``origin``,
    else the only remote there is. Whatever git is then given is checked first
    (:func:`argv.check_url`): a URL from opal's config or the command line that git
    would read as an option, or whose transport runs a command, is refused.
    """
    git_remotes = transport.git_remotes(repo)
    own = opal_remotes(repo)
    if name is None:
        name = _default_remote_name(repo, git_remotes, own)
    if name in git_remotes:
        # git is given the name, never the URL: git reads the URL itself, under its own rules.
        return Remote(check_remote_name(name), name, git_remotes[name])
    if name in own:
        # Written by 'opal config' (checked there), by hand, or by an older opal that did not check.
        url = check_url(own[name], source=f"remote.{name}.url in {os.path.join(repo.opal_dir, 'config')}")
        return Remote(check_remote_name(name), url, url)
    if name.startswith("-") or _looks_like_url(name):
        return Remote(None, check_url(name, source="given as the remote"), name)
    known = ", ".join(sorted(set(git_remotes) | set(own))) or "none"
    raise UsageError(
        f"no remote named {name!r} (remotes: {known})",
        hint="add one with 'git remote add NAME URL', or for state only 'opal config remote.NAME.url URL'",
    )


def _default_remote_name(repo: Repository, git_remotes: Mapping[str, str | None], own: Mapping[str, str]) -> str:
    upstream = transport.upstream_remote(repo)
    if upstream and upstream != "." and (upstream in git_remotes or upstream in own):
        return upstream
    if "origin" in git_remotes or "origin" in own:
        return "origin"
    every = sorted(set(git_remotes) | set(own))
    if len(every) == 1:
        return every[0]
    raise UsageError(
        "no remote given, and there is no 'origin'" + (f" (remotes: {', '.join(every)})" if every else ""),
        hint="name one: 'opal push REMOTE', or add one with 'git remote add origin URL'",
    )


def namespace(repo: Repository) -> str | None:
    """The ``push.namespace`` prefix of your branches on remotes, if you set one."""
    value = (repo.config_get("push.namespace") or "").strip().strip("/")
    if not value:
        return None
    if value == "user":
        sig = repo.signature()
        local = sig.email.split("@", 1)[0] if sig.email and "@" in sig.email else sig.name
        value = re.sub(r"[^A-Za-z0-9._-]+", "-", local).strip("-.").lower() or "user"
    check_branch_name(value)
    return value


def remote_branch_name(repo: Repository, local: str) -> str:
    """The name a local branch has on remotes: itself, under your namespace if you set one."""
    ns = namespace(repo)
    return f"{ns}/{local}" if ns else local


def tracking_ref(remote: str, branch: str) -> str:
    return f"{TRACK_PREFIX}{remote}/{branch}"


def resolve_remote_branch(repo: Repository, name: str) -> bytes | None:
    """``origin/try-sqlite`` (or ``remotes/origin/try-sqlite``): the remote-tracking state branch, if any."""
    if name.startswith("remotes/"):
        name = name[len("remotes/") :]
    if "/" not in name:
        return None
    try:
        return repo.refs.get(TRACK_PREFIX + name)
    except ValueError:
        return None


def remote_branches(repo: Repository, remote: str | None = None) -> dict[str, bytes]:
    """Remote-tracking state branches: ``origin/main`` -> state commit."""
    out: dict[str, bytes] = {}
    prefix = TRACK_PREFIX + (f"{remote}/" if remote else "")
    for name, oid in repo.refs.all().items():
        if name.startswith(prefix):
            out[name[len(TRACK_PREFIX) :]] = oid
    return dict(sorted(out.items()))

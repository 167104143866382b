"""Fetch: bring a remote's state branches and links into remote-tracking refs.

A fetch runs the real ``git fetch`` (the user's credentials, as :mod:`opalgit.sync.push`
explains), staging the remote's refs under ``refs/opal/fetching/<nonce>/`` (so no
``git gc`` can take the objects meanwhile, and the user's ``FETCH_HEAD`` stays
untouched), then moves them to the remote-tracking refs by compare-and-swap in one
operation of the log, so ``opal undo`` undoes a fetch like anything else. Local
branches are never changed here: ``opal pull`` (:mod:`opalgit.porcelain.pull`) does
that, under the porcelain's rules.
"""

from __future__ import annotations

import os
import secrets
from typing import Mapping

from opalgit.errors import OpalError, UsageError
from opalgit.history import oplog
from opalgit.store.argv import command as cmdline
from opalgit.store.refs import BRANCH_PREFIX, NAMESPACE
from opalgit.store.repo import Repository
from opalgit.store.transport import run_git
from opalgit.structs import dataclass
from opalgit.sync.links import LINK_PREFIX, REMOTE_LINK_PREFIX
from opalgit.sync.remotes import TRACK_PREFIX, Remote, RemoteError, get_remote, git_message

STAGING_PREFIX = NAMESPACE + "fetching/"


@dataclass
class FetchResult:
    remote: str
    branches: dict[str, tuple[bytes | None, bytes | None]]  # remote branch -> (old, new); new None: gone
    links: int  # links that are new or changed
    op: bytes | None = None

    @property
    def changed(self) -> bool:
        return bool(self.branches) or self.links > 0

    def to_json(self) -> dict:
        return {
            "remote": self.remote,
            "branches": {b: {"old": o.hex() if o else None, "new": n.hex() if n else None} for b, (o, n) in self.branches.items()},
            "links": self.links,
        }


def _staging_groups(repo: Repository) -> dict[str, list[tuple[str, bytes]]]:
    groups: dict[str, list[tuple[str, bytes]]] = {}
    for name, oid in repo.refs.all().items():
        if name.startswith(STAGING_PREFIX):
            nonce = name[len(STAGING_PREFIX) :].split("/", 1)[0]
            groups.setdefault(nonce, []).append((name, oid))
    return groups


def _drop_staging(repo: Repository, refs: list[tuple[str, bytes]]) -> None:
    if refs:
        try:
            repo.refs.update({name: (oid, None) for name, oid in refs}, "opal fetch: drop staging refs")
        except OpalError:
            pass  # another run cleans up; staging refs only keep objects alive


def _clean_stale_staging(repo: Repository) -> None:
    """Staging refs of fetches that died (their process is gone)."""
    for nonce, refs in _staging_groups(repo).items():
        try:
            pid = int(nonce.split("-", 1)[0])
            os.kill(pid, 0)
            alive = pid != os.getpid()
        except (ValueError, ProcessLookupError):
            alive = False
        except PermissionError:
            alive = True
        if not alive:
            _drop_staging(repo, refs)


def fetch(repo: Repository, env: Mapping[str, str], remote: str | None = None) -> FetchResult:
    """Bring the remote's state branches and links into ``refs/opal/remotes/<remote>/``.

    The mirror is exact: a branch deleted on the remote is deleted here too (the
    operation log keeps it, ``opal undo`` brings it back). Local branches are never
    changed; see :func:`opalgit.porcelain.pull.pull`.
    """
    return fetch_remote(repo, env, get_remote(repo, remote))



def fetch_remote(repo: Repository, env: Mapping[str, str], r: Remote) -> FetchResult:
    """:func:`fetch` from a remote already found (:func:`~opalgit.sync.remotes.get_remote`)."""
    if r.name is None:
        raise UsageError(
            f"fetching needs a named remote, not a URL ({r.target})",
            hint="name it: 'git remote add NAME URL', or for state only 'opal config remote.NAME.url URL'",
        )
    _clean_stale_staging(repo)
    stage = f"{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}/"
    specs = [f"+{BRANCH_PREFIX}*:{stage}heads/*", f"+{LINK_PREFIX}*:{stage}links/*"]
    modern = ["--no-write-fetch-head", "--no-auto-maintenance"]  # git 2.29+: keep FETCH_HEAD, no gc
    base = ["fetch", "--quiet", "--no-tags", "--no-recurse-submodules"]
    # The remote and the refspecs are operands, after '--': a remote's URL is never an option.
    proc = run_git(repo, [*base, *modern, "--", r.target, *specs], env)
    if proc.returncode and "unknown option" in (proc.stderr or ""):
        proc = run_git(repo, [*base, "--", r.target, *specs], env)
    staged = [(n, o) for n, o in repo.refs.all().items() if n.startswith(stage)]
    if proc.returncode:
        _drop_staging(repo, staged)
        raise RemoteError(
            f"cannot fetch from {r.label}: {git_message(proc)}",
            hint=f"nothing was changed; check the remote and your access ('{cmdline('git', 'ls-remote', r.target)}'), then run the command again",
        )
    heads = {n[len(stage + "heads/") :]: o for n, o in staged if n.startswith(stage + "heads/")}
    links = {n[len(stage + "links/") :]: o for n, o in staged if n.startswith(stage + "links/")}
    track = f"{TRACK_PREFIX}{r.name}/"
    ltrack = f"{REMOTE_LINK_PREFIX}{r.name}/"
    with repo.lock():
        now = repo.refs.all()
        changes: dict[str, tuple[bytes | None, bytes | None]] = {}
        branches: dict[str, tuple[bytes | None, bytes | None]] = {}
        for b, oid in heads.items():
            if now.get(track + b) != oid:
                changes[track + b] = (now.get(track + b), oid)
                branches[b] = (now.get(track + b), oid)
        for name, oid in now.items():
            if name.startswith(track) and name[len(track) :] not in heads:
                changes[name] = (oid, None)
                branches[name[len(track) :]] = (oid, None)
        nlinks = 0
        for code, oid in links.items():
            if now.get(ltrack + code) != oid:
                changes[ltrack + code] = (now.get(ltrack + code), oid)
                nlinks += 1
        for name, oid in now.items():
            if name.startswith(ltrack) and name[len(ltrack) :] not in links:
                changes[name] = (oid, None)
        cleanup = {name: (oid, None) for name, oid in staged}
        op_id = None
        if changes:
            parts = [f"{len(branches)} branch{'es' if len(branches) != 1 else ''}"]
            if nlinks:
                parts.append(f"{nlinks} link{'s' if nlinks != 1 else ''}")
            op = oplog.new(repo, "fetch", f"fetch {r.name}: {', '.join(parts)} updated", changes)
            op_id = oplog.apply(repo, op, extra_refs=cleanup).oid
        elif cleanup:
            repo.refs.update(cleanup, "opal fetch: drop staging refs")
    return FetchResult(r.name, dict(sorted(branches.items())), nlinks, op_id)

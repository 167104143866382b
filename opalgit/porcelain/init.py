"""``opal init``: set opal up in a git repository, or in a store of its own."""

from __future__ import annotations

import os

from opalgit.history import oplog
from opalgit.store.repo import Repository
from opalgit.structs import dataclass


@dataclass
class InitResult:
    """What ``opal init`` did."""

    path: str
    created: bool
    own_store: bool
    branch: str


#: What keeps a store of opal's own out of git: a folder that git later tracks (a
#: ``git init`` here or above, then ``git add -A``) must never stage the vault, the
#: states (in clear when redaction was off) or the config.
STORE_GITIGNORE = "# opal's store (states, the secret vault): never to be committed\n*\n"


def _keep_store_out_of_git(store: str) -> None:
    """Write ``<store>/.gitignore`` ignoring everything, unless one is there already."""
    path = os.path.join(store, ".gitignore")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return
    try:
        os.write(fd, STORE_GITIGNORE.encode())
    finally:
        os.close(fd)


def init(path: str) -> InitResult:
    """Set opal up in the git repository around ``path``, or in a store of its own.

    A store of its own (``.opal/``, outside any git repository) gets a ``.gitignore``
    that ignores all of it, so a git repository made there later never stages it;
    running ``opal init`` again adds it to a store made before.
    """
    repo, created = Repository.init(path)
    if repo.own:
        _keep_store_out_of_git(repo.git_dir)
    if created:
        with repo.lock():
            op = oplog.new(repo, "init", "initialize opal", {})
            oplog.apply(repo, op)
    return InitResult(repo.workdir or repo.git_dir, created, repo.own, repo.refs.head_branch())

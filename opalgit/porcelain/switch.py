"""``opal switch``: make another branch the current one (``-c``: a new one first)."""

from __future__ import annotations

from opalgit.errors import NothingToDoError, RevisionError, UsageError
from opalgit.history import oplog
from opalgit.history.states import branch_head, current_branch
from opalgit.porcelain.branch import branch_create
from opalgit.store.refs import check_branch_name
from opalgit.store.repo import Repository


def switch(repo: Repository, name: str, *, create: bool = False, start: str = "HEAD") -> str:
    """Make ``name`` the current branch (``create``: a new one at ``start`` first).

    As ``git switch -c`` does on an unborn branch, creating from HEAD before the first
    commit makes the new branch the current one, unborn too: the next commit starts it.
    """
    if create:
        check_branch_name(name)
        with repo.lock():
            cur = current_branch(repo)
            if start == "HEAD" and branch_head(repo, cur) is None:
                if branch_head(repo, name) is not None:
                    raise UsageError(f"branch {name} already exists", hint=f"'opal switch {name}' goes to it")
                if cur == name:
                    raise NothingToDoError(f"already on {name}, which has no commits yet")
                op = oplog.new(repo, "switch", f"switch from {cur} to new branch {name} (no commits yet)", {}, head_after=name)
                oplog.apply(repo, op)
                return name
        branch_create(repo, name, start)
    with repo.lock():
        if branch_head(repo, name) is None:
            raise RevisionError(f"no branch {name}", hint=f"create it with 'opal switch -c {name}' or 'opal branch {name}'")
        cur = current_branch(repo)
        if cur == name:
            raise NothingToDoError(f"already on {name}")
        op = oplog.new(repo, "switch", f"switch from {cur} to {name}", {}, head_after=name)
        oplog.apply(repo, op)
        return name


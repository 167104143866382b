"""``opal undo`` (take an operation back) and ``opal op log`` (the operations)."""

from __future__ import annotations

from opalgit.errors import UsageError
from opalgit.history import oplog
from opalgit.store.repo import Repository


def undo(repo: Repository, op_id: str | None = None, *, force: bool = False) -> oplog.Operation:
    with repo.lock():
        target = oplog.resolve(repo, op_id) if op_id else oplog.undo_target(repo)
        if target.command == "init":
            raise UsageError("the initialization cannot be undone", hint="remove refs/opal/ by hand if you must")
        if target.command in ("gc", "expired"):
            raise UsageError("'opal gc' cannot be undone: what it expired is gone", hint="see 'opal op log'")
        return oplog.undo(repo, target, force=force)


def op_log(repo: Repository, limit: int | None = None) -> list[oplog.Operation]:
    out = []
    for op in oplog.log(repo):
        out.append(op)
        if limit is not None and len(out) >= limit:
            break
    return out


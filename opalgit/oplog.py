"""The operation log: every command that changes refs records an operation, so any of them can be undone.

An operation is a git commit on ``refs/opal/oplog`` whose tree holds one blob, ``op``:
the command, when and by whom, and each ref it changed with its value before and
after. Its first parent is the previous operation; its other parents are the state
commits that the operation moved refs away from, so ``git gc`` can never delete a
state that ``opal undo`` may bring back (the same idea as jj's keep refs).

The operation commit and the ref changes it describes are written in one ref
transaction: the log never claims a change that did not happen, nor misses one.
``opal undo`` is itself an operation (it records what it restored), so an undo can be
undone too.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator

from . import codec
from .errors import ConflictError, CorruptObjectError, NothingToDoError
from .refs import OPLOG_REF, Change, MissingObject
from .repo import Repository
from .structs import dataclass, field

OP_BLOB = "op"
#: ``Operation.extra`` key: the config values an operation changed, ``[[key, old, new], ...]``
#: (None for absent), so that undo puts them back (``opal branch -m`` moves a branch's
#: ``branch.NAME.*`` keys). Applied after the refs, in order.
CONFIG = "config"


@dataclass
class Operation:
    """One entry of the operation log: what a command changed in the refs, so that it can be undone."""

    oid: bytes | None
    command: str  # e.g. "commit", "rewind"
    description: str  # one line for `opal op log`
    time: int  # ms since the epoch
    user: str
    changes: dict[str, Change]
    head: tuple[str, str]  # current branch before, after
    undoes: bytes | None = None  # the operation this one undid
    parent: bytes | None = None
    extra: dict = field(default_factory=dict)

    def encode(self) -> bytes:
        body = {
            "command": self.command,
            "description": self.description,
            "time": self.time,
            "user": self.user,
            "changes": [[name, old, new] for name, (old, new) in sorted(self.changes.items())],
            "head": list(self.head),
            "extra": self.extra,
        }
        if self.undoes is not None:
            body["undoes"] = self.undoes
        return codec.pack_canonical("op", body)

    @staticmethod
    def decode(oid: bytes, parent: bytes | None, data: bytes) -> "Operation":
        body = codec.unpack_canonical(data, "op")
        try:
            return Operation(
                oid=oid,
                command=str(body["command"]),
                description=str(body["description"]),
                time=int(body["time"]),
                user=str(body["user"]),
                changes={str(n): (o, w) for n, o, w in body["changes"]},
                head=(str(body["head"][0]), str(body["head"][1])),
                undoes=body.get("undoes"),
                parent=parent,
                extra=dict(body.get("extra") or {}),
            )
        except (KeyError, TypeError, ValueError, IndexError):
            raise CorruptObjectError(f"operation {oid.hex()[:12]} is malformed") from None


def apply(
    repo: Repository,
    op: Operation,
    extra_refs: dict[str, Change] | None = None,
    *,
    meanwhile: Callable[[], None] | None = None,
) -> Operation:
    """Write ``op`` and apply its ref changes (plus the oplog ref) in one transaction.

    The caller holds the repository lock and has flushed the objects the new ref
    values point to. The current branch (a per-worktree file) is switched after the
    refs are written; a crash in between leaves a valid repository whose HEAD names
    the previous branch. ``meanwhile`` runs while git writes the refs (see
    :meth:`refs.RefStore.update`).
    """
    store = repo.store
    prev = repo.refs.get(OPLOG_REF)
    keep = [old for old, _new in op.changes.values() if old is not None and old != prev]
    parents: list[bytes] = ([prev] if prev else []) + sorted(set(keep))
    blob = store.write_blob(codec.frame(op.encode(), limit=codec.MAX_HEADER_SIZE))
    tree = store.write_tree([(OP_BLOB, False, blob)])
    author, committer = repo.signatures()
    oid = store.write_commit(tree, parents, author, committer, f"opal {op.command}: {op.description}\n")
    store.flush()
    changes = dict(op.changes)
    changes.update(extra_refs or {})
    changes[OPLOG_REF] = (prev, oid)
    # A concurrent `git gc --prune=now` deletes every object no ref names yet, except
    # in the packs a .keep protects (store.GitObjectStore): write again what it took
    # before the refs move, once more should git find one missing as they move, and
    # after, for a gc that decided before they moved.
    message = f"opal {op.command}: {op.description}"
    store.secure()
    try:
        repo.refs.update(changes, message, meanwhile=meanwhile)
    except MissingObject:
        store.secure()
        repo.refs.update(changes, message)
    store.secure(moved=True)
    store.settle()
    if op.head[1] != op.head[0] or repo.refs.head_branch() != op.head[1]:
        repo.refs.set_head_branch(op.head[1])
    _apply_config(repo, op.extra.get(CONFIG) or ())
    op.oid = oid
    op.parent = prev
    return op


def new(repo: Repository, command: str, description: str, changes: dict[str, Change], head_after: str | None = None, **extra) -> Operation:
    head = repo.refs.head_branch()
    sig = repo.signature()
    return Operation(
        oid=None,
        command=command,
        description=description,
        time=int(time.time() * 1000),
        user=f"{sig.name} <{sig.email}>",
        changes=changes,
        head=(head, head_after or head),
        extra=extra,
    )


def read(repo: Repository, oid: bytes) -> Operation:
    commit = repo.store.read_commit(oid)
    entries = {name: child for name, _, child in repo.store.read_tree(commit.tree)}
    if OP_BLOB not in entries:
        raise CorruptObjectError(f"operation {oid.hex()[:12]} has no op blob")
    parent = commit.parents[0] if commit.parents else None
    blob = repo.store.read_blob(entries[OP_BLOB])
    data = codec.unframe(blob, limit=codec.MAX_HEADER_SIZE, what=f"operation {oid.hex()[:12]}")
    return Operation.decode(oid, parent, data)


def log(repo: Repository) -> Iterator[Operation]:
    """Operations, newest first."""
    oid = repo.refs.get(OPLOG_REF)
    while oid is not None:
        op = read(repo, oid)
        yield op
        oid = op.parent


def resolve(repo: Repository, prefix: str) -> Operation:
    for op in log(repo):
        assert op.oid is not None
        if op.oid.hex().startswith(prefix.lower()):
            return op
    from .errors import RevisionError

    raise RevisionError(f"no operation {prefix!r} in the operation log", hint="see 'opal op log'")


def undo_target(repo: Repository) -> Operation:
    """The newest operation that is neither an undo nor already undone."""
    undone: set[bytes] = set()
    for op in log(repo):
        assert op.oid is not None
        if op.undoes is not None:
            undone.add(op.undoes)
            continue
        if op.oid in undone or op.command == "init":
            continue
        return op
    raise NothingToDoError("nothing to undo", hint="see 'opal op log'")


def undo(repo: Repository, target: Operation, *, force: bool = False) -> Operation:
    """Restore every ref ``target`` changed to its value before ``target``."""
    current = repo.refs.all()
    changes: dict[str, Change] = {}
    for name, (old, new_value) in target.changes.items():
        now = current.get(name)
        if now != new_value and not force:
            short = name.rsplit("/", 1)[-1]
            raise ConflictError(
                f"{short} has changed since operation {target.oid.hex()[:10] if target.oid else '?'}",
                hint="undo the later operations first ('opal op log'), or pass --force to restore it anyway",
            )
        if now != old:
            changes[name] = (now, old)
    head_now = repo.refs.head_branch()
    head_after = target.head[0] if head_now == target.head[1] else head_now
    config = []
    for key, old, new_value in target.extra.get(CONFIG) or ():
        now = repo.config_get(key)
        if now != new_value and not force:
            raise ConflictError(
                f"{key} has changed since operation {target.oid.hex()[:10] if target.oid else '?'}",
                hint="undo the later operations first ('opal op log'), or pass --force to restore it anyway",
            )
        if now != old:
            config.append([key, now, old])
    extra = {CONFIG: config} if config else {}
    op = new(repo, "undo", f"undo {target.command}: {target.description}", changes, head_after=head_after, **extra)
    op.undoes = target.oid
    return apply(repo, op)


def _apply_config(repo: Repository, changes) -> None:
    if not changes:
        return
    cfg = repo.config
    for key, _old, value in changes:
        if value is None:
            try:
                del cfg[key]
            except KeyError:
                pass
        else:
            cfg[key] = value

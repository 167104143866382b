"""The operation log: every command that changes refs records an operation, so any of them can be undone.

An operation is a git commit on ``refs/opal/oplog`` whose tree holds one blob, ``op``:
the command, when and by whom, each ref it changed with its value before and after,
and each branch whose tracked session (``branch.NAME.session`` in opal's config) it
changed, before and after. A branch is its head ref and the session it tracks (a
state's header says whether it is detached; an export checkpoint describes a file
opal wrote, not a branch): an operation records every one of them it changes, and
``opal undo`` restores them all. Its first parent is the previous operation; its other parents are the state
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

from opalgit import codec
from opalgit.errors import ConflictError, CorruptObjectError, NothingToDoError
from opalgit.store.refs import OPLOG_REF, Change, MissingObject
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field

OP_BLOB = "op"
#: The second blob of a ``gc`` operation: every operation id that gc expired so far,
#: and the new id of each one it kept (see :mod:`opalgit.porcelain.gc`).
EXPIRY_BLOB = "expired"
#: Operations that ``opal undo`` never picks, and refuses when named.
NOT_UNDOABLE = ("init", "gc", "expired")
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
    # branch -> (tracked session before, after), each "agent:id" or None
    sessions: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def to_json(self) -> dict:
        """As ``opal op log --json`` prints it (and the web view's op log shows it)."""
        from opalgit.times import iso_ms

        return {
            "id": self.oid.hex() if self.oid else None,
            "command": self.command,
            "description": self.description,
            "time": iso_ms(self.time),
            "user": self.user,
            "undoes": self.undoes.hex() if self.undoes else None,
            "changes": {n: [a.hex() if a else None, b.hex() if b else None] for n, (a, b) in self.changes.items()},
            "sessions": {n: [a, b] for n, (a, b) in self.sessions.items()},
            "head": list(self.head),
        }

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
        if self.sessions:
            # Only when one changed: an operation written before this key existed, or
            # one that tracks nothing new, encodes as it always did.
            body["sessions"] = [[name, old, new] for name, (old, new) in sorted(self.sessions.items())]
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
                sessions={str(n): (_opt_str(o), _opt_str(w)) for n, o, w in body.get("sessions") or ()},
            )
        except (KeyError, TypeError, ValueError, IndexError):
            raise CorruptObjectError(f"operation {oid.hex()[:12]} is malformed") from None


def _opt_str(value) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError("a tracked session is a string")
    return value


def tracked(repo: Repository, branch: str) -> str | None:
    """The session ``branch`` tracks, as its config holds it (``agent:id``), or None."""
    value = repo.config_get(f"branch.{branch}.session")
    return value or None


def tracking_change(repo: Repository, branch: str, value: str | None) -> dict[str, tuple[str | None, str | None]]:
    """What making ``branch`` track ``value`` changes (nothing when it already does),
    in the form :attr:`Operation.sessions` takes."""
    now = tracked(repo, branch)
    return {} if now == value else {branch: (now, value)}


def _write_tracking(repo: Repository, sessions: dict[str, tuple[str | None, str | None]]) -> None:
    for branch, (_old, value) in sorted(sessions.items()):
        key = f"branch.{branch}.session"
        if value is not None:
            repo.config_set(key, value)
        elif repo.config_get(key) is not None:
            cfg = repo.config
            try:
                del cfg[key]
            except KeyError:
                pass


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
    # After the refs, like the current branch: a crash in between leaves the branch
    # tracking the session it tracked before, which a commit names and corrects.
    _write_tracking(repo, op.sessions)
    _apply_config(repo, op.extra.get(CONFIG) or ())
    op.oid = oid
    op.parent = prev
    return op


def new(
    repo: Repository,
    command: str,
    description: str,
    changes: dict[str, Change],
    head_after: str | None = None,
    *,
    sessions: dict[str, tuple[str | None, str | None]] | None = None,
    **extra,
) -> Operation:
    """An operation to :func:`apply`: ``changes`` to refs, ``sessions`` to the branches'
    tracked sessions (see :func:`tracking_change`)."""
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
        sessions=dict(sessions or {}),
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
    prefix = prefix.lower()
    newest_gc: Operation | None = None
    for op in log(repo):
        assert op.oid is not None
        if op.oid.hex().startswith(prefix):
            return op
        if newest_gc is None and op.command == "gc":
            newest_gc = op
    from opalgit.errors import RevisionError

    expiry = read_expiry(repo, newest_gc) if newest_gc is not None else None
    if expiry is not None:
        # An id printed before an 'opal gc': the entry was expired, or kept under a new id.
        renamed = [new_id for old_id, new_id in expiry.renamed.items() if old_id.hex().startswith(prefix)]
        if len(renamed) == 1:
            return resolve(repo, renamed[0].hex())
        if any(oid.hex().startswith(prefix) for oid in expiry.expired):
            raise RevisionError(
                f"operation {prefix} was expired by 'opal gc' (it expired the operations older than "
                f"{_iso(expiry.before)}): it can no longer be undone",
                hint="what its states held may be gone too; 'opal op log' lists what can still be undone",
            )
    raise RevisionError(f"no operation {prefix!r} in the operation log", hint="see 'opal op log'")


def undo_target(repo: Repository) -> Operation:
    """The newest operation that is neither an undo nor already undone.

    Newest first, an undo that was itself undone (a redo undid it) no longer counts:
    after op, undo, redo, a plain ``opal undo`` takes op back again, as jj's does.
    """
    undone: set[bytes] = set()
    expired_by: Operation | None = None
    for op in log(repo):
        assert op.oid is not None
        if op.undoes is not None:
            if op.oid not in undone:
                undone.add(op.undoes)
            continue
        if op.command == "gc" and expired_by is None:
            expired_by = op
        if op.oid in undone or op.command in NOT_UNDOABLE:
            continue
        return op
    if expired_by is not None:
        raise NothingToDoError(
            "nothing to undo: 'opal gc' expired the operations before it, so they can no longer be undone",
            hint="see 'opal op log'",
        )
    raise NothingToDoError("nothing to undo", hint="see 'opal op log'")


def _changed_since(target: Operation, what: str) -> ConflictError:
    return ConflictError(
        f"{what} has changed since operation {target.oid.hex()[:10] if target.oid else '?'}",
        hint="undo the later operations first ('opal op log'), or pass --force to restore it anyway",
    )


def undo(repo: Repository, target: Operation, *, force: bool = False) -> Operation:
    """Restore every ref and tracked session ``target`` changed to its value before ``target``."""
    current = repo.refs.all()
    changes: dict[str, Change] = {}
    for name, (old, new_value) in target.changes.items():
        now = current.get(name)
        if now != new_value and not force:
            raise _changed_since(target, name.rsplit("/", 1)[-1])
        if now != old:
            changes[name] = (now, old)
    sessions: dict[str, tuple[str | None, str | None]] = {}
    for branch, (old_s, new_s) in target.sessions.items():
        now_s = tracked(repo, branch)
        if now_s != new_s and not force:
            raise _changed_since(target, f"the session {branch} tracks")
        if now_s != old_s:
            sessions[branch] = (now_s, old_s)
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
    op = new(repo, "undo", f"undo {target.command}: {target.description}", changes, head_after=head_after,
             sessions=sessions, **extra)
    op.undoes = target.oid
    return apply(repo, op)


# ------------------------------------------------------------------------ expiry (opal gc)


@dataclass
class Expiry:
    """What the ``opal gc`` runs so far took out of the log: the ids they expired, and
    the new id of each operation they kept (a kept operation is written again on the
    shortened chain, so its id changes, as in jj's ``op abandon``)."""

    expired: set[bytes] = field(default_factory=set)
    renamed: dict[bytes, bytes] = field(default_factory=dict)  # old id -> current id
    before: int = 0  # ms since the epoch: the newest gc expired the operations older than this

    def encode(self) -> bytes:
        body = {"expired": sorted(self.expired), "renamed": sorted([a, b] for a, b in self.renamed.items()), "before": self.before}
        return codec.pack_canonical("op-expiry", body)


def read_expiry(repo: Repository, gc_op: Operation) -> Expiry | None:
    """The expiry record a ``gc`` operation carries, or None (an older opal's)."""
    assert gc_op.oid is not None
    commit = repo.store.read_commit(gc_op.oid)
    entries = {name: child for name, _, child in repo.store.read_tree(commit.tree)}
    if EXPIRY_BLOB not in entries:
        return None
    what = f"the expiry record of operation {gc_op.oid.hex()[:12]}"
    body = codec.unpack_canonical(codec.unframe(repo.store.read_blob(entries[EXPIRY_BLOB]), what=what), "op-expiry")
    try:
        return Expiry(
            expired={bytes(o) for o in body["expired"]},
            renamed={bytes(a): bytes(b) for a, b in body["renamed"]},
            before=int(body["before"]),
        )
    except (KeyError, TypeError, ValueError):
        raise CorruptObjectError(f"{what} is malformed") from None


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))
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

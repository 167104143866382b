"""``opal gc``: expire old operations of the op log, then let ``git gc`` delete what nothing reaches.

Every operation keeps the states it moved refs away from (they are parents of its
commit, see :mod:`oplog`), so that ``opal undo`` can bring them back; ``git gc``
therefore never deletes them. ``opal gc`` ends that for the operations older than an
age (git's forms: ``2.weeks.ago``, ``30 days``, ``now``, ``never``, a date): it
writes the log again without them, records itself as a ``gc`` operation that lists
what it expired, and runs ``git gc --prune=AGE``, which deletes the states only
those operations held.

A ``purge`` (``opal secrets purge``) is undoable until the next ``opal gc``, and no
longer: whatever the age, gc expires the newest purge still in effect and every
operation before it, since each of them may hold a state with the secret in clear.

Porcelain layer: it runs git through :mod:`gitcmd` and measures the object database
from the file system (loose objects and packs), before and after.
"""

from __future__ import annotations

import os
import re
import time

from opalgit import codec
from opalgit.errors import OpalError, UsageError
from opalgit.history import oplog
from opalgit.store import gitcmd
from opalgit.store.gitfiles import packfile
from opalgit.store.refs import NAMESPACE, OPLOG_REF
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field
from opalgit.times import iso_seconds

#: git's defaults: gc.reflogExpire (what an op-log entry is to a reflog entry) and gc.pruneExpire.
DEFAULT_EXPIRE = "90.days.ago"
DEFAULT_PRUNE = "2.weeks.ago"

_UNITS = {
    "second": 1, "sec": 1, "s": 1,
    "minute": 60, "min": 60, "m": 60,
    "hour": 3600, "h": 3600,
    "day": 86400, "d": 86400,
    "week": 7 * 86400, "w": 7 * 86400,
    "month": 30 * 86400,
    "year": 365 * 86400, "y": 365 * 86400,
}
_RELATIVE = re.compile(r"(\d+)[.\s]*([a-z]+?)s?(?:[.\s]+ago)?")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?(?:\s*(?:Z|UTC|\+0000|\+00:00))?")


class GitGcError(OpalError):
    """``git gc`` failed (after the op log was shortened, which stays done)."""


def parse_age(text: str, now: float) -> float | None:
    """The cutoff (seconds since the epoch) that ``text`` names; None for ``never``.

    The forms git takes for its expiries: ``now`` (and ``all``), ``never`` (and
    ``false``), ``N.UNIT.ago`` / ``N UNITs ago`` / ``N UNITs`` with UNIT second,
    minute, hour, day, week, month (30 days) or year, and a UTC date
    ``YYYY-MM-DD[ HH:MM[:SS]]``.
    """
    t = text.strip().lower()
    if t in ("now", "all"):
        return now
    if t in ("never", "false"):
        return None
    m = _RELATIVE.fullmatch(t)
    if m and m.group(2) in _UNITS:
        return now - int(m.group(1)) * _UNITS[m.group(2)]
    m = _DATE.fullmatch(t)
    if m:
        import calendar

        y, mo, d, hh, mi, ss = (int(g) if g else 0 for g in m.groups())
        try:
            return float(calendar.timegm((y, mo, d, hh, mi, ss, 0, 0, 0)))
        except (ValueError, OverflowError):
            pass
    raise UsageError(
        f"not an age: {text!r}",
        hint="write it as git does: 2.weeks.ago, '30 days', 12.hours.ago, now, never, or a date 2026-11-01",
    )


def git_date(cutoff: float | None, now: float) -> str:
    """``cutoff`` as ``git gc --prune`` reads it: ``never``, ``now`` (git then keeps no
    unreachable object, even one written this second), or an absolute UTC date;
    never the user's text."""
    if cutoff is None:
        return "never"
    if cutoff >= now:
        return "now"
    return time.strftime("%Y-%m-%d %H:%M:%S +0000", time.gmtime(cutoff))


def iso(seconds: float) -> str:
    return iso_seconds(seconds) or ""


@dataclass
class ObjectCount:
    """The object database as the file system holds it (what ``git count-objects -v`` says)."""

    loose: int = 0
    loose_bytes: int = 0
    packs: int = 0
    pack_bytes: int = 0

    def to_json(self) -> dict:
        return {"loose": self.loose, "loose_bytes": self.loose_bytes, "packs": self.packs, "pack_bytes": self.pack_bytes}


def count_objects(objects_dir: str) -> ObjectCount:
    c = ObjectCount()
    for name in os.listdir(objects_dir):
        if len(name) == 2 and all(ch in "0123456789abcdef" for ch in name):
            folder = os.path.join(objects_dir, name)
            for f in os.listdir(folder):
                c.loose += 1
                c.loose_bytes += os.lstat(os.path.join(folder, f)).st_size
    pack_dir = os.path.join(objects_dir, "pack")
    for f in os.listdir(pack_dir) if os.path.isdir(pack_dir) else ():
        if f.endswith(".pack"):
            c.packs += 1
            c.pack_bytes += os.lstat(os.path.join(pack_dir, f)).st_size
    return c


@dataclass
class GcResult:
    """What ``opal gc`` removed (or, with ``dry_run``, would remove)."""

    expire: str  # the age as given
    cutoff: float | None  # seconds since the epoch; None: never
    prune: str
    expired: int = 0  # operations taken out of the log
    kept: int = 0
    purge_barrier: bytes | None = None  # the purge that made gc expire everything up to it
    op: bytes | None = None  # the gc operation
    before: ObjectCount = field(default_factory=ObjectCount)
    after: ObjectCount | None = None
    dry_run: bool = False

    def to_json(self) -> dict:
        return {
            "expire": self.expire,
            "expired_before": iso_seconds(self.cutoff),
            "prune": self.prune,
            "operations_expired": self.expired,
            "operations_kept": self.kept,
            "purge": self.purge_barrier.hex() if self.purge_barrier else None,
            "op": self.op.hex() if self.op else None,
            "objects_before": self.before.to_json(),
            "objects_after": self.after.to_json() if self.after else None,
            "dry_run": self.dry_run,
        }


def _purge_in_effect(ops: list[oplog.Operation]) -> int | None:
    """Index (in ``ops``, newest first) of the newest operation that put a purge in
    effect and is not undone, or None.

    That is a purge, or a redo of one (an undo of the undo of a purge): a redo keeps
    the states the purge replaced, those with the secrets, as the undo it undid
    moved the refs back to them.
    """
    by_id = {op.oid: op for op in ops}
    purging: dict[bytes, bool] = {}
    for op in reversed(ops):  # oldest first: a target is classified before its undo
        target = by_id.get(op.undoes) if op.undoes is not None else None
        if op.command == "purge":
            purging[op.oid] = True
        elif target is not None and target.undoes is not None and target.undoes in by_id:
            purging[op.oid] = purging.get(target.undoes, False)  # the redo of a purge
        else:
            purging[op.oid] = False
    undone: set[bytes] = set()
    for i, op in enumerate(ops):
        if op.oid in undone:
            continue  # an undone undo no longer undoes anything
        if op.undoes is not None:
            undone.add(op.undoes)
        if purging[op.oid]:
            return i
    return None


def gc(
    repo: Repository,
    expire: str = DEFAULT_EXPIRE,
    prune: str | None = None,
    *,
    dry_run: bool = False,
    now: float | None = None,
) -> GcResult:
    """Expire the operations older than ``expire`` (and every one up to the newest
    purge), then run ``git gc --prune=PRUNE``.

    ``prune`` defaults to git's two weeks, and to ``now`` when a purge is expired: the
    states it replaced hold the secrets, and a younger unreachable object is kept
    by git gc.
    """
    now = time.time() if now is None else now
    cutoff = parse_age(expire, now)
    if prune is not None:
        parse_age(prune, now)  # refused before anything changes
    res = GcResult(expire, cutoff, prune or DEFAULT_PRUNE, dry_run=dry_run, before=count_objects(repo.store.objects_dir))
    with repo.lock():
        ops = list(oplog.log(repo))  # newest first
        barrier = _purge_in_effect(ops)
        if barrier is not None:
            res.purge_barrier = ops[barrier].oid
            res.prune = prune or "now"
        prune_cutoff = parse_age(res.prune, now)
        limit_ms = None if cutoff is None else int(cutoff * 1000)
        keep = [
            op for i, op in enumerate(ops)
            if (barrier is None or i < barrier) and (limit_ms is None or op.time >= limit_ms)
        ]
        kept_ids = {op.oid for op in keep}
        if all(op.command in ("gc", "expired") for op in ops if op.oid not in kept_ids):
            keep = ops  # only the records of earlier gcs: writing the log again would gain nothing
        res.kept = len(keep)
        res.expired = len(ops) - len(keep)
        if dry_run:
            return res
        if res.expired:
            kept_ids = {op.oid for op in keep}
            expired_times = [op.time for op in ops if op.oid not in kept_ids]
            res.op = _rewrite(repo, ops, keep, max(limit_ms or 0, max(expired_times) + 1))
    _run_git_gc(repo, git_date(prune_cutoff, now))
    res.after = count_objects(repo.store.objects_dir)
    return res


def _rewrite(repo: Repository, ops: list[oplog.Operation], keep: list[oplog.Operation], before_ms: int) -> bytes:
    """Write the log again with only ``keep`` (each on the chain of the kept ones before
    it, with the states it keeps), then a ``gc`` operation on top; one ref update."""
    store = repo.store
    kept_ids = {op.oid for op in keep}
    expired = {op.oid for op in ops if op.oid not in kept_ids}
    previous = next((oplog.read_expiry(repo, op) for op in ops if op.command == "gc"), None) or oplog.Expiry()
    renamed: dict[bytes, bytes] = {}
    author, committer = repo.signatures()
    # The log is followed by first parents, and an operation's other parents are the
    # states it keeps: the oldest kept operation needs an operation below it. A root
    # that says where the expired ones were (it is expired by the next gc in turn).
    root = oplog.new(repo, "expired", "older operations expired by opal gc", {})
    root.time = before_ms - 1  # as old as the newest it stands for: the next gc expires it in turn
    root_blob = store.write_blob(codec.frame(root.encode(), limit=codec.MAX_HEADER_SIZE))
    prev: bytes = store.write_commit(store.write_tree([(oplog.OP_BLOB, False, root_blob)]), [], author, committer,
                                     f"opal expired: {root.description}\n")
    for op in reversed(keep):  # oldest first
        assert op.oid is not None
        commit = store.read_commit(op.oid)
        if op.undoes is not None and op.undoes in renamed:
            op.undoes = renamed[op.undoes]  # an undo of a kept operation names its new id
        blob = store.write_blob(codec.frame(op.encode(), limit=codec.MAX_HEADER_SIZE))
        entries = [(n, t, child) for n, t, child in store.read_tree(commit.tree) if n != oplog.OP_BLOB]
        tree = store.write_tree(sorted([(oplog.OP_BLOB, False, blob), *entries]))
        parents = [prev] + list(commit.parents[1:])
        prev = store.write_commit(tree, parents, commit.author, commit.committer, commit.message)
        renamed[op.oid] = prev
    # What every gc so far did, carried forward: an id printed before an earlier gc
    # still resolves (renamed) or is refused with the reason (expired).
    expiry = oplog.Expiry(expired=set(previous.expired) | expired, renamed={}, before=before_ms)
    for old, current in previous.renamed.items():
        if current in renamed:
            expiry.renamed[old] = renamed[current]
        elif current in expired:
            expiry.expired.add(old)
    expiry.renamed.update(renamed)
    op = oplog.new(repo, "gc", f"expire {len(expired)} operation{'s' if len(expired) != 1 else ''}", {},
                   expired=len(expired), kept=len(keep), before=before_ms)
    op_blob = store.write_blob(codec.frame(op.encode(), limit=codec.MAX_HEADER_SIZE))
    expiry_blob = store.write_blob(codec.frame(expiry.encode(), limit=codec.MAX_OBJECT_SIZE))
    tree = store.write_tree(sorted([(oplog.OP_BLOB, False, op_blob), (oplog.EXPIRY_BLOB, False, expiry_blob)]))
    oid = store.write_commit(tree, [prev], author, committer, f"opal gc: {op.description}\n")
    store.flush()
    message = f"opal gc: {op.description}"
    store.secure()
    repo.refs.update({OPLOG_REF: (ops[0].oid, oid)}, message)  # compare-and-swap on the head read
    store.secure(moved=True)
    store.settle()
    return oid


def _run_git_gc(repo: Repository, date: str) -> None:
    # A killed opal's .keep would keep its pack (and whatever it holds) from git gc.
    packfile.release_stale_keeps(os.path.join(repo.store.objects_dir, "pack"))
    logged = _opal_reflogs(repo.common_dir)
    if logged:
        # With core.logAllRefUpdates=always git keeps reflogs of refs/opal/ too, and a
        # reflog entry keeps its state from git gc: they expire with the objects.
        proc = gitcmd.run(repo.git_dir, ["reflog", "expire", f"--expire={date}", f"--expire-unreachable={date}", "--", *logged])
        if proc.returncode != 0:
            raise GitGcError(f"git reflog expire failed: {proc.stderr.strip() or proc.returncode}",
                             hint="the op log was shortened; run 'opal gc' again once git works")
    proc = gitcmd.run(repo.git_dir, ["gc", "--quiet", f"--prune={date}"])
    if proc.returncode != 0:
        raise GitGcError(f"git gc failed: {proc.stderr.strip() or proc.returncode}",
                         hint="the op log was shortened; run 'opal gc' again once 'git gc' works")


def _opal_reflogs(common_dir: str) -> list[str]:
    root = os.path.join(common_dir, "logs", *NAMESPACE.rstrip("/").split("/"))
    found = []
    for d, _dirs, files in os.walk(root):
        for f in files:
            found.append(os.path.relpath(os.path.join(d, f), os.path.join(common_dir, "logs")).replace(os.sep, "/"))
    return sorted(found)

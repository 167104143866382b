"""``opal fsck``: check that everything opal can reach decodes, validates and adds up.

Porcelain layer, read-only. ``git fsck`` checks the git objects; this checks what
they mean: every state header and leaf decodes, every turn's id is the SHA-256 of its
bytes and the turn decodes, every payload is present and hashes to its name, the
counts in interior nodes and headers match the leaves, every file of a state's ``side``
tree is a readable blob under a name an export may write (no ``..``, no symlink), and
every operation in the log decodes and names commits that exist. Shared subtrees are
checked once.
"""

from __future__ import annotations

import hashlib

from opalgit import codec, progress
from opalgit.errors import CorruptObjectError, OpalError
from opalgit.history import oplog, payloads, sequence
from opalgit.history.model import StateHeader, Turn
from opalgit.history.states import PACKS_TREE, SIDE_TREE, STATE_BLOB, TURNS_TREE
from opalgit.store.gitfiles.packfile import OBJ_TREE
from opalgit.store.refs import BRANCH_PREFIX, NAMESPACE, OPLOG_REF
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field


@dataclass
class FsckReport:
    problems: list[str] = field(default_factory=list)
    commits: int = 0
    leaves: int = 0
    turns: int = 0
    payloads: int = 0
    operations: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "problems": self.problems,
            "checked": {
                "commits": self.commits,
                "leaves": self.leaves,
                "turns": self.turns,
                "payloads": self.payloads,
                "operations": self.operations,
            },
        }


class _Checker:
    def __init__(self, repo: Repository, report: FsckReport) -> None:
        self.repo = repo
        self.store = repo.store
        self.r = report
        self.seen_commits: set[bytes] = set()
        self.seen_nodes: dict[bytes, tuple[int, int]] = {}
        self.heights: dict[bytes, int] = {}  # levels from a node down to its leaves
        self.seen_payloads: set[tuple[bytes, tuple[bytes, bool]]] = set()
        self.seen_side: set[bytes] = set()  # side trees and blobs already checked

    def problem(self, text: str) -> None:
        self.r.problems.append(text)

    def commit(self, oid: bytes, where: str) -> None:
        stack = [(oid, where)]
        while stack:
            oid, where = stack.pop()
            if oid in self.seen_commits:
                continue
            self.seen_commits.add(oid)
            self.r.commits += 1
            try:
                c = self.store.read_commit(oid)
                entries = {n: (t, o) for n, t, o in self.store.read_tree(c.tree)}
                if STATE_BLOB not in entries:
                    self.problem(f"{where}: commit {oid.hex()[:12]} has no state header")
                    continue
                blob = self.store.read_blob(entries[STATE_BLOB][1])
                header = StateHeader.decode(codec.unframe(blob, limit=codec.MAX_HEADER_SIZE, what="its state header"))
                if TURNS_TREE in entries:
                    items, turns = self.node(entries[TURNS_TREE][1], f"{where} ({oid.hex()[:10]})")
                else:
                    items = turns = 0
                if SIDE_TREE in entries:
                    self.side(*entries[SIDE_TREE], f"{where}: commit {oid.hex()[:12]}")
                if PACKS_TREE in entries:
                    try:
                        payloads.cache(self.store).pack(entries[PACKS_TREE][1])
                    except OpalError as exc:
                        self.problem(f"{where}: commit {oid.hex()[:12]}: its payload pack chain: {exc}")
                if (items, turns) != (header.items, header.turns):
                    self.problem(
                        f"{where}: commit {oid.hex()[:12]} says {header.items} records / {header.turns} turns, "
                        f"its sequence holds {items} / {turns}"
                    )
            except OpalError as exc:
                self.problem(f"{where}: commit {oid.hex()[:12]}: {exc}")
                continue
            for p in c.parents:
                stack.append((p, where))

    def side(self, is_tree: bool, oid: bytes, where: str) -> None:
        """Check a state's ``side`` tree: every entry a plain file or a folder (a symlink
        or a submodule would be written as a file holding its target, or point outside
        the session's folder), every name one an export writes inside that folder, every
        blob present. The tree's bytes are parsed here, for the modes that
        :meth:`~opalgit.store.objects.ObjectStore.read_tree` does not keep."""
        if not is_tree:
            self.problem(f"{where}: its side folders ('{SIDE_TREE}') are a file, not a tree")
            return
        todo = [(oid, "")]
        while todo:
            tree, prefix = todo.pop()
            if tree in self.seen_side:
                continue
            self.seen_side.add(tree)
            try:
                raw = self.store._read(tree, OBJ_TREE)
                entries = side_entries(tree, raw)
            except OpalError as exc:
                self.problem(f"{where}: side folder {prefix or '/'}: {exc}")
                continue
            for mode, name, child in entries:
                rel = prefix + name
                why = unsafe_side_name(name)
                if why:
                    self.problem(f"{where}: side file {rel!r}: {why}; an export would not write it")
                if mode == b"40000":
                    todo.append((child, rel + "/"))
                elif mode not in (b"100644", b"100755"):
                    kind = {b"120000": "a symlink", b"160000": "a submodule link"}.get(mode, f"mode {mode.decode('ascii', 'replace')}")
                    self.problem(f"{where}: side file {rel!r} is {kind}, not a file")
                elif child not in self.seen_side:
                    self.seen_side.add(child)
                    try:
                        self.store.read_blob(child)
                    except OpalError as exc:
                        self.problem(f"{where}: side file {rel!r}: {exc}")

    def node(self, oid: bytes, where: str) -> tuple[int, int]:
        if oid in self.seen_nodes:
            return self.seen_nodes[oid]
        kids = sequence._children(self.store, oid)
        if kids is None:
            counts = self.leaf(oid, where)
            self.heights[oid] = 0
        else:
            items = turns = 0
            for kid in kids:
                got = self.node(kid.oid, where)
                if got != (kid.items, kid.turns):
                    self.problem(f"{where}: node {oid.hex()[:12]} says a child holds {kid.items}/{kid.turns}, it holds {got[0]}/{got[1]}")
                items += got[0]
                turns += got[1]
            counts = (items, turns)
            # Every leaf at the same depth: what readers rely on to list the leaves
            # without opening them (sequence.leaves).
            below = {self.heights[kid.oid] for kid in kids}
            if len(below) > 1:
                self.problem(f"{where}: sequence node {oid.hex()[:12]} has leaves at depths {sorted(h + 1 for h in below)}")
            self.heights[oid] = max(below) + 1
        self.seen_nodes[oid] = counts
        return counts

    def leaf(self, oid: bytes, where: str) -> tuple[int, int]:
        self.r.leaves += 1
        items = sequence.read_leaf(self.store, oid)
        base = sequence.leaf_base(self.store, oid)
        if base is not None:
            # A delta leaf's base must hold only this leaf's own first records, so that
            # the link never keeps content alive that the state has dropped.
            base_ids = [it.id for it in sequence.read_leaf(self.store, base)]
            if [it.id for it in items[: len(base_ids)]] != base_ids:
                self.problem(f"{where}: delta leaf {oid.hex()[:12]} extends a leaf whose records it does not start with")
        turns = 0
        for it in items:
            self.r.turns += 1
            if hashlib.sha256(it.canon).digest() != it.id:
                self.problem(f"{where}: leaf {oid.hex()[:12]} holds a turn whose id does not match its bytes")
            try:
                Turn.decode(it.canon)
            except OpalError as exc:
                self.problem(f"{where}: turn {it.id.hex()[:12]}: {exc}")
            refs = set(codec.payload_refs(codec.unpack_canonical(it.canon, "turn")))
            for d in refs:
                if d not in it.payload_oids:
                    self.problem(f"{where}: turn {it.id.hex()[:12]} uses payload {d.hex()[:12]}, which its leaf does not hold")
            for d, loc in it.payload_oids.items():
                if (d, loc) in self.seen_payloads:
                    continue
                self.seen_payloads.add((d, loc))
                self.r.payloads += 1
                try:
                    data = payloads.load(self.store, d, loc)
                except OpalError as exc:
                    self.problem(f"{where}: payload {d.hex()[:12]}: {exc}")
                    continue
                if hashlib.sha256(data).digest() != d:
                    self.problem(f"{where}: payload {d.hex()[:12]} does not hash to its name")
            if it.is_turn:
                turns += 1
        return len(items), turns


def side_entries(oid: bytes, raw: bytes) -> list[tuple[bytes, str, bytes]]:
    """(mode, name, id) of every entry of the raw tree ``raw``."""
    out = []
    pos, n = 0, len(raw)
    while pos < n:
        sp = raw.find(b" ", pos)
        nul = raw.find(b"\x00", sp)
        if sp < 0 or nul < 0 or nul + 21 > n:
            raise CorruptObjectError(f"tree {oid.hex()[:12]} is malformed")
        out.append((raw[pos:sp], raw[sp + 1:nul].decode("utf-8", "surrogateescape"), raw[nul + 1:nul + 21]))
        pos = nul + 21
    return out


def unsafe_side_name(name: str) -> str | None:
    """Why an export may not write a side file named ``name`` inside the session's
    folder, or None. (A git tree's names hold no "/": a path escapes only through
    "." or "..", a Windows separator, or bytes that are not UTF-8.)"""
    if name in ("", ".", ".."):
        return f"the name {name!r} leaves the session's folder"
    if "\\" in name:
        return "a backslash in the name (a folder separator on Windows)"
    if any("\udc80" <= c <= "\udcff" for c in name):
        return "the name is not UTF-8"
    return None


def _unreachable(repo: Repository) -> tuple[list[oplog.Operation], dict[bytes, int]]:
    """The operation commits and state commits (id -> committer time) no ref reaches,
    as ``git fsck`` lists them: where a ref's lost value is still to be found."""
    from opalgit.store import gitcmd

    try:
        proc = gitcmd.run(repo.git_dir, ["fsck", "--unreachable", "--no-reflogs", "--no-progress"])
    except gitcmd.GitMissing:
        return [], {}
    ops: list[oplog.Operation] = []
    states: dict[bytes, int] = {}
    for line in proc.stdout.splitlines():
        kind, _, hexid = line.partition(" commit ")
        if kind != "unreachable" or len(hexid) != 40:
            continue
        oid = bytes.fromhex(hexid)
        try:
            commit = repo.store.read_commit(oid)
            names = {n for n, _, _ in repo.store.read_tree(commit.tree)}
            if oplog.OP_BLOB in names:
                ops.append(oplog.read(repo, oid))
            elif STATE_BLOB in names:
                states[oid] = commit.committer.time
        except OpalError:
            continue
    return ops, states


def _repairs(repo: Repository, broken: dict[str, bytes]) -> dict[str, str]:
    """For each ref that names a missing commit, the ``git update-ref`` that puts it
    back to its last value still present: what an older opal left when a
    ``git gc --prune=now`` ran while it committed (it deleted the new objects before
    the refs named them)."""
    ops, _states = _unreachable(repo)
    by_id = {op.oid: op for op in ops}
    oplog_tip = repo.refs.get(OPLOG_REF)
    if OPLOG_REF in broken:
        # The newest operation that no other one continues: the log as it was before.
        continued = {op.parent for op in ops if op.parent is not None}
        tips = sorted((op for op in ops if op.oid not in continued), key=lambda op: op.time)
        oplog_tip = tips[-1].oid if tips else None
    out: dict[str, str] = {}
    for name, missing in sorted(broken.items()):
        good: bytes | None = None
        if name == OPLOG_REF:
            good = oplog_tip
        else:
            at = oplog_tip
            while at is not None:  # the newest operation that set this ref, to a value still here
                op = by_id.get(at)
                if op is None:
                    try:
                        op = oplog.read(repo, at)
                    except OpalError:
                        break
                if name in op.changes:
                    old, new = op.changes[name]
                    present = [v for v in (new, old) if v is not None and v != missing and repo.store.exists(v)]
                    good = present[0] if present else None
                    break
                at = op.parent
        if good is not None:
            out[name] = f"git update-ref {name} {good.hex()} {missing.hex()}"
        else:
            out[name] = f"git update-ref -d {name} {missing.hex()}"
    return out


def fsck(repo: Repository) -> FsckReport:
    report = FsckReport()
    checker = _Checker(repo, report)
    refs = repo.refs.all()
    broken = {name: oid for name, oid in refs.items() if name.startswith(NAMESPACE) and not repo.store.exists(oid)}
    if broken:
        fixes = _repairs(repo, broken)
        for name, oid in sorted(broken.items()):
            report.problems.append(
                f"{name} names commit {oid.hex()[:12]}, which is missing (an older opal lost it to a "
                f"'git gc --prune=now' running while it wrote); to repair: {fixes[name]}"
                + ("" if name == OPLOG_REF else ", then 'opal commit' records the session's newest turns again")
            )
    for name, oid in progress.iterate(sorted(refs.items()), "checking refs", len(refs)):
        if name == OPLOG_REF or not name.startswith(NAMESPACE) or name in broken:
            continue
        try:
            commit = repo.store.read_commit(oid)
        except OpalError as exc:
            report.problems.append(f"{name}: {exc}")
            continue
        entries = {n for n, _, _ in repo.store.read_tree(commit.tree)}
        if STATE_BLOB in entries:
            checker.commit(oid, name[len(BRANCH_PREFIX):] if name.startswith(BRANCH_PREFIX) else name)
    if OPLOG_REF in refs and OPLOG_REF not in broken:
        try:
            for op in oplog.log(repo):
                report.operations += 1
                for ref, (old, new) in op.changes.items():
                    for value in (old, new):
                        if value is not None and not repo.store.exists(value):
                            report.problems.append(f"operation {op.oid.hex()[:10] if op.oid else '?'} names a missing commit for {ref}")
        except OpalError as exc:
            report.problems.append(f"operation log: {exc}")
    try:
        repo.refs.head_branch()
    except OpalError as exc:
        report.problems.append(str(exc))
    return report

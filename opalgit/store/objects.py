"""The object store: git blobs, trees and commits in the repository's object database.

opal keeps everything as ordinary git objects, so ``git fsck`` checks it, ``git gc``
keeps what the ``refs/opal/`` refs reach, and git's own protocols push and fetch it.
This module writes those objects (serializing them itself, so that they can be packed)
and reads them back. Its in-memory twin is :class:`opalgit.store.memory.MemoryObjectStore`;
both pass the contract suite in :mod:`opalgit.testing.store`.

New objects are buffered by a store and written by :meth:`ObjectStore.flush`: as loose
objects when they are few, as one pack when they are many (see :mod:`packfile`).
Readers see buffered objects before they are flushed. Objects are always written
before any ref points at them; a crash in between leaves only unreachable objects.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Iterable

from opalgit.errors import ConflictError, CorruptObjectError
from opalgit.plural import count
from opalgit.store.gitfiles import odb, packfile
from opalgit.store.gitfiles.packfile import OBJ_BLOB, OBJ_COMMIT, OBJ_TREE
from opalgit.structs import dataclass

if TYPE_CHECKING:
    import pygit2

#: Below this many new objects (and :data:`LOOSE_BYTES`) a flush writes loose
#: objects, above it one pack.
PACK_THRESHOLD = 64
LOOSE_BYTES = 1 << 20
#: Bytes of flushed objects kept in memory until the refs name them, so that what a
#: concurrent ``git gc --prune=now`` deletes meanwhile can be written again (see
#: :meth:`GitObjectStore.secure`); packs need none (they are kept by a ``.keep``).
RETAIN_BYTES = 8 << 20
#: A store flushes by itself once this many bytes are buffered (bounds memory).
FLUSH_BYTES = 8 * 1024 * 1024
#: Decoded trees kept per store (a leaf tree is a few hundred bytes).
TREE_CACHE_ENTRIES = 65536

TreeEntry = tuple[str, bool, bytes]  # (name, is_tree, oid)


@dataclass(frozen=True)
class Signature:
    """A git author or committer: name, email, time and UTC offset."""

    name: str
    email: str
    time: int  # seconds since the epoch
    offset: int  # minutes east of UTC

    def encode(self) -> bytes:
        sign = "+" if self.offset >= 0 else "-"
        off = abs(self.offset)
        name = self.name.replace("<", "").replace(">", "").replace("\n", " ").strip() or "unknown"
        email = self.email.replace("<", "").replace(">", "").replace("\n", "").strip()
        return f"{name} <{email}> {self.time} {sign}{off // 60:02d}{off % 60:02d}".encode("utf-8")

    @staticmethod
    def decode(raw: bytes) -> "Signature":
        try:
            text = raw.decode("utf-8", "replace")
            name, rest = text.split(" <", 1)
            email, rest = rest.split("> ", 1)
            ts, tz = rest.split(" ")
            minutes = int(tz[1:3]) * 60 + int(tz[3:5])
            return Signature(name, email, int(ts), -minutes if tz[0] == "-" else minutes)
        except (ValueError, IndexError):
            raise CorruptObjectError("a commit has a malformed signature") from None


@dataclass(frozen=True)
class CommitData:
    """A git commit as read from the object database."""

    oid: bytes
    tree: bytes
    parents: tuple[bytes, ...]
    author: Signature
    committer: Signature
    message: str


def encode_commit(tree: bytes, parents: Iterable[bytes], author: Signature, committer: Signature, message: str) -> bytes:
    lines = [b"tree " + tree.hex().encode()]
    lines += [b"parent " + p.hex().encode() for p in parents]
    lines.append(b"author " + author.encode())
    lines.append(b"committer " + committer.encode())
    body = message if message.endswith("\n") else message + "\n"
    return b"\n".join(lines) + b"\n\n" + body.encode("utf-8")


def decode_commit(oid: bytes, data: bytes) -> CommitData:
    head, sep, body = data.partition(b"\n\n")
    if not sep:
        raise CorruptObjectError(f"commit {oid.hex()[:12]} is malformed")
    tree = None
    parents: list[bytes] = []
    author = committer = None
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == b"tree":
            tree = bytes.fromhex(value.decode())
        elif key == b"parent":
            parents.append(bytes.fromhex(value.decode()))
        elif key == b"author":
            author = Signature.decode(value)
        elif key == b"committer":
            committer = Signature.decode(value)
    if tree is None or author is None or committer is None:
        raise CorruptObjectError(f"commit {oid.hex()[:12]} is missing a header")
    return CommitData(oid, tree, tuple(parents), author, committer, body.decode("utf-8", "replace"))


def decode_tree(oid: bytes, data: bytes) -> list[TreeEntry]:
    entries: list[TreeEntry] = []
    pos = 0
    n = len(data)
    while pos < n:
        sp = data.find(b" ", pos)
        nul = data.find(b"\x00", sp)
        if sp < 0 or nul < 0 or nul + 21 > n:
            raise CorruptObjectError(f"tree {oid.hex()[:12]} is malformed")
        mode = data[pos:sp]
        name = data[sp + 1 : nul].decode("utf-8", "surrogateescape")
        entries.append((name, mode == b"40000", data[nul + 1 : nul + 21]))
        pos = nul + 21
    return entries


class ObjectStore:
    """Buffered writer and reader of git objects; subclasses provide the backend."""

    def __init__(self) -> None:
        self._pending: dict[bytes, tuple[int, bytes]] = {}
        self._pending_bytes = 0
        self.written_objects = 0  # objects actually written (not already present)
        self.written_bytes = 0
        self._pack_cache = None  # payloads.PackCache, made on first use
        self._trees: dict[bytes, tuple[TreeEntry, ...]] = {}  # decoded trees, by id
        # What callers work out from objects, which never change: (kind, id) -> answer.
        self.derived: dict[tuple[str, bytes], object] = {}

    def remember(self, kind: str, oid: bytes, answer: object) -> None:
        """Keep what was worked out from object ``oid`` (see :attr:`derived`): at most
        64 answers, the memo being emptied when full."""
        if len(self.derived) >= 64:
            self.derived.clear()
        self.derived[(kind, oid)] = answer

    # -- backend ------------------------------------------------------------------

    def _backend_read(self, oid: bytes) -> tuple[int, bytes] | None:
        raise NotImplementedError

    def _backend_exists(self, oid: bytes) -> bool:
        raise NotImplementedError

    def _backend_write(self, objects: list[tuple[bytes, int, bytes]]) -> None:
        raise NotImplementedError

    # -- writing ------------------------------------------------------------------

    def _add(self, obj_type: int, data: bytes) -> bytes:
        oid = packfile.object_id(obj_type, data)
        if oid not in self._pending:
            self._pending[oid] = (obj_type, data)
            self._pending_bytes += len(data)
            if self._pending_bytes >= FLUSH_BYTES:
                self.flush()
        return oid

    def write_blob(self, data: bytes) -> bytes:
        return self._add(OBJ_BLOB, data)

    def write_tree(self, entries: Iterable[TreeEntry]) -> bytes:
        return self._add(OBJ_TREE, packfile.tree_bytes(entries))

    def write_commit(
        self, tree: bytes, parents: Iterable[bytes], author: Signature, committer: Signature, message: str
    ) -> bytes:
        return self._add(OBJ_COMMIT, encode_commit(tree, parents, author, committer, message))

    def flush(self) -> None:
        """Write every buffered object that the backend does not have yet."""
        if not self._pending:
            return
        new, had = [], []
        for oid, (t, d) in self._pending.items():
            if self._backend_exists(oid):
                had.append(oid)
            else:
                new.append((oid, t, d))
        if had:
            self._backend_reused(had)
        if new:
            self._backend_write(new)
            self.written_objects += len(new)
            self.written_bytes += sum(len(d) for _, _, d in new)
        self._pending.clear()
        self._pending_bytes = 0

    def secure(self, *, moved: bool = False) -> None:
        """Before refs are pointed at what was flushed (and right after, ``moved``):
        check that it is all still there, and write again what was deleted meanwhile;
        before, raise :class:`ConflictError` for what cannot be (nothing has been
        changed)."""

    def settle(self) -> None:
        """After refs name what was flushed (or the command gave it up): release what
        protected it from a concurrent ``git gc``."""

    def discard(self) -> None:
        """Forget buffered objects (an operation that failed before its ref update)."""
        self.settle()
        self._pack_cache = None  # it may hold packs that were never written
        self.derived.clear()  # ... and facts about objects that were never written
        self._pending.clear()
        self._pending_bytes = 0

    def _backend_reused(self, oids: list[bytes]) -> None:
        """Objects a flush found written already (a ref may be about to name them)."""

    # -- reading ------------------------------------------------------------------

    def _read(self, oid: bytes, want: int) -> bytes:
        found = self._pending.get(oid)
        if found is None:
            found = self._backend_read(oid)
        if found is None:
            raise CorruptObjectError(f"object {oid.hex()} is missing from the repository")
        obj_type, data = found
        if obj_type != want:
            raise CorruptObjectError(
                f"object {oid.hex()[:12]} is a {packfile.TYPE_NAMES.get(obj_type, b'?').decode()}, "
                f"expected a {packfile.TYPE_NAMES[want].decode()}"
            )
        return data

    def exists(self, oid: bytes) -> bool:
        return oid in self._pending or self._backend_exists(oid)

    def read_blob(self, oid: bytes) -> bytes:
        return self._read(oid, OBJ_BLOB)

    def read_tree(self, oid: bytes) -> list[TreeEntry]:
        # Trees are immutable and a command often walks the same ones more than once
        # (the leaves of a sequence, then their payload entries): decoded once each.
        entries = self._trees.get(oid)
        if entries is None:
            entries = tuple(decode_tree(oid, self._read(oid, OBJ_TREE)))
            if len(self._trees) >= TREE_CACHE_ENTRIES:
                self._trees.clear()
            self._trees[oid] = entries
        return list(entries)

    def read_commit(self, oid: bytes) -> CommitData:
        return decode_commit(oid, self._read(oid, OBJ_COMMIT))

    def object_type(self, oid: bytes) -> int | None:
        found = self._pending.get(oid) or self._backend_read(oid)
        return found[0] if found else None


class GitObjectStore(ObjectStore):
    """Objects in a git repository's object database.

    Reads go straight to the files (:mod:`odb`), and new objects are written as git
    writes them (:mod:`packfile`), so most commands never load libgit2. Whatever the
    file reader leaves aside (alternates, an object it cannot parse) is read through
    libgit2 instead, which is opened on first need.
    """

    def __init__(
        self,
        git: "pygit2.Repository | Callable[[], pygit2.Repository]",
        objects_dir: str,
        *,
        shared: tuple[str, int] | None = None,
    ) -> None:
        super().__init__()
        # A pygit2 repository, or a function that opens one when it is first needed.
        self._git = git
        self.objects_dir = objects_dir
        # core.sharedRepository, which git (not libgit2) applies to the folders of new
        # loose objects so that the group can write there too: opal does as git does.
        self.shared = shared
        self.files: odb.FileObjectDatabase | None
        try:
            self.files = odb.FileObjectDatabase(objects_dir)
        except odb.Unsupported:
            self.files = None
        # What a concurrent `git gc --prune=now` may delete before the refs name it
        # (docs/reliability.md): the .keep files of new packs (which gc honours), and
        # the loose or already present objects flushed since, with their bytes while
        # they fit in RETAIN_BYTES (to write them again), else their ids.
        self._keeps: list[str] = []
        self._retained: dict[bytes, tuple[int, bytes]] = {}
        self._retained_bytes = 0
        self._watched: list[bytes] = []
        self._released = False

    @property
    def repo(self) -> "pygit2.Repository":
        if callable(self._git):
            self._git = self._git()
        return self._git

    def _libgit2_read(self, oid: bytes) -> tuple[int, bytes] | None:
        import pygit2

        try:
            # libgit2 inflates a whole object at once: ask its size first, and refuse
            # what no object of opal's can be before anything is allocated.
            _kind, size = self.repo.odb.read_header(pygit2.Oid(raw=oid))
            if size > odb.MAX_GIT_OBJECT:
                raise odb.too_large(oid, size)
            obj_type, data = self.repo.odb.read(pygit2.Oid(raw=oid))
        except KeyError:
            return None
        except pygit2.GitError as exc:
            raise CorruptObjectError(f"object {oid.hex()[:12]} cannot be read: {exc}") from None
        return int(obj_type), data

    def _backend_read(self, oid: bytes) -> tuple[int, bytes] | None:
        if self.files is not None:
            try:
                found = self.files.read(oid)
            except odb.Unsupported:
                found = None  # libgit2 reads it, or gives the error to show
            if found is not None:
                return found
        # Missing here is rare (damage, or a layout the file reader leaves aside):
        # libgit2 has the last word.
        return self._libgit2_read(oid)

    def _backend_exists(self, oid: bytes) -> bool:
        if self.files is not None:
            try:
                return self.files.exists(oid)
            except odb.Unsupported:
                pass
        import pygit2

        return self.repo.odb.exists(pygit2.Oid(raw=oid))

    def _backend_write(self, objects: list[tuple[bytes, int, bytes]]) -> None:
        # An OSError (a full disk, a read-only repository) reaches the CLI, which says
        # it in one line; nothing names the objects yet, so nothing is changed.
        self._write(objects)

    def _write(self, objects: list[tuple[bytes, int, bytes]]) -> None:
        if len(objects) < PACK_THRESHOLD and sum(len(d) for _, _, d in objects) <= LOOSE_BYTES:
            for oid, t, d in objects:
                packfile.write_loose(self.objects_dir, oid, t, d, shared=self.shared)
            self._watch(objects)
            return
        pack_dir = os.path.join(self.objects_dir, "pack")
        # No ref names these objects yet: the pack is kept (git gc neither deletes it
        # nor drops its unreachable objects) until settle().
        path = packfile.write_pack(pack_dir, objects, len(objects), keep=True)
        self._keeps.append(path[: -len(".pack")] + ".keep")

    def _backend_reused(self, oids: list[bytes]) -> None:
        # Present already, but perhaps unreachable (a killed command's objects): a gc
        # may delete them before the refs name them, as it may new loose objects.
        # Freshened as git does, so that an old one survives a gc with an expiry.
        for oid in oids:
            packfile.freshen_loose(self.objects_dir, oid)
        self._watch([(oid, *self._pending[oid]) for oid in oids])

    def _watch(self, objects: list[tuple[bytes, int, bytes]]) -> None:
        for oid, t, d in objects:
            if self._retained_bytes + len(d) <= RETAIN_BYTES:
                self._retained[oid] = (t, d)
                self._retained_bytes += len(d)
            else:
                self._watched.append(oid)

    def secure(self, *, moved: bool = False) -> None:
        if not (self._retained or self._watched):
            return
        if self.files is not None:
            self.files.refresh()  # forget packs a gc deleted since they were opened
        for oid, (t, d) in self._retained.items():
            if not self._backend_exists(oid):
                packfile.write_loose(self.objects_dir, oid, t, d, shared=self.shared)
        if moved:  # the refs name them now: a later gc keeps them
            return
        lost = [oid for oid in self._watched if not self._backend_exists(oid)]
        if lost:
            raise ConflictError(
                f"{count(len(lost), 'object')} this command was about to record were deleted meanwhile "
                f"(e.g. {lost[0].hex()[:12]}), by a 'git gc --prune=now' or 'git prune' running at the same time",
                hint="nothing was changed; run the command again",
            )

    def settle(self) -> None:
        if self._keeps or self._retained or self._watched:
            # What a killed opal left (once per command that wrote something).
            if not self._released:
                self._released = True
                packfile.release_stale_keeps(os.path.join(self.objects_dir, "pack"))
        for path in self._keeps:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._keeps.clear()
        self._retained.clear()
        self._retained_bytes = 0
        self._watched.clear()

"""Reading git's object database straight from its files, without libgit2.

Loading pygit2 costs about 75 ms, more than the whole work of ``opal log``,
``opal show`` or ``opal diff``. What those commands read (a few dozen trees and
blobs) is simple to read from the files themselves, whose formats git documents and
keeps stable (gitformat-pack(5)):

* loose objects: ``objects/xx/yyyy…``, zlib over ``"<type> <size>\\0<bytes>"``;
* packs: ``objects/pack/pack-*.idx`` (version 2: fan-out table, sorted ids, CRCs,
  32-bit offsets, 64-bit offsets) beside ``pack-*.pack`` (objects stored whole or as
  deltas against an earlier offset or another object's id).

This reader is deliberately narrow. Whatever it does not handle — alternates, a
repository that is not the user's own, an object or index it cannot parse — raises
:class:`Unsupported`, and the caller falls back to libgit2, which applies git's full
rules. It never writes; :mod:`packfile` and :mod:`store` do that.
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib

from opalgit.errors import CorruptObjectError
from opalgit.store.gitfiles.packfile import OBJ_BLOB, OBJ_COMMIT, OBJ_TAG, OBJ_TREE

_OFS_DELTA, _REF_DELTA = 6, 7
_LOOSE_TYPES = {b"commit": OBJ_COMMIT, b"tree": OBJ_TREE, b"blob": OBJ_BLOB, b"tag": OBJ_TAG}
_IDX_MAGIC = b"\xfftOc"
#: Deltas deeper than this are refused (git's own default limit is 50, and
#: ``--depth`` can raise it; 4095 is git's hard maximum).
MAX_DELTA_DEPTH = 4095
#: The largest git object read: the largest body opal stores, framed (see
#: :data:`codec.MAX_OBJECT_SIZE`), with room for a header. Anything larger is not
#: opal's and is refused before it is inflated (a hostile remote can ship a 64 KiB
#: object that inflates to gigabytes), not handed to libgit2.
MAX_GIT_OBJECT = (256 << 20) + 4096


class Unsupported(Exception):
    """Something this reader leaves to libgit2 (the message says what)."""


def too_large(oid: bytes, size: int) -> CorruptObjectError:
    return CorruptObjectError(
        f"object {oid.hex()[:12]} claims {size:,} bytes, more than the {MAX_GIT_OBJECT:,} opal reads",
        hint="no object opal writes is this large: it came from elsewhere (a remote?); "
        "'opal fsck' lists what it damages",
    )


class _Pack:
    """One ``.idx``/``.pack`` pair, mapped into memory on first use."""

    def __init__(self, idx_path: str) -> None:
        self.idx_path = idx_path
        self.pack_path = idx_path[: -len(".idx")] + ".pack"
        self._idx: mmap.mmap | bytes | None = None
        self._pack: mmap.mmap | bytes | None = None
        self.count = 0

    @staticmethod
    def _map(path: str) -> mmap.mmap | bytes:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return b""
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)

    def _open_idx(self) -> mmap.mmap | bytes:
        if self._idx is None:
            idx = self._map(self.idx_path)
            if len(idx) < 8 + 256 * 4 + 40 or idx[:4] != _IDX_MAGIC or idx[4:8] != b"\x00\x00\x00\x02":
                raise Unsupported(f"{self.idx_path} is not a version-2 pack index")
            self.count = struct.unpack_from(">I", idx, 8 + 255 * 4)[0]
            if len(idx) < 8 + 1024 + self.count * 28 + 40:
                raise Unsupported(f"{self.idx_path} is cut short")
            self._idx = idx
        return self._idx

    def offset(self, oid: bytes) -> int | None:
        """Where ``oid`` starts in the pack, or None when this pack lacks it."""
        idx = self._open_idx()
        first = oid[0]
        lo = struct.unpack_from(">I", idx, 8 + (first - 1) * 4)[0] if first else 0
        hi = struct.unpack_from(">I", idx, 8 + first * 4)[0]
        names = 8 + 1024
        while lo < hi:  # binary search over the sorted 20-byte ids of this fan-out slot
            mid = (lo + hi) // 2
            at = names + mid * 20
            probe = idx[at : at + 20]
            if probe < oid:
                lo = mid + 1
            elif probe > oid:
                hi = mid
            else:
                small = names + self.count * 24 + mid * 4
                off = struct.unpack_from(">I", idx, small)[0]
                if off & 0x80000000:  # an index into the 64-bit offset table
                    large = names + self.count * 28 + (off & 0x7FFFFFFF) * 8
                    off = struct.unpack_from(">Q", idx, large)[0]
                return off
        return None

    def data(self) -> mmap.mmap | bytes:
        if self._pack is None:
            pack = self._map(self.pack_path)
            if len(pack) < 32 or pack[:4] != b"PACK" or struct.unpack_from(">I", pack, 4)[0] not in (2, 3):
                raise Unsupported(f"{self.pack_path} is not a version-2 pack")
            self._pack = pack
        return self._pack

    def close(self) -> None:
        for m in (self._idx, self._pack):
            if isinstance(m, mmap.mmap):
                m.close()
        self._idx = self._pack = None


class FileObjectDatabase:
    """Read-only access to one ``objects`` directory."""

    def __init__(self, objects_dir: str) -> None:
        self.objects_dir = objects_dir
        if os.path.exists(os.path.join(objects_dir, "info", "alternates")):
            raise Unsupported("the repository borrows objects from alternates")
        self._packs: list[_Pack] = []
        self._pack_names: set[str] = set()
        self._pack_dir_stamp: int | None = None
        self._scan()

    def _scan(self) -> bool:
        """Pick up packs written since the last scan (by opal, or by a ``git gc``).
        Returns whether any was new."""
        pack_dir = os.path.join(self.objects_dir, "pack")
        try:
            # Every lookup that misses comes here (a commit checks each new object
            # before writing it): list the folder only when it changed. Should two
            # changes share a timestamp, a miss is only a second copy written, or a
            # read that libgit2 answers.
            stamp = os.stat(pack_dir).st_mtime_ns
            if stamp == self._pack_dir_stamp:
                return False
            names = os.listdir(pack_dir)
        except FileNotFoundError:
            return False
        self._pack_dir_stamp = stamp
        new = False
        for name in sorted(names):
            if name.endswith(".idx") and name not in self._pack_names:
                if os.path.exists(os.path.join(pack_dir, name[:-4] + ".pack")):
                    self._pack_names.add(name)
                    self._packs.append(_Pack(os.path.join(pack_dir, name)))
                    new = True
        return new

    def refresh(self) -> None:
        """Forget the packs whose files are gone (a ``git gc`` deleted them: their
        mapped index would still answer) and pick up new ones."""
        kept = []
        for p in self._packs:
            if os.path.exists(p.idx_path) and os.path.exists(p.pack_path):
                kept.append(p)
            else:
                p.close()
                self._pack_names.discard(os.path.basename(p.idx_path))
        self._packs = kept
        self._pack_dir_stamp = None
        self._scan()

    def close(self) -> None:
        for p in self._packs:
            p.close()

    # -- lookups ---------------------------------------------------------------------

    def _loose_path(self, oid: bytes) -> str:
        h = oid.hex()
        return os.path.join(self.objects_dir, h[:2], h[2:])

    def _find(self, oid: bytes) -> tuple[_Pack, int] | None:
        for pack in self._packs:
            off = pack.offset(oid)
            if off is not None:
                return pack, off
        return None

    def exists(self, oid: bytes) -> bool:
        if os.path.exists(self._loose_path(oid)) or self._find(oid) is not None:
            return True
        return self._scan() and self._find(oid) is not None

    def read(self, oid: bytes) -> tuple[int, bytes] | None:
        """``(type, bytes)`` of object ``oid``, or None when the database lacks it."""
        found = self._read_loose(oid)
        if found is not None:
            return found
        at = self._find(oid)
        if at is None and self._scan():
            at = self._find(oid)
        if at is None:
            # A concurrent ``git gc`` may have packed the loose object just now.
            return self._read_loose(oid)
        return self._read_packed(at[0], at[1], oid)

    def _read_loose(self, oid: bytes) -> tuple[int, bytes] | None:
        try:
            with open(self._loose_path(oid), "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        # The header first ("<type> <size>\0", at most a few dozen bytes), then the
        # body, inflated to no more than the header says: never all of it blindly.
        d = zlib.decompressobj()
        try:
            data = d.decompress(raw, 64)
            head, sep, body = data.partition(b"\x00")
            kind, _, size = head.partition(b" ")
            if not sep or kind not in _LOOSE_TYPES or not size.isdigit():
                raise Unsupported(f"loose object {oid.hex()[:12]} has a malformed header")
            want = int(size)
            if want > MAX_GIT_OBJECT:
                raise too_large(oid, want)
            rest = d.unconsumed_tail
            body += d.decompress(rest, want - len(body) + 1) if want >= len(body) else b""
        except zlib.error:
            raise Unsupported(f"loose object {oid.hex()[:12]} does not inflate") from None
        if len(body) != want or not d.eof:
            raise Unsupported(f"loose object {oid.hex()[:12]} is not the size its header says")
        return _LOOSE_TYPES[kind], body

    # -- packs -----------------------------------------------------------------------

    def _read_packed(self, pack: _Pack, offset: int, oid: bytes) -> tuple[int, bytes]:
        # Follow the delta chain down to a whole object, then apply the deltas upwards.
        deltas: list[bytes] = []
        held = 0
        while True:
            kind, base, data = self._entry(pack, offset, oid)
            if base is None:
                break
            deltas.append(data)
            held += len(data)
            if len(deltas) > MAX_DELTA_DEPTH:
                raise Unsupported(f"object {oid.hex()[:12]} has a delta chain deeper than {MAX_DELTA_DEPTH}")
            if held > MAX_GIT_OBJECT:  # libgit2 applies such a chain a step at a time
                raise Unsupported(f"object {oid.hex()[:12]} has deltas larger than the object may be")
            if isinstance(base, int):  # an offset in this pack
                offset = base
                continue
            at = self._find(base)  # an id: in this pack, another, or loose
            if at is None:
                whole = self.read(base)
                if whole is None:
                    raise Unsupported(f"the delta base of object {oid.hex()[:12]} is missing")
                kind, data = whole
                break
            pack, offset = at
        for delta in reversed(deltas):
            data = apply_delta(data, delta, oid)
        return kind, data

    def _entry(self, pack: _Pack, offset: int, oid: bytes) -> tuple[int, int | bytes | None, bytes]:
        """The entry at ``offset``: ``(type, None, bytes)`` for a whole object, or
        ``(type, base, delta)`` for a delta, ``base`` being an offset or an id."""
        buf = pack.data()
        try:
            c = buf[offset]
            kind = (c >> 4) & 7
            size = c & 15
            shift, pos = 4, offset + 1
            while c & 0x80:
                c = buf[pos]
                size |= (c & 0x7F) << shift
                shift += 7
                pos += 1
            base: int | bytes | None = None
            if kind == _OFS_DELTA:
                c = buf[pos]
                pos += 1
                back = c & 0x7F
                while c & 0x80:
                    c = buf[pos]
                    pos += 1
                    back = ((back + 1) << 7) | (c & 0x7F)
                base = offset - back
                if not 0 < base < offset:
                    raise Unsupported(f"object {oid.hex()[:12]}: a delta points outside its pack")
            elif kind == _REF_DELTA:
                base = bytes(buf[pos : pos + 20])
                pos += 20
            elif kind not in (OBJ_COMMIT, OBJ_TREE, OBJ_BLOB, OBJ_TAG):
                raise Unsupported(f"object {oid.hex()[:12]}: unknown pack entry type {kind}")
            if size > MAX_GIT_OBJECT:
                raise too_large(oid, size)
            # Hand zlib only as much of the pack as the object can take up (deflate's
            # worst case is a little over its size): what it does not consume it
            # copies aside, and the rest of the pack may be hundreds of megabytes.
            # And take out no more than the entry says (one byte more tells a lie).
            d = zlib.decompressobj()
            out = d.decompress(memoryview(buf)[pos : pos + size + (size >> 10) + 64], size + 1)
        except (IndexError, zlib.error):
            raise Unsupported(f"object {oid.hex()[:12]} cannot be read from {pack.pack_path}") from None
        if not d.eof or len(out) != size:
            raise Unsupported(f"object {oid.hex()[:12]} in {pack.pack_path} is not the size its entry says")
        return kind, base, out


def _varint(delta: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        c = delta[pos]
        pos += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return value, pos


def apply_delta(base: bytes, delta: bytes, oid: bytes = b"") -> bytes:
    """Git's delta format: source size, target size, then copy and insert operations."""
    try:
        src_size, pos = _varint(delta, 0)
        dst_size, pos = _varint(delta, pos)
        if src_size != len(base):
            raise Unsupported(f"object {oid.hex()[:12]}: a delta expects a base of another size")
        if dst_size > MAX_GIT_OBJECT:
            raise too_large(oid, dst_size)
        out = bytearray()
        n = len(delta)
        while pos < n:
            op = delta[pos]
            pos += 1
            if op & 0x80:  # copy from the base: offset and size in the bytes the flags name
                off = size = 0
                for i in range(4):
                    if op & (1 << i):
                        off |= delta[pos] << (8 * i)
                        pos += 1
                for i in range(3):
                    if op & (1 << (4 + i)):
                        size |= delta[pos] << (8 * i)
                        pos += 1
                size = size or 0x10000
                if off + size > len(base):
                    raise Unsupported(f"object {oid.hex()[:12]}: a delta copies past its base")
                out += base[off : off + size]
            elif op:  # insert the next ``op`` bytes of the delta
                out += delta[pos : pos + op]
                pos += op
            else:
                raise Unsupported(f"object {oid.hex()[:12]}: a delta has a reserved opcode")
            if len(out) > dst_size:  # a few bytes of copies can stand for gigabytes
                raise Unsupported(f"object {oid.hex()[:12]}: a delta gives the wrong size")
    except IndexError:
        raise Unsupported(f"object {oid.hex()[:12]}: a delta is cut short") from None
    if len(out) != dst_size:
        raise Unsupported(f"object {oid.hex()[:12]}: a delta gives the wrong size")
    return bytes(out)

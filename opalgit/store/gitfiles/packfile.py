"""Writing git pack files (version 2, with a version-2 index) for new objects.

A large import writes thousands of objects. As loose files they would flood
``.git/objects`` and make git's auto-gc run in the middle of the user's next git
command, so opal writes them as one pack instead, the way ``git fast-import`` does.
Objects are stored whole (no deltas): opal's blobs are already zstd-compressed, and
``git gc`` may repack them later as it likes.

Atomicity: the ``.pack`` is written and fsynced under a temporary name, then renamed,
then the ``.idx``; git and libgit2 only see a pack once its index exists, so a crash
at any point leaves at most an ignored temporary file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import zlib
from typing import Iterable

from opalgit.fileio import create_temp, fsync_dir

OBJ_COMMIT, OBJ_TREE, OBJ_BLOB, OBJ_TAG = 1, 2, 3, 4
TYPE_NAMES = {OBJ_COMMIT: b"commit", OBJ_TREE: b"tree", OBJ_BLOB: b"blob", OBJ_TAG: b"tag"}


def object_id(obj_type: int, data: bytes) -> bytes:
    """The git (SHA-1) id of an object, raw 20 bytes."""
    h = hashlib.sha1(TYPE_NAMES[obj_type] + b" %d\x00" % len(data))
    h.update(data)
    return h.digest()


#: Blobs that open with these are zstd frames (framed records, payload packs, delta
#: leaves): deflating them again gains nothing.
_ZSTD_MAGICS = (b"OPZ1", b"OPK1", b"OPD1")


def shared_mode(mode: int, shared: tuple[str, int] | None, *, is_dir: bool) -> int:
    """The permissions git gives a new file or folder of a repository with
    ``core.sharedRepository`` set (git's ``adjust_shared_perm``): ``shared`` is
    ("add", bits) for group/all, ("exact", bits) for an octal value, None for umask."""
    if shared is None:
        return mode
    kind, tweak = shared
    if not mode & 0o200:
        tweak &= ~0o222
    if mode & 0o100:
        tweak |= (tweak & 0o444) >> 2  # folders: whoever may read may enter
    new = (mode & ~0o7777) | tweak if kind == "exact" else mode | tweak
    return new | 0o2000 if is_dir else new


def parse_shared(value: str | None) -> tuple[str, int] | None:
    """``core.sharedRepository`` as git reads it."""
    v = (value or "").strip().lower()
    if v in ("group", "true", "yes", "on", "1"):
        return ("add", 0o660)
    if v in ("all", "world", "everybody", "2"):
        return ("add", 0o664)
    if len(v) > 1 and v.startswith("0") and all(c in "01234567" for c in v):
        return ("exact", int(v, 8) | 0o600)
    return None


def write_loose(
    objects_dir: str,
    oid: bytes,
    obj_type: int,
    data: bytes,
    *,
    shared: tuple[str, int] | None = None,
) -> bool:
    """Write one loose object the way git does; returns False when it existed already.

    The file is written under a temporary name beside its final one and renamed, so
    a reader never sees part of an object; like git (by default) and libgit2, it is
    not fsynced: a killed process loses nothing, and the refs that name it are
    written after it.
    """
    h = oid.hex()
    folder = os.path.join(objects_dir, h[:2])
    path = os.path.join(folder, h[2:])
    if os.path.exists(path):
        return False
    try:
        os.mkdir(folder)
        if shared is not None:
            os.chmod(folder, shared_mode(os.stat(folder).st_mode & 0o7777, shared, is_dir=True))
    except FileExistsError:
        pass
    # Loose objects are few and small (trees, commits): git's default level.
    level = 0 if data[:4] in _ZSTD_MAGICS else zlib.Z_DEFAULT_COMPRESSION
    raw = zlib.compress(TYPE_NAMES[obj_type] + b" %d\x00" % len(data) + data, level)
    fd, tmp = create_temp(folder, "tmp_obj_")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


def loose_path(objects_dir: str, oid: bytes) -> str:
    h = oid.hex()
    return os.path.join(objects_dir, h[:2], h[2:])


def freshen_loose(objects_dir: str, oid: bytes) -> bool:
    """Date a loose object now, as git does when it would write one that exists, so
    that a gc with an expiry keeps it; False when it is not loose here."""
    try:
        os.utime(loose_path(objects_dir, oid))
        return True
    except OSError:
        return False


#: What a ``.keep`` file of opal's says (git prints it in ``git verify-pack`` and the like).
KEEP_NOTE = "opal {pid} on {host}: objects of a command that has not moved its refs yet\n"


def _host() -> str:
    import socket

    return socket.gethostname()


def release_stale_keeps(pack_dir: str) -> list[str]:
    """Delete the ``.keep`` files that an opal process on this machine left when it was
    killed before its refs moved (its PID is gone); returns their paths. Others' keep
    files (git's own, a user's) are never touched."""
    removed = []
    try:
        names = [n for n in os.listdir(pack_dir) if n.endswith(".keep")]
    except OSError:
        return removed
    host = _host()
    for name in names:
        path = os.path.join(pack_dir, name)
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                words = fh.read(512).split()
        except OSError:
            continue
        if len(words) < 4 or words[0] != "opal" or not words[1].isdigit() or words[3].rstrip(":") != host:
            continue
        pid = int(words[1])
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # still running (or the PID is someone else's now): keep it
        except ProcessLookupError:
            pass
        except OSError:
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed.append(path)
    return removed


def _entry_header(obj_type: int, size: int) -> bytes:
    byte = (obj_type << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)



def write_pack(
    pack_dir: str, objects: Iterable[tuple[bytes, int, bytes]], count: int, *, keep: bool = False
) -> str:
    """Write ``count`` objects ``(oid, type, data)`` as a pack; returns the pack's path.

    ``oid`` must be :func:`object_id` of the object (the caller computed it already).
    ``keep``: the pack gets a ``.keep`` file (before its index appears, so git never
    sees it without), which ``git repack``/``git gc`` honour: they neither delete the
    pack nor drop its unreachable objects. The caller deletes it once refs name the
    objects (``pack[:-5] + ".keep"``).
    """
    os.makedirs(pack_dir, exist_ok=True)
    fd, tmp_pack = create_temp(pack_dir, "tmp_opal_", ".pack")
    entries: list[tuple[bytes, int, int]] = []  # (oid, crc32, offset)
    pack_hash = hashlib.sha1()
    try:
        with os.fdopen(fd, "wb") as fh:
            head = b"PACK" + struct.pack(">II", 2, count)
            fh.write(head)
            pack_hash.update(head)
            offset = len(head)
            written = 0
            for oid, obj_type, data in objects:
                # opal's blobs are mostly zstd frames already: zlib would only spend time.
                level = 0 if data[:4] in _ZSTD_MAGICS else 1
                chunk = _entry_header(obj_type, len(data)) + zlib.compress(data, level)
                fh.write(chunk)
                pack_hash.update(chunk)
                entries.append((oid, zlib.crc32(chunk) & 0xFFFFFFFF, offset))
                offset += len(chunk)
                written += 1
            if written != count:
                raise ValueError(f"pack promised {count} objects, got {written}")
            checksum = pack_hash.digest()
            fh.write(checksum)
            fh.flush()
            os.fsync(fh.fileno())
        name = "pack-" + checksum.hex()
        final_pack = os.path.join(pack_dir, name + ".pack")
        final_idx = os.path.join(pack_dir, name + ".idx")
        idx_bytes = _index_bytes(entries, checksum)
        fd2, tmp_idx = create_temp(pack_dir, "tmp_opal_", ".idx")
        final_keep = os.path.join(pack_dir, name + ".keep")
        try:
            with os.fdopen(fd2, "wb") as fh:
                fh.write(idx_bytes)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp_pack, 0o444)
            os.chmod(tmp_idx, 0o444)
            if keep:
                with open(final_keep, "w", encoding="utf-8") as fh:
                    fh.write(KEEP_NOTE.format(pid=os.getpid(), host=_host()))
            os.replace(tmp_pack, final_pack)
            os.replace(tmp_idx, final_idx)
        except BaseException:
            if os.path.exists(tmp_idx):
                os.unlink(tmp_idx)
            if keep and not os.path.exists(final_idx):
                with contextlib.suppress(OSError):
                    os.unlink(final_keep)
            raise
        fsync_dir(pack_dir)
        return final_pack
    except BaseException:
        if os.path.exists(tmp_pack):
            os.unlink(tmp_pack)
        raise


def _index_bytes(entries: list[tuple[bytes, int, int]], pack_checksum: bytes) -> bytes:
    entries = sorted(entries)
    out = bytearray(b"\xfftOc" + struct.pack(">I", 2))
    fanout = [0] * 256
    for oid, _crc, _off in entries:
        fanout[oid[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        out += struct.pack(">I", total)
    for oid, _crc, _off in entries:
        out += oid
    for _oid, crc, _off in entries:
        out += struct.pack(">I", crc)
    large: list[int] = []
    for _oid, _crc, off in entries:
        if off < 0x80000000:
            out += struct.pack(">I", off)
        else:
            out += struct.pack(">I", 0x80000000 | len(large))
            large.append(off)
    for off in large:
        out += struct.pack(">Q", off)
    out += pack_checksum
    out += hashlib.sha1(bytes(out)).digest()
    return bytes(out)


def tree_bytes(entries: Iterable[tuple[str, bool, bytes]]) -> bytes:
    """Serialize a git tree from ``(name, is_tree, oid)``, in git's entry order."""

    def key(entry: tuple[str, bool, bytes]) -> bytes:
        name = entry[0].encode("utf-8")
        return name + b"/" if entry[1] else name

    out = bytearray()
    for name, is_tree, oid in sorted(entries, key=key):
        out += (b"40000 " if is_tree else b"100644 ") + name.encode("utf-8") + b"\x00" + oid
    return bytes(out)

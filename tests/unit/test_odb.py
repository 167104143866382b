"""The libgit2-free object reader, checked object by object against libgit2 itself
on repositories that the real git binary packed in each way it knows."""

from __future__ import annotations

import os
import random
import subprocess
import zlib

import pygit2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opalgit.store.gitfiles import odb
from opalgit.store.gitfiles.packfile import OBJ_BLOB, OBJ_COMMIT, OBJ_TAG, OBJ_TREE
from tests.conftest import git

TYPES = {"commit": OBJ_COMMIT, "tree": OBJ_TREE, "blob": OBJ_BLOB, "tag": OBJ_TAG}


def make_history(path: str) -> None:
    """Commits whose files change a little each time (what makes git write deltas),
    some large and binary files, an empty file, nested trees, an annotated tag."""
    rnd = random.Random(7)
    git("init", "-q", path)
    base = [f"line {i} {rnd.random()}\n" for i in range(400)]
    blob = bytes(rnd.getrandbits(8) for _ in range(70_000))
    for n in range(12):
        base[rnd.randrange(len(base))] = f"changed {n}\n"
        os.makedirs(os.path.join(path, "src", "deep"), exist_ok=True)
        with open(os.path.join(path, "src", "notes.txt"), "w") as fh:
            fh.writelines(base)
        with open(os.path.join(path, "src", "deep", "data.bin"), "wb") as fh:
            fh.write(blob[: 60_000 + n * 500] + bytes([n]))
        open(os.path.join(path, "empty"), "w").close()
        git("add", "-A", cwd=path)
        git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", f"c{n}", cwd=path)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "tag", "-a", "v1", "-m", "tag", cwd=path)


def all_objects(path: str) -> dict[bytes, str]:
    out = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)", cwd=path).stdout
    return {bytes.fromhex(line.split()[0]): line.split()[1] for line in out.splitlines()}


def check_against_libgit2(path: str) -> int:
    objects_dir = os.path.join(path, ".git", "objects")
    reader = odb.FileObjectDatabase(objects_dir)
    lib = pygit2.Repository(path).odb
    objects = all_objects(path)
    assert len(objects) > 40
    for oid, kind in objects.items():
        got = reader.read(oid)
        assert got is not None, kind
        want_type, want = lib.read(pygit2.Oid(raw=oid))
        assert got == (TYPES[kind], want)
        assert reader.exists(oid)
    missing = bytes(20)
    assert reader.read(missing) is None and not reader.exists(missing)
    reader.close()
    return len(objects)


def pack_entry_types(path: str) -> set[int]:
    """The entry types found in the repository's packs (6: offset delta, 7: id delta)."""
    pack_dir = os.path.join(path, ".git", "objects", "pack")
    types = set()
    for name in os.listdir(pack_dir):
        if name.endswith(".idx"):
            pack = odb._Pack(os.path.join(pack_dir, name))
            for oid in all_objects(path):
                off = pack.offset(oid)
                if off is not None:
                    types.add((pack.data()[off] >> 4) & 7)
            pack.close()
    return types


def test_loose_objects(tmp_path):
    path = str(tmp_path / "r")
    make_history(path)
    assert not os.listdir(os.path.join(path, ".git", "objects", "pack"))
    check_against_libgit2(path)


def test_packed_by_gc_with_offset_deltas(tmp_path):
    path = str(tmp_path / "r")
    make_history(path)
    git("gc", "-q", "--prune=now", cwd=path)
    assert 6 in pack_entry_types(path)
    check_against_libgit2(path)


def test_deep_delta_chains(tmp_path):
    path = str(tmp_path / "r")
    make_history(path)
    git("repack", "-a", "-d", "-f", "-q", "--depth=250", "--window=250", cwd=path)
    pack_dir = os.path.join(path, ".git", "objects", "pack")
    (idx,) = [f for f in os.listdir(pack_dir) if f.endswith(".idx")]
    out = git("verify-pack", "-v", os.path.join(pack_dir, idx)).stdout
    chains = [int(line.split("=")[1].split(":")[0]) for line in out.splitlines() if line.startswith("chain length")]
    assert max(chains) >= 5
    check_against_libgit2(path)


def test_ref_deltas_across_packs_and_loose_bases(tmp_path):
    path = str(tmp_path / "r")
    make_history(path)
    pack_dir = os.path.join(path, ".git", "objects", "pack")
    # pack-objects without --delta-base-offset names delta bases by id (REF_DELTA).
    ids = git("rev-list", "--objects", "--all", cwd=path).stdout
    subprocess.run(["git", "pack-objects", "-q", os.path.join(pack_dir, "pack")], input=ids, text=True,
                   cwd=path, check=True, capture_output=True)
    git("prune-packed", cwd=path)
    assert 7 in pack_entry_types(path)
    check_against_libgit2(path)


def test_a_pack_written_after_opening_is_found(tmp_path):
    path = str(tmp_path / "r")
    make_history(path)
    reader = odb.FileObjectDatabase(os.path.join(path, ".git", "objects"))
    head = bytes.fromhex(git("rev-parse", "HEAD", cwd=path).stdout.strip())
    assert reader.read(head)[0] == OBJ_COMMIT
    git("gc", "-q", "--prune=now", cwd=path)  # the loose object is gone, a pack appeared
    assert reader.read(head)[0] == OBJ_COMMIT


def test_what_it_does_not_handle_is_said_not_guessed(tmp_path):
    path = str(tmp_path / "r")
    make_history(path)
    objects_dir = os.path.join(path, ".git", "objects")
    head = git("rev-parse", "HEAD", cwd=path).stdout.strip()
    # A damaged loose object.
    loose = os.path.join(objects_dir, head[:2], head[2:])
    os.chmod(loose, 0o644)
    with open(loose, "wb") as fh:
        fh.write(b"not zlib")
    with pytest.raises(odb.Unsupported):
        odb.FileObjectDatabase(objects_dir).read(bytes.fromhex(head))
    with open(loose, "wb") as fh:
        fh.write(zlib.compress(b"blob 99\x00short"))
    with pytest.raises(odb.Unsupported):
        odb.FileObjectDatabase(objects_dir).read(bytes.fromhex(head))
    # A pack cut short.
    path = str(tmp_path / "packed")
    make_history(path)
    objects_dir = os.path.join(path, ".git", "objects")
    git("gc", "-q", "--prune=now", cwd=path)
    pack_dir = os.path.join(objects_dir, "pack")
    (pack,) = [f for f in os.listdir(pack_dir) if f.endswith(".pack")]
    tree = bytes.fromhex(git("rev-parse", "HEAD^{tree}", cwd=path).stdout.strip())
    os.chmod(os.path.join(pack_dir, pack), 0o644)
    with open(os.path.join(pack_dir, pack), "r+b") as fh:
        fh.truncate(40)
    with pytest.raises(odb.Unsupported):
        odb.FileObjectDatabase(objects_dir).read(tree)
    # Alternates: left to libgit2 as a whole.
    os.makedirs(os.path.join(objects_dir, "info"), exist_ok=True)
    with open(os.path.join(objects_dir, "info", "alternates"), "w") as fh:
        fh.write("/elsewhere/objects\n")
    with pytest.raises(odb.Unsupported):
        odb.FileObjectDatabase(objects_dir)


def encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def encode_copy(off: int, size: int) -> bytes:
    op, args = 0x80, bytearray()
    for i in range(4):
        if (off >> (8 * i)) & 0xFF:
            op |= 1 << i
            args.append((off >> (8 * i)) & 0xFF)
    enc = 0 if size == 0x10000 else size
    for i in range(3):
        if (enc >> (8 * i)) & 0xFF:
            op |= 1 << (4 + i)
            args.append((enc >> (8 * i)) & 0xFF)
    return bytes([op]) + bytes(args)


@settings(max_examples=150, deadline=None)
@given(
    st.binary(min_size=1, max_size=70_000),
    st.lists(st.tuples(st.booleans(), st.integers(0, 1 << 20), st.integers(1, 0x10000), st.binary(min_size=1, max_size=127)),
             max_size=12),
)
def test_apply_delta_follows_gits_format(base, ops):
    want = bytearray()
    body = bytearray()
    for is_copy, off, size, text in ops:
        if is_copy:
            off %= len(base)
            size = min(size, len(base) - off)
            body += encode_copy(off, size)
            want += base[off : off + size]
        else:
            body += bytes([len(text)]) + text
            want += text
    delta = encode_varint(len(base)) + encode_varint(len(want)) + bytes(body)
    assert odb.apply_delta(base, delta) == bytes(want)
    with pytest.raises(odb.Unsupported):
        odb.apply_delta(base + b"x", delta)
    if body:
        with pytest.raises(odb.Unsupported):
            odb.apply_delta(base, delta[:-1])


def test_a_copy_of_size_zero_means_64_kib():
    base = bytes(range(256)) * 300
    delta = encode_varint(len(base)) + encode_varint(0x10000) + bytes([0x80])  # no offset, no size bytes
    assert odb.apply_delta(base, delta) == base[:0x10000]


def test_an_empty_object_database(tmp_path):
    objects_dir = tmp_path / "objects"
    objects_dir.mkdir()
    reader = odb.FileObjectDatabase(str(objects_dir))
    assert reader.read(bytes(20)) is None and not reader.exists(bytes(20))


def _loose(objects: str, oid_hex: str, raw: bytes) -> None:
    os.makedirs(os.path.join(objects, oid_hex[:2]), exist_ok=True)
    with open(os.path.join(objects, oid_hex[:2], oid_hex[2:]), "wb") as fh:
        fh.write(zlib.compress(raw))


def test_a_loose_object_claiming_more_than_opal_reads_is_refused_before_it_is_inflated(tmp_path):
    """A loose object whose header claims 3 GB is an error (not left to libgit2, which
    would inflate it whole); one that inflates past what its header says is not read
    past it."""
    from opalgit.errors import CorruptObjectError

    objects = str(tmp_path / "objects")
    os.makedirs(objects)
    huge, liar = "ab" * 20, "cd" * 20
    _loose(objects, huge, b"blob 3000000000\x00" + b"\0" * 1000)
    _loose(objects, liar, b"blob 10\x00" + b"\0" * (8 << 20))
    db = odb.FileObjectDatabase(objects)
    with pytest.raises(CorruptObjectError, match="claims 3,000,000,000 bytes"):
        db.read(bytes.fromhex(huge))
    with pytest.raises(odb.Unsupported, match="not the size its header says"):
        db.read(bytes.fromhex(liar))


def test_a_delta_that_copies_past_its_target_size_stops_there():
    """A few bytes of copy instructions can stand for gigabytes: the delta stops as
    soon as it passes the size it declares."""
    base = b"x" * 0x10000
    # target size 16, then 100,000 copies of the whole 64 KiB base (6.5 GB if applied)
    delta = bytes([0x80, 0x80, 0x04, 0x10]) + bytes([0x80]) * 100_000
    with pytest.raises(odb.Unsupported, match="wrong size"):
        odb.apply_delta(base, delta)
    huge = bytes([0x80, 0x80, 0x04]) + bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])  # target: 4 GiB
    from opalgit.errors import CorruptObjectError

    with pytest.raises(CorruptObjectError, match="claims"):
        odb.apply_delta(base, huge)

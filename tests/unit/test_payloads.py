"""Payload packs: chained compression, reading back cold, keyframes, damage."""

from __future__ import annotations

import hashlib
import os
import random

import pygit2
import pytest

from opalgit import codec
from opalgit.errors import CorruptObjectError
from opalgit.history import payloads
from opalgit.store.memory import MemoryObjectStore
from opalgit.store.objects import GitObjectStore
from tests.conftest import git


def text(seed: int, size: int) -> bytes:
    rnd = random.Random(seed)
    words = [f"w{rnd.randrange(5000)}" for _ in range(size // 5)]
    return " ".join(words).encode()[:size]


def put(packer: payloads.Packer, data: bytes) -> bytes:
    d = hashlib.sha256(data).digest()
    packer.add(d, data)
    return d


@pytest.fixture
def git_store(tmp_path):
    git("init", "-q", "--bare", str(tmp_path / "r.git"))
    path = str(tmp_path / "r.git")
    return lambda: GitObjectStore(pygit2.Repository(path), os.path.join(path, "objects"))


def test_a_chain_reads_back_cold_in_a_fresh_store(git_store):
    store = git_store()
    packer = payloads.Packer(store)
    written: dict[bytes, bytes] = {}
    tips = []
    for round_ in range(5):
        for i in range(20):
            data = text(round_ * 100 + i, 3000 + i)
            written[put(packer, data)] = data
        packer.seal()
        tips.append(packer.tip)
    store.flush()
    # A fresh store: nothing cached, every pack decoded from the chain on disk.
    cold = git_store()
    for d, data in written.items():
        loc = packer.known[d]
        assert loc[1] and payloads.load(cold, d, loc) == data
    last = payloads.cache(cold).pack(tips[-1])
    assert last.depth == 4 and last.base == tips[-2]


def test_content_seen_before_costs_little_in_a_later_pack():
    store = MemoryObjectStore()
    packer = payloads.Packer(store)
    big = text(1, 200_000)
    put(packer, big)
    packer.seal()
    first = store._pending[store.read_tree(packer.tip)[0][2]][1]
    # The same text, edited at its end: a new payload that the window already holds.
    put(packer, big + b" and one more line")
    packer.seal()
    blob = [c for n, _, c in store.read_tree(packer.tip) if n == "pack"][0]
    second = store.read_blob(blob)
    assert len(second) < len(first) / 20


def test_known_payloads_are_not_written_again():
    store = MemoryObjectStore()
    packer = payloads.Packer(store)
    d = put(packer, text(2, 5000))
    packer.seal()
    again = payloads.Packer(store, base=packer.tip, known=packer.known)
    put(again, text(2, 5000))
    again.seal()
    assert again.packs_written == 0 and again.location(d) == packer.known[d]


@pytest.mark.parametrize(
    "limit, value, rounds, want",
    [("MAX_DEPTH", 3, 7, [0, 1, 2, 0, 1, 2, 0]), ("MAX_CHAIN_BYTES", 10_000, 4, [0, 1, 0, 1])],
)
def test_a_chain_is_cut_by_a_keyframe(monkeypatch, limit, value, rounds, want):
    monkeypatch.setattr(payloads, limit, value)
    store = MemoryObjectStore()
    packer = payloads.Packer(store)
    depths = []
    for i in range(rounds):
        put(packer, text(i, 4000))
        packer.seal()
        depths.append(payloads.cache(store).pack(packer.tip).depth)
    assert depths == want
    # A keyframe has no base entry: the chain git keeps alive ends there.
    if want[-1] == 0:
        assert [n for n, _, _ in store.read_tree(packer.tip)] == ["pack"]


def test_damaged_packs_are_reported_not_misread():
    store = MemoryObjectStore()
    packer = payloads.Packer(store)
    d = put(packer, text(3, 5000))
    packer.seal()
    store.flush()
    tree = packer.tip
    blob_oid = store.read_tree(tree)[0][2]
    good = store.read_blob(blob_oid)

    def with_blob(data: bytes) -> bytes:
        fresh = MemoryObjectStore()
        return fresh, fresh.write_tree([("pack", False, fresh.write_blob(data))])

    for bad in (good[:10], b"XXXX" + good[4:], good[:-7], good[:8] + b"\x00" * 40):
        fresh, oid = with_blob(bad)
        with pytest.raises(CorruptObjectError):
            payloads.load(fresh, d, (oid, True))
    fresh, oid = with_blob(good)
    with pytest.raises(CorruptObjectError, match="does not hold"):
        payloads.load(fresh, b"\x01" * 32, (oid, True))
    # A stray entry in a pack tree.
    odd = MemoryObjectStore()
    oid = odd.write_tree([("pack", False, odd.write_blob(good)), ("extra", False, odd.write_blob(b"x"))])
    with pytest.raises(CorruptObjectError, match="stray"):
        payloads.load(odd, d, (oid, True))


def test_a_single_payload_blob_still_reads():
    store = MemoryObjectStore()
    data = text(4, 3000)
    oid = store.write_blob(codec.frame(data))
    assert payloads.load(store, hashlib.sha256(data).digest(), (oid, False)) == data


def test_git_keeps_every_pack_a_reachable_one_needs(git_store, tmp_path):
    store = git_store()
    packer = payloads.Packer(store)
    written = {}
    for i in range(4):
        data = text(10 + i, 6000)
        written[put(packer, data)] = data
        packer.seal()
    # Only the newest pack is referenced; its base entries must keep the rest.
    root = store.write_tree([("p" + "0" * 64, True, packer.tip)])
    sig = pygit2.Signature("t", "t@example.com")
    repo = pygit2.Repository(str(tmp_path / "r.git"))
    store.flush()
    commit = repo.create_commit("refs/heads/keep", sig, sig, "keep", pygit2.Oid(raw=root), [])
    assert commit
    git("gc", "-q", "--prune=now", cwd=str(tmp_path / "r.git"))
    assert git("fsck", "--full", "--strict", cwd=str(tmp_path / "r.git")).returncode == 0
    cold = git_store()
    for d, data in written.items():
        assert payloads.load(cold, d, packer.known[d]) == data


def test_a_payload_added_while_its_pack_compresses_is_not_packed_twice():
    store = MemoryObjectStore()
    packer = payloads.Packer(store)
    data = text(20, 50_000)
    d = put(packer, data)
    packer.start()  # compressing in the background
    put(packer, data)  # the same payload again, from a later record
    packer.seal()
    assert packer.packs_written == 1 and payloads.load(store, d, packer.known[d]) == data


def test_a_failure_on_the_compression_thread_reaches_the_writer(monkeypatch):
    store = MemoryObjectStore()
    packer = payloads.Packer(store)
    put(packer, text(21, 5000))

    def broken(size):
        raise MemoryError("no room")

    monkeypatch.setattr(payloads, "_params", broken)
    with pytest.raises(MemoryError):
        packer.seal()
    assert packer.packs_written == 0


def _continue_chain(store, tip: bytes, opal_dir: str | None, seed: int) -> bytes:
    packer = payloads.Packer(store, base=tip, opal_dir=opal_dir)
    for i in range(5):
        put(packer, text(seed + i, 2000))
    packer.seal()
    return packer.tip


def test_a_cached_window_continues_the_chain_exactly_as_decoding_it(tmp_path, monkeypatch):
    """The window left by the commit that wrote a pack stands in for decoding the
    chain: the next pack comes out byte for byte the same, and a damaged or torn
    cache file is not used."""
    from opalgit.history import windowcache as packwindows

    opal_dir = str(tmp_path / "opal")
    store = MemoryObjectStore()
    packer = payloads.Packer(store, opal_dir=opal_dir)
    for round_ in range(3):
        for i in range(30):
            put(packer, text(round_ * 100 + i, 50_000))
        packer.start()
    saving = packer.keep_window()
    assert saving is not None
    saving.join()
    store.flush()
    tip = packer.tip
    cached = packwindows.load(opal_dir, tip)
    assert cached is not None
    window, depth, chain = cached
    decoded = payloads.cache(store).pack(tip, window=True)
    assert (window, depth, chain) == (decoded.window, decoded.depth, decoded.chain)

    def fresh_store_with_the_chain():
        s = MemoryObjectStore()
        s.objects = dict(store.objects)
        return s

    plain = _continue_chain(fresh_store_with_the_chain(), tip, None, 900)
    calls: list[bytes] = []
    original = payloads.PackCache.pack
    monkeypatch.setattr(payloads.PackCache, "pack", lambda self, oid, **kw: calls.append(oid) or original(self, oid, **kw))
    assert _continue_chain(fresh_store_with_the_chain(), tip, opal_dir, 900) == plain
    assert calls == []  # the window came from the cache, not from the chain
    path = os.path.join(opal_dir, "cache", "windows", tip.hex())
    with open(path, "rb") as fh:
        good = fh.read()
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 1
    for damaged in (bytes(flipped), good[:-10], good[:20]):
        with open(path, "wb") as fh:
            fh.write(damaged)
        assert packwindows.load(opal_dir, tip) is None
        calls.clear()
        assert _continue_chain(fresh_store_with_the_chain(), tip, opal_dir, 900) == plain
        assert calls  # decoded from the chain this time


def test_only_the_newest_windows_are_kept(tmp_path):
    from opalgit.history import windowcache as packwindows

    opal_dir = str(tmp_path)
    for i in range(packwindows.KEEP + 3):
        packwindows.save(opal_dir, bytes([i]) * 20, b"w" * 100, 1, 100)
        os.utime(os.path.join(opal_dir, "cache", "windows", (bytes([i]) * 20).hex()), (i, i))
    left = sorted(os.listdir(os.path.join(opal_dir, "cache", "windows")))
    assert len(left) == packwindows.KEEP
    assert packwindows.load(opal_dir, bytes([packwindows.KEEP + 2]) * 20) == (b"w" * 100, 1, 100)


@pytest.mark.parametrize("before,content", [(0, 10), (100, 10), (payloads.WINDOW, 10), (payloads.WINDOW, payloads.WINDOW),
                                            (payloads.WINDOW, payloads.WINDOW + 5), (10, payloads.WINDOW - 3), (50, 0)])
def test_a_new_packs_window_is_the_last_window_bytes_of_the_chain(before, content):
    """The tip's window, joined lazily or written as pieces, is the chain's last WINDOW
    bytes: the window before, then the pack's content."""
    old = random.Random(before).randbytes(before)
    new = random.Random(content + 1).randbytes(content)
    want = (old + new)[-payloads.WINDOW :]
    tip = payloads._Tip(old, 1, 2, content=new)
    assert b"".join(tip.parts()) == want
    assert tip.window == want
    assert b"".join(tip.parts()) == want  # after joining, still the same

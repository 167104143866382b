"""Where long strings are stored: payload packs, compressed together and chained.

A *payload* is a long string moved out of a record (:func:`codec.externalize`),
named by the SHA-256 of its UTF-8 bytes. Compressed one by one, payloads lose what
they share with each other: a file read, edited, and read again; the same text once
numbered and once raw. So the payloads new in one operation are written together, as
one zstd frame, in a *pack*, and each pack is compressed with the most recent
:data:`WINDOW` bytes of the packs before it as a zstd raw-content dictionary, so a
file that an earlier commit stored costs a few bytes when the agent reads it again.

A pack is a git tree::

    pack    blob: b"OPK1", u32 header length (big-endian), canonical header,
                  then one zstd frame of the payloads' bytes, concatenated
    base    tree: the previous pack of the chain (absent in a keyframe)

The header is ``[1, "pack", {"digests", "sizes", "dict", "depth", "chain"}]``:
the payloads in frame order, how many bytes of dictionary the frame was compressed
with (the last ``dict`` bytes of the base's window; 0 in a keyframe), the chain depth
and the bytes of content from the keyframe through this pack. A pack's *window* is
the last :data:`WINDOW` bytes of (its base's window + its own content). The ``base``
entry makes git keep everything a pack needs to be decompressed.

Leaf trees of the turn sequence name each payload their turns use, ``p<sha256 hex>``,
pointing at the pack that holds it (:mod:`sequence`). Reading a payload decompresses
its pack and, to rebuild the dictionary, the chain back to the keyframe; chains are
cut by a keyframe after :data:`MAX_CHAIN_BYTES` of content or :data:`MAX_DEPTH` packs,
which bounds a cold read, and decompressed packs are cached per store.

A payload entry may also point at a blob holding one framed payload (the layout before
packs); such entries are read as they are.
"""

from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from typing import Mapping

from opalgit import codec
from opalgit.errors import CorruptObjectError
from opalgit.store.objects import ObjectStore
from opalgit.structs import dataclass

MAGIC_PACK = b"OPK1"
PACK_BLOB = "pack"
BASE_TREE = "base"

#: How much earlier content a pack is compressed against (part of the format).
WINDOW = 4 * 1024 * 1024
_WINDOW_LOG = 22
#: A pack is started once this much content waits (between two leaves). With WINDOW
#: it sets the memory a large import needs: about four times this.
PACK_BYTES = 4 * 1024 * 1024
#: A chain is cut (the next pack is a keyframe) after this much content ...
MAX_CHAIN_BYTES = 16 * 1024 * 1024
#: ... or this many packs, whichever comes first: bounds what a cold read decompresses.
MAX_DEPTH = 32
#: Readers accept longer chains than this writer makes (another writer may cut later).
MAX_READ_DEPTH = 1024
#: Decompressed packs kept per store (bytes of content).
CACHE_BYTES = 64 * 1024 * 1024

# Level 4 for packs of 1 MiB and more (a large import's). With a dictionary, level 3
# used it poorly: the chained packs of 20 growing commits came to 1.25x one commit
# (1.08x at level 6). Level 4 (zstd's "dfast" with larger tables) finds the repeats
# nearly as well as level 6 on sessions, which are mostly files read again: the 50 MB
# session's payload packs are 1.56 MB against 1.51 MB, in a third of level 6's CPU
# (0.11 s against 0.33 s). Level 5 is both slower and larger than 4 here. The
# compression runs on a thread, but a large import keeps both cores busy, so its CPU
# is the import's time.
_ZSTD_LEVEL = 4
# Small packs (a fork's new turns, a commit while the session grows) get level 9: a
# quarter smaller for a few milliseconds more, while level 9 on the 4 MiB packs of
# a large import would cost ~10 MB more memory. Tiny packs (a hook's commit of a
# few turns) keep level 9's search (lazy2) with smaller match tables: compressing
# a few KB against a 4 MiB dictionary is mostly clearing and filling the tables
# for the dictionary, and level 9's (2^21 + 2^20 entries) took 34 ms of a ten-turn
# commit. Measured on such a commit's 7.8 KB of new payloads: 2^18 + 2^17 entries
# 6.7 ms for 817 bytes, 2^16 + 2^15 2.1 ms for 1,130 bytes (no dictionary: 2,041).
# Tables sized to the content: up to 32 KiB the smallest, up to 256 KiB 2^18.
# Used up to 1 MiB, 2^18 tables took 20 growing commits from 0.96x to 1.07x one
# commit (files read again long ago are found less often); up to 256 KiB, 0.96x.
_SMALL_PACK = 1024 * 1024
_SMALL_PACK_LEVEL = 9
_TINY_PACK = 256 * 1024
_TINIEST_PACK = 32 * 1024

#: Where a payload is: (oid, is_tree). A tree is a pack; a blob is one framed payload.
Location = tuple[bytes, bool]


@dataclass
class Pack:
    """A decoded pack: its payloads' places in ``content`` and its chain facts."""

    oid: bytes
    base: bytes | None
    index: dict[bytes, tuple[int, int]]  # digest -> (offset, size) in content
    content: bytes
    depth: int
    chain: int
    # The last WINDOW bytes of the chain through this pack: kept for the pack that was
    # asked for (the next pack's dictionary), None for those decoded on the way to it.
    window: bytes | None


def _params(size: int) -> codec.zstandard.ZstdCompressionParameters:
    zstd = codec.zstandard
    if size < _TINY_PACK:
        tables = 16 if size < _TINIEST_PACK else 18
        return zstd.ZstdCompressionParameters(
            strategy=zstd.STRATEGY_LAZY2, window_log=_WINDOW_LOG, write_content_size=True,
            hash_log=tables, chain_log=tables - 1, search_log=4, min_match=5,
        )
    level = _SMALL_PACK_LEVEL if size < _SMALL_PACK else _ZSTD_LEVEL
    return zstd.ZstdCompressionParameters.from_level(level, window_log=_WINDOW_LOG, write_content_size=True)


class PackCache:
    """Decoded packs of one store, least recently used evicted past :data:`CACHE_BYTES`."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._packs: OrderedDict[bytes, Pack] = OrderedDict()
        self._bytes = 0

    def _remember(self, pack: Pack) -> None:
        old = self._packs.pop(pack.oid, None)
        if old is not None:
            self._bytes -= _size(old)
        self._packs[pack.oid] = pack
        self._bytes += _size(pack)
        while self._bytes > CACHE_BYTES and len(self._packs) > 1:
            _, old = self._packs.popitem(last=False)
            self._bytes -= _size(old)

    def pack(self, oid: bytes, *, window: bool = False) -> Pack:
        """The decoded pack ``oid`` (decompressing its chain back to a cached pack or
        keyframe); with ``window``, one that keeps its window (to continue the chain)."""
        hit = self._packs.get(oid)
        if hit is not None and (hit.window is not None or not window):
            self._packs.move_to_end(oid)
            return hit
        # Walk back to a pack whose window we have, or to the keyframe, then decode
        # forwards: iterative, so a long chain cannot exhaust the stack.
        chain: list[tuple[bytes, bytes, bytes | None]] = []  # (oid, blob bytes, base)
        cur: bytes | None = oid
        known: Pack | None = None
        seen: set[bytes] = set()
        while cur is not None:
            have = self._packs.get(cur)
            if have is not None and have.window is not None:
                known = have
                break
            if cur in seen or len(chain) > MAX_READ_DEPTH:
                raise CorruptObjectError(f"payload pack {oid.hex()[:12]} has a chain that does not end")
            seen.add(cur)
            blob, base = _read_pack_tree(self.store, cur)
            chain.append((cur, blob, base))
            cur = base
        # The chain's content so far, its last WINDOW bytes at least: each pack's
        # dictionary is cut from it, and only the pack asked for keeps a window of its
        # own (building one per pack copied megabytes per step of a chain of small packs).
        tail = bytearray(known.window if known is not None else b"")
        prev: Pack | None = known
        for k, (pack_oid, blob, base) in enumerate(reversed(chain)):
            if base is None:
                tail.clear()  # a keyframe: nothing before it counts
            last = k == len(chain) - 1
            prev = _decode(pack_oid, blob, base, tail, last)
            self._remember(prev)
        assert prev is not None
        return prev

    def payload(self, digest: bytes, loc: Location) -> bytes:
        oid, is_tree = loc
        if not is_tree:
            return codec.unframe(self.store.read_blob(oid), what=f"payload {digest.hex()[:12]}")
        pack = self.pack(oid)
        try:
            offset, size = pack.index[digest]
        except KeyError:
            raise CorruptObjectError(f"payload pack {oid.hex()[:12]} does not hold payload {digest.hex()[:12]}") from None
        return pack.content[offset : offset + size]


def _read_pack_tree(store: ObjectStore, oid: bytes) -> tuple[bytes, bytes | None]:
    blob = base = None
    for name, is_tree, child in store.read_tree(oid):
        if name == PACK_BLOB and not is_tree:
            blob = child
        elif name == BASE_TREE and is_tree:
            base = child
        else:
            raise CorruptObjectError(f"payload pack {oid.hex()[:12]} has a stray entry {name!r}")
    if blob is None:
        raise CorruptObjectError(f"tree {oid.hex()[:12]} is not a payload pack")
    return store.read_blob(blob), base


def split_blob(oid: bytes, blob: bytes) -> tuple[dict, bytes]:
    """A pack blob's header and its compressed frame."""
    if blob[:4] != MAGIC_PACK or len(blob) < 8:
        raise CorruptObjectError(f"payload pack {oid.hex()[:12]} has no pack header")
    (n,) = struct.unpack(">I", blob[4:8])
    if 8 + n > len(blob):
        raise CorruptObjectError(f"payload pack {oid.hex()[:12]} is cut short")
    header = codec.unpack_canonical(blob[8 : 8 + n], "pack")
    return header, memoryview(blob)[8 + n :]  # a view: the frame is megabytes, not copied


def _size(pack: Pack) -> int:
    return len(pack.content) + (len(pack.window) if pack.window is not None else 0)


def _decode(oid: bytes, blob: bytes, base: bytes | None, tail: bytearray, keep_window: bool) -> Pack:
    """Decode one pack whose chain content before it ends ``tail`` (empty for a
    keyframe); its content is appended to ``tail``, which keeps at least WINDOW bytes."""
    header, frame = split_blob(oid, blob)
    try:
        digests, sizes = header["digests"], header["sizes"]
        dict_len, depth, chain = int(header["dict"]), int(header["depth"]), int(header["chain"])
    except (KeyError, TypeError, ValueError):
        raise CorruptObjectError(f"payload pack {oid.hex()[:12]} has a malformed header") from None
    if len(digests) != len(sizes):
        raise CorruptObjectError(f"payload pack {oid.hex()[:12]} has a malformed header")
    if dict_len > min(len(tail), WINDOW) or (dict_len and base is None):
        raise CorruptObjectError(f"payload pack {oid.hex()[:12]} needs more of its base than the chain holds")
    if not all(isinstance(n, int) and n >= 0 for n in sizes):
        raise CorruptObjectError(f"payload pack {oid.hex()[:12]} has a malformed header")
    dictionary = None
    if dict_len:
        # The dictionary copies what it is given: hand it a view, not another copy.
        with memoryview(tail) as view:
            dictionary = codec.raw_dict(view[len(tail) - dict_len :])
    # Inflated to exactly what the header says, and refused before anything is
    # allocated when that is more than a pack may hold.
    content = codec.decompress(frame, what=f"payload pack {oid.hex()[:12]}", exact=sum(sizes), dictionary=dictionary)
    index: dict[bytes, tuple[int, int]] = {}
    offset = 0
    for d_, size in zip(digests, sizes):
        index[d_] = (offset, size)
        offset += size
    if offset != len(content):
        raise CorruptObjectError(f"payload pack {oid.hex()[:12]} holds {len(content)} bytes, its header says {offset}")
    tail += content
    if len(tail) > 2 * WINDOW:
        del tail[: len(tail) - WINDOW]  # amortized: the chain's content is copied about twice in all
    window = bytes(memoryview(tail)[-WINDOW:]) if keep_window else None
    return Pack(oid, base, index, content, depth, chain, window)


def cache(store: ObjectStore) -> PackCache:
    """The pack cache of ``store`` (one per store, made on first use)."""
    pc = store._pack_cache
    if pc is None:
        pc = store._pack_cache = PackCache(store)
    return pc


def load(store: ObjectStore, digest: bytes, loc: Location) -> bytes:
    """The bytes of payload ``digest``, stored at ``loc``."""
    return cache(store).payload(digest, loc)


# ------------------------------------------------------------------------------ writing


class _Tip:
    """What the writer needs of the newest pack: its window and place in the chain.

    A new pack's window is the one before it followed by the pack's content, cut to
    WINDOW. It is joined only when the next pack of the same operation needs it:
    copying 4 MiB twice cost ~5 ms of a ten-turn commit, which only caches it
    (:meth:`parts` are written to the cache file as they are)."""

    __slots__ = ("depth", "chain", "_before", "_content", "_window")

    def __init__(self, window: bytes, depth: int, chain: int, *, content: bytes = b"") -> None:
        self.depth, self.chain = depth, chain
        self._window: bytes | None = None
        empty = memoryview(b"")
        if not content:  # a window as it is (decoded, or read from the cache)
            self._window = window[-WINDOW:] if len(window) > WINDOW else window
            self._before = self._content = empty
            return
        # Views, not copies: what is left of the window before, then the content. But
        # a view keeps all of its bytes alive: of a pack much larger than the window (a
        # huge tool output) only the window's part is kept, copied.
        keep = WINDOW - len(content)
        self._before = memoryview(window)[max(0, len(window) - keep) :] if keep > 0 else empty
        tail = memoryview(content)[-WINDOW:]
        self._content = tail if len(content) <= 2 * WINDOW else memoryview(bytes(tail))

    def parts(self) -> tuple[memoryview, ...]:
        """The window as pieces to be read one after the other."""
        if self._window is not None:
            return (memoryview(self._window),)
        return self._before, self._content

    @property
    def window(self) -> bytes:
        if self._window is None:
            self._window = b"".join((self._before, self._content))
            self._before = self._content = memoryview(b"")
        return self._window


class _Job:
    """One pack being compressed on a worker thread (zstd releases the GIL, so the
    compression overlaps the parsing and encoding of the next records)."""

    def __init__(self, digests: list[bytes], sizes: list[int], content: bytes, window: bytes,
                 depth: int, chain: int, base: bytes | None) -> None:
        self.digests, self.sizes, self.depth, self.chain, self.base = digests, sizes, depth, chain, base
        self.dict_len = len(window)
        self.frame: bytes | None = None
        self.error: BaseException | None = None
        self._content: bytes | None = content
        self._window: bytes | None = window
        self.thread = threading.Thread(target=self._run, name="opal-pack", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            window = self._window
            compressor = codec.zstandard.ZstdCompressor(
                compression_params=_params(len(self._content)), dict_data=codec.raw_dict(window) if window else None
            )
            self.frame = compressor.compress(self._content)
        except BaseException as exc:  # handed to the writer's thread by Packer.wait
            self.error = exc
        finally:
            self._content = self._window = None


class Packer:
    """Collects one operation's new payloads and writes them as chained packs.

    ``base`` is the pack the first new pack continues (the tip of the state the
    operation builds on); ``known`` maps payloads that are already stored to where,
    so that they are referred to, not written again. The packer keeps only the
    newest pack's window, not the packs it wrote: memory stays at about two packs'
    worth whatever the session's size.

    :meth:`start` compresses the waiting payloads in the background and :meth:`wait`
    writes the pack; one pack at most is in flight. :meth:`seal` does both.
    """

    def __init__(
        self,
        store: ObjectStore,
        base: bytes | None = None,
        known: Mapping[bytes, Location] | None = None,
        *,
        opal_dir: str | None = None,
    ) -> None:
        self.store = store
        self.tip = base
        # Where windows are cached (see opalgit.history.windowcache); None: not cached.
        self.opal_dir = opal_dir
        self.known: dict[bytes, Location] = dict(known or {})
        self._pending: dict[bytes, bytes] = {}
        self._tip: _Tip | None = None  # facts of the newest pack (written or in flight)
        self._job: _Job | None = None
        self._in_flight: set[bytes] = set()
        self.pending_bytes = 0
        self.packs_written = 0
        self._cached_window = None
        if opal_dir is not None and base is not None:
            from opalgit.history import windowcache as packwindows

            self._cached_window = packwindows.load_soon(opal_dir, base)

    def location(self, digest: bytes) -> Location | None:
        return self.known.get(digest)

    def add(self, digest: bytes, data: bytes) -> None:
        if digest in self.known or digest in self._pending or digest in self._in_flight:
            return
        self._pending[digest] = data
        self.pending_bytes += len(data)

    def _base(self) -> _Tip | None:
        if self._cached_window is not None:
            hit, self._cached_window = self._cached_window(), None
            if hit is not None and self._tip is None and self.packs_written == 0:
                self._tip = _Tip(*hit)
        if self.tip is not None and self._tip is None:
            try:
                p = cache(self.store).pack(self.tip, window=True)
            except CorruptObjectError:
                return None  # a damaged chain is not continued: the next pack is a keyframe
            assert p.window is not None
            self._tip = _Tip(p.window, p.depth, p.chain)
        return self._tip

    def keep_window(self) -> "threading.Thread | None":
        """Cache the newest pack's window for the next operation that continues the
        chain (call when the operation writes no more packs; nothing when it wrote
        none). The file is written on a thread: a pack that ends up unreferenced
        leaves a file no one asks for, which is harmless. Returns that thread."""
        self.wait()
        if self.opal_dir is not None and self.packs_written and self._tip is not None and self.tip is not None:
            from opalgit.history import windowcache as packwindows

            return packwindows.save_soon(self.opal_dir, self.tip, self._tip.parts(), self._tip.depth, self._tip.chain)
        return None

    def seal(self) -> None:
        """Write the waiting payloads as one pack (nothing when none wait)."""
        self.start()
        self.wait()

    def start(self) -> None:
        """Begin compressing the waiting payloads as the next pack (after writing the
        one in flight, which the new one continues)."""
        self.wait()
        if not self._pending:
            return
        digests = list(self._pending)
        sizes = [len(self._pending[d]) for d in digests]
        codec.check_size(sum(sizes), "a payload pack")
        content = b"".join(self._pending.values())
        self._pending.clear()
        self.pending_bytes = 0
        base = self._base()
        if base is not None and (base.depth + 1 >= MAX_DEPTH or base.chain + len(content) > MAX_CHAIN_BYTES):
            base = None
        window = base.window if base is not None else b""
        depth = base.depth + 1 if base is not None else 0
        chain = (base.chain if base is not None else 0) + len(content)
        self._tip = _Tip(window, depth, chain, content=content)
        self._in_flight = set(digests)
        # The whole window is the dictionary, small packs too: zstd indexes all of it
        # first (~40 ms at level 9 for 4 MiB, the bulk of a ten-turn commit's own
        # work), but with only the newest 1 MiB, 20 growing commits stored 1.08x one
        # commit instead of 0.96x (files read again long after are found further back).
        self._job = _Job(digests, sizes, content, window, depth, chain, self.tip if base is not None else None)
        if len(content) > 2 * PACK_BYTES:
            # A pack this large holds a huge payload (an output of megabytes): it is
            # written before the next records are read, so that it is not in memory
            # while the next huge one is parsed, redacted and encoded.
            del content
            self.wait()

    def wait(self) -> None:
        """Write the pack in flight, if any: its blob, its tree, where its payloads are."""
        job, self._job = self._job, None
        if job is None:
            return
        job.thread.join()
        self._in_flight = set()
        if job.error is not None:
            raise job.error
        assert job.frame is not None
        header = codec.pack_canonical(
            "pack",
            {"digests": job.digests, "sizes": job.sizes, "dict": job.dict_len, "depth": job.depth, "chain": job.chain},
        )
        blob = self.store.write_blob(MAGIC_PACK + struct.pack(">I", len(header)) + header + job.frame)
        entries = [(PACK_BLOB, False, blob)]
        if job.base is not None:
            entries.append((BASE_TREE, True, job.base))
        oid = self.store.write_tree(entries)
        for d in job.digests:
            self.known[d] = (oid, True)
        self.tip = oid
        self.packs_written += 1

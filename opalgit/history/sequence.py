"""Where turns are stored: a chunked Merkle sequence of turns made of git trees.

A commit's turns form one sequence. The sequence is cut into *leaves* at
content-defined boundaries: a leaf ends after a turn whose id has its first four
bytes divisible by :data:`LEAF_TARGET`, or when the leaf reaches
:data:`LEAF_MAX_ITEMS` turns or :data:`LEAF_MAX_BYTES` bytes. Because a boundary depends
only on the turns since the previous boundary, two sequences that share a prefix share
every leaf of it, and an edit in the middle changes only the leaves around it.

A leaf is a git tree::

    leaf            blob: framed canonical {"ids", "turns", "sums", "refs"}
    p<sha256 hex>   tree: the payload pack that holds a payload its turns use
                    (:mod:`payloads`; one entry per payload)
    base            tree, optional: the leaf this one extends (see below)

An append reopens the last leaf and writes it again with the new records after the
old ones, so without help every small commit would store that leaf's old records once
more (on average half a leaf per commit, most of what a ten-turn fork adds). Such a
leaf is instead a *delta leaf*: its blob is compressed with the leaf it extends as a
zstd dictionary (frame ``OPD1``), and its tree names that leaf as ``base`` so git keeps
it. A delta leaf's base holds only records the leaf holds itself, at its start, so the
``base`` link never keeps content alive that the state no longer has.

Leaves are grouped under interior trees of at most :data:`FANOUT` children, whose
entries are named ``<position>-<items>-<turns>`` (zero-padded position, then how many
records and how many conversational turns the child holds), so that turn *N* is
found by reading one tree per level. The root is the top tree (a lone leaf is its own
root). Appending turns rewrites the last leaf and one tree per level: O(log n).

Payloads are named inside the leaf trees that use them, so git's own reachability
keeps their packs alive; a payload used by many turns is still stored once. New
payloads are written in packs of several megabytes (compressed together), so a leaf
is written only once the pack holding its new payloads is sealed: the writer keeps
the finished leaves of an open pack waiting (:class:`_Writer`).

This module needs only an :class:`~opalgit.store.objects.ObjectStore`; it runs unchanged on
the in-memory twin.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from opalgit import codec, progress
from opalgit.errors import CorruptObjectError
from opalgit.history import payloads
from opalgit.history.payloads import Location, Packer
from opalgit.store.gitfiles import packfile
from opalgit.store.gitfiles.packfile import OBJ_BLOB, OBJ_TREE
from opalgit.store.objects import ObjectStore, TreeEntry
from opalgit.structs import dataclass, field

# 16 rather than 32: a fork or an append rewrites one leaf around its cut, so smaller
# leaves make forks cheaper (10 forks of 10 turns: worst 1.26 % -> 1.08 % of one
# commit) and 20 growing commits too (1.09x -> 1.06x), for ~6 % more storage in one
# commit (leaves are compressed one by one).
LEAF_TARGET = 16
LEAF_MAX_ITEMS = 256
LEAF_MAX_BYTES = 512 * 1024
#: The writer starts a pack once its waiting leaves hold this much (see _Writer), so
#: that what it holds stays bounded whatever the records' payloads.
WAITING_BYTES = 4 * 1024 * 1024
# What a waiting item costs besides its canonical bytes (the object, its summary,
# its digests): ~900 bytes, measured with tracemalloc over the bench's session.
_ITEM_OVERHEAD = 900
FANOUT = 64

LEAF_BLOB = "leaf"
BASE_TREE = "base"
#: Delta leaves: the blob's magic, and how long a chain of them may get before a leaf
#: is written whole again (reading a leaf decodes its whole chain).
MAGIC_DELTA = b"OPD1"
MAX_LEAF_DEPTH = 8
_DELTA_LEVEL = 3


@dataclass
class Item:
    """One turn on its way into, or out of, the sequence."""

    id: bytes  # SHA-256 of ``canon``
    canon: bytes  # canonical turn bytes (payload references inside)
    summary: dict
    payloads: dict[bytes, bytes] = field(default_factory=dict)  # new payloads: digest -> bytes
    payload_oids: dict[bytes, Location] = field(default_factory=dict)  # stored payloads: digest -> where

    @property
    def is_turn(self) -> bool:
        return self.summary.get("role") != "meta"

    def refs(self) -> list[bytes]:
        return sorted(set(self.payloads) | set(self.payload_oids))


@dataclass(frozen=True)
class StoredItem:
    """A record as stored: its position in the sequence and the leaf that holds it."""

    index: int  # 0-based position among all records
    item: Item
    leaf: bytes  # oid of the leaf tree that holds it


@dataclass(frozen=True)
class Node:
    """A tree of the sequence (a leaf or an interior node) with the records and turns under it."""

    oid: bytes
    items: int
    turns: int


def _is_boundary(item_id: bytes) -> bool:
    return int.from_bytes(item_id[:4], "big") % LEAF_TARGET == 0


# ------------------------------------------------------------------------------ writing


@dataclass(frozen=True)
class LeafBase:
    """A leaf that a new leaf may extend: its tree, its body bytes, its chain depth, and
    the ids of its records (which the new leaf must start with)."""

    oid: bytes
    body: bytes
    depth: int
    ids: tuple[bytes, ...]


def _leaf_blob(body: bytes, items: list[Item], base: LeafBase | None) -> tuple[bytes, LeafBase | None]:
    """The framed leaf blob, as a delta against ``base`` when that is allowed and smaller."""
    full = codec.frame(body)
    if base is None or base.depth >= MAX_LEAF_DEPTH or not _extends(items, base):
        return full, None
    compressor = codec.zstandard.ZstdCompressor(
        level=_DELTA_LEVEL, dict_data=codec.raw_dict(base.body), write_content_size=True, write_checksum=True
    )
    delta = MAGIC_DELTA + bytes([base.depth + 1]) + compressor.compress(body)
    return (delta, base) if len(delta) < len(full) else (full, None)


def _extends(items: list[Item], base: LeafBase) -> bool:
    """Whether ``items`` are ``base``'s records and more (the only base a delta may have)."""
    n = len(base.ids)
    return len(items) > n and all(it.id == i for it, i in zip(items, base.ids))


def _leaf_locations(items: list[Item], packer: Packer) -> dict[bytes, Location]:
    """Where the payloads of a leaf's records are: its ``p<hex>`` entries."""
    out: dict[bytes, Location] = {}
    for it in items:
        for d in it.payloads:
            if d not in out:
                loc = packer.location(d)
                if loc is None:  # pragma: no cover - the writer seals before writing leaves
                    raise AssertionError("a leaf is written before its payloads are")
                out[d] = loc
        for d, loc in it.payload_oids.items():
            out.setdefault(d, loc)
    return out


def _leaf_objects(
    items: list[Item], locations: dict[bytes, Location], base: LeafBase | None
) -> tuple[bytes, list[TreeEntry]]:
    """A leaf's blob and tree entries (the blob's entry named ``leaf`` points at it),
    ``locations`` being its payloads' (:func:`_leaf_locations`)."""
    entries: dict[str, TreeEntry] = {}
    for d, (oid, is_tree) in locations.items():
        name = "p" + d.hex()
        entries[name] = (name, is_tree, oid)
    body = {
        "ids": [it.id for it in items],
        "turns": [it.canon for it in items],
        "sums": [it.summary for it in items],
        "refs": [it.refs() for it in items],
    }
    blob, used = _leaf_blob(codec.pack_canonical("leaf", body), items, base)
    entries[LEAF_BLOB] = (LEAF_BLOB, False, packfile.object_id(OBJ_BLOB, blob))
    if used is not None:
        entries[BASE_TREE] = (BASE_TREE, True, used.oid)
    return blob, list(entries.values())


def _node(oid: bytes, items: list[Item]) -> Node:
    return Node(oid, len(items), sum(1 for it in items if it.is_turn))


def _write_leaf(store: ObjectStore, items: list[Item], blob: bytes, entries: list[TreeEntry]) -> Node:
    store.write_blob(blob)
    return _node(store.write_tree(entries), items)


class _Writer:
    """Cuts items into leaves and writes them, sealing payload packs in between.

    A finished leaf waits until the pack that holds its new payloads is written. A
    pack is started once :data:`payloads.PACK_BYTES` wait, always between two leaves
    (so a leaf's new payloads are in one pack), and compresses in the background
    while the next records are encoded: its leaves are written when the next pack
    starts, or at :meth:`finish`.
    """

    def __init__(
        self,
        store: ObjectStore,
        packer: Packer | None,
        base: LeafBase | None = None,
        parent: Node | None = None,
        locations: dict[bytes, Location] | None = None,
    ) -> None:
        self.store = store
        # Filled, when given, with where the payloads of every leaf made are (in leaf
        # order, first place wins: what payload_locations would read back).
        self.locations = locations
        self.packer = packer if packer is not None else Packer(store)
        self.base = base  # the reopened leaf that the first leaf written may extend
        # A rebuild over a parent sequence: its leaves, while the new ones match them
        # one for one; the first that differs may extend its counterpart.
        self.parent = leaves(store, parent) if parent is not None else None
        self.written = 0
        self.current: list[Item] = []
        self.size = 0
        self.waiting: list[list[Item]] = []  # leaves whose payloads are not packed yet
        self.in_flight: list[list[Item]] = []  # leaves whose pack is being compressed
        self.held = 0  # about what the items of waiting and open leaves take (bytes)
        self.done: list[Node] = []

    def add(self, it: Item) -> None:
        """Take ``it`` into the open leaf; its new payloads go to the packer."""
        for d, data in it.payloads.items():
            self.packer.add(d, data)
        if it.payloads:
            # The leaf keeps only the digests (the values of this copy are empty): the
            # packer holds the bytes it has yet to write, and a payload already stored
            # (a file read again) is held no more. Kept with their items until a pack
            # was written, the bytes of files read again and again grew with the
            # session (1.05x its size at 240 MB, 1.36x in a user's 236 MB one).
            it = Item(it.id, it.canon, it.summary, dict.fromkeys(it.payloads, b""), it.payload_oids)
        self.current.append(it)
        self.size += len(it.canon)
        self.held += len(it.canon) + _ITEM_OVERHEAD
        if _is_boundary(it.id) or len(self.current) >= LEAF_MAX_ITEMS or self.size >= LEAF_MAX_BYTES:
            self.close_leaf()

    def close_leaf(self) -> None:
        if self.current:
            self.waiting.append(self.current)
            self.current, self.size = [], 0
        # A pack is started once enough payloads wait, or once enough leaves wait for
        # one: records with few new payloads (short turns, files read again) would
        # otherwise keep every leaf of the session waiting until the end.
        if self.packer.pending_bytes >= payloads.PACK_BYTES or self.held >= WAITING_BYTES:
            self._rotate()

    def _rotate(self) -> None:
        self.packer.wait()
        self._write(self.in_flight)
        self.packer.start()
        self.in_flight, self.waiting = self.waiting, []
        self.held = 0  # (the leaves in flight: at most what waited, so bounded as well)

    def _write(self, batch: list[list[Item]]) -> None:
        for items in batch:
            locations = _leaf_locations(items, self.packer)
            self.done.append(self._leaf(items, locations))
            self.written += 1
            if self.locations is not None:
                for d, loc in locations.items():
                    self.locations.setdefault(d, loc)
        batch.clear()

    def _leaf(self, items: list[Item], locations: dict[bytes, Location]) -> Node:
        base, self.base = self.base, None
        whole: tuple[bytes, list[TreeEntry]] | None = None  # the leaf written whole, if made
        if base is None and self.parent is not None:
            if self.written >= len(self.parent):
                self.parent = None
            else:
                twin = self.parent[self.written]
                whole = _leaf_objects(items, locations, None)
                if packfile.object_id(OBJ_TREE, packfile.tree_bytes(whole[1])) == twin.oid:
                    return twin
                self.parent = None  # diverged: later leaves have no counterpart
                if twin.items < len(items):
                    base = read_leaf_as_base(self.store, twin.oid)[1]
        if base is not None and len(items) == len(base.ids) and all(it.id == i for it, i in zip(items, base.ids)):
            return _node(base.oid, items)  # the reopened leaf, unchanged: keep it as it is
        if base is not None or whole is None:
            whole = _leaf_objects(items, locations, base)
        return _write_leaf(self.store, items, *whole)

    def take(self) -> list[Node]:
        """Leaves written so far (and forgets them)."""
        out, self.done = self.done, []
        return out

    def finish(self) -> list[Node]:
        """Close the open leaf, write the last packs; every leaf not yet taken."""
        if self.current:
            self.waiting.append(self.current)
            self.current, self.size = [], 0
        self._rotate()
        self.packer.wait()
        self._write(self.in_flight)
        return self.take()


def _chunk(
    store: ObjectStore,
    items: Iterable[Item],
    packer: Packer | None = None,
    base: LeafBase | None = None,
    parent: Node | None = None,
    locations: dict[bytes, Location] | None = None,
) -> list[Node]:
    w = _Writer(store, packer, base, parent, locations)
    out: list[Node] = []
    for it in progress.iterate(items, "storing records"):
        w.add(it)
        del it  # not held while the next item is made (a huge output would live on)
        if w.done:
            out.extend(w.take())
    out.extend(w.finish())
    return out


def _group(store: ObjectStore, level: list[Node]) -> list[Node]:
    """The level above ``level``: one tree per :data:`FANOUT` nodes, from the left."""
    parents: list[Node] = []
    for start in range(0, len(level), FANOUT):
        group = level[start : start + FANOUT]
        entries = [(f"{i:04d}-{n.items}-{n.turns}", True, n.oid) for i, n in enumerate(group)]
        oid = store.write_tree(entries)
        parents.append(Node(oid, sum(n.items for n in group), sum(n.turns for n in group)))
    return parents


def _build_levels(store: ObjectStore, leaves: list[Node]) -> Node | None:
    level = leaves
    if not level:
        return None
    while len(level) > 1:
        level = _group(store, level)
    return level[0]


def build(
    store: ObjectStore,
    items: Iterable[Item],
    packer: Packer | None = None,
    parent: Node | None = None,
    locations: dict[bytes, Location] | None = None,
) -> Node | None:
    """Store a whole sequence; returns its root, or None when it is empty.

    ``packer`` receives the new payloads; pass one to continue a pack chain and to
    refer to payloads already stored (see :func:`payload_locations`). ``parent`` is the
    sequence this one replaces: where the new records continue its last leaf, the new
    leaf is stored as a delta of that one. ``locations``, when given, is filled with
    what :func:`payload_locations` of the result would read.
    """
    return _build_levels(store, _chunk(store, items, packer, parent=parent, locations=locations))


# ------------------------------------------------------------------------------ reading


def _children(store: ObjectStore, oid: bytes) -> list[Node] | None:
    """The children of an interior node, or None when ``oid`` is a leaf."""
    entries = store.read_tree(oid)
    if any(name == LEAF_BLOB for name, _, _ in entries):
        return None
    kids: list[tuple[int, Node]] = []
    for name, is_tree, child in entries:
        parts = name.split("-")
        if not is_tree or len(parts) != 3:
            raise CorruptObjectError(f"sequence node {oid.hex()[:12]} has a stray entry {name!r}")
        try:
            kids.append((int(parts[0]), Node(child, int(parts[1]), int(parts[2]))))
        except ValueError:
            raise CorruptObjectError(f"sequence node {oid.hex()[:12]} has a malformed entry {name!r}") from None
    kids.sort(key=lambda k: k[0])
    return [n for _, n in kids]


def node_of(store: ObjectStore, oid: bytes) -> Node:
    """A root node with its counts (reads one tree, or one leaf)."""
    kids = _children(store, oid)
    if kids is None:
        items = read_leaf(store, oid)
        return Node(oid, len(items), sum(1 for it in items if it.is_turn))
    return Node(oid, sum(k.items for k in kids), sum(k.turns for k in kids))


def leaves(store: ObjectStore, root: Node | None) -> list[Node]:
    """Every leaf, left to right.

    Reads interior trees only: every leaf is at the same depth (levels are built from
    the leaves up), so the leftmost path tells the depth and the leaves themselves
    are never opened. A tree that broke the rule would show up as a leaf that is not
    one, an error when it is read (and in ``opal fsck``), never as a wrong sequence.
    """
    if root is None:
        return []
    # A commit asks for the leaves of its parent's sequence more than once.
    known = store.derived.get(("leaves", root.oid))
    if known is not None:
        return list(known)  # type: ignore[call-overload]
    depth = 0
    node = root
    while (kids := _children(store, node.oid)) is not None:
        depth += 1
        node = kids[0]
    level = [root]
    for _ in range(depth):
        nxt: list[Node] = []
        for n in level:
            kids = _children(store, n.oid)
            if kids is None:
                raise CorruptObjectError(f"sequence node {n.oid.hex()[:12]} is a leaf above the leaf level")
            nxt.extend(kids)
        level = nxt
    store.remember("leaves", root.oid, tuple(level))
    return level


def _hex_digest(oid: bytes, name: str) -> bytes:
    try:
        return bytes.fromhex(name[1:])
    except ValueError:
        raise CorruptObjectError(f"leaf {oid.hex()[:12]} has a malformed entry {name!r}") from None


def payload_locations(store: ObjectStore, root: Node | None) -> dict[bytes, Location]:
    """Where every payload of a sequence is stored (reads the leaf trees, not the leaves)."""
    out: dict[bytes, Location] = {}
    for leaf in leaves(store, root):
        for d, loc in leaf_payloads(store, leaf.oid).items():
            out.setdefault(d, loc)
    return out


def leaf_payloads(store: ObjectStore, oid: bytes) -> dict[bytes, Location]:
    """The payload entries of one leaf tree."""
    return {
        _hex_digest(oid, name): (child, is_tree)
        for name, is_tree, child in store.read_tree(oid)
        if name.startswith("p") and len(name) == 65
    }


def _leaf_parts(store: ObjectStore, oid: bytes) -> tuple[bytes, int, dict[bytes, Location]]:
    """A leaf's body bytes, its delta depth (0 for a whole leaf) and its payload entries."""
    payload_oids: dict[bytes, Location] = {}
    blob = base = None
    for name, is_tree, child in store.read_tree(oid):
        if name == LEAF_BLOB and not is_tree:
            blob = child
        elif name.startswith("p") and len(name) == 65:
            payload_oids[_hex_digest(oid, name)] = (child, is_tree)
        elif name == BASE_TREE and is_tree:
            base = child
        else:
            raise CorruptObjectError(f"leaf {oid.hex()[:12]} has a stray entry {name!r}")
    if blob is None:
        raise CorruptObjectError(f"tree {oid.hex()[:12]} is not a sequence leaf")
    data = store.read_blob(blob)
    if data[:4] != MAGIC_DELTA:
        if base is not None:
            raise CorruptObjectError(f"leaf {oid.hex()[:12]} names a base but is not a delta")
        return codec.unframe(data, what=f"leaf {oid.hex()[:12]}"), 0, payload_oids
    depth = data[4] if len(data) > 4 else 0
    if base is None or not 1 <= depth <= MAX_LEAF_DEPTH:
        raise CorruptObjectError(f"delta leaf {oid.hex()[:12]} has no base or a bad depth")
    base_body, base_depth, _ = _leaf_parts(store, base)
    if base_depth != depth - 1:
        raise CorruptObjectError(f"delta leaf {oid.hex()[:12]} says depth {depth}, its base has {base_depth}")
    what = f"delta leaf {oid.hex()[:12]}"
    body = codec.decompress(memoryview(data)[5:], what=what, dictionary=codec.raw_dict(base_body))
    return body, depth, payload_oids


def _items(oid: bytes, body: bytes, payload_oids: dict[bytes, Location]) -> list[Item]:
    body = codec.unpack_canonical(body, "leaf")
    try:
        ids, turns, sums, refs = body["ids"], body["turns"], body["sums"], body["refs"]
    except KeyError:
        raise CorruptObjectError(f"leaf {oid.hex()[:12]} lacks a field") from None
    if not (len(ids) == len(turns) == len(sums) == len(refs)):
        raise CorruptObjectError(f"leaf {oid.hex()[:12]} has lists of different lengths")
    items = []
    for i, canon, summary, r in zip(ids, turns, sums, refs):
        try:
            p = {d: payload_oids[d] for d in r}
        except KeyError:
            raise CorruptObjectError(f"leaf {oid.hex()[:12]} misses a payload its turns use") from None
        items.append(Item(i, canon, summary, payload_oids=p))
    return items


def read_leaf(store: ObjectStore, oid: bytes) -> list[Item]:
    body, _, payload_oids = _leaf_parts(store, oid)
    return _items(oid, body, payload_oids)


def read_leaf_as_base(store: ObjectStore, oid: bytes) -> tuple[list[Item], LeafBase]:
    """A leaf's records, and the leaf as a base that a longer leaf may extend."""
    body, depth, payload_oids = _leaf_parts(store, oid)
    items = _items(oid, body, payload_oids)
    return items, LeafBase(oid, body, depth, tuple(it.id for it in items))


def leaf_base(store: ObjectStore, oid: bytes) -> bytes | None:
    """The leaf that delta leaf ``oid`` extends (None for a whole leaf)."""
    for name, is_tree, child in store.read_tree(oid):
        if name == BASE_TREE and is_tree:
            return child
    return None


def iter_items(store: ObjectStore, root: Node | None, start: int = 0, end: int | None = None) -> Iterator[StoredItem]:
    """Records ``[start, end)`` in order, skipping whole subtrees before ``start``."""
    if root is None:
        return
    end = root.items if end is None else min(end, root.items)
    if start >= end:
        return

    def walk(node: Node, base: int) -> Iterator[StoredItem]:
        kids = _children(store, node.oid)
        if kids is None:
            for k, it in enumerate(read_leaf(store, node.oid)):
                idx = base + k
                if start <= idx < end:
                    yield StoredItem(idx, it, node.oid)
            return
        for kid in kids:
            if base + kid.items > start and base < end:
                yield from walk(kid, base)
            base += kid.items
            if base >= end:
                return

    yield from progress.iterate(walk(root, 0), "reading records", end - start)


def item_index_of_turn(store: ObjectStore, root: Node | None, turn: int) -> int:
    """The record index of conversational turn number ``turn`` (0-based), descending by counts."""
    if root is None or not 0 <= turn < root.turns:
        raise IndexError(turn)
    node, base, remaining = root, 0, turn
    while True:
        kids = _children(store, node.oid)
        if kids is None:
            for k, it in enumerate(read_leaf(store, node.oid)):
                if it.is_turn:
                    if remaining == 0:
                        return base + k
                    remaining -= 1
            raise CorruptObjectError("sequence turn counts are inconsistent")
        for kid in kids:
            if remaining < kid.turns:
                node = kid
                break
            remaining -= kid.turns
            base += kid.items
        else:
            raise CorruptObjectError("sequence turn counts are inconsistent")


def turns_before(store: ObjectStore, root: Node | None, index: int) -> int:
    """How many conversational turns the records ``[0, index)`` hold, descending by
    counts (whole subtrees before ``index`` are not opened)."""
    if root is None or index <= 0:
        return 0
    if index >= root.items:
        return root.turns
    node, base, turns = root, 0, 0
    while (kids := _children(store, node.oid)) is not None:
        for kid in kids:
            if base + kid.items > index:
                node = kid
                break
            base += kid.items
            turns += kid.turns
        else:
            return turns
    return turns + sum(1 for it in read_leaf(store, node.oid)[: index - base] if it.is_turn)


# ---------------------------------------------------------------------------- changing


def append(store: ObjectStore, root: Node | None, items: Iterable[Item], packer: Packer | None = None) -> Node | None:
    """The sequence with ``items`` added at the end: rewrites the last leaf and the
    right spine, reading and writing one tree per level whatever the length.

    Levels are cut into groups of :data:`FANOUT` from their left end, so every group
    but the last is the same before and after the append, and so is the tree above
    it: at each level only the last group's nodes need grouping again. They are the
    children of the spine's node one level up, which the walk down has read.
    """
    if root is None:
        return _build_levels(store, _chunk(store, items, packer))
    spine: list[list[Node]] = []  # children of the root, then of its last child, ...
    last = root
    while (kids := _children(store, last.oid)) is not None:
        spine.append(kids)
        last = kids[-1]
    tail, base = read_leaf_as_base(store, last.oid)
    new_leaves = _chunk(store, _concat(tail, items), packer, base)
    level = new_leaves
    for kids in reversed(spine[1:]):
        level = _group(store, kids[:-1] + level)  # (kids[0] starts a group of its level)
    new = _build_levels(store, (spine[0][:-1] + level) if spine else level)
    assert new is not None  # (the last leaf's records at least)
    store.remember("appended", new.oid, (root.oid, tuple(new_leaves)))
    return new


def added_leaves(store: ObjectStore, old: Node | None, new: Node | None) -> list[Node]:
    """The leaves of ``new`` from the one that replaced ``old``'s last leaf on, where
    ``new`` is ``old`` with records added by :func:`append` (known without reading
    the trees when that append ran in this process)."""
    if new is None:
        return []
    if old is None:
        return leaves(store, new)
    known = store.derived.get(("appended", new.oid))
    if isinstance(known, tuple) and known[0] == old.oid:
        return list(known[1])
    return leaves(store, new)[len(leaves(store, old)) - 1 :]


def truncate(store: ObjectStore, root: Node | None, n: int) -> Node | None:
    """The first ``n`` records: leaves before the cut are reused as they are."""
    kept: list[Node] = []
    base = 0
    for leaf in leaves(store, root):
        if base + leaf.items <= n:
            kept.append(leaf)
            base += leaf.items
            continue
        if base < n:
            kept.extend(_chunk(store, read_leaf(store, leaf.oid)[: n - base]))  # stored items: no new payloads
        break
    return _build_levels(store, kept)


def splice(
    store: ObjectStore, root: Node | None, start: int, end: int, replacement: Iterable[Item], packer: Packer | None = None
) -> Node | None:
    """Replace records ``[start, end)`` by ``replacement``.

    Leaves that end before ``start`` are reused. From the leaf that holds ``start`` on,
    records are chunked again until, past the edit, a new boundary falls exactly where
    an old leaf ended; from there on the old leaves are reused as they are (a boundary
    depends only on the records since the previous one).
    """
    all_leaves = leaves(store, root)
    replacement = list(replacement)
    out: list[Node] = []
    i = 0
    pos = 0
    # A leaf that ends exactly at ``start`` is chunked again too: it may be the open
    # last leaf, which the inserted records would continue.
    while i < len(all_leaves) and pos + all_leaves[i].items < start:
        out.append(all_leaves[i])
        pos += all_leaves[i].items
        i += 1
    w = _Writer(store, packer)

    replaced = False
    for j in range(i, len(all_leaves)):
        for it in read_leaf(store, all_leaves[j].oid):
            if pos == start and not replaced:
                replaced = True
                for r in replacement:
                    w.add(r)
            if not start <= pos < end:
                w.add(it)
            pos += 1
        if replaced and pos >= end and not w.current:
            return _build_levels(store, out + w.finish() + all_leaves[j + 1 :])
    if not replaced:
        for r in replacement:
            w.add(r)
    return _build_levels(store, out + w.finish())


def _concat(first: list[Item], rest: Iterable[Item]) -> Iterator[Item]:
    yield from first
    yield from rest

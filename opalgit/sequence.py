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

This module needs only an :class:`~opalgit.store.ObjectStore`; it runs unchanged on
the in-memory twin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

from . import codec, payloads
from .errors import CorruptObjectError
from .payloads import Location, Packer
from .store import ObjectStore

# 16 rather than 32: a fork or an append rewrites one leaf around its cut, so smaller
# leaves make forks cheaper (10 forks of 10 turns: worst 1.26 % -> 1.08 % of one
# commit) and 20 growing commits too (1.09x -> 1.06x), for ~6 % more storage in one
# commit (leaves are compressed one by one).
LEAF_TARGET = 16
LEAF_MAX_ITEMS = 256
LEAF_MAX_BYTES = 512 * 1024
FANOUT = 64

LEAF_BLOB = "leaf"


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
    index: int  # 0-based position among all records
    item: Item
    leaf: bytes  # oid of the leaf tree that holds it


@dataclass(frozen=True)
class Node:
    oid: bytes
    items: int
    turns: int


def _is_boundary(item_id: bytes) -> bool:
    return int.from_bytes(item_id[:4], "big") % LEAF_TARGET == 0


# ------------------------------------------------------------------------------ writing


def _write_leaf(store: ObjectStore, items: list[Item], packer: Packer) -> Node:
    entries: dict[str, tuple[str, bool, bytes]] = {}
    for it in items:
        for d in it.payloads:
            name = "p" + d.hex()
            if name not in entries:
                loc = packer.location(d)
                if loc is None:  # pragma: no cover - the writer seals before writing leaves
                    raise AssertionError("a leaf is written before its payloads are")
                entries[name] = (name, loc[1], loc[0])
        for d, (oid, is_tree) in it.payload_oids.items():
            name = "p" + d.hex()
            if name not in entries:
                entries[name] = (name, is_tree, oid)
    body = {
        "ids": [it.id for it in items],
        "turns": [it.canon for it in items],
        "sums": [it.summary for it in items],
        "refs": [it.refs() for it in items],
    }
    blob = store.write_blob(codec.frame(codec.pack_canonical("leaf", body)))
    entries[LEAF_BLOB] = (LEAF_BLOB, False, blob)
    oid = store.write_tree(entries.values())
    return Node(oid, len(items), sum(1 for it in items if it.is_turn))


class _Writer:
    """Cuts items into leaves and writes them, sealing payload packs in between.

    A finished leaf waits until the pack that holds its new payloads is written. A
    pack is started once :data:`payloads.PACK_BYTES` wait, always between two leaves
    (so a leaf's new payloads are in one pack), and compresses in the background
    while the next records are encoded: its leaves are written when the next pack
    starts, or at :meth:`finish`.
    """

    def __init__(self, store: ObjectStore, packer: Packer | None) -> None:
        self.store = store
        self.packer = packer if packer is not None else Packer(store)
        self.current: list[Item] = []
        self.size = 0
        self.waiting: list[list[Item]] = []  # leaves whose payloads are not packed yet
        self.in_flight: list[list[Item]] = []  # leaves whose pack is being compressed
        self.done: list[Node] = []

    def add(self, it: Item) -> None:
        self.current.append(it)
        self.size += len(it.canon)
        for d, data in it.payloads.items():
            self.packer.add(d, data)
        if _is_boundary(it.id) or len(self.current) >= LEAF_MAX_ITEMS or self.size >= LEAF_MAX_BYTES:
            self.close_leaf()

    def close_leaf(self) -> None:
        if self.current:
            self.waiting.append(self.current)
            self.current, self.size = [], 0
        if self.packer.pending_bytes >= payloads.PACK_BYTES:
            self._rotate()

    def _rotate(self) -> None:
        self.packer.wait()
        self._write(self.in_flight)
        self.packer.start()
        self.in_flight, self.waiting = self.waiting, []

    def _write(self, leaves: list[list[Item]]) -> None:
        for items in leaves:
            self.done.append(_write_leaf(self.store, items, self.packer))
        leaves.clear()

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


def _chunk(store: ObjectStore, items: Iterable[Item], packer: Packer | None = None) -> list[Node]:
    w = _Writer(store, packer)
    out: list[Node] = []
    for it in items:
        w.add(it)
        if w.done:
            out.extend(w.take())
    out.extend(w.finish())
    return out


def _build_levels(store: ObjectStore, leaves: list[Node]) -> Node | None:
    level = leaves
    if not level:
        return None
    while len(level) > 1:
        parents: list[Node] = []
        for start in range(0, len(level), FANOUT):
            group = level[start : start + FANOUT]
            entries = [(f"{i:04d}-{n.items}-{n.turns}", True, n.oid) for i, n in enumerate(group)]
            oid = store.write_tree(entries)
            parents.append(Node(oid, sum(n.items for n in group), sum(n.turns for n in group)))
        level = parents
    return level[0]


def build(store: ObjectStore, items: Iterable[Item], packer: Packer | None = None) -> Node | None:
    """Store a whole sequence; returns its root, or None when it is empty.

    ``packer`` receives the new payloads; pass one to continue a pack chain and to
    refer to payloads already stored (see :func:`payload_locations`).
    """
    return _build_levels(store, _chunk(store, items, packer))


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
    """Every leaf, left to right (reads interior trees only)."""
    if root is None:
        return []
    out: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        kids = _children(store, node.oid)
        if kids is None:
            out.append(node)
        else:
            stack.extend(reversed(kids))
    return out


def _hex_digest(oid: bytes, name: str) -> bytes:
    try:
        return bytes.fromhex(name[1:])
    except ValueError:
        raise CorruptObjectError(f"leaf {oid.hex()[:12]} has a malformed entry {name!r}") from None


def payload_locations(store: ObjectStore, root: Node | None) -> dict[bytes, Location]:
    """Where every payload of a sequence is stored (reads the leaf trees, not the leaves)."""
    out: dict[bytes, Location] = {}
    for leaf in leaves(store, root):
        for name, is_tree, child in store.read_tree(leaf.oid):
            if name.startswith("p") and len(name) == 65:
                out.setdefault(_hex_digest(leaf.oid, name), (child, is_tree))
    return out


def read_leaf(store: ObjectStore, oid: bytes) -> list[Item]:
    entries = store.read_tree(oid)
    payload_oids: dict[bytes, Location] = {}
    blob = None
    for name, is_tree, child in entries:
        if name == LEAF_BLOB:
            blob = child
        elif name.startswith("p") and len(name) == 65:
            payload_oids[_hex_digest(oid, name)] = (child, is_tree)
        else:
            raise CorruptObjectError(f"leaf {oid.hex()[:12]} has a stray entry {name!r}")
    if blob is None:
        raise CorruptObjectError(f"tree {oid.hex()[:12]} is not a sequence leaf")
    body = codec.unpack_canonical(codec.unframe(store.read_blob(blob)), "leaf")
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

    yield from walk(root, 0)


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


# ---------------------------------------------------------------------------- changing


def append(store: ObjectStore, root: Node | None, items: Iterable[Item], packer: Packer | None = None) -> Node | None:
    """The sequence with ``items`` added at the end: rewrites the last leaf and the spine."""
    all_leaves = leaves(store, root)
    tail: list[Item] = []
    if all_leaves:
        tail = read_leaf(store, all_leaves.pop().oid)
    return _build_levels(store, all_leaves + _chunk(store, _concat(tail, items), packer))


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

"""Where a sequence's payloads are stored, cached on this machine.

A commit names the payloads its parent state already stores instead of writing them
again (:func:`states.packer_for`), so it must know where each one is. That is
written in the leaf trees, one per ~16 records: reading them all cost an
incremental commit of 10,000 turns ~40 ms, more than storing its new turns. So the
answer is kept in ``<git-common-dir>/opal/cache/payloads/<root id>``, one file per
sequence root: a root's leaves never change, so a file can never be stale, and a
commit that appends writes its new root's file from its parent's plus the leaves it
wrote.

The cache is only a shortcut: each file carries a SHA-256 of its body and is read
again from the leaf trees when it is missing, damaged or unreadable; only the
newest :data:`KEEP` files are kept.
"""

from __future__ import annotations

import hashlib
import os

from . import sequence
from .fileio import keep_newest, replace_atomically
from .payloads import Location
from .store import ObjectStore

MAGIC = b"OPLC1"
KEEP = 16
_RECORD = 53  # digest (32) + object id (20) + is-a-tree flag (1)


def _folder(opal_dir: str) -> str:
    return os.path.join(opal_dir, "cache", "payloads")


def load(opal_dir: str, root: bytes) -> dict[bytes, Location] | None:
    try:
        with open(os.path.join(_folder(opal_dir), root.hex()), "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    head = len(MAGIC) + 32
    body = memoryview(data)[head:]
    if data[: len(MAGIC)] != MAGIC or len(body) % _RECORD or hashlib.sha256(body).digest() != data[len(MAGIC) : head]:
        return None
    out: dict[bytes, Location] = {}
    for at in range(0, len(body), _RECORD):
        rec = bytes(body[at : at + _RECORD])
        out[rec[:32]] = (rec[32:52], rec[52] == 1)
    return out


def save(opal_dir: str, root: bytes, locations: dict[bytes, Location]) -> None:
    body = b"".join(d + oid + (b"\x01" if is_tree else b"\x00") for d, (oid, is_tree) in locations.items())
    folder = _folder(opal_dir)
    try:
        os.makedirs(folder, exist_ok=True)
        replace_atomically(os.path.join(folder, root.hex()), MAGIC + hashlib.sha256(body).digest() + body, sync=False)
        keep_newest(folder, KEEP)
    except OSError:
        pass  # a cache that cannot be written is only a slower next commit


_recent: dict[bytes, dict[bytes, Location]] = {}  # this process's last answers, by root


def of(store: ObjectStore, opal_dir: str, root: sequence.Node | None) -> dict[bytes, Location]:
    """Where every payload of the sequence ``root`` is (what
    :func:`sequence.payload_locations` reads from the leaf trees). Callers must not
    change the mapping returned."""
    if root is None:
        return {}
    found = _recent.get(root.oid)
    if found is None:
        found = load(opal_dir, root.oid)
        if found is None:
            found = sequence.payload_locations(store, root)
            save(opal_dir, root.oid, found)
        if len(_recent) >= 4:
            _recent.clear()
        _recent[root.oid] = found
    return found


def after_append(
    store: ObjectStore, opal_dir: str, old: sequence.Node | None, new: sequence.Node | None, known: dict[bytes, Location]
) -> None:
    """Cache ``new``'s locations, ``new`` being ``old`` with records appended and
    ``known`` being ``old``'s locations: an append keeps every old leaf but the last,
    which it writes again with the same payloads, so only the leaves from there on
    can add to them."""
    if new is None:
        return
    kept = len(sequence.leaves(store, old)) - 1 if old is not None else 0
    out = dict(known)
    for leaf in sequence.leaves(store, new)[max(kept, 0) :]:
        for d, loc in sequence.leaf_payloads(store, leaf.oid).items():
            out.setdefault(d, loc)
    save(opal_dir, new.oid, out)

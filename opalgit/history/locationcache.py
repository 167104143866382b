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

import os
from typing import Mapping

from opalgit.fileio import read_sealed, write_sealed
from opalgit.history import sequence
from opalgit.history.payloads import Location
from opalgit.store.objects import ObjectStore

MAGIC = b"OPLC1"
KEEP = 16
_RECORD = 53  # digest (32) + object id (20) + is-a-tree flag (1)


def _folder(opal_dir: str) -> str:
    return os.path.join(opal_dir, "cache", "payloads")


def load(opal_dir: str, root: bytes) -> dict[bytes, Location] | None:
    sealed = read_sealed(os.path.join(_folder(opal_dir), root.hex()), MAGIC)
    if sealed is None or len(sealed) % _RECORD:
        return None
    body = sealed.tobytes()
    _remember_body(root, body)
    return {body[at : at + 32]: (body[at + 32 : at + 52], body[at + 52] == 1) for at in range(0, len(body), _RECORD)}


def _records(locations: Mapping[bytes, Location]) -> bytes:
    return b"".join(d + oid + (b"\x01" if is_tree else b"\x00") for d, (oid, is_tree) in locations.items())


def save(opal_dir: str, root: bytes, locations: Mapping[bytes, Location], *, body: bytes | None = None) -> None:
    """Cache ``locations`` for ``root`` (``body``: the same, already as file records)."""
    if body is None:
        body = _records(locations)
    _remember_body(root, body)
    write_sealed(_folder(opal_dir), root.hex(), MAGIC, [body], KEEP)


_recent: dict[bytes, dict[bytes, Location]] = {}  # this process's last answers, by root
_bodies: dict[bytes, bytes] = {}  # the same as file records, so that an append only adds its own


def _remember_body(root: bytes, body: bytes) -> None:
    if len(_bodies) >= 4:
        _bodies.clear()
    _bodies[root] = body


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
    added: dict[bytes, Location] = {}
    for leaf in sequence.added_leaves(store, old, new):
        for d, loc in sequence.leaf_payloads(store, leaf.oid).items():
            if d not in known and d not in added:
                added[d] = loc
    # The old file's records, then the new ones: what the whole mapping would write,
    # without writing out the thousands of records the parent had again.
    before = _bodies.get(old.oid) if old is not None else b""
    if before is None:
        before = _records(known)
    save(opal_dir, new.oid, {}, body=before + _records(added))

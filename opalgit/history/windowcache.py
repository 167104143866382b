"""The window of a pack chain's newest pack, cached on this machine.

A new pack is compressed against the last :data:`payloads.WINDOW` bytes of the chain
it continues, so a commit must first have them: that meant decompressing the chain
from its keyframe (up to 16 MiB of content, ~30 ms), more than a ten-turn commit's
own work. The commit that wrote the pack had those bytes in hand, so it leaves them
in ``<git-common-dir>/opal/cache/windows/<pack tree id>``. A pack's window never
changes (the id names the pack and, through its base, the whole chain), so a file
can never be stale.

The cache is only a shortcut: each file carries a SHA-256 of its body, and a file
that is missing, damaged or unreadable means the chain is decoded as before; only
the newest :data:`KEEP` files are kept (a window is up to 4 MiB).
"""

from __future__ import annotations

import os
import struct
import threading
from typing import Callable, Sequence

from opalgit.fileio import read_sealed, write_sealed

MAGIC = b"OPW1"
KEEP = 2
_FACTS = struct.Struct(">QI")  # chain bytes, depth


def _folder(opal_dir: str) -> str:
    return os.path.join(opal_dir, "cache", "windows")


def load(opal_dir: str, pack: bytes) -> tuple[bytes, int, int] | None:
    """(window, depth, chain) of the pack tree ``pack``, or None when not cached."""
    body = read_sealed(os.path.join(_folder(opal_dir), pack.hex()), MAGIC)
    if body is None or len(body) < _FACTS.size:
        return None
    chain, depth = _FACTS.unpack_from(body)
    return bytes(body[_FACTS.size :]), depth, chain


def save(opal_dir: str, pack: bytes, window: Sequence[bytes | memoryview], depth: int, chain: int) -> None:
    """Cache the window of the pack tree ``pack``: ``window`` is its pieces, in order
    (written as they are, not joined: 4 MiB copied twice cost ~5 ms)."""
    if isinstance(window, (bytes, bytearray, memoryview)):
        window = (window,)
    write_sealed(_folder(opal_dir), pack.hex(), MAGIC, [_FACTS.pack(chain, depth), *window], KEEP)


def load_soon(opal_dir: str, pack: bytes) -> Callable[[], tuple[bytes, int, int] | None]:
    """:func:`load` on a thread, started now; call the result for the answer.

    Reading and hashing 4 MiB release the GIL, so this overlaps the reading and
    encoding of a commit's new records, which come before its first pack."""
    out: list = [None]
    thread = threading.Thread(target=lambda: out.__setitem__(0, load(opal_dir, pack)), name="opal-window", daemon=True)
    thread.start()

    def result() -> tuple[bytes, int, int] | None:
        thread.join()
        return out[0]

    return result


def save_soon(
    opal_dir: str, pack: bytes, window: Sequence[bytes | memoryview], depth: int, chain: int
) -> threading.Thread:
    """:func:`save` on a thread (returned, started), so that it overlaps the rest of the
    operation; the process waits for it before it exits (it is not a daemon)."""
    thread = threading.Thread(target=save, args=(opal_dir, pack, window, depth, chain), name="opal-window-save")
    thread.start()
    return thread

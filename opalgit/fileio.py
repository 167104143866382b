"""Durable file replacement, shared by everything that writes a small file of its own.

Pure standard library. A file is written under a temporary name in its own folder,
synced, then renamed over the old one, so readers see the old contents or the new,
never half of either, and a crash leaves at most a temporary file behind.
"""

from __future__ import annotations

import os
from typing import Sequence

# Not tempfile.mkstemp: importing tempfile (with shutil, random, bz2 and lzma) costs
# several milliseconds, a few per cent of a small commit's whole run.
_TEMP_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


def create_temp(directory: str, prefix: str, suffix: str = "") -> tuple[int, str]:
    """A new file only this process opened (what ``tempfile.mkstemp`` does: a random
    name, created exclusively, not following a link, mode 0600): its descriptor and path."""
    for _ in range(100):
        path = os.path.join(directory, prefix + os.urandom(6).hex() + suffix)
        try:
            return os.open(path, _TEMP_FLAGS, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {directory}")


def fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until all of ``data`` is written (a pipe or a signal may take less)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def replace_atomically(
    path: str, data: bytes | Sequence[bytes | memoryview], *, mode: int | None = None, sync: bool = True
) -> None:
    """Write ``data`` (bytes, or pieces written one after the other) to ``path``
    whole, or not at all (``mode``: chmod before the rename; ``sync=False`` for a
    checksummed cache, where a file torn by a crash is only a miss and waiting for
    the disk is not worth it)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = create_temp(directory, "." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, (bytes, bytearray, memoryview)):
                fh.write(data)
            else:
                for piece in data:
                    fh.write(piece)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def keep_newest(folder: str, keep: int, suffix: str = "") -> None:
    """Delete all but the ``keep`` most recently modified files of ``folder`` whose
    names end with ``suffix`` (local caches and hints that bound their own size)."""
    try:
        names = [n for n in os.listdir(folder) if n.endswith(suffix)]
    except OSError:
        return
    if len(names) <= keep:
        return

    def age(name: str) -> float:
        try:
            return os.path.getmtime(os.path.join(folder, name))
        except OSError:
            return 0.0  # gone already: first in line

    for name in sorted(names, key=age)[: len(names) - keep]:
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def read_sealed(path: str, magic: bytes) -> memoryview | None:
    """The body of a local cache file written by :func:`write_sealed`; None when it is
    missing, unreadable, of another kind, or not whole (its SHA-256 does not match)."""
    import hashlib  # here: importing it costs ~3 ms that commands without caches skip

    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    head = len(magic) + 32
    if len(data) < head or data[: len(magic)] != magic:
        return None
    body = memoryview(data)[head:]
    if hashlib.sha256(body).digest() != data[len(magic) : head]:
        return None
    return body


def write_sealed(folder: str, name: str, magic: bytes, pieces: Sequence[bytes | memoryview], keep: int) -> None:
    """Write the local cache file ``folder/name``: ``magic``, the SHA-256 of the body,
    then the body (``pieces``, in order). It is not fsynced (a file torn by a crash
    fails the check, which is only a miss), only the newest ``keep`` files of the
    folder are kept, and a file that cannot be written is only a slower next time."""
    import hashlib

    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece)
    try:
        os.makedirs(folder, exist_ok=True)
        replace_atomically(os.path.join(folder, name), [magic, digest.digest(), *pieces], sync=False)
        keep_newest(folder, keep)
    except OSError:
        pass

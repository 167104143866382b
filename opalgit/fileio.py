"""Files opal reads from a user, and durable replacement of the files it writes.

Reading: :func:`open_input` opens a path a user gave (a session file, a config or
rules file) only when it is a regular file, and says in one line what it is
otherwise: a folder, a FIFO (which would block the read until a writer comes, then
never end), a device such as ``/dev/zero`` (endless) or ``/dev/null``, a socket, a
symbolic link that loops or leads nowhere. :data:`MAX_PIECE` bounds what is read in
one piece (a line, a whole JSON document).

Writing: a file is written under a temporary name in its own folder, synced, then
renamed over the old one, so readers see the old contents or the new, never half of
either, and a crash leaves at most a temporary file behind.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO, Sequence

from opalgit.errors import InputError

#: The longest line of a session file, and the largest file read whole, that opal
#: reads: V8's longest string (2**29 - 24 characters), so no agent written in
#: JavaScript wrote or read more in one piece, and the memory a read takes is bounded.
MAX_PIECE = 1 << 29

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a device (as /dev/null and /dev/zero are)"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _nonblocking(path: str, flags: int) -> int:
    # A FIFO opened for reading blocks until a writer opens it; O_NONBLOCK returns at
    # once, so fstat can refuse it. It changes nothing for a regular file.
    return os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words (for an error)."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def folder_problem(path: str) -> str | None:
    """What is wrong with ``path`` as a folder a user named (``-C``, ``--cwd``,
    ``--keep``), in words; None when it is a folder (or a link to one)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link that loops (following it leads back to it)"
        if exc.errno == errno.ENOENT:
            return f"a symbolic link to {os.readlink(path)}, which does not exist" if os.path.islink(path) \
                else "no such folder"
        return f"cannot be opened ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return None
    return "this is a file, not a folder" if stat.S_ISREG(mode) else f"this is {kind_of(mode)}, not a folder"


def open_input(path: str, *, what: str = "session file", hint: str | None = None,
               buffering: int = -1) -> BinaryIO:
    """``path`` opened for reading in binary, when it is a regular file (a link to one
    is fine). Raises FileNotFoundError when nothing is there (the caller knows whether
    that is an error), and :class:`InputError` naming the path, what it is and what to
    do in every other case; never blocks on a FIFO or a device."""
    hint = hint or f"give the path of the {what} itself"
    try:
        fh = open(path, "rb", buffering=buffering, opener=_nonblocking)
    except FileNotFoundError:
        if os.path.islink(path):
            target = os.readlink(path)
            raise InputError(f"a symbolic link to {target}, which does not exist", path=path, hint=hint) from None
        raise
    except IsADirectoryError:
        raise InputError(f"this is a folder, not a {what}", path=path, hint=hint) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError("a symbolic link that loops (following it leads back to it)", path=path,
                             hint=f"point the link at the {what}, or give the file's own path") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise InputError(f"cannot read the {what}: permission denied", path=path,
                             hint="check its permissions (ls -l), or run as the user who owns it") from None
        raise InputError(f"cannot open the {what} ({exc.strerror or exc})", path=path, hint=hint) from None
    mode = os.fstat(fh.fileno()).st_mode
    if not stat.S_ISREG(mode):
        fh.close()
        # Not read at all: a pipe or a device may never end, and opal reads a session
        # file again from where the last commit stopped, which a stream cannot give.
        if what == "session file" and not stat.S_ISDIR(mode):
            hint += "; to record a stream, save it to a file first (cat PIPE > session.jsonl)"
        raise InputError(f"this is {kind_of(mode)}, not a {what}: opal reads only regular files", path=path,
                         hint=hint)
    if hasattr(os, "set_blocking"):
        os.set_blocking(fh.fileno(), True)
    return fh


def read_input(path: str, *, what: str, hint: str | None = None, limit: int = MAX_PIECE) -> bytes:
    """The whole of a regular file a user gave (see :func:`open_input`), refused
    with a clear error when it is larger than ``limit``."""
    with open_input(path, what=what, hint=hint) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"the {what} is larger than {limit >> 20} MiB, more than opal reads whole", path=path,
                         hint=hint or f"check that this is the {what} you meant")
    return data

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

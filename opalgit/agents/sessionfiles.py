"""Session files on disk, as every adapter's ``files.py`` finds and reads them: a folder's
listing, a ``<id>.jsonl`` session file, and the side folder an agent keeps beside a session
(Claude Code's ``<session>/``, Copilot CLI's session folder), read without following links.

Shared by the adapters (which never import each other), as :mod:`opalgit.agents.tools` is.
"""

from __future__ import annotations

import os
import stat
from typing import Callable

from opalgit.agents.base import SessionFile

__all__ = ["SIDE_FILE_LIMIT", "jsonl_session", "listdir", "read_side_folder"]

#: Side files bigger than this are not stored (said in one line): a stray dump in a
#: session folder must not grow every state.
SIDE_FILE_LIMIT = 64 * 1024 * 1024


def listdir(folder: str) -> list[str]:
    """The names in ``folder``; none when it cannot be listed (a session folder that is not there)."""
    try:
        return os.listdir(folder)
    except OSError:
        return []


def jsonl_session(agent: str, path: str) -> SessionFile | None:
    """The session file at ``path`` when it is a regular ``<id>.jsonl`` file."""
    name = os.path.basename(path)
    if not name.endswith(".jsonl") or name == ".jsonl":
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return SessionFile(agent, name[: -len(".jsonl")], path, st.st_mtime, st.st_size)


def read_side_folder(folder: str, warnings: list[str],
                     skip: Callable[[str, str], bool] = lambda rel, name: False) -> dict[str, bytes]:
    """Every regular file under ``folder`` by "/"-separated relative path, but those ``skip(rel,
    name)`` names. A symbolic link, a file that is not regular, one over :data:`SIDE_FILE_LIMIT`
    or one that cannot be read is not stored, and ``warnings`` says so in one line each."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, files in os.walk(folder):
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for d in links:
            warnings.append(f"{os.path.join(dirpath, d)}: a symbolic link; not followed, not stored with the session")
        dirnames[:] = sorted(d for d in dirnames if d not in links)
        for name in sorted(files):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, folder).replace(os.sep, "/")
            if skip(rel, name):
                continue
            try:
                st = os.lstat(full)
                if not stat.S_ISREG(st.st_mode):
                    what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
                    warnings.append(f"{full}: {what}; not stored with the session")
                    continue
                if st.st_size > SIDE_FILE_LIMIT:
                    warnings.append(f"{full}: larger than {SIDE_FILE_LIMIT >> 20} MiB; not stored with the session")
                    continue
                # O_NOFOLLOW: a file swapped for a link since the lstat is refused, not followed.
                fd = os.open(full, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
                with os.fdopen(fd, "rb") as fh:
                    out[rel] = fh.read()
            except OSError as exc:
                warnings.append(f"{full}: cannot be read ({exc.strerror or exc}); not stored with the session")
    return out

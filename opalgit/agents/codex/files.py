"""Where Codex CLI keeps its sessions: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``.

``$CODEX_HOME`` defaults to ``~/.codex``; archived threads are under
``archived_sessions/``, and old rollouts may be compressed (``.jsonl.zst``, whose
offsets are those of the decompressed text). Finding a thread by id, listing a
folder's threads (by the ``cwd`` of their first line) and opening a rollout, plain or
compressed, live here; what the lines mean is :mod:`.read`'s.
"""

from __future__ import annotations

import io
import os
import re
from typing import IO, Any, Iterator, Mapping

from opalgit import codec, jsonl
from opalgit.agents.base import SessionFile, home_folder, open_session
from opalgit.agents.codex.format import AGENT, is_str
from opalgit.errors import CorruptObjectError, InputError

__all__ = ["codex_home", "decompressed_head", "find_session", "find_sessions", "is_zst", "open_rollout", "rollout_name"]

_HEAD_LIMITS = (256 * 1024, 16 * 1024 * 1024)
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_MAX_ZST = 1 << 31
_NAME_RE = re.compile(r"^rollout-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2})-(.+?)\.jsonl(\.zst)?$")


def rollout_name(path: str) -> tuple[str, str | None] | None:
    """``(thread id, rollout id or None)`` from a ``rollout-<ts>-<thread>[_<rollout>].jsonl[.zst]`` name."""
    m = _NAME_RE.match(os.path.basename(path))
    if not m:
        return None
    thread, _, rollout = m.group(2).partition("_")
    return thread, rollout or None


def codex_home(env: Mapping[str, str]) -> str | None:
    """``$CODEX_HOME`` when set and non-empty, else ``$HOME/.codex``; None without either."""
    return home_folder(env, "CODEX_HOME", ".codex")


def is_zst(path: str, head: bytes = b"") -> bool:
    return path.endswith(".zst") or head.startswith(_ZSTD_MAGIC)


def open_rollout(path: str) -> IO[bytes]:
    """A rollout opened for reading; a ``.zst`` one decompressed into memory."""
    fh = open_session(path, "give the path of a rollout-*.jsonl file under ~/.codex/sessions")
    if not is_zst(path, fh.read(4)):
        fh.seek(0)
        return fh
    with fh:
        fh.seek(0)
        data = fh.read(_MAX_ZST)
    try:
        # Offsets of a .zst rollout are offsets in its decompressed text.
        return io.BytesIO(codec.zstd_decompress(data))
    except CorruptObjectError as exc:
        raise InputError(f"this .zst file does not decompress ({exc})", path=path,
                         hint="Codex compresses old rollouts with zstd; the file may be damaged") from None


def decompressed_head(path: str, head: bytes) -> bytes | None:
    """The first bytes of a ``.zst`` rollout's text, None when they do not decompress.

    zstd emits whole blocks (up to 128 KiB of text): a short head may decompress to
    nothing, so more of the file itself is read."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(4 << 20)
    except OSError:
        data = head
    try:
        return codec.zstd_decompress(data if len(data) > len(head) else head, limit=1 << 20)
    except CorruptObjectError:
        return None


def _first_line(path: str) -> Any:
    """The parsed first non-empty line of a rollout (plain or zst), or None."""
    try:
        with open(path, "rb") as fh:
            if path.endswith(".zst"):
                data = fh.read(4 << 20)
                for limit in _HEAD_LIMITS:
                    text = codec.zstd_decompress(data, limit=limit)
                    lines = [ln for ln in text.split(b"\n")[:-1] if ln.strip()]
                    if lines or len(text) < limit:
                        return jsonl.parse(lines[0]) if lines else None
                return None
            while True:
                raw = fh.readline(_HEAD_LIMITS[-1])
                if not raw or not raw.endswith(b"\n"):
                    return None
                if raw.strip():
                    return jsonl.parse(raw[:-1])
    except (OSError, jsonl.ParseFailure, CorruptObjectError):
        return None


def _rollouts(home: str) -> Iterator[str]:
    """Rollout files under ``sessions/`` and ``archived_sessions/``; plain wins over ``.zst``."""
    for sub in ("sessions", "archived_sessions"):
        for folder, dirs, files in os.walk(os.path.join(home, sub)):
            dirs.sort()
            names = set(files)
            for name in sorted(files):
                if not name.startswith("rollout-"):
                    continue
                if name.endswith(".jsonl") or (name.endswith(".jsonl.zst") and name[:-4] not in names):
                    yield os.path.join(folder, name)


def _session_file(sid: str, path: str) -> SessionFile | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return SessionFile(AGENT, sid, path, st.st_mtime, st.st_size)





def find_sessions(cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
    """The threads whose first line (``session_meta``) names ``cwd``, newest first."""
    home = codex_home(env)
    if home is None or not os.path.isdir(home):
        return []
    wanted = {cwd.rstrip("/") or "/"}
    try:
        wanted.add(os.path.realpath(cwd))
    except (OSError, ValueError):
        pass
    found = []
    for path in _rollouts(home):
        head = _first_line(path)
        if not isinstance(head, dict) or head.get("type") != "session_meta":
            continue
        p = head.get("payload")
        if not isinstance(p, dict) or not is_str(p.get("cwd")) or (p["cwd"].rstrip("/") or "/") not in wanted:
            continue
        named = rollout_name(path)
        sid = p["id"] if is_str(p.get("id")) else (named[0] if named else os.path.basename(path))
        sf = _session_file(sid, path)
        if sf is not None:
            found.append(sf)
    return sorted(found, key=lambda s: (-s.mtime, s.path))


def find_session(session_id: str, env: Mapping[str, str]) -> SessionFile | None:
    """The rollout of a thread, by thread id, ``<thread>_<rollout>``, rollout id, a file
    name, or (8 characters or more) part of one; the best match, newest first."""
    sid = session_id
    for suffix in (".zst", ".jsonl"):
        sid = sid.removesuffix(suffix)
    named = rollout_name(sid + ".jsonl")
    if named is not None:
        sid = named[0] if named[1] is None else f"{named[0]}_{named[1]}"
    if not sid or sid in (".", "..") or any(c in sid for c in "/\\\x00"):
        return None
    home = codex_home(env)
    if home is None:
        return None
    best: tuple[tuple[int, float], SessionFile] | None = None
    for path in _rollouts(home):
        named = rollout_name(path)
        if named is None:
            continue
        thread, rollout = named
        whole = thread if rollout is None else f"{thread}_{rollout}"
        score = 3 if sid in (thread, whole) else 2 if sid == rollout else 1 if len(sid) >= 8 and sid in whole else 0
        if not score:
            continue
        sf = _session_file(thread, path)
        if sf is not None and (best is None or (score, sf.mtime) > best[0]):
            best = ((score, sf.mtime), sf)
    return best[1] if best else None

"""Where Claude Code keeps its sessions: ``<config>/projects/<project key>/<id>.jsonl``.

The config folder is ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``; the project key is the
working folder with every character but ASCII letters and digits made ``-`` (older
versions kept ``.`` and ``_``; long keys are cut and suffixed with a hash). Beside a
session file, ``<id>/`` holds its side files (``subagents/agent-*.jsonl``,
``tool-results/`` ...). Finding a session by id, listing a folder's sessions and
reading a session's side folder live here; nothing here parses a record.
"""

from __future__ import annotations

import os
from typing import Mapping

from opalgit.agents import sessionfiles
from opalgit.agents.base import SessionFile, folder_forms, home_folder

__all__ = ["base36", "config_dir", "find_session", "find_sessions", "java_string_hash", "legacy_project_key",
           "parent_file", "project_key", "projects_dir", "side_folder"]

AGENT = "claude"
#: Project keys longer than this are cut and suffixed with a hash of the cwd.
KEY_LIMIT = 200
_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


# ------------------------------------------------------------------------ project keys


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def base36(n: int) -> str:
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + out
        if not n:
            return out


def _key(cwd: str, keep: frozenset[str], limit: bool) -> str:
    # One '-' per UTF-16 code unit: a character outside the BMP becomes two.
    key = "".join(ch if ch in keep else ("--" if ord(ch) > 0xFFFF else "-") for ch in cwd)
    if limit and len(key) > KEY_LIMIT:
        key = f"{key[:KEY_LIMIT]}-{base36(abs(java_string_hash(cwd)))}"
    return key


def project_key(cwd: str) -> str:
    """The folder name Claude Code uses under ``projects/`` for the working folder ``cwd``."""
    return _key(cwd, _ASCII_ALNUM, True)


def legacy_project_key(cwd: str) -> str:
    """The key older Claude Code versions used (they kept ``.`` and ``_``)."""
    return _key(cwd, _ASCII_ALNUM | {".", "_"}, True)


def _candidate_keys(cwd: str) -> list[str]:
    cwds = folder_forms(cwd)
    old_keep = _ASCII_ALNUM | {".", "_"}
    keys = (k for c in cwds for k in (project_key(c), legacy_project_key(c), _key(c, old_keep, False)))
    return list(dict.fromkeys(keys))


# ------------------------------------------------------------------------------ folders


def config_dir(env: Mapping[str, str]) -> str | None:
    """``$CLAUDE_CONFIG_DIR``, else ``$HOME/.claude``; None without either."""
    return home_folder(env, "CLAUDE_CONFIG_DIR", ".claude")


def projects_dir(env: Mapping[str, str]) -> str | None:
    conf = config_dir(env)
    return os.path.join(conf, "projects") if conf else None


def _listdir(folder: str) -> list[str]:
    return sessionfiles.listdir(folder)


def _session_file(path: str) -> SessionFile | None:
    """The session file at ``path`` when it is a regular ``.jsonl`` file."""
    return sessionfiles.jsonl_session(AGENT, path)


SIDE_FILE_LIMIT = sessionfiles.SIDE_FILE_LIMIT


def side_folder(path: str, warnings: list[str]) -> dict[str, bytes]:
    """The files of ``<session>/`` beside ``<session>.jsonl`` (``subagents/agent-*.jsonl``
    and their ``.meta.json``, ``tool-results/``, whatever else Claude Code keeps per
    session), by "/"-separated relative path. Symbolic links are not followed."""
    folder = path[: -len(".jsonl")] if path.endswith(".jsonl") else None
    if folder is None or not os.path.isdir(folder) or os.path.islink(folder):
        return {}
    return sessionfiles.read_side_folder(folder, warnings)


def find_sessions(cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
    """The main sessions of the working folder ``cwd``, newest first."""
    root = projects_dir(env)
    if root is None:
        return []
    keys = _candidate_keys(cwd)
    # A cut key's hash may differ between runtimes: a folder with the same
    # 200-character prefix belongs to the same project.
    prefixes = {k[: KEY_LIMIT + 1] for k in keys if len(k) > KEY_LIMIT}
    names = dict.fromkeys(keys + [n for n in _listdir(root) if prefixes and n[: KEY_LIMIT + 1] in prefixes])
    found: dict[str, SessionFile] = {}
    for name in names:
        folder = os.path.join(root, name)
        # Main sessions only: old-layout subagents are agent-*.jsonl beside them.
        for file in _listdir(folder):
            sf = _session_file(os.path.join(folder, file))
            if sf is not None and not file.startswith("agent-") and sf.size > 0:
                found.setdefault(os.path.realpath(sf.path), sf)
    return sorted(found.values(), key=lambda s: (-s.mtime, s.path))


def find_session(session_id: str, env: Mapping[str, str]) -> SessionFile | None:
    """The file of the session ``session_id`` (``.jsonl`` optional), in any project."""
    session_id = session_id[: -len(".jsonl")] if session_id.endswith(".jsonl") else session_id
    root = projects_dir(env)
    if root is None or session_id in ("", ".", "..") or any(c in session_id for c in "/\\\x00"):
        return None
    found = (_session_file(os.path.join(root, d, session_id + ".jsonl")) for d in sorted(_listdir(root)))
    return max((sf for sf in found if sf is not None), key=lambda sf: sf.mtime, default=None)


def parent_file(path: str, parent: str) -> str | None:
    """The file of session ``parent`` whose subagent's transcript is ``path``: Claude Code
    keeps it in ``<parent>/subagents/agent-*.jsonl`` (older versions: ``agent-*.jsonl``
    beside ``<parent>.jsonl``). None when it is not there."""
    folder = os.path.dirname(os.path.abspath(path))
    places = [os.path.join(folder, parent + ".jsonl")]
    if os.path.basename(folder) == "subagents":
        places.insert(0, os.path.join(os.path.dirname(os.path.dirname(folder)), parent + ".jsonl"))
    return next((p for p in places if os.path.isfile(p)), None)

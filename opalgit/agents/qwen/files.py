"""Where Qwen Code keeps its sessions: ``<runtime>/projects/<project key>/chats/<id>.jsonl``.

The runtime folder is ``$QWEN_RUNTIME_DIR``, else ``$QWEN_HOME``, else ``~/.qwen``
(Qwen Code 0.24.4 ``Storage.getRuntimeBaseDir``); the project key is the project folder
with every character but ASCII letters and digits made ``-`` (``sanitizeCwd``, lowercased
first on Windows). Finding a session by id and listing a folder's sessions live here;
nothing here parses a record.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Mapping

from opalgit.agents import sessionfiles
from opalgit.agents.base import SessionFile, folder_forms

__all__ = ["AGENT", "chats_dir", "find_session", "find_sessions", "project_key", "runtime_dir"]

AGENT = "qwen"
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]")


def project_key(cwd: str) -> str:
    """The folder name Qwen Code uses under ``projects/`` for the project folder ``cwd``."""
    return _NOT_ALNUM.sub("-", cwd.lower() if sys.platform == "win32" else cwd)


def runtime_dir(env: Mapping[str, str]) -> str | None:
    """``$QWEN_RUNTIME_DIR``, else ``$QWEN_HOME``, else ``$HOME/.qwen``; None without any."""
    for name in ("QWEN_RUNTIME_DIR", "QWEN_HOME"):
        if env.get(name):
            return os.path.abspath(os.path.expanduser(env[name]))
    home = env.get("HOME") or env.get("USERPROFILE")
    return os.path.join(home, ".qwen") if home else None


def chats_dir(env: Mapping[str, str], cwd: str) -> str | None:
    """The ``chats`` folder of the project folder ``cwd`` (where ``qwen --resume`` looks)."""
    base = runtime_dir(env)
    return os.path.join(base, "projects", project_key(cwd), "chats") if base else None


def _listdir(folder: str) -> list[str]:
    return sessionfiles.listdir(folder)


def _session_file(path: str) -> SessionFile | None:
    return sessionfiles.jsonl_session(AGENT, path)


def find_sessions(cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
    """The sessions of the project folder ``cwd`` (and of its real path), newest first."""
    found: dict[str, SessionFile] = {}
    for form in folder_forms(cwd):
        folder = chats_dir(env, form)
        if folder is None:
            continue
        for name in _listdir(folder):
            sf = _session_file(os.path.join(folder, name))
            if sf is not None and sf.size > 0:
                found.setdefault(os.path.realpath(sf.path), sf)
    return sorted(found.values(), key=lambda s: (-s.mtime, s.path))


def find_session(session_id: str, env: Mapping[str, str]) -> SessionFile | None:
    """The file of the session ``session_id`` (``.jsonl`` optional), in any project."""
    session_id = session_id[: -len(".jsonl")] if session_id.endswith(".jsonl") else session_id
    base = runtime_dir(env)
    if base is None or session_id in ("", ".", "..") or any(c in session_id for c in "/\\\x00"):
        return None
    root = os.path.join(base, "projects")
    found = (_session_file(os.path.join(root, d, "chats", session_id + ".jsonl")) for d in sorted(_listdir(root)))
    return max((sf for sf in found if sf is not None), key=lambda sf: sf.mtime, default=None)

"""Qwen Code's tools as the shared actions of :mod:`opalgit.agents.tools`.

The names and argument spellings are the tool schemas Qwen Code 0.24.4 declares in its
requests: ``run_shell_command{command, directory?}``, ``read_file{file_path, offset?,
limit?}`` (``offset`` is 0-based and needs ``limit``), ``write_file{file_path, content}``,
``edit{file_path, old_string, new_string, replace_all?}`` (``replace`` in the Gemini CLI it
was forked from), ``grep_search{pattern, path?, glob?}``, ``glob{pattern, path?}``. It
declares no directory-listing tool (older versions had ``list_directory``), so a listing
becomes ``ls``.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from opalgit.agents.tools import Action

__all__ = ["parse", "render"]


def _abs(path: Any, cwd: str | None) -> str:
    p = str(path or "")
    return os.path.normpath(os.path.join(cwd, p)) if cwd and p and not os.path.isabs(p) else p


def _opt(**kw: Any) -> dict:
    return {k: v for k, v in kw.items() if v is not None}


def parse(name: str, a: dict, args: Any) -> Action | None:
    """The shared action behind a Qwen Code tool call, or None."""
    if name == "run_shell_command" and "command" in a:
        return Action("shell", _opt(command=str(a["command"]), workdir=a.get("directory") or a.get("dir_path") or None))
    path = a.get("file_path", a.get("absolute_path", a.get("path")))
    if name == "read_file" and path:
        offset = a.get("offset")
        # Qwen counts lines from 0, the shared action (as Claude Code's Read) from 1.
        return Action("read", _opt(path=path, offset=offset + 1 if isinstance(offset, int) else None,
                                   limit=a.get("limit") if isinstance(a.get("limit"), int) else None))
    if name == "write_file" and path:
        return Action("write", {"path": path, "content": a.get("content", "")})
    if name in ("edit", "replace") and path:
        many = a.get("replace_all") is True or (a.get("expected_replacements") or 1) > 1
        return Action("edit", {"path": path, "old": a.get("old_string", ""), "new": a.get("new_string", ""), "all": many})
    if name in ("grep_search", "search_file_content", "grep") and "pattern" in a:
        return Action("search", _opt(pattern=a["pattern"], path=a.get("path") or a.get("dir_path") or None))
    if name == "glob" and "pattern" in a:
        return Action("glob", _opt(pattern=a["pattern"], path=a.get("path") or a.get("dir_path") or None))
    if name == "list_directory" and (a.get("path") or a.get("dir_path")):
        return Action("list", {"path": a.get("path") or a.get("dir_path")})
    return None


def render(k: str, a: dict, action: Action, cwd: str | None) -> tuple[str, Any] | None:
    """A shared action as a Qwen Code tool call, or None."""
    if k == "shell":
        return "run_shell_command", _opt(command=a["command"], directory=a.get("workdir") or None)
    if k == "read":
        out: dict[str, Any] = {"file_path": _abs(a["path"], cwd)}
        if a.get("limit"):
            out["offset"] = max(int(a.get("offset") or 1) - 1, 0)
            out["limit"] = int(a["limit"])
        elif a.get("offset"):
            return "run_shell_command", {"command": f"tail -n +{int(a['offset'])} {shlex.quote(out['file_path'])}"}
        return "read_file", out
    if k == "write":
        return "write_file", {"file_path": _abs(a["path"], cwd), "content": a.get("content", "")}
    if k == "edit":
        out = {"file_path": _abs(a["path"], cwd), "old_string": a.get("old", ""), "new_string": a.get("new", "")}
        if a.get("all"):
            out["replace_all"] = True
        return "edit", out
    if k == "search":
        return "grep_search", _opt(pattern=a["pattern"], path=a.get("path") or None)
    if k == "glob":
        return "glob", _opt(pattern=a["pattern"], path=a.get("path") or None)
    if k == "list":
        return "run_shell_command", {"command": "ls -la " + shlex.quote(_abs(a["path"], cwd))}
    return None

"""opencode's tools as shared actions (:mod:`opalgit.agents.tools`).

The tool schemas opencode 1.18.33 declares in its requests: ``bash {command, description,
timeout?, workdir?}``, ``read {filePath, offset?, limit?}`` (``offset`` the first line,
1-based), ``write {filePath, content}``, ``edit {filePath, oldString, newString,
replaceAll?}``, ``glob {pattern, path?}``, ``grep {pattern, path?, include?}``; opencode has no
list tool of its own in 1.18 (``ls`` goes through bash) and ``apply_patch`` only for some
OpenAI models, so a patch becomes an edit or a write when it is one (see ``render_call``).
"""

from __future__ import annotations

import shlex
from typing import Any

from opalgit.agents.tools import Action, _abs

__all__ = ["parse", "render"]


def _some(**kv: Any) -> dict:
    return {k: v for k, v in kv.items() if v is not None}


def parse(name: str, a: dict, args: Any) -> Action | None:
    """The shared action behind an opencode tool call, or None."""
    path = a.get("filePath")
    if name == "bash" and isinstance(a.get("command"), str):
        return Action("shell", _some(command=a["command"], workdir=a.get("workdir")))
    if name == "read" and path:
        return Action("read", _some(path=path, offset=a.get("offset"), limit=a.get("limit")))
    if name == "write" and path:
        return Action("write", {"path": path, "content": a.get("content", "")})
    if name == "edit" and path:
        return Action("edit", {"path": path, "old": a.get("oldString", ""), "new": a.get("newString", ""),
                               "all": bool(a.get("replaceAll"))})
    if name == "grep" and "pattern" in a:
        return Action("search", _some(pattern=a["pattern"], path=a.get("path")))
    if name == "glob" and "pattern" in a:
        return Action("glob", _some(pattern=a["pattern"], path=a.get("path")))
    if name == "list" and a.get("path"):  # older opencode releases had a list tool
        return Action("list", {"path": a["path"]})
    return None


def render(k: str, a: dict, action: Action, cwd: str | None) -> tuple[str, Any] | None:
    """A shared action as an opencode tool call."""
    if k == "shell":
        out = {"command": a["command"], "description": "Run a shell command"}
        if a.get("workdir"):
            out["workdir"] = a["workdir"]
        return "bash", out
    if k == "read":
        return "read", {"filePath": _abs(a["path"], cwd), **{x: a[x] for x in ("offset", "limit") if x in a}}
    if k == "write":
        return "write", {"filePath": _abs(a["path"], cwd), "content": a.get("content", "")}
    if k == "edit":
        out = {"filePath": _abs(a["path"], cwd), "oldString": a.get("old", ""), "newString": a.get("new", "")}
        if a.get("all"):
            out["replaceAll"] = True
        return "edit", out
    if k == "search":
        return "grep", _some(pattern=a["pattern"], path=a.get("path") or None)
    if k == "glob":
        return "glob", _some(pattern=a["pattern"], path=a.get("path") or None)
    if k == "list":
        return "bash", {"command": "ls -la " + shlex.quote(_abs(a["path"], cwd)), "description": "List a folder"}
    return None

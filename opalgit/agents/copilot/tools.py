"""GitHub Copilot CLI's tools as the shared actions of :mod:`opalgit.agents.tools`.

The schemas are those Copilot 1.0.102 declares in its model requests: ``bash {command,
description, mode?, shellId?}``, ``view {path, view_range?: [first, last]}`` (a file or a
folder; ``last`` -1 reads to the end), ``create {path, file_text}``, ``edit {path,
old_str, new_str}`` (one occurrence), ``grep {pattern, paths?}``, ``glob {pattern,
paths?}``; older releases had one ``str_replace_editor {command: view | create |
str_replace, ...}``, which is read too. Found by :func:`opalgit.agents.tools._agent_tools`.
"""

from __future__ import annotations

from typing import Any

from opalgit.agents.tools import Action, _abs

__all__ = ["parse", "render"]

#: Copilot's ``bash`` requires a description; the one an exported call gets.
_DESCRIPTION_LIMIT = 100


def _one_path(paths: Any) -> str | None:
    if isinstance(paths, str) and paths:
        return paths
    if isinstance(paths, list) and len(paths) == 1 and isinstance(paths[0], str):
        return paths[0]
    return None


def _view(a: dict) -> Action:
    out: dict[str, Any] = {"path": a["path"]}
    rng = a.get("view_range")
    if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in rng):
        first, last = rng
        out["offset"] = max(first, 1)
        if last >= first:
            out["limit"] = last - out["offset"] + 1
    return Action("read", out)


def parse(name: str, a: dict, args: Any) -> Action | None:
    """The shared action behind one Copilot tool call, or None."""
    if name == "str_replace_editor" and isinstance(a.get("command"), str):
        name = {"view": "view", "create": "create", "str_replace": "edit"}.get(a["command"], "")
    if name == "bash" and isinstance(a.get("command"), str):
        return Action("shell", {"command": a["command"]})
    if not isinstance(a.get("path"), str) and name in ("view", "create", "edit", "str_replace"):
        return None
    if name == "view":
        return _view(a)
    if name == "create":
        return Action("write", {"path": a["path"], "content": a.get("file_text", "")})
    if name in ("edit", "str_replace"):
        return Action("edit", {"path": a["path"], "old": a.get("old_str", ""), "new": a.get("new_str", "")})
    if name in ("grep", "glob") and isinstance(a.get("pattern"), str):
        path = _one_path(a.get("paths"))
        if "paths" in a and path is None:
            return None  # several folders: no shared action takes them
        return Action("search" if name == "grep" else "glob",
                      {"pattern": a["pattern"], **({"path": path} if path else {})})
    return None


def render(k: str, a: dict, action: Action, cwd: str | None) -> tuple[str, Any] | None:
    """A shared action as a Copilot tool call, or None (an edit of every occurrence has no
    counterpart: Copilot's ``edit`` replaces one)."""
    if k == "shell":
        command = str(a["command"])
        first = command.strip().splitlines()[0] if command.strip() else "shell command"
        return "bash", {"command": command, "description": first[:_DESCRIPTION_LIMIT]}
    if k == "read":
        out: dict[str, Any] = {"path": _abs(a["path"], cwd)}
        if a.get("offset") or a.get("limit"):
            first = int(a.get("offset") or 1)
            out["view_range"] = [first, first + int(a["limit"]) - 1 if a.get("limit") else -1]
        return "view", out
    if k == "write":
        return "create", {"path": _abs(a["path"], cwd), "file_text": a.get("content", "")}
    if k == "edit":
        if a.get("all"):
            return None
        return "edit", {"path": _abs(a["path"], cwd), "old_str": a.get("old", ""), "new_str": a.get("new", "")}
    if k in ("search", "glob"):
        return ("grep" if k == "search" else "glob"), {"pattern": a["pattern"],
                                                        **({"paths": a["path"]} if a.get("path") else {})}
    if k == "list":
        return "view", {"path": _abs(a["path"], cwd)}
    return None

"""Pi's tools and the shared actions (:mod:`opalgit.agents.tools`).

The names and arguments are those of the request schemas Pi 1.6 declares (``core/tools/*.js``):
``bash{command, timeout?}``, ``read{path, offset?, limit?}``, ``write{path, content}``,
``edit{path, edits: [{oldText, newText}, ...]}`` (several replacements in one call, each
matched against the original file), ``grep{pattern, path?, glob?, ...}``,
``find{pattern, path?, limit?}`` and ``ls{path?, limit?}``. Pi also takes an edit's legacy
top-level ``oldText``/``newText`` (``prepareEditArguments``).
"""

from __future__ import annotations

import shlex
from typing import Any

from opalgit.agents.tools import Action, _abs

__all__ = ["parse", "render"]


def parse(name: str, a: dict, args: Any) -> Action | None:
    """The shared action behind a Pi call; an edit of several replacements has none."""
    path = a.get("path")
    if name == "bash" and isinstance(a.get("command"), str):
        return Action("shell", {"command": a["command"]})
    if name == "read" and isinstance(path, str):
        return Action("read", {k: v for k, v in (("path", path), ("offset", a.get("offset")), ("limit", a.get("limit")))
                               if v is not None})
    if name == "write" and isinstance(path, str):
        return Action("write", {"path": path, "content": a.get("content", "")})
    if name == "edit" and isinstance(path, str):
        edits = a.get("edits")
        if edits is None and isinstance(a.get("oldText"), str):
            edits = [{"oldText": a["oldText"], "newText": a.get("newText", "")}]
        if isinstance(edits, list) and len(edits) == 1 and isinstance(edits[0], dict):
            return Action("edit", {"path": path, "old": edits[0].get("oldText", ""), "new": edits[0].get("newText", "")})
        return None  # several replacements: no other agent's edit takes them at once
    if name == "grep" and isinstance(a.get("pattern"), str) and not a.get("glob"):
        return Action("search", {k: v for k, v in (("pattern", a["pattern"]), ("path", path)) if v is not None})
    if name == "find" and isinstance(a.get("pattern"), str):
        return Action("glob", {k: v for k, v in (("pattern", a["pattern"]), ("path", path)) if v is not None})
    if name == "ls":
        return Action("list", {"path": path or "."})
    return None


def render(k: str, a: dict, action: Action, cwd: str | None) -> tuple[str, Any] | None:
    """A shared action as a Pi call. ``grep``, ``find`` and ``ls`` are not among the tools Pi
    enables by default, so a search, a glob and a listing become ``bash`` commands; an edit
    that replaces every occurrence has no Pi counterpart (each ``oldText`` must be unique)."""
    if k == "shell":
        cmd = a["command"]
        if a.get("workdir") and a["workdir"] != cwd:
            cmd = f"cd {shlex.quote(str(a['workdir']))} && {cmd}"
        return "bash", {"command": cmd}
    if k == "read":
        out: dict[str, Any] = {"path": _abs(a["path"], cwd)}
        out.update({x: a[x] for x in ("offset", "limit") if a.get(x) is not None})
        return "read", out
    if k == "write":
        return "write", {"path": _abs(a["path"], cwd), "content": a.get("content", "")}
    if k == "edit":
        if a.get("all"):
            return None
        return "edit", {"path": _abs(a["path"], cwd), "edits": [{"oldText": a.get("old", ""), "newText": a.get("new", "")}]}
    if k == "search":
        return "bash", {"command": "grep -rn " + shlex.quote(str(a["pattern"])) + " " + shlex.quote(str(a.get("path") or "."))}
    if k == "glob":
        return "bash", {"command": "find " + shlex.quote(str(a.get("path") or ".")) + " -path " + shlex.quote(str(a["pattern"]))}
    if k == "list":
        return "bash", {"command": "ls -la " + shlex.quote(_abs(a["path"], cwd))}
    return None

"""Tool calls across agents: each agent's tools mapped to a few shared actions.

Every agent has a shell, a file reader, a writer, an editor and a search, under
different names and argument shapes (Claude Code ``Bash{command}``, Codex
``exec_command{cmd, workdir}``, Gemini CLI ``run_shell_command{command}`` ...). An
exporter turns a foreign call into the target's own tool when there is a clear
counterpart (:func:`parse_call` then :func:`render_call`), and keeps the original name
and input otherwise. Either way the call stays a call, paired with its result; opal's
store keeps the original record, so nothing is lost.

Pure; shared by the adapters (which never import each other).
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from opalgit.structs import dataclass, field

# Shared actions and their canonical arguments:
#   shell  {command, workdir?}          read  {path, offset?, limit?}
#   write  {path, content}              edit  {path, old, new, all?}
#   search {pattern, path?}             glob  {pattern, path?}
#   list   {path}                       patch {text}   (a Codex apply_patch body)
ACTIONS = ("shell", "read", "write", "edit", "search", "glob", "list", "patch")


@dataclass
class Action:
    kind: str
    args: dict = field(default_factory=dict)


def _abs(path: Any, cwd: str | None) -> str:
    p = str(path or "")
    if cwd and p and not os.path.isabs(p):
        return os.path.normpath(os.path.join(cwd, p))
    return p


def _shell_string(command: Any) -> str:
    if isinstance(command, list):
        # Codex's older shell tool: ["bash", "-lc", "ls"] -> "ls"
        if len(command) == 3 and command[0] in ("bash", "sh", "zsh") and command[1] in ("-lc", "-c"):
            return str(command[2])
        return shlex.join(str(c) for c in command)
    return str(command or "")


def parse_call(agent: str, name: str, args: Any) -> Action | None:
    """The shared action behind one agent's tool call, or None when there is none."""
    parse = _parser(agent)
    return parse(name, args if isinstance(args, dict) else {}, args) if parse is not None else None


def _claude_parse(name: str, a: dict, args: Any) -> Action | None:
    if name == "Bash" and "command" in a:
        return Action("shell", {"command": str(a["command"])})
    if name == "Read" and "file_path" in a:
        return Action("read", {k: v for k, v in (("path", a["file_path"]), ("offset", a.get("offset")), ("limit", a.get("limit"))) if v is not None})
    if name == "Write" and "file_path" in a:
        return Action("write", {"path": a["file_path"], "content": a.get("content", "")})
    if name == "Edit" and "file_path" in a:
        return Action("edit", {"path": a["file_path"], "old": a.get("old_string", ""), "new": a.get("new_string", ""), "all": bool(a.get("replace_all"))})
    if name == "Grep" and "pattern" in a:
        return Action("search", {k: v for k, v in (("pattern", a["pattern"]), ("path", a.get("path"))) if v is not None})
    if name == "Glob" and "pattern" in a:
        return Action("glob", {k: v for k, v in (("pattern", a["pattern"]), ("path", a.get("path"))) if v is not None})
    if name == "LS" and "path" in a:
        return Action("list", {"path": a["path"]})
    return None


def _codex_parse(name: str, a: dict, args: Any) -> Action | None:
    if name in ("exec_command", "shell", "container.exec", "local_shell") and ("cmd" in a or "command" in a):
        cmd = a.get("cmd", a.get("command"))
        out = {"command": _shell_string(cmd)}
        if a.get("workdir"):
            out["workdir"] = a["workdir"]
        return Action("shell", out)
    if name == "apply_patch":
        text = args if isinstance(args, str) else a.get("input") or a.get("patch")
        if isinstance(text, str):
            return Action("patch", {"text": text})
    return None


def _gemini_parse(name: str, a: dict, args: Any) -> Action | None:
    # Gemini CLI 0.61 names: dir_path, start_line/end_line, allow_multiple; older
    # versions wrote directory, offset/limit, expected_replacements.
    if name == "run_shell_command" and "command" in a:
        out = {"command": str(a["command"])}
        if a.get("dir_path") or a.get("directory"):
            out["workdir"] = a.get("dir_path") or a["directory"]
        return Action("shell", out)
    path = a.get("file_path", a.get("absolute_path", a.get("path")))
    if name == "read_file" and path:
        offset, limit = a.get("offset"), a.get("limit")
        if isinstance(a.get("start_line"), int) or isinstance(a.get("end_line"), int):
            offset = a.get("start_line") or 1
            limit = a["end_line"] - offset + 1 if isinstance(a.get("end_line"), int) else None
        return Action("read", {k: v for k, v in (("path", path), ("offset", offset), ("limit", limit)) if v is not None})
    if name == "write_file" and path:
        return Action("write", {"path": path, "content": a.get("content", "")})
    if name == "replace" and path:
        many = a.get("allow_multiple") is True or (a.get("expected_replacements") or 1) > 1
        return Action("edit", {"path": path, "old": a.get("old_string", ""), "new": a.get("new_string", ""), "all": many})
    if name in ("search_file_content", "grep", "grep_search") and "pattern" in a:
        return Action("search", {k: v for k, v in (("pattern", a["pattern"]), ("path", a.get("path") or a.get("dir_path"))) if v is not None})
    if name == "glob" and "pattern" in a:
        return Action("glob", {k: v for k, v in (("pattern", a["pattern"]), ("path", a.get("path") or a.get("dir_path"))) if v is not None})
    if name == "list_directory" and (a.get("path") or a.get("dir_path")):
        return Action("list", {"path": a.get("path") or a.get("dir_path")})
    return None


# ----------------------------------------------------------------------- apply_patch


def _lines(text: str) -> list[str]:
    """``text`` split on ``\n`` only, as :meth:`str.splitlines` does for ``\n``: U+2028,
    U+2029, form feeds and the like inside a file's content are not line breaks."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def parse_patch(text: str) -> list[dict] | None:
    """Split a Codex ``apply_patch`` body into file operations, or None if malformed.

    Each operation: ``{"op": "add", "path", "content"}``, ``{"op": "delete", "path"}`` or
    ``{"op": "update", "path", "hunks": [(old, new), ...]}``.
    """
    lines = _lines(text)
    if not lines or lines[0].strip() != "*** Begin Patch":
        return None
    ops: list[dict] = []
    cur: dict | None = None
    hunk_old: list[str] = []
    hunk_new: list[str] = []

    def close_hunk() -> None:
        if cur is not None and cur["op"] == "update" and (hunk_old or hunk_new):
            cur["hunks"].append(("\n".join(hunk_old) + "\n" if hunk_old else "", "\n".join(hunk_new) + "\n" if hunk_new else ""))
        hunk_old.clear()
        hunk_new.clear()

    for line in lines[1:]:
        if line.startswith("*** End Patch"):
            break
        if line.startswith("*** Add File: "):
            close_hunk()
            cur = {"op": "add", "path": line[len("*** Add File: ") :].strip(), "content": []}
            ops.append(cur)
        elif line.startswith("*** Delete File: "):
            close_hunk()
            cur = {"op": "delete", "path": line[len("*** Delete File: ") :].strip()}
            ops.append(cur)
        elif line.startswith("*** Update File: "):
            close_hunk()
            cur = {"op": "update", "path": line[len("*** Update File: ") :].strip(), "hunks": []}
            ops.append(cur)
        elif line.startswith("*** Move to: "):
            return None
        elif line.startswith("*** End of File"):
            # An anchor inside an Update hunk ("this chunk ends the file"), not the patch end.
            continue
        elif cur is None:
            return None
        elif cur["op"] == "add":
            if not line.startswith("+"):
                return None
            cur["content"].append(line[1:])
        elif cur["op"] == "update":
            if line.startswith("@@"):
                close_hunk()
            elif line.startswith("-"):
                hunk_old.append(line[1:])
            elif line.startswith("+"):
                hunk_new.append(line[1:])
            elif line.startswith(" ") or line == "":
                hunk_old.append(line[1:])
                hunk_new.append(line[1:])
            else:
                return None
    close_hunk()
    for op in ops:
        if op["op"] == "add":
            op["content"] = "\n".join(op["content"]) + ("\n" if op["content"] else "")
    return ops


def make_patch(action: Action, cwd: str | None) -> str | None:
    """An ``apply_patch`` body for a write or an edit, with paths relative to ``cwd``."""

    def rel(p: str) -> str:
        if cwd and os.path.isabs(p):
            r = os.path.relpath(p, cwd)
            return p if r.startswith("..") else r
        return p

    path = rel(str(action.args.get("path", "")))
    if action.kind == "write":
        body = str(action.args.get("content", ""))
        lines = _lines(body) or [""]
        return "*** Begin Patch\n*** Add File: " + path + "\n" + "".join("+" + ln + "\n" for ln in lines) + "*** End Patch\n"
    if action.kind == "edit":
        old = _lines(str(action.args.get("old", "")))
        new = _lines(str(action.args.get("new", "")))
        return (
            "*** Begin Patch\n*** Update File: "
            + path
            + "\n@@\n"
            + "".join("-" + ln + "\n" for ln in old)
            + "".join("+" + ln + "\n" for ln in new)
            + "*** End Patch\n"
        )
    return None


# ----------------------------------------------------------------------- rendering


def render_call(target: str, action: Action, cwd: str | None) -> tuple[str, Any] | None:
    """The target agent's tool name and input for a shared action, or None.

    For Codex, ``apply_patch`` input is the raw patch text (a custom tool call); every
    other input is a JSON object.
    """
    k, a = action.kind, action.args
    if k == "patch":
        ops = parse_patch(str(a.get("text", "")))
        if target == "codex":
            return "apply_patch", str(a.get("text", ""))
        if not ops or len(ops) != 1:
            return None
        op = ops[0]
        if op["op"] == "add":
            return render_call(target, Action("write", {"path": _abs(op["path"], cwd), "content": op["content"]}), cwd)
        if op["op"] == "update" and len(op["hunks"]) == 1:
            old, new = op["hunks"][0]
            return render_call(target, Action("edit", {"path": _abs(op["path"], cwd), "old": old, "new": new}), cwd)
        return None
    render = _renderer(target)
    return render(k, a, action, cwd) if render is not None else None


def _claude_call(k: str, a: dict, action: Action, cwd: str | None) -> tuple[str, Any] | None:
    """A shared action as a Claude Code tool call."""
    if k == "shell":
        return "Bash", {"command": a["command"]}
    if k == "read":
        out = {"file_path": _abs(a["path"], cwd)}
        out.update({x: a[x] for x in ("offset", "limit") if x in a})
        return "Read", out
    if k == "write":
        return "Write", {"file_path": _abs(a["path"], cwd), "content": a.get("content", "")}
    if k == "edit":
        return "Edit", {"file_path": _abs(a["path"], cwd), "old_string": a.get("old", ""), "new_string": a.get("new", ""), "replace_all": bool(a.get("all"))}
    if k == "search":
        return "Grep", {"pattern": a["pattern"], **({"path": a["path"]} if a.get("path") else {})}
    if k == "glob":
        return "Glob", {"pattern": a["pattern"], **({"path": a["path"]} if a.get("path") else {})}
    if k == "list":
        return "Bash", {"command": "ls -la " + shlex.quote(_abs(a["path"], cwd))}
    return None



def _gemini_call(k: str, a: dict, action: Action, cwd: str | None) -> tuple[str, Any] | None:
    """A shared action as a Gemini CLI tool call (the tool schemas of Gemini CLI 0.61)."""
    if k == "shell":
        return "run_shell_command", {"command": a["command"], **({"dir_path": a["workdir"]} if a.get("workdir") else {})}
    if k == "read":
        out = {"file_path": _abs(a["path"], cwd)}
        if a.get("offset") or a.get("limit"):
            first = int(a.get("offset") or 1)
            out["start_line"] = first
            if a.get("limit"):
                out["end_line"] = first + int(a["limit"]) - 1
        return "read_file", out
    if k == "write":
        return "write_file", {"file_path": _abs(a["path"], cwd), "content": a.get("content", "")}
    if k == "edit":
        out = {"file_path": _abs(a["path"], cwd), "old_string": a.get("old", ""), "new_string": a.get("new", "")}
        if a.get("all"):
            out["allow_multiple"] = True
        return "replace", out
    if k == "search":
        return "grep_search", {"pattern": a["pattern"], **({"dir_path": a["path"]} if a.get("path") else {})}
    if k == "glob":
        return "glob", {"pattern": a["pattern"], **({"dir_path": a["path"]} if a.get("path") else {})}
    if k == "list":
        return "list_directory", {"dir_path": _abs(a["path"], cwd)}
    return None



def _codex_call(k: str, a: dict, action: Action, cwd: str | None) -> tuple[str, Any] | None:
    """A shared action as a Codex CLI tool call (shell commands, and apply_patch for files)."""
    workdir = a.get("workdir") or cwd
    if k == "shell":
        return "exec_command", {"cmd": a["command"], **({"workdir": workdir} if workdir else {})}
    if k == "read":
        path = shlex.quote(str(a["path"]))
        offset, limit = a.get("offset"), a.get("limit")
        if offset or limit:
            first = int(offset or 1)
            last = first + int(limit) - 1 if limit else "$"
            cmd = f"sed -n '{first},{last}p' {path}"
        else:
            cmd = f"cat {path}"
        return "exec_command", {"cmd": cmd, **({"workdir": workdir} if workdir else {})}
    if k in ("write", "edit"):
        patch = make_patch(action, cwd)
        return ("apply_patch", patch) if patch else None
    if k == "search":
        cmd = "rg -n " + shlex.quote(str(a["pattern"])) + (" " + shlex.quote(str(a["path"])) if a.get("path") else "")
        return "exec_command", {"cmd": cmd, **({"workdir": workdir} if workdir else {})}
    if k == "glob":
        cmd = "rg --files -g " + shlex.quote(str(a["pattern"])) + (" " + shlex.quote(str(a["path"])) if a.get("path") else "")
        return "exec_command", {"cmd": cmd, **({"workdir": workdir} if workdir else {})}
    if k == "list":
        return "exec_command", {"cmd": "ls -la " + shlex.quote(str(a["path"])), **({"workdir": workdir} if workdir else {})}
    return None



# The first three agents' tables are here; every agent added since keeps its own in
# ``opalgit/agents/<agent>/tools.py`` (``parse(name, args_dict, raw_args)`` and
# ``render(kind, args, action, cwd)``, the shapes of the functions above), found by name when
# first needed: adding an agent touches no shared table, and one never imports another.
_PARSE = {"claude": _claude_parse, "codex": _codex_parse, "gemini": _gemini_parse}
_RENDER = {"claude": _claude_call, "gemini": _gemini_call, "codex": _codex_call}


def _agent_tools(agent: str) -> Any:
    """The ``tools`` module of an agent's package, or None when it has none."""
    import importlib

    if not agent.isidentifier():
        return None
    try:
        return importlib.import_module(f"opalgit.agents.{agent}.tools")
    except ModuleNotFoundError as exc:
        if exc.name in (f"opalgit.agents.{agent}", f"opalgit.agents.{agent}.tools"):
            return None
        raise


def _parser(agent: str) -> Any:
    if agent not in _PARSE:
        _PARSE[agent] = getattr(_agent_tools(agent), "parse", None)
    return _PARSE[agent]


def _renderer(agent: str) -> Any:
    if agent not in _RENDER:
        _RENDER[agent] = getattr(_agent_tools(agent), "render", None)
    return _RENDER[agent]


def convert_call(source: str, target: str, name: str, args: Any, cwd: str | None) -> tuple[str, Any, bool]:
    """Map one call to the target: ``(name, input, mapped)``; unmapped calls keep name and input."""
    if source == target:
        return name, args, False
    action = parse_call(source, name, args)
    if action is not None:
        rendered = render_call(target, action, cwd)
        if rendered is not None:
            return rendered[0], rendered[1], True
    return name, args, False

"""``opal capture install|uninstall|status``: opal's hook in each agent's own settings.

Each agent package says where its settings are and what opal adds there
(``opalgit/agents/<agent>/capture.py``: the events, one matcher group per event,
the steps left to the user); this module edits those JSON files. The rules:

* opal's group is **appended** to each event's list, after the user's own hooks, which
  keep running in their order (Codex also keys the trust of a hook by its place in the
  file, which appending leaves alone).
* Installing twice changes nothing: a file that already has opal's current hook for
  every event is not written. A hook of another opal installation (another Python, an
  older path) is replaced in place.
* What was added is recorded (the file's bytes before, a hash of the bytes after, the
  folders created): ``uninstall`` of a file nobody changed since puts those bytes back,
  byte for byte; of a file the user edited since, it removes only opal's entries and
  keeps every edit (JSON re-rendered with the file's own indentation).
* A settings file that is not a JSON object (or whose ``hooks`` is not one, or an
  event's value not a list) is refused with an error naming it, and never written.

opal's hooks are recognised by their command, which runs
``opalgit/hooks/capturehook.sh`` (``sh .../capturehook.sh PYTHON AGENT EVENT``; see
:mod:`opalgit.hooks.capturework`).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import shlex
from types import ModuleType
from typing import Mapping

from opalgit import fileio
from opalgit.agents.claude import capture as claude_capture
from opalgit.agents.codex import capture as codex_capture
from opalgit.agents.gemini import capture as gemini_capture
from opalgit.errors import InputError, UsageError
from opalgit.hooks import capturework
from opalgit.structs import dataclass, field

AGENTS: dict[str, ModuleType] = {"claude": claude_capture, "codex": codex_capture, "gemini": gemini_capture}
SCOPES = ("project", "user")
_OURS = re.compile(r"opalgit[/\\]hooks[/\\]capturehook\.sh")


def hook_command(agent: str, python: str, event: str) -> str:
    """The shell command opal's hook for ``event`` runs (the agents run it through a shell)."""
    return f"sh {shlex.quote(capturework.SCRIPT)} {shlex.quote(python)} {agent} {event}"


def _is_ours(hook: object) -> bool:
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and bool(_OURS.search(hook["command"]))


def settings_path(agent: str, scope: str, project: str | None, env: Mapping[str, str]) -> str:
    path = AGENTS[agent].settings_path(scope, project, env)
    if path is None:
        raise UsageError(f"cannot tell where {agent}'s {scope} settings are", hint="set HOME")
    return path


# ------------------------------------------------------------------ the file


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise InputError("is a folder, not a settings file", path=path) from None


def parse(path: str, raw: bytes | None) -> dict:
    """The settings in ``raw`` (None: no file yet, no settings), checked to be the shape
    opal edits; anything else is refused, naming the file."""
    if raw is None:
        return {}
    hint = "fix the file (or move it away), then run 'opal capture install' again; opal did not change it"
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise InputError(f"not valid JSON ({getattr(exc, 'msg', exc)})", path=path, line=line, hint=hint) from None
    if not isinstance(data, dict):
        raise InputError("is not a JSON object", path=path, hint=hint)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InputError("its \"hooks\" is not a JSON object", path=path, hint=hint)
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise InputError(f"its \"hooks\".\"{event}\" is not a list", path=path, hint=hint)
    return data


def _indent(raw: bytes | None) -> int | str | None:
    """The file's own indentation (2 for a new file; None: it is all on one line)."""
    if raw is None:
        return 2
    m = re.search(rb"\n([ \t]+)\S", raw)
    if m is None:
        return None if raw.strip() else 2
    ws = m.group(1).decode()
    return len(ws) if set(ws) == {" "} else ws


def render(data: dict, raw: bytes | None) -> bytes:
    text = json.dumps(data, indent=_indent(raw), ensure_ascii=False)
    newline = raw is None or raw.endswith(b"\n") or not raw.strip()
    return (text + ("\n" if newline else "")).encode("utf-8")


def strip(data: dict, keep: dict | None = None) -> tuple[dict, int]:
    """``data`` without opal's hooks, and how many there were. An event list (or the
    ``hooks`` object) left empty goes too, unless ``keep`` (the settings before opal was
    installed) had it."""
    data = copy.deepcopy(data)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data, 0
    kept_hooks = (keep or {}).get("hooks") if isinstance((keep or {}).get("hooks"), dict) else {}
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        out = []
        for g in groups:
            inner = g.get("hooks") if isinstance(g, dict) else None
            if isinstance(inner, list) and any(_is_ours(h) for h in inner):
                rest = [h for h in inner if not _is_ours(h)]
                removed += len(inner) - len(rest)
                if rest:
                    out.append({**g, "hooks": rest})
                continue
            out.append(g)
        if len(out) != len(groups) or out != groups:
            if out or event in kept_hooks:
                hooks[event] = out
            else:
                del hooks[event]
    if removed and not hooks and "hooks" not in (keep or {}):
        del data["hooks"]
    return data, removed


def add(data: dict, agent: str, python: str) -> dict:
    """``data`` with opal's hook (and no other opal hook) at the end of each event's list;
    ``python``: the interpreter of the opal the hooks run."""
    spec = AGENTS[agent]
    out, _ = strip(data, keep=data)
    hooks = out.setdefault("hooks", {})
    for event in spec.EVENTS:
        hooks.setdefault(event, []).append(spec.group(hook_command(agent, python, event)))
    return out


def state_of(data: dict, agent: str, python: str) -> str:
    """``installed`` (opal's current hook on every event, and no other of opal's),
    ``outdated`` (opal's hooks, but not all of them current), or ``absent``."""
    hooks = data.get("hooks") if isinstance(data.get("hooks"), dict) else {}
    ours = {ev: [h.get("command") for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list)
                 for h in g["hooks"] if _is_ours(h)]
            for ev, groups in hooks.items() if isinstance(groups, list)}
    if not any(ours.values()):
        return "absent"
    events = AGENTS[agent].EVENTS
    good = all(ours.get(ev) == [hook_command(agent, python, ev)] for ev in events) and not any(v for ev, v in ours.items() if ev not in events)
    return "installed" if good else "outdated"


# ------------------------------------------------------------------ the record of what opal added


def records_file(scope: str, opal_dir: str | None, env: Mapping[str, str]) -> str:
    """Where the record of a scope's installs is kept: the repository's opal folder for a
    project's settings, the user's state folder for the user's."""
    if scope == "project" and opal_dir:
        return os.path.join(opal_dir, "capture", "installed.json")
    return os.path.join(os.path.dirname(capturework.skipped_log(env)), "capture-installed.json")


def _records(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_records(path: str, data: dict) -> None:
    if not data and not os.path.exists(path):
        return
    fileio.replace_atomically(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))


def _sha(raw: bytes | None) -> str | None:
    return hashlib.sha256(raw).hexdigest() if raw is not None else None


def _missing_dirs(path: str) -> list[str]:
    out = []
    d = os.path.dirname(path)
    while d and not os.path.exists(d):
        out.append(d)
        d = os.path.dirname(d)
    return out


def _write(path: str, raw: bytes) -> None:
    real = os.path.realpath(path)  # a settings file linked from a dotfiles folder stays a link
    mode = os.stat(real).st_mode & 0o7777 if os.path.exists(real) else None
    fileio.replace_atomically(real, raw, mode=mode)


@dataclass
class Change:
    """What install or uninstall did to one settings file."""

    agent: str
    scope: str
    path: str
    action: str  # installed, updated, unchanged, restored, removed, absent
    detail: str = ""
    steps: list[str] = field(default_factory=list)


def install_file(agent: str, scope: str, path: str, python: str, records: str) -> Change:
    raw = _read(path)
    data = parse(path, raw)
    spec = AGENTS[agent]
    steps = list(spec.steps(scope, path))
    state = state_of(data, agent, python)
    if state == "installed":
        return Change(agent, scope, path, "unchanged", "already installed", steps)
    new = render(add(data, agent, python), raw)
    recs = _records(records)
    rec = recs.get(path)
    if not (isinstance(rec, dict) and rec.get("after") == _sha(raw)):
        # A fresh install: what is there now is the user's (less any of opal's hooks a
        # lost record left behind).
        before = raw if state == "absent" else render(strip(data)[0], raw)
        rec = {"agent": agent, "before": None if before is None else base64.b64encode(before).decode(),
               "dirs": _missing_dirs(path)}
    _write(path, new)
    rec["after"] = _sha(new)
    recs[path] = rec
    _save_records(records, recs)
    action = "updated" if state == "outdated" else "installed"
    return Change(agent, scope, path, action, f"{', '.join(spec.EVENTS)}", steps)


def uninstall_file(agent: str, scope: str, path: str, records: str) -> Change:
    raw = _read(path)
    recs = _records(records)
    rec = recs.pop(path, None)
    if not isinstance(rec, dict):
        rec = None
    if raw is None:
        _save_records(records, recs)
        return Change(agent, scope, path, "absent", "no settings file")
    if rec is not None and rec.get("after") == _sha(raw):
        before = None if rec.get("before") is None else base64.b64decode(rec["before"])
        if before is None:
            os.unlink(os.path.realpath(path))
            for d in rec.get("dirs") or []:
                try:
                    os.rmdir(d)
                except OSError:
                    break
        else:
            _write(path, before)
        _save_records(records, recs)
        return Change(agent, scope, path, "restored", "as it was before, byte for byte")
    data = parse(path, raw)
    keep = parse(path, base64.b64decode(rec["before"])) if rec and rec.get("before") else None
    out, removed = strip(data, keep=keep)
    _save_records(records, recs)
    if not removed:
        return Change(agent, scope, path, "absent", "opal's hooks are not there")
    _write(path, render(out, raw))
    return Change(agent, scope, path, "removed",
                  "opal's hooks removed; the file was changed since install, and every change is kept")


@dataclass
class AgentStatus:
    agent: str
    scope: str
    path: str
    state: str  # installed, outdated, absent, no file, invalid
    detail: str = ""


def file_status(agent: str, scope: str, path: str, python: str) -> AgentStatus:
    try:
        raw = _read(path)
        if raw is None:
            return AgentStatus(agent, scope, path, "no file")
        return AgentStatus(agent, scope, path, state_of(parse(path, raw), agent, python))
    except InputError as exc:
        return AgentStatus(agent, scope, path, "invalid", exc.message)


def agents_for(name: str) -> list[str]:
    if name == "all":
        return list(AGENTS)
    if name not in AGENTS:
        raise UsageError(f"opal cannot capture {name!r}", hint=f"--agent is one of {', '.join(AGENTS)} or all")
    return [name]


# ------------------------------------------------------------------ what is installed, and what the worker did


def find_repo(cwd: str):
    """The repository around ``cwd`` (None: not in a git repository), set up or not."""
    from opalgit.store.repo import Repository, _find

    found = _find(cwd)
    if found is None or found[0] != "git":
        return None
    return Repository(found[1])


@dataclass
class Report:
    """What ``opal capture status`` shows."""

    agents: list[AgentStatus]
    workdir: str | None = None  # the repository's working tree (None: not in a git repository)
    initialized: bool = False
    sessions: dict = field(default_factory=dict)  # AGENT:SESSION -> its last capture
    pending: list[dict] = field(default_factory=list)  # queued events not committed yet
    errors: list[dict] = field(default_factory=list)  # the capture log's recent errors
    crash: str = ""  # the end of what a worker that could not start said
    skipped: list[dict] = field(default_factory=list)  # captures skipped here: opal not set up


def report(cwd: str, env: Mapping[str, str], python: str, *, errors: int = 10) -> Report:
    from opalgit.hooks import capturework as work

    repo = find_repo(cwd)
    project = repo.workdir if repo is not None else None
    agents = []
    for agent in AGENTS:
        for scope in SCOPES:
            if scope == "project" and project is None:
                continue
            path = settings_path(agent, scope, project, env)
            agents.append(file_status(agent, scope, path, python))
    rep = Report(agents, project, bool(repo is not None and repo.initialized))
    if repo is not None and rep.initialized:
        rep.sessions = work.last_captures(repo.opal_dir)
        rep.pending = [e for e in (work.read_entry(p) for p in work.queued(repo.opal_dir)) if e]
        rep.errors = [e for e in work.log_entries(repo.opal_dir) if e.get("level") == "error"][-errors:]
        try:
            with open(os.path.join(work.capture_dir(repo.opal_dir), work.CRASH), encoding="utf-8", errors="replace") as fh:
                rep.crash = fh.read()[-2000:].strip()
        except OSError:
            pass
    elif project is not None:
        rep.skipped = _skipped_here(project, env)
    return rep


def _skipped_here(project: str, env: Mapping[str, str]) -> list[dict]:
    out = []
    try:
        with open(capturework.skipped_log(env), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                where = item.get("cwd") if isinstance(item, dict) else None
                if isinstance(where, str) and (where == project or where.startswith(project.rstrip(os.sep) + os.sep)):
                    out.append(item)
    except OSError:
        pass
    return out

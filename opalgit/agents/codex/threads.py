"""Codex child threads: the rollouts of the sub-agents a session spawned, kept with it.

Codex (codex-rs, ``SessionSource::SubAgent``) runs each sub-agent as a thread of its own,
written as a rollout of its own in the same ``sessions/YYYY/MM/DD/`` tree; its
``session_meta`` names the thread that spawned it::

    "source": {"subagent": {"thread_spawn": {"parent_thread_id": "<parent>", "depth": 1,
               "agent_nickname": "...", "agent_role": "..."}}}

(also ``parent_thread_id`` beside it in newer versions, and ``forked_from_id`` when the
child starts from a copy of the parent's history, which then follows as a second
``session_meta`` of the parent's id). Those rollouts are part of the parent's session,
as Claude Code's ``<session>/subagents/`` folder is part of its: a commit stores them in
the state's side tree under ``threads/`` (their path below ``sessions/``), children of
children too; a same-agent export writes them back beside the new rollout, the parent's
id in them replaced by the new session's, and registers them in Codex's state database
like the parent (:mod:`.codex_state`). A child keeps its own thread id: the parent's
records name it (the ``spawn_agent`` call's output, the collab events). Another agent has
no counterpart: its export leaves them out and its loss report says so
(``side_folder:threads``, :mod:`opalgit.porcelain.export`).

Pure but for reading the sessions folder (no store, no printing).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Mapping

from opalgit.agents.base import LossReport
from opalgit.plural import count

__all__ = ["PREFIX", "child_threads", "parent_of", "written_back"]

#: Where a state's side tree keeps the child rollouts.
PREFIX = "threads/"
#: How much of a rollout's start is read to find its header (base_instructions can be long).
HEAD_LIMIT = 256 * 1024
#: Child threads beyond this many are not stored (said in one line): a runaway spawner
#: must not grow every state of the session without bound.
MAX_CHILDREN = 256
_TS_RE = re.compile(r"^rollout-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2})-.*\.jsonl$")


def parent_of(meta: Any) -> str | None:
    """The parent thread a ``session_meta`` payload names, or None for a root thread."""
    if not isinstance(meta, dict):
        return None
    source = meta.get("source")
    if isinstance(source, dict):
        sub = source.get("subagent", source.get("sub_agent"))
        spawn = sub.get("thread_spawn") if isinstance(sub, dict) else None
        if isinstance(spawn, dict) and isinstance(spawn.get("parent_thread_id"), str) and spawn["parent_thread_id"]:
            return spawn["parent_thread_id"]
    parent = meta.get("parent_thread_id")
    return parent if isinstance(parent, str) and parent else None


def _sessions_root(path: str) -> str | None:
    """The ``sessions`` folder a rollout at ``path`` lives in (``sessions/YYYY/MM/DD/``)."""
    folder = os.path.dirname(os.path.abspath(path))
    for _ in range(4):
        if os.path.basename(folder) == "sessions":
            return folder
        folder = os.path.dirname(folder)
    return None


def _header(path: str) -> dict | None:
    """The ``session_meta`` payload on a rollout's first line, or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.readline(HEAD_LIMIT)
    except OSError:
        return None
    try:
        rec = json.loads(head)
    except ValueError:
        return None
    if isinstance(rec, dict) and rec.get("type") == "session_meta" and isinstance(rec.get("payload"), dict):
        return rec["payload"]
    return None


def child_threads(path: str, thread_id: str, warnings: list[str]) -> dict[str, bytes]:
    """The rollouts of ``thread_id``'s sub-agents (and theirs), by side-tree path.

    Only rollouts named after the parent's start are looked at (a child starts after its
    parent), and of those only the first line, unless it names a thread of the family."""
    root = _sessions_root(path)
    m = _TS_RE.match(os.path.basename(path))
    if root is None or m is None or not thread_id:
        return {}
    since = m.group(1)
    candidates: list[str] = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames.sort()
        for name in sorted(files):
            n = _TS_RE.match(name)
            full = os.path.join(dirpath, name)
            if n and n.group(1) >= since and os.path.abspath(full) != os.path.abspath(path):
                candidates.append(full)
    family = {thread_id}
    found: dict[str, str] = {}  # child id -> path
    grown = True
    while grown:  # children of children: until no rollout names a thread of the family
        grown = False
        for full in candidates:
            if full in found.values():
                continue
            meta = _header(full)
            parent = parent_of(meta)
            if parent in family and isinstance(meta.get("id"), str) and meta["id"] not in family:
                family.add(meta["id"])
                found[meta["id"]] = full
                grown = True
    out: dict[str, bytes] = {}
    for child, full in sorted(found.items(), key=lambda kv: kv[1]):
        if len(out) == MAX_CHILDREN:
            warnings.append(f"{path}: more than {MAX_CHILDREN} child threads; the others are not stored with it")
            break
        try:
            with open(full, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            warnings.append(f"{full}: cannot be read ({exc.strerror or exc}); this child thread is not stored")
            continue
        out[PREFIX + os.path.relpath(full, root).replace(os.sep, "/")] = data
    return out


def written_back(side: Mapping[str, bytes], old_id: str | None, new_id: str, export_path: str,
                 report: LossReport) -> list[tuple[str, bytes, str]]:
    """The child rollouts of ``side`` as files beside the export at ``export_path``:
    (path, bytes, child thread id). The old parent id in them becomes ``new_id``."""
    out = []
    folder = os.path.dirname(export_path)
    stamp = _TS_RE.match(os.path.basename(export_path))
    for rel, data in side.items():
        if not rel.startswith(PREFIX):
            continue
        name = rel.rsplit("/", 1)[-1]
        if not _TS_RE.match(name) or name in (".", ".."):
            report.drop("child_thread:unsafe_name")
            continue
        if old_id and old_id != new_id:
            data = data.replace(old_id.encode(), new_id.encode())
        try:
            meta = json.loads(data.split(b"\n", 1)[0])["payload"]
            child = meta["id"]
        except (ValueError, KeyError, TypeError):
            report.drop("child_thread:no_header")
            continue
        if not isinstance(child, str) or not child:
            report.drop("child_thread:no_header")
            continue
        # The export's own time in the name, so that the family lists together.
        new_name = f"rollout-{stamp.group(1)}-{child}.jsonl" if stamp else name
        out.append((os.path.join(folder, new_name), data, child))
    if out:
        report.convert("child_thread:parent_renamed", len(out))
        report.note(f"{count(len(out), 'child thread')} (sub-agents) written back beside the rollout, their parent "
                    f"thread id now the new session's; each keeps its own id, which the parent's records name")
    return out

"""Where Claude Code reads its hooks, and the hook opal adds there for ``opal capture``.

Claude Code 2.1.x reads ``hooks`` from ``settings.json``: the project's
``.claude/settings.json`` and the user's ``~/.claude/settings.json``
(``$CLAUDE_CONFIG_DIR/settings.json`` when set). Each event holds a list of matcher
groups, each with a list of command hooks; a command gets the event as JSON on stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ...) and its
``timeout`` is in seconds. Checked against the real 2.1.328 (tests/clients/test_capture.py):
``Stop`` ends each turn, ``SubagentStop`` each subagent (with ``agent_transcript_path``),
``PreCompact`` comes before ``/compact`` or an automatic compaction (Claude waits for
it), ``SessionEnd`` when the process ends (also after every ``claude -p``).
"""

from __future__ import annotations

import os
from typing import Mapping

from opalgit.agents.base import home_folder

EVENTS = ("Stop", "SubagentStop", "PreCompact", "SessionEnd")
#: The events after which the agent may drop turns from what it shows the model:
#: opal's hook commits before it returns (within ``TIMEOUT``).
COMPACTION = ("PreCompact",)
#: Seconds Claude waits for opal's hook at most (its default is 60).
TIMEOUT = 30


def settings_path(scope: str, project: str | None, env: Mapping[str, str]) -> str | None:
    """The settings file of ``scope`` (``project``: in the folder ``project``; ``user``)."""
    if scope == "project":
        return os.path.join(project, ".claude", "settings.json") if project else None
    base = home_folder(env, "CLAUDE_CONFIG_DIR", ".claude")
    return os.path.join(base, "settings.json") if base else None


def group(command: str) -> dict:
    """The matcher group opal appends to each event's list (no matcher: every time)."""
    return {"hooks": [{"type": "command", "command": command, "timeout": TIMEOUT}]}


def steps(scope: str, path: str) -> list[str]:
    """What the user has to do before the hooks run: nothing, Claude reads them at start."""
    return ["Claude Code reads the hooks when it starts: restart a running session (or see them in /hooks)"]

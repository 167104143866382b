"""Where Gemini CLI reads its hooks, and the hook opal adds there for ``opal capture``.

Gemini CLI 0.61 reads ``hooks`` from ``settings.json``: the project's
``.gemini/settings.json`` and the user's ``~/.gemini/settings.json``
(``$GEMINI_CLI_HOME/.gemini`` when set). Each event holds matcher groups of command
hooks (a ``name`` each, by which ``hooksConfig.disabled`` can turn one off); ``timeout``
is in milliseconds (60000 unless set). A command runs in the session's folder with a
sanitised environment and gets the event as JSON on stdin (``session_id``,
``transcript_path`` (the chat's JSONL file), ``cwd``, ``hook_event_name``,
``timestamp``, ...). ``AfterAgent`` ends each turn, ``PreCompress`` comes before a
compression (advisory: Gemini does not wait for it), ``SessionEnd`` at exit (best
effort). Hooks are on unless ``hooksConfig.enabled`` is false. Project hooks run only in
a trusted folder; the first run warns about new ones and remembers them in
``~/.gemini/trusted_hooks.json``.
"""

from __future__ import annotations

import os
from typing import Mapping

EVENTS = ("AfterAgent", "PreCompress", "SessionEnd")
COMPACTION = ("PreCompress",)
#: Milliseconds, Gemini's unit.
TIMEOUT = 30000
NAME = "opal-capture"


def settings_path(scope: str, project: str | None, env: Mapping[str, str]) -> str | None:
    if scope == "project":
        return os.path.join(project, ".gemini", "settings.json") if project else None
    home = env.get("GEMINI_CLI_HOME") or env.get("HOME") or env.get("USERPROFILE")
    return os.path.join(home, ".gemini", "settings.json") if home else None


def group(command: str) -> dict:
    return {"hooks": [{"name": NAME, "type": "command", "command": command, "timeout": TIMEOUT}]}


def steps(scope: str, path: str) -> list[str]:
    out = ["Gemini CLI reads the hooks when it starts (and lists them in /hooks panel); "
           "hooksConfig.enabled must not be false"]
    if scope == "project":
        out.append("project hooks run only in a trusted folder; the first run warns once about the new hooks")
    return out

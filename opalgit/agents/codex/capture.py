"""Where Codex CLI reads its hooks, and the hook opal adds there for ``opal capture``.

Codex 0.169 reads ``hooks.json`` (``{"hooks": {EVENT: [matcher groups]}}``, the same
shape as Claude Code's) from ``$CODEX_HOME`` (default ``~/.codex``) and from a project's
``.codex/`` folder; ``[hooks]`` in ``config.toml`` is the other form of the same thing.
A command gets the event as JSON on stdin (``session_id``, ``transcript_path`` (the
rollout file), ``cwd``, ``hook_event_name``, ``turn_id``, ...); ``timeout`` is in
seconds (600 unless set). ``Stop`` ends each turn, ``PreCompact`` comes before a
compaction (Codex waits for it), ``SessionEnd`` when ``codex exec`` ends.

Two steps are the user's, checked against the real 0.169.0:

* The feature: hooks are the ``hooks`` feature, stable and on by default in 0.169
  (``codex features list``); ``codex_hooks`` is its old name, which older releases
  needed set in ``[features]``. opal does not touch ``config.toml``.
* Trust: Codex runs a hook from a user or project file only once the user trusted that
  exact hook (its hash is kept in ``config.toml`` under ``[hooks.state]``). Until then
  it is skipped without a word. Trust it in the interactive ``codex``: ``/hooks``, then
  trust opal's entries; a changed command (opal moved or reinstalled) must be trusted
  again. ``codex exec --dangerously-bypass-hook-trust`` runs untrusted hooks for one
  run. A project's ``.codex/`` is read only in a trusted project.
"""

from __future__ import annotations

import os
from typing import Mapping

from opalgit.agents.codex.files import codex_home

EVENTS = ("Stop", "PreCompact", "SessionEnd")
COMPACTION = ("PreCompact",)
TIMEOUT = 30


def settings_path(scope: str, project: str | None, env: Mapping[str, str]) -> str | None:
    if scope == "project":
        return os.path.join(project, ".codex", "hooks.json") if project else None
    base = codex_home(env)
    return os.path.join(base, "hooks.json") if base else None


def group(command: str) -> dict:
    return {"hooks": [{"type": "command", "command": command, "timeout": TIMEOUT}]}


def steps(scope: str, path: str) -> list[str]:
    out = ["Codex runs a hook only once you trust it: start 'codex', type /hooks and trust opal's "
           f"{len(EVENTS)} hooks (again after 'opal capture install' changes them); for one 'codex exec' run, "
           "--dangerously-bypass-hook-trust runs them untrusted",
           "the hooks feature is on by default in Codex 0.169 ('codex features list' shows hooks true); "
           "an older Codex needs [features] codex_hooks = true in config.toml"]
    if scope == "project":
        out.append("Codex reads a project's .codex/ folder only when the project is trusted "
                   "(the first interactive 'codex' there asks)")
    return out

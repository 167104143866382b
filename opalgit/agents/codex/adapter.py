"""The Codex CLI adapter: the registry's handle on :mod:`.files`, :mod:`.read` and :mod:`.write`."""

from __future__ import annotations

from opalgit.agents.base import PackageAdapter
from opalgit.agents.codex import files
from opalgit.agents.codex import read as reader

__all__ = ["CodexAdapter"]


class CodexAdapter(PackageAdapter):
    """Codex CLI: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl``."""

    name = "codex"
    title = "Codex CLI"
    file_kind = "a Codex CLI rollout"
    replays = False  # a rollout line means the same whatever came before it
    files, reader, writer = files, reader, "opalgit.agents.codex.write"

"""The GitHub Copilot CLI adapter: the registry's handle on :mod:`.files`, :mod:`.read` and :mod:`.write`."""

from __future__ import annotations

from opalgit.agents.base import PackageAdapter
from opalgit.agents.copilot import files
from opalgit.agents.copilot import read as reader

__all__ = ["CopilotAdapter"]


class CopilotAdapter(PackageAdapter):
    """GitHub Copilot CLI: ``$COPILOT_HOME/session-state/<uuid>/events.jsonl`` (``~/.copilot``)."""

    name = "copilot"
    title = "GitHub Copilot CLI"
    file_kind = "a GitHub Copilot CLI session"
    replays = False  # an event means the same whatever came before it
    files, reader, writer = files, reader, "opalgit.agents.copilot.write"

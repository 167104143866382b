"""The Gemini CLI adapter: the registry's handle on :mod:`.files`, :mod:`.read` and :mod:`.write`."""

from __future__ import annotations

from opalgit.agents.base import PackageAdapter
from opalgit.agents.gemini import files
from opalgit.agents.gemini import read as reader

__all__ = ["GeminiAdapter"]


class GeminiAdapter(PackageAdapter):
    """Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl``."""

    name = "gemini"
    title = "Gemini CLI"
    file_kind = "a Gemini CLI session"
    replays = True  # $set / $rewindTo lines change what earlier lines mean
    # A stored turn's standalone view (normalize_record): every message counts as live (see .log).
    files, reader, writer = files, reader, "opalgit.agents.gemini.write"

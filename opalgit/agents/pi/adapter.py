"""The Pi adapter: the registry's handle on :mod:`.files`, :mod:`.read` and :mod:`.write`."""

from __future__ import annotations

from opalgit.agents.base import PackageAdapter
from opalgit.agents.pi import files
from opalgit.agents.pi import read as reader

__all__ = ["PiAdapter"]


class PiAdapter(PackageAdapter):
    """Pi: ``~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl``, a tree of entries."""

    name = "pi"
    title = "Pi"
    file_kind = "a Pi session"
    # Each entry means what it says alone (no later line replaces an earlier one).
    replays = False
    files, reader, writer = files, reader, "opalgit.agents.pi.write"

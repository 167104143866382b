"""The opencode adapter: the registry's handle on :mod:`.files`, :mod:`.read` and :mod:`.write`."""

from __future__ import annotations

from opalgit.agents.base import PackageAdapter
from opalgit.agents.opencode import files
from opalgit.agents.opencode import read as reader

__all__ = ["OpencodeAdapter"]


class OpencodeAdapter(PackageAdapter):
    """opencode: sessions in ``~/.local/share/opencode/opencode.db``, read as ``opencode export`` JSON."""

    name = "opencode"
    title = "opencode"
    file_kind = "an opencode session export"
    replays = False  # each record (the session, or one message with its parts) stands alone
    files, reader, writer = files, reader, "opalgit.agents.opencode.write"

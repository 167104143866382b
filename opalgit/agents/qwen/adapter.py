"""The Qwen Code adapter: the registry's handle on :mod:`.files`, :mod:`.read` and :mod:`.write`."""

from __future__ import annotations

from opalgit.agents.base import PackageAdapter
from opalgit.agents.qwen import files
from opalgit.agents.qwen import read as reader

__all__ = ["QwenAdapter"]


class QwenAdapter(PackageAdapter):
    """Qwen Code: ``~/.qwen/projects/<project key>/chats/<session id>.jsonl``."""

    name = "qwen"
    title = "Qwen Code"
    file_kind = "a Qwen Code session"
    # A record's view depends on that record alone (the chain decides views, not meaning).
    replays = False
    files, reader, writer = files, reader, "opalgit.agents.qwen.write"

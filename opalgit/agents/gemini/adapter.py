"""The Gemini CLI adapter: the registry's handle on :mod:`.files`, :mod:`.read` and :mod:`.write`."""

from __future__ import annotations

from typing import Mapping

from opalgit.agents.base import Adapter, ExportRequest, ExportResult, ReadResult, SessionFile
from opalgit.agents.gemini import files
from opalgit.agents.gemini import read as reader
from opalgit.history.model import Normal, Turn

__all__ = ["GeminiAdapter"]


class GeminiAdapter(Adapter):
    """Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl``."""

    name = "gemini"
    title = "Gemini CLI"
    file_kind = "a Gemini CLI session"
    replays = True  # $set / $rewindTo lines change what earlier lines mean

    def find_sessions(self, cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
        return files.find_sessions(cwd, env)

    def find_session(self, session_id: str, env: Mapping[str, str]) -> SessionFile | None:
        return files.find_session(session_id, env)

    def sniff(self, path: str, head: bytes) -> float:
        return reader.sniff(path, head)

    def read(self, path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
        with self.refusing():
            return reader.read(path, start=start, first_line=first_line, state=state)

    # A stored turn's standalone view: every message counts as live (see :mod:`.log`).
    normalize_record = staticmethod(reader.normalize_record)

    def normalize_many(self, turns: list[Turn]) -> list[Normal]:
        return reader.normalize_many(turns, self.normalize)

    # Imported on the first export: reading commands never load the writer.
    def export(self, req: ExportRequest) -> ExportResult:
        from opalgit.agents.gemini import write

        return write.export(req)

"""The Codex CLI adapter: the registry's handle on :mod:`.files`, :mod:`.read` and :mod:`.write`."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from opalgit.agents.base import Adapter, ExportRequest, ExportResult, ReadResult, SessionFile, sniff_lines
from opalgit.agents.codex import files
from opalgit.agents.codex import read as reader
from opalgit.history.model import Turn

__all__ = ["CodexAdapter"]


class CodexAdapter(Adapter):
    """Codex CLI: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl``."""

    name = "codex"
    title = "Codex CLI"
    file_kind = "a Codex CLI rollout"

    def find_sessions(self, cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
        return files.find_sessions(cwd, env)

    def find_session(self, session_id: str, env: Mapping[str, str]) -> SessionFile | None:
        return files.find_session(session_id, env)

    def sniff(self, path: str, head: bytes) -> float:
        if files.is_zst(path, head):
            head = files.decompressed_head(path, head)
            if head is None:
                return 0.0
        return sniff_lines(head, reader.claim, reader.claim_cut)

    def read(self, path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
        with self.refusing():
            return reader.read(path, start=start, first_line=first_line, state=state)

    normalize_record = staticmethod(reader.normalize_record)

    # Imported on the first export: reading commands never load the writer.
    def export(self, req: ExportRequest) -> ExportResult:
        from opalgit.agents.codex import write

        return write.export(req)

    def replace_tool_outputs(self, turn: Turn, replace: Callable[[str, str], Any]) -> Turn | None:
        from opalgit.agents.codex import write

        return write.replace_tool_outputs(turn, replace)

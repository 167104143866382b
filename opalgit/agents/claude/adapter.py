"""The Claude Code adapter: the registry's handle on :mod:`.files`, :mod:`.read` and :mod:`.write`."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from opalgit.agents.base import Adapter, ExportRequest, ExportResult, ReadResult, SessionFile, sniff_lines
from opalgit.agents.claude import files
from opalgit.agents.claude import read as reader
from opalgit.history.model import Normal, Turn

__all__ = ["ClaudeAdapter"]


class ClaudeAdapter(Adapter):
    """Claude Code: ``~/.claude/projects/<project-key>/<session-id>.jsonl``."""

    name = "claude"
    title = "Claude Code"
    file_kind = "a Claude Code transcript"
    # normalize_many only marks a repeated uuid (a continuation copy) as bookkeeping,
    # which the stored summaries already say; a turn normalizes alone, so 'opal show
    # REV:N' reads one record, not the whole state (37 s -> 0.1 s on 100,000 turns).
    replays = False

    config_dir = staticmethod(files.config_dir)

    def projects_dir(self, env: Mapping[str, str]) -> str | None:
        return files.projects_dir(env)

    def find_sessions(self, cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
        return files.find_sessions(cwd, env)

    def find_session(self, session_id: str, env: Mapping[str, str]) -> SessionFile | None:
        return files.find_session(session_id, env)

    def sniff(self, path: str, head: bytes) -> float:
        return sniff_lines(head, reader.claim)

    def subagent_of(self, path: str, head: bytes) -> tuple[str, str | None] | None:
        """A subagent's transcript (:func:`.read.subagent_parent`): its turns are stored
        with the parent session's side folder."""
        parent = reader.subagent_parent(head)
        return None if parent is None else (parent, files.parent_file(path, parent))

    def read(self, path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
        with self.refusing():
            return reader.read(path, start=start, first_line=first_line, state=state)

    normalize_record = staticmethod(reader.normalize_record)

    def normalize_many(self, turns: list[Turn]) -> list[Normal]:
        return reader.normalize_many(turns, self.normalize)

    # Imported on the first export: reading commands never load the writer.
    def export(self, req: ExportRequest) -> ExportResult:
        from opalgit.agents.claude import write

        return write.export(req)

    def replace_tool_outputs(self, turn: Turn, replace: Callable[[str, str], Any]) -> Turn | None:
        from opalgit.agents.claude import write

        return write.replace_tool_outputs(turn, replace)

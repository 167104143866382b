"""The Claude Code adapter: the registry's handle on :mod:`.files`, :mod:`.read` and :mod:`.write`."""

from __future__ import annotations

from opalgit.agents.base import PackageAdapter
from opalgit.agents.claude import files
from opalgit.agents.claude import read as reader

__all__ = ["ClaudeAdapter"]


class ClaudeAdapter(PackageAdapter):
    """Claude Code: ``~/.claude/projects/<project-key>/<session-id>.jsonl``."""

    name = "claude"
    title = "Claude Code"
    file_kind = "a Claude Code transcript"
    # normalize_many only marks a repeated uuid (a continuation copy) as bookkeeping,
    # which the stored summaries already say; a turn normalizes alone, so 'opal show
    # REV:N' reads one record, not the whole state (37 s -> 0.1 s on 100,000 turns).
    replays = False
    verbatim_texts = True  # its texts are the record's strings (test_grep_prefilter)
    files, reader, writer = files, reader, "opalgit.agents.claude.write"

    config_dir = staticmethod(files.config_dir)
    projects_dir = staticmethod(files.projects_dir)

    def subagent_of(self, path: str, head: bytes) -> tuple[str, str | None] | None:
        """A subagent's transcript (:func:`.read.subagent_parent`): its turns are stored
        with the parent session's side folder."""
        parent = reader.subagent_parent(head)
        return None if parent is None else (parent, files.parent_file(path, parent))

"""``opal squash``: replace a range of turns by one authored summary turn (a drop that
leaves a message in place of what it took out; see :mod:`opalgit.porcelain.drop`)."""

from __future__ import annotations

from opalgit.porcelain.drop import EditResult, drop
from opalgit.store.repo import Repository


def squash(repo: Repository, range_text: str, message: str) -> EditResult:
    """Drop ``range_text`` of the current branch and put ``message`` in its place."""
    return drop(repo, range_text, squash_message=message)

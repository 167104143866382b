"""States as the porcelain reads and writes them: :mod:`opalgit.history.states` with
what it cannot import bound in.

The history layer sits below the agents and the porcelain, so two things a state
needs from them are passed to it, here and nowhere else: the adapter registry
(:func:`opalgit.agents.get`), which gives a stored record its normalized view, and
the porcelain's redaction (:func:`opalgit.porcelain.secrets.redact_header`), which
every state commit's header and message go through before they are written. Every
verb normalizes, previews and writes states through these functions.
"""

from __future__ import annotations

from typing import Mapping

from opalgit import agents
from opalgit.agents.base import Adapter
from opalgit.errors import OpalError
from opalgit.history import states
from opalgit.history.model import Normal, StateHeader, Turn
from opalgit.history.preview import text
from opalgit.history.sequence import Item, Node
from opalgit.store.repo import Repository


def normals_of(turns: list[Turn]) -> list[Normal]:
    """Normalized views of a sequence of resolved turns, replayed per agent."""
    return states.normals_of(turns, agents.get)


def normal_of(repo: Repository, item: Item) -> Normal:
    """The normalized view of one stored record (alone: see :func:`replays`)."""
    return states.normal_of(repo, item, agents.get)


def replays(agent: str) -> bool:
    """Whether ``agent``'s adapter reads a record in the light of the ones before it
    (its ``normalize_many`` is its own), so that one record's view is the replay's."""
    kind = type(agents.get(agent))
    if kind.replays is not None:
        return kind.replays
    return kind.normalize_many is not Adapter.normalize_many


def of_item(repo: Repository, item: Item, width: int = 72) -> str:
    """The preview of a stored record. One that cannot be read says so in its place
    ('opal fsck' names the cause): a listing goes on past it."""
    try:
        return text(normal_of(repo, item), width)
    except (OpalError, ValueError, KeyError, TypeError) as exc:
        return f"(cannot read this record: {type(exc).__name__}; see 'opal fsck')"


def write_state(
    repo: Repository,
    header: StateHeader,
    root: Node | None,
    parents: list[bytes],
    message: str,
    *,
    packs: bytes | None = None,
    side: Mapping[str, bytes] | None = None,
) -> bytes:
    """Write a state commit (:func:`opalgit.history.states.write_state`), its header
    and message redacted first."""
    # Imported here: the secret rules cost start-up time, loaded when a state is written.
    from opalgit.porcelain.secrets import redact_header

    return states.write_state(repo, header, root, parents, message, redact=redact_header, packs=packs, side=side)

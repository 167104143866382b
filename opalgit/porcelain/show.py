"""``opal show REV:N``: one turn of a state, as stored and as its agent means it."""

from __future__ import annotations

from typing import Any

from opalgit import agents as adapters
from opalgit.history import sequence
from opalgit.history.model import Normal
from opalgit.history.states import load_state, turn_item_index, turn_of
from opalgit.porcelain.states import normals_of
from opalgit.porcelain.states import replays as _replays
from opalgit.store.repo import Repository
from opalgit.structs import dataclass
from opalgit.times import iso_ms


@dataclass
class ShownTurn:
    """One turn as ``opal show`` prints it: its summary, normalized view and source record."""

    commit: bytes
    number: int
    index: int
    id: bytes
    summary: dict
    normal: Normal
    agent: str
    record: Any  # the source record (JSON) when there is one

    def to_json(self) -> dict:
        return {
            "commit": self.commit.hex(),
            "turn": self.number,
            "record": self.index + 1,
            "id": self.id.hex(),
            "agent": self.agent,
            "role": self.normal.role,
            "time": iso_ms(self.normal.time),
            "blocks": self.normal.blocks,
            "source": self.record,
        }


def show_turn(repo: Repository, oid: bytes, turn: int) -> ShownTurn:
    st = load_state(repo, oid)
    index = turn_item_index(repo, st, turn)
    si = next(sequence.iter_items(repo.store, st.root, index, index + 1))
    t = turn_of(repo, si.item)
    if t.agent != "opal" and _replays(t.agent):
        # The record's meaning depends on the others (a mutation log): replay the state.
        everything = [turn_of(repo, x.item) for x in sequence.iter_items(repo.store, st.root)]
        normal = normals_of(everything)[index]
    elif t.agent == "opal":
        normal = Normal(role=t.role or "meta", blocks=list(t.blocks or ()))
    else:
        normal = adapters.get(t.agent).normalize(t)
    number = turn if turn > 0 else st.header.turns + turn + 1
    return ShownTurn(oid, number, index, si.item.id, si.item.summary, normal, t.agent, t.record if t.has_record else None)


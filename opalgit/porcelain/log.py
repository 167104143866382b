"""``opal log``: the state commits of a history (``log``, ``commit_info``) and the
records of one state (``opal log --turns``: ``turns``)."""

from __future__ import annotations

from typing import Callable, Mapping

from opalgit.history import sequence
from opalgit.history.model import StateHeader
from opalgit.history.states import load_state, resolve
from opalgit.porcelain.branch import branch_labels
from opalgit.store.objects import CommitData
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field
from opalgit.times import iso_ms, iso_seconds


@dataclass
class CommitInfo:
    """One state commit as ``opal log`` shows it."""

    oid: bytes
    parents: tuple[bytes, ...]
    message: str
    author: str
    time: int
    offset: int
    header: StateHeader
    branches: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        h = self.header
        return {
            "id": self.oid.hex(),
            "parents": [p.hex() for p in self.parents],
            "message": self.message.rstrip("\n"),
            "author": self.author,
            "time": iso_seconds(self.time),
            "branches": self.branches,
            "agent": h.session.agent if h.session else None,
            "session": h.session.to_map() if h.session else None,
            "turns": h.turns,
            "records": h.items,
            "new_records": list(h.new_items),
            "tokens_estimate": _tokens(h.chars),
            **({"extra": h.extra} if h.extra else {}),
        }


def _tokens(chars: int) -> int:
    from opalgit.history.tokens import estimate

    return estimate(chars)


def commit_info(repo: Repository, oid: bytes, labels: Mapping[bytes, list[str]] | None = None) -> CommitInfo:
    st = load_state(repo, oid)
    c = st.commit
    return CommitInfo(
        oid=oid,
        parents=c.parents,
        message=c.message,
        author=f"{c.author.name} <{c.author.email}>",
        time=c.author.time,
        offset=c.author.offset,
        header=st.header,
        branches=list((labels or {}).get(oid, [])),
    )



def log(repo: Repository, revs: list[str] | None = None, limit: int | None = None, *, order: str = "date",
        starts: list[bytes] | None = None, hide: set[bytes] | frozenset[bytes] = frozenset(),
        keep: Callable[[CommitData], bool] | None = None) -> list[CommitInfo]:
    """Commits reachable from ``revs`` (default HEAD), newest first, like ``git log``.

    Never a parent before one of its children (what ``--graph`` needs), even when
    commits share a second or clocks disagree. ``order`` is git's: ``"date"``
    (``--date-order``: the newest ready commit first) or ``"topo"`` (``--topo-order``,
    what ``git log --graph`` uses: each line of history whole); ties as git breaks them
    (see :func:`opalgit.history.graph.order`), so ``opal log`` and ``git log`` agree.
    ``starts`` (resolved already) replaces ``revs``; the walk does not enter ``hide``
    (a range's excluded side, :func:`revision.select`), and lists only the commits
    ``keep`` accepts (``--since``), counting only those against ``limit``.
    """
    from opalgit.history import graph

    if starts is None:
        starts = [resolve(repo, r).oid for r in (revs or ["HEAD"])]
    labels = branch_labels(repo)
    # The reachable graph from commit headers alone (cheap); states are read only for
    # the commits shown.
    commits: dict[bytes, CommitData] = {}
    stack = [o for o in dict.fromkeys(starts) if o not in hide]
    while stack:
        oid = stack.pop()
        if oid in commits or oid in hide:
            continue
        c = commits[oid] = repo.store.read_commit(oid)
        stack.extend(p for p in c.parents if p not in hide)
    parents = {o: [p for p in c.parents if p not in hide] for o, c in commits.items()}
    dates = {o: c.committer.time for o, c in commits.items()}
    shown = graph.order([o for o in dict.fromkeys(starts) if o not in hide], parents, dates, order)
    if keep is not None:
        shown = [o for o in shown if keep(commits[o])]
    if limit is not None:
        shown = shown[:limit]
    return [commit_info(repo, oid, labels) for oid in shown]


@dataclass
class TurnInfo:
    """One record of a state as ``opal log --turns`` lists it."""

    number: int | None  # 1-based turn number, None for meta records
    index: int  # 0-based record index
    id: bytes
    summary: dict

    def to_json(self) -> dict:
        s = self.summary
        return {
            "turn": self.number,
            "record": self.index + 1,
            "id": self.id.hex(),
            "role": s.get("role"),
            "kind": s.get("kind"),
            "tool": s.get("tool"),
            "chars": s.get("chars", 0),
            "tokens_estimate": _tokens(int(s.get("chars", 0))),
            "time": iso_ms(s.get("time")),
            **({"label": s["label"]} if "label" in s else {}),
        }


def turns(repo: Repository, rev: str = "HEAD", *, include_meta: bool = False) -> list[TurnInfo]:
    st = load_state(repo, resolve(repo, rev).oid)
    out: list[TurnInfo] = []
    number = 0
    for si in sequence.iter_items(repo.store, st.root):
        if si.item.is_turn:
            number += 1
            out.append(TurnInfo(number, si.index, si.item.id, si.item.summary))
        elif include_meta:
            out.append(TurnInfo(None, si.index, si.item.id, si.item.summary))
    return out


"""Three-way merge of turn sequences. Pure: works on lists of ids; conflicts are values.

The result is documented and deterministic:

* a region changed on one side only takes that side's change (so a turn dropped or
  rewound past on one side and unchanged on the other stays dropped);
* a region changed identically on both sides is taken once;
* when both sides only appended after the end of the base, the result is the base,
  then *our* new turns, then a marker turn, then *their* new turns. Ours come first
  because the current branch is the line the agent is continuing; the merged-in
  branch reads as "what the other line of work found", introduced by the marker;
* any other region changed differently on both sides is a :class:`Conflict`. The
  merge never raises for it: the caller decides (``--strategy``, or per conflict).
"""

from __future__ import annotations

from typing import Sequence

from opalgit.history.align import align
from opalgit.structs import dataclass, field

CHOICES = ("ours", "theirs", "both", "base")


@dataclass(frozen=True)
class Piece:
    """A run of the result: ``source`` is base, ours, theirs, marker or conflict."""

    source: str
    start: int = 0
    end: int = 0
    conflict: int | None = None


@dataclass(frozen=True)
class Conflict:
    index: int
    base: tuple[int, int]
    ours: tuple[int, int]
    theirs: tuple[int, int]


@dataclass
class MergeResult:
    pieces: list[Piece] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    appended: bool = False  # the both-sides-appended rule applied (a marker is in the pieces)

    def resolved(self, choices: dict[int, str]) -> list[Piece]:
        """Pieces with every conflict replaced by the chosen side(s)."""
        out: list[Piece] = []
        for p in self.pieces:
            if p.source != "conflict":
                out.append(p)
                continue
            assert p.conflict is not None
            c = self.conflicts[p.conflict]
            choice = choices.get(c.index)
            if choice not in CHOICES:
                raise KeyError(c.index)
            if choice in ("ours", "both") and c.ours[1] > c.ours[0]:
                out.append(Piece("ours", *c.ours))
            if choice in ("theirs", "both") and c.theirs[1] > c.theirs[0]:
                out.append(Piece("theirs", *c.theirs))
            if choice == "base" and c.base[1] > c.base[0]:
                out.append(Piece("base", *c.base))
        return out


def _matches(base: Sequence[bytes], side: Sequence[bytes]) -> list[int | None]:
    where: list[int | None] = [None] * len(base)
    for op in align(base, side):
        if op.tag == "equal":
            for off in range(op.a[1] - op.a[0]):
                where[op.a[0] + off] = op.b[0] + off
    return where


def merge3(base: Sequence[bytes], ours: Sequence[bytes], theirs: Sequence[bytes]) -> MergeResult:
    """Merge ``ours`` and ``theirs``, both descended from ``base``."""
    mo, mt = _matches(base, ours), _matches(base, theirs)
    result = MergeResult()
    i = j = k = 0
    nb, no, nt = len(base), len(ours), len(theirs)

    def emit(source: str, start: int, end: int) -> None:
        if end <= start:
            return
        last = result.pieces[-1] if result.pieces else None
        if last is not None and last.source == source and last.end == start:
            result.pieces[-1] = Piece(source, last.start, end)
        else:
            result.pieces.append(Piece(source, start, end))

    while i < nb or j < no or k < nt:
        if i < nb and mo[i] == j and mt[i] == k:
            emit("base", i, i + 1)
            i, j, k = i + 1, j + 1, k + 1
            continue
        # The next base record both sides still have: where the sides agree again.
        i2 = i
        while i2 < nb and not (mo[i2] is not None and mt[i2] is not None and mo[i2] >= j and mt[i2] >= k):
            i2 += 1
        j2 = mo[i2] if i2 < nb else no
        k2 = mt[i2] if i2 < nb else nt
        assert j2 is not None and k2 is not None
        b_chunk, o_chunk, t_chunk = base[i:i2], ours[j:j2], theirs[k:k2]
        if list(o_chunk) == list(b_chunk):
            emit("theirs", k, k2)
        elif list(t_chunk) == list(b_chunk) or list(o_chunk) == list(t_chunk):
            emit("ours", j, j2)
        elif i == i2 == nb:
            # Both sides only appended after the end of the base.
            emit("ours", j, j2)
            result.pieces.append(Piece("marker"))
            emit("theirs", k, k2)
            result.appended = True
        else:
            c = Conflict(len(result.conflicts), (i, i2), (j, j2), (k, k2))
            result.conflicts.append(c)
            result.pieces.append(Piece("conflict", conflict=c.index))
        i, j, k = i2, j2, k2
    return result

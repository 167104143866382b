"""Aligning two turn sequences by identity. Pure: works on lists of ids.

Turns are matched by content address, so equal turns are equal ids and a diff is a
sequence alignment over ids (difflib's matcher, which finds the longest matching
blocks first). Callers skip shared leaves of the Merkle sequence before calling this,
so two long branches that share almost everything align only their differing part.
"""

from __future__ import annotations

import difflib
from typing import Sequence

from opalgit.structs import dataclass


@dataclass(frozen=True)
class Op:
    """One aligned region: ``tag`` is equal, delete, insert or replace.

    ``a`` and ``b`` are half-open index ranges into the two sequences.
    """

    tag: str
    a: tuple[int, int]
    b: tuple[int, int]


def align(a: Sequence[bytes], b: Sequence[bytes]) -> list[Op]:
    matcher = difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False)
    return [Op(tag, (i1, i2), (j1, j2)) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]


def text_diff(old: str, new: str, *, context: int = 2, max_lines: int = 200) -> list[str]:
    """A unified diff of two texts, without file headers, cut at ``max_lines``."""
    lines = list(
        difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=context)
    )[2:]
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more diff lines)"]
    return lines

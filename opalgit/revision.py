"""Revision syntax, git-style: ``HEAD``, ``@``, ``main``, ``main~2``, ``HEAD^``, ``HEAD^2``,
a short commit id, and ``REV:N`` for turn N of a revision's state.

Parsing is pure (:func:`parse`); resolving against a repository is done by
:func:`opalgit.porcelain.resolve`.

Turn numbers count conversational turns (user, assistant, tool, system; not the
agent's bookkeeping records) from 1, as ``opal log --turns`` shows them. A negative
number counts from the end: ``HEAD:-1`` is the last turn.
"""

from __future__ import annotations

import re

from .errors import RevisionError
from .structs import dataclass

_STEP = re.compile(r"([~^])(\d*)")


@dataclass(frozen=True)
class Revision:
    base: str  # "HEAD", a branch name, or a hex prefix
    steps: tuple[tuple[str, int], ...]  # ("~", n): n first parents back; ("^", n): the n-th parent
    turn: int | None  # 1-based turn number, negative from the end, None for the whole state
    text: str


def parse(text: str) -> Revision:
    original = text
    if not text or text.strip() != text:
        raise RevisionError(f"{original!r} is not a revision", hint="e.g. HEAD, main~2, HEAD^, a1b2c3d, main:12")
    turn = None
    if ":" in text:
        text, _, number = text.rpartition(":")
        try:
            turn = int(number)
        except ValueError:
            raise RevisionError(f"{original!r}: {number!r} is not a turn number", hint="write REV:N, e.g. HEAD:12 or HEAD:-1") from None
        if turn == 0:
            raise RevisionError(f"{original!r}: turns are numbered from 1", hint="HEAD:1 is the first turn, HEAD:-1 the last")
        if not text:
            text = "HEAD"
    match = re.search(r"[~^]", text)
    base = text if match is None else text[: match.start()]
    rest = "" if match is None else text[match.start() :]
    if base == "@":
        base = "HEAD"
    if not base:
        raise RevisionError(f"{original!r} is not a revision", hint="e.g. HEAD, main~2, HEAD^")
    steps: list[tuple[str, int]] = []
    pos = 0
    while pos < len(rest):
        m = _STEP.match(rest, pos)
        if m is None:
            raise RevisionError(f"{original!r} is not a revision", hint="e.g. HEAD~2, HEAD^, HEAD^2")
        kind, digits = m.group(1), m.group(2)
        steps.append((kind, int(digits) if digits else 1))
        pos = m.end()
    return Revision(base, tuple(steps), turn, original)

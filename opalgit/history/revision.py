"""Revision syntax, git-style: ``HEAD``, ``@``, ``main``, ``main~2``, ``HEAD^``, ``HEAD^2``,
a short commit id, and ``REV:N`` for turn N of a revision's state.

Parsing is pure (:func:`parse`); resolving against a repository is done by
:func:`opalgit.history.states.resolve`.

Ranges, for ``opal log`` and ``opal diff``, as git has them (:func:`select`):
``A..B`` is what B has and A has not, ``A...B`` what either has and not both
(for diff: from their merge base to B), ``^A`` excludes what A has; ``A..`` and
``..B`` stand for ``A..HEAD`` and ``HEAD..B``.

Turn numbers count conversational turns (user, assistant, tool, system; not the
agent's bookkeeping records) from 1, as ``opal log --turns`` shows them. A negative
number counts from the end: ``HEAD:-1`` is the last turn.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from opalgit.errors import RevisionError
from opalgit.structs import dataclass

if TYPE_CHECKING:
    from opalgit.store.repo import Repository

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


# ------------------------------------------------------------------------------ ranges


@dataclass(frozen=True)
class Range:
    """What ``A..B``, ``A...B`` or ``^A`` says, before it is resolved."""

    kind: str  # "one" (a plain revision), "not" (^A), "two" (A..B), "three" (A...B)
    left: str
    right: str


def split_range(text: str) -> Range:
    """Recognise ``A..B`` / ``A...B`` / ``^A``; a plain revision is kind "one"."""
    for sep, kind in (("...", "three"), ("..", "two")):
        if sep in text:
            left, _, right = text.partition(sep)
            if "." in (left[-1:], right[:1]):
                raise RevisionError(f"{text!r} is not a range", hint="write A..B or A...B")
            for side in (left, right):
                if side and ":" in side:
                    raise RevisionError(f"{text!r}: a range is of commits, not turns",
                                        hint="drop the :N, or compare turns with 'opal diff A:N B:N'")
            return Range(kind, left or "HEAD", right or "HEAD")
    if text.startswith("^") and len(text) > 1:
        return Range("not", text[1:], "")
    return Range("one", text, "")


def ancestors(repo: "Repository", starts: Iterable[bytes]) -> set[bytes]:
    """Every commit reachable from ``starts``, the starts included (commit headers only)."""
    seen: set[bytes] = set()
    stack = list(starts)
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        stack.extend(repo.store.read_commit(oid).parents)
    return seen


def select(repo: "Repository", texts: Iterable[str]) -> tuple[list[bytes], set[bytes]]:
    """The commits ``git log TEXTS`` starts from, and the ones it hides: every
    ancestor of a ``^A``, of the A of ``A..B``, and what both sides of ``A...B`` share
    (the ancestors of all their merge bases)."""
    from opalgit.history.states import resolve

    def oid(text: str) -> bytes:
        r = resolve(repo, text)
        if r.turn is not None:
            raise RevisionError(f"{text!r} names a turn, not a commit", hint=f"use 'opal show {text}', or drop the :N")
        return r.oid

    starts: list[bytes] = []
    hide: list[bytes] = []
    shared: set[bytes] = set()
    for text in texts:
        r = split_range(text)
        if r.kind == "one":
            starts.append(oid(r.left))
        elif r.kind == "not":
            hide.append(oid(r.left))
        elif r.kind == "two":
            hide.append(oid(r.left))
            starts.append(oid(r.right))
        else:
            a, b = oid(r.left), oid(r.right)
            starts += [a, b]
            shared |= ancestors(repo, [a]) & ancestors(repo, [b])
    return starts, ancestors(repo, hide) | shared


def merge_base(repo: "Repository", a: str, b: str) -> bytes:
    """The merge base ``git diff A...B`` compares from (git's first one when there are several)."""
    from opalgit.history.states import resolve

    ra, rb = resolve(repo, a), resolve(repo, b)
    base = repo.merge_base(ra.oid, rb.oid)
    if base is None:
        raise RevisionError(f"{a} and {b} have no commit in common", hint=f"compare them directly: 'opal diff {a} {b}'")
    return base

"""Counted nouns for the CLI's output: "1 turn", "2 turns", "0 turns".

One helper, so that no message says "1 turns" again: every count printed next to a
noun goes through :func:`count`.
"""

from __future__ import annotations

# Nouns whose plural is not the singular plus "s".
_IRREGULAR = {"child": "children", "entry": "entries", "branch": "branches", "match": "matches",
              "leaf": "leaves", "process": "processes"}


def noun(n: int, singular: str, plural: str | None = None) -> str:
    """``singular`` or its plural, as ``n`` asks (English: only exactly 1 is singular).
    Give ``plural`` for a verb that agrees with the count (``noun(n, "remains", "remain")``)."""
    if n == 1:
        return singular
    if plural is not None:
        return plural
    head, _, last = singular.rpartition(" ")
    many = _IRREGULAR.get(last, last + "s")
    return f"{head} {many}" if head else many


def count(n: int, singular: str, plural: str | None = None) -> str:
    """``"1 turn"``, ``"3 turns"``; ``"1 tool call"``, ``"2 tool calls"`` (the last word is counted)."""
    return f"{n} {noun(n, singular, plural)}"

"""Read the parent edges back out of a ``git log --graph``-style drawing.

The workflow tests compare what ``opal log --graph`` draws with the parents git
records (``git rev-list --parents``): a drawing that puts a fork or a merge's second
parent on the wrong row shows a different edge. Each character of the drawing joins
the row above and the row below at the columns git's renderer uses: ``|`` above and
below itself, ``/`` from the right above to the left below, ``\\`` from the left
above to the right below, ``*`` (a commit) above and below itself, ``_`` sideways.
An edge runs from a commit's ``*`` down through those joins to the next ``*``.
"""

from __future__ import annotations

import re

_GRAPH_CHARS = set("*|/\\_- ")


def _split(line: str) -> tuple[str, str | None]:
    """The drawing part of a line and the commit id after it (None on connector lines)."""
    m = re.match(r"^([*|/\\_ -]*?)([0-9a-f]{7,64})\b", line)
    if m and "*" in m.group(1):
        return m.group(1), m.group(2)
    return line.rstrip(), None


def _top(ch: str, x: int) -> int | None:
    return {"|": x, "*": x, "/": x + 1, "\\": x - 1}.get(ch)


def _bottom(ch: str, x: int) -> int | None:
    return {"|": x, "*": x, "/": x - 1, "\\": x + 1}.get(ch)


def edges(text: str, ids: list[str]) -> set[tuple[str, str]]:
    """(child, parent) pairs the drawing shows; short ids are expanded through ``ids``."""
    rows: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        drawing, oid = _split(line)
        if oid is None and set(drawing) - _GRAPH_CHARS:
            raise AssertionError(f"not a graph line: {line!r}")
        if oid is not None:
            full = [i for i in ids if i.startswith(oid)]
            if len(full) != 1:
                raise AssertionError(f"{oid} names {len(full)} of the commits shown")
            oid = full[0]
        rows.append((drawing, oid))
    found: set[tuple[str, str]] = set()
    for r, (drawing, oid) in enumerate(rows):
        if oid is None:
            continue
        start = drawing.index("*")
        # Walk down from the commit's star along the joins to the stars below.
        todo = [(r, start)]
        seen = set()
        while todo:
            row, x = todo.pop()
            if (row, x) in seen:
                continue
            seen.add((row, x))
            below = _bottom(rows[row][0][x], x)
            if below is None or row + 1 >= len(rows):
                continue
            nxt = rows[row + 1][0]
            for nx in range(max(0, below - 1), min(len(nxt), below + 2)):
                ch = nxt[nx]
                if _top(ch, nx) != below:
                    continue
                if ch == "*":
                    found.add((oid, rows[row + 1][1]))  # type: ignore[arg-type]
                else:
                    todo.append((row + 1, nx))
    return found

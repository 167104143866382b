"""The history graph as ``git log --graph`` draws it: the order of commits and the lanes.

Pure: commits are ids and parent tuples, nothing here reads a repository. Two parts:

- :func:`order` puts commits in the order git's revision walk gives them with
  ``--topo-order`` (the default of ``--graph``) or ``--date-order``, ties and all, so
  that ``opal log --graph`` and ``git log --graph`` on the same refs agree line for line.
- :class:`Graph` is a port of git's ``graph.c`` (git 2.39): the same states (padding,
  pre-commit, commit, post-merge, collapsing), the same column mapping, the same
  characters. Drawing lanes by another algorithm gives a graph that is right in
  topology and wrong on screen (a fork drawn one row too low, ``| /`` for ``|/``);
  porting the state machine is the only way to be the same as git everywhere.

:func:`draw` is the driver ``git log`` uses (``log-tree.c``'s show_log): one text block
per commit, its first line after the commit's lane line, later lines after the
following graph lines, the rest of a merge's or a collapse's lines after the text.
"""

from __future__ import annotations

import heapq
from typing import Callable, Iterable, Mapping, Sequence

# The line kinds of graph.c, in its order.
PADDING, SKIP, PRE_COMMIT, COMMIT, POST_MERGE, COLLAPSING = range(6)

_MERGE_CHARS = "/|\\"


# ------------------------------------------------------------------------------ order


def order(
    starts: Sequence[bytes],
    parents_of: Mapping[bytes, Sequence[bytes]],
    date_of: Mapping[bytes, int],
    mode: str = "topo",
) -> list[bytes]:
    """Every commit reachable from ``starts``, children before parents, as git orders them.

    ``mode`` is ``"topo"`` (git's ``--topo-order``: a line of history is shown whole
    before the one it forked from, the last parent of a merge first) or ``"date"``
    (``--date-order``: the newest ready commit first). Ties on the date keep the order
    git's queue keeps: first in, first out; the starts are stably sorted newest first.
    """
    if mode not in ("topo", "date"):
        raise ValueError(f"unknown order {mode!r}")
    tips = sorted(dict.fromkeys(starts), key=lambda o: -date_of[o])
    # indegree is 1 + the number of children in the walk (0 means "not in the walk").
    indegree: dict[bytes, int] = {}
    stack = list(tips)
    while stack:
        oid = stack.pop()
        if oid in indegree:
            continue
        indegree[oid] = 1
        stack.extend(parents_of[oid])
    for oid in indegree:
        for p in parents_of[oid]:
            indegree[p] += 1
    ready = [o for o in tips if indegree[o] == 1]
    out: list[bytes] = []
    if mode == "topo":
        # A LIFO stack whose first tip is on top (git reverses the tips it pushed).
        lifo = ready[::-1]
        while lifo:
            oid = lifo.pop()
            out.append(oid)
            for p in parents_of[oid]:
                indegree[p] -= 1
                if indegree[p] == 1:
                    lifo.append(p)
        return out
    counter = 0
    heap: list[tuple[int, int, bytes]] = []
    for oid in ready:
        heapq.heappush(heap, (-date_of[oid], counter, oid))
        counter += 1
    while heap:
        _, _, oid = heapq.heappop(heap)
        out.append(oid)
        for p in parents_of[oid]:
            indegree[p] -= 1
            if indegree[p] == 1:
                heapq.heappush(heap, (-date_of[p], counter, p))
                counter += 1
    return out


# ------------------------------------------------------------------------------ lanes


class _Line:
    """One output row being built, with its width in screen columns."""

    __slots__ = ("chars",)

    def __init__(self) -> None:
        self.chars: list[str] = []

    def add(self, text: str) -> None:
        self.chars.append(text)

    @property
    def width(self) -> int:
        return sum(len(c) for c in self.chars)

    def __str__(self) -> str:
        return "".join(self.chars)


class Graph:
    """git's graph.c state machine: call :meth:`update` per commit, then :meth:`next_line`.

    ``interesting(oid)`` says whether a parent is shown at all (git's
    graph_is_interesting); a parent left out of a limited walk draws no lane.
    """

    def __init__(self, interesting: Callable[[bytes], bool] | None = None) -> None:
        self._interesting = interesting or (lambda _oid: True)
        self.commit: bytes | None = None
        self.parents: list[bytes] = []  # the interesting ones, in order
        self.num_parents = 0
        self.width = 0
        self.expansion_row = 0
        self.state = PADDING
        self.prev_state = PADDING
        self.commit_index = 0
        self.prev_commit_index = 0
        self.merge_layout = 0
        self.edges_added = 0
        self.prev_edges_added = 0
        self.columns: list[bytes] = []
        self.new_columns: list[bytes] = []
        # graph.c keeps mapping arrays of a fixed capacity and reads a slot or two past
        # the live size; plain lists padded with -1 keep those reads what they are there.
        self.mapping: list[int] = [-1] * 60
        self.old_mapping: list[int] = [-1] * 60
        self.mapping_size = 0

    # -------------------------------------------------------------- columns

    def _ensure_capacity(self, num_columns: int) -> None:
        need = 2 * num_columns
        for arr in (self.mapping, self.old_mapping):
            if len(arr) < need:
                arr.extend([-1] * (need - len(arr)))

    def _find_new_column(self, oid: bytes) -> int:
        try:
            return self.new_columns.index(oid)
        except ValueError:
            return -1

    def _insert_into_new_columns(self, oid: bytes, idx: int) -> None:
        i = self._find_new_column(oid)
        if i < 0:
            i = len(self.new_columns)
            self.new_columns.append(oid)
        if self.num_parents > 1 and idx > -1 and self.merge_layout == -1:
            # The first parent of a merge: lay the merge out by whether that parent is
            # in a column to the left of it.
            dist = idx - i
            shift = 2 * dist - 3 if dist > 1 else 1
            self.merge_layout = 0 if dist > 0 else 1
            self.edges_added = self.num_parents + self.merge_layout - 2
            mapping_idx = self.width + (self.merge_layout - 1) * shift
            self.width += 2 * self.merge_layout
        elif self.edges_added > 0 and i == self.mapping[self.width - 2]:
            # A parent of the merge found in the last existing column: the two edges join.
            mapping_idx = self.width - 2
            self.edges_added = -1
        else:
            mapping_idx = self.width
            self.width += 2
        self.mapping[mapping_idx] = i

    def _update_columns(self) -> None:
        self.columns, self.new_columns = self.new_columns, []
        num_columns = len(self.columns)
        max_new_columns = num_columns + self.num_parents
        self._ensure_capacity(max_new_columns)
        self.mapping_size = 2 * max_new_columns
        for i in range(self.mapping_size):
            self.mapping[i] = -1
        self.width = 0
        self.prev_edges_added = self.edges_added
        self.edges_added = 0
        seen_this = False
        for i in range(num_columns + 1):
            if i == num_columns:
                if seen_this:
                    break
                col_commit = self.commit
            else:
                col_commit = self.columns[i]
            if col_commit == self.commit:
                seen_this = True
                self.commit_index = i
                self.merge_layout = -1
                for p in self.parents:
                    self._insert_into_new_columns(p, i)
                # The commit itself takes two screen columns even with no parent.
                if self.num_parents == 0:
                    self.width += 2
            else:
                assert col_commit is not None
                self._insert_into_new_columns(col_commit, -1)
        while self.mapping_size > 1 and self.mapping[self.mapping_size - 1] < 0:
            self.mapping_size -= 1

    def _num_dashed_parents(self) -> int:
        return self.num_parents + self.merge_layout - 3

    def _num_expansion_rows(self) -> int:
        return self._num_dashed_parents() * 2

    def _needs_pre_commit_line(self) -> bool:
        return (
            self.num_parents >= 3
            and self.commit_index < len(self.columns) - 1
            and self.expansion_row < self._num_expansion_rows()
        )

    def update(self, oid: bytes, parents: Iterable[bytes]) -> None:
        """Make ``oid`` the commit whose lines come next."""
        self.commit = oid
        self.parents = [p for p in parents if self._interesting(p)]
        self.num_parents = len(self.parents)
        self.prev_commit_index = self.commit_index
        self._update_columns()
        self.expansion_row = 0
        # No line of the state below was printed, so prev_state stays as it is.
        if self.state != PADDING:
            self.state = SKIP
        elif self._needs_pre_commit_line():
            self.state = PRE_COMMIT
        else:
            self.state = COMMIT

    def _set_state(self, state: int) -> None:
        self.prev_state = self.state
        self.state = state

    def _mapping_correct(self) -> bool:
        return all(t < 0 or t == i // 2 for i, t in enumerate(self.mapping[: self.mapping_size]))

    # -------------------------------------------------------------- lines

    def _padding_row(self, line: _Line) -> None:
        for _ in self.new_columns:
            line.add("| ")

    def _skip_row(self, line: _Line) -> None:
        line.add("...")
        self._set_state(PRE_COMMIT if self._needs_pre_commit_line() else COMMIT)

    def _pre_commit_row(self, line: _Line) -> None:
        seen_this = False
        for i, col in enumerate(self.columns):
            if col == self.commit:
                seen_this = True
                line.add("|")
                line.add(" " * self.expansion_row)
            elif seen_this and self.expansion_row == 0:
                # Right after a merge's post-merge row, lanes past it were '\'; go on so.
                if self.prev_state == POST_MERGE and self.prev_commit_index < i:
                    line.add("\\")
                else:
                    line.add("|")
            elif seen_this and self.expansion_row > 0:
                line.add("\\")
            else:
                line.add("|")
            line.add(" ")
        self.expansion_row += 1
        if not self._needs_pre_commit_line():
            self._set_state(COMMIT)

    def _octopus_dashes(self, line: _Line) -> None:
        dashed = self._num_dashed_parents()
        for i in range(dashed):
            line.add("-")
            line.add("." if i == dashed - 1 else "-")

    def _commit_row(self, line: _Line) -> None:
        num_columns = len(self.columns)
        seen_this = False
        for i in range(num_columns + 1):
            if i == num_columns:
                if seen_this:
                    break
                col_commit = self.commit
            else:
                col_commit = self.columns[i]
            if col_commit == self.commit:
                seen_this = True
                line.add("*")
                if self.num_parents > 2:
                    self._octopus_dashes(line)
            elif seen_this and self.edges_added > 1:
                line.add("\\")
            elif seen_this and self.edges_added == 1:
                # A right-skewed two-way merge (or left-skewed three-way): its first row.
                if self.prev_state == POST_MERGE and self.prev_edges_added > 0 and self.prev_commit_index < i:
                    line.add("\\")
                else:
                    line.add("|")
            elif self.prev_state == COLLAPSING and self.old_mapping[2 * i + 1] == i and self.mapping[2 * i] < i:
                line.add("/")
            else:
                line.add("|")
            line.add(" ")
        if self.num_parents > 1:
            self._set_state(POST_MERGE)
        elif self._mapping_correct():
            self._set_state(PADDING)
        else:
            self._set_state(COLLAPSING)

    def _post_merge_row(self, line: _Line) -> None:
        num_columns = len(self.columns)
        first_parent = self.parents[0]
        parent_col_seen = False
        seen_this = False
        for i in range(num_columns + 1):
            if i == num_columns:
                if seen_this:
                    break
                col_commit = self.commit
            else:
                col_commit = self.columns[i]
            if col_commit == self.commit:
                seen_this = True
                idx = self.merge_layout
                for j, _parent in enumerate(self.parents):
                    line.add(_MERGE_CHARS[idx])
                    if idx == 2:
                        if self.edges_added > 0 or j < self.num_parents - 1:
                            line.add(" ")
                    else:
                        idx += 1
                if self.edges_added == 0:
                    line.add(" ")
            elif seen_this:
                line.add("\\ " if self.edges_added > 0 else "| ")
            else:
                line.add("|")
                if self.merge_layout != 0 or i != self.commit_index - 1:
                    line.add("_" if parent_col_seen else " ")
            if col_commit == first_parent:
                parent_col_seen = True
        self._set_state(PADDING if self._mapping_correct() else COLLAPSING)

    def _collapsing_row(self, line: _Line) -> None:
        used_horizontal = False
        horizontal_edge = -1
        horizontal_edge_target = -1
        self.mapping, self.old_mapping = self.old_mapping, self.mapping
        size = self.mapping_size
        mapping, old = self.mapping, self.old_mapping
        for i in range(size):
            mapping[i] = -1
        for i in range(size):
            target = old[i]
            if target < 0:
                continue
            # Lanes only ever move left (update_columns inserts the leftmost first).
            assert target * 2 <= i
            if target * 2 == i:
                mapping[i] = target
            elif mapping[i - 1] < 0:
                # Nothing to the left: move left by one.
                mapping[i - 1] = target
                if horizontal_edge == -1:
                    horizontal_edge = i
                    horizontal_edge_target = target
                    for j in range(target * 2 + 3, i - 2, 2):
                        mapping[j] = target
            elif mapping[i - 1] == target:
                pass  # the lane to the left goes to the same parent: the two join
            else:
                # Cross over the lane to the left.
                mapping[i - 2] = target
                if horizontal_edge == -1:
                    horizontal_edge_target = target
                    horizontal_edge = i - 1
                    for j in range(target * 2 + 3, i - 2, 2):
                        mapping[j] = target
        old[:size] = mapping[:size]
        if mapping[size - 1] < 0:
            self.mapping_size -= 1
        for i in range(self.mapping_size):
            target = mapping[i]
            if target < 0:
                line.add(" ")
            elif target * 2 == i:
                line.add("|")
            elif target == horizontal_edge_target and i != horizontal_edge - 1:
                # Only the first segment of a horizontal edge goes on to the next row.
                if i != target * 2 + 3:
                    mapping[i] = -1
                used_horizontal = True
                line.add("_")
            else:
                if used_horizontal and i < horizontal_edge:
                    mapping[i] = -1
                line.add("/")
        if self._mapping_correct():
            self._set_state(PADDING)

    def next_line(self) -> tuple[str, bool]:
        """The next row of the graph, padded to the commit's width, and whether it is
        the commit's own row."""
        if self.commit is None:
            return "", False
        line = _Line()
        is_commit = False
        state = self.state
        if state == PADDING:
            self._padding_row(line)
        elif state == SKIP:
            self._skip_row(line)
        elif state == PRE_COMMIT:
            self._pre_commit_row(line)
        elif state == COMMIT:
            self._commit_row(line)
            is_commit = True
        elif state == POST_MERGE:
            self._post_merge_row(line)
        else:
            self._collapsing_row(line)
        width = line.width
        if width < self.width:
            line.add(" " * (self.width - width))
        return str(line), is_commit

    def padding_line(self) -> str:
        """A row that only carries the lanes down (git's graph_padding_line)."""
        if self.state != COMMIT:
            return self.next_line()[0]
        line = _Line()
        for col in self.columns:
            line.add("|")
            if col == self.commit and self.num_parents > 2:
                line.add(" " * ((self.num_parents - 2) * 2))
            else:
                line.add(" ")
        width = line.width
        if width < self.width:
            line.add(" " * (self.width - width))
        self.prev_state = PADDING
        return str(line)

    def finished(self) -> bool:
        return self.state == PADDING


def draw(
    commits: Iterable[tuple[bytes, Sequence[bytes], Sequence[str]]],
    *,
    separated: bool = False,
    interesting: Callable[[bytes], bool] | None = None,
) -> list[str]:
    """The lines ``git log --graph`` prints for these commits, in the order given.

    Each commit comes with its text: the first line goes on the commit's row, each
    later line after the next graph row. ``separated`` puts a lane-carrying row
    between commits, as git's multi-line formats (medium) do; one-line formats have none.
    """
    g = Graph(interesting)
    out: list[str] = []
    for n, (oid, parents, text) in enumerate(commits):
        g.update(oid, parents)
        if separated and n:
            out.append(g.padding_line())
        while True:
            row, is_commit = g.next_line()
            if is_commit:
                break
            out.append(row)
        lines = list(text) or [""]
        out.append(row + lines[0])
        for extra in lines[1:]:
            out.append(g.next_line()[0] + extra)
        while not g.finished():
            out.append(g.next_line()[0])
    return out

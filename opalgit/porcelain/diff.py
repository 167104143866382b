"""Comparing states: ``opal diff`` and ``opal stats``. Porcelain layer, read-only.

A diff matches turns by identity. Leaves that two sequences share (the same git tree)
are skipped without being read, so two long branches that share a 50,000-turn prefix
cost only their differing leaves.
"""

from __future__ import annotations

import json
from typing import Callable, Mapping

from opalgit.errors import UsageError
from opalgit.history import sequence
from opalgit.history.align import align, text_diff
from opalgit.history.sequence import Item
from opalgit.history.states import State, branch_head, current_branch, load_state, resolve
from opalgit.history.tokens import estimate
from opalgit.porcelain.sessions import tracked_session
from opalgit.porcelain.states import normal_of, of_item
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field


@dataclass
class Entry:
    """One turn in a diff."""

    side: str  # "-" (only in A), "+" (only in B), "~" (changed)
    number_a: int | None  # 1-based turn numbers (None for meta records)
    number_b: int | None
    summary: dict
    old_summary: dict | None = None
    text_diff: list[str] = field(default_factory=list)
    preview: str = ""

    def to_json(self) -> dict:
        return {
            "change": {"-": "removed", "+": "added", "~": "changed"}[self.side],
            "turn_a": self.number_a,
            "turn_b": self.number_b,
            "role": self.summary.get("role"),
            "kind": self.summary.get("kind"),
            "tool": self.summary.get("tool"),
            "chars": self.summary.get("chars", 0),
            "preview": self.preview,
            **({"diff": self.text_diff} if self.text_diff else {}),
        }


@dataclass
class DiffResult:
    a: str
    b: str
    a_oid: bytes
    b_oid: bytes
    common_prefix_turns: int
    shared_turns: int
    entries: list[Entry]
    stat: dict
    uncommitted: int = 0
    hidden_records: int = 0  # bookkeeping records that differ, not listed without include_meta

    def to_json(self) -> dict:
        return {
            "a": {"rev": self.a, "id": self.a_oid.hex()},
            "b": {"rev": self.b, "id": self.b_oid.hex()},
            "common_prefix_turns": self.common_prefix_turns,
            "shared_turns": self.shared_turns,
            "uncommitted_records": self.uncommitted,
            "stat": self.stat,
            "turns": [e.to_json() for e in self.entries],
        }


def _leaf_items(repo: Repository, leaves: list[sequence.Node]) -> list[Item]:
    out: list[Item] = []
    for leaf in leaves:
        out.extend(sequence.read_leaf(repo.store, leaf.oid))
    return out


def diff(
    repo: Repository,
    a: str,
    b: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    include_meta: bool = False,
    texts: bool = True,
) -> DiffResult:
    """Turn-level diff of two revisions (B defaults to the current branch's working state)."""
    ra = resolve(repo, a)
    if ra.turn is not None:
        raise UsageError("diff compares states; give commits or branches, not turns", hint="e.g. opal diff main try-sqlite")
    sa = load_state(repo, ra.oid)
    extra: list[Item] = []
    if b is None:
        branch = current_branch(repo)
        head = branch_head(repo, branch)
        if head is None:
            raise UsageError(f"branch {branch} has no commits to compare with")
        sb = load_state(repo, head)
        b_name = f"{branch} (working state)"
        if env is not None:
            extra = _uncommitted(repo, sb, branch)
    else:
        rb = resolve(repo, b)
        if rb.turn is not None:
            raise UsageError("diff compares states; give commits or branches, not turns")
        sb = load_state(repo, rb.oid)
        b_name = b
    w = _Walk(repo, include_meta, texts)
    for same, nodes_a, nodes_b in _runs(repo.store, _roots(sa), _roots(sb), {}):
        if same:
            turns = sum(n.turns for n in nodes_a)
            w.shared += turns
            w.pos_a += turns
            w.pos_b += turns
            continue
        # Leaves differ, yet their turns may all be the same (a bookkeeping record, a
        # leaf cut elsewhere): only a listed entry ends the common prefix.
        w.items(_leaf_items(repo, nodes_a), _leaf_items(repo, nodes_b))
    if extra:
        w.items([], extra)
    stat = w.stat
    stat["turns_added"] = sum(1 for e in w.entries if e.side == "+")
    stat["turns_removed"] = sum(1 for e in w.entries if e.side == "-")
    stat["turns_changed"] = sum(1 for e in w.entries if e.side == "~")
    prefix = w.prefix if w.prefix is not None else w.shared
    return DiffResult(a, b_name, sa.oid, sb.oid, prefix, w.shared, w.entries, stat, len(extra), w.hidden)


def _roots(st: State) -> list[sequence.Node]:
    return [st.root] if st.root is not None else []


def _runs(store, a: list[sequence.Node], b: list[sequence.Node], kids: dict):
    """The two sequences as runs, in order: ``(True, nodes, nodes)`` for subtrees both
    share, ``(False, leaves_a, leaves_b)`` for leaves that differ.

    Sibling nodes are aligned by tree id; only the nodes in differing runs are opened
    (interior ones replaced by their children) and aligned again, so two long
    sequences that differ at one end cost one tree per level, not every leaf.
    """
    for op in align([n.oid for n in a], [n.oid for n in b]):
        xa, xb = a[op.a[0] : op.a[1]], b[op.b[0] : op.b[1]]
        if op.tag == "equal":
            yield True, xa, xb
            continue
        ea, eb = _open(store, xa, kids), _open(store, xb, kids)
        if ea is None and eb is None:
            yield False, xa, xb
        else:
            yield from _runs(store, xa if ea is None else ea, xb if eb is None else eb, kids)


def _open(store, nodes: list[sequence.Node], kids: dict) -> list[sequence.Node] | None:
    """``nodes`` with each interior node replaced by its children; None when all are leaves."""
    out: list[sequence.Node] = []
    opened = False
    for n in nodes:
        if n.oid not in kids:
            kids[n.oid] = sequence._children(store, n.oid)
        children = kids[n.oid]
        if children is None:
            out.append(n)
        else:
            out.extend(children)
            opened = True
    return out if opened else None


def _zero() -> dict:
    return {"turns": 0, "tool_calls": 0, "tokens": 0}


def _count(stat: dict, item: Item) -> None:
    if not item.is_turn:
        return
    stat["turns"] += 1
    stat["tool_calls"] += len(item.summary.get("calls", ())) or (1 if item.summary.get("kind") == "tool_call" else 0)
    stat["tokens"] += estimate(int(item.summary.get("chars", 0)))


class _Walk:
    """The running totals of a diff: turn numbers on each side, the shared turns, the
    entries listed so far and the turns in common before the first of them."""

    def __init__(self, repo: Repository, include_meta: bool, texts: bool) -> None:
        self.repo = repo
        self.include_meta = include_meta
        self.texts = texts
        self.pos_a = self.pos_b = 0  # turn numbers seen so far on each side
        self.shared = 0
        self.prefix: int | None = None
        self.hidden = 0
        self.entries: list[Entry] = []
        self.stat = {"a": _zero(), "b": _zero()}

    def _emit(self, entry: Entry) -> None:
        if self.prefix is None:
            self.prefix = self.shared
        self.entries.append(entry)

    def _only(self, side: str, it: Item) -> None:
        """A record only in A (-) or only in B (+): listed if it is a turn or meta is asked for."""
        if not (it.is_turn or self.include_meta):
            self.hidden += 1
            return
        if side == "-":
            self._emit(Entry("-", self.pos_a if it.is_turn else None, None, it.summary, preview=of_item(self.repo, it)))
        else:
            self._emit(Entry("+", None, self.pos_b if it.is_turn else None, it.summary, preview=of_item(self.repo, it)))
        _count(self.stat["a" if side == "-" else "b"], it)

    def items(self, items_a: list[Item], items_b: list[Item]) -> None:
        for op in align([it.id for it in items_a], [it.id for it in items_b]):
            olds = items_a[op.a[0] : op.a[1]]
            news = items_b[op.b[0] : op.b[1]]
            if op.tag == "equal":
                turns = sum(1 for it in olds if it.is_turn)
                self.pos_a += turns
                self.pos_b += turns
                self.shared += turns
                continue
            self._region(olds, news, _pairs(olds, news) if op.tag == "replace" else {})

    def _region(self, olds: list[Item], news: list[Item], paired: dict[int, int]) -> None:
        new_iter = 0
        for oi, old in enumerate(olds):
            if old.is_turn:
                self.pos_a += 1
            if oi not in paired:
                self._only("-", old)
                continue
            # The additions that come before the paired one, then the change itself.
            while new_iter < paired[oi]:
                self._added(news[new_iter])
                new_iter += 1
            nit = news[paired[oi]]
            self.pos_b += 1
            lines = text_diff(turn_text(normal_of(self.repo, old), readable=True), turn_text(normal_of(self.repo, nit), readable=True)) if self.texts else []
            self._emit(Entry("~", self.pos_a, self.pos_b, nit.summary, old.summary, lines, of_item(self.repo, nit)))
            _count(self.stat["a"], old)
            _count(self.stat["b"], nit)
            new_iter = paired[oi] + 1
        for nit in news[new_iter:]:
            self._added(nit)

    def _added(self, it: Item) -> None:
        if it.is_turn:
            self.pos_b += 1
        self._only("+", it)


def _pairs(olds: list[Item], news: list[Item]) -> dict[int, int]:
    """Removed and added turns of the same role and kind, in order, paired as changes."""
    used_new: set[int] = set()
    paired: dict[int, int] = {}
    ni = 0
    for oi, old in enumerate(olds):
        if not old.is_turn:
            continue
        while ni < len(news) and (not news[ni].is_turn or ni in used_new):
            ni += 1
        if ni < len(news) and news[ni].summary.get("role") == old.summary.get("role") and news[ni].summary.get("kind") == old.summary.get("kind"):
            paired[oi] = ni
            used_new.add(ni)
            ni += 1
    return paired


def _uncommitted(repo: Repository, state: State, branch: str) -> list[Item]:
    """Records the tracked session has gained since the head commit, read but not stored."""
    from opalgit import agents as adapters
    from opalgit.agents.base import tail_hash
    from opalgit.history.states import _items

    src, sess = state.header.source, state.header.session
    tracked = tracked_session(repo, branch)
    if src is None or sess is None or state.header.extra.get("detached") or tracked != (sess.agent, sess.id):
        return []
    try:
        import os

        if os.path.getsize(src.path) <= src.size or tail_hash(src.path, src.size) != src.tail:
            return []
        res = adapters.get(sess.agent).read(src.path, start=src.size, first_line=src.lines + 1, state=src.state)
    except Exception:
        return []
    if not res.extends:
        return []
    return list(_items(res.records))


# ------------------------------------------------------------------------------ stats


@dataclass
class Stats:
    rev: str
    oid: bytes
    turns: int
    records: int
    tool_calls: int
    tokens: int
    by_kind: dict
    by_tool: dict
    biggest: list[dict]

    def to_json(self) -> dict:
        return {
            "rev": self.rev,
            "id": self.oid.hex(),
            "turns": self.turns,
            "records": self.records,
            "tool_calls": self.tool_calls,
            "tokens_estimate": self.tokens,
            "by_kind": self.by_kind,
            "by_tool": self.by_tool,
            "biggest": self.biggest,
        }


def turn_text(normal, *, readable: bool = False) -> str:
    """The model-visible text of a normalized turn: compact for exact token counting,
    or ``readable`` (a tool's name, then its input as indented JSON) for text diffs."""
    indent = 1 if readable else None
    sep = ": " if readable else ""
    parts = []
    for b in normal.blocks:
        t = b.get("type")
        if t in ("text", "reasoning"):
            parts.append(b.get("text") or "")
        elif t == "tool_call":
            inp = b.get("input")
            parts.append(str(b.get("name") or "") + sep + (inp if isinstance(inp, str) else json.dumps(inp, ensure_ascii=False, indent=indent)))
        elif t == "tool_result":
            out = b.get("output")
            parts.append(out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, indent=indent))
    return "\n".join(parts)


def stats(repo: Repository, rev: str = "HEAD", top: int = 10, *, exact: bool = False,
          visit: Callable[[int, dict], None] | None = None) -> Stats:
    """Where a state's tokens go. ``exact`` counts with o200k (needs ``bpe-openai``).
    ``visit(tokens, summary)``: called for each turn in order, in the same pass (so a
    caller that wants more of each turn, as opal web's budget page does, walks once)."""
    from opalgit.history.tokens import exact_counter

    counter = exact_counter() if exact else None
    if exact and counter is None:
        raise UsageError("exact counts need the bpe-openai package", hint="pip install 'opalgit[tokens]'")
    target = resolve(repo, rev)
    st = load_state(repo, target.oid)
    by_kind: dict[str, dict] = {}
    by_tool: dict[str, dict] = {}
    biggest: list[tuple[int, int, dict]] = []
    number = 0
    calls = 0
    tokens = 0
    last_tool: dict[str, str] = {}
    for si in sequence.iter_items(repo.store, st.root):
        s = si.item.summary
        if not si.item.is_turn:
            continue
        number += 1
        t = counter(turn_text(normal_of(repo, si.item))) if counter else estimate(int(s.get("chars", 0)))
        tokens += t
        key = f"{s.get('role')}/{s.get('kind')}"
        k = by_kind.setdefault(key, {"turns": 0, "tokens": 0})
        k["turns"] += 1
        k["tokens"] += t
        tool = s.get("tool")
        for c in s.get("calls", ()):
            last_tool[c] = str(tool)
        if s.get("kind") == "tool_call":
            calls += max(1, len(s.get("calls", ())))
        if tool is None and s.get("results"):
            tool = last_tool.get(s["results"][0])  # attribute a result to its call's tool
        if tool:
            bt = by_tool.setdefault(str(tool), {"turns": 0, "tokens": 0})
            bt["turns"] += 1
            bt["tokens"] += t
        biggest.append((t, number, s))
        if visit is not None:
            visit(t, s)
    biggest.sort(key=lambda x: (-x[0], x[1]))
    return Stats(
        rev,
        st.oid,
        number,
        st.header.items,
        calls,
        tokens,
        dict(sorted(by_kind.items(), key=lambda kv: -kv[1]["tokens"])),
        dict(sorted(by_tool.items(), key=lambda kv: -kv[1]["tokens"])),
        [{"turn": n, "tokens": t, "role": s.get("role"), "kind": s.get("kind"), "tool": s.get("tool")} for t, n, s in biggest[:top]],
    )

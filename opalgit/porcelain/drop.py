"""``opal drop``: take turns out of the current branch, and the edit machinery that
``opal squash`` and ``opal trim`` share with it.

Each of the three makes a new commit on the current branch (the old state
stays reachable and ``opal undo`` reverts), keeps tool calls paired with their results
(a range that would split a pair is widened, and the result says so), and reports
the estimated tokens it saved.
"""

from __future__ import annotations

from opalgit.errors import RevisionError, UsageError
from opalgit.history import oplog, sequence
from opalgit.history.model import StateHeader
from opalgit.history.sequence import Item
from opalgit.history.states import (
    State,
    authored_item,
    branch_head,
    current_branch,
    load_state,
    resolve,
    turn_item_index,
)
from opalgit.history.tokens import estimate
from opalgit.porcelain.states import write_state
from opalgit.store.refs import branch_ref
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field


@dataclass
class EditResult:
    branch: str
    oid: bytes
    command: str
    turns_before: int
    turns_after: int
    tokens_before: int
    tokens_after: int
    range: tuple[int, int] | None = None  # 1-based inclusive turn range acted on
    notes: list[str] = field(default_factory=list)
    changed: int = 0  # turns changed (trim)

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_json(self) -> dict:
        return {
            "branch": self.branch,
            "id": self.oid.hex(),
            "command": self.command,
            "turns": {"before": self.turns_before, "after": self.turns_after},
            "tokens_estimate": {"before": self.tokens_before, "after": self.tokens_after, "saved": self.saved},
            "range": list(self.range) if self.range else None,
            "changed": self.changed,
            "notes": self.notes,
        }


# ---------------------------------------------------------------------------- ranges


def current_head(repo: Repository) -> tuple[str, bytes, State]:
    branch = current_branch(repo)
    head = branch_head(repo, branch)
    if head is None:
        raise RevisionError(f"branch {branch} has no commits yet", hint="run 'opal commit' first")
    return branch, head, load_state(repo, head)


def parse_range(repo: Repository, state: State, text: str) -> tuple[int, int]:
    """``HEAD:12..HEAD:19`` (inclusive) -> 1-based turn numbers (12, 19) of ``state``."""
    if ".." not in text:
        raise UsageError(f"{text!r} is not a turn range", hint="write FROM..TO, e.g. HEAD:12..HEAD:19 (both included)")
    left, _, right = text.partition("..")
    numbers = []
    for part in (left, right):
        rev = resolve(repo, part)
        if rev.turn is None:
            raise UsageError(f"{part!r} names a commit, not a turn", hint="write REV:N, e.g. HEAD:12")
        if rev.oid != state.oid:
            raise UsageError(
                f"{part!r} is not a turn of the current branch's head",
                hint="ranges act on the current state; use HEAD:N (see 'opal log --turns')",
            )
        n = rev.turn if rev.turn > 0 else state.header.turns + rev.turn + 1
        if not 1 <= n <= state.header.turns:
            raise RevisionError(f"turn {rev.turn} does not exist: the state has {state.header.turns} turn{'s' if state.header.turns != 1 else ''}")
        numbers.append(n)
    a, b = numbers
    if a > b:
        raise UsageError(f"{text!r} is an empty range", hint="the first turn must not come after the last")
    return a, b


def _item_span(repo: Repository, state: State, first: int, last: int) -> tuple[int, int]:
    """Record range [start, end) covering turns first..last and the records that trail ``last``."""
    start = turn_item_index(repo, state, first)
    end = turn_item_index(repo, state, last + 1) if last < state.header.turns else state.header.items
    return start, end


def _pairs_widen(repo: Repository, state: State, start: int, end: int) -> tuple[int, int, list[str]]:
    """Widen [start, end) until no tool call is separated from its result."""
    notes: list[str] = []
    items = [si.item for si in sequence.iter_items(repo.store, state.root)]
    call_at: dict[str, int] = {}
    result_at: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        for c in it.summary.get("calls", ()):
            call_at.setdefault(c, i)
        for r in it.summary.get("results", ()):
            result_at.setdefault(r, []).append(i)
    changed = True
    while changed:
        changed = False
        for i in range(start, end):
            for c in items[i].summary.get("calls", ()):
                for r in result_at.get(c, ()):
                    if r >= end:
                        end, changed = r + 1, True
                        notes.append(f"widened to keep tool call {c} with its result")
            for r in items[i].summary.get("results", ()):
                c_idx = call_at.get(r)
                if c_idx is not None and c_idx < start:
                    start, changed = c_idx, True
                    notes.append(f"widened to keep the result of {r} with its call")
    # Absorb the trailing bookkeeping of the new last turn, as _item_span does.
    while end < len(items) and not items[end].is_turn:
        end += 1
    return start, end, notes


def _turn_number(items_before: list[Item]) -> int:
    return sum(1 for it in items_before if it.is_turn)


def commit_edit(
    repo: Repository,
    branch: str,
    head: bytes,
    state: State,
    root,
    *,
    items: int,
    turns: int,
    chars: int,
    command: str,
    message: str,
    description: str,
    extra: dict,
) -> bytes:
    header = StateHeader(
        session=state.header.session,
        items=items,
        turns=turns,
        source=state.header.source,
        new_items=(items, items),
        chars=chars,
        extra={"detached": "edited", **extra},
    )
    oid = write_state(repo, header, root, [head], message)
    op = oplog.new(repo, command, description, {branch_ref(branch): (head, oid)})
    oplog.apply(repo, op)
    return oid


# ------------------------------------------------------------------------------ drop


@dataclass
class DropPlan:
    """What dropping turns ``first..last`` of a state takes out, before anything is
    written: what ``opal drop`` commits, and what ``opal web``'s budget page offers."""

    start: int  # records [start, end) go, widened to keep tool calls with their results
    end: int
    first: int  # the 1-based turns they hold, after widening
    last: int
    removed_turns: int
    removed_chars: int
    notes: list[str]

    def saved(self, state: State) -> int:
        """Estimated tokens the drop saves, as its result reports them."""
        return estimate(state.header.chars) - estimate(state.header.chars - self.removed_chars)


def plan_drop(repo: Repository, state: State, first: int, last: int) -> DropPlan:
    """The records that dropping turns ``first..last`` (1-based, inclusive) of ``state``
    takes out, widened so that no tool call loses its result. Reads only."""
    start, end = _item_span(repo, state, first, last)
    start, end, notes = _pairs_widen(repo, state, start, end)
    removed = [si.item for si in sequence.iter_items(repo.store, state.root, start, end)]
    before_items = [si.item for si in sequence.iter_items(repo.store, state.root, 0, start)]
    first_n = _turn_number(before_items) + 1
    last_n = first_n + sum(1 for it in removed if it.is_turn) - 1
    if notes:
        notes = [f"range widened to turns {first_n}..{last_n}: " + "; ".join(dict.fromkeys(notes))]
    removed_turns = sum(1 for it in removed if it.is_turn)
    removed_chars = sum(int(it.summary.get("chars", 0)) for it in removed)
    return DropPlan(start, end, first_n, last_n, removed_turns, removed_chars, notes)


def drop(repo: Repository, range_text: str, *, squash_message: str | None = None) -> EditResult:
    """Cut turns out of the current state (``squash_message``: replace them by one summary turn)."""
    command = "squash" if squash_message is not None else "drop"
    with repo.lock():
        branch, head, state = current_head(repo)
        plan = plan_drop(repo, state, *parse_range(repo, state, range_text))
        start, end, first_n, last_n, notes = plan.start, plan.end, plan.first, plan.last, plan.notes
        replacement: list[Item] = []
        if squash_message is not None:
            if not squash_message.strip():
                raise UsageError("squash needs a summary message (-m)")
            from opalgit.porcelain import secrets as redaction

            squash_message = redaction.redact_text_for(repo, squash_message)
            text = (
                f"[opal: turns {first_n}-{last_n} of this session were squashed into this summary]\n"
                f"{squash_message.strip()}"
            )
            replacement.append(authored_item("user", [{"type": "text", "text": text}]))
        root = sequence.splice(repo.store, state.root, start, end, replacement)
        added_chars = sum(int(it.summary.get("chars", 0)) for it in replacement)
        turns = state.header.turns - plan.removed_turns + len(replacement)
        chars = state.header.chars - plan.removed_chars + added_chars
        items = state.header.items - (end - start) + len(replacement)
        what = f"turns {first_n}..{last_n}"
        if squash_message is not None:
            message = f"squash {what}: {squash_message.strip().splitlines()[0]}\n"
        else:
            message = f"drop {what}\n"
        oid = commit_edit(
            repo, branch, head, state, root,
            items=items, turns=turns, chars=chars,
            command=command, message=message, description=f"{command} {what} of {branch}",
            extra={"op": command, "range": [first_n, last_n]},
        )
        return EditResult(
            branch, oid, command, state.header.turns, turns,
            estimate(state.header.chars), estimate(chars), (first_n, last_n), notes,
        )

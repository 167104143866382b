"""Surgical clean-up of polluted context: ``opal drop``, ``opal squash``, ``opal trim``.

Porcelain layer. Each command makes a new commit on the current branch (the old state
stays reachable and ``opal undo`` reverts), keeps tool calls paired with their results
(a range that would split a pair is widened, and the result says so), and reports
the estimated tokens it saved.
"""

from __future__ import annotations

import re

from opalgit import agents as adapters
from opalgit import codec
from opalgit.errors import NothingToDoError, RevisionError, UsageError
from opalgit.history import oplog, sequence
from opalgit.history.model import Normal, StateHeader, Turn, summarize
from opalgit.history.sequence import Item
from opalgit.history.states import (
    State,
    authored_item,
    branch_head,
    current_branch,
    load_state,
    resolve,
    turn_item_index,
    turn_of,
)
from opalgit.history.tokens import estimate
from opalgit.porcelain.states import normal_of, write_state
from opalgit.store.refs import branch_ref
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field

EXCERPT_MARK = "[opal: {cut} characters of this tool output were trimmed; {kept} kept]"
_MARK_RE = re.compile(r"\[opal: \d+ characters of this tool output were trimmed; \d+ kept\]")


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


def _head(repo: Repository) -> tuple[str, bytes, State]:
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


def _commit_edit(
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


def drop(repo: Repository, range_text: str, *, squash_message: str | None = None) -> EditResult:
    """Cut turns out of the current state (``squash_message``: replace them by one summary turn)."""
    command = "squash" if squash_message is not None else "drop"
    with repo.lock():
        branch, head, state = _head(repo)
        first, last = parse_range(repo, state, range_text)
        start, end = _item_span(repo, state, first, last)
        start, end, notes = _pairs_widen(repo, state, start, end)
        removed = [si.item for si in sequence.iter_items(repo.store, state.root, start, end)]
        before_items = [si.item for si in sequence.iter_items(repo.store, state.root, 0, start)]
        first_n = _turn_number(before_items) + 1
        last_n = first_n + sum(1 for it in removed if it.is_turn) - 1
        if notes:
            notes = [f"range widened to turns {first_n}..{last_n}: " + "; ".join(dict.fromkeys(notes))]
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
        removed_turns = sum(1 for it in removed if it.is_turn)
        removed_chars = sum(int(it.summary.get("chars", 0)) for it in removed)
        added_chars = sum(int(it.summary.get("chars", 0)) for it in replacement)
        turns = state.header.turns - removed_turns + len(replacement)
        chars = state.header.chars - removed_chars + added_chars
        items = state.header.items - (end - start) + len(replacement)
        what = f"turns {first_n}..{last_n}"
        if squash_message is not None:
            message = f"squash {what}: {squash_message.strip().splitlines()[0]}\n"
        else:
            message = f"drop {what}\n"
        oid = _commit_edit(
            repo, branch, head, state, root,
            items=items, turns=turns, chars=chars,
            command=command, message=message, description=f"{command} {what} of {branch}",
            extra={"op": command, "range": [first_n, last_n]},
        )
        return EditResult(
            branch, oid, command, state.header.turns, turns,
            estimate(state.header.chars), estimate(chars), (first_n, last_n), notes,
        )


def squash(repo: Repository, range_text: str, message: str) -> EditResult:
    return drop(repo, range_text, squash_message=message)


# ------------------------------------------------------------------------------ trim


def parse_size(text: str) -> int:
    """``20k`` -> 20000, ``1.5M`` -> 1500000, ``800`` -> 800 (characters)."""
    t = text.strip().lower()
    mult = 1
    if t.endswith("k"):
        mult, t = 1000, t[:-1]
    elif t.endswith("m"):
        mult, t = 1_000_000, t[:-1]
    try:
        value = int(float(t) * mult)
    except ValueError:
        raise UsageError(f"{text!r} is not a size", hint="e.g. 20000, 20k or 1.5M (characters)") from None
    if value <= 0:
        raise UsageError("the size must be positive")
    return value


def excerpt(text: str, limit: int) -> str:
    """Head and tail of ``text`` within about ``limit`` characters, with a marker between."""
    if len(text) <= limit:
        return text
    head = max(0, int(limit * 0.7))
    tail = max(0, limit - head)
    cut = len(text) - head - tail
    mark = EXCERPT_MARK.format(cut=cut, kept=head + tail)
    return text[:head] + "\n" + mark + "\n" + (text[-tail:] if tail else "")


def _shorter(text: str, over: int, keep: int) -> str | None:
    """The excerpt that replaces ``text``, or None: too short to trim, or an excerpt (with
    its marker) that would not be shorter than the text itself."""
    # An excerpt already: its own marker does not count, or every trim at this size
    # would cut the last one's excerpt again (and lose what its marker said).
    if len(text) - sum(len(m.group(0)) + 2 for m in _MARK_RE.finditer(text)) <= over:
        return None
    cut = excerpt(text, keep)
    return cut if len(cut) < len(text) else None


def trim(repo: Repository, over: int, *, keep: int | None = None) -> EditResult:
    """Shrink every tool output longer than ``over`` characters to a marked excerpt.

    An output is replaced only when its excerpt is shorter, so a trim never grows the
    context and never counts an output it left as it was.
    """
    if keep is not None and keep >= over:
        raise UsageError(
            f"--keep {keep} is not below --tool-output-over {over}: nothing would get shorter",
            hint="keep less than the size that triggers a trim, e.g. --tool-output-over 20k --keep 5k",
        )
    # A quarter of the size, at least 200 characters, and always well below the size.
    keep = keep if keep is not None else min(max(200, over // 4), over // 2)
    with repo.lock():
        branch, head, state = _head(repo)
        new_items: list[Item] = []
        changed = 0
        chars_delta = 0
        first_changed: int | None = None
        index = 0
        for si in sequence.iter_items(repo.store, state.root):
            it = si.item
            if it.summary.get("kind") != "tool_result" or int(it.summary.get("chars", 0)) <= over:
                new_items.append(it)
                index += 1
                continue
            turn = turn_of(repo, it)
            normal = normal_of(repo, it)
            replaced = _trim_turn(turn, normal, over, keep)
            if replaced is None:
                new_items.append(it)
                index += 1
                continue
            payloads: dict[bytes, bytes] = {}
            canon = replaced[0].encode(payloads)
            item = Item(codec.digest(canon), canon, summarize(replaced[1]), payloads=payloads)
            chars_delta += int(item.summary.get("chars", 0)) - int(it.summary.get("chars", 0))
            new_items.append(item)
            changed += 1
            if first_changed is None:
                first_changed = index
            index += 1
        if not changed:
            longer = sum(1 for si in sequence.iter_items(repo.store, state.root) if si.item.summary.get("kind") == "tool_result" and int(si.item.summary.get("chars", 0)) > over)
            if longer:
                raise NothingToDoError(
                    f"no tool output over {over} characters would get shorter by keeping {keep} of it "
                    f"({longer} {'is' if longer == 1 else 'are'} over the size, each with its marker as long or longer)"
                )
            raise NothingToDoError(f"no tool output is longer than {over} characters")
        assert first_changed is not None
        root = sequence.splice(repo.store, state.root, first_changed, state.header.items, new_items[first_changed:])
        chars = state.header.chars + chars_delta
        oid = _commit_edit(
            repo, branch, head, state, root,
            items=state.header.items, turns=state.header.turns, chars=chars,
            command="trim", message=f"trim {changed} tool output{'s' if changed != 1 else ''} over {over} characters\n",
            description=f"trim {changed} tool output{'s' if changed != 1 else ''} of {branch}",
            extra={"op": "trim", "over": over, "changed": changed},
        )
        return EditResult(
            branch, oid, "trim", state.header.turns, state.header.turns,
            estimate(state.header.chars), estimate(chars), None, [], changed,
        )


def _trim_turn(turn: Turn, normal: Normal, over: int, keep: int) -> tuple[Turn, Normal] | None:
    def replace(call_id: str, text: str) -> str | None:
        return _shorter(text, over, keep)

    blocks: list[dict] = []
    touched = False
    for b in normal.blocks:
        if b.get("type") == "tool_result" and isinstance(b.get("output"), str):
            cut = _shorter(b["output"], over, keep)
            if cut is not None:
                b = dict(b, output=cut)
                touched = True
        elif b.get("type") == "tool_result" and isinstance(b.get("output"), list):
            parts = []
            for p in b["output"]:
                cut = _shorter(p.get("text") or "", over, keep) if isinstance(p, dict) and p.get("type") == "text" else None
                if cut is not None:
                    p = dict(p, text=cut)
                    touched = True
                parts.append(p)
            b = dict(b, output=parts)
        blocks.append(b)
    if not touched:
        return None
    new_normal = Normal(role=normal.role, blocks=blocks, time=normal.time, label=normal.label)
    if turn.agent != "opal":
        try:
            native = adapters.get(turn.agent).replace_tool_outputs(turn, replace)
        except Exception:
            native = None
        if native is not None:
            return native, adapters.get(turn.agent).normalize(native)
    return Turn.authored(normal.role, blocks), new_normal

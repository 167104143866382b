"""``opal rewind``: move the current branch back some turns, or to a turn of any state.

A rewind writes a new state holding the first records of the old one (:func:`cut_state`,
which ``opal branch NAME REV:N`` uses too), marked detached from the sessions it came
from; the old state stays reachable from the op log.
"""

from __future__ import annotations

from opalgit.errors import RevisionError, UsageError
from opalgit.history import oplog, sequence
from opalgit.history.model import StateHeader
from opalgit.history.states import (
    State,
    _count,
    branch_head,
    common_prefix,
    current_branch,
    load_state,
    resolve,
    turn_item_index,
)
from opalgit.porcelain.states import write_state
from opalgit.store.refs import branch_ref
from opalgit.store.repo import Repository
from opalgit.structs import dataclass


def cut_state(repo: Repository, st: State, keep_items: int, *, parent: bytes, message: str, reason: str, **extra) -> bytes:
    """A new state commit with the first ``keep_items`` records of ``st``."""
    if keep_items >= st.header.items:
        root = st.root
        turns_total, chars_total = st.header.turns, st.header.chars
    else:
        root = sequence.truncate(repo.store, st.root, keep_items)
        kept = [si.item for si in sequence.iter_items(repo.store, root)]
        turns_total, chars_total = _count(kept)
    header = StateHeader(
        session=st.header.session,
        items=keep_items if root is not None else 0,
        turns=turns_total,
        source=st.header.source,
        new_items=(keep_items, keep_items),
        chars=chars_total,
        extra={"detached": reason, **extra},
    )
    return write_state(repo, header, root, [parent], message)



@dataclass
class RewindResult:
    """What ``opal rewind`` dropped and what is left."""

    branch: str
    oid: bytes
    dropped_turns: int  # of the branch's head, not in the result
    dropped_items: int
    turns: int
    warning: str | None = None
    taken_turns: int = 0  # in the result, not from the branch's head (rewind --to another line)
    taken_items: int = 0
    taken_from: str | None = None  # "claude session 5c0375b4" when that line is another session


def _rewound_counts(repo: Repository, old: State, new: State) -> tuple[int, int, int, int]:
    """(turns, records) of ``old`` the result left out, and (turns, records) it holds
    that ``old`` had not: never negative, whichever state ``rewind --to`` named."""
    shared = common_prefix(repo, old.root, new.root)
    if shared == new.header.items:
        shared_turns = new.header.turns
    else:
        # The result came from another line: count the turns of the part both share.
        shared_turns = sum(1 for si in sequence.iter_items(repo.store, new.root, 0, shared) if si.item.is_turn)
    return (old.header.turns - shared_turns, old.header.items - shared,
            new.header.turns - shared_turns, new.header.items - shared)


def rewind(repo: Repository, count: int | None = None, to: str | None = None) -> RewindResult:
    if (count is None) == (to is None):
        raise UsageError("give either a number of turns or --to REV:N")
    with repo.lock():
        branch = current_branch(repo)
        head = branch_head(repo, branch)
        if head is None:
            raise RevisionError(f"branch {branch} has no commits yet", hint="run 'opal commit' first")
        st = load_state(repo, head)
        if count is not None:
            if count <= 0:
                raise UsageError("rewind needs a positive number of turns")
            if count > st.header.turns:
                raise UsageError(
                    f"cannot rewind {count} turns: {branch} has {st.header.turns}",
                    hint=f"'opal rewind {st.header.turns}' empties the branch",
                )
            keep_turns = st.header.turns - count
            keep_items = 0 if keep_turns == 0 else turn_item_index(repo, st, keep_turns) + 1
            source_state = st
            what = f"{count} turn{'s' if count != 1 else ''}"
        else:
            assert to is not None
            target = resolve(repo, to)
            source_state = load_state(repo, target.oid)
            if target.turn is None:
                keep_items = source_state.header.items
            else:
                keep_items = turn_item_index(repo, source_state, target.turn) + 1
            what = f"to {to}"
        oid = cut_state(repo, source_state, keep_items, parent=head, message=f"rewind {what}\n", reason="rewound")
        new = load_state(repo, oid)
        op = oplog.new(repo, "rewind", f"rewind {branch} {what}", {branch_ref(branch): (head, oid)})
        oplog.apply(repo, op)
        warning = None
        last = list(sequence.iter_items(repo.store, new.root, max(0, new.header.items - 1))) if new.root else []
        tail = last[-1].item.summary if last else {}
        # A Gemini message holds its calls' results (toolCalls[].result): only calls the
        # kept turn leaves unanswered make it interrupted.
        if tail.get("kind") == "tool_call" and (
                not tail.get("results") or set(tail.get("calls", ())) - set(tail.get("results", ()))):
            warning = "the last kept turn is a tool call without its result; agents treat it as interrupted"
        dropped_turns, dropped_items, taken_turns, taken_items = _rewound_counts(repo, st, new)
        taken_from = None
        ns, os_ = new.header.session, st.header.session
        if taken_items and ns is not None and (os_ is None or (ns.agent, ns.id) != (os_.agent, os_.id)):
            taken_from = f"{ns.agent} session {ns.id[:8]}"
        return RewindResult(
            branch, oid, dropped_turns, dropped_items, new.header.turns, warning,
            taken_turns, taken_items, taken_from,
        )


"""``opal merge``: three-way merge of two lines of context. Porcelain layer.

The sequence rules live in :mod:`opalgit.history.merge` (pure). This module finds the merge
base, skips the prefix all three states share, resolves conflicts by strategy or by
the user's choices, repairs tool-call pairing, and writes a merge commit with both
parents. A merge that stops on conflicts writes nothing but ``<git-dir>/opal/MERGE``
(what is being merged and the choices so far); ``--continue`` and ``--abort`` finish
or forget it. Conflicts are values (:class:`opalgit.history.merge.Conflict`), never exceptions.
"""

from __future__ import annotations

import os

from opalgit import codec
from opalgit.errors import ConflictError, NothingToDoError, RevisionError, UsageError
from opalgit.fileio import replace_atomically
from opalgit.history import oplog, sequence
from opalgit.history.merge import CHOICES, Conflict, MergeResult, merge3
from opalgit.history.model import StateHeader
from opalgit.history.sequence import Item
from opalgit.history.states import State, authored_item, branch_head, common_prefix, current_branch, load_state, resolve
from opalgit.porcelain.states import write_state
from opalgit.store.argv import command
from opalgit.store.refs import branch_ref
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field

MERGE_FILE = "MERGE"


@dataclass
class ConflictView:
    index: int
    base: list[dict]
    ours: list[dict]
    theirs: list[dict]
    choice: str | None = None

    def to_json(self) -> dict:
        return {"conflict": self.index, "choice": self.choice, "base": self.base, "ours": self.ours, "theirs": self.theirs}


@dataclass
class MergeOutcome:
    branch: str
    theirs: str
    kind: str  # "fast-forward", "merged", "conflicts", "up-to-date"
    oid: bytes | None = None
    conflicts: list[ConflictView] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    added_from_theirs: int = 0
    removed: int = 0  # turns of the branch left out (only with force)

    def to_json(self) -> dict:
        return {
            "branch": self.branch,
            "theirs": self.theirs,
            "result": self.kind,
            "id": self.oid.hex() if self.oid else None,
            "conflicts": [c.to_json() for c in self.conflicts],
            "repairs": self.repairs,
            "turns_from_theirs": self.added_from_theirs,
            "turns_left_out": self.removed,
        }


# ------------------------------------------------------------------------ merge state


def _state_path(repo: Repository) -> str:
    return os.path.join(repo.git_dir, "opal", MERGE_FILE)


def _load_merge_state(repo: Repository) -> dict | None:
    path = _state_path(repo)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as fh:
        try:
            data = codec.unpack_plain(fh.read())
        except Exception:
            raise UsageError(f"{path} is unreadable", hint="run 'opal merge --abort' and merge again") from None
    return data if isinstance(data, dict) else None


def _save_merge_state(repo: Repository, data: dict) -> None:
    replace_atomically(_state_path(repo), codec.pack_plain(data))


def in_progress(repo: Repository) -> dict | None:
    return _load_merge_state(repo)


# ------------------------------------------------------------------------------ merge


def _suffix(repo: Repository, st: State, start: int) -> list[Item]:
    return [si.item for si in sequence.iter_items(repo.store, st.root, start)]


#: How many turns of each side of a conflict get a text preview (opal status and merge
#: show the first ones; previewing a long stretch would read all of it).
PREVIEWED = 5


def _describe(repo: Repository, items: list[Item], start: int, end: int, before: int) -> list[dict]:
    """The turns of one side of a conflict, each with its turn number in that side's
    state (``before``: the turns of the prefix all three states share) and, for the
    first :data:`PREVIEWED`, its first words."""
    from opalgit.porcelain.states import of_item

    number = before + sum(1 for it in items[:start] if it.is_turn)
    out = []
    for it in items[start:end]:
        if it.is_turn:
            number += 1
            out.append({"turn": number, "role": it.summary.get("role"), "kind": it.summary.get("kind"),
                        "tool": it.summary.get("tool"), "chars": it.summary.get("chars", 0),
                        "preview": of_item(repo, it) if len(out) < PREVIEWED else None})
    return out


def merge(
    repo: Repository,
    rev: str | None = None,
    *,
    strategy: str | None = None,
    message: str | None = None,
    choices: dict[int, str] | None = None,
    continuing: bool = False,
    force: bool = False,
) -> MergeOutcome:
    """Merge ``rev`` (or the merge in progress) into the current branch.

    Never leaves out a turn of the current branch without ``force``: a fast-forward
    to a state that does not begin with all of this branch's records, or a merge
    that takes the other side's removal of some of them, stops with an error that
    says how many turns and asks for ``force``.
    """
    if strategy is not None and strategy not in CHOICES:
        raise UsageError(f"unknown strategy {strategy!r}", hint="use ours, theirs or both")
    with repo.lock():
        branch = current_branch(repo)
        pending = _load_merge_state(repo)
        theirs_branch: str | None = None
        if continuing:
            if pending is None:
                raise UsageError("no merge in progress")
            ours, theirs, name = pending["ours"], pending["theirs"], pending["name"]
            if branch_head(repo, branch) != ours or pending.get("branch") != branch:
                raise ConflictError(
                    f"branch {branch} moved since the merge started",
                    hint="run 'opal merge --abort' and merge again",
                )
            saved = {int(k): v for k, v in (pending.get("choices") or {}).items()}
            saved.update(choices or {})
            choices = saved
            message = message or pending.get("message")
        else:
            if pending is not None:
                raise UsageError(
                    f"a merge of {pending['name']} is in progress",
                    hint="resolve it with 'opal merge --continue', or 'opal merge --abort'",
                )
            if rev is None:
                raise UsageError("merge needs a revision", hint="e.g. opal merge try-sqlite")
            target = resolve(repo, rev)
            if target.turn is not None:
                raise UsageError("merge takes a branch or commit, not a turn")
            ours = branch_head(repo, branch)
            if ours is None:
                raise RevisionError(f"branch {branch} has no commits yet", hint="run 'opal commit' first")
            theirs, name, theirs_branch = target.oid, rev, target.branch
        base = repo.merge_base(ours, theirs)  # pygit2 only when called: 'opal status' imports this module
        if base is None:
            raise UsageError(
                f"{name} and {branch} have no common history",
                hint=f"export one of them ('{command('opal', 'export', name, '--to', 'AGENT')}') and continue there instead",
            )
        so, st = load_state(repo, ours), load_state(repo, theirs)
        if base == theirs:
            if _begins_with(repo, so, st):
                raise NothingToDoError(f"already up to date: {branch} contains {name}")
            raise NothingToDoError(
                f"already up to date: {branch} descends from {name}, and leaves out {turns_left_out(repo, st, so)} "
                f"of its turns on purpose (a branch at an earlier turn, a rewind, an edit)"
            )
        # "Ahead" by turns, not by commits alone: a state that descends from ours by
        # commits may hold fewer turns (a rewind, a branch at an earlier turn).
        content = _content_base(repo, base, (ours, so), (theirs, st))
        if content == ours and _begins_with(repo, st, so):
            return _fast_forward(repo, branch, name, so, st, theirs_branch, force)
        if _begins_with(repo, so, st):
            if force and base == ours:
                return _fast_forward(repo, branch, name, so, st, theirs_branch, force)
            raise _up_to_date(branch, name, so, st, can_force=base == ours)
        if content == ours:
            return _fast_forward(repo, branch, name, so, st, theirs_branch, force)  # refused without force
        return _three_way(repo, branch, name, content, so, st, strategy, choices, message, force)


def _begins_with(repo: Repository, whole: State, part: State) -> bool:
    """Whether ``whole``'s records begin with every record of ``part`` (by id)."""
    return common_prefix(repo, whole.root, part.root) == part.header.items <= whole.header.items


def _up_to_date(branch: str, name: str, so: State, st: State, *, can_force: bool) -> NothingToDoError:
    """Ours holds every record of theirs, which is not its ancestor (a branch at an
    earlier turn, a rewind): nothing to bring in, and no reason to move back unasked."""
    fewer = so.header.turns - st.header.turns
    if fewer <= 0:
        return NothingToDoError(f"already up to date: {branch} holds all {st.header.turns} turns of {name}")
    # One line (the CLI prints a NothingToDoError's message alone): what is, and the
    # command for the move a fast-forward by commits alone would have made.
    move = command("opal", "merge", "--force", name) if can_force else command("opal", "rewind", "--to", name)
    return NothingToDoError(
        f"already up to date: {branch} holds all {st.header.turns} turns of {name} and {fewer} more; "
        f"to move {branch} back to {name}'s {st.header.turns} turns, run '{move}'"
    )


def _content_base(repo: Repository, base: bytes, ours: tuple[bytes, State], theirs: tuple[bytes, State]) -> bytes:
    """The merge base by content: ``base`` (the commits' merge base), or a state
    branched at an earlier turn between it and one side's tip.

    ``opal branch NAME REV:N`` writes the first N turns of REV as a child of REV (so
    that REV stays reachable): by commits, REV is then an ancestor of the new branch,
    which looks ahead of it while it holds fewer turns. The branched state, not REV,
    is what both lines of work share; when its records begin the other side's, it is
    the base: the turns REV had after N are the other side's own, not removed.
    """
    found: list[tuple[int, bytes]] = []
    for (tip, _state), (_other_tip, other) in ((ours, theirs), (theirs, ours)):
        oid: bytes | None = tip
        while oid is not None and oid != base:
            st = load_state(repo, oid)
            if st.header.extra.get("detached") == "branched":
                if _begins_with(repo, other, st):
                    found.append((st.header.items, oid))
                break
            oid = st.commit.parents[0] if st.commit.parents else None
    # Both sides may have one (each branched from the other): the later cut shares more.
    return max(found)[1] if found else base


def _fast_forward(repo: Repository, branch: str, name: str, so: State, st: State, theirs_branch: str | None,
                  force: bool) -> MergeOutcome:
    """Move ``branch`` to ``name``'s state, which descends from it; only with ``force``
    when that state does not begin with all of this branch's records."""
    assert so.oid is not None and st.oid is not None
    lost = turns_left_out(repo, so, st)
    if lost and not force:
        raise UsageError(
            f"fast-forwarding {branch} to {name} would leave out {lost} of {branch}'s {so.header.turns} turns "
            f"({name} has {st.header.turns}; it was rewound or edited since it left {branch})",
            hint=f"to move {branch} there anyway ('opal undo' takes it back), run "
                 f"'{command('opal', 'merge', '--force', name)}'",
        )
    op = oplog.new(repo, "merge", f"fast-forward {branch} to {name}", {branch_ref(branch): (so.oid, st.oid)},
                   sessions=oplog.tracking_change(repo, branch, followed_session(repo, st, theirs_branch)))
    oplog.apply(repo, op)
    return MergeOutcome(branch, name, "fast-forward", st.oid, removed=lost)


def followed_session(repo: Repository, st: State, branch: str | None = None) -> str | None:
    """The session a branch moved to ``st`` (a fast-forward, a pull) goes on tracking:
    the one ``branch`` (the branch ``st`` came from, if local) tracks, else the one
    ``st`` was recorded from. Keeping the session it tracked before would let the next
    commit record that session over the turns it just took."""
    session = oplog.tracked(repo, branch) if branch else None
    if session is None and st.header.session is not None:
        session = f"{st.header.session.agent}:{st.header.session.id}"
    return session


def turns_left_out(repo: Repository, so: State, st: State, spared: set[bytes] = frozenset()) -> int:  # type: ignore[assignment]
    """How many of ``so``'s turns ``st`` does not hold (by id), not counting ``spared``."""
    start = common_prefix(repo, so.root, st.root)
    kept = {si.item.id for si in sequence.iter_items(repo.store, st.root, start)}
    return sum(
        1 for si in sequence.iter_items(repo.store, so.root, start)
        if si.item.is_turn and si.item.id not in kept and si.item.id not in spared
    )


def _three_way(repo: Repository, branch: str, name: str, base: bytes, so: State, st: State, strategy: str | None,
               choices: dict[int, str] | None, message: str | None, force: bool) -> MergeOutcome:
    ours, theirs = so.oid, st.oid
    assert ours is not None and theirs is not None
    sb = load_state(repo, base)
    prefix = min(common_prefix(repo, sb.root, so.root), common_prefix(repo, sb.root, st.root))
    b_items, o_items, t_items = _suffix(repo, sb, prefix), _suffix(repo, so, prefix), _suffix(repo, st, prefix)
    result = merge3([i.id for i in b_items], [i.id for i in o_items], [i.id for i in t_items])
    choices = dict(choices or {})
    if strategy is not None:
        for c in result.conflicts:
            choices.setdefault(c.index, strategy)
    before = sequence.turns_before(repo.store, so.root, prefix)
    views = [
        ConflictView(
            c.index,
            _describe(repo, b_items, *c.base, before),
            _describe(repo, o_items, *c.ours, before),
            _describe(repo, t_items, *c.theirs, before),
            choices.get(c.index),
        )
        for c in result.conflicts
    ]
    unresolved = [c for c in result.conflicts if c.index not in choices]
    if unresolved:
        _save_merge_state(
            repo,
            {"branch": branch, "ours": ours, "theirs": theirs, "name": name, "message": message,
             "choices": {str(k): v for k, v in choices.items()},
             "conflicts": [v.to_json() for v in views]},  # what 'opal status' lists
        )
        return MergeOutcome(branch, name, "conflicts", None, views)

    merged = _assemble(result, choices, b_items, o_items, t_items, name, branch, so, prefix)
    items, repairs = _repair_pairs(repo, so, prefix, merged)
    # Our side of a conflict resolved for theirs or the base is left out by choice.
    chosen = {o_items[i].id for c in result.conflicts if choices.get(c.index) in ("theirs", "base")
              for i in range(*c.ours)}
    kept = {it.id for it in items}
    lost = sum(1 for it in o_items if it.is_turn and it.id not in kept and it.id not in chosen)
    if lost and not force:
        raise UsageError(
            f"merging {name} into {branch} would leave out {lost} of {branch}'s turns, which {name} "
            "dropped or rewound past",
            hint="to merge anyway ('opal undo' takes it back), run '"
                 + (command("opal", "merge", "--continue", "--force") if _load_merge_state(repo) is not None
                    else command("opal", "merge", "--force", name)) + "'",
        )
    root = sequence.splice(repo.store, so.root, prefix, so.header.items, items)
    prefix_items = [si.item for si in sequence.iter_items(repo.store, so.root, 0, prefix)] if prefix else []
    turns = sum(1 for it in prefix_items if it.is_turn) + sum(1 for it in items if it.is_turn)
    chars = sum(int(it.summary.get("chars", 0)) for it in prefix_items + items)
    header = StateHeader(
        session=so.header.session,
        items=prefix + len(items),
        turns=turns,
        source=so.header.source,
        new_items=(prefix, prefix + len(items)),
        chars=chars,
        extra={"detached": "merged", "merged": name},
    )
    msg = message or f"merge {name} into {branch}\n"
    oid = write_state(repo, header, root, [ours, theirs], msg)
    op = oplog.new(repo, "merge", f"merge {name} into {branch}", {branch_ref(branch): (ours, oid)})
    oplog.apply(repo, op)
    try:
        os.unlink(_state_path(repo))
    except FileNotFoundError:
        pass
    taken = {it.id for p in result.resolved(choices) if p.source == "theirs" for it in t_items[p.start : p.end]}
    from_theirs = sum(1 for it in items if it.is_turn and it.id in taken)
    return MergeOutcome(branch, name, "merged", oid, views, repairs, from_theirs, lost)


def abort(repo: Repository) -> str:
    with repo.lock():
        pending = _load_merge_state(repo)
        if pending is None:
            raise NothingToDoError("no merge in progress")
        os.unlink(_state_path(repo))
        return str(pending["name"])


def _assemble(
    result: MergeResult,
    choices: dict[int, str],
    b_items: list[Item],
    o_items: list[Item],
    t_items: list[Item],
    name: str,
    branch: str,
    ours_state: State,
    prefix: int,
) -> list[Item]:
    out: list[Item] = []
    pieces = result.resolved(choices)
    for p in pieces:
        if p.source == "base":
            out.extend(b_items[p.start : p.end])
        elif p.source == "ours":
            out.extend(o_items[p.start : p.end])
        elif p.source == "theirs":
            out.extend(t_items[p.start : p.end])
        elif p.source == "marker":
            theirs_turns = sum(1 for q in pieces if q.source == "theirs" for it in t_items[q.start : q.end] if it.is_turn)
            text = (
                f"[opal: the branch {name} was merged into {branch} here. The {theirs_turns} turns that follow "
                f"come from {name}, which forked from this conversation earlier; they happened in parallel "
                f"with the turns just before this note.]"
            )
            out.append(authored_item("user", [{"type": "text", "text": text}]))
    return out


def _repair_pairs(repo: Repository, ours: State, prefix: int, items: list[Item]) -> tuple[list[Item], list[str]]:
    """Every tool call keeps a result and no result lacks its call, or we say what we did."""
    repairs: list[str] = []
    known_calls: set[str] = set()
    answered: set[str] = set()
    for si in sequence.iter_items(repo.store, ours.root, 0, prefix):
        known_calls.update(si.item.summary.get("calls", ()))
        answered.update(si.item.summary.get("results", ()))
    out: list[Item] = []
    suffix_results = {r for it in items for r in it.summary.get("results", ())}
    for idx, it in enumerate(items):
        results = it.summary.get("results", ())
        if results and not any(r in known_calls for r in results):
            repairs.append(f"left out a tool result whose call is not in the merged history ({results[0]})")
            continue
        out.append(it)
        for c in it.summary.get("calls", ()):
            known_calls.add(c)
            if c not in suffix_results and c not in answered and idx < len(items) - 1:
                out.append(
                    authored_item(
                        "tool",
                        [{"type": "tool_result", "call_id": c, "output": "[opal: this tool call's result is not part of the merged history]", "is_error": True}],
                    )
                )
                repairs.append(f"added a closing result for tool call {c}, whose result the merge left out")
    return out, repairs


def conflicts_summary(repo: Repository) -> dict | None:
    """For ``opal status``: the merge in progress, or None."""
    pending = _load_merge_state(repo)
    if pending is None:
        return None
    return {"merging": pending["name"], "choices": pending.get("choices") or {}}


__all__ = ["merge", "abort", "followed_session", "turns_left_out", "in_progress", "conflicts_summary", "MergeOutcome", "Conflict"]

"""``opal commit``: record an agent session's new turns as a state on the current branch.

Which session is :mod:`opalgit.porcelain.sessions`' business; this module reads it
(only the lines added since the last commit when it can), redacts it, stores its
records, and moves the branch in one operation.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator, Mapping

from opalgit.agents.base import ReadResult, Record, SessionFile, begins_with, tail_hash
from opalgit.errors import NothingToDoError, OpalError, UsageError
from opalgit.history import oplog, sequence
from opalgit.history.model import Normal, SessionInfo, Source, StateHeader, Turn, summarize
from opalgit.history.sequence import Item
from opalgit.history.states import (
    State,
    _items,
    _short,
    branch_head,
    common_prefix,
    current_branch,
    load_state,
    packer_for,
    write_state,
)
from opalgit.plural import count
from opalgit.porcelain.sessions import Pick, find_session, tracked_session, tracking
from opalgit.secrets import worker as redactworker
from opalgit.store.argv import command
from opalgit.store.refs import branch_ref
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field

if TYPE_CHECKING:
    from opalgit.secrets.redact import Redactor


def _detached_refusal(repo: Repository, branch: str, state: "State", agent: str, f: SessionFile) -> UsageError | None:
    """Why a commit that names no session must not record ``f`` on ``branch``, whose
    head is detached (rewound, branched at a turn, merged) from the sessions it came
    from; None when it may.

    A detached state left turns out that those sessions still hold: the session it
    was recorded from, the one its parent was (the state it was cut from), the one the
    branch tracks, and every session ``opal export`` wrote from another state.
    Recording one of them would bring the left-out turns back without a word. A
    session exported from this very state holds nothing it left out: that is how a
    rewound branch is continued (``opal export``, then the agent resumes it).
    """
    how = state.header.extra.get("detached")
    if not how:
        return None  # the usual commit: nothing more to read
    from opalgit.history import checkpoints

    written = checkpoints.load(repo.opal_dir, agent, f.path)
    if written is not None and written.state == state.oid:
        return None
    why = None
    sessions = [state.header.session] + [load_state(repo, p).header.session for p in state.commit.parents[:1]]
    if any(s is not None and (s.agent, s.id) == (agent, f.id) for s in sessions):
        why = "the session it was recorded from"
    elif tracked_session(repo, branch) == (agent, f.id):
        why = "the session it tracks"
    elif written is not None:
        why = f"written by 'opal export' of {_short(written.state)}, not of this {how} state"
    if why is None:
        return None
    return UsageError(
        f"branch {branch} was {how} away from session {f.id} ({why}), which may still hold the turns that were left out",
        hint=f"to continue from here, '{command('opal', 'export', '--to', agent)}' and resume that; to record the "
             f"session as it is anyway, run '{command('opal', 'commit', '--session', f.id)}'",
    )


def _revise(store, root: sequence.Node | None, revised: Mapping[int, Normal],
            packer) -> tuple[sequence.Node | None, int, int]:
    """``root`` with the summaries of the records at ``revised``'s indices made from
    their new views (the turns stay as stored), and how that changes the turn and
    character counts. Only the leaves that hold them are written again."""
    turns = chars = 0
    for index in sorted(revised):
        old = next(iter(sequence.iter_items(store, root, index, index + 1))).item
        new = Item(old.id, old.canon, summarize(revised[index]), payload_oids=dict(old.payload_oids))
        turns += int(new.is_turn) - int(old.is_turn)
        chars += int(new.summary.get("chars", 0)) - int(old.summary.get("chars", 0))
        root = sequence.splice(store, root, index, index + 1, [new], packer)
    return root, turns, chars


def _continues_export(repo: Repository, agent: str, f, state: "State", result: ReadResult) -> tuple[int, bool]:
    """How many of ``state``'s records the session file begins with, because ``opal
    export`` wrote them there one for one (0: none; the file is read as new), and
    whether the file is still exactly what the export wrote (the agent added nothing).

    Holds when the export of this branch's current state to the same agent left a
    checkpoint (:mod:`checkpoints`), the file still begins with the bytes it wrote,
    and the file reads as one line of conversation that starts with those records.
    """
    from opalgit.history import checkpoints

    cp = checkpoints.load(repo.opal_dir, agent, f.path)
    if cp is None or cp.state != state.oid:
        return 0, False
    if not cp.records or cp.records != state.header.items:
        # Not one for one (a Codex export writes lines of its own between the records):
        # none of the file's records stands for a stored one, but a file that is still
        # exactly what the export wrote holds nothing the agent added.
        return 0, result.end == cp.size and checkpoints.still_holds(cp, f.path)
    if not checkpoints.still_holds(cp, f.path) or not result.views or len(result.views) != 1:
        return 0, False
    indices = result.views[0].indices
    if len(indices) < cp.records or any(i != k for k, i in enumerate(indices[: cp.records])):
        return 0, False
    # It begins with the bytes written (still_holds): as long, it is those bytes. Lines
    # the export wrote after the records (Claude's last-prompt) are not the agent's.
    return cp.records, result.end == cp.size


@dataclass
class CommitResult:
    """What ``opal commit`` recorded: the new state, its session, and how many turns it added."""

    branch: str
    oid: bytes | None
    parent: bytes | None
    session: SessionInfo | None
    new_turns: int
    new_items: int
    turns: int
    items: int
    incremental: bool
    forks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    objects_written: int = 0
    bytes_written: int = 0


def commit(
    repo: Repository,
    env: Mapping[str, str],
    cwd: str,
    *,
    message: str | None = None,
    agent: str | None = None,
    session: str | None = None,
    file: str | None = None,
) -> CommitResult:
    pick = find_session(repo, env, cwd, agent=agent, session=session, file=file)
    explicit = session is not None or file is not None
    with repo.lock(), contextlib.ExitStack() as cleanup:
        return _commit_locked(repo, pick, message, explicit, cleanup)


def _commit_locked(
    repo: Repository, pick: Pick, message: str | None, explicit: bool, cleanup: contextlib.ExitStack
) -> CommitResult:
    branch = current_branch(repo)
    head = branch_head(repo, branch)
    state = load_state(repo, head) if head else None
    ad, f = pick.adapter, pick.file
    notes = [pick.note] if pick.note else []
    if state is not None and not explicit:
        refusal = _detached_refusal(repo, branch, state, ad.name, f)
        if refusal is not None:
            raise refusal

    result: ReadResult | None = None
    incremental = False
    prev_src = state.header.source if state else None
    same = (
        state is not None
        and state.header.session is not None
        and state.header.session.agent == ad.name
        # The file is known by its path (a rollout's name is not its session id); the
        # tail hash below proves its prefix is what the last commit read.
        and prev_src is not None
        and prev_src.path == f.path
        and not state.header.extra.get("detached")
    )
    extend = same and prev_src is not None and begins_with(f.path, prev_src.size, prev_src.tail)
    # A large read gets a second process that tells which records hold nothing to
    # redact (opalgit.secrets.worker). It is forked now, before anything starts a thread,
    # and with the redactor the commit will use; a small read (the usual incremental
    # commit, the hook's) loads no redaction at all until it has turns to store.
    r: Redactor | None = None
    redactor_ready = False
    screen = redactworker.Screen()
    begin, first = (prev_src.size, prev_src.lines + 1) if extend and prev_src is not None else (0, 1)
    if redactworker.worth_it(f.path, begin):
        from opalgit import malloc
        from opalgit.porcelain import secrets as redaction

        malloc.return_large_blocks()  # a large read: its peak memory is what is alive

        r, redactor_ready = redaction.redactor(repo), True
        screen = cleanup.enter_context(redactworker.start(f.path, begin, first, r))
    if extend and prev_src is not None:
        result = ad.read(f.path, start=begin, first_line=first, state=prev_src.state)
        incremental = result.extends
        # Records the new lines revise are named by their place in the file: the
        # state's records must be the file's lines, one each, for that to be theirs.
        if incremental and result.revised and (state is None or state.header.items != prev_src.lines):
            incremental = False
        if not incremental:
            result = None
    resumed = 0  # records of ``state`` that the file's first lines stand for (see below)
    if result is None:
        result = ad.read(f.path)
        if state is not None:
            resumed, untouched = _continues_export(repo, ad.name, f, state, result)
            if untouched:
                # The agent has not added a turn: recording the file would only make
                # an empty commit that names the exported session.
                raise NothingToDoError(
                    f"nothing to commit: session {f.id} has no new turns since the export of {_short(state.oid)}"
                )
            if resumed:
                notes.append(
                    f"session {f.id} continues the export of {_short(state.oid)}: its first {resumed} records "
                    "are that state's, stored once; only what follows is new"
                )

    if incremental and not result.count:
        # Nothing but (perhaps) a line the agent is still writing: the common case of
        # a post-commit hook, kept free of any further work.
        raise NothingToDoError(f"nothing to commit: session {f.id} has no new turns since {_short(state.oid)}")
    repo.ask_identity()  # git answers while the records are redacted and stored

    # Records stream from the file into the sequence writer one at a time (an adapter
    # may produce them lazily, re-reading the file): memory holds one record, the open
    # leaf and the store's buffer, not the session. Secrets are replaced before a
    # record is encoded, and their originals are put into the local vault before the
    # record is handed on, so no object holding a placeholder can be flushed first.
    from opalgit.porcelain import secrets as redaction  # imported here: its rules cost start-up time elsewhere

    if not redactor_ready:
        r = redaction.redactor(repo)
    vault = redaction.vault(repo) if r is not None else None
    secured: set[tuple[str, str]] = set()  # (placeholder, secret) already in the vault
    placeholders: set[str] = set()
    secrets_note_at = len(notes)

    def secure(found: list) -> None:
        new = [x for x in found if (x.placeholder, x.secret) not in secured]
        if new:
            assert vault is not None
            vault.put(new)
            secured.update((x.placeholder, x.secret) for x in new)
        placeholders.update(x.placeholder for x in found)

    if r is not None and result.session.title:
        result.session.title, found = r.redact_text(result.session.title)
        secure(found)

    # The session's side folders (subagent transcripts, tool results) are stored with
    # the state, redacted like its records.
    side: dict[str, bytes] = {}
    for rel, data in result.side.items():
        if r is not None:
            data, found = r.redact_bytes(data)
            secure(found)
        side[rel] = data

    def item_of(rec: Record) -> Item:
        """A record redacted and encoded."""
        found: list = []
        if r is None:
            pass
        elif rec.turn.has_record and (judged := screen.verdict(rec.line, rec.crc)) is not None:
            # The worker redacted exactly this line (same bytes, parsed alike,
            # same redactor): what redacting it here would give.
            value, found = judged
            if found:
                secure(found)
                rec.turn = Turn.from_record(rec.turn.agent, value)
        else:
            turn, found = redaction.redact_turn(rec.turn, r)
            if found:
                secure(found)
                rec.turn = turn
        it = next(_items((rec,)))
        if found:
            # The summary (tool names, call ids) was made from the record as read.
            assert r is not None
            it.summary, more = r.redact_value(it.summary)
            secure(more)
        return it

    def items_of(indices, tally: tuple[bytearray, list[int]]) -> Iterator[Item]:
        """Redacted, encoded records at ``indices`` (None: all), each counted into
        ``tally`` (is it a turn, its chars)."""
        for rec in result.iter_records(indices):
            it = [item_of(rec)]
            tally[0].append(it[0].is_turn)
            tally[1].append(int(it[0].summary.get("chars", 0)))
            # While the writer stores the item and the next record is read, this
            # generator holds neither the record nor the item (popped as it is
            # yielded): a huge record would otherwise be in memory twice.
            del rec
            yield it.pop()

    store = repo.store
    changes: dict[str, tuple[bytes | None, bytes | None]] = {}
    forks: list[str] = []
    tally: tuple[bytearray, list[int]] = (bytearray(), [])
    # New payloads continue the branch's pack chain, and payloads the branch (or its
    # fork branches) already stores are named, not written again: a whole file read
    # again gives the same leaves, and a file the agent reads again costs nothing.
    fork_names = [f"{branch}-{v.name_hint or 'fork'}" for v in (result.views or [])[1:]]
    fork_states = {name: load_state(repo, h) for name in fork_names if (h := branch_head(repo, name)) is not None}
    packer = packer_for(repo, state, also=list(fork_states.values()))
    appended = False
    base = state.root if state is not None else None  # what the new records are appended to
    if incremental or resumed:
        assert state is not None
        # Incremental: the new lines' records. Resumed: the records after the ones the
        # export wrote (the file's only view begins with them, checked).
        indices = None if incremental else result.views[0].indices[resumed:]
        turns_delta = chars_delta = 0
        if incremental and result.revised:
            base, turns_delta, chars_delta = _revise(store, base, result.revised, packer)
        root = sequence.append(store, base, items_of(indices, tally), packer)
        appended = True
        new_turns, new_chars = sum(tally[0]), sum(tally[1])
        items_total = state.header.items + len(tally[0])
        turns_total = state.header.turns + new_turns + turns_delta
        chars_total = state.header.chars + new_chars + chars_delta
        new_range = (state.header.items, items_total)
    else:
        view = result.views[0] if result.views else None
        built: dict[bytes, tuple[bytes, bool]] = {}
        root = sequence.build(
            store, items_of(view.indices if view else None, tally), packer, parent=state.root if state else None,
            locations=built,
        )
        flags, chars = tally
        turns_total, chars_total, items_total = sum(flags), sum(chars), len(flags)
        prefix = common_prefix(repo, state.root if state else None, root)
        new_range = (prefix, items_total)
        new_turns = sum(flags[prefix:])
        # Other lines of conversation inside the file become branches of their own.
        # A fork shares the records before it parts from the main line: those are
        # the main line's first records (its leaves, reused), and only the fork's
        # own records are read from the file again.
        for k, v in enumerate((result.views or [])[1:]):
            shared = 0
            for a, b in zip(view.indices if view else (), v.indices):
                if a != b:
                    break
                shared += 1
            fork_tally: tuple[bytearray, list[int]] = (bytearray(), [])
            fork_root = sequence.append(
                store, sequence.truncate(store, root, shared), items_of(v.indices[shared:], fork_tally), packer
            )
            fork_items = shared + len(fork_tally[0])
            fork_turns = sum(flags[:shared]) + sum(fork_tally[0])
            fork_chars = sum(chars[:shared]) + sum(fork_tally[1])
            fork_name = fork_names[k]
            fork_header = StateHeader(
                session=result.session,
                items=fork_items,
                turns=fork_turns,
                new_items=(0, fork_items),
                chars=fork_chars,
                extra={"fork_of": branch, "leaf": v.leaf or ""},
            )
            old_state = fork_states.get(fork_name)
            old = old_state.oid if old_state is not None else None
            if old_state is not None:
                # Unchanged when it holds the same records (by id: where their
                # payloads are stored may differ from one import to the next).
                if (old_state.root.oid if old_state.root else None) == (fork_root.oid if fork_root else None) or (
                    old_state.header.items == fork_items
                    and common_prefix(repo, old_state.root, fork_root) == fork_items
                ):
                    continue
            fork_oid = write_state(
                repo,
                fork_header,
                fork_root,
                [old] if old else [],
                f"{ad.title} session {f.id[:8]}: fork at {v.leaf or '?'}\n",
                packs=packer.tip,
                side=side,
            )
            changes[branch_ref(fork_name)] = (old, fork_oid)
            forks.append(fork_name)
        if state is not None and (state.root.oid if state.root else None) == (root.oid if root else None) and not forks:
            if state.header.session is not None and state.header.session.id == result.session.id:
                raise NothingToDoError(
                    f"nothing to commit: session {f.id} has no new turns since {_short(state.oid)}"
                )
        if state is not None and state.header.session is not None and state.header.session.id != result.session.id:
            notes.append(f"branch {branch} now records session {result.session.id} (was {state.header.session.id})")
    if placeholders:
        notes.insert(secrets_note_at, f"{count(len(placeholders), 'secret')} replaced by placeholders; the originals stay in this machine's vault")

    screen.close()  # every record is stored: the other core is free again
    packer.keep_window()
    source = Source(
        path=f.path,
        size=result.end,
        lines=result.lines,
        tail=tail_hash(f.path, result.end),
        state=result.state,
    )
    header = StateHeader(
        session=result.session,
        items=items_total,
        turns=turns_total,
        source=source,
        new_items=new_range,
        chars=chars_total,
    )
    if message is None:
        message = f"{new_turns} new turn{'s' if new_turns != 1 else ''} from {ad.title} session {result.session.id[:8]}"
    oid = write_state(repo, header, root, [head] if head else [], message, packs=packer.tip, side=side)
    changes[branch_ref(branch)] = (head, oid)
    desc = f"commit {new_turns} new turns to {branch}"
    op = oplog.new(repo, "commit", desc, changes, sessions=tracking(repo, branch, (ad.name, result.session.id)))
    from opalgit.history import locationcache as locations

    def cache_locations() -> None:
        # Where the new state's payloads are, for the next commit (see
        # opalgit.history.locationcache): keyed by the sequence's id, so it is right whether or
        # not the ref update it runs beside succeeds, and only a shortcut.
        try:
            if appended:
                assert state is not None
                # (a base revised in place holds the same payloads as the state's root)
                old_known = locations.of(store, repo.opal_dir, state.root)
                locations.after_append(store, repo.opal_dir, base, root, old_known)
            elif root is not None:
                locations.save(repo.opal_dir, root.oid, built)
        except (OSError, OpalError):
            pass

    oplog.apply(repo, op, meanwhile=cache_locations)
    return CommitResult(
        branch=branch,
        oid=oid,
        parent=head,
        session=result.session,
        new_turns=new_turns,
        new_items=new_range[1] - new_range[0],
        turns=turns_total,
        items=items_total,
        incremental=incremental,
        forks=forks,
        notes=notes,
        warnings=list(result.warnings),
        objects_written=store.written_objects,
        bytes_written=store.written_bytes,
    )

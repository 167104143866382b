"""``opal commit``: record an agent session's new turns as a state on the current branch.

Which session is :mod:`opalgit.porcelain.sessions`' business; this module reads it
(only the lines added since the last commit when it can), redacts it, stores its
records, and moves the branch in one operation.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from opalgit.agents.base import ReadResult, Record, begins_with, tail_hash
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
)
from opalgit.plural import count
from opalgit.porcelain.sessions import Pick, find_session, tracked_session, tracking
from opalgit.porcelain.states import write_state
from opalgit.secrets import worker as redactworker
from opalgit.secrets.rules import PLACEHOLDER_PREFIX
from opalgit.store.argv import command
from opalgit.store.refs import branch_ref
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field

if TYPE_CHECKING:
    from opalgit.secrets.redact import Redactor

PLACEHOLDER_MARK = PLACEHOLDER_PREFIX.encode()


def _implicit_refusal(repo: Repository, branch: str, state: State, pick: Pick) -> UsageError | None:
    """Why a commit that names no session must not record the one it picked on
    ``branch``; None when it may.

    The rule: such a commit continues the branch's head, so it refuses a session that
    would change the head's turns other than by adding to them, without a word. That
    happens two ways (:func:`_replaced`, :func:`_brought_back`); both end with the same
    two ways on: export the head and resume that, or name the session to record it as
    it is.
    """
    why = _replaced(state, pick) or _brought_back(repo, branch, state, pick)
    if why is None:
        return None
    relation, harm, agent = why
    sid = pick.file.id
    return UsageError(
        f"branch {branch} {relation}; recording session {sid} {harm}",
        hint=f"to continue {branch} from its head, run '{command('opal', 'export', '--to', agent)}' and resume that; "
             f"to record session {sid} as it is anyway, run '{command('opal', 'commit', '--session', sid)}'",
    )


def _replaced(state: State, pick: Pick) -> tuple[str, str, str] | None:
    """The session the branch tracks is not among this folder's (pulled from a
    teammate, exported to another folder, its file deleted) and the newest one was
    picked instead: unless it is the session the head was recorded from (by id, or by
    file: a file's name need not be its id), it would replace the branch's turns with
    its own."""
    if pick.instead_of is None:
        return None
    h, f = state.header, pick.file
    s = h.session
    if s is None or (s.agent, s.id) == (pick.adapter.name, f.id) or (h.source is not None and h.source.path == f.path):
        return None
    agent, sid = pick.instead_of
    return (f"tracks {agent} session {sid}, which is not among this folder's sessions (pulled from another machine, "
            "exported to another folder, or its file deleted)", "would replace its turns", agent)


def _brought_back(repo: Repository, branch: str, state: State, pick: Pick) -> tuple[str, str, str] | None:
    """The head is detached (rewound, branched at a turn, merged) from the sessions it
    came from, and the picked one may still hold the turns it left out: the session it
    was recorded from, the one its parent was (the state it was cut from), the one the
    branch tracks, and every session ``opal export`` wrote from another state. A
    session exported from this very state holds nothing it left out: that is how a
    rewound branch is continued (``opal export``, then the agent resumes it)."""
    how = state.header.extra.get("detached")
    if not how:
        return None  # the usual commit: nothing more to read
    import opalgit.porcelain.checkpoints as checkpoints

    agent, f = pick.adapter.name, pick.file
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
    return f"was {how} away from session {f.id} ({why})", "may bring back the turns that were left out", agent


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
    import opalgit.porcelain.checkpoints as checkpoints

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
    branch: str | None = None,
    keep: list[KeptTurn] | None = None,
) -> CommitResult:
    """Record the session ``find_session`` picks (``session``/``file``: the one named)
    as a new state on the current branch (``branch``: on that one, which need not
    exist yet; ``opal capture`` records each session on its own), under the
    repository lock.

    ``keep`` (``opal handoff``): a list filled with the new state's records as stored,
    when the commit builds the branch's records whole from a session of at most
    :data:`KEEP_BYTES`; else it is left empty (see :class:`KeptTurn`)."""
    pick = find_session(repo, env, cwd, agent=agent, session=session, file=file)
    explicit = session is not None or file is not None
    with repo.lock(), contextlib.ExitStack() as cleanup:
        return _commit_locked(repo, pick, message, explicit, cleanup, branch, keep)


#: The largest whole build whose records ``commit(keep=...)`` keeps in memory (the
#: bytes stored for them, before compression): held as values they take a few times
#: that, which a handoff of a session this size spends to skip reading them back.
KEEP_BYTES = 64 << 20


@dataclass
class KeptTurn:
    """A record of a state just committed, as stored (redacted, its long strings in
    place), and whether its stored bytes may hold a secret's placeholder (the export
    puts the vault's secrets back there): what reading it back from the state gives."""

    turn: Turn
    placeholder: bool


def _commit_locked(
    repo: Repository, pick: Pick, message: str | None, explicit: bool, cleanup: contextlib.ExitStack,
    branch: str | None = None,
    keep: list[KeptTurn] | None = None,
) -> CommitResult:
    """The steps of a commit: read what is new, redact and store it, then write the
    state and move the branch in one operation. Nothing is written before the last
    check that there is something to commit."""
    branch = branch or current_branch(repo)
    head = branch_head(repo, branch)
    state = load_state(repo, head) if head else None
    notes = [pick.note] if pick.note else []
    if state is not None and not explicit:
        refusal = _implicit_refusal(repo, branch, state, pick)
        if refusal is not None:
            raise refusal
    read, red = _read_session(repo, state, pick, cleanup, notes)
    repo.ask_identity()  # git answers while the records are redacted and stored
    red.load(repo)
    side = red.session(read.result)
    secrets_note_at = len(notes)  # the secrets note comes before what storing says
    red.keep = keep
    stored = _store(repo, branch, state, pick, read, red, side, notes)
    if red.placeholders:
        notes.insert(secrets_note_at, f"{count(len(red.placeholders), 'secret')} replaced by placeholders; "
                                      "the originals stay in this machine's vault")
    red.screen.close()  # every record is stored: the other core is free again
    stored.packer.keep_window()
    return _record(repo, branch, head, state, pick, read, stored, side, message, notes)


# ------------------------------------------------------------------ reading


@dataclass
class _Read:
    """What a commit read of the session file."""

    result: ReadResult
    incremental: bool  # only the lines after the ones the head state was read from
    resumed: int  # records of the head state that the file's first lines stand for (an export continued)


def _extends(state: State | None, agent: str, path: str) -> bool:
    """Whether the file may be read from where the head state's read stopped: the same
    agent's file at the same path (a rollout's name is not its session id), its first
    bytes as the last commit read them (the tail hash), and a head that is the usual
    continuation of that read (not rewound, branched at a turn or merged)."""
    src = state.header.source if state is not None else None
    return (
        state is not None
        and state.header.session is not None
        and state.header.session.agent == agent
        and src is not None
        and src.path == path
        and not state.header.extra.get("detached")
        and begins_with(path, src.size, src.tail)
    )


def _read_session(repo: Repository, state: State | None, pick: Pick, cleanup: contextlib.ExitStack,
                  notes: list[str]) -> tuple[_Read, "_Redaction"]:
    """Read what is new in the picked file: incrementally when the file continues the
    head state's read, else all of it (noting what of it an export wrote). Raises
    NothingToDoError when there is nothing new, before any redaction is loaded."""
    ad, f = pick.adapter, pick.file
    extend = _extends(state, ad.name, f.path)
    prev = state.header.source if state is not None and extend else None
    begin, first = (prev.size, prev.lines + 1) if prev is not None else (0, 1)
    # Forked now, before anything starts a thread (see _Redaction).
    red = _Redaction(repo, f.path, begin, first, cleanup)
    result: ReadResult | None = None
    incremental = False
    if prev is not None:
        assert state is not None
        result = ad.read(f.path, start=begin, first_line=first, state=prev.state)
        # Records the new lines revise are named by their place in the file: the
        # state's records must be the file's lines, one each, for that to be theirs.
        incremental = result.extends and not (result.revised and state.header.items != prev.lines)
        if not incremental:
            result = None
    resumed = 0
    if result is None:
        result = ad.read(f.path)
        if state is not None:
            resumed = _resumed_export(repo, state, pick, result, notes)
    if incremental and not result.count:
        # Nothing but (perhaps) a line the agent is still writing: the common case of
        # a post-commit hook, kept free of any further work.
        assert state is not None
        raise NothingToDoError(f"nothing to commit: session {f.id} has no new turns since {_short(state.oid)}")
    return _Read(result, incremental, resumed), red


def _resumed_export(repo: Repository, state: State, pick: Pick, result: ReadResult, notes: list[str]) -> int:
    """How many of ``state``'s records the file begins with because ``opal export``
    wrote them (:func:`_continues_export`), saying so in ``notes``."""
    f = pick.file
    resumed, untouched = _continues_export(repo, pick.adapter.name, f, state, result)
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
    return resumed


# ------------------------------------------------------------------ redacting


class _Redaction:
    """A commit's redaction: every record, the session's title and its side files are
    redacted before they are encoded, and the originals of what is replaced are put
    into the local vault before the record is handed on, so no object holding a
    placeholder can be flushed first.

    A large read gets a second process that tells which records hold nothing to
    redact (:mod:`opalgit.secrets.worker`). It is forked when this is made, before
    anything starts a thread, with the redactor the commit will use; a small read (the
    usual incremental commit, the hook's) loads no redaction at all until it has turns
    to store (:meth:`load`).
    """

    def __init__(self, repo: Repository, path: str, begin: int, first: int, cleanup: contextlib.ExitStack) -> None:
        self.redactor: Redactor | None = None
        self.vault: Any = None
        self.screen = redactworker.Screen()
        self.secured: set[tuple[str, str]] = set()  # (placeholder, secret) already in the vault
        self.placeholders: set[str] = set()
        self.keep: list[KeptTurn] | None = None  # the records stored, as commit(keep=...) says
        self._kept_bytes = 0
        self._loaded = False
        if redactworker.worth_it(path, begin):
            from opalgit import malloc
            from opalgit.porcelain import secrets as redaction

            malloc.return_large_blocks()  # a large read: its peak memory is what is alive
            self.redactor, self._loaded = redaction.redactor(repo), True
            self.screen = cleanup.enter_context(redactworker.start(path, begin, first, self.redactor))

    def load(self, repo: Repository) -> None:
        """Load the redactor (unless the worker's start did) and the vault."""
        from opalgit.porcelain import secrets as redaction  # imported here: its rules cost start-up time elsewhere

        self._redaction = redaction
        if not self._loaded:
            self.redactor = redaction.redactor(repo)
        self.vault = redaction.vault(repo) if self.redactor is not None else None

    def secure(self, found: list) -> None:
        """Put the originals of ``found`` into the vault (each once)."""
        new = [x for x in found if (x.placeholder, x.secret) not in self.secured]
        if new:
            assert self.vault is not None
            self.vault.put(new)
            self.secured.update((x.placeholder, x.secret) for x in new)
        self.placeholders.update(x.placeholder for x in found)

    def session(self, result: ReadResult) -> dict[str, bytes]:
        """Redact the session's title in place; its side folders (subagent transcripts,
        tool results), which are stored with the state, redacted."""
        r = self.redactor
        if r is not None and result.session.title:
            result.session.title, found = r.redact_text(result.session.title)
            self.secure(found)
        side: dict[str, bytes] = {}
        for rel, data in result.side.items():
            if r is not None:
                data, found = r.redact_bytes(data)
                self.secure(found)
            side[rel] = data
        return side

    def item(self, rec: Record) -> Item:
        """A record redacted and encoded."""
        r = self.redactor
        found: list = []
        if r is None:
            pass
        elif rec.turn.has_record and (judged := self.screen.verdict(rec.line, rec.crc)) is not None:
            # The worker redacted exactly this line (same bytes, parsed alike,
            # same redactor): what redacting it here would give.
            value, found = judged
            if found:
                self.secure(found)
                rec.turn = Turn.from_record(rec.turn.agent, value)
        else:
            turn, found = self._redaction.redact_turn(rec.turn, r)
            if found:
                self.secure(found)
                rec.turn = turn
        it = next(_items((rec,)))
        if found:
            # The summary (tool names, call ids) was made from the record as read.
            assert r is not None
            it.summary, more = r.redact_value(it.summary)
            self.secure(more)
        return it

    def items(self, result: ReadResult, indices, tally: tuple[bytearray, list[int]]) -> Iterator[Item]:
        """Redacted, encoded records at ``indices`` (None: all), each counted into
        ``tally`` (is it a turn, its chars).

        Records stream from the file into the sequence writer one at a time (an adapter
        may produce them lazily, re-reading the file): memory holds one record, the
        open leaf and the store's buffer, not the session."""
        for rec in result.iter_records(indices):
            it = [self.item(rec)]
            tally[0].append(it[0].is_turn)
            tally[1].append(int(it[0].summary.get("chars", 0)))
            if self.keep is not None:
                self._kept(rec.turn, it[0])
            # While the writer stores the item and the next record is read, this
            # generator holds neither the record nor the item (popped as it is
            # yielded): a huge record would otherwise be in memory twice.
            del rec
            yield it.pop()

    def _kept(self, turn: Turn, it: Item) -> None:
        """Keep ``turn`` (stored as ``it``) for commit(keep=...), up to KEEP_BYTES."""
        assert self.keep is not None
        self._kept_bytes += len(it.canon) + sum(len(p) for p in it.payloads.values())
        if self._kept_bytes > KEEP_BYTES:
            self.keep.clear()  # too large to hold: the state is read back instead
            self.keep = None
            return
        # A placeholder is plain UTF-8 in the stored bytes; a payload stored before
        # (not in hand) may hold one.
        mark = PLACEHOLDER_MARK
        placeholder = bool(it.payload_oids) or mark in it.canon or any(mark in p for p in it.payloads.values())
        self.keep.append(KeptTurn(turn, placeholder))


# ------------------------------------------------------------------ storing


@dataclass
class _Stored:
    """The records a commit stored, and what the state it writes will say of them."""

    root: sequence.Node | None
    packer: Any
    items: int
    turns: int
    chars: int
    new_range: tuple[int, int]  # [start, end) of the records this commit added
    new_turns: int
    appended: bool = False  # to ``base``; else built whole
    base: sequence.Node | None = None  # what the new records were appended to
    built: dict = field(default_factory=dict)  # where a whole build put the payloads
    tally: tuple[bytearray, list[int]] | None = None  # a whole build's records: is each a turn, its chars
    forks: list[str] = field(default_factory=list)
    changes: dict = field(default_factory=dict)  # the fork branches' ref moves


def _store(repo: Repository, branch: str, state: State | None, pick: Pick, read: _Read, red: _Redaction,
           side: dict[str, bytes], notes: list[str]) -> _Stored:
    """Store the new records: appended to the head state's (an incremental read, or
    a file continuing an export), else the whole file built again, with its other
    lines of conversation as fork branches.

    New payloads continue the branch's pack chain, and payloads the branch (or its
    fork branches) already stores are named, not written again: a whole file read
    again gives the same leaves, and a file the agent reads again costs nothing."""
    fork_names = [f"{branch}-{v.name_hint or 'fork'}" for v in (read.result.views or [])[1:]]
    fork_states = {name: load_state(repo, h) for name in fork_names if (h := branch_head(repo, name)) is not None}
    packer = packer_for(repo, state, also=list(fork_states.values()))
    if read.incremental or read.resumed:
        assert state is not None
        red.keep = None  # (only a whole build is kept: the state holds other records too)
        return _append(repo, state, read, red, packer)
    stored = _build(repo, state, read, red, packer)
    red.keep = None  # the fork branches' records are not this state's
    stored.forks, stored.changes = _write_forks(repo, branch, pick, read, red, stored, side, fork_states)
    _check_news(repo, branch, state, pick, read.result, stored, notes)
    return stored


def _append(repo: Repository, state: State, read: _Read, red: _Redaction, packer) -> _Stored:
    """Append the new records to the head state's. Incremental: the new lines'
    records. Resumed: the records after the ones the export wrote (the file's only
    view begins with them, checked)."""
    store, result = repo.store, read.result
    indices = None if read.incremental else result.views[0].indices[read.resumed:]
    tally: tuple[bytearray, list[int]] = (bytearray(), [])
    base, turns_delta, chars_delta = state.root, 0, 0
    if read.incremental and result.revised:
        base, turns_delta, chars_delta = _revise(store, base, result.revised, packer)
    root = sequence.append(store, base, red.items(result, indices, tally), packer)
    new_turns, new_chars = sum(tally[0]), sum(tally[1])
    items = state.header.items + len(tally[0])
    return _Stored(
        root, packer, items=items, turns=state.header.turns + new_turns + turns_delta,
        chars=state.header.chars + new_chars + chars_delta, new_range=(state.header.items, items),
        new_turns=new_turns, appended=True, base=base,
    )


def _build(repo: Repository, state: State | None, read: _Read, red: _Redaction, packer) -> _Stored:
    """Build the sequence of the file's main line of conversation whole; what it
    shares with the head state's counts as not new."""
    view = read.result.views[0] if read.result.views else None
    built: dict[bytes, tuple[bytes, bool]] = {}
    tally: tuple[bytearray, list[int]] = (bytearray(), [])
    old_root = state.root if state is not None else None
    root = sequence.build(
        repo.store, red.items(read.result, view.indices if view else None, tally), packer, parent=old_root,
        locations=built,
    )
    flags, chars = tally
    prefix = common_prefix(repo, old_root, root)
    # The tally stays: the forks count the records they share with the main line from it.
    return _Stored(root, packer, items=len(flags), turns=sum(flags), chars=sum(chars),
                   new_range=(prefix, len(flags)), new_turns=sum(flags[prefix:]), built=built, tally=tally)


def _write_forks(repo: Repository, branch: str, pick: Pick, read: _Read, red: _Redaction, stored: _Stored,
                 side: dict[str, bytes], fork_states: dict[str, State]) -> tuple[list[str], dict]:
    """Store the file's other lines of conversation as branches of their own
    (``BRANCH-<hint>``), each a state whose parent is its branch's last one.

    A fork shares the records before it parts from the main line: those are the main
    line's first records (its leaves, reused), and only the fork's own records are
    read from the file again. A fork branch that holds the same records is left."""
    store, result = repo.store, read.result
    views = result.views or []
    main = views[0].indices if views else ()
    assert stored.tally is not None
    flags, chars = stored.tally
    forks: list[str] = []
    changes: dict[str, tuple[bytes | None, bytes | None]] = {}
    for v in views[1:]:
        shared = 0
        for a, b in zip(main, v.indices):
            if a != b:
                break
            shared += 1
        tally: tuple[bytearray, list[int]] = (bytearray(), [])
        root = sequence.append(
            store, sequence.truncate(store, stored.root, shared), red.items(result, v.indices[shared:], tally),
            stored.packer,
        )
        items = shared + len(tally[0])
        name = f"{branch}-{v.name_hint or 'fork'}"
        old_state = fork_states.get(name)
        if old_state is not None and _same_records(repo, old_state, root, items):
            continue
        header = StateHeader(
            session=result.session, items=items, turns=sum(flags[:shared]) + sum(tally[0]), new_items=(0, items),
            chars=sum(chars[:shared]) + sum(tally[1]), extra={"fork_of": branch, "leaf": v.leaf or ""},
        )
        old = old_state.oid if old_state is not None else None
        message = f"{pick.adapter.title} session {pick.file.id[:8]}: fork at {v.leaf or '?'}\n"
        oid = write_state(repo, header, root, [old] if old else [], message, packs=stored.packer.tip, side=side)
        changes[branch_ref(name)] = (old, oid)
        forks.append(name)
    return forks, changes


def _same_records(repo: Repository, old: State, root: sequence.Node | None, items: int) -> bool:
    """Whether a fork branch's state holds the records ``root`` does: by id, since
    where their payloads are stored may differ from one import to the next."""
    if (old.root.oid if old.root else None) == (root.oid if root else None):
        return True
    return old.header.items == items and common_prefix(repo, old.root, root) == items


def _check_news(repo: Repository, branch: str, state: State | None, pick: Pick, result: ReadResult,
                stored: _Stored, notes: list[str]) -> None:
    """After a whole build: nothing to commit when the same session gave the same
    records and no fork moved; a note when the branch now records another session."""
    if state is None:
        return
    was = state.header.session
    same_root = (state.root.oid if state.root else None) == (stored.root.oid if stored.root else None)
    if same_root and not stored.forks and was is not None and was.id == result.session.id:
        raise NothingToDoError(f"nothing to commit: session {pick.file.id} has no new turns since {_short(state.oid)}")
    if was is not None and was.id != result.session.id:
        notes.append(f"branch {branch} now records session {result.session.id} (was {was.id})")


# ------------------------------------------------------------------ recording


def _record(repo: Repository, branch: str, head: bytes | None, state: State | None, pick: Pick, read: _Read,
            stored: _Stored, side: dict[str, bytes], message: str | None, notes: list[str]) -> CommitResult:
    """Write the new state and move the branch (and its forks) in one operation, which
    also makes the branch track the session: ``opal undo`` takes all of it back."""
    ad, f, result = pick.adapter, pick.file, read.result
    source = Source(path=f.path, size=result.end, lines=result.lines, tail=tail_hash(f.path, result.end),
                    state=result.state)
    header = StateHeader(session=result.session, items=stored.items, turns=stored.turns, source=source,
                         new_items=stored.new_range, chars=stored.chars)
    if message is None:
        n = stored.new_turns
        message = f"{n} new turn{'s' if n != 1 else ''} from {ad.title} session {result.session.id[:8]}"
    oid = write_state(repo, header, stored.root, [head] if head else [], message, packs=stored.packer.tip, side=side)
    changes = {**stored.changes, branch_ref(branch): (head, oid)}
    desc = f"commit {stored.new_turns} new turns to {branch}"
    op = oplog.new(repo, "commit", desc, changes, sessions=tracking(repo, branch, (ad.name, result.session.id)))
    oplog.apply(repo, op, meanwhile=lambda: _cache_locations(repo, state, stored))
    return CommitResult(
        branch=branch, oid=oid, parent=head, session=result.session, new_turns=stored.new_turns,
        new_items=stored.new_range[1] - stored.new_range[0], turns=stored.turns, items=stored.items,
        incremental=read.incremental, forks=stored.forks, notes=notes, warnings=list(result.warnings),
        objects_written=repo.store.written_objects, bytes_written=repo.store.written_bytes,
    )


def _cache_locations(repo: Repository, state: State | None, stored: _Stored) -> None:
    """Where the new state's payloads are, for the next commit (see
    :mod:`opalgit.history.locationcache`): keyed by the sequence's id, so it is right
    whether or not the ref update it runs beside succeeds, and only a shortcut."""
    from opalgit.history import locationcache as locations

    try:
        if stored.appended:
            assert state is not None
            # (a base revised in place holds the same payloads as the state's root)
            old_known = locations.of(repo.store, repo.opal_dir, state.root)
            locations.after_append(repo.store, repo.opal_dir, stored.base, stored.root, old_known)
        elif stored.root is not None:
            locations.save(repo.opal_dir, stored.root.oid, stored.built)
    except (OSError, OpalError):
        pass

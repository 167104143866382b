"""The high-level Python API: what every ``opal`` command does, without the terminal.

Each function takes a :class:`~opalgit.store.repo.Repository` (and, where sessions are
looked up, the environment mapping and the current folder), does its work under the
repository lock, records an operation for anything that changes refs, and returns a
plain result object that the CLI prints (or dumps as JSON).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from opalgit import agents as adapters
from opalgit.agents.base import ReadResult, Record, SessionFile, begins_with, tail_hash
from opalgit.errors import InputError, NothingToDoError, OpalError, RevisionError, SessionNotFoundError, UsageError
from opalgit.history import oplog, sequence
from opalgit.history.model import Normal, SessionInfo, Source, StateHeader, Turn, summarize
from opalgit.history.sequence import Item
from opalgit.plural import count
from opalgit.porcelain.status import SessionStatus, StatusResult, status  # noqa: F401  (re-exported: the porcelain API)
from opalgit.secrets import worker as redactworker
from opalgit.store.argv import command
from opalgit.store.objects import CommitData
from opalgit.store.refs import branch_ref, check_branch_name
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field
from opalgit.times import iso_ms, iso_seconds

if TYPE_CHECKING:
    from opalgit.secrets.redact import Redactor

from opalgit.history.states import (
    STATE_BLOB,
    TURNS_TREE,
    Resolved,
    State,
    _count,
    _items,
    _short,
    authored_item,
    branch_head,
    common_prefix,
    current_branch,
    load_payload,
    load_state,
    packer_for,
    resolve,
    turn_item_index,
    turn_of,
)
from opalgit.porcelain.states import normal_of, normals_of, write_state
from opalgit.porcelain.states import replays as _replays

# ================================================================== init


@dataclass
class InitResult:
    """What ``opal init`` did."""

    path: str
    created: bool
    own_store: bool
    branch: str


#: What keeps a store of opal's own out of git: a folder that git later tracks (a
#: ``git init`` here or above, then ``git add -A``) must never stage the vault, the
#: states (in clear when redaction was off) or the config.
STORE_GITIGNORE = "# opal's store (states, the secret vault): never to be committed\n*\n"


def _keep_store_out_of_git(store: str) -> None:
    """Write ``<store>/.gitignore`` ignoring everything, unless one is there already."""
    path = os.path.join(store, ".gitignore")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return
    try:
        os.write(fd, STORE_GITIGNORE.encode())
    finally:
        os.close(fd)


def init(path: str) -> InitResult:
    """Set opal up in the git repository around ``path``, or in a store of its own.

    A store of its own (``.opal/``, outside any git repository) gets a ``.gitignore``
    that ignores all of it, so a git repository made there later never stages it;
    running ``opal init`` again adds it to a store made before.
    """
    repo, created = Repository.init(path)
    if repo.own:
        _keep_store_out_of_git(repo.git_dir)
    if created:
        with repo.lock():
            op = oplog.new(repo, "init", "initialize opal", {})
            oplog.apply(repo, op)
    return InitResult(repo.workdir or repo.git_dir, created, repo.own, repo.refs.head_branch())


# ================================================================== sessions


@dataclass
class Pick:
    """A session file chosen for a commit, with the adapter that reads it."""

    adapter: adapters.Adapter
    file: SessionFile
    note: str | None = None


def _search_dirs(repo: Repository, cwd: str) -> list[str]:
    dirs = []
    path = os.path.abspath(cwd)
    top = repo.workdir or path
    while True:
        dirs.append(path)
        if path == top or os.path.dirname(path) == path or not path.startswith(top):
            break
        path = os.path.dirname(path)
    return dirs


def find_session(
    repo: Repository,
    env: Mapping[str, str],
    cwd: str,
    *,
    agent: str | None = None,
    session: str | None = None,
    file: str | None = None,
) -> Pick:
    """Which session ``opal commit`` records: explicit, tracked, or the newest."""
    if file is not None:
        from opalgit import fileio, jsonl

        path = os.path.abspath(file)
        try:
            # A regular file only: a FIFO or a device would block or never end.
            with fileio.open_input(path, hint="give the path of the agent's session file") as fh:
                head = fh.read(64 * 1024)
        except FileNotFoundError:
            raise SessionNotFoundError(f"{file}: no such file", hint="give the path of a session file") from None
        ad = adapters.get(agent) if agent else adapters.detect(path, head)
        if ad is not None:
            note = _subagent_note(ad, path, head, file)
            st = os.stat(path)
            stem = os.path.basename(path).split(".")[0]
            return Pick(ad, SessionFile(ad.name, stem, path, st.st_mtime, st.st_size), note)
        jsonl.sniff_binary(path, head)  # an image, an archive, UTF-16: say which
        raise InputError(
            "not a session file of any agent opal knows",
            path=file,
            hint=f"pass --agent ({', '.join(adapters.names())}) if you are sure",
        )
    chosen = [adapters.get(agent)] if agent else list(adapters.all_adapters().values())
    if session is not None:
        for ad in chosen:
            found = ad.find_session(session, env)
            if found is not None:
                from opalgit import fileio

                with fileio.open_input(found.path, hint="give the path of the agent's session file") as fh:
                    note = _subagent_note(ad, found.path, fh.read(64 * 1024), found.path)
                return Pick(ad, found, note)
        raise SessionNotFoundError(f"no session with id {session!r}", hint="see 'opal status' for the sessions of this folder")
    candidates: list[tuple[adapters.Adapter, SessionFile]] = []
    for directory in _search_dirs(repo, cwd):
        for ad in chosen:
            candidates.extend((ad, f) for f in ad.find_sessions(directory, env))
        if candidates:
            break
    if not candidates:
        raise SessionNotFoundError(
            f"no agent session found for {os.path.abspath(cwd)}",
            hint="start the agent in this folder first, or give --file PATH or --session ID",
        )
    candidates.sort(key=lambda c: c[1].mtime, reverse=True)
    branch = current_branch(repo)
    tracked = tracked_session(repo, branch)
    if tracked is not None:
        for ad, f in candidates:
            if (ad.name, f.id) == tracked:
                return Pick(ad, f)
    ad, f = candidates[0]
    if tracked is not None:
        _refuse_another_session(repo, branch, tracked, (ad.name, f.id), f.path)
    note = None
    if len(candidates) > 1:
        note = (
            f"{len(candidates)} sessions found for this folder; recording the most recently "
            f"written, {f.id} ({ad.title}). Use --session ID to pick another."
        )
    return Pick(ad, f, note)


def _subagent_note(ad: "adapters.Adapter", path: str, head: bytes, shown: str) -> str | None:
    """A subagent's transcript holds no turn of its own (they are the parent's sidechain).

    Where the parent session keeps it in its side folder, a commit of the parent stores
    it: refuse, naming the parent, rather than make an empty commit. Elsewhere (the older
    layout, ``agent-*.jsonl`` beside the session, or a copy) nothing else would store it:
    record it, and say what it is and why it has no turns.
    """
    side = ad.subagent_of(path, head)
    if side is None:
        return None
    parent, parent_path = side
    whose = f"{ad.title} session {parent}"
    if parent_path is not None and os.path.abspath(path).startswith(parent_path[: -len(".jsonl")] + os.sep):
        raise InputError(
            f"a subagent's transcript, not a session: its turns belong to {whose}, "
            "which stores it with its own (its side folder)",
            path=shown,
            hint=f"record the parent session: opal commit --file {parent_path}",
        )
    where = f"opal commit --file {parent_path}" if parent_path else f"opal commit --session {parent}"
    return (
        f"{shown} is a subagent's transcript of {whose}: its records are kept as they are, as the "
        f"subagent side (bookkeeping), not as turns of a conversation; '{where}' records the session itself"
    )


def _refuse_another_session(repo: Repository, branch: str, tracked: tuple[str, str], other: tuple[str, str],
                            path: str) -> None:
    """A commit that names no session must not switch ``branch`` to ``other`` when the
    session it tracks is not among this folder's (pulled from a teammate, exported to
    another folder, its file deleted): ``other`` would replace the branch's turns with
    its own without a word. Recording the session the head came from is the usual commit."""
    head = branch_head(repo, branch)
    h = load_state(repo, head).header if head else None
    s = h.session if h else None
    # The same session by id, or the same file (a file's name need not be its id).
    if s is None or (s.agent, s.id) == other or (h.source is not None and h.source.path == path):
        return
    agent, sid = tracked
    raise UsageError(
        f"branch {branch} tracks {agent} session {sid}, which is not among this folder's sessions (pulled from "
        f"another machine, exported to another folder, or its file deleted); recording session {other[1]} would "
        f"replace its turns",
        hint=f"to continue {branch} here, run '{command('opal', 'export', '--to', agent)}' and resume that; to record "
             f"{other[1]} anyway, run '{command('opal', 'commit', '--session', other[1])}'",
    )


def tracked_session(repo: Repository, branch: str) -> tuple[str, str] | None:
    value = repo.config_get(f"branch.{branch}.session")
    if not value or ":" not in value:
        return None
    agent, _, sid = value.partition(":")
    return agent, sid


def _track(repo: Repository, branch: str, agent: str, sid: str) -> dict[str, tuple[str | None, str | None]]:
    """What making ``branch`` track session ``agent:sid`` changes, for the operation
    that does it to record (:attr:`oplog.Operation.sessions`): ``opal undo`` restores it."""
    return oplog.tracking_change(repo, branch, f"{agent}:{sid}")


def _untrack(repo: Repository, branch: str) -> dict[str, tuple[str | None, str | None]]:
    """What making ``branch`` track no session changes (see :func:`_track`)."""
    return oplog.tracking_change(repo, branch, None)


def record_export(repo: Repository, branch: str, agent: str, sid: str, state: bytes, rev: str) -> oplog.Operation:
    """Make ``branch`` track the session ``opal export`` just wrote, as an operation:
    ``opal undo`` gives the branch back the session it tracked before. The caller
    holds the lock."""
    desc = f"export {rev} ({_short(state)}) to {agent} session {sid}, tracked by {branch}"
    return oplog.apply(repo, oplog.new(repo, "export", desc, {}, sessions=_track(repo, branch, agent, sid)))


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
    import opalgit.porcelain.checkpoints as checkpoints

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


# ================================================================== commit


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
    op = oplog.new(repo, "commit", desc, changes, sessions=_track(repo, branch, ad.name, result.session.id))
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


# ================================================================== log / show


@dataclass
class CommitInfo:
    """One state commit as ``opal log`` shows it."""

    oid: bytes
    parents: tuple[bytes, ...]
    message: str
    author: str
    time: int
    offset: int
    header: StateHeader
    branches: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        h = self.header
        return {
            "id": self.oid.hex(),
            "parents": [p.hex() for p in self.parents],
            "message": self.message.rstrip("\n"),
            "author": self.author,
            "time": iso_seconds(self.time),
            "branches": self.branches,
            "agent": h.session.agent if h.session else None,
            "session": h.session.to_map() if h.session else None,
            "turns": h.turns,
            "records": h.items,
            "new_records": list(h.new_items),
            "tokens_estimate": _tokens(h.chars),
            **({"extra": h.extra} if h.extra else {}),
        }


def _tokens(chars: int) -> int:
    from opalgit.history.tokens import estimate

    return estimate(chars)


def commit_info(repo: Repository, oid: bytes, labels: Mapping[bytes, list[str]] | None = None) -> CommitInfo:
    st = load_state(repo, oid)
    c = st.commit
    return CommitInfo(
        oid=oid,
        parents=c.parents,
        message=c.message,
        author=f"{c.author.name} <{c.author.email}>",
        time=c.author.time,
        offset=c.author.offset,
        header=st.header,
        branches=list((labels or {}).get(oid, [])),
    )


def branch_labels(repo: Repository) -> dict[bytes, list[str]]:
    labels: dict[bytes, list[str]] = {}
    for name, oid in sorted(repo.refs.branches().items()):
        labels.setdefault(oid, []).append(name)
    return labels


def log(repo: Repository, revs: list[str] | None = None, limit: int | None = None, *, order: str = "date",
        starts: list[bytes] | None = None, hide: set[bytes] | frozenset[bytes] = frozenset(),
        keep: Callable[[CommitData], bool] | None = None) -> list[CommitInfo]:
    """Commits reachable from ``revs`` (default HEAD), newest first, like ``git log``.

    Never a parent before one of its children (what ``--graph`` needs), even when
    commits share a second or clocks disagree. ``order`` is git's: ``"date"``
    (``--date-order``: the newest ready commit first) or ``"topo"`` (``--topo-order``,
    what ``git log --graph`` uses: each line of history whole); ties as git breaks them
    (see :func:`opalgit.history.graph.order`), so ``opal log`` and ``git log`` agree.
    ``starts`` (resolved already) replaces ``revs``; the walk does not enter ``hide``
    (a range's excluded side, :func:`revision.select`), and lists only the commits
    ``keep`` accepts (``--since``), counting only those against ``limit``.
    """
    from opalgit.history import graph

    if starts is None:
        starts = [resolve(repo, r).oid for r in (revs or ["HEAD"])]
    labels = branch_labels(repo)
    # The reachable graph from commit headers alone (cheap); states are read only for
    # the commits shown.
    commits: dict[bytes, CommitData] = {}
    stack = [o for o in dict.fromkeys(starts) if o not in hide]
    while stack:
        oid = stack.pop()
        if oid in commits or oid in hide:
            continue
        c = commits[oid] = repo.store.read_commit(oid)
        stack.extend(p for p in c.parents if p not in hide)
    parents = {o: [p for p in c.parents if p not in hide] for o, c in commits.items()}
    dates = {o: c.committer.time for o, c in commits.items()}
    shown = graph.order([o for o in dict.fromkeys(starts) if o not in hide], parents, dates, order)
    if keep is not None:
        shown = [o for o in shown if keep(commits[o])]
    if limit is not None:
        shown = shown[:limit]
    return [commit_info(repo, oid, labels) for oid in shown]


@dataclass
class TurnInfo:
    """One record of a state as ``opal log --turns`` lists it."""

    number: int | None  # 1-based turn number, None for meta records
    index: int  # 0-based record index
    id: bytes
    summary: dict

    def to_json(self) -> dict:
        s = self.summary
        return {
            "turn": self.number,
            "record": self.index + 1,
            "id": self.id.hex(),
            "role": s.get("role"),
            "kind": s.get("kind"),
            "tool": s.get("tool"),
            "chars": s.get("chars", 0),
            "tokens_estimate": _tokens(int(s.get("chars", 0))),
            "time": iso_ms(s.get("time")),
            **({"label": s["label"]} if "label" in s else {}),
        }


def turns(repo: Repository, rev: str = "HEAD", *, include_meta: bool = False) -> list[TurnInfo]:
    st = load_state(repo, resolve(repo, rev).oid)
    out: list[TurnInfo] = []
    number = 0
    for si in sequence.iter_items(repo.store, st.root):
        if si.item.is_turn:
            number += 1
            out.append(TurnInfo(number, si.index, si.item.id, si.item.summary))
        elif include_meta:
            out.append(TurnInfo(None, si.index, si.item.id, si.item.summary))
    return out


@dataclass
class ShownTurn:
    """One turn as ``opal show`` prints it: its summary, normalized view and source record."""

    commit: bytes
    number: int
    index: int
    id: bytes
    summary: dict
    normal: Normal
    agent: str
    record: Any  # the source record (JSON) when there is one

    def to_json(self) -> dict:
        return {
            "commit": self.commit.hex(),
            "turn": self.number,
            "record": self.index + 1,
            "id": self.id.hex(),
            "agent": self.agent,
            "role": self.normal.role,
            "time": iso_ms(self.normal.time),
            "blocks": self.normal.blocks,
            "source": self.record,
        }


def show_turn(repo: Repository, oid: bytes, turn: int) -> ShownTurn:
    st = load_state(repo, oid)
    index = turn_item_index(repo, st, turn)
    si = next(sequence.iter_items(repo.store, st.root, index, index + 1))
    t = turn_of(repo, si.item)
    if t.agent != "opal" and _replays(t.agent):
        # The record's meaning depends on the others (a mutation log): replay the state.
        everything = [turn_of(repo, x.item) for x in sequence.iter_items(repo.store, st.root)]
        normal = normals_of(everything)[index]
    elif t.agent == "opal":
        normal = Normal(role=t.role or "meta", blocks=list(t.blocks or ()))
    else:
        normal = adapters.get(t.agent).normalize(t)
    number = turn if turn > 0 else st.header.turns + turn + 1
    return ShownTurn(oid, number, index, si.item.id, si.item.summary, normal, t.agent, t.record if t.has_record else None)


# ================================================================== branches


@dataclass
class BranchInfo:
    """One branch as ``opal branch`` lists it."""

    name: str
    oid: bytes
    current: bool
    turns: int
    message: str
    session: str | None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "id": self.oid.hex(),
            "current": self.current,
            "turns": self.turns,
            "message": self.message.splitlines()[0] if self.message else "",
            "session": self.session,
        }


def branches(repo: Repository) -> list[BranchInfo]:
    cur = current_branch(repo)
    out = []
    for name, oid in sorted(repo.refs.branches().items()):
        st = load_state(repo, oid)
        out.append(
            BranchInfo(
                name,
                oid,
                name == cur,
                st.header.turns,
                st.commit.message,
                st.header.session.id if st.header.session else None,
            )
        )
    return out


def _cut_state(repo: Repository, st: State, keep_items: int, *, parent: bytes, message: str, reason: str, **extra) -> bytes:
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


def branch_create(repo: Repository, name: str, rev: str = "HEAD", *, force: bool = False) -> BranchInfo:
    check_branch_name(name)
    with repo.lock():
        target = resolve(repo, rev)
        existing = branch_head(repo, name)
        if existing is not None and not force:
            raise UsageError(f"branch {name} already exists", hint=f"pick another name, or 'opal switch {name}'")
        oid = target.oid
        st = load_state(repo, oid)
        if target.turn is not None:
            index = turn_item_index(repo, st, target.turn)
            oid = _cut_state(
                repo,
                st,
                index + 1,
                parent=oid,
                message=f"branch {name} at {rev}\n",
                reason="branched",
            )
            st = load_state(repo, oid)
        # A new head is no continuation of any session the name tracked before (one
        # replaced with --force): the branch's first commit picks its session.
        op = oplog.new(repo, "branch", f"create branch {name} at {rev}", {branch_ref(name): (existing, oid)},
                       sessions=_untrack(repo, name))
        oplog.apply(repo, op)
        return BranchInfo(name, oid, False, st.header.turns, st.commit.message, st.header.session.id if st.header.session else None)


def branch_delete(repo: Repository, name: str, *, force: bool = False) -> bytes:
    with repo.lock():
        oid = branch_head(repo, name)
        if oid is None:
            raise RevisionError(f"no branch {name}", hint="see 'opal branch -l'")
        if name == current_branch(repo) and not force:
            raise UsageError(f"cannot delete {name}: it is the current branch", hint="'opal switch' to another branch first")
        op = oplog.new(repo, "branch", f"delete branch {name}", {branch_ref(name): (oid, None)},
                       sessions=_untrack(repo, name))
        oplog.apply(repo, op)
        return oid


def switch(repo: Repository, name: str, *, create: bool = False, start: str = "HEAD") -> str:
    """Make ``name`` the current branch (``create``: a new one at ``start`` first).

    As ``git switch -c`` does on an unborn branch, creating from HEAD before the first
    commit makes the new branch the current one, unborn too: the next commit starts it.
    """
    if create:
        check_branch_name(name)
        with repo.lock():
            cur = current_branch(repo)
            if start == "HEAD" and branch_head(repo, cur) is None:
                if branch_head(repo, name) is not None:
                    raise UsageError(f"branch {name} already exists", hint=f"'opal switch {name}' goes to it")
                if cur == name:
                    raise NothingToDoError(f"already on {name}, which has no commits yet")
                op = oplog.new(repo, "switch", f"switch from {cur} to new branch {name} (no commits yet)", {}, head_after=name)
                oplog.apply(repo, op)
                return name
        branch_create(repo, name, start)
    with repo.lock():
        if branch_head(repo, name) is None:
            raise RevisionError(f"no branch {name}", hint=f"create it with 'opal switch -c {name}' or 'opal branch {name}'")
        cur = current_branch(repo)
        if cur == name:
            raise NothingToDoError(f"already on {name}")
        op = oplog.new(repo, "switch", f"switch from {cur} to {name}", {}, head_after=name)
        oplog.apply(repo, op)
        return name


# ================================================================== rewind / undo


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
        oid = _cut_state(repo, source_state, keep_items, parent=head, message=f"rewind {what}\n", reason="rewound")
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


def undo(repo: Repository, op_id: str | None = None, *, force: bool = False) -> oplog.Operation:
    with repo.lock():
        target = oplog.resolve(repo, op_id) if op_id else oplog.undo_target(repo)
        if target.command == "init":
            raise UsageError("the initialization cannot be undone", hint="remove refs/opal/ by hand if you must")
        if target.command in ("gc", "expired"):
            raise UsageError("'opal gc' cannot be undone: what it expired is gone", hint="see 'opal op log'")
        return oplog.undo(repo, target, force=force)


def op_log(repo: Repository, limit: int | None = None) -> list[oplog.Operation]:
    out = []
    for op in oplog.log(repo):
        out.append(op)
        if limit is not None and len(out) >= limit:
            break
    return out


__all__ = [
    "BranchInfo",
    "CommitInfo",
    "CommitResult",
    "InitResult",
    "Pick",
    "Resolved",
    "RewindResult",
    "STATE_BLOB",
    "SessionStatus",
    "ShownTurn",
    "State",
    "StatusResult",
    "TURNS_TREE",
    "TurnInfo",
    "authored_item",
    "branch_create",
    "branch_delete",
    "branch_head",
    "branch_labels",
    "branches",
    "commit",
    "commit_info",
    "common_prefix",
    "current_branch",
    "find_session",
    "init",
    "load_payload",
    "load_state",
    "log",
    "normal_of",
    "normals_of",
    "packer_for",
    "op_log",
    "record_export",
    "resolve",
    "rewind",
    "show_turn",
    "status",
    "switch",
    "tracked_session",
    "turn_item_index",
    "turn_of",
    "turns",
    "undo",
    "write_state",
]

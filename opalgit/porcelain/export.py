"""Checking out a state into an agent's native session files (``opal export``, ``opal resume``).

Porcelain layer. The adapter of the target agent decides what to write
(:meth:`~opalgit.agents.base.Adapter.export`); this module gathers the turns, fits
them to a budget if asked, writes the files without ever overwriting one, and makes
the branch track the new session so the next ``opal commit`` records its growth.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Callable, Mapping

import opalgit.porcelain.checkpoints as checkpoints
from opalgit import agents as adapters
from opalgit.agents.base import ExportRequest, ExportResult, ExportTurn, LossReport, tail_digest
from opalgit.errors import ConflictError, UsageError
from opalgit.fileio import create_temp, folder_problem, replace_atomically
from opalgit.history import sequence
from opalgit.history.model import Turn
from opalgit.history.sequence import Item
from opalgit.history.states import load_payload, load_state, resolve, side_files, turn_item_index, turn_of
from opalgit.history.tokens import estimate
from opalgit.porcelain import secrets as redaction
from opalgit.porcelain.budget import fit
from opalgit.porcelain.sessions import record_export
from opalgit.porcelain.states import normals_of
from opalgit.secrets.rules import PLACEHOLDER_PREFIX
from opalgit.store.repo import Repository
from opalgit.structs import dataclass


@dataclass
class ExportOutcome:
    agent: str
    rev: str
    commit: bytes
    session_id: str
    cwd: str
    files: list[str]
    aux: list[str]
    resume: list[str]
    report: LossReport
    turns: int
    tokens_before: int
    tokens_after: int
    dry_run: bool
    branch: str | None

    def to_json(self) -> dict:
        return {
            "agent": self.agent,
            "revision": self.rev,
            "commit": self.commit.hex(),
            "session_id": self.session_id,
            "cwd": self.cwd,
            "files": self.files,
            "shared_files": self.aux,
            "resume": self.resume,
            "resume_command": f"cd {_quote(self.cwd)} && {' '.join(_quote(a) for a in self.resume)}",
            "turns": self.turns,
            "tokens_estimate": {"before": self.tokens_before, "after": self.tokens_after},
            "report": self.report.to_json(),
            "dry_run": self.dry_run,
        }


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def gather(repo: Repository, rev: str, *, with_secrets: bool = True,
           known: tuple[bytes, list] | None = None) -> tuple[bytes, list[ExportTurn], object, str | None]:
    """The turns of a revision (cut after turn N for ``REV:N``), resolved and normalized.

    With ``with_secrets``, placeholders are replaced by the originals this machine's
    vault holds (none on a teammate's clone). ``known``: a state's id and its records
    as the commit that wrote it kept them (``commit(keep=...)``, ``opal handoff``),
    used for that state whole instead of reading its records back.
    """
    target = resolve(repo, rev)
    st = load_state(repo, target.oid)
    end = st.header.items
    if target.turn is not None:
        end = turn_item_index(repo, st, target.turn) + 1
    mapping = redaction.secret_mapping(repo) if with_secrets else {}
    if known is not None and known[0] == target.oid and end == st.header.items == len(known[1]):
        resolved = [redaction.restore_turn(k.turn, mapping) if k.placeholder else k.turn for k in known[1]]
    else:
        resolved = [_stored_turn(repo, si.item, mapping) for si in sequence.iter_items(repo.store, st.root, 0, end)]
    turns = [ExportTurn(t, n) for t, n in zip(resolved, normals_of(resolved))]
    return target.oid, turns, st.header.session, target.branch


_PLACEHOLDER = PLACEHOLDER_PREFIX.encode()


def _stored_turn(repo: Repository, item: Item, mapping: dict[str, str]) -> Turn:
    """A stored record resolved, with the vault's secrets put back where it holds a placeholder.

    Putting secrets back walks the whole value, and almost no record holds one: a
    placeholder is plain UTF-8 in the record's canonical bytes or in one of its
    payloads, so a record in neither is left as it is (what the walk would give).
    The handoff benchmark's 20 MB session: 3 records of 2,596 hold one.
    """
    if not mapping:
        return turn_of(repo, item)
    found = _PLACEHOLDER in item.canon
    load = load_payload(repo, item)

    def loading(d: bytes) -> bytes:
        nonlocal found
        data = load(d)
        found = found or _PLACEHOLDER in data
        return data

    turn = Turn.decode(item.canon)
    if item.payload_oids or item.payloads:  # (as in turn_of: a leaf lists every reference)
        turn = turn.resolve(loading)
    return redaction.restore_turn(turn, mapping) if found else turn


def export(
    repo: Repository,
    env: Mapping[str, str],
    rev: str = "HEAD",
    *,
    to: str,
    cwd: str | None = None,
    dry_run: bool = False,
    reasoning: str = "drop",
    budget: int | None = None,
    session_id: str | None = None,
    with_secrets: bool = True,
    pre_compaction: bool = False,
    before_write: Callable[[list[str]], None] | None = None,
    known: tuple[bytes, list] | None = None,
) -> ExportOutcome:
    """Write REV as a new native session of agent ``to`` (nothing with ``dry_run``).

    ``before_write`` is given the resume command once the session is built and before
    any file is written: it raises to stop the export (``opal resume`` checks there that
    the agent can be started, so a failed resume leaves nothing behind).
    """
    adapter = adapters.get(to)
    oid, turns, session, branch = gather(repo, rev, with_secrets=with_secrets, known=known)
    early = LossReport()
    if getattr(session, "agent", None) != adapter.name:
        turns = _after_compaction(turns, pre_compaction, budget, early)
    folder = _folder(repo, session, cwd)
    report = early
    before = after = sum(estimate(_chars(t)) for t in turns if t.normal.role != "meta")
    if budget is not None:
        if budget <= 0:
            raise UsageError("--budget needs a positive number of tokens")
        fitted = fit(turns, budget)
        turns, before, after = fitted.turns, fitted.before, fitted.after
        report.merge(fitted.report)
    sid = session_id or str(uuid.uuid4())
    side = _side_files(repo, oid, session, adapter, report, with_secrets=with_secrets)
    req = ExportRequest(
        turns=turns,
        session=session,  # type: ignore[arg-type]
        cwd=folder,
        session_id=sid,
        env=env,
        now_ms=int(time.time() * 1000),
        reasoning=reasoning,
        side=side,
    )
    result = adapter.export(req)
    report.merge(result.report)
    if before_write is not None:
        before_write(result.resume)
    if not dry_run:
        _write(repo, adapter, session, result, report, oid, rev, branch, turns=len(turns), budget=budget)
    return ExportOutcome(
        agent=adapter.name,
        rev=rev,
        commit=oid,
        session_id=result.session_id,
        cwd=folder,
        files=[p for p, _ in result.files],
        aux=[p for p, _ in result.aux],
        resume=result.resume,
        report=report,
        turns=sum(1 for t in turns if t.normal.role != "meta"),
        tokens_before=before,
        tokens_after=after,
        dry_run=dry_run,
        branch=branch,
    )


def _folder(repo: Repository, session, cwd: str | None) -> str:
    """The folder the exported session belongs to: ``--cwd`` (which must be a usable
    folder), else the source session's own folder while it exists, else this one."""
    folder = os.path.abspath(cwd) if cwd else (getattr(session, "cwd", None) or repo.workdir or os.getcwd())
    problem = folder_problem(folder) if cwd is not None else None
    if problem is not None:
        raise UsageError(f"--cwd {cwd}: {problem}", hint="create it first, or pass the folder you will resume from")
    if not os.path.isdir(folder):
        folder = repo.workdir or os.getcwd()
    return folder


def _side_files(repo: Repository, oid: bytes, session, adapter: adapters.Adapter, report: LossReport, *,
                with_secrets: bool) -> dict[str, bytes]:
    """The state's side files (subagent transcripts, tool results) for the new session:
    with their secrets restored unless ``with_secrets`` is off; none for another agent,
    which has no counterpart of them (said in ``report``)."""
    side = side_files(repo, load_state(repo, oid))
    if side and with_secrets:
        mapping = redaction.secret_mapping(repo)
        side = {rel: redaction.restore_bytes(data, mapping) for rel, data in side.items()} if mapping else side
    if side and getattr(session, "agent", None) != adapter.name:
        folders: dict[str, int] = {}
        for rel in side:
            top = rel.split("/")[0] if "/" in rel else "(files)"
            folders[top] = folders.get(top, 0) + 1
        for top, n in folders.items():
            report.drop(f"side_folder:{top}", n)
        report.note(f"the source session's side folders ({', '.join(folders)}) are not part of a "
                    f"{adapter.title} session: left out")
        side = {}
    return side


def _write(repo: Repository, adapter: adapters.Adapter, session, result: ExportResult, report: LossReport,
           oid: bytes, rev: str, branch: str | None, *, turns: int, budget: int | None) -> None:
    """Write the new session's files and run the adapter's steps after them, then, under
    the lock, leave the checkpoint a later commit continues from and make the branch
    track the new session."""
    write_files(result)
    for step in result.post:
        note = step()
        if note:
            report.note(note)
    with repo.lock():
        _checkpoint(repo, adapter.name, session, result, report, oid, turns, budget)
        if branch is not None:
            # An operation: 'opal undo' gives the branch back the session it tracked.
            record_export(repo, branch, adapter.name, result.session_id, oid, rev)


def _after_compaction(turns: list[ExportTurn], full: bool, budget: int | None, report: LossReport) -> list[ExportTurn]:
    """What another agent gets of a compacted session: by default what the source agent
    itself sends after its last compaction (the boundary, its summary and the turns
    after); with ``full`` every turn before it too, when that fits ``budget``.

    The state holds the whole history either way; a same-agent export writes it all,
    as the agent wrote it, and the agent applies its own compaction on resume.
    """
    cut = max((i for i, t in enumerate(turns) if t.normal.label == "compact-boundary"), default=None)
    if cut is None:
        return turns
    earlier = sum(1 for t in turns[:cut] if t.normal.role != "meta")
    if full:
        total = sum(estimate(_chars(t)) for t in turns if t.normal.role != "meta")
        if budget is None or total <= budget:
            if earlier:
                report.note(f"{earlier} turn{'s' if earlier != 1 else ''} from before the session's compaction "
                            f"{'are' if earlier != 1 else 'is'} included (--pre-compaction)")
            return turns
        report.note(f"the history before the compaction (~{total} tokens in all) does not fit --budget {budget}: "
                    "the target gets the compacted context")
    if earlier:
        report.drop("turn:before_compaction", earlier)
        report.note(f"the target gets the context after the session's compaction (its summary and "
                    f"{earlier} fewer turn{'s' if earlier != 1 else ''}); --pre-compaction sends the whole history, "
                    "which the state keeps")
    return turns[cut:]


def _chars(t: ExportTurn) -> int:
    from opalgit.history.model import block_chars

    return sum(block_chars(b) for b in t.normal.blocks)


def _checkpoint(repo: Repository, agent: str, session, result: ExportResult, report: LossReport, state: bytes,
                records: int, budget: int | None) -> None:
    """Remember the session file an export wrote and the state it came from: a commit
    on a rewound branch then knows the file holds that state's turns
    (:mod:`checkpoints`). When the export wrote one line per stored record, in order,
    to the same agent, committing the resumed session also stores only its new turns."""
    if not result.files:
        return
    # Every record must be written one for one (lines the exporter adds after them,
    # such as a result for a call left open, are the resumed session's first new ones).
    one_for_one = (
        budget is None
        and session is not None
        and getattr(session, "agent", None) == agent
        and records > 0
        and result.prefix == records
    )
    path, data = result.files[0]
    checkpoints.save(repo.opal_dir, checkpoints.Checkpoint(
        agent=agent, session=result.session_id, path=os.path.abspath(path), size=len(data),
        records=records if one_for_one else 0, tail=tail_digest(data), state=state,
    ))


def write_files(result: ExportResult) -> None:
    """Write new session files (never replacing one), then shared files atomically.

    A new file is written under a temporary name and hard-linked into place, which
    fails if the name exists: an existing session of the user's is never overwritten,
    and a crash leaves no half-written session file.
    """
    for path, _ in result.files:
        if os.path.exists(path):
            raise ConflictError(f"{path} already exists; opal never overwrites a session file", hint="export again (a new session id is chosen each time)")
    written: list[str] = []
    try:
        for path, data in result.files:
            _write_new(path, data)
            written.append(path)
        for path, data in result.aux:
            replace_atomically(path, data)
    except BaseException:
        for path in written:
            try:
                os.unlink(path)
            except OSError:
                pass
        raise


def _write_new(path: str, data: bytes) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = create_temp(directory, ".opal-export-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise ConflictError(f"{path} already exists; opal never overwrites a session file") from None
    finally:
        os.unlink(tmp)



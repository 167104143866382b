"""Which agent session a command means, and which one a branch tracks.

``opal commit`` and ``opal status`` look for sessions the same way: in the current
folder, then in each folder above it up to the repository's top (:func:`search_dirs`).
A branch tracks the session it records (``branch.NAME.session``); changing what it
tracks is part of the operation that does it, so ``opal undo`` restores it.
"""

from __future__ import annotations

import os
from typing import Mapping

from opalgit import agents as adapters
from opalgit.agents.base import SessionFile
from opalgit.errors import InputError, SessionNotFoundError
from opalgit.history import oplog
from opalgit.history.states import _short, current_branch
from opalgit.store.repo import Repository
from opalgit.structs import dataclass


@dataclass
class Pick:
    """A session file chosen for a commit, with the adapter that reads it.

    ``instead_of`` is the session the branch tracks when its file is not among the
    folder's sessions and the newest one was picked in its place: whether a commit may
    record that one is the commit's rule (:func:`opalgit.porcelain.commit.commit`).
    """

    adapter: adapters.Adapter
    file: SessionFile
    note: str | None = None
    instead_of: tuple[str, str] | None = None


def search_dirs(repo: Repository, cwd: str) -> list[str]:
    """The folders whose sessions are this folder's: ``cwd``, then each one above it up
    to the repository's top (an agent started in a subfolder still works on the project)."""
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
    """Which session ``opal commit`` records: explicit, tracked, or the newest.

    Only picks: whether a commit may record the pick on the current branch is the
    commit's rule, read under the lock (:func:`opalgit.porcelain.commit.commit`)."""
    if file is not None:
        return _by_file(file, agent)
    chosen = [adapters.get(agent)] if agent else list(adapters.all_adapters().values())
    if session is not None:
        return _by_id(session, chosen, env)
    candidates: list[tuple[adapters.Adapter, SessionFile]] = []
    for directory in search_dirs(repo, cwd):
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
    tracked = tracked_session(repo, current_branch(repo))
    if tracked is not None:
        for ad, f in candidates:
            if (ad.name, f.id) == tracked:
                return Pick(ad, f)
    ad, f = candidates[0]
    note = None
    if len(candidates) > 1:
        note = (
            f"{len(candidates)} sessions found for this folder; recording the most recently "
            f"written, {f.id} ({ad.title}). Use --session ID to pick another."
        )
    return Pick(ad, f, note, instead_of=tracked)


def _by_file(file: str, agent: str | None) -> Pick:
    """The session file at ``file`` (``--file``), read by ``agent``'s adapter or the one
    that recognises it."""
    from opalgit import fileio, jsonl

    path = os.path.abspath(file)
    try:
        # A regular file only: a FIFO or a device would block or never end.
        with fileio.open_input(path, hint="give the path of the agent's session file") as fh:
            head = fh.read(64 * 1024)
    except FileNotFoundError:
        raise SessionNotFoundError(f"{file}: no such file", hint="give the path of a session file") from None
    ad = adapters.get(agent) if agent else adapters.detect(path, head)  # each adapter sniffs its own format
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


def _by_id(session: str, chosen: list[adapters.Adapter], env: Mapping[str, str]) -> Pick:
    """The session with id ``session`` (``--session``), wherever its agent keeps it."""
    for ad in chosen:
        found = ad.find_session(session, env)
        if found is not None:
            from opalgit import fileio

            with fileio.open_input(found.path, hint="give the path of the agent's session file") as fh:
                note = _subagent_note(ad, found.path, fh.read(64 * 1024), found.path)
            return Pick(ad, found, note)
    raise SessionNotFoundError(f"no session with id {session!r}", hint="see 'opal status' for the sessions of this folder")


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


def tracked_session(repo: Repository, branch: str) -> tuple[str, str] | None:
    """The session ``branch`` tracks, as ``(agent, id)``; None when it tracks none."""
    value = repo.config_get(f"branch.{branch}.session")
    if not value or ":" not in value:
        return None
    agent, _, sid = value.partition(":")
    return agent, sid


def tracking(repo: Repository, branch: str, session: tuple[str, str] | None) -> dict[str, tuple[str | None, str | None]]:
    """What making ``branch`` track ``session`` (``(agent, id)``; None: no session)
    changes, for the operation that does it to record (:attr:`oplog.Operation.sessions`):
    ``opal undo`` restores it."""
    return oplog.tracking_change(repo, branch, f"{session[0]}:{session[1]}" if session else None)


def record_export(repo: Repository, branch: str, agent: str, sid: str, state: bytes, rev: str) -> oplog.Operation:
    """Make ``branch`` track the session ``opal export`` just wrote, as an operation:
    ``opal undo`` gives the branch back the session it tracked before. The caller
    holds the lock."""
    desc = f"export {rev} ({_short(state)}) to {agent} session {sid}, tracked by {branch}"
    return oplog.apply(repo, oplog.new(repo, "export", desc, {}, sessions=tracking(repo, branch, (agent, sid))))

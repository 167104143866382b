"""``opal status``: the current branch in turns, the sessions of this folder, what is not
recorded yet, and the exact command that comes next. Porcelain layer, read-only.

New turns are counted, not guessed from bytes: a session that continues what the last
commit read has only its new lines read (as the next commit will read them); a session
not recorded yet is read whole while the sessions read so add up to :data:`COUNT_LIMIT`
(newest first), else its size is said. A merge that stopped on conflicts is listed with each conflict.
"""

from __future__ import annotations

from typing import Mapping

from opalgit import agents as adapters
from opalgit.agents.base import Adapter, SessionFile, begins_with
from opalgit.history.states import State, branch_head, current_branch, load_state
from opalgit.porcelain.sessions import search_dirs, tracked_session
from opalgit.store.argv import command
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field
from opalgit.times import iso_seconds

#: Session files not recorded yet are read whole to count their turns up to this many
#: bytes in all; the others are said in bytes (status stays quick: a folder may hold
#: many old sessions, and 'opal commit' reads the one it records anyway).
COUNT_LIMIT = 8 << 20


@dataclass
class SessionStatus:
    """A session file of this project and whether it has turns not committed yet."""

    agent: str
    id: str
    path: str
    mtime: float
    tracked: bool
    committed_bytes: int | None
    size: int
    pending: bool | None  # True: new content since the last commit; None: unknown
    title: str = ""  # the agent's name for people ("Claude Code")
    new_turns: int | None = None  # turns the next commit would add (None: not counted)
    new_records: int | None = None  # records (turns and the agent's bookkeeping) it would add
    recorded: bool = False  # the branch's head records this session

    def to_json(self) -> dict:
        return {
            "agent": self.agent,
            "id": self.id,
            "path": self.path,
            "modified": iso_seconds(self.mtime),
            "tracked": self.tracked,
            "size": self.size,
            "committed_bytes": self.committed_bytes,
            "uncommitted": self.pending,
            "uncommitted_turns": self.new_turns,
            "uncommitted_records": self.new_records,
        }


@dataclass
class StatusResult:
    """What ``opal status`` reports: the branch, its turns, the sessions found, a merge
    in progress, and the commands that come next (the first is the one to run)."""

    branch: str
    head: bytes | None
    turns: int
    sessions: list[SessionStatus]
    detached: str | None = None
    merge: dict | None = None  # {"merging", "choices", "conflicts": [ConflictView.to_json()]}
    next: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "branch": self.branch,
            "head": self.head.hex() if self.head else None,
            "turns": self.turns,
            "detached": self.detached,
            "sessions": [s.to_json() for s in self.sessions],
            "merge": self.merge,
            "next": self.next,
        }


def status(repo: Repository, env: Mapping[str, str], cwd: str) -> StatusResult:
    from opalgit.porcelain.merge import in_progress

    branch = current_branch(repo)
    head = branch_head(repo, branch)
    st = load_state(repo, head) if head else None
    tracked = tracked_session(repo, branch)
    found: list[tuple[Adapter, SessionFile]] = []
    for directory in search_dirs(repo, cwd):
        for ad in adapters.all_adapters().values():
            found.extend((ad, f) for f in ad.find_sessions(directory, env))
        if found:
            break
    found.sort(key=lambda af: af[1].mtime, reverse=True)
    sessions = [_session(ad, f, st, tracked) for ad, f in found]
    # Sessions not recorded yet are read whole, newest first, within one budget.
    budget = COUNT_LIMIT
    for (ad, f), s in zip(found, sessions):
        if not s.recorded and f.size <= budget:
            budget -= f.size
            s.new_turns = _all_turns(ad, f)
    pending = in_progress(repo)
    merge = None
    if pending:
        merge = {"merging": pending["name"], "choices": pending.get("choices") or {},
                 "conflicts": list(pending.get("conflicts") or [])}
    res = StatusResult(branch, head, st.header.turns if st else 0, sessions,
                       st.header.extra.get("detached") if st else None, merge)
    res.next = _next(res, st)
    return res


def _session(ad: Adapter, f: SessionFile, st: State | None, tracked: tuple[str, str] | None) -> SessionStatus:
    s = SessionStatus(ad.name, f.id, f.path, f.mtime, tracked == (ad.name, f.id), None, f.size, None,
                      title=ad.title or ad.name)
    session = st.header.session if st is not None else None
    src = st.header.source if st is not None else None
    if session is not None and src is not None and session.agent == ad.name and session.id == f.id:
        s.recorded = True
        s.committed_bytes = src.size
        s.pending = f.size > src.size
        s.new_records, s.new_turns = _new_records(ad, f, st) if s.pending else (0, 0)
    return s


def _new_records(ad: Adapter, f: SessionFile, st: State) -> tuple[int | None, int | None]:
    """The records and turns after the ones the head read, read as the next commit
    reads them; None when the file no longer begins with what was read (the next
    commit reads it whole)."""
    src = st.header.source
    assert src is not None
    try:
        if src.path != f.path or not begins_with(f.path, src.size, src.tail):
            return None, None
        result = ad.read(f.path, start=src.size, first_line=src.lines + 1, state=src.state)
        if not result.extends:
            return None, None
        return _count(result, None)
    except Exception:  # status never fails on a session the agent is writing: it says "not counted"
        return None, None


def _all_turns(ad: Adapter, f: SessionFile) -> int | None:
    try:
        result = ad.read(f.path)
        return _count(result, result.views[0].indices if result.views else None)[1]
    except Exception:
        return None


def _count(result, indices) -> tuple[int, int]:
    records = turns = 0
    for rec in result.iter_records(indices):
        records += 1
        turns += rec.normal.role != "meta"
    return records, turns


def _next(res: StatusResult, st: State | None) -> list[str]:
    """The commands that come next, the one to run first."""
    if res.merge is not None:
        open_ = [c["conflict"] for c in res.merge["conflicts"] if str(c["conflict"]) not in res.merge["choices"]]
        takes = [arg for i in open_ for arg in ("--take", f"{i}=ours")]
        return [command("opal", "merge", "--continue", *takes), command("opal", "merge", "--abort")]
    if res.detached and st is not None and st.header.session is not None:
        return [command("opal", "export", "--to", st.header.session.agent)]
    out = []
    pick = _what_commit_records(res)
    if pick is not None and (pick.new_records != 0 if pick.recorded else pick.new_turns != 0):
        out.append(command("opal", "commit"))
    for s in res.sessions:
        if s is not pick and not s.recorded and s.new_turns != 0:
            out.append(command("opal", "commit", "--session", s.id))
    return out


def _what_commit_records(res: StatusResult) -> SessionStatus | None:
    """The session a plain 'opal commit' records: the tracked one, else the newest."""
    for s in res.sessions:
        if s.tracked:
            return s
    return res.sessions[0] if res.sessions else None


def describe_sessions(res: StatusResult) -> list[str]:
    """One sentence per session, in turns, each naming the command that records it."""
    pick = _what_commit_records(res)
    out = []
    for s in res.sessions:
        name = f"the {s.title} session {s.id[:8]}"
        run = command("opal", "commit") if s is pick else command("opal", "commit", "--session", s.id)
        if s.recorded and s.pending is False:
            out.append(f"{name} is recorded up to its last turn")
        elif s.recorded and s.new_turns:
            out.append(f"{name} has {s.new_turns} new turn{'s' if s.new_turns != 1 else ''}: {run}")
        elif s.recorded and s.pending:
            if s.new_records:
                n = s.new_records
                out.append(f"{name} has no new turns, {n} new bookkeeping record{'s' if n != 1 else ''} of the agent: {run}")
            elif s.new_records == 0:
                out.append(f"{name} has a line the agent is still writing (nothing to commit yet)")
            else:
                out.append(f"{name} changed since the last commit ({_size(s.size - (s.committed_bytes or 0))} "
                           f"more, not only new lines): {run}")
        elif s.new_turns == 0:
            out.append(f"{name} has no turns yet")
        elif s.new_turns is None:
            out.append(f"{name} is not recorded on this branch ({_size(s.size)}): {run}")
        else:
            out.append(f"{name} has {_turns(s.new_turns)}, not recorded on this branch: {run}")
    return out


def _turns(n: int) -> str:
    return f"{n} turn{'s' if n != 1 else ''}"


def _size(n: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


__all__ = ["COUNT_LIMIT", "SessionStatus", "StatusResult", "describe_sessions", "status"]

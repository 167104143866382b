"""Pull: fetch, then fast-forward the current branch to the remote's state.

The fetch is the sync layer's (:mod:`opalgit.sync.fetch`); moving the local branch is
the porcelain's, by the rules ``opal merge`` fast-forwards by: never over diverged
histories, and, without ``force``, never to a state that leaves out turns of the
branch (:func:`opalgit.porcelain.merge.turns_left_out`). ``opal clone-state`` starts a
new branch with the same :func:`fast_forward`.
"""

from __future__ import annotations

from typing import Mapping

from opalgit.errors import ConflictError, RevisionError, UsageError
from opalgit.history import oplog
from opalgit.porcelain.commit import load_state
from opalgit.porcelain.merge import followed_session, turns_left_out  # the rules 'opal merge' fast-forwards by
from opalgit.store.argv import command as cmdline
from opalgit.store.refs import branch_ref, check_branch_name
from opalgit.store.repo import Repository
from opalgit.structs import dataclass
from opalgit.sync.fetch import FetchResult, fetch_remote
from opalgit.sync.remotes import get_remote, remote_branch_name, remote_branches, tracking_ref


@dataclass
class PullResult:
    fetch: FetchResult
    branch: str  # the local branch (the current one)
    remote_branch: str  # e.g. origin/main
    old: bytes | None
    new: bytes
    status: str  # "fast-forward", "created", "up-to-date", "ahead"
    left_out: int = 0  # turns of the branch the pull left out (only with force)
    session: str | None = None  # the session the branch tracks after the pull ("agent:id")
    retracked: bool = False  # the pull changed it

    def to_json(self) -> dict:
        return {
            "branch": self.branch,
            "from": self.remote_branch,
            "old": self.old.hex() if self.old else None,
            "new": self.new.hex(),
            "status": self.status,
            "turns_left_out": self.left_out,
            "session": self.session,
            "session_changed": self.retracked,
            "fetch": self.fetch.to_json(),
        }


@dataclass
class Moved:
    """What :func:`fast_forward` did to the local branch."""

    old: bytes | None
    new: bytes
    status: str  # "fast-forward", "created", "up-to-date", "ahead"
    left_out: int = 0
    session: str | None = None
    retracked: bool = False


def fast_forward(repo: Repository, local: str, remote: str, rb: str, *, command: str = "pull",
                 force: bool = False) -> Moved:
    """Move ``local`` to ``remote/rb`` if that is a fast-forward; never overwrites.

    A fast-forward by commits is one by turns too, or it needs ``force``: a state that
    descends from the branch's head may hold fewer of its turns (the teammate rewound
    or edited, then pushed). The branch then tracks the session the remote state was
    recorded from (:func:`merging.followed_session`), so the next ``opal commit`` does
    not record the session it tracked before over the pulled turns; the operation
    records both moves, and ``opal undo`` restores both.
    """
    source = f"{remote}/{rb}"
    with repo.lock():
        new = repo.refs.get(tracking_ref(remote, rb))
        if new is None:
            have = ", ".join(remote_branches(repo, remote)) or "none"
            raise RevisionError(
                f"{remote} has no state branch {rb} (it has: {have})",
                hint=f"see '{cmdline('opal', 'fetch', remote)}'; push one with '{cmdline('opal', 'push', remote)}'",
            )
        old = repo.refs.get(branch_ref(local))
        if old == new:
            return Moved(old, new, "up-to-date", session=oplog.tracked(repo, local))
        if old is not None and repo.is_ancestor(new, old):
            return Moved(old, new, "ahead", session=oplog.tracked(repo, local))
        if old is not None and not repo.is_ancestor(old, new):
            raise ConflictError(
                f"{local} ({old.hex()[:7]}) and {source} ({new.hex()[:7]}) have diverged; nothing was changed",
                hint=f"run '{cmdline('opal', 'merge', source)}' to combine them (or '{cmdline('opal', 'branch', 'NAME', source)}' to keep theirs apart)",
            )
        st = load_state(repo, new)
        lost = 0
        if old is not None:
            so = load_state(repo, old)
            lost = turns_left_out(repo, so, st)
            if lost and not force:
                raise _fewer_turns(local, source, so.header.turns, st.header.turns, lost, command, remote, rb)
        session = followed_session(repo, st)
        status = "created" if old is None else "fast-forward"
        desc = f"{command} {source} into {local}: " + (f"create at {new.hex()[:7]}" if old is None else f"fast-forward {old.hex()[:7]}..{new.hex()[:7]}")
        if lost:
            desc += f", leaving out {lost} turn{'s' if lost != 1 else ''}"
        sessions = oplog.tracking_change(repo, local, session)
        op = oplog.new(repo, command, desc, {branch_ref(local): (old, new)}, sessions=sessions)
        oplog.apply(repo, op)
        return Moved(old, new, status, lost, session, bool(sessions))


def _fewer_turns(local: str, source: str, have: int, theirs: int, lost: int, command: str, remote: str,
                 rb: str) -> UsageError:
    """A fast-forward by commits that leaves out turns of ``local``: said, with the
    ways on (``opal merge`` would refuse the same move, so it is not one of them)."""
    return UsageError(
        f"{'pulling' if command == 'pull' else command} {source} into {local} would leave out {lost} of {local}'s "
        f"{have} turn{'s' if have != 1 else ''} ({source} has {theirs}: it was rewound or edited there since "
        f"{local} had it); nothing was changed",
        hint=f"to take {source} anyway ('opal undo' takes it back), run "
             f"'{cmdline('opal', 'pull', '--force', remote, rb)}'; to keep your turns and look at theirs apart, "
             f"'{cmdline('opal', 'branch', 'NAME', source)}'",
    )


def pull(repo: Repository, env: Mapping[str, str], remote: str | None = None, branch: str | None = None, *,
         force: bool = False) -> PullResult:
    """Fetch, then fast-forward the current branch to ``remote/branch``.

    ``branch`` is the name on the remote (default: the current branch's, under your
    ``push.namespace``). Diverged histories are refused, never overwritten; a
    fast-forward that would leave out turns of the branch needs ``force``.
    """
    r = get_remote(repo, remote)
    fres = fetch_remote(repo, env, r)
    assert r.name is not None  # fetch_remote refuses a bare URL
    local = repo.refs.head_branch()
    rb = check_branch_name(branch) if branch else remote_branch_name(repo, local)
    m = fast_forward(repo, local, r.name, rb, force=force)
    return PullResult(fres, local, f"{r.name}/{rb}", m.old, m.new, m.status, m.left_out, m.session, m.retracked)

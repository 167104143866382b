"""Links between code commits and state commits: which agent state produced which code.

A link is a ref per code commit::

    refs/opal/links/<code commit sha>                 -> the state commit (yours)
    refs/opal/remote-links/<remote>/<code commit sha> -> the state commit (fetched from <remote>)

and, the other way, a ``Code-Commit: <sha>`` trailer in the message of a state commit
that the post-commit hook recorded.

Why refs rather than git notes: a note is a blob that merely *names* the state commit,
so ``git gc`` would delete states that only a note mentions; a ref keeps the state (and
its whole history) reachable by construction. A ref per code commit is also updated by
compare-and-swap inside ``refs/opal/`` like every other opal ref, so each link is in
the operation log and ``opal undo`` takes it back; and two people never write the same
ref (their code commits differ), where one shared notes ref would turn every concurrent
push into a notes merge. See docs/hooks.md.

Code commits are read through the repository's libgit2 handle (``repo.git``); nothing
here changes the user's branches, index or working tree.
"""

from __future__ import annotations

import heapq
import re
from typing import Iterable

from opalgit.errors import CorruptObjectError, NothingToDoError, RevisionError
from opalgit.history import oplog
from opalgit.store.refs import NAMESPACE
from opalgit.store.repo import Repository
from opalgit.structs import dataclass

LINK_PREFIX = NAMESPACE + "links/"
REMOTE_LINK_PREFIX = NAMESPACE + "remote-links/"
TRAILER = "Code-Commit"
#: How many ancestors ``opal at`` looks through for the nearest linked code commit.
MAX_WALK = 10_000

_HEX40 = re.compile(r"^[0-9a-f]{40}$")


def link_ref(code: bytes) -> str:
    return LINK_PREFIX + code.hex()


def remote_link_ref(remote: str, code: bytes) -> str:
    return f"{REMOTE_LINK_PREFIX}{remote}/{code.hex()}"


# ------------------------------------------------------------------ code commits


@dataclass(frozen=True)
class CodeCommit:
    oid: bytes
    subject: str
    time: int
    parents: tuple[bytes, ...]

    @property
    def short(self) -> str:
        return self.oid.hex()[:7]


def _code(repo: Repository, oid: bytes) -> CodeCommit:
    # Read as any object is (from git's files; libgit2 only where they cannot be).
    try:
        c = repo.store.read_commit(oid)
    except CorruptObjectError:  # missing, or another kind of object
        raise RevisionError(f"{oid.hex()[:12]} is not a commit of this repository") from None
    subject = c.message.split("\n", 1)[0].strip()
    return CodeCommit(oid, subject, c.committer.time, c.parents)


def code_commit(repo: Repository, rev: str) -> CodeCommit:
    """The code commit a git revision names (``HEAD~4``, ``v1.2``, a sha), peeled like git does."""
    if repo.own:
        raise RevisionError(
            "this opal store is not inside a git repository, so it has no code commits",
            hint="run 'opal init' inside your project's git repository",
        )
    try:
        obj = repo.git.revparse_single(rev + "^{commit}")
    except (KeyError, ValueError):
        raise RevisionError(
            f"unknown code revision {rev!r}",
            hint="give a git revision of this repository, e.g. HEAD~4, a tag or a commit id ('git log --oneline')",
        ) from None
    return _code(repo, obj.id.raw)


def head_commit(repo: Repository) -> CodeCommit | None:
    """The worktree's current code commit, or None on an unborn branch."""
    if repo.own:
        return None
    try:
        oid = repo.refs.code_head()  # from the files: a post-commit hook need not load libgit2
    except LookupError:
        if repo.git.head_is_unborn:
            return None
        oid = repo.git.head.target.raw
    return _code(repo, oid) if oid is not None else None


# ------------------------------------------------------------------ reading links


def local_links(repo: Repository) -> dict[bytes, bytes]:
    """Your links: code commit -> state commit."""
    out: dict[bytes, bytes] = {}
    for name, oid in repo.refs.all().items():
        if name.startswith(LINK_PREFIX):
            tail = name[len(LINK_PREFIX) :]
            if _HEX40.match(tail):
                out[bytes.fromhex(tail)] = oid
    return out


def all_links(repo: Repository) -> dict[bytes, tuple[bytes, str | None]]:
    """Every link, yours first: code commit -> (state commit, remote it came from or None)."""
    out: dict[bytes, tuple[bytes, str | None]] = {}
    remote: list[tuple[str, bytes]] = []
    for name, oid in repo.refs.all().items():
        if name.startswith(LINK_PREFIX):
            tail = name[len(LINK_PREFIX) :]
            if _HEX40.match(tail):
                out[bytes.fromhex(tail)] = (oid, None)
        elif name.startswith(REMOTE_LINK_PREFIX):
            remote.append((name, oid))
    for name, oid in sorted(remote):
        where, _, tail = name[len(REMOTE_LINK_PREFIX) :].rpartition("/")
        if _HEX40.match(tail):
            out.setdefault(bytes.fromhex(tail), (oid, where))
    return out


def get_link(repo: Repository, code: bytes) -> tuple[bytes, str | None] | None:
    state = repo.refs.get(link_ref(code))
    if state is not None:
        return state, None
    return all_links(repo).get(code)


@dataclass
class LinkAt:
    """What ``opal at`` found for a code revision."""

    asked: CodeCommit  # the code commit the revision named
    code: CodeCommit  # the code commit whose link was used (asked, or an ancestor)
    state: bytes
    distance: int  # 0: asked itself has a link; else generations back to ``code``
    remote: str | None  # None: your own link; else the remote it was fetched from

    def to_json(self) -> dict:
        return {
            "code_commit": self.asked.oid.hex(),
            "linked_code_commit": self.code.oid.hex(),
            "distance": self.distance,
            "state": self.state.hex(),
            "remote": self.remote,
        }


def link_at(repo: Repository, rev: str = "HEAD", *, max_walk: int = MAX_WALK) -> LinkAt:
    """The state linked to ``rev``, or to its nearest linked ancestor (newest first, like git log)."""
    asked = code_commit(repo, rev)
    links = all_links(repo)
    if not links:
        raise RevisionError(
            "no code commit has a linked agent state yet",
            hint="run 'opal hooks install' so that each 'git commit' records one, or 'opal fetch' a teammate's",
        )
    heap: list[tuple[int, bytes, int]] = [(-asked.time, asked.oid, 0)]
    seen = {asked.oid}
    walked = 0
    while heap and walked < max_walk:
        _, oid, dist = heapq.heappop(heap)
        walked += 1
        found = links.get(oid)
        commit = asked if oid == asked.oid else _code(repo, oid)
        if found is not None:
            return LinkAt(asked, commit, found[0], dist, found[1])
        for parent in commit.parents:
            if parent not in seen:
                seen.add(parent)
                try:
                    pc = _code(repo, parent)
                except RevisionError:  # a shallow clone's boundary
                    continue
                heapq.heappush(heap, (-pc.time, parent, dist + 1))
    raise RevisionError(
        f"no agent state is linked to code commit {asked.short} or any of its ancestors",
        hint="states are linked by the post-commit hook ('opal hooks install'); see also 'opal fetch'",
    )


def state_at(repo: Repository, code_rev: str) -> bytes:
    """The state commit linked to code revision ``code_rev`` (or its nearest linked ancestor)."""
    return link_at(repo, code_rev).state


def codes_of_state(repo: Repository, state: bytes) -> list[bytes]:
    """The code commits linked to ``state`` (the other direction of a link)."""
    return sorted(code for code, (oid, _) in all_links(repo).items() if oid == state)


def trailer_code(message: str) -> bytes | None:
    """The ``Code-Commit:`` trailer of a state commit message, if any."""
    for line in reversed(message.rstrip("\n").splitlines()):
        key, sep, value = line.partition(":")
        if sep and key.strip() == TRAILER and _HEX40.match(value.strip()):
            return bytes.fromhex(value.strip())
    return None


def state_message(code: CodeCommit) -> str:
    """The message of a state commit recorded by the post-commit hook."""
    return f"code commit {code.short}: {code.subject}\n\n{TRAILER}: {code.oid.hex()}\n"


# ------------------------------------------------------------------ writing links


def set_links(
    repo: Repository,
    pairs: Iterable[tuple[bytes, bytes]],
    *,
    command: str,
    description: str,
    overwrite: bool = False,
) -> dict[bytes, bytes]:
    """Link each code commit to a state commit, in one operation; returns the links written.

    A code commit that already has a (different) link keeps it unless ``overwrite``.
    Raises :class:`NothingToDoError` when there is nothing to change.
    """
    with repo.lock():
        changes: dict[str, tuple[bytes | None, bytes | None]] = {}
        written: dict[bytes, bytes] = {}
        for code, state in pairs:
            if repo.store.object_type(state) is None:
                raise RevisionError(f"state {state.hex()[:12]} is not in this repository")
            name = link_ref(code)
            old = repo.refs.get(name)
            if old == state or (old is not None and not overwrite) or name in changes:
                continue
            changes[name] = (old, state)
            written[code] = state
        if not changes:
            raise NothingToDoError("the links are already there")
        op = oplog.new(repo, command, description, changes)
        oplog.apply(repo, op)
        return written


def rewrite_links(repo: Repository, kind: str, rewrites: Iterable[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """After ``git commit --amend`` or ``git rebase``: the link of each old commit follows it to the new one.

    As with git's own notes rewriting, the old commit keeps its link (it may still be
    reachable, e.g. from a remote branch), and a new commit that already has a link
    of its own (the amend's post-commit recorded a newer state) keeps it.
    """
    links = local_links(repo)
    pairs: list[tuple[bytes, bytes]] = []
    for old, new in rewrites:
        state = links.get(old)
        if state is not None and new not in links:
            pairs.append((new, state))
    if not pairs:
        raise NothingToDoError("no linked code commit was rewritten")
    n = len(pairs)
    desc = f"move {n} link{'s' if n != 1 else ''} to rewritten code commits ({kind})"
    return set_links(repo, pairs, command="link", description=desc)

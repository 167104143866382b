"""``opal branch``: list, create, delete and rename branches, as git has them, with
``-r``/``-a`` (remote-tracking branches) and ``opal switch -`` (the previous branch).

A branch created at a turn (``opal branch NAME REV:N``) gets a state of its own that
holds that state's first records (:func:`opalgit.porcelain.rewind.cut_state`).

A rename moves everything that says what the branch is: its head, its
``branch.NAME.*`` config (the session it tracks, and whatever else is kept per
branch) and, when it is the current branch, HEAD. It is one operation in the op log,
config included, so ``opal undo`` takes all of it back.

The previous branch is read from the op log, as git reads ``@{-1}`` from HEAD's
reflog: the newest operation that moved HEAD onto the current branch came from it.
"""

from __future__ import annotations

from opalgit.errors import RevisionError, UsageError
from opalgit.history import oplog
from opalgit.history.states import branch_head, current_branch, load_state, resolve, turn_item_index
from opalgit.porcelain.rewind import cut_state
from opalgit.porcelain.sessions import tracking
from opalgit.store.refs import REMOTE_PREFIX, branch_ref, check_branch_name
from opalgit.store.repo import Repository
from opalgit.structs import dataclass


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



def branch_labels(repo: Repository) -> dict[bytes, list[str]]:
    """The branches at each state commit (what ``opal log`` decorates a commit with)."""
    labels: dict[bytes, list[str]] = {}
    for name, oid in sorted(repo.refs.branches().items()):
        labels.setdefault(oid, []).append(name)
    return labels



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
            oid = cut_state(
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
                       sessions=tracking(repo, name, None))
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
                       sessions=tracking(repo, name, None))
        oplog.apply(repo, op)
        return oid



def _branch_config(repo: Repository, name: str) -> dict[str, str]:
    """``branch.NAME.*`` of opal's config, by variable (``{"session": "claude:..."}``)."""
    prefix = f"branch.{name}."
    out: dict[str, str] = {}
    for entry in repo.config:
        rest = entry.name[len(prefix):] if entry.name.startswith(prefix) else ""
        # "branch.v1.2.session" is branch v1.2's, not v1's: a variable has no dot.
        if rest and "." not in rest:
            out[rest] = entry.value
    return out


def branch_rename(repo: Repository, old: str, new: str, *, force: bool = False) -> bytes:
    """Rename branch ``old`` to ``new`` (``opal branch -m``; ``-M`` is ``force``, which
    replaces an existing ``new``). Returns the branch's head."""
    check_branch_name(new)
    with repo.lock():
        oid = branch_head(repo, old)
        if oid is None:
            raise RevisionError(f"no branch {old}", hint="see 'opal branch -l'")
        if old == new:
            return oid
        existing = branch_head(repo, new)
        cur = current_branch(repo)
        if existing is not None and not force:
            raise UsageError(f"branch {new} already exists", hint=f"pick another name, or 'opal branch -M {old} {new}' to replace it")
        if existing is not None and new == cur:
            raise UsageError(f"cannot replace {new}: it is the current branch", hint="'opal switch' to another branch first")
        before_old, before_new = _branch_config(repo, old), _branch_config(repo, new)
        config = [[f"branch.{old}.{k}", v, None] for k, v in sorted(before_old.items())]
        config += [[f"branch.{new}.{k}", before_new.get(k), v] for k, v in sorted(before_old.items()) if before_new.get(k) != v]
        config += [[f"branch.{new}.{k}", v, None] for k, v in sorted(before_new.items()) if k not in before_old]
        changes = {branch_ref(old): (oid, None), branch_ref(new): (existing, oid)}
        op = oplog.new(repo, "branch", f"rename branch {old} to {new}", changes,
                       head_after=new if cur == old else cur, **({oplog.CONFIG: config} if config else {}))
        oplog.apply(repo, op)
        return oid


@dataclass
class RemoteBranch:
    """A remote-tracking state branch, ``origin/main``, as ``opal branch -r`` lists it."""

    name: str
    oid: bytes
    turns: int
    message: str

    def to_json(self) -> dict:
        return {"name": self.name, "id": self.oid.hex(), "remote": True, "turns": self.turns,
                "message": self.message.splitlines()[0] if self.message else ""}


def remote_branches(repo: Repository) -> list[RemoteBranch]:
    out = []
    for ref, oid in sorted(repo.refs.all().items()):
        if ref.startswith(REMOTE_PREFIX):
            st = load_state(repo, oid)
            out.append(RemoteBranch(ref[len(REMOTE_PREFIX):], oid, st.header.turns, st.commit.message))
    return out


def previous_branch(repo: Repository) -> str:
    """The branch HEAD was on before it came to the current one (git's ``@{-1}``)."""
    cur = current_branch(repo)
    for op in oplog.log(repo):
        before, after = op.head
        if before != after and after == cur:
            if branch_head(repo, before) is None:
                raise RevisionError(f"the previous branch, {before}, no longer exists",
                                    hint="'opal branch -l' lists the branches; 'opal undo' may bring it back")
            return before
        if before != after:
            break  # HEAD came to the current branch without an operation (a fresh init)
    raise RevisionError("no previous branch", hint="'opal switch NAME' first; 'opal switch -' then goes back")

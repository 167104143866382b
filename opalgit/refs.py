"""opal's refs: all under the private ``refs/opal/`` namespace, changed by compare-and-swap.

Layout::

    refs/opal/heads/<branch>    state branches (shared by every worktree of the repository)
    refs/opal/oplog             the operation log (see :mod:`oplog`)
    refs/opal/remotes/<r>/<b>   remote-tracking state branches (see :mod:`remote`)
    refs/opal/links/<sha>       the state recorded with a code commit (see :mod:`links`)
    <git-dir>/opal/HEAD         the current branch of this worktree (a file, not a ref)

The user's ``refs/heads/*``, ``HEAD``, index and working tree are never touched.
Every change goes through :meth:`RefStore.update`, which locks the refs it changes,
checks that each still holds the value the caller read, and writes them together
(libgit2 reference transaction), so two writers can never lose each other's work.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Mapping

from .errors import ConflictError, RevisionError, UsageError

if TYPE_CHECKING:
    import pygit2

# pygit2 is imported by the functions that use it, so that importing opal (which
# imports this module through repo.py) does not load it: see 'opal --version'.

NAMESPACE = "refs/opal/"
BRANCH_PREFIX = "refs/opal/heads/"
OPLOG_REF = "refs/opal/oplog"
REMOTE_PREFIX = "refs/opal/remotes/"

# (old, new): old is what the caller read (None: must not exist), new None deletes.
Change = tuple[bytes | None, bytes | None]


def branch_ref(name: str) -> str:
    return BRANCH_PREFIX + name


def check_branch_name(name: str) -> str:
    """Refuse names git would refuse, and names that read as revisions."""
    import pygit2

    bad = (
        not name
        or name.startswith(("-", "/", "."))
        or name.endswith(("/", ".", ".lock"))
        or any(c in name for c in " ~^:?*[\\\x7f")
        or any(ord(c) < 32 for c in name)
        or ".." in name
        or "@{" in name
        or "//" in name
        or name in ("HEAD", "@")
        or not pygit2.reference_is_valid_name(branch_ref(name))
    )
    if bad:
        raise UsageError(
            f"{name!r} is not a valid branch name",
            hint="use letters, digits, '-', '_', '.' and '/' (no spaces, '~', '^', ':' or '..')",
        )
    return name


class RefStore:
    """Reads and compare-and-swap writes of ``refs/opal/*``."""

    def __init__(self, repo: pygit2.Repository, git_dir: str) -> None:
        self.repo = repo
        self.head_file = os.path.join(git_dir, "opal", "HEAD")

    # -- reading ------------------------------------------------------------------

    def get(self, name: str) -> bytes | None:
        import pygit2

        try:
            ref = self.repo.references.get(name)
        except (pygit2.GitError, ValueError):
            return None
        if ref is None:
            return None
        target = ref.resolve().target
        return target.raw if isinstance(target, pygit2.Oid) else None

    def all(self) -> dict[str, bytes]:
        """Every ref under ``refs/opal/`` with its target."""
        out: dict[str, bytes] = {}
        for name in self.repo.references:
            if name.startswith(NAMESPACE):
                oid = self.get(name)
                if oid is not None:
                    out[name] = oid
        return out

    def branches(self) -> dict[str, bytes]:
        return {n[len(BRANCH_PREFIX) :]: oid for n, oid in self.all().items() if n.startswith(BRANCH_PREFIX)}

    # -- HEAD (per worktree) -------------------------------------------------------

    def head_branch(self) -> str:
        try:
            with open(self.head_file, encoding="utf-8") as fh:
                text = fh.read().strip()
        except FileNotFoundError:
            return "main"
        if text.startswith("ref: " + BRANCH_PREFIX):
            return text[len("ref: " + BRANCH_PREFIX) :]
        raise RevisionError(f"{self.head_file} is malformed", hint="write 'ref: refs/opal/heads/main' into it")

    def set_head_branch(self, name: str) -> None:
        from .fileio import replace_atomically

        replace_atomically(self.head_file, f"ref: {branch_ref(name)}\n".encode("utf-8"))

    # -- writing ------------------------------------------------------------------

    def update(self, changes: Mapping[str, Change], message: str) -> None:
        """Apply every change or none; raise :class:`ConflictError` if a ref moved."""
        import pygit2

        names = sorted(changes)
        for name in names:
            if not name.startswith(NAMESPACE):
                raise UsageError(f"opal only writes refs under {NAMESPACE}, not {name}")
        try:
            with self.repo.transaction() as txn:
                for name in names:
                    txn.lock_ref(name)
                for name in names:
                    old, new = changes[name]
                    current = self.get(name)
                    if current != old:
                        raise ConflictError(
                            f"{_short_ref(name)} changed while this command ran",
                            hint="another opal process updated it; run the command again",
                        )
                for name in names:
                    old, new = changes[name]
                    if new is None:
                        if old is not None:
                            txn.remove(name)
                    else:
                        txn.set_target(name, pygit2.Oid(raw=new), message=message)
        except pygit2.GitError as exc:
            # A held lock (another writer mid-update) surfaces here.
            raise ConflictError(
                f"could not update {', '.join(_short_ref(n) for n in names)}: {exc}",
                hint="another opal or git process holds the ref lock; run the command again",
            ) from None


def _short_ref(name: str) -> str:
    if name.startswith(BRANCH_PREFIX):
        return "branch " + name[len(BRANCH_PREFIX) :]
    return name


def changed(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> Iterable[tuple[str, bytes | None, bytes | None]]:
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            yield name, before.get(name), after.get(name)

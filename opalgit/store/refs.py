"""opal's refs: all under the private ``refs/opal/`` namespace, changed by compare-and-swap.

Layout::

    refs/opal/heads/<branch>    state branches (shared by every worktree of the repository)
    refs/opal/oplog             the operation log (see :mod:`oplog`)
    refs/opal/remotes/<r>/<b>   remote-tracking state branches (see :mod:`opalgit.sync.remotes`)
    refs/opal/links/<sha>       the state recorded with a code commit (see :mod:`links`)
    <git-dir>/opal/HEAD         the current branch of this worktree (a file, not a ref)

The user's ``refs/heads/*``, ``HEAD``, index and working tree are never touched.
Every change goes through :meth:`RefStore.update`, which locks the refs it changes,
checks that each still holds the value the caller read, and writes them together
(one ``git update-ref --stdin`` transaction, or libgit2's where git is missing or
the repository keeps refs in a way read here only through libgit2), so two writers
can never lose each other's work.
"""

from __future__ import annotations

import errno
import os
import re
import time
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from opalgit.errors import ConflictError, RevisionError, UsageError

if TYPE_CHECKING:
    import pygit2

# pygit2 is imported by the functions that use it, so that importing opal (which
# imports this module through repo.py) does not load it: see 'opal --version'.

NAMESPACE = "refs/opal/"
BRANCH_PREFIX = "refs/opal/heads/"
OPLOG_REF = "refs/opal/oplog"
REMOTE_PREFIX = "refs/opal/remotes/"

class MissingObject(ConflictError):
    """git refused a ref update: the object it would name is not in the repository."""


class _LeaveToLibgit2(Exception):
    """A ref file this module does not read itself (libgit2 will)."""


def _loose_target(data: bytes) -> bytes:
    text = data.strip()
    if len(text) != 40:
        raise _LeaveToLibgit2  # a symbolic ref, or something libgit2 should judge
    try:
        return bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise _LeaveToLibgit2 from None


# (old, new): old is what the caller read (None: must not exist), new None deletes.
Change = tuple[bytes | None, bytes | None]


def branch_ref(name: str) -> str:
    return BRANCH_PREFIX + name


def valid_ref_name(name: str) -> bool:
    """Whether git accepts ``name`` (a full ref name) as the name of a ref."""
    import pygit2

    return pygit2.reference_is_valid_name(name)


def check_branch_name(name: str) -> str:
    """Refuse names git would refuse, names that read as revisions, and names that
    hold a secret."""

    from opalgit.secrets.redact import scan_text

    # A ref name is pushed and cloned as it is: it cannot be redacted, only refused
    # (first, so that no message below repeats the secret).
    hits = scan_text(name)
    if hits:
        raise UsageError(
            f"that branch name holds a secret ({hits[0].kind})",
            hint="pick a branch name without the credential in it",
        )

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
        or not valid_ref_name(branch_ref(name))
    )
    if bad:
        raise UsageError(
            f"{name!r} is not a valid branch name",
            hint="use letters, digits, '-', '_', '.' and '/' (no spaces, '~', '^', ':' or '..')",
        )
    return name


class RefStore:
    """Reads and compare-and-swap writes of ``refs/opal/*``.

    Reads go to the ref files themselves (loose refs, then ``packed-refs``) when the
    repository keeps them that way, so read commands need no libgit2; anything else
    (a symbolic ref, a reftable repository, a file it cannot parse) is read through
    libgit2. Writes always go through libgit2's reference transactions.
    """

    def __init__(
        self, git: "pygit2.Repository | Callable[[], pygit2.Repository]", git_dir: str, common_dir: str | None = None
    ) -> None:
        self._git = git  # a pygit2 repository, or a function that opens one
        self.git_dir = git_dir
        self.head_file = os.path.join(git_dir, "opal", "HEAD")
        # Refs under refs/opal/ are shared by all worktrees: they live in the common dir.
        self.common_dir = common_dir
        self._files = common_dir is not None and not os.path.exists(os.path.join(common_dir, "reftable"))
        # The repository lock's descriptor while this process holds it (set by
        # Repository.lock): git's ref transaction inherits it.
        self.lock_fd: int | None = None

    @property
    def repo(self) -> "pygit2.Repository":
        if callable(self._git):
            self._git = self._git()
        return self._git

    # -- reading ------------------------------------------------------------------

    def get(self, name: str) -> bytes | None:
        if self._files:
            try:
                return self._file_get(name)
            except _LeaveToLibgit2:
                pass
        return self._libgit2_get(name)

    def _libgit2_get(self, name: str) -> bytes | None:
        import pygit2

        try:
            ref = self.repo.references.get(name)
        except (pygit2.GitError, ValueError):
            return None
        if ref is None:
            return None
        target = ref.resolve().target
        return target.raw if isinstance(target, pygit2.Oid) else None

    def _file_get(self, name: str) -> bytes | None:
        assert self.common_dir is not None
        try:
            with open(os.path.join(self.common_dir, *name.split("/")), "rb") as fh:
                return _loose_target(fh.read(256))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return self._packed().get(name)

    def _packed(self) -> dict[str, bytes]:
        """``packed-refs``, as git writes it: a header, ``<id> <name>`` lines, ``^<id>`` peel lines."""
        assert self.common_dir is not None
        try:
            with open(os.path.join(self.common_dir, "packed-refs"), "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return {}
        out: dict[str, bytes] = {}
        for line in data.splitlines():
            if not line or line.startswith((b"#", b"^")):
                continue
            oid, sep, ref = line.partition(b" ")
            if not sep or len(oid) != 40:
                raise _LeaveToLibgit2
            try:
                out[ref.decode("utf-8")] = bytes.fromhex(oid.decode("ascii"))
            except (UnicodeDecodeError, ValueError):
                raise _LeaveToLibgit2 from None
        return out

    def all(self) -> dict[str, bytes]:
        """Every ref under ``refs/opal/`` with its target."""
        if self._files:
            try:
                return self._file_all()
            except _LeaveToLibgit2:
                pass
        out: dict[str, bytes] = {}
        for name in self.repo.references:
            if name.startswith(NAMESPACE):
                oid = self._libgit2_get(name)
                if oid is not None:
                    out[name] = oid
        return out

    def _file_all(self) -> dict[str, bytes]:
        assert self.common_dir is not None
        out = {name: oid for name, oid in self._packed().items() if name.startswith(NAMESPACE)}
        top = os.path.join(self.common_dir, *NAMESPACE.rstrip("/").split("/"))
        for folder, _dirs, files in os.walk(top):
            rel = os.path.relpath(folder, self.common_dir).replace(os.sep, "/")
            for f in files:
                if f.endswith(".lock"):  # a writer's lock, not a ref
                    continue
                try:
                    with open(os.path.join(folder, f), "rb") as fh:
                        target = _loose_target(fh.read(256))
                except FileNotFoundError:  # deleted while we looked
                    continue
                out[f"{rel}/{f}"] = target
        return dict(sorted(out.items()))

    def code_head(self) -> bytes | None:
        """The commit the worktree's git ``HEAD`` names (None: an unborn branch), read
        from the files; raises :class:`LookupError` where libgit2 should answer."""
        if not self._files:
            raise LookupError("refs are read through libgit2 here")
        try:
            with open(os.path.join(self.git_dir, "HEAD"), "rb") as fh:
                text = fh.read(512).strip()
            if not text.startswith(b"ref: "):
                return _loose_target(text)  # a detached HEAD
            name = text[5:].decode("utf-8")
            if not name.startswith("refs/heads/"):
                raise LookupError(f"HEAD points at {name}")
            return self._file_get(name)
        except (OSError, UnicodeDecodeError, _LeaveToLibgit2):
            raise LookupError("HEAD is not a plain file or ref") from None

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
        from opalgit.fileio import replace_atomically

        replace_atomically(self.head_file, f"ref: {branch_ref(name)}\n".encode("utf-8"))

    # -- writing ------------------------------------------------------------------

    def update(
        self, changes: Mapping[str, Change], message: str, *, meanwhile: Callable[[], None] | None = None
    ) -> None:
        """Apply every change or none; raise :class:`ConflictError` if a ref moved.

        ``meanwhile`` is called once, while git writes the refs (work that does not
        depend on the outcome, such as a cache keyed by object id; through libgit2,
        after). An error it raises comes through once the update has finished."""
        names = sorted(changes)
        for name in names:
            if not name.startswith(NAMESPACE):
                raise UsageError(f"opal only writes refs under {NAMESPACE}, not {name}")
        if self._files:
            from opalgit.store import gitcmd

            try:
                return self._git_update(names, changes, message, meanwhile)
            except gitcmd.GitMissing:
                pass
        try:
            self._libgit2_update(names, changes, message)
        finally:
            if meanwhile is not None:
                meanwhile()

    def _git_update(
        self, names: list[str], changes: Mapping[str, Change], message: str, meanwhile: Callable[[], None] | None
    ) -> None:
        """One ``git update-ref --stdin`` transaction: git locks every ref, checks each
        old value and writes all or none, as libgit2's transactions do (and ~70 ms
        sooner, with no libgit2 to load)."""
        # An explicit transaction: git applies nothing unless it reads "commit", so a
        # writer killed while its lines were on their way changes no ref (without
        # "start", git commits whatever lines reached it before the end of its input).
        lines = ["start"]
        for name in names:
            old, new = changes[name]
            if new is None:
                if old is not None:
                    lines.append(f"delete {name} {old.hex()}")
            elif old is None:
                lines.append(f"create {name} {new.hex()}")
            else:
                lines.append(f"update {name} {new.hex()} {old.hex()}")
        if len(lines) == 1:
            if meanwhile is not None:
                meanwhile()
            return
        lines += ["prepare", "commit"]
        proc = self._run_update_ref(message, lines, meanwhile)
        if proc.returncode and "unknown command: start" in proc.stderr:  # git before 2.27
            proc = self._run_update_ref(message, lines[1:-2], None)
        if proc.returncode == 0:
            return
        raise _update_error(proc.stderr, names)

    def _run_update_ref(self, message: str, lines: list[str], meanwhile: Callable[[], None] | None):
        from opalgit.store import gitcmd

        # git inherits the repository lock (when this process holds it) and runs in a
        # session of its own: should opal be killed meanwhile, git still finishes the
        # transaction it began, and no other opal starts before it has (it would read
        # the refs as they were, and its own update would then fail).
        pending = gitcmd.start(
            self.git_dir,
            ["update-ref", "-m", message.replace("\n", " "), "--stdin"],
            input="\n".join(lines) + "\n",
            pass_fds=(self.lock_fd,) if self.lock_fd is not None else (),
            detach=True,
        )
        try:
            if meanwhile is not None:
                meanwhile()
        finally:
            proc = pending.result()
        return proc

    def _libgit2_update(self, names: list[str], changes: Mapping[str, Change], message: str) -> None:
        import pygit2

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
                    # git refuses a ref to an object it does not have; libgit2's
                    # transaction would write it (and 'git fsck' then reports it).
                    if new is not None and not self.repo.odb.exists(pygit2.Oid(raw=new)):
                        raise _update_error(
                            f"trying to write ref '{name}' with nonexistent object {new.hex()}", names
                        )
                for name in names:
                    old, new = changes[name]
                    if new is None:
                        if old is not None:
                            txn.remove(name)
                    else:
                        txn.set_target(name, pygit2.Oid(raw=new), message=message)
        except pygit2.GitError as exc:
            # A held lock (another writer mid-update), or a disk that is full.
            raise _update_error(str(exc), names) from None


def _update_error(stderr: str, names: list[str]) -> Exception:
    """What a failed ref transaction means, from git's (or libgit2's) message: a name
    that clashes, a ref another writer moved, a lock file someone holds (or a killed
    git left), or a disk that is full: each said as what it is, with the path."""
    err = " ".join(ln.strip() for ln in stderr.splitlines() if ln.strip())
    err = err.removeprefix("fatal: ").removeprefix("error: ")
    clash = re.search(r"'(refs/[^']+)' exists; cannot create '(refs/[^']+)'", err)
    # libgit2's words for the same: a ref below the new one, or one above it.
    below = re.search(r"cannot lock ref '(refs/[^']+)', there are refs beneath that folder", err)
    above = re.search(r"could not remove directory '[^']*?/(refs/[^']+)': parent is not directory", err)
    if clash is not None or below is not None or above is not None or "blocking reference" in err:
        # git keeps refs as files: "x" and "x/y" cannot both exist.
        if clash is not None:
            there, wanted = clash.groups()
        elif above is not None:
            there, wanted = "a ref above it", above.group(1)
        else:
            there, wanted = "a ref below it", below.group(1) if below is not None else names[0]
        return UsageError(
            f"{_short_ref(wanted)} cannot exist beside {_short_ref(there)}",
            hint="git stores a ref as a file, so 'x' and 'x/y' cannot both exist; choose another name",
        )
    if "but expected" in err or "already exists" in err or "unable to resolve reference" in err:
        bad = next((n for n in names if f"'{n}'" in err), names[0])
        return ConflictError(
            f"{_short_ref(bad)} changed while this command ran",
            hint="another opal process updated it; run the command again",
        )
    missing = re.search(r"trying to write ref '([^']+)' with nonexistent object ([0-9a-f]+)", err)
    if missing is not None:
        return MissingObject(
            f"{_short_ref(missing.group(1))} would name object {missing.group(2)[:12]}, which is not in the repository",
            hint="nothing was changed; a 'git gc --prune=now' running meanwhile deleted it: run the command again",
        )
    held = re.search(r"'([^']+\.lock)'[^']*: File exists", err)
    failed = re.search(
        r"(?:Unable to create|failed to (?:lock|write) file|couldn't write) '([^']+)'(?: for writing)?(?::? ?(.*))?",
        err,
        re.IGNORECASE,
    )
    bare = failed is not None and not (failed.group(2) or "").strip()
    if held is None and failed is not None and failed.group(1).endswith(".lock") and bare:
        # libgit2 says only "failed to lock file '...lock' for writing": held if it is there.
        held = failed if os.path.exists(failed.group(1)) else None
    if held is not None:
        path = held.group(1)
        try:
            age = f", {max(0, int(time.time() - os.stat(path).st_mtime))} s old"
        except OSError:
            age = ""
        return ConflictError(
            f"{path} exists{age}: another git process is updating that ref, or one that was killed left it",
            hint=f"nothing was changed; if no git or opal command is running in this repository, delete {path} "
            "and run the command again",
        )
    if failed is not None:
        path, why = failed.group(1), (failed.group(2) or "").strip().rstrip(".")
        return _os_error(path, why)
    return ConflictError(
        f"could not update {', '.join(_short_ref(n) for n in names)}: {err or 'git update-ref failed'}",
        hint="nothing was changed; run the command again",
    )


#: What git says when it cannot create a file, and the errno it stands for.
_REASONS = {
    "no space left on device": errno.ENOSPC,
    "disk quota exceeded": errno.EDQUOT,
    "permission denied": errno.EACCES,
    "read-only file system": errno.EROFS,
    "too many open files": errno.EMFILE,
}


def _os_error(path: str, why: str) -> OSError:
    """The OS error behind git's failure to write ``path``, as the CLI reports any
    (one line naming the file). git's "couldn't write" gives no reason: a file
    system with no room left is the usual one, and the one checked here."""
    code = next((c for text, c in _REASONS.items() if text in why.lower()), None)
    if code is None:
        try:
            st = os.statvfs(os.path.dirname(path) or ".")
            if st.f_bavail * st.f_frsize < 64 * 1024 or (st.f_files and st.f_favail == 0):
                code = errno.ENOSPC
        except OSError:
            pass
    if code is not None:
        return OSError(code, os.strerror(code), path)
    return OSError(errno.EIO, why or "git could not write it", path)


def _short_ref(name: str) -> str:
    if name.startswith(BRANCH_PREFIX):
        return "branch " + name[len(BRANCH_PREFIX) :]
    return name


def changed(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> Iterable[tuple[str, bytes | None, bytes | None]]:
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            yield name, before.get(name), after.get(name)

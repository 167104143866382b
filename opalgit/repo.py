"""Repository = object store + refs + config + lock, for one git repository.

opal lives inside the project's own git repository: objects in its object database,
refs under ``refs/opal/``, and its own files under ``<git-common-dir>/opal/``
(``config``, ``lock``) plus ``<git-dir>/opal/HEAD`` per worktree, so linked worktrees
share branches but each has its own current branch. Outside any git repository,
``opal init`` creates a bare repository of opal's own in ``.opal/``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from typing import TYPE_CHECKING, Iterator

from .errors import ConflictError, NotARepositoryError, OpalError
from .refs import RefStore

if TYPE_CHECKING:
    import pygit2

    from .store import Signature

# pygit2 (and the object store over it) is imported where a repository is first
# opened, not here: ``import opalgit`` and ``opal --version`` do not need it.

OWN_STORE = ".opal"
FORMAT = 1
# git's answer to who commits: every config file and include git reads, last one wins.
_IDENTITY_ARGS = ["config", "-z", "--get-regexp", r"^user\.(name|email)$"]


def _find(start: str) -> tuple[str, str] | None:
    """Nearest enclosing store: ("own", path-of-.opal) or ("git", git-dir)."""
    path = os.path.abspath(start)
    while True:
        own = os.path.join(path, OWN_STORE)
        if os.path.isfile(os.path.join(own, "HEAD")):
            return "own", own
        dot_git = os.path.join(path, ".git")
        if os.path.exists(dot_git):
            found = _plain_git_dir(dot_git)
            if found is None:
                import pygit2

                found = pygit2.discover_repository(path)
            if found:
                return "git", found
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _plain_git_dir(dot_git: str) -> str | None:
    """The git directory that ``dot_git`` (a ``.git`` folder, or a ``gitdir:`` file as in
    linked worktrees) stands for, when that is plain to see; None leaves the question
    to libgit2, which knows every rule."""
    if os.path.isdir(dot_git):
        git_dir = dot_git
    else:
        try:
            with open(dot_git, encoding="utf-8") as fh:
                text = fh.read(4096)
        except (OSError, UnicodeDecodeError):
            return None
        if not text.startswith("gitdir: ") or "\n" in text.strip():
            return None
        git_dir = os.path.join(os.path.dirname(dot_git), text[len("gitdir: ") :].strip())
    git_dir = os.path.normpath(git_dir)
    if not (os.path.isfile(os.path.join(git_dir, "HEAD")) and os.path.isdir(_common_dir(git_dir))):
        return None
    return git_dir + os.sep


def _common_dir(git_dir: str) -> str:
    common = os.path.join(git_dir, "commondir")
    if os.path.isfile(common):
        with open(common, encoding="utf-8") as fh:
            rel = fh.read().strip()
        return os.path.normpath(os.path.join(git_dir, rel))
    return git_dir


def _layout(git_dir: str, common_dir: str, *, bare: bool) -> tuple[bool, tuple[str, int] | None]:
    """Read the repository's config once for two answers.

    Whether the work tree and object database are where they usually are, so the
    repository can be read without libgit2: the user owns it (libgit2 applies git's
    ``safe.directory`` rules otherwise), and its config moves nothing (no
    ``core.worktree``, no includes, no extensions such as SHA-256 or reftable, and
    ``core.bare`` as expected). And its ``core.sharedRepository``, for the
    permissions of what opal writes.
    """
    from . import configfile
    from .packfile import parse_shared

    path = os.path.join(common_dir, "config")
    try:
        found = configfile.entries(path) if os.path.isfile(path) else None
    except (OSError, configfile.Unsupported):
        found = None  # a config beyond the plain reader: libgit2 reads this repository
    if found is None:
        return False, None
    simple = True
    shared: str | None = None
    for section, _sub, key, raw in found:
        if section == "extensions":
            simple = False
        elif section == "core" and key == "worktree":
            simple = False
        elif section == "core" and key == "bare":
            if (configfile.value(raw).lower() in ("true", "yes", "on", "1", "")) != bare:
                simple = False
        elif section == "core" and key == "sharedrepository":
            shared = configfile.value(raw)
    try:
        owned = os.stat(git_dir).st_uid == os.geteuid()
    except OSError:
        owned = False
    return simple and owned, parse_shared(shared)


class Repository:
    """An opal store inside a git repository.

    libgit2 (pygit2) is opened only when a command needs it (``repo.git``): reading
    objects and refs goes to the files directly, which is most of what read commands
    do (see :mod:`odb`).
    """

    def __init__(self, git_dir: str, *, own: bool = False) -> None:
        from .store import GitObjectStore

        self.own = own
        self._git: pygit2.Repository | None = None
        self._identity_found: tuple[str | None, str | None] | None = None
        self._identity_pending = None  # gitcmd.Pending: the question, asked ahead
        git_dir = os.path.abspath(git_dir)
        plain = os.path.isfile(os.path.join(git_dir, "HEAD"))
        common_dir = _common_dir(git_dir) if plain else git_dir
        plain = plain and os.path.isdir(os.path.join(common_dir, "objects"))
        simple, shared = _layout(git_dir, common_dir, bare=own) if plain else (False, None)
        if not simple:
            self._open_git(git_dir)  # libgit2 decides where things are, and checks ownership
            where = os.path.abspath(self.git.path).rstrip(os.sep)
            common = _common_dir(where)
            if not plain or common != common_dir:  # the config read above was not this one's
                shared = _layout(where, common, bare=own)[1]
            git_dir, common_dir = where, common
            self.workdir = self.git.workdir.rstrip("/") if self.git.workdir and not own else None
        else:
            # A plain layout: the work tree holds the ``.git`` (or, for a linked
            # worktree, the file that its ``gitdir`` file names).
            linked = os.path.join(git_dir, "gitdir")
            if os.path.isfile(linked):
                with open(linked, encoding="utf-8") as fh:
                    self.workdir = os.path.dirname(os.path.normpath(fh.read().strip()))
            else:
                self.workdir = os.path.dirname(git_dir.rstrip(os.sep))
        self.git_dir = git_dir.rstrip(os.sep)
        self.common_dir = common_dir
        if own:
            self.workdir = os.path.dirname(self.git_dir.rstrip("/"))
        self.opal_dir = os.path.join(self.common_dir, "opal")
        self.store = GitObjectStore(lambda: self.git, os.path.join(self.common_dir, "objects"), shared=shared)
        self.refs = RefStore(lambda: self.git, self.git_dir, self.common_dir)

    def _open_git(self, git_dir: str) -> None:
        import pygit2

        try:
            self._git = pygit2.Repository(git_dir)
        except pygit2.GitError as exc:
            raise NotARepositoryError(f"cannot open the git repository at {git_dir}: {exc}") from None

    @property
    def git(self) -> pygit2.Repository:
        """The repository through libgit2, opened on first use."""
        if self._git is None:
            self._open_git(self.git_dir)
        assert self._git is not None
        return self._git

    # -- finding and creating --------------------------------------------------------

    @classmethod
    def discover(cls, start: str) -> "Repository":
        found = _find(start)
        if found is None:
            raise NotARepositoryError(
                f"no opal repository in {os.path.abspath(start)} or its parents",
                hint="run 'opal init' in your project folder",
            )
        kind, path = found
        repo = cls(path, own=(kind == "own"))
        if not repo.initialized:
            raise NotARepositoryError(
                f"opal is not set up in the git repository at {repo.workdir or repo.git_dir}",
                hint="run 'opal init' there (it only adds refs/opal/ and files under .git/opal/)",
            )
        return repo

    @classmethod
    def init(cls, path: str) -> tuple["Repository", bool]:
        """Set opal up in the git repository around ``path`` (or a store of its own)."""
        found = _find(path)
        if found is None:
            own = os.path.join(os.path.abspath(path), OWN_STORE)
            import pygit2

            pygit2.init_repository(own, bare=True)
            repo = cls(own, own=True)
        else:
            kind, where = found
            repo = cls(where, own=(kind == "own"))
        created = not repo.initialized
        if created:
            os.makedirs(repo.opal_dir, exist_ok=True)
            cfg = repo.config
            cfg["core.format"] = FORMAT
        if not os.path.exists(repo.refs.head_file):
            repo.refs.set_head_branch("main")
        return repo, created

    @property
    def initialized(self) -> bool:
        return os.path.isfile(os.path.join(self.opal_dir, "config"))

    @property
    def config(self) -> pygit2.Config:
        import pygit2

        os.makedirs(self.opal_dir, exist_ok=True)
        path = os.path.join(self.opal_dir, "config")
        if not os.path.exists(path):
            open(path, "a").close()
        return pygit2.Config(path)

    def config_set(self, key: str, value: str) -> None:
        """Write one value into opal's config file with ``git config``: a commit that
        records which session its branch tracks would otherwise load libgit2 (~50 ms)
        for this alone."""
        from . import gitcmd

        path = os.path.join(self.opal_dir, "config")
        os.makedirs(self.opal_dir, exist_ok=True)
        p = gitcmd.run(self.git_dir, ["config", "--file", path, key, value])
        if p.returncode != 0:
            raise OpalError(f"cannot write {key} to {path}: {p.stderr.strip() or 'git config failed'}")

    def config_get(self, key: str, default: str | None = None) -> str | None:
        from . import configfile

        try:
            value = configfile.get(os.path.join(self.opal_dir, "config"), key)
        except configfile.Unsupported:
            try:
                value = self.config[key]  # libgit2 reads what the plain reader leaves aside
            except KeyError:
                value = None
        return default if value is None else value

    # -- identity ---------------------------------------------------------------------

    def signature(self) -> Signature:
        """Who is committing: the repository's git identity, else a neutral one."""
        from .store import Signature

        name, email = self._identity()
        return Signature.now(name or "opal", email or "opal@localhost")

    def _identity(self) -> tuple[str | None, str | None]:
        # Asked once per Repository object: one commit signs its state, its operation
        # and the operation log's entry, and each question started a git process.
        if self._identity_found is None:
            self._identity_found = self._read_identity()
        return self._identity_found

    def ask_identity(self) -> None:
        """Start asking git who the committer is, for a :meth:`signature` to come (a
        commit does this first, so that git answers while it reads the session)."""
        if self._identity_found is None and self._identity_pending is None:
            from . import gitcmd

            try:
                self._identity_pending = gitcmd.start(self.git_dir, _IDENTITY_ARGS)
            except (gitcmd.GitMissing, OSError):
                self._identity_pending = None

    def _read_identity(self) -> tuple[str | None, str | None]:
        # git itself answers (~2 ms, with every config file and include it knows);
        # libgit2 where git is missing.
        from . import gitcmd

        pending, self._identity_pending = self._identity_pending, None
        try:
            proc = pending.result() if pending is not None else gitcmd.run(self.git_dir, _IDENTITY_ARGS)
        except gitcmd.GitMissing:
            proc = None
        if proc is not None and proc.returncode in (0, 1):  # 1: neither is set
            values: dict[str, str] = {}
            for entry in proc.stdout.split("\0"):
                key, _, value = entry.partition("\n")
                if key:
                    values[key.lower()] = value  # the last one set wins, as in git
            return values.get("user.name"), values.get("user.email")
        import pygit2

        name = email = None
        try:
            name = self.git.config["user.name"]
            email = self.git.config["user.email"]
        except (KeyError, pygit2.GitError):
            pass
        return name, email

    # -- locking ----------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, timeout: float = 30.0) -> Iterator[None]:
        """Serialize writers. An OS file lock: a killed holder releases it at once."""
        os.makedirs(self.opal_dir, exist_ok=True)
        path = os.path.join(self.opal_dir, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise OpalError(f"cannot lock {path}: {exc}") from None
                    if time.monotonic() >= deadline:
                        raise ConflictError(
                            f"another opal process has held {path} for {timeout:.0f} s",
                            hint="wait for it to finish, then run the command again",
                        ) from None
                    time.sleep(0.05)
            self.refs.lock_fd = fd
            try:
                yield
            finally:
                self.refs.lock_fd = None
                self.store.discard()
                # Not LOCK_UN: that would release the lock for a git child that
                # inherited it and is still finishing a ref transaction (see
                # RefStore.update); closing our descriptor leaves it to that child.
        finally:
            os.close(fd)

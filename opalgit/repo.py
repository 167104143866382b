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


def _find(start: str) -> tuple[str, str] | None:
    """Nearest enclosing store: ("own", path-of-.opal) or ("git", git-dir)."""
    path = os.path.abspath(start)
    while True:
        own = os.path.join(path, OWN_STORE)
        if os.path.isfile(os.path.join(own, "HEAD")):
            return "own", own
        if os.path.exists(os.path.join(path, ".git")):
            import pygit2

            found = pygit2.discover_repository(path)
            if found:
                return "git", found
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


class Repository:
    """An opal store inside a git repository."""

    def __init__(self, git_dir: str, *, own: bool = False) -> None:
        import pygit2

        from .store import GitObjectStore

        try:
            self.git = pygit2.Repository(git_dir)
        except pygit2.GitError as exc:
            raise NotARepositoryError(f"cannot open the git repository at {git_dir}: {exc}") from None
        self.own = own
        self.git_dir = os.path.abspath(self.git.path)
        common = os.path.join(self.git_dir, "commondir")
        if os.path.isfile(common):
            with open(common, encoding="utf-8") as fh:
                rel = fh.read().strip()
            self.common_dir = os.path.normpath(os.path.join(self.git_dir, rel))
        else:
            self.common_dir = self.git_dir
        self.workdir = None if own else (self.git.workdir.rstrip("/") if self.git.workdir else None)
        if own:
            self.workdir = os.path.dirname(self.git_dir.rstrip("/"))
        self.opal_dir = os.path.join(self.common_dir, "opal")
        self.store = GitObjectStore(self.git, os.path.join(self.common_dir, "objects"))
        self.refs = RefStore(self.git, self.git_dir)

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

    def config_get(self, key: str, default: str | None = None) -> str | None:
        try:
            return self.config[key]
        except KeyError:
            return default

    # -- identity ---------------------------------------------------------------------

    def signature(self) -> Signature:
        """Who is committing: the repository's git identity, else a neutral one."""
        import pygit2

        from .store import Signature

        name = email = None
        try:
            name = self.git.config["user.name"]
            email = self.git.config["user.email"]
        except (KeyError, pygit2.GitError):
            pass
        return Signature.now(name or "opal", email or "opal@localhost")

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
            try:
                yield
            finally:
                self.store.discard()
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

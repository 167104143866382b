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
from typing import TYPE_CHECKING, Iterator, Mapping

from opalgit.errors import ConflictError, NotARepositoryError, OpalError
from opalgit.store.argv import command
from opalgit.store.refs import RefStore

if TYPE_CHECKING:
    import pygit2

    from opalgit.store.objects import Signature

# pygit2 (and the object store over it) is imported where a repository is first
# opened, not here: ``import opalgit`` and ``opal --version`` do not need it.

OWN_STORE = ".opal"
FORMAT = 1
# git's answer to who commits: every config file and include git reads, last one wins.
_IDENTITY_ARGS = ["config", "-z", "--get-regexp", r"^(user|author|committer)\.(name|email)$"]
_IDENTITY_KEYS = ("user.name", "user.email", "author.name", "author.email", "committer.name", "committer.email")


def _find(start: str) -> tuple[str, str] | None:
    """Nearest enclosing store: ("own", path-of-.opal) or ("git", git-dir).

    Raises :class:`NotARepositoryError` for a bare repository (no working tree, so
    nothing to record), and for a ``.opal`` store that a git repository tracks: a
    checkout could ship one, and git run on it would obey its config
    (``core.sshCommand``, ``remote.*.uploadpack``).
    """
    path = os.path.abspath(start)
    own: str | None = None
    while True:
        here = os.path.join(path, OWN_STORE)
        if own is None and os.path.isfile(os.path.join(here, "HEAD")):
            own = here  # used unless an enclosing git repository tracks it (walking on up)
        dot_git = os.path.join(path, ".git")
        if os.path.exists(dot_git):
            found = _plain_git_dir(dot_git)
            if found is None:
                import pygit2

                found = pygit2.discover_repository(path)
            if found:
                if own is None:
                    return "git", found
                _refuse_tracked_store(own, found)
                return "own", own
        elif own is None and _is_bare(path):
            raise NotARepositoryError(
                f"{path} is a bare git repository: it has no working tree, so there is no agent session "
                "or code commit to record here",
                hint=f"run opal in a clone with a working tree ('{command('git', 'clone', path, 'DIR')}'); "
                "there, 'opal push' and 'opal fetch' can use this repository as their remote",
            )
        parent = os.path.dirname(path)
        if parent == path:
            return ("own", own) if own else None
        path = parent


def _is_bare(path: str) -> bool:
    """Whether ``path`` is itself a bare git repository (what ``git init --bare`` makes)."""
    if os.path.basename(path) == ".git" or not all(
        check(os.path.join(path, name)) for check, name in ((os.path.isfile, "HEAD"), (os.path.isdir, "objects"), (os.path.isdir, "refs"))
    ):
        return False
    import pygit2  # rare: only a folder that looks like a git directory gets here

    try:
        return pygit2.Repository(path).is_bare
    except pygit2.GitError:
        return False


def _refuse_tracked_store(own: str, git_dir: str) -> None:
    """Refuse the ``.opal`` store ``own`` if the git repository at ``git_dir`` tracks it."""
    import pygit2

    try:
        repo = pygit2.Repository(git_dir)
        top = repo.workdir
        tracked = bool(top) and os.path.relpath(os.path.join(own, "HEAD"), top).replace(os.sep, "/") in repo.index
    except (pygit2.GitError, ValueError, OSError):
        tracked = False
    if tracked:
        raise NotARepositoryError(
            f"{own} is an opal store that the git repository at {top.rstrip(os.sep)} tracks: it came with the code, "
            "and git run on it would obey its config (which can name commands to run), so opal does not use it",
            hint=f"take it out of the repository ('{command('git', 'rm', '-r', '-q', '--cached', '--', own)}', "
            "then delete the folder) and run 'opal init' to keep state in this repository",
        )


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
    from opalgit.store.gitfiles import configfile
    from opalgit.store.gitfiles.packfile import parse_shared

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


def git_config(cwd: str, key: str) -> str | None:
    """git's setting ``key`` (``core.pager``) for the folder ``cwd``: the repository's
    config, then the user's and the system's (libgit2 reads the files git does); None
    when none sets it. Outside a repository, the user's own config alone."""
    import pygit2

    try:
        return Repository.discover(cwd).git.config[key]
    except KeyError:
        return None  # the repository's config, with the user's and the system's, has none
    except (OpalError, OSError, ValueError, pygit2.GitError):
        pass  # no repository here to read: the user's own config, if there is one
    try:
        return pygit2.Config.get_global_config()[key]
    except (KeyError, OSError, ValueError, pygit2.GitError):
        return None


class Repository:
    """An opal store inside a git repository.

    libgit2 (pygit2) is opened only when a command needs it (``repo.git``): reading
    objects and refs goes to the files directly, which is most of what read commands
    do (see :mod:`odb`).
    """

    def __init__(self, git_dir: str, *, own: bool = False) -> None:
        from opalgit.store.objects import GitObjectStore

        self.own = own
        self._git: pygit2.Repository | None = None
        self._identity_found: dict[str, str] | None = None
        self._git_dates: dict[tuple[str, str], tuple[int, int]] = {}
        self._git_missing = False
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

    def merge_base(self, a: bytes, b: bytes) -> bytes | None:
        """The best common ancestor of commits ``a`` and ``b``, the one ``git merge-base``
        prints first; None when they share none."""
        import pygit2

        base = self.git.merge_base(pygit2.Oid(raw=a), pygit2.Oid(raw=b))
        return bytes(base.raw) if base is not None else None

    def is_ancestor(self, ancestor: bytes, of: bytes) -> bool:
        """Whether commit ``ancestor`` is ``of`` or in its history (False if either is missing)."""
        if ancestor == of:
            return True
        import pygit2

        try:
            return self.git.descendant_of(pygit2.Oid(raw=of), pygit2.Oid(raw=ancestor))
        except pygit2.GitError:
            return False

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
            # With git config, as config_set does: opening it with libgit2 loaded pygit2
            # (~100 ms) for this one value, most of 'opal init' (docs/performance.md).
            repo.config_set("core.format", str(FORMAT))
        if not os.path.exists(repo.refs.head_file):
            repo.refs.set_head_branch("main")
        return repo, created

    @property
    def initialized(self) -> bool:
        # exists, not isfile: a config that is no regular file is reported as such
        # when it is read (fileio.open_input), not as "opal is not set up".
        return os.path.exists(os.path.join(self.opal_dir, "config"))

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
        from opalgit.store import gitcmd

        path = os.path.join(self.opal_dir, "config")
        os.makedirs(self.opal_dir, exist_ok=True)
        # The value may come from an agent's file (a session id): git stops reading
        # options at the key, which opal builds and which never starts with '-'.
        if key.startswith("-"):
            raise OpalError(f"cannot write {key!r} to {path}: not a config key")
        p = gitcmd.run(self.git_dir, ["config", "--file", path, key, value])
        if p.returncode != 0:
            raise OpalError(f"cannot write {key} to {path}: {p.stderr.strip() or 'git config failed'}")

    def config_get(self, key: str, default: str | None = None) -> str | None:
        from opalgit.store.gitfiles import configfile

        try:
            value = configfile.get(os.path.join(self.opal_dir, "config"), key)
        except configfile.Unsupported:
            try:
                value = self.config[key]  # libgit2 reads what the plain reader leaves aside
            except KeyError:
                value = None
        return default if value is None else value

    # -- identity ---------------------------------------------------------------------

    def signature(self, env: Mapping[str, str] | None = None) -> Signature:
        """Who is committing (see :meth:`signatures`)."""
        return self.signatures(env)[1]

    def signatures(self, env: Mapping[str, str] | None = None) -> tuple[Signature, Signature]:
        """(author, committer) of a commit made now, as git would sign it here: its
        identity variables and config, else a neutral one (see :mod:`ident`).
        ``env`` is the environment git sees (like :func:`gitcmd.git_env`, the
        process's by default)."""
        from opalgit.store import ident

        env = os.environ if env is None else env
        config = self._identity()
        ask = None if self._git_missing else (lambda var, value: self._git_date(env, var, value))
        return ident.resolve(env, config, time.time(), ask)

    def _git_date(self, env: Mapping[str, str], var: str, value: str) -> tuple[int, int]:
        # A date in a form opal's parser leaves to git: git reads it, so that every
        # form it accepts means the same here. Its identity is given, so that git
        # answers even where none is configured; only the date is taken.
        from opalgit.errors import UsageError
        from opalgit.store import gitcmd, ident

        key = (var, value)
        if key not in self._git_dates:
            role = var.split("_")[1]
            ask_env = dict(env, **{f"GIT_{role}_NAME": "opal", f"GIT_{role}_EMAIL": "opal@localhost"})
            try:
                proc = gitcmd.run(self.git_dir, ["var", f"GIT_{role}_IDENT"], env=ask_env)
            except gitcmd.GitMissing:
                raise UsageError(f"{var}={value!r} is not a date opal can read without git",
                                 hint=ident.DATE_HINT) from None
            fields = proc.stdout.strip().rsplit(" ", 2)
            tz = fields[-1] if len(fields) == 3 else ""
            if proc.returncode != 0 or not (len(tz) == 5 and tz[0] in "+-" and tz[1:].isdigit() and int(tz[3:]) < 60):
                said = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "git cannot read it"
                raise UsageError(f"{var}={value!r} is not a date: {said.removeprefix('fatal: ')}",
                                 hint=ident.DATE_HINT)
            minutes = int(tz[1:3]) * 60 + int(tz[3:5])
            self._git_dates[key] = (int(fields[1]), -minutes if tz[0] == "-" else minutes)
        return self._git_dates[key]

    def _identity(self) -> dict[str, str]:
        # Asked once per Repository object: one commit signs its state, its operation
        # and the operation log's entry, and each question started a git process.
        if self._identity_found is None:
            self._identity_found = self._read_identity()
        return self._identity_found

    def ask_identity(self) -> None:
        """Start asking git who the committer is, for a :meth:`signature` to come (a
        commit does this first, so that git answers while it reads the session)."""
        if self._identity_found is None and self._identity_pending is None:
            from opalgit.store import gitcmd

            try:
                self._identity_pending = gitcmd.start(self.git_dir, _IDENTITY_ARGS)
            except (gitcmd.GitMissing, OSError):
                self._identity_pending = None

    def _read_identity(self) -> dict[str, str]:
        # git itself answers (~2 ms, with every config file and include it knows);
        # libgit2 where git is missing.
        from opalgit.store import gitcmd

        pending, self._identity_pending = self._identity_pending, None
        try:
            proc = pending.result() if pending is not None else gitcmd.run(self.git_dir, _IDENTITY_ARGS)
        except gitcmd.GitMissing:
            proc = None
        if proc is not None and proc.returncode in (0, 1):  # 1: none is set
            values: dict[str, str] = {}
            for entry in proc.stdout.split("\0"):
                key, _, value = entry.partition("\n")
                if key:
                    values[key.lower()] = value  # the last one set wins, as in git
            return values
        import pygit2

        self._git_missing = proc is None
        found: dict[str, str] = {}
        for key in _IDENTITY_KEYS:
            try:
                found[key] = self.git.config[key]
            except (KeyError, pygit2.GitError):
                pass
        return found

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

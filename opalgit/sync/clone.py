"""Clone-state: get the state kept at a URL into a freshly cloned repository.

The remote is recorded (in opal's own config when git has no remote with that URL)
only once its state has been fetched; the current branch, if it has no commits yet,
then starts at the remote's branch of the same name, by the rules of the caller's
``start`` (``opal clone-state`` passes :func:`opalgit.porcelain.pull.fast_forward`, so
that the branch tracks the session the state was recorded from, as after a pull).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from opalgit.errors import UsageError
from opalgit.store import transport
from opalgit.store.argv import check_url
from opalgit.store.argv import command as cmdline
from opalgit.store.refs import branch_ref
from opalgit.store.repo import Repository
from opalgit.structs import dataclass
from opalgit.sync.fetch import FetchResult, fetch_remote
from opalgit.sync.remotes import (
    Remote,
    RemoteError,
    check_remote_name,
    get_remote,
    opal_remotes,
    remote_branch_name,
    remote_branches,
    tracking_ref,
)


@dataclass
class CloneResult:
    remote: str
    added: bool  # the remote was added to opal's config
    fetch: FetchResult
    branch: str
    status: str | None  # what happened to the current branch: "created", "up-to-date", ... or None
    branches: dict[str, bytes]

    def to_json(self) -> dict:
        return {
            "remote": self.remote,
            "added": self.added,
            "branch": self.branch,
            "status": self.status,
            "branches": {b: o.hex() for b, o in self.branches.items()},
        }


def _same_url(a: str | None, b: str) -> bool:
    def norm(u: str) -> str:
        u = u.strip().rstrip("/")
        return u[:-4] if u.endswith(".git") else u

    return a is not None and norm(a) == norm(b)


def clone_state(
    repo: Repository, env: Mapping[str, str], url: str, name: str | None = None, *, start: Callable[..., Any]
) -> CloneResult:
    """Get the state kept at ``url`` into this (freshly cloned) repository.

    The remote is the git remote with that URL if there is one; otherwise it is
    recorded in opal's own config only (``remote.<name>.url``), so your code
    remotes are untouched. The current branch, if it has no commits yet, starts at
    the remote's branch of the same name: ``start(repo, local, remote, remote_branch,
    command="clone-state")`` moves it and returns what it did (its ``status``).
    """
    check_url(url, source="given to clone-state")
    again = ["opal", "clone-state", url, *(["--name", name] if name else [])]
    git_remotes = transport.git_remotes(repo)
    own = opal_remotes(repo)
    match = next((n for n, u in sorted(git_remotes.items()) if _same_url(u, url)), None)
    match = match or next((n for n, u in sorted(own.items()) if _same_url(u, url)), None)
    if name is None:
        name = match or ("origin" if "origin" not in git_remotes and "origin" not in own else None)
        if name is None:
            raise UsageError(
                f"'origin' already names another remote ({git_remotes.get('origin') or own.get('origin')})",
                hint=f"give the state remote a name: '{cmdline('opal', 'clone-state', url, '--name', 'NAME')}'",
            )
    check_remote_name(name)
    added = name != match
    if added:
        existing = git_remotes.get(name) or own.get(name)
        if existing is not None:
            raise UsageError(f"remote {name} already exists with URL {existing}", hint="pick another name with --name")
    r = Remote(name, url, url) if added else get_remote(repo, name)
    try:
        fres = fetch_remote(repo, env, r)
    except RemoteError as exc:
        # The remote is recorded only once its state is here: a wrong URL or a remote
        # that is down leaves no 'origin' behind that the next try would trip over.
        raise RemoteError(
            exc.message,
            hint=f"no remote was recorded and nothing was fetched; check the URL and your access "
            f"('{cmdline('git', 'ls-remote', url)}'), then run '{cmdline(*again)}' again",
        ) from None
    if added:
        repo.config[f"remote.{name}.url"] = url
    local = repo.refs.head_branch()
    rb = remote_branch_name(repo, local)
    status = None
    if repo.refs.get(branch_ref(local)) is None and repo.refs.get(tracking_ref(name, rb)) is not None:
        status = start(repo, local, name, rb, command="clone-state").status
    return CloneResult(name, added, fres, local, status, remote_branches(repo, name))

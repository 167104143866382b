"""What the repository says about its git remotes, and the git that talks to them.

:mod:`opalgit.sync` pushes and fetches by running the user's ``git`` (:func:`run_git`),
so that every remote git can reach works with the user's credentials; the remotes git
has configured, and the upstream remote of the current branch, are read here through
libgit2, so that the sync layer needs no pygit2 of its own.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING, Mapping

from opalgit.errors import OpalError
from opalgit.store import gitcmd

if TYPE_CHECKING:
    from opalgit.store.repo import Repository


def run_git(repo: "Repository", args: list[str], env: Mapping[str, str], *, input: str | None = None) -> subprocess.CompletedProcess:
    """Run the user's git on this repository."""
    try:
        return gitcmd.run(
            repo.git_dir, args, cwd=repo.workdir if repo.workdir and os.path.isdir(repo.workdir) else None,
            env=env, input=input,
        )
    except gitcmd.GitMissing:
        raise OpalError("git is not installed (or not on PATH)", hint="install git, then run the command again") from None


def git_remotes(repo: "Repository") -> dict[str, str | None]:
    """The remotes of the git repository (``git remote``): name -> URL (None: no URL set)."""
    import pygit2

    out: dict[str, str | None] = {}
    try:
        for r in repo.git.remotes:
            out[r.name] = r.url
    except pygit2.GitError:
        pass
    return out


def upstream_remote(repo: "Repository") -> str | None:
    """The remote the current git branch pulls from (``branch.<name>.remote``), if it has one."""
    if repo.own:
        return None  # an opal store of its own has no code branches
    import pygit2

    if repo.git.head_is_detached or repo.git.head_is_unborn:
        return None
    try:
        return repo.git.config[f"branch.{repo.git.head.shorthand}.remote"]
    except (KeyError, pygit2.GitError):
        return None

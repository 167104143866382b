"""Running the user's ``git`` binary on the repository.

opal runs git for what git does best with the user's own setup (remotes and
credentials, see :mod:`opalgit.sync.push`), and for two small jobs where starting git
(~2 ms) is cheaper than loading libgit2 (~75 ms): ref transactions
(:meth:`refs.RefStore.update`) and the committer's identity
(:meth:`repo.Repository.signature`).

The arguments are opal's own options; a value from outside opal (a remote's URL, a
name the user typed, anything read from a config, a remote or a session file) goes
after ``--``, or as the separate value of an option git takes verbatim (``-m MSG``),
or on standard input, and is checked first where git could still run it
(:mod:`argv`). Every call site and how it keeps to this is listed in
docs/remotes.md ("What opal hands to git") and tests/unit/test_argv_safety.py.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import Mapping

#: Variables that git sets for its hooks and that would point a child git elsewhere.
GIT_LOCAL_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_PREFIX",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
)


class GitMissing(Exception):
    """No ``git`` on PATH."""


def git_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    out = {k: v for k, v in (os.environ if env is None else env).items() if k not in GIT_LOCAL_VARS}
    out["LC_ALL"] = "C"  # git's messages are parsed (atomic support, rejection reasons, ref conflicts)
    return out


def run(
    git_dir: str,
    args: list[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess:
    """``git --git-dir=GIT_DIR ARGS`` (explicit: hooks set GIT_DIR and the like)."""
    try:
        return subprocess.run(
            ["git", f"--git-dir={git_dir}", *args],
            cwd=cwd or git_dir,
            env=git_env(env),
            input=input,
            capture_output=True,
            text=True,
            errors="replace",
        )
    except FileNotFoundError:
        raise GitMissing("git is not installed (or not on PATH)") from None


class Pending:
    """A git command started in the background (:func:`start`); :meth:`result` waits."""

    def __init__(self, proc: subprocess.Popen, args: list[str]) -> None:
        self._proc, self._args = proc, args

    def result(self) -> subprocess.CompletedProcess:
        out, err = self._proc.communicate()
        return subprocess.CompletedProcess(self._args, self._proc.returncode, out, err)


def start(
    git_dir: str,
    args: list[str],
    *,
    cwd: str | None = None,
    input: str | None = None,
    pass_fds: tuple[int, ...] = (),
    detach: bool = False,
) -> Pending:
    """:func:`run`, started now and finished when asked: git works on the other core
    while the caller goes on (a commit asks who the committer is ~50 ms before it
    needs the answer). ``input`` is written to git's stdin at once. ``pass_fds``:
    descriptors git inherits (a lock it must hold as long as it runs). ``detach``:
    git finishes what it began even if opal is killed meanwhile: it is out of reach
    of signals sent to opal's process group (Ctrl-C, a kill of the group), and its
    output goes nowhere (writing to a reader that is gone would end it); only its
    errors come back."""
    argv = ["git", f"--git-dir={git_dir}", *args]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd or git_dir,
            env=git_env(),
            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
            stdout=subprocess.DEVNULL if detach else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            pass_fds=pass_fds,
            start_new_session=detach,
        )
    except FileNotFoundError:
        raise GitMissing("git is not installed (or not on PATH)") from None
    if input is not None:
        assert proc.stdin is not None
        # git reads all of it before it writes anything back. A broken pipe means git
        # exited early: its status and stderr say why.
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(input)
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
        proc.stdin = None  # written and closed: communicate() has nothing more to send
    return Pending(proc, argv)

"""Git hooks: install, verify and uninstall the shims, and what each hook does.

The shims (``post-commit``, ``post-rewrite``, ``pre-push``; their text is
:func:`render_shim`, and the repository's top-level ``hooks/`` folder holds the same
files for reading or copying by hand) are thin POSIX sh scripts that call
``opal hook NAME``. ``opal hooks install`` writes them into the repository's
effective hooks folder (``git rev-parse --git-path hooks``: ``core.hooksPath`` if set,
else the common ``.git/hooks`` that linked worktrees share) and never clobbers: a hook
already there is renamed ``NAME.opal-chained`` and the shim runs it first, with the same
arguments and input, and exits with its status. ``opal hooks uninstall`` renames it back,
so what was there before is restored byte for byte.

What the hooks do (:func:`post_commit`, :func:`post_rewrite`, :func:`pre_push`):

- post-commit: record the agent session of this worktree (as ``opal commit`` would) with
  a message naming the code commit and a ``Code-Commit:`` trailer, and link the code
  commit to the state (:mod:`links`); no session: nothing, quietly.
- post-rewrite: after ``git commit --amend`` / ``git rebase``, links follow the rewritten
  commits.
- pre-push: with ``opal config push.withCode true``, a plain ``git push`` also pushes the
  current state branch to the same remote.

The hook functions raise like any opal function; the CLI entry point (``opal hook``)
turns every failure into one warning line and exit status 0, and the shim adds a
last guard so that even a broken opal installation prints one line and never fails
the git command.
"""

from __future__ import annotations

import os
import shlex
from typing import Iterable, Mapping

from . import links, porcelain
from .errors import NothingToDoError, OpalError, SessionNotFoundError, UsageError
from .fileio import replace_atomically
from .refs import check_branch_name
from .repo import Repository
from .structs import dataclass

HOOKS = ("post-commit", "post-rewrite", "pre-push")
CHAINED_SUFFIX = ".opal-chained"
MARKER = "# opal-hook-shim 1"

_SHIM = """#!/bin/sh
# opal: git {name} hook. Installed by 'opal hooks install'; 'opal hooks uninstall'
# removes it and puts back the hook that was here before (see docs/hooks.md).
#
# It runs that earlier hook first, if there was one ({name}.opal-chained beside this
# file), with the same arguments and input, and exits with its status. Then it runs
# 'opal hook {name}', whose failures are a single warning line: opal never fails
# the git command.
{marker}
OPAL_PYTHON={python}

hook={name}
status=0
{stdin_read}
if [ -x "$0{suffix}" ]; then
    {run_chained}
    status=$?
fi
{guard}
if [ -n "$OPAL_PYTHON" ] && [ -x "$OPAL_PYTHON" ]; then
    set -- "$OPAL_PYTHON" -m opalgit hook "$hook" "$@"
elif command -v opal >/dev/null 2>&1; then
    set -- opal hook "$hook" "$@"
else
    echo "opal: $hook hook skipped: the opal command is not installed (reinstall it, or run 'opal hooks uninstall')" >&2
    exit $status
fi
{run_opal}
opal_status=$?
if [ $opal_status -eq 0 ]; then
    [ -n "$out" ] && printf '%s\\n' "$out" >&2
else
    printf 'opal: %s hook failed, git is not affected: %s\\n' "$hook" "$(printf '%s\\n' "$out" | tail -n 1)" >&2
fi
exit $status
"""

# Hooks fed on stdin (post-rewrite: "old new" lines; pre-push: ref lines) read it once
# and hand the same bytes to the chained hook and to opal.
_STDIN_READ = 'input=$(cat; echo x)\ninput=${input%x}'
_RUN_CHAINED_STDIN = 'printf \'%s\' "$input" | "$0' + CHAINED_SUFFIX + '" "$@"'
_RUN_CHAINED = '"$0' + CHAINED_SUFFIX + '" "$@"'
_RUN_OPAL_STDIN = "out=$(printf '%s' \"$input\" | \"$@\" 2>&1 >/dev/null)"
_RUN_OPAL = 'out=$("$@" 2>&1 >/dev/null </dev/null)'

_GUARDS = {
    # A rebase runs post-commit for every commit it replays; their links come from
    # post-rewrite instead, so skip them here without starting Python.
    "post-commit": (
        'git_dir=$(git rev-parse --git-dir 2>/dev/null)\n'
        'if [ -n "$git_dir" ] && { [ -d "$git_dir/rebase-merge" ] || [ -d "$git_dir/rebase-apply" ]; }; then\n'
        "    exit $status\n"
        "fi"
    ),
    # The push is refused by the earlier hook: push no state either.
    "pre-push": "if [ $status -ne 0 ]; then\n    exit $status\nfi",
    "post-rewrite": "",
}


def render_shim(name: str, python: str | None = None) -> str:
    """The shim for hook ``name``; ``python`` is the interpreter that runs opal (None: ``opal`` on PATH)."""
    if name not in HOOKS:
        raise UsageError(f"opal has no {name} hook", hint=f"its hooks are {', '.join(HOOKS)}")
    stdin = name != "post-commit"
    return _SHIM.format(
        name=name,
        marker=MARKER,
        python=shlex.quote(python) if python else '""',
        suffix=CHAINED_SUFFIX,
        stdin_read=_STDIN_READ if stdin else "",
        run_chained=_RUN_CHAINED_STDIN if stdin else _RUN_CHAINED,
        guard=_GUARDS[name],
        run_opal=_RUN_OPAL_STDIN if stdin else _RUN_OPAL,
    ).replace("\n\n\n", "\n\n")


# ------------------------------------------------------------------ install / verify / uninstall


def ensure_repo(cwd: str) -> tuple[Repository, bool]:
    """The opal repository of the git repository around ``cwd``, set up first if needed."""
    from .repo import _find

    found = _find(cwd)
    if found is None or found[0] != "git":
        raise UsageError(
            f"{os.path.abspath(cwd)} is not inside a git repository, so there are no git commits to hook",
            hint="run 'opal hooks install' inside your project's git repository",
        )
    repo = Repository(found[1])
    if repo.initialized:
        return repo, False
    porcelain.init(cwd)
    return Repository.discover(cwd), True


def hooks_dir(repo: Repository, env: Mapping[str, str]) -> str:
    """Where git looks for this repository's hooks (``core.hooksPath`` honoured), as git itself says."""
    if repo.own:
        raise UsageError(
            "this opal store is not inside a git repository, so there are no git commits to hook",
            hint="run 'opal init' and 'opal hooks install' inside your project's git repository",
        )
    from . import remote

    proc = remote.run_git(repo, ["rev-parse", "--git-path", "hooks"], env)
    if proc.returncode or not proc.stdout.strip():
        raise OpalError(f"git cannot tell where the hooks of {repo.workdir} are: {proc.stderr.strip()}")
    path = proc.stdout.strip()
    base = repo.workdir if repo.workdir and os.path.isdir(repo.workdir) else repo.git_dir
    return os.path.normpath(os.path.join(base, path))


@dataclass
class HookStatus:
    name: str
    path: str
    state: str  # "installed", "outdated" (ours, but another opal or an older shim), "missing", "foreign"
    chained: str | None  # the earlier hook opal runs first, if any

    def to_json(self) -> dict:
        return {"hook": self.name, "path": self.path, "state": self.state, "chained": self.chained}


def _is_shim(path: str) -> bool:
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return MARKER in fh.read(4096)
    except OSError:
        return False


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def status(repo: Repository, env: Mapping[str, str], python: str | None = None) -> list[HookStatus]:
    directory = hooks_dir(repo, env)
    out = []
    for name in HOOKS:
        path = os.path.join(directory, name)
        chained = path + CHAINED_SUFFIX
        has_chained = os.path.lexists(chained)
        if _is_shim(path):
            state = "installed" if _read(path) == render_shim(name, python) else "outdated"
        elif os.path.lexists(path):
            state = "foreign"
        else:
            state = "missing"
        out.append(HookStatus(name, path, state, chained if has_chained else None))
    return out


def _write_executable(path: str, text: str) -> None:
    replace_atomically(path, text.encode("utf-8"), mode=0o755)


@dataclass
class HookChange:
    name: str
    path: str
    action: str  # "installed", "updated", "unchanged", "chained" (installed, earlier hook kept), "removed", "restored", "absent", "skipped"
    detail: str | None = None

    def to_json(self) -> dict:
        return {"hook": self.name, "path": self.path, "action": self.action, "detail": self.detail}


def install(repo: Repository, env: Mapping[str, str], python: str | None) -> list[HookChange]:
    """Put the shims in place; a hook already there is kept and chained, never overwritten."""
    directory = hooks_dir(repo, env)
    os.makedirs(directory, exist_ok=True)
    # Check everything first, so that a refusal changes nothing.
    for name in HOOKS:
        path = os.path.join(directory, name)
        chained = path + CHAINED_SUFFIX
        if os.path.lexists(path) and not _is_shim(path) and os.path.lexists(chained):
            raise UsageError(
                f"{path} is not opal's, and {os.path.basename(chained)} already exists beside it",
                hint=f"move one of them away (opal keeps the earlier hook as {os.path.basename(chained)}), then install again",
            )
    changes = []
    for name in HOOKS:
        path = os.path.join(directory, name)
        chained = path + CHAINED_SUFFIX
        text = render_shim(name, python)
        if _is_shim(path):
            if _read(path) == text:
                changes.append(HookChange(name, path, "unchanged"))
                continue
            _write_executable(path, text)
            changes.append(HookChange(name, path, "updated"))
            continue
        if os.path.lexists(path):
            os.rename(path, chained)  # a rename keeps bytes, mode and symlinks exactly
            _write_executable(path, text)
            changes.append(HookChange(name, path, "chained", f"your earlier {name} runs first (kept as {os.path.basename(chained)})"))
            continue
        _write_executable(path, text)
        detail = f"runs {os.path.basename(chained)} first" if os.path.lexists(chained) else None
        changes.append(HookChange(name, path, "installed", detail))
    return changes


def uninstall(repo: Repository, env: Mapping[str, str]) -> list[HookChange]:
    """Remove the shims and put back what was there before them."""
    directory = hooks_dir(repo, env)
    changes = []
    for name in HOOKS:
        path = os.path.join(directory, name)
        chained = path + CHAINED_SUFFIX
        if os.path.lexists(path) and not _is_shim(path):
            changes.append(HookChange(name, path, "skipped", "not opal's hook; left as it is"))
            continue
        if os.path.lexists(chained):
            os.replace(chained, path)
            changes.append(HookChange(name, path, "restored", "the earlier hook is back in place"))
        elif os.path.lexists(path):
            os.unlink(path)
            changes.append(HookChange(name, path, "removed"))
        else:
            changes.append(HookChange(name, path, "absent"))
    return changes


# ------------------------------------------------------------------ what the hooks do


@dataclass
class HookResult:
    """What a hook did, as the one line it prints (None: nothing worth saying)."""

    message: str | None = None


def _rebasing(repo: Repository) -> bool:
    return any(os.path.isdir(os.path.join(repo.git_dir, d)) for d in ("rebase-merge", "rebase-apply"))


def _worktree_branch(repo: Repository) -> None:
    """A linked worktree records on a branch of its own (named after it) until told otherwise."""
    if repo.git_dir == repo.common_dir or os.path.exists(repo.refs.head_file):
        return
    name = os.path.basename(repo.git_dir.rstrip("/"))
    try:
        check_branch_name(name)
    except UsageError:
        name = "worktree-" + "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip("-.")
    repo.refs.set_head_branch(name)


def post_commit(repo: Repository, env: Mapping[str, str]) -> HookResult:
    """Record this worktree's agent session with the new code commit, and link the two."""
    code = links.head_commit(repo)
    if code is None or _rebasing(repo) or repo.workdir is None:
        return HookResult()
    _worktree_branch(repo)
    try:
        res = porcelain.commit(repo, env, repo.workdir, message=links.state_message(code))
    except SessionNotFoundError:
        return HookResult()
    except NothingToDoError:
        # The state did not change: the code commit was made with the current one.
        state = porcelain.branch_head(repo, porcelain.current_branch(repo))
        if state is None:
            return HookResult()
        try:
            links.set_links(repo, [(code.oid, state)], command="link", description=f"link code commit {code.short} to state {state.hex()[:7]}")
        except NothingToDoError:
            pass
        return HookResult()
    assert res.oid is not None
    try:
        links.set_links(repo, [(code.oid, res.oid)], command="link", description=f"link code commit {code.short} to state {res.oid.hex()[:7]}")
    except NothingToDoError:
        pass
    agent = res.session.agent if res.session else "agent"
    sid = res.session.id[:8] if res.session else "?"
    n = res.new_turns
    return HookResult(
        f"opal: recorded {n} new turn{'s' if n != 1 else ''} of {agent} session {sid} as state "
        f"{res.oid.hex()[:7]} on {res.branch}, linked to code commit {code.short}"
    )


def parse_rewrites(lines: Iterable[str]) -> list[tuple[bytes, bytes]]:
    """post-rewrite's input: one ``<old sha> <new sha> [extra]`` per line."""
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and all(len(p) == 40 for p in parts[:2]):
            try:
                out.append((bytes.fromhex(parts[0]), bytes.fromhex(parts[1])))
            except ValueError:
                continue
    return out


def post_rewrite(repo: Repository, kind: str, lines: Iterable[str]) -> HookResult:
    """The links of rewritten code commits follow them to their new ids."""
    rewrites = parse_rewrites(lines)
    if not rewrites:
        return HookResult()
    try:
        moved = links.rewrite_links(repo, kind, rewrites)
    except NothingToDoError:
        return HookResult()
    n = len(moved)
    return HookResult(f"opal: {n} link{'s' if n != 1 else ''} to agent state followed the rewritten commit{'s' if n != 1 else ''}")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "yes", "on", "1")


def pre_push(repo: Repository, env: Mapping[str, str], remote_name: str, url: str, lines: Iterable[str]) -> HookResult:
    """With ``push.withCode``, a ``git push`` also pushes the current state branch to the same remote."""
    if not _truthy(repo.config_get("push.withCode")):
        return HookResult()
    pushed = [ln.split() for ln in lines if ln.strip()]
    if not any(len(p) >= 2 and set(p[1]) != {"0"} for p in pushed):
        return HookResult()  # nothing pushed, or only deletions
    branch = porcelain.current_branch(repo)
    if porcelain.branch_head(repo, branch) is None:
        return HookResult()
    from . import remote  # only here: the post-commit hook does not need it

    res = remote.push(repo, env, remote_name or url, branch)
    if res.status == "up-to-date" and not res.links:
        return HookResult()
    return HookResult(f"opal: pushed state branch {res.branch} to {res.remote}/{res.remote_branch} ({res.status})")

"""Git hooks: install, verify and uninstall the shims, and what each hook does.

The shims (``post-commit``, ``post-rewrite``, ``pre-push``; their text is
:func:`render_shim`, and the repository's top-level ``hooks/`` folder holds the same
files for reading or copying by hand) are thin POSIX sh scripts that call
``opal hook NAME``. ``opal hooks install`` writes them into the repository's
effective hooks folder (``git rev-parse --git-path hooks``: ``core.hooksPath`` if set,
else the common ``.git/hooks`` that linked worktrees share) and never clobbers: a hook
already there is renamed ``NAME.opal-chained`` and the shim runs it first, under the
hook's own name (hook managers such as husky dispatch on ``$0``), with the same
arguments and input, and exits with its status. ``opal hooks uninstall`` renames it
back, so what was there before is restored byte for byte. A hooks folder shared with
other repositories is refused unless asked for (:func:`check_folder`); there, a shim
in a repository without opal does nothing.

The shim waits for opal's part at most ``hooks.timeout`` seconds (post-commit,
post-rewrite: 0 unless set, so git does not wait and the work runs in the background)
or ``hooks.pushTimeout`` (pre-push: then it is stopped); :func:`run_in_turn` and
:mod:`hookqueue` keep work that outlives its git command in git's order, and lose
none of it.

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
last guard so that even a broken or hung opal installation prints one line and never
fails, or holds up, the git command.
"""

from __future__ import annotations

import os
import shlex
import stat
from typing import Iterable, Mapping

from opalgit import porcelain
from opalgit.errors import ConflictError, NothingToDoError, OpalError, SessionNotFoundError, UsageError
from opalgit.fileio import replace_atomically
from opalgit.hooks import queue as hookqueue
from opalgit.store.refs import check_branch_name
from opalgit.store.repo import Repository
from opalgit.structs import dataclass
from opalgit.sync import links

HOOKS = ("post-commit", "post-rewrite", "pre-push")
CHAINED_SUFFIX = ".opal-chained"
#: The folder beside the shims that holds, for a chained hook that is not a shell script,
#: a link with the hook's own name (``.opal-chained/pre-push -> ../pre-push.opal-chained``).
CHAINED_DIR = ".opal-chained"
MARKER = "# opal-hook-shim 3"
_MARKER_PREFIX = "# opal-hook-shim "  # every version of the shim, for status and uninstall

#: How long a git command waits for opal's part of a hook, in seconds (the settings
#: ``hooks.timeout`` and ``hooks.pushTimeout``, and ``OPAL_HOOK_TIMEOUT`` for all three).
#: post-commit and post-rewrite do not wait by default: a Python start alone is more
#: than the 150 ms a hook may add to ``git commit`` (docs/performance.md, the
#: ``hooks.git-commit`` row), and the journal keeps their work in git's order however
#: late it runs. pre-push decides while ``git push`` waits.
TIMEOUT_DEFAULT = 0
PUSH_TIMEOUT_DEFAULT = 60

_SHIM = """#!/bin/sh
# opal: git {name} hook. Installed by 'opal hooks install'; 'opal hooks uninstall'
# removes it and puts back the hook that was here before (see docs/hooks.md).
#
# It runs that earlier hook first, if there was one ({name}.opal-chained beside this
# file), under this hook's own name, with the same arguments and input, and exits with
# its status. Then it runs 'opal hook {name}', whose failures are a single warning line:
# opal never fails the git command. In a repository without opal it does nothing more.
# git waits for opal's part at most hooks.{key} seconds ({default} unless set);
# {after}
{marker}
OPAL_PYTHON={python}

hook={name}
kind={kind}
status=0
case $0 in */*) here=${{0%/*}} ;; *) here=. ;; esac

# The earlier hook runs as git would run it, as $0 = this hook's own path: hook managers
# find their work from it (husky: basename "$0", pre-commit: dirname "$0"). A shell
# script is read by its own shell with $0 set so; anything else runs through a link
# that has the hook's own name ({chained_dir}/{name}).
chained_shell() {{
    shell=
    line=
    IFS= read -r line <"$here/$hook{suffix}" 2>/dev/null
    case $line in '#!'*) ;; *) return 1 ;; esac
    set -f
    set -- ${{line#??}}
    set +f
    if [ "${{1##*/}}" = env ]; then
        shift
        [ "$1" = -S ] && shift
    fi
    case ${{1##*/}} in
        sh|bash|dash|ash|ksh|mksh|posh|yash) shell=$* ;;
        *) return 1 ;;
    esac
}}
run_chained() {{
    if chained_shell; then
        $shell -c '. "$0{suffix}"' "$here/$hook" "$@"
    elif [ -x "$here/{chained_dir}/$hook" ]; then
        "$here/{chained_dir}/$hook" "$@"
    else
        "$here/$hook{suffix}" "$@"
    fi
}}
{stdin_read}
if [ -x "$here/$hook{suffix}" ]; then
    {run_chained}
    status=$?
fi
{guard}
nl='
'
dirs=$(git rev-parse --absolute-git-dir --git-common-dir{head} 2>/dev/null) || exit $status
git_dir=${{dirs%%"$nl"*}}
dirs=${{dirs#*"$nl"}}
opal_dir=${{dirs%%"$nl"*}}/opal
{code}
# No opal in this repository (a hooks folder that other repositories share): nothing to do.
[ -d "$opal_dir" ] || exit $status
{rebase_guard}
if [ -n "$OPAL_PYTHON" ] && [ -x "$OPAL_PYTHON" ]; then
    set -- "$OPAL_PYTHON" -m opalgit hook "$hook" "$@"
elif command -v opal >/dev/null 2>&1; then
    set -- opal hook "$hook" "$@"
else
    echo "opal: $hook hook skipped: the opal command is not installed (reinstall it, or run 'opal hooks uninstall')" >&2
    exit $status
fi
# What git showed this hook goes in the journal now, in git's order, before opal starts:
# its work may run later, and in another process (see opalgit/hooks/queue.py).
queue="$opal_dir/hooks"
[ -d "$queue" ] || mkdir "$queue" 2>/dev/null
# What failed in the background since the last hook run, said once, here.
if [ -s "$queue/unsaid" ] && mv -f "$queue/unsaid" "$queue/unsaid.$$" 2>/dev/null; then
    while IFS= read -r line; do printf '%s\\n' "$line" >&2; done <"$queue/unsaid.$$"
    rm -f "$queue/unsaid.$$"
fi
{save_input}
printf '%s %s %s %s %s\\n' "$$" "$hook" "$code" "$kind" "$git_dir" 2>/dev/null >>"$queue/journal"
export OPAL_HOOK_SHIM=$$
timeout=${{OPAL_HOOK_TIMEOUT:-$(git config -f "$opal_dir/config" --get hooks.{key} 2>/dev/null)}}
case $timeout in ''|*[!0-9.]*|.*|*.*.*) timeout={default} ;; esac
# opal's output goes to a file: while it exists, the shim waits and shows it.
out="$opal_dir/hook-output.$$"
export OPAL_HOOK_OUTPUT="$out"
{detach}
# opal runs beside this script, while a watchdog counts down.
timed_out=
watchdog=
trap 'rm -f "$out"; [ -z "$watchdog" ] || kill $watchdog 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'timed_out=1' USR1
trap '' HUP
{run_opal}
pid=$!
(
    trap 'kill $s 2>/dev/null; exit 0' TERM
    sleep "$timeout" & s=$!
    wait $s && kill -USR1 $$
) >/dev/null 2>&1 </dev/null &
watchdog=$!
wait $pid
opal_status=$?
kill $watchdog 2>/dev/null
watchdog=
if [ -n "$timed_out" ] && kill -0 $pid 2>/dev/null; then
    {give_up}
    exit $status
fi
[ -n "$timed_out" ] && {{ wait $pid; opal_status=$?; }}
said=$(cat "$out" 2>/dev/null)
if [ $opal_status -eq 0 ]; then
    [ -n "$said" ] && printf '%s\\n' "$said" >&2
else
    printf 'opal: %s hook failed, git is not affected: %s\\n' "$hook" "$(printf '%s\\n' "$said" | tail -n 1)" >&2
fi
exit $status
"""

# Hooks fed on stdin (post-rewrite: "old new" lines; pre-push: ref lines) read it once
# and hand the same bytes to the chained hook and to opal.
_STDIN_READ = 'input=$(cat; echo x)\ninput=${input%x}'
_RUN_CHAINED_STDIN = "printf '%s' \"$input\" | run_chained \"$@\""
_RUN_CHAINED = 'run_chained "$@"'
_RUN_OPAL_STDIN = "printf '%s' \"$input\" | \"$@\" >/dev/null 2>\"$out\" &"
_RUN_OPAL = '"$@" >/dev/null 2>"$out" </dev/null &'

# hooks.timeout 0 (the default of post-commit and post-rewrite): git does not wait at
# all. opal runs in the background, its signals from the terminal ignored (git's process
# group may still be the terminal's foreground); if it dies before it could keep its own
# failure (a broken installation), its last line is kept for the next hook run to say.
_DETACH = """case $timeout in *[1-9]*) ;; *)
    trap '' INT QUIT HUP
    (
        {run} >/dev/null 2>"$out.bg"
        [ $? -eq 0 ] || printf 'opal: an earlier %s hook failed in the background: %s\\n' "$hook" \\
            "$(tail -n 1 "$out.bg" 2>/dev/null)" >>"$queue/unsaid" 2>/dev/null
        rm -f "$out.bg"
    ) >/dev/null 2>&1 </dev/null &
    exit $status ;;
esac"""

_GIVE_UP_DETACH = (
    'echo "opal: $hook hook still working after $timeout s, so it goes on in the background'
    " (pid $pid) and git is not held up; 'opal hooks status' says if it fails\" >&2"
)
_GIVE_UP_STOP = (
    "kill -TERM $pid 2>/dev/null\n"
    '    echo "opal: $hook hook stopped after $timeout s: the state branch was not pushed, and git push'
    " goes on; run 'opal push' to push it (hooks.pushTimeout sets the limit)\" >&2"
)

_AFTER = {
    "post-commit": "0: git does not wait. Its work goes on in the background, in order with the others'.",
    "post-rewrite": "0: git does not wait. Its work goes on in the background, in order with the others'.",
    "pre-push": "after that it is stopped, and says so: a push is never made later, in the background.",
}

_GUARDS = {
    "post-commit": "",
    # The push is refused by the earlier hook: push no state either.
    "pre-push": "if [ $status -ne 0 ]; then\n    exit $status\nfi",
    "post-rewrite": "",
}

# A rebase runs post-commit for every commit it replays; their links come from
# post-rewrite instead, so skip them here without starting Python.
_REBASE_GUARD = (
    'if [ -d "$git_dir/rebase-merge" ] || [ -d "$git_dir/rebase-apply" ]; then\n'
    "    exit $status\n"
    "fi"
)


def render_shim(name: str, python: str | None = None) -> str:
    """The shim for hook ``name``; ``python`` is the interpreter that runs opal (None: ``opal`` on PATH)."""
    if name not in HOOKS:
        raise UsageError(f"opal has no {name} hook", hint=f"its hooks are {', '.join(HOOKS)}")
    stdin = name != "post-commit"
    push = name == "pre-push"
    return _SHIM.format(
        name=name,
        marker=MARKER,
        python=shlex.quote(python) if python else '""',
        suffix=CHAINED_SUFFIX,
        chained_dir=CHAINED_DIR,
        key="pushTimeout" if push else "timeout",
        default=PUSH_TIMEOUT_DEFAULT if push else TIMEOUT_DEFAULT,
        after=_AFTER[name],
        stdin_read=_STDIN_READ if stdin else "",
        run_chained=_RUN_CHAINED_STDIN if stdin else _RUN_CHAINED,
        guard=_GUARDS[name],
        rebase_guard=_REBASE_GUARD if name == "post-commit" else "",
        head=" HEAD" if name == "post-commit" else "",
        code='code=${dirs#*"$nl"}' if name == "post-commit" else "code=-",
        kind='${1:-rebase}' if name == "post-rewrite" else "-",
        save_input="printf '%s' \"$input\" 2>/dev/null >\"$queue/input.$$\"" if stdin else "",
        run_opal=_RUN_OPAL_STDIN if stdin else _RUN_OPAL,
        give_up=_GIVE_UP_STOP if push else _GIVE_UP_DETACH,
        detach="" if push else _DETACH.format(run=f"printf '%s' \"$input\" | \"$@\"" if stdin else '"$@" </dev/null'),
    ).replace("\n\n\n", "\n\n")


# ------------------------------------------------------------------ install / verify / uninstall


def ensure_repo(cwd: str, env: Mapping[str, str] | None = None, *, shared: bool = False) -> tuple[Repository, bool]:
    """The opal repository of the git repository around ``cwd``, set up first if needed.

    With ``env``, a hooks folder shared with other repositories is refused unless
    ``shared`` (:func:`check_folder`), before anything is set up.
    """
    from opalgit.store.repo import _find

    found = _find(cwd)
    if found is None or found[0] != "git":
        raise UsageError(
            f"{os.path.abspath(cwd)} is not inside a git repository, so there are no git commits to hook",
            hint="run 'opal hooks install' inside your project's git repository",
        )
    repo = Repository(found[1])
    if env is not None:
        check_folder(repo, env, shared=shared)
    if repo.initialized:
        return repo, False
    porcelain.init(cwd)
    return Repository.discover(cwd), True


def check_folder(repo: Repository, env: Mapping[str, str], *, shared: bool = False) -> None:
    """Refuse a hooks folder that other repositories share, unless ``shared``: the shims
    do nothing in a repository without opal, but they still run in every commit there."""
    why = shared_hooks_path(repo, env)
    if why and not shared:
        raise UsageError(
            f"{why}; opal installs into a repository's own hooks only",
            hint="'opal hooks install --shared' installs there anyway (the hooks do nothing in repositories without opal); "
            "or give this repository a hooks folder of its own: git config core.hooksPath .git/hooks",
        )


def hooks_dir(repo: Repository, env: Mapping[str, str]) -> str:
    """Where git looks for this repository's hooks (``core.hooksPath`` honoured), as git itself says."""
    if repo.own:
        raise UsageError(
            "this opal store is not inside a git repository, so there are no git commits to hook",
            hint="run 'opal init' and 'opal hooks install' inside your project's git repository",
        )
    from opalgit.store import transport

    proc = transport.run_git(repo, ["rev-parse", "--git-path", "hooks"], env)
    if proc.returncode or not proc.stdout.strip():
        raise OpalError(f"git cannot tell where the hooks of {repo.workdir} are: {proc.stderr.strip()}")
    path = proc.stdout.strip()
    base = repo.workdir if repo.workdir and os.path.isdir(repo.workdir) else repo.git_dir
    return os.path.normpath(os.path.join(base, path))


def shared_hooks_path(repo: Repository, env: Mapping[str, str]) -> str | None:
    """Why the hooks folder is shared with other repositories, or None when it is this
    repository's own (``.git/hooks``, or a ``core.hooksPath`` of this repository that
    points inside it, as husky's ``.husky/_`` does)."""
    from opalgit.store import transport

    proc = transport.run_git(repo, ["config", "--show-scope", "--get", "core.hooksPath"], env)
    if proc.returncode or not proc.stdout.strip():
        return None  # not set: .git/hooks
    scope, _, value = proc.stdout.strip().partition("\t")
    if scope not in ("local", "worktree"):
        return f"core.hooksPath is set in your {scope} git config ({value}), so every repository of yours runs the hooks there"
    folder = os.path.realpath(hooks_dir(repo, env))
    inside = [os.path.realpath(d) for d in (repo.workdir, repo.git_dir, repo.common_dir) if d]
    if any(folder == d or folder.startswith(d.rstrip(os.sep) + os.sep) for d in inside):
        return None
    return f"core.hooksPath points outside this repository ({value}), where other repositories may run the hooks too"


@dataclass
class HookStatus:
    name: str
    path: str
    state: str  # "installed", "outdated" (ours, but another opal or an older shim), "missing", "foreign",
    # "displaced" (a hook manager moved ours to NAME.legacy / NAME.old and put its own in place)
    chained: str | None  # the earlier hook opal runs first, if any

    def to_json(self) -> dict:
        return {"hook": self.name, "path": self.path, "state": self.state, "chained": self.chained}


def _is_shim(path: str) -> bool:
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return _MARKER_PREFIX in fh.read(4096)
    except OSError:
        return False


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _same_file(a: str, b: str) -> bool:
    """Two regular files with the same bytes and mode (a hook manager wrote its hook
    again over opal's shim, beside the copy opal chained)."""
    try:
        sa, sb = os.lstat(a), os.lstat(b)
        if not (stat.S_ISREG(sa.st_mode) and stat.S_ISREG(sb.st_mode)):
            return False
        if stat.S_IMODE(sa.st_mode) != stat.S_IMODE(sb.st_mode):
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def status(repo: Repository, env: Mapping[str, str], python: str | None = None) -> list[HookStatus]:
    directory = hooks_dir(repo, env)
    out = []
    for name in HOOKS:
        path = os.path.join(directory, name)
        chained = path + CHAINED_SUFFIX
        has_chained = os.path.lexists(chained)
        if _is_shim(path):
            state = "installed" if _read(path) == render_shim(name, python) and _link_ok(directory, name) else "outdated"
        elif any(_is_shim(path + suffix) for suffix in DISPLACED_SUFFIXES):
            state = "displaced"  # a hook manager moved opal's aside: install again
        elif os.path.lexists(path):
            state = "foreign"
        else:
            state = "missing"
        out.append(HookStatus(name, path, state, chained if has_chained else None))
    return out


def _write_executable(path: str, text: str) -> None:
    replace_atomically(path, text.encode("utf-8"), mode=0o755)


def _link_target(name: str) -> str:
    return os.path.join(os.pardir, name + CHAINED_SUFFIX)


def _link_ok(directory: str, name: str) -> bool:
    """A chained hook has its link with the hook's own name; no chained hook, no link."""
    link = os.path.join(directory, CHAINED_DIR, name)
    if not os.path.lexists(os.path.join(directory, name + CHAINED_SUFFIX)):
        return not os.path.lexists(link)
    return os.path.islink(link) and os.readlink(link) == _link_target(name)


def _put_link(directory: str, name: str) -> None:
    """``.opal-chained/NAME -> ../NAME.opal-chained``: a chained hook that is not a shell
    script runs through it, so that it sees its own name in argv[0]."""
    folder = os.path.join(directory, CHAINED_DIR)
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, name)
    if os.path.lexists(link):
        if os.path.islink(link) and os.readlink(link) == _link_target(name):
            return
        os.unlink(link)
    os.symlink(_link_target(name), link)


def _drop_link(directory: str, name: str) -> None:
    folder = os.path.join(directory, CHAINED_DIR)
    link = os.path.join(folder, name)
    if os.path.islink(link):
        os.unlink(link)
    try:
        os.rmdir(folder)  # only once it is empty: the folder was opal's
    except OSError:
        pass


@dataclass
class HookChange:
    name: str
    path: str
    action: str  # "installed", "updated", "unchanged", "chained" (installed, earlier hook kept), "removed", "restored", "absent", "skipped"
    detail: str | None = None

    def to_json(self) -> dict:
        return {"hook": self.name, "path": self.path, "action": self.action, "detail": self.detail}


def install(repo: Repository, env: Mapping[str, str], python: str | None, *, shared: bool = False) -> list[HookChange]:
    """Put the shims in place; a hook already there is kept and chained, never overwritten.

    A hooks folder that other repositories share (``shared_hooks_path``) is refused
    unless ``shared``: the shims do nothing in a repository without opal, but they are
    still a change to every one of those repositories' commits.
    """
    check_folder(repo, env, shared=shared)
    directory = hooks_dir(repo, env)
    os.makedirs(directory, exist_ok=True)
    # Check everything first, so that a refusal changes nothing.
    for name in HOOKS:
        path = os.path.join(directory, name)
        chained = path + CHAINED_SUFFIX
        if os.path.lexists(path) and not _is_shim(path) and os.path.lexists(chained) and not _same_file(path, chained):
            raise UsageError(
                f"{path} is not opal's, and {os.path.basename(chained)} already exists beside it",
                hint=f"move one of them away (opal keeps the earlier hook as {os.path.basename(chained)}), then install again",
            )
    return [_install_one(directory, name, render_shim(name, python)) for name in HOOKS]


#: Where hook managers move a hook they find in their way when they install: pre-commit
#: runs ``NAME.legacy`` before its own, lefthook keeps ``NAME.old`` and runs it no more.
DISPLACED_SUFFIXES = (".legacy", ".old")


def _drop_displaced(directory: str, name: str) -> list[str]:
    """Remove opal's own shims that a hook manager moved aside: under pre-commit one
    would run opal's shim, which runs pre-commit again ("installed in migration mode");
    under lefthook it is dead. Returns their names."""
    out = []
    for suffix in DISPLACED_SUFFIXES:
        moved = os.path.join(directory, name + suffix)
        if _is_shim(moved):
            os.unlink(moved)
            out.append(os.path.basename(moved))
    return out


def _install_one(directory: str, name: str, text: str) -> HookChange:
    change = _install_shim(directory, name, text)
    dropped = _drop_displaced(directory, name)
    if dropped:
        note = f"removed opal's hook that another hook manager had moved to {', '.join(dropped)}"
        change.detail = f"{change.detail}; {note}" if change.detail else note
    return change


def _install_shim(directory: str, name: str, text: str) -> HookChange:
    path = os.path.join(directory, name)
    chained = path + CHAINED_SUFFIX
    if _is_shim(path):
        action = "unchanged" if _read(path) == text and _link_ok(directory, name) else "updated"
        if action == "updated":
            _write_executable(path, text)
        if os.path.lexists(chained):
            _put_link(directory, name)
        else:
            _drop_link(directory, name)
        return HookChange(name, path, action)
    if os.path.lexists(path):
        again = os.path.lexists(chained)  # the same bytes as the chained copy (checked above)
        os.replace(path, chained)  # a rename keeps bytes, mode and symlinks exactly
        _put_link(directory, name)
        _write_executable(path, text)
        if again:
            return HookChange(name, path, "updated", f"{name} had been written again over opal's hook; it runs first as before")
        return HookChange(name, path, "chained", f"your earlier {name} runs first (kept as {os.path.basename(chained)})")
    _write_executable(path, text)
    if os.path.lexists(chained):
        _put_link(directory, name)
        return HookChange(name, path, "installed", f"runs {os.path.basename(chained)} first")
    return HookChange(name, path, "installed")


def uninstall(repo: Repository, env: Mapping[str, str]) -> list[HookChange]:
    """Remove the shims and put back what was there before them."""
    directory = hooks_dir(repo, env)
    changes = []
    for name in HOOKS:
        path = os.path.join(directory, name)
        chained = path + CHAINED_SUFFIX
        _drop_displaced(directory, name)
        if os.path.lexists(path) and not _is_shim(path):
            if _same_file(path, chained):
                # A hook manager wrote its hook again over opal's (husky does on every
                # 'npm install'): opal's copy of it is all that is left to remove.
                _drop_link(directory, name)
                os.unlink(chained)
                detail = "it had been written again over opal's; opal's copy of it is removed"
                changes.append(HookChange(name, path, "removed", detail))
                continue
            changes.append(HookChange(name, path, "skipped", "not opal's hook; left as it is"))
            continue
        _drop_link(directory, name)
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


def post_commit(repo: Repository, env: Mapping[str, str], code_sha: str | None = None) -> HookResult:
    """Record this worktree's agent session with the new code commit, and link the two.

    ``code_sha``: the code commit git had just made when the hook ran (its work may run
    later, when HEAD has moved on); None: HEAD now.
    """
    if repo.workdir is None or (code_sha is None and _rebasing(repo)):
        return HookResult()
    code = links.head_commit(repo) if code_sha is None else links._code(repo, bytes.fromhex(code_sha))
    if code is None:
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
    from opalgit.porcelain.push import push  # only here: the post-commit hook does not need it

    res = push(repo, env, remote_name or url, branch)
    if res.status == "up-to-date" and not res.links:
        return HookResult()
    return HookResult(f"opal: pushed state branch {res.branch} to {res.remote}/{res.remote_branch} ({res.status})")


# ------------------------------------------------------------------ each hook's work, in its turn


def job_data(repo: Repository, name: str, args: Mapping[str, object], shim: int | None) -> dict | None:
    """What hook ``name`` saw when git ran it, for its work to run on later; None: it has no
    work (a post-commit on an unborn branch, or one that a rebase replays). With a shim,
    the journal holds the rest (:mod:`hookqueue`)."""
    data = {"git_dir": repo.git_dir, **args}
    if name == "post-commit" and shim is None:
        if _rebasing(repo):
            return None
        code = links.head_commit(repo)
        if code is None:
            return None
        data["code"] = code.oid.hex()
    return data


def _work(repo: Repository, name: str, data: Mapping, env: Mapping[str, str]) -> HookResult:
    if name == "post-commit":
        return post_commit(repo, env, data.get("code"))
    if name == "post-rewrite":
        return post_rewrite(repo, str(data.get("kind") or "rebase"), list(data.get("lines") or []))
    if name == "pre-push":
        return pre_push(repo, env, str(data.get("remote") or ""), str(data.get("url") or ""), list(data.get("lines") or []))
    raise UsageError(f"opal has no {name} hook")


def _redo(repo: Repository, job: hookqueue.Job, env: Mapping[str, str], said: list[str]) -> None:
    """The work of a hook run that no process is on (it died, or has not started yet);
    what it says goes to ``said``."""
    if job.hook == "pre-push":
        hookqueue.record_failure(
            repo.opal_dir, job.hook,
            "a pre-push hook run was stopped before it ended, and its state push is not redone later: run 'opal push'",
            said=False,
        )
        return
    git_dir = str(job.data.get("git_dir") or repo.git_dir)
    try:
        where = repo if os.path.normpath(git_dir) == os.path.normpath(repo.git_dir) else Repository(git_dir)
        res = hookqueue.patiently(lambda: _work(where, job.hook, job.data, env))
        if res.message:
            said.append(f"{res.message} (work left by an earlier {job.hook} hook run)")
    except ConflictError:
        raise  # still locked: the job stays for the next hook run
    except Exception as exc:  # noqa: BLE001 -- kept and said; a job that always fails must not block the queue
        what = exc.message if isinstance(exc, OpalError) else f"{type(exc).__name__}: {exc}"
        hookqueue.record_failure(repo.opal_dir, job.hook, f"(work of an earlier hook run) {what}", said=False)


def run_in_turn(repo: Repository, name: str, data: dict, env: Mapping[str, str], shim: int | None = None) -> HookResult:
    """Hook ``name``'s work, after the work of every hook run before it (:mod:`hookqueue`);
    ``shim``: the pid of the shim that put it in the journal.

    Raises like the hook's work does. The repository's lock is waited for patiently:
    past the shim's timeout nobody is waiting for this process.
    """
    ticket = hookqueue.take(repo.opal_dir, name, data, shim)
    if ticket is None:
        return HookResult()  # another hook run did this work (this process started late)
    data = ticket.job.data
    said: list[str] = []
    try:
        hookqueue.wait_turn(ticket, lambda job: _redo(repo, job, env, said))
    except BaseException:
        if name == "pre-push":
            ticket.done()  # a push is never made later, behind the user's back
        else:
            ticket.release()  # this work is not done: the next hook run does it
        raise
    try:
        res = hookqueue.patiently(lambda: _work(repo, name, data, env))
    finally:
        ticket.done()
    return HookResult("\n".join([*said, *([res.message] if res.message else [])]) or None)

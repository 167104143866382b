"""``opal hook NAME`` (hidden): what the git hook shims run. Never fails the git command.

Every ``git commit`` runs it (post-commit): it imports only what the hooks need, no remote.
"""

from __future__ import annotations

import os
import signal

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.errors import NothingToDoError, OpalError
from opalgit.hooks import install as hooks
from opalgit.store.repo import Repository


@cli.group("hook", hidden=True, context_settings=CONTEXT)
def hook_group() -> None:
    """Internal: what the git hook shims run. Never fails the git command."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


class HookStopped(Exception):
    """The shim stopped this hook (SIGTERM after hooks.pushTimeout)."""


def _stop(signum, frame):  # noqa: ARG001
    raise HookStopped()


def _run_hook(c: Ctx, name: str, args: dict) -> None:
    """Hook ``name``'s work in its turn (hooks.run_in_turn); whatever happens, one line
    on stderr at most, exit status 0. A failure after the shim stopped waiting is kept
    for 'opal hooks status' and the next hook run."""
    from opalgit.hooks import queue as hookqueue

    repo = None
    said = hookqueue.shim_waiting(os.environ.get("OPAL_HOOK_OUTPUT"))
    try:
        repo = Repository.discover(c.cwd)
        # Said only where someone reads it: a shim that waits, or a run by hand. A shim
        # that does not wait (the default) said them itself before it started opal.
        if said or not os.environ.get("OPAL_HOOK_SHIM"):
            for line in hookqueue.unsaid_failures(repo.opal_dir)[:3]:
                click.echo(line, err=True)
        shim = os.environ.get("OPAL_HOOK_SHIM", "")
        shim_pid = int(shim) if shim.isdigit() else None
        data = hooks.job_data(repo, name, args, shim_pid)
        if data is None:
            return
        res = hooks.run_in_turn(repo, name, data, os.environ, shim_pid)
        for line in (res.message or "").splitlines():
            click.echo(_one_line(line), err=True)
        return
    except NothingToDoError:
        return
    except (HookStopped, KeyboardInterrupt):
        # The shim stopped it and said so (or the user pressed Ctrl-C): nothing to keep.
        click.echo(f"opal: {name} hook stopped before it ended (git is not affected)", err=True)
        return
    except OpalError as exc:
        hint = f"; {exc.hint}" if exc.hint else ""
        line = _one_line(f"opal: {name} hook skipped: {exc.message}{hint} (git is not affected)")
    except Exception as exc:  # any bug: still one line, and the git command goes on
        line = _one_line(f"opal: {name} hook failed: {type(exc).__name__}: {exc} (git is not affected)")
    click.echo(line, err=True)
    # Where to keep it: the repository's, or (opal could not even open it) the folder of
    # the shim's output file, which is that repository's opal folder.
    output = os.environ.get("OPAL_HOOK_OUTPUT") or ""
    opal_dir = repo.opal_dir if repo is not None else (os.path.dirname(output) if output else None)
    if opal_dir and os.path.isdir(opal_dir):
        said = said and hookqueue.shim_waiting(output)
        try:
            hookqueue.record_failure(opal_dir, name, line, said=said)
        except OSError:
            pass


def _stdin_lines() -> list[str]:
    try:
        return click.get_text_stream("stdin").read().splitlines()
    except (OSError, ValueError):
        return []


@hook_group.command("post-commit", context_settings=CONTEXT)
@pass_ctx
def hook_post_commit(c: Ctx) -> None:
    """Internal: record this worktree's agent state and link it to the new code commit.

    \b
    Examples:
      opal hook post-commit       # run by .git/hooks/post-commit
    """
    _run_hook(c, "post-commit", {})


@hook_group.command("post-rewrite", context_settings=CONTEXT)
@click.argument("kind", required=False, default="rebase")
@pass_ctx
def hook_post_rewrite(c: Ctx, kind: str) -> None:
    """Internal: move links to the commits that 'git commit --amend' or 'git rebase' rewrote.

    Reads "OLD NEW" lines on standard input.

    \b
    Examples:
      opal hook post-rewrite rebase < rewritten-list
    """
    _run_hook(c, "post-rewrite", {"kind": kind, "lines": _stdin_lines()})


@hook_group.command("pre-push", context_settings=CONTEXT)
@click.argument("remote_name", required=False, default="")
@click.argument("url", required=False, default="")
@pass_ctx
def hook_pre_push(c: Ctx, remote_name: str, url: str) -> None:
    """Internal: with push.withCode, push the current state branch along with the code.

    \b
    Examples:
      opal hook pre-push origin git@example.com:team/app.git < ref-lines
    """
    # The shim runs this beside itself, where the shell leaves Ctrl-C ignored: a push
    # stops on Ctrl-C, and on the shim's SIGTERM after hooks.pushTimeout, and the git
    # it runs stops with it (subprocess kills its child when the wait is interrupted).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _stop)
    _run_hook(c, "pre-push", {"remote": remote_name, "url": url, "lines": _stdin_lines()})

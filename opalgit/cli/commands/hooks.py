"""``opal hooks``: install, uninstall and check the git hooks that record the agent state with every
code commit (the hooks themselves run ``opal hook NAME``, :mod:`opalgit.cli.commands.hook`).
"""

from __future__ import annotations

import os
import sys
import time

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.hooks import install as hooks


@cli.group("hooks", context_settings=CONTEXT)
def hooks_group() -> None:
    """Git hooks that record the agent's state with every code commit.

    Once installed, every 'git commit' also records the agent sessions of the worktree
    (as 'opal commit' would) and links the code commit to that state; 'opal at REV'
    shows it later. Hooks that were already there keep running first. See
    docs/hooks.md.
    """


@hooks_group.command("install", context_settings=CONTEXT)
@click.option("--shared", is_flag=True, help="Install into a hooks folder that other repositories share too.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def hooks_install(c: Ctx, shared: bool, as_json: bool) -> None:
    """Install the post-commit, post-rewrite and pre-push hooks into this repository.

    They go where git looks for hooks (core.hooksPath if set, else .git/hooks, shared
    by linked worktrees). A hook already there is never overwritten: it is kept as
    NAME.opal-chained and runs first, with the same arguments and input, and its
    exit status is kept. The hooks run this same opal (this Python interpreter),
    falling back to 'opal' on PATH. Sets opal up first if needed.

    A core.hooksPath set in your global or system git config, or pointing outside
    this repository, is shared with other repositories: opal refuses it unless
    --shared (the hooks then do nothing in repositories without opal).

    git does not wait for opal's post-commit and post-rewrite work: it runs in the
    background, in order (hooks.timeout SECONDS makes git wait up to that long); the
    pre-push hook is stopped after hooks.pushTimeout seconds (60 unless set).

    \b
    Examples:
      opal hooks install
      git commit -m "parser"      # now also records the agent state
      opal at HEAD                # the state recorded with it
      opal hooks install --shared # core.hooksPath is ~/.githooks, for every repository
    """
    repo, created = hooks.ensure_repo(c.cwd, os.environ, shared=shared)
    changes = hooks.install(repo, os.environ, sys.executable, shared=shared)
    if as_json:
        c.json({"initialized": created, "hooks": [h.to_json() for h in changes]})
        return
    if created:
        c.out(f"Initialized opal in {repo.workdir}")
    folder = os.path.dirname(changes[0].path)
    c.out(f"Hooks in {folder}:")
    for h in changes:
        c.out(f"  {h.name:13} {h.action}{': ' + h.detail if h.detail else ''}")
    if repo.workdir and (folder + os.sep).startswith(repo.workdir.rstrip(os.sep) + os.sep) and not folder.startswith(repo.common_dir):
        c.note(f"{folder} is inside your working tree (core.hooksPath): git status shows the shims")
    why = hooks.shared_hooks_path(repo, os.environ)
    if why:
        c.note(f"{why}: the hooks do nothing in repositories without opal")
    if any(os.path.lexists(os.path.join(folder, n)) for n in ("h", "husky.sh")) and os.path.basename(folder) == "_":
        c.note("husky writes this folder again on 'npm install' (its prepare script): run 'opal hooks install' after it")
    c.out("From now on 'git commit' records the agent state too; 'opal hooks uninstall' undoes this.")


@hooks_group.command("uninstall", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def hooks_uninstall(c: Ctx, as_json: bool) -> None:
    """Remove opal's hooks and put back exactly the hooks that were there before.

    The states and links already recorded stay.

    \b
    Examples:
      opal hooks uninstall
    """
    repo = c.repo()
    changes = hooks.uninstall(repo, os.environ)
    if as_json:
        c.json({"hooks": [h.to_json() for h in changes]})
        return
    for h in changes:
        c.out(f"  {h.name:13} {h.action}{': ' + h.detail if h.detail else ''}")


@hooks_group.command("status", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def hooks_status(c: Ctx, as_json: bool) -> None:
    """Show whether opal's hooks are in place, and what they chain to.

    States: installed; outdated (opal's, but written by another opal installation:
    'opal hooks install' refreshes it); missing; foreign (another hook, not chained);
    displaced (a hook manager such as pre-commit or lefthook installed its hook and
    moved opal's aside: 'opal hooks install' chains it again).

    \b
    Examples:
      opal hooks status
      opal hooks status --json
    """
    from opalgit.hooks import queue as hookqueue
    from opalgit.times import iso_seconds

    repo = c.repo()
    sts = hooks.status(repo, os.environ, sys.executable)
    with_code = hooks._truthy(repo.config_get("push.withCode"))
    waiting = hookqueue.pending(repo.opal_dir)
    failed = hookqueue.failures(repo.opal_dir)
    shared = hooks.shared_hooks_path(repo, os.environ)
    if as_json:
        c.json({
            "hooks": [s.to_json() for s in sts], "push_with_code": with_code, "shared": shared,
            "pending": [{"hook": j.hook, "pid": j.pid, "data": j.data} for j in waiting],
            "failures": [{**f, "time": iso_seconds(f.get("time")) if isinstance(f.get("time"), (int, float)) else None}
                         for f in failed],
        })
        return
    c.out(f"Hooks folder: {os.path.dirname(sts[0].path)}")
    for s in sts:
        extra = f" (runs {os.path.basename(s.chained)} first)" if s.chained and s.state != "missing" else ""
        c.out(f"  {s.name:13} {s.state}{extra}")
    c.out(f"push.withCode: {'on: git push also pushes the current state branch' if with_code else 'off'}")
    if shared:
        c.out(f"Shared: {shared}")
    for j in waiting:
        c.out(f"Still to do: {j.hook} (process {j.pid}{', ' + j.data['code'][:7] if j.data.get('code') else ''})")
    for f in failed[-10:]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(f.get("time", 0)))
        c.out(f"Failed {when}: {f.get('hook')}: {f.get('message')}")
    if any(s.state != "installed" for s in sts):
        c.note("run 'opal hooks install' to install or refresh them")

"""Commands for hooks and remotes: ``opal hooks``, ``opal at``, ``opal push/fetch/pull``,
``opal clone-state``, ``opal config``, and the internal ``opal hook NAME`` that the hook
shims run.

Importing this module attaches the commands to :data:`opalgit.cli.main.cli`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import TYPE_CHECKING

import click

from opalgit import porcelain
from opalgit.cli import render
from opalgit.cli.main import CONTEXT, Ctx, cli, pass_ctx
from opalgit.errors import NothingToDoError, OpalError, UsageError
from opalgit.history.tokens import estimate, human
from opalgit.hooks import install as hooks
from opalgit.plural import count
from opalgit.store.argv import check_url
from opalgit.store.argv import command as cmdline
from opalgit.store.repo import Repository
from opalgit.sync import links

if TYPE_CHECKING:
    from opalgit.sync.fetch import FetchResult

# opalgit.sync's push and fetch are imported by the commands that talk to remotes, not here: the
# post-commit hook ('opal hook post-commit', run by every git commit) does not need it.

# ------------------------------------------------------------------------------ hooks


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
    from opalgit.cli.jsonout import iso_seconds
    from opalgit.hooks import queue as hookqueue

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


# ------------------------------------------------------------------------------ internal: opal hook NAME


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


# ------------------------------------------------------------------------------ at


@cli.command("at", context_settings=CONTEXT)
@click.argument("rev", default="HEAD", metavar="[REV]")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def at(c: Ctx, rev: str, as_json: bool) -> None:
    """Show the agent state recorded with code commit REV (a git revision).

    REV is a revision of your code (HEAD~4, a tag, a commit id). If that commit has
    no state linked to it, the state of its nearest linked ancestor is shown, and
    said so. States fetched from teammates count too.

    \b
    Examples:
      opal at                     # the state of the current code commit
      opal at HEAD~4
      opal at v1.2 --json
      opal export $(opal at v1.2 --json | jq -r .state) --to codex
    """
    repo = c.repo()
    found = links.link_at(repo, rev)
    info = porcelain.commit_info(repo, found.state, porcelain.branch_labels(repo))
    if as_json:
        c.json({**found.to_json(), "commit": info.to_json()})
        return
    asked = found.asked
    lines = [f"Code commit {c.style(asked.short, fg='yellow')}  {asked.subject}"]
    if found.distance:
        back = f"{count(found.distance, 'commit')} back"
        lines.append(f"  has no state of its own; showing the one linked to its ancestor {found.code.short} ({back}): {found.code.subject}")
    labels = f" ({', '.join(info.branches)})" if info.branches else ""
    lines.append(f"State       {c.style(render.short(found.state, 7), fg='yellow')}{labels}  {info.message.splitlines()[0] if info.message else ''}")
    h = info.header
    who = f"by {info.author}, {render.when(info.time, info.offset)}"
    if h.session:
        lines.append(f"            {h.session.agent} session {h.session.id}, {count(h.turns, 'turn')}, ~{human(estimate(h.chars))} tokens")
    lines.append(f"            {who}" + (f"; fetched from {found.remote}" if found.remote else ""))
    c.out(lines)
    c.note(f"continue from it with 'opal export {render.short(found.state, 10)} --to AGENT'")


# ------------------------------------------------------------------------------ push / fetch / pull


@cli.command("push", context_settings=CONTEXT)
@click.argument("remote_name", required=False, metavar="[REMOTE]")
@click.argument("branch", required=False, metavar="[BRANCH]")
@click.option("-f", "--force", is_flag=True, help="Overwrite the remote branch if it still holds what you last fetched.")
@click.option("--allow-secrets", is_flag=True, help="Push even if a secret in clear is found (see 'opal secrets scan').")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def push(c: Ctx, remote_name: str | None, branch: str | None, force: bool, allow_secrets: bool, as_json: bool) -> None:
    """Push a state branch (default: the current one) and its code links to a remote.

    REMOTE defaults to the upstream remote of your current git branch, else origin.
    It runs your own git, so your ssh keys and credential helpers work as for code.
    BRANCH may be LOCAL:NAME to push under another name; with 'opal config
    push.namespace NAME' your branches go to NAME/BRANCH on remotes. A remote branch
    that someone else moved on is never overwritten: the push fails and says why
    (then 'opal pull'). --force overwrites it, only if it still holds what your last
    fetch saw. The operation log stays local. Everything the push would send is
    scanned for secrets first; a secret in clear stops the push, naming the turns.

    \b
    Examples:
      opal push
      opal push origin try-sqlite
      opal push origin main:alice/main
      opal push --force           # after 'opal fetch', overwrite theirs
    """
    from opalgit.porcelain.secrets import gate
    from opalgit.sync.push import push as push_state

    repo = c.repo()
    res = push_state(repo, os.environ, remote_name, branch, force=force, allow_secrets=allow_secrets, gate=gate)
    if as_json:
        c.json(res.to_json())
        return
    links_s = f", {count(res.links, 'code link')}" if res.links else ""
    if res.status == "up-to-date" and not res.links:
        c.out(f"Everything up to date ({res.branch} = {res.remote}/{res.remote_branch} {render.short(res.oid, 7)})")
        return
    c.out(f"Pushed {res.branch} to {res.remote}/{res.remote_branch} ({res.status}{links_s}): {render.short(res.oid, 7)}")


@cli.command("fetch", context_settings=CONTEXT)
@click.argument("remote_name", required=False, metavar="[REMOTE]")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def fetch(c: Ctx, remote_name: str | None, as_json: bool) -> None:
    """Fetch the state branches and code links of a remote (default: origin).

    They become remote-tracking branches, REMOTE/BRANCH, usable as revisions
    ('opal log origin/main', 'opal export origin/main --to codex'); your own branches
    are not changed. 'opal at' finds teammates' states through the fetched links.

    \b
    Examples:
      opal fetch
      opal fetch upstream
      opal log origin/try-sqlite
    """
    from opalgit.sync.fetch import fetch as fetch_state

    repo = c.repo()
    res = fetch_state(repo, os.environ, remote_name)
    if as_json:
        c.json(res.to_json())
        return
    _print_fetch(c, res)


def _print_fetch(c: Ctx, res: FetchResult) -> None:
    if not res.changed:
        c.out(f"{res.remote}: up to date")
        return
    c.out(f"From {res.remote}:")
    for b, (old, new) in res.branches.items():
        if old is None and new is not None:
            c.out(f"  * [new branch]      {b} -> {res.remote}/{b}")
        elif new is None:
            c.out(f"  - [deleted]         {res.remote}/{b}")
        else:
            assert old is not None
            c.out(f"    {render.short(old, 7)}..{render.short(new, 7)}  {b} -> {res.remote}/{b}")
    if res.links:
        c.out(f"  {count(res.links, 'code link')} new or changed ('opal at REV' uses them)")


@cli.command("pull", context_settings=CONTEXT)
@click.argument("remote_name", required=False, metavar="[REMOTE]")
@click.argument("branch", required=False, metavar="[BRANCH]")
@click.option("-f", "--force", is_flag=True, help="Fast-forward even if it leaves out turns of your branch.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def pull(c: Ctx, remote_name: str | None, branch: str | None, force: bool, as_json: bool) -> None:
    """Fetch, then fast-forward the current branch to REMOTE/BRANCH.

    BRANCH is the name on the remote (default: the current branch's). If both sides
    have new commits, nothing is changed and opal says to merge them. A fast-forward
    that would leave out turns of your branch (a teammate rewound or edited, then
    pushed) is refused, saying how many; --force takes it anyway. After a pull the
    branch tracks the session the pulled state was recorded from, so 'opal commit'
    never records your old session over the pulled turns; to continue it here,
    'opal export --to AGENT'. 'opal undo' undoes a pull, head and tracked session.

    \b
    Examples:
      opal pull
      opal pull origin alice/main
      opal pull --force           # take theirs, even with fewer turns
      opal undo                   # back to where the branch was
    """
    from opalgit.porcelain.pull import pull as pull_state

    repo = c.repo()
    res = pull_state(repo, os.environ, remote_name, branch, force=force)
    if as_json:
        c.json(res.to_json())
        return
    if res.fetch.changed:
        _print_fetch(c, res.fetch)
    if res.status == "up-to-date":
        c.out(f"Already up to date ({res.branch} = {res.remote_branch})")
    elif res.status == "ahead":
        c.out(f"{res.branch} is ahead of {res.remote_branch}; nothing to pull ('opal push' sends your commits)")
    elif res.status == "created":
        c.out(f"Branch {res.branch} starts at {res.remote_branch} ({render.short(res.new, 7)})")
    else:
        assert res.old is not None
        c.out(f"Fast-forward {res.branch} {render.short(res.old, 7)}..{render.short(res.new, 7)} from {res.remote_branch}")
    if res.left_out:
        c.note(f"left out {res.left_out} turn{'s' if res.left_out != 1 else ''} of {res.branch} ('opal undo' takes them back)")
    if res.retracked and res.session:
        agent, _, sid = res.session.partition(":")
        c.note(f"{res.branch} now tracks {agent} session {sid}, the one {res.remote_branch} was recorded from "
               f"(to continue it here: 'opal export --to {agent}')")


@cli.command("clone-state", context_settings=CONTEXT)
@click.argument("url")
@click.option("--name", help="Name of the remote (default: the git remote with that URL, else origin).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def clone_state(c: Ctx, url: str, name: str | None, as_json: bool) -> None:
    """Get the agent state kept at URL into this checkout (after 'git clone').

    Sets opal up if needed, fetches every state branch and code link, and starts the
    current branch at the remote's branch of the same name if it has no commits yet.
    If URL is not one of your git remotes it is recorded in opal's own config only
    (remote.NAME.url), so your code remotes are untouched.

    \b
    Examples:
      git clone git@example.com:team/app.git && cd app
      opal clone-state git@example.com:team/app.git
      opal at HEAD~3              # the teammate's state at that code commit
    """
    from opalgit.porcelain.pull import fast_forward
    from opalgit.sync.clone import clone_state

    check_url(url, source="given to clone-state")  # before anything is set up
    porcelain.init(c.cwd)
    repo = c.repo()
    res = clone_state(repo, os.environ, url, name, start=fast_forward)
    if as_json:
        c.json(res.to_json())
        return
    if res.added:
        c.out(f"Remote {res.remote} -> {url} (recorded in opal's config only)")
    if res.fetch.changed:
        _print_fetch(c, res.fetch)
    if not res.branches:
        c.out(f"{res.remote} holds no agent state yet")
    if res.status == "created":
        c.out(f"Branch {res.branch} starts at {res.remote}/{res.branch}")
    if res.branches:
        first = next(iter(res.branches))  # named by the remote: quoted, so pasting runs nothing else
        c.note(f"see '{cmdline('opal', 'log', first)}', 'opal at HEAD', or '{cmdline('opal', 'export', first, '--to', 'AGENT')}'")


# ------------------------------------------------------------------------------ config

#: Settings opal itself reads, and how their values are checked.
KNOWN_KEYS = {
    "push.withcode": ("bool", "git push also pushes the current state branch (through the pre-push hook)"),
    "hooks.timeout": ("seconds", "how long git commit waits for opal's post-commit and post-rewrite hooks (0: not at all)"),
    "hooks.pushtimeout": ("seconds", "how long git push waits for opal's pre-push hook before it is stopped (60)"),
    "push.namespace": ("name", "prefix of your branch names on remotes: NAME/BRANCH ('user': from your git e-mail)"),
}
_BOOLS = {"true": "true", "yes": "true", "on": "true", "1": "true", "false": "false", "no": "false", "off": "false", "0": "false"}


def _check_config(key: str, value: str) -> str:
    parts = key.split(".")
    if len(parts) < 2 or not all(parts) or not parts[0].replace("-", "").isalnum() or not parts[-1].replace("-", "").isalnum():
        raise UsageError(f"{key!r} is not a config key", hint="keys are SECTION.NAME, e.g. push.withCode")
    kind = KNOWN_KEYS.get(key.lower(), (None, None))[0]
    if kind == "bool":
        norm = _BOOLS.get(value.strip().lower())
        if norm is None:
            raise UsageError(f"{key} takes true or false, not {value!r}")
        return norm
    if kind == "seconds":
        v = value.strip()
        if not v or v.startswith(".") or v.count(".") > 1 or not v.replace(".", "").isdigit():
            raise UsageError(f"{key} takes a number of seconds (such as 2 or 0.5), not {value!r}")
        return v
    if kind == "name" and value not in ("", "user"):
        from opalgit.store.refs import check_branch_name

        check_branch_name(value)
    if key.lower().startswith("remote.") and key.lower().endswith(".url"):
        from opalgit.sync.remotes import check_remote_name

        name = key[len("remote.") : -len(".url")]
        check_remote_name(name)
        check_url(value, source=f"remote.{name}.url")
    return value


@cli.command("config", context_settings=CONTEXT)
@click.argument("key", required=False)
@click.argument("value", required=False)
@click.option("--unset", is_flag=True, help="Remove KEY.")
@click.option("-l", "--list", "list_", is_flag=True, help="List every setting.")
@pass_ctx
def config(c: Ctx, key: str | None, value: str | None, unset: bool, list_: bool) -> None:
    """Get or set opal's settings for this repository (.git/opal/config).

    \b
    Settings:
      push.withCode BOOL     plain 'git push' also pushes the current state branch
      push.namespace NAME    push your branches as NAME/BRANCH ('user': your git e-mail's name)
      hooks.timeout SECONDS  git commit waits this long for opal's hooks, which go on in
                             the background (0: git does not wait)
      hooks.pushTimeout SECONDS
                             git push waits this long for the pre-push hook, which is
                             then stopped (60)
      remote.NAME.url URL    a remote for state only (see 'opal clone-state')

    Getting (or unsetting) a key that is not set is an error (exit status 1).

    \b
    Examples:
      opal config push.withCode true
      opal config push.namespace alice
      opal config push.withCode
      opal config --list
      opal config --unset push.namespace
    """
    repo = c.repo()
    cfg = repo.config
    if list_:
        for entry in cfg:
            c.out(f"{entry.name}={entry.value}")
        return
    if not key:
        raise click.UsageError("give a KEY (or --list)")
    if unset:
        try:
            del cfg[key]
        except KeyError:
            raise OpalError(f"{key} is not set", hint="see 'opal config --list'") from None
        return
    if value is None:
        got = repo.config_get(key)
        if got is None:
            raise OpalError(f"{key} is not set", hint="see 'opal config --list'")
        c.out(got)
        return
    cfg[key] = _check_config(key, value)

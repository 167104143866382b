"""``opal pull``: fetch, then fast-forward the current branch."""

from __future__ import annotations

import os

import click

from opalgit.cli import render
from opalgit.cli.commands.fetch import print_fetch
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli

# opalgit.sync is imported when the command runs: listing the commands ('opal --help')
# imports this module, and needs no remote.


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
        print_fetch(c, res.fetch)
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

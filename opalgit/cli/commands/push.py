"""``opal push``: push a state branch and its code links to a remote."""

from __future__ import annotations

import os

import click

from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.plural import count

# opalgit.sync is imported when the command runs: listing the commands ('opal --help')
# imports this module, and needs no remote.


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
    from opalgit.porcelain.push import push as push_state

    repo = c.repo()
    res = push_state(repo, os.environ, remote_name, branch, force=force, allow_secrets=allow_secrets)
    if as_json:
        c.json(res.to_json())
        return
    links_s = f", {count(res.links, 'code link')}" if res.links else ""
    if res.status == "up-to-date" and not res.links:
        c.out(f"Everything up to date ({res.branch} = {res.remote}/{res.remote_branch} {render.short(res.oid, 7)})")
        return
    c.out(f"Pushed {res.branch} to {res.remote}/{res.remote_branch} ({res.status}{links_s}): {render.short(res.oid, 7)}")

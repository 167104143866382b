"""``opal clone-state``: get the agent state kept at a URL into this checkout."""

from __future__ import annotations

import os

import click

from opalgit import porcelain
from opalgit.cli.commands.fetch import print_fetch
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.store.argv import check_url
from opalgit.store.argv import command as cmdline

# opalgit.sync is imported when the command runs: listing the commands ('opal --help')
# imports this module, and needs no remote.


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
    from opalgit.porcelain.clone_state import clone_state as clone_into

    check_url(url, source="given to clone-state")  # before anything is set up
    porcelain.init(c.cwd)
    repo = c.repo()
    res = clone_into(repo, os.environ, url, name)
    if as_json:
        c.json(res.to_json())
        return
    if res.added:
        c.out(f"Remote {res.remote} -> {url} (recorded in opal's config only)")
    if res.fetch.changed:
        print_fetch(c, res.fetch)
    if not res.branches:
        c.out(f"{res.remote} holds no agent state yet")
    if res.status == "created":
        c.out(f"Branch {res.branch} starts at {res.remote}/{res.branch}")
    if res.branches:
        first = next(iter(res.branches))  # named by the remote: quoted, so pasting runs nothing else
        c.note(f"see '{cmdline('opal', 'log', first)}', 'opal at HEAD', or '{cmdline('opal', 'export', first, '--to', 'AGENT')}'")

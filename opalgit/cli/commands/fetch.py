"""``opal fetch``: fetch the state branches and code links of a remote; and how a fetch is printed
(:func:`print_fetch`, which ``opal pull`` and ``opal clone-state`` print too).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.plural import count

if TYPE_CHECKING:
    from opalgit.porcelain.fetch import FetchResult
# opalgit.sync is imported when the command runs: listing the commands ('opal --help')
# imports this module, and needs no remote.


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
    from opalgit.porcelain.fetch import fetch as fetch_state

    repo = c.repo()
    res = fetch_state(repo, os.environ, remote_name)
    if as_json:
        c.json(res.to_json())
        return
    print_fetch(c, res)


def print_fetch(c: Ctx, res: FetchResult) -> None:
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

"""``opal switch``: make another branch the current one (``-`` is the previous one, ``-c`` makes it)."""

from __future__ import annotations

import click

from opalgit import porcelain
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.errors import NothingToDoError


@cli.command(context_settings=CONTEXT)
@click.argument("name")
@click.option("-c", "--create", is_flag=True, help="Create the branch first (at START, default HEAD).")
@click.argument("start", required=False, default="HEAD", metavar="[START]")
@pass_ctx
def switch(c: Ctx, name: str, create: bool, start: str) -> None:
    """Make NAME the current branch: later commits, rewinds and exports act on it.

    NAME '-' is the branch you were on before, as in git.

    \b
    Examples:
      opal switch try-sqlite
      opal switch -                 # back to the previous branch
      opal switch -c retry HEAD:12
    """
    repo = c.repo()
    if name == "-":
        if create:
            raise click.UsageError("switch -c needs a NAME for the new branch, not '-'")
        from opalgit.porcelain.branch import previous_branch

        name = previous_branch(repo)
    try:
        porcelain.switch(repo, name, create=create, start=start)
    except NothingToDoError as exc:
        c.out(exc.message)
        return
    c.out(f"Switched to a new branch {name}" if create else f"Switched to branch {name}")

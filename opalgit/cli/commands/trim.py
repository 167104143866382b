"""``opal trim``: shrink huge tool outputs to a marked excerpt."""

from __future__ import annotations

import click

from opalgit.cli.commands.drop import print_edit
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.errors import NothingToDoError


@cli.command(context_settings=CONTEXT)
@click.option("--tool-output-over", "over", required=True, metavar="SIZE", help="Trim tool outputs longer than this (characters; 20k, 1.5M).")
@click.option("--keep", metavar="SIZE", help="How much of each output to keep, below SIZE (default: a quarter of SIZE, at least 200, at most half).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def trim(c: Ctx, over: str, keep: str | None, as_json: bool) -> None:
    """Shrink huge tool outputs to a marked excerpt (head and tail) on the current branch.

    \b
    Examples:
      opal trim --tool-output-over 20k
      opal trim --tool-output-over 5000 --keep 1000
    """
    from opalgit.porcelain.trim import parse_size, trim

    repo = c.repo()
    try:
        res = trim(repo, parse_size(over), keep=parse_size(keep) if keep else None)
    except NothingToDoError as exc:
        c.out(exc.message)
        return
    print_edit(c, res, as_json)

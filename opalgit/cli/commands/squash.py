"""``opal squash``: replace a stretch of turns by one summary turn."""

from __future__ import annotations

import click

from opalgit.cli.commands.drop import print_edit
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli


@cli.command(context_settings=CONTEXT)
@click.argument("turns", metavar="FROM..TO")
@click.option("-m", "--message", required=True, help="The summary that replaces the turns.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def squash(c: Ctx, turns: str, message: str, as_json: bool) -> None:
    """Replace a stretch of turns by one summary turn.

    \b
    Examples:
      opal squash HEAD:12..HEAD:19 -m "tried X, failed because Y"
    """
    from opalgit.porcelain.squash import squash

    print_edit(c, squash(c.repo(), turns, message), as_json)

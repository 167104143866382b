"""``opal demo``: the walk-through on a bundled session (the script itself is :mod:`opalgit.cli.demo`)."""

from __future__ import annotations

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli


@cli.command(context_settings=CONTEXT)
@click.option("--keep", type=click.Path(file_okay=False), help="Build the demo in this folder and keep it.")
@pass_ctx
def demo(c: Ctx, keep: str | None) -> None:
    """Walk through opal on a bundled Claude Code session (no agent account needed).

    Builds a throw-away project with a realistic session, then commits, branches,
    rewinds, undoes and shows the log, printing each command as it goes.

    \b
    Examples:
      opal demo
      opal demo --keep /tmp/opal-demo
    """
    from opalgit.cli.demo import run_demo

    run_demo(keep, echo=lambda s: c.out(s), style=c.style)

"""``opal op``: the operation log (``opal op log``)."""

from __future__ import annotations

import click

from opalgit import porcelain
from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.cli.options import GitCountCommand


@cli.group(context_settings=CONTEXT)
def op() -> None:
    """The operation log: every change opal made, undoable."""


@op.command("log", cls=GitCountCommand, context_settings=CONTEXT)
@click.option("-n", "--max-count", type=click.IntRange(min=1), help="Show at most this many operations (also -N, e.g. -5).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def op_log(c: Ctx, max_count: int | None, as_json: bool) -> None:
    """List operations, newest first.

    \b
    Examples:
      opal op log
      opal op log -n 5 --json
    """
    repo = c.repo()
    ops = porcelain.op_log(repo, max_count)
    if as_json:
        c.json({"operations": [o.to_json() for o in ops]})
        return
    lines = []
    for o in ops:
        stamp = render.when_ms(o.time)
        lines.append(f"{c.style(render.short(o.oid or b'', 10), fg='yellow')} {stamp}  {o.description}")
    c.out(lines, page=True)

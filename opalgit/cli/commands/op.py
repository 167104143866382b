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
        from opalgit.times import iso_ms

        c.json({"operations": [
                {
                    "id": o.oid.hex() if o.oid else None,
                    "command": o.command,
                    "description": o.description,
                    "time": iso_ms(o.time),
                    "user": o.user,
                    "undoes": o.undoes.hex() if o.undoes else None,
                    "changes": {n: [a.hex() if a else None, b.hex() if b else None] for n, (a, b) in o.changes.items()},
                    "sessions": {n: [a, b] for n, (a, b) in o.sessions.items()},
                    "head": list(o.head),
                }
                for o in ops
        ]})
        return
    lines = []
    for o in ops:
        stamp = render.when_ms(o.time)
        lines.append(f"{c.style(render.short(o.oid or b'', 10), fg='yellow')} {stamp}  {o.description}")
    c.out(lines, page=True)

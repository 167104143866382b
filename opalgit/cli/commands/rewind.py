"""``opal rewind``: drop the last turns of the current branch, as a new commit."""

from __future__ import annotations

import click

from opalgit import porcelain
from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli


@cli.command(context_settings=CONTEXT)
@click.argument("count", type=click.IntRange(min=1), required=False)
@click.option("--to", "to", metavar="REV[:N]", help="Rewind to this turn (or commit) instead.")
@pass_ctx
def rewind(c: Ctx, count: int | None, to: str | None) -> None:
    """Drop the last COUNT turns of the current branch (non-destructive).

    The result is a new commit; the dropped turns stay in history, and 'opal undo'
    brings them back. Bookkeeping records after the last kept turn go with them.

    \b
    Examples:
      opal rewind 3            # drop the last 3 turns
      opal rewind --to HEAD:40 # keep turns 1..40
      opal undo                # changed your mind
    """
    if (count is None) == (to is None):
        raise click.UsageError("give COUNT or --to REV:N (one of them)")
    repo = c.repo()
    res = porcelain.rewind(repo, count, to)
    parts = []
    if res.dropped_items or not res.taken_items:
        parts.append(f"dropped {render.count(res.dropped_turns, 'turn')} ({render.count(res.dropped_items, 'record')})")
    if res.taken_items:
        # --to named a state on another line: say what came in, not a negative drop.
        took = f"took {render.count(res.taken_turns, 'turn')} ({render.count(res.taken_items, 'record')}) from {to}"
        parts.append(took + (f" ({res.taken_from})" if res.taken_from else ""))
    said = ", ".join(parts)
    c.out(f"[{res.branch} {render.short(res.oid, 7)}] {said}; {render.count(res.turns, 'turn')} {'remains' if res.turns == 1 else 'remain'}. 'opal undo' takes it back.")
    if res.warning:
        c.warn(res.warning)

"""``opal undo``: take back the last operation (or a given one) of the operation log."""

from __future__ import annotations

import click

from opalgit import porcelain
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.errors import NothingToDoError


@cli.command(context_settings=CONTEXT)
@click.argument("op_id", required=False, metavar="[OP]")
@click.option("--force", is_flag=True, help="Restore refs even if they changed since the operation.")
@pass_ctx
def undo(c: Ctx, op_id: str | None, force: bool) -> None:
    """Undo the last operation (or operation OP from 'opal op log').

    Every command that changes branches is recorded in the operation log; undo
    restores the branches it changed. Undo is itself an operation: run it again to
    step further back, or 'opal undo OP' on an undo to redo.

    \b
    Examples:
      opal undo
      opal op log
      opal undo 3f2a9c1e
    """
    repo = c.repo()
    try:
        op = porcelain.undo(repo, op_id, force=force)
    except NothingToDoError as exc:
        c.out(exc.message)
        return
    c.out(f"Undid: {op.description[len('undo '):]}")

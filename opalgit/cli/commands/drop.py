"""``opal drop``: cut a stretch of turns out of the current branch; and how an edit of the turns is
printed (:func:`print_edit`, which ``opal squash`` and ``opal trim`` print too).
"""

from __future__ import annotations

import click

from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.history.tokens import human
from opalgit.plural import count as counted


@cli.command(context_settings=CONTEXT)
@click.argument("turns", metavar="FROM..TO")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def drop(c: Ctx, turns: str, as_json: bool) -> None:
    """Cut a stretch of turns (both ends included) out of the current branch, keeping what came after.

    A range that would separate a tool call from its result is widened, and opal
    says so. The result is a new commit; 'opal undo' restores the turns.

    \b
    Examples:
      opal drop HEAD:12..HEAD:19     # a failed exploration
      opal drop HEAD:-4..HEAD:-2
    """
    from opalgit.porcelain import drop as cleanup

    print_edit(c, cleanup.drop(c.repo(), turns), as_json)


def _saved(saved: int) -> str:
    # A squash summary longer than the turns it replaces costs tokens: say so, never "saved ~-6".
    return f"saved ~{human(saved)}" if saved >= 0 else f"~{human(-saved)} tokens more"


def print_edit(c: Ctx, res, as_json: bool) -> None:
    if as_json:
        c.json(res.to_json())
        return
    for n in res.notes:
        c.note(n)
    what = f"turns {res.range[0]}..{res.range[1]}" if res.range else counted(res.changed, "tool output")
    c.out(
        f"[{res.branch} {render.short(res.oid, 7)}] {res.command} {what}: {res.turns_before} -> {counted(res.turns_after, 'turn')}, "
        f"~{human(res.tokens_before)} -> ~{human(res.tokens_after)} tokens ({_saved(res.saved)}). 'opal undo' takes it back."
    )

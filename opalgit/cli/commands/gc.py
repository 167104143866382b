"""The ``gc`` command: expire old op-log operations, then ``git gc``.

Part of the CLI layer: importing this module attaches its command to :data:`opalgit.cli.main.cli`.
"""

from __future__ import annotations

import click

from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.plural import count


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


@cli.command(context_settings=CONTEXT)
@click.option("--expire-oplog", "expire", default="90.days.ago", show_default=True, metavar="AGE",
              help="Expire the operations older than this (2.weeks.ago, '30 days', now, never, 2026-11-01).")
@click.option("--prune", metavar="AGE",
              help="Passed to git gc: delete unreachable objects older than this "
                   "(default: 2.weeks.ago; now when a secrets purge is expired).")
@click.option("-n", "--dry-run", is_flag=True, help="Say what would be expired; change nothing, run no git gc.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def gc(c: Ctx, expire: str, prune: str, dry_run: bool, as_json: bool) -> None:
    """Expire old operations of the op log, then run 'git gc'.

    Every operation keeps the states it replaced, so that 'opal undo' can bring
    them back, and git gc keeps them too. The operations older than AGE are taken
    out of the log (they can no longer be undone; the ids of those kept change, and
    the old ids still work), then 'git gc --prune' deletes what nothing else
    reaches. 'opal gc' itself cannot be undone.

    A 'secrets purge' is undoable until the next gc only: gc also expires the newest
    purge and every operation before it, whatever AGE says, so that no object keeps
    the secrets it took out.

    \b
    Examples:
      opal gc                                  # operations older than 90 days
      opal gc --expire-oplog 2.weeks.ago
      opal gc --expire-oplog now --prune now   # keep nothing undoable, delete it now
      opal gc --dry-run
    """
    from opalgit.porcelain import gc as gcmod

    res = gcmod.gc(c.repo(), expire, prune, dry_run=dry_run)
    if as_json:
        c.json(res.to_json())
        return
    when = "" if res.cutoff is None else f" older than {gcmod.iso(res.cutoff)}"
    verb = "would expire" if dry_run else "expired"
    n = res.expired
    line = f"{verb} {n} operation{'s' if n != 1 else ''}{when}; {res.kept} kept"
    if res.purge_barrier:
        line += f" (up to the secrets purge {render.short(res.purge_barrier, 10)}, which can no longer be undone)"
    c.out(line)
    if dry_run:
        c.out(f"would run git gc --prune={res.prune}")
        return
    b, a = res.before, res.after
    assert a is not None
    c.out(
        f"git gc --prune={res.prune}: {b.loose} loose objects ({_size(b.loose_bytes)}) and {count(b.packs, 'pack')} ({_size(b.pack_bytes)}) -> "
        f"{a.loose} loose ({_size(a.loose_bytes)}) and {count(a.packs, 'pack')} ({_size(a.pack_bytes)})"
    )

"""``opal fsck``: check that every state, turn, payload and operation decodes and adds up."""

from __future__ import annotations

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.plural import count


@cli.command(context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_ctx
def fsck(c: Ctx, as_json: bool) -> None:
    """Check that every state, turn, payload and operation decodes, validates and adds up.

    Complements 'git fsck' (which checks the git objects themselves). Exits 7 when a
    problem is found, and names each one.

    \b
    Examples:
      opal fsck
      git fsck --full && opal fsck --json
    """
    from opalgit.errors import CorruptObjectError
    from opalgit.porcelain import fsck as fsck_mod

    report = fsck_mod.fsck(c.repo())
    if as_json:
        c.json(report.to_json())
    else:
        r = report
        c.out(f"checked {count(r.commits, 'commit')}, {count(r.leaves, 'leaf')}, {count(r.turns, 'turn')}, "
              f"{count(r.payloads, 'payload')}, {count(r.operations, 'operation')}")
        for p in r.problems:
            c.out(c.style("problem: ", fg="red") + p)
        if r.ok:
            c.out("no problems found")
    if not report.ok:
        raise CorruptObjectError(f"{count(len(report.problems), 'problem')} found", hint="see the list above; 'opal op log' and 'opal undo' may restore a good state")

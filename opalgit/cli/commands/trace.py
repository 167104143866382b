"""``opal trace export``: opal's line attribution as Agent Trace records (JSON Lines)."""

from __future__ import annotations

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli


@cli.group("trace", context_settings=CONTEXT)
def trace_group() -> None:
    """Agent Trace records of which agent turn wrote which lines (docs/blame.md)."""


@trace_group.command("export", context_settings=CONTEXT)
@click.argument("code_range", default="HEAD", metavar="[CODE_REV_RANGE]")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), metavar="FILE",
              help="Write the records to FILE (replacing it) instead of standard output.")
@pass_ctx
def trace_export(c: Ctx, code_range: str, output: str | None) -> None:
    """Write an Agent Trace record (format v0.1) for each code commit of CODE_REV_RANGE.

    One JSON record a line, one per code commit (HEAD alone by default; A..B for a
    range, oldest first): for every file the commit changed, the lines that came in
    with it, grouped into one conversation per agent turn (contributor "ai", with the
    model id), the lines a person wrote ("human") and those opal cannot attribute
    ("unknown"), as 'opal blame' at that commit finds them.

    \b
    Examples:
      opal trace export                       # the current code commit
      opal trace export v1.2..HEAD -o traces.jsonl
    """
    import json

    from opalgit.fileio import replace_atomically
    from opalgit.porcelain.trace import trace_export as run

    repo = c.repo()
    lines = [json.dumps(rec, ensure_ascii=False, separators=(",", ":")) for rec in run(repo, code_range)]
    text = "".join(x + "\n" for x in lines)
    if output is None:
        click.echo(text, nl=False)
        return
    replace_atomically(output, text.encode())
    c.note(f"wrote {len(lines)} record{'s' if len(lines) != 1 else ''} to {output}")

"""``opal stats``: turns, tool calls and tokens of a state, per kind and per tool."""

from __future__ import annotations

import click

from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.history.tokens import human
from opalgit.plural import count


@cli.command(context_settings=CONTEXT)
@click.argument("rev", default="HEAD", metavar="[REV]")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="How many of the biggest turns to list.")
@click.option("--exact", is_flag=True, help="Count tokens exactly with OpenAI's o200k tokenizer (needs opalgit[tokens]).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def stats(c: Ctx, rev: str, top: int, exact: bool, as_json: bool) -> None:
    """Turns, tool calls and estimated tokens of a state, per kind and per tool, and the biggest turns.

    Token counts are estimates (from the UTF-8 size of the text the model sees; see docs/concepts.md),
    or exact o200k counts with --exact.

    \b
    Examples:
      opal stats
      opal stats try-sqlite --top 5
      opal stats --exact --json
    """
    from opalgit.porcelain import diff as compare

    repo = c.repo()
    st = compare.stats(repo, rev, top, exact=exact)
    if as_json:
        c.json(st.to_json())
        return
    lines = [c.style(f"{rev} ({render.short(st.oid, 7)}): {count(st.turns, 'turn')}, {count(st.tool_calls, 'tool call')}, ~{human(st.tokens)} tokens", bold=True)]
    lines.append("")
    lines.append("By kind:")
    lines += ["  " + r for r in render.table([[k, count(v['turns'], 'turn'), f"~{human(v['tokens'])} tokens"] for k, v in st.by_kind.items()])]
    if st.by_tool:
        lines.append("By tool (calls and their results):")
        lines += ["  " + r for r in render.table([[k, count(v['turns'], 'turn'), f"~{human(v['tokens'])} tokens"] for k, v in st.by_tool.items()])]
    lines.append(f"Biggest turns (see them with 'opal show {rev}:N'):")
    lines += ["  " + r for r in render.table([[f"#{b['turn']}", f"~{human(b['tokens'])}", str(b['role']), str(b['kind']), str(b['tool'] or '')] for b in st.biggest])]
    c.out(lines, page=True)

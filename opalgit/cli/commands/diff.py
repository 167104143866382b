"""``opal diff``: compare two states turn by turn."""

from __future__ import annotations

import os

import click

from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.history import revision
from opalgit.history.tokens import human


@cli.command(context_settings=CONTEXT)
@click.argument("a", metavar="A")
@click.argument("b", required=False, metavar="[B]")
@click.option("--stat", "stat_only", is_flag=True, help="Only the summary: turns, tool calls and tokens per side.")
@click.option("--meta", "--all", "include_meta", is_flag=True, help="Include the agents' bookkeeping records (--all is the old spelling).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def diff(c: Ctx, a: str, b: str | None, stat_only: bool, include_meta: bool, as_json: bool) -> None:
    """Compare two states turn by turn (B defaults to the current branch's working state).

    Turns are matched by identity: the common part is summarized, then each turn only
    in A (-), only in B (+), or changed (~, with a text diff). The working state is the
    current branch's head plus what its session has gained since the last commit.
    As in git, 'A..B' is 'A B', and 'A...B' compares B with where A and B forked
    (their merge base): what B did since.

    \b
    Examples:
      opal diff main try-sqlite
      opal diff HEAD~3              # against the working state
      opal diff main...try-sqlite   # what try-sqlite did since it left main
      opal diff --stat main try-sqlite
      opal diff --json main try-sqlite
    """
    from opalgit.porcelain import diff as compare

    repo = c.repo()
    a, b = _diff_sides(repo, a, b)
    res = compare.diff(repo, a, b, env=os.environ, include_meta=include_meta, texts=not stat_only)
    if as_json:
        c.json(res.to_json())
        return
    lines = [c.style(f"diff {res.a} {res.b}", bold=True)]
    common = render.count(res.shared_turns, "turn") + " in common"
    if res.entries:
        lines.append(f"{common} ({res.common_prefix_turns} before the first difference)")
    else:
        lines.append(f"{common}; no turn differs")
    if res.hidden_records:
        lines.append(f"{render.count(res.hidden_records, 'bookkeeping record')} of the agent differ (--all lists them)")
    if res.uncommitted:
        lines.append(f"{render.count(res.uncommitted, 'record')} of the working state {'is' if res.uncommitted == 1 else 'are'} not committed yet")
    sa, sb = res.stat["a"], res.stat["b"]
    for name, side in ((res.a, sa), (res.b, sb)):
        lines.append(
            f"{name}: {render.count(side['turns'], 'turn')} only here, {render.count(side['tool_calls'], 'tool call')}, ~{human(side['tokens'])} tokens"
        )
    lines.append(
        f"{res.stat['turns_removed']} removed, {res.stat['turns_added']} added, {res.stat['turns_changed']} changed"
    )
    if not stat_only:
        for e in res.entries:
            s = e.summary
            num = e.number_b if e.side == "+" else e.number_a
            label = f"{e.side} {num if num is not None else '.':>4} {s.get('role', ''):9} {s.get('kind', ''):11} {str(s.get('tool') or ''):10} {render.size(int(s.get('chars', 0))):>7}  {e.preview}"
            color = {"-": "red", "+": "green", "~": "yellow"}[e.side]
            lines.append(c.style(label, fg=color))
            for d in e.text_diff:
                style = {"+": "green", "-": "red"}.get(d[:1])
                lines.append("      " + (c.style(d, fg=style) if style else d))
    c.out(lines, page=True)


def _diff_sides(repo, a: str, b: str | None) -> tuple[str, str | None]:
    """git diff's ranges: ``A..B`` is ``A B``, ``A...B`` is ``merge-base(A, B) B``."""
    from opalgit.errors import UsageError

    r = revision.split_range(a)
    if r.kind == "not":
        raise UsageError(f"diff compares two states: {a!r} only excludes one", hint="write 'opal diff A B' or 'opal diff A...B'")
    if r.kind == "one":
        return a, b
    if b is not None:
        raise UsageError(f"a range and another revision: {a!r} {b!r}", hint="give 'A..B', 'A...B' or 'A B'")
    if r.kind == "two":
        return r.left, r.right
    return revision.merge_base(repo, r.left, r.right).hex()[:12], r.right

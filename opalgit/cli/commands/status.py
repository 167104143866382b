"""``opal status``: the current branch in turns, what the agents added since, and what to run next."""

from __future__ import annotations

import os

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli


@cli.command(context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def status(c: Ctx, as_json: bool) -> None:
    """Show the current branch in turns, what the agent added since the last commit, and what to run next.

    Counts the new turns of each agent session of this folder (reading only what
    the last commit did not), names the exact command that records them, and lists a
    merge that stopped on conflicts with each side's turns.

    \b
    Examples:
      opal status
      opal status --json
    """
    from opalgit import porcelain
    from opalgit.cli import render
    from opalgit.porcelain.status import describe_sessions

    st = porcelain.status(c.repo(), os.environ, c.cwd)
    if as_json:
        c.json(st.to_json())
        return
    where = c.style(st.branch, bold=True)
    if st.head is None:
        lines = [f"On branch {where}: no commits yet"]
    else:
        lines = [f"On branch {where}: {st.turns} turn{'s' if st.turns != 1 else ''} (head {render.short(st.head, 7)})"]
    if st.detached:
        lines.append(f"This state was {st.detached}: the agent's own session still holds what it left out, "
                     "so continue from here in an export of it.")
    sentences = describe_sessions(st)
    if not sentences:
        lines.append("No agent sessions found for this folder (start the agent here, or 'opal commit --file PATH').")
    lines += [t[0].upper() + t[1:] for t in sentences]
    if st.merge is not None:
        conflicts = st.merge["conflicts"]
        n = f"{len(conflicts)} conflict{'s' if len(conflicts) != 1 else ''}" if conflicts else "conflicts"
        lines += ["", c.style(f"Merging {st.merge['merging']} into {st.branch}: stopped on {n}", fg="red", bold=True)]
        from opalgit.cli.commands.merge import conflict_lines

        # (a merge stopped by an older opal saved no conflicts: --continue lists them again)
        lines += conflict_lines(c, conflicts, st.branch, st.merge["merging"], st.merge["choices"])
    if st.next:
        lines += ["", "Next: " + c.style(st.next[0], bold=True)]
    elif st.head is not None and not st.detached:
        lines += ["", "Nothing to commit."]
    c.out(lines)

"""``opal at``: the agent state recorded with a code commit (through the code links)."""

from __future__ import annotations

import click

from opalgit import porcelain
from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.history.tokens import estimate, human
from opalgit.plural import count
from opalgit.sync import links


@cli.command("at", context_settings=CONTEXT)
@click.argument("rev", default="HEAD", metavar="[REV]")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def at(c: Ctx, rev: str, as_json: bool) -> None:
    """Show the agent state recorded with code commit REV (a git revision).

    REV is a revision of your code (HEAD~4, a tag, a commit id). If that commit has
    no state linked to it, the state of its nearest linked ancestor is shown, and
    said so. States fetched from teammates count too.

    \b
    Examples:
      opal at                     # the state of the current code commit
      opal at HEAD~4
      opal at v1.2 --json
      opal export $(opal at v1.2 --json | jq -r .state) --to codex
    """
    repo = c.repo()
    found = links.link_at(repo, rev)
    info = porcelain.commit_info(repo, found.state, porcelain.branch_labels(repo))
    if as_json:
        c.json({**found.to_json(), "commit": info.to_json()})
        return
    asked = found.asked
    lines = [f"Code commit {c.style(asked.short, fg='yellow')}  {asked.subject}"]
    if found.distance:
        back = f"{count(found.distance, 'commit')} back"
        lines.append(f"  has no state of its own; showing the one linked to its ancestor {found.code.short} ({back}): {found.code.subject}")
    labels = f" ({', '.join(info.branches)})" if info.branches else ""
    lines.append(f"State       {c.style(render.short(found.state, 7), fg='yellow')}{labels}  {info.message.splitlines()[0] if info.message else ''}")
    h = info.header
    who = f"by {info.author}, {render.when(info.time, info.offset)}"
    if h.session:
        lines.append(f"            {h.session.agent} session {h.session.id}, {count(h.turns, 'turn')}, ~{human(estimate(h.chars))} tokens")
    lines.append(f"            {who}" + (f"; fetched from {found.remote}" if found.remote else ""))
    c.out(lines)
    c.note(f"continue from it with 'opal export {render.short(found.state, 10)} --to AGENT'")

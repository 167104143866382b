"""``opal show``: a commit, or one turn (``REV:N``)."""

from __future__ import annotations

import click

from opalgit import porcelain
from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.history.tokens import estimate, human
from opalgit.plural import count


@cli.command(context_settings=CONTEXT)
@click.argument("rev", default="HEAD")
@click.option("--full", is_flag=True, help="Do not shorten long texts and tool outputs.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON (a turn includes its source record).")
@pass_ctx
def show(c: Ctx, rev: str, full: bool, as_json: bool) -> None:
    """Show a commit, or one turn with REV:N.

    A commit shows its message, agent, session, the turns it added and a token
    estimate. A turn (REV:N, N counted from 1; -1 is the last) shows its text, tool
    calls with their input, tool results and reasoning.

    \b
    Examples:
      opal show               # the current commit
      opal show HEAD~1
      opal show HEAD:12       # turn 12 of the current state
      opal show main:-1 --json
    """
    repo = c.repo()
    target = porcelain.resolve(repo, rev)
    if target.turn is not None:
        t = porcelain.show_turn(repo, target.oid, target.turn)
        if as_json:
            c.json(t.to_json())
            return
        s = t.summary
        head = f"turn {t.number} of {render.short(t.commit)}  {t.normal.role}"
        if s.get("tool"):
            head += f"  {s['tool']}"
        lines = [c.style(head, bold=True)]
        meta = f"{t.agent}, record {t.index + 1}, ~{human(estimate(int(s.get('chars', 0))))} tokens"
        if t.normal.time is not None:
            meta += f", {render.when_ms(t.normal.time)} UTC"
        lines.append(c.style(meta, dim=True))
        lines.append("")
        calls = _calls_answered(repo, t) if s.get("kind") == "tool_result" or s.get("results") else None
        lines.append(render.blocks(t.normal, c.style, max_lines=None if full else 40, calls=calls))
        c.out(lines, page=True)
        return
    info = porcelain.commit_info(repo, target.oid, porcelain.branch_labels(repo))
    if as_json:
        c.json(info.to_json())
        return
    h = info.header
    labels = f" ({', '.join(info.branches)})" if info.branches else ""
    lines = [c.style(f"commit {info.oid.hex()}", fg="yellow") + labels]
    if len(info.parents) > 1:
        lines.append("Merge: " + " ".join(render.short(p, 7) for p in info.parents))
    lines += [f"Author: {info.author}", f"Date:   {render.when(info.time, info.offset)}", ""]
    lines += ["    " + line for line in info.message.rstrip("\n").splitlines()]
    lines.append("")
    if h.session:
        s = h.session
        lines.append(f"Agent:    {s.agent}{' ' + s.version if s.version else ''}")
        lines.append(f"Session:  {s.id}")
        if s.title:
            lines.append(f"Title:    {s.title}")
        if s.cwd:
            lines.append(f"Folder:   {s.cwd}")
        if s.git_branch:
            lines.append(f"Git:      {s.git_branch}")
        if s.model:
            lines.append(f"Model:    {s.model}")
    start, end = h.new_items
    added = f"; this commit added records {start + 1}..{end}" if end > start else ""
    lines.append(f"Turns:    {h.turns} ({count(h.items, 'record')}){added}")
    lines.append(f"Tokens:   ~{human(estimate(h.chars))} (estimate)")
    if h.extra.get("detached"):
        lines.append(f"State:    {h.extra['detached']} (export it to continue from here)")
    c.out(lines, page=True)


def _calls_answered(repo, shown) -> dict[str, tuple[int, str]]:
    """Call id -> (turn, tool) for the calls whose results turn ``shown`` holds, from
    the stored summaries (no record is read unless its tools cannot be told apart)."""
    wanted = {str(b.get("call_id")) for b in shown.normal.blocks if b.get("type") == "tool_result" and b.get("call_id") is not None}
    found: dict[str, tuple[int, str]] = {}
    if not wanted:
        return found
    for info in porcelain.turns(repo, shown.commit.hex()):
        ids = [str(x) for x in info.summary.get("calls", ())]
        if not wanted & set(ids) or info.number is None:
            continue
        tools = str(info.summary.get("tool") or "").split(",")
        if len(tools) != len(ids):  # a call without an id among them: read the turn itself
            normal = porcelain.show_turn(repo, shown.commit, info.number).normal
            named = {str(b.get("id")): str(b.get("name")) for b in normal.blocks if b.get("type") == "tool_call"}
            tools = [named.get(i, "?") for i in ids]
        for call_id, tool in zip(ids, tools):
            if call_id in wanted:
                found[call_id] = (info.number, tool)
    return found

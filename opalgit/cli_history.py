"""Commands that read history: ``opal log``, ``show``, ``diff``, ``stats``.

Part of the CLI layer: importing this module attaches its commands to :data:`opalgit.cli.cli`.
"""

from __future__ import annotations

import os

import click

from . import porcelain, render
from .cli import CONTEXT, Ctx, cli, pass_ctx
from .tokens import estimate, human


# ------------------------------------------------------------------------------ log


@cli.command(context_settings=CONTEXT)
@click.argument("revs", nargs=-1, metavar="[REV]...")
@click.option("-n", "--max-count", type=click.IntRange(min=1), help="Show at most this many commits.")
@click.option("--oneline", is_flag=True, help="One line per commit.")
@click.option("--graph", is_flag=True, help="Draw the commit graph, as git log --graph draws it (implies --topo-order).")
@click.option("--topo-order", "order", flag_value="topo", help="Show each line of history whole, children before parents (git's --topo-order).")
@click.option("--date-order", "order", flag_value="date", help="Newest first, children before parents (the default without --graph).")
@click.option("--turns", is_flag=True, help="List the turns of REV's state instead of commits.")
@click.option("--all", "include_meta", is_flag=True, help="With --turns: include the agent's bookkeeping records.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def log(c: Ctx, revs: tuple[str, ...], max_count: int | None, oneline: bool, graph: bool, order: str | None, turns: bool, include_meta: bool, as_json: bool) -> None:
    """Show the commit history (or, with --turns, the turns of a state).

    \b
    Examples:
      opal log --oneline --graph
      opal log -n 5 try-sqlite
      opal log --turns              # role, kind, tool and size of every turn of HEAD
      opal log --turns main~2 --json
    """
    repo = c.repo()
    if turns:
        rev = revs[0] if revs else "HEAD"
        infos = porcelain.turns(repo, rev, include_meta=include_meta)
        if max_count:
            infos = infos[-max_count:]
        if as_json:
            c.json({"turns": [t.to_json() for t in infos]})
            return
        rows = []
        for t in infos:
            s = t.summary
            num = str(t.number) if t.number is not None else "."
            what = s.get("tool") or s.get("label") or ""
            rows.append([num, s.get("role", ""), s.get("kind", ""), what, render.size(int(s.get("chars", 0))), render.when_ms(s.get("time"))])
        lines = render.table([["#", "role", "kind", "tool", "size", "time"]] + rows)
        if lines:
            lines[0] = c.style(lines[0], bold=True)
        c.out(lines, page=True)
        return
    # git log --graph implies --topo-order unless an order is given.
    infos = porcelain.log(repo, list(revs) or None, max_count, order=order or ("topo" if graph else "date"))
    if as_json:
        c.json({"commits": [i.to_json() for i in infos]})
        return
    entries = [(i.oid, i.parents, _commit_text(c, i, oneline)) for i in infos]
    c.out(render.history(entries, graph=graph, separated=not oneline), page=True)


def _commit_text(c: Ctx, info: porcelain.CommitInfo, oneline: bool) -> list[str]:
    """One commit's lines as git's oneline or medium format prints them."""
    labels = ""
    if info.branches:
        labels = " (" + ", ".join(c.style(b, fg="green", bold=True) for b in info.branches) + ")"
    if oneline:
        subject = info.message.splitlines()[0] if info.message else ""
        return [f"{c.style(render.short(info.oid, 7), fg='yellow')}{labels} {subject}"]
    h = info.header
    lines = [f"{c.style('commit ' + info.oid.hex(), fg='yellow')}{labels}"]
    if len(info.parents) > 1:
        lines.append(f"Merge: {' '.join(render.short(p, 7) for p in info.parents)}")
    lines.append(f"Author: {info.author}")
    lines.append(f"Date:   {render.when(info.time, info.offset)}")
    if h.session:
        lines.append(f"Session: {h.session.agent} {h.session.id}, {render.count(h.turns, 'turn')}, ~{human(estimate(h.chars))} tokens")
    lines.append("")
    # git's medium body: leading blank lines dropped, every line indented, the end trimmed.
    body = info.message.splitlines()
    while body and not body[0].strip():
        body.pop(0)
    lines.extend(f"    {line}" for line in "\n".join(body).rstrip().splitlines())
    return lines


# ------------------------------------------------------------------------------ show


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
        lines.append(render.blocks(t.normal, c.style, max_lines=None if full else 40))
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
    lines.append(f"Turns:    {h.turns} ({h.items} records); this commit added records {start + 1}..{end}" if end > start else f"Turns:    {h.turns} ({h.items} records)")
    lines.append(f"Tokens:   ~{human(estimate(h.chars))} (estimate)")
    if h.extra.get("detached"):
        lines.append(f"State:    {h.extra['detached']} (export it to continue from here)")
    c.out(lines, page=True)


# ------------------------------------------------------------------------------ diff / stats


@cli.command(context_settings=CONTEXT)
@click.argument("a", metavar="A")
@click.argument("b", required=False, metavar="[B]")
@click.option("--stat", "stat_only", is_flag=True, help="Only the summary: turns, tool calls and tokens per side.")
@click.option("--all", "include_meta", is_flag=True, help="Include the agents' bookkeeping records.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def diff(c: Ctx, a: str, b: str | None, stat_only: bool, include_meta: bool, as_json: bool) -> None:
    """Compare two states turn by turn (B defaults to the current branch's working state).

    Turns are matched by identity: the common part is summarized, then each turn only
    in A (-), only in B (+), or changed (~, with a text diff). The working state is the
    current branch's head plus what its session has gained since the last commit.

    \b
    Examples:
      opal diff main try-sqlite
      opal diff HEAD~3              # against the working state
      opal diff --stat main try-sqlite
      opal diff --json main try-sqlite
    """
    from . import compare

    repo = c.repo()
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


@cli.command(context_settings=CONTEXT)
@click.argument("rev", default="HEAD", metavar="[REV]")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="How many of the biggest turns to list.")
@click.option("--exact", is_flag=True, help="Count tokens exactly with OpenAI's o200k tokenizer (needs opalgit[tokens]).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def stats(c: Ctx, rev: str, top: int, exact: bool, as_json: bool) -> None:
    """Turns, tool calls and estimated tokens of a state, per kind and per tool, and the biggest turns.

    Token counts are estimates (about four characters per token; see docs/concepts.md),
    or exact o200k counts with --exact.

    \b
    Examples:
      opal stats
      opal stats try-sqlite --top 5
      opal stats --exact --json
    """
    from . import compare

    repo = c.repo()
    st = compare.stats(repo, rev, top, exact=exact)
    if as_json:
        c.json(st.to_json())
        return
    lines = [c.style(f"{rev} ({render.short(st.oid, 7)}): {st.turns} turns, {st.tool_calls} tool calls, ~{human(st.tokens)} tokens", bold=True)]
    lines.append("")
    lines.append("By kind:")
    lines += ["  " + r for r in render.table([[k, f"{v['turns']} turns", f"~{human(v['tokens'])} tokens"] for k, v in st.by_kind.items()])]
    if st.by_tool:
        lines.append("By tool (calls and their results):")
        lines += ["  " + r for r in render.table([[k, f"{v['turns']} turns", f"~{human(v['tokens'])} tokens"] for k, v in st.by_tool.items()])]
    lines.append(f"Biggest turns (see them with 'opal show {rev}:N'):")
    lines += ["  " + r for r in render.table([[f"#{b['turn']}", f"~{human(b['tokens'])}", str(b['role']), str(b['kind']), str(b['tool'] or '')] for b in st.biggest])]
    c.out(lines, page=True)



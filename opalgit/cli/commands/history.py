"""Commands that read history: ``opal log``, ``show``, ``diff``, ``stats``.

Part of the CLI layer: importing this module attaches its commands to :data:`opalgit.cli.main.cli`.
"""

from __future__ import annotations

import os

import click

from opalgit import porcelain
from opalgit.cli import gitdate, pretty, render
from opalgit.cli.main import CONTEXT, Ctx, GitCountCommand, cli, pass_ctx
from opalgit.history import revision, sequence
from opalgit.history.tokens import estimate, human
from opalgit.plural import count, noun

# ------------------------------------------------------------------------------ log


@cli.command(cls=GitCountCommand, context_settings=CONTEXT)
@click.argument("revs", nargs=-1, metavar="[REV | A..B | A...B | ^A]...")
@click.option("-n", "--max-count", type=click.IntRange(min=1), help="Show at most this many commits (also -N, e.g. -3).")
@click.option("--skip", type=click.IntRange(min=0), default=0, help="Skip this many commits first.")
@click.option("--since", "--after", "since", metavar="DATE", help="Only commits made after DATE (2026-01-02, '2 weeks ago', yesterday).")
@click.option("--until", "--before", "until", metavar="DATE", help="Only commits made before DATE.")
@click.option("--oneline", is_flag=True, help="One line per commit (short id, branches, subject).")
@click.option("--format", "--pretty", "fmt", metavar="FORMAT",
              help="oneline, short, medium, full, fuller, or a template with git's placeholders (%h %s %an %ar ...) and opal's (%(turns) %(tokens) ...).")
@click.option("--graph", is_flag=True, help="Draw the commit graph, as git log --graph draws it (implies --topo-order).")
@click.option("--topo-order", "order", flag_value="topo", help="Show each line of history whole, children before parents (git's --topo-order).")
@click.option("--date-order", "order", flag_value="date", help="Newest first, children before parents (the default without --graph).")
@click.option("--all", "all_refs", is_flag=True, help="Every branch and remote-tracking branch, as if each were named.")
@click.option("--turns", is_flag=True, help="List the turns of REV's state instead of commits, with a preview of each.")
@click.option("--meta", "include_meta", is_flag=True, help="With --turns: include the agent's bookkeeping records.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def log(c: Ctx, revs: tuple[str, ...], max_count: int | None, skip: int, since: str | None, until: str | None,
        oneline: bool, fmt: str | None, graph: bool, order: str | None, all_refs: bool, turns: bool, include_meta: bool,
        as_json: bool) -> None:
    """Show the commit history (or, with --turns, the turns of a state).

    Revisions and options are git's: A..B is what B has and A has not, A...B what
    either has and not both, ^A hides what A has; -N, --since/--until (git's date
    forms), --format/--pretty (git's placeholders, see docs/guide.md) and --all
    mean what they mean to 'git log'.

    \b
    Examples:
      opal log --oneline --graph --all
      opal log -5 try-sqlite
      opal log main..try-sqlite       # what try-sqlite has that main has not
      opal log --since "2 weeks ago" --format "%h %ar %s (%(turns) turns)"
      opal log --turns              # number, role, kind, tool, size and a preview of every turn of HEAD
      opal log --turns --meta main~2 --json
    """
    repo = c.repo()
    if turns:
        if all_refs:
            c.warn("'log --turns --all' is now 'log --turns --meta' (--all lists every branch, as in git); "
                   "showing the bookkeeping records as before")
            include_meta = True
        _log_turns(c, repo, revs, max_count, since, until, include_meta, as_json)
        return
    starts, hide = _log_starts(repo, revs, all_refs)
    keep = _date_filter(since, until)
    # git log --graph implies --topo-order unless an order is given.
    infos = porcelain.log(repo, None, None if max_count is None else max_count + skip, starts=starts, hide=hide,
                          keep=keep, order=order or ("topo" if graph else "date"))
    infos = infos[skip:]
    if as_json:
        c.json({"commits": [i.to_json() for i in infos]})
        return
    style, template = ("oneline", None) if oneline and fmt is None else pretty.parse_option(fmt or "medium")
    if oneline and style == "oneline":
        style = "abbrev"
    shown = {i.oid for i in infos}
    head = porcelain.current_branch(repo)
    entries = []
    for info in infos:
        # Parents outside a range are not drawn, as git draws them (past -n they are).
        ps = tuple(p for p in info.parents if p in shown) if hide else info.parents
        entries.append((info.oid, ps, _commit_lines(c, repo, info, style, template, head)))
    if entries:  # nothing at all for an empty range, as git prints
        # git's multi-line formats put a blank line between commits, none after the last.
        c.out(render.history(entries, graph=graph, separated=style not in ("abbrev", "oneline", "format")), page=True)

def _log_starts(repo, revs: tuple[str, ...], all_refs: bool) -> tuple[list[bytes], set[bytes]]:
    from opalgit.errors import RevisionError
    from opalgit.store.refs import REMOTE_PREFIX

    texts = list(revs)
    starts, hide = revision.select(repo, texts) if texts else ([], set())
    if all_refs:
        starts += list(repo.refs.branches().values())
        starts += [oid for name, oid in sorted(repo.refs.all().items()) if name.startswith(REMOTE_PREFIX)]
        if not starts:
            raise RevisionError("no branch has commits yet", hint="run 'opal commit' to record the agent session")
    elif not texts:
        # No revision at all: HEAD. (Only exclusions, '^A', list nothing, as in git.)
        starts += [porcelain.resolve(repo, "HEAD").oid]
    return starts, hide


def _in_dates(since: str | None, until: str | None):
    """A test of a time in seconds against --since/--until, both ends inclusive as in
    git; None when neither is given."""
    if since is None and until is None:
        return None
    after = gitdate.approx(since, option="--since") if since is not None else None
    before = gitdate.approx(until, option="--until") if until is not None else None
    return lambda t: (after is None or t >= after) and (before is None or t <= before)


def _date_filter(since: str | None, until: str | None):
    within = _in_dates(since, until)
    # git compares the committer date.
    return None if within is None else (lambda cd: within(cd.committer.time))


def _commit_lines(c: Ctx, repo, info, style: str, template: str | None, head: str) -> list[str]:
    """The lines of one commit in ``style`` (a named format, or "format" with ``template``)."""
    commit = repo.store.read_commit(info.oid)
    if style == "format":
        assert template is not None
        return pretty.expand(template, commit, info.header, branches=info.branches, head=head,
                             style=click.style, color=c.color).split("\n")
    labels = ""
    if info.branches:
        labels = " (" + ", ".join(c.style(b, fg="green", bold=True) for b in info.branches) + ")"
    subject = pretty.expand("%s", commit, info.header, branches=[], head=None, style=click.style, color=False)
    if style in ("abbrev", "oneline"):
        oid = render.short(info.oid, 7) if style == "abbrev" else info.oid.hex()
        return [f"{c.style(oid, fg='yellow')}{labels} {subject}"]
    lines = [f"{c.style('commit ' + info.oid.hex(), fg='yellow')}{labels}"]
    if len(info.parents) > 1:
        lines.append(f"Merge: {' '.join(render.short(p, 7) for p in info.parents)}")
    a, k = commit.author, commit.committer
    if style == "fuller":
        lines += [f"Author:     {a.name} <{a.email}>", f"AuthorDate: {pretty.git_date(a)}",
                  f"Commit:     {k.name} <{k.email}>", f"CommitDate: {pretty.git_date(k)}"]
    else:
        lines.append(f"Author: {a.name} <{a.email}>")
        if style == "full":
            lines.append(f"Commit: {k.name} <{k.email}>")
        elif style == "medium":
            lines.append(f"Date:   {pretty.git_date(a)}")
    h = info.header
    if h.session and style != "short":
        lines.append(f"Session: {h.session.agent} {h.session.id}, {count(h.turns, 'turn')}, ~{human(estimate(h.chars))} tokens")
    lines.append("")
    # git's body: leading blank lines dropped, every line indented, the end trimmed.
    body = info.message.splitlines()
    while body and not body[0].strip():
        body.pop(0)
    body = "\n".join(body).rstrip().splitlines()
    lines.extend(f"    {line}" for line in (body[:1] if style == "short" else body))
    return lines


def _log_turns(c: Ctx, repo, revs: tuple[str, ...], max_count: int | None, since: str | None, until: str | None,
               include_meta: bool, as_json: bool) -> None:
    from opalgit.errors import UsageError
    from opalgit.porcelain.states import of_item

    if len(revs) > 1:
        raise UsageError("log --turns lists the turns of one state", hint="give one REV, e.g. 'opal log --turns main~2'")
    rev = revs[0] if revs else "HEAD"
    infos = all_infos = porcelain.turns(repo, rev, include_meta=include_meta)
    within = _in_dates(since, until)
    if within is not None:  # a turn's time is in milliseconds
        infos = [t for t in infos if t.summary.get("time") is not None and within(t.summary["time"] / 1000)]
    if max_count:
        infos = infos[-max_count:]
    if as_json:
        c.json({"turns": [t.to_json() for t in infos]})
        return
    st = porcelain.load_state(repo, porcelain.resolve(repo, rev).oid)
    wanted = {t.index for t in infos}
    items = {}
    if wanted:
        for si in sequence.iter_items(repo.store, st.root, min(wanted), max(wanted) + 1):
            if si.index in wanted:
                items[si.index] = si.item
    # A result's tool column names the tool of the call it answers.
    tool_of = {}
    for t in all_infos:
        ids, tools = t.summary.get("calls", ()), str(t.summary.get("tool") or "").split(",")
        if len(ids) == len(tools):
            tool_of.update(zip(map(str, ids), tools))
    rows = []
    for t in infos:
        s = t.summary
        num = str(t.number) if t.number is not None else "."
        answered = list(dict.fromkeys(tool_of.get(str(r), "?") for r in s.get("results", ())))
        what = s.get("tool") or s.get("label") or ",".join(answered)
        rows.append([num, s.get("role", ""), s.get("kind", ""), what, render.size(int(s.get("chars", 0))),
                     render.when_ms(s.get("time")), of_item(repo, items[t.index], 60)])
    lines = render.table([["#", "role", "kind", "tool", "size", "time", "preview"]] + rows)
    if lines:
        lines[0] = c.style(lines[0], bold=True)
    c.out(lines, page=True)


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


# ------------------------------------------------------------------------------ diff / stats


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



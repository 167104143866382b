"""``opal log``: the commit history (git's revisions, dates and formats), or the turns of a state."""

from __future__ import annotations

import click

from opalgit import porcelain
from opalgit.cli import gitdate, pretty, render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.cli.options import GitCountCommand
from opalgit.history import revision, sequence
from opalgit.history.tokens import estimate, human
from opalgit.plural import count


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

"""The ``opal`` command line. The only module that reads ``os.environ`` and talks to the terminal.

Every error family maps to an exit code in one place (:func:`main`); a traceback is
shown only with ``-v``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Iterable

import click

from . import __version__, porcelain, render
from .errors import NothingToDoError, OpalError
from .repo import Repository
from .tokens import estimate, human

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@dataclass
class Ctx:
    cwd: str
    verbose: bool
    color: bool
    pager: bool

    def repo(self) -> Repository:
        return Repository.discover(self.cwd)

    def style(self, text: str, **kw: Any) -> str:
        return click.style(text, **kw) if self.color else text

    def out(self, lines: Iterable[str] | str, *, page: bool = False) -> None:
        text = lines if isinstance(lines, str) else "\n".join(lines)
        if page and self.pager and sys.stdout.isatty():
            os.environ.setdefault("LESS", "FRX")
            click.echo_via_pager(text + "\n", color=self.color)
        else:
            click.echo(text, color=self.color)

    def json(self, value: Any) -> None:
        click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=_json_default))

    def note(self, text: str) -> None:
        click.echo(self.style("note: ", fg="yellow") + text, err=True, color=self.color)

    def warn(self, text: str) -> None:
        click.echo(self.style("warning: ", fg="yellow", bold=True) + text, err=True, color=self.color)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)


pass_ctx = click.make_pass_decorator(Ctx)


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="opal", message="%(prog)s %(version)s")
@click.option("-C", "directory", type=click.Path(file_okay=False), help="Run as if opal was started in this folder.")
@click.option("-v", "--verbose", is_flag=True, help="Show a traceback on errors.")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour output (auto: only on a terminal, and not when NO_COLOR is set).",
)
@click.option("--no-pager", is_flag=True, help="Never page long output.")
@click.pass_context
def cli(ctx: click.Context, directory: str | None, verbose: bool, color: str, no_pager: bool) -> None:
    """opal: git for coding-agent sessions.

    Record an agent's session (every prompt, reply, tool call and result) as
    versioned state in your project's git repository; branch, rewind and undo it at
    turn granularity.

    \b
    Quick start:
      opal init                      # once per repository
      opal commit -m "plan agreed"   # record the agent session of this folder
      opal log --oneline --graph
      opal rewind 3                  # drop the last 3 turns
      opal undo                      # take it back
    """
    if color == "auto":
        use_color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    else:
        use_color = color == "always"
    cwd = os.path.abspath(directory) if directory else os.getcwd()
    ctx.obj = Ctx(cwd=cwd, verbose=verbose, color=use_color, pager=not no_pager and "OPAL_NO_PAGER" not in os.environ)


# ------------------------------------------------------------------------------ init


@cli.command(context_settings=CONTEXT)
@pass_ctx
def init(c: Ctx) -> None:
    """Set opal up in the git repository of this folder.

    opal keeps its data inside the repository's own object database under the
    private refs/opal/ namespace and files under .git/opal/; your branches, index
    and working tree are never touched. Outside a git repository it creates a store
    of its own in ./.opal/.

    \b
    Examples:
      opal init
      opal -C ~/src/my-project init
    """
    res = porcelain.init(c.cwd)
    where = f"{res.path} ({'own store in .opal/' if res.own_store else 'git repository'})"
    if res.created:
        c.out(f"Initialized opal in {where}; current branch {res.branch}")
    else:
        c.out(f"opal is already set up in {where}")


# ------------------------------------------------------------------------------ commit


@cli.command(context_settings=CONTEXT)
@click.option("-m", "--message", help="Commit message (default: a summary of what is new).")
@click.option("--agent", help="Only look for this agent's sessions (e.g. claude).")
@click.option("--session", "session_id", metavar="ID", help="Record this session, wherever its file is.")
@click.option("--file", "path", type=click.Path(dir_okay=False), help="Record this session file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def commit(c: Ctx, message: str | None, agent: str | None, session_id: str | None, path: str | None, as_json: bool) -> None:
    """Record the agent session of this folder as a new commit on the current branch.

    opal finds the session by itself (Claude Code: ~/.claude/projects/<folder key>/,
    honouring CLAUDE_CONFIG_DIR). With several, it keeps recording the one this
    branch already tracks, else takes the most recently written and says so. Only
    turns that are new since the last commit are read and stored; a session with
    nothing new is a no-op. Other lines of conversation inside one session file
    (the agent's own rewinds and edits) become branches named BRANCH-fork-<id>.

    \b
    Examples:
      opal commit -m "plan agreed"
      opal commit --session 7c83c109-bd8e-4995-ab21-c69c5256ec0d
      opal commit --file ~/.claude/projects/-home-me-app/7c83c109.jsonl --agent claude
    """
    repo = c.repo()
    try:
        res = porcelain.commit(repo, os.environ, c.cwd, message=message, agent=agent, session=session_id, file=path)
    except NothingToDoError as exc:
        if as_json:
            c.json({"committed": False, "reason": exc.message})
        else:
            c.out(exc.message)
        return
    for w in res.warnings:
        c.warn(w)
    for n in res.notes:
        c.note(n)
    if as_json:
        c.json(
            {
                "committed": True,
                "branch": res.branch,
                "id": res.oid.hex() if res.oid else None,
                "parent": res.parent.hex() if res.parent else None,
                "session": res.session.to_map() if res.session else None,
                "new_turns": res.new_turns,
                "new_records": res.new_items,
                "turns": res.turns,
                "records": res.items,
                "incremental": res.incremental,
                "fork_branches": res.forks,
                "objects_written": res.objects_written,
                "bytes_written": res.bytes_written,
                "warnings": res.warnings,
                "notes": res.notes,
            }
        )
        return
    assert res.oid is not None
    c.out(
        f"[{res.branch} {c.style(render.short(res.oid, 7), fg='yellow')}] "
        f"{res.new_turns} new turn{'s' if res.new_turns != 1 else ''} ({res.turns} in all) "
        f"from {res.session.agent if res.session else '?'} session {res.session.id[:8] if res.session else '?'}"
    )
    for fork in res.forks:
        c.out(f"  branch {fork}: another line of conversation in the same session file")


# ------------------------------------------------------------------------------ log


@cli.command(context_settings=CONTEXT)
@click.argument("revs", nargs=-1, metavar="[REV]...")
@click.option("-n", "--max-count", type=click.IntRange(min=1), help="Show at most this many commits.")
@click.option("--oneline", is_flag=True, help="One line per commit.")
@click.option("--graph", is_flag=True, help="Draw the commit graph.")
@click.option("--turns", is_flag=True, help="List the turns of REV's state instead of commits.")
@click.option("--all", "include_meta", is_flag=True, help="With --turns: include the agent's bookkeeping records.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def log(c: Ctx, revs: tuple[str, ...], max_count: int | None, oneline: bool, graph: bool, turns: bool, include_meta: bool, as_json: bool) -> None:
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
            c.json([t.to_json() for t in infos])
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
    infos = porcelain.log(repo, list(revs) or None, max_count)
    if as_json:
        c.json([i.to_json() for i in infos])
        return
    prefixes = render.graph([(i.oid, i.parents) for i in infos]) if graph else [("", [])] * len(infos)
    lines: list[str] = []
    for info, (prefix, after) in zip(infos, prefixes):
        labels = ""
        if info.branches:
            labels = " (" + ", ".join(c.style(b, fg="green", bold=True) for b in info.branches) + ")"
        pre = prefix + " " if graph else ""
        subject = info.message.splitlines()[0] if info.message else ""
        if oneline:
            lines.append(f"{pre}{c.style(render.short(info.oid, 7), fg='yellow')}{labels} {subject}")
        else:
            cont = (prefix.replace("*", "|") + " ") if graph else ""
            h = info.header
            lines.append(f"{pre}{c.style('commit ' + info.oid.hex(), fg='yellow')}{labels}")
            if len(info.parents) > 1:
                lines.append(f"{cont}Merge: {' '.join(render.short(p, 7) for p in info.parents)}")
            lines.append(f"{cont}Author: {info.author}")
            lines.append(f"{cont}Date:   {render.when(info.time, info.offset)}")
            if h.session:
                lines.append(f"{cont}Session: {h.session.agent} {h.session.id}, {h.turns} turns, ~{human(estimate(h.chars))} tokens")
            lines.append(cont.rstrip())
            for line in info.message.rstrip("\n").splitlines():
                lines.append(f"{cont}    {line}")
            lines.append(cont.rstrip())
        for a in after:
            lines.append(a)
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


# ------------------------------------------------------------------------------ branch / switch


@cli.command(context_settings=CONTEXT)
@click.argument("name", required=False)
@click.argument("start", required=False, default="HEAD", metavar="[START]")
@click.option("-l", "--list", "list_", is_flag=True, help="List branches (the default without NAME).")
@click.option("-d", "--delete", is_flag=True, help="Delete branch NAME.")
@click.option("-f", "--force", is_flag=True, help="With NAME START: move an existing branch.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def branch(c: Ctx, name: str | None, start: str, list_: bool, delete: bool, force: bool, as_json: bool) -> None:
    """List, create or delete branches of context.

    START may be a commit (HEAD~1, a short id) or a turn (HEAD:12): a branch at a
    turn starts from the state as it was right after that turn.

    \b
    Examples:
      opal branch                     # list
      opal branch try-sqlite HEAD~1   # fork the context at the previous commit
      opal branch retry HEAD:12       # fork right after turn 12
      opal branch -d try-sqlite
    """
    repo = c.repo()
    if delete:
        if not name:
            raise click.UsageError("branch -d needs a NAME")
        oid = porcelain.branch_delete(repo, name, force=force)
        c.out(f"Deleted branch {name} (was {render.short(oid, 7)}); 'opal undo' restores it")
        return
    if name and not list_:
        info = porcelain.branch_create(repo, name, start, force=force)
        if as_json:
            c.json(info.to_json())
        else:
            c.out(f"Created branch {name} at {render.short(info.oid, 7)} ({info.turns} turns); 'opal switch {name}' to use it")
        return
    infos = porcelain.branches(repo)
    if as_json:
        c.json([b.to_json() for b in infos])
        return
    rows = []
    for b in infos:
        mark = "*" if b.current else " "
        name_s = c.style(b.name, fg="green", bold=True) if b.current else b.name
        rows.append([f"{mark} {name_s}", render.short(b.oid, 7), f"{b.turns} turns", b.message.splitlines()[0] if b.message else ""])
    if not rows:
        c.out(f"no branches yet; 'opal commit' creates {porcelain.current_branch(repo)}")
        return
    c.out(render.table(rows))


@cli.command(context_settings=CONTEXT)
@click.argument("name")
@click.option("-c", "--create", is_flag=True, help="Create the branch first (at START, default HEAD).")
@click.argument("start", required=False, default="HEAD", metavar="[START]")
@pass_ctx
def switch(c: Ctx, name: str, create: bool, start: str) -> None:
    """Make NAME the current branch: later commits, rewinds and exports act on it.

    \b
    Examples:
      opal switch try-sqlite
      opal switch -c retry HEAD:12
    """
    repo = c.repo()
    try:
        porcelain.switch(repo, name, create=create, start=start)
    except NothingToDoError as exc:
        c.out(exc.message)
        return
    c.out(f"Switched to branch {name}")


# ------------------------------------------------------------------------------ rewind / undo / op


@cli.command(context_settings=CONTEXT)
@click.argument("count", type=click.IntRange(min=1), required=False)
@click.option("--to", "to", metavar="REV[:N]", help="Rewind to this turn (or commit) instead.")
@pass_ctx
def rewind(c: Ctx, count: int | None, to: str | None) -> None:
    """Drop the last COUNT turns of the current branch (non-destructive).

    The result is a new commit; the dropped turns stay in history, and 'opal undo'
    brings them back. Bookkeeping records after the last kept turn go with them.

    \b
    Examples:
      opal rewind 3            # drop the last 3 turns
      opal rewind --to HEAD:40 # keep turns 1..40
      opal undo                # changed your mind
    """
    if (count is None) == (to is None):
        raise click.UsageError("give COUNT or --to REV:N (one of them)")
    repo = c.repo()
    res = porcelain.rewind(repo, count, to)
    c.out(
        f"[{res.branch} {render.short(res.oid, 7)}] dropped {res.dropped_turns} turn{'s' if res.dropped_turns != 1 else ''} "
        f"({res.dropped_items} records); {res.turns} turns remain. 'opal undo' takes it back."
    )
    if res.warning:
        c.warn(res.warning)


@cli.command(context_settings=CONTEXT)
@click.argument("op_id", required=False, metavar="[OP]")
@click.option("--force", is_flag=True, help="Restore refs even if they changed since the operation.")
@pass_ctx
def undo(c: Ctx, op_id: str | None, force: bool) -> None:
    """Undo the last operation (or operation OP from 'opal op log').

    Every command that changes branches is recorded in the operation log; undo
    restores the branches it changed. Undo is itself an operation: run it again to
    step further back, or 'opal undo OP' on an undo to redo.

    \b
    Examples:
      opal undo
      opal op log
      opal undo 3f2a9c1e
    """
    repo = c.repo()
    try:
        op = porcelain.undo(repo, op_id, force=force)
    except NothingToDoError as exc:
        c.out(exc.message)
        return
    c.out(f"Undid: {op.description[len('undo '):]}")


@cli.group(context_settings=CONTEXT)
def op() -> None:
    """The operation log: every change opal made, undoable."""


@op.command("log", context_settings=CONTEXT)
@click.option("-n", "--max-count", type=click.IntRange(min=1), help="Show at most this many operations.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def op_log(c: Ctx, max_count: int | None, as_json: bool) -> None:
    """List operations, newest first.

    \b
    Examples:
      opal op log
      opal op log -n 5 --json
    """
    repo = c.repo()
    ops = porcelain.op_log(repo, max_count)
    if as_json:
        c.json(
            [
                {
                    "id": o.oid.hex() if o.oid else None,
                    "command": o.command,
                    "description": o.description,
                    "time": o.time,
                    "user": o.user,
                    "undoes": o.undoes.hex() if o.undoes else None,
                    "changes": {n: [a.hex() if a else None, b.hex() if b else None] for n, (a, b) in o.changes.items()},
                    "head": list(o.head),
                }
                for o in ops
            ]
        )
        return
    lines = []
    for o in ops:
        stamp = render.when_ms(o.time)
        lines.append(f"{c.style(render.short(o.oid or b'', 10), fg='yellow')} {stamp}  {o.description}")
    c.out(lines, page=True)


# ------------------------------------------------------------------------------ status


@cli.command(context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def status(c: Ctx, as_json: bool) -> None:
    """Show the current branch, the agent sessions of this folder and what is not committed.

    \b
    Examples:
      opal status
      opal status --json
    """
    from . import merging

    repo = c.repo()
    st = porcelain.status(repo, os.environ, c.cwd)
    pending = merging.in_progress(repo)
    if as_json:
        data = st.to_json()
        data["merge"] = {"merging": pending["name"], "choices": pending.get("choices") or {}} if pending else None
        c.json(data)
        return
    lines = [f"On branch {c.style(st.branch, bold=True)}"]
    if pending:
        lines.append(c.style(f"Merging {pending['name']}: stopped on conflicts; see 'opal merge --continue --help'", fg="red"))
    if st.head is None:
        lines.append("No commits yet.")
    else:
        lines.append(f"Head {render.short(st.head, 7)}: {st.turns} turns")
    if st.detached:
        lines.append(f"This state was {st.detached}; export it to continue from here.")
    if not st.sessions:
        lines.append("No agent sessions found for this folder.")
    else:
        lines.append("")
        lines.append("Sessions of this folder:")
        for s in st.sessions:
            flag = ""
            if s.pending:
                flag = c.style(f"  uncommitted: {s.size - (s.committed_bytes or 0)} bytes new", fg="red")
            elif s.pending is False:
                flag = c.style("  up to date", fg="green")
            elif not s.tracked:
                flag = "  not recorded on this branch"
            lines.append(f"  {s.agent:7} {s.id}{' (tracked)' if s.tracked else ''}{flag}")
    c.out(lines)


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
    lines.append(f"{res.shared_turns} turns in common ({res.common_prefix_turns} before the first difference)")
    if res.uncommitted:
        lines.append(f"{res.uncommitted} records of the working state are not committed yet")
    sa, sb = res.stat["a"], res.stat["b"]
    lines.append(
        f"{res.a}: {sa['turns']} turns only here, {sa['tool_calls']} tool calls, ~{human(sa['tokens'])} tokens"
    )
    lines.append(
        f"{res.b}: {sb['turns']} turns only here, {sb['tool_calls']} tool calls, ~{human(sb['tokens'])} tokens"
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


# ------------------------------------------------------------------------------ merge


def _parse_takes(takes: tuple[str, ...]) -> dict[int, str]:
    out: dict[int, str] = {}
    for t in takes:
        num, _, choice = t.partition("=")
        try:
            out[int(num)] = choice
        except ValueError:
            raise click.UsageError(f"--take {t!r}: write N=ours|theirs|both|base") from None
        if choice not in ("ours", "theirs", "both", "base"):
            raise click.UsageError(f"--take {t!r}: the choice must be ours, theirs, both or base")
    return out


@cli.command(context_settings=CONTEXT)
@click.argument("rev", required=False, metavar="[REV]")
@click.option("--strategy", type=click.Choice(["ours", "theirs", "both"]), help="Resolve every conflict this way.")
@click.option("--take", "takes", multiple=True, metavar="N=CHOICE", help="Resolve conflict N (ours, theirs, both or base); repeatable.")
@click.option("--continue", "continuing", is_flag=True, help="Finish a merge that stopped on conflicts.")
@click.option("--abort", "aborting", is_flag=True, help="Forget a merge that stopped on conflicts.")
@click.option("-m", "--message", help="Message of the merge commit.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def merge(c: Ctx, rev: str | None, strategy: str | None, takes: tuple[str, ...], continuing: bool, aborting: bool, message: str | None, as_json: bool) -> None:
    """Merge another line of context into the current branch (three-way, against the merge base).

    When both sides only added turns, the result keeps the shared turns, then this
    branch's new turns, then a marker turn saying where the other branch begins, then
    its new turns. A turn removed on one side stays removed. A stretch changed
    differently on both sides is a conflict: the merge stops, 'opal status' lists the
    conflicts, and you choose per conflict (--continue --take N=ours) or for all
    (--strategy). Every tool call in the result keeps its result.

    \b
    Examples:
      opal merge try-sqlite
      opal merge try-sqlite --strategy theirs
      opal merge --continue --take 0=ours --take 1=both
      opal merge --abort
    """
    from . import merging

    repo = c.repo()
    if aborting:
        name = merging.abort(repo)
        c.out(f"Merge of {name} aborted; nothing was changed")
        return
    if not continuing and rev is None:
        raise click.UsageError("give a REV to merge, or --continue / --abort")
    try:
        res = merging.merge(repo, rev, strategy=strategy, message=message, choices=_parse_takes(takes), continuing=continuing)
    except NothingToDoError as exc:
        if as_json:
            c.json({"result": "up-to-date", "message": exc.message})
        else:
            c.out(exc.message)
        return
    if as_json:
        c.json(res.to_json())
        return
    if res.kind == "fast-forward":
        c.out(f"Fast-forwarded {res.branch} to {res.theirs} ({render.short(res.oid or b'', 7)})")
        return
    if res.kind == "conflicts":
        c.out(c.style(f"Merge of {res.theirs} into {res.branch} stopped on {len(res.conflicts)} conflict(s):", fg="red", bold=True))
        for v in res.conflicts:
            def side(items):
                return ", ".join(f"{i['role']} {i['kind']}{' ' + i['tool'] if i['tool'] else ''}" for i in items) or "nothing"
            c.out(f"  conflict {v.index}: base had {len(v.base)} turns; ours: {side(v.ours)}; theirs: {side(v.theirs)}")
        c.out("Choose per conflict: opal merge --continue --take N=ours|theirs|both|base, or --strategy; or opal merge --abort")
        raise click.exceptions.Exit(1)
    c.out(f"[{res.branch} {render.short(res.oid or b'', 7)}] merged {res.theirs}: {res.added_from_theirs} turns from it")
    for r in res.repairs:
        c.note(r)


# ------------------------------------------------------------------------------ clean-up


def _print_edit(c: Ctx, res, as_json: bool) -> None:
    if as_json:
        c.json(res.to_json())
        return
    for n in res.notes:
        c.note(n)
    what = f"turns {res.range[0]}..{res.range[1]}" if res.range else f"{res.changed} tool outputs"
    c.out(
        f"[{res.branch} {render.short(res.oid, 7)}] {res.command} {what}: {res.turns_before} -> {res.turns_after} turns, "
        f"~{human(res.tokens_before)} -> ~{human(res.tokens_after)} tokens (saved ~{human(res.saved)}). 'opal undo' takes it back."
    )


@cli.command(context_settings=CONTEXT)
@click.argument("turns", metavar="FROM..TO")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def drop(c: Ctx, turns: str, as_json: bool) -> None:
    """Cut a stretch of turns (both ends included) out of the current branch, keeping what came after.

    A range that would separate a tool call from its result is widened, and opal
    says so. The result is a new commit; 'opal undo' restores the turns.

    \b
    Examples:
      opal drop HEAD:12..HEAD:19     # a failed exploration
      opal drop HEAD:-4..HEAD:-2
    """
    from . import cleanup

    _print_edit(c, cleanup.drop(c.repo(), turns), as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("turns", metavar="FROM..TO")
@click.option("-m", "--message", required=True, help="The summary that replaces the turns.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def squash(c: Ctx, turns: str, message: str, as_json: bool) -> None:
    """Replace a stretch of turns by one summary turn.

    \b
    Examples:
      opal squash HEAD:12..HEAD:19 -m "tried X, failed because Y"
    """
    from . import cleanup

    _print_edit(c, cleanup.squash(c.repo(), turns, message), as_json)


@cli.command(context_settings=CONTEXT)
@click.option("--tool-output-over", "over", required=True, metavar="SIZE", help="Trim tool outputs longer than this (characters; 20k, 1.5M).")
@click.option("--keep", metavar="SIZE", help="How much of each output to keep (default: a quarter of SIZE, at least 200).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def trim(c: Ctx, over: str, keep: str | None, as_json: bool) -> None:
    """Shrink huge tool outputs to a marked excerpt (head and tail) on the current branch.

    \b
    Examples:
      opal trim --tool-output-over 20k
      opal trim --tool-output-over 5000 --keep 1000
    """
    from . import cleanup

    repo = c.repo()
    try:
        res = cleanup.trim(repo, cleanup.parse_size(over), keep=cleanup.parse_size(keep) if keep else None)
    except NothingToDoError as exc:
        c.out(exc.message)
        return
    _print_edit(c, res, as_json)


# ------------------------------------------------------------------------------ export / resume


def _agent_choice() -> click.Choice:
    from . import adapters

    return click.Choice(adapters.names())


def _print_export(c: Ctx, res, *, verb: str = "Exported") -> None:
    r = res.report
    head = "Would write" if res.dry_run else verb
    c.out(f"{head} {res.turns} turns of {res.rev} ({render.short(res.commit, 7)}) as a {res.agent} session {res.session_id}")
    for f in res.files:
        c.out(f"  {'would write' if res.dry_run else 'wrote'} {f}")
    for f in res.aux:
        c.out(f"  {'would update' if res.dry_run else 'updated'} {f}")
    if res.tokens_before != res.tokens_after:
        c.out(f"  ~{human(res.tokens_before)} tokens fitted to ~{human(res.tokens_after)}")
    if r.converted or r.dropped:
        c.out("Loss report:")
        for k, v in sorted(r.converted.items()):
            c.out(f"  converted {v:5}  {k}")
        for k, v in sorted(r.dropped.items()):
            c.out(c.style(f"  dropped   {v:5}  {k}", fg="yellow"))
    else:
        c.out("Loss report: nothing converted or dropped")
    for n in r.notes:
        c.note(n)
    cmd = " ".join(_shell_quote(a) for a in res.resume)
    if not res.dry_run:
        c.out("Resume it with:")
        c.out("  " + c.style(f"cd {_shell_quote(res.cwd)} && {cmd}", bold=True))


def _at(repo, rev: str, at: str | None) -> str:
    """With --at CODE_REV, the state linked to that code commit (its id as a revision)."""
    if at is None:
        return rev
    if rev != "HEAD":
        raise click.UsageError("give either REV or --at CODE_REV, not both")
    from . import links

    return links.state_at(repo, at).hex()


def _shell_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


@cli.command(context_settings=CONTEXT)
@click.argument("rev", default="HEAD", metavar="[REV]")
@click.option("--to", "to", required=True, help="The agent to export to (claude, codex, gemini).")
@click.option("--at", "at", metavar="CODE_REV", help="Export the state recorded with this code commit (see 'opal at').")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False), help="The folder you will resume from (default: the session's own).")
@click.option("--dry-run", is_flag=True, help="Say what would be written, converted and dropped; write nothing.")
@click.option("--budget", type=click.IntRange(min=1), metavar="TOKENS", help="Fit the session into this many tokens (largest tool outputs first, then the oldest turns).")
@click.option("--reasoning", type=click.Choice(["drop", "text"]), default="drop", show_default=True, help="Another vendor's reasoning: leave it out, or keep it as plain marked text.")
@click.option("--json", "as_json", is_flag=True, help="Print the result and the whole loss report as JSON.")
@pass_ctx
def export(c: Ctx, rev: str, to: str, at: str | None, cwd: str | None, dry_run: bool, budget: int | None, reasoning: str, as_json: bool) -> None:
    """Write a commit (or a turn, REV:N) as a native session of an agent, ready to resume.

    The session gets a fresh id, so nothing of yours is overwritten, and is written
    where the agent looks for it. Tool calls stay tool calls paired with their
    results (mapped to the target's own tools where there is a clear counterpart);
    every conversion or omission is listed in the loss report. The branch then
    tracks the new session, so 'opal commit' records how it grows.

    \b
    Examples:
      opal export --to codex                 # the current branch, for Codex
      opal export main~2 --to gemini --cwd ../other-checkout
      opal export HEAD:40 --to claude        # up to turn 40
      opal export --to claude --dry-run
      opal export --to codex --budget 100000 --json
      opal export --at v1.2 --to claude      # the context that produced a code commit
    """
    from . import exporting

    repo = c.repo()
    rev = _at(repo, rev, at)
    res = exporting.export(repo, os.environ, rev, to=to, cwd=cwd, dry_run=dry_run, reasoning=reasoning, budget=budget)
    if as_json:
        c.json(res.to_json())
        return
    _print_export(c, res)


@cli.command(context_settings=CONTEXT)
@click.argument("rev", default="HEAD", metavar="[REV]")
@click.option("--agent", "to", required=True, help="The agent to continue in (claude, codex, gemini).")
@click.option("--at", "at", metavar="CODE_REV", help="Resume the state recorded with this code commit (see 'opal at').")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False), help="The folder to resume in (default: the session's own).")
@click.option("--budget", type=click.IntRange(min=1), metavar="TOKENS", help="Fit the session into this many tokens first.")
@click.option("--reasoning", type=click.Choice(["drop", "text"]), default="drop", show_default=True, help="Another vendor's reasoning: leave it out, or keep it as plain marked text.")
@pass_ctx
def resume(c: Ctx, rev: str, to: str, at: str | None, cwd: str | None, budget: int | None, reasoning: str) -> None:
    """Export REV (default HEAD) to an agent and start that agent on it.

    \b
    Examples:
      opal resume --agent codex
      opal resume --agent claude try-sqlite
      opal resume --at v1.2 --agent codex    # continue from the context of a code commit
    """
    import shutil
    import subprocess

    from . import exporting

    repo = c.repo()
    rev = _at(repo, rev, at)
    res = exporting.export(repo, os.environ, rev, to=to, cwd=cwd, reasoning=reasoning, budget=budget)
    _print_export(c, res, verb="Exported")
    exe = shutil.which(res.resume[0])
    if exe is None:
        raise OpalError(
            f"{res.resume[0]} is not on PATH, so it cannot be started",
            hint="install the agent, then run the resume command printed above",
        )
    c.out(f"Starting {' '.join(res.resume)} in {res.cwd}")
    code = subprocess.call([exe, *res.resume[1:]], cwd=res.cwd)
    if code:
        raise click.exceptions.Exit(code)


# ------------------------------------------------------------------------------ fsck


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
    from . import fsck as fsck_mod
    from .errors import CorruptObjectError

    report = fsck_mod.fsck(c.repo())
    if as_json:
        c.json(report.to_json())
    else:
        r = report
        c.out(f"checked {r.commits} commits, {r.leaves} leaves, {r.turns} turns, {r.payloads} payloads, {r.operations} operations")
        for p in r.problems:
            c.out(c.style("problem: ", fg="red") + p)
        if r.ok:
            c.out("no problems found")
    if not report.ok:
        raise CorruptObjectError(f"{len(report.problems)} problem(s) found", hint="see the list above; 'opal op log' and 'opal undo' may restore a good state")


# ------------------------------------------------------------------------------ demo


@cli.command(context_settings=CONTEXT)
@click.option("--keep", type=click.Path(file_okay=False), help="Build the demo in this folder and keep it.")
@pass_ctx
def demo(c: Ctx, keep: str | None) -> None:
    """Walk through opal on a bundled Claude Code session (no agent account needed).

    Builds a throw-away project with a realistic session, then commits, branches,
    rewinds, undoes and shows the log, printing each command as it goes.

    \b
    Examples:
      opal demo
      opal demo --keep /tmp/opal-demo
    """
    from .demo import run_demo

    run_demo(keep, echo=lambda s: c.out(s), style=c.style)


# ------------------------------------------------------------------------------ entry point


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "-v" in args or "--verbose" in args
    try:
        rv = cli.main(args=args, prog_name="opal", standalone_mode=False)
        # click returns the code of an Exit raised inside a command instead of raising it.
        return rv if isinstance(rv, int) else 0
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 130
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except OpalError as exc:
        if verbose:
            traceback.print_exc()
        click.echo(f"opal: error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        return exc.exit_code or 1
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return 130
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            return 0
        if verbose:
            traceback.print_exc()
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        click.echo(f"opal: error: cannot access{where}: {exc.strerror or exc}", err=True)
        click.echo("hint: nothing was changed; fix the cause (space, permissions) and run the command again", err=True)
        return 1
    except BrokenPipeError:
        # `opal log | head`: the reader went away; not an error.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except Exception as exc:  # a bug: say so in one line, traceback with -v
        if verbose:
            traceback.print_exc()
        click.echo(f"opal: internal error: {type(exc).__name__}: {exc}", err=True)
        click.echo("hint: run again with -v for a traceback, and report it", err=True)
        return 70


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

from . import cli_sync  # noqa: E402,F401  (attaches the hooks and remote commands)

__all__ = ["cli", "main", "cli_sync"]

"""``opal blame``: which recorded agent turn, or which person's code commit, last wrote each line."""

from __future__ import annotations

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli

ZERO = "0" * 40


def _range(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    start, sep, end = value.partition(",")
    try:
        a = int(start)
        b = int(end) if sep and end else a if not sep else 10**9
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected START,END (line numbers), e.g. -L 10,20") from None
    return a, b


@cli.command(context_settings=CONTEXT)
@click.argument("file", metavar="FILE", type=click.Path(dir_okay=False))
@click.argument("code_rev", required=False, metavar="[CODE_REV]")
@click.option("-L", "lines", metavar="START,END", help="Only these lines (1-based, inclusive).")
@click.option("--porcelain", is_flag=True, help="Machine-readable, shaped like 'git blame --porcelain' (with opal-* headers).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON (docs/json.md).")
@pass_ctx
def blame(c: Ctx, file: str, code_rev: str | None, lines: str | None, porcelain: bool, as_json: bool) -> None:
    """Show, for every line of FILE, the agent turn whose tool call last wrote it.

    Each line is owned by a recorded agent turn (the agent, session, state and turn
    number, the prompt that led to it, its time), by a person (the code commit that
    changed it and no recorded tool call explains), by an uncommitted change, or is
    unattributed, with the reason. FILE is followed through git's history (renames
    too) and through the edit, write and patch tool calls of every state opal holds.
    CODE_REV blames the file as it is in that code commit; by default, the working
    tree. See docs/blame.md for the rule.

    \b
    Examples:
      opal blame src/app.py
      opal blame -L 40,60 src/app.py HEAD~3
      opal blame src/app.py --json | jq '.lines[] | select(.owner.kind=="human")'
      opal resume --at-line src/app.py:42 --agent claude   # back to the turn that wrote it
    """
    from opalgit.porcelain.blame import blame as run_blame

    repo = c.repo()
    res = run_blame(repo, file, c.cwd, code_rev, lines=_range(lines))
    if as_json:
        c.json(res.to_json())
        return
    c.out(porcelain_lines(repo, res) if porcelain else human_text(c, res), page=True)
    for n in res.notes:
        c.note(n)  # on stderr: what a --porcelain reader parses stays git's shape


def _who(o) -> str:
    if o.kind == "agent":
        return f"{o.agent} {o.state.hex()[:7]}:{o.turn}"
    if o.kind == "human":
        return f"human {(o.author or '').split(' <')[0]}"
    return o.kind


def human_text(c: Ctx, res) -> str:
    from opalgit.times import iso_ms

    out = []
    width = max((len(_who(ln.owner)) for ln in res.lines), default=0)
    num = len(str(res.lines[-1].number)) if res.lines else 1
    turns: dict = {}
    for ln in res.lines:
        o = ln.owner
        sha = ln.commit.hex()[:7] if ln.commit else "0000000"
        when = (iso_ms(o.time) or "")[:16].replace("T", " ") if o.time is not None else " " * 16
        who = _who(o).ljust(width)
        colour = {"agent": "cyan", "human": "green", "uncommitted": "yellow"}.get(o.kind, "red")
        out.append(f"{c.style(sha, fg='yellow')} ({c.style(who, fg=colour)} {when} {ln.number:>{num}}) {ln.text}")
        if o.kind == "agent":
            turns.setdefault(_who(o), o.prompt)
        elif o.kind == "unattributed":
            turns.setdefault(f"unattributed line {ln.number}", o.reason)
    if turns:
        out.append("")
        for who, what in turns.items():
            first = (what or "(no prompt recorded)").strip().splitlines()[0] if (what or "").strip() else "(no prompt recorded)"
            out.append(f"{who}: {first[:100]}")
    return "\n".join(out)


def porcelain_lines(repo, res) -> list[str]:
    """``git blame --porcelain``'s shape: a header line per line (the group size on a group's
    first), the headers where the owner changes, then the line after a tab."""
    out: list[str] = []
    prev = None
    groups: list[list] = []
    for ln in res.lines:
        key = (ln.commit, ln.owner)
        if groups and key == prev:
            groups[-1].append(ln)
        else:
            groups.append([ln])
        prev = key
    for group in groups:
        for k, ln in enumerate(group):
            sha = ln.commit.hex() if ln.commit else ZERO
            out.append(f"{sha} {ln.number} {ln.number}" + (f" {len(group)}" if k == 0 else ""))
            if k == 0:
                out += _headers(repo, ln, res.path)
            out.append("\t" + ln.text)
    return out


def _headers(repo, ln, path: str) -> list[str]:
    o = ln.owner
    if o.kind == "agent":
        name, mail, t = o.agent, o.session, (o.time or 0) // 1000
        summary = ((o.prompt or "").strip().splitlines() or [""])[0]
    else:
        name, _, mail = (o.author or "Not Committed Yet").partition(" <")
        mail, t = mail.rstrip(">") or "not.committed.yet", (o.time or 0) // 1000
        summary = _subject(repo, ln.commit) if ln.commit else "Version of " + path + " from the working tree"
    rows = [f"author {name}", f"author-mail <{mail}>", f"author-time {t}", "author-tz +0000",
            f"committer {name}", f"committer-mail <{mail}>", f"committer-time {t}", "committer-tz +0000",
            f"summary {summary}", f"filename {path}", f"opal-kind {o.kind}"]
    if o.kind == "agent":
        rows += [f"opal-agent {o.agent}", f"opal-session {o.session}", f"opal-state {o.state.hex()}",
                 f"opal-turn {o.turn}", f"opal-tool {o.tool}"]
    if o.reason:
        rows.append(f"opal-reason {o.reason}")
    return rows


def _subject(repo, commit: bytes) -> str:
    return repo.store.read_commit(commit).message.split("\n", 1)[0].strip()

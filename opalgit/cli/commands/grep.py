"""``opal grep``: search the prompts, replies, tool calls and results of states."""

from __future__ import annotations

import shutil

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.plural import count

#: Characters of a matched line shown around its first match; a line longer than the
#: room left on the terminal is cut around the match, with "…" where it was cut.
_CONTEXT = 40


@cli.command(context_settings=CONTEXT)
@click.argument("pattern")
@click.argument("revs", nargs=-1, metavar="[REV]...")
@click.option("--all", "all_branches", is_flag=True, help="Search every branch and remote-tracking branch.")
@click.option("-i", "--ignore-case", is_flag=True, help="Match letters of either case.")
@click.option("-F", "--fixed-strings", "fixed", is_flag=True,
              help="PATTERN is a literal string, not a regular expression.")
@click.option("--role", "roles", multiple=True, type=click.Choice(["user", "assistant", "tool", "system", "meta"]),
              help="Only records of this role (repeatable); meta searches the agent's bookkeeping records too.")
@click.option("--tool", "tools", multiple=True, metavar="NAME",
              help="Only calls of this tool and their results (repeatable; the agent's own name: Bash, "
                   "exec_command ...).")
@click.option("-l", "--files-with-matches", "list_only", is_flag=True,
              help="Print only BRANCH:TURN of each matching turn.")
@click.option("-c", "--count", "count_only", is_flag=True, help="Print BRANCH:TURN and how many of its lines match.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def grep(c: Ctx, pattern: str, revs: tuple[str, ...], all_branches: bool, ignore_case: bool, fixed: bool,
         roles: tuple[str, ...], tools: tuple[str, ...], list_only: bool, count_only: bool, as_json: bool) -> None:
    """Search every turn of states for a regular expression.

    Searches the text of prompts and replies, reasoning, every string of a tool
    call's input and the text of its result, in the state of each REV (default
    HEAD) or, with --all, of every branch. Prints BRANCH:TURN:WHERE: and the
    matching line, the match highlighted. A record that several states share is
    searched once. Exit code 1 when nothing matches, as git grep.

    \b
    Examples:
      opal grep 'TODO|FIXME'
      opal grep -i 'permission denied' --all
      opal grep --tool Bash 'npm (install|ci)'
      opal grep -F 'def farewell(' main try-sqlite -l
      opal grep --role user 'refactor' --json
    """
    from opalgit.porcelain.grep import grep as search

    repo = c.repo()
    res = search(repo, pattern, revs, all_branches=all_branches, ignore_case=ignore_case, fixed=fixed,
                 roles=roles, tools=tools)
    if res.unreadable:
        label, record, why = res.unreadable[0]
        c.warn(f"{count(len(res.unreadable), 'record')} could not be read and were not searched "
               f"(the first: {label} record {record}: {why}); 'opal fsck' says why")
    if as_json:
        c.json({"pattern": pattern, "matches": [t.to_json() for t in res.turns],
                "lines": sum(len(t.lines) for t in res.turns), "searched": res.stats.to_json(),
                "unreadable": [{"rev": r, "record": n, "why": w} for r, n, w in res.unreadable]})
    elif list_only:
        c.out([c.style(t.where, fg="magenta") for t in res.turns], page=True)
    elif count_only:
        c.out([c.style(t.where, fg="magenta") + c.style(":", fg="cyan") + str(len(t.lines)) for t in res.turns],
              page=True)
    else:
        width = shutil.get_terminal_size((200, 24)).columns
        c.out([_line(c, t, x, width) for t in res.turns for x in t.lines], page=True)
    if not res.turns:
        raise SystemExit(1)


def _line(c: Ctx, turn, line, width: int) -> str:
    """``branch:turn:where: text`` with the matches highlighted, cut to the terminal's width."""
    where = line.block if line.tool is None else f"{line.block} {line.tool}"
    if line.key and line.key != "name":
        where += f" {line.key}"
    sep = c.style(":", fg="cyan")
    head = c.style(turn.where.rsplit(":", 1)[0], fg="magenta") + sep + c.style(turn.where.rsplit(":", 1)[1], fg="green")
    plain_head = f"{turn.where}:{where}: "
    room = max(40, width - len(plain_head))
    text, spans = _window(line.text, list(line.spans), room)
    out, pos = [], 0
    for a, b in spans:
        out.append(text[pos:a])
        out.append(c.style(text[a:b], fg="red", bold=True))
        pos = b
    out.append(text[pos:])
    return head + sep + c.style(where, dim=True) + sep + " " + "".join(out)


def _window(text: str, spans: list[tuple[int, int]], room: int) -> tuple[str, list[tuple[int, int]]]:
    """``text`` cut to about ``room`` characters around its first match, spans moved with it."""
    text = text.replace("\t", " ")
    if len(text) <= room:
        return text, spans
    start = max(0, spans[0][0] - _CONTEXT) if spans else 0
    end = min(len(text), start + room)
    start = max(0, min(start, end - room))
    lead, tail = ("…" if start > 0 else ""), ("…" if end < len(text) else "")
    shift = len(lead) - start
    kept = [(max(a, start) + shift, min(b, end) + shift) for a, b in spans if b > start and a < end]
    return lead + text[start:end] + tail, kept

"""``opal merge``: three-way merge of another line of context, and how its conflicts are printed
(:func:`conflict_lines`, which ``opal status`` prints too).
"""

from __future__ import annotations

from typing import Mapping

import click

from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.errors import NothingToDoError


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
@click.option("--force", is_flag=True, help="Merge even if it leaves out turns of the current branch.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def merge(c: Ctx, rev: str | None, strategy: str | None, takes: tuple[str, ...], continuing: bool, aborting: bool, message: str | None, force: bool, as_json: bool) -> None:
    """Merge another line of context into the current branch (three-way, against the merge base).

    When both sides only added turns, the result keeps the shared turns, then this
    branch's new turns, then a marker turn saying where the other branch begins, then
    its new turns. A turn removed on one side stays removed. A stretch changed
    differently on both sides is a conflict: the merge stops, 'opal status' lists the
    conflicts, and you choose per conflict (--continue --take N=ours) or for all
    (--strategy). Every tool call in the result keeps its result.

    A merge never leaves out a turn of the current branch unless you pass --force:
    not by fast-forwarding to a branch that lacks some (one rewound, or branched at
    an earlier turn), nor by taking the other side's removal of some. A branch made
    at an earlier turn (opal branch NAME REV:N) merges against that turn: the
    current branch's later turns are its own, kept.

    \b
    Examples:
      opal merge try-sqlite
      opal merge try-sqlite --strategy theirs
      opal merge --continue --take 0=ours --take 1=both
      opal merge --abort
    """
    from opalgit.porcelain import merge as merging

    repo = c.repo()
    if aborting:
        name = merging.abort(repo)
        c.out(f"Merge of {name} aborted; nothing was changed")
        return
    if not continuing and rev is None:
        raise click.UsageError("give a REV to merge, or --continue / --abort")
    try:
        res = merging.merge(repo, rev, strategy=strategy, message=message, choices=_parse_takes(takes),
                            continuing=continuing, force=force)
    except NothingToDoError as exc:
        if as_json:
            c.json({"result": "up-to-date", "message": exc.message})
        else:
            c.out(exc.message)
        return
    if as_json:
        c.json(res.to_json())
        return
    left_out = (f"; {res.removed} of {res.branch}'s turns left out (--force), 'opal undo' takes it back"
                if res.removed else "")
    if res.kind == "fast-forward":
        c.out(f"Fast-forwarded {res.branch} to {res.theirs} ({render.short(res.oid or b'', 7)}){left_out}")
        return
    if res.kind == "conflicts":
        n = len(res.conflicts)
        c.out(c.style(f"Merge of {res.theirs} into {res.branch} stopped on {n} conflict{'s' if n != 1 else ''}:", fg="red", bold=True))
        c.out(conflict_lines(c, [v.to_json() for v in res.conflicts], res.branch, res.theirs))
        raise click.exceptions.Exit(1)
    c.out(f"[{res.branch} {render.short(res.oid or b'', 7)}] merged {res.theirs}: {res.added_from_theirs} turns from it{left_out}")
    for r in res.repairs:
        c.note(r)


#: Turns shown per side of a conflict (the JSON has them all).
SHOWN_TURNS = 3


def conflict_lines(c: Ctx, conflicts: list[dict], ours: str, theirs: str, choices: Mapping[str, str] | None = None) -> list[str]:
    """A merge's conflicts as 'opal status' and 'opal merge' print them: per conflict,
    each side's turns with their numbers and first words, then how to resolve them."""
    choices = dict(choices or {})
    lines = []
    for v in conflicts:
        chosen = choices.get(str(v["conflict"])) or v.get("choice")
        head = f"  conflict {v['conflict']}" + (f": resolved, {chosen}" if chosen else ":")
        lines.append(c.style(head, bold=True))
        for side, name in (("ours", ours), ("theirs", theirs), ("base", "the merge base")):
            turns = v[side]
            span = _span(turns)
            lines.append(f"    {side:6} ({name}): {span}")
            for t in turns[:SHOWN_TURNS]:
                what = t["role"] + (f" {t['tool']}" if t.get("tool") else "")
                preview = f": {t['preview']}" if t.get("preview") else ""
                lines.append(f"      {t.get('turn', '?'):>5}  {what}{preview}")
            if len(turns) > SHOWN_TURNS:
                lines.append(f"      ... and {len(turns) - SHOWN_TURNS} more")
    open_ = [v["conflict"] for v in conflicts if not (choices.get(str(v["conflict"])) or v.get("choice"))]
    if open_:
        takes = " ".join(f"--take {i}=ours" for i in open_)
        lines.append(f"  Resolve each (ours, theirs, both or base): opal merge --continue {takes}")
        lines.append("  or all at once: opal merge --continue --strategy theirs; or give up: opal merge --abort")
    return lines


def _span(turns: list[dict]) -> str:
    if not turns:
        return "no turns"
    first, last = turns[0].get("turn"), turns[-1].get("turn")
    n = len(turns)
    where = f"turn {first}" if n == 1 else f"turns {first}-{last}"
    return where if first is not None else f"{n} turn{'s' if n != 1 else ''}"

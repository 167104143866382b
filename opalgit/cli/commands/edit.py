"""Commands that change branches of context: ``branch``, ``switch``, ``rewind``, ``undo``, ``op``, ``merge``, ``drop``, ``squash``, ``trim``.

Part of the CLI layer: importing this module attaches its commands to :data:`opalgit.cli.main.cli`.
"""

from __future__ import annotations

import click

from opalgit import porcelain
from opalgit.cli import render
from opalgit.cli.main import CONTEXT, Ctx, GitCountCommand, cli, pass_ctx
from opalgit.errors import NothingToDoError
from opalgit.history.tokens import human
from opalgit.plural import count as counted
from opalgit.plural import noun

# ------------------------------------------------------------------------------ branch / switch


@cli.command(context_settings=CONTEXT)
@click.argument("name", required=False)
@click.argument("start", required=False, default="HEAD", metavar="[START]")
@click.option("-l", "--list", "list_", is_flag=True, help="List branches (the default without NAME).")
@click.option("-d", "--delete", is_flag=True, help="Delete branch NAME.")
@click.option("-D", "delete_force", is_flag=True, help="Delete branch NAME, even the current one (--delete --force).")
@click.option("-m", "--move", "move", is_flag=True, help="Rename: 'branch -m NEW' renames the current branch, 'branch -m OLD NEW' another.")
@click.option("-M", "move_force", is_flag=True, help="Rename, replacing a branch that has the new name (--move --force).")
@click.option("-r", "--remotes", is_flag=True, help="List the remote-tracking branches.")
@click.option("-a", "--all", "all_", is_flag=True, help="List local and remote-tracking branches.")
@click.option("-f", "--force", is_flag=True, help="With NAME START: move an existing branch.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def branch(c: Ctx, name: str | None, start: str, list_: bool, delete: bool, delete_force: bool, move: bool,
           move_force: bool, remotes: bool, all_: bool, force: bool, as_json: bool) -> None:
    """List, create, rename or delete branches of context.

    START may be a commit (HEAD~1, a short id) or a turn (HEAD:12): a branch at a
    turn starts from the state as it was right after that turn. A rename carries the
    session the branch tracks, and 'opal undo' takes it back.

    \b
    Examples:
      opal branch                     # list
      opal branch -a                  # with the remote-tracking branches
      opal branch try-sqlite HEAD~1   # fork the context at the previous commit
      opal branch retry HEAD:12       # fork right after turn 12
      opal branch -m try-sqlite sqlite
      opal branch -d try-sqlite
    """
    repo = c.repo()
    if delete or delete_force:
        if not name:
            raise click.UsageError("branch -d needs a NAME")
        oid = porcelain.branch_delete(repo, name, force=force or delete_force)
        c.out(f"Deleted branch {name} (was {render.short(oid, 7)}); 'opal undo' restores it")
        return
    if move or move_force:
        _rename(c, repo, name, start if _given(start) else None, move_force or force)
        return
    if name and not (list_ or remotes or all_):
        info = porcelain.branch_create(repo, name, start, force=force)
        if as_json:
            c.json(info.to_json())
        else:
            c.out(f"Created branch {name} at {render.short(info.oid, 7)} ({counted(info.turns, 'turn')}); 'opal switch {name}' to use it")
        return
    _list_branches(c, repo, local=not remotes or all_, remote=remotes or all_, as_json=as_json)


def _given(start: str) -> bool:
    # START defaults to "HEAD": 'branch -m HEAD' is not a name anyone renames to.
    return click.get_current_context().get_parameter_source("start") != click.core.ParameterSource.DEFAULT


def _rename(c: Ctx, repo, name: str | None, new: str | None, force: bool) -> None:
    from opalgit.porcelain.branch import branch_rename

    if name is None:
        raise click.UsageError("branch -m needs the new name: 'opal branch -m NEW' or 'opal branch -m OLD NEW'")
    old, new = (porcelain.current_branch(repo), name) if new is None else (name, new)
    oid = branch_rename(repo, old, new, force=force)
    c.out(f"Renamed branch {old} to {new} (at {render.short(oid, 7)}); 'opal undo' takes it back")


def _list_branches(c: Ctx, repo, *, local: bool, remote: bool, as_json: bool) -> None:
    from opalgit.porcelain.branch import remote_branches

    infos = porcelain.branches(repo) if local else []
    others = remote_branches(repo) if remote else []
    if as_json:
        body = {"branches": [b.to_json() for b in infos]}
        if remote:
            body["remote_branches"] = [r.to_json() for r in others]
        c.json(body)
        return
    rows = []
    for b in infos:
        mark = "*" if b.current else " "
        name_s = c.style(b.name, fg="green", bold=True) if b.current else b.name
        rows.append([f"{mark} {name_s}", render.short(b.oid, 7), counted(b.turns, "turn"), b.message.splitlines()[0] if b.message else ""])
    for r in others:
        label = ("remotes/" + r.name) if local else r.name  # git's own spelling in each listing
        rows.append([f"  {c.style(label, fg='red')}", render.short(r.oid, 7), counted(r.turns, "turn"),
                     r.message.splitlines()[0] if r.message else ""])
    if not rows:
        if remote and not local:
            c.out("no remote-tracking branches; 'opal fetch' makes them")
        else:
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

    NAME '-' is the branch you were on before, as in git.

    \b
    Examples:
      opal switch try-sqlite
      opal switch -                 # back to the previous branch
      opal switch -c retry HEAD:12
    """
    repo = c.repo()
    if name == "-":
        if create:
            raise click.UsageError("switch -c needs a NAME for the new branch, not '-'")
        from opalgit.porcelain.branch import previous_branch

        name = previous_branch(repo)
    try:
        porcelain.switch(repo, name, create=create, start=start)
    except NothingToDoError as exc:
        c.out(exc.message)
        return
    c.out(f"Switched to a new branch {name}" if create else f"Switched to branch {name}")


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
    parts = []
    if res.dropped_items or not res.taken_items:
        parts.append(f"dropped {render.count(res.dropped_turns, 'turn')} ({render.count(res.dropped_items, 'record')})")
    if res.taken_items:
        # --to named a state on another line: say what came in, not a negative drop.
        took = f"took {render.count(res.taken_turns, 'turn')} ({render.count(res.taken_items, 'record')}) from {to}"
        parts.append(took + (f" ({res.taken_from})" if res.taken_from else ""))
    said = ", ".join(parts)
    c.out(f"[{res.branch} {render.short(res.oid, 7)}] {said}; {render.count(res.turns, 'turn')} {'remains' if res.turns == 1 else 'remain'}. 'opal undo' takes it back.")
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


@op.command("log", cls=GitCountCommand, context_settings=CONTEXT)
@click.option("-n", "--max-count", type=click.IntRange(min=1), help="Show at most this many operations (also -N, e.g. -5).")
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
        from opalgit.cli.jsonout import iso_ms

        c.json({"operations": [
                {
                    "id": o.oid.hex() if o.oid else None,
                    "command": o.command,
                    "description": o.description,
                    "time": iso_ms(o.time),
                    "user": o.user,
                    "undoes": o.undoes.hex() if o.undoes else None,
                    "changes": {n: [a.hex() if a else None, b.hex() if b else None] for n, (a, b) in o.changes.items()},
                    "sessions": {n: [a, b] for n, (a, b) in o.sessions.items()},
                    "head": list(o.head),
                }
                for o in ops
        ]})
        return
    lines = []
    for o in ops:
        stamp = render.when_ms(o.time)
        lines.append(f"{c.style(render.short(o.oid or b'', 10), fg='yellow')} {stamp}  {o.description}")
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
        from opalgit.cli.main import conflict_lines

        n = len(res.conflicts)
        c.out(c.style(f"Merge of {res.theirs} into {res.branch} stopped on {n} conflict{'s' if n != 1 else ''}:", fg="red", bold=True))
        c.out(conflict_lines(c, [v.to_json() for v in res.conflicts], res.branch, res.theirs))
        raise click.exceptions.Exit(1)
    c.out(f"[{res.branch} {render.short(res.oid or b'', 7)}] merged {res.theirs}: {res.added_from_theirs} turns from it{left_out}")
    for r in res.repairs:
        c.note(r)


# ------------------------------------------------------------------------------ clean-up


def _saved(saved: int) -> str:
    # A squash summary longer than the turns it replaces costs tokens: say so, never "saved ~-6".
    return f"saved ~{human(saved)}" if saved >= 0 else f"~{human(-saved)} tokens more"


def _print_edit(c: Ctx, res, as_json: bool) -> None:
    if as_json:
        c.json(res.to_json())
        return
    for n in res.notes:
        c.note(n)
    what = f"turns {res.range[0]}..{res.range[1]}" if res.range else counted(res.changed, "tool output")
    c.out(
        f"[{res.branch} {render.short(res.oid, 7)}] {res.command} {what}: {res.turns_before} -> {counted(res.turns_after, 'turn')}, "
        f"~{human(res.tokens_before)} -> ~{human(res.tokens_after)} tokens ({_saved(res.saved)}). 'opal undo' takes it back."
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
    from opalgit.porcelain import drop as cleanup

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
    from opalgit.porcelain import drop as cleanup

    _print_edit(c, cleanup.squash(c.repo(), turns, message), as_json)


@cli.command(context_settings=CONTEXT)
@click.option("--tool-output-over", "over", required=True, metavar="SIZE", help="Trim tool outputs longer than this (characters; 20k, 1.5M).")
@click.option("--keep", metavar="SIZE", help="How much of each output to keep, below SIZE (default: a quarter of SIZE, at least 200, at most half).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def trim(c: Ctx, over: str, keep: str | None, as_json: bool) -> None:
    """Shrink huge tool outputs to a marked excerpt (head and tail) on the current branch.

    \b
    Examples:
      opal trim --tool-output-over 20k
      opal trim --tool-output-over 5000 --keep 1000
    """
    from opalgit.porcelain import drop as cleanup

    repo = c.repo()
    try:
        res = cleanup.trim(repo, cleanup.parse_size(over), keep=cleanup.parse_size(keep) if keep else None)
    except NothingToDoError as exc:
        c.out(exc.message)
        return
    _print_edit(c, res, as_json)



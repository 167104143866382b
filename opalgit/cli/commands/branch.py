"""``opal branch``: list, create, rename and delete branches of context."""

from __future__ import annotations

import click

from opalgit import porcelain
from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.plural import count as counted


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

"""``opal commit``: record the agent session of a folder as a new commit on the current branch."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Mapping

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.errors import NothingToDoError
from opalgit.plural import count

if TYPE_CHECKING:
    from opalgit.store.repo import Repository


@cli.command(context_settings=CONTEXT)
@click.option("-m", "--message", help="Commit message (default: a summary of what is new).")
@click.option("--agent", help="Only look for this agent's sessions (e.g. claude).")
@click.option("--session", "session_id", metavar="ID", help="Record this session, wherever its file is (the short id opal prints will do).")
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
    from opalgit import porcelain

    repo = c.repo()
    if session_id is not None and path is None:
        session_id = full_session_id(repo, os.environ, c.cwd, agent, session_id)
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
        c.json(commit_json(res))
        return
    print_commit(c, res)


def commit_json(res) -> dict:
    """What ``opal commit --json`` prints of a commit made (``opal handoff --json`` too)."""
    return {
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


def print_commit(c: Ctx, res) -> None:
    """How a commit made is printed (``opal handoff`` prints it too)."""
    from opalgit.cli import render

    assert res.oid is not None
    # A commit of records that are no turn (the agent's bookkeeping: snapshots, titles,
    # summaries) says what it recorded, never a bare "0 new turns".
    other = res.new_items - res.new_turns
    what = count(res.new_turns, "new turn")
    if other > 0 and (res.new_turns == 0 or res.turns == 0):
        what += f" and {count(other, 'bookkeeping record')}"
    c.out(
        f"[{res.branch} {c.style(render.short(res.oid, 7), fg='yellow')}] "
        f"{what} ({res.turns} in all) "
        f"from {res.session.agent if res.session else '?'} session {res.session.id[:8] if res.session else '?'}"
    )
    if res.turns == 0:
        c.note("this session file holds no turn of conversation yet (only the agent's bookkeeping); "
               "it is recorded as it is, and its turns come with the next commit")
    for fork in res.forks:
        c.out(f"  branch {fork}: another line of conversation in the same session file")


def full_session_id(repo: Repository, env: Mapping[str, str], cwd: str, agent: str | None, text: str) -> str:
    """The session id that ``text`` begins, as opal prints them (``5c0375b4``): among
    the sessions of this folder and the ones branches track. A full id is kept as
    given (it may be a session of another folder); two matches are refused."""
    from opalgit import agents as adapters
    from opalgit import porcelain
    from opalgit.errors import UsageError
    from opalgit.porcelain.sessions import search_dirs

    chosen = [adapters.get(agent)] if agent else list(adapters.all_adapters().values())
    if len(text) < 4 or any(ad.find_session(text, env) is not None for ad in chosen):
        return text
    found: set[str] = set()
    for directory in search_dirs(repo, cwd):
        for ad in chosen:
            found.update(f.id for f in ad.find_sessions(directory, env) if f.id.startswith(text))
    for name in repo.refs.branches():
        tracked = porcelain.tracked_session(repo, name)
        if tracked and (agent is None or tracked[0] == agent) and tracked[1].startswith(text):
            found.add(tracked[1])
    if len(found) > 1:
        raise UsageError(f"session {text!r} is ambiguous: {', '.join(sorted(found))}", hint="give more of its id")
    return found.pop() if found else text

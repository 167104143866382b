"""``opal handoff``: set opal up, record the folder's session and export it to another agent, in one command."""

from __future__ import annotations

import os

import click

from opalgit.cli.commands.commit import commit_json, full_session_id, print_commit
from opalgit.cli.commands.export import print_export
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli


@cli.command(context_settings=CONTEXT)
@click.option("--to", "to", required=True,
              help="The agent to continue in: claude, codex, gemini, opencode, qwen, pi or copilot.")
@click.option("--agent", help="Only look for this agent's sessions (e.g. claude).")
@click.option("--session", "session_id", metavar="ID", help="Record this session, wherever its file is (the short id opal prints will do).")
@click.option("--file", "path", type=click.Path(dir_okay=False), help="Record this session file.")
@click.option("-m", "--message", help="Commit message (default: a summary of what is new).")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False), help="The folder you will resume from (default: the session's own).")
@click.option("--reasoning", type=click.Choice(["drop", "text"]), default="drop", show_default=True, help="Another vendor's reasoning: leave it out, or keep it as plain marked text.")
@click.option("--with-secrets/--no-secrets", default=True, show_default=True, help="Put back the secrets this machine's vault holds.")
@click.option("--json", "as_json", is_flag=True, help="Print what was set up, committed and exported as JSON.")
@pass_ctx
def handoff(c: Ctx, to: str, agent: str | None, session_id: str | None, path: str | None, message: str | None,
            cwd: str | None, reasoning: str, with_secrets: bool, as_json: bool) -> None:
    """Hand the agent session of this folder over to another agent: 'opal init' (if
    opal is not set up here), 'opal commit' and 'opal export --to AGENT', in one go.

    What it stores and writes is what the three commands would: the same commit, the
    same native session, the same loss report. A session with nothing new since the
    last commit is exported as the branch's head is.

    \b
    Examples:
      opal handoff --to codex                # Claude Code hit its limit: continue in Codex
      opal handoff --to gemini --session 7c83c109
      opal handoff --to claude --json
    """
    from opalgit.porcelain import handoff as handoffs

    done, repo = handoffs.setup(c.cwd, to)
    if done.created and not as_json:
        c.out(f"Initialized opal in {done.path} ({'own store in .opal/' if done.own_store else 'git repository'})")
    if session_id is not None and path is None:
        session_id = full_session_id(repo, os.environ, c.cwd, agent, session_id)
    res = handoffs.handoff(repo, done, os.environ, c.cwd, to=to, agent=agent, session=session_id, file=path,
                           message=message, export_cwd=cwd, reasoning=reasoning, with_secrets=with_secrets)
    if as_json:
        made = commit_json(res.commit) if res.commit is not None else {"committed": False, "reason": res.nothing_new}
        c.json({"initialized": done.created, "commit": made, "export": res.export.to_json()})
        return
    if res.commit is None:
        c.out(res.nothing_new or "nothing to commit")
    else:
        for w in res.commit.warnings:
            c.warn(w)
        for n in res.commit.notes:
            c.note(n)
        print_commit(c, res.commit)
    print_export(c, res.export)

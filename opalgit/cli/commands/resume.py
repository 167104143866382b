"""``opal resume``: export a state to an agent (as ``opal export``), then start the agent on it."""

from __future__ import annotations

import os

import click

from opalgit.cli.commands.export import print_export, resolve_at
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.errors import OpalError


@cli.command(context_settings=CONTEXT)
@click.argument("rev", default="HEAD", metavar="[REV]")
@click.option("--agent", "to", required=True,
              help="The agent to continue in: claude, codex, gemini, opencode, qwen, pi or copilot (or an "
                   "installed adapter's name).")
@click.option("--at-line", "at_line", metavar="FILE:LINE",
              help="The context right after the recorded agent turn that last wrote this line (see 'opal blame').")
@click.option("--at", "at", metavar="CODE_REV", help="Resume the state recorded with this code commit (see 'opal at').")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False), help="The folder to resume in (default: the session's own).")
@click.option("--budget", type=click.IntRange(min=1), metavar="TOKENS", help="Fit the session into this many tokens first.")
@click.option("--reasoning", type=click.Choice(["drop", "text"]), default="drop", show_default=True, help="Another vendor's reasoning: leave it out, or keep it as plain marked text.")
@click.option("--with-secrets/--no-secrets", default=True, show_default=True, help="Put back the secrets this machine's vault holds.")
@click.option("--pre-compaction", is_flag=True, help="To another agent: send the turns from before the session's last compaction too (the full history, when it fits --budget), not just its summary and what followed.")
@pass_ctx
def resume(c: Ctx, rev: str, to: str, at_line: str | None, at: str | None, cwd: str | None, budget: int | None, reasoning: str, with_secrets: bool, pre_compaction: bool) -> None:
    """Export REV (default HEAD) to an agent and start that agent on it.

    \b
    Examples:
      opal resume --agent codex
      opal resume --agent claude try-sqlite
      opal resume --at v1.2 --agent codex    # continue from the context of a code commit
      opal resume --at-line src/app.py:42 --agent claude   # from the turn that wrote that line
    """
    import shutil
    import subprocess

    from opalgit.porcelain import export as exporting

    repo = c.repo()
    rev = resolve_at(repo, rev, at, at_line, c.cwd)
    found: list[str] = []

    def startable(command: list[str]) -> None:
        # Checked before a file is written: a resume that cannot start leaves nothing.
        exe = shutil.which(command[0])
        if exe is None:
            raise OpalError(
                f"{command[0]} is not on PATH, so it cannot be started; nothing was exported",
                hint=f"install the agent, or 'opal export --to {to} {rev}' and start it yourself",
            )
        found.append(exe)

    res = exporting.export(repo, os.environ, rev, to=to, cwd=cwd, reasoning=reasoning, budget=budget,
                           with_secrets=with_secrets, pre_compaction=pre_compaction, before_write=startable)
    print_export(c, res, verb="Exported")
    c.out(f"Starting {' '.join(res.resume)} in {res.cwd}")
    code = subprocess.call([found[0], *res.resume[1:]], cwd=res.cwd)
    if code:
        raise click.exceptions.Exit(code)

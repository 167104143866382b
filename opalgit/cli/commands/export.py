"""``opal export``: write a state as a native session of an agent; and how an export is printed
(:func:`print_export`, which ``opal resume`` prints too).
"""

from __future__ import annotations

import os

import click

from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.history.tokens import human


@cli.command(context_settings=CONTEXT)
@click.argument("rev", default="HEAD", metavar="[REV]")
@click.option("--to", "to", required=True,
              help="The agent to export to: claude, codex, gemini, opencode, qwen, pi or copilot (or an installed "
                   "adapter's name).")
@click.option("--at-line", "at_line", metavar="FILE:LINE",
              help="The context right after the recorded agent turn that last wrote this line (see 'opal blame').")
@click.option("--at", "at", metavar="CODE_REV", help="Export the state recorded with this code commit (see 'opal at').")
@click.option("--cwd", "cwd", type=click.Path(file_okay=False), help="The folder you will resume from (default: the session's own).")
@click.option("--dry-run", is_flag=True, help="Say what would be written, converted and dropped; write nothing.")
@click.option("--budget", type=click.IntRange(min=1), metavar="TOKENS", help="Fit the session into this many tokens (largest tool outputs first, then the oldest turns).")
@click.option("--reasoning", type=click.Choice(["drop", "text"]), default="drop", show_default=True, help="Another vendor's reasoning: leave it out, or keep it as plain marked text.")
@click.option("--with-secrets/--no-secrets", default=True, show_default=True, help="Put back the secrets this machine's vault holds (a teammate's clone has none).")
@click.option("--pre-compaction", is_flag=True, help="To another agent: send the turns from before the session's last compaction too (the full history, when it fits --budget), not just its summary and what followed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result and the whole loss report as JSON.")
@pass_ctx
def export(c: Ctx, rev: str, to: str, at_line: str | None, at: str | None, cwd: str | None, dry_run: bool, budget: int | None, reasoning: str, with_secrets: bool, pre_compaction: bool, as_json: bool) -> None:
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
      opal export --at-line src/app.py:42 --to codex   # right after the turn that wrote line 42
    """
    from opalgit.porcelain import export as exporting

    repo = c.repo()
    rev = resolve_at(repo, rev, at, at_line, c.cwd)
    res = exporting.export(repo, os.environ, rev, to=to, cwd=cwd, dry_run=dry_run, reasoning=reasoning, budget=budget,
                           with_secrets=with_secrets, pre_compaction=pre_compaction)
    if as_json:
        c.json(res.to_json())
        return
    print_export(c, res)


def print_export(c: Ctx, res, *, verb: str = "Exported") -> None:
    r = res.report
    head = "Would write" if res.dry_run else verb
    article = "an" if res.agent[:1] in "aeiou" else "a"
    c.out(f"{head} {render.count(res.turns, 'turn')} of {res.rev} ({render.short(res.commit, 7)}) as {article} "
          f"{res.agent} session {res.session_id}")
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


def resolve_at(repo, rev: str, at: str | None, at_line: str | None = None, cwd: str = ".") -> str:
    """With --at CODE_REV, the state linked to that code commit (its id as a revision);
    with --at-line FILE:LINE, the turn that last wrote that line (STATE:TURN), as
    'opal blame' finds it in the working tree, or in code commit CODE_REV with both."""
    if at_line is not None:
        if rev != "HEAD":
            raise click.UsageError("give either REV or --at-line FILE:LINE, not both")
        from opalgit.porcelain.blame import at_line as find

        return find(repo, at_line, cwd, at)[0]
    if at is None:
        return rev
    if rev != "HEAD":
        raise click.UsageError("give either REV or --at CODE_REV, not both")
    from opalgit.sync import links

    return links.state_at(repo, at).hex()


def _shell_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)

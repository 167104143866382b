"""Commands that check a state out into an agent: ``opal export`` and ``opal resume``.

Part of the CLI layer: importing this module attaches its commands to :data:`opalgit.cli.main.cli`.
"""

from __future__ import annotations

import os

import click

from opalgit.cli import render
from opalgit.cli.main import CONTEXT, Ctx, cli, pass_ctx
from opalgit.errors import OpalError
from opalgit.history.tokens import human

# ------------------------------------------------------------------------------ export / resume


def _agent_choice() -> click.Choice:
    from opalgit import agents as adapters

    return click.Choice(adapters.names())


def _print_export(c: Ctx, res, *, verb: str = "Exported") -> None:
    r = res.report
    head = "Would write" if res.dry_run else verb
    c.out(f"{head} {render.count(res.turns, 'turn')} of {res.rev} ({render.short(res.commit, 7)}) as a {res.agent} session {res.session_id}")
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
    from opalgit.sync import links

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
@click.option("--with-secrets/--no-secrets", default=True, show_default=True, help="Put back the secrets this machine's vault holds (a teammate's clone has none).")
@click.option("--pre-compaction", is_flag=True, help="To another agent: send the turns from before the session's last compaction too (the full history, when it fits --budget), not just its summary and what followed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result and the whole loss report as JSON.")
@pass_ctx
def export(c: Ctx, rev: str, to: str, at: str | None, cwd: str | None, dry_run: bool, budget: int | None, reasoning: str, with_secrets: bool, pre_compaction: bool, as_json: bool) -> None:
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
    from opalgit.porcelain import export as exporting

    repo = c.repo()
    rev = _at(repo, rev, at)
    res = exporting.export(repo, os.environ, rev, to=to, cwd=cwd, dry_run=dry_run, reasoning=reasoning, budget=budget,
                           with_secrets=with_secrets, pre_compaction=pre_compaction)
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
@click.option("--with-secrets/--no-secrets", default=True, show_default=True, help="Put back the secrets this machine's vault holds.")
@click.option("--pre-compaction", is_flag=True, help="To another agent: send the turns from before the session's last compaction too (the full history, when it fits --budget), not just its summary and what followed.")
@pass_ctx
def resume(c: Ctx, rev: str, to: str, at: str | None, cwd: str | None, budget: int | None, reasoning: str, with_secrets: bool, pre_compaction: bool) -> None:
    """Export REV (default HEAD) to an agent and start that agent on it.

    \b
    Examples:
      opal resume --agent codex
      opal resume --agent claude try-sqlite
      opal resume --at v1.2 --agent codex    # continue from the context of a code commit
    """
    import shutil
    import subprocess

    from opalgit.porcelain import export as exporting

    repo = c.repo()
    rev = _at(repo, rev, at)
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
    _print_export(c, res, verb="Exported")
    c.out(f"Starting {' '.join(res.resume)} in {res.cwd}")
    code = subprocess.call([found[0], *res.resume[1:]], cwd=res.cwd)
    if code:
        raise click.exceptions.Exit(code)




# ------------------------------------------------------------------------------ secrets


@cli.group(context_settings=CONTEXT)
def secrets() -> None:
    """Secrets in recorded sessions: what was redacted, and anything still in clear."""


@secrets.command("scan", context_settings=CONTEXT)
@click.argument("rev", default="HEAD", metavar="[REV]")
@click.option("--history/--no-history", default=True, show_default=True, help="Also scan the states REV descends from.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def secrets_scan(c: Ctx, rev: str, history: bool, as_json: bool) -> None:
    """List the secrets found in a state: kind, turn and placeholder, never the secret.

    Redacted secrets show with their placeholder; a secret still in clear (committed
    before a rule existed, or with redaction off) is listed as such, and 'opal push'
    refuses to send it. Turns, state headers (titles) and commit messages are
    scanned. Exit code 9 when a secret is in clear, 0 otherwise. Rules:
    docs/redaction.md.

    \b
    Examples:
      opal secrets scan
      opal secrets scan try-sqlite --no-history --json
    """
    from opalgit.history.states import resolve
    from opalgit.porcelain import secrets as redaction

    repo = c.repo()
    res = redaction.scan_states(repo, [resolve(repo, rev).oid], rev, history=history)
    # A script (or CI) can tell "secrets in clear" without parsing: exit 9, the push gate's code.
    code = redaction.SecretsFoundError.exit_code if res.leaks else 0
    if as_json:
        c.json(res.to_json())
        raise SystemExit(code)
    c.out(f"scanned {render.count(res.turns, 'record')} in {render.count(res.states, 'state')} of {rev}")
    for r in res.redacted:
        c.out(f"  redacted   {r['kind']:22} {r['turn']:16} {r['placeholder']}")
    for r in res.leaks:
        c.out(c.style(f"  IN CLEAR   {r['kind']:22} {r['turn']:16} {r['where']}", fg="red", bold=True))
    if not res.redacted and not res.leaks:
        c.out("no secrets found")
    elif res.leaks:
        one = len(res.leaks) == 1
        c.out(c.style(f"{render.count(len(res.leaks), 'secret')} in clear: 'opal push' will refuse {'it' if one else 'them'}; "
                      f"'opal secrets purge' moves {'it' if one else 'them'} into the vault", fg="red"))
    raise SystemExit(code)


@secrets.command("purge", context_settings=CONTEXT)
@click.argument("branches", nargs=-1, metavar="[BRANCH]...")
@click.option("--literal", "literals", multiple=True, metavar="TEXT",
              help="Also purge this exact text, a secret no rule finds (repeatable; at least 8 characters).")
@click.option("--dry-run", is_flag=True, help="Say which refs and how many states would be rewritten; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def secrets_purge(c: Ctx, branches: tuple[str, ...], literals: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Take secrets committed in clear out of the history, into the vault.

    Every state that holds a secret a rule finds, or a --literal TEXT (in its
    turns, payloads, header or message), and every state after it, is written again
    as if the secret had been redacted when it was committed: the secret goes to
    this machine's vault, the state holds its placeholder. Every ref that holds one
    (local and remote-tracking branches, states linked to code commits; or only the
    BRANCHes given) moves to the new states in one operation, each only if it still
    is where it was read. A literal stays known: later commits, scans and pushes
    redact it too.

    'opal undo' puts the old states back, until the next 'opal gc', which expires
    the purge (and every operation before it) and deletes the old states from the
    object database. Then 'opal push' can send the new ones. States already pushed
    stay on the remote as they are: rotate the secret.

    \b
    Examples:
      opal secrets purge
      opal secrets purge main --dry-run
      opal secrets purge --literal 'hunter2-staging-db'
      opal gc --expire-oplog now --prune now   # once sure: no object keeps the old states
    """
    from opalgit.porcelain import secrets as redaction

    res = redaction.purge(c.repo(), branches, literals=literals, dry_run=dry_run)
    if as_json:
        c.json(res.to_json())
        return
    if not res.refs:
        c.out("no secret in clear: nothing to purge")
        return
    verb = "would rewrite" if dry_run else "rewrote"
    c.out(f"{verb} {render.count(res.states, 'state')} under {render.count(len(res.refs), 'ref')}")
    for name, (old, new) in res.branches.items():
        c.out(f"  {name}: {old.hex()[:10]}" + ("" if dry_run else f" -> {new.hex()[:10]}"))
    if not dry_run:
        c.out(f"{render.count(res.secrets, 'secret')} moved into the vault ({', '.join(res.kinds)}); 'opal undo' puts "
              f"{'it' if res.secrets == 1 else 'them'} back until 'opal gc', which deletes the old states")

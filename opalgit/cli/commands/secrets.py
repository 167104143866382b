"""``opal secrets``: the secrets in recorded sessions (``scan``) and taking them out of history (``purge``)."""

from __future__ import annotations

import click

from opalgit.cli import render
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli


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

"""``opal config``: get and set opal's settings for a repository (.git/opal/config)."""

from __future__ import annotations

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.errors import OpalError, UsageError
from opalgit.store.argv import check_url

#: Settings opal itself reads, and how their values are checked.
KNOWN_KEYS = {
    "push.withcode": ("bool", "git push also pushes the current state branch (through the pre-push hook)"),
    "hooks.timeout": ("seconds", "how long git commit waits for opal's post-commit and post-rewrite hooks (0: not at all)"),
    "hooks.pushtimeout": ("seconds", "how long git push waits for opal's pre-push hook before it is stopped (60)"),
    "push.namespace": ("name", "prefix of your branch names on remotes: NAME/BRANCH ('user': from your git e-mail)"),
}


_BOOLS = {"true": "true", "yes": "true", "on": "true", "1": "true", "false": "false", "no": "false", "off": "false", "0": "false"}


def _check_config(key: str, value: str) -> str:
    parts = key.split(".")
    if len(parts) < 2 or not all(parts) or not parts[0].replace("-", "").isalnum() or not parts[-1].replace("-", "").isalnum():
        raise UsageError(f"{key!r} is not a config key", hint="keys are SECTION.NAME, e.g. push.withCode")
    kind = KNOWN_KEYS.get(key.lower(), (None, None))[0]
    if kind == "bool":
        norm = _BOOLS.get(value.strip().lower())
        if norm is None:
            raise UsageError(f"{key} takes true or false, not {value!r}")
        return norm
    if kind == "seconds":
        v = value.strip()
        if not v or v.startswith(".") or v.count(".") > 1 or not v.replace(".", "").isdigit():
            raise UsageError(f"{key} takes a number of seconds (such as 2 or 0.5), not {value!r}")
        return v
    if kind == "name" and value not in ("", "user"):
        from opalgit.store.refs import check_branch_name

        check_branch_name(value)
    if key.lower().startswith("remote.") and key.lower().endswith(".url"):
        from opalgit.sync.remotes import check_remote_name

        name = key[len("remote.") : -len(".url")]
        check_remote_name(name)
        check_url(value, source=f"remote.{name}.url")
    return value


@cli.command("config", context_settings=CONTEXT)
@click.argument("key", required=False)
@click.argument("value", required=False)
@click.option("--unset", is_flag=True, help="Remove KEY.")
@click.option("-l", "--list", "list_", is_flag=True, help="List every setting.")
@pass_ctx
def config(c: Ctx, key: str | None, value: str | None, unset: bool, list_: bool) -> None:
    """Get or set opal's settings for this repository (.git/opal/config).

    \b
    Settings:
      push.withCode BOOL     plain 'git push' also pushes the current state branch
      push.namespace NAME    push your branches as NAME/BRANCH ('user': your git e-mail's name)
      hooks.timeout SECONDS  git commit waits this long for opal's hooks, which go on in
                             the background (0: git does not wait)
      hooks.pushTimeout SECONDS
                             git push waits this long for the pre-push hook, which is
                             then stopped (60)
      remote.NAME.url URL    a remote for state only (see 'opal clone-state')

    Getting (or unsetting) a key that is not set is an error (exit status 1).

    \b
    Examples:
      opal config push.withCode true
      opal config push.namespace alice
      opal config push.withCode
      opal config --list
      opal config --unset push.namespace
    """
    repo = c.repo()
    cfg = repo.config
    if list_:
        for entry in cfg:
            c.out(f"{entry.name}={entry.value}")
        return
    if not key:
        raise click.UsageError("give a KEY (or --list)")
    if unset:
        try:
            del cfg[key]
        except KeyError:
            raise OpalError(f"{key} is not set", hint="see 'opal config --list'") from None
        return
    if value is None:
        got = repo.config_get(key)
        if got is None:
            raise OpalError(f"{key} is not set", hint="see 'opal config --list'")
        c.out(got)
        return
    cfg[key] = _check_config(key, value)

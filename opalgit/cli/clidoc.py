"""Generates docs/cli.md from the commands' own ``--help``, so the reference cannot drift.

``python -m opalgit.cli.clidoc > docs/cli.md`` rewrites it; a test fails when it is stale.
"""

from __future__ import annotations

import click

from opalgit.cli.main import cli

HEADER = """# CLI reference

Generated from `opal --help` by `python -m opalgit.cli.clidoc > docs/cli.md`; a test keeps
it in sync. Every command also takes `-h`/`--help`. Global options go before the
command (`opal -C ~/src/app log`).

Exit codes: 0 success (also "nothing to do"), 1 other opal error, 2 usage error,
3 not an opal repository, 4 unknown revision or turn, 5 unreadable session file,
6 no session found, 7 corrupt object, 8 concurrent update or lock held,
70 internal error (run with `-v` for a traceback).
"""


def _help(cmd: click.Command, path: list[str]) -> str:
    ctx = click.Context(cmd, info_name=" ".join(path), terminal_width=100, max_content_width=100)
    return cmd.get_help(ctx)


def _walk(cmd: click.Command, path: list[str]):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            yield from _walk(cmd.commands[name], path + [name])


def render() -> str:
    parts = [HEADER]
    for path, cmd in _walk(cli, ["opal"]):
        title = " ".join(path)
        parts.append(f"\n## `{title}`\n\n```text\n{_help(cmd, path).rstrip()}\n```\n")
    return "".join(parts)


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")

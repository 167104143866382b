"""``opal help [COMMAND]...``: the help of opal or of a command, as ``--help`` prints it."""

from __future__ import annotations

import click

from opalgit.cli.context import CONTEXT, Ctx
from opalgit.cli.hints import unknown_command
from opalgit.cli.main import cli


@cli.command("help", context_settings=CONTEXT)
@click.argument("command", nargs=-1, metavar="[COMMAND]...")
@click.pass_context
def help_(ctx: click.Context, command: tuple[str, ...]) -> None:
    """Show the help of opal, or of COMMAND (the same as 'opal COMMAND --help').

    \b
    Examples:
      opal help
      opal help log
      opal help op log
    """
    parent = ctx.parent
    assert parent is not None
    cmd: click.Command = parent.command
    at = parent
    path = ["opal"]
    for name in command:
        sub = cmd.get_command(at, name) if isinstance(cmd, click.Group) else None
        if sub is None:
            if not isinstance(cmd, click.Group):
                raise click.UsageError(f"'{' '.join(path)}' has no subcommands")
            raise unknown_command(name, cmd.list_commands(at), " ".join(path))
        at = click.Context(sub, info_name=name, parent=at)
        cmd = sub
        path.append(name)
    obj = ctx.find_object(Ctx)
    text = cmd.get_help(at)
    if obj is not None:
        obj.out(text, page=True)
    else:
        click.echo(text)

"""Arguments that click does not parse by itself: git's ``-N`` for ``-n N`` (:class:`GitCountCommand`)."""

from __future__ import annotations

import click


class GitCountCommand(click.Command):
    """A command that takes git's ``-N`` for ``-n N`` (``opal log -3``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        out: list[str] = []
        for i, arg in enumerate(args):
            if arg == "--":
                out += args[i:]
                break
            if len(arg) > 1 and arg[0] == "-" and arg[1:].isdigit():
                out += ["-n", arg[1:]]
            else:
                out.append(arg)
        return super().parse_args(ctx, out)

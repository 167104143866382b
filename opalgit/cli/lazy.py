"""The group that imports a command's module when the command is first used (:class:`LazyGroup`).

Start-up time matters (``opal --version``, and the post-commit hook that every ``git commit`` runs):
running a command imports only the module that defines it, ``opalgit.cli.commands.<name>``.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

import click

from opalgit.cli.hints import HintGroup


class LazyGroup(HintGroup):
    """A group whose commands are defined in other modules (``lazy_commands``: name ->
    module, which attaches its command to the group when imported), each imported when
    its command is first used.

    Running a command imports only the module that defines it; listing them
    (``opal --help``) imports each to get its short help. Reading :attr:`commands`
    from outside (the docs generator, tests) imports every module first, so it is
    the complete mapping, as if everything had been imported up front.
    """

    #: The groups under it (``opal op``, ``opal hooks``) give the same hints.
    group_class = HintGroup

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        self._lazy = dict(lazy_commands or {})
        self._registering = 0
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        if self._lazy and not self._registering:
            self._import(*self._lazy.values())
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = value

    def _import(self, *modules: str) -> None:
        self._registering += 1
        try:
            for module in dict.fromkeys(modules):
                importlib.import_module(module)
        finally:
            self._registering -= 1
        self._lazy = {name: m for name, m in self._lazy.items() if m not in modules}

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        # Registering (a command module being imported) must not import the others.
        self._registering += 1
        try:
            super().add_command(cmd, name)
        finally:
            self._registering -= 1

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self._commands and cmd_name in self._lazy:
            self._import(self._lazy[cmd_name])
        return self._commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self._commands, *self._lazy})

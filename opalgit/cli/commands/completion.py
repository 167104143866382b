"""``opal completion SHELL``: print the shell completion script (the completion itself is
:mod:`opalgit.cli.completion`).
"""

from __future__ import annotations

import click

from opalgit.cli.completion import SHELLS, answer
from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli


@cli.command(context_settings=CONTEXT)
@click.argument("shell", type=click.Choice(sorted(SHELLS)))
@pass_ctx
def completion(c: Ctx, shell: str) -> None:
    """Print the shell completion script for SHELL (bash, zsh or fish).

    Commands, options, branch names, remotes, agents, session ids and revisions
    (HEAD, HEAD~N, BRANCH:N turns, A..B) complete on TAB. The script asks opal for candidates each
    time, so it stays right across upgrades.

    \b
    Examples:
      eval "$(opal completion bash)"      # this shell only (zsh: the same)
      opal completion fish | source
      opal completion bash > ~/.local/share/bash-completion/completions/opal
      opal completion zsh > "${fpath[1]}/_opal"     # a folder on $fpath, before compinit
      opal completion fish > ~/.config/fish/completions/opal.fish
    """
    text = answer(f"{shell}_source")
    assert text is not None
    click.echo(text, nl=False)

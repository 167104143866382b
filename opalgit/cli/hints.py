"""What opal says for a command it does not have: the close names a typo could have meant, and what a
git verb is called in opal (:data:`GIT_VERBS`). :class:`HintGroup` is the click group that says it.
"""

from __future__ import annotations

from typing import Iterable

import click

from opalgit.errors import OpalError, UsageError


class HintGroup(click.Group):
    """A group whose unknown subcommand gets opal's hint (:func:`unknown_command`):
    close names only, and what a git verb is called here."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if ctx.resilient_parsing or name.startswith("-") or self.get_command(ctx, name) is not None:
            return super().resolve_command(ctx, args)
        raise unknown_command(name, self.list_commands(ctx), ctx.command_path)


#: git's verbs that opal has under another name (or not at all): what to type instead.
GIT_VERBS = {
    "reset": "'opal rewind N' drops the last N turns, 'opal rewind --to REV:N' keeps turns 1..N, "
             "'opal undo' takes back the last operation",
    "revert": "'opal undo' takes back an operation ('opal op log' lists them); 'opal drop FROM..TO' cuts turns out",
    "checkout": "'opal switch NAME' changes branch, 'opal switch -c NEW START' makes one; 'opal export' writes a state for an agent",
    "rebase": "'opal drop FROM..TO', 'opal squash FROM..TO' and 'opal rewind' edit a branch's turns; 'opal merge' joins branches",
    "stash": "'opal branch NAME' keeps the current state on a branch, then 'opal rewind' or 'opal switch' moves on",
    "cherry-pick": "'opal merge REV' brings another branch's turns in",
    "restore": "'opal export REV' writes a state back as an agent session; 'opal resume REV' starts the agent on it",
    "tag": "opal has no tags: 'opal branch NAME REV' names a state",
    "remote": "opal uses git's remotes ('git remote -v'); 'opal push', 'opal fetch' and 'opal pull' move state",
    "add": "nothing to stage: 'opal commit' records the agent session as it is",
    "reflog": "'opal op log' lists every operation; 'opal undo' takes one back",
    "clone": "'opal clone-state URL' fetches the states of a remote",
}


def _distance(a: str, b: str) -> int:
    """Edit distance, a transposition counting as one edit (optimal string alignment)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def close_names(name: str, names: Iterable[str]) -> list[str]:
    """Names a typo of ``name`` could have meant: one edit away (two for longer
    names), or that it begins. Nothing further: a far guess proposes a different
    command, and running it may do something else entirely ('reset' is not 'resume')."""
    limit = 1 if len(name) <= 4 else 2
    return sorted(n for n in names if _distance(name, n) <= limit or (len(name) >= 3 and n.startswith(name)))


def unknown_command(name: str, names: Iterable[str], prog: str) -> OpalError:
    """The error for ``prog name`` when ``prog`` has no command ``name`` (its commands: ``names``)."""
    hint = None
    if name in GIT_VERBS and prog == "opal":
        hint = f"git's {name} in opal: {GIT_VERBS[name]}"
    else:
        near = close_names(name, names)
        if near:
            hint = "did you mean " + " or ".join(f"'{prog} {n}'" for n in near) + "?"
    where = "" if prog == "opal" else f" in '{prog}'"
    return UsageError(f"no command {name!r}{where}", hint=hint or f"'{prog.replace('opal', 'opal help', 1)}' lists the commands")

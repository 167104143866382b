"""What every command is handed: the context object (:class:`Ctx`: the folder it runs in, and how it
prints: colour, the pager, --json, notes and warnings) and the progress line on stderr.

With :data:`CONTEXT` (the click settings every command takes) and :data:`pass_ctx`, the decorator that
hands a command its :class:`Ctx`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import click

from opalgit.store.repo import Repository, git_config
from opalgit.structs import dataclass

if TYPE_CHECKING:
    import contextlib


#: click's settings for every command and group: -h as well as --help, help text up to 100 columns.
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@dataclass
class Ctx:
    """What every command gets from the top-level options: where it runs and how it prints."""

    cwd: str
    verbose: bool
    color: bool
    pager: bool

    def repo(self) -> Repository:
        return Repository.discover(self.cwd)

    def style(self, text: str, **kw: Any) -> str:
        return click.style(text, **kw) if self.color else text

    def out(self, lines: Iterable[str] | str, *, page: bool = False) -> None:
        _erase_progress()
        text = lines if isinstance(lines, str) else "\n".join(lines)
        pager = pager_command(os.environ, lambda: git_config(self.cwd, "core.pager")) if page and self.pager and sys.stdout.isatty() else None
        if pager and _pager_runs(pager, self):
            # As git starts its pager: LESS=FRX (quit if one screen, keep colour, no
            # screen clearing) and LV=-c unless the user set them.
            os.environ.setdefault("LESS", "FRX")
            os.environ.setdefault("LV", "-c")
            os.environ["PAGER"] = pager  # what click runs (as an argv, without a shell)
            click.echo_via_pager(text + "\n", color=self.color)
        else:
            click.echo(text, color=self.color)

    def json(self, value: dict) -> None:
        """Print a --json output: one object, ``version`` first (docs/json.md)."""
        import json

        from opalgit.cli.jsonout import envelope

        click.echo(json.dumps(envelope(value), indent=2, ensure_ascii=False, default=_json_default))

    def note(self, text: str) -> None:
        _erase_progress()
        click.echo(self.style("note: ", fg="yellow") + text, err=True, color=self.color)

    def warn(self, text: str) -> None:
        _erase_progress()
        click.echo(self.style("warning: ", fg="yellow", bold=True) + text, err=True, color=self.color)


#: Hands a command the :class:`Ctx` that the group's options made (its first argument, ``c``).
pass_ctx = click.make_pass_decorator(Ctx)


def pager_command(env: Mapping[str, str], core_pager) -> str | None:
    """The pager git would run, opal's own variable first: OPAL_PAGER, GIT_PAGER, git's
    ``core.pager`` (``core_pager()`` reads it), PAGER, then ``less``. Empty or ``cat``
    means no pager, as in git."""
    for var in ("OPAL_PAGER", "GIT_PAGER"):
        if var in env:
            chosen = env[var]
            break
    else:
        configured = core_pager()
        chosen = configured if configured is not None else env.get("PAGER", "less")
    chosen = chosen.strip()
    return None if chosen in ("", "cat") else chosen


def _pager_runs(pager: str, c: "Ctx") -> bool:
    import shlex
    import shutil

    try:
        argv = shlex.split(pager)
    except ValueError:
        argv = []
    if any(ch in pager for ch in "|;&<>$`") or not argv:
        c.note(f"the pager {pager!r} needs a shell, and opal runs its pager without one; printing directly "
               "(set OPAL_PAGER to a plain command, e.g. 'less -R')")
        return False
    if shutil.which(argv[0]) is None:
        c.note(f"the pager {argv[0]!r} is not on PATH; printing directly (set OPAL_PAGER, or OPAL_PAGER= for none)")
        return False
    return True


def _erase_progress() -> None:
    # The progress line (opalgit/progress.py) goes before anything else is printed.
    progress = sys.modules.get("opalgit.progress")
    if progress is not None:
        progress.erase()


def progress_line(args: list[str]) -> "contextlib.AbstractContextManager[object]":
    """Progress of long operations on stderr: only on a terminal that can erase a line,
    never with --json nor for a git hook; OPAL_PROGRESS=off turns it off, OPAL_PROGRESS_DELAY sets after how
    many seconds it appears (see opalgit/progress.py)."""
    import contextlib

    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    setting = os.environ.get("OPAL_PROGRESS", "").strip().lower()
    if not tty or os.environ.get("TERM") == "dumb" or setting in ("0", "off", "no", "false", "never") or "--json" in args:
        return contextlib.nullcontext()
    from opalgit.server.client import command_name

    name = command_name(args)
    if name == "hook":  # its work may go on after git has given the terminal back: never drawn
        return contextlib.nullcontext()
    from opalgit import progress

    try:
        delay = max(0.0, float(os.environ.get("OPAL_PROGRESS_DELAY", progress.DELAY)))
    except ValueError:
        delay = progress.DELAY
    return progress.shown(sys.stderr, title=f"opal {name}" if name else "opal", delay=delay)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)

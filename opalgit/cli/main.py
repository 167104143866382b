"""The ``opal`` command line: the group :data:`cli` with its global options, and :func:`main`, the
one place where every error family becomes an exit code (a traceback only with ``-v``).

Each command is a module of :mod:`opalgit.cli.commands`, named after it (``opal clone-state`` is
``clone_state.py``), imported when the command is first used (:class:`opalgit.cli.lazy.LazyGroup`). What
every command is handed (:class:`opalgit.cli.context.Ctx`) is in :mod:`opalgit.cli.context`.
"""

from __future__ import annotations

import os
import sys

import click

from opalgit import __version__
from opalgit.cli.context import CONTEXT, Ctx, progress_line
from opalgit.cli.lazy import LazyGroup
from opalgit.errors import OpalError

# Start-up time matters ('opal --version', and the post-commit hook that every 'git
# commit' runs), so this module imports only click and what every command needs. The
# commands import what they use (porcelain, and through it pygit2 and the adapters)
# when they run, and each command's module is imported on first use.

#: Every command: name -> the module that defines it and attaches it to :data:`cli`.
LAZY_COMMANDS = {name: "opalgit.cli.commands." + name.replace("-", "_") for name in (
    "at", "blame", "branch", "capture", "clone-state", "commit", "completion", "config", "demo", "diff", "drop",
    "export", "fetch", "fsck", "gc", "grep", "handoff", "help", "hook", "hooks", "init", "log", "merge", "op", "pull",
    "push", "resume", "rewind", "secrets", "server", "show", "squash", "stats", "status", "switch", "trace", "trim",
    "undo", "web",
)}

#: The command modules, one per command.
COMMAND_MODULES = tuple(LAZY_COMMANDS.values())


@click.group(cls=LazyGroup, lazy_commands=LAZY_COMMANDS, context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="opal", message="%(prog)s %(version)s")
@click.option("-C", "directory", type=click.Path(file_okay=False), help="Run as if opal was started in this folder.")
@click.option("-v", "--verbose", is_flag=True, help="Show a traceback on errors.")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour output (auto: only on a terminal, and not when NO_COLOR is set to a non-empty value).",
)
@click.option("--no-pager", is_flag=True, help="Never page long output (the pager: OPAL_PAGER, GIT_PAGER, core.pager, PAGER, less).")
@click.pass_context
def cli(ctx: click.Context, directory: str | None, verbose: bool, color: str, no_pager: bool) -> None:
    """opal: git for coding-agent sessions.

    Record an agent's session (every prompt, reply, tool call and result) as
    versioned state in your project's git repository; branch, rewind and undo it at
    turn granularity.

    \b
    Quick start:
      opal init                      # once per repository
      opal commit -m "plan agreed"   # record the agent session of this folder
      opal log --oneline --graph
      opal rewind 3                  # drop the last 3 turns
      opal undo                      # take it back
    """
    if color == "auto":
        # no-color.org: NO_COLOR counts when it is set and not empty.
        use_color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    else:
        use_color = color == "always"
    cwd = os.path.abspath(directory) if directory else os.getcwd()
    from opalgit.fileio import folder_problem

    problem = folder_problem(cwd) if directory else None
    if problem is not None:
        raise click.UsageError(f"-C {directory}: {problem}")
    ctx.obj = Ctx(cwd=cwd, verbose=verbose, color=use_color, pager=not no_pager and "OPAL_NO_PAGER" not in os.environ)



def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "-v" in args or "--verbose" in args
    try:
        with progress_line(args):
            rv = cli.main(args=args, prog_name="opal", standalone_mode=False)
        # click returns the code of an Exit raised inside a command instead of raising it.
        return rv if isinstance(rv, int) else 0
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 130
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except OpalError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        click.echo(f"opal: error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        return exc.exit_code or 1
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return 130
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            return 0
        if verbose:
            import traceback

            traceback.print_exc()
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        click.echo(f"opal: error: cannot access{where}: {exc.strerror or exc}", err=True)
        click.echo("hint: nothing was changed; fix the cause (space, permissions) and run the command again", err=True)
        return 1
    except BrokenPipeError:
        # `opal log | head`: the reader went away; not an error.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except Exception as exc:  # a bug: say so in one line, traceback with -v
        if verbose:
            import traceback

            traceback.print_exc()
        click.echo(f"opal: internal error: {type(exc).__name__}: {exc}", err=True)
        click.echo("hint: run again with -v for a traceback, and report it", err=True)
        return 70


def run() -> None:
    """The ``opal`` program: :func:`main`, then exit with its code.

    Before exiting it moves every live object out of the garbage collector's
    reach (``gc.freeze``): the interpreter's last collection at shutdown otherwise
    walks everything a command built (a commit's caches, the redactor's memo) only
    for the process to end, 13 of a ten-turn commit's ~160 ms. Nothing is skipped:
    files are closed, threads joined and ``atexit`` handlers run as before. Not in
    :func:`main`, which tests and other programs call in a process that goes on.
    """
    code = main()
    import gc

    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()

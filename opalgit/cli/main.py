"""The ``opal`` command line. The only module that reads ``os.environ`` and talks to the terminal.

Every error family maps to an exit code in one place (:func:`main`); a traceback is
shown only with ``-v``.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import click

from opalgit import __version__
from opalgit.errors import NothingToDoError, OpalError
from opalgit.plural import count
from opalgit.store.repo import Repository
from opalgit.structs import dataclass

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

# Start-up time matters ('opal --version', and the post-commit hook that every 'git
# commit' runs), so this module imports only click and what every command needs. The
# commands import what they use (porcelain, and through it pygit2 and the adapters)
# when they run, and the commands of the other CLI modules are registered lazily:
# :data:`LAZY_COMMANDS` names the module that defines each one, imported on first use.

#: Commands defined in other modules: name -> module that attaches it to :data:`cli`.
LAZY_COMMANDS = {
    **dict.fromkeys(
        ("branch", "switch", "rewind", "undo", "op", "merge", "drop", "squash", "trim"), "opalgit.cli.commands.edit"
    ),
    **dict.fromkeys(("export", "resume", "secrets"), "opalgit.cli.commands.export"),
    **dict.fromkeys(("log", "show", "diff", "stats"), "opalgit.cli.commands.history"),
    **dict.fromkeys(("hooks", "hook", "at", "push", "fetch", "pull", "clone-state", "config"), "opalgit.cli.commands.sync"),
    "server": "opalgit.cli.commands.server",
    "gc": "opalgit.cli.commands.gc",
    "completion": "opalgit.cli.completion",
}

#: The command modules, in the order their commands are listed in ``cli.commands``.
COMMAND_MODULES = (
    "opalgit.cli.commands.edit", "opalgit.cli.commands.export", "opalgit.cli.commands.history", "opalgit.cli.commands.sync", "opalgit.cli.commands.server",
    "opalgit.cli.commands.gc",
    "opalgit.cli.completion",
)


class HintGroup(click.Group):
    """A group whose unknown subcommand gets opal's hint (:func:`unknown_command`):
    close names only, and what a git verb is called here."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if ctx.resilient_parsing or name.startswith("-") or self.get_command(ctx, name) is not None:
            return super().resolve_command(ctx, args)
        raise unknown_command(name, self.list_commands(ctx), ctx.command_path)


class LazyGroup(HintGroup):
    """A group whose commands from other modules are imported when first used.

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
            self._import(*COMMAND_MODULES, *self._lazy.values())
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


def unknown_command(name: str, names: Iterable[str], prog: str) -> "OpalError":
    from opalgit.errors import UsageError

    hint = None
    if name in GIT_VERBS and prog == "opal":
        hint = f"git's {name} in opal: {GIT_VERBS[name]}"
    else:
        near = close_names(name, names)
        if near:
            hint = "did you mean " + " or ".join(f"'{prog} {n}'" for n in near) + "?"
    where = "" if prog == "opal" else f" in '{prog}'"
    return UsageError(f"no command {name!r}{where}", hint=hint or f"'{prog.replace('opal', 'opal help', 1)}' lists the commands")


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
        pager = pager_command(os.environ, lambda: _core_pager(self.cwd)) if page and self.pager and sys.stdout.isatty() else None
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


def _core_pager(cwd: str) -> str | None:
    """git's ``core.pager`` for this folder: the repository's config, then the user's
    and the system's (libgit2 reads the same files git does)."""
    import pygit2

    try:
        return Repository.discover(cwd).git.config["core.pager"]
    except KeyError:
        return None  # the repository's config, with the user's and the system's, has none
    except (OpalError, OSError, ValueError, pygit2.GitError):
        pass  # no repository here to read: the user's own config, if there is one
    try:
        return pygit2.Config.get_global_config()["core.pager"]
    except (KeyError, OSError, ValueError, pygit2.GitError):
        return None


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


def _progress(args: list[str]) -> "contextlib.AbstractContextManager[object]":
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


pass_ctx = click.make_pass_decorator(Ctx)


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


# ------------------------------------------------------------------------------ help


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


# ------------------------------------------------------------------------------ init


@cli.command(context_settings=CONTEXT)
@pass_ctx
def init(c: Ctx) -> None:
    """Set opal up in the git repository of this folder.

    opal keeps its data inside the repository's own object database under the
    private refs/opal/ namespace and files under .git/opal/; your branches, index
    and working tree are never touched. Outside a git repository it creates a store
    of its own in ./.opal/.

    \b
    Examples:
      opal init
      opal -C ~/src/my-project init
    """
    from opalgit import porcelain

    res = porcelain.init(c.cwd)
    where = f"{res.path} ({'own store in .opal/' if res.own_store else 'git repository'})"
    if res.created:
        c.out(f"Initialized opal in {where}; current branch {res.branch}")
    else:
        c.out(f"opal is already set up in {where}")


# ------------------------------------------------------------------------------ commit


@cli.command(context_settings=CONTEXT)
@click.option("-m", "--message", help="Commit message (default: a summary of what is new).")
@click.option("--agent", help="Only look for this agent's sessions (e.g. claude).")
@click.option("--session", "session_id", metavar="ID", help="Record this session, wherever its file is (the short id opal prints will do).")
@click.option("--file", "path", type=click.Path(dir_okay=False), help="Record this session file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_ctx
def commit(c: Ctx, message: str | None, agent: str | None, session_id: str | None, path: str | None, as_json: bool) -> None:
    """Record the agent session of this folder as a new commit on the current branch.

    opal finds the session by itself (Claude Code: ~/.claude/projects/<folder key>/,
    honouring CLAUDE_CONFIG_DIR). With several, it keeps recording the one this
    branch already tracks, else takes the most recently written and says so. Only
    turns that are new since the last commit are read and stored; a session with
    nothing new is a no-op. Other lines of conversation inside one session file
    (the agent's own rewinds and edits) become branches named BRANCH-fork-<id>.

    \b
    Examples:
      opal commit -m "plan agreed"
      opal commit --session 7c83c109-bd8e-4995-ab21-c69c5256ec0d
      opal commit --file ~/.claude/projects/-home-me-app/7c83c109.jsonl --agent claude
    """
    from opalgit import porcelain
    from opalgit.cli import render

    repo = c.repo()
    if session_id is not None and path is None:
        session_id = full_session_id(repo, os.environ, c.cwd, agent, session_id)
    try:
        res = porcelain.commit(repo, os.environ, c.cwd, message=message, agent=agent, session=session_id, file=path)
    except NothingToDoError as exc:
        if as_json:
            c.json({"committed": False, "reason": exc.message})
        else:
            c.out(exc.message)
        return
    for w in res.warnings:
        c.warn(w)
    for n in res.notes:
        c.note(n)
    if as_json:
        c.json(
            {
                "committed": True,
                "branch": res.branch,
                "id": res.oid.hex() if res.oid else None,
                "parent": res.parent.hex() if res.parent else None,
                "session": res.session.to_map() if res.session else None,
                "new_turns": res.new_turns,
                "new_records": res.new_items,
                "turns": res.turns,
                "records": res.items,
                "incremental": res.incremental,
                "fork_branches": res.forks,
                "objects_written": res.objects_written,
                "bytes_written": res.bytes_written,
                "warnings": res.warnings,
                "notes": res.notes,
            }
        )
        return
    assert res.oid is not None
    # A commit of records that are no turn (the agent's bookkeeping: snapshots, titles,
    # summaries) says what it recorded, never a bare "0 new turns".
    other = res.new_items - res.new_turns
    what = count(res.new_turns, "new turn")
    if other > 0 and (res.new_turns == 0 or res.turns == 0):
        what += f" and {count(other, 'bookkeeping record')}"
    c.out(
        f"[{res.branch} {c.style(render.short(res.oid, 7), fg='yellow')}] "
        f"{what} ({res.turns} in all) "
        f"from {res.session.agent if res.session else '?'} session {res.session.id[:8] if res.session else '?'}"
    )
    if res.turns == 0:
        c.note("this session file holds no turn of conversation yet (only the agent's bookkeeping); "
               "it is recorded as it is, and its turns come with the next commit")
    for fork in res.forks:
        c.out(f"  branch {fork}: another line of conversation in the same session file")


def full_session_id(repo: Repository, env: Mapping[str, str], cwd: str, agent: str | None, text: str) -> str:
    """The session id that ``text`` begins, as opal prints them (``5c0375b4``): among
    the sessions of this folder and the ones branches track. A full id is kept as
    given (it may be a session of another folder); two matches are refused."""
    from opalgit import agents as adapters
    from opalgit import porcelain
    from opalgit.errors import UsageError
    from opalgit.porcelain.sessions import search_dirs

    chosen = [adapters.get(agent)] if agent else list(adapters.all_adapters().values())
    if len(text) < 4 or any(ad.find_session(text, env) is not None for ad in chosen):
        return text
    found: set[str] = set()
    for directory in search_dirs(repo, cwd):
        for ad in chosen:
            found.update(f.id for f in ad.find_sessions(directory, env) if f.id.startswith(text))
    for name in repo.refs.branches():
        tracked = porcelain.tracked_session(repo, name)
        if tracked and (agent is None or tracked[0] == agent) and tracked[1].startswith(text):
            found.add(tracked[1])
    if len(found) > 1:
        raise UsageError(f"session {text!r} is ambiguous: {', '.join(sorted(found))}", hint="give more of its id")
    return found.pop() if found else text


# ------------------------------------------------------------------------------ status


@cli.command(context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
def status(c: Ctx, as_json: bool) -> None:
    """Show the current branch in turns, what the agent added since the last commit, and what to run next.

    Counts the new turns of each agent session of this folder (reading only what
    the last commit did not), names the exact command that records them, and lists a
    merge that stopped on conflicts with each side's turns.

    \b
    Examples:
      opal status
      opal status --json
    """
    from opalgit import porcelain
    from opalgit.cli import render
    from opalgit.porcelain.status import describe_sessions

    st = porcelain.status(c.repo(), os.environ, c.cwd)
    if as_json:
        c.json(st.to_json())
        return
    where = c.style(st.branch, bold=True)
    if st.head is None:
        lines = [f"On branch {where}: no commits yet"]
    else:
        lines = [f"On branch {where}: {st.turns} turn{'s' if st.turns != 1 else ''} (head {render.short(st.head, 7)})"]
    if st.detached:
        lines.append(f"This state was {st.detached}: the agent's own session still holds what it left out, "
                     "so continue from here in an export of it.")
    sentences = describe_sessions(st)
    if not sentences:
        lines.append("No agent sessions found for this folder (start the agent here, or 'opal commit --file PATH').")
    lines += [t[0].upper() + t[1:] for t in sentences]
    if st.merge is not None:
        conflicts = st.merge["conflicts"]
        n = f"{len(conflicts)} conflict{'s' if len(conflicts) != 1 else ''}" if conflicts else "conflicts"
        lines += ["", c.style(f"Merging {st.merge['merging']} into {st.branch}: stopped on {n}", fg="red", bold=True)]
        # (a merge stopped by an older opal saved no conflicts: --continue lists them again)
        lines += conflict_lines(c, conflicts, st.branch, st.merge["merging"], st.merge["choices"])
    if st.next:
        lines += ["", "Next: " + c.style(st.next[0], bold=True)]
    elif st.head is not None and not st.detached:
        lines += ["", "Nothing to commit."]
    c.out(lines)


#: Turns shown per side of a conflict (the JSON has them all).
SHOWN_TURNS = 3


def conflict_lines(c: Ctx, conflicts: list[dict], ours: str, theirs: str, choices: Mapping[str, str] | None = None) -> list[str]:
    """A merge's conflicts as 'opal status' and 'opal merge' print them: per conflict,
    each side's turns with their numbers and first words, then how to resolve them."""
    choices = dict(choices or {})
    lines = []
    for v in conflicts:
        chosen = choices.get(str(v["conflict"])) or v.get("choice")
        head = f"  conflict {v['conflict']}" + (f": resolved, {chosen}" if chosen else ":")
        lines.append(c.style(head, bold=True))
        for side, name in (("ours", ours), ("theirs", theirs), ("base", "the merge base")):
            turns = v[side]
            span = _span(turns)
            lines.append(f"    {side:6} ({name}): {span}")
            for t in turns[:SHOWN_TURNS]:
                what = t["role"] + (f" {t['tool']}" if t.get("tool") else "")
                preview = f": {t['preview']}" if t.get("preview") else ""
                lines.append(f"      {t.get('turn', '?'):>5}  {what}{preview}")
            if len(turns) > SHOWN_TURNS:
                lines.append(f"      ... and {len(turns) - SHOWN_TURNS} more")
    open_ = [v["conflict"] for v in conflicts if not (choices.get(str(v["conflict"])) or v.get("choice"))]
    if open_:
        takes = " ".join(f"--take {i}=ours" for i in open_)
        lines.append(f"  Resolve each (ours, theirs, both or base): opal merge --continue {takes}")
        lines.append("  or all at once: opal merge --continue --strategy theirs; or give up: opal merge --abort")
    return lines


def _span(turns: list[dict]) -> str:
    if not turns:
        return "no turns"
    first, last = turns[0].get("turn"), turns[-1].get("turn")
    n = len(turns)
    where = f"turn {first}" if n == 1 else f"turns {first}-{last}"
    return where if first is not None else f"{n} turn{'s' if n != 1 else ''}"


# ------------------------------------------------------------------------------ fsck


@cli.command(context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_ctx
def fsck(c: Ctx, as_json: bool) -> None:
    """Check that every state, turn, payload and operation decodes, validates and adds up.

    Complements 'git fsck' (which checks the git objects themselves). Exits 7 when a
    problem is found, and names each one.

    \b
    Examples:
      opal fsck
      git fsck --full && opal fsck --json
    """
    from opalgit.errors import CorruptObjectError
    from opalgit.porcelain import fsck as fsck_mod

    report = fsck_mod.fsck(c.repo())
    if as_json:
        c.json(report.to_json())
    else:
        r = report
        c.out(f"checked {count(r.commits, 'commit')}, {count(r.leaves, 'leaf')}, {count(r.turns, 'turn')}, "
              f"{count(r.payloads, 'payload')}, {count(r.operations, 'operation')}")
        for p in r.problems:
            c.out(c.style("problem: ", fg="red") + p)
        if r.ok:
            c.out("no problems found")
    if not report.ok:
        raise CorruptObjectError(f"{count(len(report.problems), 'problem')} found", hint="see the list above; 'opal op log' and 'opal undo' may restore a good state")


# ------------------------------------------------------------------------------ demo


@cli.command(context_settings=CONTEXT)
@click.option("--keep", type=click.Path(file_okay=False), help="Build the demo in this folder and keep it.")
@pass_ctx
def demo(c: Ctx, keep: str | None) -> None:
    """Walk through opal on a bundled Claude Code session (no agent account needed).

    Builds a throw-away project with a realistic session, then commits, branches,
    rewinds, undoes and shows the log, printing each command as it goes.

    \b
    Examples:
      opal demo
      opal demo --keep /tmp/opal-demo
    """
    from opalgit.cli.demo import run_demo

    run_demo(keep, echo=lambda s: c.out(s), style=c.style)


# ------------------------------------------------------------------------------ entry point


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "-v" in args or "--verbose" in args
    try:
        with _progress(args):
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

__all__ = ["cli", "main", "run", "cli_edit", "cli_export", "cli_history", "cli_server", "cli_sync"]

if TYPE_CHECKING:
    from opalgit.cli.commands import edit as cli_edit
    from opalgit.cli.commands import export as cli_export
    from opalgit.cli.commands import history as cli_history
    from opalgit.cli.commands import server as cli_server
    from opalgit.cli.commands import sync as cli_sync


def __getattr__(name: str) -> Any:
    # The command modules are imported lazily (see LAZY_COMMANDS); as attributes of
    # this module (opalgit.cli.main.cli_sync) they are imported on first access.
    if f"opalgit.{name}" in COMMAND_MODULES:
        return importlib.import_module(f"opalgit.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


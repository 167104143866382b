"""``opal capture``: record every turn through the agents' own hooks (install, uninstall, status, hook)."""

from __future__ import annotations

import os
import sys

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.hooks import capture

_AGENT = click.option("--agent", "agent", default="all", show_default=True,
                      type=click.Choice([*capture.AGENTS, "all"]), help="Which agent's hooks.")
_SCOPE = click.option("--project/--user", "project", default=True,
                      help="The project's settings (this repository's working tree; the default) or your own "
                           "(~/.claude, ~/.codex, ~/.gemini: every project).")


@cli.group("capture", context_settings=CONTEXT)
def capture_group() -> None:
    """Record every turn of Claude Code, Codex and Gemini CLI, with nothing to type.

    'opal capture install' adds opal to each agent's own hook system. From then on,
    at the end of every turn (and before a compaction, and when a session ends) the
    agent runs opal's hook, which returns at once and leaves the work to a process in
    the background: it commits the new turns of that session to the branch that
    tracks it, as 'opal commit' would. Before a compaction the hook waits (up to 20 s)
    until the turns are committed, so what the agent is about to drop from its context
    is held. Nothing the hook does can fail the agent; 'opal capture status' shows
    what went wrong. See docs/capture.md.
    """


def _resolve(c: Ctx, project: bool):
    """The repository's working tree for --project (set up first if needed), or None."""
    repo = capture.find_repo(c.cwd)
    if not project:
        return repo, None, False
    if repo is None:
        from opalgit.errors import UsageError

        raise UsageError(f"{c.cwd} is not inside a git repository, so there is no project to install into",
                         hint="run it inside your project, or use --user for every project")
    created = False
    if not repo.initialized:
        from opalgit import porcelain
        from opalgit.store.repo import Repository

        porcelain.init(repo.workdir or c.cwd)
        repo, created = Repository.discover(repo.workdir or c.cwd), True
    return repo, repo.workdir, created


@capture_group.command("install", context_settings=CONTEXT)
@_AGENT
@_SCOPE
@pass_ctx
def capture_install(c: Ctx, agent: str, project: bool) -> None:
    """Add opal's hook to the agents' settings (Claude Code, Codex, Gemini CLI).

    \b
    Claude Code  .claude/settings.json  Stop, SubagentStop, PreCompact, SessionEnd
    Codex        .codex/hooks.json      Stop, PreCompact, SessionEnd
    Gemini CLI   .gemini/settings.json  AfterAgent, PreCompress, SessionEnd

    (with --user: ~/.claude/settings.json, $CODEX_HOME/hooks.json, ~/.gemini/settings.json).
    opal's hook goes after the hooks already there, which keep running in their order.
    Installing again changes nothing; 'opal capture uninstall' puts each file back as
    it was, byte for byte. A settings file that is not valid JSON is refused, and left
    alone. --project sets opal up in the repository first if needed.

    Codex runs a hook only once you have trusted it: start 'codex', type /hooks and
    trust opal's hooks ('codex exec --dangerously-bypass-hook-trust' runs them for one
    run without). install prints every such step.

    \b
    Examples:
      opal capture install                      # all three agents, this project
      opal capture install --agent claude --user
      opal capture status
    """
    repo, top, created = _resolve(c, project)
    scope = "project" if project else "user"
    records = capture.records_file(scope, repo.opal_dir if (repo is not None and project) else None, os.environ)
    if created:
        c.out(f"Initialized opal in {top}")
    changes = []
    for name in capture.agents_for(agent):
        path = capture.settings_path(name, scope, top, os.environ)
        changes.append(capture.install_file(name, scope, path, sys.executable, records))
    for ch in changes:
        c.out(f"  {ch.agent:7} {ch.action:10} {ch.path}" + (f" ({ch.detail})" if ch.detail else ""))
    for ch in changes:
        for step in ch.steps if ch.action != "unchanged" else ():
            c.note(f"{ch.agent}: {step}")
    if not project and (repo is None or not repo.initialized):
        c.note("turns of repositories without opal are not captured (the hook logs that it skipped them): "
               "run 'opal init' in each project")
    c.out("From now on every turn is committed in the background; 'opal capture status' shows it, "
          "'opal capture uninstall' undoes this.")


@capture_group.command("uninstall", context_settings=CONTEXT)
@_AGENT
@_SCOPE
@pass_ctx
def capture_uninstall(c: Ctx, agent: str, project: bool) -> None:
    """Remove opal's hook from the agents' settings.

    A settings file nobody changed since 'opal capture install' gets back exactly
    the bytes it had (or is removed, with the folders opal created, if there was none).
    One you changed since keeps every change: only opal's hooks are taken out. The
    states already committed stay.

    \b
    Examples:
      opal capture uninstall
      opal capture uninstall --agent gemini --user
    """
    repo = capture.find_repo(c.cwd)
    top = repo.workdir if (repo is not None and project) else None
    if project and top is None:
        from opalgit.errors import UsageError

        raise UsageError(f"{c.cwd} is not inside a git repository", hint="use --user for your own settings")
    scope = "project" if project else "user"
    records = capture.records_file(scope, repo.opal_dir if (repo is not None and project) else None, os.environ)
    for name in capture.agents_for(agent):
        ch = capture.uninstall_file(name, scope, capture.settings_path(name, scope, top, os.environ), records)
        c.out(f"  {ch.agent:7} {ch.action:10} {ch.path}" + (f" ({ch.detail})" if ch.detail else ""))


@capture_group.command("status", context_settings=CONTEXT)
@pass_ctx
def capture_status(c: Ctx) -> None:
    """Show where opal's hook is installed, the last capture of each session, the events
    still to commit and the recent errors.

    States of a settings file: installed; outdated (opal's hook of another opal
    installation, or not on every event: run 'opal capture install' again); absent;
    no file; invalid (not valid JSON: the agent cannot read it either).

    \b
    Examples:
      opal capture status
    """
    rep = capture.report(c.cwd, os.environ, sys.executable)
    c.out("Hooks:")
    for a in rep.agents:
        c.out(f"  {a.agent:7} {a.scope:8} {a.state:10} {a.path}" + (f": {a.detail}" if a.detail else ""))
    if rep.workdir is None:
        c.out("Not inside a git repository: nothing is captured here.")
        return
    if not rep.initialized:
        c.out(f"opal is not set up in {rep.workdir}: the hooks skip this repository (run 'opal init').")
        if rep.skipped:
            c.out(f"  {len(rep.skipped)} turn(s) skipped here, the last at {rep.skipped[-1].get('time')}")
        return
    _show_captures(c, rep)


def _show_captures(c: Ctx, rep: capture.Report) -> None:
    if rep.sessions:
        c.out("Last capture of each session:")
        for key, s in sorted(rep.sessions.items(), key=lambda kv: str(kv[1].get("time"))):
            agent, _, sid = key.partition(":")
            if s.get("error"):
                what = f"failed: {s['error']}"
            elif s.get("state"):
                what = f"{s.get('new_turns')} new turn(s) as {str(s['state'])[:7]} on {s.get('branch')}"
            else:
                what = "nothing new"
            c.out(f"  {s.get('time')}  {agent:7} {sid[:8]}  {s.get('event')}: {what}")
    else:
        c.out("No capture yet.")
    if rep.pending:
        c.out(f"Still to commit: {len(rep.pending)} event(s), the oldest from {rep.pending[0].get('time')}")
    if rep.errors:
        c.out("Recent errors (capture log):")
        for e in rep.errors:
            c.out(f"  {e.get('time')}  {e.get('message')}")
    if rep.crash:
        c.out("The capture worker could not start; it said:")
        c.out(["  " + line for line in rep.crash.splitlines()[-5:]])


@capture_group.command("hook", context_settings=CONTEXT)
@click.option("--agent", "agent", required=True, type=click.Choice(sorted(capture.AGENTS)), help="The agent whose hook this is.")
@click.option("--event", "event", default="Stop", show_default=True,
              type=click.Choice(sorted({ev for spec in capture.AGENTS.values() for ev in spec.EVENTS})),
              help="The hook's event (PreCompact and PreCompress wait until the turns are committed).")
def capture_hook(agent: str, event: str) -> None:
    """Queue the event an agent's hook gives on stdin and commit it in the background.

    The installed hooks run the same thing without opal's start-up
    (sh .../opalgit/hooks/capturehook.sh PYTHON AGENT EVENT); this command is for a
    hook you write yourself. Prints nothing and exits 0 whatever happens.

    \b
    Examples:
      echo "$EVENT_JSON" | opal capture hook --agent claude
    """
    from opalgit.hooks import capturework

    sys.stdout.flush()
    os.execv("/bin/sh", ["sh", capturework.SCRIPT, sys.executable, agent, event])

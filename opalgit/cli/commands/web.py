"""``opal web``: serve the read-only web view (:mod:`opalgit.web`) until Ctrl-C."""

from __future__ import annotations

import errno
import signal
import sys

import click

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli
from opalgit.errors import UsageError


def _interrupt(signum, frame) -> None:
    """SIGTERM ends it as Ctrl-C does: the socket closed, one line said, exit 0."""
    raise KeyboardInterrupt


@cli.command(context_settings=CONTEXT)
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port on 127.0.0.1 to serve on (0: a free one).")
@click.option("--open/--no-open", "open_browser", default=False, show_default=True,
              help="Open the page in the default browser.")
@pass_ctx
def web(c: Ctx, port: int, open_browser: bool) -> None:
    """See the repository's states in a browser: graph, turns, diffs, budget.

    Serves a read-only view on 127.0.0.1 and prints its URL, which holds a
    random token: only a browser given that URL can read the pages (other users
    of this machine and other web pages get 403). Every file the page uses
    comes from opal itself; nothing is fetched from the network. Pages: the
    graph of every branch and remote branch, a state's turns (expandable, tool
    calls with their results), the diff of two states, where the tokens go and
    what trim, drop and --budget would cut, blame of a file, search, and the
    op log. Nothing can be changed from the page: each action is shown as the
    opal command to copy. Stops on Ctrl-C.

    \b
    Examples:
      opal web
      opal web --port 8765 --open
    """
    from opalgit.web.server import WebServer

    repo = c.repo()
    try:
        server = WebServer(repo.git_dir, port, log=lambda line: click.echo(line, err=True))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on 127.0.0.1 is in use", hint="pick another, or --port 0 for a free one") from None
        raise UsageError(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e}") from None
    signal.signal(signal.SIGTERM, _interrupt)
    click.echo(f"opal web: {server.url}")
    click.echo(f"  serving {repo.workdir or repo.git_dir} (read-only); Ctrl-C stops it", err=True)
    sys.stdout.flush()
    if open_browser:
        import webbrowser

        if not webbrowser.open(server.url):
            c.warn("no browser could be started here; open the URL above yourself")
    try:
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        click.echo("opal web: stopped", err=True)
    finally:
        server.server_close()

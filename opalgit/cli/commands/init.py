"""``opal init``: set opal up in the git repository of a folder (or a store of its own)."""

from __future__ import annotations

from opalgit.cli.context import CONTEXT, Ctx, pass_ctx
from opalgit.cli.main import cli


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

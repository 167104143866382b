"""opalgit: git for coding-agent sessions.

The public Python API is :mod:`opalgit.porcelain` (what every command does) over
:class:`opalgit.store.repo.Repository`; errors derive from :class:`opalgit.errors.OpalError`.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["OpalError", "Repository", "__version__"]

# Not typing.TYPE_CHECKING: importing typing costs the ``opal`` program ~4 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from opalgit.errors import OpalError
    from opalgit.store.repo import Repository


def __getattr__(name: str) -> "type":
    # Imported on first use: the ``opal`` program starts in opalgit.server.client, which hands
    # most commands to a warm server and must not pay for what it does not run.
    if name == "OpalError":
        from opalgit.errors import OpalError

        return OpalError
    if name == "Repository":
        from opalgit.store.repo import Repository

        return Repository
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

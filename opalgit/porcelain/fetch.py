"""``opal fetch``: get a remote's state branches and code links as remote-tracking branches.

Nothing of the porcelain's is needed to fetch (the staged refs move in one operation
of the op log, :mod:`opalgit.sync.fetch`); the verb is here so that every ``opal``
command has its porcelain module of the same name.
"""

from __future__ import annotations

from opalgit.sync.fetch import FetchResult, fetch

__all__ = ["FetchResult", "fetch"]

"""``opal clone-state``: the state kept at a URL, in a freshly cloned repository.

The transport is :mod:`opalgit.sync.clone`; the current branch starts at the remote's
by the porcelain's fast-forward (:func:`opalgit.porcelain.pull.fast_forward`), the rule
``opal pull`` and ``opal merge`` follow.
"""

from __future__ import annotations

from typing import Mapping

from opalgit.porcelain.pull import fast_forward
from opalgit.store.repo import Repository
from opalgit.sync.clone import CloneResult
from opalgit.sync.clone import clone_state as clone


def clone_state(repo: Repository, env: Mapping[str, str], url: str, name: str | None = None) -> CloneResult:
    """Get the state kept at ``url``; see :func:`opalgit.sync.clone.clone_state`."""
    return clone(repo, env, url, name, start=fast_forward)

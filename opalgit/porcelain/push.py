"""``opal push``: send a state branch and its code links to a remote, after the secret gate.

The transport is :mod:`opalgit.sync.push`; what this verb adds is the porcelain's rule
that nothing leaves the machine unscanned (:func:`opalgit.porcelain.secrets.gate`), so
the CLI, the pre-push hook and a Python caller all push through the same gate.
"""

from __future__ import annotations

from typing import Mapping

from opalgit.porcelain.secrets import gate
from opalgit.store.repo import Repository
from opalgit.sync.push import PushResult
from opalgit.sync.push import push as send


def push(
    repo: Repository,
    env: Mapping[str, str],
    remote: str | None = None,
    branch: str | None = None,
    *,
    force: bool = False,
    allow_secrets: bool = False,
) -> PushResult:
    """Push ``branch`` (default: the current one; ``LOCAL:REMOTE_NAME`` names it there)
    and its links to ``remote``; see :func:`opalgit.sync.push.push` for the rules."""
    return send(repo, env, remote, branch, force=force, allow_secrets=allow_secrets, gate=gate)

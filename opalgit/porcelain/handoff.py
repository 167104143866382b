"""``opal handoff``: the handoff a user makes when an agent hits its limit, in one command.

``opal init`` (when opal is not set up yet), ``opal commit`` of the folder's session
and ``opal export --to AGENT`` of the state just committed, run as those commands run
them, one after the other, in one process: the same objects, the same exported files
and the same loss report as the three commands, without starting opal three times
(``bench/handoff.py`` measures both ways against ``hc convert``; docs/performance.md).
"""

from __future__ import annotations

from typing import Mapping

from opalgit.errors import NothingToDoError
from opalgit.porcelain.commit import CommitResult, KeptTurn, commit
from opalgit.porcelain.export import ExportOutcome, export
from opalgit.porcelain.init import InitResult, init
from opalgit.store.repo import Repository
from opalgit.structs import dataclass


@dataclass
class HandoffResult:
    """What ``opal handoff`` did: the set-up, the commit (None: nothing was new) and the export."""

    init: InitResult
    commit: CommitResult | None
    nothing_new: str | None  # why nothing was committed (the state exported is the branch's head)
    export: ExportOutcome


def setup(cwd: str, to: str) -> tuple[InitResult, Repository]:
    """``opal init`` in ``cwd`` (nothing when opal is set up), and the repository; an
    unknown agent ``to`` is refused first, before anything is written."""
    from opalgit import agents as adapters

    adapters.get(to)
    return init(cwd), Repository.discover(cwd)


def handoff(
    repo: Repository,
    done: InitResult,
    env: Mapping[str, str],
    cwd: str,
    *,
    to: str,
    agent: str | None = None,
    session: str | None = None,
    file: str | None = None,
    message: str | None = None,
    export_cwd: str | None = None,
    reasoning: str = "drop",
    with_secrets: bool = True,
    session_id: str | None = None,
) -> HandoffResult:
    """Record the session ``opal commit`` picks in ``cwd`` (or the one named) on the
    current branch of ``repo`` (set up by :func:`setup`, which ``done`` says), and
    export the branch's head to agent ``to``.

    A session with nothing new since the last commit is no error: the head is what is
    exported (as ``opal commit`` then ``opal export`` would do). ``session_id``: the
    exported session's id (default: a fresh one, as ``export`` draws).
    """
    recorded: CommitResult | None = None
    nothing_new = None
    # The records the commit stores, kept for the export of that state: reading them
    # back (decompressing leaves and payload packs, decoding every record) was about
    # half of the export's work on the handoff bench's 20 MB session.
    kept: list[KeptTurn] = []
    try:
        recorded = commit(repo, env, cwd, message=message, agent=agent, session=session, file=file, keep=kept)
    except NothingToDoError as exc:
        nothing_new = exc.message
    known = (recorded.oid, kept) if recorded is not None and recorded.oid is not None and kept else None
    out = export(repo, env, "HEAD", to=to, cwd=export_cwd, reasoning=reasoning, with_secrets=with_secrets,
                 session_id=session_id, known=known)
    return HandoffResult(done, recorded, nothing_new, out)

"""Export checkpoints: what ``opal export`` wrote, so that committing the resumed
session stores only the turns the agent added.

An export writes a new session file whose records are the exported state's, with
fresh ids (a new session id in every record, for Claude Code). Read back on its
own, that file shares no turn with the state it came from, so the first commit of
the resumed session used to store the whole history a second time. When an
export writes one record per stored record, in order, opal remembers it here: the
file, how many bytes and records it wrote, a hash of its tail, and the state it
came from. A commit of that session, on a branch still at that state, whose file
still begins with those bytes, keeps the state's records for the file's first
lines and adds only what follows (:func:`porcelain.commit`).

Every export leaves one, one-for-one or not (``records`` 0: none of the file's
records stands for a stored one): it is also how a commit knows that a session
file was written by opal, and from which state. A branch whose head is detached
(rewound, branched at a turn) refuses, unless named with ``--session``, a session
opal exported from another state, which may hold the turns the branch left out
(:func:`opalgit.porcelain.commit._implicit_refusal`).

Checkpoints describe files, not branches: ``opal undo`` of an export gives the
branch back the session it tracked, and the file and its checkpoint stay (the file
still holds what opal wrote). They are local, one small JSON file per exported
session file under ``<git-common-dir>/opal/exports/``; deleting them costs storage
and that protection for the files concerned. Nothing in them is trusted without
the checks above.
"""

from __future__ import annotations

import hashlib
import json
import os

from opalgit.agents.base import begins_with
from opalgit.fileio import keep_newest, replace_atomically
from opalgit.structs import dataclass

#: Checkpoints kept (the newest by time): each is a few hundred bytes, and each
#: protects a rewound branch from the file it names, so they are many.
KEEP = 1024


@dataclass(frozen=True)
class Checkpoint:
    agent: str
    session: str
    path: str
    size: int  # bytes written
    records: int  # records written, one per stored record of ``state`` (0: not one for one)
    tail: bytes  # SHA-256 of the last TAIL_WINDOW bytes, as tail_hash computes it
    state: bytes  # the state commit exported


def _folder(opal_dir: str) -> str:
    return os.path.join(opal_dir, "exports")


def _name(agent: str, path: str) -> str:
    # By file, not by session id: a file given with --file is known by its path (a
    # Codex rollout's name is not its session id).
    return hashlib.sha256(f"{agent}:{os.path.abspath(path)}".encode()).hexdigest()[:32] + ".json"


def save(opal_dir: str, cp: Checkpoint) -> None:
    folder = _folder(opal_dir)
    os.makedirs(folder, exist_ok=True)
    body = {
        "v": 1,
        "agent": cp.agent,
        "session": cp.session,
        "path": cp.path,
        "size": cp.size,
        "records": cp.records,
        "tail": cp.tail.hex(),
        "state": cp.state.hex(),
    }
    replace_atomically(os.path.join(folder, _name(cp.agent, cp.path)), json.dumps(body).encode())
    keep_newest(folder, KEEP, ".json")


def load(opal_dir: str, agent: str, path: str) -> Checkpoint | None:
    """The checkpoint of the session file at ``path`` written for ``agent``, if any."""
    try:
        with open(os.path.join(_folder(opal_dir), _name(agent, path)), "rb") as fh:
            body = json.loads(fh.read())
        cp = Checkpoint(
            agent=str(body["agent"]),
            session=str(body["session"]),
            path=str(body["path"]),
            size=int(body["size"]),
            records=int(body["records"]),
            tail=bytes.fromhex(body["tail"]),
            state=bytes.fromhex(body["state"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no checkpoint, or one that is damaged: the commit reads the file as new
    return cp if (cp.agent, cp.path) == (agent, os.path.abspath(path)) else None


def still_holds(cp: Checkpoint, path: str) -> bool:
    """Whether the file at ``path`` still begins with what the export wrote."""
    try:
        return os.path.abspath(path) == os.path.abspath(cp.path) and begins_with(path, cp.size, cp.tail)
    except OSError:
        return False

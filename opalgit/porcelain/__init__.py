"""The high-level Python API: what every ``opal`` command does, without the terminal.

Each verb's module is ``porcelain/<verb>.py`` (named as ``cli/commands/<verb>.py``); this
package re-exports the API, so ``from opalgit import porcelain; porcelain.commit(...)``.
Inside opalgit a porcelain module is imported by its names
(``from opalgit.porcelain.status import describe_sessions``): the package's attribute of a
verb's name is the verb's function, not its module.
"""

from opalgit.history.states import (
    STATE_BLOB,
    TURNS_TREE,
    Resolved,
    State,
    authored_item,
    branch_head,
    common_prefix,
    current_branch,
    load_payload,
    load_state,
    packer_for,
    resolve,
    turn_item_index,
    turn_of,
)
from opalgit.porcelain.branch import BranchInfo, branch_create, branch_delete, branch_labels, branches
from opalgit.porcelain.commit import CommitResult, commit
from opalgit.porcelain.init import InitResult, init
from opalgit.porcelain.log import CommitInfo, TurnInfo, commit_info, log, turns
from opalgit.porcelain.rewind import RewindResult, rewind
from opalgit.porcelain.sessions import Pick, find_session, record_export, tracked_session
from opalgit.porcelain.show import ShownTurn, show_turn
from opalgit.porcelain.states import normal_of, normals_of, write_state
from opalgit.porcelain.status import SessionStatus, StatusResult, status
from opalgit.porcelain.switch import switch
from opalgit.porcelain.undo import op_log, undo

__all__ = [
    "BranchInfo",
    "CommitInfo",
    "CommitResult",
    "InitResult",
    "Pick",
    "Resolved",
    "RewindResult",
    "STATE_BLOB",
    "SessionStatus",
    "ShownTurn",
    "State",
    "StatusResult",
    "TURNS_TREE",
    "TurnInfo",
    "authored_item",
    "branch_create",
    "branch_delete",
    "branch_head",
    "branch_labels",
    "branches",
    "commit",
    "commit_info",
    "common_prefix",
    "current_branch",
    "find_session",
    "init",
    "load_payload",
    "load_state",
    "log",
    "normal_of",
    "normals_of",
    "packer_for",
    "op_log",
    "record_export",
    "resolve",
    "rewind",
    "show_turn",
    "status",
    "switch",
    "tracked_session",
    "turn_item_index",
    "turn_of",
    "turns",
    "undo",
    "write_state",
]

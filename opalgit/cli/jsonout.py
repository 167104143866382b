"""What ``--json`` prints: its schema version, its one time format, and the schema of every command's output.

The schemas here are the single source: docs/json.md is generated from them
(``python -m opalgit.cli.jsonout > docs/json.md``; tests/cli/test_json_schema.py fails when
it is stale), and the same test runs every command on a real session and checks
what it printed against them with :func:`validate`.

Every output is one JSON object whose first key is ``version`` (:data:`VERSION`).
Every time is a string in ISO 8601, UTC, with a ``Z``: ``2026-12-01T23:45:07Z``, or
``2026-12-01T23:45:07.071Z`` where the source has milliseconds (turn times, the op
log); ``null`` where it is not known. Ids are full 40-hex object ids.

No imports beyond the standard library and :mod:`opalgit.times`, where the porcelain
takes its time formats from (:func:`iso_seconds` / :func:`iso_ms`, named here too);
the CLI wraps outputs with :func:`envelope`.
"""

from __future__ import annotations

import re
from typing import Any

from opalgit.times import iso_ms, iso_seconds  # noqa: F401 (the CLI takes them from here)

#: The schema version of every --json output. Raised when a field is removed or
#: changes meaning; adding a field keeps it.
VERSION = 1


def envelope(value: dict) -> dict:
    """``value`` with ``version`` first."""
    if not isinstance(value, dict) or "version" in value:
        raise TypeError("a --json output is an object, and 'version' is the envelope's key")
    return {"version": VERSION, **value}


# ----------------------------------------------------------------------------- building blocks

STR = {"type": "string"}
INT = {"type": "integer", "minimum": 0}
SINT = {"type": "integer"}
BOOL = {"type": "boolean"}
ANY: dict = {}
OID = {"type": "string", "pattern": "^[0-9a-f]{40}$", "description": "a full object id"}
TIME = {"type": "string", "format": "date-time"}
TURN_ID = {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "a turn's content id (SHA-256)"}


def null(schema: dict) -> dict:
    """``schema`` or null."""
    out = dict(schema)
    t = out.get("type")
    if t is None:
        return {"anyOf": [schema, {"type": "null"}]}
    out["type"] = sorted({*(t if isinstance(t, list) else [t]), "null"})
    return out


def d(schema: dict, text: str) -> dict:
    return {**schema, "description": text}


def arr(items: dict, text: str = "") -> dict:
    return {"type": "array", "items": items, **({"description": text} if text else {})}


def obj(props: dict, *, optional: tuple = (), open_: bool = False, text: str = "") -> dict:
    """An object with exactly ``props`` (those in ``optional`` may be absent);
    ``open_``: other keys may appear too (maps written by agents)."""
    out = {
        "type": "object",
        "properties": props,
        "required": [k for k in props if k not in optional],
        "additionalProperties": open_,
    }
    if text:
        out["description"] = text
    return out


def mapping(values: dict, text: str = "") -> dict:
    """An object whose keys are names (branches, kinds, tools) and values ``values``."""
    return {"type": "object", "additionalProperties": values, **({"description": text} if text else {})}


SESSION = obj(
    {"agent": STR, "id": STR, "cwd": STR, "git_branch": STR, "model": STR, "title": STR, "version": STR},
    optional=("cwd", "git_branch", "model", "title", "version"),
    text="the agent session a state records (keys without a value are left out)",
)
COMMIT = obj(
    {
        "id": OID,
        "parents": arr(OID),
        "message": STR,
        "author": d(STR, "Name <email>"),
        "time": d(TIME, "when the state was committed"),
        "branches": arr(STR, "branches whose head it is"),
        "agent": null(STR),
        "session": null(SESSION),
        "turns": INT,
        "records": INT,
        "new_records": arr(INT, "record numbers this commit added"),
        "tokens_estimate": INT,
        "extra": mapping(ANY, "what the commit recorded beside the session (code commit, rewind reason...)"),
    },
    optional=("extra",),
    text="one state commit",
)
TURN_SUMMARY = {
    "turn": d(null(INT), "turn number (1-based); null for a bookkeeping record (--all)"),
    "record": d(INT, "record number in the session (1-based)"),
    "id": TURN_ID,
    "role": null(STR),
    "kind": null(STR),
    "tool": null(STR),
    "chars": INT,
    "tokens_estimate": INT,
    "time": d(null(TIME), "the agent's time of the turn"),
    "label": d(STR, "what a bookkeeping record is (--all)"),
}
BRANCH = obj(
    {
        "name": STR,
        "id": OID,
        "current": BOOL,
        "turns": INT,
        "message": STR,
        "session": d(null(STR), "id of the session the branch tracks"),
    },
    optional=(),
)
HOOK_CHANGE = obj({"hook": STR, "path": STR, "action": STR, "detail": null(STR)})
FETCH = obj(
    {
        "remote": STR,
        "branches": mapping(obj({"old": null(OID), "new": null(OID)}), "remote branch -> its remote-tracking head before and after"),
        "links": d(INT, "code links fetched"),
    }
)
OBJECTS = obj({"loose": INT, "loose_bytes": INT, "packs": INT, "pack_bytes": INT})
MERGE_SIDE = arr(obj({"turn": d(INT, "its number in that side's state"), "role": null(STR), "kind": null(STR),
                      "tool": null(STR), "chars": INT, "preview": d(null(STR), "its first words (the first few turns)")},
                     optional=("turn", "chars", "preview"), open_=True), "the turns of that side")

#: Every --json output: name -> (the commands that print it, what it is, its schema).
SCHEMAS: dict[str, tuple[list[str], str, dict]] = {}


def schema(name: str, commands: list[str], text: str, props: dict, *, optional: tuple = ()) -> None:
    SCHEMAS[name] = (commands, text, obj({"version": {"const": VERSION}, **props}, optional=optional))


schema("commit", ["opal commit --json"], "The commit made, or why there was none (`committed: false`, with `reason`).", {
    "committed": BOOL,
    "reason": d(STR, "only when nothing was committed"),
    "branch": STR,
    "id": OID,
    "parent": null(OID),
    "session": null(SESSION),
    "new_turns": INT,
    "new_records": INT,
    "turns": INT,
    "records": INT,
    "incremental": d(BOOL, "only the new lines of the session file were read"),
    "fork_branches": arr(STR, "branches made for other lines of conversation in the file"),
    "objects_written": INT,
    "bytes_written": INT,
    "warnings": arr(STR),
    "notes": arr(STR),
}, optional=("reason", "branch", "id", "parent", "session", "new_turns", "new_records", "turns", "records",
             "incremental", "fork_branches", "objects_written", "bytes_written", "warnings", "notes"))

schema("status", ["opal status --json"], "The current branch, the agent sessions of the folder, a merge in progress.", {
    "branch": STR,
    "head": null(OID),
    "turns": INT,
    "detached": d(null(STR), "what the branch was detached from (a rewound state), or null"),
    "sessions": arr(obj({
        "agent": STR, "id": STR, "path": STR,
        "modified": d(TIME, "when the session file was last written"),
        "tracked": d(BOOL, "the branch records this session"),
        "size": INT, "committed_bytes": INT, "uncommitted": BOOL,
        "uncommitted_turns": d(null(INT), "turns the next commit would add (null: not known)"),
        "uncommitted_records": d(null(INT), "records the next commit would add (null: not known)"),
    }, open_=True)),
    "merge": null(obj({"merging": STR, "choices": mapping(STR),
                       "conflicts": arr(obj({"conflict": INT, "choice": null(STR), "base": MERGE_SIDE, "ours": MERGE_SIDE,
                                             "theirs": MERGE_SIDE}, open_=True), "each conflict, as merge --json lists it")},
                      optional=("conflicts",))),
    "next": arr(STR, "the commands to run next, most likely first"),
}, optional=())

schema("fsck", ["opal fsck --json"], "What was checked and every problem found.", {
    "ok": BOOL,
    "problems": arr(STR, "one line per problem"),
    "checked": obj({"commits": INT, "leaves": INT, "turns": INT, "payloads": INT, "operations": INT},
                   text="how many of each were checked"),
})

schema("branch-list", ["opal branch --json", "opal branch --list --json", "opal branch -r|-a --json"],
       "Every branch; with -r only, or -a as well, the remote-tracking branches.", {
    "branches": arr(BRANCH, "the local branches (none with -r)"),
    "remote_branches": d(arr(obj({"name": STR, "id": OID, "remote": {"const": True}, "turns": INT, "message": STR})),
                         "with -r or -a: REMOTE/BRANCH as fetched"),
}, optional=("remote_branches",))
schema("branch-create", ["opal branch NAME [START] --json"], "The branch created.", dict(BRANCH["properties"]))

schema("log", ["opal log --json"], "The commits, newest first.", {"commits": arr(COMMIT)})
schema("show-commit", ["opal show [REV] --json", "(and `commit` in `opal at --json`)"], "One commit.", dict(COMMIT["properties"]),
       optional=("extra",))
schema("log-turns", ["opal log --turns --json"], "The turns of a state, in order.", {
    "turns": arr(obj(TURN_SUMMARY, optional=("label",))),
})
schema("show-turn", ["opal show REV:N --json"], "One turn: its normalized blocks and the agent's own record.", {
    "commit": OID,
    "turn": INT,
    "record": INT,
    "id": TURN_ID,
    "agent": STR,
    "role": null(STR),
    "time": null(TIME),
    "blocks": arr(mapping(ANY), "normalized content: text, reasoning, tool_call, tool_result, ..."),
    "source": d(ANY, "the agent's record as stored (JSON), or null"),
})

GREP_LINE = obj({
    "block": d(STR, "what the line is from: prompt, reply, reasoning, call, result or text"),
    "tool": d(null(STR), "the tool, for a call or a result"),
    "key": d(null(STR), "for a call: the input field the line is from (name for the tool's name)"),
    "call_id": d(null(STR), "for a call or a result: the call's id"),
    "line": d(INT, "1-based line number within that text"),
    "text": d(STR, "the whole line"),
    "spans": arr(arr(INT), "each match as [start, end) character offsets into text"),
})
schema("grep", ["opal grep PATTERN [REV...] --json"], "The matching records, state by state in record order; "
       "what was searched.", {
    "pattern": STR,
    "matches": arr(obj({"rev": d(STR, "the state as named: its branch, or the revision given"), "commit": OID,
                        "turn": d(null(INT), "the turn's number; null for a meta record"), "record": INT,
                        "role": STR, "lines": arr(GREP_LINE)})),
    "lines": d(INT, "matching lines in all"),
    "searched": obj({"states": INT, "records": d(INT, "records of the states searched, a shared one in each"),
                     "leaves": INT, "leaves_searched": d(INT, "distinct leaves read and searched"),
                     "records_searched": d(INT, "distinct records normalized and searched"),
                     "records_skipped": d(INT, "distinct records passed over: their stored bytes hold none of "
                                               "the literals every match contains")}),
    "unreadable": arr(obj({"rev": STR, "record": INT, "why": STR}), "records that could not be read, not searched"),
})

schema("diff", ["opal diff --json A B"], "Turns added, removed and changed from A to B.", {
    "a": obj({"rev": STR, "id": OID}),
    "b": obj({"rev": STR, "id": OID}),
    "common_prefix_turns": INT,
    "shared_turns": INT,
    "uncommitted_records": INT,
    "stat": obj({
        "a": obj({"turns": INT, "tool_calls": INT, "tokens": INT}),
        "b": obj({"turns": INT, "tool_calls": INT, "tokens": INT}),
        "turns_added": INT, "turns_removed": INT, "turns_changed": INT,
    }),
    "turns": arr(obj({
        "change": {"enum": ["added", "removed", "changed"]},
        "turn_a": null(INT), "turn_b": null(INT),
        "role": null(STR), "kind": null(STR), "tool": null(STR), "chars": INT, "preview": STR,
        "diff": d(STR, "a text diff, for a changed turn"),
    }, optional=("diff",))),
})

schema("stats", ["opal stats --json"], "Where the tokens of a state go.", {
    "rev": STR,
    "id": OID,
    "turns": INT,
    "records": INT,
    "tool_calls": INT,
    "tokens_estimate": INT,
    "by_kind": mapping(obj({"turns": INT, "tokens": INT}), "role/kind -> turns and tokens"),
    "by_tool": mapping(obj({"turns": INT, "tokens": INT}), "tool -> turns and tokens"),
    "biggest": arr(obj({"turn": INT, "tokens": INT, "role": null(STR), "kind": null(STR), "tool": null(STR)})),
})

schema("edit", ["opal drop --json", "opal squash --json", "opal trim --json"], "The commit a clean-up made.", {
    "branch": STR,
    "id": OID,
    "command": {"enum": ["drop", "squash", "trim"]},
    "turns": obj({"before": INT, "after": INT}),
    "tokens_estimate": obj({"before": INT, "after": INT, "saved": SINT}),
    "range": d(null(arr(INT)), "[from, to] turns (drop, squash), widened to keep tool calls with results"),
    "changed": d(INT, "tool outputs trimmed (trim)"),
    "notes": arr(STR),
})

schema("merge", ["opal merge --json"], "What a merge did: fast-forward, merged, conflicts, up-to-date.", {
    "result": {"enum": ["fast-forward", "merged", "conflicts", "up-to-date"]},
    "message": d(STR, "up-to-date only"),
    "branch": STR,
    "theirs": STR,
    "id": null(OID),
    "conflicts": arr(obj({
        "conflict": INT, "choice": null(STR), "base": MERGE_SIDE, "ours": MERGE_SIDE, "theirs": MERGE_SIDE,
    }, open_=True)),
    "repairs": arr(STR),
    "turns_from_theirs": INT,
    "turns_left_out": d(INT, "turns of this branch the result does not hold (a forced merge or fast-forward)"),
}, optional=("message", "branch", "theirs", "id", "conflicts", "repairs", "turns_from_theirs", "turns_left_out"))

schema("op-log", ["opal op log --json"], "The operation log, newest first.", {
    "operations": arr(obj({
        "id": OID,
        "command": STR,
        "description": STR,
        "time": TIME,
        "user": d(STR, "Name <email>"),
        "undoes": d(null(OID), "the operation this one undid"),
        "changes": mapping(arr(null(OID)), "ref -> [before, after]; null: absent"),
        "sessions": mapping(arr(null(STR)), "branch -> the session it tracks [before, after] (agent:id); null: none"),
        "head": d(arr(STR), "current branch [before, after]"),
    })),
})

schema("export", ["opal export --json"], "The native session written, how to resume it, the loss report.", {
    "agent": STR,
    "revision": STR,
    "commit": OID,
    "session_id": STR,
    "cwd": STR,
    "files": arr(STR),
    "shared_files": arr(STR, "files written beside the session (registries, indexes)"),
    "resume": arr(STR, "the resume command as argv"),
    "resume_command": STR,
    "turns": INT,
    "tokens_estimate": obj({"before": INT, "after": INT}),
    "report": obj({"converted": mapping(INT), "dropped": mapping(INT), "notes": arr(STR)}),
    "dry_run": BOOL,
})

def _inner(name: str) -> dict:
    """The schema of command output ``name`` as a part of another one: without ``version``."""
    sch = SCHEMAS[name][2]
    props = {k: v for k, v in sch["properties"].items() if k != "version"}
    return {**sch, "properties": props, "required": [k for k in sch["required"] if k != "version"]}


schema("handoff", ["opal handoff --json"], "What was set up, committed (as `opal commit --json`, without "
       "`version`) and exported (as `opal export --json`, without `version`).", {
    "initialized": d(BOOL, "opal was set up by this handoff"),
    "commit": d(_inner("commit"), "the commit made, or why there was none"),
    "export": d(_inner("export"), "the native session written"),
})

schema("secrets-scan", ["opal secrets scan --json"], "Redacted secrets and secrets in clear (never the secret).", {
    "rev": STR,
    "states": INT,
    "turns_scanned": INT,
    "redacted": arr(obj({"turn": STR, "kind": STR, "placeholder": STR})),
    "in_clear": arr(obj({"turn": STR, "kind": STR, "where": STR})),
})

schema("secrets-purge", ["opal secrets purge --json"], "The refs rewritten and the secrets moved into the vault.", {
    "refs": mapping(obj({"name": STR, "old": OID, "new": OID}), "full ref name -> its head before and after"),
    "states_rewritten": INT,
    "secrets": INT,
    "kinds": arr(STR),
    "op": null(OID),
    "dry_run": BOOL,
})

schema("hooks-install", ["opal hooks install --json"], "Each hook written.", {
    "initialized": d(BOOL, "opal was set up by this install"),
    "hooks": arr(HOOK_CHANGE),
})
schema("hooks-uninstall", ["opal hooks uninstall --json"], "Each hook removed or restored.", {"hooks": arr(HOOK_CHANGE)})
schema("hooks-status", ["opal hooks status --json"], "The hooks, and the background work they left.", {
    "hooks": arr(obj({"hook": STR, "path": STR, "state": STR, "chained": null(STR)})),
    "push_with_code": BOOL,
    "shared": null(STR),
    "pending": arr(obj({"hook": STR, "pid": INT, "data": ANY})),
    "failures": arr(obj({"time": TIME, "hook": STR, "message": STR, "said": BOOL}, open_=True)),
})

schema("at", ["opal at [REV] --json"], "The state recorded with a code commit (or its nearest linked ancestor).", {
    "code_commit": OID,
    "linked_code_commit": OID,
    "distance": INT,
    "state": OID,
    "remote": null(STR),
    "commit": COMMIT,
})

BLAME_OWNER = obj({
    "kind": {"enum": ["agent", "human", "uncommitted", "unattributed"]},
    "agent": d(null(STR), "agent: the agent whose tool call wrote the line"),
    "session": d(null(STR), "agent: its session id"),
    "state": d(null(OID), "agent: the first state commit that holds the turn"),
    "turn": d(null(INT), "agent: the turn's number in that state"),
    "revision": d(null(STR), "agent: STATE:TURN, for 'opal show' and 'opal export'"),
    "prompt": d(null(STR), "agent: the user's prompt the turn followed (up to 2,000 characters)"),
    "tool": d(null(STR), "agent: the tool, as the agent names it (Edit, apply_patch, replace, ...)"),
    "model": d(null(STR), "agent: the session's model, when recorded"),
    "commit": d(null(OID), "human, unattributed: the code commit that changed the line"),
    "author": d(null(STR), "human, unattributed: that commit's author"),
    "time": d(null(TIME), "agent: the turn's time; human: the commit's"),
    "reason": d(STR, "unattributed: why opal cannot say"),
}, optional=("agent", "session", "state", "turn", "revision", "prompt", "tool", "model", "commit", "author",
             "reason"))

schema("blame", ["opal blame FILE --json"], "Who last wrote each line: a recorded agent turn, a person (a code "
       "commit), an uncommitted change, or unattributed with the reason (docs/blame.md).", {
    "path": d(STR, "relative to the repository's top folder"),
    "revision": d(null(STR), "the code revision asked for; null: the working tree"),
    "code_commit": d(null(OID), "the code commit blamed; null: the working tree"),
    "lines_in_file": INT,
    "recorded_changes": d(INT, "recorded tool calls that changed the file (under any of its names)"),
    "lines": arr(obj({
        "line": d(INT, "1-based"),
        "text": STR,
        "code_commit": d(null(OID), "the code commit the line came in with; null: not committed yet"),
        "owner": BLAME_OWNER,
    })),
    "notes": arr(STR),
})

schema("push", ["opal push --json"], "The branch pushed.", {
    "remote": STR, "branch": STR, "remote_branch": STR, "id": OID,
    "status": {"enum": ["new", "fast-forward", "forced", "up-to-date"]},
    "links": INT,
})
schema("fetch", ["opal fetch --json"], "The remote-tracking branches that moved.", dict(FETCH["properties"]))
schema("pull", ["opal pull --json"], "The fetch, then the fast-forward.", {
    "branch": STR,
    "from": STR,
    "old": null(OID),
    "new": OID,
    "status": STR,
    "turns_left_out": d(INT, "turns of the branch the pull left out (only with --force)"),
    "session": d(null(STR), "the session the branch tracks after the pull (agent:id)"),
    "session_changed": d(BOOL, "the pull changed the session the branch tracks"),
    "fetch": FETCH,
})
schema("clone-state", ["opal clone-state URL --json"], "The remote added and the branch set up.", {
    "remote": STR, "added": BOOL, "branch": STR, "status": STR, "branches": mapping(OID),
})

schema("server", ["opal server status --json", "opal server start --json"], "Whether a command server runs.", {
    "running": BOOL,
    "socket": STR,
    "mode": {"enum": ["off", "use", "auto"]},
    "pid": INT,
    "started": TIME,
    "idle": d({"type": "number"}, "seconds without a command before it stops"),
    "served": INT,
    "answering": BOOL,
    "state": STR,
}, optional=("pid", "started", "idle", "served", "answering", "state"))

schema("gc", ["opal gc --json"], "The operations expired and the object database before and after git gc.", {
    "expire": d(STR, "the age as given"),
    "expired_before": d(null(TIME), "the cutoff; null: never"),
    "prune": STR,
    "operations_expired": INT,
    "operations_kept": INT,
    "purge": d(null(OID), "the purge (or its redo) that made gc expire everything up to it"),
    "op": d(null(OID), "the gc operation; null when nothing was expired"),
    "objects_before": OBJECTS,
    "objects_after": d(null(OBJECTS), "null with --dry-run"),
    "dry_run": BOOL,
})


# ----------------------------------------------------------------------------- validation

_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z")
_TYPES = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
}


def _is(value: Any, t: str) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[t])


def validate(value: Any, sch: dict, path: str = "$") -> list[str]:
    """Every way ``value`` breaks ``sch`` (the JSON Schema keywords used above:
    type, const, enum, anyOf, properties, required, additionalProperties, items,
    pattern, minimum, format date-time); an empty list when it follows it."""
    errors: list[str] = []
    if "anyOf" in sch:
        if all(validate(value, s, path) for s in sch["anyOf"]):
            errors.append(f"{path}: matches none of the allowed forms")
        return errors
    t = sch.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        if not any(_is(value, x) for x in types):
            return [f"{path}: {type(value).__name__} {str(value)[:40]!r} is not {' or '.join(types)}"]
    if "const" in sch and value != sch["const"]:
        errors.append(f"{path}: {value!r} is not {sch['const']!r}")
    if "enum" in sch and value not in sch["enum"]:
        errors.append(f"{path}: {value!r} is not one of {sch['enum']}")
    if isinstance(value, str):
        if "pattern" in sch and not re.search(sch["pattern"], value):
            errors.append(f"{path}: {value[:40]!r} does not match {sch['pattern']}")
        if sch.get("format") == "date-time" and not _DATE_TIME.fullmatch(value):
            errors.append(f"{path}: {value[:40]!r} is not an ISO 8601 UTC time (2026-12-01T23:45:07Z)")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and "minimum" in sch and value < sch["minimum"]:
        errors.append(f"{path}: {value} is below {sch['minimum']}")
    if isinstance(value, dict):
        props = sch.get("properties", {})
        for k in sch.get("required", []):
            if k not in value:
                errors.append(f"{path}: {k!r} is missing")
        extra = sch.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                errors += validate(v, props[k], f"{path}.{k}")
            elif extra is False:
                errors.append(f"{path}: {k!r} is not documented")
            elif isinstance(extra, dict):
                errors += validate(v, extra, f"{path}[{k!r}]")
    if isinstance(value, list) and "items" in sch:
        for i, v in enumerate(value):
            errors += validate(v, sch["items"], f"{path}[{i}]")
    return errors


# ----------------------------------------------------------------------------- docs/json.md

_INTRO = """\
# JSON output

Every command that takes `--json` prints one JSON object, and scripts can rely on
what this page says about it. It is generated from `opalgit/cli/jsonout.py`
(`python -m opalgit.cli.jsonout > docs/json.md`), which `tests/cli/test_json_schema.py`
also uses to check the output of every command run on a real session; neither can
drift from the other.

- **`version`** is the first key of every output: the schema version, an integer
  (now {version}). It goes up when a field is removed or changes meaning; a new
  field does not change it.
- **Times** are strings in ISO 8601, in UTC, ending in `Z`: `2026-12-01T23:45:07Z`,
  or `2026-12-01T23:45:07.071Z` where the source has milliseconds (turn times, the
  operation log). `null` where a time is not known. No output has another unit of
  time (the durations of `opal server`, `idle`, are seconds).
- **Ids** are full 40-hex git object ids (commits, operations); a turn's id is its
  64-hex content id.
- Maps written by an agent (a turn's `source`, its `blocks`, a session) may hold
  more keys than listed.
- Lists are wrapped in an object (`{{"version": 1, "commits": [...]}}`), never printed bare.

The schemas are JSON Schema (the keywords `type`, `properties`, `required`,
`additionalProperties`, `items`, `enum`, `const`, `anyOf`, `pattern`, `minimum` and
`format: date-time`); `opalgit.cli.jsonout.SCHEMAS` holds them as data and
`opalgit.cli.jsonout.validate(value, schema)` checks a value against one.

"""


def _type_of(s: dict) -> str:
    if "const" in s:
        return f"`{s['const']!r}`"
    if "enum" in s:
        return " \\| ".join(f"`{e}`" for e in s["enum"])
    if "anyOf" in s:
        return " or ".join(_type_of(x) for x in s["anyOf"])
    t = s.get("type")
    types = t if isinstance(t, list) else [t] if t else ["any"]
    words = []
    for x in types:
        if x == "string" and s.get("format") == "date-time":
            words.append("time")
        elif x == "string" and s.get("pattern") == OID["pattern"]:
            words.append("id")
        elif x == "string" and s.get("pattern") == TURN_ID["pattern"]:
            words.append("turn id")
        elif x == "array":
            words.append(f"list of {_type_of(s.get('items', {}))}")
        elif x == "object" and "properties" not in s and isinstance(s.get("additionalProperties"), dict):
            words.append(f"map of {_type_of(s['additionalProperties'])}")
        else:
            words.append(x)
    return " or ".join(words)


def _rows(props: dict, required: list, prefix: str = "") -> list[str]:
    rows = []
    for k, s in props.items():
        name = prefix + k
        note = s.get("description", "")
        if k not in required:
            note = ("optional; " + note) if note else "optional"
        rows.append(f"| `{name}` | {_type_of(s)} | {note} |")
        inner = s
        if inner.get("type") == "array" or (isinstance(inner.get("type"), list) and "array" in inner["type"]):
            inner = inner.get("items", {})
            name += "[]"
        if "properties" in inner:
            rows += _rows(inner["properties"], inner.get("required", []), name + ".")
        elif isinstance(inner.get("additionalProperties"), dict) and "properties" in inner["additionalProperties"]:
            sub = inner["additionalProperties"]
            rows += _rows(sub["properties"], sub.get("required", []), name + ".*.")
    return rows


def render_doc() -> str:
    out = [_INTRO.format(version=VERSION), "## Outputs\n"]
    out += [f"- [`{name}`](#{name}): {', '.join(f'`{c}`' if c.startswith('opal') else c for c in cmds)}"
            for name, (cmds, _t, _s) in SCHEMAS.items()]
    out.append("")
    for name, (cmds, text, sch) in SCHEMAS.items():
        out.append(f"## {name}\n")
        out.append(", ".join(f"`{c}`" if c.startswith("opal") else c for c in cmds) + f": {text}\n")
        out.append("| field | type | |")
        out.append("|---|---|---|")
        out += _rows(sch["properties"], sch["required"])
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":  # pragma: no cover - the docs generator
    import sys

    sys.stdout.write(render_doc())

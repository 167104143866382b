"""``opal blame FILE``: for each line, the recorded agent turn whose tool call last wrote it,
or the code commit where a person changed it (and ``opal resume --at-line``: that turn).

Porcelain layer. Two sources, one rule (:mod:`opalgit.history.attribution`):

* the file's versions, from git: ``git log --first-parent -m --follow`` names the code
  commits that changed it (renames followed) and the file's path in each; the blobs are
  read from the object database;
* the changes recorded tool calls made to it: every state commit opal holds (the ones
  the hooks linked to code commits, the branches' and the remotes', and their
  ancestors) is read once per leaf of its turn sequence, and each edit, write or patch
  call whose path is the file (under any of its names) becomes a
  :class:`~opalgit.history.attribution.Change` owned by that turn (the first state that
  holds the turn names it). Calls whose result was an error wrote nothing and are left
  out.

See docs/blame.md.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Iterator

from opalgit import agents as adapters
from opalgit.agents.tools import parse_call, parse_patch
from opalgit.errors import InputError, OpalError, RevisionError, UsageError
from opalgit.history import sequence
from opalgit.history.attribution import Change, Line, Owner, Version, attribute
from opalgit.history.model import Normal, SessionInfo
from opalgit.history.states import load_state, turn_of
from opalgit.plural import count
from opalgit.porcelain.states import normals_of, replays
from opalgit.store import gitcmd
from opalgit.store.refs import NAMESPACE, OPLOG_REF
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field

#: Shell commands that may write a file they name, and that opal cannot replay.
_WRITERS = re.compile(r">|\btee\b|\bsed\s+-i|\bperl\s+-\w*i|\bmv\b|\bcp\b|\brm\b|\btruncate\b|\bpatch\b|"
                      r"\bgit\s+(checkout|restore|apply|stash|reset)\b|\bpython3?\b|\bnode\b|\bawk\b|\bdd\b")
#: ``cat > FILE <<'EOF' ... EOF``: the one shell write that is unambiguous.
_HEREDOC = re.compile(r"\A\s*cat\s*>\s*(?P<path>[^\s<>|;&]+)\s*<<-?\s*(?P<q>['\"]?)(?P<tag>\w+)(?P=q)[ \t]*\n"
                      r"(?P<body>.*?)\n?(?P=tag)\s*\Z", re.S)
PROMPT_CHARS = 2000
#: The tools of the built-in agents that can change a file (shells included): a record
#: whose summary names none of them is not read. Other agents' records are all read.
WRITERS = {
    "claude": {"Write", "Edit", "MultiEdit", "Bash"},
    "codex": {"apply_patch", "exec_command", "shell", "container.exec", "local_shell"},
    "gemini": {"write_file", "replace", "run_shell_command"},
}


@dataclass
class BlameResult:
    path: str  # relative to the repository's top folder
    rev: str | None  # the code revision asked for; None: the working tree
    commit: bytes | None  # the code commit blamed; None: the working tree
    lines: list[Line]
    total: int  # lines in the whole file (``lines`` may be a -L range of them)
    changes: int  # recorded tool calls that changed the file
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "revision": self.rev,
            "code_commit": self.commit.hex() if self.commit else None,
            "lines_in_file": self.total,
            "recorded_changes": self.changes,
            "lines": [line_json(ln) for ln in self.lines],
            "notes": self.notes,
        }


def owner_json(o: Owner) -> dict:
    from opalgit.times import iso_ms

    out: dict = {"kind": o.kind}
    if o.kind == "agent":
        out.update(agent=o.agent, session=o.session, state=o.state.hex() if o.state else None, turn=o.turn,
                   revision=f"{o.state.hex()}:{o.turn}" if o.state and o.turn else None,
                   prompt=o.prompt, tool=o.tool, model=o.model, time=iso_ms(o.time))
    else:
        out.update(commit=o.commit.hex() if o.commit else None, author=o.author,
                   time=iso_ms(o.time) if o.time is not None else None)
        if o.kind == "unattributed":
            out["reason"] = o.reason
    return out


def line_json(ln: Line) -> dict:
    return {"line": ln.number, "text": ln.text, "code_commit": ln.commit.hex() if ln.commit else None,
            "owner": owner_json(ln.owner)}


# ------------------------------------------------------------------ the file in git


def _relpath(repo: Repository, path: str, cwd: str) -> str:
    if repo.own or not repo.workdir:
        raise UsageError("opal blame needs a git repository with a working tree",
                         hint="run it inside your project's git checkout")
    full = os.path.normpath(os.path.join(cwd, path))
    top = os.path.realpath(repo.workdir)
    real = os.path.realpath(full) if os.path.exists(full) else os.path.join(os.path.realpath(os.path.dirname(full)),
                                                                            os.path.basename(full))
    rel = os.path.relpath(real, top)
    if rel.startswith("..") or os.path.isabs(rel):
        raise UsageError(f"{path} is outside the repository at {repo.workdir}")
    return rel.replace(os.sep, "/")


def git_output(repo: Repository, args: list[str]) -> str:
    try:
        proc = gitcmd.run(repo.git_dir, args, cwd=repo.workdir)
    except gitcmd.GitMissing as exc:
        raise OpalError(str(exc), hint="install git: opal blame follows the file through git's history") from None
    if proc.returncode != 0:
        raise OpalError(f"git {args[0]} failed: {proc.stderr.strip().splitlines()[-1:] or ['?']}"[:400])
    return proc.stdout


def file_commits(repo: Repository, rel: str, commit: bytes) -> list[tuple[bytes, int, str, str]]:
    """The code commits that changed the file up to ``commit``, oldest first:
    ``(sha, committer time, author, the file's path in it)``. Merges along the first parent."""
    out = git_output(repo, ["-c", "core.quotepath=off", "log", "--first-parent", "-m", "--follow", "--name-only",
                      "--format=%x01%H %ct %an <%ae>", commit.hex(), "--", rel])
    found: list[tuple[bytes, int, str, str]] = []
    for chunk in out.split("\x01")[1:]:
        head, _, names = chunk.partition("\n")
        sha, ct, author = head.split(" ", 2)
        paths = [p for p in names.splitlines() if p.strip()]
        if paths and paths[0].startswith('"'):
            raise InputError(f"{rel}: git quoted the path {paths[0]} (a control character in a file name), "
                             "which opal blame does not follow", hint="rename the file")
        found.append((bytes.fromhex(sha), int(ct), author, paths[0] if paths else rel))
    found.reverse()
    return found


def blob_at(repo: Repository, commit: bytes, rel: str) -> str | None:
    """The file's text in a code commit, or None when it is not there."""
    tree = repo.store.read_commit(commit).tree
    parts = rel.split("/")
    for k, part in enumerate(parts):
        entry = next((e for e in repo.store.read_tree(tree) if e[0] == part), None)
        if entry is None or entry[1] != (k < len(parts) - 1):
            return None
        tree = entry[2]
    return repo.store.read_blob(tree).decode("utf-8", errors="replace")


def code_rev(repo: Repository, rev: str) -> bytes:
    from opalgit.sync.links import code_commit

    if rev.startswith("-"):
        raise UsageError(f"{rev!r} is not a code revision", hint="give a git revision: HEAD~2, a tag, a commit id")
    return code_commit(repo, rev).oid


# ------------------------------------------------------------------ recorded changes


@dataclass
class Recorded:
    """Every recorded file change, by repository-relative path, and when opal first saw a session."""

    by_path: dict[str, list[Change]]
    earliest: int | None  # ms: the first recorded turn's time
    unreadable: int = 0  # records that could not be decoded (opal fsck says why): left out, and said


def _state_roots(repo: Repository) -> list[bytes]:
    return sorted({oid for name, oid in repo.refs.all().items() if name.startswith(NAMESPACE) and name != OPLOG_REF})


def _all_states(repo: Repository) -> list[bytes]:
    """Every state commit the refs reach, parents before children where they are related."""
    seen: set[bytes] = set()
    order: list[bytes] = []
    stack = [(oid, False) for oid in _state_roots(repo)]
    while stack:
        oid, done = stack.pop()
        if done:
            order.append(oid)
            continue
        if oid in seen:
            continue
        seen.add(oid)
        try:
            parents = repo.store.read_commit(oid).parents
        except OpalError:
            continue
        stack.append((oid, True))
        stack.extend((p, False) for p in parents if p not in seen)
    return order


def recorded_changes(repo: Repository) -> Recorded:
    """Read every state once per leaf and collect the file changes of its tool calls."""
    rec = Recorded({}, None)
    seen_leaves: dict[bytes, str | None] = {}
    failed: set[tuple[str, str]] = set()
    calls: set[tuple[str, str]] = set()  # (session, call id) of the calls that changed a file
    done: dict[tuple[str, bytes], str | None] = {}
    unreadable: list[bytes] = []
    raw: list[tuple[str, Change, str, str | None]] = []  # (path, change, session id, call id)
    for oid in _all_states(repo):
        try:
            st = load_state(repo, oid)
        except OpalError:
            continue  # not a state (a link to something else): fsck's business
        if st.root is None or st.header.session is None:
            continue
        for t in _state_turns(repo, st, seen_leaves, calls, done, unreadable):
            _collect(repo, rec, raw, failed, t, calls)
    rec.unreadable = len(set(unreadable))
    for rel, change, sid, call in raw:
        if call is None or (sid, call) not in failed:
            rec.by_path.setdefault(rel, []).append(change)
    return rec


@dataclass
class _Turn:
    state: bytes
    number: int  # 1-based turn number in that state
    normal: Normal
    session: SessionInfo
    time: int  # ms
    prompt: str | None


def _wanted(item, session: SessionInfo, calls: set) -> bool:
    """Whether a tool record may matter: a call of a tool that writes files, or the result of one."""
    writers = WRITERS.get(session.agent)
    if writers is None:
        return True
    s = item.summary
    if s.get("kind") == "tool_call":
        return bool(writers.intersection(str(s.get("tool") or "").split(",")))
    return any((session.id, r) in calls for r in s.get("results") or ())


def _state_turns(repo: Repository, st, seen: dict[bytes, str | None], calls: set,
                 done: dict[tuple[str, bytes], str | None], unreadable: list) -> Iterator[_Turn]:
    """The turns of a state in leaves not read before, with the prompt each follows
    (``done``: the records already read, and the prompt a user's record set)."""
    leaves = sequence.leaves(repo.store, st.root)
    fresh = [lf for lf in leaves if lf.oid not in seen]
    if not fresh:
        return
    session: SessionInfo = st.header.session
    whole = replays(session.agent)
    items = [(lf, list(sequence.read_leaf(repo.store, lf.oid)) if whole or lf.oid not in seen else None)
             for lf in leaves]
    normals = None
    if whole:
        turns = [turn_of(repo, it) for _, its in items for it in its or ()]
        normals = iter(normals_of(turns))
    number = 0
    prompt: str | None = None
    fallback = st.commit.committer.time * 1000
    for lf, its in items:
        if its is None or (lf.oid in seen and not whole):
            number += lf.turns
            prompt = seen[lf.oid] or prompt
            continue
        fresh_leaf = lf.oid not in seen
        for it in its:
            normal = next(normals) if normals is not None else None
            if it.is_turn:
                number += 1
            if not fresh_leaf:
                continue
            key = (session.id, it.id)
            if key in done:  # a record of a leaf read before, in the leaf the next commit reopened
                prompt = done[key] or prompt
                continue
            role, kind = it.summary.get("role"), it.summary.get("kind")
            if role == "user" and kind == "message" or kind in ("tool_call", "tool_result") and _wanted(it, session, calls):
                if normal is None:
                    try:
                        normal = _normal(repo, it, session.agent)
                    except (OpalError, ValueError, KeyError, TypeError):
                        unreadable.append(it.id)
                        continue
                if role == "user" and kind == "message":
                    prompt = _text(normal) or prompt
                    done[key] = prompt
                    continue
                done[key] = None
                yield _Turn(st.oid, number, normal, session, int(it.summary.get("time") or fallback), prompt)
        if fresh_leaf:
            seen[lf.oid] = prompt


def _normal(repo: Repository, item, agent: str) -> Normal:
    turn = turn_of(repo, item)
    if turn.agent == "opal":
        return Normal(role=turn.role or "meta", blocks=list(turn.blocks or ()))
    return adapters.get(turn.agent).normalize(turn)


def _text(normal: Normal) -> str | None:
    text = "\n".join(str(b.get("text") or "") for b in normal.blocks if b.get("type") == "text").strip()
    return text[:PROMPT_CHARS] or None


def _collect(repo: Repository, rec: Recorded, raw: list, failed: set, t: _Turn, calls: set) -> None:
    """The file changes of one turn's tool calls (and which calls failed)."""
    if rec.earliest is None or t.time < rec.earliest:
        rec.earliest = t.time
    sid = t.session.id
    for b in t.normal.blocks:
        if b.get("type") == "tool_result" and b.get("is_error") and b.get("call_id") is not None:
            failed.add((sid, str(b["call_id"])))
        if b.get("type") != "tool_call":
            continue
        name = str(b.get("name") or "")
        owner = Owner("agent", agent=t.session.agent, session=sid, state=t.state, turn=t.number, prompt=t.prompt,
                      time=t.time, tool=name, model=t.session.model)
        call = str(b["id"]) if b.get("id") is not None else None
        owner = replace(owner, call=call)
        for rel, change in _changes(repo, t, name, b.get("input"), owner):
            raw.append((rel, change, sid, call))
            if call is not None:
                calls.add((sid, call))


def _rel(repo: Repository, path: str, cwd: str | None) -> str | None:
    """A tool's path as relative to the repository's top folder, or None when it is elsewhere."""
    if not path:
        return None
    top = repo.workdir or ""
    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd or top, path))
    for base in (top, cwd):
        if base and (full == base or full.startswith(base.rstrip("/") + "/")):
            rel = os.path.relpath(full, base)
            # A session recorded in another checkout of the project (a teammate's): its
            # folder stands for the top folder only when it is not inside this one.
            if base == top or not (cwd or "").startswith(top.rstrip("/") + "/"):
                return rel.replace(os.sep, "/")
    return None


def _changes(repo: Repository, t: _Turn, name: str, args, owner: Owner) -> list[tuple[str, Change]]:
    if t.session.agent == "claude" and name == "MultiEdit" and isinstance(args, dict):
        # Its edits, in order, on one file (the shared actions have no counterpart).
        rel = _rel(repo, str(args.get("file_path") or ""), t.session.cwd)
        edits = args.get("edits") if isinstance(args.get("edits"), list) else []
        return [(rel, Change("edit", t.time, owner, old=str(e.get("old_string") or ""),
                             new=str(e.get("new_string") or ""), all=bool(e.get("replace_all"))))
                for e in edits if isinstance(e, dict)] if rel else []
    action = parse_call(t.session.agent, name, args)
    if action is None:
        return []
    a, cwd, when = action.args, t.session.cwd, t.time
    if action.kind in ("write", "edit"):
        rel = _rel(repo, str(a.get("path") or ""), cwd)
        if rel is None:
            return []
        if action.kind == "write":
            return [(rel, Change("write", when, owner, content=str(a.get("content") or "")))]
        return [(rel, Change("edit", when, owner, old=str(a.get("old") or ""), new=str(a.get("new") or ""),
                             all=bool(a.get("all"))))]
    if action.kind == "patch":
        return _patch_changes(repo, str(a.get("text") or ""), cwd, when, owner)
    if action.kind == "shell":
        return _shell_changes(repo, str(a.get("command") or ""), a.get("workdir") or cwd, when, owner)
    return []


def _patch_changes(repo: Repository, text: str, cwd: str | None, when: int, owner: Owner) -> list[tuple[str, Change]]:
    ops = parse_patch(text)
    if ops is None:
        # A patch opal cannot read (a move, say): every file it names may have changed.
        names = re.findall(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", text, re.M)
        out = []
        for pair in names:
            rel = _rel(repo, (pair[0] or pair[1]).strip(), cwd)
            if rel is not None:
                out.append((rel, Change("opaque", when, owner, why="a patch opal cannot replay (a move)")))
        return out
    out = []
    for op in ops:
        rel = _rel(repo, op["path"], cwd)
        if rel is None:
            continue
        if op["op"] == "add":
            out.append((rel, Change("write", when, owner, content=op["content"])))
        elif op["op"] == "delete":
            out.append((rel, Change("delete", when, owner)))
        else:
            out.append((rel, Change("hunks", when, owner, hunks=tuple(op["hunks"]))))
    return out


def _shell_changes(repo: Repository, command: str, cwd: str | None, when: int, owner: Owner) -> list[tuple[str, Change]]:
    m = _HEREDOC.match(command)
    if m is not None:
        rel = _rel(repo, m.group("path").strip("'\""), cwd)
        body = m.group("body")
        return [(rel, Change("write", when, owner, content=body + "\n" if body else ""))] if rel else []
    if not _WRITERS.search(command):
        return []
    # Any file the command names may have been written: its lines are not the person's.
    out = []
    for word in set(re.findall(r"[\w./-]+", command)):
        if "/" in word or "." in word:
            rel = _rel(repo, word, cwd)
            if rel is not None:
                out.append((rel, Change("opaque", when, owner, why=f"a shell command that may have written it "
                                                                    f"({command[:60]!r})")))
    return out


# ------------------------------------------------------------------ blame


def blame(repo: Repository, path: str, cwd: str, rev: str | None = None, *, lines: tuple[int, int] | None = None,
          recorded: Recorded | None = None) -> BlameResult:
    """Who last wrote each line of ``path``: in the working tree, or at code revision ``rev``."""
    rel = _relpath(repo, path, cwd)
    commit = code_rev(repo, rev) if rev is not None else _head(repo)
    history = file_commits(repo, rel, commit) if commit is not None else []
    worktree = None
    if rev is None:
        full = os.path.join(repo.workdir or "", rel)
        if os.path.isfile(full):
            with open(full, "rb") as fh:
                worktree = fh.read().decode("utf-8", errors="replace")
        elif not history or blob_at(repo, commit, rel) is None:  # type: ignore[arg-type]
            raise UsageError(f"{path}: no such file in the working tree", hint="give a file git knows, "
                             "or a code revision: 'opal blame FILE HEAD~2'")
    if rev is not None and (not history or blob_at(repo, commit, history[-1][3]) is None):  # type: ignore[arg-type]
        raise RevisionError(f"{rel} is not in code commit {commit.hex()[:7]}")  # type: ignore[union-attr]
    recorded = recorded if recorded is not None else recorded_changes(repo)
    names = {rel, *(h[3] for h in history)}
    changes = [c for n in names for c in recorded.by_path.get(n, ())]
    since = (recorded.earliest // 1000) if recorded.earliest is not None else None
    versions = [Version(sha, ct, author, blob_at(repo, sha, p), covered=since is not None and ct >= since)
                for sha, ct, author, p in history]
    if rev is None and worktree is not None:
        versions.append(Version(None, 0, "", worktree, covered=True))
    result = attribute(versions, changes)
    total = len(result)
    if lines is not None:
        start, end = lines
        if start < 1 or end < start or start > max(total, 1):
            raise UsageError(f"-L {start},{end}: the file has {total} lines", hint="give -L START,END within it")
        result = result[start - 1:end]
    notes = [] if recorded.earliest is not None else \
        ["no agent session is recorded in this repository: run 'opal hooks install' (or 'opal commit') first"]
    if recorded.unreadable:
        notes.append(f"{count(recorded.unreadable, 'stored record')} could not be read and "
                     f"{'were' if recorded.unreadable != 1 else 'was'} left out; 'opal fsck' says why")
    return BlameResult(rel, rev, commit if rev is not None else None, result, total, len(changes), notes)


def _head(repo: Repository) -> bytes | None:
    from opalgit.sync.links import head_commit

    head = head_commit(repo)
    return head.oid if head is not None else None


def at_line(repo: Repository, spec: str, cwd: str, rev: str | None = None) -> tuple[str, Line]:
    """``FILE:LINE`` to the revision of the turn that last wrote it (``STATE:TURN``)."""
    path, sep, number = spec.rpartition(":")
    if not sep or not number.isdigit() or not path:
        raise UsageError(f"--at-line {spec!r}: expected FILE:LINE", hint="e.g. --at-line src/app.py:42")
    n = int(number)
    res = blame(repo, path, cwd, rev, lines=(n, n))
    line = res.lines[0]
    o = line.owner
    if o.kind != "agent" or o.state is None or o.turn is None:
        what = {"human": f"a person changed it in code commit {(o.commit or b'').hex()[:7]}",
                "uncommitted": "it is an uncommitted change no recorded tool call made",
                }.get(o.kind, f"it is unattributed ({o.reason})")
        raise RevisionError(f"line {n} of {res.path} was not written by a recorded agent turn: {what}",
                            hint=f"see 'opal blame {res.path} -L {n},{n}'")
    return f"{o.state.hex()}:{_result_turn(repo, o)}", line


def _result_turn(repo: Repository, o: Owner) -> int:
    """The turn that holds the result of the owner's call (right after it, as a rule), else the call's:
    the context "right after the turn" includes what the tool answered."""
    from opalgit.history.states import turn_item_index

    assert o.state is not None and o.turn is not None
    if o.call is None:
        return o.turn
    st = load_state(repo, o.state)
    start = turn_item_index(repo, st, o.turn)
    number = o.turn
    for si in sequence.iter_items(repo.store, st.root, start, start + 64):
        if si.index > start and si.item.is_turn:
            number += 1
        if o.call in (si.item.summary.get("results") or ()):
            return number
    return o.turn

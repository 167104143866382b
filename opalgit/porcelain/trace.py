"""``opal trace export``: opal's line attribution as Agent Trace records (the open
``agent-trace`` format, v0.1; https://github.com/cursor/agent-trace, schemas.ts).

One record per code commit: for each file the commit changed, the lines that came in
with that commit (``opal blame`` at the commit, :mod:`opalgit.porcelain.blame`),
grouped into one conversation per agent turn (contributor ``ai``), one for the lines
a person wrote (``human``) and one for the lines opal cannot attribute
(``unknown``). Which fields opal fills and how is in docs/blame.md.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Iterator

from opalgit import __version__
from opalgit.errors import UsageError
from opalgit.history.attribution import Line
from opalgit.porcelain.blame import Recorded, blame, code_rev, git_output, recorded_changes
from opalgit.store.repo import Repository
from opalgit.times import iso_seconds

SPEC_VERSION = "0.1"
#: Agent Trace asks for models.dev ids (``provider/model``); the provider of each agent's models.
PROVIDERS = {"claude": "anthropic", "codex": "openai", "gemini": "google"}
_NS = uuid.UUID("6f70616c-7472-6163-6500-000000000001")  # opal's namespace for record ids


def commits_of(repo: Repository, spec: str) -> list[bytes]:
    """The code commits of ``spec`` (``REV``, ``A..B``), oldest first; one revision: that commit alone."""
    if "..." in spec:
        raise UsageError(f"{spec!r}: give REV or A..B", hint="e.g. opal trace export HEAD~5..HEAD")
    if ".." in spec:
        left, _, right = spec.partition("..")
        a, b = code_rev(repo, left or "HEAD"), code_rev(repo, right or "HEAD")
        out = git_output(repo, ["rev-list", "--reverse", "--first-parent", b.hex(), "--not", a.hex()])
        return [bytes.fromhex(x) for x in out.split()]
    return [code_rev(repo, spec)]


def _changed_files(repo: Repository, commit: bytes) -> list[str]:
    out = git_output(repo, ["-c", "core.quotepath=off", "diff-tree", "--root", "--no-commit-id", "--name-only", "-r", "-m",
                      "--first-parent", "--diff-filter=AMRTC", commit.hex()])
    return [p for p in dict.fromkeys(out.splitlines()) if p and not p.startswith('"')]


def model_id(agent: str | None, model: str | None) -> str | None:
    if not model:
        return None
    if "/" in model or agent not in PROVIDERS:
        return model[:250]
    return f"{PROVIDERS[agent]}/{model}"[:250]


def _ranges(lines: list[Line]) -> list[dict]:
    out: list[dict] = []
    run: list[Line] = []
    for ln in lines + [None]:  # type: ignore[list-item]
        if ln is not None and run and ln.number == run[-1].number + 1:
            run.append(ln)
            continue
        if run:
            text = "\n".join(x.text for x in run)
            out.append({"start_line": run[0].number, "end_line": run[-1].number,
                        "content_hash": "sha256:" + hashlib.sha256(text.encode()).hexdigest()})
        run = [ln] if ln is not None else []
    return out


def _conversations(lines: list[Line]) -> list[dict]:
    groups: dict[tuple, list[Line]] = {}
    for ln in lines:
        o = ln.owner
        key = ("ai", o.state, o.turn) if o.kind == "agent" else (o.kind, None, None)
        groups.setdefault(key, []).append(ln)
    out = []
    for (kind, state, turn), group in groups.items():
        o = group[0].owner
        if kind == "ai":
            conv = {"url": f"opal://state/{state.hex()}/turn/{turn}",
                    "contributor": {"type": "ai", **({"model_id": m} if (m := model_id(o.agent, o.model)) else {})},
                    "ranges": _ranges(group),
                    "related": [{"type": "session", "url": f"opal://session/{o.agent}/{o.session}"}]}
        else:
            conv = {"contributor": {"type": "human" if kind == "human" else "unknown"}, "ranges": _ranges(group)}
        out.append(conv)
    return out


def _metadata(lines_by_file: dict[str, list[Line]]) -> dict:
    turns = {}
    reasons = set()
    for lines in lines_by_file.values():
        for ln in lines:
            o = ln.owner
            if o.kind == "agent":
                turns[f"{o.state.hex()}:{o.turn}"] = {"agent": o.agent, "session": o.session, "tool": o.tool,
                                                       "prompt": o.prompt}
            elif o.kind == "unattributed" and o.reason:
                reasons.add(o.reason)
    return {"opal": {"turns": turns, "unattributed": sorted(reasons)}}


def record(repo: Repository, commit: bytes, recorded: Recorded) -> dict:
    """The Agent Trace record of one code commit."""
    files = []
    by_file: dict[str, list[Line]] = {}
    for rel in _changed_files(repo, commit):
        res = blame(repo, rel, repo.workdir or ".", commit.hex(), recorded=recorded)
        mine = [ln for ln in res.lines if ln.commit == commit]
        if mine:
            by_file[rel] = mine
            files.append({"path": rel, "conversations": _conversations(mine)})
    c = repo.store.read_commit(commit)
    return {
        "version": SPEC_VERSION,
        "id": str(uuid.uuid5(_NS, commit.hex())),
        "timestamp": iso_seconds(c.committer.time),
        "vcs": {"type": "git", "revision": commit.hex()},
        "tool": {"name": "opal", "version": __version__},
        "files": files,
        "metadata": _metadata(by_file),
    }


def trace_export(repo: Repository, spec: str = "HEAD") -> Iterator[dict]:
    """Agent Trace records for the code commits of ``spec``, oldest first."""
    commits = commits_of(repo, spec)
    recorded = recorded_changes(repo)
    for commit in commits:
        yield record(repo, commit, recorded)

"""``opal handoff``: the same commit, the same exported session and the same loss report as
``opal init`` + ``opal commit`` + ``opal export``, on real session files and the bench's
own; and the export of a state from the records its commit kept (the handoff's
shortcut) byte for byte the export read back from the store."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil

import pytest

from opalgit import porcelain
from opalgit.history.states import branch_head, load_state
from opalgit.porcelain import export as exporting
from opalgit.porcelain import handoff as handoffs
from opalgit.store.repo import Repository
from tests.conftest import FIXTURES, git, opal
from tests.unit.test_porcelain import grow, place

committing = importlib.import_module("opalgit.porcelain.commit")  # (porcelain.commit is the function)

REAL = [
    os.path.join(FIXTURES, "claude", "claude-code-viewer", "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"),
    os.path.join(FIXTURES, "claude", "claude-code-viewer", "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"),
    os.path.join(FIXTURES, "claude", "real", "claude-code-log", "dag_compact_after_rewind.jsonl"),
    os.path.join(FIXTURES, "claude", "real", "vibecodingtracker", "claude_code.jsonl"),
    os.path.join(FIXTURES, "claude", "agent-sessions", "large.jsonl"),
]
SECRETS = json.load(open(os.path.join(FIXTURES, "secrets", "corpus.json")))["secrets"]
NOW = 1_796_000_000.0  # the export's clock, fixed so that two exports can be compared byte for byte


def with_secrets(source: str, folder) -> str:
    """``source`` with fake credentials pasted into two user prompts: one short, one
    long enough to be stored as a payload (a placeholder in each kind of stored bytes)."""
    lines = open(source, "rb").read().splitlines(keepends=True)
    out, pasted = [], 0
    for raw in lines:
        rec = json.loads(raw)
        msg = rec.get("message") if isinstance(rec, dict) else None
        if pasted < 2 and rec.get("type") == "user" and isinstance(msg, dict) and isinstance(msg.get("content"), str):
            ctx = SECRETS[pasted]["context"]
            msg["content"] += "\n" + (ctx if pasted == 0 else ctx + "x" * 3000)
            raw = (json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
            pasted += 1
        out.append(raw)
    assert pasted == 2
    path = os.path.join(str(folder), os.path.basename(source))
    with open(path, "wb") as fh:
        fh.writelines(out)
    return path


def bench_session(folder, cwd: str) -> str:
    from bench import generate as gen

    path = os.path.join(str(folder), gen.default_name("claude", gen.session_id_for("claude", 5)))
    gen.generate("claude", path, size=2 << 20, seed=5, cwd=cwd)
    return path


def state_facts(repo: Repository) -> dict:
    """What a commit stored, but for its time and the session file's path: the
    records' sequence and the payload packs (every object under them), the side
    files, the header's counts and session."""
    st = load_state(repo, branch_head(repo, "main"))

    def objects(oid: bytes | None) -> list[str]:
        if oid is None:
            return []
        return sorted(git("rev-list", "--objects", "--no-object-names", oid.hex(), cwd=repo.git_dir).stdout.split())

    h = st.header
    return {"root": objects(st.root.oid if st.root else None), "packs": objects(st.packs), "side": objects(st.side),
            "header": (h.items, h.turns, h.chars, h.new_items, h.session.to_map() if h.session else None, h.extra)}


def exported(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


@pytest.fixture
def fixed_clock(monkeypatch):
    monkeypatch.setattr(exporting.time, "time", lambda: NOW)


def _project(tmp_path, name: str):
    p = tmp_path / name
    p.mkdir()
    git("init", "-q", str(p))
    return p


@pytest.mark.parametrize("source", REAL + ["secrets", "bench"], ids=lambda s: os.path.basename(s))
@pytest.mark.parametrize("to", ["codex", "gemini", "claude"])
def test_handoff_is_init_commit_export(tmp_path, home, fixed_clock, source, to):
    env = {"HOME": str(home)}
    one, three = _project(tmp_path, "one"), _project(tmp_path, "three")
    keyed = source in ("secrets", "bench")  # (the bench's sessions hold a few fake credentials too)
    if source == "secrets":
        source = with_secrets(REAL[0], tmp_path)
    elif source == "bench":
        source = bench_session(tmp_path, str(one))
    # The same file for both projects (its own folder's copy), exported with the same
    # id at the same time: what differs then is what each way did.
    outs, facts = [], []
    for project, how in ((one, "one"), (three, "three")):
        place(home, project, source=source)
        if how == "one":
            done, repo = handoffs.setup(str(project), to)
            res = handoffs.handoff(repo, done, env, str(project), to=to, export_cwd=str(tmp_path), session_id="s-1")
            assert done.created and res.commit is not None and res.nothing_new is None
            out = res.export
        else:
            porcelain.init(str(project))
            repo = Repository.discover(str(project))
            porcelain.commit(repo, env, str(project))
            out = exporting.export(repo, env, "HEAD", to=to, cwd=str(tmp_path), session_id="s-1")
        files = [exported(f) for f in out.files]
        for f in out.files + out.aux:
            shutil.move(f, f + f".{how}")  # the second export must not find the first's files
        outs.append((files, out.report.to_json(), out.turns))
        facts.append(state_facts(repo))
    assert outs[0] == outs[1]
    if keyed:
        # Each repository's vault has a random key, which its placeholders are made
        # with: the stored records differ by those, the exports (secrets put back) do not.
        facts = [f["header"] for f in facts]
    assert facts[0] == facts[1]


@pytest.mark.parametrize("source", REAL + ["secrets", "bench"], ids=lambda s: os.path.basename(s))
def test_an_export_from_the_kept_records_is_the_export_read_back(tmp_path, repo_env, fixed_clock, source):
    project, home, env, repo = repo_env
    if source == "secrets":
        source = with_secrets(REAL[0], tmp_path)
    elif source == "bench":
        source = bench_session(tmp_path, str(project))
    place(home, project, source=source)
    kept: list = []
    res = committing.commit(repo, env, str(project), keep=kept)
    st = load_state(repo, res.oid)
    assert len(kept) == st.header.items == res.items
    if "secrets" in str(source):
        assert any(k.placeholder for k in kept) and not all(k.placeholder for k in kept)
    for to in ("codex", "gemini", "claude"):
        a = exporting.export(repo, env, "HEAD", to=to, cwd=str(tmp_path), session_id="s-2", known=(res.oid, kept))
        first = [exported(f) for f in a.files]
        for f in a.files + a.aux:
            os.unlink(f)
        b = exporting.export(repo, env, "HEAD", to=to, cwd=str(tmp_path), session_id="s-2")
        assert [exported(f) for f in b.files] == first
        assert a.report.to_json() == b.report.to_json()
        for f in b.files + b.aux:
            os.unlink(f)
    if "secrets" in str(source):
        assert SECRETS[0]["secret"].encode() in first[0] and SECRETS[1]["secret"].encode() in first[0]


@pytest.fixture
def repo_env(project, home):
    porcelain.init(str(project))
    return project, home, {"HOME": str(home)}, Repository.discover(str(project))


def test_records_are_kept_only_for_a_whole_build_and_up_to_the_bound(repo_env, monkeypatch, fixed_clock, tmp_path):
    project, home, env, repo = repo_env
    path = place(home, project, source=REAL[1], lines=40)
    kept: list = []
    committing.commit(repo, env, str(project), keep=kept)
    assert kept
    grow(path, source=REAL[1], start=40)
    kept = []
    res = committing.commit(repo, env, str(project), keep=kept)
    assert res.incremental and kept == []  # the state holds records read before: nothing kept
    # Past the bound nothing is kept, and the handoff's export reads the state back.
    monkeypatch.setattr(committing, "KEEP_BYTES", 10_000)
    other = _project(tmp_path, "other")
    place(home, other, source=REAL[1])
    porcelain.init(str(other))
    r2 = Repository.discover(str(other))
    kept = []
    res = committing.commit(r2, env, str(other), keep=kept)
    assert res.items > 0 and kept == []
    third = _project(tmp_path, "third")
    place(home, third, source=REAL[1])
    done, r3 = handoffs.setup(str(third), "codex")
    out = handoffs.handoff(r3, done, env, str(third), to="codex", session_id="s-3", export_cwd=str(tmp_path)).export
    first = exported(out.files[0])
    os.unlink(out.files[0])
    b = exporting.export(r2, env, "HEAD", to="codex", session_id="s-3", cwd=str(tmp_path))
    assert exported(b.files[0]) == first


def test_the_handoff_workflow_through_the_cli(project, home):
    """Set up, record and export in one command; again with nothing new (the head is
    exported); after the agent added turns (only those are read, and exported from
    the state read back); an unknown target is one line with a hint."""
    path = place(home, project, source=REAL[0], lines=30)
    r = opal("handoff", "--to", "codex", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "Initialized opal" in r.stdout and "[main " in r.stdout and "codex resume" in r.stdout
    assert "Loss report:" in r.stdout
    r = opal("handoff", "--to", "codex", "--json", cwd=project)
    data = json.loads(r.stdout)
    assert data["initialized"] is False and data["commit"]["committed"] is False and data["export"]["files"]
    # The branch now tracks the Codex session the export wrote (its next commit records
    # how that grows); the Claude file, grown meanwhile, is named.
    grow(path, source=REAL[0], start=30)
    r = opal("handoff", "--to", "gemini", "--session", "5c0375b4", "--json", cwd=project)
    data = json.loads(r.stdout)
    assert data["commit"]["incremental"] and data["commit"]["new_records"] > 0, data
    assert data["export"]["agent"] == "gemini" and os.path.exists(data["export"]["files"][0])
    log = json.loads(opal("log", "--json", cwd=project).stdout)["commits"]
    assert len(log) == 2
    r = opal("handoff", "--to", "nosuchagent", cwd=project)
    assert r.returncode != 0 and "no adapter for agent" in r.stderr and "Traceback" not in r.stderr
    assert git("fsck", "--full", "--strict", cwd=str(project)).returncode == 0


def test_an_unknown_target_sets_nothing_up(tmp_path, home):
    p = _project(tmp_path, "p")
    place(home, p, source=REAL[0])
    r = opal("handoff", "--to", "nosuchagent", cwd=p)
    assert r.returncode != 0 and "known agents" in r.stderr
    assert not os.path.exists(p / ".git" / "opal" / "config")
    assert re.search(r"no adapter", r.stderr)

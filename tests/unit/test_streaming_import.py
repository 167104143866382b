"""Streaming import: a Claude Code session is read in two passes and committed record by record.

The first pass of :meth:`ClaudeAdapter.read` keeps only what views and session info
need; the records are produced again, one at a time, as ``opal commit`` encodes them.
These tests pin what that must keep: the same records, forks, secrets in the vault
before any object is written, no half-written commit when the file changes under us,
and memory that does not grow with the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from opalgit import porcelain
from opalgit.agents.base import ReadResult, Record, View
from opalgit.agents.claude.adapter import ClaudeAdapter
from opalgit.errors import InputError, NothingToDoError
from opalgit.history import sequence
from opalgit.history.model import Normal, SessionInfo, Turn
from opalgit.history.states import _count, _items
from opalgit.porcelain import secrets as redaction
from opalgit.secrets.vault import Vault
from opalgit.store.objects import GitObjectStore
from opalgit.store.repo import Repository
from tests.conftest import FIXTURES
from tests.unit.test_porcelain import place

A = ClaudeAdapter()
CLAUDE = os.path.join(FIXTURES, "claude")
GENERATED = os.path.join(CLAUDE, "generated", "7c83c109-bd8e-4995-ab21-c69c5256ec0d.jsonl")
FORKED = os.path.join(CLAUDE, "agent-sessions", "small.jsonl")
SECRETS = os.path.join(FIXTURES, "secrets", "session.jsonl")
SID = "0f0e0d0c-0b0a-4909-8807-060504030201"
AWS = "[default]\naws_access_key_id = AKIAER4UISCXD5M2LJG2\nregion = eu-west-1\n"


@pytest.fixture
def repo(project):
    porcelain.init(str(project))
    return Repository.discover(str(project))


def _key(r: Record):
    return (r.turn, r.normal, r.line)


# ------------------------------------------------------------------ the lazy read result


@pytest.mark.parametrize("path", [GENERATED, FORKED, SECRETS], ids=["generated", "forked", "secrets"])
def test_lazy_records_are_the_records(path):
    res = A.read(path)
    assert res.lazy and res.count > 0
    streamed = list(res.iter_records())
    assert res.lazy  # iterating does not keep them
    assert len(streamed) == res.count == res.lines
    assert [r.line for r in streamed] == list(range(1, res.count + 1))
    for v in res.views:
        assert [_key(r) for r in res.iter_records(v.indices)] == [_key(streamed[i]) for i in v.indices]
    assert [_key(r) for r in res.records] == [_key(r) for r in streamed]  # the list, made once
    assert not res.lazy and res.records is res.records


def test_incremental_read_is_lazy_too(tmp_path):
    data = Path(GENERATED).read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(data[:20]))
    first = A.read(str(path))
    path.write_bytes(b"".join(data))
    second = A.read(str(path), start=first.end, first_line=first.lines + 1, state=first.state)
    assert second.extends and second.lazy and second.count == len(data) - 20
    whole = A.read(str(path)).records
    assert [_key(r) for r in second.iter_records()] == [_key(r) for r in whole[20:]]


def test_list_results_work_the_same_way():
    recs = [Record(Turn.from_line("x", b"%d" % i), Normal(role="meta"), i + 1) for i in range(4)]
    res = ReadResult(SessionInfo("x", "s"), recs, [View(indices=[0, 1, 2, 3])], {}, 8, 4)
    assert not res.lazy and res.count == 4 and res.records is recs
    assert list(res.iter_records()) == recs
    assert list(res.iter_records([1, 3])) == [recs[1], recs[3]]
    with pytest.raises(TypeError):
        ReadResult(SessionInfo("x", "s"))


def test_a_file_rewritten_between_the_passes_is_named_with_its_line(tmp_path):
    path = tmp_path / "s.jsonl"
    data = Path(GENERATED).read_bytes()
    path.write_bytes(data)
    res = A.read(str(path))
    lines = data.splitlines(keepends=True)
    k = len(lines) // 2
    lines[k] = lines[k].replace(b'"', b"'", 1)  # same length, other bytes
    path.write_bytes(b"".join(lines))
    with pytest.raises(InputError) as err:
        list(res.iter_records())
    assert err.value.path == str(path) and err.value.line == k + 1
    assert "changed while it was being read" in str(err.value)


def test_appending_between_the_passes_is_fine(tmp_path):
    path = tmp_path / "s.jsonl"
    data = Path(GENERATED).read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(data[:-5]))
    res = A.read(str(path))
    with open(path, "ab") as fh:  # the agent keeps writing: the read stops where pass one did
        fh.writelines(data[-5:])
    assert len(list(res.iter_records())) == res.count == len(data) - 5


# --------------------------------------------------------------------------- commit


def test_commit_aborts_without_moving_a_ref_when_pass_two_fails(repo, project, home, monkeypatch):
    path = place(home, project, source=GENERATED)
    real = ClaudeAdapter.read

    def read_then_damage(self, p, **kw):
        res = real(self, p, **kw)
        data = Path(p).read_bytes().splitlines(keepends=True)
        data[-3] = data[-3].replace(b"{", b"[", 1)  # late: objects were already written
        Path(p).write_bytes(b"".join(data))
        return res

    def refs():
        return {r: repo.git.references[r].target for r in repo.git.references if r.startswith("refs/opal/")}

    before, ops = refs(), porcelain.op_log(repo)
    monkeypatch.setattr(ClaudeAdapter, "read", read_then_damage)
    monkeypatch.setattr("opalgit.store.objects.FLUSH_BYTES", 1024)  # flush early, as a big file would
    with pytest.raises(InputError) as err:
        porcelain.commit(repo, {"HOME": str(home)}, str(project))
    assert err.value.path == path and err.value.line is not None
    assert porcelain.branch_head(repo, "main") is None
    assert refs() == before and porcelain.op_log(repo) == ops


def test_secrets_reach_the_vault_before_any_object_is_written(repo, project, home, monkeypatch):
    place(home, project, source=SECRETS)
    produced: set[str] = set()
    stored: set[str] = set()
    writes_after_a_secret = [0]
    real_redact, real_put, real_write = redaction.redact_turn, Vault.put, GitObjectStore._backend_write

    def redact(turn, r):
        out, found = real_redact(turn, r)
        produced.update(f.placeholder for f in found)
        return out, found

    def put(self, findings):
        findings = list(findings)
        stored.update(f.placeholder for f in findings)
        return real_put(self, findings)

    def write(self, objects):
        assert produced <= stored, "an object was written before its secrets were in the vault"
        writes_after_a_secret[0] += bool(produced)
        return real_write(self, objects)

    monkeypatch.setattr(redaction, "redact_turn", redact)
    monkeypatch.setattr(Vault, "put", put)
    monkeypatch.setattr(GitObjectStore, "_backend_write", write)
    monkeypatch.setattr("opalgit.store.objects.FLUSH_BYTES", 1)  # every object is flushed at once
    res = porcelain.commit(repo, {"HOME": str(home)}, str(project))
    assert produced and writes_after_a_secret[0] > 1
    assert any("replaced by placeholders" in n for n in res.notes)
    assert set(redaction.vault(repo).mapping()) >= produced


def _forked_session() -> bytes:
    def user(uid, parent, text):
        return {"parentUuid": parent, "isSidechain": False, "type": "user", "uuid": uid, "sessionId": SID,
                "cwd": "/w", "timestamp": "2026-01-02T03:04:05.678Z", "message": {"role": "user", "content": text}}

    def assistant(uid, parent):
        return {"parentUuid": parent, "isSidechain": False, "type": "assistant", "uuid": uid, "sessionId": SID,
                "timestamp": "2026-01-02T03:04:06.000Z",
                "message": {"role": "assistant", "model": "claude-test", "content": [{"type": "text", "text": "ok " + uid}]}}

    recs = [
        user("u1", None, "start"),
        assistant("a1", "u1"),
        user("u2x", "a1", "first try with\n" + AWS),  # the secret is only in the fork
        assistant("a2x", "u2x"),
        user("u2y", "a1", "second try"),
        assistant("a2y", "u2y"),
        {"type": "last-prompt", "lastPrompt": "p", "leafUuid": "a2y", "sessionId": SID},
    ]
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in recs)


def test_forks_become_branches_and_their_secrets_are_kept_safe(repo, project, home, tmp_path):
    src = tmp_path / f"{SID}.jsonl"
    src.write_bytes(_forked_session())
    place(home, project, source=str(src))
    env = {"HOME": str(home)}
    res = porcelain.commit(repo, env, str(project))
    assert res.forks == ["main-fork-a2x"] and res.turns == 4 and res.items == 5
    assert any("1 secret replaced" in n for n in res.notes)
    assert "AKIAER4UISCXD5M2LJG2" in redaction.vault(repo).mapping().values()
    fork = porcelain.load_state(repo, porcelain.branch_head(repo, "main-fork-a2x"))
    # Not the last-prompt: it was written on the other line, after this one was left.
    assert fork.header.turns == 4 and fork.header.items == 4 and fork.header.extra["leaf"] == "a2x"
    texts = [porcelain.turn_of(repo, si.item).record["message"]["content"]
             for si in sequence.iter_items(repo.store, fork.root)
             if porcelain.turn_of(repo, si.item).record.get("type") == "user"]
    assert texts[0] == "start" and "AKIAER4UISCXD5M2LJG2" not in texts[1] and "aws_access_key_id" in texts[1]
    with pytest.raises(NothingToDoError):  # both lines built again give the same roots
        porcelain.commit(repo, env, str(project))


def _expected_items(repo, path, indices):
    """The items a whole build of these records gives: read, redacted, encoded."""
    res, r = A.read(path), redaction.redactor(repo)
    recs = [Record(redaction.redact_turn(rec.turn, r)[0], rec.normal, rec.line) for rec in res.iter_records(indices)]
    return list(_items(recs))


def test_a_fork_reuses_the_main_line_and_counts_like_a_whole_build(repo, project, home, tmp_path):
    from bench.generate import generate

    src = tmp_path / f"{SID}.jsonl"
    generate("claude", str(src), size=3 << 20, seed=5)
    lines = src.read_bytes().splitlines(keepends=True)
    mids = [json.loads(x) for x in lines[len(lines) // 2 :]]
    mid = next(m for m in mids if m.get("type") == "assistant" and not m.get("isSidechain"))
    last = next(json.loads(x)["uuid"] for x in reversed(lines) if json.loads(x).get("type") in ("user", "assistant"))
    sid = mid["sessionId"]
    extra = [
        {"parentUuid": mid["uuid"], "isSidechain": False, "type": "user", "uuid": "f0000000-0000-4000-8000-000000000001",
         "sessionId": sid, "timestamp": mid["timestamp"], "message": {"role": "user", "content": "another way"}},
        {"parentUuid": "f0000000-0000-4000-8000-000000000001", "isSidechain": False, "type": "assistant",
         "uuid": "f0000000-0000-4000-8000-000000000002", "sessionId": sid, "timestamp": mid["timestamp"],
         "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}},
        {"type": "last-prompt", "lastPrompt": "p", "leafUuid": last, "sessionId": sid},
    ]
    src.write_bytes(b"".join(lines) + b"".join(json.dumps(x).encode() + b"\n" for x in extra))
    path = place(home, project, source=str(src))
    res = porcelain.commit(repo, {"HOME": str(home)}, str(project))
    assert res.forks == ["main-fork-f0000000"]
    views = A.read(path).views
    for branch, view in (("main", views[0]), ("main-fork-f0000000", views[1])):
        st = porcelain.load_state(repo, porcelain.branch_head(repo, branch))
        want = _expected_items(repo, path, view.indices)
        assert [si.item.id for si in sequence.iter_items(repo.store, st.root)] == [it.id for it in want]
        assert (st.header.items, st.header.turns, st.header.chars) == (len(want), *_count(want))
    with pytest.raises(NothingToDoError):
        porcelain.commit(repo, {"HOME": str(home)}, str(project))


def test_incremental_commit_streams_the_new_records(repo, project, home):
    path = place(home, project, source=GENERATED, lines=40)
    env = {"HOME": str(home)}
    porcelain.commit(repo, env, str(project))
    data = Path(GENERATED).read_bytes().splitlines(keepends=True)
    with open(path, "ab") as fh:
        fh.writelines(data[40:])
    second = porcelain.commit(repo, env, str(project))
    assert second.incremental and second.new_items == len(data) - 40
    st = porcelain.load_state(repo, second.oid)
    stored = [si.item.id for si in sequence.iter_items(repo.store, st.root)]
    fresh = [it.id for it in _items(A.read(path).records)]
    assert stored == fresh


# --------------------------------------------------------------------------- memory


def test_reading_does_not_hold_the_file(tmp_path):
    """Both passes of a read cost a fraction of the file (holding it parsed cost ~1.4x)."""
    import tracemalloc

    from bench.generate import generate

    path = tmp_path / f"{SID}.jsonl"
    generate("claude", str(path), size=12 << 20, seed=3)
    size = os.path.getsize(path)
    tracemalloc.start()
    try:
        res = A.read(str(path))
        after_pass_one = tracemalloc.get_traced_memory()[0]
        n = sum(1 for _ in res.iter_records(res.views[0].indices))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n == res.count > 1000
    assert after_pass_one < 0.05 * size, after_pass_one
    # A fraction of the file, plus the constant 1 MiB read buffers of the two passes.
    assert peak < 0.2 * size + (2 << 20), (peak, size)


def test_commit_holds_one_record_at_a_time(repo, project, home, monkeypatch):
    import weakref

    place(home, project, source=GENERATED)
    from opalgit.agents.base import LineIndex

    real = LineIndex.records
    live = [0, 0, 0]  # alive now, most alive at once, produced

    def gone():
        live[0] -= 1

    def produce(self, *a, **kw):
        for rec in real(self, *a, **kw):
            live[0] += 1
            live[1] = max(live[1], live[0])
            live[2] += 1
            weakref.finalize(rec, gone)
            yield rec

    monkeypatch.setattr(LineIndex, "records", produce)
    res = porcelain.commit(repo, {"HOME": str(home)}, str(project))
    assert live[2] == res.items > 50
    assert live[1] <= 2, live


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_every_agent_streams_a_growing_session_into_commits(repo, project, home, tmp_path, agent):
    """The two-pass read of each agent's JSON lines, through the whole commit: a
    session committed as it grows holds exactly the file (secrets restored from the
    vault), each record read once per commit that adds it, one at a time."""
    import weakref

    from bench import generate
    from opalgit import agents as adapters
    from opalgit.agents.base import LineIndex
    from opalgit.porcelain import export as exporting

    st = generate.generate(agent, str(tmp_path / f"session-{agent}.jsonl"), size=300_000, seed=7)
    lines = Path(st.path).read_bytes().splitlines(keepends=True)
    lines.insert(len(lines) // 2, b"\n")  # a blank line in the middle: kept as bytes
    live = tmp_path / f"live-{agent}.jsonl"
    real = LineIndex.records
    seen = {"produced": 0, "alive": 0, "most": 0}

    def gone():
        seen["alive"] -= 1

    def records(self, *a, **kw):
        for rec in real(self, *a, **kw):
            seen["produced"] += 1
            seen["alive"] += 1
            seen["most"] = max(seen["most"], seen["alive"])
            weakref.finalize(rec, gone)
            yield rec

    prev = 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LineIndex, "records", records)
        for cut in (len(lines) // 3, 2 * len(lines) // 3, len(lines)):
            with open(live, "ab") as fh:
                fh.writelines(lines[prev:cut])
            res = porcelain.commit(repo, {"HOME": str(home)}, str(project), file=str(live), agent=agent)
            assert res.new_items == cut - prev
            # Claude and Codex commits read only the lines added since the last one; a
            # Gemini commit may read the whole log again (a message re-appended under
            # its id, other than the last one read: see the test below).
            assert res.incremental == (prev > 0) or agent == "gemini"
            prev = cut
    assert seen["most"] <= 2 and seen["produced"] >= len(lines)
    _, turns, _, _ = exporting.gather(repo, "main")
    ad = adapters.get(agent)
    assert b"".join(ad.render(t.turn) + b"\n" for t in turns) == b"".join(lines)


@pytest.mark.parametrize("seed", [1, 9])
def test_a_gemini_log_committed_line_by_line_is_the_log_committed_whole(project, home, tmp_path, seed):
    """Gemini CLI re-appends a message under its id when its tool results arrive. A
    commit after every line (what the hook sees) stays incremental through that, and
    revises the summary of the message's earlier line in place; the state it ends
    with is the one a single commit of the whole log makes, record for record."""
    import shutil
    import subprocess

    from bench import generate
    from opalgit.history import sequence
    from opalgit.history.states import branch_head, load_state

    st = generate.generate("gemini", str(tmp_path / "session.jsonl"), size=150_000, seed=seed)
    lines = Path(st.path).read_bytes().splitlines(keepends=True)

    def fresh(name: str) -> Repository:
        path = tmp_path / name
        subprocess.run(["git", "init", "-q", str(path)], check=True)
        porcelain.init(str(path))
        return Repository.discover(str(path))

    grow, whole = fresh("grow"), fresh("whole")
    redaction.vault(grow).key()  # one redaction key for both: the placeholders compare equal
    (tmp_path / "whole/.git/opal/vault").mkdir(parents=True, exist_ok=True)
    shutil.copy2(tmp_path / "grow/.git/opal/vault/secrets.jsonl", tmp_path / "whole/.git/opal/vault/secrets.jsonl")
    live = tmp_path / "live.jsonl"
    env = {"HOME": str(home)}
    incremental = 0
    for line in lines:
        with open(live, "ab") as fh:
            fh.write(line)
        incremental += porcelain.commit(grow, env, str(project), file=str(live), agent="gemini").incremental
    porcelain.commit(whole, env, str(project), file=st.path, agent="gemini")

    def recorded(repo: Repository):
        state = load_state(repo, branch_head(repo, "main"))
        items = [(si.item.id, si.item.summary) for si in sequence.iter_items(repo.store, state.root)]
        return items, (state.header.items, state.header.turns, state.header.chars)

    assert recorded(grow) == recorded(whole)
    from opalgit.porcelain import fsck
    from tests.conftest import git

    assert fsck.fsck(grow).ok  # the leaves rewritten in place keep every invariant
    assert git("fsck", "--strict", cwd=str(tmp_path / "grow")).returncode == 0
    reappended = len(lines) - len({json.loads(x)["id"] for x in lines if b'"id"' in x[:8]})
    assert reappended > 5 and incremental >= len(lines) - 3  # (the first commit, checkpoints)

"""The Gemini CLI adapter: lossless reading of the JSON-lines mutation log (and of legacy
single-JSON files), normalization without double counting, incremental reads, bad input,
discovery, export, and -- with the real gemini 0.61.0 against a mock API -- that an
exported session resumes with its whole history. Fixtures live in tests/fixtures/gemini
(the public set keeps its LICENSE beside it); synthetic sessions are written here."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opalgit import agents, codec, jsonl
from opalgit.agents import tools
from opalgit.agents.base import ExportRequest, ExportResult, ExportTurn, ReadResult, parse_time
from opalgit.agents.claude.adapter import ClaudeAdapter
from opalgit.agents.gemini.adapter import GeminiAdapter
from opalgit.agents.gemini.files import project_hash, slugify
from opalgit.errors import InputError
from opalgit.history.model import Normal, SessionInfo, Turn, summarize

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "gemini"
GENERATED = FIX / "generated" / "session-2026-11-30T12-25-aaf40a27.jsonl"
V040 = FIX / "agent-sessions" / "jsonl_v040.jsonl"
SMALL = FIX / "agent-sessions" / "small.json"
LARGE = FIX / "agent-sessions" / "large.json"
DRIFT = FIX / "agent-sessions" / "schema_drift.json"
CLAUDE_GENERATED = ROOT / "tests" / "fixtures" / "claude" / "generated" / "7c83c109-bd8e-4995-ab21-c69c5256ec0d.jsonl"
CLAUDE_DEMO = ROOT / "opalgit" / "demo_data" / "claude-session.jsonl"

JSONL_FILES = [GENERATED, V040]
DOC_FILES = [SMALL, LARGE, DRIFT]

# From the registry, as opal gets it: a refusal names the agent whose file it is.
A = agents.get("gemini")
assert isinstance(A, GeminiAdapter)
SID = "aaf40a27-d6ae-4a80-9e60-efb6e0ca382d"
NEW_SID = "5e55105e-0000-4000-8000-00000000abcd"
NOW = 1796041600123  # 2026-11-30T12:26:40.123Z
T = "2026-01-02T03:04:05.678Z"


def rendered(result: ReadResult) -> bytes:
    return b"".join(A.render(r.turn) + b"\n" for r in result.records)


def dump(records) -> bytes:
    return b"".join((r if isinstance(r, bytes) else jsonl.dumps(r)) + b"\n" for r in records)


def write(path: Path, records) -> Path:
    path.write_bytes(dump(records))
    return path


def header(sid=SID, phash="ab" * 32, **extra):
    return {"sessionId": sid, "projectHash": phash, "startTime": T, "lastUpdated": T, "kind": "main", **extra}


def user(mid, text="hi", **extra):
    return {"id": mid, "timestamp": T, "type": "user", "content": [{"text": text}], **extra}


def gemini(mid, text="ok", calls=(), **extra):
    rec = {"id": mid, "timestamp": T, "type": "gemini", "content": text, "thoughts": [], "model": "gemini-test"}
    if calls:
        rec["toolCalls"] = list(calls)
    rec.update(extra)
    return rec


def call(cid, name="run_shell_command", args=None, output="out", status="success"):
    resp = {"output": output} if status == "success" else {"error": output}
    return {"id": cid, "name": name, "args": args if args is not None else {"command": "ls"},
            "result": [{"functionResponse": {"id": cid, "name": name, "response": resp}}],
            "status": status, "timestamp": T}


def fr(mid, cid, name="run_shell_command", output="out"):
    return {"id": mid, "timestamp": T, "type": "user",
            "content": [{"functionResponse": {"id": cid, "name": name, "response": {"output": output}}}]}


def cli_load(lines: list) -> tuple[dict, list]:
    """Gemini CLI 0.61's loadConversationRecord, written independently of the adapter.
    Its metadata has no ``messages``: the CLI returns the replayed list in their place
    (a checkpoint's own list is not what it loads once message lines follow it)."""
    meta, msgs = {}, {}
    for rec in lines:
        if not isinstance(rec, dict):
            continue
        if isinstance(rec.get("$rewindTo"), str):
            keys = list(msgs)
            if rec["$rewindTo"] in msgs:
                for k in keys[keys.index(rec["$rewindTo"]):]:
                    del msgs[k]
            else:
                msgs.clear()
        elif isinstance(rec.get("id"), str):
            msgs[rec["id"]] = rec
        elif isinstance(rec.get("$set"), dict):
            if isinstance(rec["$set"].get("messages"), list):
                msgs = {m["id"]: m for m in rec["$set"]["messages"] if isinstance(m.get("id"), str)}
            meta.update(rec["$set"])
        elif isinstance(rec.get("sessionId"), str) and isinstance(rec.get("projectHash"), str):
            meta.update(rec)
            for m in rec.get("messages") or []:
                msgs[m["id"]] = m
    meta.pop("messages", None)
    return meta, list(msgs.values())


def cli_lines(data: bytes) -> list:
    """The lines of a session file as the CLI's loader takes them: it skips a blank line
    (and one that is not JSON) where :func:`lines_of` would fail."""
    out = []
    for x in data.splitlines():
        try:
            out.append(json.loads(x))
        except ValueError:
            continue
    return out


def without_duplicate_results(msgs: list) -> list:
    """The final messages minus functionResponse-only user records already answered."""
    answered, out = set(), []
    for m in msgs:
        content = m.get("content")
        if m.get("type") == "user" and isinstance(content, list) and content and all(
                isinstance(p, dict) and "functionResponse" in p for p in content):
            ids = [p["functionResponse"].get("id") for p in content]
            if all(i in answered for i in ids):
                continue
            answered.update(ids)
        for tc in m.get("toolCalls") or []:
            if tc.get("result") is not None:
                answered.add(tc["id"])
        out.append(m)
    return out


def lines_of(data: bytes) -> list:
    return [json.loads(x) for x in data.splitlines()]


def _roles(result) -> dict:
    out: dict[str, int] = {}
    for r in result.records:
        out[r.normal.role] = out.get(r.normal.role, 0) + 1
    return out


def _blocks(result, kind):
    return [b for r in result.records for b in r.normal.blocks if b["type"] == kind]


# ------------------------------------------------------------------ lossless round trip


@pytest.mark.parametrize("path", JSONL_FILES, ids=lambda p: p.name[:24])
def test_round_trip_jsonl_fixtures(path):
    result = A.read(str(path))
    assert rendered(result) == path.read_bytes()
    assert result.warnings == []
    assert result.end == path.stat().st_size
    assert result.lines == len(result.records) == path.read_bytes().count(b"\n")
    assert [r.line for r in result.records] == list(range(1, len(result.records) + 1))
    assert len(result.views) == 1 and result.views[0].indices == list(range(len(result.records)))
    assert result.views[0].name_hint is None
    for r in result.records:
        r.normal.check()
        summarize(r.normal)
        if r.normal.label not in ("gemini:superseded", "gemini:duplicate-result", "gemini:checkpoint"):
            assert A.normalize(r.turn) == r.normal  # the standalone view agrees outside replayed records
    assert A.normalize_many([r.turn for r in result.records]) == [r.normal for r in result.records]
    codec.pack_canonical("state", {"s": result.state})


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.name)
def test_legacy_json_semantic_round_trip(path):
    result = A.read(str(path))
    doc = json.loads(path.read_text())
    key = "messages" if "messages" in doc else "history"
    head, *msgs = [r.turn.record for r in result.records]
    assert {**head, key: msgs} == doc
    assert all(r.line == 1 for r in result.records)
    assert result.end == path.stat().st_size and not result.extends
    for r in result.records:
        r.normal.check()
        assert A.normalize(r.turn) == r.normal
    if key == "messages":
        # The rendered records are the modern JSON-lines form of the same session.
        meta, loaded = cli_load(lines_of(rendered(result)))
        assert loaded == doc["messages"] and meta["sessionId"] == doc["sessionId"]
        assert result.warnings == []
    else:
        assert "cannot resume" in result.warnings[0]
    codec.pack_canonical("state", {"s": result.state})


def test_legacy_fixture_views():
    small = A.read(str(SMALL))
    assert [r.normal.role for r in small.records] == ["meta", "user", "assistant"]
    assert small.records[2].normal.blocks == [{"type": "reasoning", "text": "Short reasoning placeholder."},
                                              {"type": "text", "text": "Hi!"}]
    assert small.session.id == "session-2026-01-16T18-34-3739ef95" and small.views[0].leaf == "m2"
    large = A.read(str(LARGE))
    assert [r.normal.role for r in large.records] == ["meta", "user", "assistant", "assistant", "meta",
                                                      "assistant", "user", "assistant"]
    assert large.records[4].normal.label == "gemini:info"
    assert large.records[5].normal.blocks == [{"type": "text", "text": "Captured multiline output."}]  # type "model"
    drift = A.read(str(DRIFT))
    assert drift.records[1].normal.blocks[1] == {"type": "image", "media_type": "image/png", "data": "AAAA"}
    assert drift.records[2].normal.role == "assistant" and drift.records[1].normal.time == 1695000000000
    assert drift.session.title == "Redacted session summary"


# ------------------------------------------------------------------------ normalization


def test_normalize_generated_session_counts_each_message_once():
    result = A.read(str(GENERATED))
    roles = _roles(result)
    assert roles == {"meta": 34, "user": 2, "assistant": 8}
    prompts = [r.normal.blocks[0]["text"] for r in result.records if r.normal.role == "user"]
    assert prompts == ["TURN1: list the files in this project and show me README.md",
                       "TURN2: add a farewell() function to hello.py and write notes.txt"]
    calls, results = _blocks(result, "tool_call"), _blocks(result, "tool_result")
    assert [c["name"] for c in calls] == ["run_shell_command", "read_file", "read_file", "replace", "write_file",
                                          "run_shell_command"]
    assert [r["call_id"] for r in results] == [c["id"] for c in calls]
    assert results[1]["output"] == "# demo\n\nA tiny demo project. `hello.py` has greet().\n"
    assert not any(r["is_error"] for r in results)
    answers = [b["text"] for r in result.records if r.normal.role == "assistant"
               for b in r.normal.blocks if b["type"] == "text" and not b["text"].startswith("Using ")]
    assert answers == [("The project has README.md and hello.py. README.md describes a tiny demo project with a "
                        "greet() function. [turn1-done]"), "Added farewell() to hello.py and wrote notes.txt. [turn2-done]"]
    labels = [r.normal.label for r in result.records if r.normal.role == "meta"]
    assert labels.count("gemini:superseded") == 6 and labels.count("gemini:duplicate-result") == 6
    assert labels.count("gemini:checkpoint") == 3 and labels.count("gemini:header") == 2
    assert all(s["kind"] == "tool_call" for s in (summarize(r.normal) for r in result.records) if "tool" in s)
    s = result.session
    assert (s.agent, s.id, s.model, s.cwd) == ("gemini", SID, "gemini-3.8-flash", None)
    assert result.views[0].leaf == "f13098ed-4019-4886-9292-a1f79cb5ce49"
    assert result.records[2].normal.time == parse_time("2026-11-30T12:25:23.297Z") == 1796041523297


def test_normalize_blocks_and_roles():
    n = A.normalize(Turn.from_record("gemini", gemini("g", [
        {"text": "plan", "thought": True, "thoughtSignature": "sig"},
        {"text": "musing", "thought": True},
        {"text": "Looking."},
        {"functionCall": {"id": "c1", "name": "read_file", "args": {"file_path": "/w/a"}}},
        {"executableCode": {"code": "1"}},
    ], calls=[call("c1", "read_file", {"file_path": "/w/a"}, "A"), call("c2", output="boom", status="error")],
        thoughts=[{"subject": "Plan", "description": "do it", "timestamp": T}])))
    assert n.role == "assistant"
    assert n.blocks == [
        {"type": "reasoning", "text": "**Plan** do it"},
        {"type": "reasoning", "text": "plan", "signed": True},
        {"type": "reasoning", "text": "musing"},
        {"type": "text", "text": "Looking."},
        {"type": "tool_call", "id": "c1", "name": "read_file", "input": {"file_path": "/w/a"}},
        {"type": "other", "kind": "executableCode"},
        {"type": "tool_call", "id": "c2", "name": "run_shell_command", "input": {"command": "ls"}},  # c1 not twice
        {"type": "tool_result", "call_id": "c1", "name": "read_file", "output": "A", "is_error": False},
        {"type": "tool_result", "call_id": "c2", "name": "run_shell_command", "output": "boom", "is_error": True},
    ]
    img = {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}
    n = A.normalize(Turn.from_record("gemini", {"id": "u", "timestamp": T, "type": "user", "content": [{"text": "see"}, img]}))
    assert n.role == "user" and n.blocks[1] == {"type": "image", "media_type": "image/png", "data": "AAAA"}
    assert A.normalize(Turn.from_record("gemini", fr("r", "c1"))).role == "tool"
    assert A.normalize(Turn.from_record("gemini", user("x", "<session_context>\nctx"))).label == "gemini:context"
    assert A.normalize(Turn.from_record("gemini", user("x", "  /help"))).label == "gemini:command"
    assert A.normalize(Turn.from_record("gemini", {"id": "x", "type": "user", "content": "plain"})).role == "user"
    for kind in ("info", "error", "warning"):
        n = A.normalize(Turn.from_record("gemini", {"id": "i", "timestamp": T, "type": kind, "content": "note"}))
        assert (n.role, n.label) == ("meta", f"gemini:{kind}")
    assert A.normalize(Turn.from_record("gemini", gemini("e", ""))).blocks == []
    assert A.normalize(Turn.from_record("gemini", header())).label == "gemini:header"
    assert A.normalize(Turn.from_record("gemini", {"$rewindTo": "x"})).label == "gemini:rewind"
    assert A.normalize(Turn.from_record("gemini", {"$set": {"lastUpdated": T}})).label == "gemini:set"
    assert A.normalize(Turn.from_line("gemini", b"{oops")).label == "unparseable"
    assert A.normalize(Turn.from_line("gemini", b"")).label == "blank"
    assert A.normalize(Turn.from_line("gemini", b'{"id":"u","type":"user","content":"hi","n":1.0}')).role == "user"
    assert A.normalize(Turn.authored("user", [{"type": "text", "text": "x"}])).role == "user"
    # A checkpoint read on its own holds every message it carries.
    cp = A.normalize(Turn.from_record("gemini", {"$set": {"messages": [user("u1", "a"), gemini("g1", "b")]}}))
    assert (cp.role, cp.label, [b["type"] for b in cp.blocks]) == ("system", "gemini:checkpoint", ["text", "text"])


def test_parse_time():
    assert parse_time("1970-01-01T00:00:01.5Z") == 1500
    assert parse_time("1970-01-01T01:00:00+01:00") == 0
    assert parse_time("nope") is None and parse_time(None) is None and parse_time(True) is None
    assert parse_time(1_700_000_000) == 1_700_000_000_000


def test_replacements_rewinds_and_checkpoints(tmp_path):
    recs = [
        header(),                                     # 0
        user("u1", "first"),                          # 1
        gemini("g1", "thinking"),                     # 2 superseded by 3
        gemini("g1", "", [call("c1")]),               # 3
        fr("r1", "c1"),                               # 4 duplicate of c1's result
        user("u2", "second"),                         # 5 rewound
        gemini("g2", "answer"),                       # 6 rewound
        {"$rewindTo": "u2"},                          # 7
        user("u3", "third"),                          # 8
        {"$set": {"lastUpdated": T}},                 # 9
    ]
    result = A.read(str(write(tmp_path / "s.jsonl", recs)))
    labels = [r.normal.label or r.normal.role for r in result.records]
    assert labels == ["gemini:header", "user", "gemini:superseded", "assistant", "gemini:duplicate-result",
                      "gemini:superseded", "gemini:superseded", "gemini:rewind", "user", "gemini:set"]
    assert result.views[0].leaf == "u3"
    # An unknown rewind target drops everything; a checkpoint with new ids carries them itself.
    recs += [{"$rewindTo": "ghost"}, {"$set": {"messages": [user("s1", "summary of it all"), gemini("s2", "noted")]}},
             user("u4", "after")]
    result = A.read(str(write(tmp_path / "t.jsonl", recs)))
    live = [(r.line, r.normal.role, r.normal.label) for r in result.records if r.normal.role != "meta"]
    # (the checkpoint's own messages are a record each, on its line: issue 18, 6)
    assert live == [(12, "user", ""), (12, "assistant", ""), (13, "user", "")]
    # A checkpoint restating a message keeps crediting the message's own line.
    recs = [header(), user("u1"), gemini("g1", "x", [call("c1")]),
            {"$set": {"messages": [user("u1"), gemini("g1", [{"text": "x"}, {"functionCall": {"id": "c1", "name": "run_shell_command", "args": {}}}]),
                                   fr("g1_response", "c1")]}}]
    result = A.read(str(write(tmp_path / "u.jsonl", recs)))
    assert [r.normal.role for r in result.records] == ["meta", "user", "assistant", "meta"]
    assert result.records[3].normal.label == "gemini:checkpoint"


# ------------------------------------------------------------------------ incremental


def _split_read(path: Path, cut: int, tmp_path: Path):
    lines = path.read_bytes().splitlines(keepends=True)
    part = tmp_path / path.name
    part.write_bytes(b"".join(lines[:cut]))
    first = A.read(str(part))
    with open(part, "ab") as fh:
        fh.write(b"".join(lines[cut:]))
    second = A.read(str(part), start=first.end, first_line=first.lines + 1, state=first.state)
    return first, second


@pytest.mark.parametrize("path", JSONL_FILES, ids=lambda p: p.name[:24])
def test_incremental_every_cut(path, tmp_path):
    full = A.read(str(path))
    recs = full.records
    # Cuts are by line; a $set.messages batch may be several records on one line.
    values = [json.loads(x) for x in path.read_bytes().splitlines()]
    n = len(values)
    first_rec: dict[int, int] = {}
    for k, r in enumerate(recs):
        first_rec.setdefault(r.line, k)
    for cut in range(1, n):
        _, second = _split_read(path, cut, tmp_path)
        after = [r for r in recs if r.line > cut]
        assert second.end == full.end and second.lines == full.lines
        rest = values[cut:]
        seen = {v["id"] for v in values[:cut] if "id" in v} | {
            m["id"] for v in values[:cut] for m in (v.get("$set") or {}).get("messages", [])}
        # The last message read, when no line after it changes the messages: the CLI
        # re-appends it with its tool results, which still extends the log.
        changing = [i for i, v in enumerate(values[:cut])
                    if "id" in v or "$rewindTo" in v or "messages" in (v.get("$set") or {}) or "messages" in v]
        tail = values[changing[-1]].get("id") if changing else None
        ids = [v["id"] for v in rest if "id" in v]
        again = bool(ids) and ids[0] == tail
        rewrites = any("$rewindTo" in v or "messages" in (v.get("$set") or {}) for v in rest) or any(
            m in seen for m in ids[1 if again else 0 :])
        assert second.extends == (not rewrites), cut
        if second.extends:
            assert [r.turn for r in second.records] == [r.turn for r in after]
            assert [r.line for r in second.records] == [r.line for r in after]
            assert [r.normal for r in second.records] == [r.normal for r in after]
            assert second.state == full.state and second.session == full.session
            assert second.views[0].indices == list(range(len(after)))
            # The re-appended message's old line: as the whole log's replay sees it.
            old = first_rec.get(changing[-1] + 1) if again else None
            assert second.revised == ({old: recs[old].normal} if again else {}), cut


def test_incremental_append_and_replace(tmp_path):
    p = write(tmp_path / "i.jsonl", [header(), user("u1"), gemini("g1", "", [call("c1")])])
    first = A.read(str(p))
    with open(p, "ab") as fh:
        fh.write(dump([fr("r1", "c1"), {"$set": {"lastUpdated": T}}, user("u2", "more"), gemini("g2", "done")]))
    second = A.read(str(p), start=first.end, first_line=first.lines + 1, state=first.state)
    assert second.extends and second.views[0].leaf == "g2"
    assert [r.normal.label or r.normal.role for r in second.records] == [
        "gemini:duplicate-result", "gemini:set", "user", "assistant"]
    assert second.state == A.read(str(p)).state
    for extra in ([gemini("g1", "", [call("c1"), call("c9")])], [{"$rewindTo": "u2"}],
                  [{"$set": {"messages": []}}], [header(messages=[user("h1")])]):
        with open(p, "ab") as fh:
            fh.write(dump(extra))
        third = A.read(str(p), start=second.end, first_line=second.lines + 1, state=second.state)
        assert not third.extends and third.views == [] and third.state == second.state, extra
        p.write_bytes(p.read_bytes()[:second.end])
    again = A.read(str(p), start=second.end, first_line=second.lines + 1, state=second.state)
    assert again.extends and again.records == []
    # The last message read answered a call: re-appended, it would be judged against
    # its own old answer (a duplicate result) where a whole replay judges it before
    # it. So that re-append is read whole (found by test_property_round_trip_and_export).
    q = write(tmp_path / "answered.jsonl", [header(), fr("m0", "c0")])
    before = A.read(str(q))
    with open(q, "ab") as fh:
        fh.write(dump([fr("m0", "c0")]))
    after = A.read(str(q), start=before.end, first_line=before.lines + 1, state=before.state)
    assert not after.extends and [r.normal.role for r in A.read(str(q)).records] == ["meta", "meta", "tool"]
    # Extensions: a message new in these lines written twice (the first becomes
    # superseded), and the last message read re-appended first (its old line revised).
    for extra, revised in (([user("n1"), user("n1", "again")], {}),
                           ([gemini("g2", "done", [call("c2")]), user("n2")], {first.count + second.count - 1: "g2"})):
        with open(p, "ab") as fh:
            fh.write(dump(extra))
        third = A.read(str(p), start=second.end, first_line=second.lines + 1, state=second.state)
        whole = A.read(str(p))
        assert third.extends and third.state == whole.state, extra
        n0 = whole.count - third.count
        assert [r.normal for r in third.records] == [r.normal for r in whole.records[n0:]]
        assert {i: whole.records[i].normal for i in third.revised} == third.revised
        assert {i: whole.records[i].turn.record["id"] for i in third.revised} == revised
        assert all(n.label == "gemini:superseded" for n in third.revised.values())
        p.write_bytes(p.read_bytes()[:second.end])
    stale = A.read(str(p), start=second.end, first_line=second.lines + 1, state={**second.state, "bloom": b"x"})
    assert not stale.extends  # a state this version did not write: read it all again
    p.write_bytes(dump([header()]))
    shrunk = A.read(str(p), start=second.end, first_line=second.lines + 1, state=second.state)
    assert not shrunk.extends and "shorter" in shrunk.warnings[0]


def test_the_id_filter_grows_with_the_log(tmp_path):
    """The filter of message ids seen is sized to the log: with 8,192 bits for good,
    a long session's filter said "seen" of every id and no read of it extended."""
    from opalgit.agents.gemini import read as g

    p = write(tmp_path / "long.jsonl", [header()] + [user(f"u{i}") for i in range(3000)])
    first = A.read(str(p))
    assert first.state["ids"] == 3000 and g._bloom_room(first.state["bloom"]) >= 1.5 * 3000
    with open(p, "ab") as fh:
        fh.write(dump([user("new1"), gemini("new2")]))
    second = A.read(str(p), start=first.end, first_line=first.lines + 1, state=first.state)
    assert second.extends and second.state["ids"] == 3002
    # At its room the filter still tells new ids apart (false hits well under 1 %)...
    bits = bytearray(g._bloom_size(1000))
    for i in range(g._bloom_room(bits)):
        g._bloom_add(bits, f"seen-{i}")
    assert all(g._bloom_has(bits, f"seen-{i}") for i in range(100))
    assert sum(g._bloom_has(bits, f"new-{i}") for i in range(20_000)) < 20_000 * 0.01
    # ... and past it the next read is whole, which sizes it again.
    full = {**first.state, "ids": g._bloom_room(first.state["bloom"])}
    third = A.read(str(p), start=first.end, first_line=first.lines + 1, state=full)
    assert not third.extends
    assert A.read(str(p)).state["ids"] == 3002


def test_incremental_on_legacy_json_rereads(tmp_path):
    p = tmp_path / "session-x.json"
    p.write_bytes(SMALL.read_bytes())
    first = A.read(str(p))
    second = A.read(str(p), start=first.end, first_line=first.lines + 1, state=first.state)
    assert not second.extends and second.records == []


# -------------------------------------------------------------------------- bad input


def test_empty_and_whitespace(tmp_path):
    for body in (b"", b"\n  \n"):
        p = tmp_path / "e.jsonl"
        p.write_bytes(body)
        with pytest.raises(InputError, match="empty") as exc:
            A.read(str(p))
        assert exc.value.path == str(p) and "not written anything" in exc.value.hint


def test_binary_junk(tmp_path):
    p = tmp_path / "b.jsonl"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(InputError, match="binary"):
        A.read(str(p))
    assert not A.sniff(str(p), p.read_bytes())


def test_other_agents_are_refused(tmp_path):
    with pytest.raises(InputError, match="Claude Code") as exc:
        A.read(str(CLAUDE_GENERATED))
    assert "--agent claude" in exc.value.hint and exc.value.line == 1
    codex = write(tmp_path / "rollout-2026-01-01T00-00-00-abc.jsonl", [
        {"timestamp": T, "type": "session_meta", "payload": {"id": "abc", "cwd": "/w"}},
        {"timestamp": T, "type": "response_item", "payload": {"type": "message", "role": "user", "content": []}}])
    with pytest.raises(InputError, match="Codex") as exc:
        A.read(str(codex))
    assert "--agent codex" in exc.value.hint
    for path in (CLAUDE_GENERATED, CLAUDE_DEMO, codex):
        assert not A.sniff(str(path), path.read_bytes()[:4096])
    with pytest.raises(InputError, match="no Gemini CLI records"):
        A.read(str(write(tmp_path / "n.jsonl", [{"hello": "world"}, [1, 2]])))
    doc = tmp_path / "thread.json"
    doc.write_text(json.dumps({"id": "T-1", "title": "x"}, indent=2))
    with pytest.raises(InputError, match="no Gemini CLI messages"):
        A.read(str(doc))


def test_truncated_last_line(tmp_path):
    body = dump([header(), user("u1")])
    tail = jsonl.dumps(gemini("g1", "answer"))
    p = tmp_path / "t.jsonl"
    p.write_bytes(body + tail[:25])
    result = A.read(str(p))
    assert len(result.records) == 2 and result.end == len(body) and result.lines == 2
    assert result.warnings == [f"{p}:3: incomplete last line (the agent may still be writing); it will be committed next time"]
    p.write_bytes(body + tail + b"\n")
    more = A.read(str(p), start=result.end, first_line=3, state=result.state)
    assert more.extends and [r.turn.record["id"] for r in more.records] == ["g1"] and not more.warnings


def test_garbage_middle_line_and_first_line_errors(tmp_path):
    p = tmp_path / "g.jsonl"
    p.write_bytes(dump([header(), user("u1")]) + b"{not json at all\n\n" + dump([gemini("g1")]))
    result = A.read(str(p))
    assert rendered(result) == p.read_bytes()
    assert [r.normal.label or r.normal.role for r in result.records] == [
        "gemini:header", "user", "unparseable", "blank", "assistant"]
    assert len(result.warnings) == 1 and result.warnings[0].startswith(f"{p}:3: not JSON (")
    q = tmp_path / "f.jsonl"
    q.write_bytes(b"hello world\n" + dump([header()]))
    with pytest.raises(InputError, match="first line is not JSON") as exc:
        A.read(str(q))
    assert exc.value.line == 1
    r = tmp_path / "session-broken.json"
    r.write_text('{\n  "sessionId": "x",\n  "messages": [\n')
    with pytest.raises(InputError, match="not JSON") as exc:
        A.read(str(r))
    assert exc.value.line == 4
    s = write(tmp_path / "nohead.jsonl", [user("u1"), gemini("g1")])
    assert "no session header" in A.read(str(s)).warnings[0]


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        A.read(str(tmp_path / "nope.jsonl"))
    with pytest.raises(InputError, match="folder"):
        A.read(str(tmp_path))


def test_sniff():
    for path in JSONL_FILES + DOC_FILES:
        assert A.sniff(str(path), path.read_bytes()[:4096]), path.name
    big = json.dumps({"sessionId": "s", "projectHash": "h", "messages": [user(str(i), "x" * 100) for i in range(100)]},
                     indent=2).encode()
    assert A.sniff("x.json", big[:4096])
    assert not A.sniff("x", b"") and not A.sniff("x", b"not json\n") and not A.sniff("x", b'{"a":1}\n')


def test_registry_finds_the_adapter():
    from opalgit import agents as adapters

    adapter = adapters.get("gemini")
    assert isinstance(adapter, GeminiAdapter) and adapter.title == "Gemini CLI"


# -------------------------------------------------------------------------- discovery


def _chat(folder: Path, name: str, records, mtime: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_bytes(records if isinstance(records, bytes) else dump(records))
    os.utime(p, (mtime, mtime))
    return p


def test_slug_and_hash():
    assert slugify("My Project_2") == "my-project-2" and slugify("--A..b--") == "a-b" and slugify("ü") == "project"
    assert project_hash("/tmp/harness-gemini-2apx4dn6/proj") == lines_of(GENERATED.read_bytes())[0]["projectHash"]


def test_find_sessions(tmp_path):
    home = tmp_path / "home"
    cwd = str(tmp_path / "work" / "My Proj")
    base = home / ".gemini"
    base.mkdir(parents=True)
    (base / "projects.json").write_text(json.dumps({"projects": {cwd: "my-proj", "/else": "else"}}, indent=2))
    chats = base / "tmp" / "my-proj" / "chats"
    a = _chat(chats, "session-2026-01-01T00-00-aaaaaaaa.jsonl", [header("aaaaaaaa-1"), user("u1")], 1_000)
    b = _chat(chats, "session-2026-01-02T00-00-bbbbbbbb.json",
              json.dumps({"sessionId": "bbbbbbbb-2", "projectHash": "h", "messages": [user("u1")]}, indent=2).encode(), 2_000)
    _chat(chats, "session-2026-01-03T00-00-cccccccc.jsonl", [header("cccccccc-3"),
                                                              {"$set": {"messages": [user("c", "<session_context>x")]}}], 3_000)
    _chat(chats, "session-2026-01-04T00-00-dddddddd.jsonl", b"", 4_000)
    _chat(chats, "session-2026-01-05T00-00-eeeeeeee.jsonl", [header("eeeeeeee-5", kind="subagent"), user("u")], 5_000)
    _chat(chats / "aaaaaaaa-1", "ffffffff-6.jsonl", [header("ffffffff-6", kind="subagent"), user("u")], 6_000)
    _chat(chats, "notes.jsonl", [header("gggggggg-7"), user("u")], 7_000)
    rewound = _chat(chats, "session-2026-01-08T00-00-hhhhhhhh.jsonl",
                    [header("hhhhhhhh-8"), user("u1"), {"$rewindTo": "u1"}], 8_000)
    legacy = _chat(base / "tmp" / project_hash(cwd) / "chats", "session-2025-01-01T00-00-iiiiiiii.jsonl",
                   [header("iiiiiiii-9"), user("u1")], 1_500)
    dupe = _chat(base / "tmp" / project_hash(cwd) / "chats", "session-2025-01-01T00-00-aaaaaaaa.jsonl",
                 [header("aaaaaaaa-1"), user("u1")], 500)
    _chat(base / "tmp" / "else" / "chats", "session-2026-02-01T00-00-jjjjjjjj.jsonl", [header("jjjjjjjj"), user("u")], 9_000)

    env = {"HOME": str(home)}
    found = A.find_sessions(cwd, env)
    assert [f.path for f in found] == [str(b), str(legacy), str(a)]
    assert [f.id for f in found] == ["bbbbbbbb-2", "iiiiiiii-9", "aaaaaaaa-1"] and found[0].agent == "gemini"
    assert rewound.exists() and dupe.exists()
    assert A.find_sessions(str(tmp_path / "other"), env) == []
    assert A.find_sessions(cwd, {}) == []
    # GEMINI_CLI_HOME replaces the home folder: <it>/.gemini
    moved = _chat(tmp_path / "gch" / ".gemini" / "tmp" / project_hash(cwd) / "chats",
                  "session-2026-03-01T00-00-kkkkkkkk.jsonl", [header("kkkkkkkk"), user("u")], 10)
    assert [f.path for f in A.find_sessions(cwd, {"HOME": str(home), "GEMINI_CLI_HOME": str(tmp_path / "gch")})] == [str(moved)]

    assert A.find_session("iiiiiiii-9", env).path == str(legacy)
    assert A.find_session("bbbbbbbb-2", env).path == str(b)
    assert A.find_session("jjjjjjjj", env).path.endswith("jjjjjjjj.jsonl")
    assert A.find_session("aaaaaaaa-1", env).path == str(a)  # the newer of two files with that id
    assert A.find_session("zzzz", env) is None and A.find_session("aaaaaaaa-1", {}) is None
    assert A.find_session("eeeeeeee-5", env) is None  # subagent sessions are never resumed by id


def test_read_finds_the_project_folder(tmp_path):
    cwd = "/home/me/proj"
    chats = tmp_path / ".gemini" / "tmp" / "proj" / "chats"
    p = _chat(chats, "session-2026-01-01T00-00-aaaaaaaa.jsonl", [header(phash=project_hash(cwd)), user("u1")], 1)
    assert A.read(str(p)).session.cwd is None
    (chats.parent / ".project_root").write_text(cwd)
    assert A.read(str(p)).session.cwd == cwd
    q = _chat(tmp_path / ".gemini" / "tmp" / project_hash("/x/y") / "chats", "session-b.jsonl",
              [header(phash=project_hash("/x/y")), user("u1")], 1)
    (tmp_path / ".gemini" / "projects.json").write_text(json.dumps({"projects": {"/x/y": "y"}}))
    assert A.read(str(q)).session.cwd == "/x/y"


# ------------------------------------------------------------------------------ export


def _request(turns, cwd: Path, home: Path, **kw) -> ExportRequest:
    return ExportRequest(turns=turns, session=SessionInfo(agent="x", id="src"), cwd=str(cwd), session_id=NEW_SID,
                         env={"HOME": str(home)}, now_ms=NOW, **kw)


def _turns(result: ReadResult) -> list[ExportTurn]:
    return [ExportTurn(result.records[i].turn, result.records[i].normal) for i in result.views[0].indices]


def place(res: ExportResult) -> None:
    """Write an export the way the caller does: files must be new, aux may replace."""
    for path, data in res.files:
        assert not os.path.exists(path), path
    for path, data in [*res.aux, *res.files]:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Path(path).write_bytes(data)


@pytest.fixture
def where(tmp_path):
    cwd = tmp_path / "Work Dir"
    cwd.mkdir()
    return cwd, tmp_path / "home"


def test_export_same_agent(where):
    cwd, home = where
    src = A.read(str(GENERATED))
    res = A.export(_request(_turns(src), cwd, home))
    base = home / ".gemini"
    path = base / "tmp" / "work-dir" / "chats" / f"session-2026-11-30T12-26-{NEW_SID[:8]}.jsonl"
    assert [p for p, _ in res.files] == [str(path)]
    assert res.resume == ["gemini", "--resume", NEW_SID] and res.session_id == NEW_SID
    lines = lines_of(res.files[0][1])
    assert lines[0] == {"sessionId": NEW_SID, "projectHash": project_hash(str(cwd)), "startTime": "2026-11-30T12:26:40.123Z",
                        "lastUpdated": "2026-11-30T12:26:40.123Z", "kind": "main"}
    # One line per live message: the records read() counts, plus the context message.
    live = [r.turn.record for r in src.records if r.normal.role != "meta"]
    assert [m["id"] for m in lines[2:]] == [m["id"] for m in live]
    assert lines[2:] == live and lines[1]["content"][0]["text"].startswith("<session_context>")
    rep = res.report.to_json()
    assert rep["dropped"] == {"record:superseded": 6, "tool_result:duplicate": 8}
    assert rep["converted"] == {"record:folded": 22}  # 2 headers, 20 $set lines
    assert dict(res.aux) == {
        str(base / "projects.json"): json.dumps({"projects": {str(cwd): "work-dir"}}, indent=2).encode(),
        str(base / "tmp" / "work-dir" / ".project_root"): str(cwd).encode(),
        str(base / "history" / "work-dir" / ".project_root"): str(cwd).encode(),
    }
    # The exported file reads back as one clean session.
    place(res)
    again = A.read(str(path))
    assert again.session.id == NEW_SID and again.session.cwd == str(cwd)
    assert not any(r.normal.label in ("gemini:superseded", "gemini:duplicate-result") for r in again.records)
    assert [r.normal for r in again.records if r.normal.role != "meta"] == [r.normal for r in src.records
                                                                           if r.normal.role != "meta"]
    assert A.find_session(NEW_SID, {"HOME": str(home)}).path == str(path)
    assert [f.id for f in A.find_sessions(str(cwd), {"HOME": str(home)})] == [NEW_SID]


def test_export_same_agent_legacy_json_and_repairs(where):
    cwd, home = where
    res = A.export(_request(_turns(A.read(str(LARGE))), cwd, home))
    _, msgs = cli_load(lines_of(res.files[0][1]))
    doc = json.loads(LARGE.read_text())
    assert [m["id"] for m in msgs] == [m["id"] for m in doc["messages"]]
    assert msgs[:4] == doc["messages"][:4] and msgs[4]["type"] == "gemini" and msgs[4]["content"] == doc["messages"][4]["parts"]
    assert res.report.converted["message:retyped"] == 2
    # Dangling calls (an empty result, a lone functionCall part) are answered with an error.
    nameless = {k: v for k, v in call("c0").items() if k not in ("name", "result")}
    recs = [header(), user("u1"), gemini("g1", "", [{**call("c1"), "result": None}, nameless]),
            gemini("g2", [{"functionCall": {"id": "c2", "name": "read_file", "args": {}}}]), gemini("g3", "end")]
    src = [ExportTurn(Turn.from_record("gemini", r), A.normalize(Turn.from_record("gemini", r))) for r in recs]
    src.append(ExportTurn(Turn.from_line("gemini", b"{torn"), Normal(role="meta", label="unparseable")))
    res = A.export(_request(src, cwd, home))
    msgs = lines_of(res.files[0][1])[1:]
    assert msgs[1]["toolCalls"][0]["result"][0]["functionResponse"]["response"] == {
        "error": "[opal: this tool call has no recorded result]"} and msgs[1]["toolCalls"][0]["status"] == "error"
    assert msgs[3]["type"] == "user" and msgs[3]["content"][0]["functionResponse"]["id"] == "c2"
    assert msgs[1]["toolCalls"][1]["result"][0]["functionResponse"]["name"] == "unknown"
    assert res.report.converted["tool_result:synthesized"] == 3 and res.report.dropped["record:unparseable"] == 1
    assert recs[2]["toolCalls"][0]["result"] is None  # the stored record is not touched


def test_export_cross_agent_from_claude(where):
    cwd, home = where
    src = ClaudeAdapter().read(str(CLAUDE_GENERATED))
    res = A.export(_request(_turns(src), cwd, home))
    msgs = lines_of(res.files[0][1])[1:]
    assert [m["type"] for m in msgs] == ["user"] + ["gemini"] * 3 + ["user"] + ["gemini"] * 5
    assert msgs[0]["content"] == [{"text": "TURN1: list the files in this project and show me README.md"}]
    calls = [tc for m in msgs for tc in m.get("toolCalls", [])]
    assert [tc["name"] for tc in calls] == ["run_shell_command", "read_file", "read_file", "replace", "write_file",
                                            "run_shell_command"]
    claude_calls = [b for r in src.records for b in r.normal.blocks if b["type"] == "tool_call"]
    assert [tc["id"] for tc in calls] == [b["id"] for b in claude_calls]
    for tc, b in zip(calls, claude_calls):
        assert (tc["name"], tc["args"]) == tools.convert_call("claude", "gemini", b["name"], b["input"], str(cwd))[:2]
        fr_ = tc["result"][0]["functionResponse"]
        assert fr_["id"] == tc["id"] and fr_["name"] == tc["name"] and tc["status"] == "success"
        assert isinstance(fr_["response"]["output"], str) and fr_["response"]["output"]
    assert msgs[1]["content"] == "Let me use Bash." and "toolCalls" in msgs[1]
    assert msgs[3]["content"].endswith("[turn1-done]") and "toolCalls" not in msgs[3]
    rep = res.report.to_json()
    assert rep["converted"] == {"tool_call:mapped": 6}
    assert set(rep["dropped"]) == {"record:meta:claude"}
    assert len({m["id"] for m in msgs}) == len(msgs)
    assert res.files[0][1] == A.export(_request(_turns(src), cwd, home)).files[0][1]  # deterministic


def test_export_cross_agent_reasoning_and_edge_cases(where):
    cwd, home = where
    demo = ClaudeAdapter().read(str(CLAUDE_DEMO))
    res = A.export(_request(_turns(demo), cwd, home))
    assert res.report.dropped.get("reasoning:signed", 0) >= 1
    msgs = lines_of(res.files[0][1])[1:]
    assert not any("thoughts" in m for m in msgs)
    errors = [tc for m in msgs for tc in m.get("toolCalls", []) if tc["status"] == "error"]
    assert len(errors) == 1 and "error" in errors[0]["result"][0]["functionResponse"]["response"]

    def t(role, *blocks, agent="codex", time=None):
        return ExportTurn(Turn.from_record(agent, {"x": 1}), Normal(role=role, blocks=list(blocks), time=time))

    turns = [
        t("user", {"type": "text", "text": "/compact please"}, {"type": "image", "media_type": "image/png", "data": "QQ=="}),
        t("assistant", {"type": "reasoning", "text": "hmm"}, {"type": "reasoning", "text": "sig", "signed": True},
          {"type": "tool_call", "id": "k1", "name": "exec_command", "input": {"cmd": "ls", "workdir": "/w"}},
          {"type": "tool_call", "id": "k2", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"},
          {"type": "tool_call", "id": "k3", "name": "mystery", "input": {"a": 1}}, time=1_000),
        t("tool", {"type": "tool_result", "call_id": "k1", "output": [{"type": "text", "text": "a.txt"},
                                                                       {"type": "image", "media_type": "image/png", "data": "QQ=="}]}),
        t("tool", {"type": "tool_result", "call_id": "zz", "output": "lost"}),
        t("meta"),
        t("system", {"type": "text", "text": "Summary so far"}),
        t("assistant", {"type": "text", "text": "done"}, {"type": "other", "kind": "x"},
          {"type": "image", "url": "https://example.com/a.png"}),
    ]
    res = A.export(_request(turns, cwd, home, reasoning="text"))
    msgs = lines_of(res.files[0][1])[1:]
    assert msgs[0]["content"][0] == {"text": "\u200b/compact please"}
    assert msgs[0]["content"][1] == {"inlineData": {"mimeType": "image/png", "data": "QQ=="}}
    g = msgs[1]
    assert g["thoughts"] == [{"subject": "", "description": "hmm", "timestamp": "1970-01-01T00:00:01.000Z"}]
    assert [tc["name"] for tc in g["toolCalls"]] == ["run_shell_command", "apply_patch", "mystery"]
    assert g["toolCalls"][0]["args"] == {"command": "ls", "dir_path": "/w"}
    assert g["toolCalls"][1]["args"] == {"input": "*** Begin Patch\n*** End Patch\n"}
    assert g["toolCalls"][0]["result"][1] == {"inlineData": {"mimeType": "image/png", "data": "QQ=="}}
    assert g["toolCalls"][0]["result"][0]["functionResponse"]["response"] == {"output": "a.txt"}
    assert g["toolCalls"][2]["result"][0]["functionResponse"]["response"] == {
        "error": "[opal: this tool call has no recorded result]"}
    assert msgs[2] == {"id": msgs[2]["id"], "timestamp": msgs[2]["timestamp"], "type": "user",
                       "content": [{"text": "Summary so far"}]}
    assert msgs[3]["content"] == "done"
    assert res.report.to_json()["converted"] == {
        "user_text:prefixed": 1, "reasoning:as_text": 1, "tool_call:mapped": 1, "tool_call:kept": 2,
        "tool_result:synthesized": 2, "system:as_user": 1}
    assert res.report.to_json()["dropped"] == {"reasoning:signed": 1, "tool_result:orphan": 1, "record:meta:codex": 1,
                                               "content:other": 1, "image:unreadable": 1}
    res = A.export(_request(turns[:2], cwd, home))
    assert res.report.dropped["reasoning:foreign"] == 1 and "thoughts" not in lines_of(res.files[0][1])[2]


def test_tool_mapping_uses_gemini_0_61_schemas():
    """tools.render_call/parse_call speak the 0.61 tool schemas (and still parse older ones)."""
    cc = tools.convert_call
    assert cc("claude", "gemini", "Read", {"file_path": "/w/a", "offset": 5, "limit": 10}, "/w")[:2] == (
        "read_file", {"file_path": "/w/a", "start_line": 5, "end_line": 14})
    assert cc("claude", "gemini", "Edit", {"file_path": "/w/a", "old_string": "x", "new_string": "y",
                                           "replace_all": True}, "/w")[1]["allow_multiple"] is True
    assert cc("claude", "gemini", "Grep", {"pattern": "p", "path": "/w"}, "/w")[:2] == (
        "grep_search", {"pattern": "p", "dir_path": "/w"})
    assert cc("claude", "gemini", "LS", {"path": "/w"}, "/w")[:2] == ("list_directory", {"dir_path": "/w"})
    assert cc("gemini", "claude", "read_file", {"file_path": "/w/a", "start_line": 5, "end_line": 14}, "/w")[:2] == (
        "Read", {"file_path": "/w/a", "offset": 5, "limit": 10})
    assert cc("gemini", "claude", "replace", {"file_path": "/w/a", "old_string": "x", "new_string": "y",
                                              "allow_multiple": True}, "/w")[1]["replace_all"] is True
    for args in ({"command": "ls", "dir_path": "/w"}, {"command": "ls", "directory": "/w"}):
        assert cc("gemini", "codex", "run_shell_command", args, "/x")[:2] == ("exec_command", {"cmd": "ls", "workdir": "/w"})


def test_export_project_registration(tmp_path):
    home = tmp_path / "home"
    base = home / ".gemini"
    turns = _turns(A.read(str(V040)))
    cwd = tmp_path / "a" / "proj"
    cwd.mkdir(parents=True)
    # Registered: that slug, nothing else written.
    base.mkdir(parents=True)
    (base / "projects.json").write_text(json.dumps({"projects": {str(cwd): "mine"}}, indent=2))
    res = A.export(_request(turns, cwd, home))
    assert res.files[0][0].startswith(str(base / "tmp" / "mine" / "chats" / "session-")) and res.aux == []
    # Unregistered with a slug taken by another project (in the registry and on disk).
    other = tmp_path / "b" / "proj"
    (base / "tmp" / "proj-1").mkdir(parents=True)
    (base / "tmp" / "proj-1" / ".project_root").write_text("/somewhere/else/proj")
    (base / "projects.json").write_text(json.dumps({"projects": {"/x/proj": "proj"}}, indent=2))
    other.mkdir(parents=True)
    res = A.export(_request(turns, other, home))
    assert "/tmp/proj-2/chats/" in res.files[0][0]
    assert json.loads(dict(res.aux)[str(base / "projects.json")]) == {"projects": {"/x/proj": "proj", str(other): "proj-2"}}
    # A slug folder already marked for this project is reused and registered.
    (base / "tmp" / "mine-too").mkdir()
    (base / "tmp" / "mine-too" / ".project_root").write_text(str(other))
    res = A.export(_request(turns, other, home))
    assert "/tmp/mine-too/chats/" in res.files[0][0] and str(base / "tmp" / "mine-too" / ".project_root") not in dict(res.aux)
    # Unregistered with a legacy hash folder: write there (the CLI migrates it).
    third = tmp_path / "c" / "three"
    third.mkdir(parents=True)
    (base / "tmp" / project_hash(str(third)) / "chats").mkdir(parents=True)
    res = A.export(_request(turns, third, home))
    assert res.files[0][0].startswith(str(base / "tmp" / project_hash(str(third)) / "chats")) and res.aux == []
    assert any("legacy folder" in n for n in res.report.notes)
    # A corrupt registry is replaced, as the CLI itself does, and said so.
    (base / "projects.json").write_text("{oops")
    res = A.export(_request(turns, tmp_path / "a" / "proj", home))
    assert json.loads(dict(res.aux)[str(base / "projects.json")]) == {"projects": {str(cwd): "proj"}}
    assert any("replaced" in n for n in res.report.notes)
    with pytest.raises(InputError, match="HOME"):
        A.export(ExportRequest(turns=turns, session=None, cwd=str(cwd), session_id=NEW_SID, env={}, now_ms=NOW))


# ------------------------------------------------------------------- property tests

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20) | st.sampled_from(
    ["😀 emoji", "naïve café", "日本語", "line\nbreak", "quote \" \\", "\u2028sep", "", "/cmd", "<session_context>x"])
_scalar = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | _text
_extra = st.dictionaries(st.text("abcdef", min_size=1, max_size=4).map(lambda k: "x_" + k), _scalar, max_size=2)
_op = st.sampled_from(["user", "gemini", "tool", "dup", "fr", "replace", "set", "checkpoint", "rewind", "info", "blank"])


@st.composite
def gemini_sessions(draw):
    lines: list = [header(draw(st.sampled_from([SID, "x"])))]
    written: list[str] = []
    calls: list[str] = []
    for n in range(draw(st.integers(0, 16))):
        op = draw(_op)
        mid = f"m{n}"
        extra = draw(_extra)
        if op == "user":
            rec = {**user(mid, draw(_text)), **extra}
        elif op == "gemini":
            rec = {**gemini(mid, draw(_text)), **extra}
        elif op == "tool":
            cid = f"c{n}"
            calls.append(cid)
            rec = {**gemini(mid, draw(_text), [call(cid, output=draw(_text))]), **extra}
        elif op in ("dup", "fr"):
            cid = draw(st.sampled_from(calls)) if calls and op == "dup" else f"c{n}"
            rec = fr(mid, cid, output=draw(_text))
        elif op == "replace" and written:
            target = draw(st.sampled_from(written))
            old = [m for m in lines if isinstance(m, dict) and m.get("id") == target][-1]
            rec = {**old, "tokens": {"total": n}}
        elif op == "set":
            rec = {"$set": {"lastUpdated": T, **extra}}
        elif op == "checkpoint":
            current = cli_load(lines)[1]
            keep = current[draw(st.integers(0, len(current))):]
            rec = {"$set": {"messages": copy.deepcopy(keep) + ([user(f"s{n}", "summary")] if draw(st.booleans()) else []),
                            "lastUpdated": T}}
        elif op == "rewind":
            rec = {"$rewindTo": draw(st.sampled_from(written)) if written and draw(st.booleans()) else "ghost"}
        elif op == "info":
            rec = {"id": mid, "timestamp": T, "type": "info", "content": draw(_text)}
        elif op == "blank":
            rec = b""
        else:
            continue
        if isinstance(rec, dict) and "id" in rec:
            written.append(rec["id"])
        lines.append(rec)
    return lines


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(gemini_sessions(), st.data())
def test_property_round_trip_and_export(lines, data):
    check_round_trip_and_export(lines, data.draw(st.integers(1, len(lines))))


def check_round_trip_and_export(lines: list, cut: int) -> None:
    """The property: a session's records render it back (the same log to the CLI when a
    batch is split), count each final message once, export exactly the final state, and
    read in two parts at ``cut`` give the same records."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session-2026-01-01T00-00-aaf40a27.jsonl"
        body = dump(lines)
        path.write_bytes(body)
        result = A.read(str(path))
        if len({r.line for r in result.records}) == len(result.records):
            assert rendered(result) == body
        else:
            # A batch split into a record per message (issue 18, 6): the same log to the
            # CLI (the batch without them, then them as message lines), not the same bytes.
            assert cli_load(cli_lines(rendered(result))) == cli_load([x for x in lines if isinstance(x, dict)])
        assert result.warnings == []
        for r in result.records:
            r.normal.check()
        # Every message of the final state is counted by exactly one record.
        final = [m for m in cli_load([x for x in lines if isinstance(x, dict)])[1]]
        live_lines = [r.turn.record["id"] for r in result.records
                      if r.turn.has_record and "id" in r.turn.record and r.normal.label != "gemini:superseded"]
        assert len(live_lines) == len(set(live_lines))
        assert set(live_lines) <= {m["id"] for m in final}
        # Exporting writes exactly the final state, minus duplicated results.
        res = A.export(_request(_turns(result), Path(tmp), Path(tmp) / "home"))
        meta, exported = cli_load(lines_of(res.files[0][1]))
        assert meta["sessionId"] == NEW_SID
        assert exported == without_duplicate_results(final)
        # Reading in two parts gives the same records; an extension also the same view and state.
        split = Path(tmp) / "split"
        split.mkdir()
        first, second = _split_read(path, cut, split)
        # Where the later lines change what an earlier one is (a $set batch split into a
        # record per message while it held them last, issue 18 6), the read says it does
        # not extend and the commit reads the whole file again.
        if second.extends:
            assert [r.turn for r in first.records + second.records] == [r.turn for r in result.records]
        if second.extends:
            # (by line: a split batch in the first part is more records than lines)
            assert [r.normal for r in second.records] == [r.normal for r in result.records if r.line > cut]
            assert second.state == result.state


def _batch(*msgs, **extra):
    return {"$set": {"messages": list(msgs), "lastUpdated": T, **extra}}


_BLANKS = [user(f"m{i}", "") for i in range(4)]
_M0 = {**_BLANKS[0], "tokens": {"total": 5}}
#: Sessions test_property_round_trip_and_export failed on, shrunk (a split batch: the
#: records render the same log to the CLI, not the same bytes, and the oracle compared
#: the batch's own list, which the CLI does not return, and could not parse the blank line).
SPLIT_SESSIONS = {
    "blank-line": [header(), b"", _batch(user("s1", "a"), user("s2", "b"))],
    "checkpoints-and-replace": [header(), *_BLANKS, _batch(*_BLANKS, user("s4", "summary")), _M0,
                                _batch(_M0, *_BLANKS[1:], user("s4", "summary"), user("s6", "summary"))],
    "blank-and-checkpoints": [header(), *_BLANKS, b"", _batch(*_BLANKS, user("s6", "summary")), _M0,
                              _batch(_M0, *_BLANKS[1:], user("s6", "summary"), user("s8", "summary"))],
}


@pytest.mark.parametrize("name", SPLIT_SESSIONS)
def test_round_trip_of_split_batches(name):
    lines = SPLIT_SESSIONS[name]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.jsonl"
        path.write_bytes(dump(lines))
        result = A.read(str(path))
        assert len(result.records) > len(lines)  # a batch is split: the case under test
        # Every blank line is kept as a record of its own, so the rendered log has it too.
        assert rendered(result).count(b"\n\n") == dump(lines).count(b"\n\n")
    for cut in range(1, len(lines) + 1):
        check_round_trip_and_export(lines, cut)


def test_a_batch_after_a_memory_scratchpad_stays_whole(tmp_path):
    """The CLI drops a memoryScratchpad on resume once a message line follows its $set
    (memoryScratchpadIsStale); a message inside a batch does not count. Split into
    message lines, such a batch would make the scratchpad stale: it stays one record."""
    two = (user("s1", "a"), user("s2", "b"))
    for lines in ([header(), _batch(*two, memoryScratchpad="notes")],
                  [header(), {"$set": {"memoryScratchpad": "notes"}}, _batch(*two)]):
        p = write(tmp_path / "s.jsonl", lines)
        result = A.read(str(p))
        assert rendered(result) == p.read_bytes()
        assert [r.normal.role for r in result.records][-1] == "system"
        check_round_trip_and_export(lines, 1)
    # Without a scratchpad the same batch is a record per message.
    p = write(tmp_path / "s.jsonl", [header(), _batch(*two)])
    assert [r.normal.role for r in A.read(str(p)).records] == ["meta", "meta", "user", "user"]


# --------------------------------------------------- the real Gemini CLI (pytest -m clients)


def _expected_history(src: ReadResult, agent: str, cwd: str) -> list[tuple]:
    from tests.clients.history import canonical_args

    out: list[tuple] = []
    for i in src.views[0].indices:
        n = src.records[i].normal
        if n.role == "user":
            out += [("user", b["text"]) for b in n.blocks if b["type"] == "text"]
        elif n.role in ("assistant", "tool"):
            for b in n.blocks:
                if b["type"] == "text" and n.role == "assistant" and b["text"].strip():
                    out.append(("assistant", b["text"]))
                elif b["type"] == "tool_call":
                    name, args, _ = tools.convert_call(agent, "gemini", b["name"], b["input"], cwd)
                    out.append(("tool_call", name, canonical_args(args)))
                elif b["type"] == "tool_result":
                    text = b["output"] if isinstance(b["output"], str) else "\n".join(
                        x.get("text", "") for x in b["output"] if x.get("type") == "text")
                    out.append(("tool_result", b["call_id"], text))
    return out


def _resume_exported(tmp_path, src: ReadResult, agent: str, prepare=None):
    from tests.clients import harness
    from tests.clients.history import history_of
    from tests.clients.mockservers import GeminiMock, Reply

    harness.require_client("gemini")
    root = harness.make_root(tmp_path)
    if prepare:
        prepare(root)
    sid = str(uuid.uuid4())
    req = ExportRequest(turns=_turns(src), session=src.session, cwd=str(root.project), session_id=sid,
                        env={"HOME": str(root.home)}, now_ms=NOW)
    res = A.export(req)
    place(res)
    prompt = "TURN3: what did we do so far?"
    with GeminiMock([Reply("Here is what we did. [turn3-done]")]) as srv:
        run = harness.run_gemini(root, srv.port, prompt, resume=sid, server=srv, timeout=90)
    assert run.ok, run.describe()
    assert srv.errors == [] and srv.exhausted == 0, srv.errors
    sent = history_of(run.requests[0].body, "gemini", collapse_duplicates=False)
    expected = _expected_history(src, agent, str(root.project)) + [("user", prompt)]
    # Gemini CLI sends a stored call id "<tool>__<id>" as "<id>".
    unprefixed = [(x[0], x[1].split("__", 1)[-1], x[2]) if x[0] == "tool_result" else x for x in expected]
    assert [tuple(x) for x in sent] == unprefixed, run.describe()
    calls = [x for x in sent if x[0] == "tool_call"]
    results = [x for x in sent if x[0] == "tool_result"]
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    # The CLI appended the new turn to the exported file (or to its copy, when it migrated
    # a legacy folder); find_session picks that one and it still reads cleanly.
    found = A.find_session(sid, {"HOME": str(root.home)})
    assert found is not None
    after = A.read(found.path)
    assert after.warnings == [] and after.session.id == sid
    assert rendered(after) == Path(found.path).read_bytes()
    live = [r.normal for r in after.records if r.normal.role in ("user", "assistant")]
    assert live[-2].blocks == [{"type": "text", "text": prompt}]
    assert live[-1].blocks[-1] == {"type": "text", "text": "Here is what we did. [turn3-done]"}
    assert sum(n.role == "user" for n in live) == sum(x[0] == "user" for x in expected)
    return res, root


@pytest.mark.clients
def test_real_gemini_resumes_same_agent_export(tmp_path):
    src = A.read(str(GENERATED))
    _, root = _resume_exported(tmp_path, src, "gemini")
    assert len([x for x in _expected_history(src, "gemini", "") if x[0] == "tool_call"]) == 6
    assert json.loads((root.home / ".gemini" / "projects.json").read_text())["projects"] == {str(root.project): "proj"}


@pytest.mark.clients
def test_real_gemini_resumes_claude_session(tmp_path):
    src = ClaudeAdapter().read(str(CLAUDE_GENERATED))
    res, _ = _resume_exported(tmp_path, src, "claude")
    assert res.report.converted == {"tool_call:mapped": 6}


@pytest.mark.clients
def test_real_gemini_finds_export_in_legacy_hash_folder(tmp_path):
    def legacy(root):
        (root.home / ".gemini" / "tmp" / hashlib.sha256(str(root.project).encode()).hexdigest() / "chats").mkdir(parents=True)

    res, root = _resume_exported(tmp_path, A.read(str(V040)), "gemini", prepare=legacy)
    assert res.aux == [] and project_hash(str(root.project)) in res.files[0][0]


# ------------------------------------------------------------------ streaming read

from opalgit.agents.gemini import log as gemini_log  # noqa: E402

_ids = st.sampled_from(["m1", "m2", "m3", "m4", "c1", ""])
_calls = st.lists(st.fixed_dictionaries({"id": _ids, "name": st.just("run")},
                                        optional={"result": st.sampled_from([None, [{"ok": 1}], "done"])}),
                  max_size=3)
_fr_content = st.lists(st.fixed_dictionaries({"functionResponse": st.fixed_dictionaries({"id": _ids})}),
                       min_size=1, max_size=2)
_message = st.fixed_dictionaries(
    {"id": _ids, "type": st.sampled_from(["user", "gemini", "info", "model"])},
    optional={"content": st.one_of(st.text(max_size=8), _fr_content, st.just([{"text": "hi"}])),
              "toolCalls": st.one_of(_calls, st.just("x")), "timestamp": st.just(T)},
)
_record = st.one_of(
    _message,
    st.fixed_dictionaries({"$rewindTo": _ids}),
    st.fixed_dictionaries({"$set": st.fixed_dictionaries(
        {"lastUpdated": st.just(T)}, optional={"messages": st.lists(_message, max_size=4), "summary": st.text(max_size=5)})}),
    st.fixed_dictionaries({"$set": st.just([])}),
    st.fixed_dictionaries({"sessionId": st.just(SID), "projectHash": st.just("h" * 64)},
                          optional={"messages": st.lists(_message, max_size=3)}),
    st.fixed_dictionaries({"role": st.sampled_from(["user", "model"]), "parts": st.just([{"text": "legacy"}])}),
    st.fixed_dictionaries({"note": st.text(max_size=5)}),
    st.just(gemini_log._SKIP),
)


@given(st.lists(_record, max_size=25), st.lists(_ids, max_size=3))
@settings(max_examples=400, deadline=None)
def test_replaying_light_values_is_replaying_the_log(values, answered):
    """A streaming read keeps gemini_log.light of each line and replays that: the
    entries, the answered calls and every line's normal must be what the whole log gives."""
    full = gemini_log._replay(values, answered)
    lit = gemini_log._replay([gemini_log.light(v) if v is not gemini_log._SKIP else v for v in values], answered)
    assert [(e.key, e.src, e.dup) for e in lit.entries] == [(e.key, e.src, e.dup) for e in full.entries]
    assert (lit.ids, lit.answered) == (full.ids, full.answered)
    credited = gemini_log.credits(lit)
    assert [gemini_log.normal_at(i, v, credited) for i, v in enumerate(values)] == gemini_log._normals(values, full)


@pytest.mark.parametrize("path", JSONL_FILES, ids=lambda p: p.name[:28])
def test_a_read_keeps_no_record_and_gives_each_its_replayed_view(path):
    res = A.read(str(path))
    assert res.lazy
    values = [json.loads(line) if line.strip() else gemini_log._SKIP for line in path.read_bytes().splitlines()]
    want = gemini_log._normals(values, gemini_log._replay(values))
    got = [r.normal for r in res.iter_records()]
    assert [g for g, v in zip(got, values) if v is not gemini_log._SKIP] == [
        w for w, v in zip(want, values) if v is not gemini_log._SKIP]
    assert res.lazy and [r.normal for r in res.iter_records()] == got


def test_a_log_rewritten_between_the_passes_is_refused(tmp_path):
    body = GENERATED.read_bytes()
    p = tmp_path / "session.jsonl"
    p.write_bytes(body)
    res = A.read(str(p))
    p.write_bytes(body.replace(b'"type":"user"', b'"type":"USER"', 1))
    with pytest.raises(InputError) as err:
        list(res.iter_records())
    assert "changed while it was being read" in str(err.value)


# ------------------------------------------------------------- issue 18, real sessions

REAL = FIX / "real"


def test_rewind_to_a_reply_holding_its_results_does_not_warn(tmp_path):
    """A real JSONL session (Mai0313/VibeCodingTracker): a gemini message keeps its calls'
    results in toolCalls[].result, so a rewind to it leaves no call unanswered and says
    nothing about an interrupted call (issue 18, 6)."""
    from tests.conftest import opal

    project = tmp_path / "p"
    project.mkdir()
    import subprocess

    subprocess.run(["git", "init", "-q", str(project)], check=True)
    assert opal("init", cwd=project).returncode == 0
    src = REAL / "vibecodingtracker" / "gemini.jsonl"
    assert opal("commit", "--file", str(src), "--agent", "gemini", "-m", "g", cwd=project).returncode == 0
    turns = json.loads(opal("log", "--turns", "--json", cwd=project).stdout)["turns"]
    answered = [t for t in turns if t["kind"] == "tool_call"]
    assert answered, "the file has replies with tool calls"
    shown = json.loads(opal("show", f"HEAD:{answered[0]['turn']}", "--json", cwd=project).stdout)
    calls = {b["id"] for b in shown["blocks"] if b["type"] == "tool_call"}
    assert calls and calls == {b["call_id"] for b in shown["blocks"] if b["type"] == "tool_result"}
    proc = opal("rewind", "--to", f"HEAD:{answered[0]['turn']}", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "without its result" not in proc.stderr + proc.stdout


@pytest.mark.parametrize("name", ["large.jsonl", "schema_drift.jsonl"])
def test_codex_calls_without_ids_keep_their_results(name, tmp_path):
    """Real older Codex rollouts (jazzyalex/agent-sessions) pair a call and its result by
    order, with no call id: the Gemini export writes the real result into the call's
    toolCalls entry instead of orphaning it and synthesizing an error (issue 18, 9)."""
    from opalgit.agents.codex.adapter import CodexAdapter

    src = CodexAdapter().read(str(ROOT / "tests" / "fixtures" / "codex" / "agent-sessions" / name))
    turns = [ExportTurn(r.turn, r.normal) for r in src.records]
    res = A.export(ExportRequest(turns=turns, session=src.session, cwd=str(tmp_path), session_id=NEW_SID,
                                 env={"HOME": str(tmp_path)}, now_ms=NOW))
    assert "tool_result:synthesized" not in res.report.converted and "tool_result:orphan" not in res.report.dropped
    msgs = [json.loads(x) for x in res.files[0][1].splitlines()[1:]]
    entries = [tc for m in msgs for tc in m.get("toolCalls") or []]
    want = [b["output"] for r in src.records for b in r.normal.blocks if b["type"] == "tool_result"]
    assert len(entries) == 1 and len(want) == 1
    got = entries[0]["result"][0]["functionResponse"]["response"]
    assert entries[0]["status"] == "success" and got == {"output": want[0] if isinstance(want[0], str) else got["output"]}
    assert NO_RESULT_TEXT not in json.dumps(entries)


NO_RESULT_TEXT = "has no recorded result"


def test_session_spread_over_files_after_resume_is_read_from_its_conversation(tmp_path):
    """gemini-cli #28036: ``gemini --resume`` writes a new file with the same sessionId that
    holds only the header and the ``<session_context>`` message, while the conversation
    goes on in the original. The session opal finds, by id or by folder, is the real
    session (Mai0313/VibeCodingTracker), not the newer stub (issue 18, 6)."""
    src = REAL / "vibecodingtracker" / "gemini.jsonl"
    data = src.read_bytes()
    head = json.loads(data.split(b"\n", 1)[0])
    cwd = str(tmp_path / "proj")
    os.makedirs(cwd)
    chats = tmp_path / "home" / ".gemini" / "tmp" / project_hash(cwd) / "chats"
    chats.mkdir(parents=True)
    original = chats / f"session-2026-04-23T12-52-{head['sessionId'][:8]}.jsonl"
    original.write_bytes(data)
    stub = chats / f"session-2026-04-23T13-49-{head['sessionId'][:8]}.jsonl"
    stub.write_bytes(dump([dict(head, startTime="2026-04-23T13:49:00.000Z"),
                           user("ctx-1", "<session_context>\nThis is the Gemini CLI. ...</session_context>")]))
    os.utime(original, (1_776_948_000, 1_776_948_000))
    os.utime(stub, (1_776_949_000, 1_776_949_000))  # the stub is the newer file
    env = {"HOME": str(tmp_path / "home")}
    assert A.find_session(head["sessionId"], env).path == str(original)
    assert [f.path for f in A.find_sessions(cwd, env)] == [str(original)]


def test_set_batches_mixed_with_bare_message_records(tmp_path):
    """Gemini CLI 0.58 writes messages both as ``{"$set": {"messages": [...]}}`` batches and
    as bare message lines after them: the session is the batch plus every line after it,
    as the CLI's loadConversationRecord replays it (issue 18, 6). The real session
    (Mai0313/VibeCodingTracker) with its first messages folded into one batch reads as
    the same conversation."""
    src = REAL / "vibecodingtracker" / "gemini.jsonl"
    lines = [json.loads(x) for x in src.read_bytes().splitlines()]
    first_user = [i for i, r in enumerate(lines) if r.get("type") == "user"][1]  # a batch of several turns
    batch = [r for r in lines[1:first_user + 1] if "id" in r and "type" in r]
    rest = lines[first_user + 1:]
    mixed = write(tmp_path / "mixed.jsonl", [lines[0], {"$set": {"messages": batch}}, *rest])
    want = [(r.normal.role, r.normal.blocks) for r in A.read(str(src)).records if r.normal.role != "meta"]
    read = A.read(str(mixed)).records
    got = [(r.normal.role, r.normal.blocks) for r in read if r.normal.role != "meta"]
    assert got == want
    # The batch line is a record per message, one turn each (was one 'system' turn).
    from_batch = [r.normal.role for r in read if r.line == 2 and r.normal.role != "meta"]
    assert len(from_batch) >= 2 and "system" not in from_batch, from_batch
    assert len(got) > len(from_batch)


@pytest.mark.parametrize("rel, agent, groups", [
    ("codex/real/vibecodingtracker/codex.jsonl", "codex", 0),
    ("codex/real/codex-session-view/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl", "codex", 0),
    ("claude/real/claude-code-log/minimal_showcase/55550000-0000-4000-8000-000000000001.jsonl", "claude", 1),
    ("claude/claude-code-viewer/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl", "claude", 2),
])
def test_replies_keep_their_calls_in_gemini_exports(rel, agent, groups, tmp_path):
    """Real sessions to Gemini: a reply's several calls are one message with several
    toolCalls, each with its result, and a call made after earlier results (a reply of
    its own) is a message of its own, never merged into the previous one (issue 18, 9)."""
    from opalgit.agents import get

    src = get(agent).read(str(ROOT / "tests" / "fixtures" / rel))
    turns = [ExportTurn(src.records[i].turn, src.records[i].normal) for i in src.views[0].indices]
    res = A.export(ExportRequest(turns=turns, session=src.session, cwd=str(tmp_path), session_id=NEW_SID,
                                 env={"HOME": str(tmp_path)}, now_ms=NOW))
    msgs = [json.loads(x) for x in res.files[0][1].splitlines()[1:]]
    multi = [m for m in msgs if len(m.get("toolCalls") or []) > 1]
    assert len(multi) == groups
    assert all(tc.get("result") for m in multi for tc in m["toolCalls"])
    assert "tool_result:synthesized" not in res.report.converted


def test_a_reply_after_a_call_left_unanswered_is_a_message_of_its_own(tmp_path):
    """Two Claude replies (two message ids), the first's call never answered: in Gemini
    they are two messages, not one message of two parallel calls (edge_cases.jsonl of
    daaain/claude-code-log showed the merge; issue 18, 9)."""
    def reply(mid, cid, cmd):
        rec = {"type": "assistant", "uuid": f"u-{mid}", "message": {"id": mid, "role": "assistant", "content": [
            {"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": cmd}}]}}
        return ExportTurn(Turn.from_record("claude", rec), Normal(role="assistant", blocks=[
            {"type": "tool_call", "id": cid, "name": "Bash", "input": {"command": cmd}}]))

    answer = ExportTurn(Turn.from_record("claude", {"type": "user", "uuid": "u-r2"}), Normal(role="tool", blocks=[
        {"type": "tool_result", "call_id": "toolu_2", "name": "Bash", "output": "two", "is_error": False}]))
    turns = [reply("msg_1", "toolu_1", "echo one"), reply("msg_2", "toolu_2", "echo two"), answer]
    res = A.export(ExportRequest(turns=turns, session=None, cwd=str(tmp_path), session_id=NEW_SID,
                                 env={"HOME": str(tmp_path)}, now_ms=NOW))
    msgs = [json.loads(x) for x in res.files[0][1].splitlines()[1:]]
    assert [[tc["id"] for tc in m["toolCalls"]] for m in msgs] == [["toolu_1"], ["toolu_2"]]
    assert msgs[1]["toolCalls"][0]["result"][0]["functionResponse"]["response"] == {"output": "two"}
    assert res.report.converted.get("tool_result:synthesized") == 1  # the one call the source left open


def test_a_reply_after_an_empty_user_turn_is_a_message_of_its_own(tmp_path):
    """Replies without ids (a line stored as bytes, a hand-made file) parted by a user
    turn that holds nothing the model sees: still two messages (edge_cases.jsonl)."""
    def reply(cid):
        return ExportTurn(Turn.from_line("claude", b'{"type": "assistant"}'), Normal(role="assistant", blocks=[
            {"type": "tool_call", "id": cid, "name": "Bash", "input": {"command": "true"}}]))

    empty = ExportTurn(Turn.from_line("claude", b'{"type": "user"}'), Normal(role="user", blocks=[]))
    res = A.export(ExportRequest(turns=[reply("toolu_1"), empty, reply("toolu_2")], session=None, cwd=str(tmp_path),
                                 session_id=NEW_SID, env={"HOME": str(tmp_path)}, now_ms=NOW))
    msgs = [json.loads(x) for x in res.files[0][1].splitlines()[1:]]
    assert [[tc["id"] for tc in m["toolCalls"]] for m in msgs] == [["toolu_1"], ["toolu_2"]]

"""Smoke test of the benchmark suite: ``python -m bench --quick`` runs every benchmark.

It asserts that the suite runs and reports every row; it asserts no time and no
ratio (those are for docs/performance.md, measured on a quiet machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.suite import ROW_IDS
from tests.conftest import ROOT


def test_quick_bench_reports_every_row(tmp_path):
    out = tmp_path / "results.json"
    md = tmp_path / "results.md"
    p = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out), "--markdown", str(md)],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    data = json.loads(out.read_text())
    rows = {r["id"]: r for r in data["rows"]}
    missing = [r for r in ROW_IDS if r not in rows]
    assert not missing, f"rows missing: {missing}"
    for rid in ROW_IDS:
        assert rows[rid]["status"] in ("ok", "MISS", "info", "n/a"), rows[rid]
    assert data["config"]["quick"] is True
    # The rows measured through the command server, and the server stopped at the end.
    for rid in ("incremental.cold", "read.log.served", "hooks.served"):
        assert rows[rid]["status"] == "info", rows[rid]
    assert rows["incremental"]["extra"]["server"] is True
    assert data["command_servers"]
    for pid in data["command_servers"]:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    assert data["machine"]["cores"]
    # The table is printed and written as Markdown too.
    for rid in ROW_IDS:
        assert rid in p.stdout
        assert f"| {rid} |" in md.read_text()


def test_generator_is_deterministic_and_valid(tmp_path):
    from bench import generate as gen

    for agent in gen.AGENTS:
        a = gen.generate(agent, str(tmp_path / f"a-{agent}.jsonl"), size=64 * 1024, seed=7)
        gen.generate(agent, str(tmp_path / f"b-{agent}.jsonl"), size=64 * 1024, seed=7)
        assert (tmp_path / f"a-{agent}.jsonl").read_bytes() == (tmp_path / f"b-{agent}.jsonl").read_bytes()
        assert a.bytes >= 64 * 1024 and a.turns > 0 and a.tool_calls > 0
        for line in (tmp_path / f"a-{agent}.jsonl").read_bytes().splitlines():
            assert gen.dumps(json.loads(line)) == line  # compact JSON, as the agents write it


def test_every_shape_is_deterministic_and_valid(tmp_path):
    """The memory rows' session shapes: each its own bytes, the same twice, compact
    JSON, one uuid chain; the shapes show what they are named for."""
    from bench import generate as gen

    seen = {}
    for profile in gen.PROFILES:
        a = gen.generate("claude", str(tmp_path / f"a-{profile}.jsonl"), size=400 * 1024, seed=7, profile=profile)
        gen.generate("claude", str(tmp_path / f"b-{profile}.jsonl"), size=400 * 1024, seed=7, profile=profile)
        data = (tmp_path / f"a-{profile}.jsonl").read_bytes()
        assert data == (tmp_path / f"b-{profile}.jsonl").read_bytes()
        assert a.bytes >= 400 * 1024 and a.tool_calls > 0
        uuids: set = set()
        for line in data.splitlines():
            rec = json.loads(line)
            assert gen.dumps(rec) == line
            if "uuid" in rec:
                assert rec["parentUuid"] is None or rec["parentUuid"] in uuids
                uuids.add(rec["uuid"])
        seen[profile] = data
    assert len(set(seen.values())) == len(gen.PROFILES)
    assert seen["reads"].count("\u2192".encode()) > seen["realistic"].count("\u2192".encode())
    assert b'"type":"image"' in seen["images"] and b'"media_type":"image/png"' in seen["images"]
    # Parallel calls: tool_use records of one message in a row, then their results.
    recs = [json.loads(x) for x in seen["parallel"].splitlines()]
    runs = [0]
    for r in recs:
        blocks = r.get("message", {}).get("content") if r.get("type") == "assistant" else None
        if blocks and blocks[0].get("type") == "tool_use":
            runs[-1] += 1
        else:
            runs.append(0)
    assert max(runs) >= 3
    assert max(len(x) for x in seen["huge"].splitlines()) > 8 << 20


def test_claude_chain_and_turn_marks(tmp_path):
    from bench import generate as gen

    path = tmp_path / "s.jsonl"
    st = gen.generate("claude", str(path), turns=120, seed=3, marks=(100,))
    assert st.turns == 120
    data = path.read_bytes()
    prev = None
    turns_at_mark = 0
    for line in data[: st.marks[100]].splitlines():
        rec = json.loads(line)
        if rec.get("type") in ("user", "assistant"):
            turns_at_mark += 1
    assert turns_at_mark == 100
    for line in data.splitlines():
        rec = json.loads(line)
        if "uuid" in rec:
            assert rec["parentUuid"] == prev  # one linear uuid/parentUuid chain
            prev = rec["uuid"]
    gen.continue_claude(str(path), turns=10, seed=9, session_id=st.session_id, parent_uuid=prev, cwd=st.cwd)
    tail = [json.loads(x) for x in path.read_bytes()[len(data):].splitlines()]
    assert sum(1 for r in tail if r.get("type") in ("user", "assistant")) == 10
    assert next(r for r in tail if "uuid" in r)["parentUuid"] == prev

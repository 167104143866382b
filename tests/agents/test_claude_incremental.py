"""The incremental Claude read on parallel tool calls (issue 18, 4 of what was left).

Claude Code 2.1.x writes a reply of several calls as one line per content block and
each call's result under its own call's line: every result but the last is a sibling
leaf of the uuid tree, which Claude Code's loader reattaches to the conversation. A
commit that finds such lines appended after the last one used to read the whole file
again; it now reattaches them from what the state remembers of the tail, and yields
exactly the view and state a whole read gives. Compared at every line of genuine
sessions (tests/fixtures/claude/generated/structures, made by the real client) and of
a generated one of the bench's shape.
"""

from __future__ import annotations

import os
import sys

import pytest

from opalgit.agents.claude import read as claude_mod
from opalgit.agents.claude.adapter import ClaudeAdapter
from tests.conftest import FIXTURES, ROOT

A = ClaudeAdapter()
STRUCT = os.path.join(FIXTURES, "claude", "generated", "structures")
GENUINE = [os.path.join(STRUCT, s, f) for s in ("parallel", "compact", "subagent")
           for f in sorted(os.listdir(os.path.join(STRUCT, s))) if f.endswith(".jsonl")]
KEYS = ("leaf", "tail", "desc", "last", "groups", "replies")


def _generated(tmp_path, turns: int = 60) -> str:
    sys.path.insert(0, ROOT)
    from bench import generate as gen

    path = str(tmp_path / "parallel.jsonl")
    gen.generate("claude", path, turns=turns, seed=3, profile="parallel")
    return path


def _cuts(data: bytes) -> list[int]:
    return [i + 1 for i, b in enumerate(data) if b == 10][:-1]


def _compare_every_cut(src: str, tmp_path) -> tuple[int, int]:
    data = open(src, "rb").read()
    live = tmp_path / os.path.basename(src)
    live.write_bytes(data)
    whole = A.read(str(live))
    want = (list(whole.views[0].indices), len(whole.views), {k: whole.state.get(k) for k in KEYS})
    again = 0
    cuts = _cuts(data)
    for cut in cuts:
        live.write_bytes(data[:cut])
        first = A.read(str(live))
        live.write_bytes(data)
        inc = A.read(str(live), start=first.end, first_line=first.lines + 1, state=first.state)
        if not inc.extends:
            again += 1
            continue
        got = (list(first.views[0].indices) + [first.lines + i for i in inc.views[0].indices], len(first.views),
               {k: inc.state.get(k) for k in KEYS})
        assert got == want, f"cut at byte {cut}"
    return again, len(cuts)


@pytest.mark.parametrize("path", GENUINE, ids=[os.path.basename(os.path.dirname(p)) for p in GENUINE])
def test_incremental_read_reattaches_sibling_results_like_a_whole_read(path, tmp_path):
    again, cuts = _compare_every_cut(path, tmp_path)
    assert again == 0, f"{again} of {cuts} cuts read the whole file again"


def test_a_generated_session_of_parallel_calls_is_read_incrementally(tmp_path):
    src = _generated(tmp_path)
    (tmp_path / "cuts").mkdir()
    again, cuts = _compare_every_cut(src, tmp_path / "cuts")
    assert again == 0, f"{again} of {cuts} cuts read the whole file again"


def test_a_genuine_fork_among_new_lines_is_still_read_whole(tmp_path):
    """Not every second leaf is a sibling result: a rewound prompt appended after the
    commit is a fork, which only the whole read can place (it names a branch)."""
    import json

    src = next(p for p in GENUINE if "/parallel/" in p)
    recs = [json.loads(x) for x in open(src, "rb").read().splitlines()]
    prompts = [r for r in recs if r.get("type") == "user" and isinstance(r["message"]["content"], str)]
    assert len(prompts) >= 2 and prompts[-1]["parentUuid"]
    # The last prompt edited: a new prompt under the same line as the last one.
    fork = dict(prompts[-1], uuid="fork-prompt-0000", message={"role": "user", "content": "try again, differently"})
    live = tmp_path / "s.jsonl"
    body = open(src, "rb").read()
    live.write_bytes(body)
    first = A.read(str(live))
    live.write_bytes(body + (json.dumps(fork) + "\n").encode())
    inc = A.read(str(live), start=first.end, first_line=first.lines + 1, state=first.state)
    assert not inc.extends
    assert len(A.read(str(live)).views) == 2


def test_a_whole_read_works_out_one_chain_per_line_of_conversation(tmp_path, monkeypatch):
    """Every sibling result is a leaf: working out a chain for each made the whole read
    quadratic (64 s for a 43 MB session of parallel calls). Counted, not timed."""
    src = _generated(tmp_path, turns=120)
    calls = []
    real = claude_mod._Tree._chain

    def counted(self, leaf):
        calls.append(leaf)
        return real(self, leaf)

    monkeypatch.setattr(claude_mod._Tree, "_chain", counted)
    res = A.read(src)
    sibling_leaves = sum(1 for line in open(src) if '"sourceToolAssistantUUID"' in line)
    assert len(res.views) == 1 and sibling_leaves > 40
    assert len(calls) <= 2, len(calls)

"""The literal prefilter of ``opal grep`` never passes over a record that holds a match.

It skips a record whose stored bytes and payloads hold none of the literals every match must
contain (opalgit/porcelain/grep.py, ``required_literals``). That is sound only if every
normalized text the record gives is made of its stored strings; these tests check it on every
real session of the corpus (three agents, public files and the real clients' own) and the
generated structured sessions: each safe substring of each text of each record is found by
the prefilter in that record, with and without ``-i``; and grep with and without the
prefilter prints the same on the corpus for a battery of patterns.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opalgit import agents
from opalgit.history import sequence
from opalgit.history.states import load_state, resolve
from opalgit.porcelain.grep import _MIN_LITERAL, _NUMBER, _SAFE, _Prefilter, grep, required_literals, texts
from opalgit.porcelain.states import normal_of
from opalgit.store.repo import Repository
from tests.fixtures import real_corpus

FIX = Path(__file__).resolve().parents[1] / "fixtures"
GENERATED = sorted(str(p) for p in FIX.glob("*/generated/structures/*/*.json*") if p.name != "expected.json")
FILES = [(e.abspath, e.agent) for e in real_corpus.CORPUS] + [(p, Path(p).relative_to(FIX).parts[0]) for p in GENERATED]


def _import(tmp: Path, path: str, agent: str) -> Repository:
    env = dict(os.environ, HOME=str(tmp / "home"))
    (tmp / "home").mkdir()
    project = tmp / "p"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    for args in (["init"], ["commit", "--file", path, "--agent", agent, "-m", "corpus"]):
        r = subprocess.run([sys.executable, "-m", "opalgit", *args], cwd=project, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    return Repository.discover(str(project))


def _safe_pieces(text: str) -> list[str]:
    """Substrings a prefilter may be asked for: runs of safe characters, cut to a few lengths."""
    out = []
    for run in re.findall("[" + re.escape("".join(sorted(_SAFE))) + "]{%d,}" % _MIN_LITERAL, text):
        for n in (_MIN_LITERAL, 8, 24):
            for start in (0, max(0, len(run) // 2 - n // 2), max(0, len(run) - n)):
                piece = run[start:start + n]
                if len(piece) >= _MIN_LITERAL and not set(piece) <= _NUMBER:
                    out.append(piece)
    return out


@pytest.mark.parametrize("path,agent", FILES, ids=[os.path.relpath(p, FIX) for p, _ in FILES])
def test_every_text_of_every_record_is_found_in_its_stored_bytes(path, agent, tmp_path):
    repo = _import(tmp_path, path, agent)
    st = load_state(repo, resolve(repo, "HEAD").oid)
    exact = _Prefilter(repo, ("x" * _MIN_LITERAL,), ignore_case=False)
    folded = _Prefilter(repo, ("x" * _MIN_LITERAL,), ignore_case=True)
    checked = 0
    verbatim = agents.get(agent).verbatim_texts
    for si in sequence.iter_items(repo.store, st.root):
        if not verbatim:  # the prefilter must read every record of such an agent
            exact.needles = [b"\x00never-present\x00"]
            assert exact.may_match(si.item)
            checked += 1
            continue
        try:
            normal = normal_of(repo, si.item)
        except Exception:  # an unreadable record is grep's warning, not the prefilter's business
            continue
        pieces = sorted({p for _b, _t, _k, _c, text in texts(normal) for p in _safe_pieces(text)})
        for piece in pieces[:400]:
            exact.needles = [piece.encode()]
            assert exact.may_match(si.item), (si.index, piece)
            folded.rx = re.compile(re.escape(piece.swapcase()), re.IGNORECASE)
            assert folded.may_match(si.item), (si.index, piece)
            checked += 1
    assert checked or st.header.turns == 0


PATTERNS = ["README", "hello.py", "Traceback|FAILED", "def greet", "(?i)readme", "error|warning", "tool_use",
            "function", "the file", "ls -la", "cat README"]


@pytest.mark.parametrize("path,agent", FILES[:12] + FILES[-3:], ids=[os.path.relpath(p, FIX) for p, _ in FILES[:12] + FILES[-3:]])
def test_grep_prints_the_same_with_and_without_the_prefilter(path, agent, tmp_path):
    repo = _import(tmp_path, path, agent)
    for pattern in PATTERNS:
        assert required_literals(re.compile(pattern)) is not None, pattern  # each exercises the prefilter
        fast = grep(repo, pattern)
        slow = grep(repo, pattern, prefilter=False)
        assert [(t.turn, t.lines) for t in fast.turns] == [(t.turn, t.lines) for t in slow.turns], pattern
        assert fast.stats.records_skipped + fast.stats.records_searched == slow.stats.records_searched
        if not agents.get(agent).verbatim_texts:
            assert fast.stats.records_skipped == 0


def test_required_literals_are_what_every_match_contains():
    def lits(p):
        return required_literals(re.compile(p))

    assert lits("Traceback|FAILED") == ("Traceback", "FAILED")
    assert lits("def farewell") == ("def farewell",)
    assert lits(r"foo(bar|baz)\d+") == ("foo",)
    assert lits(r"hello\.py") == ("hello.py",)
    assert lits("(?i)Trace") == ("Trace",)
    # no sound literal: too short, number-only, an escaped character, or an alternative without one
    for p in ["a.b", "ab+", "15000", "README|x", r"\bls\b", '"hi"', "x{3}", ".*"]:
        assert lits(p) is None, p
    assert lits(r"path/to/file\.py") == ("file.py",)  # '/' may be written as '\/'

"""The token estimate against an exact tokenizer, on real sessions (the figure docs/concepts.md quotes)."""

from __future__ import annotations

import glob
import os

import pytest

from opalgit import agents as adapters
from opalgit.history.model import block_chars
from opalgit.history.tokens import estimate, exact_counter, human
from opalgit.porcelain.diff import turn_text
from tests.conftest import FIXTURES


def test_human():
    assert (human(12), human(12345), human(2_500_000)) == ("12", "12.3k", "2.5M")


def test_estimate_accuracy_on_real_sessions():
    count = exact_counter()
    if count is None:
        pytest.skip("bpe-openai is not installed (pip install 'opalgit[tokens]')")
    est_total = exact_total = 0
    # The issue-18 corpus (claude/real/) is measured apart (tests/agents/test_tokens_real.py):
    # its 400 KB VibeCodingTracker session, Chinese prose, is still about 11% under.
    paths = glob.glob(os.path.join(FIXTURES, "claude", "**", "*.jsonl"), recursive=True)
    for path in sorted(p for p in paths if os.sep + "real" + os.sep not in p):
        ad = adapters.get("claude")
        for rec in ad.read(path).records:
            n = rec.normal
            if n.role == "meta" or any(b.get("type") == "image" for b in n.blocks):
                continue
            est_total += estimate(sum(block_chars(b) for b in n.blocks))
            exact_total += count(turn_text(n))
    error = abs(est_total - exact_total) / exact_total
    print(f"estimate {est_total} vs o200k {exact_total} tokens: {error:.1%} off")
    # docs/concepts.md quotes this: within a few percent over whole sessions.
    assert error < 0.10

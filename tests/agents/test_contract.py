"""The adapter contract (:mod:`opalgit.testing.adapters`) run for the three built-in
adapters on the real session files under tests/fixtures, each refusing the others'."""

from __future__ import annotations

from opalgit import agents
from opalgit.agents.codex.files import open_rollout
from opalgit.testing.adapters import AdapterContract
from tests.fixtures import real_corpus

AGENTS = real_corpus.AGENTS
SAMPLES = {a: [e.abspath for e in real_corpus.CORPUS if e.agent == a] for a in AGENTS}


def _others(agent: str) -> list[str]:
    return [p for a in AGENTS if a != agent for p in SAMPLES[a]]


class TestClaudeContract(AdapterContract):
    adapter = agents.get("claude")
    samples = SAMPLES["claude"]
    foreign = _others("claude")


class TestCodexContract(AdapterContract):
    adapter = agents.get("codex")
    samples = SAMPLES["codex"]
    foreign = _others("codex")

    def contents(self, path: str) -> bytes:
        with open_rollout(path) as fh:  # a .jsonl.zst rollout's offsets count in its text
            return fh.read()


class TestGeminiContract(AdapterContract):
    adapter = agents.get("gemini")
    samples = SAMPLES["gemini"]
    foreign = _others("gemini")
    render_changes = {
        real_corpus.Entry("gemini/agent-sessions/schema_drift.json", "gemini").abspath:
            "an old {history: [...]} document: its entries render as lines the CLI (and opal) no longer read",
    }

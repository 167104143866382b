"""Test support for proving that the real agent CLIs resume opal's exports.

* :mod:`.mockservers` -- scripted, recording mock model servers (Anthropic
  Messages, OpenAI Responses, Gemini) on 127.0.0.1.
* :mod:`.harness` -- hermetic runs of the real ``claude`` / ``codex`` /
  ``gemini`` CLIs (installed by ``scripts/install-agents.sh``), session-file
  lookup, generation of genuine two-turn tool-using sessions, and scenarios
  (:func:`~.harness.scenarios`: parallel calls, a Claude subagent, a compaction).
* :mod:`.regenerate` -- writes those scenarios' sessions as fixtures under
  ``tests/fixtures/<agent>/generated/structures/``.
* :mod:`.history` -- ``history_of(request_body, client)``: the conversation a
  recorded request carries, normalised across the three APIs.

Import as ``from tests.clients.harness import ...`` (``tests/`` is a package,
so pytest puts the repository root on ``sys.path``), or relatively from
inside this package.
"""

from .history import Item, canonical_args, history_of, kinds
from .mockservers import (
    AnthropicMock,
    GeminiMock,
    MockServer,
    OpenAIResponsesMock,
    Recorded,
    Reply,
    ToolCall,
)

__all__ = [
    "AnthropicMock",
    "GeminiMock",
    "Item",
    "MockServer",
    "OpenAIResponsesMock",
    "Recorded",
    "Reply",
    "ToolCall",
    "canonical_args",
    "history_of",
    "kinds",
]

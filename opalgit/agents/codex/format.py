"""The Codex rollout format's vocabulary, shared by :mod:`.read` and :mod:`.write`:
what kinds of line a rollout holds, which user texts Codex injects itself, and the
values opal writes where a source says nothing (formats.md §1)."""

from __future__ import annotations

from typing import Any

__all__ = ["AGENT", "CONTEXT_PREFIXES", "DANGLING_OUTPUT", "DEFAULT_CLI_VERSION", "ORIGINATOR", "REQUEST_MARKER",
           "ROLLOUT_KINDS", "ITEM_KINDS", "CALLS", "OUTPUTS", "is_str"]

AGENT = "codex"
#: ``cli_version`` written when the source is not a Codex session (the pinned CLI).
DEFAULT_CLI_VERSION = "0.169.0"
ORIGINATOR = "codex_cli_rs"
DANGLING_OUTPUT = "[opal: this tool call has no recorded result]"

#: RolloutItem kinds (formats.md §1.3); a line of another ``type`` with a payload is still Codex's.
ROLLOUT_KINDS = frozenset(
    """session_meta response_item event_msg turn_context compacted world_state security_risk_score
    inter_agent_communication inter_agent_communication_metadata token_usage_record retained_context
    realtime_item""".split()
)
#: Item types older rollouts wrote at the top level, without the envelope.
ITEM_KINDS = frozenset(
    """message reasoning function_call function_call_output custom_tool_call custom_tool_call_output
    local_shell_call local_shell_call_output tool_search_call tool_search_output web_search_call
    image_generation_call""".split()
)
CALLS = ("function_call", "custom_tool_call", "local_shell_call", "tool_search_call", "tool_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output", "tool_search_output",
            "tool_result", "function_result")
#: User-role text Codex injects itself (formats.md §1.11); such messages are ``meta``.
CONTEXT_PREFIXES = (
    "<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<permissions instructions>",
    "<skills_instructions>", "<collaboration_mode>", "<personality_spec>", "<turn_aborted>",
    "<subagent_notification>", "<realtime_conversation>", "<apps_instructions>", "<plugins_instructions>",
)
REQUEST_MARKER = "## My request for Codex:"


def is_str(v: Any) -> bool:
    return isinstance(v, str) and v != ""

"""The shapes of Qwen Code's records that both reading and writing need: its record
types, the system subtypes kept beside the conversation chain, and which records
Qwen Code walks as the chain (Qwen Code 0.24.4 ``packages/core/src/utils/transcript-records.ts``)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["SIDE_SUBTYPES", "TYPES", "is_conversation"]

#: Record types Qwen Code writes (``RECORD_TYPES``).
TYPES = frozenset({"user", "assistant", "tool_result", "system"})
#: System subtypes that are not part of the conversation chain (``isTranscriptConversationRecord``).
SIDE_SUBTYPES = frozenset({"session_artifact_event", "session_artifact_snapshot", "session_sources_snapshot",
                           "managed_session_header_v1", "managed_session_event_v1", "managed_session_commit_v1"})


def _is_id(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def is_conversation(rec: Mapping[str, Any]) -> bool:
    """Whether Qwen Code walks this record as part of the conversation chain: a record
    of its types with identity fields (a uuid, a sessionId, a parentUuid string or null) that is not an artifact or sources record."""
    return (rec.get("type") in TYPES and _is_id(rec.get("uuid")) and _is_id(rec.get("sessionId"))
            # an empty parentUuid is a root, as Qwen Code walks it
            and (rec.get("parentUuid") is None or isinstance(rec.get("parentUuid"), str))
            and not (rec.get("type") == "system" and rec.get("subtype") in SIDE_SUBTYPES))

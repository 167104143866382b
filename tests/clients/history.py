"""Normalise a recorded model request into the conversation it carries.

:func:`history_of` turns the JSON body a client sent to its mock into an
ordered list of items, the same shape for all four APIs:

* ``("user", text)``              -- a user prompt
* ``("assistant", text)``         -- model text
* ``("tool_call", name, args)``   -- ``args`` canonical JSON (sorted keys,
  compact separators) for JSON tools; the raw input text for freeform
  (Codex ``custom_tool_call``, e.g. ``apply_patch``) tools
* ``("tool_result", call_id, text)`` -- ``call_id`` is the call's id (Gemini:
  ``functionResponse.id``, or its ``name`` when there is no id)

Items are :class:`Item` objects: plain tuples (compare them with tuples) that
also carry ``call_id`` on tool calls and results, so tests can check pairing.

Ignored, as injected context rather than conversation: system prompts;
reasoning / thinking / thought parts; Claude ``<system-reminder>`` text (also
when embedded in a larger text) and ``role: system`` messages; Codex
``developer`` messages and user messages that are ``<environment_context>``,
``<user_instructions>``, ``# AGENTS.md instructions``, ``<permissions
instructions>``, ``<skills_instructions>`` and similar; Gemini user turns
starting with ``<session_context>`` or ``<hook_context>``.

Gemini CLI 0.61 replays each tool result of a session it recorded itself
twice on resume (a reply's whole group of results: r1 r2 r3 r1 r2 r3); by
default a run of ``tool_result`` items repeated right after itself is
collapsed into one copy (``collapse_duplicates=False`` keeps them).
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

__all__ = ["Item", "history_of", "canonical_args", "kinds", "results_by_call", "shape", "squash"]


class Item(tuple):
    """A history entry: a tuple with an optional ``call_id`` attribute."""

    call_id: str | None

    def __new__(cls, *fields: Any, call_id: str | None = None) -> "Item":
        obj = super().__new__(cls, fields)
        obj.call_id = call_id
        return obj

    @property
    def kind(self) -> str:
        return self[0]

    def __repr__(self) -> str:
        return "Item" + tuple.__repr__(self)


def canonical_args(args: Any) -> str:
    """Canonical JSON text of tool arguments (dict, or a JSON string)."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    return json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def kinds(items: Iterable[tuple]) -> list[str]:
    return [i[0] for i in items]


# ---------------------------------------------------------------------------
# Claude (Anthropic Messages)

_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)


def _strip_reminders(text: str) -> str:
    """Remove <system-reminder> blocks; text without one is returned as is."""
    if "<system-reminder>" not in text:
        return text
    return _REMINDER.sub("", text).strip()


def _claude_result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return _strip_reminders(content)
    parts = []
    for blk in content:
        if isinstance(blk, dict):
            if blk.get("type") == "text":
                t = _strip_reminders(blk.get("text", ""))
                if t:
                    parts.append(t)
            elif blk.get("type") == "image":
                parts.append("[image]")
        elif isinstance(blk, str):
            parts.append(blk)
    return "\n".join(parts)


def _claude(body: dict) -> list[Item]:
    out: list[Item] = []
    for msg in body.get("messages") or []:
        role = msg.get("role")
        if role not in ("user", "assistant"):
            continue  # 2.1.x puts "system" environment messages inside messages[]
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        for blk in blocks:
            t = blk.get("type")
            if t == "text":
                text = _strip_reminders(blk.get("text", ""))
                if text.strip():
                    out.append(Item("user" if role == "user" else "assistant", text))
            elif t == "tool_use":
                out.append(Item("tool_call", blk.get("name"), canonical_args(blk.get("input", {})), call_id=blk.get("id")))
            elif t == "tool_result":
                cid = blk.get("tool_use_id")
                out.append(Item("tool_result", cid, _claude_result_text(blk.get("content")), call_id=cid))
            # thinking, redacted_thinking, image, document, ...: not compared
    return out


# ---------------------------------------------------------------------------
# Codex (OpenAI Responses)

_CODEX_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
    "<skills_instructions>",
    "<collaboration_mode>",
    "<personality_spec>",
    "<turn_aborted>",
    "<subagent_notification>",
    "<realtime_conversation>",
    "<apps_instructions>",
    "<plugins_instructions>",
)


def _codex_is_context(text: str) -> bool:
    s = text.lstrip()
    return s.startswith(_CODEX_CONTEXT_PREFIXES)


def _codex_output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, dict):  # {"content": ..., "success": ...} in some versions
        return _codex_output_text(output.get("content") or output.get("output") or "")
    if isinstance(output, list):
        parts = []
        for it in output:
            if isinstance(it, dict):
                if "text" in it:
                    parts.append(it["text"])
                elif it.get("type") == "input_image":
                    parts.append("[image]")
            elif isinstance(it, str):
                parts.append(it)
        return "\n".join(parts)
    return "" if output is None else str(output)


def _codex(body: dict) -> list[Item]:
    out: list[Item] = []
    items = body.get("input")
    if isinstance(items, str):
        return [Item("user", items)]
    for it in items or []:
        t = it.get("type", "message" if "role" in it else None)
        if t == "message":
            role = it.get("role")
            if role not in ("user", "assistant"):
                continue  # developer / system
            content = it.get("content")
            if isinstance(content, str):
                content = [{"type": "input_text", "text": content}]
            for c in content or []:
                if c.get("type") in ("input_text", "output_text", "text"):
                    text = c.get("text", "")
                    if role == "user" and _codex_is_context(text):
                        continue
                    if text.strip():
                        out.append(Item(role, text))
        elif t == "function_call":
            out.append(Item("tool_call", it.get("name"), canonical_args(it.get("arguments", "")), call_id=it.get("call_id")))
        elif t == "custom_tool_call":
            out.append(Item("tool_call", it.get("name"), it.get("input", ""), call_id=it.get("call_id")))
        elif t == "local_shell_call":
            out.append(Item("tool_call", "local_shell", canonical_args(it.get("action", {})), call_id=it.get("call_id")))
        elif t in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            cid = it.get("call_id")
            out.append(Item("tool_result", cid, _codex_output_text(it.get("output")), call_id=cid))
        # reasoning, web_search_call, compaction, ...: not compared
    return out


# ---------------------------------------------------------------------------
# Gemini

_GEMINI_CONTEXT_PREFIXES = ("<session_context>", "<hook_context>")


def _gemini_response_text(resp: Any) -> str:
    if isinstance(resp, dict):
        if isinstance(resp.get("output"), str) and len(resp) == 1:
            return resp["output"]
        if "output" in resp and isinstance(resp["output"], str):
            return resp["output"]
        if "error" in resp:
            e = resp["error"]
            return e if isinstance(e, str) else json.dumps(e, sort_keys=True)
        return json.dumps(resp, sort_keys=True, ensure_ascii=False)
    return "" if resp is None else str(resp)


def _gemini(body: dict) -> list[Item]:
    out: list[Item] = []
    for content in body.get("contents") or []:
        role = content.get("role", "user")
        for part in content.get("parts") or []:
            if not isinstance(part, dict) or part.get("thought"):
                continue
            if "text" in part:
                text = part.get("text") or ""
                if role == "user" and text.lstrip().startswith(_GEMINI_CONTEXT_PREFIXES):
                    continue
                if text.strip():
                    out.append(Item("user" if role == "user" else "assistant", text))
            elif "functionCall" in part:
                fc = part["functionCall"] or {}
                out.append(Item("tool_call", fc.get("name"), canonical_args(fc.get("args") or {}), call_id=fc.get("id")))
            elif "functionResponse" in part:
                fr = part["functionResponse"] or {}
                cid = fr.get("id") or fr.get("name")
                out.append(Item("tool_result", cid, _gemini_response_text(fr.get("response")), call_id=cid))
    return out


# ---------------------------------------------------------------------------
# OpenAI chat completions (opencode, Qwen Code, Pi, GitHub Copilot CLI)


def _chat_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for c in content:
        if isinstance(c, dict):
            if c.get("type") in ("text", "input_text", "output_text"):
                parts.append(c.get("text") or "")
            elif c.get("type") in ("image_url", "input_image", "image"):
                parts.append("[image]")
        elif isinstance(c, str):
            parts.append(c)
    return "\n".join(p for p in parts if p)


def _chat(body: dict) -> list[Item]:
    """``messages[]``: system/developer messages are context; an assistant message's text comes
    before its ``tool_calls``; ``role: tool`` messages are results, paired by ``tool_call_id``."""
    out: list[Item] = []
    for msg in body.get("messages") or []:
        role = msg.get("role")
        if role in ("user", "assistant"):
            text = _strip_reminders(_chat_text(msg.get("content")))
            if text.strip():
                out.append(Item(role, text))
            for tc in msg.get("tool_calls") or [] if role == "assistant" else []:
                fn = tc.get("function") or {}
                out.append(Item("tool_call", fn.get("name"), canonical_args(fn.get("arguments") or "{}"),
                                call_id=tc.get("id")))
        elif role == "tool":
            cid = msg.get("tool_call_id")
            out.append(Item("tool_result", cid, _chat_text(msg.get("content")), call_id=cid))
    return out


_COPILOT_DATETIME = re.compile(r"^<current_datetime>[^<]*</current_datetime>\n\n")


def _copilot(body: dict) -> list[Item]:
    """Chat completions, each prompt without the ``<current_datetime>`` tag GitHub Copilot CLI
    puts before it (its ``transformedContent``; it sends the stored one again on resume)."""
    return [Item("user", _COPILOT_DATETIME.sub("", i[1])) if i[0] == "user" else i for i in _chat(body)]


# ---------------------------------------------------------------------------


def _collapse(items: list[Item]) -> list[Item]:
    """Drop Gemini's replayed results: a run of results repeated right after
    itself (one result twice, or a parallel group r1 r2 r3 r1 r2 r3)."""
    out: list[Item] = []
    i = 0
    while i < len(items):
        if items[i][0] != "tool_result":
            out.append(items[i])
            i += 1
            continue
        j = i
        while j < len(items) and items[j][0] == "tool_result":
            j += 1
        out.extend(_undouble([tuple(x) for x in items[i:j]], items[i:j]))
        i = j
    return out


def _undouble(keys: list[tuple], run: list[Item]) -> list[Item]:
    """``run`` without repeats of its leading group (keys compare the tuples)."""
    for k in range(1, len(run) // 2 + 1):
        if len(run) % k == 0 and all(keys[n] == keys[n % k] for n in range(len(run))):
            return run[:k]
    return run


def history_of(request_body: Any, client: str, *, collapse_duplicates: bool = True) -> list[Item]:
    """Ordered conversation items of one recorded request body.

    ``request_body`` is the parsed JSON (``Recorded.body``) or a
    :class:`~tests.clients.mockservers.Recorded`; ``client`` is ``"claude"``,
    ``"codex"``, ``"gemini"``, or one of the chat-completions clients ``"opencode"``, ``"qwen"``,
    ``"pi"``, ``"copilot"`` (API names ``"anthropic"``, ``"openai"``, ``"chat"`` work too).
    """
    body = getattr(request_body, "body", request_body)
    if isinstance(body, (bytes, str)):
        body = json.loads(body)
    if not isinstance(body, dict):
        raise TypeError(f"request body must be a JSON object, got {type(body).__name__}")
    fn = {
        "claude": _claude,
        "anthropic": _claude,
        "codex": _codex,
        "openai": _codex,
        "gemini": _gemini,
        "chat": _chat,
        "opencode": _chat,
        "qwen": _chat,
        "pi": _chat,
        "copilot": _copilot,
    }.get(client)
    if fn is None:
        raise ValueError(f"unknown client {client!r}")
    items = fn(body)
    return _collapse(items) if collapse_duplicates else items


# ---------------------------------------------------------------------------
# comparing histories across agents (the resume matrix, the structured sessions)


def squash(text) -> str:
    """A text with its whitespace runs made one space, cut to 60 characters (how a result is
    compared: agents frame a tool's output differently after its first line)."""
    return " ".join(str(text).split())[:60]


def shape(items) -> list[tuple]:
    """Comparable across agents: prompts, answers and calls by position, the results of one
    reply's calls as a sorted run (Claude sends them in the order the tools finished, the
    others in call order: either is the client's own form)."""
    out, run = [], []
    for it in list(items) + [("end",)]:
        if it[0] == "tool_result":
            run.append(("tool_result", squash(it[2])))
            continue
        out.extend(sorted(run))
        run = []
        if it[0] in ("user", "assistant"):
            out.append((it[0], " ".join(str(it[1]).split())))
        elif it[0] == "tool_call":
            out.append(("tool_call",))
    return out


def results_by_call(items) -> list[str]:
    """Each call's result text in call order, paired by call id where every id is unique."""
    calls = [i for i in items if i[0] == "tool_call"]
    results = [i for i in items if i[0] == "tool_result"]
    ids = [getattr(c, "call_id", None) for c in calls]
    if all(ids) and len(set(ids)) == len(ids):
        by_id = {r[1]: squash(r[2]) for r in results}
        return [by_id.get(i, "<no result>") for i in ids]
    return [squash(r[2]) for r in results]

"""One-line previews of a turn, for ``opal diff`` and ``opal log --turns``. Pure: the
preview of a stored record, which needs its agent's adapter, is
:func:`opalgit.porcelain.states.of_item`.

A prompt or a reply shows its first words; a tool call its tool and what it acts on
(the command it runs, the path it reads or writes, the pattern it searches), not the
whole JSON of its input; a tool result its first words. Whitespace runs become one
space, and a long preview ends in "...".
"""

from __future__ import annotations

import json
import re
from typing import Any

from opalgit.history.model import Normal

#: Input fields that say what a call acts on, most telling first (Claude Code, Codex
#: and Gemini CLI name them these ways).
_SUBJECT_KEYS = ("command", "cmd", "file_path", "absolute_path", "notebook_path", "path", "pattern",
                 "url", "query", "description", "prompt")


def _call_subject(value: Any) -> str:
    if isinstance(value, str):
        try:
            parsed = json.loads(value)  # Codex keeps a call's arguments as a JSON string
        except ValueError:
            return value
        if not isinstance(parsed, dict):
            return value
        value = parsed
    if isinstance(value, dict):
        for key in _SUBJECT_KEYS:
            v = value.get(key)
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                return " ".join(v)
            if isinstance(v, str) and v:
                return v
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def _result_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        parts = [p.get("text") or "" if p.get("type") == "text" else f"[{p.get('type')}]"
                 for p in output if isinstance(p, dict)]
        if parts:
            return " ".join(parts)
    return "" if output is None else json.dumps(output, ensure_ascii=False)


# The envelope Codex wraps around a command's output, and Gemini CLI's marker around
# a shell result: the preview shows the output itself (a failing exit code kept).
_ENVELOPES = (
    re.compile(r"(?:Chunk ID: \S+\n)?Wall time: [^\n]*\n(?:Process exited with code (?P<code>-?\d+)\n)?"
               r"(?:Original token count: \d+\n)?Output:\n"),
    re.compile(r"Exit code: (?P<code>-?\d+)\nWall time: [^\n]*\nOutput:\n"),
    re.compile(r"<untrusted_context>\s*(?:Output: )?"),
)


def _unwrapped(output: str) -> str:
    for pattern in _ENVELOPES:
        m = pattern.match(output)
        if m is not None:
            code = m.groupdict().get("code")
            rest = output[m.end():]
            return f"[exit {code}] {rest}" if code not in (None, "0") else rest
    return output


def _line(b: dict) -> str:
    kind = b.get("type")
    if kind in ("text", "reasoning"):
        return b.get("text") or ""
    if kind == "tool_call":
        return f"{b.get('name')} {_call_subject(b.get('input'))}"
    if kind == "tool_result":
        return _unwrapped(_result_text(b.get("output")))
    return ""


def text(normal: Normal, width: int = 72) -> str:
    """The preview of one normalized turn, at most ``width`` characters: its first
    tool call if it makes any (the words around a call say less than the call),
    else its first text or result."""
    calls = [b for b in normal.blocks if b.get("type") == "tool_call"]
    if calls:
        line = _line(calls[0]) + (f" (+{len(calls) - 1} more)" if len(calls) > 1 else "")
    else:
        line = next((t for t in map(_line, normal.blocks) if t.strip()), normal.label or "")
    line = " ".join(str(line).split())
    return line if len(line) <= width else line[: width - 3] + "..."


"""Plain-text rendering of turns, commits and history graphs. Pure: returns strings.

Colour is passed in as a function (the CLI gives click.style on a terminal and the
identity elsewhere), so nothing here knows about terminals.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Callable, Iterable, Mapping, Sequence

from opalgit.history.model import Normal

Style = Callable[..., str]


def plain(text: str, **_: Any) -> str:
    return text


def short(oid: bytes, n: int = 10) -> str:
    return oid.hex()[:n]


def when(ts: int, offset_minutes: int = 0) -> str:
    """A date as git prints it by default: ``Thu Jan 1 00:16:40 1970 +0000`` (day unpadded)."""
    tz = _dt.timezone(_dt.timedelta(minutes=offset_minutes))
    d = _dt.datetime.fromtimestamp(ts, tz)
    return f"{d:%a %b} {d.day} {d:%H:%M:%S %Y %z}"


def when_ms(ms: int | None) -> str:
    if ms is None:
        return ""
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


from opalgit.plural import count  # noqa: E402,F401  (one plural helper: render.count is plural.count)


def size(chars: int) -> str:
    if chars < 1000:
        return f"{chars}c"
    if chars < 1_000_000:
        return f"{chars / 1000:.1f}kc"
    return f"{chars / 1_000_000:.1f}Mc"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else prefix.rstrip() for line in text.splitlines() or [""])


def _clip(text: str, max_lines: int | None) -> str:
    if max_lines is None:
        return text
    lines = text.splitlines()
    if len(lines) <= max_lines:
        return text
    hidden = len(lines) - max_lines
    return "\n".join(lines[:max_lines] + [f"... ({hidden} more lines; --full shows everything)"])


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2)


def _call_name(call_id: Any, calls: Mapping[str, tuple[int, str]]) -> str:
    """``Bash (call toolu_01, turn 12)``: the call a result answers, as far as it is known."""
    if call_id is None:
        return "a call that has no id"
    found = calls.get(str(call_id))
    if found is None:
        return f"call {call_id} (not in this state)" if calls else f"call {call_id}"
    turn, name = found
    return f"{name} (call {call_id}, turn {turn})"


def blocks(normal: Normal, style: Style = plain, *, max_lines: int | None = 40,
           calls: Mapping[str, tuple[int, str]] | None = None) -> str:
    """The readable body of one turn: text, reasoning, tool calls and results, images.
    ``calls`` maps a call id to the turn and tool of its call, to name what a result answers."""
    out: list[str] = []
    for b in normal.blocks:
        kind = b.get("type")
        if kind == "text":
            out.append(_indent(_clip(b.get("text") or "", max_lines)))
        elif kind == "reasoning":
            label = "reasoning (signed)" if b.get("signed") else "reasoning"
            out.append(style(f"  [{label}]", dim=True))
            out.append(style(_indent(_clip(b.get("text") or "", max_lines)), dim=True))
        elif kind == "tool_call":
            ident = f"  (call {b.get('id')})" if b.get("id") is not None else ""
            out.append(style(f"  -> {b.get('name')}{ident}", fg="cyan"))
            out.append(_indent(_clip(_as_text(b.get("input")), max_lines)))
        elif kind == "tool_result":
            flag = "  error" if b.get("is_error") else ""
            out.append(style(f"  <- result of {_call_name(b.get('call_id'), calls or {})}{flag}",
                             fg="red" if b.get("is_error") else "green"))
            output = b.get("output")
            if isinstance(output, list):
                parts = []
                for part in output:
                    if isinstance(part, dict) and part.get("type") == "text":
                        parts.append(part.get("text") or "")
                    elif isinstance(part, dict) and part.get("type") == "image":
                        parts.append(f"[image {part.get('media_type') or ''}]")
                output = "\n".join(parts)
            out.append(_indent(_clip(_as_text(output if output is not None else ""), max_lines)))
        elif kind == "image":
            out.append(style(f"  [image {b.get('media_type') or ''}]", fg="magenta"))
        else:
            out.append(style(f"  [{b.get('what') or 'other'}]", dim=True))
    return "\n".join(out)


# ------------------------------------------------------------------------------ graph


def history(
    commits: Iterable[tuple[bytes, Sequence[bytes], Sequence[str]]],
    *,
    graph: bool = False,
    separated: bool = False,
) -> list[str]:
    """The lines of ``opal log``: each commit's text, in the order given.

    With ``graph`` the lanes are drawn exactly as ``git log --graph`` draws them (see
    :mod:`opalgit.history.graph`). ``separated`` puts a blank (or lane-only) line between
    commits, as git's multi-line formats do, and none after the last.
    """
    if graph:
        from opalgit.history.graph import draw

        return draw(commits, separated=separated)
    out: list[str] = []
    for n, (_oid, _parents, text) in enumerate(commits):
        if separated and n:
            out.append("")
        out.extend(text or [""])
    return out


def table(rows: Iterable[Sequence[str]]) -> list[str]:
    rows = [list(r) for r in rows]
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(len(r) for r in rows))]
    return ["  ".join(c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)) for r in rows]

"""Reading JSON-lines session files exactly, and writing JSON the way agents do.

Pure: no repository, no environment. Every agent that keeps sessions as JSON lines
(Claude Code, Codex, Gemini CLI) writes compact JSON without ASCII escaping, which is
what :func:`dumps` produces. When a record's bytes differ from that rendering
(a hand-edited file, a float written as ``1.0``, a duplicate key), the importer keeps
the exact bytes instead, so a round trip is byte-identical either way.
"""

from __future__ import annotations

import json
from typing import IO, Any, Iterator

import msgpack as _msgpack

from .errors import InputError
from .structs import dataclass

try:  # a C parser several times faster than the standard library's; optional
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

# orjson and the standard library render every JSON value alike except some floats.
# Both write the shortest digits that read back as the same float; they differ only
# in notation where small numbers are concerned: below 1e-4 Python writes an
# exponent where orjson writes "0.0000...", and below 1e-6 both do but Python pads it
# ("1e-07" against "1e-7"); large numbers get "1e+16" from both. So every float that
# the two render differently shows "e-" or "0.0000" in orjson's rendering, and a line
# that is orjson's rendering with neither inside a number renders the same through
# the standard library. tests/core/test_jsonl_exact.py sweeps floats of every
# magnitude to keep this true for the installed orjson.
_FLOAT_MARKERS = (b"e-", b"0.0000")
_NUMBER_BYTES = frozenset(b"0123456789.-+eE")
_TOKEN_START = frozenset(b":,[")
# msgpack writes every Python float as the byte 0xcb followed by its eight bytes, so a
# value whose msgpack holds no 0xcb byte holds no float at all. Packing a record and
# one memchr cost a fifth of searching its JSON for the two markers, which are
# common in prose ("e-" in "re-run"), and most records hold no float.
_FLOAT64 = b"\xcb"
# A large line's value is walked instead: packing a 20 MB record took 20 to 40 MB more
# for a moment (the peak of an import with such lines), and a record that large is
# mostly a few long strings, so the walk visits few values.
_WALK_ABOVE = 1 << 20


def _holds_float(value: Any, size: int = 0) -> bool:
    """False only when ``value`` holds no float (True: it may); ``size``: about how
    many bytes its JSON takes."""
    if size >= _WALK_ABOVE:
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, float):
                return True
            if isinstance(v, dict):
                stack.extend(v.values())
            elif isinstance(v, (list, tuple)):
                stack.extend(v)
        return False
    try:
        return _FLOAT64 in _msgpack.packb(value)
    except (TypeError, ValueError, OverflowError):  # not msgpack's to carry: assume it may
        return True


def _float_may_differ(raw: bytes) -> bool:
    """True when ``raw`` may hold a float whose two renderings differ (a marker
    inside a number token; a marker inside a string merely costs the slow check)."""
    for marker in _FLOAT_MARKERS:
        i = raw.find(marker)
        while i >= 0:
            j = i - 1
            while j >= 0 and raw[j] in _NUMBER_BYTES:
                j -= 1
            if (j < 0 or raw[j] in _TOKEN_START) and raw[j + 1] in b"-0123456789":  # j < 0: a bare number
                return True
            i = raw.find(marker, i + 1)
    return False


def _renders_alike(value: Any, raw: bytes) -> bool:
    """Whether ``raw``, orjson's rendering of ``value``, is the standard library's too."""
    return not _holds_float(value, len(raw)) or not _float_may_differ(raw)


_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> bytes:
    """Compact JSON as JavaScript's ``JSON.stringify`` and serde_json write it.

    The standard library's rendering decides. orjson writes the same bytes in a
    third of the time (an export writes every record), so its output is used when no
    float in it may be written otherwise (:func:`_renders_alike`, the check
    :func:`exact` relies on; ``tests/core/test_jsonl_exact.py``). What orjson refuses
    (lone surrogates, integers past 64 bits, keys that are not strings) goes to the
    standard library. One difference remains: orjson writes NaN and the infinities as
    ``null`` where the standard library refuses them; no stored record holds one (a
    line with one is kept as its bytes), so only a value built from such a line, e.g.
    a tool call's arguments, is written with ``null`` instead of failing.
    """
    if _orjson is not None:
        try:
            out = _orjson.dumps(value)
        except (TypeError, _orjson.JSONEncodeError):
            pass
        else:
            if _renders_alike(value, out):
                return out
    return _stdlib_dumps(value)


def _stdlib_dumps(value: Any) -> bytes:
    """:func:`dumps` by the standard library alone (the renderer the fast path matches)."""
    return _encoder.encode(value).encode("utf-8", "surrogatepass")


def exact(value: Any, raw: bytes) -> bool:
    """True when :func:`dumps` reproduces ``raw`` byte for byte."""
    if _orjson is not None:
        try:
            if _orjson.dumps(value) == raw and _renders_alike(value, raw):
                return True
        except (TypeError, _orjson.JSONEncodeError):
            pass
    try:
        return _stdlib_dumps(value) == raw
    except (ValueError, TypeError, UnicodeEncodeError):
        return False


@dataclass(frozen=True)
class Line:
    """One line of a JSON-lines file, as bytes, with where it sits in the file."""

    number: int  # 1-based
    start: int  # byte offset of the first byte
    end: int  # byte offset just past the line terminator
    raw: bytes  # the line without its terminating b"\n"
    terminated: bool  # False only for a last line that has no b"\n" yet


def iter_lines(fh: IO[bytes], *, start: int = 0, first_number: int = 1) -> Iterator[Line]:
    """Yield the lines of a binary stream from byte offset ``start``.

    Blank lines are yielded too (callers skip them) so that line numbers stay true.
    """
    fh.seek(start)
    pos = start
    number = first_number
    for chunk in iter(fh.readline, b""):
        end = pos + len(chunk)
        terminated = chunk.endswith(b"\n")
        raw = chunk[:-1] if terminated else chunk
        yield Line(number, pos, end, raw, terminated)
        pos = end
        number += 1


class ParseFailure(Exception):
    """Internal: a line that is not a JSON value (carries a short reason)."""


def parse(raw: bytes) -> Any:
    """Parse one JSON line; raises :class:`ParseFailure` with a short reason."""
    if b"\x00" in raw:
        raise ParseFailure("binary data (NUL bytes)")
    if _orjson is not None:
        try:
            return _orjson.loads(raw)
        except _orjson.JSONDecodeError:
            pass  # the standard parser decides, and explains (lone surrogates, NaN ...)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseFailure(f"not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseFailure(f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ParseFailure("JSON nested too deeply") from None


def sniff_binary(path: str, head: bytes) -> None:
    """Refuse files that are obviously not text (images, archives, zstd without name)."""
    if not head:
        return
    if b"\x00" in head[:4096]:
        raise InputError(
            "this is a binary file, not a JSON-lines session",
            path=path,
            hint="give the path of the agent's .jsonl session file",
        )

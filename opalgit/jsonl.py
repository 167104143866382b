"""Reading JSON-lines session files exactly, and writing JSON the way agents do.

Pure: no repository, no environment. Every agent that keeps sessions as JSON lines
(Claude Code, Codex, Gemini CLI) writes compact JSON without ASCII escaping, which is
what :func:`dumps` produces. When a record's bytes differ from that rendering
(a hand-edited file, a float written as ``1.0``, a duplicate key), the importer keeps
the exact bytes instead, so a round trip is byte-identical either way.
"""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from typing import IO, Any, Iterator

from opalgit import codec, progress
from opalgit.errors import InputError
from opalgit.fileio import MAX_PIECE
from opalgit.structs import dataclass

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
# the standard library. tests/unit/test_jsonl_exact.py sweeps floats of every
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
        return _FLOAT64 in codec.pack_native(value)
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
    :func:`exact` relies on; ``tests/unit/test_jsonl_exact.py``). What orjson refuses
    (lone surrogates, integers past 64 bits, keys that are not strings, a
    :class:`BigInteger`) goes to the standard library. One difference remains: orjson
    writes NaN and the infinities as ``null`` where the standard library refuses
    them; no stored record holds one (a line with one is kept as its bytes), so only a
    value built from such a line, e.g. a tool call's arguments, is written with
    ``null`` instead of failing.
    """
    if _orjson is not None:
        try:
            out = _orjson.dumps(value)
        except (TypeError, _orjson.JSONEncodeError):
            pass
        else:
            if _renders_alike(value, out):
                return out
    return _stdlib_render(value)[0]


def _stdlib_render(value: Any) -> tuple[bytes, bool]:
    """:func:`dumps` by the standard library alone (the renderer the fast path
    matches), and whether the value held a :class:`BigInteger` (written as its digits)."""
    try:
        return _encoder.encode(value).encode("utf-8", "surrogatepass"), False
    except TypeError:  # a BigInteger, or something no JSON can hold
        pass
    bigs: list[BigInteger] = []

    def swap(v: Any) -> Any:
        if isinstance(v, BigInteger):
            bigs.append(v)
            return f"\0{mark}{len(bigs) - 1}\0"
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    mark = os.urandom(8).hex()
    text = _encoder.encode(swap(value))
    for i, digits in enumerate(bigs):
        # A string holding NUL is written with \u0000: the marker cannot occur otherwise.
        text = text.replace(f'"\\u0000{mark}{i}\\u0000"', digits.digits, 1)
    return text.encode("utf-8", "surrogatepass"), bool(bigs)


def _stdlib_dumps(value: Any) -> bytes:
    return _stdlib_render(value)[0]


def exact(value: Any, raw: bytes) -> bool:
    """True when :func:`dumps` reproduces ``raw`` byte for byte and the value can be
    stored as a record (msgpack carries integers of 64 bits at most, and a
    :class:`BigInteger` would come back a string)."""
    if _orjson is not None:
        try:
            if _orjson.dumps(value) == raw and _renders_alike(value, raw):
                return True
        except (TypeError, _orjson.JSONEncodeError):
            pass
    try:
        out, big = _stdlib_render(value)
        if big or out != raw:
            return False
        codec.pack_native(value)  # the slow path only: what orjson refused
        return True
    except (ValueError, TypeError, UnicodeEncodeError, OverflowError):
        return False


@dataclass(frozen=True)
class Line:
    """One line of a JSON-lines file, as bytes, with where it sits in the file."""

    number: int  # 1-based
    start: int  # byte offset of the first byte
    end: int  # byte offset just past the line terminator
    raw: bytes  # the line without its terminating b"\n"
    terminated: bool  # False only for a last line that has no b"\n" yet


#: The longest line read (see :data:`fileio.MAX_PIECE`): a longer one is refused, not
#: read into memory whole (a file of one endless line would take all of it).
MAX_LINE = MAX_PIECE


def iter_lines(fh: IO[bytes], *, start: int = 0, first_number: int = 1, limit: int | None = None) -> Iterator[Line]:
    """Yield the lines of a binary stream from byte offset ``start``.

    Blank lines are yielded too (callers skip them) so that line numbers stay true.
    A line longer than ``limit`` bytes (:data:`MAX_LINE`) raises :class:`InputError` naming it.
    """
    limit = limit or MAX_LINE
    fh.seek(start)
    pos = start
    number = first_number
    with progress.task("reading session", _size(fh) - start or None, "bytes") as shown:
        yield from _lines(fh, pos, number, limit, shown)


def _size(fh: IO[bytes]) -> int:
    try:
        return os.fstat(fh.fileno()).st_size
    except (OSError, AttributeError, ValueError):  # not a file (a test's BytesIO): no total
        return 0


def _lines(fh: IO[bytes], pos: int, number: int, limit: int, shown: progress.Task) -> Iterator[Line]:
    for chunk in iter(partial(fh.readline, limit), b""):
        end = pos + len(chunk)
        terminated = chunk.endswith(b"\n")
        if not terminated and len(chunk) >= limit:
            name = getattr(fh, "name", None)
            raise InputError(
                f"a line longer than {limit >> 20 or limit} {'MiB' if limit >> 20 else 'bytes'}, "
                "longer than any agent writes",
                path=name if isinstance(name, str) else None, line=number,
                hint="check that this is an agent's session file (not a log, an image or a dump)",
            )
        raw = chunk[:-1] if terminated else chunk
        yield Line(number, pos, end, raw, terminated)
        shown.advance(end - pos)
        pos = end
        number += 1


class ParseFailure(Exception):
    """Internal: a line that is not a JSON value (carries a short reason)."""


# Python refuses to turn a decimal string of more digits than this into an int (the
# conversion takes quadratic time: a line of a million digits would take a minute).
_INT_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 4300)() or None


class BigInteger:
    """A JSON integer longer than Python converts (over 4,300 digits: the conversion
    takes quadratic time), kept as its digits. :func:`dumps` writes the digits, the
    record codec stores it as an extension type (:mod:`codec`), and a line that holds
    one is stored as its bytes (:func:`exact` is False), so it commits and round-trips
    byte-identically."""

    __slots__ = ("digits",)

    def __init__(self, digits: str) -> None:
        self.digits = digits

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BigInteger) and other.digits == self.digits

    def __hash__(self) -> int:
        return hash(self.digits)

    def __str__(self) -> str:
        return self.digits

    def __repr__(self) -> str:
        return f"BigInteger({len(self.digits)} digits)"


def _integer(text: str) -> int | BigInteger:
    if _INT_DIGITS is not None and len(text) - text.startswith("-") > _INT_DIGITS:
        return BigInteger(text)
    return int(text)


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
    except ValueError:  # an integer past the int-string limit (the only other ValueError)
        pass
    try:
        return json.loads(text, parse_int=_integer)
    except RecursionError:
        raise ParseFailure("JSON nested too deeply") from None


def loads(text: str) -> Any:
    """``json.loads``, with an integer past the int-string limit read as a
    :class:`BigInteger` instead of raising ValueError (a whole-file document)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # the int-string limit
        return json.loads(text, parse_int=_integer)


def parse_kept(raw: bytes) -> Any:
    """Parse a line that was kept as its bytes (one :func:`exact` refused) so that every
    number reads back as written: orjson reads an integer past 64 bits as a float
    (``1.2345678901234568e+29``), the standard library reads it exactly, and one past
    the int-string limit becomes a :class:`BigInteger`. What re-renders such a line (an
    export rewriting its session id) then writes the same digits."""
    if b"\x00" in raw:
        raise ParseFailure("binary data (NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseFailure(f"not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text, parse_int=_integer)
    except json.JSONDecodeError as exc:
        raise ParseFailure(f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ParseFailure("JSON nested too deeply") from None


# What a file that is not text most often is, by its first bytes.
_MAGIC = (
    (b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
    (b"%PDF", "a PDF document"), (b"PK\x03\x04", "a zip archive"), (b"\x1f\x8b", "a gzip archive"),
    (b"\x28\xb5\x2f\xfd", "a zstd archive"), (b"7z\xbc\xaf", "a 7-Zip archive"), (b"\x7fELF", "a program (ELF)"),
    (b"SQLite format 3\x00", "an SQLite database"), (b"BZh", "a bzip2 archive"), (b"\xfd7zXZ", "an xz archive"),
)
_WIDE = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
         (b"\xfe\xff", "UTF-16"))


def describe_binary(head: bytes) -> tuple[str, str] | None:
    """(what the file is, what to do) for a file that is obviously not UTF-8 text, from
    its first bytes; None when it may be text."""
    for magic, what in _WIDE:
        if head.startswith(magic):
            return (f"{what} text, not UTF-8", f"convert it first: iconv -f {what} -t UTF-8 FILE > session.jsonl")
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return (f"{what}, not a JSON-lines session", "give the path of the agent's .jsonl session file")
    if b"\x00" in head[:4096]:
        if head[1:2] == b"\x00" or head[:1] == b"\x00":  # UTF-16 without a byte-order mark
            return ("UTF-16 text (or binary data), not UTF-8",
                    "if it is UTF-16, convert it first: iconv -f UTF-16 -t UTF-8 FILE > session.jsonl")
        return ("a binary file, not a JSON-lines session", "give the path of the agent's .jsonl session file")
    return None


def sniff_binary(path: str, head: bytes) -> None:
    """Refuse files that are obviously not text (images, archives, UTF-16, zstd
    without its name), saying what they are."""
    found = describe_binary(head) if head else None
    if found is not None:
        what, hint = found
        raise InputError(f"this is {what}", path=path, line=1, hint=hint)

"""Canonical msgpack and zstd framing: the only importer of msgpack and zstandard.

Two rules keep content addresses stable:

* An object's identity is SHA-256 over its *canonical, uncompressed* msgpack bytes.
  Canonical means: opal's own maps have their keys sorted, times are integers
  (milliseconds since the epoch), and every object starts with a format version.
  zstd output is only reproducible for one library version and level, so
  compression is a storage detail (:func:`frame`), never part of an id.
* Source records (a line of an agent's session file) are stored as *ordered*
  msgpack: their key order is data, because writing the record back must give
  the agent's exact bytes. Ordered values are packed on their own
  (:func:`pack_ordered`) and embedded as a byte string in the canonical map.

Large strings inside a source record are moved out into payload objects and
replaced by a :class:`PayloadRef` (msgpack ext type 1 holding the payload's
SHA-256), so a file that the agent read twenty times is stored once. JSON integers
that msgpack cannot carry are ext types too: past 64 bits as two's complement bytes
(type 2), past Python's int-string limit as their digits (type 3, a
:class:`~opalgit.jsonl.BigInteger`).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Callable, Iterable

import msgpack
import zstandard

from opalgit.errors import CorruptObjectError, UsageError

FORMAT_VERSION = 1

#: Strings at least this long (UTF-8 bytes) inside a source record become payloads.
PAYLOAD_THRESHOLD = 2048

_EXT_PAYLOAD = 1
_EXT_BIG_INT = 2  # an integer past 64 bits
_EXT_BIG_DIGITS = 3  # a jsonl.BigInteger: past the int-string limit, kept as its digits
_DIGITS = re.compile(rb"-?[0-9]+")

# Storage frames. The first bytes say how the rest is stored, so a reader never
# guesses: zstd (level 3, content size in the frame) or raw when zstd would not help.
MAGIC_ZSTD = b"OPZ1"
MAGIC_RAW = b"OPR1"
_ZSTD_LEVEL = 3
_MIN_COMPRESS = 64

_compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL, write_content_size=True)
_decompressor = zstandard.ZstdDecompressor()

#: The most bytes one stored body may decompress to: a leaf, a payload pack's
#: content, a payload (docs/format.md, *Size limits*). Writers refuse to store more
#: (:func:`check_size`) and readers refuse to inflate more, before allocating: a
#: 64 KiB zstd frame can claim 2 GiB, and python-zstandard allocates whatever a
#: frame's header claims, whatever ``max_output_size`` says.
MAX_OBJECT_SIZE = 256 << 20
#: The most a header decompresses to: a state header, an operation, a pack's header.
#: They hold ids, counts and names, never a session's content.
MAX_HEADER_SIZE = 16 << 20
#: The most a zstd file written by someone else (a Codex ``.jsonl.zst``) is read to.
MAX_EXTERNAL_SIZE = 1 << 31


class PayloadRef:
    """A reference to a payload object, by the SHA-256 of its bytes."""

    __slots__ = ("digest",)

    def __init__(self, digest: bytes) -> None:
        if len(digest) != 32:
            raise CorruptObjectError("a payload reference must hold a 32-byte SHA-256")
        self.digest = digest

    @property
    def hex(self) -> str:
        return self.digest.hex()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PayloadRef) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"PayloadRef({self.digest.hex()[:12]})"


def digest(data: bytes) -> bytes:
    """The content address of canonical bytes (SHA-256, raw 32 bytes)."""
    return hashlib.sha256(data).digest()


# --------------------------------------------------------------------------- frames


def frame(data: bytes, *, limit: int = MAX_OBJECT_SIZE) -> bytes:
    """Wrap bytes for storage: zstd-compressed when that makes them smaller (and
    refused beyond ``limit``, what readers inflate for its kind)."""
    check_size(len(data), "a stored object", limit)
    if len(data) >= _MIN_COMPRESS:
        packed = _compressor.compress(data)
        if len(packed) + len(MAGIC_ZSTD) < len(data):
            return MAGIC_ZSTD + packed
    return MAGIC_RAW + data


def raw_dict(data: bytes) -> "zstandard.ZstdCompressionDict":
    """``data`` as a raw-content zstd dictionary: later bytes may refer back into it."""
    return zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


def check_size(size: int, what: str, limit: int = MAX_OBJECT_SIZE) -> None:
    """Refuse to store a body that readers would refuse to inflate."""
    if size > limit:
        raise UsageError(
            f"{what} would take {size:,} bytes, more than the {limit:,} opal stores in one object",
            hint="nothing was changed; a session line this large cannot be recorded (see docs/format.md, Size limits)",
        )


def decompress(
    data: bytes | memoryview,
    *,
    what: str,
    limit: int = MAX_OBJECT_SIZE,
    exact: int | None = None,
    dictionary: "zstandard.ZstdCompressionDict | None" = None,
) -> bytes:
    """One zstd frame of a stored object, inflated to at most ``limit`` bytes (or to
    exactly ``exact``, when the format says how large it is), refused beyond that
    *before* anything is allocated. ``what`` names the object in errors."""
    if exact is not None:
        if exact > limit:
            raise CorruptObjectError(f"{what} claims {exact:,} bytes, more than the {limit:,} opal reads")
        limit = exact
    try:
        claimed = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise CorruptObjectError(f"{what} does not decompress: {exc}") from None
    if claimed > limit:
        raise CorruptObjectError(f"{what} claims {claimed:,} bytes, more than the {limit:,} opal reads")
    d = zstandard.ZstdDecompressor(dict_data=dictionary) if dictionary is not None else _decompressor
    try:
        if claimed >= 0:
            out = d.decompress(data)  # allocates what the frame claims: checked above
        else:  # no size in the frame: inflate in steps, never much past the limit
            dobj, view, pos, buf = d.decompressobj(), memoryview(data), 0, bytearray()
            while pos < len(view) and not dobj.eof:
                piece, pos = _feed(dobj, view, pos, limit - len(buf))
                buf += piece
                if len(buf) > limit:
                    raise CorruptObjectError(f"{what} inflates to more than the {limit:,} bytes opal reads")
            if not dobj.eof:
                raise CorruptObjectError(f"{what} is cut short")
            out = bytes(buf)
    except zstandard.ZstdError as exc:
        raise CorruptObjectError(f"{what} does not decompress: {exc}") from None
    if exact is not None and len(out) != exact:
        raise CorruptObjectError(f"{what} holds {len(out):,} bytes, its header says {exact:,}")
    return out


#: zstd's largest expansion: a 4-byte RLE block stands for 128 KiB.
_MAX_RATIO = 32768


def _feed(dobj, data: memoryview, pos: int, room: int) -> tuple[bytes, int]:
    """Give ``dobj`` the next piece of ``data`` from ``pos``, small enough that its
    output cannot pass ``room`` by more than a few MiB (a decompressobj returns all
    that its input stands for: 64 KiB of input can be 2 GiB). Returns the output and
    the new position."""
    step = max(256, min(_ZSTD_CHUNK, room // _MAX_RATIO))
    return dobj.decompress(data[pos : pos + step]), pos + step


def unframe(blob: bytes, *, limit: int = MAX_OBJECT_SIZE, what: str = "a stored object") -> bytes:
    """Inverse of :func:`frame`, inflating at most ``limit`` bytes; raises
    :class:`CorruptObjectError` on anything else."""
    head = blob[:4]
    if head == MAGIC_RAW:
        return blob[4:]
    if head == MAGIC_ZSTD:
        return decompress(memoryview(blob)[4:], what=what, limit=limit)
    raise CorruptObjectError(f"{what} has no opal frame header")


_ZSTD_CHUNK = 64 * 1024


def zstd_decompress(data: bytes, *, limit: int | None = None) -> bytes:
    """Decompress a zstd stream written by someone else (e.g. Codex's ``.jsonl.zst``).

    Accepts several frames and frames without a content size. With ``limit``, returns
    at most the first ``limit`` bytes and accepts input that is cut short (to read a
    file's head); without it, a cut-short or corrupt stream raises
    :class:`CorruptObjectError`.
    """
    cap = MAX_EXTERNAL_SIZE if limit is None else max(0, limit)
    out = bytearray()
    rest = memoryview(data)
    try:
        while len(rest) and len(out) < cap:
            dobj = _decompressor.decompressobj()
            pos = 0
            while pos < len(rest) and not dobj.eof and len(out) <= cap:
                piece, pos = _feed(dobj, rest, pos, cap - len(out))
                out += piece
            if not dobj.eof:
                if limit is None and len(out) <= cap:
                    raise CorruptObjectError("the zstd stream is cut short")
                break
            rest = memoryview(dobj.unused_data + bytes(rest[pos:]))
    except zstandard.ZstdError as exc:
        raise CorruptObjectError(f"not a valid zstd stream: {exc}") from None
    if limit is None and len(out) > cap:
        raise CorruptObjectError("the zstd stream decompresses to more than opal accepts")
    return bytes(out[:cap])


# --------------------------------------------------------------------- canonical maps


def _canonical_value(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key in sorted(value):
            if not isinstance(key, str):
                raise TypeError(f"canonical map keys must be strings, not {type(key).__name__}")
            out[key] = _canonical_value(value[key])
        return out
    if isinstance(value, (list, tuple)):
        return [_canonical_value(v) for v in value]
    if isinstance(value, float):
        raise TypeError("canonical objects hold no floats (times are integer milliseconds)")
    return value


def _default(obj: Any) -> Any:
    if isinstance(obj, PayloadRef):
        return msgpack.ExtType(_EXT_PAYLOAD, obj.digest)
    if isinstance(obj, int) and not isinstance(obj, bool):
        # Past msgpack's 64 bits (a JSON integer of a whole document, e.g. Gemini's):
        # two's complement, big-endian, which converts in linear time at any size.
        return msgpack.ExtType(_EXT_BIG_INT, obj.to_bytes(obj.bit_length() // 8 + 1, "big", signed=True))
    from opalgit.jsonl import BigInteger  # here: readers that never meet one do not load jsonl (and orjson)

    if isinstance(obj, BigInteger):
        return msgpack.ExtType(_EXT_BIG_DIGITS, obj.digits.encode("ascii"))
    raise TypeError(f"cannot encode {type(obj).__name__}")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_PAYLOAD:
        return PayloadRef(data)
    if code == _EXT_BIG_INT and data:
        return int.from_bytes(data, "big", signed=True)
    if code == _EXT_BIG_DIGITS and _DIGITS.fullmatch(data):
        from opalgit.jsonl import BigInteger

        return BigInteger(data.decode("ascii"))
    raise CorruptObjectError(f"unknown msgpack extension type {code}")


def pack_canonical(kind: str, body: dict) -> bytes:
    """Canonical bytes of an opal object: ``[FORMAT_VERSION, kind, body]``."""
    return msgpack.packb(
        [FORMAT_VERSION, kind, _canonical_value(body)], use_bin_type=True, default=_default
    )


def unpack_canonical(data: bytes, kind: str | None = None) -> dict:
    """Decode canonical bytes and check the envelope; returns the body map."""
    try:
        obj = msgpack.unpackb(data, raw=False, ext_hook=_ext_hook, strict_map_key=True)
    except CorruptObjectError:
        raise
    except Exception as exc:  # msgpack raises several unrelated types
        raise CorruptObjectError(f"a stored object is not valid msgpack: {exc}") from None
    if not (isinstance(obj, list) and len(obj) == 3 and isinstance(obj[2], dict)):
        raise CorruptObjectError("a stored object lacks the [version, kind, body] envelope")
    version, got_kind, body = obj
    if version != FORMAT_VERSION:
        raise CorruptObjectError(
            f"a stored object has format version {version!r}; this opal reads {FORMAT_VERSION}",
        )
    if kind is not None and got_kind != kind:
        raise CorruptObjectError(f"expected a {kind!r} object, found {got_kind!r}")
    return body


# ----------------------------------------------------------------- ordered (source) values


def pack_ordered(value: Any) -> bytes:
    """Pack a source value keeping its key order (order is part of the record).

    A lone surrogate (JSON's ``"\\ud800"``, which a whole document such as a Gemini
    session may hold) is written as its surrogatepass bytes, as payloads are, and read
    back as the same code point; every other string is plain UTF-8."""
    return msgpack.packb(value, use_bin_type=True, default=_default, unicode_errors="surrogatepass")


def unpack_ordered(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, ext_hook=_ext_hook, strict_map_key=False,
                               unicode_errors="surrogatepass")
    except CorruptObjectError:
        raise
    except Exception as exc:
        raise CorruptObjectError(f"a stored record is not valid msgpack: {exc}") from None


def externalize(value: Any, payloads: dict[bytes, bytes], threshold: int = PAYLOAD_THRESHOLD) -> Any:
    """Replace long strings in a JSON value by :class:`PayloadRef`; fill ``payloads``.

    Returns a new value (the input is not modified). Dict key order is kept.
    """
    return _externalize(value, payloads, threshold)


# A module function, not a closure that calls itself: such a closure is a reference
# cycle, which kept ``payloads`` (a record's long strings as bytes) alive until the
# next garbage collection, after the record was stored.
def _externalize(v: Any, payloads: dict[bytes, bytes], threshold: int) -> Any:
    if isinstance(v, str):
        if len(v) >= threshold // 4:  # cheap pre-check before encoding
            data = v.encode("utf-8", "surrogatepass")
            if len(data) >= threshold:
                d = digest(data)
                payloads.setdefault(d, data)
                return PayloadRef(d)
        return v
    if isinstance(v, dict):
        return {k: _externalize(x, payloads, threshold) for k, x in v.items()}
    if isinstance(v, list):
        return [_externalize(x, payloads, threshold) for x in v]
    return v


def internalize(value: Any, load: Callable[[bytes], bytes]) -> Any:
    """Inverse of :func:`externalize`: resolve every :class:`PayloadRef` with ``load``."""

    def walk(v: Any) -> Any:
        if isinstance(v, PayloadRef):
            return load(v.digest).decode("utf-8", "surrogatepass")
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)


def payload_refs(value: Any) -> Iterable[bytes]:
    """Every payload digest referenced inside a (decoded) value."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, PayloadRef):
            yield v.digest
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def pack_native(value: Any) -> bytes:
    """msgpack as the library writes a value it carries natively, without opal's
    extension types: raises TypeError, ValueError or OverflowError on anything else
    (an integer past 64 bits, a :class:`~opalgit.jsonl.BigInteger`, a lone surrogate).
    For bytes that never become an object: the question whether a value is storable
    as it is (:func:`opalgit.jsonl.exact`), and the redaction worker's pipe."""
    return msgpack.packb(value)


def unpack_native(data: bytes) -> Any:
    """The value :func:`pack_native` packed."""
    return msgpack.unpackb(data, strict_map_key=False)


def pack_plain(value: Any) -> bytes:
    """msgpack for small internal structures whose order is fixed by construction."""
    return msgpack.packb(value, use_bin_type=True, default=_default)


def unpack_plain(data: bytes) -> Any:
    return unpack_ordered(data)

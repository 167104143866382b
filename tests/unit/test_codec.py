"""Canonical encoding, framing and content addresses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opalgit import codec
from opalgit.errors import CorruptObjectError
from opalgit.history.model import SessionInfo, Source, StateHeader, Turn

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


def test_canonical_sorts_keys_and_puts_version_first():
    a = codec.pack_canonical("x", {"b": 1, "a": {"d": 2, "c": 3}})
    b = codec.pack_canonical("x", {"a": {"c": 3, "d": 2}, "b": 1})
    assert a == b
    assert a[1] == codec.FORMAT_VERSION  # fixarray header, then the version
    assert codec.unpack_canonical(a, "x") == {"a": {"c": 3, "d": 2}, "b": 1}


def test_canonical_refuses_floats():
    with pytest.raises(TypeError):
        codec.pack_canonical("x", {"t": 1.5})


def test_wrong_kind_and_garbage_are_corrupt_errors():
    data = codec.pack_canonical("leaf", {})
    with pytest.raises(CorruptObjectError):
        codec.unpack_canonical(data, "turn")
    with pytest.raises(CorruptObjectError):
        codec.unpack_canonical(b"\xc1\xc1", "turn")
    with pytest.raises(CorruptObjectError):
        codec.unframe(b"XXXXnothing")
    with pytest.raises(CorruptObjectError):
        codec.unframe(codec.MAGIC_ZSTD + b"not zstd at all")


@given(st.binary(max_size=5000))
def test_frame_roundtrip(data):
    assert codec.unframe(codec.frame(data)) == data


def test_frame_compresses_repetitive_data():
    data = b"the same line again\n" * 500
    assert len(codec.frame(data)) < len(data) // 10


@given(json_values)
@settings(max_examples=200)
def test_turn_identity_is_over_canonical_bytes_and_roundtrips(value):
    record = {"type": "user", "value": value, "big": "x" * 5000}
    payloads: dict[bytes, bytes] = {}
    turn = Turn.from_record("claude", record)
    canon = turn.encode(payloads)
    assert list(payloads) == [codec.digest(b"x" * 5000)]
    again = Turn.from_record("claude", record).encode({})
    assert canon == again  # deterministic
    decoded = Turn.decode(canon)
    resolved = decoded.resolve(lambda d: payloads[d])
    assert resolved.record == record
    assert list(resolved.record) == list(record)  # key order kept


def test_key_order_is_part_of_a_record():
    a = Turn.from_record("claude", {"a": 1, "b": 2}).encode({})
    b = Turn.from_record("claude", {"b": 2, "a": 1}).encode({})
    assert a != b


def test_identical_payloads_are_stored_once():
    payloads: dict[bytes, bytes] = {}
    big = "file contents\n" * 400
    Turn.from_record("claude", {"read": big}).encode(payloads)
    Turn.from_record("claude", {"again": big, "and": big}).encode(payloads)
    assert len(payloads) == 1


def test_state_header_roundtrip_and_check():
    h = StateHeader(
        session=SessionInfo("claude", "abc", cwd="/p", model="m"),
        items=10,
        turns=4,
        source=Source("/f.jsonl", 100, 10, b"\x00" * 32, {"leaf": "u"}),
        new_items=(3, 10),
        chars=1234,
        extra={"detached": "rewound"},
    )
    back = StateHeader.decode(h.encode())
    assert back == h
    bad = StateHeader(session=None, items=1, turns=2)
    with pytest.raises(CorruptObjectError):
        StateHeader.decode(bad.encode())


@given(st.binary(max_size=300))
@settings(max_examples=300)
def test_decoders_raise_only_corrupt_object_errors(data):
    for decode in (lambda d: Turn.decode(d), lambda d: StateHeader.decode(d), lambda d: codec.unframe(d)):
        try:
            decode(data)
        except CorruptObjectError:
            pass


def test_a_frame_claiming_more_than_its_kind_allows_is_refused_before_allocating():
    """python-zstandard allocates whatever a frame claims, whatever max_output_size
    says: the claim is checked first, against the limit for the kind of object."""
    import resource

    from tests.unit.test_reliability import zstd_bomb

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    bomb = b"OPZ1" + zstd_bomb(2 << 30)
    assert len(bomb) < 70_000
    with pytest.raises(CorruptObjectError, match="claims 2,147,483,648 bytes"):
        codec.unframe(bomb)
    small = b"OPZ1" + zstd_bomb(codec.MAX_HEADER_SIZE + 1)
    with pytest.raises(CorruptObjectError, match="claims"):
        codec.unframe(small, limit=codec.MAX_HEADER_SIZE)
    assert codec.unframe(b"OPZ1" + zstd_bomb(1000)) == bytes(1000)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB


def test_a_frame_without_a_size_is_inflated_no_further_than_the_limit():
    import zstandard

    c = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    frame = b"".join(c.compress(bytes(1 << 20)) for _ in range(64)) + c.flush()  # 64 MiB, no size
    with pytest.raises(CorruptObjectError, match="more than the 1,048,576 bytes"):
        codec.decompress(frame, what="a test frame", limit=1 << 20)
    assert len(codec.decompress(frame, what="a test frame", limit=64 << 20)) == 64 << 20
    assert len(codec.zstd_decompress(frame, limit=1000)) == 1000


def test_nothing_is_stored_that_readers_would_refuse():
    from opalgit.errors import UsageError

    with pytest.raises(UsageError, match="more than the 16 opal stores"):
        codec.frame(b"x" * 17, limit=16)

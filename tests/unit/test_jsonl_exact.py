"""jsonl.exact's fast path (orjson) agrees with the renderer (the standard library)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from opalgit import jsonl

orjson = jsonl._orjson

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_exact_agrees_with_the_renderer(value):
    # Whatever bytes a line holds, exact() says True only when dumps() reproduces them.
    candidates = [jsonl.dumps(value)]
    if orjson is not None:
        try:
            candidates.append(orjson.dumps(value))
        except (TypeError, orjson.JSONEncodeError):
            pass
    for raw in candidates:
        assert jsonl.exact(value, raw) == (jsonl.dumps(value) == raw)


def test_floats_that_the_two_encoders_write_differently():
    for f in (1e-05, 1e-07, 0.00001, 1e16, 1e22, 123456789012345680.0, 5e-324):
        value = {"a": f, "b": [f]}
        fast = orjson.dumps(value) if orjson is not None else jsonl.dumps(value)
        assert jsonl.exact(value, fast) == (jsonl.dumps(value) == fast)
        assert jsonl.exact(value, jsonl.dumps(value))


def test_a_bare_number_line():
    for raw in (b"1.192092896e-7", b"0.00001", b"-1e-7"):
        value = json.loads(raw)
        assert jsonl.exact(value, raw) == (jsonl.dumps(value) == raw)


def test_timestamps_and_ids_keep_the_fast_path():
    raw = b'{"timestamp":"2026-09-21T10:00:00.000Z","uuid":"4e5f0e12-1e2d","n":3}'
    assert not jsonl._float_may_differ(raw)
    assert jsonl.exact(json.loads(raw), raw)


def test_a_value_without_floats_skips_the_marker_search():
    # The markers in prose ("re-run", "0.00001 s") do not matter when the value holds
    # no float; they do when it holds one, wherever it sits.
    raw = b'{"text":"re-run with 1e-7 and 0.00001","n":[1,2,{"k":3}]}'
    value = json.loads(raw)
    assert not jsonl._holds_float(value)
    assert jsonl.exact(value, raw)
    for v in (1e-7, [1, {"a": [0.5]}], {"deep": [[[[2.0]]]]}, {"k": "x", "f": -0.0}):
        assert jsonl._holds_float(v), v
    # Values msgpack cannot carry are assumed to hold one (the marker search decides).
    assert jsonl._holds_float({"s": "lone \ud800 surrogate"})
    assert jsonl._holds_float({"big": 2**70})
    assert jsonl._holds_float(json.loads("[" * 900 + "0.5" + "]" * 900))


@settings(max_examples=400, deadline=None)
@given(values)
def test_holds_float_never_misses_one(value):
    def floats_in(v):
        if isinstance(v, float):
            return True
        if isinstance(v, list):
            return any(floats_in(x) for x in v)
        if isinstance(v, dict):
            return any(floats_in(x) for x in v.values())
        return False

    if floats_in(value):
        assert jsonl._holds_float(value)


def test_a_sweep_of_float_magnitudes():
    # Every magnitude, both signs, short and long digit strings: exact() never says
    # yes where the renderer would write other bytes, for the installed orjson.
    import random

    rnd = random.Random(7)
    floats = [m * 10.0**e for e in range(-320, 308) for m in (1, 1.5, 2.5, 7, 9.99, 3.14159, 123456789)]
    floats += [rnd.uniform(0, 1) * 10.0 ** rnd.randrange(-20, 25) for _ in range(20_000)]
    for f in floats:
        if f != f or f in (float("inf"), float("-inf")):
            continue
        for v in (f, -f):
            value = {"x": v, "y": [v, 1]}
            raw = orjson.dumps(value) if orjson is not None else jsonl.dumps(value)
            assert jsonl.exact(value, raw) == (jsonl.dumps(value) == raw), (v, raw)


@settings(max_examples=600, deadline=None)
@given(values)
def test_dumps_writes_what_the_standard_library_writes(value):
    # dumps takes orjson's bytes when no float may differ: they must be the renderer's.
    assert jsonl.dumps(value) == jsonl._stdlib_dumps(value)


def test_dumps_falls_back_for_what_orjson_refuses():
    for value in ({"s": "lone \ud800 surrogate"}, {"big": 2**70}, {1: "int key"}, [{"a": (1, 2)}]):
        assert jsonl.dumps(value) == jsonl._stdlib_dumps(value)
    for f in (1e-05, 1e-07, 1e16, 5e-324, -0.0):
        assert jsonl.dumps({"f": f}) == jsonl._stdlib_dumps({"f": f})
    if orjson is not None:  # NaN: orjson writes null where the standard library refuses (see jsonl.dumps)
        assert jsonl.dumps({"x": float("nan")}) == b'{"x":null}'

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


def test_timestamps_and_ids_keep_the_fast_path():
    raw = b'{"timestamp":"2026-09-21T10:00:00.000Z","uuid":"4e5f0e12-1e2d","n":3}'
    assert not jsonl._FLOAT.search(raw)
    assert jsonl.exact(json.loads(raw), raw)

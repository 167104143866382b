"""Shared adapter helpers: record timestamps."""

from __future__ import annotations

import calendar

from hypothesis import given, settings
from hypothesis import strategies as st

from opalgit.agents import base
from opalgit.agents.base import parse_time


def test_javascript_timestamps_and_their_neighbours():
    assert parse_time("1970-01-01T00:00:00.000Z") == 0
    assert parse_time("2026-01-02T03:04:05.678Z") == calendar.timegm((2026, 1, 2, 3, 4, 5)) * 1000 + 678
    assert parse_time("2026-01-02T03:04:05.678+01:00") == parse_time("2026-01-02T02:04:05.678Z")
    assert parse_time("2026-01-02T03:04:05Z") == calendar.timegm((2026, 1, 2, 3, 4, 5)) * 1000
    # What the C parser refuses is decided by the long way, as before it existed.
    assert parse_time("2024-02-30T00:00:00.000Z") == parse_time("2024-03-01T00:00:00.000Z")
    assert parse_time("2016-12-31T23:59:60.000Z") == parse_time("2017-01-01T00:00:00.000Z")
    for refused in ("2025-W48-1T21:19:07.123Z", "2025-11-30T24:00:00.000Z", "0000-01-01T00:00:00.000Z",
                    "2025-13-01T00:00:00.000Z", "2025-11-30T21", "", "yesterday", "2025-11-30"):
        assert parse_time(refused) is None, refused
    assert parse_time(1_700_000_000) == 1_700_000_000_000
    assert parse_time(1_700_000_000_123) == 1_700_000_000_123
    assert parse_time(True) is None and parse_time(None) is None and parse_time(float("nan")) is None


# Strings of the JavaScript shape with any character anywhere: the quick way must
# agree with the long one whenever it answers.
_chars = st.sampled_from("0123456789" * 4 + "-T:.Z +W\u0661")


@given(st.lists(_chars, min_size=24, max_size=24), st.booleans())
@settings(max_examples=3000, deadline=None)
def test_the_quick_way_agrees_with_the_long_way(chars, shaped):
    if shaped:  # keep the separators, so that the quick way is tried
        for at, sep in zip((4, 7, 10, 13, 16, 19, 23), "--T::.Z"):
            chars[at] = sep
    text = "".join(chars)
    assert parse_time(text) == base._rfc3339(text)


@given(st.datetimes(timezones=st.just(base.datetime.timezone.utc)))
@settings(max_examples=500, deadline=None)
def test_every_real_instant_reads_back(moment):
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    if moment.year < 1000:
        return  # strftime does not pad years below 1000 on every platform
    assert parse_time(text) == base._rfc3339(text) == (moment - base._EPOCH) // base._MS

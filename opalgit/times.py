"""The two time formats opal writes for machines: ISO 8601, UTC, with a ``Z``.

``2026-12-01T23:45:07Z`` for a time in seconds, ``2026-12-01T23:45:07.071Z`` where
the source has milliseconds (turn times, the op log); None where the time is not
known. The porcelain puts them in its ``to_json`` values and the CLI's ``--json``
schema (:mod:`opalgit.cli.jsonout`) names them as its one time format: they live here,
below both, so that the porcelain does not import the CLI.
"""

from __future__ import annotations

import time


def iso_seconds(seconds: float | int | None) -> str | None:
    """``2026-12-01T23:45:07Z`` (a time with no meaningful milliseconds)."""
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(seconds)))


def iso_ms(ms: float | int | None) -> str | None:
    """``2026-12-01T23:45:07.071Z`` from milliseconds since the epoch."""
    if ms is None or isinstance(ms, bool) or not isinstance(ms, (int, float)):
        return None
    whole, frac = divmod(int(ms), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{frac:03d}Z"

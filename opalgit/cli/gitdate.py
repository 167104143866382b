"""Dates as git reads and writes them in ``git log``: ``--since``/``--until`` and ``%ar``.

:func:`approx` reads the forms of git's ``approxidate`` that people type: an ISO date
or date and time (``2026-01-02``, ``2026-01-02 10:00``, ``2026-01-02T10:00:00Z``), the
forms git writes (RFC 2822 and its own default), ``@1767225600`` or a bare timestamp,
``Jan 2 2026``, and relative ones (``2 weeks ago``, ``3.days.ago``, ``yesterday``,
``last week``, ``noon yesterday``, ``yesterday 10:00``, ``now``). Each gives the
instant ``git rev-parse --since=...`` gives (tests compare them), git's quirks
included: a date without a time of day means that date at the current time of day,
and a number of units counts back whether or not "ago" is written.

One difference, on purpose: git reads words it does not know as "now"
(``--since=garbage`` shows everything); here they are an error that says which word.

:func:`relative` is git's ``show_date_relative`` (``%ar``: "3 hours ago").
"""

from __future__ import annotations

import datetime as _dt
import re
import time

from opalgit.errors import UsageError
from opalgit.plural import count
from opalgit.store.ident import _fields_date, _month, _zone, parse_date

HINT = "e.g. 2026-01-02, '2026-01-02 10:00', '2 weeks ago', yesterday, @1767225600"

_UNITS = {
    "second": 1, "sec": 1, "minute": 60, "min": 60, "hour": 3600, "hr": 3600,
    "day": 86400, "week": 7 * 86400, "month": -1, "year": -12,  # months, years: calendar fields
}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "last": 1}
_DATE = re.compile(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})")
_NAMED = re.compile(r"(?:([A-Za-z]{3,})\.? +(\d{1,2})|(\d{1,2}) +([A-Za-z]{3,})\.?),? +(\d{4})")
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d)(?:\.\d+)?)? ?(Z|UTC|[+-]\d\d(?::?\d\d)?)?", re.I)
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")


def approx(text: str, now: float | None = None, *, option: str = "--since") -> int:
    """Seconds since the epoch that ``text`` names, read as git's ``approxidate``."""
    now = time.time() if now is None else now
    stripped = text.strip()
    if not stripped:
        raise UsageError(f"{option}: no date given", hint=HINT)
    if re.fullmatch(r"@\d+", stripped):
        return int(stripped[1:])
    if re.fullmatch(r"\d{9,}", stripped):  # git reads a long number as a timestamp
        return int(stripped)
    full = parse_date(stripped, now)
    if full is not None:
        return full[0]
    iso = _ISO.fullmatch(stripped)  # what ident leaves to git: any fraction, a far date
    if iso is not None:
        try:
            return _fields_date(*(int(iso[i] or 0) for i in range(1, 7)), _zone(iso[7]))[0]
        except (ValueError, LookupError):
            raise UsageError(f"{option} {text!r} is not a date and time opal can read", hint=HINT) from None
    day = _calendar_day(stripped)
    if day is not None:
        return _at_day(day, now)
    return _relative(stripped, now, option)


def _calendar_day(text: str) -> _dt.date | None:
    m = _DATE.fullmatch(text)
    try:
        if m is not None:
            return _dt.date(int(m[1]), int(m[2]), int(m[3]))
        m = _NAMED.fullmatch(text)
        if m is not None:
            name, day = (m[1], m[2]) if m[1] else (m[4], m[3])
            month = _month(name)
            if month is not None:
                return _dt.date(int(m[5]), month, int(day))
    except ValueError:
        raise UsageError(f"{text!r} is not a calendar date", hint=HINT) from None
    return None


def _tm(t: float) -> list[int]:
    lt = time.localtime(t)
    return [lt.tm_year, lt.tm_mon, lt.tm_mday, lt.tm_hour, lt.tm_min, lt.tm_sec, lt.tm_isdst]


def _mktime(tm: list[int]) -> int:
    # Like git, the daylight-saving flag stays the one of the moment the fields came
    # from, and out-of-range fields (Feb 31) roll over as libc's mktime rolls them.
    y, mo, d, h, mi, s, dst = tm
    return int(time.mktime((y, mo, d, h, mi, s, 0, 0, dst)))


def _back(tm: list[int], seconds: int) -> list[int]:
    """git's ``update_tm``: whole seconds back from the fields, read again as local time."""
    return _tm(_mktime(tm) - seconds)


def _at_day(day: _dt.date, now: float) -> int:
    # git keeps the current time of day when only a date is given.
    tm = _tm(now)
    tm[0:3] = [day.year, day.month, day.day]
    return _mktime(tm)


def _relative(text: str, now: float, option: str) -> int:
    """``2 weeks 3 days ago``, ``yesterday 10:00``, ``noon``: git's relative words,
    computed on local calendar fields the way git's ``approxidate`` does."""
    tm = _tm(int(now))
    words = [w for w in re.split(r"[\s.,]+", text.lower()) if w]
    pending: int | None = None
    for word in words:
        clock = _CLOCK.fullmatch(word)
        if word.isdigit() or word in _NUMBERS:
            pending = int(word) if word.isdigit() else _NUMBERS[word]
            continue
        unit = word[:-1] if word.endswith("s") and word[:-1] in _UNITS else word
        if unit in _UNITS:
            n = 1 if pending is None else pending
            pending = None
            step = _UNITS[unit]
            if step == -1:
                tm[1] -= n
            elif step == -12:
                tm[0] -= n
            else:
                tm = _back(tm, n * step)
        elif word in ("ago", "now", "today"):
            pass
        elif word == "yesterday":
            tm = _back(tm, 86400)
        elif word in ("noon", "midnight", "tea"):
            hour = {"noon": 12, "midnight": 0, "tea": 17}[word]
            if tm[3] < hour:
                tm = _back(tm, 86400)  # the last such time that has passed
            tm[3:6] = [hour, 0, 0]
        elif clock is not None:
            tm[3:6] = [int(clock[1]), int(clock[2]), int(clock[3] or 0)]
        else:
            raise UsageError(f"{option} {text!r}: {word!r} is not a date opal can read", hint=HINT)
    if pending is not None:
        raise UsageError(f"{option} {text!r}: {pending} of what?", hint="say the unit: '2 days ago', '3 weeks ago'")
    return _mktime(tm)


def relative(then: int, now: float | None = None) -> str:
    """How long ago ``then`` was, in git's words (``show_date_relative``)."""
    now = int(time.time() if now is None else now)
    if then > now:
        return "in the future"
    diff = now - then
    if diff < 90:
        return count(diff, "second") + " ago"
    diff = (diff + 30) // 60
    if diff < 90:
        return count(diff, "minute") + " ago"
    diff = (diff + 30) // 60
    if diff < 36:
        return count(diff, "hour") + " ago"
    diff = (diff + 12) // 24
    if diff < 14:
        return count(diff, "day") + " ago"
    if diff < 70:
        return count((diff + 3) // 7, "week") + " ago"
    if diff < 365:
        return count((diff + 15) // 30, "month") + " ago"
    if diff < 1825:
        total = (diff * 12 * 2 + 365) // (365 * 2)
        years, months = divmod(total, 12)
        if months:
            return f"{count(years, 'year')}, {count(months, 'month')} ago"
        return count(years, "year") + " ago"
    return count((diff + 183) // 365, "year") + " ago"

"""Who a commit is by and when, decided as git decides it.

A state or operation commit carries an author and a committer like any git commit,
and ``git log`` shows them beside the user's own commits, so they follow git's rules
(``ident.c``, ``date.c``):

- the name is ``GIT_AUTHOR_NAME`` (``GIT_COMMITTER_NAME``), else ``author.name``
  (``committer.name``), else ``user.name``; the email ``GIT_AUTHOR_EMAIL``, else
  ``author.email``, else ``user.email``, else ``$EMAIL``. Where git would guess one
  from the system, opal signs as ``opal <opal@localhost>`` instead (a hook must not
  fail, and a guessed ``root@host`` says no more).
- the date is ``GIT_AUTHOR_DATE`` (``GIT_COMMITTER_DATE``) in any form git reads,
  else now; the UTC offset is the one in force at that instant in the local
  timezone, daylight saving included (``TZ=Australia/Sydney`` is ``+1100`` in
  January and ``+1000`` in July).
- names and emails lose the characters git strips (:func:`without_crud`).

:func:`parse_date` reads the forms people write (``@<seconds> <+hhmm>``, ISO 8601,
RFC 2822, git's own default format); for any other text it answers None and the
caller asks git itself, so that every form git accepts means here what it means
there. Pure: no git, no environment of its own (the caller passes both).
"""

from __future__ import annotations

import re
import time
from typing import Callable, Mapping

from opalgit.errors import UsageError
from opalgit.store.objects import Signature

__all__ = ["DATE_HINT", "local_offset", "parse_date", "resolve", "without_crud"]

#: What an error about a date variable suggests.
DATE_HINT = (
    "unset it, or give a date git reads: '@1767225600 +1100', '2026-01-01T11:00:00+11:00' "
    "(ISO 8601) or 'Thu, 1 Jan 2026 11:00:00 +1100' (RFC 2822)"
)

# Dates this far ahead are ones git reads differently (date.c refuses a yyyy-mm-dd more
# than ten days into the future and tries other orders); those are left to git.
_FUTURE_MARGIN = 9 * 24 * 3600
# git's tm_to_time_t works for 1970-2099 only.
_END = 4102444800  # 2100-01-01T00:00:00Z

_FULL_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
                "september", "october", "november", "december")
_FULL_DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")

_RAW = re.compile(r"(@?)(\d{1,19}) ([+-])(\d\d)(\d\d)")
_TZ = r"(?P<tz>Z|UTC|GMT|[+-]\d\d(?::?\d\d)?)"
_TIME = r"(?P<h>\d\d):(?P<mi>\d\d)(?::(?P<s>\d\d)(?:\.(?P<frac>\d{3}|\d{5,9}))?)?"
_ISO = re.compile(r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[T ]" + _TIME + r"(?: ?" + _TZ + ")?", re.I)
_RFC = re.compile(r"(?:(?P<wd>[A-Za-z]+),? +)?(?P<d>\d{1,2}) +(?P<mon>[A-Za-z]+) +(?P<y>\d{4}) +"
                  + _TIME + r"(?: +" + _TZ + ")?", re.I)
_GIT = re.compile(r"(?P<wd>[A-Za-z]+) +(?P<mon>[A-Za-z]+) +(?P<d>\d{1,2}) +" + _TIME
                  + r" +(?P<y>\d{4})(?: +" + _TZ + ")?", re.I)


def local_offset(t: float) -> int:
    """Minutes east of UTC in force at ``t`` in the local timezone, as git computes it
    (``local_tzoffset``: daylight saving included, seconds truncated toward zero)."""
    seconds = time.localtime(t).tm_gmtoff
    return seconds // 60 if seconds >= 0 else -((-seconds) // 60)


def _crud(c: str) -> bool:
    return ord(c) <= 32 or c in ".,:;<>\"\\'"


def without_crud(text: str) -> str:
    """``text`` as git writes it into an ident line (``strbuf_addstr_without_crud``):
    no leading or trailing space or punctuation of ``.,:;<>"\\'``, and no ``<``,
    ``>`` or newline anywhere."""
    start, end = 0, len(text)
    while start < end and _crud(text[start]):
        start += 1
    while end > start and _crud(text[end - 1]):
        end -= 1
    return "".join(c for c in text[start:end] if c not in "\n<>")


def _month(name: str) -> int | None:
    low = name.lower()
    for i, full in enumerate(_FULL_MONTHS):
        if len(low) >= 3 and full.startswith(low):
            return i + 1
    return None


def _is_day(name: str | None) -> bool:
    if name is None:
        return True
    low = name.lower()
    return len(low) >= 3 and any(full.startswith(low) for full in _FULL_DAYS)


def _zone(text: str | None) -> int | None:
    """Minutes east of UTC of a zone written in the date, None for none written;
    raises ValueError for one that git would read otherwise."""
    if text is None:
        return None
    if text.upper() in ("Z", "UTC", "GMT"):
        return 0
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    if hours >= 24 or minutes >= 60 or (":" in text and len(digits) != 4):
        raise ValueError(text)
    value = hours * 60 + minutes
    return -value if text[0] == "-" else value


def _fields_date(y: int, mo: int, d: int, h: int, mi: int, s: int, zone: int | None) -> tuple[int, int]:
    """The instant and offset of a calendar date and time, as git's ``parse_date``
    computes them: a date without a zone is local time, at the offset in force then.
    Raises ValueError where git reads it otherwise, and LookupError for a local time
    that a clock change skips or repeats (git asks libc's ``mktime``, whose answer
    there depends on what it was asked before: git alone can say)."""
    import calendar  # here: a commit signed now never needs it (it costs ~1 ms)

    if not (1970 <= y < 2100 and 1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1]):
        raise ValueError("date")
    if not (h < 24 and mi < 60 and s < 60):
        raise ValueError("time")
    then = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    if zone is None:
        # The offsets a day either side; a clock change between them makes the local
        # time repeated (both fit) or skipped (neither does).
        fits = {o for o in (local_offset(then - 86400), local_offset(then + 86400))
                if local_offset(then - o * 60) == o}
        if len(fits) != 1:
            raise LookupError(f"{y}-{mo}-{d} {h}:{mi}:{s}")
        zone = fits.pop()
    if then - zone * 60 < 0:
        raise ValueError("before 1970")  # git wraps it around as an unsigned number
    return then - zone * 60, zone


def parse_date(text: str, now: float) -> tuple[int, int] | None:
    """(seconds since the epoch, minutes east of UTC) of a date git reads in
    ``GIT_AUTHOR_DATE``, or None where this parser cannot be sure it reads ``text``
    as git does (the caller then asks git)."""
    raw = _RAW.fullmatch(text)  # git reads "@..." as raw only when nothing surrounds it
    if raw is not None:
        at, stamp, sign, hh, mm = raw.groups()
        seconds = int(stamp)
        if int(mm) >= 60 or seconds >= _END or (not at and (seconds < 100000000 or int(hh) >= 24)):
            return None  # git reads these otherwise, or refuses them
        offset = int(hh) * 60 + int(mm)
        return seconds, -offset if sign == "-" else offset
    text = text.strip()  # git's parser skips what is not a word, a number or a zone
    try:
        iso = _ISO.fullmatch(text)
        if iso is not None:
            import calendar

            y, mo, d = int(iso["y"]), int(iso["mo"]), int(iso["d"])
            if calendar.timegm((y, mo, d, 0, 0, 0, 0, 0, 0)) > now + _FUTURE_MARGIN:
                return None
            return _fields_date(y, mo, d, int(iso["h"]), int(iso["mi"]), int(iso["s"] or 0), _zone(iso["tz"]))
        for pattern in (_RFC, _GIT):
            m = pattern.fullmatch(text)
            if m is not None:
                month = _month(m["mon"])
                if month is None or not _is_day(m["wd"]):
                    return None
                return _fields_date(int(m["y"]), month, int(m["d"]), int(m["h"]), int(m["mi"]),
                                    int(m["s"] or 0), _zone(m["tz"]))
    except (ValueError, LookupError):
        return None
    return None


#: Asks git for the date it reads in a variable: (variable, value) -> (seconds, offset).
AskGit = Callable[[str, str], "tuple[int, int]"]


def _person(role: str, env: Mapping[str, str], config: Mapping[str, str], now: float,
            ask_git: AskGit | None) -> Signature:
    upper = role.upper()
    source = f"GIT_{upper}_NAME"
    name = env.get(source)
    if name is None:
        source = f"{role}.name" if config.get(f"{role}.name") else "user.name"
        name = config.get(source) or "opal"
    email = env.get(f"GIT_{upper}_EMAIL")
    if email is None:
        email = config.get(f"{role}.email") or config.get("user.email") or env.get("EMAIL") or "opal@localhost"
    clean = without_crud(name)
    if not clean:
        raise UsageError(
            f"{source}={name!r} is no name once the characters git strips are gone; git refuses such a commit too",
            hint=f"set {source} to a name, or unset it",
        )
    date = env.get(f"GIT_{upper}_DATE")
    if date:
        when = parse_date(date, now)
        if when is None:
            if ask_git is None:
                raise UsageError(f"GIT_{upper}_DATE={date!r} is not a date opal can read without git",
                                 hint=DATE_HINT)
            when = ask_git(f"GIT_{upper}_DATE", date)
        seconds, offset = when
    else:
        seconds, offset = int(now), local_offset(now)
    return Signature(clean, without_crud(email), seconds, offset)


def resolve(env: Mapping[str, str], config: Mapping[str, str], now: float,
            ask_git: AskGit | None = None) -> tuple[Signature, Signature]:
    """(author, committer) of a commit made at ``now``: ``env`` is the environment
    git would see, ``config`` the last value of each of ``user.name``, ``user.email``,
    ``author.*`` and ``committer.*`` (lower-case keys), ``ask_git`` reads a date that
    :func:`parse_date` leaves to git (None: git is missing)."""
    return (_person("author", env, config, now, ask_git), _person("committer", env, config, now, ask_git))

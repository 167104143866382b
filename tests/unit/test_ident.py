"""opal's commits are signed as git signs its own: the same identity variables and
config, the same date forms, the UTC offset in force at that instant (daylight
saving included). Every answer is compared with the real git's."""

from __future__ import annotations

import calendar
import contextlib
import datetime
import os
import time
import zoneinfo

import pytest

from opalgit.errors import UsageError
from opalgit.store import ident
from tests.conftest import git, opal
from tests.unit.test_porcelain import place

# Both hemispheres (one of them is in daylight saving whatever the date), half- and
# quarter-hour zones, a zone whose clock change is half an hour, and UTC.
ZONES = ["UTC", "Australia/Sydney", "America/New_York", "Europe/London", "Asia/Kolkata",
         "America/St_Johns", "Pacific/Chatham", "Australia/Lord_Howe"]


@contextlib.contextmanager
def local_zone(name: str):
    """This process's local timezone set to ``name`` (TZ, then tzset), put back after."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()


def transitions(name: str, year: int) -> list[int]:
    """The instants in ``year`` when ``name``'s offset changes (to the second)."""
    zone = zoneinfo.ZoneInfo(name)
    found = []

    def off(t: int):
        return datetime.datetime.fromtimestamp(t, zone).utcoffset()

    t = calendar.timegm((year, 1, 1, 0, 0, 0))
    end = calendar.timegm((year + 1, 1, 1, 0, 0, 0))
    while t < end:
        step = t + 6 * 3600
        if off(t) != off(step):
            lo, hi = t, step
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if off(mid) == off(lo) else (lo, mid)
            found.append(hi)
        t = step
    return found


@pytest.mark.parametrize("name", ZONES)
def test_the_offset_is_the_one_in_force_at_that_instant(name):
    zone = zoneinfo.ZoneInfo(name)
    instants = [calendar.timegm((2026, 1, 15, 12, 0, 0)), calendar.timegm((2026, 7, 15, 12, 0, 0))]
    for edge in transitions(name, 2026):
        instants += [edge - 1, edge, edge + 1]
    with local_zone(name):
        for t in instants:
            want = datetime.datetime.fromtimestamp(t, zone).utcoffset() // datetime.timedelta(minutes=1)
            assert ident.local_offset(t) == want, (name, t)


def test_sydney_in_january_is_plus_eleven():
    # The reported case: opal wrote +1000 where git writes +1100.
    with local_zone("Australia/Sydney"):
        assert ident.local_offset(calendar.timegm((2026, 1, 15, 0, 0, 0))) == 11 * 60
        assert ident.local_offset(calendar.timegm((2026, 7, 15, 0, 0, 0))) == 10 * 60


def git_date(value: str, env: dict | None = None) -> tuple[int, int] | None:
    """What the real git makes of ``GIT_AUTHOR_DATE=value``: (seconds, offset), or None."""
    full = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="b", GIT_AUTHOR_DATE=value, **(env or {}))
    import subprocess

    p = subprocess.run(["git", "var", "GIT_AUTHOR_IDENT"], env=full, capture_output=True, text=True)
    if p.returncode != 0:
        return None
    ts, tz = p.stdout.split()[-2:]
    minutes = int(tz[1:3]) * 60 + int(tz[3:])
    return int(ts), -minutes if tz[0] == "-" else minutes


# The forms the parser reads itself (a deferral to git there is a failure).
OWN_FORMS = [
    "@1700000000 +0530", "@0 +0000", "1700000000 -0800", "2026-03-01T12:00:00Z", "2026-03-01T12:00:00+11:00",
    "2026-03-01 12:00:00 +1100", "2026-03-01T12:00:00.123+0100", "2026-03-01T12:00-0330", "2026-03-01T12:00+05",
    "Sun, 1 Mar 2026 12:00:00 +1100", "Sun, 01 Mar 2026 12:00:00 GMT", "1 March 2026 12:00 -0700",
    "Mon, 2 Feb 2026 09:00:00 -0800", "Sun Mar 1 12:00:00 2026 +1100", "2026-01-15T08:00:00", "2026-07-01 00:00:00",
    "2026-03-01T12:00:00z", "2026-03-01t12:00:00Z", "2026-03-01T12:00:00 utc", "sun, 1 mar 2026 12:00:00 gmt",
]
# Local times next to the 2026 clock changes of the zones above, and forms git reads its own way.
EDGE_FORMS = [
    "2026-04-05 02:30:00", "2026-04-05 01:59:59", "2026-04-05 03:00:00", "2026-10-04 02:30:00",
    "2026-10-04 01:59:59", "2026-10-04 03:00:00", "2026-03-08 02:30:00", "2026-11-01 01:30:00",
    "2026-03-29 01:30:00", "2026-10-25 01:30:00", "2026-03-01T12:00:00.5", "2026-03-01T12:00:00.1234",
    "5 +0000", "2026-03-01", "garbage", "2026.03.01 12:00:00", "@1700000000 +9999", "2026-02-30 12:00:00",
    "2099-01-01T00:00:00Z", "12:00:00 +0100 2026-03-01", " @5 +0000", "@5 +0000 ", " 2026-03-01T12:00:00Z ",
    "2026-03-01T12:00:00 PST",
]


@pytest.mark.parametrize("name", ZONES)
def test_dates_are_read_as_git_reads_them(name):
    with local_zone(name):
        now = time.time()
        for value in OWN_FORMS + EDGE_FORMS:
            mine = ident.parse_date(value, now)
            if value in OWN_FORMS:
                assert mine is not None, value
            if mine is not None:
                assert mine == git_date(value), (name, value)


@pytest.fixture
def ready(project, home):
    assert opal("init", cwd=project).returncode == 0
    place(home, project, lines=10)
    return project


def signed(project, ref: str) -> tuple[str, str]:
    text = git("cat-file", "commit", ref, cwd=str(project)).stdout
    lines = dict(line.split(" ", 1) for line in text.split("\n\n", 1)[0].splitlines())
    return lines["author"], lines["committer"]


def git_idents(project, env: dict) -> tuple[str, str]:
    full = dict(os.environ, **env)
    import subprocess

    def var(name):
        return subprocess.run(["git", "var", name], cwd=str(project), env=full, capture_output=True,
                              text=True, check=True).stdout.strip()

    return var("GIT_AUTHOR_IDENT"), var("GIT_COMMITTER_IDENT")


@pytest.mark.parametrize("name", ["Australia/Sydney", "America/New_York", "Australia/Lord_Howe"])
def test_a_commit_made_now_has_the_offset_git_gives(ready, name):
    env = {"TZ": name}
    r = opal("commit", cwd=ready, env=env)
    assert r.returncode == 0, r.stderr
    want = git_idents(ready, env)
    for ref in ("refs/opal/heads/main", "refs/opal/oplog"):
        for got, expected in zip(signed(ready, ref), want):
            # The same person and offset; the seconds are those of two moments.
            assert got.rsplit(" ", 2)[0] == expected.rsplit(" ", 2)[0]
            assert got.rsplit(" ", 1)[1] == expected.rsplit(" ", 1)[1], (ref, got, expected)


IDENTITY_ENVS = [
    {"GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@example.org", "GIT_AUTHOR_DATE": "@1700000000 +0530",
     "GIT_COMMITTER_NAME": "Charles Babbage", "GIT_COMMITTER_EMAIL": "cb@example.org",
     "GIT_COMMITTER_DATE": "2026-01-15T08:00:00", "TZ": "Australia/Sydney"},
    {"GIT_AUTHOR_NAME": " .J. R. R. Tolkien Jr. ", "GIT_AUTHOR_EMAIL": "<jrr@example.org>",
     "GIT_AUTHOR_DATE": "Sun, 1 Mar 2026 12:00:00 +1100", "GIT_COMMITTER_DATE": "2026-11-01 01:30:00",
     "TZ": "America/New_York"},
    # A form only git's own parser reads, and the first local time after a clock change.
    # (Not a time in the repeated hour: there git commit and git var differ among
    # themselves, libc's mktime answering by what it was asked before.)
    {"GIT_AUTHOR_DATE": "2026.03.01 12:00:00", "GIT_COMMITTER_DATE": "2026-04-05 03:00:00",
     "TZ": "Australia/Sydney", "EMAIL": "from-env@example.org"},
    {"GIT_COMMITTER_EMAIL": "", "GIT_AUTHOR_DATE": "1700000000 -0330", "GIT_COMMITTER_DATE": "@1700000000 +1345",
     "TZ": "America/St_Johns"},
]


@pytest.mark.parametrize("env", IDENTITY_ENVS)
def test_identity_variables_are_honoured_as_git_commit_does(ready, env):
    r = opal("commit", cwd=ready, env=env)
    assert r.returncode == 0, r.stderr
    (ready / "f.txt").write_text("x\n")
    git("add", "f.txt", cwd=str(ready))
    r = opal("hooks", "uninstall", cwd=ready)  # a plain git commit, not one that runs opal again
    import subprocess

    subprocess.run(["git", "commit", "-q", "-m", "code"], cwd=str(ready), env=dict(os.environ, **env), check=True)
    want = signed(ready, "HEAD")
    assert want == git_idents(ready, env)
    assert signed(ready, "refs/opal/heads/main") == want
    assert signed(ready, "refs/opal/oplog") == want


def test_author_config_and_email_variable_come_in_git_order(ready):
    git("config", "author.name", "Config Author", cwd=str(ready))
    git("config", "committer.email", "committer@example.org", cwd=str(ready))
    git("config", "--unset", "user.email", cwd=str(ready), check=False)
    env = {"EMAIL": "env@example.org", "GIT_AUTHOR_DATE": "@1700000000 +0000",
           "GIT_COMMITTER_DATE": "@1700000001 +0000"}
    assert opal("commit", cwd=ready, env=env).returncode == 0
    assert signed(ready, "refs/opal/heads/main") == git_idents(ready, env)


@pytest.mark.parametrize("value", ["garbage", "2026-03-01", "5 +0000"])
def test_a_date_git_refuses_is_refused_and_nothing_is_committed(ready, value):
    before = git("for-each-ref", "refs/opal", cwd=str(ready)).stdout
    r = opal("commit", cwd=ready, env={"GIT_COMMITTER_DATE": value})
    assert r.returncode == 2, r.stderr
    assert "GIT_COMMITTER_DATE" in r.stderr and value in r.stderr and "Traceback" not in r.stderr
    assert "hint:" in r.stderr
    assert git("for-each-ref", "refs/opal", cwd=str(ready)).stdout == before


def test_an_empty_name_is_refused_as_git_refuses_it():
    with pytest.raises(UsageError, match="GIT_AUTHOR_NAME"):
        ident.resolve({"GIT_AUTHOR_NAME": " .. "}, {}, time.time())


def test_without_git_an_unknown_form_is_a_clear_error():
    with pytest.raises(UsageError, match="GIT_AUTHOR_DATE"):
        ident.resolve({"GIT_AUTHOR_DATE": "2026.03.01 12:00:00"}, {}, time.time(), ask_git=None)


def test_nothing_set_signs_neutrally():
    author, committer = ident.resolve({}, {}, 1700000000.0)
    assert (author.name, author.email) == ("opal", "opal@localhost") == (committer.name, committer.email)


@pytest.mark.parametrize("name, day", [("Australia/Sydney", "2026/01/02"), ("America/New_York", "2026/07/01"),
                                       ("Australia/Lord_Howe", "2026/01/02"), ("UTC", "2026/01/01")])
def test_a_codex_export_lands_in_the_folder_of_the_local_date(tmp_path, name, day):
    # Codex files a rollout under the local date (and names it by the local time) at the
    # moment of the export: one hour off near midnight puts it in another day's folder.
    from opalgit.agents.base import ExportRequest
    from opalgit.agents.codex import write as codex_export

    instant = {"Australia/Sydney": "2026-01-01T13:30:00", "Australia/Lord_Howe": "2026-01-01T13:15:00",
               "America/New_York": "2026-07-01T04:30:00", "UTC": "2026-01-01T13:30:00"}[name]
    now_ms = calendar.timegm(time.strptime(instant, "%Y-%m-%dT%H:%M:%S")) * 1000
    req = ExportRequest(turns=[], session=None, cwd=str(tmp_path), session_id="0199a1b2-0000-7000-8000-000000000001",
                        env={"CODEX_HOME": str(tmp_path / "codex")}, now_ms=now_ms)
    with local_zone(name):
        path = codex_export.export(req).files[0][0]
        local = time.strftime("%Y-%m-%dT%H-%M-%S", time.localtime(now_ms / 1000))
    assert path.startswith(str(tmp_path / "codex" / "sessions" / day) + os.sep)
    assert os.path.basename(path).startswith(f"rollout-{local}-")
    zone = zoneinfo.ZoneInfo(name)
    assert local == datetime.datetime.fromtimestamp(now_ms / 1000, zone).strftime("%Y-%m-%dT%H-%M-%S")


def _render(t: int, offset: int, form: int) -> str:
    sign = "-" if offset < 0 else "+"
    hh, mm = divmod(abs(offset), 60)
    local = time.gmtime(t + offset * 60)
    if form == 0:
        return f"@{t} {sign}{hh:02d}{mm:02d}"
    if form == 1:
        return time.strftime("%Y-%m-%dT%H:%M:%S", local) + f"{sign}{hh:02d}:{mm:02d}"
    if form == 2:
        return time.strftime("%a, %d %b %Y %H:%M:%S ", local) + f"{sign}{hh:02d}{mm:02d}"
    if form == 3:
        return time.strftime("%a %b %d %H:%M:%S %Y ", local) + f"{sign}{hh:02d}{mm:02d}"
    return time.strftime("%Y-%m-%d %H:%M:%S", local)  # no zone: local time


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(t=st.integers(min_value=0, max_value=int(time.time())), offset=st.integers(min_value=-23 * 60 - 59,
                                                                                   max_value=23 * 60 + 59),
       form=st.integers(min_value=0, max_value=4), zone=st.sampled_from(ZONES))
@settings(max_examples=int(os.environ.get("OPAL_FUZZ_EXAMPLES", "150")), deadline=None)
def test_any_date_of_the_forms_reads_as_git_reads_it(t, offset, form, zone):
    value = _render(t, offset, form)
    with local_zone(zone):
        mine = ident.parse_date(value, time.time())
        if mine is not None:
            assert mine == git_date(value, {"TZ": zone}), (zone, value)
        else:
            # Left to git: a local time next to a clock change, or before 1970.
            assert form == 4 or t + offset * 60 < 86400 or t < 86400, value

"""``opal log --format`` / ``--pretty``: git's placeholders on state commits, and opal's own.

git's (the same text ``git log --format`` prints for the same commit, which the tests
check on the commits under ``refs/opal/heads/``):

    %H %h        commit id, abbreviated (7 digits)
    %T %t        tree id, abbreviated
    %P %p        parent ids, abbreviated
    %s %b %B     subject, body, raw message
    %an %ae      author name, email; %cn %ce the committer's
    %ad %ar %ai %aI %at   author date: default form, relative, ISO-like, strict ISO, timestamp
    %cd %cr %ci %cI %ct   the same for the committer date
    %d %D        branch names (" (HEAD -> main, retry)"; without the parentheses)
    %n %% %x00   newline, a percent sign, a byte in hex
    %Cred %Cgreen %Cblue %Creset %C(name)   colour (only when colour is on)

opal's own, in git's ``%(name)`` form so none can clash with a git placeholder:

    %(turns) %(records) %(tokens)   turns, records and estimated tokens of the state
    %(agent) %(session) %(sid)      the agent, its session id, its short id (8 characters)
    %(new)                          records this commit added

An unknown placeholder is printed as written, as git does.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Callable, Mapping

from opalgit.cli import gitdate
from opalgit.store.objects import CommitData, Signature

#: Named formats: ``--pretty=NAME``.
NAMED = ("oneline", "short", "medium", "full", "fuller", "raw")

_COLOURS = {"red", "green", "blue", "yellow", "magenta", "cyan", "white", "black", "normal", "reset", "bold", "dim"}
_TOKEN = re.compile(r"%(?:\((?P<long>[a-z:]+)\)|C\((?P<colour>[a-z ,]+)\)|C(?P<short>red|green|blue|reset)|x(?P<hex>[0-9a-fA-F]{2})|(?P<two>[ac][nedrtiI]|[HhTtPpsbBdDn%]))")


def parse_option(value: str) -> tuple[str, str | None]:
    """``--pretty``/``--format`` value -> (named format, or "format" with its template)."""
    if value in NAMED:
        return value, None
    for prefix in ("format:", "tformat:"):
        if value.startswith(prefix):
            return "format", value[len(prefix):]
    if "%" in value:
        return "format", value  # git: a value with a placeholder is a tformat
    from opalgit.errors import UsageError

    raise UsageError(f"invalid --pretty format: {value!r}",
                     hint=f"one of {', '.join(NAMED)}, or format:TEMPLATE with placeholders such as %h %s %an %ar (see docs/guide.md)")


def git_date(sig: Signature) -> str:
    """git's default date form: ``Tue Dec 1 23:24:58 2026 +0000`` (the day not padded)."""
    from opalgit.cli.render import when

    return when(sig.time, sig.offset)


def _zone(offset: int) -> str:
    sign = "+" if offset >= 0 else "-"
    return f"{sign}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"


def _date(sig: Signature, kind: str, now: float | None) -> str:
    tz = _dt.timezone(_dt.timedelta(minutes=sig.offset))
    t = _dt.datetime.fromtimestamp(sig.time, tz)
    if kind == "d":
        return git_date(sig)
    if kind == "r":
        return gitdate.relative(sig.time, now)
    if kind == "i":
        return f"{t:%Y-%m-%d %H:%M:%S} {_zone(sig.offset)}"
    if kind == "I":
        return t.isoformat()
    return str(sig.time)  # "t"


def decorations(branches: list[str], head: str | None) -> str:
    """git's ``%D``: the current branch as ``HEAD -> main``, then the others."""
    names = [f"HEAD -> {b}" if b == head else b for b in branches]
    names.sort(key=lambda n: not n.startswith("HEAD -> "))
    return ", ".join(names)


def expand(
    template: str,
    commit: CommitData,
    header,
    *,
    branches: list[str],
    head: str | None,
    style: Callable[..., str],
    color: bool,
    now: float | None = None,
) -> str:
    """``template`` with every placeholder replaced for ``commit`` (whose state header is ``header``)."""
    from opalgit.history.tokens import estimate

    session = header.session
    message = commit.message
    # git's subject is the first paragraph on one line; the body is what follows it.
    paragraph, _, body = message.strip("\n").partition("\n\n")
    subject = " ".join(paragraph.split("\n"))
    body = body.strip("\n") + "\n" if body.strip("\n") else ""
    own: Mapping[str, Callable[[], str]] = {
        "turns": lambda: str(header.turns),
        "records": lambda: str(header.items),
        "tokens": lambda: str(estimate(header.chars)),
        "agent": lambda: session.agent if session else "",
        "session": lambda: session.id if session else "",
        "sid": lambda: session.id[:8] if session else "",
        "new": lambda: str(max(0, header.new_items[1] - header.new_items[0])),
    }

    def one(m: re.Match) -> str:
        if m["long"] is not None:
            return own[m["long"]]() if m["long"] in own else m[0]
        if m["colour"] is not None or m["short"] is not None:
            words = (m["colour"] or m["short"]).replace(",", " ").split()
            forced = "always" in words
            words = [w for w in words if w not in ("auto", "always")]
            if not (color or forced) or not words or any(w not in _COLOURS for w in words):
                return "" if all(w in _COLOURS for w in words) else m[0]
            if words == ["reset"] or words == ["normal"]:
                return "\x1b[m"
            fg = next((w for w in words if w not in ("bold", "dim", "reset", "normal")), None)
            return style("", fg=fg, bold="bold" in words, dim="dim" in words, reset=False)
        if m["hex"] is not None:
            return chr(int(m["hex"], 16))
        two = m["two"]
        if two[0] in "ac" and len(two) == 2:
            sig = commit.author if two[0] == "a" else commit.committer
            if two[1] == "n":
                return sig.name
            if two[1] == "e":
                return sig.email
            return _date(sig, two[1], now)
        simple = {
            "H": lambda: commit.oid.hex(),
            "h": lambda: commit.oid.hex()[:7],
            "T": lambda: commit.tree.hex(),
            "t": lambda: commit.tree.hex()[:7],
            "P": lambda: " ".join(p.hex() for p in commit.parents),
            "p": lambda: " ".join(p.hex()[:7] for p in commit.parents),
            "s": lambda: subject,
            "b": lambda: body,
            "B": lambda: message,
            "d": lambda: f" ({decorations(branches, head)})" if branches else "",
            "D": lambda: decorations(branches, head),
            "n": lambda: "\n",
            "%": lambda: "%",
        }
        return simple[two]()

    return _TOKEN.sub(one, template)

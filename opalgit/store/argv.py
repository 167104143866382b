"""What opal puts on git's command line, and the commands it shows the user to copy.

A value that comes from outside opal (its config, a remote, a session file, the user)
reaches git only as an operand after ``--``, and, where git would still read it as
something to run, it is refused here first:

- a value that starts with ``-`` (``--upload-pack=CMD`` as a URL is a command);
- a URL whose transport runs a command (``ext::CMD``) or speaks over file
  descriptors (``fd::N``): opal never hands git one of these itself. A git remote
  (``git remote add``) with such a URL is the user's own choice, under git's own
  ``protocol.<name>.allow`` rules, and opal gives git only its name.

Commands quoted in hints are built by :func:`command`, so that a branch named
``$(...)`` fetched from a remote cannot become a command when the hint is pasted.
"""

from __future__ import annotations

import re
import shlex

from opalgit.errors import UsageError

#: Transports after which git runs a command or talks over inherited file descriptors.
COMMAND_TRANSPORTS = ("ext", "fd")

_TRANSPORT = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)::")


def command(*words: str) -> str:
    """A command line the user can paste into a POSIX shell as is."""
    return " ".join(shlex.quote(w) for w in words)


def _unprintable(value: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in value)


def check_url(url: str, *, source: str) -> str:
    """Refuse a URL (or path) that git would read as an option or run as a command.

    ``source`` says where it came from, for the message: ``"remote.x.url in
    .git/opal/config"``, ``"the command line"``.
    """
    if not url.strip():
        raise UsageError(f"the URL of {source} is empty", hint="give the remote's URL, e.g. git@example.com:team/app.git")
    if url.startswith("-"):
        raise UsageError(
            f"refusing URL {url!r} ({source}): it starts with '-', so git would read it as an option",
            hint="give the remote's real URL (a folder whose name starts with '-' can be written ./-NAME)",
        )
    if _unprintable(url):
        raise UsageError(f"refusing URL {url!r} ({source}): it holds a control character", hint="give the remote's real URL")
    m = _TRANSPORT.match(url)
    if m and m.group(1).lower() in COMMAND_TRANSPORTS:
        raise UsageError(
            f"refusing URL {url!r} ({source}): the {m.group(1)}:: transport runs a command, and opal never hands git one",
            hint="if you mean it, make it a git remote ('git remote add NAME URL'): git's protocol."
            + m.group(1).lower() + ".allow setting then decides, and opal passes git only the name",
        )
    return url


def check_operand(value: str, what: str, *, hint: str) -> str:
    """Refuse ``value`` (a name, a path) that would reach git as an option."""
    if value.startswith("-"):
        raise UsageError(f"refusing {what} {value!r}: it starts with '-', so git would read it as an option", hint=hint)
    return value


__all__ = ["COMMAND_TRANSPORTS", "check_operand", "check_url", "command"]

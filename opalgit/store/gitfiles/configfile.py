"""Reading opal's own config file (``<git-common-dir>/opal/config``) without libgit2.

The file is in git-config syntax and is written through libgit2 (``repo.config``).
Commands that only look a value up (``secrets.redact`` on every commit,
``push.withCode`` in the hooks) read it here instead, which saves loading pygit2.
The syntax that libgit2 writes is simple; anything beyond it (includes, values
continued over lines, escapes other than ``\\"``, ``\\\\``, ``\\n``, ``\\t``) raises
:class:`Unsupported`, and the caller asks libgit2.
"""

from __future__ import annotations


class Unsupported(Exception):
    """The file uses syntax this reader leaves to libgit2."""


def _split_key(key: str) -> tuple[str, str | None, str]:
    section, _, rest = key.partition(".")
    sub, _, name = rest.rpartition(".")
    if not section or not name:
        raise Unsupported(f"not a config key: {key!r}")
    return section.lower(), (sub or None), name.lower()


def _value(raw: str) -> str:
    """A value as git reads it: quotes removed, escapes resolved, comments dropped, and
    whitespace trimmed at both ends unless quoted or escaped."""
    out: list[tuple[str, bool]] = []  # (character, protected from trimming)
    quoted = False
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\":
            if i + 1 >= len(raw):
                raise Unsupported("a value continues on the next line")
            nxt = raw[i + 1]
            esc = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}.get(nxt)
            if esc is None:
                raise Unsupported(f"escape \\{nxt}")
            out.append((esc, True))
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c in "#;" and not quoted:
            break
        else:
            out.append((c, quoted))
        i += 1
    if quoted:
        raise Unsupported("an unterminated quote")
    start, end = 0, len(out)
    while start < end and out[start][0].isspace() and not out[start][1]:
        start += 1
    while end > start and out[end - 1][0].isspace() and not out[end - 1][1]:
        end -= 1
    return "".join(c for c, _ in out[start:end])


def _section(line: str) -> tuple[str, str | None]:
    """``[section]`` or ``[section "subsection"]`` (the old ``[section.sub]`` form is left aside)."""
    end = line.find("]")
    if end < 0:
        raise Unsupported(f"section header {line!r}")
    inner = line[1:end].strip()
    if '"' in inner:
        name, _, sub = inner.partition(" ")
        sub = sub.strip()
        if not (sub.startswith('"') and sub.endswith('"')) or "\\" in sub:
            raise Unsupported(f"section header {line!r}")
        return name.lower(), sub[1:-1]
    if "." in inner or " " in inner:
        raise Unsupported(f"section header {line!r}")
    return inner.lower(), None


def entries(path: str) -> list[tuple[str, str | None, str, str | None]]:
    """Every ``(section, subsection, key, raw value)`` of the file in order (section
    and key lower-cased; the raw value None for a bare key), none when there is no
    file. :func:`value` reads a raw value: only the values asked for are parsed."""
    from opalgit.fileio import read_input

    try:
        # A regular file only, and of a bounded size: a FIFO there would hang every command.
        text = read_input(path, what="config file", hint=f"remove {path} or make it a regular file",
                          limit=16 << 20).decode("utf-8")
    except FileNotFoundError:
        return []
    except UnicodeDecodeError:
        raise Unsupported("not UTF-8") from None
    section: tuple[str, str | None] = ("", None)
    out: list[tuple[str, str | None, str, str | None]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = _section(line)
            if section[0] in ("include", "includeif"):
                raise Unsupported("includes")
            continue
        name, eq, rest = line.partition("=")
        out.append((section[0], section[1], name.strip().lower(), rest if eq else None))
    return out


def value(raw: str | None) -> str:
    """A raw value from :func:`entries` as git reads it (a bare key is boolean true)."""
    return "true" if raw is None else _value(raw)


def get(path: str, key: str) -> str | None:
    """The last value of ``key`` in the file at ``path`` (None when unset or no file)."""
    want = _split_key(key)
    found: str | None = None
    for section, sub, name, raw in entries(path):
        if (section, sub, name) == want:
            found = value(raw)
    return found

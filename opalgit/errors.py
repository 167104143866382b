"""One exception tree for everything opal raises on purpose.

Every error carries a one-line message and, where there is one, a hint that names
the next command to run. The CLI maps each family to an exit code in one place
(:data:`EXIT_CODES`), so scripts can tell "bad input" from "nothing to do" from
"the repository is locked".
"""

from __future__ import annotations


class OpalError(Exception):
    """Root of every error opal raises deliberately."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(OpalError, ValueError):
    """The command was asked for something that does not make sense."""

    exit_code = 2


class NotARepositoryError(OpalError):
    """No opal store here (run ``opal init``)."""

    exit_code = 3


class RevisionError(OpalError, KeyError):
    """A revision, branch or turn that does not exist."""

    exit_code = 4

    # KeyError's __str__ quotes its argument; keep the plain message.
    def __str__(self) -> str:
        return self.message


class InputError(OpalError, ValueError):
    """A session file that cannot be read: names the file, the line and what to do."""

    exit_code = 5

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message, hint=hint)
        self.path = path
        self.line = line


class SessionNotFoundError(OpalError, LookupError):
    """No agent session to work with."""

    exit_code = 6


class CorruptObjectError(OpalError, ValueError):
    """A stored object failed to decode or validate."""

    exit_code = 7


class ConflictError(OpalError):
    """A concurrent writer moved a ref, or the store is locked."""

    exit_code = 8


class NothingToDoError(OpalError):
    """Not a failure: the command had nothing to do (exit code 0 unless asked)."""

    exit_code = 0


EXIT_CODES = {
    cls.__name__: cls.exit_code
    for cls in (
        OpalError,
        UsageError,
        NotARepositoryError,
        RevisionError,
        InputError,
        SessionNotFoundError,
        CorruptObjectError,
        ConflictError,
        NothingToDoError,
    )
}

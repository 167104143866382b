"""The local secret vault: what redaction took out, kept where nothing can push it.

A vault is one file of JSON lines, by default ``<git-common-dir>/opal/vault/secrets.jsonl``
(:func:`default_path`): under the repository's private directory, outside every
ref, so no fetch, push or clone ever carries it. Its first line holds the
repository's redaction key (32 random bytes, the HMAC key of
:class:`opalgit.secrets.redact.Redactor`); every further line maps one placeholder to its
secret. The secrets are stored in clear: the file's permissions are its only
protection, so the vault is created mode 0600 in a directory of mode 0700, and
opal refuses to use it once anybody else may read it.

No pygit2 here: the vault is a plain file store.

Writes are appends: each batch of records is one ``write`` on a descriptor opened
with ``O_APPEND``, then ``fsync``. A crash can leave at most a cut-short last line;
readers skip it and the next append starts on a fresh line. The key line is written
to a temporary file, synced, and linked into place, so a vault never exists without
its key, and two processes that create it at once agree on one key.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from typing import Iterable

from opalgit.errors import OpalError
from opalgit.fileio import create_temp, fsync_dir, write_all
from opalgit.secrets.redact import Finding, is_placeholder

__all__ = ["Vault", "VaultError", "default_path"]

_MAGIC = "opal-vault"
_VERSION = 1
_FILE_MODE = 0o600
_DIR_MODE = 0o700


class VaultError(OpalError):
    """The secret vault is unsafe or unreadable."""


def default_path(git_common_dir: str | os.PathLike) -> str:
    """Where a repository's vault lives: ``<git-common-dir>/opal/vault/secrets.jsonl``."""
    return os.path.join(os.fspath(git_common_dir), "opal", "vault", "secrets.jsonl")


class Vault:
    """A placeholder -> secret store in one local file, plus the redaction key.

    Nothing is created until :meth:`key` or :meth:`put` needs it: looking up in a
    repository without a vault (a teammate's clone) finds nothing and writes nothing.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._key: bytes | None = None
        self._map: dict[str, str] = {}
        self._offset = 0  # bytes of the file already read (whole lines only)
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the file read
        self.skipped = 0  # damaged lines met while reading (a cut-short last line, ...)

    def __repr__(self) -> str:
        return f"Vault({self.path!r})"

    # -- reading ---------------------------------------------------------------------

    def exists(self) -> bool:
        return os.path.lexists(self.path)

    def key(self) -> bytes:
        """The repository's redaction key; generates it (creating the vault) on first use."""
        if self._key is None:
            self._refresh(create=True)
        assert self._key is not None
        return self._key

    def lookup(self, placeholder: str) -> str | None:
        """The secret behind ``placeholder``, or None if this vault does not know it."""
        self._refresh()
        return self._map.get(placeholder)

    def mapping(self) -> dict[str, str]:
        """A copy of every placeholder -> secret pair (for :func:`opalgit.secrets.redact.restore_value`)."""
        self._refresh()
        return dict(self._map)

    def __contains__(self, placeholder: object) -> bool:
        self._refresh()
        return placeholder in self._map

    def __len__(self) -> int:
        self._refresh()
        return len(self._map)

    # -- writing ---------------------------------------------------------------------

    def put(self, findings: Iterable[Finding]) -> int:
        """Record the findings not yet in the vault; returns how many were new.

        A placeholder that the vault already maps to a *different* secret raises
        :class:`VaultError` (an HMAC collision, or findings made with another key).
        """
        self._refresh(create=True)
        new: dict[str, str] = {}
        for f in findings:
            if not is_placeholder(f.placeholder):
                raise VaultError(f"not an opal placeholder: {f.placeholder!r}")
            known = self._map.get(f.placeholder, new.get(f.placeholder))
            if known is None:
                new[f.placeholder] = f.secret
            elif known != f.secret:
                raise VaultError(
                    f"the vault already holds a different secret for {f.placeholder}",
                    hint="the findings were made with another repository's key; redact again with vault.key()",
                )
        if not new:
            return 0
        self._ignore_in_git()  # a vault made before this guard existed gets it now
        now = int(time.time() * 1000)
        lines = "".join(
            json.dumps({"p": ph, "s": secret, "t": now}, ensure_ascii=True, separators=(",", ":")) + "\n"
            for ph, secret in new.items()
        ).encode("ascii")
        fd = self._open(os.O_RDWR | os.O_APPEND)
        try:
            st = os.fstat(fd)
            if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
                lines = b"\n" + lines  # a cut-short last line stays a line of its own
            write_all(fd, lines)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._map.update(new)  # the next read skips our own lines: they map to the same secrets
        return len(new)

    # -- internals -------------------------------------------------------------------

    def _refresh(self, create: bool = False) -> None:
        """Read what was appended since the last read (or all of it, if the file changed)."""
        try:
            fd = self._open(os.O_RDONLY)
        except FileNotFoundError:
            if not create:
                self._key, self._map, self._offset, self._ident = None, {}, 0, None
                return
            self._create()
            fd = self._open(os.O_RDONLY)
        try:
            st = os.fstat(fd)
            if self._ident != (st.st_dev, st.st_ino) or st.st_size < self._offset:
                self._key, self._map, self._offset, self.skipped = None, {}, 0, 0
                self._ident = (st.st_dev, st.st_ino)
            if st.st_size > self._offset:
                os.lseek(fd, self._offset, os.SEEK_SET)
                data = _read_all(fd, st.st_size - self._offset)
                self._parse(data)
        finally:
            os.close(fd)
        if self._key is None:
            raise VaultError(
                f"the secret vault {self.path} has no valid key line",
                hint="it is damaged; move it away to start a new one (its placeholders can then not be restored)",
            )

    def _parse(self, data: bytes) -> None:
        end = data.rfind(b"\n") + 1  # a last line without its newline may still be being written
        for raw in data[:end].split(b"\n")[:-1]:
            if self._offset == 0 and self._key is None:
                self._key = _parse_header(raw, self.path)
                self._offset += len(raw) + 1
                continue
            self._offset += len(raw) + 1
            record = _parse_record(raw)
            if record is None:
                self.skipped += 1
            else:
                self._map.setdefault(*record)

    def _open(self, flags: int) -> int:
        """Open the vault file after checking that it is ours alone."""
        self._ensure_dir(create=False)
        try:
            fd = os.open(self.path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise VaultError(
                f"the secret vault {self.path} is a symbolic link; opal will not follow it",
                hint="replace the link by the file it points to, or move it away",
            ) from None
        try:
            _check_private(fd, self.path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _ensure_dir(self, create: bool) -> None:
        parent = os.path.dirname(os.path.abspath(self.path))
        try:
            st = os.lstat(parent)
        except FileNotFoundError:
            if not create:
                return
            os.makedirs(os.path.dirname(parent), exist_ok=True)
            try:
                os.mkdir(parent, _DIR_MODE)
            except FileExistsError:
                pass
            st = os.lstat(parent)
        if not stat.S_ISDIR(st.st_mode):
            raise VaultError(f"the vault directory {parent} is not a directory")
        if st.st_uid != os.geteuid():
            raise VaultError(
                f"the vault directory {parent} belongs to another user",
                hint="opal keeps secrets only in a directory of your own",
            )
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(parent, _DIR_MODE)  # the directory holds nothing but the vault: tighten it

    def _ignore_in_git(self) -> None:
        """A ``.gitignore`` beside the vault ignoring everything: wherever the vault's
        folder is (a store that a git repository made later may see), ``git add -A``
        never stages it. An existing file is left as it is."""
        path = os.path.join(os.path.dirname(os.path.abspath(self.path)), ".gitignore")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), _FILE_MODE)
        except FileExistsError:
            return
        try:
            write_all(fd, b"# opal's secret vault: never to be committed\n*\n")
        finally:
            os.close(fd)

    def _create(self) -> None:
        """Create the vault with its key line, atomically (temporary file, then link)."""
        self._ensure_dir(create=True)
        self._ignore_in_git()
        header = (
            json.dumps(
                {_MAGIC: _VERSION, "key": os.urandom(32).hex(), "created": int(time.time() * 1000)},
                separators=(",", ":"),
            ).encode("ascii")
            + b"\n"
        )
        fd, tmp = create_temp(os.path.dirname(os.path.abspath(self.path)), os.path.basename(self.path) + ".", ".tmp")
        try:
            os.fchmod(fd, _FILE_MODE)  # whatever the umask
            write_all(fd, header)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, self.path)  # fails if another process created the vault first: use theirs
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        fsync_dir(os.path.dirname(os.path.abspath(self.path)))


def _check_private(fd: int, path: str) -> None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise VaultError(f"the secret vault {path} is not a regular file")
    if st.st_uid != os.geteuid():
        raise VaultError(f"the secret vault {path} belongs to another user", hint="opal uses only a vault of your own")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o007:
        raise VaultError(
            f"the secret vault {path} is open to other users (mode {mode:04o}); opal will not use it",
            hint=f"its secrets may have been read: rotate them, then run: chmod 600 {path}",
        )
    if mode & 0o070:
        os.fchmod(fd, _FILE_MODE)  # group access only: take it back quietly


def _parse_header(raw: bytes, path: str) -> bytes:
    try:
        head = json.loads(raw)
        if head.get(_MAGIC) != _VERSION:
            raise ValueError
        key = bytes.fromhex(head["key"])
        if len(key) < 16:
            raise ValueError
        return key
    except (ValueError, TypeError, KeyError, AttributeError):
        raise VaultError(
            f"{path} is not an opal secret vault (version {_VERSION})",
            hint="move it away; opal creates a new vault on the next commit",
        ) from None


def _parse_record(raw: bytes) -> tuple[str, str] | None:
    try:
        rec = json.loads(raw)
        ph, secret = rec["p"], rec["s"]
    except (ValueError, TypeError, KeyError):
        return None
    if not (isinstance(ph, str) and isinstance(secret, str) and is_placeholder(ph)):
        return None
    return ph, secret


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            break
        size -= len(chunk)
        chunks.append(chunk)
    return b"".join(chunks)


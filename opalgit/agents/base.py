"""The adapter interface: how opal reads and writes one agent's session files.

An adapter is one class, by convention ``opalgit.agents.<agent>.adapter``, over the
agent's ``files`` (where it keeps its sessions), ``read`` (parsing, normalizing) and
``write`` (export) modules. It is pure: it may read the agent's files and the
environment mapping it is handed, but it never touches opal's store, never prints,
and never imports another adapter nor looks at another agent's format: it says how
sure it is that a file is its own (:meth:`Adapter.sniff`), and the registry
(:mod:`opalgit.agents`) compares the answers. The registry finds adapters through
the ``opalgit.adapters`` entry-point group; the built-in ones are registered the
same way. :mod:`opalgit.testing.adapters` is the contract every adapter passes.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import importlib
import os
import re
import zlib
from array import array
from typing import IO, Any, Callable, Iterable, Iterator, Mapping, Sequence

from opalgit import fileio, jsonl
from opalgit.errors import InputError
from opalgit.history.model import Normal, SessionInfo, Turn
from opalgit.structs import dataclass, field

#: How much of a file before the import cursor is hashed to prove it is unchanged.
TAIL_WINDOW = 64 * 1024


@dataclass(frozen=True)
class SessionFile:
    """A session file found on disk."""

    agent: str
    id: str
    path: str
    mtime: float
    size: int


@dataclass
class Record:
    """One source record read from a file, with its normalized view."""

    turn: Turn
    normal: Normal
    line: int  # 1-based line number of the record in the file
    # CRC-32 of the line's bytes (without b"\n") when the record is one whole JSON
    # line: lets the commit use a redaction verdict about that line (redactworker).
    crc: int | None = None


@dataclass
class View:
    """One line of conversation inside a file: becomes one opal branch.

    A Claude Code file can hold several (its own rewinds and edits fork the
    ``parentUuid`` tree); most files hold exactly one.
    """

    indices: list[int]  # positions in ReadResult.records, in file order
    leaf: str | None = None  # agent-specific id of the view's last node
    name_hint: str | None = None  # None for the active view; else a branch-name suffix


class ReadResult:
    """What :meth:`Adapter.read` found: the session, its records, views and state.

    The records are either a list (``records=[...]``: the adapter parsed them all) or
    produced on demand (``produce=...`` with ``count``: the adapter kept only what
    views and session needed, and re-reads the file for the records). Either way:

    * :attr:`count` is the number of records, without producing them;
    * :meth:`iter_records` yields records one at a time, in file order, without
      keeping them (a lazy result makes fresh :class:`Record` objects on every call);
    * :attr:`records` is the whole list, produced once on first use and kept.

    Producing lazily re-reads the file and raises :class:`InputError` if the lines
    consumed are no longer what :meth:`Adapter.read` saw.
    """

    def __init__(
        self,
        session: SessionInfo,
        records: list[Record] | None = None,
        views: list[View] | None = None,
        state: dict | None = None,
        end: int = 0,
        lines: int = 0,
        warnings: list[str] | None = None,
        extends: bool = False,
        *,
        produce: Callable[[Sequence[int] | None], Iterator[Record]] | None = None,
        count: int | None = None,
        revised: Mapping[int, Normal] | None = None,
    ) -> None:
        if records is None and (produce is None or count is None):
            raise TypeError("ReadResult needs records, or produce and count")
        self.session = session
        self._records = records
        self._produce = produce
        self._count = len(records) if records is not None else int(count or 0)
        self.views: list[View] = views if views is not None else []  # views[0]: the one the agent would resume
        self.state: dict = state if state is not None else {}  # adapter's state for the next incremental read
        self.end = end  # byte offset just past the last record consumed
        self.lines = lines  # number of lines consumed (whole lines only)
        self.warnings: list[str] = warnings if warnings is not None else []
        self.extends = extends  # incremental read: records simply extend the previous active view
        # With ``extends``: records read before (index from the file's first line)
        # whose view the new lines change, and their new view. A Gemini CLI message
        # re-appended under its id supersedes its earlier line.
        self.revised: dict[int, Normal] = dict(revised or {})
        # Files of the session's side folders (Claude Code's <session>/subagents/ ...):
        # path relative to the folder, "/"-separated -> bytes. Stored with the state.
        self.side: dict[str, bytes] = {}

    @property
    def count(self) -> int:
        """How many records were read (no record is produced to answer)."""
        return self._count

    @property
    def records(self) -> list[Record]:
        """Every record, in file order (a lazy result is produced once, then kept)."""
        if self._records is None:
            assert self._produce is not None
            self._records = list(self._produce(None))
        return self._records

    @property
    def lazy(self) -> bool:
        """True while the records are not held in memory (:meth:`iter_records` re-reads)."""
        return self._records is None

    def iter_records(self, indices: Sequence[int] | None = None) -> Iterator[Record]:
        """The records at ``indices`` (ascending positions; None: all), one at a time."""
        if self._records is not None:
            recs = self._records
            return iter(recs) if indices is None else (recs[i] for i in indices)
        assert self._produce is not None
        return self._produce(indices)

    def __repr__(self) -> str:
        return (f"ReadResult(session={self.session!r}, count={self._count}, views={len(self.views)}, "
                f"end={self.end}, lines={self.lines}, extends={self.extends}, lazy={self.lazy})")


#: The confidence of a sniff that needs no other adapter's opinion.
CERTAIN = 1.0


class NotThisAgent(InputError):
    """A reader's refusal of a file that is not its agent's (:meth:`Adapter.refusing`).

    ``own`` is what the file should have been ("a Claude Code session"); ``named_line``
    the line an error naming the agent whose file it is points at (None: the file)."""

    def __init__(self, message: str, *, path: str, line: int | None = None, hint: str | None = None,
                 own: str, named_line: int | None = None) -> None:
        super().__init__(message, path=path, line=line, hint=hint)
        self.own = own
        self.named_line = named_line


def not_json_at_first(path: str, line: int, problem: str, own: str, hint: str) -> NotThisAgent:
    """The refusal of a file whose first line is not JSON (``problem``: why), which a
    reader of ``own`` ("a Claude Code session") hands :meth:`LineIndex.scan`."""
    return NotThisAgent(f"the first line is not JSON ({bare_reason(problem)}); this is not {own}",
                        path=path, line=line, hint=hint, own=own)


def check_shape(path: str, judged: Sequence[tuple[int, bool]], what: str, hint: str, own: str) -> None:
    """Refuse a file none of whose first JSON lines (``judged``: their line and whether
    the reader claims it) is the reader's; ``what`` says what the file lacks. With no
    JSON line yet (only a line still being written) there is no verdict."""
    if not judged or any(mine for _, mine in judged):
        return
    line = judged[0][0]
    raise NotThisAgent(what, path=path, line=line, hint=hint, own=own, named_line=line)


def home_folder(env: Mapping[str, str], override: str, name: str) -> str | None:
    """``$override`` when set and not empty, else ``$HOME/name`` (``%USERPROFILE%`` on
    Windows); None without either: where an agent keeps its files."""
    if env.get(override):
        return env[override]
    home = env.get("HOME") or env.get("USERPROFILE")
    return os.path.join(home, name) if home else None


def folder_forms(cwd: str) -> list[str]:
    """``cwd`` and, when it differs, its real path: the folders an agent may have
    recorded a session under (it may have been started through a link)."""
    try:
        real = os.path.realpath(cwd)
    except (OSError, ValueError):
        real = cwd
    return [cwd] if real == cwd else [cwd, real]


def reasoning_as_text(req: "ExportRequest", blk: Mapping[str, Any], report: "LossReport") -> str | None:
    """What a foreign reasoning block becomes in an export: its text, when the request
    keeps reasoning as marked text (counted ``reasoning:as_text``), else None, counted as
    dropped (``reasoning:signed``: a vendor's signature cannot travel; else ``reasoning:foreign``)."""
    text = blk.get("text") or ""
    if req.reasoning == "text" and isinstance(text, str) and text.strip():
        report.convert("reasoning:as_text")
        return text
    report.drop("reasoning:signed" if blk.get("signed") else "reasoning:foreign")
    return None


def sniff_lines(head: bytes, claim: Callable[[Any], float], cut: Callable[[bytes], float] | None = None,
                lines: int = 20) -> float:
    """An adapter's confidence that a JSON-lines file whose first bytes are ``head`` is
    its own: what ``claim`` (0 to 1, above 0.5 when it claims at all) says of the first
    parsed line it claims, halved for every JSON line before it. So, asked of every
    adapter, the file is the one whose format its first recognisable line is, and a
    line two formats could hold goes to the one that claims it more strongly.

    Blank lines are passed over; a line that is not JSON refuses the file, unless it is
    the last, which the head may have cut short (``cut`` may judge it from its start).
    After ``lines`` JSON lines that ``claim`` does not claim, the answer is 0."""
    if b"\x00" in head[:4096]:
        return 0.0
    rows = head.split(b"\n")
    seen = 0
    for n, raw in enumerate(rows):
        if not raw.strip():
            continue
        try:
            value = jsonl.parse(raw)
        except jsonl.ParseFailure:
            if n == len(rows) - 1 and cut is not None:
                return cut(raw) * 0.5**seen
            return 0.0
        sure = claim(value)
        if sure > 0:
            return sure * 0.5**seen
        seen += 1
        if seen >= lines:
            break
    return 0.0


class Adapter:
    """Base class of every agent adapter."""

    #: Registry name, used on the command line (``--agent claude``).
    name: str = ""
    #: Human name, used in messages.
    title: str = ""
    #: What the agent's session files are called when another adapter is handed one
    #: ("a Claude Code transcript").
    file_kind: str = ""
    #: Whether one record's meaning depends on the records before it (a mutation log,
    #: such as Gemini's ``$set``/``$rewindTo`` lines), so that showing one turn means
    #: replaying the state. None: assume so when the adapter overrides
    #: :meth:`normalize_many` (the safe guess for a third-party adapter).
    replays: bool | None = None
    #: Whether every text of a record's normalized view is one of the record's own strings,
    #: as written, or several of them joined by newlines (nothing added, nothing else joined).
    #: 'opal grep' then passes over a record whose stored bytes lack every literal a match
    #: needs (opalgit/porcelain/grep.py); tests/unit/test_grep_prefilter.py checks the claim
    #: on every real session of the agent. False, the safe default, has grep read each record.
    verbatim_texts: bool = False

    # -- discovery ----------------------------------------------------------------

    def find_sessions(self, cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
        """Session files that belong to the project folder ``cwd``, newest first."""
        raise NotImplementedError

    def find_session(self, session_id: str, env: Mapping[str, str]) -> SessionFile | None:
        """The file of one session, wherever it is, or None."""
        raise NotImplementedError

    def sniff(self, path: str, head: bytes) -> float:
        """How sure this adapter is that ``path``, whose first bytes are ``head``, is one
        of its agent's files: 0 (not at all) to 1 (:data:`CERTAIN`). It looks at its own
        format only; the registry asks every adapter and takes the surest
        (:func:`opalgit.agents.detect`). :func:`sniff_lines` answers for JSON lines."""
        raise NotImplementedError

    def subagent_of(self, path: str, head: bytes) -> tuple[str, str | None] | None:
        """For a file of this agent that is a subagent's transcript, not a session of its
        own: the parent session's id and its file (None when it is not where the agent
        keeps it). None for a session. Agents without subagent files keep this default."""
        return None

    #: Given by the registry when it loads the adapter: the other adapter whose file
    #: ``path`` looks like, or None (:func:`opalgit.agents.detect` without this one).
    #: An adapter constructed by hand has none, and its refusals name no other agent.
    others: Callable[[str], "Adapter | None"] | None = None

    @contextlib.contextmanager
    def refusing(self) -> Iterator[None]:
        """Around a read: a :class:`NotThisAgent` from the reader becomes the error that
        names the agent whose file it is, when the registry can tell (:attr:`others`)."""
        try:
            yield
        except NotThisAgent as exc:
            other = self.others(exc.path) if self.others is not None and exc.path else None
            if other is None or not other.file_kind:
                raise
            raise InputError(f"this looks like {other.file_kind}, not {exc.own}", path=exc.path, line=exc.named_line,
                             hint=f"import it with --agent {other.name}") from None

    # -- reading ------------------------------------------------------------------

    def read(self, path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
        """Read records from byte offset ``start``.

        With ``start == 0`` the whole file is read and ``views`` are computed. With
        ``start > 0`` (incremental), ``state`` is what the previous read returned and
        the adapter sets ``extends`` when every new record simply extends the previous
        active view; otherwise the caller reads the whole file again. The records may
        be produced lazily (:class:`ReadResult`): an adapter whose views need only a
        little of each line reads the file again for them, so memory stays flat.
        """
        raise NotImplementedError

    def normalize_record(self, record: Any) -> Normal:
        """The normalized view of one parsed record of this agent's files."""
        raise NotImplementedError

    def normalize(self, turn: Turn) -> Normal:
        """The normalized view of a stored (resolved) turn: its record, or its exact
        bytes parsed again, through :meth:`normalize_record`; a turn opal wrote itself
        (a merge marker, a squash summary) as its blocks."""
        if turn.has_record:
            return self.normalize_record(turn.record)
        if isinstance(turn.line, bytes):
            if not turn.line.strip():
                return Normal(role="meta", label="blank")
            try:
                value = jsonl.parse_kept(turn.line)
            except jsonl.ParseFailure:
                return Normal(role="meta", label="unparseable")
            return self.normalize_record(value)
        if turn.blocks is not None:
            return Normal(role=turn.role or "meta", blocks=list(turn.blocks))
        return Normal(role="meta", label="unresolved")

    def normalize_many(self, turns: list[Turn]) -> list[Normal]:
        """The views of a sequence of stored turns, in order.

        Formats whose records change the meaning of other records (Gemini CLI's
        mutation log: a later line replaces an earlier one) override this to replay
        the sequence; turns of other agents in the list are normalized one by one.
        """
        return [self.normalize(t) for t in turns]

    # -- writing ------------------------------------------------------------------

    def export(self, req: "ExportRequest") -> "ExportResult":
        """Files that make ``req.turns`` a native, resumable session of this agent.

        Same-agent records are written back as they were (only the session id and,
        where the agent needs it, the folder change); foreign records are converted
        from their normalized view, and every conversion or omission is counted in
        the result's :class:`LossReport`. Nothing is written here: the caller writes
        the files, refusing to overwrite any.
        """
        raise NotImplementedError

    def replace_tool_outputs(self, turn: Turn, replace: "Callable[[str, str], str | None]") -> Turn | None:
        """A copy of a (resolved) source turn with tool outputs rewritten, or None.

        ``replace(call_id, output_text)`` returns the new text, or None to keep it.
        Used by ``opal trim`` so a trimmed record stays a native record of its agent;
        an adapter that returns None here makes opal store an authored turn instead.
        """
        return None

    def render(self, turn: Turn) -> bytes:
        """The exact bytes of a (resolved) turn's source line, without the newline."""
        if turn.has_record:
            return jsonl.dumps(turn.record)
        if isinstance(turn.line, bytes):
            return turn.line
        raise InputError(f"a {turn.agent} turn has no source record to write back")


class SessionFacts:
    """What a read learns of its session line by line, kept in the read's state so that
    an incremental read goes on from it: :class:`SessionInfo`'s fields, and those a
    format adds (:attr:`FIELDS`). A reader subclasses it with the ``feed`` of its format."""

    FIELDS: tuple[str, ...] = ("id", "cwd", "git_branch", "model", "title", "version")
    AGENT = ""

    def __init__(self, saved: Mapping[str, Any] | None = None) -> None:
        s = dict(saved or {})
        for key in self.FIELDS:
            setattr(self, key, s.get(key))

    def session(self) -> SessionInfo:
        get = self.__dict__.get
        return SessionInfo(self.AGENT, get("id") or "", get("cwd"), get("git_branch"), get("model"), get("title"),
                           get("version"))

    def saved(self) -> dict:
        """The state form: every field that is known."""
        return {k: getattr(self, k) for k in self.FIELDS if getattr(self, k) is not None}


class PackageAdapter(Adapter):
    """An adapter over an agent package laid out as the built-ins are: :attr:`files`
    (``find_sessions``, ``find_session``), :attr:`reader` (``sniff``, ``read``,
    ``normalize_record``, and ``normalize_many`` for a format that replays) and
    :attr:`writer`, the name of the module with ``export`` (and, optionally,
    ``replace_tool_outputs``), imported on the first export: reading commands never
    load it. A subclass sets the three and its names."""

    files: Any = None
    reader: Any = None
    writer: str = ""

    def find_sessions(self, cwd: str, env: Mapping[str, str]) -> list[SessionFile]:
        return self.files.find_sessions(cwd, env)

    def find_session(self, session_id: str, env: Mapping[str, str]) -> SessionFile | None:
        return self.files.find_session(session_id, env)

    def sniff(self, path: str, head: bytes) -> float:
        return self.reader.sniff(path, head)

    def read(self, path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
        with self.refusing():
            return self.reader.read(path, start=start, first_line=first_line, state=state)

    def normalize_record(self, record: Any) -> Normal:
        return self.reader.normalize_record(record)

    def normalize_many(self, turns: list[Turn]) -> list[Normal]:
        many = getattr(self.reader, "normalize_many", None)
        return many(turns, self.normalize) if many is not None else super().normalize_many(turns)

    def export(self, req: "ExportRequest") -> "ExportResult":
        return importlib.import_module(self.writer).export(req)

    def replace_tool_outputs(self, turn: Turn, replace: "Callable[[str, str], str | None]") -> Turn | None:
        rewrite = getattr(importlib.import_module(self.writer), "replace_tool_outputs", None)
        return rewrite(turn, replace) if rewrite is not None else None


# ---------------------------------------------------------------------- timestamps

_TIME_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?\s*(Z|z|[+-]\d{2}:?\d{2})?$"
)


_JS_SHAPE = "--T::."  # the separators of 2025-01-02T03:04:05.678Z, at 4, 7, 10, 13, 16 and 19
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MS = datetime.timedelta(milliseconds=1)


def record_of(turn: Turn) -> Any:
    """The record ``turn`` stands for: kept as parsed, or parsed exactly from its line
    (big integers included); None for a line that is not JSON or is blank."""
    if turn.has_record:
        return turn.record
    if isinstance(turn.line, bytes) and turn.line.strip():
        try:
            return jsonl.parse_kept(turn.line)
        except jsonl.ParseFailure:
            return None
    return None


def iso(ms: int) -> str:
    """Integer milliseconds as JavaScript's ``toISOString()`` writes them (UTC,
    ``YYYY-MM-DDThh:mm:ss.mmmZ``), which every agent writes on its records."""
    t = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_time(value: Any) -> int | None:
    """A record timestamp (RFC 3339, or epoch seconds / milliseconds) as integer ms (UTC), or None.

    Every agent writes RFC 3339 strings; numbers below 10**11 are taken as seconds
    (that is the year 5138 in milliseconds).
    """
    if isinstance(value, str):
        if len(value) == 24 and value[23] == "Z" and _JS_SHAPE == value[4] + value[7] + value[10] + value[13] + value[16] + value[19]:
            # JavaScript's toISOString(), which Claude Code and Gemini CLI write on
            # every record: the C parser reads it in a quarter of the time (a 50 MB
            # import asks 6,000 times). A date it refuses (February 30, a leap second)
            # goes the long way, which decides; with every separator in place it takes
            # nothing the long way refuses (tests/agents/test_base.py).
            try:
                return (datetime.datetime.fromisoformat(value) - _EPOCH) // _MS
            except ValueError:
                pass
        return _rfc3339(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not abs(value) < 2**53:  # also rejects NaN and infinities
            return None
        return int(value * 1000) if abs(value) < 10**11 else int(value)
    return None


def _rfc3339(value: str) -> int | None:
    m = _TIME_RE.match(value.strip())
    if not m:
        return None
    year, mon, day, hh, mm = (int(m.group(i)) for i in range(1, 6))
    ss = int(m.group(6) or 0)
    frac = (m.group(7) or "0")[:3].ljust(3, "0")
    if not (1 <= mon <= 12 and 1 <= day <= 31 and hh <= 23 and mm <= 59 and ss <= 60):
        return None
    import calendar  # the slow path only: the usual stamps never get here

    try:
        secs = calendar.timegm((year, mon, day, hh, mm, ss, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    tz = m.group(8)
    if tz and tz not in ("Z", "z"):
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        secs -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return secs * 1000 + int(frac)


# ---------------------------------------------------------------- shared JSONL reading


@dataclass
class RawRecord:
    """One line of a JSON-lines file as read: the parsed value, or why it is not JSON."""

    line: jsonl.Line
    value: Any  # parsed JSON, or None when the line is not JSON
    problem: str | None  # why the line is not JSON, or None


def bare_reason(problem: str) -> str:
    """The bare reason of a :func:`jsonl.parse` failure ("not JSON (x)" -> "x")."""
    if problem.startswith("not JSON (") and problem.endswith(")"):
        return problem[len("not JSON (") : -1]
    return problem


def opaque_warning(path: str, line: int, problem: str) -> str:
    """The warning for a line in the middle of a session that is not JSON (it is kept)."""
    return f"{path}:{line}: not JSON ({bare_reason(problem)}); kept as an opaque record"


def _changed_meanwhile(path: str, line: int) -> InputError:
    return InputError("the session file changed while it was being read", path=path, line=line,
                      hint="run the command again; nothing was recorded")


def reread_lines(fh: IO[bytes], path: str, first_line: int, offsets: Sequence[int], sums: Sequence[int],
                 indices: Iterable[int]) -> Iterator[jsonl.Line]:
    """The second pass of a two-pass read: the lines at ``indices`` (ascending) of a
    file whose first pass kept each line's offset (``offsets``, then the end of the
    last line) and CRC-32 (``sums``). A line that is no longer what the first pass
    read raises :class:`InputError` naming it: the file was rewritten in between."""
    pos = -1
    for i in indices:
        begin, stop = offsets[i], offsets[i + 1]
        if pos != begin:
            fh.seek(begin)
        pos = stop
        # Made by a call of its own, so that this generator holds no reference to the
        # line while its consumer works on it, nor while it reads the next one.
        # The last line may lack its newline (a whole JSON object the first pass took).
        yield _line_at(fh, path, first_line + i, begin, stop, sums[i], i == len(offsets) - 2)


def _line_at(fh: IO[bytes], path: str, number: int, begin: int, stop: int, crc: int,
             last: bool = False) -> jsonl.Line:
    """The line at ``begin``-``stop`` of ``fh`` (positioned at ``begin``), checked against
    the first pass's CRC-32; read without its newline, so its bytes are not copied again.
    The ``last`` line of the pass may have no newline (then its bytes run to ``stop``)."""
    raw = fh.read(stop - begin - 1)
    end = fh.read(1)
    if last and end not in (b"\n", b"") and len(raw) == stop - begin - 1:
        raw += end  # a whole last line without its newline
        end = b""
        if zlib.crc32(raw) == crc:
            return jsonl.Line(number, begin, stop, raw, False)
    if len(raw) != stop - begin - 1 or end != b"\n" or zlib.crc32(raw) != crc:
        raise _changed_meanwhile(path, number)
    return jsonl.Line(number, begin, stop, raw, True)


#: The kinds of line the first pass of a two-pass read keeps (one byte each).
LINE_JSON, LINE_BLANK, LINE_OPAQUE = 0, 1, 2


class LineIndex:
    """What the first pass of a two-pass read keeps of each line: its offset, CRC-32
    and kind; the second pass (:meth:`records`) reads the lines again from it.

    This is how an adapter keeps memory flat whatever the file's size: the first pass
    looks at every parsed line (:meth:`scan` yields them) and keeps only what the
    views and the session details need; the records are produced one at a time.
    """

    def __init__(self, start: int, lines: int) -> None:
        self.offsets = array("q")  # byte offset of every line, then the end of the last
        self.sums = array("L")  # CRC-32 of every line (without its newline)
        self.kinds = bytearray()  # LINE_JSON, LINE_BLANK or LINE_OPAQUE
        self.warnings: list[str] = []
        self.end = start  # just past the last whole line
        self.lines = lines  # number of the last whole line

    def __len__(self) -> int:
        return len(self.kinds)

    def scan(self, fh: IO[bytes], path: str, start: int, first_line: int, full: bool,
             first_line_error: Callable[[int, str], Exception]) -> Iterator[tuple[jsonl.Line, Any]]:
        """Index the lines from ``start``; yield each JSON line with its value. A line
        that is not JSON is kept opaque and reported, but before the first JSON line of
        a whole file ``first_line_error(line, problem)`` is raised: that is not a session."""
        offsets, sums, kinds = self.offsets, self.sums, self.kinds
        seen_json = not full
        raw = None
        if start > 0:
            fh.seek(start - 1)
            if fh.read(2) in (b"}\n", b"]\n"):
                # The newline that ends a last line committed before it had one: not a line.
                start += 1
                self.end = start
        for raw in iter_jsonl(fh, path, start=start, first_line=first_line):
            line = raw.line
            offsets.append(line.start)
            sums.append(zlib.crc32(line.raw))
            if raw.problem is None:
                seen_json = True
                kinds.append(LINE_JSON)
                yield line, raw.value
            elif raw.problem == "blank":
                kinds.append(LINE_BLANK)
            elif not seen_json:
                raise first_line_error(line.number, raw.problem)
            else:
                self.warnings.append(opaque_warning(path, line.number, raw.problem))
                kinds.append(LINE_OPAQUE)
        if raw is not None:
            self.end, self.lines = raw.line.end, raw.line.number
        offsets.append(self.end)

    def per_line(self, values: list[Any], fill: Any) -> list[Any]:
        """``values``, one per JSON line in order, spread over every line: ``fill`` at
        the blank and opaque ones."""
        it = iter(values)
        return [next(it) if kind == LINE_JSON else fill for kind in self.kinds]

    def end_of_pass(self, fh: IO[bytes], path: str, full: bool, empty_hint: str) -> bool:
        """After the first pass over ``fh``: whether its last line is still incomplete (said
        in :attr:`warnings`: the agent may still be writing it; it is committed next time).
        A whole file of nothing but blank lines is refused (``empty_hint``: when to try again)."""
        partial = fh.seek(0, os.SEEK_END) > self.end
        if full and not partial and self.kinds.count(LINE_BLANK) == len(self):
            raise InputError("the session file is empty", path=path, hint=empty_hint)
        if partial:
            self.warnings.append(f"{path}:{self.lines + 1}: incomplete last line (the agent may still be writing); "
                                 "it will be committed next time")
        return partial

    def records(self, open_again: Callable[[], IO[bytes]], path: str, agent: str, first_line: int,
                indices: Sequence[int] | None, normal: Callable[[int, Any], Normal]) -> Iterator[Record]:
        """The second pass: the records at ``indices`` (ascending; None: all), read
        again from ``open_again()`` (e.g. :func:`reopen`). A JSON line's record gets the
        view ``normal(i, value)`` (``i`` counts from ``first_line``) and the line's
        CRC-32; blank and opaque lines are kept as their bytes. A line that is no longer
        what :meth:`scan` read raises :class:`InputError`."""
        kinds = self.kinds
        if not kinds:
            return
        if indices is None:
            indices = range(len(kinds))
        with open_again() as fh:
            lines = reread_lines(fh, path, first_line, self.offsets, self.sums, indices)
            # Each record is yielded as it is made, so this generator holds neither its
            # line nor the record while the consumer stores it, nor while the next line
            # is read and parsed: a 20 MB line was otherwise in memory two or three
            # times over. (reread_lines yields one line per index, or raises.)
            for _ in range(len(indices)):
                yield self._record(next(lines), path, agent, first_line, normal)

    def _record(self, line: jsonl.Line, path: str, agent: str, first_line: int,
                normal: Callable[[int, Any], Normal]) -> Record:
        i = line.number - first_line
        kind = self.kinds[i]
        if kind != LINE_JSON:
            label = "blank" if kind == LINE_BLANK else "unparseable"
            return Record(Turn.from_line(agent, line.raw), Normal(role="meta", label=label), line.number)
        try:
            value = jsonl.parse(line.raw)
        except jsonl.ParseFailure:  # it parsed in the first pass: not the same bytes after all
            raise _changed_meanwhile(path, line.number) from None
        return Record(record_turn(agent, RawRecord(line, value, None)), normal(i, value), line.number, self.sums[i])


def open_session(path: str, hint: str, *, buffering: int = -1) -> IO[bytes]:
    """A session file opened for reading, when it is a regular file: a missing path,
    a folder, a FIFO, a device or a looping link is one clear :class:`InputError`
    (see :func:`fileio.open_input`), and nothing blocks or reads without end."""
    try:
        return fileio.open_input(path, what="session file", hint=hint, buffering=buffering)
    except FileNotFoundError:
        raise InputError("no such file", path=path, hint=hint) from None


def reopen(path: str) -> IO[bytes]:
    """The session file opened again for a second pass (see :meth:`LineIndex.records`)."""
    # Records average several KB: a 1 MiB buffer.
    return open_session(path, "run the command again; nothing was recorded", buffering=1 << 20)


def iter_jsonl(fh: IO[bytes], path: str, *, start: int = 0, first_line: int = 1) -> Iterator[RawRecord]:
    """Parse JSON lines from ``start``; blank lines skipped; bad lines reported, not raised.

    A last line without a newline is yielded when it is a whole JSON object (agents
    and the tools that copy their files may leave the final newline out); one that does
    not parse is not yielded at all: the agent may still be writing it, and a later
    commit will pick it up whole.
    """
    for line in jsonl.iter_lines(fh, start=start, first_number=first_line):
        if not line.terminated:
            try:
                value = jsonl.parse(line.raw)
            except jsonl.ParseFailure:
                return
            if isinstance(value, dict):
                yield RawRecord(line, value, None)
            return
        if not line.raw.strip():
            yield RawRecord(line, None, "blank")
            continue
        try:
            value = jsonl.parse(line.raw)
        except jsonl.ParseFailure as exc:
            yield RawRecord(line, None, str(exc))
            continue
        yield RawRecord(line, value, None)


def record_turn(agent: str, raw: RawRecord) -> Turn:
    """Store a parsed line as its record when that reproduces the bytes, else the bytes."""
    if raw.value is not None and jsonl.exact(raw.value, raw.line.raw):
        return Turn.from_record(agent, raw.value)
    return Turn.from_line(agent, raw.line.raw)


def tail_hash(path: str, end: int) -> bytes:
    """SHA-256 of the last :data:`TAIL_WINDOW` bytes before ``end`` (the prefix check)."""
    start = max(0, end - TAIL_WINDOW)
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    if len(data) != end - start:
        return b""
    return tail_digest(data)


def tail_digest(data: bytes) -> bytes:
    """:func:`tail_hash` of a file that holds exactly ``data``."""
    return hashlib.sha256(data[max(0, len(data) - TAIL_WINDOW) :]).digest()


def begins_with(path: str, size: int, tail: bytes) -> bool:
    """Whether the file at ``path`` still begins with the ``size`` bytes whose
    :func:`tail_hash` was ``tail`` (what an earlier read or write left there)."""
    return os.path.getsize(path) >= size and tail_hash(path, size) == tail


def trailing_partial(path: str, end: int) -> bool:
    """True when the file has bytes after ``end`` that do not yet end in a newline."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return False
    return size > end


# ---------------------------------------------------------------------- exporting


@dataclass
class ExportTurn:
    """One stored record on its way out: the resolved turn and its normalized view."""

    turn: Turn
    normal: Normal


def reply_id(turn: Turn) -> str | None:
    """The model reply a record belongs to, when its agent writes one reply over several
    records (Claude Code: one line per content block, all sharing ``message.id``); None
    otherwise. Exporters use it to write a reply's several tool calls as one reply, the
    way the target agent writes them (issue 18, 9)."""
    rec = turn.record if turn.has_record else None
    if turn.agent == "claude" and isinstance(rec, dict) and rec.get("type") == "assistant":
        msg = rec.get("message")
        mid = msg.get("id") if isinstance(msg, dict) else None
        return mid if isinstance(mid, str) and mid else None
    return None


@dataclass
class LossReport:
    """What an export converted or left out, counted by kind (never silent).

    Kinds are short stable strings, e.g. ``tool_call:mapped`` (a tool call renamed to
    the target's counterpart), ``reasoning:signed`` (vendor-signed reasoning dropped),
    ``record:meta`` (an agent-specific bookkeeping record with no counterpart).
    """

    converted: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def convert(self, kind: str, n: int = 1) -> None:
        self.converted[kind] = self.converted.get(kind, 0) + n

    def drop(self, kind: str, n: int = 1) -> None:
        self.dropped[kind] = self.dropped.get(kind, 0) + n

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def merge(self, other: "LossReport") -> None:
        for k, v in other.converted.items():
            self.convert(k, v)
        for k, v in other.dropped.items():
            self.drop(k, v)
        for n in other.notes:
            self.note(n)

    def to_json(self) -> dict:
        return {"converted": dict(sorted(self.converted.items())), "dropped": dict(sorted(self.dropped.items())), "notes": list(self.notes)}


@dataclass
class ExportRequest:
    """Everything an adapter needs to write a session in its own format."""

    turns: list[ExportTurn]  # the state's records in order (meta records included)
    session: SessionInfo | None  # the source session (agent, cwd, model ...)
    cwd: str  # absolute folder the user will resume from
    session_id: str  # fresh id for the new session (a UUID string)
    env: Mapping[str, str]  # to find the agent's home (HOME, CLAUDE_CONFIG_DIR, CODEX_HOME ...)
    now_ms: int  # export time, for file names and new timestamps
    reasoning: str = "drop"  # foreign reasoning: "drop" or "text" (kept as plain marked text)
    side: dict[str, bytes] = field(default_factory=dict)  # the source's side-folder files (ReadResult.side)


@dataclass
class ExportResult:
    """What an exporter produced: the files to create, how to resume them, and what was lost."""

    files: list[tuple[str, bytes]]  # absolute paths and their full contents; each must not exist yet
    session_id: str
    resume: list[str]  # argv that resumes it, run from ``cwd`` (e.g. ["claude", "--resume", id])
    report: LossReport
    aux: list[tuple[str, bytes]] = field(default_factory=list)  # files the agent shares (e.g. a registry) to create or replace
    # Steps run once the files are in place (e.g. adding the session to the agent's own
    # index database, which cannot be replaced as a file); each returns a line for the
    # report, or None.
    post: list[Callable[[], str | None]] = field(default_factory=list)
    # How many leading lines of files[0] are the request's first records, one line per
    # record in order (ids rewritten at most): committing the resumed session keeps
    # those records as stored instead of storing them again (see opalgit.history.checkpoints).
    # 0 when the exporter cannot say.
    prefix: int = 0

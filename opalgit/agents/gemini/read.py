"""Reading Gemini CLI chat sessions: JSON lines (or a legacy single JSON document) into records.

Chats are ``chats/session-<YYYY-MM-DDThh-mm>-<id[:8]>.jsonl`` (or a legacy single
``.json``) in a project's folder (:mod:`.files`).

A JSON-lines session is a *mutation log* (formats.md §3.2): messages keyed by ``id``
that later lines replace, ``$set`` updates and checkpoints, and ``$rewindTo`` lines.
Every line is kept as one record, in file order, so writing the records back
reproduces the file byte for byte; the log is replayed in :func:`read`
so that each message is counted once. The one exception is a ``$set.messages`` batch
whose last messages only it holds (:func:`_splits`): those are a record each, on the
batch's line, after the batch without them, so that each is a turn with its role; the
records then render the same log to the CLI, not the same bytes. The read takes two passes so that memory does
not grow with the log: the first replays a light copy of each line (no content), the
second reads the lines again as they are stored. How lines are classified, normalized
and replayed lives in :mod:`.log`, which also describes the normalized blocks.

Legacy single-JSON sessions (``session-….json``, one document ``{..., "messages":
[...]}``) are read as one header record (the document without ``messages``) plus
one record per message; every record's line number is 1. Rendering those records
gives the modern JSON-lines form of the same session (the CLI itself migrates a
legacy file that way when it resumes it), so their round trip is semantic, not
byte-exact. Documents of the older ``{"history": [Content, ...]}`` shape are read
the same way, one record per ``{role, parts}`` entry.

Writing sessions (export) lives in :mod:`.write`.

Pure: no store, no environment reads (the mapping is passed in), no printing.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
from functools import partial
from typing import Any, Callable, Iterator, Mapping, Sequence

from opalgit import jsonl
from opalgit.agents.base import (
    CERTAIN,
    LineIndex,
    NotThisAgent,
    ReadResult,
    Record,
    SessionFacts,
    View,
    check_shape,
    not_json_at_first,
    open_session,
    reopen,
)
from opalgit.agents.gemini.files import DOCUMENT_LIMIT, cwd_for
from opalgit.agents.gemini.log import (
    _SKIP,
    AGENT,
    _entries,
    _is_id,
    _kind,
    _normals,
    _replay,
    _value_of,
    credits,
    document,
    light,
    message_normal,
    normal_at,
    normalize_record,
    parse_time,
)
from opalgit.errors import InputError
from opalgit.history.model import Normal, Turn

__all__ = ["normalize_many", "normalize_record", "parse_time", "read", "sniff"]

STATE_VERSION = 2  # 2: the bloom filter grows with the session (1 had 8,192 bits)
#: Bloom filter over every message id seen: a false hit only costs a re-read. It has
#: a multiple of BLOOM_BITS bits, BLOOM_BITS_PER_ID per id for half as many ids again
#: as it was sized for (0.6 % false hits per new id when full, 0.2 % when sized, with
#: BLOOM_HASHES hashes); once full, a whole read sizes it again. It is part of every
#: commit's state, so it is kept small: 32 KB for 14,000 messages. (A fixed 8,192
#: bits filled up at ~1,000 messages, after which no read of a session was incremental.)
BLOOM_BITS, BLOOM_HASHES, BLOOM_BITS_PER_ID = 8192, 4, 12
_SHAPE_LINES = 64
#: What a refusal calls the file it expected.
OWN = "a Gemini CLI session"
_MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning", "model"})


# ---------------------------------------------------------------------- incremental state


def _bloom_size(ids: int) -> int:
    """Bytes of a filter for ``ids`` ids, with room for half as many again."""
    blocks = -(-(3 * BLOOM_BITS_PER_ID * ids // 2) // BLOOM_BITS)  # rounded up
    return max(blocks, 1) * BLOOM_BITS // 8


def _bloom_room(bits: bytes) -> int:
    """How many ids a filter of this size holds before it is sized again."""
    return len(bits) * 8 // BLOOM_BITS_PER_ID


def _bloom_spots(bits: bytes | bytearray, key: str) -> Iterator[int]:
    h = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=4 * BLOOM_HASHES).digest()
    size = len(bits) * 8
    for j in range(BLOOM_HASHES):
        yield int.from_bytes(h[4 * j : 4 * j + 4], "big") % size


def _bloom_add(bits: bytearray, key: str) -> None:
    for n in _bloom_spots(bits, key):
        bits[n // 8] |= 1 << (n % 8)


def _bloom_has(bits: bytes, key: str) -> bool:
    return all(bits[n // 8] & (1 << (n % 8)) for n in _bloom_spots(bits, key))


def _extends(values: list[Any], bloom: bytes, tail: str | None = None) -> tuple[bool, bool]:
    """Whether new lines only append to the log (no rewind, no checkpoint, no message
    read before replaced), and whether they re-append ``tail``, the log's last message.

    Gemini CLI re-appends a message under its id when its tool calls and results
    arrive, right after writing it. When that message is the last one read (``tail``,
    see :func:`_tail`) and comes back before any other message, replaying the new
    lines alone gives what replaying the whole log gives: the old line is superseded and nothing read
    since depends on it. Any other replacement needs the whole log replayed.
    """
    fresh: set[str] = set()
    again = False
    for rec in values:
        kind = _kind(rec)
        if kind == "rewind" or (kind in ("set", "header") and _entries(rec, kind) is not None):
            return False, False
        if kind == "message":
            mid = rec["id"]
            if not fresh and mid == tail:
                again = True
            elif mid not in fresh and _bloom_has(bloom, mid):
                return False, False
            fresh.add(mid)  # (a message new in these lines may come again: they replay alike)
    return True, again


def _tail(values: list[Any], entries: list, base: int, starts: Sequence[int] | None = None) -> list | None:
    """``[id, record index, time]`` of the log's last message line when its message may
    be re-appended and still extend the log (see :func:`_extends`), else None; ``base``
    is the index of ``values[0]`` among the file's records, ``entries`` the replay's.

    Nothing after that line may change the log's messages, and its message must be
    the replay's last entry, credited to that line, having answered no call: then
    the replay of the lines that follow starts from what a replay of the whole log
    has before that message (its answered calls, in their order).
    """
    for i in range(len(values) - 1, -1, -1):
        rec = values[i]
        kind = _kind(rec)
        if rec is _SKIP or kind == "other" or (kind in ("set", "header") and _entries(rec, kind) is None):
            continue  # metadata and opaque lines change no message
        last = entries[-1] if entries else None
        if kind != "message" or last is None or (last.key, last.src, last.answers) != (rec["id"], i, 0):
            return None
        return [rec["id"], base + (starts[i] if starts is not None else i), parse_time(rec.get("timestamp"))]
    return None


def _splits(values: list[Any], credited: Mapping[int, list]) -> dict[int, list[str]]:
    """The ``$set.messages`` lines read as several records: line index -> the ids of
    the messages that become records of their own, in their order.

    Gemini CLI writes a batch of several turns as one checkpoint line (and goes on with
    bare message lines after it). Its messages that only that line holds (credited to
    it, so no message line anywhere in the file has their ids) are records of their
    own, as a legacy document's are: one turn each, with its role, not one combined
    ``system`` turn. They must be the batch's last messages (by first place of an id,
    as the CLI loads a batch: an id met again keeps its place, takes the last content):
    then the batch with the others, followed by them as message lines, replays to the
    same messages in the same order (a checkpoint clears the log and loads its list; a
    message line adds to it).

    Once a ``$set`` has named a ``memoryScratchpad`` (that batch or an earlier one),
    batches stay whole: the CLI counts each message line after that ``$set`` as making
    the scratchpad stale (a message inside a batch does not), and drops a stale one on
    resume, so split lines would lose it."""
    out: dict[int, list[str]] = {}
    scratchpad = False
    for i, rec in enumerate(values):
        if _kind(rec) != "set":
            continue
        scratchpad = scratchpad or (isinstance(rec["$set"], dict) and "memoryScratchpad" in rec["$set"])
        if scratchpad:
            continue
        msgs = _entries(rec, "set")
        mine = {e.key for e in credited.get(i, ())}
        if not msgs or len(mine) < 2:
            continue
        order = list(dict.fromkeys(m["id"] for m in msgs if isinstance(m, dict) and _kind(m) == "message"))
        k = 0
        while k < len(order) and order[-1 - k] in mine:
            k += 1
        if k >= 2:
            out[i] = order[len(order) - k:]
    return out


def _starts(lines: int, split: Mapping[int, list[str]]) -> list[int]:
    """The place among a read's records of each line's first record."""
    out, n = [], 0
    for i in range(lines):
        out.append(n)
        n += 1 + len(split.get(i, ()))
    return out


def _expanded(records, open_again, path: str, first_line: int, lines: int, split: Mapping[int, list[str]],
              credited: Mapping[int, list], normal, indices: Sequence[int] | None) -> Iterator[Record]:
    """The records of a read with split batches (:func:`_splits`): the batch's line as a
    ``$set`` of the messages it keeps, then one record per message it gave up."""
    starts = _starts(lines, split)
    wanted = None if indices is None else set(indices)
    need = None if indices is None else sorted({bisect.bisect_right(starts, x) - 1 for x in indices})
    for rec in records(open_again, path, AGENT, first_line, need, normal):
        i = rec.line - first_line
        subs = _split_records(rec, i, split[i], credited) if i in split else [rec]
        for j, sub in enumerate(subs):
            if wanted is None or starts[i] + j in wanted:
                yield sub


def _split_records(rec: Record, i: int, gave: list[str], credited: Mapping[int, list]) -> list[Record]:
    value = _value_of(rec.turn)
    body = value["$set"]
    mine = set(gave)
    keep = [m for m in body["messages"] if not (isinstance(m, dict) and _kind(m) == "message" and m["id"] in mine)]
    last = {m["id"]: m for m in body["messages"] if isinstance(m, dict) and _kind(m) == "message" and m["id"] in mine}
    head = {key: ({**body, "messages": keep} if key == "$set" else v) for key, v in value.items()}
    rest = {i: [e for e in credited.get(i, ()) if e.key not in mine]}
    out = [Record(Turn.from_record(AGENT, head), normal_at(i, head, rest), rec.line)]
    by_key = {e.key: e for e in credited.get(i, ())}
    for mid in gave:
        m = last[mid]
        n = (Normal(role="meta", time=parse_time(m.get("timestamp")), label="gemini:duplicate-result")
             if by_key[mid].dup else message_normal(m))
        out.append(Record(Turn.from_record(AGENT, m), n, rec.line))
    return out


class _Info(SessionFacts):
    """The session's facts (:class:`~.base.SessionFacts`): the header's ``projectHash``
    (``hash``) proves the project folder."""

    FIELDS = ("id", "hash", "cwd", "model", "title")
    AGENT = AGENT

    def feed(self, rec: Any) -> None:
        kind = _kind(rec)
        if kind == "header" or (kind == "other" and isinstance(rec, dict)):
            if self.id is None and _is_id(rec.get("sessionId")):
                self.id = rec["sessionId"]
            if self.hash is None and _is_id(rec.get("projectHash")):
                self.hash = rec["projectHash"]
            if _is_id(rec.get("summary")):
                self.title = rec["summary"]
        elif kind == "set" and isinstance(rec["$set"], dict):
            if _is_id(rec["$set"].get("summary")):
                self.title = rec["$set"]["summary"]
        elif kind == "message" and rec.get("type") == "gemini" and _is_id(rec.get("model")):
            self.model = rec["model"]

    def resolve(self, path: str) -> None:
        if self.id is None:
            stem = os.path.basename(path)
            self.id = re.sub(r"\.jsonl?$", "", stem)
        if self.cwd is None and self.hash is not None:
            self.cwd = cwd_for(path, self.hash)



def _not_a_session(path: str, line: int, problem: str) -> InputError:
    return not_json_at_first(path, line, problem, OWN,
                             "give the path of a session-*.jsonl file under ~/.gemini/tmp/<project>/chats")


def _is_gemini(rec: Any) -> bool:
    """Whether a parsed line is one the CLI's loader takes (a header, a message, ``$set``, ``$rewindTo``)."""
    kind = _kind(rec)
    if kind in ("rewind", "set", "header"):
        return True
    return kind == "message" and rec.get("type") in _MESSAGE_TYPES



def sniff(path: str, head: bytes) -> float:
    """How surely a file whose first bytes are ``head`` is a Gemini CLI session: certain
    when its first line is a session header, or a whole legacy document on one line;
    a legacy document (pretty-printed) that parses is nearly so, and one the head cuts
    short, that names a ``sessionId`` and its messages or project, less."""
    if not head or b"\x00" in head[:4096]:
        return 0.0
    first = head.split(b"\n", 1)[0]
    try:
        value = jsonl.parse(first)
    except jsonl.ParseFailure:
        value = None
    if isinstance(value, dict):
        header = _kind(value) == "header" or (
            isinstance(value.get("sessionId"), str) and isinstance(value.get("messages"), list))
        return CERTAIN if header else 0.0
    doc = document(head)
    if doc is not None:
        return 0.9 if doc[2] == "history" or _is_id(doc[0].get("sessionId")) else 0.0
    text = head.decode("utf-8", "replace")
    cut = text.lstrip().startswith("{") and '"sessionId"' in text and ('"messages"' in text or '"projectHash"' in text)
    return 0.75 if cut else 0.0


# ------------------------------------------------------------------------------ reading


def read(path: str, *, start: int = 0, first_line: int = 1, state: dict | None = None) -> ReadResult:
    """Read a session in two passes (see the module), or a legacy document at once.
    A file that is not a Gemini CLI session raises :class:`~.base.NotThisAgent`."""
    full = start == 0
    with open_session(path, "give the path of a session-*.jsonl file under ~/.gemini/tmp/<project>/chats") as fh:
        size = os.fstat(fh.fileno()).st_size
        old = dict(state or {})
        if not full and (start > size or old.get("doc")):
            info = _Info(old.get("info"))
            info.resolve(path)
            why = ("the file is shorter than what was already imported" if start > size
                   else "a single-JSON session changes as a whole")
            return ReadResult(session=info.session(), records=[], views=[], state=old, end=start,
                              lines=first_line - 1, extends=False, warnings=[f"{path}: {why}; it will be read again"])
        if full:
            head = fh.read(4096)
            if size == 0 or (size <= len(head) and not head.strip()):
                raise InputError("the session file is empty", path=path,
                                 hint="the agent has not written anything yet; try again after its first reply")
            jsonl.sniff_binary(path, head)
            doc = _maybe_document(path, fh, size)
            if doc is not None:
                return _read_document(path, *doc)
        info = _Info(None if full else old.get("info"))
        index, lights = _scan(fh, path, start, first_line, info)
    info.resolve(path)
    if full and lights and info.hash is None:
        index.warnings.append(f"{path}: no session header (sessionId and projectHash); Gemini CLI cannot resume it as is")
    return _replayed(path, first_line, full, old, info, index, lights)


def _scan(fh, path: str, start: int, first_line: int, info: "_Info") -> tuple[LineIndex, list[Any]]:
    """The first pass: every line indexed, a light copy of each (:func:`.log.light`;
    ``_SKIP``: not JSON) for the replay, the session info fed; a whole file with no
    Gemini CLI record near the top is refused."""
    full = start == 0
    index = LineIndex(start, first_line - 1)
    lights: list[Any] = []
    judged: list[tuple[int, bool]] = []  # (line, Gemini's) of the first JSON lines
    for line, value in index.scan(fh, path, start, first_line, full, partial(_not_a_session, path)):
        lights.append(light(value))
        info.feed(value)
        if full and len(judged) < _SHAPE_LINES:
            judged.append((line.number, _is_gemini(value)))
    lights = index.per_line(lights, _SKIP)
    fh.seek(0, os.SEEK_END)
    if fh.tell() > index.end:
        index.warnings.append(f"{path}:{index.lines + 1}: incomplete last line (the agent may still be "
                              "writing); it will be committed next time")
    if full:
        _check_shape(path, judged)
    return index, lights


def _replayed(path: str, first_line: int, full: bool, old: Mapping[str, Any], info: "_Info", index: LineIndex,
              lights: list[Any]) -> ReadResult:
    """The second half of a read: the log replayed (as the CLI does), the bloom filter
    and tail of the incremental state, and the records produced on demand."""
    prior = [] if full else [a for a in old.get("answered") or [] if _is_id(a)]
    replay = _replay(lights, prior)
    credited = credits(replay)
    split = _splits(lights, credited)
    bloom, total_ids, last, usable = _bloom_of(old, full, len(replay.ids))
    extends, again = _extends(lights, bytes(bloom), last[0] if last else None) if usable else (False, False)
    for mid in replay.ids:
        _bloom_add(bloom, mid)
    live = [e.key for e in replay.entries if not e.key.startswith("#")]
    leaf = live[-1] if live else (old.get("leaf") if not full else None)
    count = len(index) + sum(len(v) for v in split.values())
    views = [View(indices=list(range(count)), leaf=leaf)] if full or extends else []
    new_state = {"v": STATE_VERSION, "bloom": bytes(bloom), "ids": total_ids, "answered": replay.answered,
                 "info": info.saved()}
    if leaf is not None:
        new_state["leaf"] = leaf
    # Records before this read: what a split batch (_splits) adds to the lines counts,
    # as the tail names its message's line by its record's place.
    before = old["items"] if not full and isinstance(old.get("items"), int) else first_line - 1
    new_state["items"] = before + count
    tail = _tail(lights, replay.entries, before, _starts(len(lights), split))
    if tail is None and not full and not any(v is not _SKIP and _kind(v) not in ("other", "set") for v in lights):
        tail = last  # only metadata since: the last message is still the last
    if tail is not None:
        new_state["tail"] = tail
    # The re-appended message's old line: what a replay of the whole log makes of it.
    revised = {last[1]: Normal(role="meta", time=last[2], label="gemini:superseded")} if again and last else {}
    if not full and not extends:
        new_state = dict(old)  # the caller reads the whole file again
    del replay, lights

    def normal(i: int, value: Any) -> Normal:
        # (i counts from this read's first line, as the replay's indices do)
        return normal_at(i, value, credited)

    def produce(indices: Sequence[int] | None) -> Iterator[Record]:
        if not split:
            return index.records(partial(reopen, path), path, AGENT, first_line, indices, normal)
        return _expanded(index.records, partial(reopen, path), path, first_line, len(index), split, credited,
                         normal, indices)

    return ReadResult(session=info.session(), views=views, state=new_state, end=index.end, lines=index.lines,
                      warnings=index.warnings, extends=extends, produce=produce, count=count, revised=revised)


def _bloom_of(old: Mapping[str, Any], full: bool, new_ids: int) -> tuple[bytearray, int, list | None, bool]:
    """The bloom filter to go on with (the old one when it has room for ``new_ids``
    more, else a new one sized for all), the number of ids it will hold, the old tail
    (:func:`_tail`), and whether the old state is usable for an incremental read."""
    known = old.get("bloom") if not full and old.get("v") == STATE_VERSION else None
    seen_ids = old.get("ids") if isinstance(old.get("ids"), int) else None
    usable = (
        isinstance(known, bytes) and len(known) >= BLOOM_BITS // 8 and len(known) % (BLOOM_BITS // 8) == 0
        and seen_ids is not None and seen_ids + new_ids <= _bloom_room(known)
    )
    total_ids = (seen_ids or 0) + new_ids if usable else new_ids
    bloom = bytearray(known if usable else bytes(_bloom_size(total_ids)))
    last = old.get("tail") if usable else None
    last = last if isinstance(last, list) and len(last) == 3 and _is_id(last[0]) else None
    return bloom, total_ids, last, usable


def _maybe_document(path: str, fh, size: int) -> tuple[tuple[dict, list, str], bytes] | None:
    """A legacy single-JSON document and the file's bytes, when the file is one.

    A ``.jsonl`` file whose first line is JSON is always read line by line (even a
    whole legacy record on one line), so that its round trip stays byte-exact.
    """
    fh.seek(0)
    try:
        jsonl.parse(fh.readline(jsonl.MAX_LINE).rstrip(b"\n"))
        first_ok = True
    except jsonl.ParseFailure:
        first_ok = False
    if first_ok and (path.endswith(".jsonl") or size > DOCUMENT_LIMIT):
        return None
    if size > DOCUMENT_LIMIT:
        raise InputError("this single-JSON session is too large to load", path=path,
                         hint=f"files over {DOCUMENT_LIMIT // (1024 * 1024)} MiB are not read")
    fh.seek(0)
    data = fh.read()
    doc = document(data)
    if doc is not None:
        return doc, data
    if first_ok:
        return None
    try:
        jsonl.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        if not path.endswith(".json"):
            return None  # reported line by line: "the first line is not JSON"
        line = exc.lineno if isinstance(exc, json.JSONDecodeError) else None
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 JSON"
        raise InputError(f"not JSON ({why}); this is not a Gemini CLI session", path=path, line=line,
                         hint="give the path of a session-*.jsonl or session-*.json file") from None
    raise NotThisAgent("this JSON document has no Gemini CLI messages (no messages or history list)", path=path,
                       hint="give the path of a session-*.jsonl or session-*.json file", own=OWN)


def _read_document(path: str, doc: tuple[dict, list, str], data: bytes) -> ReadResult:
    header, messages, key = doc
    values: list[Any] = [header, *messages]
    replay = _replay(values)
    normals = _normals(values, replay)
    records = [Record(Turn.from_record(AGENT, v), n, 1) for v, n in zip(values, normals)]
    info = _Info()
    for v in values:
        info.feed(v)
    info.resolve(path)
    live = [e.key for e in replay.entries if not e.key.startswith("#")]
    warnings = [] if key == "messages" else [
        f"{path}: an old {{history: [...]}} session; it is read, but Gemini CLI cannot resume it"]
    return ReadResult(
        session=info.session(), records=records,
        views=[View(indices=list(range(len(records))), leaf=live[-1] if live else None)],
        state={"v": STATE_VERSION, "doc": True, "info": info.saved()},
        end=len(data), lines=data.count(b"\n"), warnings=warnings, extends=False)


def _check_shape(path: str, judged: list[tuple[int, bool]]) -> None:
    """Refuse files with no Gemini CLI record near the top (:func:`~.base.check_shape`)."""
    check_shape(path, judged, "this JSON-lines file has no Gemini CLI records (no sessionId/projectHash header, "
                "message ids, $set or $rewindTo)", "give the path of a session-*.jsonl file under "
                "~/.gemini/tmp/<project>/chats, or pick the right --agent", OWN)


def normalize_many(turns: list[Turn], normalize: Callable[[Turn], Normal]) -> list[Normal]:
    """The views of a whole sequence of stored turns, the log replayed as :func:`read` does."""
    values = [_value_of(t) if t.agent == AGENT else _SKIP for t in turns]
    normals = _normals(values, _replay(values))
    return [n if t.agent == AGENT else normalize(t) for t, n in zip(turns, normals)]

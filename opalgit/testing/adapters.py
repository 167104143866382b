"""The adapter contract: what every agent adapter must do, as checks any adapter can run.

Subclass :class:`AdapterContract` in a test module, name the adapter and some of its
agent's real session files, and pytest collects the checks (the class name must
start with ``Test``)::

    from opalgit import agents
    from opalgit.testing.adapters import AdapterContract

    class TestMyAgent(AdapterContract):
        adapter = agents.get("myagent")      # from the registry, as opal gets it
        samples = ["tests/fixtures/myagent/one.jsonl", ...]
        foreign = ["tests/fixtures/claude/x.jsonl", ...]   # other agents' files

Each check is a plain method with plain asserts (only pytest's ``tmp_path`` fixture is
asked for), so the suite needs nothing but pytest. The checks:

* reading is deterministic: the same file read twice gives the same session, records,
  views and state;
* a same-agent round trip keeps every record: rendering the records gives the file's
  bytes back, or (formats that read a line as several records) a file that reads back
  to the same records; a field the adapter does not know survives it;
* a stored turn normalizes to the view the read gave it;
* :meth:`~opalgit.agents.base.Adapter.sniff` recognises its own samples, refuses the
  others', and the registry picks this adapter for its samples;
* malformed input raises :class:`~opalgit.errors.InputError` naming the file and, for
  a bad line, the line; damaged copies of a sample raise that or read, nothing else;
* reading a file in two steps (an incremental read) gives what reading it once gives;
* an export writes files that the adapter reads back with the same conversation, and
  finds again by session id.
"""

from __future__ import annotations

import os
import random
from typing import Any, ClassVar, Sequence

from opalgit import agents, jsonl
from opalgit.agents.base import Adapter, ExportRequest, ExportTurn, ReadResult
from opalgit.errors import InputError, OpalError

__all__ = ["AdapterContract", "conversation", "rendered"]

#: How much of a file the sniff checks show the adapters (what ``opal commit --file`` reads).
HEAD = 64 * 1024
#: A key no agent writes, put into a record to see that the round trip keeps it.
UNKNOWN = "opalContractUnknownField"


def rendered(adapter: Adapter, result: ReadResult) -> bytes:
    """The file the records of ``result`` make: each record's line, each with its newline."""
    return b"".join(adapter.render(r.turn) + b"\n" for r in result.iter_records())


def conversation(result: ReadResult, view: int = 0) -> list[tuple[str, str]]:
    """What a person reads of a view: the ``(role, text)`` of each text block of its user
    and assistant turns, in order (what a same-agent export must keep)."""
    if not result.views:
        return []
    out = []
    for record in result.iter_records(result.views[view].indices):
        normal = record.normal
        if normal.role not in ("user", "assistant"):
            continue
        for block in normal.blocks or ():
            if isinstance(block, dict) and block.get("type") == "text" and str(block.get("text") or "").strip():
                out.append((normal.role, str(block["text"]).strip()))
    return out


def _snapshot(result: ReadResult) -> tuple:
    records = [(r.line, r.turn.record if r.turn.has_record else r.turn.line, r.normal) for r in result.iter_records()]
    views = [(v.indices, v.leaf, v.name_hint) for v in result.views]
    return (result.session, records, views, result.state, result.end, result.lines, result.warnings, result.side)


def _head(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(HEAD)


def _byte_exact(result: ReadResult) -> bool:
    """Whether every record stands for one line of its own (so rendering gives the bytes back)."""
    lines = [r.line for r in result.iter_records()]
    return len(set(lines)) == len(lines) == result.lines


class AdapterContract:
    """The checks every adapter passes; a subclass sets :attr:`adapter` and :attr:`samples`."""

    #: The adapter under test; best taken from the registry (``agents.get(name)``), so
    #: that a refusal can name the agent whose file it is.
    adapter: ClassVar[Adapter]
    #: Session files of the adapter's agent, as the agent wrote them.
    samples: ClassVar[Sequence[str]] = ()
    #: Session files of other agents: the adapter's sniff must refuse them.
    foreign: ClassVar[Sequence[str]] = ()
    #: Samples whose records, rendered, are not a file that reads back the same (said why).
    render_changes: ClassVar[dict[str, str]] = {}
    #: Samples whose same-agent export may change the conversation (said why, in the value).
    export_changes: ClassVar[dict[str, str]] = {}
    #: Whether the adapter writes (:meth:`~opalgit.agents.base.Adapter.export`).
    exports: ClassVar[bool] = True

    def contents(self, path: str) -> bytes:
        """The text the adapter reads in ``path``, which its offsets and lines count in;
        an adapter of a compressed format overrides this to decompress. Copies the
        checks make of a sample are written as this text, under a plain name."""
        with open(path, "rb") as fh:
            return fh.read()

    def _copy(self, tmp_path, kind: str, n: int, path: str):
        name = os.path.basename(path)
        for suffix in (".zst", ".gz"):
            name = name.removesuffix(suffix)
        return tmp_path / f"{kind}-{n}-{name}"

    def _samples(self) -> Sequence[str]:
        assert self.samples, f"{type(self).__name__} names no samples"
        return self.samples

    # ------------------------------------------------------------------ reading

    def test_read_is_deterministic(self) -> None:
        for path in self._samples():
            first, second = self.adapter.read(path), self.adapter.read(path)
            assert _snapshot(first) == _snapshot(second), f"{path}: two reads differ"
            assert first.count == len(first.records), f"{path}: count is not the number of records"
            assert first.views, f"{path}: a whole read has no view"
            for view in first.views:
                assert all(0 <= i < first.count for i in view.indices), f"{path}: a view names a missing record"
                assert view.indices == sorted(set(view.indices)), f"{path}: a view's records are not in file order"

    def test_round_trip_keeps_every_record(self, tmp_path) -> None:
        for n, path in enumerate(self._samples()):
            result = self.adapter.read(path)
            body = rendered(self.adapter, result)
            data = self.contents(path)
            if _byte_exact(result) and data.endswith(b"\n"):
                assert body == data, f"{path}: the records do not render back to the file's bytes"
                continue
            # One line read as several records (a legacy document, a split batch): the
            # rendered file must read back to the same records.
            if path in self.render_changes:
                continue
            again = self._copy(tmp_path, "again", n, path)
            again.write_bytes(body)
            back = self.adapter.read(str(again))
            assert [r.normal for r in back.iter_records()] == [r.normal for r in result.iter_records()], (
                f"{path}: the rendered records read back differently")

    def test_round_trip_keeps_an_unknown_field(self, tmp_path) -> None:
        for n, path in enumerate(self._samples()):
            lines = self.contents(path).split(b"\n")
            at = next((i for i, raw in enumerate(lines) if raw.startswith(b"{") and raw.endswith(b"}")
                       and isinstance(_parsed(raw), dict)), None)
            if at is None:
                continue  # not JSON lines (a legacy document): nothing to add a field to
            value = _parsed(lines[at])
            value[UNKNOWN] = {"kept": [1, "two"]}
            lines[at] = jsonl.dumps(value)
            changed = self._copy(tmp_path, "unknown", n, path)
            changed.write_bytes(b"\n".join(lines))
            result = self.adapter.read(str(changed))
            assert UNKNOWN.encode() in rendered(self.adapter, result), f"{path}: an unknown field was dropped"

    def test_stored_turns_normalize_as_read(self) -> None:
        for path in self._samples():
            records = self.adapter.read(path).records
            if self.adapter.replays is False:
                got = [self.adapter.normalize(r.turn) for r in records]
            else:
                got = self.adapter.normalize_many([r.turn for r in records])
            assert got == [r.normal for r in records], f"{path}: a stored turn normalizes unlike its read"

    def test_incremental_read_gives_the_whole_read(self, tmp_path) -> None:
        for n, path in enumerate(self._samples()):
            whole = self.adapter.read(path)
            data = self.contents(path)
            if not _byte_exact(whole) or whole.lines < 4 or not data.endswith(b"\n"):
                continue
            cut = data.rfind(b"\n", 0, len(data) // 2) + 1
            grown = self._copy(tmp_path, "grown", n, path)
            grown.write_bytes(data[:cut])
            try:
                first = self.adapter.read(str(grown))
            except InputError:
                continue  # the first half alone is not a session (its head is a line still to come)
            grown.write_bytes(data)
            more = self.adapter.read(str(grown), start=first.end, first_line=first.lines + 1, state=first.state)
            if not more.extends:
                continue  # the caller reads the whole file again: nothing to compare
            assert first.count + more.count == whole.count, f"{path}: two reads hold other records than one"
            assert rendered(self.adapter, first) + rendered(self.adapter, more) == data, (
                f"{path}: two reads render other bytes than one")

    # -------------------------------------------------------------------- sniff

    def test_sniff_recognises_its_own_samples(self) -> None:
        for path in self._samples():
            head = _head(path)
            assert self.adapter.sniff(path, head) > 0, f"{path}: sniff does not recognise its own agent's file"
            assert 0 <= self.adapter.sniff(path, head) <= 1
            picked = agents.detect(path, head)
            assert picked is not None and picked.name == self.adapter.name, (
                f"{path}: the registry picks {picked and picked.name} for it")

    def test_sniff_refuses_other_agents_files(self) -> None:
        for path in self.foreign:
            assert not self.adapter.sniff(path, _head(path)), f"{path}: sniff claims another agent's file"
        for head in (b"", b"not json\n", b'{"a":1}\n', b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"):
            assert not self.adapter.sniff("x", head), f"sniff claims {head!r}"

    # ---------------------------------------------------------------- bad input

    def test_malformed_input_names_file_and_line(self, tmp_path) -> None:
        data = self.contents(self._samples()[0])
        cases = {
            "first-line.jsonl": (b"this is not JSON\n" + data, 1),
            "binary.jsonl": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), None),
            "empty.jsonl": (b"", None),
            "numbers.jsonl": (b"[1, 2, 3]\n{\"hello\": \"world\"}\n", 1),
        }
        for name, (body, line) in cases.items():
            path = tmp_path / name
            path.write_bytes(body)
            try:
                self.adapter.read(str(path))
            except InputError as exc:
                assert exc.path == str(path), f"{name}: the error names {exc.path!r}, not the file"
                assert line is None or exc.line == line, f"{name}: the error names line {exc.line}, not {line}"
                assert exc.hint, f"{name}: the error says nothing of what to do"
            else:
                raise AssertionError(f"{name}: read without an error")
        missing = tmp_path / "missing.jsonl"
        try:
            self.adapter.read(str(missing))
        except InputError as exc:
            assert exc.path == str(missing)
        else:
            raise AssertionError("a missing file read without an error")

    def test_damaged_files_raise_only_input_errors(self, tmp_path) -> None:
        chance = random.Random(20)  # the same damage on every run
        for n, path in enumerate(self._samples()):
            data = self.contents(path)
            damaged = [data[: chance.randrange(len(data) + 1)] for _ in range(3)]
            for _ in range(3):
                at = chance.randrange(max(len(data), 1))
                damaged.append(data[:at] + bytes([chance.randrange(256)]) + data[at + 1:])
            for k, body in enumerate(damaged):
                copy = self._copy(tmp_path, f"damaged-{k}", n, path)
                copy.write_bytes(body)
                try:
                    result = self.adapter.read(str(copy))
                    for record in result.iter_records():
                        self.adapter.normalize(record.turn)
                except InputError:
                    pass
                except OpalError as exc:
                    raise AssertionError(f"{path}, damaged ({k}): {type(exc).__name__}, not InputError: {exc}")

    # ------------------------------------------------------------------ writing

    def test_export_reads_back_with_the_same_turns(self, tmp_path) -> None:
        if not self.exports:
            return
        for n, path in enumerate(self._samples()):
            source = self.adapter.read(path)
            home, cwd = tmp_path / f"home-{n}", tmp_path / f"project-{n}"
            cwd.mkdir(parents=True)
            env = {"HOME": str(home)}
            turns = [ExportTurn(r.turn, r.normal) for r in source.iter_records(source.views[0].indices)]
            sid = f"0c0ffee0-0000-4000-8000-{n:012d}"
            req = ExportRequest(turns=turns, session=source.session, cwd=str(cwd), session_id=sid, env=env,
                                now_ms=1_767_225_600_000, side=dict(source.side))
            result = self.adapter.export(req)
            assert result.files and result.resume, f"{path}: the export wrote nothing to resume"
            for target, body in list(result.files) + list(result.aux):
                assert os.path.isabs(target) and str(target).startswith(str(home)), (
                    f"{path}: the export writes {target}, outside the agent's home")
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as fh:
                    fh.write(body)
            back = self.adapter.read(result.files[0][0])
            if path not in self.export_changes:
                assert conversation(back) == conversation(source), f"{path}: the export changed the conversation"
            found = self.adapter.find_session(result.session_id, env)
            assert found is not None and os.path.samefile(found.path, result.files[0][0]), (
                f"{path}: the exported session is not found by its id")


def _parsed(raw: bytes) -> Any:
    try:
        return jsonl.parse(raw)
    except jsonl.ParseFailure:
        return None

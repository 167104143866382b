"""Any bytes, any importer: a clear InputError naming the file, or a clean import. Never anything else."""

from __future__ import annotations

import os
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opalgit import adapters, codec, porcelain
from opalgit.errors import CorruptObjectError, InputError, OpalError
from opalgit.model import StateHeader, Turn
from opalgit.repo import Repository
from tests.conftest import FIXTURES
from tests.core.test_porcelain import place

# Realistic fragments make the fuzzer reach deep into the parsers, not just the first line.
FRAGMENTS = [
    b'{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"hi"},"timestamp":"2025-01-01T00:00:00Z"}\n',
    b'{"type":"assistant","uuid":"a1","parentUuid":"u1","message":{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}\n',
    b'{"timestamp":"2025-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"x","cwd":"/p","originator":"o","cli_version":"1"}}\n',
    b'{"timestamp":"2025","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c"}}\n',
    b'{"sessionId":"s","projectHash":"h","startTime":"t"}\n',
    b'{"id":"m1","timestamp":"t","type":"gemini","content":"x","toolCalls":[{"id":"c","name":"n","args":{}}]}\n',
    b'{"$rewindTo":"m1"}\n',
    b"\xff\xfe\x00garbage\n",
    b"\n",
    b"{",
]

data_strategy = st.one_of(
    st.binary(max_size=400),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=40)), max_size=12).map(b"".join),
)

ADAPTERS = sorted(adapters.all_adapters())


@pytest.mark.parametrize("agent", ADAPTERS)
@given(data=data_strategy)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_importer_gives_input_error_or_a_result(tmp_path_factory, agent, data):
    path = tmp_path_factory.mktemp("fz") / "session.jsonl"
    path.write_bytes(data)
    ad = adapters.get(agent)
    try:
        res = ad.read(str(path))
    except InputError as exc:
        assert str(path) in str(exc)
        assert "\n" not in str(exc)
        return
    for rec in res.records:
        ad.normalize(rec.turn).check()


@given(st.binary(max_size=600))
@settings(max_examples=400, deadline=None)
def test_object_decoders_raise_only_corrupt_object_error(data):
    for decode in (Turn.decode, StateHeader.decode, codec.unframe, lambda d: codec.unpack_canonical(d, "leaf")):
        try:
            decode(data)
        except CorruptObjectError:
            pass


@given(data=data_strategy)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_commit_of_junk_is_all_or_nothing(tmp_path_factory, data):
    from tests.conftest import git

    root = tmp_path_factory.mktemp("repo")
    git("init", "-q", str(root))
    porcelain.init(str(root))
    repo = Repository.discover(str(root))
    f = root / "junk.jsonl"
    f.write_bytes(data)
    for agent in ADAPTERS:
        before = repo.refs.all()
        try:
            porcelain.commit(repo, {"HOME": str(root)}, str(root), file=str(f), agent=agent)
        except OpalError:
            assert repo.refs.all() == before, "a failed commit changed a ref"


def test_a_50_mb_line_imports(project, home, tmp_path):
    porcelain.init(str(project))
    repo = Repository.discover(str(project))
    big = "x" * (50 * 1024 * 1024)
    line = (
        '{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","timestamp":"2025-01-01T00:00:00Z",'
        '"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"' + big + '"}]}}\n'
    )
    f = tmp_path / "big.jsonl"
    f.write_text(line)
    res = porcelain.commit(repo, {"HOME": str(home)}, str(project), file=str(f), agent="claude")
    assert res.items == 1
    shown = porcelain.show_turn(repo, res.oid, 1)
    assert len(shown.normal.blocks[0]["output"]) == len(big)


def test_a_session_that_grows_while_it_is_read(project, home):
    """An agent appending during a commit: nothing half-stored, nothing lost afterwards."""
    porcelain.init(str(project))
    repo = Repository.discover(str(project))
    source = os.path.join(FIXTURES, "claude", "claude-code-viewer", "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
    data = open(source, "rb").read().splitlines(keepends=True)
    path = place(home, project, source=source, lines=100)
    stop = threading.Event()

    def writer():
        with open(path, "ab", buffering=0) as fh:
            for line in data[100:]:
                if stop.is_set():
                    break
                # Write each line in two pieces so readers see half-written lines.
                fh.write(line[: len(line) // 2])
                time.sleep(0.0005)
                fh.write(line[len(line) // 2 :])

    t = threading.Thread(target=writer)
    t.start()
    env = {"HOME": str(home)}
    try:
        while t.is_alive():
            try:
                porcelain.commit(repo, env, str(project))
            except OpalError:
                pass
    finally:
        stop.set()
        t.join()
    try:
        porcelain.commit(repo, env, str(project))
    except OpalError:
        pass
    st = porcelain.load_state(repo, porcelain.resolve(repo, "HEAD").oid)
    assert st.header.items == len(data)
    from opalgit.adapters.claude import ClaudeAdapter

    whole = [it.id for it in porcelain._items(ClaudeAdapter().read(path).records)]
    assert [si.item.id for si in porcelain.sequence.iter_items(repo.store, st.root)] == whole

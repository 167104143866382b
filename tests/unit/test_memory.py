"""Memory of a large import: what it holds must not grow with the session, whatever its shape.

The end-to-end test imports generated sessions in a child process and bounds its
peak RSS by a ratio of the file's size plus the peak RSS of ``opal --version``
measured in the same test, so a machine's interpreter and libraries set the
baseline, not a constant. The other tests pin each cause found so far, in process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc

import pytest

from opalgit import codec, jsonl
from opalgit.history import payloads, sequence
from opalgit.history.model import Turn
from opalgit.history.sequence import Item
from opalgit.store.memory import MemoryObjectStore

MB = 1 << 20

def _peak_rss(tmp_path, *args: str, cwd) -> int:
    # The bench's probe: the command must not be a child of the test itself, since Linux
    # gives a child the larger of its own peak RSS and its parent's (pytest's is well
    # over 100 MB) at the fork.
    from bench.util import run_measured

    p = run_measured([sys.executable, "-m", "opalgit", *args], cwd=str(cwd), env=dict(os.environ))
    assert p.rc == 0, p.err[-2000:]
    return p.maxrss


#: How much a whole import may hold beyond what ``opal --version`` holds, as a part of
#: the file's size, for a file of 48 MB (where the import's fixed part, the pack
#: window and the compressor's tables, still counts for much). Measured there: 0.66x
#: (files read again and again) and 0.87x (many small turns), against 1.32x and 1.30x
#: before the sequence writer let go of payloads it had handed on and of leaves that
#: waited for a pack; see docs/performance.md for 250 MB. Rebuilding the uuid tree as
#: Claude Code does (issue 18: parallel results, compaction) holds every line's place
#: in it, a cost per record: many small turns measured 1.05x after it.
RATIO = 1.15


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="wait4's peak RSS as Linux reports it")
@pytest.mark.parametrize("shape", ["reads", "small"])
def test_an_import_holds_less_than_its_session(tmp_path, project, home, shape):
    from bench.generate import generate

    st = generate("claude", str(tmp_path / f"{shape}.jsonl"), size=48 * MB, seed=11, profile=shape)
    subprocess.run([sys.executable, "-m", "opalgit", "init"], cwd=project, check=True, capture_output=True)
    baseline = _peak_rss(tmp_path, "--version", cwd=project)
    peak = _peak_rss(tmp_path, "commit", "--file", st.path, cwd=project)
    assert peak <= baseline + RATIO * st.bytes, (
        f"{shape}: peak {peak / MB:.1f} MB, opal --version {baseline / MB:.1f} MB, file {st.bytes / MB:.1f} MB"
    )


# ------------------------------------------------------------------ the causes, one by one


def _traced_peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _read_again_items(n: int, size: int):
    """``n`` turns that each read the same file (equal payloads, each its own bytes),
    made one at a time as an import makes them."""
    text = "".join(f"{i:>6}\u2192line {i} of a file read again and again\n" for i in range(size // 48))
    for k in range(n):
        pl: dict[bytes, bytes] = {}
        canon = Turn.from_record("claude", {"n": k, "content": text}).encode(pl)
        yield Item(codec.digest(canon), canon, {"role": "user", "chars": len(text)}, payloads=pl)


def test_the_writer_keeps_no_payload_it_has_handed_on():
    """A file read again and again: its bytes, one copy per read, were kept with every
    waiting leaf until 4 MiB of *new* payloads started a pack, which never came."""
    store = MemoryObjectStore()
    total = 0

    def items():
        nonlocal total
        for it in _read_again_items(60, 256 * 1024):
            total += sum(len(v) for v in it.payloads.values())
            yield it

    peak = _traced_peak(lambda: sequence.build(store, items(), payloads.Packer(store)))
    assert total > 14 * MB
    assert peak < 3 * MB, peak  # one read's bytes (and the pack of the first), not sixty


def test_leaves_without_new_payloads_do_not_wait_for_a_pack():
    """Short turns bring no payloads: their leaves waited for a pack until the end."""
    store = MemoryObjectStore()
    n = 12_000

    def items():
        for k in range(n):
            canon = Turn.from_record("claude", {"n": k, "text": f"short turn {k} " * 40}).encode({})
            yield Item(codec.digest(canon), canon, {"role": "assistant", "chars": 600})

    peak = _traced_peak(lambda: sequence.build(store, items(), payloads.Packer(store)))
    assert peak < 10 * MB, peak  # of ~8 MB of turns; the writer holds up to twice WAITING_BYTES (4 MB)


@pytest.mark.parametrize("tail, has", [([1, 2, {"c": None}], False), ([0.5], True), ([{"d": 1e-7}], True),
                                       ([2**70], False)], ids=["none", "half", "tiny", "bigint"])
def test_a_large_line_is_checked_for_floats_without_packing_it(tail, has):
    """Every line is checked for floats (whose renderings may differ) before its record
    is kept as parsed. Packing a 20 MB record to look for them cost 20 to 40 MB more
    for a moment (msgpack's buffer grows by doubling)."""
    value = {"a": "x" * (8 * MB), "b": tail}
    raw = jsonl.dumps(value)
    peak = _traced_peak(lambda: jsonl._renders_alike(value, raw))
    assert peak < MB // 4, peak
    assert jsonl._holds_float(value, len(raw)) is has
    # An integer past 64 bits renders alike but cannot be a record (msgpack stops at
    # 64 bits): such a line is kept as its bytes (docs/format.md, big integers).
    assert jsonl.exact(value, raw) is (tail != [2**70])

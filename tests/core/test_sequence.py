"""The Merkle turn sequence, run as one contract against both object stores."""

from __future__ import annotations

import os

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opalgit import codec, payloads, sequence
from opalgit.model import Turn
from opalgit.store import GitObjectStore, MemoryObjectStore

from tests.conftest import git


def make_item(n: int, *, meta: bool = False, big: bool = False) -> sequence.Item:
    record = {"type": "user", "n": n}
    if big:
        record["content"] = f"payload {n % 3}\n" * 400  # three distinct payloads, shared
    payloads: dict[bytes, bytes] = {}
    canon = Turn.from_record("claude", record).encode(payloads)
    return sequence.Item(codec.digest(canon), canon, {"role": "meta" if meta else "user", "chars": n}, payloads=payloads)


ITEMS = [make_item(i, meta=(i % 5 == 0), big=(i % 7 == 0)) for i in range(1500)]


@pytest.fixture(params=["memory", "git"])
def store(request, tmp_path):
    if request.param == "memory":
        return MemoryObjectStore()
    git("init", "-q", "--bare", str(tmp_path / "r.git"))
    repo = pygit2.Repository(str(tmp_path / "r.git"))
    return GitObjectStore(repo, os.path.join(str(tmp_path / "r.git"), "objects"))


def ids(store, root, start=0, end=None):
    return [s.item.id for s in sequence.iter_items(store, root, start, end)]


def test_build_and_read_back(store):
    root = sequence.build(store, ITEMS)
    assert root.items == 1500
    assert root.turns == sum(1 for it in ITEMS if it.is_turn)
    assert ids(store, root) == [it.id for it in ITEMS]
    assert ids(store, root, 700, 720) == [it.id for it in ITEMS[700:720]]
    assert sequence.node_of(store, root.oid) == root
    assert sequence.build(store, []) is None


# Leaf trees name the pack that holds each payload, so structural equality holds for
# builds that agree on where payloads are: one packer shared by the calls below
# (as a commit shares the parent state's payload locations).


def test_appends_give_the_same_tree_as_one_build(store):
    packer = payloads.Packer(store)
    full = sequence.build(store, ITEMS, packer)
    root = None
    for start in range(0, len(ITEMS), 97):
        root = sequence.append(store, root, ITEMS[start : start + 97], packer)
    assert root == full


def test_truncate_and_splice_match_a_fresh_build(store):
    packer = payloads.Packer(store)
    full = sequence.build(store, ITEMS, packer)
    assert sequence.truncate(store, full, 333) == sequence.build(store, ITEMS[:333], packer)
    assert sequence.truncate(store, full, 0) is None
    extra = [make_item(10_000 + i) for i in range(3)]
    for a, b in [(0, 0), (0, 10), (100, 400), (1490, 1500), (750, 751), (1500, 1500)]:
        want = sequence.build(store, ITEMS[:a] + extra + ITEMS[b:], packer)
        assert sequence.splice(store, full, a, b, extra, packer) == want


def test_payload_locations_let_a_rebuild_share_every_leaf(store):
    full = sequence.build(store, ITEMS)
    store.flush()
    known = sequence.payload_locations(store, full)
    assert len(known) == 3
    packer = payloads.Packer(store, known=known)
    assert sequence.build(store, ITEMS, packer) == full
    assert packer.packs_written == 0


def test_turn_numbers_skip_meta_records(store):
    root = sequence.build(store, ITEMS)
    turn_items = [i for i, it in enumerate(ITEMS) if it.is_turn]
    for n in (0, 1, 57, len(turn_items) - 1):
        assert sequence.item_index_of_turn(store, root, n) == turn_items[n]
    with pytest.raises(IndexError):
        sequence.item_index_of_turn(store, root, len(turn_items))


def test_payloads_are_stored_once_and_resolve(store):
    root = sequence.build(store, ITEMS)
    store.flush()
    digests = set()
    for si in sequence.iter_items(store, root):
        for d, loc in si.item.payload_oids.items():
            digests.add(d)
            assert payloads.load(store, d, loc).startswith(b"payload ")
    assert len(digests) == 3


def test_an_append_rewrites_few_objects(store):
    root = sequence.build(store, ITEMS)
    store.flush()
    before = store.written_objects
    sequence.append(store, root, [make_item(99_999)])
    store.flush()
    # The last leaf (its blob and tree) plus one interior tree per level.
    assert store.written_objects - before <= 2 + 3


@given(
    st.lists(st.integers(0, 400), min_size=0, max_size=300),
    st.integers(0, 300),
    st.integers(0, 300),
    st.integers(0, 4),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_property_every_edit_equals_a_fresh_build(values, a, b, n_new):
    store = MemoryObjectStore()
    items = [make_item(v, meta=(v % 4 == 0)) for v in values]
    a, b = sorted((min(a, len(items)), min(b, len(items))))
    root = sequence.build(store, items)
    new = [make_item(50_000 + k) for k in range(n_new)]
    assert sequence.splice(store, root, a, b, new) == sequence.build(store, items[:a] + new + items[b:])
    assert sequence.append(store, root, new) == sequence.build(store, items + new)
    assert sequence.truncate(store, root, a) == sequence.build(store, items[:a])


def test_git_reads_what_opal_packed(tmp_path):
    path = tmp_path / "r.git"
    git("init", "-q", "--bare", str(path))
    repo = pygit2.Repository(str(path))
    store = GitObjectStore(repo, os.path.join(str(path), "objects"))
    root = sequence.build(store, ITEMS)
    store.flush()
    packs = [f for f in os.listdir(path / "objects" / "pack") if f.endswith(".pack")]
    assert len(packs) == 1, "a large write goes into one pack, not loose files"
    assert git("cat-file", "-t", root.oid.hex(), cwd=str(path)).stdout.strip() == "tree"
    git("verify-pack", str(path / "objects" / "pack" / packs[0].replace(".pack", ".idx")))
    ls = git("ls-tree", "-r", root.oid.hex(), cwd=str(path)).stdout
    assert "leaf" in ls

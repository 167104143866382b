"""The Merkle turn sequence, run as one contract against both object stores."""

from __future__ import annotations

import os

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opalgit import codec
from opalgit.errors import CorruptObjectError
from opalgit.history import payloads, sequence
from opalgit.history.model import Turn
from opalgit.store.memory import MemoryObjectStore
from opalgit.store.objects import GitObjectStore
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


def same_records(store, a, b) -> bool:
    """Same records cut into the same leaves, where a leaf may differ from its twin
    only by being stored as a delta (appends write those; one build never does)."""
    if a is None or b is None:
        return a is b
    la, lb = sequence.leaves(store, a), sequence.leaves(store, b)
    if [(x.items, x.turns) for x in la] != [(y.items, y.turns) for y in lb]:
        return False
    for x, y in zip(la, lb):
        if x.oid == y.oid:
            continue
        if sequence.leaf_base(store, x.oid) is None and sequence.leaf_base(store, y.oid) is None:
            return False
        if [it.id for it in sequence.read_leaf(store, x.oid)] != [it.id for it in sequence.read_leaf(store, y.oid)]:
            return False
    return True


def delta_leaves(store, root) -> list[bytes]:
    return [leaf.oid for leaf in sequence.leaves(store, root) if sequence.leaf_base(store, leaf.oid) is not None]


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


def test_appends_give_the_same_records_and_leaves_as_one_build(store):
    packer = payloads.Packer(store)
    full = sequence.build(store, ITEMS, packer)
    assert delta_leaves(store, full) == []
    root = None
    for start in range(0, len(ITEMS), 97):
        root = sequence.append(store, root, ITEMS[start : start + 97], packer)
    assert (root.items, root.turns) == (full.items, full.turns)
    assert same_records(store, root, full)
    # Only leaves that an append continued are deltas; every other leaf is shared.
    shared = {leaf.oid for leaf in sequence.leaves(store, full)}
    for leaf in sequence.leaves(store, root):
        assert leaf.oid in shared or sequence.leaf_base(store, leaf.oid) is not None
    assert 0 < len(delta_leaves(store, root)) <= len(ITEMS) // 97 + 1


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
    assert same_records(store, sequence.append(store, root, new), sequence.build(store, items + new))
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


# ------------------------------------------------------------------- delta leaves


def depth(store, leaf_oid) -> int:
    return sequence._leaf_parts(store, leaf_oid)[1]


def test_an_append_stores_the_reopened_leaf_as_a_small_delta(store):
    root = sequence.build(store, ITEMS)
    last = sequence.leaves(store, root)[-1]
    grown = sequence.append(store, root, [make_item(99_999)])
    new_last = sequence.leaves(store, grown)[-1]
    assert sequence.leaf_base(store, new_last.oid) == last.oid
    assert depth(store, new_last.oid) == 1
    assert ids(store, grown) == [it.id for it in ITEMS] + [make_item(99_999).id]
    # The delta costs about the new record, not the whole leaf again.
    blob = dict((n, o) for n, _, o in store.read_tree(new_last.oid))["leaf"]
    whole = dict((n, o) for n, _, o in store.read_tree(sequence.build(store, ITEMS + [make_item(99_999)]).oid))
    whole_leaf = sequence.leaves(store, sequence.build(store, ITEMS + [make_item(99_999)]))[-1]
    whole_blob = dict((n, o) for n, _, o in store.read_tree(whole_leaf.oid))["leaf"]
    assert whole and len(store.read_blob(blob)) * 3 < len(store.read_blob(whole_blob))


def test_delta_chains_are_bounded(store):
    # Turns that never end a leaf, appended one at a time: one leaf, rewritten each time.
    lone = [it for it in (make_item(200_000 + i) for i in range(400)) if not sequence._is_boundary(it.id)][:40]
    root = None
    depths = []
    for it in lone:
        root = sequence.append(store, root, [it])
        (leaf,) = sequence.leaves(store, root)
        depths.append(depth(store, leaf.oid))
    assert max(depths) == sequence.MAX_LEAF_DEPTH
    assert depths[sequence.MAX_LEAF_DEPTH + 1] == 0, "past the bound a leaf is written whole again"
    assert ids(store, root) == [it.id for it in lone]


def test_a_rebuild_over_a_fork_point_extends_the_parents_open_leaf(store):
    packer = payloads.Packer(store)
    full = sequence.build(store, ITEMS, packer)
    fork = sequence.truncate(store, full, 700)
    extra = [make_item(300_000 + i) for i in range(10)]
    rebuilt = sequence.build(store, ITEMS[:700] + extra, packer, parent=fork)
    assert same_records(store, rebuilt, sequence.build(store, ITEMS[:700] + extra, packer))
    before, after = sequence.leaves(store, fork), sequence.leaves(store, rebuilt)
    assert [n.oid for n in after[: len(before) - 1]] == [n.oid for n in before[:-1]]
    assert sequence.leaf_base(store, after[len(before) - 1].oid) == before[-1].oid


def test_a_reopened_leaf_that_gains_nothing_is_kept_as_it_is(store):
    # Cut just after a leaf boundary: the delta leaf that ends there is closed, and
    # the next append must keep it, not write it whole again.
    cut = next(i + 1 for i in range(600, 1500) if sequence._is_boundary(ITEMS[i].id))
    root = sequence.append(store, sequence.build(store, ITEMS[: cut - 3]), ITEMS[cut - 3 : cut])
    closed = sequence.leaves(store, root)[-1]
    assert sequence.leaf_base(store, closed.oid) is not None
    grown = sequence.append(store, root, ITEMS[cut : cut + 5])
    assert closed in sequence.leaves(store, grown)


def test_delta_leaves_survive_git_gc(tmp_path):
    path = str(tmp_path / "r.git")
    git("init", "-q", "--bare", path)
    store = GitObjectStore(pygit2.Repository(path), os.path.join(path, "objects"))
    root = None
    for start in range(0, 300, 7):
        root = sequence.append(store, root, ITEMS[start : start + 7])
    store.flush()
    assert delta_leaves(store, root)
    git("update-ref", "refs/keep", root.oid.hex(), cwd=path)
    git("gc", "-q", "--prune=now", cwd=path)
    assert git("fsck", "--full", "--strict", "--no-dangling", cwd=path).stdout == ""
    cold = GitObjectStore(pygit2.Repository(path), os.path.join(path, "objects"))
    assert ids(cold, root) == [it.id for it in ITEMS[: root.items]]


def _delta_leaf(store, base_oid: bytes, blob: bytes) -> bytes:
    return store.write_tree([("leaf", False, store.write_blob(blob)), ("base", True, base_oid)])


def test_damaged_delta_leaves_are_reported_not_misread():
    store = MemoryObjectStore()
    root = sequence.build(store, ITEMS[:5])
    grown = sequence.append(store, root, [make_item(77_777)])
    leaf = sequence.leaves(store, grown)[-1]
    entries = {n: (n, t, o) for n, t, o in store.read_tree(leaf.oid)}
    blob = store.read_blob(entries["leaf"][2])
    assert blob[:4] == sequence.MAGIC_DELTA
    cases = {
        "no base": store.write_tree([e for n, e in entries.items() if n != "base"]),
        "bad depth": _delta_leaf(store, entries["base"][2], blob[:4] + bytes([3]) + blob[5:]),
        "not a delta": store.write_tree(
            [e for n, e in entries.items() if n != "leaf"] + [("leaf", False, store.write_blob(codec.frame(b"x")))]
        ),
        "wrong base": _delta_leaf(store, sequence.build(store, ITEMS[100:103]).oid, blob),
        "cut short": _delta_leaf(store, entries["base"][2], blob[: len(blob) // 2]),
    }
    for why, oid in cases.items():
        with pytest.raises(CorruptObjectError):
            sequence.read_leaf(store, oid)
            pytest.fail(why)


def test_leaves_at_unequal_depths_are_an_error_not_a_wrong_sequence():
    store = MemoryObjectStore()
    lone = sequence.build(store, ITEMS[:1])  # a lone leaf is its own root
    tall = sequence.build(store, ITEMS[:300])  # an interior node over leaves
    assert sequence._children(store, lone.oid) is None and sequence._children(store, tall.oid) is not None

    def node(*kids):
        entries = [(f"{i:04d}-{k.items}-{k.turns}", True, k.oid) for i, k in enumerate(kids)]
        return sequence.Node(store.write_tree(entries), sum(k.items for k in kids), sum(k.turns for k in kids))

    with pytest.raises(CorruptObjectError):
        sequence.leaves(store, node(tall, lone))
    with pytest.raises(CorruptObjectError):
        for leaf in sequence.leaves(store, node(lone, tall)):
            sequence.read_leaf(store, leaf.oid)


def test_a_build_reports_the_payload_locations_its_leaves_name(store):
    packer = payloads.Packer(store)
    first: dict = {}
    root = sequence.build(store, ITEMS, packer, locations=first)
    assert first == sequence.payload_locations(store, root) and len(first) == 3
    # Rebuilt over a parent (leaves reused, one extended as a delta): still exact.
    again: dict = {}
    grown = sequence.build(store, ITEMS + [make_item(5, big=True)], packer, parent=root, locations=again)
    assert again == sequence.payload_locations(store, grown)


def test_fsck_reports_leaves_at_unequal_depths(tmp_path):
    from opalgit.porcelain import fsck

    git("init", "-q", str(tmp_path / "p"))
    from opalgit import porcelain
    from opalgit.store.repo import Repository

    porcelain.init(str(tmp_path / "p"))
    repo = Repository.discover(str(tmp_path / "p"))
    lone = sequence.build(repo.store, ITEMS[:1])
    tall = sequence.build(repo.store, ITEMS[:300])
    mixed = repo.store.write_tree([(f"{i:04d}-{k.items}-{k.turns}", True, k.oid) for i, k in enumerate((tall, lone))])
    report = fsck.FsckReport()
    checker = fsck._Checker(repo, report)
    assert checker.node(mixed, "test") == (301, tall.turns + lone.turns)
    assert any("leaves at depths [1, 2]" in p for p in report.problems), report.problems


# ------------------------------------------------------------- appending by the spine


@pytest.mark.parametrize("fanout", [2, 3, 64])
def test_an_append_equals_a_rebuild_at_every_depth(monkeypatch, fanout):
    # A small fanout makes trees of four or five levels from a few hundred records,
    # so every way a spine can grow (a group fills, a new top level) is exercised.
    monkeypatch.setattr(sequence, "FANOUT", fanout)
    store = MemoryObjectStore()
    packer = payloads.Packer(store)  # shared: leaf trees name the packs of their payloads
    root = None
    done: list[sequence.Item] = []
    for start, size in [(0, 1), (1, 40), (41, 3), (44, 200), (244, 1), (245, 300), (545, 17)]:
        batch = ITEMS[start : start + size]
        grown = sequence.append(store, root, batch, packer)
        done += batch
        assert same_records(store, grown, sequence.build(store, done, packer))
        assert ids(store, grown) == [it.id for it in done]
        old_count = len(sequence.leaves(store, root)) if root is not None else 1
        assert sequence.added_leaves(store, root, grown) == sequence.leaves(store, grown)[old_count - 1 :]
        root = grown


def test_an_append_reads_one_tree_per_level(monkeypatch):
    monkeypatch.setattr(sequence, "FANOUT", 3)
    store = MemoryObjectStore()
    root = sequence.build(store, ITEMS)
    height = 0
    node = root.oid
    while (kids := sequence._children(store, node)) is not None:
        height += 1
        node = kids[-1].oid
    assert height >= 4
    reads = []
    real = store.read_tree
    monkeypatch.setattr(store, "read_tree", lambda oid: reads.append(oid) or real(oid))
    sequence.append(store, root, [make_item(77_777)])
    # The spine's trees and the last leaf's tree (to learn it is the leaf, then to
    # read it), none of the other trees of 1,500 records.
    assert len(reads) <= height + 2


def test_added_leaves_without_the_append_in_memory_reads_the_trees(store):
    root = sequence.build(store, ITEMS[:700])
    grown = sequence.append(store, root, ITEMS[700:760])
    store.derived.clear()  # as in another process
    assert sequence.added_leaves(store, root, grown) == sequence.leaves(store, grown)[len(sequence.leaves(store, root)) - 1 :]
    assert sequence.added_leaves(store, None, grown) == sequence.leaves(store, grown)
    assert sequence.added_leaves(store, root, None) == []

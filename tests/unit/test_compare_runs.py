"""opal diff opens only the subtrees that differ, and still sees every record."""

from __future__ import annotations

import random

import pytest

from opalgit import codec
from opalgit.history import payloads, sequence
from opalgit.history.model import Turn
from opalgit.porcelain import diff as compare
from opalgit.store.memory import MemoryObjectStore


def item(n: int) -> sequence.Item:
    canon = Turn.from_record("claude", {"type": "user", "n": n}).encode({})
    return sequence.Item(codec.digest(canon), canon, {"role": "user", "chars": 1})


def flatten(store, nodes):
    out = []
    for n in nodes:
        out.extend(si.item.id for si in sequence.iter_items(store, n))
    return out


def ids(xs):
    return [item(n).id for n in xs]


@pytest.fixture(autouse=True)
def small_trees(monkeypatch):
    # Deep trees from few records: several interior levels to descend through.
    monkeypatch.setattr(sequence, "FANOUT", 4)


@pytest.mark.parametrize("seed", range(12))
def test_runs_cover_both_sequences_in_order(seed):
    rnd = random.Random(seed)
    store = MemoryObjectStore()
    packer = payloads.Packer(store)
    base = list(range(rnd.randrange(0, 1200)))
    other = list(base)
    for _ in range(rnd.randrange(0, 4)):  # a few edits anywhere: cut, insert, append
        at = rnd.randrange(0, len(other) + 1)
        kind = rnd.choice(["cut", "insert", "append"])
        if kind == "cut":
            del other[at : at + rnd.randrange(1, 40)]
        elif kind == "insert":
            other[at:at] = [10_000 + seed * 1000 + k for k in range(rnd.randrange(1, 40))]
        else:
            other += [20_000 + seed * 1000 + k for k in range(rnd.randrange(1, 40))]
    a = sequence.build(store, [item(n) for n in base], packer)
    b = sequence.build(store, [item(n) for n in other], packer)
    got_a, got_b = [], []
    for same, na, nb in compare._runs(store, [a] if a else [], [b] if b else [], {}):
        got_a += flatten(store, na)
        got_b += flatten(store, nb)
        if same:
            assert [n.oid for n in na] == [n.oid for n in nb]
    assert got_a == ids(base) and got_b == ids(other)


def test_a_change_at_the_end_opens_one_path():
    store = MemoryObjectStore()
    packer = payloads.Packer(store)
    xs = list(range(3000))
    a = sequence.build(store, [item(n) for n in xs], packer)
    b = sequence.build(store, [item(n) for n in xs[:-5]], packer)
    kids: dict = {}
    runs = list(compare._runs(store, [a], [b], kids))
    differing = [r for r in runs if not r[0]]
    assert len(differing) == 1 and len(differing[0][1]) <= 2
    # Trees opened: one path per side, not every interior node.
    all_interior = sum(1 for _ in sequence.leaves(store, a))
    assert len(kids) < all_interior / 4

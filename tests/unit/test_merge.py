"""Three-way merge of turn sequences: the documented rules, and properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from opalgit.history.merge import merge3


def ids(*names: str) -> list[bytes]:
    return [n.encode() for n in names]


def flat(base, ours, theirs, choices=None):
    r = merge3(base, ours, theirs)
    out = []
    for p in r.resolved(choices or {}):
        src = {"base": base, "ours": ours, "theirs": theirs}.get(p.source)
        out.extend(src[p.start : p.end] if src is not None else [b"<marker>"])
    return out, r


def test_both_appended_gives_ours_then_marker_then_theirs():
    out, r = flat(ids("a", "b"), ids("a", "b", "o1", "o2"), ids("a", "b", "t1"))
    assert out == ids("a", "b", "o1", "o2", "<marker>", "t1")
    assert r.appended and not r.conflicts


def test_a_removal_on_one_side_stays_removed():
    out, r = flat(ids("a", "b", "c", "d"), ids("a", "d"), ids("a", "b", "c", "d", "t"))
    assert out == ids("a", "d", "t") and not r.conflicts


def test_same_change_on_both_sides_is_taken_once():
    out, r = flat(ids("a", "b"), ids("a", "x"), ids("a", "x"))
    assert out == ids("a", "x") and not r.conflicts


def test_different_changes_to_one_region_conflict_as_values():
    r = merge3(ids("a", "b", "c"), ids("a", "x", "c"), ids("a", "y", "c"))
    assert len(r.conflicts) == 1
    c = r.conflicts[0]
    assert (c.base, c.ours, c.theirs) == ((1, 2), (1, 2), (1, 2))
    assert flat(ids("a", "b", "c"), ids("a", "x", "c"), ids("a", "y", "c"), {0: "theirs"})[0] == ids("a", "y", "c")
    assert flat(ids("a", "b", "c"), ids("a", "x", "c"), ids("a", "y", "c"), {0: "both"})[0] == ids("a", "x", "y", "c")


seqs = st.lists(st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]), max_size=12)


@given(seqs, seqs)
@settings(max_examples=300)
def test_merging_a_branch_into_itself_changes_nothing(base, ours):
    out, r = flat(base, ours, ours)
    assert out == ours and not r.conflicts


@given(seqs, seqs)
@settings(max_examples=300)
def test_merging_the_base_changes_nothing(base, ours):
    out, r = flat(base, ours, base)
    assert out == ours and not r.conflicts


@given(seqs, st.lists(st.binary(min_size=2, max_size=2), max_size=5), st.lists(st.binary(min_size=3, max_size=3), max_size=5))
@settings(max_examples=300)
def test_appends_never_lose_or_duplicate_a_turn(base, o_new, t_new):
    out, r = flat(base, base + o_new, base + t_new)
    assert not r.conflicts
    real = [x for x in out if x != b"<marker>"]
    assert sorted(real) == sorted(base + o_new + t_new)


@given(seqs, seqs, seqs)
@settings(max_examples=500)
def test_every_turn_of_the_result_comes_from_an_input_and_conflicts_cover_the_rest(base, ours, theirs):
    r = merge3(base, ours, theirs)
    for p in r.pieces:
        if p.source in ("base", "ours", "theirs"):
            src = {"base": base, "ours": ours, "theirs": theirs}[p.source]
            assert 0 <= p.start <= p.end <= len(src)
    # With every conflict resolved as "both", each of our and their turns is in the
    # result unless the other side removed it from the base.
    out, _ = flat(base, ours, theirs, {c.index: "both" for c in r.conflicts})
    for x in ours:
        if x not in base:
            assert x in out
    for x in theirs:
        if x not in base:
            assert x in out

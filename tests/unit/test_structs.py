"""opalgit.structs.dataclass behaves as the standard library's dataclass.

Each case defines the same class twice, once with each decorator, and compares what
a caller can observe: repr, equality, hashing, frozenness and the dataclass helpers.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import pickle

import pytest

from opalgit import structs
from tests.conftest import ROOT


def both(body, frozen: bool = False):
    """The class ``body(decorator)`` builds, by the standard decorator and by ours."""
    std = body(dataclasses.dataclass(frozen=frozen))
    ours = body(structs.dataclass(frozen=frozen))
    return std, ours


def make_point(deco):
    @deco
    class Point:
        """A point."""

        x: int
        y: int = 0
        tags: list = dataclasses.field(default_factory=list)
        secret: str = dataclasses.field(default="s", repr=False)
        note: str = dataclasses.field(default="", compare=False)

    return Point


@pytest.mark.parametrize("frozen", [False, True])
def test_repr_equality_and_hash_match_the_standard_build(frozen):
    std, ours = both(make_point, frozen)
    for args, kw in [((1,), {}), ((1, 2), {"tags": [1, "a"]}), ((3, 4), {"secret": "hidden", "note": "n"})]:
        a, b = std(*args, **kw), ours(*args, **kw)
        assert repr(a) == repr(b)
        assert "hidden" not in repr(b)
        assert (a == std(*args, **kw)) == (b == ours(*args, **kw))
        assert (a != std(*args, **kw)) == (b != ours(*args, **kw))
        # note does not compare; x does
        assert (a == std(*args, **dict(kw, note="other"))) == (b == ours(*args, **dict(kw, note="other")))
        assert (a == std(99)) == (b == ours(99))
        assert b != a  # instances of different classes never compare equal
        assert b.__eq__(object()) is NotImplemented
    if frozen:
        with pytest.raises(TypeError):  # a list field: unhashable, as in the standard build
            hash(ours(1))
    else:
        assert ours.__hash__ is None and std.__hash__ is None
        with pytest.raises(TypeError):
            hash(ours(1))


def test_frozen_instances_hash_by_their_compared_fields_and_refuse_changes():
    def body(deco):
        @deco
        class Key:
            kind: str
            size: int = 0
            label: str = dataclasses.field(default="", compare=False)

        return Key

    std, ours = both(body, frozen=True)
    assert hash(ours("a", 1)) == hash(std("a", 1)) == hash(("a", 1))
    assert hash(ours("a", 1, "x")) == hash(ours("a", 1, "y"))
    assert {ours("a", 1), ours("a", 1, "z"), ours("b")} == {ours("a", 1), ours("b")}
    with pytest.raises(dataclasses.FrozenInstanceError):
        ours("a").kind = "b"
    with pytest.raises(dataclasses.FrozenInstanceError):
        del ours("a").size


def test_one_field_and_no_field():
    def one(deco):
        @deco
        class One:
            v: tuple

        return One

    def none(deco):
        @deco
        class Empty:
            pass

        return Empty

    std, ours = both(one, frozen=True)
    assert hash(ours((1, 2))) == hash(std((1, 2)))  # a tuple of one tuple, not the tuple itself
    assert ours((1, 2)) == ours((1, 2)) and ours((1, 2)) != ours((2,))
    std, ours = both(none, frozen=True)
    assert repr(ours()) == repr(std()) and ours() == ours() and hash(ours()) == hash(std())


def test_what_the_body_defines_is_kept():
    def body(deco):
        @deco
        class Own:
            a: int

            def __repr__(self) -> str:
                return "own"

            def __eq__(self, other) -> bool:
                return True

        return Own

    for frozen in (False, True):
        std, ours = both(body, frozen)
        assert repr(ours(1)) == "own" and ours(1) == ours(2) and ours(1) == 5
        assert (std.__hash__ is None) == (ours.__hash__ is None)
        if frozen:  # the standard build adds a field hash beside a body's own __eq__
            assert hash(ours(1)) == hash(std(1))

    def hashed(deco):
        @deco
        class Hashed:
            a: int

            def __hash__(self) -> int:
                return 7

        return Hashed

    std, ours = both(hashed)
    assert hash(ours(1)) == hash(std(1)) == 7


def test_recursive_repr_and_inheritance():
    def body(deco):
        @deco
        class Node:
            name: str
            children: list = dataclasses.field(default_factory=list)

        @deco
        class Leaf(Node):
            size: int = 0

        return Node, Leaf

    (std_node, std_leaf), (node, leaf) = body(dataclasses.dataclass), body(structs.dataclass)
    a, b = std_node("a"), node("a")
    a.children.append(a)
    b.children.append(b)
    assert repr(a) == repr(b) == "test_recursive_repr_and_inheritance.<locals>.body.<locals>.Node(name='a', children=[...])"
    assert repr(leaf("x", [], 3)) == repr(std_leaf("x", [], 3)).replace(std_leaf.__qualname__, leaf.__qualname__)
    assert leaf("x") == leaf("x") and leaf("x") != node("x")


def test_the_dataclass_helpers_still_work():
    _std, ours = both(make_point, frozen=True)
    p = ours(1, 2)
    assert dataclasses.is_dataclass(p)
    assert [f.name for f in dataclasses.fields(p)] == ["x", "y", "tags", "secret", "note"]
    assert dataclasses.replace(p, y=5) == ours(1, 5)
    assert dataclasses.asdict(p) == {"x": 1, "y": 2, "tags": [], "secret": "s", "note": ""}
    assert ours.__match_args__ == ("x", "y", "tags", "secret", "note")
    match p:
        case ours(1, y):  # type: ignore[misc]
            assert y == 2
        case _:
            pytest.fail("no match")


def test_opal_classes_pickle_and_compare_as_before():
    from opalgit.secrets.redact import Finding
    from opalgit.store.objects import Signature

    f = Finding("github-token", "opal-secret:github-token:0123456789ab", "ghp_x")
    assert "ghp_x" not in repr(f)
    assert pickle.loads(pickle.dumps(f)) == f and hash(pickle.loads(pickle.dumps(f))) == hash(f)
    assert dataclasses.is_dataclass(Signature)


def test_opal_defines_its_dataclasses_through_structs():
    # A module that imported the standard decorator would bring back the per-class
    # compile cost at import (docs/performance.md).
    offenders = []
    package = os.path.join(ROOT, "opalgit")
    for folder, _dirs, files in os.walk(package):
        for name in files:
            if not name.endswith(".py") or name == "structs.py":
                continue
            path = os.path.join(folder, name)
            tree = ast.parse(open(path, encoding="utf-8").read())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "dataclasses":
                    if any(a.name == "dataclass" for a in node.names):
                        offenders.append(os.path.relpath(path, ROOT))
                if isinstance(node, ast.Attribute) and node.attr == "dataclass" and getattr(node.value, "id", "") == "dataclasses":
                    offenders.append(os.path.relpath(path, ROOT))
    assert offenders == []

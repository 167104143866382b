"""The contract suite of opal's stores: what every object store and ref store must do.

Subclass a contract in a pytest module (named ``Test...`` so that pytest collects it)
and give it a factory; every ``test_`` method then runs against that store::

    from opalgit.store.memory import MemoryObjectStore, MemoryRefStore
    from opalgit.testing.store import ObjectStoreContract, RefStoreContract

    class TestMemoryObjects(ObjectStoreContract):
        def make_objects(self, tmp_path):
            return MemoryObjectStore()

    class TestMemoryRefs(RefStoreContract):
        def make_refs(self, tmp_path):
            objects = MemoryObjectStore()
            return objects, MemoryRefStore(objects)

The git-backed stores and the in-memory twins pass the same suite
(``tests/unit/test_store_contract.py``), so that code tested on a twin behaves the
same on a repository. :meth:`verify` runs after each test (the git-backed suites
run ``git fsck`` there).
"""

from __future__ import annotations

from typing import Any

import pytest

from opalgit.errors import ConflictError, CorruptObjectError, UsageError
from opalgit.store.objects import ObjectStore, Signature
from opalgit.store.refs import BRANCH_PREFIX, NAMESPACE, OPLOG_REF

#: git's ids of well-known objects: a store must name objects as git does.
HELLO_BLOB = bytes.fromhex("ce013625030ba8dba906f756967f9e9ca394464a")  # b"hello\n"
EMPTY_TREE = bytes.fromhex("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
ALICE = Signature("Alice Example", "alice@example.com", 1_700_000_000, -(7 * 60 + 30))
BOB = Signature("Bob", "bob@example.com", 1_700_000_100, 60)


class StoreContract:
    """What both contracts share: the check after each test."""

    def verify(self, tmp_path: Any) -> None:
        """After each test: check the backend (e.g. ``git fsck``); nothing by default."""


class ObjectStoreContract(StoreContract):
    """An object store writes blobs, trees and commits under git's ids and reads them back."""

    def make_objects(self, tmp_path: Any) -> ObjectStore:
        """A new, empty object store."""
        raise NotImplementedError

    def reopen_objects(self, store: ObjectStore) -> ObjectStore:
        """A second store over the same backend (default: the same store), to check that
        what was flushed is kept there, not only in the writer's memory."""
        return store

    @pytest.fixture
    def objects(self, tmp_path):
        store = self.make_objects(tmp_path)
        yield store
        store.settle()
        self.verify(tmp_path)

    def test_ids_are_gits(self, objects):
        assert objects.write_blob(b"hello\n") == HELLO_BLOB
        assert objects.write_tree([]) == EMPTY_TREE

    def test_blob_round_trip_before_and_after_flush(self, objects):
        data = bytes(range(256)) * 5
        oid = objects.write_blob(data)
        assert objects.exists(oid) and objects.read_blob(oid) == data  # buffered objects are read too
        objects.flush()
        again = self.reopen_objects(objects)
        assert again.exists(oid) and again.read_blob(oid) == data
        assert again.object_type(oid) == 3

    def test_tree_round_trip(self, objects):
        blob = objects.write_blob(b"turn\n")
        sub = objects.write_tree([("leaf", False, blob)])
        entries = [("a-file", False, blob), ("folder", True, sub), ("\u00e9t\u00e9", False, blob)]
        top = objects.write_tree(entries)
        objects.flush()
        again = self.reopen_objects(objects)
        assert sorted(again.read_tree(top)) == sorted(entries)
        assert again.read_tree(sub) == [("leaf", False, blob)]

    def test_commit_round_trip(self, objects):
        tree = objects.write_tree([])
        first = objects.write_commit(tree, [], ALICE, ALICE, "first state")
        second = objects.write_commit(tree, [first], ALICE, BOB, "second state\n\nwith a body\n")
        objects.flush()
        c = self.reopen_objects(objects).read_commit(second)
        assert (c.oid, c.tree, c.parents) == (second, tree, (first,))
        assert (c.author, c.committer) == (ALICE, BOB)
        assert c.message == "second state\n\nwith a body\n"
        assert self.reopen_objects(objects).read_commit(first).message == "first state\n"

    def test_many_objects_round_trip(self, objects):
        # Enough for the git store to write one pack rather than loose objects.
        oids = [objects.write_blob(f"payload {i}\n".encode()) for i in range(200)]
        objects.flush()
        again = self.reopen_objects(objects)
        assert [again.read_blob(o) for o in oids] == [f"payload {i}\n".encode() for i in range(200)]

    def test_writing_twice_gives_one_object(self, objects):
        assert objects.write_blob(b"same\n") == objects.write_blob(b"same\n")
        objects.flush()
        objects.write_blob(b"same\n")
        objects.flush()
        assert objects.read_blob(objects.write_blob(b"same\n")) == b"same\n"

    def test_missing_object(self, objects):
        missing = bytes.fromhex("00" * 19 + "01")
        assert not objects.exists(missing)
        assert objects.object_type(missing) is None
        for read in (objects.read_blob, objects.read_tree, objects.read_commit):
            with pytest.raises(CorruptObjectError, match="missing"):
                read(missing)

    def test_wrong_kind_is_refused(self, objects):
        blob = objects.write_blob(b"not a tree\n")
        objects.flush()
        with pytest.raises(CorruptObjectError, match="is a blob, expected a tree"):
            objects.read_tree(blob)
        with pytest.raises(CorruptObjectError, match="is a blob, expected a commit"):
            objects.read_commit(blob)

    def test_discard_forgets_what_was_not_flushed(self, objects):
        kept = objects.write_blob(b"kept\n")
        objects.flush()
        gone = objects.write_blob(b"gone\n")
        objects.discard()
        assert objects.exists(kept) and not objects.exists(gone)
        objects.flush()  # nothing left to write
        assert not self.reopen_objects(objects).exists(gone)


class RefStoreContract(StoreContract):
    """A ref store keeps ``refs/opal/*`` and changes them by compare-and-swap, in
    transactions that apply every change or none."""

    def make_refs(self, tmp_path: Any) -> tuple[ObjectStore, Any]:
        """A new ref store with no ``refs/opal/`` refs, and the object store whose
        objects its refs may name."""
        raise NotImplementedError

    @pytest.fixture
    def stores(self, tmp_path):
        objects, refs = self.make_refs(tmp_path)
        yield objects, refs
        objects.settle()
        self.verify(tmp_path)

    @pytest.fixture
    def refs(self, stores):
        return stores[1]

    @pytest.fixture
    def states(self, stores):
        """Five commits (in the object store) for refs to name."""
        objects = stores[0]
        tree = objects.write_tree([])
        out = [objects.write_commit(tree, [], ALICE, ALICE, f"state {i}") for i in range(5)]
        objects.flush()
        objects.secure()
        return out

    def test_empty(self, refs):
        assert refs.get(BRANCH_PREFIX + "main") is None
        assert refs.all() == {}
        assert refs.branches() == {}

    def test_create_read_and_list(self, refs, states):
        a, b, c = states[:3]
        refs.update({BRANCH_PREFIX + "main": (None, a)}, "create main")
        refs.update({BRANCH_PREFIX + "team/x": (None, b), OPLOG_REF: (None, c)}, "create two")
        assert refs.get(BRANCH_PREFIX + "main") == a
        assert refs.all() == {BRANCH_PREFIX + "main": a, BRANCH_PREFIX + "team/x": b, OPLOG_REF: c}
        assert refs.branches() == {"main": a, "team/x": b}

    def test_compare_and_swap_refuses_a_stale_old_value(self, refs, states):
        a, b, c = states[:3]
        name = BRANCH_PREFIX + "main"
        refs.update({name: (None, a)}, "create")
        refs.update({name: (a, b)}, "move")
        with pytest.raises(ConflictError):
            refs.update({name: (a, c)}, "move from what another writer saw")
        assert refs.get(name) == b

    def test_create_refuses_a_ref_that_exists(self, refs, states):
        a, b = states[:2]
        name = BRANCH_PREFIX + "main"
        refs.update({name: (None, a)}, "create")
        with pytest.raises(ConflictError):
            refs.update({name: (None, b)}, "create again")
        assert refs.get(name) == a

    def test_delete(self, refs, states):
        a, b = states[:2]
        keep, gone = BRANCH_PREFIX + "keep", BRANCH_PREFIX + "gone"
        refs.update({keep: (None, a), gone: (None, b)}, "create")
        with pytest.raises(ConflictError):
            refs.update({gone: (a, None)}, "delete what is no longer there")
        assert refs.get(gone) == b
        refs.update({gone: (b, None)}, "delete")
        assert refs.get(gone) is None
        assert refs.all() == {keep: a}

    def test_transaction_is_all_or_nothing(self, refs, states):
        a, b, c, d = states[:4]
        x, y, z = (BRANCH_PREFIX + n for n in "xyz")
        refs.update({x: (None, a), y: (None, b)}, "create")
        for stale in ({x: (a, c), y: (a, d), z: (None, c)}, {x: (a, None), z: (None, d), y: (None, c)}):
            with pytest.raises(ConflictError):
                refs.update(stale, "one of them is stale")
            assert refs.all() == {x: a, y: b}
        refs.update({x: (a, None), y: (b, c), z: (None, d)}, "all three")
        assert refs.all() == {y: c, z: d}

    def test_only_refs_under_the_namespace(self, refs, states):
        with pytest.raises(UsageError):
            refs.update({BRANCH_PREFIX + "main": (None, states[0]), "refs/heads/main": (None, states[0])}, "outside")
        assert refs.all() == {}

    def test_listing_is_the_namespace_only(self, refs, states):
        a, b = states[:2]
        names = [BRANCH_PREFIX + "a", BRANCH_PREFIX + "a-b/c", NAMESPACE + "remotes/origin/main", NAMESPACE + "links/" + "ab" * 20]
        refs.update({n: (None, a) for n in names}, "create")
        refs.update({NAMESPACE + "remotes/origin/main": (a, b)}, "move one")
        assert set(refs.all()) == set(names)
        assert refs.all()[NAMESPACE + "remotes/origin/main"] == b
        assert refs.branches() == {"a": a, "a-b/c": a}

    def test_a_ref_cannot_be_a_folder_of_another(self, refs, states):
        a, b = states[:2]
        refs.update({BRANCH_PREFIX + "x": (None, a), BRANCH_PREFIX + "p/q": (None, a)}, "create")
        with pytest.raises(UsageError, match="cannot exist beside"):
            refs.update({BRANCH_PREFIX + "x/y": (None, b)}, "below a ref")
        with pytest.raises(UsageError, match="cannot exist beside"):
            refs.update({BRANCH_PREFIX + "p": (None, b)}, "above a ref")
        assert refs.all() == {BRANCH_PREFIX + "x": a, BRANCH_PREFIX + "p/q": a}

    def test_a_ref_to_a_missing_object_is_refused(self, refs, states):
        with pytest.raises(ConflictError):
            refs.update({BRANCH_PREFIX + "main": (None, bytes.fromhex("00" * 19 + "01"))}, "dangling")
        assert refs.all() == {}

    def test_meanwhile_runs_once(self, refs, states):
        calls = []
        refs.update({BRANCH_PREFIX + "main": (None, states[0])}, "create", meanwhile=lambda: calls.append(1))
        assert calls == [1]
        with pytest.raises(ConflictError):
            refs.update({BRANCH_PREFIX + "main": (None, states[1])}, "stale", meanwhile=lambda: calls.append(2))
        assert calls == [1, 2]
        refs.update({}, "nothing", meanwhile=lambda: calls.append(3))
        assert calls == [1, 2, 3]

    def test_head_branch(self, refs):
        assert refs.head_branch() == "main"
        refs.set_head_branch("team/x")
        assert refs.head_branch() == "team/x"

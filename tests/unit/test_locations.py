"""The local cache of where a state's payloads are stored (opalgit.history.locationcache)."""

from __future__ import annotations

import os

from opalgit import porcelain
from opalgit.history import locationcache as locations
from opalgit.history import sequence
from tests.unit.test_porcelain import env, grow, place, repo  # noqa: F401  (fixtures)

BIG = os.path.join(os.path.dirname(__file__), "..", "fixtures", "claude", "claude-code-viewer",
                   "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")


def root_of(repo, oid):
    return porcelain.load_state(repo, oid).root


def test_commits_leave_exact_caches_and_the_next_commit_reads_no_leaf_tree(repo, project, home, env, monkeypatch):
    path = place(home, project, source=BIG, lines=200)
    first = porcelain.commit(repo, env, str(project))
    r1 = root_of(repo, first.oid)
    assert locations.load(repo.opal_dir, r1.oid) == sequence.payload_locations(repo.store, r1)
    grow(path, source=BIG, start=200)

    def no(*a, **k):
        raise AssertionError("the leaf trees were read although the parent's locations are cached")

    monkeypatch.setattr(sequence, "payload_locations", no)
    locations._recent.clear()
    second = porcelain.commit(repo, env, str(project))
    monkeypatch.undo()
    assert second.incremental
    r2 = root_of(repo, second.oid)
    cached = locations.load(repo.opal_dir, r2.oid)
    assert cached == sequence.payload_locations(repo.store, r2) and len(cached) >= len(locations.load(repo.opal_dir, r1.oid))


def test_a_damaged_or_missing_cache_is_read_again_from_the_leaf_trees(repo, project, home, env):
    place(home, project, source=BIG)
    res = porcelain.commit(repo, env, str(project))
    root = root_of(repo, res.oid)
    folder = os.path.join(repo.opal_dir, "cache", "payloads")
    path = os.path.join(folder, root.oid.hex())
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 1
    open(path, "wb").write(bytes(data))
    assert locations.load(repo.opal_dir, root.oid) is None
    locations._recent.clear()
    assert locations.of(repo.store, repo.opal_dir, root) == sequence.payload_locations(repo.store, root)
    os.unlink(path)
    locations._recent.clear()
    assert locations.of(repo.store, repo.opal_dir, root) == sequence.payload_locations(repo.store, root)
    assert os.path.exists(path), "read again, and cached again"


def test_only_the_newest_caches_are_kept(tmp_path):
    for i in range(locations.KEEP + 5):
        locations.save(str(tmp_path), bytes([i]) * 20, {bytes(32): (bytes(20), True)})
    assert len(os.listdir(tmp_path / "cache" / "payloads")) == locations.KEEP

"""The store contract suite (:mod:`opalgit.testing.store`) against every store opal has:
the in-memory twins, and the git-backed stores on a real repository (checked with
``git fsck`` after each test), with refs written both by ``git update-ref`` and by
libgit2's transactions."""

from __future__ import annotations

import os

import pygit2

from opalgit.store.memory import MemoryObjectStore, MemoryRefStore
from opalgit.store.objects import GitObjectStore
from opalgit.store.refs import RefStore
from opalgit.store.repo import Repository
from opalgit.testing.store import ObjectStoreContract, RefStoreContract
from tests.conftest import git


def _project(tmp_path) -> str:
    """A real git repository with one code commit (whose refs the ref stores must not list)."""
    p = str(tmp_path / "project")
    git("init", "-q", p)
    with open(os.path.join(p, "README.md"), "w") as fh:
        fh.write("# demo\n")
    git("add", "README.md", cwd=p)
    git("-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "-m", "code", cwd=p)
    return p


class GitChecked:
    def verify(self, tmp_path) -> None:
        proc = git("fsck", "--strict", "--no-dangling", cwd=str(tmp_path / "project"), check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "error" not in proc.stderr.lower(), proc.stderr


class TestMemoryObjectStore(ObjectStoreContract):
    def make_objects(self, tmp_path):
        return MemoryObjectStore()


class TestGitObjectStore(GitChecked, ObjectStoreContract):
    def make_objects(self, tmp_path):
        return Repository(os.path.join(_project(tmp_path), ".git")).store

    def reopen_objects(self, store):
        return GitObjectStore(store._git, store.objects_dir)


class TestMemoryRefStore(RefStoreContract):
    def make_refs(self, tmp_path):
        objects = MemoryObjectStore()
        return objects, MemoryRefStore(objects)


class TestGitRefStore(GitChecked, RefStoreContract):
    """Refs read from the files, written by ``git update-ref --stdin``."""

    def make_refs(self, tmp_path):
        repo = Repository(os.path.join(_project(tmp_path), ".git"))
        return repo.store, repo.refs


class TestLibgit2RefStore(GitChecked, RefStoreContract):
    """Refs read and written through libgit2 (where refs are not plain files, or git is missing)."""

    def make_refs(self, tmp_path):
        git_dir = os.path.join(_project(tmp_path), ".git")
        lib = pygit2.Repository(git_dir)
        return GitObjectStore(lib, os.path.join(git_dir, "objects")), RefStore(lib, git_dir)

"""The in-memory twins of the object store and the ref store.

:class:`MemoryObjectStore` and :class:`MemoryRefStore` behave as
:class:`~opalgit.store.objects.GitObjectStore` and :class:`~opalgit.store.refs.RefStore`
do on a real repository (the same ids, the same compare-and-swap rules, the same
errors), with dicts for a backend: unit tests run the history and merge code on them
without a git repository, and :mod:`opalgit.testing.store` holds the contract suite
that the twins and the git-backed stores all pass.
"""

from __future__ import annotations

from typing import Callable, Mapping

from opalgit.errors import ConflictError, UsageError
from opalgit.store.objects import ObjectStore
from opalgit.store.refs import BRANCH_PREFIX, NAMESPACE, Change, MissingObject, _short_ref


class MemoryObjectStore(ObjectStore):
    """The in-memory twin of the object store: same behaviour, a dict for a backend."""

    def __init__(self) -> None:
        super().__init__()
        self.objects: dict[bytes, tuple[int, bytes]] = {}

    def _backend_read(self, oid: bytes) -> tuple[int, bytes] | None:
        return self.objects.get(oid)

    def _backend_exists(self, oid: bytes) -> bool:
        return oid in self.objects

    def _backend_write(self, objects: list[tuple[bytes, int, bytes]]) -> None:
        for oid, t, d in objects:
            self.objects[oid] = (t, d)


class MemoryRefStore:
    """The in-memory twin of :class:`~opalgit.store.refs.RefStore`.

    Refs are a dict; :meth:`update` checks and applies a whole transaction or none of
    it, as ``git update-ref --stdin`` does. Given ``objects``, it refuses (with
    :class:`~opalgit.store.refs.MissingObject`) a ref that would name an object that
    store does not hold, as git does. ``log`` keeps every applied change with its
    message (git writes them into reflogs, which opal does not read back).
    """

    def __init__(self, objects: ObjectStore | None = None) -> None:
        self.objects = objects
        self.refs: dict[str, bytes] = {}
        self.head = "main"
        self.log: list[tuple[str, bytes | None, bytes | None, str]] = []
        self.lock_fd: int | None = None  # set by a repository's lock, as on RefStore

    # -- reading ------------------------------------------------------------------

    def get(self, name: str) -> bytes | None:
        return self.refs.get(name)

    def all(self) -> dict[str, bytes]:
        return {n: oid for n, oid in sorted(self.refs.items()) if n.startswith(NAMESPACE)}

    def branches(self) -> dict[str, bytes]:
        return {n[len(BRANCH_PREFIX) :]: oid for n, oid in self.all().items() if n.startswith(BRANCH_PREFIX)}

    def code_head(self) -> bytes | None:
        # RefStore raises this where its files cannot answer; here there is no code at all.
        raise LookupError("a memory ref store has no code commits")

    # -- HEAD -----------------------------------------------------------------------

    def head_branch(self) -> str:
        return self.head

    def set_head_branch(self, name: str) -> None:
        self.head = name

    # -- writing ------------------------------------------------------------------

    def update(
        self, changes: Mapping[str, Change], message: str, *, meanwhile: Callable[[], None] | None = None
    ) -> None:
        """Apply every change or none; raise :class:`ConflictError` if a ref moved
        (and as RefStore does: ``meanwhile`` is called once, whatever the outcome)."""
        names = sorted(changes)
        try:
            for name in names:
                if not name.startswith(NAMESPACE):
                    raise UsageError(f"opal only writes refs under {NAMESPACE}, not {name}")
            self._check(names, changes)
            for name in names:
                old, new = changes[name]
                if new is None:
                    self.refs.pop(name, None)
                else:
                    self.refs[name] = new
                if old != new:
                    self.log.append((name, old, new, message))
        finally:
            if meanwhile is not None:
                meanwhile()

    def _check(self, names: list[str], changes: Mapping[str, Change]) -> None:
        for name in names:
            old, new = changes[name]
            if old is None and new is None:
                continue  # nothing to do, and git checks nothing for it either
            if self.refs.get(name) != old:
                raise ConflictError(
                    f"{_short_ref(name)} changed while this command ran",
                    hint="another opal process updated it; run the command again",
                )
            if new is not None and self.objects is not None and not self.objects.exists(new):
                raise MissingObject(
                    f"{_short_ref(name)} would name object {new.hex()[:12]}, which is not in the repository",
                    hint="nothing was changed; a 'git gc --prune=now' running meanwhile deleted it: run the command again",
                )
        after = {n for n in self.refs if n not in changes} | {n for n in names if changes[n][1] is not None}
        for name in names:
            if changes[name][1] is None or name in self.refs:
                continue
            clash = _clash(name, after)
            if clash is not None:
                # git keeps refs as files: "x" and "x/y" cannot both exist.
                raise UsageError(
                    f"{_short_ref(name)} cannot exist beside {_short_ref(clash)}",
                    hint="git stores a ref as a file, so 'x' and 'x/y' cannot both exist; choose another name",
                )


def _clash(name: str, others: set[str]) -> str | None:
    """A ref of ``others`` that is a folder of ``name``, or that ``name`` is a folder of."""
    parts = name.split("/")
    for i in range(1, len(parts)):
        if "/".join(parts[:i]) in others:
            return "/".join(parts[:i])
    below = name + "/"
    return next((o for o in sorted(others) if o.startswith(below)), None)

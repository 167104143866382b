"""``dataclass``, built without compiling three methods per class at import.

Python 3.11's :func:`dataclasses.dataclass` writes the source of each method it adds
(``__init__``, ``__repr__``, ``__eq__``, and for a frozen class ``__hash__``) and
compiles it with ``exec`` when the class is defined: about 0.4 ms a class, 0.7 ms
a frozen one. A ten-turn ``opal commit`` defines some forty, which made class
definitions about a tenth of its whole run (docs/performance.md).

:func:`dataclass` here lets the standard one build the class with its ``__init__``
only (``repr=False, eq=False``), then gives it ``__repr__``, ``__eq__`` and
``__hash__`` made from closures over the field names, which behave as the generated
ones do: the same repr (fields with ``repr=False`` left out, ``...`` for a
recursive reference), equality only between instances of the very same class over
the fields that compare, the hash of those fields for a frozen class, none
(unhashable) for a mutable one, and a method the class body defines itself kept. The
result is a dataclass in every other respect: :func:`dataclasses.fields`,
:func:`dataclasses.replace`, :func:`dataclasses.asdict`, ``__match_args__`` and
frozen instances work as before. ``tests/unit/test_structs.py`` compares both
builds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field  # noqa: F401  (re-exported: one import for the modules that use both)
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, Callable, TypeVar

__all__ = ["dataclass", "field"]

T = TypeVar("T", bound=type)


def dataclass(cls: T | None = None, /, *, frozen: bool = False) -> Any:
    """``@dataclass`` or ``@dataclass(frozen=True)``, as :func:`dataclasses.dataclass`."""

    def wrap(c: T) -> T:
        return _finish(dataclasses.dataclass(c, repr=False, eq=False, frozen=frozen), frozen)

    return wrap if cls is None else wrap(cls)


def _finish(cls: T, frozen: bool) -> T:
    fields = dataclasses.fields(cls)
    own = dict(cls.__dict__)  # what the body defined (the standard build with eq=False adds none of these)
    if "__repr__" not in own:
        cls.__repr__ = _repr([f.name for f in fields if f.repr])  # type: ignore[assignment]
    if "__eq__" not in own:
        cls.__eq__ = _eq(_key([f.name for f in fields if f.compare]))  # type: ignore[assignment]
    # The standard build's hash rule (eq=True, unsafe_hash=False): a hash the body
    # defines is kept (a None that Python put there for a body's own __eq__ is not
    # one); otherwise a frozen class hashes the fields that compare, and a mutable
    # one is not hashable.
    if "__hash__" not in own or (own["__hash__"] is None and "__eq__" in own):
        hashed = _key([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
        cls.__hash__ = (lambda self: hash(hashed(self))) if frozen else None  # type: ignore[assignment]
    return cls


def _key(names: list[str]) -> Callable[[Any], tuple]:
    """The field values as a tuple (attrgetter gives a bare value for one name)."""
    if not names:
        return lambda self: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda self: (get(self),)
    return attrgetter(*names)


def _eq(key: Callable[[Any], tuple]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _repr(names: list[str]) -> Callable[[Any], str]:
    @recursive_repr()
    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__

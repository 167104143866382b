"""The adapter registry: one place that knows which agents opal can read and write.

Adapters are found through the ``opalgit.adapters`` entry-point group, so a fourth
agent is one module plus one line in its package's metadata. The built-in adapters
are declared in opal's own ``pyproject.toml`` in the same group; when opal runs from
a source tree that was never installed (no metadata), the same built-ins are loaded
from :data:`BUILTIN`, so both paths construct adapters identically.
"""

from __future__ import annotations

import importlib
from importlib import metadata

from ..errors import UsageError
from .base import Adapter, ReadResult, Record, SessionFile, View

__all__ = ["Adapter", "ReadResult", "Record", "SessionFile", "View", "get", "names", "all_adapters"]

GROUP = "opalgit.adapters"

#: Built-in adapters, as ``name -> "module:Class"`` (mirrors pyproject.toml).
BUILTIN = {
    "claude": "opalgit.adapters.claude:ClaudeAdapter",
    "codex": "opalgit.adapters.codex:CodexAdapter",
    "gemini": "opalgit.adapters.gemini:GeminiAdapter",
}

_cache: dict[str, Adapter] | None = None


def _load(spec: str) -> Adapter:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)()


def _discover() -> dict[str, Adapter]:
    found: dict[str, str] = dict(BUILTIN)
    try:
        for ep in metadata.entry_points(group=GROUP):
            found[ep.name] = ep.value
    except Exception:  # broken metadata of an unrelated package must not break opal
        pass
    adapters: dict[str, Adapter] = {}
    for name, spec in sorted(found.items()):
        try:
            adapter = _load(spec)
        except Exception:
            # A third-party adapter that fails to import is skipped, not fatal.
            continue
        adapters[name] = adapter
    return adapters


def all_adapters() -> dict[str, Adapter]:
    global _cache
    if _cache is None:
        _cache = _discover()
    return _cache


def names() -> list[str]:
    return sorted(all_adapters())


def get(name: str) -> Adapter:
    try:
        return all_adapters()[name]
    except KeyError:
        raise UsageError(
            f"no adapter for agent {name!r}",
            hint=f"known agents: {', '.join(names())}",
        ) from None

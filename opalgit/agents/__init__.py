"""The adapter registry: one place that knows which agents opal can read and write,
and which agent wrote a file (:func:`detect`).

Adapters are found through the ``opalgit.adapters`` entry-point group, so a fourth
agent is one module plus one line in its package's metadata. The built-in adapters
are declared in opal's own ``pyproject.toml`` in the same group and listed here in
:data:`BUILTIN`, so opal runs the same from a source tree that was never installed
(no metadata), and both paths construct adapters identically.

Start-up cost is kept off every command: an adapter's module is imported the first
time that adapter is asked for (:func:`get` imports one, :func:`all_adapters` all of
them), and ``importlib.metadata`` (tens of milliseconds to import and to read every
installed distribution) is used only when some installed distribution declares an
entry point in the group other than the built-ins. That is checked first by
:func:`_only_builtins`, which reads the ``entry_points.txt`` files on ``sys.path``
directly and answers "only the built-ins" only when it is sure; in any doubt the
registry asks ``importlib.metadata`` as before, so the adapters found are the same.

Format detection is the registry's: each adapter says how sure it is that a file is
its own (:meth:`Adapter.sniff`, its own format only), and :func:`detect` takes the
surest. A reader that refuses a file asks the same question of the other adapters
(:attr:`Adapter.others`), so its error names the agent whose file it is.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from typing import Iterator

from opalgit.agents.base import CERTAIN, Adapter, ReadResult, Record, SessionFile, View
from opalgit.errors import UsageError

__all__ = ["Adapter", "ReadResult", "Record", "SessionFile", "View", "get", "names", "all_adapters", "each", "detect"]

#: How much of a file :func:`detect` shows the adapters when it reads the file itself.
HEAD = 64 * 1024

GROUP = "opalgit.adapters"  # the entry-point group third-party adapters register in (unchanged by the move to agents/)

#: Built-in adapters, as ``name -> "module:Class"`` (mirrors pyproject.toml).
BUILTIN = {
    "claude": "opalgit.agents.claude.adapter:ClaudeAdapter",
    "codex": "opalgit.agents.codex.adapter:CodexAdapter",
    "gemini": "opalgit.agents.gemini.adapter:GeminiAdapter",
    "qwen": "opalgit.agents.qwen.adapter:QwenAdapter",
    "pi": "opalgit.agents.pi.adapter:PiAdapter",
    "copilot": "opalgit.agents.copilot.adapter:CopilotAdapter",
    "opencode": "opalgit.agents.opencode.adapter:OpencodeAdapter",
}

_specs: dict[str, str] | None = None  # every known adapter: name -> "module:Class"
_loaded: dict[str, Adapter | None] = {}  # constructed adapters; None: failed to import
_cache: dict[str, Adapter] | None = None  # all_adapters()


def _load(spec: str) -> Adapter:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)()


def _only_builtins() -> bool:
    """True when no installed distribution declares an entry point in :data:`GROUP`
    other than exactly the :data:`BUILTIN` ones; False when one does or when unsure.

    Looks where ``importlib.metadata`` looks (the ``*.dist-info`` and ``*.egg-info``
    folders of every ``sys.path`` folder) without importing it. Anything this does
    not read the way ``importlib.metadata`` would (another distribution finder on
    ``sys.meta_path``, a zip or egg on ``sys.path``, a file that does not decode or
    parse) answers False, and the caller falls back to ``importlib.metadata``.
    """
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and getattr(finder, "find_distributions", None) is not None:
            return False
    marker = GROUP.encode("ascii")
    for entry in sys.path:
        if not isinstance(entry, str):
            return False
        root = entry or "."
        try:
            children = os.listdir(root)
        except OSError:
            if os.path.exists(root):
                return False  # a zip file: importlib.metadata reads inside it
            continue
        if os.path.basename(root).lower().endswith(".egg"):
            return False
        for child in children:
            if not child.lower().endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(root, child, "entry_points.txt"), "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if marker not in data:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return False
            # The format importlib.metadata reads: "[group]" headers, "name = value" lines.
            section = None
            for line in map(str.strip, text.splitlines()):
                if not line or line.startswith("#"):
                    continue
                if line.startswith("[") and line.endswith("]"):
                    section = line.strip("[]")
                    continue
                if section != GROUP:
                    continue
                name, eq, value = line.partition("=")
                if not eq or BUILTIN.get(name.strip()) != value.strip():
                    return False
    return True


def _entry_points() -> dict[str, str]:
    from importlib import metadata

    found: dict[str, str] = {}
    try:
        for ep in metadata.entry_points(group=GROUP):
            found[ep.name] = ep.value
    except Exception:  # broken metadata of an unrelated package must not break opal
        return {}
    return found


def _known() -> dict[str, str]:
    """Every adapter opal knows, by name: the built-ins, then the entry points (which win)."""
    global _specs
    if _specs is None:
        found: dict[str, str] = dict(BUILTIN)
        try:
            plain = _only_builtins()
        except Exception:
            plain = False
        if not plain:
            found.update(_entry_points())
        _specs = found
    return _specs


def _adapter(name: str) -> Adapter | None:
    if name not in _loaded:
        spec = _known().get(name)
        adapter = None
        if spec is not None:
            try:
                adapter = _load(spec)
            except Exception:
                # A third-party adapter that fails to import is skipped, not fatal.
                adapter = None
        if adapter is not None:
            try:
                adapter.others = functools.partial(_other, exclude=name)
            except AttributeError:  # an adapter with __slots__: its refusals name no other agent
                pass
        _loaded[name] = adapter
    return _loaded[name]


def all_adapters() -> dict[str, Adapter]:
    global _cache
    if _cache is None:
        adapters: dict[str, Adapter] = {}
        for name in sorted(_known()):
            adapter = _adapter(name)
            if adapter is not None:
                adapters[name] = adapter
        _cache = adapters
    return _cache


def each() -> Iterator[Adapter]:
    """Every adapter, in the order of :func:`all_adapters`, each imported only when the
    caller gets to it (picking the agent of a Claude file need not import the others)."""
    if _cache is not None:
        yield from _cache.values()
        return
    for name in sorted(_known()):
        adapter = _adapter(name)
        if adapter is not None:
            yield adapter


def names() -> list[str]:
    return sorted(all_adapters())


def get(name: str) -> Adapter:
    adapter = _adapter(name)
    if adapter is None:
        raise UsageError(
            f"no adapter for agent {name!r}",
            hint=f"known agents: {', '.join(names())}",
        )
    return adapter


def detect(path: str, head: bytes | None = None, *, exclude: str | None = None) -> Adapter | None:
    """The adapter whose file ``path`` (whose first bytes are ``head``; None: read them)
    is: the one surest of it (:meth:`Adapter.sniff`), the first in name order on a tie;
    None when none claims it. Adapters are asked in name order and the first that is
    certain ends the asking, so picking the agent of a Claude file imports no other."""
    if head is None:
        try:
            with open(path, "rb") as fh:
                head = fh.read(HEAD)
        except OSError:
            return None
    best: Adapter | None = None
    best_sure = 0.0
    for adapter in each():
        if adapter.name == exclude:
            continue
        try:
            sure = float(adapter.sniff(path, head) or 0.0)
        except Exception:  # a third-party sniff that fails claims nothing
            continue
        if sure > best_sure:
            best, best_sure = adapter, sure
            if sure >= CERTAIN:
                break
    return best


def _other(path: str, *, exclude: str) -> Adapter | None:
    """:attr:`Adapter.others` of the adapter ``exclude``: who else's file ``path`` is."""
    return detect(path, exclude=exclude)

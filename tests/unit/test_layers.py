"""The package tree is the layer diagram: no module imports from a layer above its own.

Low to high (docs/architecture.md draws it):

    foundation  the root modules (FOUNDATION): errors, structs, codec, fileio, jsonl, ...
    secrets     detection rules, redaction, the vault, the redaction worker
    store       git objects and refs, the repository; the only importer of pygit2
    history     what opal stores, as values: turns, sequences, payloads, states, op log, revisions
    agents      the adapter registry and the adapters
    sync        remotes, push and fetch, links to code commits
    porcelain   the public Python API, one module per verb
    hooks       the git hook shims
    web         the read-only web view (``opal web``): its server, JSON and pages
    cli         click, the terminal
    server      the optional command server
    testing     the contract suites a third party runs; nothing in opalgit imports them

Within a layer anything goes; ``opalgit/__init__.py`` and ``__main__.py`` are exempt.
Every import counts, at the top of a module, inside a function or under
``TYPE_CHECKING``: one inside a function is still a dependency, only a later one.
pygit2 is imported only in ``opalgit/store/``, msgpack and zstandard only in
``opalgit/codec.py`` (identity is over canonical msgpack; compression is a storage
detail), click only in ``opalgit/cli/``.

Why this order, from what the modules import:

* secrets sit below the store: they import only the foundation (text in, text out),
  and the store uses them, refusing a ref name that holds a secret (``store.refs``),
  since a name is pushed as it is and cannot be redacted.
* history sits on the store (it reads and writes objects and refs) and imports no pygit2.
* agents sit above history, not below it: every adapter reads into and writes from
  ``history.model`` (Turn, Normal, SessionInfo) and needs nothing else of history and
  nothing of the store. Putting them below would take the model out of history. What
  history needed of agents was behaviour, a record's normalized view, and the registry
  is now passed in (``history.states.normals_of`` takes ``agents.get``; the porcelain
  binds it in ``porcelain/states.py``); the two modules that spoke the export contract
  of ``agents.base`` (budget, checkpoints) are steps of export and commit and moved to
  the porcelain.
* sync sits below the porcelain: the porcelain's pull (``porcelain/pull.py``) and its
  secret scan (``porcelain.secrets`` reads ``sync.links``) use it; what sync needs of the
  porcelain is passed in (the secret gate a push runs, the fast-forward a cloned state
  starts with).
* hooks above the porcelain: a hook commits and pushes through it.
* web above the porcelain (it reads the repository only through it, and never writes)
  and below the CLI, which starts it for ``opal web``. The CLI above all of these.
* server above the CLI, for now: ``server.client`` is the ``opal`` entry point and the
  daemon runs ``cli.main`` in its children. The CLI imports it back for ``opal server``
  (KNOWN). Once the server is opt-in and ``cli.main`` the entry point, the server belongs
  below the CLI, handed the command runner by it, and those entries go.

Violations left in modules whose owners have not fixed them yet are listed in KNOWN,
each with why; the test fails when one no longer occurs, so the list only shrinks.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Iterator

from tests.conftest import ROOT

PACKAGE = Path(ROOT) / "opalgit"

LAYERS = ["foundation", "secrets", "store", "history", "agents", "sync", "porcelain", "hooks", "web", "cli",
          "server", "testing"]

#: The root modules, all of them the foundation: a new one is placed here on purpose
#: (or belongs in a package).
FOUNDATION = {"errors", "structs", "codec", "fileio", "jsonl", "plural", "progress", "malloc", "times"}
EXEMPT = {"opalgit", "opalgit.__main__"}

#: Third-party packages and the only place each may be imported from (a module or a
#: package prefix).
ONLY_IN = {
    "pygit2": "opalgit.store",
    "msgpack": "opalgit.codec",
    "zstandard": "opalgit.codec",
    "click": "opalgit.cli",
}

#: (importing module, imported module) pairs that break the rules above, in modules
#: other changes own. Fix one, then remove it here (the test says so).
KNOWN = {
    # 'opal server start|stop|status' and the name a command runs under: the CLI
    # imports the server that sits above it while the server is the entry point.
    ("opalgit.cli.context", "opalgit.server.client"),
    ("opalgit.cli.commands.server", "opalgit.server.client"),
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()


def _statements(nodes: list) -> Iterator[ast.AST]:
    """Every statement, nested ones too (in functions, classes, ``if TYPE_CHECKING:``,
    ``try``): an import is a statement, and skipping the expressions is most of the time."""
    for node in nodes:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from _statements(inner)


def imports(name: str, path: Path) -> list[tuple[str, int]]:
    """Every module ``name`` imports, anywhere in it, with the line: ``from P import X``
    counts as ``P.X`` when that is a module, else as ``P``."""
    package = name if _is_package(name) else name.rpartition(".")[0]
    out = []
    for node in _statements(ast.parse(path.read_text(), str(path)).body):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append((sub if sub in MODULES else base, node.lineno))
    return out


def layer(name: str) -> str | None:
    """The layer of an opalgit module; None for the exempt ones. Fails for a module
    the order does not place."""
    if name in EXEMPT:
        return None
    parts = name.split(".")
    if len(parts) == 2 and not _is_package(name):
        assert parts[1] in FOUNDATION, f"{name}: a new root module; add it to FOUNDATION or move it into its package"
        return "foundation"
    assert parts[1] in LAYERS, f"{name}: package {parts[1]!r} has no place in LAYERS; give it one"
    return parts[1]


@functools.lru_cache(maxsize=1)
def violations() -> dict[tuple[str, str], str]:
    """Every (module, imported module) that breaks a rule, with where and why."""
    found: dict[tuple[str, str], str] = {}
    for name, path in MODULES.items():
        own = layer(name)
        for target, line in imports(name, path):
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            top = target.split(".")[0]
            if top in ONLY_IN:
                home = ONLY_IN[top]
                if name != home and not name.startswith(home + "."):
                    found.setdefault((name, top), f"{where}: {top} is imported only in {home}")
            elif top == "opalgit" and own is not None:
                theirs = layer(target)
                if theirs is not None and LAYERS.index(theirs) > LAYERS.index(own):
                    found.setdefault((name, target), f"{where}: {own} imports {target} ({theirs}, a higher layer)")
    return found


def test_no_module_imports_from_a_higher_layer_nor_a_library_outside_its_layer():
    new = {k: v for k, v in violations().items() if k not in KNOWN}
    assert not new, "imports that break the layers (tests/unit/test_layers.py says why the order is this one):\n" + \
        "\n".join(sorted(new.values()))


def test_every_known_violation_still_occurs():
    gone = KNOWN - violations().keys()
    assert not gone, f"fixed, so remove from KNOWN in tests/unit/test_layers.py: {sorted(gone)}"


def test_every_module_has_a_layer():
    for name in MODULES:
        layer(name)


def test_the_reader_sees_imports_inside_functions_and_type_checking(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pygit2\n"
                    "def f():\n    from opalgit.cli import main\n    from opalgit import codec\n"
                    "class C:\n    def g(self):\n        try:\n            pass\n        except ImportError:\n"
                    "            from . import sequence\n")
    found = {t for t, _ in imports("opalgit.history.m", path)}
    assert {"pygit2", "opalgit.cli.main", "opalgit.codec", "opalgit.history.sequence"} <= found

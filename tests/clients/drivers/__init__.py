"""The real clients beyond the first three, one module each (issue 21).

Each module here (``opencode.py``, ``qwen.py``, ``pi.py``, ``copilot.py``, ...) defines
``DRIVER``: a :class:`Driver` saying how to install, run, find the files of, and script that
client. The harness (:mod:`tests.clients.harness`) finds the modules by listing this package, so
adding an agent adds a file and touches nothing shared: ``PINNED``, ``CLIENTS``, ``run_client``,
``mock_for``, ``session_file``, ``generate_session`` and ``run_scenario`` all take the new name.
The package and version are the client's line in ``scripts/agent-pins.txt``, which
``scripts/install-agents.sh`` reads too; the executable is ``node_modules/.bin/<name>``.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # the harness imports this package at its end: no import cycle at run time
    from ..harness import Root, RunResult, Turn
    from ..mockservers import MockServer, Reply

__all__ = ["Driver", "DRIVERS", "load"]


@dataclass(frozen=True)
class Driver:
    """One real client, as the tests drive it.

    ``env(root, port) -> dict`` is the whole environment of a run, built from nothing
    (:func:`tests.clients.harness.base_env` plus the client's own variables).
    ``run(root, port, prompt, session_id=None, resume=None, *, cwd=None, timeout, extra_args=(),
    server=None) -> RunResult`` starts a new session (``session_id``, or the client mints one
    when ``mints_id``) or resumes ``resume``; it writes the client's config files under
    ``root.home`` itself (they may depend on ``port``) and builds its environment from nothing
    (:func:`tests.clients.harness.base_env`). ``session_file(root, session_id)`` is the file
    (or, for a client whose sessions live in a database, the exported JSON) holding it.
    ``scripts(project)`` is the two-turn script of :func:`~tests.clients.harness.generate_session`
    (turn 1: a shell call and a read; turn 2: an edit and a write), ``parallel_turns(project)``
    the parallel-calls scenario's turns, where the client makes parallel calls.
    """

    name: str  #: the client's name here, opal's agent name, and its line in scripts/agent-pins.txt
    mock: "type[MockServer]"
    env: "Callable[[Root, int], dict[str, str]]"
    run: "Callable[..., RunResult]"
    session_file: "Callable[[Root, str], Path | None]"
    scripts: "Callable[[Path], tuple[list[Reply], list[Reply]]]"
    parallel_turns: "Callable[[Path], list[Turn]] | None" = None
    node22: bool = False  #: needs the node >= 22 that install-agents.sh puts in .agents/node22
    mints_id: bool = False  #: the client chooses the session id (returned in RunResult.session_id)
    extra: "dict[str, Any] | None" = None


DRIVERS: dict[str, Driver] = {}


def load() -> dict[str, Driver]:
    """Import every module of this package and collect its ``DRIVER`` (once)."""
    if not DRIVERS:
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            mod = importlib.import_module(f"{__name__}.{info.name}")
            driver = getattr(mod, "DRIVER", None)
            if driver is not None:
                DRIVERS[driver.name] = driver
    return DRIVERS

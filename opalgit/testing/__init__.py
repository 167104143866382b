"""Contract suites that ship with opal, for code that plugs into it.

:mod:`opalgit.testing.adapters` is the contract every agent adapter passes: the
built-in Claude Code, Codex CLI and Gemini CLI adapters run it on their real session
files (``tests/agents/test_contract.py``), and a fourth adapter runs the same checks
on its own samples by subclassing :class:`~opalgit.testing.adapters.AdapterContract`.
:mod:`opalgit.testing.store` is the contract of the object and ref stores, which the
git-backed stores and their memory twins pass (``tests/unit/test_store_contract.py``).
Import the suites from their modules: this package imports neither (each pulls in pytest).
"""

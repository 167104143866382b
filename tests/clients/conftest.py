"""Registers the ``clients`` marker for the real-client conformance tests."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "clients: drives the real claude/codex/gemini CLIs offline against local mock model servers "
        "(skipped when scripts/install-agents.sh has not been run)",
    )
